"""The hand-written reference pages cover what the code offers: every public name has an
entry in the Python reference, and every environment variable and store URL option the
code reads is in the configuration reference. A new one without its entry fails here."""

from __future__ import annotations

import re
from pathlib import Path

import fencepost
from fencepost.domain import errors
from fencepost.store.postgres import connection as postgres
from fencepost.store.postgres.outages import DEFAULT_RETRY_TIMEOUT
from fencepost.store.sqlite.connection import DEFAULT_BUSY_TIMEOUT, DEFAULT_SYNCHRONOUS

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src" / "fencepost"
REFERENCE = ROOT / "docs" / "reference"


def _entries(page: str) -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)$", page, flags=re.M))


def test_every_public_name_has_an_entry_in_the_python_reference() -> None:
    page = (REFERENCE / "python.md").read_text(encoding="utf-8")
    entries = _entries(page)
    assert "fencepost.domain.errors" in entries  # the errors, each documented there
    public = set(fencepost.__all__) - set(errors.__all__) - {"__version__"}
    missing = {name for name in public if not any(e.rsplit(".", 1)[-1] == name for e in entries)}
    assert missing == set()
    assert "`fencepost.__version__`" in page


def test_every_entry_of_the_python_reference_names_a_real_object() -> None:
    import importlib

    for entry in _entries((REFERENCE / "python.md").read_text(encoding="utf-8")):
        module, _, name = entry.rpartition(".")
        try:
            importlib.import_module(entry)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module), name), entry


def _rows(page: str) -> dict[str, str]:
    """Each table row of ``page`` by the code span in its first cell."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", page, flags=re.M)}


def test_every_environment_variable_the_code_names_is_documented() -> None:
    named = set()
    for path in SRC.rglob("*.py"):
        named |= set(re.findall(r"""["'](FENCEPOST_[A-Z_]+)["']""", path.read_text()))
    assert {"FENCEPOST_DB", "FENCEPOST_TOKEN", "FENCEPOST_TOKENS"} <= named
    rows = _rows((REFERENCE / "configuration.md").read_text(encoding="utf-8"))
    assert named - set(rows) == set()


def test_every_store_url_option_is_documented_with_its_default() -> None:
    rows = _rows((REFERENCE / "configuration.md").read_text(encoding="utf-8"))
    connect_source = (SRC / "store" / "__init__.py").read_text()
    read_by_connect = set(re.findall(r"""options(?:\.get\(|, )["'](\w+)["']""", connect_source))
    assert {"busy_timeout", "synchronous", "unknown_jobs"} <= read_by_connect
    assert (read_by_connect | set(postgres.OWN_OPTIONS)) - set(rows) == set()
    assert f"`{DEFAULT_BUSY_TIMEOUT:g}`" in rows["busy_timeout"]
    assert f"`{DEFAULT_SYNCHRONOUS}`" in rows["synchronous"]
    assert f"`{DEFAULT_RETRY_TIMEOUT}`" in rows["retry_timeout"]
    for setting, value in postgres.NETWORK_DEFAULTS.items():
        assert f"`{value}`" in rows[setting], setting
