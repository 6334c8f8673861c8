"""``App.query`` passes every filter to its store's ``query``, the new ones included."""

from __future__ import annotations

import pytest

from fencepost import App
from fencepost.domain.errors import ValidationError
from fencepost.store import connect
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at


def test_app_query_finds_by_outcome_and_due_time() -> None:
    app = App(connect("memory://", clock=ManualClock(0)))
    store = app.store
    slow = store.submit("slow", max_attempts=3)
    store.fail(store.claim("w", ids=[slow.id])[0], "ran past 10s", timed_out=True, retry_in=60)
    later = store.submit("later", execute_at=at(600))
    assert [e.id for e in app.query(outcome="timed_out").items] == [slow.id]
    assert [e.id for e in app.query(due_before=at(600)).items] == [slow.id]
    assert [e.id for e in app.query(due_after=at(600)).items] == [later.id]
    assert app.query(outcome="TIMED_OUT", state="SUCCEEDED").items == []
    with pytest.raises(ValidationError) as caught:
        app.query(outcome="late")
    assert caught.value.field == "outcome"
