"""OpenTelemetry traces of submits, claims and attempts (the ``otel`` extra).

Tracing is on when the application has set an OpenTelemetry tracer provider
(``opentelemetry.trace.set_tracer_provider``, or an auto-instrumentation that does).
fencepost never imports OpenTelemetry itself to find out: it looks for
``opentelemetry.trace`` among the modules the process has already imported, and
an application that set a provider has imported it. So without the extra, or with
it installed and unused, or with the API's default no-op provider, nothing is
imported, nothing is stored, and each hook below costs a dictionary lookup.

With tracing on:

* a submit (``Store.submit``, ``submit_or_find``, ``submit_many``) runs in a
  ``fencepost.submit`` span (one per call; a batch's carries its count; AsyncStore's
  too), and stores
  the W3C context of that span (``traceparent``, ``tracestate``) on each execution
  it creates, as a JSON object in the ``trace_context`` column;
* fencepost's HTTP clients (``Client``, ``AsyncClient``) send the current context as
  ``traceparent`` and ``tracestate`` headers (:func:`outgoing`), and the service's
  submit routes continue it (:func:`remote_parent`): a submit over HTTP joins the
  caller's trace as a direct one does;
* a worker's claim that leased executions is a ``fencepost.claim`` span, linked
  to the submit spans of what it leased;
* each attempt is a ``fencepost.run <job>`` span whose parent is the submit span
  (the attempt continues the submitter's trace, in whatever process it ran) and
  that is current while the handler runs, so the handler's own spans nest under
  it. Its ``fencepost.outcome`` says how the attempt ended (see :data:`OUTCOMES`);
  a result the store refused as stale adds a ``fencepost.stale_refused`` event.

Attribute names follow the messaging semantic conventions where one fits
(``messaging.system``, ``messaging.operation.type``, ``messaging.destination.name``,
``messaging.message.id``, ``messaging.batch.message_count``), and fencepost's own
are prefixed ``fencepost.``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from fencepost.domain.errors import StaleLease
from fencepost.domain.models import Execution, Lease
from fencepost.domain.submission import NewExecution

if TYPE_CHECKING:  # the otel extra's types, for the checker only
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "OUTCOMES",
    "SYSTEM",
    "attempt_started",
    "claim_started",
    "claimed",
    "current",
    "end_attempt",
    "insert",
    "insert_async",
    "outgoing",
    "remote_parent",
    "stale_refused",
]

#: The ``messaging.system`` of every span.
SYSTEM = "fencepost"

#: The values of an attempt span's ``fencepost.outcome``.
OUTCOMES = frozenset(
    {
        "succeeded",  # completed, and the store took the result
        "retried",  # failed (or timed out) with attempts left: waits to run again
        "dead_lettered",  # failed on its last attempt: FAILED for good
        "failed",  # failed permanently before its last attempt (PermanentFailure, bad result)
        "timed_out",  # the handler outlived its timeout (fencepost.execution.state says what next)
        "cancelled",  # cancel requested while it ran: aborted
        "released",  # handed back unfinished (shutdown, or never started in time)
        "snoozed",  # the handler snoozed: handed back until later, the attempt not counted
        "refused_stale",  # the store refused the outcome: the lease had been lost
        "rejected",  # the store refused a value of the outcome (logged by the worker)
        "dropped",  # not written before the lease surely expired (store unreachable)
    }
)

_TRACE_MODULE = "opentelemetry.trace"
#: The tracer of the provider last seen, as (provider, tracer).
_cached: tuple[Any, Any] | None = None


def _tracer() -> Tracer | None:
    """fencepost's tracer, or None when tracing is off (nothing set up, or a no-op provider)."""
    global _cached
    api = sys.modules.get(_TRACE_MODULE)
    if api is None:
        return None  # never imported here: no provider can have been set
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None  # the API's default: spans would record nothing
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]  # type: ignore[no-any-return]
    tracer = provider.get_tracer("fencepost", importlib.metadata.version("fencepost"))
    _cached = (provider, tracer)
    return tracer  # type: ignore[no-any-return]


def _otel(name: str) -> Any:
    """A module of the OpenTelemetry API (imported only while tracing is on)."""
    return importlib.import_module(f"opentelemetry.{name}")


# -- submitting ----------------------------------------------------------------------------


