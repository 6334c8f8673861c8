"""Which schema of the database holds a PostgreSQL store's tables: found, made, moved.

A store's tables (``executions``, ``schedules``, ``nodes``, ``commands``,
``transitions``, the day partitions...) live in one schema of their own:
:data:`DEFAULT_SCHEMA` (``fencepost``) unless the URL's ``schema`` option names
another, so that they never meet an application's own ``public.schedules``. A
store that migrates creates its schema when it is missing; a role that may not
(no CREATE privilege on the database) is told so in one line naming the option
and the privilege.

An earlier fencepost put its tables in the role's own schema (normally ``public``).
A URL that names no schema keeps finding them there (:func:`place`, with a one-line
warning) rather than moving them under the processes still using them: an old
worker would go on writing to ``public`` while new ones read ``fencepost``. The move
is the operator's, once every process is stopped: ``fencepost db migrate
--move-to-schema fencepost`` (:func:`move`), which then leaves a mark in the old
schema so that an earlier fencepost started there refuses to open it instead of
making new, empty tables.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import sql

from fencepost.domain.errors import StoreUnavailable, ValidationError
from fencepost.store.sql import load_queries

if TYPE_CHECKING:
    from fencepost.store.postgres.connection import Database

QUERIES = load_queries("fencepost.store.postgres", "queries.sql")

log = logging.getLogger("fencepost.store")

#: The schema of a URL that names none.
DEFAULT_SCHEMA = "fencepost"

#: The version a move records in the old schema's ``fencepost_migrations``, named
#: ``moved to schema NAME``. No fencepost ships it, so an earlier version opening the old
#: schema refuses ("migrated by a newer fencepost") instead of starting afresh there.
MOVED_VERSION = 999_999

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_name(name: str, field: str = "url.schema") -> str:
    """``name`` as PostgreSQL resolves it unquoted in a ``search_path`` (lower case), or the
    :class:`ValidationError` naming ``field``: a letter or ``_`` first, then letters,
    digits and ``_``, at most 63 characters."""
    if not _IDENTIFIER.fullmatch(name) or len(name) > 63:
        raise ValidationError(
            field,
            f"must be a plain identifier (letters, digits and _, at most 63), got {name!r}",
        )
    return name.lower()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a store's tables are."""

    schema: str
    #: Found in the role's own schema, put there by an earlier fencepost (no ``schema``
    #: option given, none in :data:`DEFAULT_SCHEMA`).
    legacy: bool = False


def place(conninfo: str, named: str | None) -> Placement:
    """The store's schema: the URL's ``named`` one, else :data:`DEFAULT_SCHEMA`, unless
    an earlier fencepost's tables are found where the role's ``search_path`` leads
    (normally ``public``) and none in :data:`DEFAULT_SCHEMA`: then those, with a warning
    saying how to move them. Reads only (one short connection); creates nothing.

    Tables an earlier move left behind (its mark: :data:`MOVED_VERSION`) are a
    :class:`ValidationError` naming the schema they were moved to.
    """
    if named is not None:
        return Placement(check_name(named))
    try:
        with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as conn:
            placed, found = conn.execute(
                QUERIES["find_store_schema"], {"schema": DEFAULT_SCHEMA}
            ).fetchone() or (False, None)
            if placed or found is None or found == DEFAULT_SCHEMA:
                return Placement(DEFAULT_SCHEMA)
            with conn.transaction():  # its search_path for this transaction only
                path = sql.Identifier(found).as_string(conn)
                conn.execute(QUERIES["caller_settings"], {"search_path": path, "zone": "UTC"})
                moved = conn.execute(QUERIES["moved_to"], {"version": MOVED_VERSION}).fetchone()
    except psycopg.Error as exc:
        raise StoreUnavailable(f"postgresql store: {exc}") from exc
    if moved is not None:
        target = str(moved[0]).removeprefix("moved to schema ")
        raise ValidationError(
            "url.schema",
            f"fencepost's tables were moved from schema {found} to {target}: "
            f"add ?schema={target} to the URL",
        )
    where = (psycopg.conninfo.conninfo_to_dict(conninfo).get("dbname"), found)
    if where not in _warned:  # once per process: every store it opens would repeat it
        _warned.add(where)
        _warn_legacy(found)
    return Placement(found, legacy=True)


#: The (database, schema) pairs of earlier installs this process has warned of.
_warned: set[tuple[object, str]] = set()


def _warn_legacy(found: str) -> None:
    log.warning(
        "fencepost's tables are in schema %s (made by an earlier fencepost), not %s: using "
        "them; to move them, stop every process and run `fencepost db migrate "
        "--move-to-schema %s`, or keep them with ?schema=%s",
        found,
        DEFAULT_SCHEMA,
        DEFAULT_SCHEMA,
        found,
    )


def make(db: Database) -> None:
    """Create the store's schema if it is missing (before migrating into it).

    A role without the CREATE privilege on the database gets one line saying what
    to grant, or to create the schema for it, or to name another with ``?schema=``.
    Two processes creating it at once both succeed.
    """
    with db.connection() as conn:
        row = conn.execute(QUERIES["schema_state"], {"schema": db.schema}).fetchone()
    assert row is not None
    exists, role, database = row
    if exists:
        return
    try:
        with db.connection() as conn:
            conn.execute(_create_schema(db.schema))
    except StoreUnavailable as exc:
        if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise cannot_create(db.schema, role, database) from None
        if isinstance(
            exc.__cause__, psycopg.errors.DuplicateSchema | psycopg.errors.UniqueViolation
        ):
            return  # made at the same moment by another process
        raise


