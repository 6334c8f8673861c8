"""Reading: the validation of ``query`` and ``count_by_state``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from fencepost.domain.buckets import buckets_of
from fencepost.domain.checks import attempt_outcome, error_filter, require_int, storable
from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import AttemptOutcome, State
from fencepost.store.values import MAX_LIMIT, ExecutionFilter, states_of


def cursor_storable(after: str | None) -> bool:
    """A cursor without lone surrogates (no id holds one; U+0000 sorts like its prefix)."""
    return after is None or after.isascii() or storable(after.replace("\x00", ""))


def execution_filter(
    num_buckets: int,
    *,
    state: State | str | Iterable[State | str] | None = None,
    job: str | None = None,
    schedule: str | None = None,
    bucket: int | None = None,
    due_after: datetime | None = None,
    due_before: datetime | None = None,
    limit: int = 100,
    after: str | None = None,
    buckets: Iterable[int] | None = None,
    newest_first: bool = False,
    queue: str | None = None,
    outcome: AttemptOutcome | str | None = None,
    limit_key: str | None = None,
    owner: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    finished_after: datetime | None = None,
    finished_before: datetime | None = None,
    error: str | None = None,
) -> ExecutionFilter | None:
    """``Store.query``'s (and ``count_by_state``'s) arguments validated, for a store of
    ``num_buckets``; None when no stored row can match. Refusals are
    :class:`ValidationError` naming the argument."""
    ended = None if outcome is None else attempt_outcome(outcome)
    if bucket is not None and buckets is not None:
        raise ValidationError("buckets", "give bucket or buckets, not both")
    named = (
        ("job", job),
        ("schedule", schedule),
        ("after", after),
        ("queue", queue),
        ("limit_key", limit_key),
        ("owner", owner),
    )
    for name, value in named:
        if value is not None and not isinstance(value, str):
            raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if not cursor_storable(after):
        raise ValidationError("after", "must be a cursor from a previous page")
    needle = None if error is None else error_filter(error)
    times = {
        name: None if value is None else as_aware_utc(value, field=name)
        for name, value in (
            ("created_after", created_after),
            ("created_before", created_before),
            ("finished_after", finished_after),
            ("finished_before", finished_before),
        )
    }
    texts = (job, schedule, queue, limit_key, owner)
    if not all(v is None or storable(v) for v in texts) or (error and needle is None):
        return None  # no stored name or error holds such text
    return ExecutionFilter(
        states=states_of(state),
        job=job,
        schedule=schedule,
        queue=queue,
        bucket=None
        if bucket is None
        else require_int(bucket, "bucket", low=0, high=num_buckets - 1),
        buckets=None if buckets is None else tuple(sorted(set(buckets_of(buckets, num_buckets)))),
        due_after=None if due_after is None else as_aware_utc(due_after, field="due_after"),
        due_before=None if due_before is None else as_aware_utc(due_before, field="due_before"),
        limit=require_int(limit, "limit", low=1, high=MAX_LIMIT),
        after=after,
        newest_first=bool(newest_first),
        outcome=ended,
        limit_key=limit_key,
        owner=owner,
        error=needle,
        **times,
    )
