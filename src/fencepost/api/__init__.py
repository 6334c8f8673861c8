"""The HTTP service: a FastAPI application over a :class:`~fencepost.store.base.Store`.

Executions, schedules, the worker protocol, metrics and the dashboard, each in its
own module; :mod:`fencepost.api.auth` decides who may call what. Errors are RFC
9457 problem details (:mod:`fencepost.api.problems`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fencepost.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # FastAPI loads with the application, not with every module of this package:
    # the command line reads fencepost.api.defaults without it.
    if name == "create_app":
        from fencepost.api.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
