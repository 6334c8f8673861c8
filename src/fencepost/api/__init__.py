"""The HTTP service: a FastAPI application over a :class:`~fencepost.store.base.Store`.

This first slice serves executions (submit, read, list, cancel, commands, replay),
dead letters and health checks. Errors are RFC 9457 problem details
(:mod:`fencepost.api.problems`).
"""

from __future__ import annotations

from fencepost.api.app import create_app

__all__ = ["create_app"]
