"""Row mapping for PostgreSQL: psycopg loads times, intervals and JSONB natively."""

from fencepost.store.rows import command, execution, schedule, submitted, transition

__all__ = ["command", "execution", "schedule", "submitted", "transition"]
