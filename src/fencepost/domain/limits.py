"""Flow control, pure: limits on how fast and how many executions start, and paused queues.

A :class:`Limit` holds for one *scope* — every execution of a job (``job:NAME``) or of
a queue (``queue:NAME``) — and, with ``per_key``, separately for each ``limit_key``
within it. It may bound

* the **rate** of starts (claims, retries and takeovers alike): a token bucket that
  holds at most ``burst`` tokens and gains ``rate`` tokens a second; a start takes one.
  Over any window of W seconds the starts never exceed ``rate * W + burst``;
* the **concurrency**: executions leased at once (RUNNING with a live lease, whether a
  worker runs them or holds them in its buffer).

A paused queue is a limit of zero that an operator lifts. Every backend enforces the
same decision, :func:`choose`, inside its claim's transaction; this module decides,
the store reads and writes. Nothing here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypedDict

from fencepost.domain.checks import INT32_MAX, MAX_QUEUE, require_int, require_name
from fencepost.domain.errors import ValidationError

#: The kinds of scope a limit can hold for.
SCOPE_KINDS = ("job", "queue")
#: The longest limit key.
MAX_LIMIT_KEY = 200
#: The longest scope name (``queue:`` plus the longest queue name, ``job:`` plus a job's).
MAX_SCOPE = 205
#: Periods a rate may be given in, by their spellings.
PERIODS: Mapping[str, float] = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}
#: The fastest rate a limit may allow (starts a second); faster is no limit at all.
MAX_RATE_PER_SECOND = 1_000_000.0
#: The slowest: one start a day... a thousandth of one. Slower is a paused queue.
MIN_RATE_PER_SECOND = 1.0 / 86400.0 / 1000.0
#: Without an explicit burst, a bucket holds this many seconds' worth of its rate
#: (at least one token): starts stay smooth, and a worker that claims every 50 ms
#: still finds its share (see docs/explanation/flow-control.md).
DEFAULT_BURST_SECONDS = 0.1
#: The key executions without a ``limit_key`` share in a per-key scope.
NO_KEY = ""
#: How many candidates a limited claim reads per execution it may take: a window
#: wider than the claim, so that rows of held-back scopes it must pass over do not
#: leave the claim short.
CANDIDATES_PER_SLOT = 4

_RATE = re.compile(r"^\s*(?P<n>[0-9]+(?:\.[0-9]+)?)\s*/\s*(?P<unit>[0-9]*\s*[a-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` starts per ``period`` seconds, as written (``"50/s"``, ``"3000/min"``)."""

    count: float
    period: float

    @property
    def per_second(self) -> float:
        return self.count / self.period

    def __str__(self) -> str:
        # Positional digits, never an exponent ("1e-05/s" would not parse back).
        count = int(self.count) if self.count == int(self.count) else _decimal(self.count)
        for unit, seconds in (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("d", 86400.0)):
            if self.period == seconds:
                return f"{count}/{unit}"
        return f"{count}/{self.period:g}s"


def parse_rate(value: object, field_name: str = "rate") -> Rate:
    """A rate from ``"N/unit"`` (``s``, ``min``, ``h``, ``d``; ``"100/5min"`` too), or a
    :class:`Rate`; a ValidationError naming ``field_name`` otherwise.

    N must be a positive, finite number; the rate at most
    :data:`MAX_RATE_PER_SECOND` a second and at least :data:`MIN_RATE_PER_SECOND`.
    """
    if isinstance(value, Rate):
        return _checked_rate(value.count, value.period, field_name)
    if not isinstance(value, str):
        raise ValidationError(field_name, f'must be a rate like "50/s", got {_shown(value)}')
    if len(value) > 40:
        raise ValidationError(
            field_name, f'must be a rate like "50/s", got {len(value)} characters'
        )
    found = _RATE.match(value.lower())
    if found is None:
        raise ValidationError(
            field_name, f'must be a rate like "50/s", "3000/min" or "100/h", got {value!r}'
        )
    unit = found["unit"].replace(" ", "")
    digits = unit.rstrip("abcdefghijklmnopqrstuvwxyz")
    # Only the spellings listed: "ms" is not "m" plural (it would read as a minute).
    name = unit[len(digits) :]
    if name not in PERIODS:
        raise ValidationError(
            field_name, f"has an unknown period {found['unit']!r}: use s, min, h or d"
        )
    times = int(digits) if digits else 1
    if times < 1:
        raise ValidationError(field_name, "a period must be at least one unit")
    return _checked_rate(float(found["n"]), PERIODS[name] * times, field_name)


