"""Where the PostgreSQL tests find their server, and a fresh schema per store.

``FENCEPOST_TEST_POSTGRES_DSN`` names the server (default: the local one on
127.0.0.1:5432, database ``test``). When it cannot be reached the PostgreSQL
tests are skipped with the reason shown — unless ``FENCEPOST_REQUIRE_POSTGRES``
is set, as ``.ci/run`` does, and then they fail.
"""

from __future__ import annotations

import functools
import os
import uuid

import pytest

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def dsn() -> str:
    return os.environ.get("FENCEPOST_TEST_POSTGRES_DSN", DEFAULT_DSN)


@functools.cache
def unavailable_reason() -> str | None:
    """Why the server cannot be used, or None when it can."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - dev installs include it
        return "psycopg is not installed (pip install fencepost[postgres])"
    try:
        with psycopg.connect(dsn(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {dsn()} is unreachable: {exc}".strip()
    return None


def require_postgres() -> None:
    """Skip (locally) or fail (CI) the calling test when there is no server."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)


def new_schema() -> str:
    """Create an empty schema and return its name."""
    import psycopg

    name = f"fp_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return name


def drop_schema(name: str) -> None:
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def store_url(schema: str, server: str | None = None) -> str:
    """The URL of a store in ``schema`` on ``server`` (a DSN; default: :func:`dsn`)."""
    server = server or dsn()
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}schema={schema}"
