"""One error module: every public error in fencepost.domain.errors, drawn, listed, exported."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import fencepost
from fencepost.domain import errors

SRC = Path(__file__).resolve().parents[2] / "src" / "fencepost"

#: Errors defined elsewhere on purpose: the service raises them inside a request and
#: answers with a problem (api/problems.py); they never reach a caller of fencepost.
SERVER_SIDE = {
    ("api/auth.py", "CredentialsRefused"),
    ("api/auth.py", "ScopeRefused"),
    ("api/auth.py", "CsrfRefused"),
}

_BRANCH = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)")


def defined_errors() -> set[str]:
    return {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, errors.FencepostError)
        and value.__module__ == errors.__name__
    }


def drawn_tree() -> dict[str, str]:
    """Each error in the module docstring's drawing -> the error it is drawn under."""
    assert errors.__doc__ is not None
    lines = errors.__doc__.splitlines()
    root = next(i for i, line in enumerate(lines) if line.strip() == "FencepostError")
    parents: dict[str, str] = {}
    path = [(-1, "FencepostError")]  # (depth, name) from the root down to the last drawn
    for line in lines[root + 1 :]:
        branch = _BRANCH.match(line.strip("\n")[4:])
        if branch is None:
            break
        depth = len(branch["indent"])
        while path[-1][0] >= depth:
            path.pop()
        parents[branch["name"]] = path[-1][1]
        path.append((depth, branch["name"]))
    return parents


def test_every_error_is_listed_and_exported() -> None:
    assert set(errors.__all__) == defined_errors()
    assert errors.__all__ == sorted(errors.__all__)
    missing = set(errors.__all__) - set(fencepost.__all__)
    assert not missing, f"add to fencepost.__all__: {sorted(missing)}"
    for name in errors.__all__:
        assert getattr(fencepost, name) is getattr(errors, name)


def test_the_drawing_shows_every_error_under_a_base_of_it() -> None:
    drawn = drawn_tree()
    assert set(drawn) | {"FencepostError"} == defined_errors()
    for name, parent in drawn.items():
        cls = getattr(errors, name)
        assert getattr(errors, parent) in cls.__bases__, f"{name} is drawn under {parent}"


def test_no_other_module_defines_a_public_error() -> None:
    names = set(errors.__all__)
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "domain" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if bases & names:
                found.add((path.relative_to(SRC).as_posix(), node.name))
    extra = found - SERVER_SIDE
    assert not extra, f"move to fencepost/domain/errors.py: {sorted(extra)}"
