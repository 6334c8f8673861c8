"""The memory store's flow control: limits, paused queues and throttles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from fencepost.domain.limits import Limit, held_for
from fencepost.domain.states import (
    WAITING_STATES,
)
from fencepost.store.flow import (
    FlowChange,
    Throttle,
    ThrottleCount,
    describe,
)
from fencepost.store.memory.core import MemoryCore


class MemoryFlowControl(MemoryCore):
    """Limits, paused queues and the throttles they cause (see store.flow)."""

    def _set_limit(self, limit: Limit) -> Limit:
        with self._lock:
            now = self.clock.now()
            old = self._limits.get(limit.scope)
            stored = replace(limit, paused=old is not None and old.paused, updated_at=now)
            self._limits[limit.scope] = stored
            self._log_flow(now, stored.updated_by, "set", stored.scope, describe(stored))
            return stored

    def _read_limits(self) -> list[Limit]:
        with self._lock:
            return list(self._limits.values())

    def _remove_limit(self, scope: str, actor: str) -> bool:
        with self._lock:
            old = self._limits.get(scope)
            if old is None or (old.rate is None and old.concurrency is None):
                return False
            now = self.clock.now()
            if old.paused:
                self._limits[scope] = Limit(
                    scope=scope, paused=True, updated_by=old.updated_by, updated_at=old.updated_at
                )
            else:
                del self._limits[scope]
            self._log_flow(now, actor, "remove", scope, describe(old))
            return True

    def _pause_queue(self, queue: str, actor: str, paused: bool) -> Limit:
        scope = f"queue:{queue}"
        with self._lock:
            now = self.clock.now()
            old = self._limits.get(scope)
            if paused:
                if old is not None and old.paused:
                    return old
                new = replace(
                    old or Limit(scope=scope), paused=True, updated_by=actor, updated_at=now
                )
                self._limits[scope] = new
                self._log_flow(now, actor, "pause", scope, "")
                return new
            if old is None or not old.paused:
                return old or Limit(scope=scope)
            since = old.updated_at or now
            self._record_throttles(
                [
                    Throttle(e.id, scope, held_for(now, max(e.due_at, since)), now)
                    for e in self._rows.values()
                    if e.queue == queue and e.state in WAITING_STATES and e.due_at <= now
                ]
            )
            self._log_flow(now, actor, "resume", scope, "")
            if old.rate is None and old.concurrency is None:
                del self._limits[scope]
                return Limit(scope=scope)
            new = replace(old, paused=False, updated_by=actor, updated_at=now)
            self._limits[scope] = new
            return new

    def _declare_limits(self, limits: Sequence[Limit]) -> None:
        with self._lock:
            now = self.clock.now()
            for limit in limits:
                old = self._limits.get(limit.scope)
                if old is not None and (old.source != "code" or old.paused):
                    continue
                if old is not None and replace(old, updated_at=None, updated_by=None) == replace(
                    limit, updated_at=None, updated_by=None
                ):
                    continue
                self._limits[limit.scope] = replace(limit, updated_at=now)
                self._log_flow(
                    now, limit.updated_by or "publisher", "declare", limit.scope, describe(limit)
                )

    def _prune_flow(self, cutoff: datetime) -> None:
        with self._lock:
            now = self.clock.now()
            self._throttles = [t for t in self._throttles if t.at > cutoff]
            for key, bucket in list(self._flow_buckets.items()):
                lim = self._limits.get(key[0])
                if bucket.denied_at is not None and bucket.denied_at > cutoff:
                    continue
                full = (
                    lim is None
                    or lim.rate is None
                    or lim.burst is None
                    or bucket.level(now, lim.rate.per_second, lim.burst) >= lim.burst
                )
                if full:
                    del self._flow_buckets[key]

    def _flow_changes(self, limit: int) -> list[FlowChange]:
        with self._lock:
            return list(reversed(self._flow_log[-limit:]))

    def _throttled(self, window: timedelta | None) -> list[ThrottleCount]:
        with self._lock:
            if window is None:
                return [
                    ThrottleCount(s, int(c), timedelta(seconds=h))
                    for s, (c, h) in sorted(self._throttle_totals.items())
                ]
            since = self.clock.now() - window
            counts: dict[str, list[float]] = {}
            for t in self._throttles:
                if t.at >= since:
                    got = counts.setdefault(t.scope, [0, 0.0])
                    got[0] += 1
                    got[1] += t.held.total_seconds()
            return [
                ThrottleCount(s, int(c), timedelta(seconds=h))
                for s, (c, h) in sorted(counts.items())
            ]

    def _throttles_of(self, execution_id: str) -> list[Throttle]:
        with self._lock:
            self._row(execution_id)
            found = [t for t in self._throttles if t.execution_id == execution_id]
            return sorted(found, key=lambda t: t.at)

    def _log_flow(
        self, now: datetime, actor: str | None, action: str, scope: str, detail: str
    ) -> None:
        self._flow_log.append(FlowChange(now, actor or "operator", action, scope, detail))
