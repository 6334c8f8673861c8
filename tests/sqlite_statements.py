"""The statements a call runs on a SQLite store's own connection, for tests that count
them (``sqlite3``'s trace callback sees each step of an ``executemany``)."""

from __future__ import annotations

from collections.abc import Callable

from fencepost.store.base import Store


def statements(store: Store, call: Callable[[], object]) -> list[str]:
    """The statements ``call()`` runs on ``store``'s connection in this thread."""
    ran: list[str] = []
    conn = store._db.get()  # type: ignore[attr-defined]
    conn.set_trace_callback(ran.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return ran


def without_comments(statement: str) -> str:
    """A statement's SQL without its comment lines."""
    return "\n".join(
        line for line in statement.splitlines() if not line.lstrip().startswith("--")
    ).strip()
