"""Helpers shared by the HTTP service's tests."""

from __future__ import annotations

import warnings
from typing import Any

from fencepost.store.base import Store

# Starlette warns at import when it finds httpx rather than its fork httpx2; the client
# works the same, and the suite turns warnings into errors, so that one is silenced here.
with warnings.catch_warnings():
    from starlette.exceptions import StarletteDeprecationWarning

    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

__all__ = ["PROBLEMS", "TestClient", "assert_problem", "running"]

PROBLEMS = "https://fencepost.dev/problems/"


def assert_problem(response: Any, status: int, kind: str, field: str | None = None) -> None:
    """``response`` is an RFC 9457 problem of ``kind`` (and names ``field`` when given)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == PROBLEMS + kind
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    if field is not None:
        assert body["field"] == field


def running(store: Store, job: str = "work", **options: Any) -> str:
    """Submit and claim an execution; return its id."""
    execution = store.submit(job, **options)
    [lease] = store.claim("worker-1", jobs=[job])
    assert lease.execution_id == execution.id
    return execution.id
