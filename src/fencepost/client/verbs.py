"""Each HTTP verb of the client, described once: the requests it makes and what it returns.

The worker protocol's verbs are in :mod:`fencepost.client.worker_verbs`, described the
same way.

A verb is a generator: it checks its arguments, yields a
:class:`~fencepost.client.exchange.Request`, is sent
the body of the answer (or has the answer's error thrown into it), and returns the
result. :class:`~fencepost.client.http.Client` runs verbs over an
:class:`httpx.Client`, :class:`~fencepost.client.aio.AsyncClient` over an
:class:`httpx.AsyncClient`; neither knows anything of a verb but its name.

Why generators rather than a request object and a decoder: a verb that makes more
than one request (``wait``, which long-polls in slices; ``complete``, which fails a
result that is not JSON) is then written once as the plain loop it is, with its
state in local variables, and a verb that maps an error of the answer
(``StaleLease`` for a stale heartbeat) catches it where it yields, as ordinary code
would. A request object and a decoder would need a second, per-verb state machine
for each of those. A verb that waits between requests yields a
:class:`~fencepost.client.exchange.Pause`: the
runner sleeps as its own I/O sleeps (``time.sleep`` or ``anyio.sleep``).

Argument checks run at the verb's first step, inside the runner's call: a bad
argument raises before anything is sent, and the deprecation warning of an old
argument name points at the caller's line (:data:`CALLER`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack, cast

from fencepost.client.arguments import renamed, submit_item
from fencepost.client.exchange import Pause, Request, Verb, quoted, read, read_list, seconds
from fencepost.domain.bulk import DEFAULT_BATCH, ActOptions, BulkResult, DeletionPage
from fencepost.domain.checks import MAX_QUEUE, attempt_outcome, error_filter, require_name
from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import ValidationError
from fencepost.domain.filters import ExecutionFilters, ExecutionQuery, checked
from fencepost.domain.history import (
    History,
    HistoryOptions,
    HistorySummary,
    SummaryBy,
    Window,
    require_by,
    require_filter,
    require_window,
)
from fencepost.domain.jobviews import JobSummary, JobView
from fencepost.domain.limits import (
    FlowChange,
    Limit,
    LimitOptions,
    ThrottleCount,
    new_limit,
    require_scope,
)
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.nodes import BucketReport
from fencepost.domain.queueviews import QueueView
from fencepost.domain.reports import SloReport, Stats
from fencepost.domain.schedules import ScheduleOptions
from fencepost.domain.slo import (
    SloOptions,
    slo_arguments,
)
from fencepost.domain.states import AttemptOutcome, CommandKind, State
from fencepost.domain.submission import SubmitOptions
from fencepost.domain.timeline import Timeline
from fencepost.wire import actions as actions_wire
from fencepost.wire import executions, reports
from fencepost.wire import flow as flow_wire
from fencepost.wire import history as history_wire
from fencepost.wire import jobs as jobs_wire
from fencepost.wire import schedules as schedules_wire
from fencepost.wire import timeline as timeline_wire
from fencepost.wire.executions import MAX_WAIT_HEADER
from fencepost.wire.mapping import json_value

#: The ``stacklevel`` that points a warning raised in an argument check at the caller's
#: line: the check's caller is the verb (1), then the runner (2), the client's method
#: (3) and the caller (4). Both runners keep this depth.
CALLER = 4

#: The longest slice ``wait`` asks the service to hold one poll for, in seconds.
WAIT_SLICE = 30
#: The pauses between polls that come back at once (a service without long-poll).
POLL_PAUSE_FIRST, POLL_PAUSE_MAX = 0.05, 1.0


# -- submitting and reading ------------------------------------------------------------


def submit(job: str, inputs: JSON = None, **options: Unpack[SubmitOptions]) -> Verb[Execution]:
    """``POST /executions``; see ``Client.submit``."""
    given = dict(checked(options, SubmitOptions, "submit"))
    idempotency_key = given.pop("idempotency_key", None)
    arguments = {"job": job, "inputs": inputs, **given}
    body = executions.SubmitRequest.body(renamed(arguments, stacklevel=CALLER))
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
    request = Request("POST", "/executions", body=body, headers=headers)
    answer = yield from read(executions.Execution, request)
    return answer.to_domain()


def submit_many(requests: Iterable[Mapping[str, Any]]) -> Verb[list[Execution]]:
    """``POST /executions/batch``; see ``Client.submit_many``."""
    # A loop, not a comprehension: a comprehension is a frame of its own, and the
    # deprecation warning's stacklevel counts frames up to the caller.
    items = []
    for index, request in enumerate(requests):
        items.append(submit_item(request, index, stacklevel=CALLER))
    if not items:
        return []
    batch = Request("POST", "/executions/batch", body={"items": items})
    answer = yield from read(executions.SubmitBatchResult, batch)
    return [e.to_domain() for e in answer.items]


def get(execution_id: str) -> Verb[Execution]:
    """``GET /executions/{id}``."""
    request = Request("GET", f"/executions/{quoted(execution_id)}")
    return (yield from read(executions.Execution, request)).to_domain()


def wait(execution_id: str, *, timeout: float | timedelta | None = None) -> Verb[Execution]:
    """Poll ``GET /executions/{id}`` until the execution is terminal; see ``Client.wait``.

    The first look is a plain read: it answers an unknown id with NotFound and a
    finished execution at once, and its ``Fencepost-Max-Wait`` header says how long
    the service will hold a poll. The next polls ask it to hold them (``?wait=``) for
    a slice of at most that bound, :data:`WAIT_SLICE` and the time left. A service
    that announces no bound (or a poll that comes back sooner than its slice and not
    terminal) is polled again after a short pause, growing from
    :data:`POLL_PAUSE_FIRST` to :data:`POLL_PAUSE_MAX`.
    """
    if not isinstance(execution_id, str):
        raise ValidationError("execution_id", f"must be a string, got {execution_id!r}")
    limit = _wait_timeout(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    path = f"/executions/{quoted(execution_id)}"
    pause = POLL_PAUSE_FIRST
    bound = 0.0  # the service's bound on a held poll, from its last answer; 0: none
    first = True
    while True:
        left = math.inf if deadline is None else deadline - time.monotonic()
        slice_ = 0.0 if first or bound <= 0 else round(min(WAIT_SLICE, bound, left), 3)
        params = {"wait": slice_} if slice_ > 0 else None
        poll = Request("GET", path, params=params, hold=slice_, header=MAX_WAIT_HEADER)
        started = time.monotonic()
        body, announced = cast(tuple[bytes, str | None], (yield poll))
        bound = _announced_bound(announced)
        execution = executions.Execution.model_validate_json(body).to_domain()
        if execution.state.is_terminal:
            return execution
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            state = execution.state.value
            raise TimeoutError(f"execution {execution_id} still {state} at its timeout, {timeout}")
        if first and bound > 0:
            first = False
            continue  # the service long-polls: ask it to hold the next look
        first = False
        if slice_ > 0 and now - started >= slice_:
            pause = POLL_PAUSE_FIRST  # the service held the poll its whole slice
            continue
        nap = pause if deadline is None else min(pause, max(0.0, deadline - now))
        yield Pause(nap)
        pause = min(pause * 2, POLL_PAUSE_MAX)


def _announced_bound(value: str | None) -> float:
    """A service's ``Fencepost-Max-Wait`` in seconds; 0 when absent or unreadable."""
    try:
        bound = float(value) if value is not None else 0.0
    except ValueError:
        return 0.0
    return bound if math.isfinite(bound) and bound > 0 else 0.0