def _checked_rate(count: float, period: float, field_name: str) -> Rate:
    if not (math.isfinite(count) and math.isfinite(period)) or count <= 0 or period <= 0:
        raise ValidationError(field_name, "must allow a positive, finite number of starts")
    per_second = count / period
    if per_second > MAX_RATE_PER_SECOND:
        raise ValidationError(
            field_name, f"must be at most {MAX_RATE_PER_SECOND:,.0f} starts a second"
        )
    if per_second < MIN_RATE_PER_SECOND:
        raise ValidationError(field_name, "is slower than one start in 1,000 days: pause instead")
    return Rate(count=count, period=period)


def _decimal(number: float) -> str:
    """``number`` in positional notation, as short as its repr (``0.00001``, not ``1e-05``)."""
    from decimal import Decimal

    return format(Decimal(repr(number)), "f")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def require_scope(value: object, field_name: str = "scope") -> str:
    """A scope: ``job:NAME`` or ``queue:NAME``, NAME a valid job or queue name."""
    text = require_name(value, field_name, max_len=MAX_SCOPE)
    kind, sep, name = text.partition(":")
    if not sep or kind not in SCOPE_KINDS:
        raise ValidationError(field_name, f'must be "job:NAME" or "queue:NAME", got {text!r}')
    require_name(name, field_name, max_len=MAX_QUEUE if kind == "queue" else 200)
    return text


def require_limit_key(value: object, field_name: str = "limit_key") -> str | None:
    """A limit key (None: none): 1 to :data:`MAX_LIMIT_KEY` characters of text without
    control characters, U+0000 or lone surrogates."""
    if value is None:
        return None
    text = require_name(value, field_name, max_len=MAX_LIMIT_KEY)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValidationError(field_name, "must not hold control characters")
    return text


def scope_of(kind: str, name: str) -> str:
    """The scope text of a job or queue name."""
    return f"{kind}:{name}"


@dataclass(frozen=True, slots=True)
class Limit:
    """One scope's limit, as stored.

    ``source`` is ``"code"`` for a limit declared with a job (a worker publishes
    it) or ``"operator"`` for one set at run time; a published declaration never
    replaces an operator's limit.
    """

    scope: str
    rate: Rate | None = None
    burst: int | None = None  #: the bucket's size; None without a rate
    concurrency: int | None = None
    per_key: bool = False
    paused: bool = False  #: a paused queue: nothing starts (see pause_queue)
    source: str = "operator"
    updated_by: str | None = None
    updated_at: datetime | None = None

    @property
    def kind(self) -> str:
        return self.scope.partition(":")[0]

    @property
    def name(self) -> str:
        return self.scope.partition(":")[2]

    def applies_to(self, job: str, queue: str) -> bool:
        """Whether an execution of ``job`` in ``queue`` is in this scope."""
        return (job if self.kind == "job" else queue) == self.name


class LimitOptions(TypedDict, total=False):
    """What a limit sets, declared once: ``set_limit`` of ``Store``, ``AsyncStore``,
    ``App``, ``Client`` and ``AsyncClient`` takes these as keywords typed by this.

    At least one of ``rate`` (``"50/s"``, or a :class:`Rate`) and ``concurrency``;
    ``burst`` (with a rate) and ``per_key`` (default False) as :meth:`Store.set_limit
    <fencepost.store.flow.FlowVerbs.set_limit>` says.
    """

    rate: str | Rate | None
    burst: int | None
    concurrency: int | None
    per_key: bool


