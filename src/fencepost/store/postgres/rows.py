"""Row mapping for PostgreSQL: psycopg loads times, intervals and JSONB natively."""

from fencepost.store.rows import command, execution, transition

__all__ = ["command", "execution", "transition"]
