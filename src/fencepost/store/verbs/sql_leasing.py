"""The leasing verbs of the SQL stores as plans: claiming, and renewing held leases.

A claim chooses the due executions (and the expired leases to take over) and leases
them, raising each one's epoch. Where the dialect claims in one statement
(``SqlDialect._claims_in_one_statement``: PostgreSQL's CTE with ``SKIP LOCKED``, which
reads the server's clock), that statement is the plan: in autocommit, or after the
lock of the buckets a capped claim may take from. Else the plan chooses queue by
queue, in claim order, and leases with statements of its own, inside the write
transaction, at the store's now (SQLite, whose file lock the transaction holds).

A heartbeat is fenced in SQL: one set-based statement per round (see
:func:`~fencepost.store.batching.rounds`) extends the leases whose owner, epoch and
liveness still hold and returns the ids it extended; every other beat is refused, and
audited in the same transaction when its id can name a row at all. The dialect binds
the fences (``SqlDialect._fence_params``) and may give a statement's text for the days
it touches (``SqlDialect._text_for``); the plan decides everything else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import StaleLease
from fencepost.domain.machine import TAKEOVER_REASON_FORMAT, takeover_reason
from fencepost.domain.models import Fence, Lease
from fencepost.domain.states import State
from fencepost.store.batching import rounds
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import ClaimArguments, always, set_aside
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

#: A claim's leases, and by index why a leased execution's inputs cannot be delivered.
Claimed = tuple[list[Lease], dict[int, str]]


# -- claiming ---------------------------------------------------------------------------


def claim_plan(store: SqlStore, request: ClaimArguments) -> Plan[Claimed]:
    """``LeasingVerbs._claim`` with no limit holding it, as a plan: the leases, and by
    index those whose stored inputs cannot be delivered, which the caller sets aside
    in a transaction of its own (:func:`set_aside_plan`).

    A claim that fails is not recognised on a retry: it may have leased rows and lost
    the answer, and claiming again would lease others on top (see ``SqlStore._claim``).
    """
    if not store._claims_in_one_statement:
        return Plan(_claim_steps(store, request))
    capped = request.max_per_bucket is not None
    text = store._text_for(claim_block(request))
    # A claim restricted to queues is planned per call (see claim_queues).
    prepare = False if request.queues is not None and not capped else None
    # One autocommit statement: a transaction around it cost 17-24% of the claim rate
    # at batches of 1 and 16 (measured). A capped claim holds its buckets' locks first.
    steps = lease_steps(store, request, None, text, prepare=prepare)
    return Plan(steps, atomic=capped)


def claim_block(request: ClaimArguments) -> str:
    """The block of a claim in one statement: capped or not, restricted to queues or not."""
    return _CLAIM_BLOCKS[request.max_per_bucket is not None, request.queues is not None]


#: The blocks of a claim in one statement, by (capped, restricted to queues).
_CLAIM_BLOCKS = {
    (False, False): "claim",
    (False, True): "claim_queues",
    (True, False): "claim_capped",
    (True, True): "claim_capped_queues",
}


def _claim_steps(store: SqlStore, request: ClaimArguments) -> Steps[Claimed]:
    now = yield from store._now_steps()  # in the write transaction, its lock held
    if not store._may_judge_leases(now):
        return [], {}
    return (yield from _lease_by_queue(store, request, now))


def lease_steps(
    store: SqlStore,
    request: ClaimArguments,
    now: datetime | None,
    text: str,
    *,
    prepare: bool | None = None,
) -> Steps[Claimed]:
    """Choose and lease as ``request`` asks, at ``now``, as steps: in the caller's
    transaction (a limited claim's lease of the executions it chose), or as the
    one-statement plan of :func:`claim_plan`.

    ``now`` None: the statement reads the store's clock (a pinned test clock, bound,
    or the server's). ``text``: the one statement's text, as the dialect gives it for
    the connection (``claim_block``); unused where the plan chooses queue by queue.
    """
    if not store._claims_in_one_statement:
        assert now is not None
        return (yield from _lease_by_queue(store, request, now))
    params = sql_changes.claim_params(store, request) | {
        "now": store._now_param() if now is None else store._t(now),
        "owner": request.owner,
        "ttl": store._d(request.ttl),
        "takeover_reason": TAKEOVER_REASON_FORMAT,
    }
    if request.max_per_bucket is not None:
        buckets = request.buckets
        locked = sorted(buckets if buckets is not None else range(store.config.num_buckets))
        yield Statement(store._q("lock_buckets"), {"buckets": store._array(locked)})
    claimed = yield Statement(text, params, "all", prepare=prepare)
    return sql_changes.claimed_leases(request.owner, claimed)


def _lease_by_queue(store: SqlStore, request: ClaimArguments, now: datetime) -> Steps[Claimed]:
    """A claim chosen queue by queue, then leased: the chosen rows' epochs raised, and
    their CLAIMED (or takeover) transitions written.

    One indexed query per queue (at most that queue's room each), merged in claim order
    and cut to ``limit``. A capped claim ranks each bucket's rows over all the queues
    together, so that a bucket's room goes to its first rows in claim order, whatever
    their queue (the cap first, then each queue's room, then the limit). (Written as one
    generator: each level of ``yield from`` is resumed once per statement, and a claim
    of one execution runs four.)
    """
    owner, now_bound = request.owner, store._t(now)
    until = now + request.ttl
    params = sql_changes.claim_params(store, request) | {"now": now_bound}
    queues: Sequence[tuple[str, int]]
    if request.queues is None:  # every queue with something to claim, up to limit each
        live = yield Statement(store._q("claim_live_queues"), {"now": now_bound}, "all")
        queues = [(queue, request.limit) for (queue,) in live]
    else:
        queues = request.queues
    capped = request.max_per_bucket is not None
    text = store._q("claim_candidates_capped_queue" if capped else "claim_candidates_queue")
    candidates: list[Any] = []
    for queue, room in queues:
        extra: dict[str, Any] = {"queue": queue, "limit": room}
        if capped:
            extra["rank_queues"] = json.dumps([name for name, _ in queues])
        found = yield Statement(text, params | extra, "all")
        candidates.extend(_in_claim_order(found, room))
    if len(queues) > 1:
        candidates.sort(key=_claim_order)
    candidates = candidates[: request.limit]
    if not candidates:
        return [], {}
    chosen = {
        "ids": json.dumps([c[0] for c in candidates]),
        "owner": owner,
        "until": store._t(until),
        "now": now_bound,
    }
    yield Statement(store._q("claim_update"), chosen)
    transitions = [
        (
            id_,
            state,
            epoch + 1,
            owner,
            takeover_reason(old_owner, epoch) if state == State.RUNNING else None,
            now_bound,
        )
        for id_, state, epoch, _, _, old_owner, *_ in candidates
    ]
    yield Statement(store._q("insert_claimed"), transitions, "many")
    return sql_changes.claimed_leases(owner, [_after_claim(store, r, until) for r in candidates])


def _in_claim_order(found: list[Any], limit: int) -> list[Any]:
    """The rows of ``claim_candidates_queue`` to claim: at most ``limit``, in claim order.

    The due branch comes first and is already in claim order; only when the
    takeover branch found expired leases are both merged (priority DESC,
    due_at, id) and cut to ``limit``.
    """
    if not any(row[1] == State.RUNNING for row in found):
        return found
    found.sort(key=_claim_order)
    return found[:limit]


def _claim_order(row: Any) -> tuple[Any, ...]:
    """Claim order of a candidate row: priority DESC, due_at, id."""
    return (-row[-2], row[-1], row[0])


def _after_claim(store: SqlStore, row: Any, until: datetime) -> tuple[Any, ...]:
    """A candidate row as the claim left it, in ``claimed_leases``' order."""
    id_, _, epoch, attempt, max_attempts, _, job, job_version, timeout, *rest = row
    schedule_id, slot, inputs_text, queue, trace_context, _, due = rest
    timeout = None if timeout is None else store.rows.duration(timeout)
    after = (epoch + 1, attempt + 1, max_attempts, job, job_version, timeout, schedule_id, slot)
    return (id_, *after, until, store.rows.instant(due), inputs_text, queue, trace_context)


def set_aside_plan(
    store: SqlStore, leases: Sequence[Lease], unreadable: Mapping[int, str]
) -> Plan[list[Lease]]:
    """Fail, through the machine and fenced, the claimed executions whose stored inputs
    cannot be delivered (``unreadable``: by index into ``leases``), at the store's now;
    the leases left to deliver."""

    def steps() -> Steps[list[Lease]]:
        now = yield from store._now_steps()
        return (yield from set_aside_steps(store, leases, unreadable, now))

    return Plan(steps())


def set_aside_steps(
    store: SqlStore, leases: Sequence[Lease], unreadable: Mapping[int, str], now: datetime
) -> Steps[list[Lease]]:
    """:func:`set_aside_plan` as steps, at ``now``, in the caller's transaction."""
    for i, problem in unreadable.items():
        decide = always(set_aside(leases[i], problem, now))
        yield from store._fenced_apply_steps(leases[i], "fail", decide, now)
    return [lease for i, lease in enumerate(leases) if i not in unreadable]


# -- renewing ---------------------------------------------------------------------------

#: A beat: the lease it renews and the progress it reports (JSON text, or None).
Beat = tuple[Fence, str | None]


def heartbeat_plan(
    store: SqlStore, beats: Sequence[Beat], *, ttl: timedelta, again: bool = False
) -> Plan[list[datetime | StaleLease]]:
    """``LeasingVerbs._heartbeat`` as a plan: each beat's new ``lease_until``, or the
    :class:`StaleLease` that refused it, in the order given.

    ``again``: a retry whose earlier attempt may have committed (see
    ``SqlDialect._retried``); a refusal it already audited is not audited twice. An
    extension committed twice only extends the same lease again, never earlier than
    promised. The rounds and their statements' texts are chosen here, when the plan is
    made, before it holds a connection (``SqlDialect._text_for`` may read on one).
    """
    # An id that cannot name a row here is refused without asking (and not audited).
    usable = [i for i, (lease, _) in enumerate(beats) if store._can_name(lease.execution_id)]
    batches: list[_Round] = []
    for round_ in rounds([beats[i][0] for i in usable]):
        chosen = [usable[i] for _, i in sorted(round_.items())]
        ids = [beats[i][0].execution_id for i in chosen]
        text = store._text_for("heartbeat_fenced", ids)
        batches.append(({id_: usable[i] for id_, i in round_.items()}, chosen, text))
    return Plan(_heartbeat_steps(store, beats, usable, batches, ttl, again))


#: A round of a heartbeat: execution id -> index of its beat, the indexes in the
#: statement's order, and the statement's text.
_Round = tuple[dict[str, int], list[int], str]


def _heartbeat_steps(
    store: SqlStore,
    beats: Sequence[Beat],
    usable: list[int],
    batches: list[_Round],
    ttl: timedelta,
    again: bool,
) -> Steps[list[datetime | StaleLease]]:
    now = store._now_param()  # read in the write transaction, its lock held
    renewed: dict[int, datetime] = {}
    for index, chosen, text in batches:
        params = {"now": now, "ttl": store._d(ttl)} | store._fence_params(
            [beats[i][0] for i in chosen]
        )
        if store._writes_many_tables:
            params["progress"] = store._array([beats[i][1] for i in chosen])
        found = yield Statement(text, params, "all", prepare=store._prepare_for(len(chosen)))
        extended = {index[id_]: until for id_, until in found}
        renewed.update((i, store.rows.instant(until)) for i, until in extended.items())
        if not store._writes_many_tables:
            progressed = [
                {"id": beats[i][0].execution_id, "progress": beats[i][1]}
                for i in extended
                if beats[i][1] is not None
            ]
            if progressed:
                yield Statement(store._q("set_progress"), progressed, "many")
    refused = [beats[i][0] for i in usable if i not in renewed]
    yield from store._refuse_steps(refused, "heartbeat", now, again=again)
    return [renewed.get(i) or sql_changes.stale(lease) for i, (lease, _) in enumerate(beats)]