def new_limit(
    scope: object,
    *,
    rate: object = None,
    burst: object = None,
    concurrency: object = None,
    per_key: object = False,
    source: str = "operator",
    updated_by: str | None = None,
) -> Limit:
    """A validated :class:`Limit` (every error names its field).

    At least one of ``rate`` and ``concurrency``. ``burst`` needs a ``rate``; without
    one it is the rate over :data:`DEFAULT_BURST_SECONDS` (at least 1).
    """
    name = require_scope(scope)
    parsed = None if rate is None else parse_rate(rate)
    if concurrency is not None:
        concurrency = require_int(concurrency, "concurrency", low=1, high=INT32_MAX)
    if burst is not None:
        if parsed is None:
            raise ValidationError("burst", "needs a rate: a burst is the rate's bucket")
        burst = require_int(burst, "burst", low=1, high=INT32_MAX)
    elif parsed is not None:
        burst = max(1, math.ceil(parsed.per_second * DEFAULT_BURST_SECONDS - 1e-9))
    if parsed is None and concurrency is None:
        raise ValidationError("rate", "give a rate, a concurrency or both")
    if not isinstance(per_key, bool):
        raise ValidationError("per_key", f"must be true or false, got {_shown(per_key)}")
    return Limit(
        scope=name,
        rate=parsed,
        burst=burst,
        concurrency=concurrency,
        per_key=per_key,
        source=source,
        updated_by=updated_by,
    )


@dataclass(frozen=True, slots=True)
class FlowChange:
    """One operator or publisher change to a limit or a queue, as audited."""

    at: datetime
    actor: str
    action: str  #: ``set``, ``remove``, ``pause``, ``resume``, ``declare``
    scope: str
    detail: str


@dataclass(frozen=True, slots=True)
class ThrottleCount:
    """Throttled claims of one scope in a window, and how long they were held."""

    scope: str
    count: int
    held: timedelta  #: the time they waited past their due times (or a pause), in all


# -- the state of a scope, and the decision ------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenBucket:
    """A token bucket as stored: ``tokens`` at ``at`` (its level refills from there)."""

    tokens: float
    at: datetime
    #: The last time this scope or key held a start back (see :func:`throttled`).
    denied_at: datetime | None = None

    def level(self, now: datetime, rate: float, burst: int) -> float:
        """Tokens at ``now``: refilled at ``rate`` a second since ``at``, at most ``burst``.

        A ``now`` before ``at`` (another claim's clock read later than ours) refills nothing.
        """
        elapsed = max(0.0, (now - self.at).total_seconds())
        return min(float(burst), self.tokens + elapsed * rate)


def full_bucket(burst: int, now: datetime) -> TokenBucket:
    """The bucket of a key that has not started anything lately: full."""
    return TokenBucket(tokens=float(burst), at=now)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A claimable execution as a limited claim sees it, in claim order."""

    id: str
    job: str
    queue: str
    limit_key: str | None
    due_at: datetime


@dataclass(slots=True)
class FlowState:
    """What a limited claim read in its transaction: the limits that apply, their
    buckets and their leases.

    ``buckets`` holds the stored buckets of ``(scope, key)`` pairs (key
    :data:`NO_KEY` for a whole scope); ``running`` the live leases per pair.
    """

    limits: list[Limit]
    buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict)
    running: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Held:
    """What a limited claim's candidate query must leave out: paused and exhausted
    scopes, and the exhausted keys of per-key scopes (``(scope, key)`` pairs)."""

    jobs: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    job_keys: tuple[tuple[str, str], ...] = ()
    queue_keys: tuple[tuple[str, str], ...] = ()

    def scopes(self) -> list[str]:
        return [scope_of("job", j) for j in self.jobs] + [scope_of("queue", q) for q in self.queues]


@dataclass(slots=True)
class Decision:
    """A limited claim's choice: the executions to lease, in claim order, and how it
    leaves the limits' state.

    ``spent`` holds the new bucket of every ``(scope, key)`` whose tokens the chosen
    executions take; ``denied`` the pairs that held some execution back (the store
    records when, so that executions due before then are counted throttled).
    """

    chosen: list[Candidate]
    spent: dict[tuple[str, str], TokenBucket]
    denied: set[tuple[str, str]]


def pair(limit: Limit, candidate_key: str | None) -> tuple[str, str]:
    """The ``(scope, key)`` a candidate of ``limit``'s scope counts against."""
    return (limit.scope, (candidate_key or NO_KEY) if limit.per_key else NO_KEY)


