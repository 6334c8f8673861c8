"""Put executions into a known state in a few lines, through the public verbs only.

A test states what it is about ("a RUNNING execution whose lease expired") and
the factory drives a store there with real submits, claims and failures, so the
row is exactly what production would have produced.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from fencepost.domain.models import Execution, Lease
from fencepost.store.base import Store


class ExecutionFactory:
    """Builds executions in a given store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._names = itertools.count(1)

    def _job(self, job: str | None) -> str:
        # A name of its own, so that claiming "the" due execution of it is unambiguous.
        return job if job is not None else f"factory-job-{next(self._names)}"

    def scheduled(self, job: str | None = None, **submit: Any) -> Execution:
        """A SCHEDULED execution (due now unless ``execute_at``/``delay`` say otherwise)."""
        return self.store.submit(self._job(job), **submit)

    def running(
        self, job: str | None = None, *, owner: str = "worker", ttl: float = 30, **submit: Any
    ) -> Lease:
        """A RUNNING execution, due now and claimed by ``owner``; returns its lease.

        ``job`` must not have other due executions in the store.
        """
        name = self._job(job)
        execution = self.store.submit(name, **submit)
        (lease,) = self.store.claim(owner, ttl=ttl, jobs=[name])
        assert lease.execution_id == execution.id, "another due execution of this job was claimed"
        return lease

    def retry_waiting(
        self, job: str | None = None, *, retry_in: float = 60, **submit: Any
    ) -> Execution:
        """A RETRY_WAIT execution whose retry is due ``retry_in`` seconds from now."""
        lease = self.running(job, **submit)
        return self.store.fail(lease, "boom", retry_in=timedelta(seconds=retry_in))

    def dead(self, job: str | None = None, **submit: Any) -> Execution:
        """A FAILED execution (a dead letter)."""
        lease = self.running(job, **submit)
        return self.store.fail(lease, "fatal", retryable=False)

    def succeeded(self, job: str | None = None, result: Any = "done", **submit: Any) -> Execution:
        """A SUCCEEDED execution with ``result``."""
        return self.store.complete(self.running(job, **submit), result)
