"""PostgreSQL connections: checked (a round trip) only after idling; URL options intact.

A busy worker makes a store call every few milliseconds; checking the connection
on every checkout cost it a sixth of its time. A connection idle for
``CHECK_AFTER_IDLE`` seconds is still checked, and a failed call has every pooled
connection checked before its next use (tests/integration/test_postgres_faults.py
kills connections under a store).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from psycopg_pool import ConnectionPool

import fencepost
from fencepost.store.postgres import connection
from tests import postgres
from tests.integration import _pg


@pytest.fixture
def url() -> Iterator[str]:
    postgres.require_postgres()
    with _pg.fresh_schema() as schema:
        yield _pg.url(schema)


def test_a_connection_in_use_is_not_checked_and_an_idle_one_is(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[object] = []
    real = ConnectionPool.check_connection

    def counted(conn: connection.Connection) -> None:
        checks.append(conn)
        real(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
    monkeypatch.setattr(connection, "CHECK_AFTER_IDLE", 0.3)
    with fencepost.connect(url) as store:
        eid = store.submit("tick").id
        checks.clear()
        for _ in range(20):
            store.get(eid)
        assert checks == [], "a connection in constant use was checked"
        time.sleep(0.4)
        store.get(eid)
        assert len(checks) == 1, "a connection idle past CHECK_AFTER_IDLE was not checked"


def test_a_url_option_with_spaces_reaches_the_server(url: str) -> None:
    """libpq decodes %20 in a URL but not "+": an option with spaces must arrive whole."""
    with fencepost.connect(f"{url}&options=-c%20application_name%3Dfp-spaced") as store:
        store.submit("tick")
        with _pg.connect() as conn:
            names = {
                row[0] for row in conn.execute("SELECT application_name FROM pg_stat_activity")
            }
        assert "fp-spaced" in names
