"""Store.wait on PostgreSQL: one LISTEN connection per store for all its waiters.

Every statement that makes executions terminal sends their ids on the schema's
done channel (``fencepost_done_<schema>``, see ``write_change`` and
``complete_leases`` in queries.sql), delivered when it commits, from whichever
process made the change. The watcher's thread listens on one dedicated
connection, looks up the watched executions a notification names (one query),
and every :attr:`~fencepost.store.waiting.HintedWatcher.RECHECK` seconds all of
them, so that a notification lost with a connection only delays a waiter. A lost
connection is opened again, and listened on, at the next round.

It connects to the database's ``listen_conninfo``: the store's own server, or
``listen_url`` behind a transaction pooler (which cannot carry LISTEN; without
``listen_url`` the store's waiters poll instead, see ``PostgresStore``).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import time
from collections.abc import Iterable

import psycopg
import psycopg.sql

from fencepost.store.postgres.connection import QUERIES, Connection, Database
from fencepost.store.waiting import Fetch, HintedWatcher

log = logging.getLogger(__name__)

#: Seconds to wait before opening a listening connection again after one failed.
RECONNECT_PAUSE = 0.5


class NotifiedWatcher(HintedWatcher):
    """Waiters woken by the done channel's notifications, on one connection per store."""

    def __init__(self, db: Database, fetch: Fetch, *, name: str) -> None:
        super().__init__(fetch, name=name)
        assert db.listen_conninfo is not None, "no connection to listen on"
        self._db = db
        self._conninfo = db.listen_conninfo
        self._conn: Connection | None = None
        #: Written to by new waiters to wake the thread from its select().
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        #: Listening connections opened so far (1 unless one was lost), for tests.
        self.connections_opened = 0

    def _poke(self) -> None:
        super()._poke()
        with contextlib.suppress(OSError):  # full (already woken) or closed
            self._wake_w.send(b"\0")

    def _listening(self) -> tuple[Connection, bool]:
        """The listening connection, and whether it was (re)opened just now."""
        if self._conn is not None and not self._conn.closed:
            return self._conn, False
        conn: Connection = psycopg.connect(self._conninfo, autocommit=True)
        try:
            conn.execute(QUERIES["configure_session"], self._db.settings)
            row = conn.execute(QUERIES["done_channel"]).fetchone()
            assert row is not None
            conn.execute(
                psycopg.sql.SQL(QUERIES["listen"]).format(channel=psycopg.sql.Identifier(row[0]))
            )
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self.connections_opened += 1
        return conn, True

    def _pause(self, check_all: bool) -> Iterable[str] | None:
        try:
            conn, fresh = self._listening()
        except psycopg.Error:
            log.warning("waiting for executions: cannot listen", exc_info=True)
            time.sleep(RECONNECT_PAUSE)
            return None  # meanwhile every watched execution is looked up (slowly)
        if fresh or check_all:
            # What finished before this connection listened was told to no one.
            self._last_check = time.monotonic()
            return None
        left = self._last_check + self.RECHECK - time.monotonic()
        if left <= 0:
            self._last_check = time.monotonic()
            return None
        hinted: set[str] = set()
        try:
            readable, _, _ = select.select([conn.fileno(), self._wake_r.fileno()], [], [], left)
            if self._wake_r.fileno() in readable:
                self._drain_wake()
            for note in conn.notifies(timeout=0):
                hinted.update(note.payload.split(","))
        except (psycopg.Error, OSError, ValueError):
            log.warning("waiting for executions: listening connection lost", exc_info=True)
            self._close_connection()
            return None
        self._poked.clear()
        return hinted

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _idle_hook(self) -> None:
        self._close_connection()

    def _closed_hook(self) -> None:
        self._close_connection()
        self._wake_r.close()
        self._wake_w.close()
