"""The contract suite's package: every section is in StoreContract, and no test hides another.

A section is a mixin; two sections defining one test name would let the first in the MRO
silently shadow the other, and a section module left out of StoreContract would never run.
"""

from __future__ import annotations

import importlib
import pkgutil

import fencepost.testing.contract as contract
from fencepost.testing.contract import ContractFixtures, StoreContract


def section_classes() -> list[type]:
    """Every ``*Contract`` mixin defined in a module of the package."""
    found: list[type] = []
    for module_info in pkgutil.iter_modules(contract.__path__):
        module = importlib.import_module(f"{contract.__name__}.{module_info.name}")
        found.extend(
            value
            for name, value in vars(module).items()
            if isinstance(value, type)
            and name.endswith("Contract")
            and value.__module__ == module.__name__
        )
    return found


def test_store_contract_composes_every_section() -> None:
    sections = section_classes()
    assert len(sections) >= 6
    assert set(StoreContract.__bases__) == set(sections)
    for section in sections:
        assert issubclass(section, ContractFixtures), section


def test_no_two_sections_share_a_test_name() -> None:
    owners: dict[str, str] = {}
    for section in section_classes():
        for name in vars(section):
            if name.startswith("test_"):
                assert name not in owners, f"{name} in {owners.get(name)} and {section.__name__}"
                owners[name] = section.__name__
    assert len([name for name in dir(StoreContract) if name.startswith("test_")]) == len(owners)


def test_all_is_sorted_and_importable() -> None:
    assert contract.__all__ == sorted(contract.__all__)
    for name in contract.__all__:
        assert hasattr(contract, name), name