def cannot_create(schema: str, role: str, database: str) -> ValidationError:
    """The error of a role that may not create ``schema`` in ``database``."""
    return ValidationError(
        "url.schema",
        f"cannot create schema {schema!r}: role {role!r} lacks the CREATE privilege on "
        f"database {database!r} (GRANT CREATE ON DATABASE {database} TO {role}), or create "
        f"it for the role (CREATE SCHEMA {schema} AUTHORIZATION {role}), or name an existing "
        "schema with the URL option ?schema=NAME",
    )


def cannot_write(schema: str, role: str) -> ValidationError:
    """The error of a role that may not create tables in ``schema``."""
    return ValidationError(
        "url.schema",
        f"role {role!r} may not create fencepost's tables in schema {schema!r} "
        f"(GRANT CREATE ON SCHEMA {schema} TO {role}), or name another schema with the "
        "URL option ?schema=NAME",
    )


def _create_schema(schema: str) -> sql.Composed:
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))


def _store_names() -> list[str]:
    """The tables, views and statistics a migrated store holds (schema.sql names each),
    and the migrations table."""
    snapshot = resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")
    names = re.findall(r"^CREATE (?:TABLE|VIEW|STATISTICS) (\w+)", snapshot, re.MULTILINE)
    return [*names, "fencepost_migrations"]


def move(db: Database, target: str) -> int:
    """Move the store's tables from its schema (``db.schema``) to ``target``, in one
    transaction; return the number of tables and views moved (partitions included).

    Run on a migrated store only (``fencepost db migrate`` migrates first). Refused,
    with nothing changed: the same schema; a ``target`` already holding fencepost's
    tables; a store with live nodes (workers, services, materializers still
    registered: stop them first, since a process still using the old schema would
    break or, if it is an earlier fencepost, write where no one reads). The old schema
    keeps a ``fencepost_migrations`` table marked :data:`MOVED_VERSION`: an earlier
    fencepost opening it refuses, a later one names the new schema.
    """
    target = check_name(target, "--move-to-schema")
    source = db.schema
    assert source is not None
    if target == source:
        raise ValidationError("--move-to-schema", f"the tables are already in schema {source}")
    names = _store_names()
    with db.transaction() as conn:
        conn.execute(QUERIES["lock_migrations"])
        placed = conn.execute(QUERIES["find_store_schema"], {"schema": target}).fetchone()
        if placed is not None and placed[0]:
            raise ValidationError(
                "--move-to-schema", f"schema {target} already holds fencepost's tables"
            )
        live = [
            row[0]
            for row in conn.execute(QUERIES["select_nodes"], {"live_only": True, "now": None})
        ]
        if live:
            shown = ", ".join(live[:5]) + (f" and {len(live) - 5} more" if len(live) > 5 else "")
            raise ValidationError(
                "--move-to-schema",
                f"{len(live)} live process(es) still use schema {source} ({shown}): stop every "
                "worker and service first (a crashed one counts until its registration expires)",
            )
        role = conn.execute(QUERIES["schema_state"], {"schema": target}).fetchone()
        assert role is not None
        if not role[0]:
            try:
                with conn.transaction():
                    conn.execute(_create_schema(target))
            except psycopg.errors.InsufficientPrivilege:
                raise cannot_create(target, role[1], role[2]) from None
        moved = _move_relations(conn, source, target, names)
        # The mark (see MOVED_VERSION): the migrations table again, in the old schema.
        conn.execute(QUERIES["create_migrations_table"])
        conn.execute(
            QUERIES["record_migration"],
            {"version": MOVED_VERSION, "name": f"moved to schema {target}"},
        )
    return moved


def _move_relations(conn: Any, source: str, target: str, names: list[str]) -> int:
    """``ALTER ... SET SCHEMA`` for each relation and statistics object named (and
    partition); the number of relations moved."""
    where = {"schema": source, "names": names}
    relations = conn.execute(QUERIES["store_relations"], where).fetchall()
    statistics = [row[0] for row in conn.execute(QUERIES["store_statistics"], where)]
    for name, kind in relations:
        noun = "VIEW" if kind == "v" else "TABLE"
        conn.execute(
            sql.SQL("ALTER {} {}.{} SET SCHEMA {}").format(
                sql.SQL(noun), sql.Identifier(source), sql.Identifier(name), sql.Identifier(target)
            )
        )
    for name in statistics:
        conn.execute(
            sql.SQL("ALTER STATISTICS {}.{} SET SCHEMA {}").format(
                sql.Identifier(source), sql.Identifier(name), sql.Identifier(target)
            )
        )
    return len(relations)


def move_store(url: str, target: str) -> tuple[str, int]:
    """:func:`move` for the store at ``url`` (``fencepost db migrate --move-to-schema``):
    the schema the tables were in, and how many tables and views were moved."""
    from fencepost.store.postgres.connection import Database

    target = check_name(target, "--move-to-schema")
    db = Database(url)
    try:
        return db.schema, move(db, target)
    finally:
        db.close()
