"""The shape the code keeps (docs/explanation/store-layout.md): what a reviewer would
otherwise have to notice by reading.

* :class:`AsyncStore` has every verb :class:`Store` has, with the same parameters;
* no code chooses by a class's name (``type(x).__name__ == "PostgresStore"``): a
  backend states what differs (its runner, its capabilities);
* no module imports another module's private (``_name``) names, and none outside
  ``store/`` imports a backend's package (``fencepost.store.postgres``, ...);
* nothing outside ``jobs/context.py`` reaches into a handler's ``Context`` (``ctx._x``):
  the worker drives an attempt through its ``RunControl``;
* no two classes share a name, but the JSON shape of a domain value in ``wire/``
  (``wire.Execution`` of ``domain.models.Execution``) and Django's management
  commands, which Django finds by the name ``Command``;
* no module is over :data:`MAX_LINES` lines, but those of :data:`OVER_MAX_LINES`, each
  no longer than it is listed at: the list only shrinks.

Every module is read with :mod:`ast` or as text; nothing is imported but the two store
classes.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from fencepost.store.asyncstore import AsyncStore
from fencepost.store.base import Store

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "fencepost"

#: What a module may be at most, in lines.
MAX_LINES = 600

#: The modules still over :data:`MAX_LINES`, each with the most lines it may have. A
#: module that shrinks under the limit must leave the list (see
#: :func:`test_every_module_listed_as_too_long_still_is`); none may grow past its entry.
OVER_MAX_LINES: dict[str, int] = {
    "store/postgres/store.py": 780,
}


def _verbs(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls)
        if callable(member) and not name.startswith("_")
    }


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


# -- AsyncStore and Store ---------------------------------------------------------------


def test_asyncstore_has_every_verb_of_store_and_no_other() -> None:
    assert set(_verbs(AsyncStore)) == set(_verbs(Store))


@pytest.mark.parametrize("verb", sorted(_verbs(Store)))
def test_each_asyncstore_verb_is_a_coroutine_with_the_store_s_parameters(verb: str) -> None:
    async_verb = getattr(AsyncStore, verb)
    assert inspect.iscoroutinefunction(async_verb), verb

    def parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in signature.parameters.values()]

    assert parameters(_verbs(AsyncStore)[verb]) == parameters(_verbs(Store)[verb])


# -- no dispatch on a class's name -------------------------------------------------------


def _compares_a_class_name(node: ast.AST) -> bool:
    """``type(x).__name__ == ...`` or ``x.__class__.__name__ == ...``, either side."""
    if not isinstance(node, ast.Compare):
        return False
    for side in [node.left, *node.comparators]:
        if isinstance(side, ast.Attribute) and side.attr == "__name__":
            owner = side.value
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "type":
                return True
            if isinstance(owner, ast.Attribute) and owner.attr == "__class__":
                return True
    return False


def test_no_code_chooses_by_a_class_s_name() -> None:
    found = [
        f"{_name(path)}:{node.lineno}"
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if _compares_a_class_name(node)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('type(store).__name__ == "PostgresStore"', True),
        ('"SqliteStore" != store.__class__.__name__', True),
        ("isinstance(store, Store)", False),
        ('name == "x"', False),
    ],
)
def test_the_class_name_check_finds_what_it_must(source: str, found: bool) -> None:
    tree = ast.parse(source)
    assert any(_compares_a_class_name(node) for node in ast.walk(tree)) is found


# -- private names stay in their module ---------------------------------------------------


def _private_imports(path: Path, source: str) -> list[str]:
    """``from fencepost.x.y import _z`` in ``path`` where ``fencepost.x.y`` is another
    module (a sibling in the same package too: what two modules share is public)."""
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    own_module = ".".join(relative.parts)
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if not (isinstance(node, ast.ImportFrom) and node.module):
            continue
        if not node.module.startswith("fencepost"):
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and node.module != own_module:
                found.append(f"{node.module}.{alias.name}")
    return found


def test_no_module_imports_another_module_s_private_names() -> None:
    found = {
        _name(path): names
        for path in _modules()
        if (names := _private_imports(path, path.read_text()))
    }
    assert found == {}


BACKENDS = ("fencepost.store.postgres", "fencepost.store.sqlite", "fencepost.store.memory")


def _backend_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        found += [name for name in names if name.startswith(BACKENDS)]
    return found


def test_no_module_outside_the_store_imports_a_backend() -> None:
    found = {
        _name(path): names
        for path in _modules()
        if not _name(path).startswith("store/") and (names := _backend_imports(path.read_text()))
    }
    assert found == {}
    assert _backend_imports("from fencepost.store.postgres.schemas import move_store")
    assert _backend_imports("import fencepost.store.sqlite.store")
    assert not _backend_imports("from fencepost.store import connect")


def test_the_private_import_check_finds_what_it_must() -> None:
    path = PACKAGE / "api" / "probe.py"
    assert _private_imports(path, "from fencepost.store.base import _secret") == [
        "fencepost.store.base._secret"
    ]
    assert _private_imports(path, "from fencepost.api.problems import _reported") == [
        "fencepost.api.problems._reported"
    ]
    assert _private_imports(path, "from fencepost.api.probe import _own") == []
    assert _private_imports(path, "from fencepost.store.base import Store, __all__") == []


# -- the worker and the handler's Context -------------------------------------------------


def _reaches_into_a_context(source: str) -> list[str]:
    """``ctx._x`` or ``run.ctx._x`` in ``source``: a private name of a Context."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        owner = node.value
        named = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
        if named in {"ctx", "context"} and not node.attr.startswith("__"):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_reaches_into_a_handler_s_context() -> None:
    found = {
        _name(path): names
        for path in _modules()
        if _name(path) != "jobs/context.py" and (names := _reaches_into_a_context(path.read_text()))
    }
    assert found == {}
    assert _reaches_into_a_context("run.ctx._request_stop('x')") == ["1: run.ctx._request_stop"]
    assert _reaches_into_a_context("run.control.request_stop('x')") == []


