"""``Client``: the store's verbs over HTTP, against a ``fencepost serve``.

The same names, arguments, return types and errors as
:class:`~fencepost.store.base.Store`, so code written against a store — a
submitter, an operator script, a :class:`~fencepost.worker.runtime.Worker` —
runs against the service unchanged::

    with Client("http://scheduler:8080", token=os.environ["FENCEPOST_TOKEN"]) as client:
        client.submit("report", {"day": "2026-11-29"}, idempotency_key="report:2026-11-29")

A network failure or a 5xx answer raises :class:`StoreUnavailable`, which a
worker treats as it treats a database outage: it stops claiming, keeps its
outcomes while their leases can still hold, and resumes by itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from fencepost.client.arguments import OLD_VERSION, claim_queues, renamed, submit_item
from fencepost.client.errors import error_of
from fencepost.domain import payloads
from fencepost.domain.catalogue import JobEntry
from fencepost.domain.defaults import DEFAULT_COMMAND_TTL, DEFAULT_TTL
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import (
    RemoteStaleLease,
    ResultInvalid,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)
from fencepost.domain.jobviews import JobSummary, JobView
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Lease,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.nodes import BucketReport, Node, default_node_id
from fencepost.domain.reports import SloReport, Stats
from fencepost.domain.states import CommandKind, State
from fencepost.wire import catalogue, executions, jobs, reports, schedules, work
from fencepost.wire.executions import MAX_WAIT_HEADER

#: Large enough for any payload the service accepts; the service enforces its own cap.
_ENCODE_LIMIT = 64 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


#: The longest slice of a long-poll (seconds), under any service's bound.
_WAIT_SLICE = 25.0
#: Seconds a long-poll's answer may take beyond its ``wait`` before the client gives up.
_WAIT_GRACE = 10.0


def _max_wait(response: httpx.Response) -> float:
    """The service's bound on a long-poll (``Fencepost-Max-Wait``); 0: none announced."""
    try:
        value = float(response.headers.get(MAX_WAIT_HEADER, "0"))
    except ValueError:
        return 0.0
    return value if math.isfinite(value) and value > 0 else 0.0


def _path(value: str) -> str:
    return quote(value, safe="")