def insert(
    do_insert: Callable[[Sequence[NewExecution]], list[Execution]],
    batch: Sequence[NewExecution],
    location: str,
) -> list[Execution]:
    """``do_insert(batch)``, in a ``fencepost.submit`` span when tracing is on.

    Each new execution then carries the span's W3C context (its ``trace_context``):
    the attempts of the execution continue this trace. Executions that already
    existed (an idempotent repeat) keep the context of the submit that created them.
    """
    if _tracer() is None:
        return do_insert(batch)
    with _submit_span(batch, location) as (traced, done):
        return done(do_insert(traced))


async def insert_async(
    do_insert: Callable[[Sequence[NewExecution]], Awaitable[list[Execution]]],
    batch: Sequence[NewExecution],
    location: str,
) -> list[Execution]:
    """:func:`insert` for a coroutine (``AsyncStore``'s submits): the same span."""
    if _tracer() is None:
        return await do_insert(batch)
    with _submit_span(batch, location) as (traced, done):
        return done(await do_insert(traced))


@contextmanager
def _submit_span(
    batch: Sequence[NewExecution], location: str
) -> Iterator[tuple[Sequence[NewExecution], Callable[[list[Execution]], list[Execution]]]]:
    """The ``fencepost.submit`` span around one insert: yields the batch carrying the
    span's context, and what to hand the inserted executions to (it records them)."""
    tracer = _tracer()
    assert tracer is not None
    trace, propagate = _otel("trace"), _otel("propagate")
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "fencepost.store": location,
    }
    if len(batch) == 1:
        attributes["fencepost.job"] = batch[0].job
        attributes["messaging.destination.name"] = attributes["fencepost.queue"] = batch[0].queue
    else:
        attributes["messaging.batch.message_count"] = len(batch)
    with tracer.start_as_current_span(
        "fencepost.submit", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        context = json.dumps(carrier, separators=(",", ":")) if carrier else None

        def done(executions: list[Execution]) -> list[Execution]:
            created = sum(e.id == n.id for e, n in zip(executions, batch, strict=True))
            span.set_attribute("fencepost.submit.created", created)
            if len(executions) == 1:
                span.set_attribute("messaging.message.id", executions[0].id)
                span.set_attribute("fencepost.execution.id", executions[0].id)
            return executions

        yield [replace(n, trace_context=context) for n in batch], done


def outgoing() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``) for a
    request fencepost's HTTP clients send, so that a submit over HTTP continues the
    caller's trace as a direct one does. Empty when tracing is off or no span is
    current."""
    if _tracer() is None:
        return {}
    carrier: dict[str, str] = {}
    _otel("propagate").inject(carrier)
    return carrier


@contextmanager
def remote_parent(headers: Mapping[str, str]) -> Iterator[None]:
    """Within the block, the trace context of a remote caller's W3C headers is current.

    So an HTTP submit's span continues the caller's trace. Nothing happens when
    tracing is off or no ``traceparent`` came, nor when a span is current already (an
    instrumented server's, which continued the caller's trace itself: the submit
    nests in it); a malformed header, or one longer than the W3C format allows, is
    ignored (as the W3C recommends), never refused.
    """
    parent = headers.get("traceparent")
    if parent is None or len(parent) > _MAX_TRACEPARENT or _tracer() is None:
        yield
        return
    if _otel("trace").get_current_span().get_span_context().is_valid:
        yield
        return
    carrier = {"traceparent": parent}
    state = headers.get("tracestate")
    if state is not None and len(state) <= _MAX_TRACESTATE:
        carrier["tracestate"] = state
    context = _otel("context")
    token = context.attach(_otel("propagate").extract(carrier, context=context.Context()))
    try:
        yield
    finally:
        context.detach(token)


#: The longest headers read: a version 00 traceparent has 55 characters (later
#: versions may append fields), a tracestate at most 32 members of 256.
_MAX_TRACEPARENT = 256
_MAX_TRACESTATE = 8192


# -- the worker ----------------------------------------------------------------------------


def claim_started() -> int | None:
    """When a claim round trip begins, in ns since the epoch (None when tracing is off)."""
    return None if _tracer() is None else time.time_ns()


def claimed(leases: Sequence[Lease], owner: str, started_ns: int | None) -> None:
    """Record a claim round trip that leased ``leases`` (begun at ``started_ns``, ns since
    the epoch) as a ``fencepost.claim`` span, linked to the submit span of each lease.

    Only claims that leased something are recorded: an idle worker's empty polls would
    otherwise fill a trace store with nothing.
    """
    if started_ns is None or not leases:
        return
    tracer = _tracer()
    if tracer is None:
        return
    trace = _otel("trace")
    links = []
    for lease in leases:
        parent = trace.get_current_span(_extract(lease.trace_context)).get_span_context()
        if parent.is_valid:
            links.append(trace.Link(parent))
    span = tracer.start_span(
        "fencepost.claim",
        context=_otel("context").Context(),  # a root: a claim serves many traces
        kind=trace.SpanKind.CLIENT,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "receive",
            "messaging.batch.message_count": len(leases),
            "fencepost.owner": owner,
        },
        links=links,
        start_time=started_ns,
    )
    span.end()


def attempt_started(lease: Lease) -> Span | None:
    """The span of the attempt ``lease`` began (None when tracing is off).

    Its parent is the submit span stored with the execution (a root span when it
    was submitted untraced). The caller ends it with :func:`end_attempt`.
    """
    tracer = _tracer()
    if tracer is None:
        return None
    return tracer.start_span(
        f"fencepost.run {lease.job}",
        context=_extract(lease.trace_context),
        kind=_otel("trace").SpanKind.CONSUMER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.destination.name": lease.queue,
            "messaging.message.id": lease.execution_id,
            "fencepost.execution.id": lease.execution_id,
            "fencepost.job": lease.job,
            "fencepost.job.version": -1 if lease.job_version is None else lease.job_version,
            "fencepost.queue": lease.queue,
            "fencepost.attempt": lease.attempt,
            "fencepost.max_attempts": lease.max_attempts,
            "fencepost.epoch": lease.epoch,
            "fencepost.owner": lease.owner,
        },
    )


def _extract(stored: str | None) -> Any:
    """The OpenTelemetry context a stored trace context names (an empty one if none).

    Only the W3C fields are read, as strings; anything else a row may hold (it is
    the database's text, not ours once stored) gives an empty context: a root span.
    """
    carrier: dict[str, str] = {}
    if stored is not None:
        try:
            decoded = json.loads(stored)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            carrier = {
                k: v
                for k, v in decoded.items()
                if k in ("traceparent", "tracestate") and isinstance(v, str)
            }
    empty = _otel("context").Context()
    return _otel("propagate").extract(carrier, context=empty) if carrier else empty


def current(span: Span | None) -> AbstractContextManager[Any]:
    """Make ``span`` the current span while the block runs (nothing when None).

    Neither ends the span nor marks it on an exception: :func:`end_attempt` does, once
    the outcome is known.
    """
    if span is None:
        return _NOTHING
    return _otel("trace").use_span(  # type: ignore[no-any-return]
        span, end_on_exit=False, record_exception=False, set_status_on_exception=False
    )


_NOTHING = nullcontext()


class Traced(Protocol):
    """What holds an attempt's span until its outcome is known (a worker's ``Run``)."""

    span: Any


def end_attempt(
    run: Traced,
    outcome: str,
    *,
    state: str | None = None,
    error: str | None = None,
    exc: BaseException | None = None,
) -> None:
    """End ``run``'s attempt span with ``outcome`` (one of :data:`OUTCOMES`).

    ``state`` is the execution's state the outcome left (when known); an ``error``
    marks the span's status as an error with the error's first line, and ``exc``
    (what the handler raised) is recorded as an exception event. Ending twice is
    harmless: the first outcome holds.
    """
    span = run.span
    if span is None:
        return
    run.span = None
    span.set_attribute("fencepost.outcome", outcome)
    if state is not None:
        span.set_attribute("fencepost.execution.state", state)
    if exc is not None:
        span.record_exception(exc)
    if error is not None:
        trace = _otel("trace")
        span.set_status(trace.Status(trace.StatusCode.ERROR, error.partition("\n")[0]))
    span.end()


def stale_refused(run: Traced, lease: Lease, exc: StaleLease, current_epoch: int | None) -> None:
    """Record on ``run``'s attempt span that the store refused its outcome as stale, and end it.

    The ``fencepost.stale_refused`` event carries the epoch the worker presented and
    the execution's epoch when the refusal was looked at (-1 when unknown); the
    span's status is an error saying the lease was lost.
    """
    span = run.span
    if span is None:
        return
    span.add_event(
        "fencepost.stale_refused",
        {
            "fencepost.epoch": lease.epoch,
            "fencepost.current_epoch": -1 if current_epoch is None else current_epoch,
            "fencepost.owner": lease.owner,
        },
    )
    end_attempt(run, "refused_stale", error=f"stale lease refused: {exc}")
