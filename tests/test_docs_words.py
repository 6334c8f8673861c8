"""What a user reads first stays short, and speaks of fencepost, not of how it was made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Every page a user or a contributor reads.
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
#: Words that mean nothing to a user: where the design came from, how work was split.
INSIDE_WORDS = re.compile(
    r"\bseeds?\b|\bthis session\b|\ba later session\b|\bon the final code\b|\bDESIGN\.md\b",
    re.IGNORECASE,
)


def test_the_readme_is_for_a_user_s_first_ten_minutes() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md is {len(lines)} lines: move the rest to docs/"
    text = "\n".join(lines)
    for needed in ("make demo", "make test", "## Install", "## Quick start"):
        assert needed in text


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_no_page_speaks_of_how_fencepost_was_written(page: Path) -> None:
    found = [
        f"{page.name}:{number}: {line.strip()}"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if INSIDE_WORDS.search(line)
    ]
    assert not found, "\n".join(found)


def test_changelog_entries_are_one_short_line_each() -> None:
    """Keep a Changelog: one user-facing line per change; figures live on the performance page."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    entries = [line for line in text.splitlines() if line.startswith("- ")]
    assert entries
    long = [entry for entry in entries if len(entry) > 160]
    assert not long, "entries over 160 characters:\n" + "\n".join(long)
