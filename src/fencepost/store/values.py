"""The values the store contract passes around: its settings, validated arguments, defaults.

Also the pure helpers every backend shares (the failure and set-aside events, the
decoding of claimed inputs) and the validation of filters and fences. No I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from fencepost.domain import payloads
from fencepost.domain.buckets import DEFAULT_NUM_BUCKETS, MAX_NUM_BUCKETS, bucket_for
from fencepost.domain.catalogue import unknown_jobs_policy
from fencepost.domain.checks import INT32_MAX, MAX_QUEUE, require_int, require_name
from fencepost.domain.defaults import DEFAULT_COMMAND_TTL as DEFAULT_COMMAND_TTL
from fencepost.domain.defaults import DEFAULT_TTL as DEFAULT_TTL
from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.events import ExecutionEvent, ExecutionFailed, ExecutionTimedOut
from fencepost.domain.ids import id_floor
from fencepost.domain.models import JSON, Execution, Fence, LiveFence, Schedule
from fencepost.domain.nodes import default_node_id as default_node_id
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.schedules import NewOccurrence
from fencepost.domain.states import TERMINAL_STATES, AttemptOutcome, State
from fencepost.store.observers import Observer
from fencepost.timing.clock import Clock, SystemClock

#: The longest pause prune takes between batches, in seconds.
PRUNE_YIELD_CAP = 0.1

#: The error text recorded when a completion's result is not acceptable JSON.
RESULT_INVALID = payloads.RESULT_INVALID
#: The error prefix of an execution a claim set aside: its stored inputs cannot be delivered.
PAYLOAD_UNREADABLE = payloads.PAYLOAD_UNREADABLE
#: Default window of :meth:`Store.stats`: the last hour.
DEFAULT_STATS_WINDOW = timedelta(hours=1)
#: Default window of :meth:`Store.job_counts`: the last day.
DEFAULT_JOB_COUNTS_WINDOW = timedelta(days=1)
#: How far before a :meth:`Store.job_counts` window the ids it reads start. An id
#: carries its submitter's clock and ``created_at`` the store's (on PostgreSQL, the
#: server's): an execution created just inside the window by a submitter whose clock
#: runs behind has an id minted before the window. Ids are read from this much earlier,
#: then ``created_at`` decides.
ID_CLOCK_SLACK = timedelta(minutes=5)
#: The states :meth:`Store.bucket_counts` counts by default: work not finished yet.
UNFINISHED_STATES = (State.SCHEDULED, State.RETRY_WAIT, State.RUNNING)
MAX_LIMIT = 10_000
MAX_PRUNE_BATCH = 100_000
#: The longest name a filter or fence may carry (ids, job names, owners). Longer
#: than any stored name, so a filter never refuses what a store could hold.
MAX_NAME_IN_FILTER = 1024


class _Unchosen(int):
    """The bucket count nobody chose: :data:`DEFAULT_NUM_BUCKETS` as
    :attr:`StoreConfig.num_buckets`'s default.

    An ``int`` like any other, except that a store recording another count adopts
    that count instead of refusing to open (see :func:`adopt_buckets`).
    """

    __slots__ = ()


#: :attr:`StoreConfig.num_buckets` when it is not given: 64, marked as nobody's choice.
UNCHOSEN_NUM_BUCKETS: int = _Unchosen(DEFAULT_NUM_BUCKETS)


#: How a fenced verb decides its event: from the execution as this transaction holds
#: it, at the store's now (see :meth:`Store._fenced_change`).
Decide = Callable[[Execution, datetime], ExecutionEvent]


def always(event: ExecutionEvent) -> Decide:
    """A decision that does not depend on the row: ``event`` whatever it holds."""
    return lambda _current, _now: event


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Settings shared by every backend."""

    clock: Clock = field(default_factory=SystemClock)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Source of retry jitter; inject a seeded ``random.Random`` for reproducible tests.
    rng: random.Random = field(default_factory=random.Random)
    max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES
    #: How many buckets executions are spread over (``bucket_for(bucket_key or id,
    #: num_buckets)``), 1 to :data:`MAX_NUM_BUCKETS`. A SQLite or PostgreSQL database
    #: records the count of the first process that migrates it; a store given another
    #: count refuses to open, and one not given a count (this default) adopts the
    #: recorded one (see :func:`adopt_buckets` and :attr:`buckets_chosen`).
    num_buckets: int = UNCHOSEN_NUM_BUCKETS
    #: A submit naming a job no worker published: ``allow`` (stored with the store's
    #: defaults, the job's published ones filling in what the submitter left out when a
    #: worker publishes it) or ``refuse`` (a ValidationError naming ``job``). See
    #: :data:`~fencepost.domain.catalogue.UNKNOWN_JOBS`.
    unknown_jobs: str = "allow"
    #: Who is told of the store's leasing work (see :mod:`fencepost.store.observers`).
    observers: tuple[Observer, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "unknown_jobs", unknown_jobs_policy(self.unknown_jobs))
        if self.max_payload_bytes < 1:
            raise ValidationError(
                "max_payload_bytes", f"must be >= 1, got {self.max_payload_bytes}"
            )
        require_int(self.num_buckets, "num_buckets", low=1, high=MAX_NUM_BUCKETS)

    @property
    def buckets_chosen(self) -> bool:
        """Whether :attr:`num_buckets` was given (so a database recording another count
        is refused) rather than left at its default (so the recorded count is adopted)."""
        return not isinstance(self.num_buckets, _Unchosen)


