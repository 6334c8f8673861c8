"""A job that reports what a worker process has loaded, for the remote worker's lean test.

The store URL given here is a placeholder: the tests always pass ``--db`` or ``--server``.
"""

from __future__ import annotations

import sys

import fencepost

app = fencepost.App("memory://")


@app.job("loaded-module-names", lease_ttl=30)
def loaded_module_names() -> list[str]:
    """Every module loaded in this worker process (full dotted names), sorted."""
    return sorted(sys.modules)
