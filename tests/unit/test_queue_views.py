"""Queues as an operator reads them (domain/queueviews.py), and a rate's text read back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fencepost.domain.limits import Limit, new_limit, parse_rate
from fencepost.domain.queueviews import queue_view, queue_views
from fencepost.domain.states import State

AT = datetime(2026, 11, 28, 9, tzinfo=UTC)


def test_every_known_queue_is_listed_by_name_with_every_state_counted() -> None:
    limits = [
        new_limit("queue:emails", rate="10/s", updated_by="ops"),
        Limit(scope="queue:held", paused=True, updated_by="ops", updated_at=AT),
        new_limit("job:emails", concurrency=3),  # a job's limit: no queue of that name
    ]
    views = queue_views(limits, {"default": {State.SCHEDULED: 2}, "emails": {State.RUNNING: 1}})
    assert [v.name for v in views] == ["default", "emails", "held"]
    default, emails, held = views
    assert default.counts == dict.fromkeys(State, 0) | {State.SCHEDULED: 2}
    assert (default.paused, default.limit) == (False, None)
    assert emails.limit == limits[0]
    assert (emails.paused, emails.paused_by) == (False, None)
    assert (held.paused, held.paused_by, held.paused_at, held.limit) == (True, "ops", AT, None)
    assert held.counts == dict.fromkeys(State, 0)


def test_stored_is_what_the_store_returns_for_a_pause_or_a_resume() -> None:
    paused_only = Limit(scope="queue:q", paused=True, updated_by="ops", updated_at=AT)
    assert queue_view("q", paused_only).stored() == paused_only
    limited = Limit(scope="queue:q", concurrency=2, paused=True, updated_by="ops", updated_at=AT)
    assert queue_view("q", limited).stored() == limited
    assert queue_view("q", None).stored() == Limit(scope="queue:q")
    assert queue_view("q", None).counts is None


@pytest.mark.parametrize(
    "text", ["0.00001/s", "1.25/h", "100/5min", "3000/min", "7/2d", "0.5/s", "999999/s"]
)
def test_a_rate_s_text_reads_back_as_the_same_rate(text: str) -> None:
    rate = parse_rate(text)
    assert "e" not in str(rate)  # no exponent: "1e-05/s" would not parse
    assert parse_rate(str(rate)) == rate
