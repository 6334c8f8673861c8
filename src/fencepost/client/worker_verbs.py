"""The worker protocol's verbs over HTTP (claims, heartbeats, outcomes, commands, nodes),
each described once as :mod:`fencepost.client.verbs` describes the others: a generator
of :class:`~fencepost.client.exchange.Request` that the client runs.

None of these is sent again by the client after an outage: the worker keeps its
outcomes through one and retries them itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Unpack

from fencepost.client.arguments import claim_queues
from fencepost.client.exchange import ENCODE_LIMIT, Request, Verb, quoted, read, read_list, seconds
from fencepost.domain import payloads
from fencepost.domain.catalogue import JobEntry
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.defaults import DEFAULT_COMMAND_TTL, DEFAULT_TTL
from fencepost.domain.errors import RemoteStaleLease, ResultInvalid, StaleLease
from fencepost.domain.filters import checked
from fencepost.domain.limits import Limit
from fencepost.domain.machine import snooze_delay
from fencepost.domain.models import JSON, Command, Execution, Lease
from fencepost.domain.nodes import Node, default_node_id
from fencepost.wire import catalogue, executions, reports, work


def claim(owner: str, **options: Unpack[ClaimOptions]) -> Verb[list[Lease]]:
    """``POST /claims``."""
    leases, _ = yield from claimed(owner, **options)
    return leases


def claimed(owner: str, **options: Unpack[ClaimOptions]) -> Verb[tuple[list[Lease], float | None]]:
    """``POST /claims``: the leases, and the service's ``next_start_in`` hint."""
    checked(options, ClaimOptions, "claim")
    body: dict[str, Any] = {
        "owner": owner,
        "limit": options.get("limit", 1),
        "ttl_seconds": seconds(options.get("ttl", DEFAULT_TTL)),
    }
    if (jobs := options.get("jobs")) is not None:
        body["jobs"] = list(jobs)
    if (versions := options.get("versions")) is not None:
        body["versions"] = [{"job": j, "version": v} for j, v in versions]
    if (buckets := options.get("buckets")) is not None:
        body["buckets"] = list(buckets)
    if (cap := options.get("max_per_bucket")) is not None:
        body["max_per_bucket"] = cap
    if (queues := options.get("queues")) is not None:
        body["queues"] = claim_queues(queues)
    answer = yield from read(work.Leases, Request("POST", "/claims", body=body, retry=False))
    return [lease.to_domain() for lease in answer.leases], answer.next_start_in


def claim_occurrence(
    schedule_id: str, slot: str, owner: str, *, ttl: float | timedelta = DEFAULT_TTL
) -> Verb[Lease]:
    """``POST /jobs/{task}/{slot}/claim``."""
    path = f"/jobs/{quoted(schedule_id)}/{quoted(slot)}/claim"
    body = {"owner": owner, "ttl_seconds": seconds(ttl)}
    return (yield from read(work.Lease, _worker("POST", path, body=body))).to_domain()


def complete_occurrence(
    schedule_id: str, slot: str, lease: Lease, result: JSON = None
) -> Verb[Execution]:
    """``POST /jobs/{task}/{slot}/complete``."""
    path = f"/jobs/{quoted(schedule_id)}/{quoted(slot)}/complete"
    body = {"owner": lease.owner, "epoch": lease.epoch, "result": result}
    return (yield from read(executions.Execution, _worker("POST", path, body=body))).to_domain()


def heartbeat(
    lease: Lease, *, ttl: float | timedelta = DEFAULT_TTL, progress: JSON = None
) -> Verb[Lease]:
    """``POST /executions/{id}/heartbeat``; :class:`StaleLease` if no longer held."""
    body = _report(lease, ttl_seconds=seconds(ttl), progress=progress)
    try:
        answer = yield from read(work.Lease, _worker("POST", _on(lease, "heartbeat"), body=body))
    except RemoteStaleLease:
        raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
    return answer.to_domain()


def heartbeat_many(
    beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = DEFAULT_TTL
) -> Verb[list[Lease | StaleLease]]:
    """``POST /heartbeats``: per item the lease or its refusal."""
    if not beats:
        return []
    items = [{"execution_id": le.execution_id, **_report(le, progress=p)} for le, p in beats]
    body = {"ttl_seconds": seconds(ttl), "items": items}
    answer = yield from read(work.HeartbeatResults, _worker("POST", "/heartbeats", body=body))
    out: list[Lease | StaleLease] = []
    for (lease, _), result in zip(beats, answer.results, strict=True):
        if isinstance(result, work.Lease):
            out.append(result.to_domain())
        else:
            out.append(StaleLease(lease.execution_id, lease.owner, lease.epoch))
    return out