def _wait_timeout(timeout: object) -> float | None:
    """``wait``'s timeout in seconds (None: forever), or the ValidationError naming it."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta):
        raise ValidationError("timeout", f"must be seconds or a timedelta, got {timeout!r}")
    value = seconds(timeout)
    # As Store.wait: finite and >= 0; None (not infinity) is what waits for ever.
    if not math.isfinite(value) or value < 0:
        raise ValidationError(
            "timeout", f"must be a finite number of seconds >= 0 (None: no limit), got {timeout!r}"
        )
    return value


def query(**query: Unpack[ExecutionQuery]) -> Verb[Page]:
    """``GET /executions``; see ``Client.query``. The time bounds, the outcome and the
    error text are checked as the store checks them (nothing is sent if one is bad)."""
    given = dict(checked(query, ExecutionQuery, "query"))
    limit, after = given.pop("limit", 100), given.pop("after", None)
    order = "desc" if given.pop("newest_first", False) else "asc"
    params = _filter_params(**given) | {"limit": limit, "cursor": after, "order": order}
    request = Request("GET", "/executions", params=params)
    return (yield from read(executions.Page, request)).to_domain()


def count_by_state(**filters: Unpack[ExecutionFilters]) -> Verb[dict[State, int]]:
    """``GET /executions/counts``; see ``Client.count_by_state``."""
    params = _filter_params(**checked(filters, ExecutionFilters, "count_by_state"))
    request = Request("GET", "/executions/counts", params=params)
    return (yield from read(executions.StateCounts, request)).to_domain()


#: The filters that are instants (sent as ISO 8601 in UTC).
_TIME_FILTERS = frozenset(
    {
        "due_after",
        "due_before",
        "created_after",
        "created_before",
        "finished_after",
        "finished_before",
    }
)


def _filter_params(
    *,
    state: State | str | Iterable[State | str] | None = None,
    outcome: AttemptOutcome | str | None = None,
    error: str | None = None,
    **given: Any,
) -> dict[str, Any]:
    """The query parameters of the filters ``GET /executions`` and its counts share:
    times as ISO 8601 in UTC (naive ones refused, naming the argument), the outcome by
    its name, the error text checked (1 to 200 characters)."""
    states = [state] if isinstance(state, str) else None if state is None else list(state)
    params = {
        name: _instant_param(value, name) if name in _TIME_FILTERS else value
        for name, value in given.items()
    }
    if error is not None:
        error_filter(error)
    return params | {
        "state": states,
        "outcome": None if outcome is None else attempt_outcome(outcome).value,
        "error": error,
    }


def _instant_param(value: datetime | None, field: str) -> str | None:
    """An instant as a query parameter: ISO 8601 in UTC; naive ones refused, naming ``field``."""
    return None if value is None else as_aware_utc(value, field=field).isoformat()


def dead_letters(
    *, job: str | None = None, limit: int = 100, after: str | None = None
) -> Verb[Page]:
    """``GET /dead-letters``."""
    params = {"job": job, "limit": limit, "cursor": after}
    request = Request("GET", "/dead-letters", params=params)
    return (yield from read(executions.Page, request)).to_domain()


def transitions(execution_id: str) -> Verb[list[Transition]]:
    """``GET /executions/{id}/transitions``."""
    request = Request("GET", f"/executions/{quoted(execution_id)}/transitions")
    rows = yield from read_list(executions.Transition, request)
    return [t.to_domain(execution_id=execution_id) for t in rows]


def attempts(execution_id: str) -> Verb[list[Attempt]]:
    """``GET /executions/{id}/attempts``."""
    request = Request("GET", f"/executions/{quoted(execution_id)}/attempts")
    rows = yield from read_list(executions.Attempt, request)
    return [a.to_domain(execution_id=execution_id) for a in rows]


def timeline(execution_id: str) -> Verb[Timeline]:
    """``GET /executions/{id}/timeline``."""
    request = Request("GET", f"/executions/{quoted(execution_id)}/timeline")
    return (yield from read(timeline_wire.Timeline, request)).to_domain()


def stats(*, window: float | timedelta = 3600.0) -> Verb[Stats]:
    """``GET /stats``."""
    request = Request("GET", "/stats", params={"window": seconds(window)})
    return (yield from read(reports.Stats, request)).to_domain()


def jobs(*, window: float | timedelta = 86400.0) -> Verb[list[JobSummary]]:
    """``GET /jobs``: one summary a job; see ``Client.jobs``."""
    request = Request("GET", "/jobs", params={"window": seconds(window)})
    body = yield from read(jobs_wire.JobList, request)
    at, span = body.at.astimezone(UTC), timedelta(seconds=body.window_seconds)
    return [summary.to_domain(at=at, window=span) for summary in body.jobs]


def job(name: str, *, window: float | timedelta = 86400.0) -> Verb[JobView]:
    """``GET /jobs/{name}``."""
    request = Request("GET", f"/jobs/{quoted(name)}", params={"window": seconds(window)})
    return (yield from read(jobs_wire.JobView, request)).to_domain()


def slo(**options: Unpack[SloOptions]) -> Verb[SloReport]:
    """``GET /slo``. Options the store would refuse (see ``Store.slo``) are refused
    here, naming them, before anything is sent; the service refuses the rest (a window
    past ten years) naming them too."""
    arguments = slo_arguments(options)
    params = {
        name: value.total_seconds() if isinstance(value, timedelta) else value
        for name, value in arguments.items()
    }
    return (yield from read(reports.Slo, Request("GET", "/slo", params=params))).to_domain()


def history(**options: Unpack[HistoryOptions]) -> Verb[History]:
    """``GET /history``. A window, job or queue ``Store.history`` would refuse is refused
    here, naming it, before anything is sent."""
    checked(options, HistoryOptions, "history")
    params = {
        "window": require_window(options.get("window", Window.HOUR)).value,
        "job": require_filter(options.get("job"), "job"),
        "queue": require_filter(options.get("queue"), "queue"),
    }
    request = Request("GET", "/history", params=params)
    return (yield from read(history_wire.History, request)).to_domain()


def history_summary(
    *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
) -> Verb[HistorySummary]:
    """``GET /history/summary``; arguments checked as ``history``'s."""
    params = {"window": require_window(window).value, "by": require_by(by).value}
    request = Request("GET", "/history/summary", params=params)
    return (yield from read(history_wire.HistorySummary, request)).to_domain()