class Client:
    """A connection to a fencepost service, mirroring the store's verbs.

    ``token`` is sent as ``Authorization: Bearer``. ``http`` replaces the
    underlying :class:`httpx.Client` (tests pass an in-process one). The client
    keeps one connection pool; close it (or use ``with``) when done.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if http is None:
            http = httpx.Client(base_url=base_url, timeout=timeout)
        http.headers.update(headers)
        self.base_url = base_url
        self.location = base_url  #: where the worker's store is, for its start line
        self._http = http

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # -- transport -------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        body_json: str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """One request; the JSON text of the answer (empty for 204), or the error raised.

        ``body`` is encoded here; ``body_json`` is a body already encoded.
        """
        return self._respond(
            method, path, body=body, body_json=body_json, params=params, headers=headers
        ).content

    def _respond(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        body_json: str | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
    ) -> httpx.Response:
        """:meth:`_call`, answering the whole response (a long-poll reads its headers).

        ``read_timeout`` (seconds) replaces the client's timeout for this request.
        """
        content = body_json
        send_headers = dict(headers or {})
        if body is not None:
            # Strict JSON (no NaN), so what the service stores is what was meant.
            content = payloads.encode(body, field="body", limit=_ENCODE_LIMIT)
        if content is not None:
            send_headers["Content-Type"] = "application/json"
        query = None if params is None else {k: v for k, v in params.items() if v is not None}
        # Only a long-poll passes a timeout of its own: the rest keep the client's.
        timeout: float | httpx._client.UseClientDefault = (
            httpx.USE_CLIENT_DEFAULT if read_timeout is None else read_timeout
        )
        try:
            response = self._http.request(
                method, path, content=content, params=query, headers=send_headers, timeout=timeout
            )
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"{self.base_url}: {exc.__class__.__name__}: {exc}") from exc
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500]}
            if not isinstance(problem, dict):
                problem = {"detail": str(problem)[:500]}
            raise error_of(response.status_code, problem)
        return response

    def _read(self, model: type[M], method: str, path: str, **request: Any) -> M:
        """One request whose answer is a ``model`` body."""
        return model.model_validate_json(self._call(method, path, **request))

    def _read_list(self, model: type[M], method: str, path: str, **request: Any) -> list[M]:
        """One request whose answer is a list of ``model`` bodies."""
        return _list_of(model).validate_json(self._call(method, path, **request))

    # -- submitting and reading --------------------------------------------------------

    def submit(
        self,
        job: str,
        inputs: JSON = None,
        *,
        version: int | None = None,
        execute_at: datetime | None = None,
        delay: float | timedelta | None = None,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
        timeout: float | timedelta | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
        job_version: int | None = None,
    ) -> Execution:
        """Submit one execution (``POST /executions``); see ``Store.submit``.

        ``max_attempts``, ``timeout`` and ``priority`` None: the job's own (from
        the store's job catalogue), else the store's default. ``job_version`` is the deprecated
        name of ``version``.
        """
        arguments = {
            "job": job,
            "inputs": inputs,
            "version": version,
            "execute_at": execute_at,
            "delay": delay,
            "max_attempts": max_attempts,
            "timeout": timeout,
            "bucket_key": bucket_key,
            "priority": priority,
            "queue": queue,
        }
        if job_version is not None:
            arguments[OLD_VERSION] = job_version
        body = executions.SubmitRequest.body(renamed(arguments, stacklevel=2))
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
        answer = self._read(executions.Execution, "POST", "/executions", body=body, headers=headers)
        return answer.to_domain()

    def submit_many(self, requests: Iterable[Mapping[str, Any]]) -> list[Execution]:
        """Submit a batch in one transaction (``POST /executions/batch``): all or none.

        Each mapping holds :meth:`submit`'s arguments (``job`` included); one that
        does not raises :class:`ValidationError` naming it (``[3].job``), and
        nothing is sent.
        """
        # A loop, not a comprehension: a comprehension is a frame of its own, and the
        # deprecation warning's stacklevel counts frames up to the caller.
        items = []
        for index, request in enumerate(requests):
            items.append(submit_item(request, index, stacklevel=2))
        if not items:
            return []
        answer = self._read(
            executions.SubmitBatchResult, "POST", "/executions/batch", body={"items": items}
        )
        return [e.to_domain() for e in answer.items]

    def get(self, execution_id: str) -> Execution:
        """One execution; :class:`NotFound` if unknown."""
        path = f"/executions/{_path(execution_id)}"
        return self._read(executions.Execution, "GET", path).to_domain()

    def wait(self, execution_id: str, *, timeout: float | timedelta | None = None) -> Execution:
        """The execution once it is terminal; see ``Store.wait`` (same arguments and errors).

        Long-polls ``GET /executions/{id}?wait=`` in slices no longer than the service
        allows (its ``Fencepost-Max-Wait`` header, read from a first plain GET, which
        also answers an unknown id with :class:`NotFound` and a finished one at once),
        until the execution is terminal or ``timeout`` has passed (:class:`TimeoutError`).
        """
        if timeout is None:
            seconds = None
        else:
            seconds = as_duration(timeout, field="timeout", allow_zero=True).total_seconds()
        if not isinstance(execution_id, str):
            raise ValidationError("execution_id", f"must be a string, got {execution_id!r}")
        deadline = None if seconds is None else time.monotonic() + seconds
        path = f"/executions/{_path(execution_id)}"
        response = self._respond("GET", path)
        bound = _max_wait(response)
        while True:
            execution = executions.Execution.model_validate_json(response.content).to_domain()
            if execution.state.is_terminal:
                return execution
            left = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"execution {execution_id} was not finished after {seconds:g} seconds"
                )
            if bound <= 0:  # a service that does not long-poll: look again shortly
                time.sleep(min(left, _WAIT_SLICE, 0.5))
                response = self._respond("GET", path)
                continue
            chunk = min(left, bound, _WAIT_SLICE)
            response = self._respond(
                "GET", path, params={"wait": f"{chunk:.3f}"}, read_timeout=chunk + _WAIT_GRACE
            )
            bound = _max_wait(response)

    def query(
        self,
        *,
        state: State | str | Iterable[State | str] | None = None,
        job: str | None = None,
        schedule: str | None = None,
        bucket: int | None = None,
        limit: int = 100,
        after: str | None = None,
        newest_first: bool = False,
        queue: str | None = None,
    ) -> Page:
        """Executions matching every given filter, by id; see ``Store.query``."""
        states = [state] if isinstance(state, str) else None if state is None else list(state)
        params = {
            "state": states,
            "job": job,
            "schedule": schedule,
            "bucket": bucket,
            "limit": limit,
            "cursor": after,
            "order": "desc" if newest_first else "asc",
            "queue": queue,
        }
        return self._read(executions.Page, "GET", "/executions", params=params).to_domain()

    def dead_letters(
        self, *, job: str | None = None, limit: int = 100, after: str | None = None
    ) -> Page:
        """FAILED executions, oldest first."""
        params = {"job": job, "limit": limit, "cursor": after}
        return self._read(executions.Page, "GET", "/dead-letters", params=params).to_domain()

    def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first."""
        path = f"/executions/{_path(execution_id)}/transitions"
        rows = self._read_list(executions.Transition, "GET", path)
        return [t.to_domain(execution_id=execution_id) for t in rows]

    def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first."""
        rows = self._read_list(
            executions.Attempt, "GET", f"/executions/{_path(execution_id)}/attempts"
        )
        return [a.to_domain(execution_id=execution_id) for a in rows]

    def stats(self, *, window: float | timedelta = 3600.0) -> Stats:
        """Counts by state and job, backlog, and the window's lateness; see ``Store.stats``."""
        params = {"window": _seconds(window)}
        return self._read(reports.Stats, "GET", "/stats", params=params).to_domain()

    def jobs(self, *, window: float | timedelta = 86400.0) -> list[JobSummary]:
        """Every published job, by name: its latest version, the versions, the live nodes
        serving it, and its executions created in the last ``window`` by state.

        Unlike ``Store.jobs`` (every entry of the catalogue), one summary a job; see
        ``Store.job_counts`` for the counts.
        """
        params = {"window": _seconds(window)}
        body = self._read(jobs.JobList, "GET", "/jobs", params=params)
        at, span = body.at.astimezone(UTC), timedelta(seconds=body.window_seconds)
        return [summary.to_domain(at=at, window=span) for summary in body.jobs]

    def job(self, name: str, *, window: float | timedelta = 86400.0) -> JobView:
        """The job ``name`` in full (every version, the nodes serving each, its executions
        created in the last ``window`` by state); :class:`NotFound` for a job no one
        published."""
        params = {"window": _seconds(window)}
        return self._read(jobs.JobView, "GET", f"/jobs/{_path(name)}", params=params).to_domain()

    def slo(
        self,
        *,
        window: float | timedelta = 30 * 86400.0,
        claim_within: float | timedelta = 10.0,
        finish_within: float | timedelta = 300.0,
        worst: int = 10,
    ) -> SloReport:
        """The scheduler's service-level report; see ``Store.slo``."""
        params = {
            "window": _seconds(window),
            "claim_within": _seconds(claim_within),
            "finish_within": _seconds(finish_within),
            "worst": worst,
        }
        return self._read(reports.Slo, "GET", "/slo", params=params).to_domain()

    def bucket_report(
        self, *, orphaned_after: float | timedelta = 300, limit: int = 100
    ) -> BucketReport:
        """Buckets owned twice, holes, and orphans; see ``Store.bucket_report``."""
        params = {"orphaned_after": _seconds(orphaned_after), "limit": limit}
        return self._read(reports.BucketReport, "GET", "/buckets", params=params).to_domain()

    # -- operator actions ------------------------------------------------------------

    def cancel(self, execution_id: str) -> Execution:
        """Cancel an execution that has not started (``DELETE /executions/{id}``)."""
        path = f"/executions/{_path(execution_id)}"
        return self._read(executions.Execution, "DELETE", path).to_domain()

    def request(self, execution_id: str, kind: CommandKind | str) -> Command:
        """Ask the worker running an execution to cancel, pause or resume it."""
        path = f"/executions/{_path(execution_id)}/{CommandKind(kind).value}"
        return self._read(executions.Command, "POST", path).to_domain()

    def replay(self, execution_id: str) -> Execution:
        """Revive a dead letter (FAILED -> SCHEDULED, due now, fresh attempts)."""
        path = f"/executions/{_path(execution_id)}/replay"
        return self._read(executions.Execution, "POST", path).to_domain()

    # -- schedules ---------------------------------------------------------------------

    def add_schedule(self, job: str, **arguments: Any) -> Schedule:
        """Add a schedule (``POST /schedules``); ``Store.add_schedule``'s arguments.

        ``version``, ``every`` and ``misfire_grace`` as the store names them;
        ``job_version`` is the deprecated name of ``version``.
        """
        body = schedules.ScheduleCreate.body({"job": job, **renamed(arguments, stacklevel=2)})
        return self._read(schedules.Schedule, "POST", "/schedules", body=body).to_domain()

    def get_schedule(self, schedule_id: str) -> Schedule:
        """One schedule; :class:`NotFound` if unknown."""
        path = f"/schedules/{_path(schedule_id)}"
        return self._read(schedules.Schedule, "GET", path).to_domain()

    def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> SchedulePage:
        """Schedules by id, filtered; pass ``next_cursor`` as ``after``."""
        params = {
            "job": job,
            "paused": None if paused is None else str(paused).lower(),
            "limit": limit,
            "cursor": after,
        }
        return self._read(schedules.SchedulePage, "GET", "/schedules", params=params).to_domain()

    def update_schedule(self, schedule_id: str, /, **changes: Any) -> Schedule:
        """Change a schedule (``PATCH /schedules/{id}``); ``Store.update_schedule``'s names."""
        body = schedules.ScheduleUpdate.body(renamed(changes, stacklevel=2))
        path = f"/schedules/{_path(schedule_id)}"
        return self._read(schedules.Schedule, "PATCH", path, body=body).to_domain()

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop materializing a schedule until resumed."""
        path = f"/schedules/{_path(schedule_id)}/pause"
        return self._read(schedules.Schedule, "POST", path).to_domain()

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Materialize a paused schedule again."""
        path = f"/schedules/{_path(schedule_id)}/resume"
        return self._read(schedules.Schedule, "POST", path).to_domain()

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (its executions stay)."""
        self._call("DELETE", f"/schedules/{_path(schedule_id)}")

    def preview(
        self, schedule_id: str, count: int = 10, *, after: datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` fire times of a schedule, after ``after`` (default: now)."""
        params = {"count": count, "after": None if after is None else after.isoformat()}
        path = f"/schedules/{_path(schedule_id)}/preview"
        answer = self._read(schedules.FireTimes, "GET", path, params=params)
        return [instant.astimezone(UTC) for instant in answer.fire_times]

    # -- the worker protocol -------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        limit: int = 1,
        ttl: float | timedelta = DEFAULT_TTL,
        jobs: Iterable[str] | None = None,
        buckets: Iterable[int] | None = None,
        max_per_bucket: int | None = None,
        versions: Iterable[tuple[str, int]] | None = None,
        queues: Iterable[str] | Mapping[str, int] | None = None,
    ) -> list[Lease]:
        """Lease up to ``limit`` due executions (``POST /claims``); see ``Store.claim``."""
        body: dict[str, Any] = {"owner": owner, "limit": limit, "ttl_seconds": _seconds(ttl)}
        if jobs is not None:
            body["jobs"] = list(jobs)
        if versions is not None:
            body["versions"] = [{"job": j, "version": v} for j, v in versions]
        if buckets is not None:
            body["buckets"] = list(buckets)
        if max_per_bucket is not None:
            body["max_per_bucket"] = max_per_bucket
        if queues is not None:
            body["queues"] = claim_queues(queues)
        answer = self._read(work.Leases, "POST", "/claims", body=body)
        return [lease.to_domain() for lease in answer.leases]

    def claim_occurrence(
        self, schedule_id: str, slot: str, owner: str, *, ttl: float | timedelta = DEFAULT_TTL
    ) -> Lease:
        """Claim one occurrence of a schedule if it is due (``POST /jobs/{task}/{slot}/claim``)."""
        path = f"/jobs/{_path(schedule_id)}/{_path(slot)}/claim"
        body = {"owner": owner, "ttl_seconds": _seconds(ttl)}
        return self._read(work.Lease, "POST", path, body=body).to_domain()

    def complete_occurrence(
        self, schedule_id: str, slot: str, lease: Lease, result: JSON = None
    ) -> Execution:
        """Complete one occurrence under its lease (``POST /jobs/{task}/{slot}/complete``)."""
        path = f"/jobs/{_path(schedule_id)}/{_path(slot)}/complete"
        body = {"owner": lease.owner, "epoch": lease.epoch, "result": result}
        return self._read(executions.Execution, "POST", path, body=body).to_domain()

    def heartbeat(
        self, lease: Lease, *, ttl: float | timedelta = DEFAULT_TTL, progress: JSON = None
    ) -> Lease:
        """Renew a live lease; :class:`StaleLease` if it is no longer held."""
        body = _report(lease, ttl_seconds=_seconds(ttl), progress=progress)
        try:
            answer = self._read(work.Lease, "POST", _on(lease, "heartbeat"), body=body)
        except RemoteStaleLease:
            raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
        return answer.to_domain()

    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = DEFAULT_TTL
    ) -> list[Lease | StaleLease]:
        """Renew many leases in one round trip; per item the lease or its refusal."""
        if not beats:
            return []
        items = [{"execution_id": le.execution_id, **_report(le, progress=p)} for le, p in beats]
        body = {"ttl_seconds": _seconds(ttl), "items": items}
        answer = self._read(work.HeartbeatResults, "POST", "/heartbeats", body=body)
        out: list[Lease | StaleLease] = []
        for (lease, _), result in zip(beats, answer.results, strict=True):
            if isinstance(result, work.Lease):
                out.append(result.to_domain())
            else:
                out.append(StaleLease(lease.execution_id, lease.owner, lease.epoch))
        return out

    def complete(self, lease: Lease, result: JSON = None) -> Execution:
        """Record success; see ``Store.complete`` (a non-JSON result fails it for good)."""
        encoded, invalid = _result_json(result)
        if encoded is None:
            self._fail_invalid(lease, invalid)
            raise ResultInvalid(lease.execution_id, invalid)
        try:
            body = _completion_json(lease, encoded, with_id=False)
            answer = self._read(
                executions.Execution, "POST", _on(lease, "complete"), body_json=body
            )
        except RemoteStaleLease:
            raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
        return answer.to_domain()

    def complete_many(self, results: Sequence[tuple[Lease, JSON]]) -> list[StaleLease | None]:
        """Complete many leases in one round trip; per item None or its refusal.

        A result that is not JSON cannot be sent: that lease is failed for good
        with ``result_invalid``, as the store would, and counts as accepted.
        """
        out: list[StaleLease | None] = [None] * len(results)
        items, positions = [], []
        for index, (lease, result) in enumerate(results):
            encoded, invalid = _result_json(result)
            if encoded is None:
                try:
                    self._fail_invalid(lease, invalid)
                except StaleLease as refused:
                    out[index] = refused
                continue
            items.append(_completion_json(lease, encoded, with_id=True))
            positions.append(index)
        if items:
            body = '{"items":[' + ",".join(items) + "]}"
            answer = self._read(work.CompletionResults, "POST", "/completions", body_json=body)
            for index, refusal in zip(positions, answer.results, strict=True):
                if refusal is not None:
                    lease = results[index][0]
                    out[index] = StaleLease(lease.execution_id, lease.owner, lease.epoch)
        return out

    def _fail_invalid(self, lease: Lease, invalid: str) -> None:
        self.fail(lease, f"result_invalid: {invalid}", retryable=False)

    def fail(
        self,
        lease: Lease,
        error: str,
        *,
        retryable: bool = True,
        retry_in: float | timedelta | None = None,
        timed_out: bool = False,
    ) -> Execution:
        """Record a failed attempt; see ``Store.fail``."""
        body = _report(
            lease,
            error=error,
            retryable=retryable,
            timed_out=timed_out,
            retry_in_seconds=None if retry_in is None else _seconds(retry_in),
        )
        return self._lease_verb(lease, "fail", body)

    def release(self, lease: Lease, *, reason: str = "released") -> Execution:
        """Give a live lease back unfinished; see ``Store.release``."""
        return self._lease_verb(lease, "release", _report(lease, reason=reason))

    def abort(self, lease: Lease, *, reason: str = "cancel requested") -> Execution:
        """Stop a running execution to honour a cancel; see ``Store.abort``."""
        return self._lease_verb(lease, "abort", _report(lease, reason=reason))

    def _lease_verb(self, lease: Lease, verb: str, body: dict[str, Any]) -> Execution:
        try:
            answer = self._read(executions.Execution, "POST", _on(lease, verb), body=body)
        except RemoteStaleLease:
            raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
        return answer.to_domain()

    def reap_expired(self, *, limit: int = 1000) -> int:
        """Nothing to do here: the service reaps expired leases itself. Returns 0."""
        return 0

    def wait_for_work(self, timeout: float) -> bool:
        """Wait ``timeout`` seconds (the service does not push); the worker then polls."""
        time.sleep(max(0.0, timeout))
        return False

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = DEFAULT_COMMAND_TTL,
        limit: int = 100,
    ) -> list[Command]:
        """Claim open commands addressed to these executions; see ``Store.claim_commands``."""
        ids = list(dict.fromkeys(execution_ids))
        if not ids:
            return []
        body = {"owner": owner, "execution_ids": ids, "ttl_seconds": _seconds(ttl), "limit": limit}
        answer = self._read(work.ClaimedCommands, "POST", "/commands/claims", body=body)
        return [c.to_domain() for c in answer.commands]

    def complete_command(self, command: Command, lease: Lease) -> Command:
        """Mark a claimed command delivered under ``lease``; see ``Store.complete_command``."""
        if command.owner != lease.owner or command.execution_id != lease.execution_id:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        body = {"owner": lease.owner, "execution_id": lease.execution_id, "epoch": lease.epoch}
        path = f"/commands/{_path(command.id)}/complete"
        try:
            answer = self._read(work.ClaimedCommand, "POST", path, body=body)
        except RemoteStaleLease:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch) from None
        return answer.to_domain()

    def release_command(self, command: Command) -> None:
        """Give a claimed command back; see ``Store.release_command``."""
        if command.owner is None:
            return
        body = {"owner": command.owner, "execution_id": command.execution_id}
        self._call("POST", f"/commands/{_path(command.id)}/release", body=body)

    def register_node(
        self,
        node_id: str | None = None,
        *,
        kind: str = "worker",
        buckets: Iterable[int] | None = None,
        ttl: float | timedelta = DEFAULT_TTL,
        jobs: Iterable[tuple[str, int]] = (),
    ) -> Node:
        """Register (or renew) this process as a live node; see ``Store.register_node``."""
        body: dict[str, Any] = {"kind": kind, "ttl_seconds": _seconds(ttl)}
        if buckets is not None:
            body["buckets"] = list(buckets)
        served = [{"job": job, "version": version} for job, version in jobs]
        if served:
            body["jobs"] = served
        name = node_id if node_id is not None else default_node_id()
        return self._read(reports.Node, "PUT", f"/nodes/{_path(name)}", body=body).to_domain()

    def publish_jobs(self, entries: Iterable[JobEntry]) -> list[JobEntry]:
        """Publish job versions to the service's catalogue (``POST /jobs``); see
        ``Store.publish_jobs``. A changed definition of a published version raises
        :class:`~fencepost.domain.errors.RemoteCatalogueConflict` (a ``CatalogueConflict``).
        """
        items = [catalogue.JobDefinition.of(entry) for entry in entries]
        if not items:
            return []
        answer = self._read_list(catalogue.JobEntry, "POST", "/jobs", body={"entries": items})
        return [entry.to_domain() for entry in answer]

    def deregister_node(self, node_id: str) -> None:
        """Forget a node at once (a clean shutdown)."""
        self._call("DELETE", f"/nodes/{_path(node_id)}")

    def clock_offset(self, written_at: datetime) -> float | None:
        """None: the service's store arbitrates leases by its own clock, not this process's."""
        return None

    def nodes(self) -> list[Node]:
        """The live nodes."""
        return [n.to_domain() for n in self._read_list(reports.Node, "GET", "/nodes")]


@cache
def _list_of(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _on(lease: Lease, verb: str) -> str:
    return f"/executions/{_path(lease.execution_id)}/{verb}"


def _report(lease: Lease, **fields: Any) -> dict[str, Any]:
    """A report body: the lease's owner and epoch, and ``fields`` that are not None."""
    body = {k: v for k, v in fields.items() if v is not None or k == "progress"}
    return {"owner": lease.owner, "epoch": lease.epoch, **body}


def _result_json(result: JSON) -> tuple[str | None, str]:
    """``result`` as JSON text, or None and why it cannot be sent as JSON."""
    try:
        return payloads.encode(result, field="result", limit=_ENCODE_LIMIT), ""
    except ValueError as exc:
        return None, str(exc)


def _completion_json(lease: Lease, result_json: str, *, with_id: bool) -> str:
    """A completion body around an already encoded result: each result is encoded once."""
    head: dict[str, Any] = {"execution_id": lease.execution_id} if with_id else {}
    fields = payloads.encode(
        {**head, "owner": lease.owner, "epoch": lease.epoch}, field="body", limit=_ENCODE_LIMIT
    )
    return f'{fields[:-1]},"result":{result_json}}}'
