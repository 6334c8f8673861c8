"""The contract of how an attempt ends, under a live lease.

``complete`` (and ``complete_many``), ``fail`` with its retries and jittered backoff,
``release`` (given back, not counted), worker-declared timeouts, and ``abort``; each
fenced like every write after a claim, each leaving its :class:`AttemptOutcome`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import InvalidTransition, ResultInvalid, StaleLease, ValidationError
from fencepost.domain.models import Lease
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    StoreFactory,
    assert_audit_valid,
    at,
    expired_lease,
    fields_of,
    refused_unchanged,
    taken_over,
)
from fencepost.testing.factory import ExecutionFactory


class OutcomesContract(ContractFixtures):
    """Complete, fail and retry, release, time out and abort an attempt."""

    # -- complete ------------------------------------------------------------------------

    def test_complete(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(3)
        done = store.complete(lease, {"rows": 12})
        assert (done.state, done.result, done.lease_owner, done.lease_until) == (
            State.SUCCEEDED,
            {"rows": 12},
            None,
            None,
        )
        assert store.get(e.id) == done
        (attempt,) = store.attempts(e.id)
        assert (attempt.outcome, attempt.started_at, attempt.ended_at) == (
            AttemptOutcome.SUCCEEDED,
            at(0),
            at(3),
        )
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    def test_complete_at_expiry_is_stale(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - US)
        clock.set(5)
        with pytest.raises(StaleLease):
            store.complete(lease, "late")
        assert store.get(e.id).state is State.RUNNING
        assert store.get(e.id).result is None

    def test_complete_just_before_expiry_counts(self, store: Store, clock: ManualClock) -> None:
        store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - US)
        assert store.complete(lease, "in time").result == "in time"

    def test_stale_complete_after_takeover_changes_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job")
        (old,) = store.claim("a", ttl=5)
        clock.set(6)
        (new,) = store.claim("b", ttl=5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.complete(old, "stale")
        with pytest.raises(StaleLease):
            store.fail(old, "stale failure", retryable=False)
        with pytest.raises(StaleLease):
            store.heartbeat(old)
        assert store.get(e.id) == before
        assert store.complete(new, "fresh").result == "fresh"
        assert_audit_valid(store, e.id)

    def test_another_owner_at_the_current_epoch_is_stale(self, store: Store) -> None:
        """The epoch alone proves nothing either: owner and epoch must both match."""
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        forged = Lease(**{**fields_of(lease), "owner": "intruder"})
        before = store.get(e.id)
        assert isinstance(store.complete_many([(forged, "forged")])[0], StaleLease)
        with pytest.raises(StaleLease):
            store.fail(forged, "forged", retryable=False)
        assert store.get(e.id) == before
        refused = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch) for t in refused] == [("intruder", 1), ("intruder", 1)]

    def test_same_owner_with_an_older_epoch_is_stale(
        self, store: Store, clock: ManualClock
    ) -> None:
        """The owner name proves nothing: after re-claiming, a worker holds only the new epoch."""
        e, first, second = taken_over(store, clock, "w", "w", max_attempts=5)
        assert (first.owner, second.owner, second.epoch) == ("w", "w", 2)
        before = store.get(e.id)
        for call in (
            lambda: store.heartbeat(first),
            lambda: store.complete(first, "from epoch 1"),
            lambda: store.fail(first, "from epoch 1", retryable=False),
        ):
            with pytest.raises(StaleLease):
                call()
            assert store.get(e.id) == before
        assert store.complete(second, "from epoch 2").result == "from epoch 2"

    @pytest.mark.parametrize(
        "result",
        [
            pytest.param({1, 2}, id="set"),
            pytest.param(float("inf"), id="infinity"),
            pytest.param(object(), id="object"),
            pytest.param({"blob": "x" * (256 * 1024)}, id="oversized"),
        ],
    )
    def test_invalid_result_fails_permanently(self, store: Store, result: Any) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        with pytest.raises(ResultInvalid) as caught:
            store.complete(lease, result)
        assert caught.value.field == "result"
        failed = store.get(e.id)
        assert failed.state is State.FAILED, "an invalid result is not retried"
        assert failed.error is not None
        assert failed.error.startswith("result_invalid")
        assert failed.result is None
        assert [a.outcome for a in store.attempts(e.id)] == [AttemptOutcome.FAILED]
        assert_audit_valid(store, e.id)

    def test_complete_many(self, store: Store, clock: ManualClock) -> None:
        ids = [e.id for e in store.submit_many([{"job": "job"} for _ in range(4)])]
        leases = store.claim("w", limit=4, ttl=5)
        stale = Lease(**{**fields_of(leases[1]), "epoch": 99})
        outcomes = store.complete_many(
            [(leases[0], 0), (stale, "forged"), (leases[2], {1}), (leases[3], [3])]
        )
        assert outcomes[0] is None
        assert isinstance(outcomes[1], StaleLease)
        assert outcomes[2] is None
        assert outcomes[3] is None
        got = {i: store.get(i) for i in ids}
        by_lease = [got[lease.execution_id] for lease in leases]
        assert [e.state for e in by_lease] == [
            State.SUCCEEDED,
            State.RUNNING,
            State.FAILED,
            State.SUCCEEDED,
        ]
        assert [by_lease[0].result, by_lease[3].result] == [0, [3]]
        assert store.complete_many([]) == []

    def test_a_batch_means_its_items_one_after_another(self, store: Store) -> None:
        """Repeats in one batch: the first completion counts, the repeat is stale."""
        a, b = (e.id for e in store.submit_many([{"job": "job"}, {"job": "job"}]))
        la, lb = store.claim("w", limit=2)
        forged = Lease(**{**fields_of(lb), "epoch": 7})
        outcomes = store.complete_many([(la, 1), (forged, 2), (la, 3), (lb, 4), (lb, {5})])
        assert outcomes[0] is None
        assert isinstance(outcomes[1], StaleLease)
        assert isinstance(outcomes[2], StaleLease)
        assert outcomes[3] is None
        assert isinstance(outcomes[4], StaleLease), "already completed: the invalid repeat is stale"
        assert store.get(la.execution_id).result == 1
        assert store.get(lb.execution_id).result == 4
        for eid in (a, b):
            completed = [t for t in store.transitions(eid) if t.event is Event.COMPLETED]
            assert len(completed) == 1
            assert_audit_valid(store, eid)

    # -- fail and retry ------------------------------------------------------------------

    def test_retryable_failure_waits_with_jittered_backoff(
        self, store_factory: StoreFactory, clock: ManualClock
    ) -> None:
        store = store_factory(clock, retry=RetryPolicy(base_delay=2, max_delay=5))
        e = store.submit("job", max_attempts=10)
        waits = []
        for attempt in range(1, 6):
            (lease,) = store.claim("w")
            assert lease.attempt == attempt
            failed = store.fail(lease, f"boom {attempt}")
            assert failed.state is State.RETRY_WAIT
            assert failed.error == f"boom {attempt}"
            wait = failed.due_at - clock.now()
            cap = min(5.0, 2.0 * 2 ** (attempt - 1))
            assert timedelta(0) <= wait <= timedelta(seconds=cap), (attempt, wait)
            waits.append(wait)
            if wait > timedelta(0):
                clock.set(failed.due_at - US)
                assert store.claim("w") == [], "not claimable before its retry is due"
            clock.set(failed.due_at)
        assert len(set(waits)) > 1, "full jitter draws different delays"
        assert_audit_valid(store, e.id)
        store.close()

    def test_retry_in_overrides_the_policy(self, store: Store, clock: ManualClock) -> None:
        store.submit("job")
        (lease,) = store.claim("w")
        assert store.fail(lease, "later", retry_in=120).due_at == at(120)

    def test_exhausted_retries_end_failed(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        for _ in range(3):
            clock.advance(1000)
            (lease,) = store.claim("w")
            last = store.fail(lease, "still broken")
        assert last.state is State.FAILED
        clock.advance(1000)
        assert store.claim("w") == []
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.outcome, a.error) for a in attempts] == [
            (n, AttemptOutcome.FAILED, "still broken") for n in (1, 2, 3)
        ]
        assert store.query(state="FAILED").items == [store.get(e.id)]

    def test_permanent_failure_is_a_dead_letter(self, store: Store) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        failed = store.fail(lease, "bad input", retryable=False)
        assert (failed.state, failed.attempt, failed.error) == (State.FAILED, 1, "bad input")
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    @pytest.mark.parametrize("error", ["bad\x00err", "lone \ud800 surrogate"])
    def test_fail_refuses_error_text_no_store_can_hold(self, store: Store, error: str) -> None:
        """The store refuses it on every backend (a worker sanitizes its own texts first)."""
        e = store.submit("job")
        (lease,) = store.claim("w")
        with pytest.raises(ValidationError) as caught:
            store.fail(lease, error)
        assert caught.value.field == "error"
        assert store.get(e.id).state is State.RUNNING
        assert [t.event for t in store.transitions(e.id)] == [Event.SUBMITTED, Event.CLAIMED]
        # Too long is cut, not refused.
        failed = store.fail(lease, "x" * 10_000, retryable=False)
        assert failed.error == "x" * 8_192

    def test_fail_rejects_non_string_errors(self, store: Store) -> None:
        store.submit("job")
        (lease,) = store.claim("w")
        with pytest.raises(ValidationError) as caught:
            store.fail(lease, 42)  # type: ignore[arg-type]
        assert caught.value.field == "error"

    # -- release -------------------------------------------------------------------------

    def test_release_gives_the_execution_back_at_once(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=1, execute_at=at(0))
        (lease,) = store.claim("a", ttl=30)
        clock.set(4)
        released = store.release(lease, reason="shutting down")
        assert (released.state, released.attempt, released.due_at, released.lease_owner) == (
            State.SCHEDULED,
            0,
            at(4),
            None,
        )
        with pytest.raises(StaleLease):
            store.complete(lease, "after release")
        (again,) = store.claim("b", ttl=30)
        assert (again.execution_id, again.epoch, again.attempt) == (e.id, 2, 1)
        store.complete(again, "done")
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.owner, a.outcome) for a in attempts] == [
            (1, "a", AttemptOutcome.ABANDONED),
            (1, "b", AttemptOutcome.SUCCEEDED),
        ]
        released_t = [t for t in store.transitions(e.id) if t.event is Event.RELEASED]
        assert [(t.actor, t.reason, t.epoch) for t in released_t] == [("a", "shutting down", 1)]
        assert_audit_valid(store, e.id)

    def test_release_is_fenced(self, store: Store, clock: ManualClock) -> None:
        e, lease = expired_lease(store, clock, "a")
        with refused_unchanged(store, e.id):
            store.release(lease)
        with pytest.raises(ValidationError) as caught:
            store.release(lease, reason="")
        assert caught.value.field == "reason"

    # -- worker-declared timeouts --------------------------------------------------------

    def test_timed_out_attempts_retry_then_dead_letter(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=2, timeout=10)
        (lease,) = store.claim("w", ttl=30)
        clock.set(11)
        waiting = store.fail(lease, "ran past 10s", timed_out=True, retry_in=5)
        assert (waiting.state, waiting.error, waiting.due_at, waiting.lease_owner) == (
            State.RETRY_WAIT,
            "ran past 10s",
            at(16),
            None,
        )
        clock.set(16)
        (again,) = store.claim("w2", ttl=30)
        clock.set(27)
        dead = store.fail(again, "ran past 10s again", timed_out=True)
        assert (dead.state, dead.error, dead.attempt) == (State.FAILED, "ran past 10s again", 2)
        clock.set(1000)
        assert store.claim("w") == []
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.owner, a.outcome, a.error, a.ended_at) for a in attempts] == [
            (1, "w", AttemptOutcome.TIMED_OUT, "ran past 10s", at(11)),
            (2, "w2", AttemptOutcome.TIMED_OUT, "ran past 10s again", at(27)),
        ]
        timed_out = [t for t in store.transitions(e.id) if t.event is Event.TIMED_OUT]
        assert [(t.from_state, t.to_state, t.actor, t.epoch) for t in timed_out] == [
            (State.RUNNING, State.RETRY_WAIT, "w", 1),
            (State.RUNNING, State.FAILED, "w2", 2),
        ]
        assert_audit_valid(store, e.id)

    def test_timed_out_without_retry_is_a_dead_letter(self, store: Store) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        dead = store.fail(lease, "too slow", timed_out=True, retryable=False)
        assert (dead.state, dead.error) == (State.FAILED, "too slow")
        assert [a.outcome for a in store.attempts(e.id)] == [AttemptOutcome.TIMED_OUT]
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    def test_stale_timed_out_fail_is_refused_and_audited(
        self, store: Store, clock: ManualClock
    ) -> None:
        e, lease = expired_lease(store, clock, max_attempts=3)
        with refused_unchanged(store, e.id):
            store.fail(lease, "too slow", timed_out=True)
        (t,) = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert (t.actor, t.epoch, t.reason, t.at) == ("w", 1, "stale fail refused", at(5))
        assert [a.outcome for a in store.attempts(e.id)] == [None], "still open"
        assert_audit_valid(store, e.id)

    # -- abort -----------------------------------------------------------------------------

    def test_abort_cancels_a_running_execution(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        (lease,) = store.claim("w", ttl=30)
        clock.set(3)
        aborted = store.abort(lease, reason="user asked")
        assert (aborted.state, aborted.lease_owner, aborted.lease_until, aborted.epoch) == (
            State.CANCELLED,
            None,
            None,
            1,
        )
        assert store.get(e.id) == aborted
        last = store.transitions(e.id)[-1]
        assert (last.event, last.from_state, last.to_state, last.actor, last.reason) == (
            Event.CANCELLED,
            State.RUNNING,
            State.CANCELLED,
            "w",
            "user asked",
        )
        (attempt,) = store.attempts(e.id)
        assert (attempt.outcome, attempt.ended_at, attempt.owner) == (
            AttemptOutcome.CANCELLED,
            at(3),
            "w",
        )
        with pytest.raises(StaleLease):
            store.complete(lease, "after the abort")
        clock.set(100)
        assert store.claim("w") == [], "cancelled is terminal"
        assert_audit_valid(store, e.id)

        other = store.submit("job")
        (second,) = store.claim("w")
        store.abort(second)
        assert store.transitions(other.id)[-1].reason == "cancel requested"
        with pytest.raises(ValidationError) as caught:
            store.abort(second, reason="")
        assert caught.value.field == "reason"

    def test_abort_is_fenced(self, store: Store, clock: ManualClock) -> None:
        e, old = expired_lease(store, clock, "a", max_attempts=3)
        with refused_unchanged(store, e.id):
            store.abort(old)  # expired exactly now
        (new,) = store.claim("b", ttl=5)
        taken = store.get(e.id)
        forged = Lease(**{**fields_of(new), "owner": "intruder"})
        for stale in (old, forged):
            with pytest.raises(StaleLease):
                store.abort(stale)
            assert store.get(e.id) == taken
        refused = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch, t.reason) for t in refused] == [
            ("a", 1, "stale abort refused"),
            ("a", 1, "stale abort refused"),
            ("intruder", 2, "stale abort refused"),
        ]
        assert store.complete(new, "finished").state is State.SUCCEEDED
        assert_audit_valid(store, e.id)

    def test_client_cancel_still_cannot_stop_a_running_execution(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        lease = make.running()
        before = store.get(lease.execution_id)
        with pytest.raises(InvalidTransition):
            store.cancel(lease.execution_id)
        assert store.get(lease.execution_id) == before