def complete(lease: Lease, result: JSON = None) -> Verb[Execution]:
    """``POST /executions/{id}/complete``; a result that is not JSON fails it for good."""
    encoded, invalid = _result_json(result)
    if encoded is None:
        yield from _fail_invalid(lease, invalid)
        raise ResultInvalid(lease.execution_id, invalid)
    try:
        body = _completion_json(lease, encoded, with_id=False)
        request = _worker("POST", _on(lease, "complete"), body_json=body)
        answer = yield from read(executions.Execution, request)
    except RemoteStaleLease:
        raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
    return answer.to_domain()


def complete_many(results: Sequence[tuple[Lease, JSON]]) -> Verb[list[StaleLease | None]]:
    """``POST /completions``: per item None or its refusal; see ``Client.complete_many``."""
    out: list[StaleLease | None] = [None] * len(results)
    items, positions = [], []
    for index, (lease, result) in enumerate(results):
        encoded, invalid = _result_json(result)
        if encoded is None:
            try:
                yield from _fail_invalid(lease, invalid)
            except StaleLease as refused:
                out[index] = refused
            continue
        items.append(_completion_json(lease, encoded, with_id=True))
        positions.append(index)
    if items:
        body = '{"items":[' + ",".join(items) + "]}"
        request = _worker("POST", "/completions", body_json=body)
        answer = yield from read(work.CompletionResults, request)
        for index, refusal in zip(positions, answer.results, strict=True):
            if refusal is not None:
                lease = results[index][0]
                out[index] = StaleLease(lease.execution_id, lease.owner, lease.epoch)
    return out


def _fail_invalid(lease: Lease, invalid: str) -> Verb[Execution]:
    return (yield from fail(lease, f"result_invalid: {invalid}", retryable=False))


def fail(
    lease: Lease,
    error: str,
    *,
    retryable: bool = True,
    retry_in: float | timedelta | None = None,
    timed_out: bool = False,
) -> Verb[Execution]:
    """``POST /executions/{id}/fail``."""
    body = _report(
        lease,
        error=error,
        retryable=retryable,
        timed_out=timed_out,
        retry_in_seconds=None if retry_in is None else seconds(retry_in),
    )
    return (yield from _lease_verb(lease, "fail", body))


def release(lease: Lease, *, reason: str = "released") -> Verb[Execution]:
    """``POST /executions/{id}/release``."""
    return (yield from _lease_verb(lease, "release", _report(lease, reason=reason)))


def snooze(
    lease: Lease, seconds: float | timedelta, *, reason: str | None = None
) -> Verb[Execution]:
    """``POST /executions/{id}/snooze``; ``seconds`` is checked here, as the store would."""
    body = _report(lease, seconds=snooze_delay(seconds).total_seconds())
    if reason is not None:
        body["reason"] = reason
    return (yield from _lease_verb(lease, "snooze", body))


def abort(lease: Lease, *, reason: str = "cancel requested") -> Verb[Execution]:
    """``POST /executions/{id}/abort``."""
    return (yield from _lease_verb(lease, "abort", _report(lease, reason=reason)))


def _lease_verb(lease: Lease, verb: str, body: dict[str, Any]) -> Verb[Execution]:
    try:
        request = _worker("POST", _on(lease, verb), body=body)
        answer = yield from read(executions.Execution, request)
    except RemoteStaleLease:
        raise StaleLease(lease.execution_id, lease.owner, lease.epoch) from None
    return answer.to_domain()


def claim_commands(
    owner: str,
    execution_ids: Iterable[str],
    *,
    ttl: float | timedelta = DEFAULT_COMMAND_TTL,
    limit: int = 100,
) -> Verb[list[Command]]:
    """``POST /commands/claims``."""
    ids = list(dict.fromkeys(execution_ids))
    if not ids:
        return []
    body = {"owner": owner, "execution_ids": ids, "ttl_seconds": seconds(ttl), "limit": limit}
    answer = yield from read(work.ClaimedCommands, _worker("POST", "/commands/claims", body=body))
    return [c.to_domain() for c in answer.commands]


