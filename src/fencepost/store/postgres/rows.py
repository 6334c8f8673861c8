"""Row mapping for PostgreSQL: psycopg loads times, intervals and JSONB natively."""

from fencepost.store.rows import execution, transition

__all__ = ["execution", "transition"]
