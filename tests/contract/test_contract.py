"""Every shipped backend passes the one contract suite."""

from __future__ import annotations

from fencepost.testing.contract import StoreContract


class TestStoreContract(StoreContract):
    """Runs once per backend: see the ``store_factory`` fixture in tests/conftest.py."""