def bucket_report(
    *, orphaned_after: float | timedelta = 300, limit: int = 100
) -> Verb[BucketReport]:
    """``GET /buckets``."""
    params = {"orphaned_after": seconds(orphaned_after), "limit": limit}
    request = Request("GET", "/buckets", params=params)
    return (yield from read(reports.BucketReport, request)).to_domain()


# -- operator actions ----------------------------------------------------------------


def cancel(execution_id: str) -> Verb[Execution]:
    """``DELETE /executions/{id}``."""
    request = Request("DELETE", f"/executions/{quoted(execution_id)}")
    return (yield from read(executions.Execution, request)).to_domain()


def request(execution_id: str, kind: CommandKind | str) -> Verb[Command]:
    """``POST /executions/{id}/{cancel|pause|resume}``."""
    path = f"/executions/{quoted(execution_id)}/{CommandKind(kind).value}"
    return (yield from read(executions.Command, Request("POST", path))).to_domain()


def replay(execution_id: str) -> Verb[Execution]:
    """``POST /executions/{id}/replay``."""
    path = f"/executions/{quoted(execution_id)}/replay"
    return (yield from read(executions.Execution, Request("POST", path))).to_domain()


def act(action: str, **options: Unpack[ActOptions]) -> Verb[BulkResult]:
    """``POST /executions/actions``: one batch of a bulk action; see ``Client.act``.

    The service checks every argument (a refusal names the field: ``filter.job``,
    ``ids.3``, ``cursor``); what is sent is only put into JSON's terms here.
    """
    checked(options, ActOptions, "act")
    body: dict[str, Any] = {
        "action": json_value(action),
        "dry_run": options.get("dry_run", False),
        "limit": options.get("limit", DEFAULT_BATCH),
    }
    if (ids := options.get("ids")) is not None:
        body["ids"] = ids if isinstance(ids, str) else list(ids)
    if (filters := options.get("filter")) is not None:
        body["filter"] = _filter_body(filters)
    if (after := options.get("after")) is not None:
        body["cursor"] = after
    request = Request("POST", "/executions/actions", body=body)
    return (yield from read(actions_wire.BulkResult, request)).to_domain()


