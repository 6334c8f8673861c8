"""Queues as an operator reads them: paused or not (by whom, since when), their limit,
and their executions by state.

``fencepost queues ls``, ``GET /queues`` and ``Client.queues`` show the same thing,
built here once from two reads of a store: its limits (``Store.limits``) and its
executions by queue and state (``Store.stats().by_queue``). A queue is known when
it holds executions or has a stored limit or pause. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fencepost.domain.limits import Limit, scope_of
from fencepost.domain.states import State


@dataclass(frozen=True, kw_only=True)
class QueueView:
    """One queue: whether it is paused, its limit, and (when read) its executions."""

    name: str
    paused: bool  #: nothing in it is claimed until it is resumed
    #: Who paused it and when: the latest change to its stored limit while it is paused
    #: (a limit set on a paused queue since counts as that change). None unless paused.
    paused_by: str | None = None
    paused_at: datetime | None = None
    #: Its rate and/or concurrency limit (scope ``queue:NAME``), pause flag included;
    #: None when it has neither (a queue that is only paused has no limit).
    limit: Limit | None = None
    #: Its executions by state, every state listed; None where they were not read
    #: (the answer of a pause or a resume).
    counts: dict[State, int] | None = None

    @property
    def scope(self) -> str:
        """``queue:NAME``, the scope of its limit."""
        return scope_of("queue", self.name)

    def stored(self) -> Limit:
        """The queue's limit as ``Store.pause_queue`` and ``Store.resume_queue`` return
        it: its limit, else its pause, else an empty :class:`Limit` of its scope."""
        if self.limit is not None:
            return self.limit
        if self.paused:
            return Limit(
                scope=self.scope, paused=True, updated_by=self.paused_by, updated_at=self.paused_at
            )
        return Limit(scope=self.scope)


def queue_view(
    name: str, stored: Limit | None, counts: Mapping[State, int] | None = None
) -> QueueView:
    """The view of queue ``name`` from its stored limit (None: none), and its counts."""
    paused = stored is not None and stored.paused
    limited = stored is not None and (stored.rate is not None or stored.concurrency is not None)
    return QueueView(
        name=name,
        paused=paused,
        paused_by=stored.updated_by if paused and stored is not None else None,
        paused_at=stored.updated_at if paused and stored is not None else None,
        limit=stored if limited else None,
        counts=None if counts is None else {state: counts.get(state, 0) for state in State},
    )


def queue_views(
    limits: Iterable[Limit], by_queue: Mapping[str, Mapping[State, int]]
) -> list[QueueView]:
    """Every known queue by name: those holding executions (``by_queue``, as
    ``Stats.by_queue``) and those with a stored limit or pause (``limits``, any scope:
    only ``queue:`` ones are read)."""
    stored = {lim.name: lim for lim in limits if lim.kind == "queue"}
    names = sorted(set(by_queue) | set(stored))
    return [queue_view(name, stored.get(name), by_queue.get(name, {})) for name in names]