def allowance(limit: Limit, state: FlowState, key: tuple[str, str], now: datetime) -> float:
    """How many more may start now under ``limit`` for ``key``: the lesser of its
    tokens and its concurrency's room (infinite when neither bounds it)."""
    if limit.paused:
        return 0.0
    room = math.inf
    if limit.concurrency is not None:
        room = limit.concurrency - state.running.get(key, 0)
    if limit.rate is not None and limit.burst is not None:
        bucket = state.buckets.get(key) or full_bucket(limit.burst, now)
        room = min(room, bucket.level(now, limit.rate.per_second, limit.burst))
    return room


def held(state: FlowState, now: datetime) -> Held:
    """The scopes and keys no execution may start in now (see :class:`Held`).

    A per-key scope's keys are held one by one: only those with a stored bucket
    or live leases can be exhausted, so this never costs more than the keys that
    started something lately.
    """
    jobs: set[str] = set()
    queues: set[str] = set()
    job_keys: set[tuple[str, str]] = set()
    queue_keys: set[tuple[str, str]] = set()
    for limit in state.limits:
        if not limit.per_key or limit.paused:
            if allowance(limit, state, (limit.scope, NO_KEY), now) < 1:
                (jobs if limit.kind == "job" else queues).add(limit.name)
            continue
        keys = {k for s, k in (*state.buckets, *state.running) if s == limit.scope}
        for key in keys:
            if allowance(limit, state, (limit.scope, key), now) < 1:
                (job_keys if limit.kind == "job" else queue_keys).add((limit.name, key))
    return Held(
        jobs=tuple(sorted(jobs)),
        queues=tuple(sorted(queues)),
        job_keys=tuple(sorted(job_keys)),
        queue_keys=tuple(sorted(queue_keys)),
    )


def choose(
    candidates: Sequence[Candidate], state: FlowState, limit: int, now: datetime
) -> Decision:
    """Which ``candidates`` (in claim order) may start now, at most ``limit``.

    Each one must fit every limit whose scope holds it (its job's and its queue's,
    per its key where the limit is per key); one that does not is passed over, and
    the claim goes on with the others, so a held-back scope never blocks another.
    Taking one spends a token of each rate and a place of each concurrency.
    """
    by_scope: dict[str, Limit] = {lim.scope: lim for lim in state.limits}
    levels: dict[tuple[str, str], float] = {}
    running = dict(state.running)
    chosen: list[Candidate] = []
    spent_pairs: set[tuple[str, str]] = set()
    denied: set[tuple[str, str]] = set()
    for c in candidates:
        if len(chosen) >= limit:
            break
        scopes = [
            lim
            for lim in (
                by_scope.get(scope_of("job", c.job)),
                by_scope.get(scope_of("queue", c.queue)),
            )
            if lim is not None
        ]
        keys = [pair(lim, c.limit_key) for lim in scopes]
        fits = True
        for lim, key in zip(scopes, keys, strict=True):
            if lim.paused:
                fits = False
            if lim.concurrency is not None and running.get(key, 0) >= lim.concurrency:
                fits = False
            if lim.rate is not None and lim.burst is not None:
                if key not in levels:
                    bucket = state.buckets.get(key) or full_bucket(lim.burst, now)
                    levels[key] = bucket.level(now, lim.rate.per_second, lim.burst)
                if levels[key] < 1:
                    fits = False
            if not fits:
                denied.add(key)
                break
        if not fits:
            continue
        for lim, key in zip(scopes, keys, strict=True):
            if lim.concurrency is not None:
                running[key] = running.get(key, 0) + 1
            if lim.rate is not None:
                levels[key] -= 1
                spent_pairs.add(key)
        chosen.append(c)
    return Decision(
        chosen=chosen,
        spent={
            key: TokenBucket(tokens=levels[key], at=_stamp(state, key, now)) for key in spent_pairs
        },
        denied=denied,
    )


