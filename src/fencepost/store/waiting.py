"""Waiting for executions to finish: one shared watcher per store, many waiters.

:meth:`Store.wait <fencepost.store.base.Store.wait>` blocks a thread and
``Store._wait_async`` suspends a coroutine until an execution is terminal. Neither
costs a thread or a connection per waiter: every waiter of a store registers with
the store's one :class:`Watcher`, whose background thread finds finished
executions for all of them at once (one query per look) and hands each waiter its
execution (a thread's through a :class:`threading.Event`, a coroutine's through
an asyncio future resolved with ``loop.call_soon_threadsafe``).

How the watcher learns that something finished is the backend's: SQLite polls
(:class:`PollingWatcher`), PostgreSQL listens for the notifications sent with every
terminal transition (``fencepost.store.postgres.waiting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from fencepost.domain.durations import as_duration
from fencepost.domain.errors import NotFound
from fencepost.domain.models import Execution

log = logging.getLogger(__name__)

#: A waiter's thread wakes at least this often (seconds), so that any finite
#: timeout, however large, is a deadline it keeps (Event.wait refuses huge ones).
_SLICE = 60.0

#: Looks up the watched executions in one query: ``fetch(watched, fresh)`` returns,
#: by id, those of ``watched`` that are terminal, and those of ``fresh`` (a subset of
#: ``watched``) whatever their state; an id of ``fresh`` it does not return is unknown.
Fetch = Callable[[Sequence[str], Sequence[str]], Mapping[str, Execution]]


def wait_seconds(timeout: object) -> float | None:
    """``timeout`` of a wait as seconds, or None (no bound); anything else names ``timeout``.

    Seconds (int or float) or a timedelta, zero allowed (look once). Negative, NaN,
    infinite and non-numbers are refused: None, not ``inf``, means no bound.
    """
    if timeout is None:
        return None
    return as_duration(timeout, field="timeout", allow_zero=True).total_seconds()


def timed_out(execution_id: str, seconds: float | None) -> TimeoutError:
    """The builtin TimeoutError a wait raises when its time is up."""
    return TimeoutError(f"execution {execution_id} was not finished after {seconds:g} seconds")


class Waiter:
    """One wait on one execution; resolved once, by the watcher's thread."""

    __slots__ = ("_done", "_future", "_loop", "error", "execution", "execution_id")

    def __init__(self, execution_id: str, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.execution_id = execution_id
        self.execution: Execution | None = None
        self.error: Exception | None = None
        self._loop = loop
        self._done = threading.Event() if loop is None else None
        self._future: asyncio.Future[Execution] | None = (
            None if loop is None else loop.create_future()
        )

    def resolve(self, execution: Execution | None, error: Exception | None = None) -> None:
        """Hand over the finished execution (or the error), from any thread."""
        self.execution, self.error = execution, error
        if self._done is not None:
            self._done.set()
        elif self._loop is not None and not self._loop.is_closed():
            # RuntimeError: the loop closed meanwhile, and nobody awaits any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        future = self._future
        if future is None or future.done():
            return
        if self.error is not None:
            future.set_exception(self.error)
        else:
            assert self.execution is not None
            future.set_result(self.execution)

    def block(self, seconds: float | None) -> Execution | None:
        """Block the calling thread until resolved or ``seconds`` pass (None: no bound)."""
        assert self._done is not None, "an asyncio waiter is awaited, not blocked on"
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
            if self._done.wait(max(0.0, left)):
                return self._result()
            if deadline is not None and time.monotonic() >= deadline:
                return None

    async def until(self, seconds: float | None) -> Execution | None:
        """Await resolution, or ``seconds`` (None: no bound); None when the time is up."""
        assert self._future is not None, "a thread's waiter is blocked on, not awaited"
        try:
            return await asyncio.wait_for(asyncio.shield(self._future), seconds)
        except TimeoutError:
            return None

    def _result(self) -> Execution:
        if self.error is not None:
            raise self.error
        assert self.execution is not None
        return self.execution


class Watcher:
    """The one background thread that finds finished executions for a store's waiters.

    The thread runs while anyone waits, and for :attr:`LINGER` seconds after, so a
    caller waiting for one execution after another does not start a thread each
    time. Each round it looks up, in one ``fetch``, the ids new waiters brought
    (whatever their state: an unknown id is reported as :class:`NotFound`) and the
    ids the backend says may have finished; a subclass decides which those are and
    how long to sleep between rounds (:meth:`_pause`).
    """

    #: Seconds the thread stays after its last waiter left.
    LINGER = 5.0

    def __init__(self, fetch: Fetch, *, name: str) -> None:
        self._fetch = fetch
        self._name = name
        self._lock = threading.Lock()
        self._waiters: dict[str, list[Waiter]] = {}
        #: Ids whose waiters arrived since the last round: looked up whatever their state.
        self._fresh: set[str] = set()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Set when there is something to do at once (new waiters, closing).
        self._poked = threading.Event()
        #: Look-ups made (one ``fetch``, one query, each), for tests and metrics.
        self.lookups = 0

    # -- waiters' side -----------------------------------------------------------------

    def watch(self, waiter: Waiter) -> None:
        """Register ``waiter``; the thread looks its execution up at once."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the store is closed")
            self._waiters.setdefault(waiter.execution_id, []).append(waiter)
            self._fresh.add(waiter.execution_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._poke()

    def forget(self, waiter: Waiter) -> None:
        """Unregister ``waiter`` (its time is up, or it was resolved)."""
        with self._lock:
            waiting = self._waiters.get(waiter.execution_id)
            if waiting is None:
                return
            if waiter in waiting:
                waiting.remove(waiter)
            if not waiting:
                del self._waiters[waiter.execution_id]
                self._fresh.discard(waiter.execution_id)

    def watched(self) -> int:
        """How many executions are waited for now."""
        with self._lock:
            return len(self._waiters)

    def close(self) -> None:
        """Stop the thread; waiters still registered are left to their timeouts."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._poke()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._closed_hook()

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        idle_since: float | None = None
        check_all = True  # a new thread has missed everything before it started
        while True:
            with self._lock:
                if self._closed:
                    return
                if not self._waiters:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since >= self.LINGER:
                        self._thread = None
                        self._idle_hook()
                        return
                else:
                    idle_since = None
            hinted = self._pause(check_all)
            check_all = False
            with self._lock:
                if self._closed:
                    return
                fresh = list(self._fresh)
                self._fresh.clear()
                if hinted is None:
                    ids = list(self._waiters)
                else:
                    ids = [i for i in set(hinted).union(fresh) if i in self._waiters]
            if not ids:
                continue
            try:
                self.lookups += 1
                found = self._fetch(ids, fresh)
            except Exception:
                # The store is unreachable for now: the waiters stay, and the next
                # rounds (all of them looked at again) find what finished meanwhile.
                log.warning("waiting for executions: look-up failed", exc_info=True)
                with self._lock:
                    self._fresh.update(i for i in fresh if i in self._waiters)
                check_all = True
                time.sleep(0.2)
                continue
            self._settle(ids, fresh, found)

    def _settle(
        self, ids: Iterable[str], fresh: Sequence[str], found: Mapping[str, Execution]
    ) -> None:
        resolved: list[tuple[Waiter, Execution | None, Exception | None]] = []
        fresh_ids = set(fresh)
        with self._lock:
            for id_ in ids:
                execution = found.get(id_)
                error: Exception | None
                if execution is not None and execution.state.is_terminal:
                    error = None
                elif execution is None and id_ in fresh_ids:
                    error = NotFound(id_)
                else:
                    continue
                for waiter in self._waiters.pop(id_, []):
                    resolved.append((waiter, execution, error))
        for waiter, execution, error in resolved:
            waiter.resolve(execution, error)

    def _poke(self) -> None:
        self._poked.set()

    def _pause(self, check_all: bool) -> Iterable[str] | None:
        """Sleep until there may be something to look up; return which ids (None: all).

        ``check_all`` asks for None back without sleeping long (the thread just
        started, or a look-up failed). New waiters set :attr:`_poked`; the ids they
        bring are added by the caller.
        """
        raise NotImplementedError

    def _idle_hook(self) -> None:
        """Called by the thread as it stops for want of waiters (release resources)."""

    def _closed_hook(self) -> None:
        """Called once the thread is stopped by :meth:`close`."""


class PollingWatcher(Watcher):
    """Looks every watched execution up, often while anyone waits, not at all otherwise.

    The interval starts at :attr:`FIRST` seconds when a waiter arrives and grows by
    half each round up to :attr:`LONGEST`: a completion is seen within 20 ms when it
    comes soon, and a long wait costs five queries a second, one for all waiters.
    """

    FIRST = 0.02
    LONGEST = 0.2

    def __init__(self, fetch: Fetch, *, name: str) -> None:
        super().__init__(fetch, name=name)
        self._interval = self.FIRST

    def _poke(self) -> None:
        self._interval = self.FIRST
        super()._poke()

    def _pause(self, check_all: bool) -> Iterable[str] | None:
        if check_all:
            return None
        with self._lock:
            busy = bool(self._waiters)
        if not busy:  # only lingering: sleep until a waiter arrives (or the linger ends)
            self._poked.wait(self.LINGER)
            self._poked.clear()
            return ()  # the new waiters' fresh ids are looked up by the caller
        if self._poked.wait(self._interval):
            self._poked.clear()
            return ()
        self._interval = min(self.LONGEST, self._interval * 1.5)
        return None


def block_on(watcher: Watcher, execution_id: str, seconds: float | None) -> Execution:
    """Block until ``watcher`` finds ``execution_id`` terminal; TimeoutError after ``seconds``."""
    waiter = Waiter(execution_id)
    watcher.watch(waiter)
    try:
        found = waiter.block(seconds)
    finally:
        watcher.forget(waiter)
    if found is None:
        raise timed_out(execution_id, seconds)
    return found


async def await_on(watcher: Watcher, execution_id: str, seconds: float | None) -> Execution:
    """:func:`block_on` for a coroutine: it awaits a future, no thread of its own."""
    waiter = Waiter(execution_id, asyncio.get_running_loop())
    watcher.watch(waiter)
    try:
        found = await waiter.until(seconds)
    finally:
        watcher.forget(waiter)
    if found is None:
        raise timed_out(execution_id, seconds)
    return found


class HintedWatcher(Watcher):
    """Told by its store which executions finished (:meth:`hint`); looks only at those.

    Every :attr:`RECHECK` seconds it looks at every watched execution anyway, so a
    hint that never came only delays a waiter.
    """

    RECHECK = 2.0

    def __init__(self, fetch: Fetch, *, name: str) -> None:
        super().__init__(fetch, name=name)
        self._hinted: set[str] = set()
        self._last_check = time.monotonic()

    def hint(self, execution_ids: Iterable[str]) -> None:
        """These executions may have finished (called by the store, from any thread)."""
        with self._lock:
            if not self._waiters:
                return
            self._hinted.update(execution_ids)
        self._poke()

    def _pause(self, check_all: bool) -> Iterable[str] | None:
        if not check_all:
            left = self._last_check + self.RECHECK - time.monotonic()
            if left > 0 and self._poked.wait(left):
                self._poked.clear()
                with self._lock:
                    hinted, self._hinted = self._hinted, set()
                return hinted
        self._last_check = time.monotonic()
        with self._lock:
            self._hinted.clear()
        return None