# -- one name, one class ----------------------------------------------------------------


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(_name(path))
    return found


def _may_share(name: str, places: list[str]) -> bool:
    django = "contrib/django/management/commands/"
    commands = [place for place in places if name == "Command" and place.startswith(django)]
    others = [place for place in places if place not in commands]
    if sorted(place.split("/")[0] for place in others) == ["domain", "wire"]:
        return True
    return len(others) == 0 or (len(others) == 1 and not commands)


def test_no_two_classes_share_a_name() -> None:
    shared = {
        name: places
        for name, places in _classes().items()
        if len(places) > 1 and not _may_share(name, places)
    }
    assert shared == {}


def test_the_shared_name_rule_allows_only_what_it_says() -> None:
    assert _may_share("Execution", ["wire/executions.py", "domain/models.py"])
    assert not _may_share("Held", ["domain/limits.py", "domain/history.py"])
    assert not _may_share("Lease", ["wire/work.py", "wire/timeline.py", "domain/models.py"])
    assert not _may_share("Waiting", ["worker/prefetch.py", "wire/jobs.py"])
    django = "contrib/django/management/commands/"
    assert _may_share("Command", [f"{django}a.py", f"{django}b.py"])
    assert not _may_share("Command", [f"{django}a.py", "worker/command.py"])


# -- module length -----------------------------------------------------------------------


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_longer_than_the_limit_or_its_listed_length() -> None:
    too_long = {
        _name(path): _lines(path)
        for path in _modules()
        if _lines(path) > OVER_MAX_LINES.get(_name(path), MAX_LINES)
    }
    assert too_long == {}


def test_every_module_listed_as_too_long_still_is() -> None:
    lengths = {name: _lines(PACKAGE / name) for name in OVER_MAX_LINES if (PACKAGE / name).exists()}
    assert {name: n for name, n in lengths.items() if n <= MAX_LINES} == {}
    assert set(lengths) == set(OVER_MAX_LINES)


# -- what each SQL dialect writes -------------------------------------------------------

#: What a dialect is (its SQL, connections, clock, binding, capabilities and refusals)
#: is declared by :class:`~fencepost.store.dialect.SqlDialect`; of ``SqlStore``'s own
#: methods, a dialect may write its own of only these: the few plans PostgreSQL
#: answers some calls of itself (its prune window, a cursor no UUID names, its bulk
#: groups' and limited claims' candidates) and SQLite's clock check. Every other
#: method of ``SqlStore`` is written once.
ANSWERED_BY_A_DIALECT = frozenset(
    {
        "_act_group",
        "_delete_steps",
        "_flow_candidates",
        "_get_plan",
        "_may_judge_leases",
        "_query_plan",
        "_schedule_cursor",
        "_transition_plan",
        "_write_flow",
    }
)

#: The verbs and helpers still written once per dialect (both define them, ``SqlStore``
#: does not): the hot path, submitting, materializing, some reports and housekeeping,
#: and each dialect's set-up. A name written once leaves the list, which only shrinks.
WRITTEN_PER_DIALECT = frozenset(
    {
        "__init__",
        "_async_runner",
        "_can_wait_for",
        "_in_caller_transaction",
        "_insert",
        "_insert_in",
        "_insert_plan",
        "_insert_steps",
        "_waits",
        "_watched",
        "close",
    }
)

DIALECTS = {"store/postgres/store.py": "PostgresStore", "store/sqlite/store.py": "SqliteStore"}


def _methods_in(source: str, cls: str) -> set[str]:
    """The names of the methods class ``cls`` of ``source`` defines itself."""
    found = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {n.name for n in found.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _methods(module: str, cls: str) -> set[str]:
    return _methods_in((PACKAGE / module).read_text(), cls)


def test_a_dialect_overrides_only_what_a_dialect_is() -> None:
    shared = _methods("store/sqlstore.py", "SqlStore")
    for module, cls in DIALECTS.items():
        assert (_methods(module, cls) & shared) - ANSWERED_BY_A_DIALECT == set(), cls


def test_what_a_dialect_is_is_declared_apart_from_the_verbs() -> None:
    hooks = _methods("store/dialect.py", "SqlDialect")
    assert {"_q", "_read", "_write", "_executor", "_run", "_refuse_steps"} <= hooks
    assert hooks & _methods("store/sqlstore.py", "SqlStore") == set()


def test_what_both_dialects_write_is_listed_and_the_list_only_shrinks() -> None:
    shared = _methods("store/sqlstore.py", "SqlStore") | _methods("store/dialect.py", "SqlDialect")
    postgres, sqlite = (_methods(module, cls) for module, cls in DIALECTS.items())
    assert (postgres & sqlite) - shared == WRITTEN_PER_DIALECT


def test_the_dialect_checks_find_what_they_must() -> None:
    source = (
        "class SqliteStore(SqlStore):\n"
        "    def nodes(self): ...\n"
        "    def _get_plan(self, execution_id): ...\n"
        "    def _t(self, v): ...\n"
        "    async def _wait(self): ...\n"
        "def helper(): ...\n"
    )
    found = _methods_in(source, "SqliteStore")
    assert found == {"nodes", "_get_plan", "_t", "_wait"}
    shared = _methods("store/sqlstore.py", "SqlStore")
    # a shared verb written again; a plan a dialect may answer and a dialect hook are not
    assert (found & shared) - ANSWERED_BY_A_DIALECT == {"nodes"}
