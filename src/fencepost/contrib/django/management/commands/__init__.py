"""``fencepost_worker`` and ``fencepost_migrate``."""
