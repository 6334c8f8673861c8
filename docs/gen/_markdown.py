"""What the generated reference pages share: turning the code's text into Markdown."""

from __future__ import annotations

import inspect
import re

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def prose(text: str | None) -> str:
    """A docstring's reStructuredText (``code``, :class:`X`) as Markdown, dedented."""
    if not text:
        return ""
    text = inspect.cleandoc(text)
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    text = _LITERAL.sub(lambda m: f"`{m.group(1)}`", text)
    # A literal block (a paragraph ending in "::") becomes a fenced block.
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            out.append(line.rstrip()[:-1])
            block: list[str] = []
            i += 2
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def first_paragraph(text: str | None) -> str:
    """The first paragraph of :func:`prose`, on one line."""
    return " ".join(prose(text).split("\n\n", 1)[0].split())


def cell(text: object) -> str:
    """``text`` made safe for one cell of a Markdown table (one line, no bare ``|``)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    """``text`` as an inline code span (safe in a table cell)."""
    value = str(text).replace("|", "\\|")
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def escape(text: object) -> str:
    """Plain text with Markdown's and HTML's special characters made literal."""
    value = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\`*_[]|":
        value = value.replace(char, "\\" + char)
    return value


def slug(text: str) -> str:
    """An anchor id: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


GENERATED = "<!-- Generated at build time by docs/gen/{script} from the code; do not edit. -->\n\n"
