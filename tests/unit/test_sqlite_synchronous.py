"""The SQLite store's ``PRAGMA synchronous``: FULL by default, NORMAL when the URL asks.

The pragma is per connection, so it is read on the store's own connections: the
one that opened (and migrated) the file and one a second thread opens later.
``tests/integration/test_sqlite_durability.py`` counts the syncs each mode makes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import fencepost
from fencepost import ValidationError
from fencepost.store.sqlite import SqliteStore
from fencepost.store.sqlite.connection import open_connection

FULL, NORMAL = 2, 1  # what PRAGMA synchronous reads


def _modes(store: fencepost.Store) -> tuple[int, int]:
    """``PRAGMA synchronous`` on this thread's connection and on a new thread's."""
    assert isinstance(store, SqliteStore)
    db = store._db

    def read() -> int:
        with db.read() as conn:
            value: int = conn.execute("PRAGMA synchronous").fetchone()[0]
        return value

    other: list[int] = []
    thread = threading.Thread(target=lambda: other.append(read()))
    thread.start()
    thread.join()
    return read(), other[0]


def test_the_default_is_full(tmp_path: Path) -> None:
    with fencepost.connect(f"sqlite:///{tmp_path}/a.db") as store:
        assert _modes(store) == (FULL, FULL)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("normal", NORMAL), ("NORMAL", NORMAL), ("Normal", NORMAL), ("full", FULL), ("FULL", FULL)],
)
def test_the_url_chooses(tmp_path: Path, value: str, expected: int) -> None:
    url = f"sqlite:///{tmp_path}/a.db?busy_timeout=2&synchronous={value}"
    with fencepost.connect(url) as store:
        assert _modes(store) == (expected, expected)
        store.submit("job")  # the store works in the mode it was given
    with fencepost.connect(f"sqlite:///{tmp_path}/a.db") as store:
        assert len(store.query().items) == 1  # and the file reopens at the default
        assert _modes(store) == (FULL, FULL)


@pytest.mark.parametrize("value", ["off", "extra", "0", "1", "2", "fast", " full"])
def test_other_values_are_refused_before_the_file_is_made(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        fencepost.connect(f"sqlite:///{tmp_path}/a.db?synchronous={value}")
    assert caught.value.field == "url.synchronous"
    assert "full or normal" in caught.value.message
    assert not (tmp_path / "a.db").exists()


def test_bare_connections_are_full_by_default(tmp_path: Path) -> None:
    conn = open_connection(str(tmp_path / "a.db"), busy_timeout=1)
    try:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == FULL
    finally:
        conn.close()
    conn = open_connection(str(tmp_path / "a.db"), busy_timeout=1, synchronous="normal")
    try:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == NORMAL
    finally:
        conn.close()
