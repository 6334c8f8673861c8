"""Python handlers for the example definition files in this directory (see add.yaml)."""

from __future__ import annotations


def add(x: int, y: int) -> int:
    """Return ``x + y``."""
    return x + y
