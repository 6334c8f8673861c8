"""The import rule: which package of fencepost may import which (docs/explanation/architecture.md).

Every module under ``src/fencepost`` is read with :mod:`ast` (nothing is imported)
and each ``fencepost.*`` import it makes is checked against :data:`MAY_IMPORT`:
imports at the top, inside functions, and under ``if TYPE_CHECKING:`` alike. A
type-only import still ties one layer to the names of another, and no layer needs
one the table forbids, so they count.

The tables below (:data:`MAY_IMPORT` first) are the place to change when the
architecture changes on purpose.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: The layers of fencepost (its top-level packages) and the layers each may import,
#: besides itself. A layer missing from this table fails :func:`test_every_package_has_a_layer`.
MAY_IMPORT: dict[str, frozenset[str]] = {
    # Pure models, states, the state machine, policies, checks and errors.
    "domain": frozenset(),
    # Pure time maths (clock, cron, zones, DST, misfire and overlap planning, schedule
    # definitions) on the domain's values: a Schedule carries its policies, and planning
    # decides over Schedules and returns Occurrences, so timing imports the domain.
    "timing": frozenset({"domain"}),
    # The job catalogue: definitions, specs, the registry, runners.
    "jobs": frozenset({"domain", "timing"}),
    # OpenTelemetry hooks (fencepost/tracing.py): the spans of submits, claims and attempts.
    "tracing": frozenset({"domain"}),
    "store": frozenset({"domain", "timing", "tracing"}),
    "testing": frozenset({"domain", "timing", "store"}),
    "scheduler": frozenset({"domain", "timing", "store"}),
    # The worker reaches a store only through its WorkSource protocol (worker/source.py);
    # its control loop runs the one reaper (scheduler/reaper.py) between claims.
    "worker": frozenset({"domain", "timing", "jobs", "scheduler", "tracing"}),
    # The HTTP API's JSON shapes, shared by api/ and client/.
    "wire": frozenset({"domain", "timing"}),
    "api": frozenset({"domain", "timing", "store", "jobs", "scheduler", "wire", "tracing"}),
    # The clients send the caller's trace context with each request (tracing.outgoing).
    "client": frozenset({"domain", "timing", "wire", "tracing"}),
}
#: The command line, ``fencepost.App`` and the package's lazy ``__init__`` put the
#: parts together, so they may import any of them; framework integrations may use
#: anything but the command line.
_EVERY_LAYER = frozenset({*MAY_IMPORT, "contrib", "app", "fencepost", "cli"})
MAY_IMPORT["contrib"] = _EVERY_LAYER - {"cli"}
MAY_IMPORT["cli"] = MAY_IMPORT["app"] = MAY_IMPORT["fencepost"] = _EVERY_LAYER

#: Modules that assemble a whole process from every part, like ``fencepost.App``:
#: the service (``fencepost serve``) runs the API beside embedded workers.
#: Django's management commands are command lines too (``manage.py fencepost_worker``
#: runs the CLI's worker with its own flags), so they belong to the ``cli`` layer.
COMPOSITION_ROOTS = {
    "fencepost.api.service": "app",
    "fencepost.contrib.django.management": "cli",
}

#: Modules whose layer is not yet their package's: the job catalogue, which moves
#: from worker/ to jobs/. Each entry must still name a module (see
#: :func:`test_every_relocation_still_applies`): delete it once the module has moved.
RELOCATED: dict[str, str] = {}

#: Imports the table forbids that are known and awaiting a move, as (layer, module
#: imported): each must still happen (see :func:`test_every_known_exception_still_happens`),
#: so an entry is deleted as soon as the move lands.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    """One ``fencepost.*`` import of one module, where it is written."""

    module: str  #: the importing module, dotted
    line: int
    target: str  #: the module imported, dotted (a package's submodule when one is named)


def module_name(path: Path) -> str:
    """``src/fencepost/domain/models.py`` -> ``fencepost.domain.models`` (a package's
    ``__init__.py`` is the package)."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules() -> dict[str, Path]:
    """Every module of fencepost, by dotted name."""
    return {module_name(path): path for path in sorted((SRC / "fencepost").rglob("*.py"))}


