"""``GET /executions/{id}/timeline``: one execution's life, ready to draw.

The route reads the execution, its audit trail, its commands and its throttle
records, and hands them to :func:`fencepost.domain.timeline.timeline`, which decides
the leases, waits and marks; the dashboard draws the answer with
``static/js/timeline.js``. A plain ``def``: the store blocks, so FastAPI runs it in
its thread pool.
"""

from __future__ import annotations

from fastapi import APIRouter

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import StoreDep, guarded
from fencepost.domain.timeline import Timeline, timeline
from fencepost.store.base import Store
from fencepost.wire import timeline as schemas

router = APIRouter()


def read_timeline(store: Store, execution_id: str) -> Timeline:
    """The timeline of ``execution_id`` at the store's clock's now; :class:`NotFound` if unknown.

    Four reads, not one snapshot: the execution first, then its records, so that the
    trail is at least as new as the row (a claim between two reads shows in the trail
    with the row one step behind, which :func:`timeline` draws as each record says).
    """
    execution = store.get(execution_id)
    return timeline(
        execution,
        store.transitions(execution.id),
        store.commands(execution.id),
        store.throttles(execution.id),
        store.clock.now(),
    )


@router.get(
    "/executions/{execution_id}/timeline",
    response_model=schemas.Timeline,
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_timeline(execution_id: str, store: StoreDep) -> schemas.Timeline:
    """One execution's leases (one per epoch, with the stale writes refused on each),
    waits (due, retry delay, throttled, snoozed, paused) and marks (submit, commands,
    replay, cancel, expiry, ...), from its audit trail; see ``fencepost.domain.timeline``.

    A running lease shows its current ``lease_until``: heartbeats are not audited.
    """
    return schemas.Timeline.from_domain(read_timeline(store, execution_id))
