"""The backend-specific steps of ``fencepost db migrate`` beside migrating, each behind
one name, so that no caller outside the store imports a backend's package.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

#: ``progress(stage, done, total)``: a stage's name, how far it is, and its total when
#: known.
Progress = Callable[[str, int, "int | None"], None]


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL store."""
    return urlsplit(url).scheme in ("postgresql", "postgres")


def prepare_migrations(url: str, progress: Progress) -> None:
    """Do the slow reading of the pending migrations online, before they run, reporting
    each stage to ``progress``: on PostgreSQL (see store/postgres/conversion.py). Other
    stores have nothing to prepare."""
    if not is_postgres(url):
        return
    from fencepost.store.postgres.connection import Database
    from fencepost.store.postgres.conversion import prepare

    db = Database(url)
    try:
        prepare(db, progress=progress)
    finally:
        db.close()


def move_schema(url: str, target: str) -> tuple[str, int]:
    """Move a PostgreSQL store's tables and views to schema ``target``; return the schema
    they left and how many moved (see store/postgres/schemas.py)."""
    from fencepost.store.postgres.schemas import move_store

    return move_store(url, target)