def imports_of(module: str, source: str, known: set[str], *, package: bool = False) -> list[Import]:
    """The ``fencepost.*`` imports anywhere in ``source`` (the text of ``module``).

    ``from fencepost.timing import specs`` is an import of ``fencepost.timing.specs``
    when that is a module in ``known``; relative imports are resolved against
    ``module`` (a package itself when ``package``).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            targets = [name for name in submodules if name in known] or [base]
        else:
            continue
        found.extend(
            Import(module, node.lineno, target)
            for target in targets
            if target == "fencepost" or target.startswith("fencepost.")
        )
    return found


def _owner(module: str, table: dict[str, str]) -> str | None:
    for prefix, layer in table.items():
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def layer_of(module: str) -> str:
    """The layer a dotted module belongs to: its package under ``fencepost``, unless
    :data:`COMPOSITION_ROOTS` or :data:`RELOCATED` say otherwise."""
    special = _owner(module, COMPOSITION_ROOTS) or _owner(module, RELOCATED)
    if special is not None:
        return special
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def violations(imports: list[Import]) -> list[str]:
    """The imports :data:`MAY_IMPORT` forbids and :data:`KNOWN_EXCEPTIONS` does not list,
    one readable line each."""
    found = []
    for imp in imports:
        source, target = layer_of(imp.module), layer_of(imp.target)
        if source == target or target in MAY_IMPORT.get(source, frozenset()):
            continue
        if (source, imp.target) in KNOWN_EXCEPTIONS:
            continue
        allowed = ", ".join(sorted(MAY_IMPORT.get(source, frozenset())))
        rule = f"may import only {allowed}" if allowed else "may import nothing outside itself"
        found.append(f"{imp.module} (line {imp.line}) imports {imp.target}: {source} {rule}")
    return found


def all_imports() -> list[Import]:
    modules = source_modules()
    known = set(modules)
    return [
        imp
        for name, path in modules.items()
        for imp in imports_of(
            name, path.read_text(encoding="utf-8"), known, package=path.name == "__init__.py"
        )
    ]


def test_every_layer_imports_only_what_the_table_allows() -> None:
    found = violations(all_imports())
    assert not found, "imports the layering forbids:\n" + "\n".join(found)


def test_every_package_has_a_layer() -> None:
    layers = {layer_of(name) for name in source_modules()}
    assert layers <= set(MAY_IMPORT), f"add to MAY_IMPORT: {sorted(layers - set(MAY_IMPORT))}"
    for allowed in MAY_IMPORT.values():
        assert allowed <= set(MAY_IMPORT)


def test_every_relocation_still_applies() -> None:
    modules = source_modules()
    for prefix in (*RELOCATED, *COMPOSITION_ROOTS):
        assert any(_owner(name, {prefix: ""}) is not None for name in modules), (
            f"{prefix} is no longer a module: delete its entry"
        )


def test_every_known_exception_still_happens() -> None:
    seen = {(layer_of(imp.module), imp.target) for imp in all_imports()}
    stale = KNOWN_EXCEPTIONS - seen
    assert not stale, f"no longer imported, delete from KNOWN_EXCEPTIONS: {sorted(stale)}"


FORBIDDEN_IMPORTS = [
    # (a module, its source, the import the checker must name)
    ("fencepost.domain.fake", "from fencepost.store.base import Store\n", "fencepost.store.base"),
    ("fencepost.domain.fake", "import fencepost.timing.rules\n", "fencepost.timing.rules"),
    (
        "fencepost.timing.fake",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from fencepost.store.base import Store\n",
        "fencepost.store.base",
    ),
    (
        "fencepost.client.fake",
        "def later():\n    from fencepost.store import connect\n    return connect\n",
        "fencepost.store",
    ),
    ("fencepost.worker.fake", "from fencepost.store.base import Store\n", "fencepost.store.base"),
    ("fencepost.jobs.fake", "from fencepost.worker import runtime\n", "fencepost.worker.runtime"),
    ("fencepost.api.fake", "from fencepost.worker.runtime import Worker\n", "fencepost.worker"),
    ("fencepost.contrib.fake", "from fencepost.cli.main import main\n", "fencepost.cli.main"),
    ("fencepost.store.fake", "from ..scheduler import materializer\n", "fencepost.scheduler"),
]


@pytest.mark.parametrize(("module", "source", "target"), FORBIDDEN_IMPORTS)
def test_the_checker_names_a_forbidden_import(module: str, source: str, target: str) -> None:
    known = {"fencepost.worker.runtime"}
    (problem,) = violations(imports_of(module, source, known))
    assert problem.startswith(f"{module} (line ")
    assert f"imports {target}" in problem


def test_the_checker_lets_allowed_imports_pass() -> None:
    source = (
        "from fencepost.domain.errors import ValidationError\n"
        "from fencepost.timing import specs\n"
        "from fencepost.store.base import Store\n"
        "from . import materializer\n"
    )
    known = {"fencepost.timing.specs", "fencepost.scheduler.materializer"}
    imports = imports_of("fencepost.scheduler.fake", source, known)
    assert [imp.target for imp in imports] == [
        "fencepost.domain.errors",
        "fencepost.timing.specs",
        "fencepost.store.base",
        "fencepost.scheduler.materializer",
    ]
    assert violations(imports) == []