def complete_command(command: Command, lease: Lease) -> Verb[Command]:
    """``POST /commands/{id}/complete``."""
    if command.owner != lease.owner or command.execution_id != lease.execution_id:
        raise StaleLease(command.execution_id, lease.owner, lease.epoch)
    body = {"owner": lease.owner, "execution_id": lease.execution_id, "epoch": lease.epoch}
    path = f"/commands/{quoted(command.id)}/complete"
    try:
        answer = yield from read(work.ClaimedCommand, _worker("POST", path, body=body))
    except RemoteStaleLease:
        raise StaleLease(command.execution_id, lease.owner, lease.epoch) from None
    return answer.to_domain()


def release_command(command: Command) -> Verb[None]:
    """``POST /commands/{id}/release`` (nothing to send for an unclaimed command)."""
    if command.owner is None:
        return
    body = {"owner": command.owner, "execution_id": command.execution_id}
    yield _worker("POST", f"/commands/{quoted(command.id)}/release", body=body)


def register_node(
    node_id: str | None = None,
    *,
    kind: str = "worker",
    buckets: Iterable[int] | None = None,
    ttl: float | timedelta = DEFAULT_TTL,
    jobs: Iterable[tuple[str, int]] = (),
) -> Verb[Node]:
    """``PUT /nodes/{id}``."""
    body: dict[str, Any] = {"kind": kind, "ttl_seconds": seconds(ttl)}
    if buckets is not None:
        body["buckets"] = list(buckets)
    served = [{"job": job, "version": version} for job, version in jobs]
    if served:
        body["jobs"] = served
    name = node_id if node_id is not None else default_node_id()
    request = _worker("PUT", f"/nodes/{quoted(name)}", body=body)
    return (yield from read(reports.Node, request)).to_domain()


def publish_jobs(entries: Iterable[JobEntry]) -> Verb[list[JobEntry]]:
    """``POST /jobs``."""
    items = [catalogue.JobDefinition.of(entry) for entry in entries]
    if not items:
        return []
    request = _worker("POST", "/jobs", body={"entries": items})
    answer = yield from read_list(catalogue.JobEntry, request)
    return [entry.to_domain() for entry in answer]


def declare_limits(limits: Iterable[Limit]) -> Verb[None]:
    """``POST /jobs/limits``."""
    items = [catalogue.DeclaredLimit.of(limit) for limit in limits]
    if items:
        yield _worker("POST", "/jobs/limits", body={"limits": items})


def deregister_node(node_id: str) -> Verb[None]:
    """``DELETE /nodes/{id}``."""
    yield _worker("DELETE", f"/nodes/{quoted(node_id)}")


def nodes() -> Verb[list[Node]]:
    """``GET /nodes``."""
    rows = yield from read_list(reports.Node, Request("GET", "/nodes"))
    return [n.to_domain() for n in rows]


def _worker(method: str, path: str, **fields: Any) -> Request:
    """A request of the worker protocol: never sent again by the client (the worker
    keeps its outcomes through an outage and retries them itself)."""
    return Request(method, path, retry=False, **fields)


def _on(lease: Lease, verb: str) -> str:
    return f"/executions/{quoted(lease.execution_id)}/{verb}"


def _report(lease: Lease, **fields: Any) -> dict[str, Any]:
    """A report body: the lease's owner and epoch, and ``fields`` that are not None."""
    body = {k: v for k, v in fields.items() if v is not None or k == "progress"}
    return {"owner": lease.owner, "epoch": lease.epoch, **body}


def _result_json(result: JSON) -> tuple[str | None, str]:
    """``result`` as JSON text, or None and why it cannot be sent as JSON."""
    try:
        return payloads.encode(result, field="result", limit=ENCODE_LIMIT), ""
    except ValueError as exc:
        return None, str(exc)


def _completion_json(lease: Lease, result_json: str, *, with_id: bool) -> str:
    """A completion body around an already encoded result: each result is encoded once."""
    head: dict[str, Any] = {"execution_id": lease.execution_id} if with_id else {}
    fields = payloads.encode(
        {**head, "owner": lease.owner, "epoch": lease.epoch}, field="body", limit=ENCODE_LIMIT
    )
    return f'{fields[:-1]},"result":{result_json}}}'
