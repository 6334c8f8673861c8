"""The handlers' side of a worker: threads and an event loop that run them, and timeouts.

Plain functions run on ``concurrency`` handler threads, each taking runs from the
claim buffer; coroutines run on one event loop thread. A finished handler drops its
outcome in the queue the control thread collects and wakes it. A handler past its
timeout is told to stop and abandoned: its thread is replaced, and what it returns
later is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from fencepost import tracing
from fencepost.domain.errors import Cancelled
from fencepost.worker.outbox import Outbox
from fencepost.worker.runs import (
    CANCEL_REQUESTED,
    TIMED_OUT,
    Run,
    RunOutcome,
    about,
    completion,
    failure,
    inputs_of,
    inputs_refused,
)
from fencepost.worker.state import WorkerState

log = logging.getLogger("fencepost.worker")


class HandlerPool:
    """Starting, running, timing out and abandoning handlers (a part of ``Worker``).

    Finished handlers' outcomes go to ``outbox`` (:meth:`Outbox.put`); a timeout's
    outcome too, decided on the control thread.
    """

    def __init__(self, state: WorkerState, outbox: Outbox) -> None:
        self.state = state
        self.outbox = outbox
        self._buffer = state.buffer
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    def dispatch(self) -> None:
        """Start the buffered coroutine runs that free slots allow (threads take their own)."""
        for run in self._buffer.take_coroutines():
            if self.state.metrics is not None:
                self.state.metrics.started(run)
            loop = self._event_loop()
            run.future = asyncio.run_coroutine_threadsafe(self._run_async(run), loop)

    def start(self) -> None:
        for _ in range(self.state.options.concurrency):
            self._spawn_handler()

    def _spawn_handler(self) -> None:
        thread = threading.Thread(
            target=self._handler_thread, name="fencepost-handler", daemon=True
        )
        thread.start()
        # Abandoned handlers' threads leave when their handler finally returns.
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)

    def _handler_thread(self) -> None:
        while True:
            run = self._buffer.take()
            if run is None:
                return
            if self.state.metrics is not None:
                self.state.metrics.started(run)
            outcome = self._execute(run)
            outcome.ended_at = self.state.monotonic()
            mine = self._buffer.free(run)  # False: abandoned, the slot went to a replacement
            self.outbox.put(outcome)
            if not mine:
                return  # abandoned after a timeout: a replacement thread took our place

    def _execute(self, run: Run) -> RunOutcome:
        refused = inputs_refused(run)
        if refused is not None:
            return refused
        try:
            with tracing.current(run.span):  # the handler's own spans nest in the attempt's
                result = run.spec.run(run.ctx, inputs_of(run.lease))
        except BaseException as exc:  # the handler's failure is the execution's, not ours
            return failure(run, exc)
        return completion(run, result)

    async def _run_async(self, run: Run) -> None:
        try:
            refused = inputs_refused(run)
            if refused is not None:
                outcome = refused
            else:
                with tracing.current(run.span):
                    result = await run.spec.run(run.ctx, inputs_of(run.lease))
                outcome = completion(run, result)
        except asyncio.CancelledError:
            outcome = failure(run, Cancelled(run.ctx.stop_reason or CANCEL_REQUESTED))
        except BaseException as exc:
            outcome = failure(run, exc)
        outcome.ended_at = self.state.monotonic()
        self._buffer.free(run)
        self.outbox.put(outcome)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=run_loop, args=(loop,), name="fencepost-async", daemon=True
            )
            self._loop_thread.start()
            self._loop = loop
        return self._loop

    def enforce_timeouts(self, now: float) -> None:
        for run in list(self.state.runs.values()):
            if run.deadline is None or run.paused_at is not None or now < run.deadline:
                continue
            timeout = run.lease.timeout or run.spec.timeout
            log.warning(
                "execution %s (epoch %d, owner %s) timed out after %s; abandoning its handler",
                run.lease.execution_id,
                run.lease.epoch,
                self.state.owner,
                timeout,
                extra=about(run.lease),
            )
            self._abandon(run, TIMED_OUT)
            outcome = RunOutcome(run, "timeout", error=f"timed out after {timeout}")
            if self.state.metrics is not None:
                self.state.metrics.finished(outcome, now)
            self.outbox.add(outcome)

    def stop(self) -> None:
        """Stop the event loop of coroutine handlers (threads leave with the buffer's close)."""
        if self._loop is not None and self._loop_thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(2.0)

    def _abandon(self, run: Run, reason: str) -> None:
        """Tell a handler to stop and stop waiting for it; its thread is replaced."""
        run.finished = True
        run.control.request_stop(reason)
        self.state.runs.pop(run.lease.execution_id, None)
        # Whoever frees the slot first owns what follows: if the handler returned just
        # now, its thread carries on and needs no replacement.
        handler_still_running = self._buffer.free(run)
        if run.future is not None:
            run.future.cancel()
        elif handler_still_running and not self.state.stopping.is_set():
            self._spawn_handler()


def run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run coroutine handlers until the worker stops; then cancel stragglers and close."""
    loop.run_forever()
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
    loop.close()
