"""Write ``reference/errors.md`` from the exception classes and the problem kinds.

The tree is drawn from the classes of :mod:`fencepost.domain.errors` themselves (their
bases and docstrings); the problem types are every :class:`fencepost.api.problems.Kind`
the service defines, each with the error the client raises for it.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))

from _markdown import GENERATED, cell, code, escape, first_paragraph, prose, slug

from fencepost.api import problems
from fencepost.client.errors import error_of
from fencepost.domain import errors

ROOT = errors.FencepostError
CLASSES = [getattr(errors, name) for name in errors.__all__]


def parent(cls: type) -> type:
    """Where ``cls`` hangs in the tree: its first base that is a fencepost error."""
    return next(base for base in cls.__bases__ if issubclass(base, ROOT))


def also(cls: type) -> list[str]:
    """The other bases: builtins (``ValueError``) and the store error a remote one is."""
    if cls is ROOT:
        return []
    first = parent(cls)
    return [base.__name__ for base in cls.__bases__ if base is not first]


def article(word: str) -> str:
    return "an" if word[0] in "AEIOU" else "a"


def children(cls: type) -> list[type]:
    ordered = sorted(CLASSES, key=lambda c: inspect.getsourcelines(c)[1])
    return [c for c in ordered if c is not ROOT and parent(c) is cls]


def tree(cls: type, depth: int = 0) -> list[str]:
    extra = also(cls)
    suffix = f" (also {', '.join(article(b) + ' ' + code(b) for b in extra)})" if extra else ""
    line = (
        f"{'    ' * depth}- [`{cls.__name__}`](#{slug(cls.__name__)}){suffix}: "
        f"{first_paragraph(cls.__doc__)}"
    )
    return [line] + [row for child in children(cls) for row in tree(child, depth + 1)]


def kinds() -> list[tuple[str, problems.Kind, str]]:
    """Every problem kind in the module's order, with its ``#:`` comment if it has one."""
    source = inspect.getsource(problems)
    lines = source.splitlines()
    found = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = getattr(problems, target.id, None)
        if not isinstance(value, problems.Kind):
            continue
        comment: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            comment.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        found.append((target.id, value, " ".join(comment)))
    return found


#: The kinds that neither a ``#:`` comment nor an error class explains.
ANSWERED_FOR = {
    "BODY_TOO_LARGE": "The request body is larger than the service's cap on one body.",
    "METHOD_NOT_ALLOWED": "The path exists, but not with this method; `Allow` lists those it has.",
}


def meaning(name: str, kind: problems.Kind, comment: str) -> str:
    if comment:
        return prose(comment)
    # The kinds that errors map to: the error's own docstring says when it happens.
    raised_for = [cls for cls, k in problems._KINDS if k is kind]
    text = " ".join(first_paragraph(cls.__doc__) for cls in raised_for)
    text = text or ANSWERED_FOR.get(name, "")
    if not text:  # a new kind: give it a "#:" comment in fencepost/api/problems.py
        raise RuntimeError(f"problem kind {name} has no meaning to print")
    return text


def page() -> str:
    lines = [
        GENERATED.format(script="errors_reference.py"),
        "# Errors",
        "",
        "Every error fencepost raises on purpose derives from `FencepostError`; several are "
        "also a builtin (`ValueError`, `LookupError`) so that generic callers keep working. "
        "The HTTP service answers each as a problem document (RFC 9457), and the client "
        "raises that problem as the error a store would have raised, so "
        "`except StaleLease` works the same against a store and against the service.",
        "",
        "## The tree",
        "",
        *tree(ROOT),
        "",
        "## Problem types",
        "",
        "Every error response of the HTTP service is `application/problem+json`:",
        "",
        "```json",
        '{"type": "'
        + problems.VALIDATION.type
        + '", "title": "'
        + problems.VALIDATION.title
        + '",',
        ' "status": 422, "detail": "execute_at: must be timezone-aware", "field": "execute_at"}',
        "```",
        "",
        "`field` is present when one input is to blame. Branch on `type`, never on `title` "
        "or `detail` (those are for people and may change). The `type` URIs are "
        "identifiers, not pages to fetch.",
        "",
        "| Type | Status | Title | Meaning | The client raises |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, kind, comment in kinds():
        raised = type(error_of(kind.status, {"type": kind.type})).__name__
        lines.append(
            f"| {code(kind.type.rsplit('/', 1)[-1])} | {kind.status} | {cell(escape(kind.title))}"
            f" | {cell(meaning(name, kind, comment))} | [`{raised}`](#{slug(raised)}) |"
        )
    lines += [
        "",
        "Each `type` is the URI of the example above with its last segment replaced by the "
        "name in the first column.",
        "",
        "## The classes",
        "",
    ]
    for cls in sorted(CLASSES, key=lambda c: inspect.getsourcelines(c)[1]):
        bases = ", ".join(
            f"[`{b.__name__}`](#{slug(b.__name__)})" if issubclass(b, ROOT) else code(b.__name__)
            for b in cls.__bases__
        )
        lines += [
            f"### `{cls.__name__}` {{#{slug(cls.__name__)}}}",
            "",
            f"Bases: {bases}",
            "",
            prose(cls.__doc__),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


with mkdocs_gen_files.open("reference/errors.md", "w") as out:
    out.write(page())
