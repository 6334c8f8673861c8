"""Turning a submit request into a validated new execution (pure; no I/O)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from fencepost.domain import payloads
from fencepost.domain.buckets import bucket_for
from fencepost.domain.checks import (
    DEFAULT_QUEUE,
    INT32_MAX,
    require_int,
    require_name,
    require_queue,
)
from fencepost.domain.durations import as_aware_utc, as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.filters import checked
from fencepost.domain.limits import require_limit_key
from fencepost.domain.models import JSON, Execution, scheduled_execution
from fencepost.domain.slots import slot_builder

#: How many attempts an execution gets unless the submitter says otherwise.
DEFAULT_MAX_ATTEMPTS = 3


class SubmitOptions(TypedDict, total=False):
    """``submit``'s options beside ``job`` and ``inputs``, declared once.

    Every way in (``Store``, ``AsyncStore``, ``App``, ``Client``, ``AsyncClient``,
    Django's ``submit``) takes them as keywords typed by this
    (``**options: Unpack[SubmitOptions]``), and the body of ``POST /executions``
    carries each (tests/unit/test_argument_names.py holds them equal), so an option
    is added in one place. Each may be left out (as None); what each means and how it
    is checked is :meth:`Store.submit <fencepost.store.base.Store.submit>`'s.
    """

    version: int | None
    execute_at: datetime | None
    delay: float | timedelta | None
    idempotency_key: str | None
    max_attempts: int | None
    timeout: float | timedelta | None
    bucket_key: str | None
    priority: int | None
    queue: str | None
    limit_key: str | None
    #: The deprecated name of ``version`` (a :class:`DeprecationWarning`).
    job_version: int | None


#: The arguments ``submit`` accepts (and ``submit_many`` accepts in each item);
#: ``job_version`` is the deprecated name of ``version`` (see :func:`canonical`).
SUBMIT_ARGUMENTS = frozenset({"job", "inputs", *SubmitOptions.__annotations__})

#: The fields a job's published defaults fill in when its submitter left them out:
#: at submit for a published job, at publication for work submitted before it.
UNSET_FIELDS = ("max_attempts", "timeout", "priority", "queue")

#: The longest idempotency or bucket key.
MAX_KEY = 255
#: The range of ``priority`` (a 32-bit integer in SQL).
PRIORITY_RANGE = (-INT32_MAX - 1, INT32_MAX)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewExecution:
    """A validated submission, ready for a backend to insert."""

    id: str
    job: str
    job_version: int | None
    inputs: JSON
    inputs_json: str
    due_at: datetime  #: resolved on the submitting process's view of the store clock
    execute_at: datetime | None  #: as requested, so a server-side clock can resolve due_at
    delay: timedelta | None  #: as requested (see execute_at)
    priority: int
    queue: str
    max_attempts: int
    timeout: timedelta | None
    idempotency_key: str | None
    request_hash: str | None  #: fingerprint of the request, set when a key is given
    bucket: int
    bucket_key: str | None
    created_at: datetime
    #: The W3C trace context of the submit's span, as JSON (see fencepost.tracing);
    #: None when tracing is off.
    trace_context: str | None = None
    #: What the submitter left to a job no one had published yet (a comma-separated
    #: subset of :data:`UNSET_FIELDS`), for the job's defaults to fill in when it is
    #: published; None when the catalogue's rule was applied at submit.
    unset_defaults: str | None = None
    #: Who submitted it, for its SUBMITTED audit record (an HTTP token's name, the
    #: CLI's user@host); None when the submitter did not say.
    actor: str | None = None
    #: The key its limits count it under (see Execution.limit_key).
    limit_key: str | None = None

    def to_execution(
        self, *, due_at: datetime | None = None, created_at: datetime | None = None
    ) -> Execution:
        """The execution as it stands right after insertion.

        ``due_at`` and ``created_at`` are the times a backend resolved on its own
        clock; by default, the ones this submission was prepared with.
        """
        return scheduled_execution(
            self,
            self,
            created_at=self.created_at if created_at is None else created_at,
            due_at=due_at,
            timeout=self.timeout,
            bucket_key=self.bucket_key,
        )


def prepare(
    job: object,
    *,
    new_id: str,
    now: datetime,
    max_payload_bytes: int,
    num_buckets: int,
    version: object = None,
    inputs: object = None,
    execute_at: object = None,
    delay: object = None,
    idempotency_key: object = None,
    max_attempts: object = DEFAULT_MAX_ATTEMPTS,
    timeout: object = None,
    bucket_key: object = None,
    priority: object = 0,
    queue: object = None,
    unset_defaults: str | None = None,
    actor: str | None = None,
    limit_key: object = None,
    inputs_json: str | None = None,
) -> NewExecution:
    """Validate one submit request; every error names its field. ``now`` is the store's.

    ``inputs_json``: ``inputs`` already encoded as they are stored (by the job
    catalogue's schema check, which encodes them to check them as a handler gets
    them), so that a submit encodes its inputs once.

    A bad ``version`` is reported on the field ``job_version``, the execution's field
    it sets (as it was before ``version`` was the argument's name).
    """
    job = require_name(job, "job")
    job_version = (
        None if version is None else require_int(version, "job_version", low=1, high=INT32_MAX)
    )
    if inputs_json is None:
        inputs = payloads.as_inputs(inputs)
        inputs_json = payloads.encode(inputs, field="inputs", limit=max_payload_bytes)
    if execute_at is not None and delay is not None:
        raise ValidationError("execute_at", "give execute_at or delay, not both")
    at: datetime | None = None
    wait: timedelta | None = None
    if execute_at is not None:
        due_at = at = as_aware_utc(execute_at, field="execute_at")
    else:
        wait = timedelta(0) if delay is None else as_duration(delay, field="delay", allow_zero=True)
        due_at = now + wait
    key = (
        None
        if idempotency_key is None
        else require_name(idempotency_key, "idempotency_key", max_len=MAX_KEY)
    )
    attempts = require_int(max_attempts, "max_attempts", low=1, high=INT32_MAX)
    limit = None if timeout is None else as_duration(timeout, field="timeout")
    bkey = None if bucket_key is None else require_name(bucket_key, "bucket_key", max_len=MAX_KEY)
    prio = require_int(priority, "priority", low=PRIORITY_RANGE[0], high=PRIORITY_RANGE[1])
    queue_name = require_queue(queue)
    lkey = require_limit_key(limit_key)
    request_hash = None
    if key is not None:
        request_hash = payloads.fingerprint(
            {
                "job": job,
                "job_version": job_version,
                # The inputs as stored (JSON: keys are strings), not as given: sorting
                # keys of mixed types would fail, and {1: "a"} is stored as {"1": "a"}.
                "inputs": payloads.decode(inputs_json),
                "execute_at": None if execute_at is None else due_at.isoformat(),
                "delay": None if delay is None or wait is None else wait.total_seconds(),
                "max_attempts": attempts,
                "timeout": None if limit is None else limit.total_seconds(),
                "bucket_key": bkey,
                "priority": prio,
            }
            # Only a named queue is fingerprinted: keys stored before queues existed
            # (all in the default queue) keep matching their retries.
            | ({} if queue_name == DEFAULT_QUEUE else {"queue": queue_name})
            | ({} if lkey is None else {"limit_key": lkey})
        )
    return _build_new_execution(
        id=new_id,
        job=job,
        job_version=job_version,
        inputs=inputs,
        inputs_json=inputs_json,
        due_at=due_at,
        execute_at=at,
        delay=wait,
        priority=prio,
        queue=queue_name,
        max_attempts=attempts,
        timeout=limit,
        idempotency_key=key,
        request_hash=request_hash,
        bucket=bucket_for(bkey if bkey is not None else new_id, num_buckets),
        bucket_key=bkey,
        created_at=now,
        trace_context=None,
        unset_defaults=unset_defaults,
        actor=actor,
        limit_key=lkey,
    )


#: ``NewExecution(**fields)`` at a half of the cost (see :func:`slot_builder`): one is
#: built per submitted request.
_build_new_execution = slot_builder(NewExecution)


def canonical(arguments: Mapping[str, Any], *, stacklevel: int = 2) -> dict[str, Any]:
    """``arguments`` with the deprecated ``job_version`` renamed ``version``.

    Warns (:class:`DeprecationWarning`, at ``stacklevel`` above this call) when the old
    name is used; both names at once are a :class:`ValidationError` on ``version``.
    """
    if "job_version" not in arguments:
        return dict(arguments)
    warnings.warn(
        "job_version= is deprecated; pass version= instead",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    renamed = dict(arguments)
    old = renamed.pop("job_version")
    if "version" in renamed:
        raise ValidationError("version", "give version or job_version (deprecated), not both")
    renamed["version"] = old
    return renamed


def submit_options(
    inputs: JSON, options: Mapping[str, Any], *, verb: str = "submit", stacklevel: int = 2
) -> dict[str, Any]:
    """A ``submit`` call's ``inputs`` and keyword ``options`` as one mapping of its
    arguments, the deprecated ``job_version`` given as ``version``.

    A name that is not a :class:`SubmitOptions` is the TypeError Python gives an
    unknown keyword (naming ``verb``). ``stacklevel`` counts from the caller of this
    function, as :func:`canonical`'s.
    """
    named = {"inputs": inputs, **checked(options, SubmitOptions, verb)}
    if "job_version" not in named:
        return named
    if named.get("version") is None:
        named.pop("version", None)
    return canonical(named, stacklevel=stacklevel + 1)


def check_arguments(item: Mapping[str, Any], *, index: int) -> None:
    """Refuse unknown or missing arguments in one ``submit_many`` item."""
    if not isinstance(item, Mapping):
        raise ValidationError(f"[{index}]", f"must be a mapping of submit arguments, got {item!r}")
    if not SUBMIT_ARGUMENTS.issuperset(item):
        unknown = sorted(set(item) - SUBMIT_ARGUMENTS)
        raise ValidationError(f"[{index}].{unknown[0]}", "is not an argument of submit")
    if "job" not in item:
        raise ValidationError(f"[{index}].job", "is required")
