"""Flow control's verbs as coroutines: a part of :class:`~fencepost.store.asyncstore.AsyncStore`
(see :mod:`fencepost.store.async_core`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Unpack

from fencepost.domain.checks import require_int, require_queue
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import NotFound
from fencepost.domain.filters import checked
from fencepost.domain.limits import (
    FlowChange,
    Limit,
    LimitOptions,
    ThrottleCount,
    new_limit,
    require_scope,
)
from fencepost.store import sqlflow
from fencepost.store.async_core import AsyncVerbs
from fencepost.store.executors import Plan, Steps
from fencepost.store.flow import Throttle, flow_actor


class AsyncFlowVerbs(AsyncVerbs):
    """Limits and paused queues, awaited (see :class:`~fencepost.store.flow.FlowVerbs`)."""

    async def set_limit(
        self, scope: str, *, actor: str = "operator", **options: Unpack[LimitOptions]
    ) -> Limit:
        """:meth:`Store.set_limit <fencepost.store.flow.FlowVerbs.set_limit>`, awaited."""

        def plan(store: Any) -> Plan[Limit]:
            who = flow_actor(actor)
            limit = new_limit(scope, **checked(options, LimitOptions, "set_limit"), updated_by=who)
            return sqlflow.set_limit_plan(store, limit)

        stored: Limit = await self._verb(lambda s: s.set_limit(scope, actor=actor, **options), plan)
        self._flow_changed()
        return stored

    async def limits(self) -> list[Limit]:
        """:meth:`Store.limits <fencepost.store.flow.FlowVerbs.limits>`, awaited."""
        found = await self._verb(lambda s: s.limits(), sqlflow.read_limits_plan)
        return sorted(found, key=lambda lim: lim.scope)

    async def remove_limit(self, scope: str, *, actor: str = "operator") -> None:
        """:meth:`Store.remove_limit <fencepost.store.flow.FlowVerbs.remove_limit>`, awaited."""

        def plan(store: Any) -> Plan[None]:
            name = require_scope(scope)
            removing = sqlflow.remove_limit_plan(store, name, flow_actor(actor))

            def steps() -> Steps[None]:
                if not (yield from removing.steps):
                    raise NotFound(name, subject="limit")

            return Plan(steps())

        await self._verb(lambda s: s.remove_limit(scope, actor=actor), plan)
        self._flow_changed()

    async def pause_queue(self, name: str, *, actor: str = "operator") -> Limit:
        """:meth:`Store.pause_queue <fencepost.store.flow.FlowVerbs.pause_queue>`, awaited."""
        stored: Limit = await self._verb(
            lambda s: s.pause_queue(name, actor=actor), self._pause_plan(name, actor, paused=True)
        )
        self._flow_changed()
        return stored

    async def resume_queue(self, name: str, *, actor: str = "operator") -> Limit | None:
        """:meth:`Store.resume_queue <fencepost.store.flow.FlowVerbs.resume_queue>`, awaited."""
        stored: Limit = await self._verb(
            lambda s: s.resume_queue(name, actor=actor), self._pause_plan(name, actor, paused=False)
        )
        self._flow_changed()
        return stored

    @staticmethod
    def _pause_plan(name: str, actor: str, *, paused: bool) -> Callable[[Any], Plan[Limit]]:
        """The plan of pausing (or resuming) queue ``name``, its arguments checked."""
        return lambda s: sqlflow.pause_plan(
            s, require_queue(name, "name"), flow_actor(actor), paused=paused
        )

    async def paused_queues(self) -> list[Limit]:
        """:meth:`Store.paused_queues <fencepost.store.flow.FlowVerbs.paused_queues>`, awaited."""
        return [lim for lim in await self.limits() if lim.paused]

    async def flow_changes(self, *, limit: int = 100) -> list[FlowChange]:
        """:meth:`Store.flow_changes <fencepost.store.flow.FlowVerbs.flow_changes>`, awaited."""
        return await self._verb(
            lambda s: s.flow_changes(limit=limit),
            lambda s: sqlflow.changes_plan(s, require_int(limit, "limit", low=1, high=10_000)),
        )

    async def throttled(self, *, window: float | timedelta = 3600.0) -> list[ThrottleCount]:
        """:meth:`Store.throttled <fencepost.store.flow.FlowVerbs.throttled>`, awaited."""
        return await self._verb(
            lambda s: s.throttled(window=window),
            lambda s: sqlflow.throttled_plan(s, as_duration(window, field="window")),
        )

    async def throttles(self, execution_id: str) -> list[Throttle]:
        """:meth:`Store.throttles <fencepost.store.flow.FlowVerbs.throttles>`, awaited."""
        return await self._verb(
            lambda s: s.throttles(execution_id),
            lambda s: sqlflow.throttles_plan(s, execution_id),
        )