def _filter_body(filters: object) -> object:
    """A bulk action's filter in JSON's terms: instants in ISO 8601, states (one or
    several) as a list of names. Anything else goes as it is, for the service to refuse."""
    if not isinstance(filters, Mapping):
        return filters
    body = {}
    for name, value in filters.items():
        if name == "state" and value is not None:
            value = [value] if isinstance(value, str) else list(value)
            value = [json_value(v) for v in value]
        body[name] = json_value(value)
    return body


def deletions(*, limit: int = 100, after: str | None = None) -> Verb[DeletionPage]:
    """``GET /deletions``."""
    request = Request("GET", "/deletions", params={"limit": limit, "cursor": after})
    return (yield from read(actions_wire.DeletionPage, request)).to_domain()


# -- schedules -------------------------------------------------------------------------


def add_schedule(job: str, **options: Unpack[ScheduleOptions]) -> Verb[Schedule]:
    """``POST /schedules``; see ``Client.add_schedule``."""
    given = checked(options, ScheduleOptions, "add_schedule")
    body = schedules_wire.ScheduleCreate.body({"job": job, **renamed(given, stacklevel=CALLER)})
    request = Request("POST", "/schedules", body=body)
    return (yield from read(schedules_wire.Schedule, request)).to_domain()


def get_schedule(schedule_id: str) -> Verb[Schedule]:
    """``GET /schedules/{id}``."""
    request = Request("GET", f"/schedules/{quoted(schedule_id)}")
    return (yield from read(schedules_wire.Schedule, request)).to_domain()


