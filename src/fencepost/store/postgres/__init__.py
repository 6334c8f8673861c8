"""The PostgreSQL backend (``pip install fencepost[postgres]``): see :class:`PostgresStore`."""

from fencepost.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
