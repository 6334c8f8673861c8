"""``fencepost submit``: store one execution of a job, now or later."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, records
from fencepost.cli.output import Output, when
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.payloads import DEFAULT_MAX_PAYLOAD_BYTES
from fencepost.domain.submission import DEFAULT_MAX_ATTEMPTS, prepare

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from fencepost.store.base import Store

#: The options ``submit`` and ``schedule add`` share, by the argument each sets.
JOB_OPTIONS = {
    "job": "JOB",
    "job_version": "--job-version",
    "version": "--job-version",
    "inputs": "--input",
    "max_attempts": "--max-attempts",
    "priority": "--priority",
    "queue": "--queue",
    "limit_key": "--limit-key",
}
#: The option that sets each argument of ``Store.submit``, to name it in a refusal.
OPTIONS = JOB_OPTIONS | {
    "execute_at": "--at",
    "delay": "--in",
    "idempotency_key": "--key",
    "timeout": "--timeout",
    "bucket_key": "--bucket-key",
}


def add_parsers(commands: Any) -> None:
    """Register ``submit``."""
    p = common.command(commands, "submit", run)
    p.add_argument("job", metavar="JOB", help="the job's name")
    add_input_options(p)
    when_group = p.add_mutually_exclusive_group()
    when_group.add_argument("--at", metavar="TIME", help="due at this ISO 8601 time (with offset)")
    when_group.add_argument("--in", dest="delay", metavar="DURATION", help="due after e.g. 10m")
    p.add_argument("--key", metavar="KEY", help="idempotency key: a repeat returns the first")
    p.add_argument("--max-attempts", type=int, metavar="N", help="default: the job's, else 3")
    p.add_argument(
        "--timeout", metavar="DURATION", help="how long one attempt may run (default: the job's)"
    )
    p.add_argument("--bucket-key", metavar="KEY", help="spread by this key (e.g. a tenant)")
    p.add_argument(
        "--priority", type=int, metavar="N", help="higher runs first (default: the job's, else 0)"
    )
    p.add_argument(
        "--queue", metavar="QUEUE", help="the queue it waits in (default: the job's, else default)"
    )
    p.add_argument("--job-version", type=int, metavar="N", help="pin the job version")
    p.add_argument(
        "--limit-key",
        metavar="KEY",
        help="the key a per-key limit counts it under (e.g. a tenant)",
    )
    common.add_num_buckets(p)


def add_input_options(p: argparse.ArgumentParser) -> None:
    """``--input KEY=VALUE`` (repeatable) and ``--input-json DOC``."""
    p.add_argument(
        "--input",
        action="append",
        metavar="KEY=VALUE",
        help="an input (VALUE read as JSON when it parses: n=5, flag=true; else text)",
    )
    p.add_argument("--input-json", metavar="DOC", help="the whole inputs as a JSON document")


def with_store_defaults(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with ``max_attempts`` and ``priority`` left None set to the store's
    defaults: what checking them before the store (and its job catalogue) is open takes."""
    out = dict(arguments)
    if out.get("max_attempts") is None:
        out["max_attempts"] = DEFAULT_MAX_ATTEMPTS
    if out.get("priority") is None:
        out["priority"] = 0
    return out


def _published(store: Store, job: str) -> bool:
    """Whether any version of ``job`` is in the store's catalogue."""
    try:
        return bool(store.job(job))
    except NotFound:
        return False


def relabel(exc: ValidationError, options: Mapping[str, str]) -> ValidationError:
    """``exc`` naming the option that set its field (``execute_at`` -> ``--at``)."""
    return ValidationError(options.get(exc.field, exc.field), exc.message)


def run(args: argparse.Namespace, out: Output) -> int:
    """store an execution of JOB (due now, --at a time or --in a while)"""
    # Every argument is checked before the store is opened.
    arguments: dict[str, Any] = {
        "inputs": common.inputs(args.input, args.input_json),
        "execute_at": common.instant(args.at, "--at"),
        "delay": common.maybe_duration(args.delay, "--in"),
        "idempotency_key": args.key,
        "max_attempts": args.max_attempts,
        "timeout": common.maybe_duration(args.timeout, "--timeout"),
        "bucket_key": args.bucket_key,
        "priority": args.priority,
        "queue": args.queue,
        "version": args.job_version,
        "limit_key": args.limit_key,
    }
    buckets = common.num_buckets(args)
    common.require_db(args)
    try:  # the store's own checks, before it is opened (the job's defaults come later)
        prepare(
            args.job,
            new_id="check",
            now=datetime.now(UTC),
            max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES,
            num_buckets=buckets,
            **with_store_defaults(arguments),
        )
    except ValidationError as exc:
        raise relabel(exc, OPTIONS) from None
    with common.open_store(args, create=True) as store:
        try:
            execution = store.submit(args.job, **arguments, actor=common.actor())
        except ValidationError as exc:
            raise relabel(exc, OPTIONS) from None
        now = store.clock.now()
        if execution.job_version is None and not _published(store, execution.job):
            print(
                f"fencepost submit: warning: no worker has published job {execution.job!r} "
                "yet: it waits with the store's defaults, takes the job's own when a worker "
                "serving it starts, and has its inputs checked then (see fencepost jobs)",
                file=sys.stderr,
            )
    if out.as_json:
        out.document(records.execution(execution, now))
        return 0
    out.fields(
        [
            ("id", execution.id),
            ("job", execution.job),
            ("state", execution.state.value),
            ("due", when(execution.due_at)),
            ("bucket", execution.bucket),
            ("max attempts", execution.max_attempts),
            ("idempotency key", execution.idempotency_key),
            ("limit key", execution.limit_key),
        ],
        title="submitted",
    )
    return 0