def schedules(
    *,
    job: str | None = None,
    paused: bool | None = None,
    limit: int = 100,
    after: str | None = None,
) -> Verb[SchedulePage]:
    """``GET /schedules``."""
    params = {
        "job": job,
        "paused": None if paused is None else str(paused).lower(),
        "limit": limit,
        "cursor": after,
    }
    request = Request("GET", "/schedules", params=params)
    return (yield from read(schedules_wire.SchedulePage, request)).to_domain()


def update_schedule(schedule_id: str, /, **changes: Any) -> Verb[Schedule]:
    """``PATCH /schedules/{id}``."""
    body = schedules_wire.ScheduleUpdate.body(renamed(changes, stacklevel=CALLER))
    request = Request("PATCH", f"/schedules/{quoted(schedule_id)}", body=body)
    return (yield from read(schedules_wire.Schedule, request)).to_domain()


def pause_schedule(schedule_id: str) -> Verb[Schedule]:
    """``POST /schedules/{id}/pause``."""
    request = Request("POST", f"/schedules/{quoted(schedule_id)}/pause")
    return (yield from read(schedules_wire.Schedule, request)).to_domain()


def resume_schedule(schedule_id: str) -> Verb[Schedule]:
    """``POST /schedules/{id}/resume``."""
    request = Request("POST", f"/schedules/{quoted(schedule_id)}/resume")
    return (yield from read(schedules_wire.Schedule, request)).to_domain()