def _stamp(state: FlowState, key: tuple[str, str], now: datetime) -> datetime:
    """The time a spent bucket is stored at: ``now``, never before the stored one's (a
    bucket's clock must not run back, or it would refill the same time twice)."""
    stored = state.buckets.get(key)
    return now if stored is None else max(now, stored.at)


def spend(
    decision: Decision, state: FlowState, leased: Iterable[str], now: datetime
) -> dict[tuple[str, str], TokenBucket]:
    """The buckets after the claim leased ``leased`` (ids) of the chosen: a chosen
    execution another claim took first (skipped as locked) spends nothing."""
    taken = set(leased)
    if len(taken) == len(decision.chosen):
        return decision.spent
    by_scope: dict[str, Limit] = {lim.scope: lim for lim in state.limits}
    levels: dict[tuple[str, str], float] = {}
    for c in decision.chosen:
        if c.id not in taken:
            continue
        for lim in (by_scope.get(scope_of("job", c.job)), by_scope.get(scope_of("queue", c.queue))):
            if lim is None or lim.rate is None or lim.burst is None:
                continue
            key = pair(lim, c.limit_key)
            if key not in levels:
                bucket = state.buckets.get(key) or full_bucket(lim.burst, now)
                levels[key] = bucket.level(now, lim.rate.per_second, lim.burst)
            levels[key] -= 1
    return {
        key: TokenBucket(tokens=level, at=_stamp(state, key, now)) for key, level in levels.items()
    }


def next_start_in(
    state: FlowState, held_pairs: Iterable[tuple[str, str]], now: datetime, want: int = 1
) -> float | None:
    """Seconds until the first of ``held_pairs`` whose rate held it back holds
    ``min(burst, want)`` tokens, or None when none was held by a rate (concurrency or
    a pause held them: a finish or a resume frees them, not time).

    ``want`` is what the claim asked for: a claimer that waits for a whole burst
    rather than one token takes it in one claim, instead of one claim a token (on
    SQLite every claim takes the one write lock).
    """
    by_scope: dict[str, Limit] = {lim.scope: lim for lim in state.limits}
    soonest: float | None = None
    for key in held_pairs:
        lim = by_scope.get(key[0])
        if lim is None or lim.rate is None or lim.burst is None or lim.paused:
            continue
        bucket = state.buckets.get(key)
        if bucket is None:
            continue
        rate = lim.rate.per_second
        level = bucket.level(now, rate, lim.burst)
        if level < 1:
            wait = (min(lim.burst, max(1, want)) - level) / rate
            soonest = wait if soonest is None else min(soonest, wait)
    return soonest


def throttled(
    chosen: Iterable[Candidate], state: FlowState, denied_at: Mapping[tuple[str, str], datetime]
) -> dict[str, str]:
    """Which leased executions waited on a limit: id -> scope.

    An execution counts as throttled by a scope when that scope (or its key) held
    some start back after the execution was due: it waited while its allowance was
    spent, or its queue was paused. The first such scope of its job's and queue's wins.
    """
    by_scope: dict[str, Limit] = {lim.scope: lim for lim in state.limits}
    out: dict[str, str] = {}
    for c in chosen:
        for scope in (scope_of("job", c.job), scope_of("queue", c.queue)):
            lim = by_scope.get(scope)
            key = pair(lim, c.limit_key) if lim is not None else (scope, NO_KEY)
            when = denied_at.get(key)
            if when is not None and when >= c.due_at:
                out[c.id] = scope
                break
    return out


def held_for(at: datetime, due_at: datetime) -> timedelta:
    """How long an execution claimed at ``at`` was held past its due time."""
    return max(timedelta(0), at - due_at)
