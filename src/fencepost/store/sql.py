"""Named SQL blocks, loaded from ``.sql`` files shipped with a backend.

A file holds blocks headed by ``-- name: <block>``; runtime code refers to
blocks by name and holds no SQL text of its own. A file may also hold fragments,
headed by ``-- fragment: <name>``: text that is not a statement by itself, written
once and placed into blocks where a line reads ``-- include: <name>`` (two blocks
that share most of a statement, such as a claim and its capped variant, then
share its text). Fragments are not blocks: they are not returned.

``shared.sql``, beside this module, holds what both dialects run exactly as
written (text without parameters, which the dialects bind differently): it is
read before each dialect's file, its blocks become blocks of both and its
fragments may be included by either.
"""

from __future__ import annotations

import re
from importlib import resources

from fencepost.domain.errors import NotMigrated, StoreUnavailable

_HEADER = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*--\s*include:\s*(\w+)\s*$", re.MULTILINE)


#: The blocks and fragments both dialects share, read before a dialect's own file.
SHARED = "shared.sql"


def load_queries(package: str, filename: str) -> dict[str, str]:
    """Parse ``filename`` in ``package`` into ``{block name: SQL text}``.

    :data:`SHARED` (in this package) is read first: its blocks are blocks of every
    dialect, and its fragments may be included by the dialect's blocks.
    """
    fragments: dict[str, str] = {}
    shared = resources.files(__package__).joinpath(SHARED).read_text(encoding="utf-8")
    blocks = parse_blocks(shared, source=f"{__package__}/{SHARED}", fragments=fragments)
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    own = parse_blocks(text, source=f"{package}/{filename}", fragments=fragments)
    for name in own.keys() & blocks.keys():
        raise ValueError(f"{package}/{filename}: block {name!r} is defined in {SHARED} too")
    return blocks | own


def parse_blocks(
    text: str, *, source: str, fragments: dict[str, str] | None = None
) -> dict[str, str]:
    """Split SQL text into named blocks; duplicate or empty blocks are errors.

    ``-- include: <fragment>`` lines are replaced by the fragment's text (fragments
    may include fragments defined before them, here or in ``fragments``, which
    gains the fragments of ``text``); an unknown fragment is an error.
    """
    parts = _HEADER.split(text)
    blocks: dict[str, str] = {}
    fragments = {} if fragments is None else fragments

    def include(match: re.Match[str]) -> str:
        if match[1] not in fragments:
            raise ValueError(f"{source}: fragment {match[1]!r} is not defined before its use")
        return fragments[match[1]]

    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        sql = _INCLUDE.sub(include, body.strip("\n").rstrip())
        into = fragments if kind == "fragment" else blocks
        if name in blocks or name in fragments:
            raise ValueError(f"{source}: block {name!r} is defined twice")
        if not sql.strip():
            raise ValueError(f"{source}: block {name!r} is empty")
        into[name] = sql if kind == "fragment" else sql.strip()
    return blocks


def migration_files(package: str) -> list[tuple[int, str, str]]:
    """The numbered migrations in ``package``: ``(version, filename, sql)``, in order."""
    found = []
    for entry in resources.files(package).iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"{package}: migrations must be numbered 0001.. without gaps: {versions}")
    return found


def latest_version(package: str) -> int:
    """The highest migration version shipped in ``package``."""
    return migration_files(package)[-1][0]


def refuse_newer(applied: set[int], package: str) -> None:
    """:class:`StoreUnavailable` if ``applied`` holds a version ``package`` does not ship."""
    if applied - {version for version, _, _ in migration_files(package)}:
        raise StoreUnavailable(
            f"the database was migrated by a newer fencepost (versions {sorted(applied)}); "
            "upgrade fencepost to open it"
        )


def require_migrated(applied: set[int] | None, package: str, location: str) -> None:
    """Refuse a database that is not at ``package``'s schema version, without touching it.

    ``applied``: the versions its migrations table lists (None: it has no such table).
    Raises :class:`NotMigrated` for a missing or older schema (the message says what to
    run) and :class:`StoreUnavailable` for a newer one (as opening it to migrate does).
    """
    latest = latest_version(package)
    if applied is None or not applied:
        raise NotMigrated(
            f"no fencepost schema in {location} "
            "(`fencepost db migrate --db URL` creates it; this command only reads)"
        )
    refuse_newer(applied, package)
    if max(applied) < latest:
        raise NotMigrated(
            f"the fencepost schema in {location} is at version {max(applied)}, this "
            f"fencepost needs {latest} (`fencepost db migrate --db URL` upgrades it)"
        )
    # Every version, not only the latest: a migration missing from the middle (a
    # database restored from parts, a table dropped by hand) is not migrated either.
    missing = sorted({version for version, _, _ in migration_files(package)} - applied)
    if missing:
        raise NotMigrated(
            f"the fencepost schema in {location} lacks migration(s) "
            f"{', '.join(map(str, missing))} (`fencepost db migrate --db URL` applies them)"
        )