def adopt_buckets(config: StoreConfig, recorded: int | None, location: str) -> StoreConfig:
    """The settings a store opened at ``location`` runs with, given the bucket count its
    database records (None: it records none, as a store that only reads an emptied
    database may find).

    A count left at its default takes the recorded one; a count that was given must
    equal it, else :class:`ValidationError` on ``num_buckets`` saying both and how to
    change the record (:meth:`Store.resize_buckets`, ``fencepost db set-buckets``).
    Executions submitted with another count than the workers' would land in buckets
    nobody claims from.
    """
    if recorded is None or recorded == config.num_buckets:
        return config if recorded is None else replace(config, num_buckets=recorded)
    if not config.buckets_chosen:
        return replace(config, num_buckets=recorded)
    raise ValidationError(
        "num_buckets",
        f"{location} records num_buckets={recorded}, this process asked for "
        f"{config.num_buckets}: leave num_buckets out (or give {recorded}) to use the "
        f"recorded count, or change it for every process with `fencepost db set-buckets "
        f"{config.num_buckets} --db URL` (stop the workers first)",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class BucketsResized:
    """What :meth:`Store.resize_buckets` did."""

    previous: int  #: the count recorded before
    num_buckets: int  #: the count recorded now
    unfinished: int  #: unfinished executions looked at (SCHEDULED, RETRY_WAIT, RUNNING)
    moved: int  #: of those, how many changed bucket
    #: Live nodes registered when it ran (only with ``force``: otherwise it refuses):
    #: processes that still use the previous count until they are restarted.
    live_nodes: tuple[str, ...] = ()


def rebucketed(
    rows: Iterable[tuple[str, str | None, int]], num_buckets: int
) -> list[tuple[str, int]]:
    """``(id, new bucket)`` of each ``(id, bucket_key, bucket)`` whose bucket under
    ``num_buckets`` differs: ``bucket_for(bucket_key or id, num_buckets)``, the rule
    every submit applies."""
    moves = []
    for execution_id, key, bucket in rows:
        wanted = bucket_for(key if key is not None else execution_id, num_buckets)
        if wanted != bucket:
            moves.append((execution_id, wanted))
    return moves


def plan_resize(
    live: Sequence[str],
    previous: int,
    num_buckets: int,
    *,
    force: bool,
    unfinished: Callable[[], Sequence[tuple[str, str | None, int]]],
) -> tuple[list[tuple[str, int]], BucketsResized]:
    """A resize of the recorded bucket count from ``previous`` to ``num_buckets``, decided
    once for every backend: the ``(id, new bucket)`` moves to write, and what
    :meth:`Store.resize_buckets` returns.

    Refuses (:func:`live_nodes_refusal`) while nodes are ``live`` and the count changes,
    unless ``force``; ``unfinished`` (the ``(id, bucket_key, bucket)`` of every unfinished
    execution) is read only when the resize goes on.
    """
    check_resize(live, previous, num_buckets, force=force)
    changes = num_buckets != previous
    found = unfinished()
    moves = rebucketed(found, num_buckets)
    return moves, BucketsResized(
        previous=previous,
        num_buckets=num_buckets,
        unfinished=len(found),
        moved=len(moves),
        live_nodes=tuple(live) if changes else (),
    )


def check_resize(live: Sequence[str], previous: int, num_buckets: int, *, force: bool) -> None:
    """Refuse a resize (:func:`live_nodes_refusal`) while nodes are ``live`` and the
    count changes from ``previous``, unless ``force``: what :func:`plan_resize` checks
    first, for a plan that reads the unfinished executions only once it passes."""
    if live and num_buckets != previous and not force:
        raise live_nodes_refusal(live, num_buckets)


def live_nodes_refusal(node_ids: Sequence[str], num_buckets: int) -> ValidationError:
    """The refusal of a resize while ``node_ids`` are live: they run with the old count."""
    more = f" and {len(node_ids) - 5} more" if len(node_ids) > 5 else ""
    shown = ", ".join(node_ids[:5]) + more
    return ValidationError(
        "num_buckets",
        f"{len(node_ids)} live node(s) still run with the recorded count ({shown}): stop "
        f"every worker and service first (a crashed one counts until its registration "
        f"expires), or force the change to {num_buckets} (force=True, --force) and restart "
        "them after; nothing was changed",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionFilter:
    """Validated filters of :meth:`Store.query`."""

    states: tuple[State, ...] | None
    job: str | None
    schedule: str | None
    queue: str | None = None
    bucket: int | None
    buckets: tuple[int, ...] | None  #: any of these (``bucket`` and ``buckets`` never both)
    due_after: datetime | None
    due_before: datetime | None
    limit: int
    after: str | None
    newest_first: bool = False
    #: Only executions one of whose attempts ended with this outcome.
    outcome: AttemptOutcome | None = None
    #: Only executions under this limit key.
    limit_key: str | None = None
    #: Only RUNNING executions whose lease this owner holds.
    owner: str | None = None
    #: ``created_after <= created_at < created_before``.
    created_after: datetime | None = None
    created_before: datetime | None = None
    #: Only finished executions (``TERMINAL_STATES``: a finished row's ``updated_at`` is
    #: when it finished, as nothing changes it but a replay, which unfinishes it) with
    #: ``finished_after <= updated_at < finished_before``.
    finished_after: datetime | None = None
    finished_before: datetime | None = None
    #: Only executions whose latest error contains this text (ASCII letters in any case).
    error: str | None = None

    @property
    def id_range(self) -> tuple[str | None, str | None]:
        """The ids the filters allow, as an exclusive ``(above, below)`` pair (None:
        unbounded on that side): the creation bounds' (see :func:`created_id_range`);
        an execution that finished before ``finished_before`` was created before it."""
        before = [t for t in (self.created_before, self.finished_before) if t is not None]
        return created_id_range(self.created_after, min(before, default=None))

    def matches_finished(self, state: State, updated_at: datetime) -> bool:
        """Whether an execution in ``state`` last changed at ``updated_at`` passes the
        finished bounds (always, when none is given)."""
        if self.finished_after is None and self.finished_before is None:
            return True
        return (
            state in TERMINAL_STATES
            and (self.finished_after is None or updated_at >= self.finished_after)
            and (self.finished_before is None or updated_at < self.finished_before)
        )

    def matches_error(self, error: str | None) -> bool:
        """Whether an execution whose latest error is ``error`` passes the error filter."""
        return self.error is None or (
            error is not None and ascii_lower(self.error) in ascii_lower(error)
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleFilter:
    """Validated filters of :meth:`Store.schedules`."""

    job: str | None
    paused: bool | None
    limit: int
    after: str | None
    due_before: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimArguments:
    """The validated arguments of :meth:`Store.claim`."""

    owner: str
    limit: int
    ttl: timedelta
    jobs: tuple[str, ...] | None
    buckets: tuple[int, ...] | None
    max_per_bucket: int | None
    versions: tuple[tuple[str, int], ...] | None
    ids: tuple[str, ...] | None
    #: ``(queue, limit)`` pairs by name, each limit in ``[1, limit]``; None: every queue.
    queues: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Materialization:
    """One validated item of :meth:`Store.materialize`."""

    schedule: Schedule  #: as acquired: its id, materializer and lease_until are the fence
    #: One per requested occurrence, in the caller's order; a repeated slot repeats the
    #: same object (it names one execution).
    occurrences: tuple[NewOccurrence, ...]
    watermark: datetime
    next_due: datetime

    def unique(self) -> list[NewOccurrence]:
        """The distinct occurrences, first appearance first."""
        return list({o.idempotency_key: o for o in self.occurrences}.values())

    def results(self, found: Mapping[str, Execution]) -> list[Execution]:
        """The executions by idempotency key, in occurrence order."""
        return [found[o.idempotency_key] for o in self.occurrences]


def stale_schedule(schedule: Schedule) -> StaleLease:
    """The answer of :meth:`Store.materialize` for a schedule whose lease no longer holds."""
    return StaleLease(schedule.id, schedule.materializer or "", 0, subject="schedule")


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """A completion prepared for a backend: the encoded result, or why it is invalid."""

    lease: Fence
    result: JSON
    result_json: str | None  #: None when the result was refused
    invalid: str | None  #: the ``result_invalid: ...`` error when refused


def failure(
    lease: Fence,
    error: str,
    *,
    retryable: bool,
    timed_out: bool,
    retry_at: datetime,
) -> ExecutionFailed | ExecutionTimedOut:
    """The event of a validated :meth:`Store.fail`, decided at the store's now."""
    if timed_out:
        return ExecutionTimedOut(
            owner=lease.owner, error=error, retryable=retryable, retry_at=retry_at
        )
    return ExecutionFailed(owner=lease.owner, error=error, retryable=retryable, retry_at=retry_at)


def result_refused(lease: Fence, invalid: str) -> Decide:
    """How a completion whose result was refused decides: it fails the execution for good.

    ``invalid`` is the ``result_invalid: ...`` error; retrying cannot mend a result,
    so the failure is not retryable, decided at the store's now.
    """

    def decide(_current: Execution, now: datetime) -> ExecutionEvent:
        return ExecutionFailed(owner=lease.owner, error=invalid, retryable=False, retry_at=now)

    return decide


def claimed_inputs(texts: Sequence[str]) -> tuple[list[JSON], dict[int, str]]:
    """Decode the stored inputs of claimed rows.

    Returns the values and, by index, why a row's inputs cannot be delivered: a
    row stored before the payload rule (or by another tool) may be nested too deep
    for a response to encode, or not even decode. The claim sets those aside with
    :func:`set_aside`, in a transaction of its own right after it (a limited claim:
    before it commits), so it never hands out what it cannot deliver and one such
    row does not take its batch with it; a crash in between leaves only those leases
    to expire, and the next claim to take them sets them aside.
    """
    problems: dict[int, str] = {}
    try:
        values = payloads.decode_all(list(texts))
    except (ValueError, RecursionError):  # one bad text spoils the joined parse
        values = []
        for index, text in enumerate(texts):
            try:
                values.append(payloads.decode(text))
            except (ValueError, RecursionError) as exc:
                values.append(None)
                problems[index] = f"do not decode ({type(exc).__name__})"
    for index, (value, text) in enumerate(zip(values, texts, strict=True)):
        if index not in problems:
            problem = payloads.check_stored(value, text)
            if problem is not None:
                problems[index] = problem
    return values, problems


def set_aside(lease: Fence, problem: str, now: datetime) -> ExecutionFailed:
    """The event that fails a claimed execution whose stored inputs cannot be delivered.

    A permanent failure (retrying cannot mend stored inputs), recorded as
    ``payload_unreadable: inputs ...`` in the execution's error and audit trail.
    """
    return ExecutionFailed(
        owner=lease.owner,
        error=f"{PAYLOAD_UNREADABLE}: inputs {problem}",
        retryable=False,
        retry_at=now,
    )


def renewed(fence: Fence, lease_until: datetime) -> LiveFence:
    """What a heartbeat answers: the lease (or a bare fence) with its new ``lease_until``."""
    if isinstance(fence, LiveFence):
        return replace(fence, lease_until=lease_until)
    return LiveFence(
        execution_id=fence.execution_id,
        owner=fence.owner,
        epoch=fence.epoch,
        lease_until=lease_until,
    )


def unix_ms(now: datetime) -> int:
    """``now`` in milliseconds since the epoch: the time part of the ids made at ``now``."""
    return int(now.timestamp() * 1000)


def states_of(
    value: State | str | Iterable[State | str] | None, field: str = "state"
) -> tuple[State, ...] | None:
    if value is None:
        return None
    if not isinstance(value, str) and not isinstance(value, Iterable):
        raise ValidationError(field, f"must be a state or several, got {value!r}")
    items = [value] if isinstance(value, str) else list(value)
    states = []
    for item in items:
        try:
            states.append(State(item))
        except ValueError:
            known = ", ".join(s.value for s in State)
            raise ValidationError(field, f"unknown state {item!r} (one of {known})") from None
    return tuple(states)


def names_of(values: Iterable[str], field: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValidationError(field, f"must be a collection of names, not the string {values!r}")
    names = tuple(values)
    for name in names:
        require_name(name, field, max_len=MAX_NAME_IN_FILTER)
    return names


def queues_of(queues: Iterable[str] | Mapping[str, int], limit: int) -> tuple[tuple[str, int], ...]:
    """The ``queues`` of a claim as ``(name, limit)`` pairs, sorted by name.

    A collection of names gives each queue the claim's ``limit``; a mapping of
    name to N gives at most N (``0`` and less than ``limit`` included) from that
    queue. Queues with no room are left out.
    """
    if isinstance(queues, str):
        raise ValidationError("queues", f"must be a collection of names, not the string {queues!r}")
    if isinstance(queues, Mapping):
        rooms = {
            _queue_name(name): require_int(n, "queues", low=0, high=INT32_MAX)
            for name, n in queues.items()
        }
    else:
        rooms = {_queue_name(name): limit for name in queues}
    return tuple((name, min(n, limit)) for name, n in sorted(rooms.items()) if n > 0)


def _queue_name(name: object) -> str:
    """A queue a claim names (None is no queue here: it names none)."""
    return require_name(name, "queues", max_len=MAX_QUEUE)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """``text`` with A-Z made a-z and nothing else changed: the case the ``error`` filter
    ignores, the same on every backend (SQLite's LIKE folds only ASCII letters)."""
    return text.translate(_ASCII_LOWER)


def like_pattern(text: str) -> str:
    """A LIKE pattern (escape character ``\\``) matching any text that contains ``text``:
    its ``%``, ``_`` and ``\\`` are literal."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def created_id_range(
    created_after: datetime | None, created_before: datetime | None
) -> tuple[str | None, str | None]:
    """The ids of executions created in ``[created_after, created_before)``, as an
    exclusive ``(above, below)`` pair of id bounds (None: unbounded on that side).

    Ids are time-ordered (UUIDv7), so a creation range is a range of the primary
    key, read through its index. An id carries its submitter's clock and
    ``created_at`` the store's, so the range is widened by :data:`ID_CLOCK_SLACK` on
    each side, and ``created_at`` then decides. No real id equals a floor (its
    version bits are 0), so the floor of a millisecond bounds it exclusively.
    """
    above = below = None
    if created_after is not None:
        try:
            start = unix_ms(created_after - ID_CLOCK_SLACK)
        except OverflowError:  # within the slack of the first instant there is
            start = 0
        above = id_floor(max(0, start)) if start < _ID_MS_LIMIT else _LAST_ID
    if created_before is not None:
        try:
            end = unix_ms(created_before + ID_CLOCK_SLACK) + 1
        except OverflowError:
            end = _ID_MS_LIMIT
        below = id_floor(max(0, end)) if end < _ID_MS_LIMIT else None
    return above, below


#: One past the largest millisecond an id holds (48 bits).
_ID_MS_LIMIT = 1 << 48
#: An id above every id: a creation bound past what ids hold matches nothing.
_LAST_ID = "ffffffff-ffff-ffff-ffff-ffffffffffff"


def check_fences(leases: Iterable[Fence]) -> None:
    """Refuse a fence whose owner no store can hold (a claim never leases to one).

    A caller may build a lease by hand (the HTTP API does, from a request); its
    owner is checked like a claim's, so U+0000 is a ValidationError on every
    backend rather than a database error on one.
    """
    for lease in leases:
        require_name(lease.owner, "owner", max_len=MAX_NAME_IN_FILTER)


def versions_of(values: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    if isinstance(values, str):
        raise ValidationError(
            "versions", f"must be (job, version) pairs, not the string {values!r}"
        )
    pairs = []
    for pair in values:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValidationError("versions", f"must hold (job, version) pairs, got {pair!r}")
        job, version = pair
        require_name(job, "versions")
        require_int(version, "versions", low=1, high=INT32_MAX)
        pairs.append((job, version))
    return tuple(pairs)
