"""The memory store's job catalogue, nodes and buckets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from fencepost.domain.catalogue import JobDefaults, JobEntry
from fencepost.domain.errors import (
    CatalogueConflict,
)
from fencepost.domain.models import (
    Execution,
)
from fencepost.domain.nodes import Node, Registration
from fencepost.domain.states import (
    TERMINAL_STATES,
)
from fencepost.store.memory.core import MemoryCore
from fencepost.store.values import (
    UNFINISHED_STATES,
    BucketsResized,
    plan_resize,
)


class MemoryCatalogue(MemoryCore):
    """The job catalogue, the nodes and the buckets."""

    def _register_node(self, r: Registration) -> Node:
        with self._lock:
            now = self.clock.now()
            previous = self._nodes.get(r.node_id)
            node = Node(
                id=r.node_id,
                kind=r.kind,
                buckets=r.buckets,
                started_at=previous.started_at if previous is not None else now,
                heartbeat_at=now,
                expires_at=now + r.ttl,
                jobs=r.jobs,
            )
            self._nodes[r.node_id] = node
            return node

    # -- the job catalogue -----------------------------------------------------------------

    def _publish(self, entries: Sequence[JobEntry]) -> list[JobEntry]:
        with self._lock:
            now = self.clock.now()
            out = []
            for entry in entries:  # every conflict first: nothing is written with one
                stored = self._jobs.get(entry.key)
                if stored is not None and stored.digest != entry.digest:
                    raise CatalogueConflict(entry.name, entry.version, stored.digest, entry.digest)
            for entry in entries:
                stored = self._jobs.get(entry.key)
                if stored is None:
                    stored = self._jobs[entry.key] = replace(entry, published_at=now)
                out.append(stored)
            return out

    def _unpublished_jobs(self) -> set[str]:
        with self._lock:
            jobs = {self._rows[i].job for i in self._unset}
            return jobs | {self._schedules[i].job for i in self._schedule_unset}

    def _adopt_defaults(self, entry: JobEntry) -> int:
        d = entry.defaults
        with self._lock:
            adopted = 0
            for execution_id, unset in list(self._unset.items()):
                e = self._rows[execution_id]
                if e.job != entry.name:
                    continue
                del self._unset[execution_id]
                if e.state in TERMINAL_STATES:
                    continue  # finished executions keep what they ran with
                changes = _adopted(d, unset, ("max_attempts", "timeout", "priority", "queue"))
                if "max_attempts" in changes:  # never fewer than the attempt it is on
                    changes["max_attempts"] = max(changes["max_attempts"], e.attempt)
                self._rows[execution_id] = replace(e, **changes)
                adopted += 1
            for schedule_id, unset in list(self._schedule_unset.items()):
                s = self._schedules[schedule_id]
                if s.job != entry.name:
                    continue
                del self._schedule_unset[schedule_id]
                changes = _adopted(d, unset, ("max_attempts", "priority", "queue"))
                self._schedules[schedule_id] = replace(s, **changes)
                adopted += 1
            return adopted

    def _mark_schedule_unset(self, schedule_id: str, unset: str) -> None:
        with self._lock:
            s = self._schedules.get(schedule_id)
            if s is not None and s.job_version is None:
                self._schedule_unset[schedule_id] = unset

    def _read_catalogue(self) -> list[JobEntry]:
        with self._lock:
            return list(self._jobs.values())

    def deregister_node(self, node_id: str) -> None:
        with self._lock:
            self._nodes.pop(node_id, None)

    def nodes(self, *, live_only: bool = True) -> list[Node]:
        with self._lock:
            now = self.clock.now()
            return sorted(
                (n for n in self._nodes.values() if not live_only or n.is_live(now)),
                key=lambda n: n.id,
            )

    def _resize_buckets(self, num_buckets: int, *, force: bool) -> BucketsResized:
        # Nothing to record: the count is this store's config, which lives as long as it.
        with self._lock:
            previous = self.config.num_buckets
            now = self.clock.now()
            live = sorted(n.id for n in self._nodes.values() if n.is_live(now))
            moves, resized = plan_resize(
                live,
                previous,
                num_buckets,
                force=force,
                unfinished=lambda: [
                    (e.id, e.bucket_key, e.bucket)
                    for e in self._rows.values()
                    if e.state in UNFINISHED_STATES
                ],
            )
            for execution_id, bucket in moves:
                self._rows[execution_id] = replace(self._rows[execution_id], bucket=bucket)
            return resized

    def _orphans(
        self, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
    ) -> list[Execution]:
        with self._lock:
            cutoff = self.clock.now() - older_than
            stuck = (
                e
                for e in self._rows.values()
                if not e.state.is_terminal and e.bucket in buckets and e.updated_at <= cutoff
            )
            return sorted(stuck, key=lambda e: (e.updated_at, e.id))[:limit]


def _adopted(defaults: JobDefaults, unset: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The ``fields`` a job's ``defaults`` give where ``unset`` lists them (and it has one)."""
    listed = unset.split(",")
    return {
        name: getattr(defaults, name)
        for name in fields
        if name in listed and getattr(defaults, name) is not None
    }
