"""The HTTP service: a FastAPI application over a :class:`~fencepost.store.base.Store`.

Executions, schedules, the worker protocol, metrics and the dashboard, each in its
own module; :mod:`fencepost.api.auth` decides who may call what. Errors are RFC
9457 problem details (:mod:`fencepost.api.problems`).
"""

from __future__ import annotations

from fencepost.api.app import create_app

__all__ = ["create_app"]