def delete_schedule(schedule_id: str) -> Verb[None]:
    """``DELETE /schedules/{id}`` (204)."""
    yield Request("DELETE", f"/schedules/{quoted(schedule_id)}")


def run_schedule(schedule_id: str) -> Verb[Execution]:
    """``POST /schedules/{id}/run`` (201)."""
    request = Request("POST", f"/schedules/{quoted(schedule_id)}/run")
    return (yield from read(executions.Execution, request)).to_domain()


def preview(
    schedule_id: str, count: int = 10, *, after: datetime | None = None
) -> Verb[list[datetime]]:
    """``GET /schedules/{id}/preview``."""
    params = {"count": count, "after": None if after is None else after.isoformat()}
    request = Request("GET", f"/schedules/{quoted(schedule_id)}/preview", params=params)
    answer = yield from read(schedules_wire.FireTimes, request)
    return [instant.astimezone(UTC) for instant in answer.fire_times]


# -- flow control ------------------------------------------------------------------------


def _name_path(name: str) -> str:
    """A name as one path segment: percent-encoded, a name of dots too (``.`` and
    ``..`` would be resolved away as the path's dot segments before sending)."""
    segment = quoted(name)
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def set_limit(scope: str, **options: Unpack[LimitOptions]) -> Verb[Limit]:
    """``PUT /limits/{scope}``; checked first as the store checks it (nothing sent if bad)."""
    checked_limit = new_limit(scope, **checked(options, LimitOptions, "set_limit"))
    rate = options.get("rate")
    arguments = {
        "rate": None if rate is None else str(checked_limit.rate),
        "burst": options.get("burst"),
        "concurrency": options.get("concurrency"),
        "per_key": options.get("per_key", False),
    }
    body = flow_wire.LimitRequest.body(arguments)
    request = Request("PUT", f"/limits/{_name_path(checked_limit.scope)}", body=body)
    return (yield from read(flow_wire.Limit, request)).to_domain()


def limits() -> Verb[list[Limit]]:
    """``GET /limits``."""
    rows = yield from read_list(flow_wire.Limit, Request("GET", "/limits"))
    return [row.to_domain() for row in rows]


def remove_limit(scope: str) -> Verb[None]:
    """``DELETE /limits/{scope}`` (204); NotFound when the scope has no limit."""
    yield Request("DELETE", f"/limits/{_name_path(require_scope(scope))}")


def _queue_verb(name: str, verb: str) -> Verb[QueueView]:
    queue = require_name(name, "name", max_len=MAX_QUEUE)
    request = Request("POST", f"/queues/{_name_path(queue)}/{verb}")
    return (yield from read(flow_wire.QueueState, request)).to_domain()


def pause_queue(name: str) -> Verb[Limit]:
    """``POST /queues/{name}/pause``: the queue's limit, as ``Store.pause_queue`` returns it."""
    return (yield from _queue_verb(name, "pause")).stored()


def resume_queue(name: str) -> Verb[Limit | None]:
    """``POST /queues/{name}/resume``: the queue's limit, as ``Store.resume_queue`` returns it."""
    return (yield from _queue_verb(name, "resume")).stored()


def queues() -> Verb[list[QueueView]]:
    """``GET /queues``."""
    rows = yield from read_list(flow_wire.QueueState, Request("GET", "/queues"))
    return [row.to_domain() for row in rows]


def throttled(*, window: float | timedelta = 3600.0) -> Verb[list[ThrottleCount]]:
    """``GET /throttled``."""
    request = Request("GET", "/throttled", params={"window": seconds(window)})
    rows = yield from read_list(flow_wire.ThrottleCount, request)
    return [row.to_domain() for row in rows]


def flow_changes(*, limit: int = 100) -> Verb[list[FlowChange]]:
    """``GET /flow/changes``."""
    request = Request("GET", "/flow/changes", params={"limit": limit})
    rows = yield from read_list(flow_wire.FlowChange, request)
    return [row.to_domain() for row in rows]
