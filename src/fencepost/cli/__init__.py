"""The ``fencepost`` command."""
