"""The leasing verbs of the SQL stores as plans: renewing held leases.

A heartbeat is fenced in SQL: one set-based statement per round (see
:func:`~fencepost.store.batching.rounds`) extends the leases whose owner, epoch and
liveness still hold and returns the ids it extended; every other beat is refused, and
audited in the same transaction when its id can name a row at all. The dialect binds
the fences (``SqlDialect._fence_params``) and may give a statement's text for the days
it touches (``SqlDialect._text_for``); the plan decides everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fencepost.domain.errors import StaleLease
from fencepost.domain.models import Fence
from fencepost.store.batching import rounds
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

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
