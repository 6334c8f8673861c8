"""A griffe extension: fencepost's docstrings use reStructuredText's inline markup
(``literal``, :class:`~fencepost.StaleLease`, literal blocks after ``::``); the Python
reference renders Markdown. This turns each role into a code span and each literal
block into a fenced one, without changing a word of the text.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def markdown(text: str) -> str:
    text = _ROLE.sub(_role, text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if (
            stripped.endswith("::")
            and i + 1 < len(lines)
            and not lines[i + 1].strip()
            and i + 2 < len(lines)
            and lines[i + 2].startswith(" ")
        ):
            indent = len(line) - len(line.lstrip())
            head = stripped[:-1] if stripped.strip() != "::" else ""
            if head.strip():
                out.append(head)
            block: list[str] = []
            i += 2
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
            ):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            depth = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            pad = " " * indent
            out += ["", pad + "```text"]
            out += [pad + b[depth:] if b.strip() else "" for b in block]
            out += [pad + "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class RstInline(griffe.Extension):
    """Rewrite every docstring's reStructuredText inline markup as Markdown."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
