"""The SQLite backend (the default): see :class:`SqliteStore`."""

from fencepost.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
