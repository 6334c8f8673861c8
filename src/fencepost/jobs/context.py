"""What a handler sees of its execution, and how it talks back to the worker.

A :class:`Context` is handed to every handler. It carries the identity of the
attempt (``execution_id``, ``slot``, ``attempt``, ``epoch`` — what a handler
needs to make external side effects idempotent) and two ways to talk back:
:meth:`Context.checkpoint`, which records progress, raises
:class:`~fencepost.domain.errors.Cancelled` when the handler should stop, and
blocks while the execution is paused; and :meth:`Context.snooze`, which ends the
attempt by raising :class:`~fencepost.domain.errors.Snooze`.

The worker drives the other side through the attempt's :class:`RunControl`, which
it makes and keeps; a handler sees only the Context. Nothing here touches the store:
progress reaches it with the worker's next batched heartbeat, so a checkpoint costs no
round trip.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn

from fencepost.domain import payloads
from fencepost.domain.errors import Cancelled, Snooze
from fencepost.domain.models import JSON, Lease

#: The reason a checkpoint gives when the worker learned the lease is gone.
LEASE_LOST = "lease lost"

#: How often a paused handler's checkpoint re-checks for a stop while it waits.
_PAUSE_POLL = 0.05


class RunControl:
    """The worker's side of one attempt: it asks the handler to stop, pauses and
    resumes it, marks its lease lost, and takes the progress the handler recorded.
    The attempt's :class:`Context` reads it; the worker makes one per claimed
    execution and keeps it (``Run.control``)."""

    __slots__ = (
        "lock",
        "lost",
        "paused",
        "progress",
        "progress_dirty",
        "stop_event",
        "stop_reason",
        "stopped",
        "wake",
    )

    def __init__(self, wake: Callable[[], None] = lambda: None) -> None:
        #: Called when the handler records progress (the worker's heartbeat wakes).
        self.wake = wake
        self.lock = threading.Lock()
        # Plain flags, and an Event only for a handler that waits: a worker makes one
        # per claimed execution, and two Events each cost more than the rest.
        self.stopped = False
        self.stop_event: threading.Event | None = None
        self.paused = False
        self.stop_reason: str | None = None
        self.progress: JSON = None
        self.progress_dirty = False
        self.lost = False

    def request_stop(self, reason: str) -> None:
        """Ask the handler to stop (its next checkpoint raises :class:`Cancelled`);
        the first reason given is kept."""
        with self.lock:
            if self.stop_reason is None:
                self.stop_reason = reason
            self.stopped = True
            event = self.stop_event
        if event is not None:
            event.set()

    def lose(self) -> None:
        """The lease is gone: the handler's next checkpoint raises :class:`Cancelled`."""
        self.lost = True

    def pause(self) -> None:
        """Block the handler's checkpoints until :meth:`resume`."""
        self.paused = True

    def resume(self) -> None:
        """Let the handler's checkpoints return again."""
        self.paused = False

    def has_progress(self) -> bool:
        """Whether the handler checkpointed since the last :meth:`take_progress`."""
        return self.progress_dirty

    def take_progress(self) -> tuple[bool, JSON]:
        """(whether a checkpoint happened since the last call, the latest progress)."""
        with self.lock:
            dirty, self.progress_dirty = self.progress_dirty, False
            return dirty, self.progress


class Context:
    """One attempt of one execution, as its handler sees it."""

    def __init__(self, lease: Lease, control: RunControl | None = None) -> None:
        self._lease = lease
        self._control = RunControl() if control is None else control

    # -- identity --------------------------------------------------------------------

    @property
    def execution_id(self) -> str:
        """The execution's id: stable across retries, takeovers and replays."""
        return self._lease.execution_id

    @property
    def job(self) -> str:
        """The job's name."""
        return self._lease.job

    @property
    def job_version(self) -> int | None:
        """The job version the execution is pinned to (None: any)."""
        return self._lease.job_version

    @property
    def slot(self) -> str | None:
        """The schedule occurrence's nominal UTC instant, for materialized executions."""
        return self._lease.slot

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self._lease.attempt

    @property
    def epoch(self) -> int:
        """The fencing token of this attempt's lease."""
        return self._lease.epoch

    @property
    def owner(self) -> str:
        """The worker that holds the lease."""
        return self._lease.owner

    @property
    def inputs(self) -> JSON:
        """The execution's inputs, as submitted."""
        return self._lease.inputs

    @property
    def lease(self) -> Lease:
        """The lease this attempt runs under (as claimed; renewals keep owner and epoch)."""
        return self._lease

    # -- talking back ----------------------------------------------------------------

    @property
    def stop_reason(self) -> str | None:
        """Why the handler should stop (cancel, timeout, lost lease), or None."""
        return self._control.stop_reason

    @property
    def stopping(self) -> bool:
        """Whether the handler has been asked to stop."""
        return self._control.stopped

    @property
    def lease_lost(self) -> bool:
        """Whether the worker learned that this lease is gone (expired and taken over).

        The handler may keep running, but its result will be refused; the next
        checkpoint raises :class:`Cancelled`.
        """
        return self._control.lost

    @property
    def paused(self) -> bool:
        """Whether a pause is in force (checkpoints block until resumed)."""
        return self._control.paused

    def checkpoint(self, progress: JSON = None) -> None:
        """Record ``progress`` (JSON, optional) and a heartbeat; stop or wait if told to.

        Raises :class:`Cancelled` when the handler should stop, and blocks while
        the execution is paused (returning when it is resumed). Progress is
        stored with the worker's next heartbeat, within about a second.
        """
        self._record(progress)
        while self._control.paused and not self._should_stop():
            time.sleep(_PAUSE_POLL)
        self._raise_if_stopping()

    async def acheckpoint(self, progress: JSON = None) -> None:
        """:meth:`checkpoint` for coroutines: waits without blocking the event loop."""
        self._record(progress)
        while self._control.paused and not self._should_stop():
            await asyncio.sleep(_PAUSE_POLL)
        self._raise_if_stopping()

    def _record(self, progress: JSON) -> None:
        """Keep ``progress`` (refused at once if it is not JSON) for the next heartbeat."""
        if progress is not None:
            payloads.encode(progress, field="progress", limit=payloads.DEFAULT_MAX_PAYLOAD_BYTES)
        control = self._control
        with control.lock:
            if progress is not None:
                control.progress = progress
            control.progress_dirty = True
        control.wake()

    def _should_stop(self) -> bool:
        return self._control.stopped or self._control.lost

    def _raise_if_stopping(self) -> None:
        if self._control.stopped:
            raise Cancelled(self._control.stop_reason or "stop requested")
        if self._control.lost:
            raise Cancelled(LEASE_LOST)

    def snooze(self, seconds: float | timedelta, reason: str | None = None) -> NoReturn:
        """Stop here and run again in ``seconds``, without using up an attempt.

        Raises :class:`~fencepost.domain.errors.Snooze`; let it propagate (the
        worker gives the execution back, due ``seconds`` from the store's now, and
        the next claim gets this same attempt number). ``seconds`` is > 0 and at
        most 30 days, else :class:`~fencepost.domain.errors.ValidationError` naming
        ``seconds``. One execution may snooze 100 times; past that a snooze fails
        the attempt (``snoozed too often``) and the job's retries apply.
        """
        raise Snooze(seconds, reason)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return True early if the handler is asked to stop."""
        control = self._control
        with control.lock:
            if control.stopped:
                return True
            if control.stop_event is None:
                control.stop_event = threading.Event()
            event = control.stop_event
        return event.wait(seconds)
