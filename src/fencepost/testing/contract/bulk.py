"""The contract of acting on many executions (``act``) and of deleting one (``delete``).

A bulk action takes its selection (ids, or a filter) in batches in id order, acts on
each execution it applies to with that execution's own audit record, skips the rest
without an error, and with ``dry_run`` counts and shows without writing. A deletion
takes every row of a finished execution and leaves a record that prune removes in time.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.bulk import Action, BulkResult
from fencepost.domain.errors import InvalidTransition, NotFound
from fencepost.domain.models import Execution
from fencepost.domain.states import CommandKind, CommandState, Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    ContractFixtures,
    assert_audit_valid,
    at,
    executions,
    names_the_field,
)
from fencepost.testing.factory import ExecutionFactory
from fencepost.timing.planning import HELD

#: A well-formed execution id that names nothing.
NOBODY = "00000000-0000-7000-8000-000000000000"


def every_batch(store: Store, action: str, **selection: Any) -> list[BulkResult]:
    """Every batch of one bulk action, following ``next_cursor`` to the end."""
    results = [store.act(action, actor="ops", **selection)]
    while results[-1].next_cursor is not None:
        results.append(store.act(action, actor="ops", after=results[-1].next_cursor, **selection))
    return results


def snapshot(store: Store) -> list[tuple[Execution, int]]:
    """Every execution with the length of its audit trail: what a dry run must not change."""
    return [(e, len(store.transitions(e.id))) for e in executions(store)]


class BulkContract(ContractFixtures):
    """Replay, cancel, retry now and delete by ids or by filter, in batches; delete one."""

    def test_a_filtered_replay_revives_exactly_its_dead_letters_in_batches(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        dead = sorted(make.dead("report").id for _ in range(7))
        other_job = make.dead("mail").id
        waiting = make.scheduled("report", delay=600).id
        done = make.succeeded("report").id
        clock.set(5)

        before = snapshot(store)
        preview = store.act("replay", filter={"job": "report"}, actor="ops", dry_run=True)
        assert (preview.action, preview.dry_run, preview.matched) == (Action.REPLAY, True, 7)
        assert (preview.done, preview.skipped, preview.next_cursor) == (0, 0, None)
        assert [e.id for e in preview.preview] == dead, "the first ones, in id order"
        assert snapshot(store) == before, "a dry run writes nothing"

        batches = every_batch(store, "replay", filter={"job": "report"}, limit=3)
        assert [(b.matched, b.done, b.skipped) for b in batches] == [
            (3, 3, 0),
            (3, 3, 0),
            (1, 1, 0),
        ]
        assert [b.next_cursor for b in batches] == [dead[2], dead[5], None]
        assert all(b.preview == [] and not b.dry_run for b in batches)
        for execution_id in dead:
            e = store.get(execution_id)
            assert (e.state, e.attempt, e.due_at) == (State.SCHEDULED, 0, at(5))
            last = store.transitions(execution_id)[-1]
            assert (last.event, last.actor) == (Event.REPLAYED, "ops")
            assert_audit_valid(store, execution_id)
        assert store.get(other_job).state is State.FAILED
        assert store.get(waiting).state is State.SCHEDULED
        assert store.get(done).state is State.SUCCEEDED
        again = store.act("replay", filter={"job": "report"}, actor="ops")
        assert (again.matched, again.done, again.next_cursor) == (0, 0, None)

    def test_by_ids_what_the_action_does_not_apply_to_is_skipped(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        dead = make.dead().id
        done = make.succeeded().id
        running = make.running().execution_id
        ids = [done, NOBODY, dead, running, dead]  # a repeat counts once
        dry = store.act("replay", ids=ids, actor="ops", dry_run=True)
        assert (dry.matched, [e.id for e in dry.preview]) == (1, [dead])
        result = store.act("replay", ids=ids, actor="ops")
        assert (result.matched, result.done, result.skipped) == (4, 1, 3)
        assert result.next_cursor is None
        assert store.get(dead).state is State.SCHEDULED
        assert store.get(done).state is State.SUCCEEDED
        assert store.get(running).state is State.RUNNING
        # Replayed meanwhile: the second replay skips it, no error.
        assert store.act("replay", ids=[dead], actor="ops").skipped == 1
        first, second = sorted([dead, done])
        paged = store.act("delete", ids=[first, second], actor="ops", limit=1)
        assert (paged.matched, paged.next_cursor) == (1, first)
        rest = store.act("delete", ids=[first, second], actor="ops", limit=1, after=first)
        assert (rest.matched, rest.next_cursor) == (1, None)
        assert paged.done + rest.done == 1, "the replayed one is not finished"
        with pytest.raises(NotFound):
            store.get(done)

    def test_cancel_stops_waiting_executions_and_asks_running_ones(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        scheduled = make.scheduled("job", delay=60).id
        retrying = make.retry_waiting("job").id
        running = make.running("job").execution_id
        finished = make.succeeded("job").id
        clock.set(3)
        dry = store.act("cancel", filter={"job": "job"}, actor="ops", dry_run=True)
        assert dry.matched == 3
        result = store.act("cancel", filter={"job": "job"}, actor="ops")
        assert (result.matched, result.done, result.skipped) == (3, 3, 0)
        for execution_id in (scheduled, retrying):
            assert store.get(execution_id).state is State.CANCELLED
            last = store.transitions(execution_id)[-1]
            assert (last.event, last.actor, last.at) == (Event.CANCELLED, "ops", at(3))
        assert store.get(running).state is State.RUNNING, "only its lease holder stops it"
        (command,) = store.commands(running)
        assert (command.kind, command.state, command.requested_by) == (
            CommandKind.CANCEL,
            CommandState.PENDING,
            "ops",
        )
        assert store.get(finished).state is State.SUCCEEDED
        narrowed = store.act("cancel", filter={"state": ["SUCCEEDED"]}, actor="ops")
        assert narrowed.matched == 0, "a filter's states are narrowed to the action's"

    def test_retry_now_makes_waiting_executions_due_now(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        later = make.scheduled("job", delay=3600).id
        retrying = make.retry_waiting("job", retry_in=60).id
        due = make.scheduled("job").id  # due already: nothing to gain
        held = store.submit("job", execute_at=HELD).id  # its overlap policy releases it
        clock.set(10)
        dry = store.act("retry_now", filter={}, actor="ops", dry_run=True)
        assert sorted(e.id for e in dry.preview) == sorted([later, retrying])
        result = store.act("retry_now", filter={"job": "job"}, actor="ops")
        assert (result.matched, result.done) == (2, 2)
        for execution_id, state in ((later, State.SCHEDULED), (retrying, State.RETRY_WAIT)):
            e = store.get(execution_id)
            assert (e.state, e.due_at) == (state, at(10))
            last = store.transitions(execution_id)[-1]
            assert (last.event, last.actor, last.reason) == (Event.RESCHEDULED, "ops", "retry now")
            assert (last.from_state, last.to_state) == (state, state)
            assert_audit_valid(store, execution_id)
        assert store.get(held).due_at == HELD
        by_id = store.act("retry_now", ids=[due, held, later], actor="ops")
        assert (by_id.done, by_id.skipped) == (0, 3)
        claimed = {lease.execution_id for lease in store.claim("w", limit=10)}
        assert claimed == {later, retrying, due}

    def test_delete_takes_every_row_and_leaves_a_record(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        keyed = make.succeeded("report", idempotency_key="report-1", queue="slow")
        aborted = make.running("crunch")
        store.request(aborted.execution_id, "pause")
        store.request(aborted.execution_id, "cancel")
        store.abort(aborted)
        running = make.running("crunch-2").execution_id
        clock.set(7)
        report_before = store.slo()

        record = store.delete(keyed.id, actor="ops")
        assert (record.execution_id, record.job, record.queue) == (keyed.id, "report", "slow")
        assert (record.state, record.actor, record.at) == (State.SUCCEEDED, "ops", at(7))
        result = store.act("delete", ids=[aborted.execution_id, running], actor="ops")
        assert (result.done, result.skipped) == (1, 1)
        for gone in (keyed.id, aborted.execution_id):
            for read in (store.get, store.transitions, store.commands):
                with pytest.raises(NotFound):
                    read(gone)
        assert [e.id for e in executions(store)] == [running]
        assert store.submit("report", idempotency_key="report-1").id != keyed.id, "key freed"
        page = store.deletions()
        assert [(d.execution_id, d.state, d.actor) for d in page.items] == [
            (keyed.id, State.SUCCEEDED, "ops"),
            (aborted.execution_id, State.CANCELLED, "ops"),
        ]
        assert page.next_cursor is None
        first = store.deletions(limit=1)
        assert [d.execution_id for d in first.items] == [keyed.id]
        assert first.next_cursor is not None
        rest = store.deletions(limit=1, after=first.next_cursor)
        assert ([d.execution_id for d in rest.items], rest.next_cursor) == (
            [aborted.execution_id],
            None,
        )
        # Its verdicts are rolled up as a pruned execution's (burn rates read stored rows).
        after = store.slo()
        for objective in ("claimed", "finished"):
            was, now = getattr(report_before, objective), getattr(after, objective)
            assert replace(now, burn=[]) == replace(was, burn=[]), objective

        with pytest.raises(InvalidTransition):
            store.delete(running, actor="ops")
        assert store.get(running).state is State.RUNNING
        with pytest.raises(NotFound):
            store.delete(keyed.id, actor="ops")
        with pytest.raises(NotFound):
            store.delete(NOBODY, actor="ops")

        clock.set(7 + 3600)
        store.prune(older_than=timedelta(hours=1))
        assert store.deletions().items == [], "prune takes the records at or before its cutoff"

    def test_bad_bulk_requests_name_the_field_and_write_nothing(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        dead = make.dead("job")
        before = snapshot(store)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("replay", {"ids": [dead.id], "filter": {}}, "ids"),
            ("replay", {}, "filter"),
            ("explode", {"filter": {}}, "action"),
            ("", {"filter": {}}, "action"),
            ("replay", {"filter": {"nope": 1}}, "filter.nope"),
            ("replay", {"filter": {"limit": 5}}, "filter.limit"),
            ("replay", {"filter": {"after": dead.id}}, "filter.after"),
            ("replay", {"filter": {"job": 5}}, "filter.job"),
            ("replay", {"filter": {"job": {"a": [1, {"b": None}]}}}, "filter.job"),
            ("replay", {"filter": {"state": "NOPE"}}, "filter.state"),
            (
                "retry_now",
                {"filter": {"due_after": at(1).replace(tzinfo=None)}},
                "filter.due_after",
            ),
            ("replay", {"filter": [("job", "x")]}, "filter"),
            ("replay", {"ids": dead.id}, "ids"),
            ("replay", {"ids": []}, "ids"),
            ("replay", {"ids": [dead.id, "x"]}, "ids[1]"),
            ("replay", {"ids": [dead.id.upper()]}, "ids[0]"),
            ("replay", {"ids": ["\ud800" * 36]}, "ids[0]"),
            ("replay", {"ids": [None]}, "ids[0]"),
            ("replay", {"ids": [NOBODY] * 10_001}, "ids"),
            ("replay", {"filter": {}, "limit": 0}, "limit"),
            ("replay", {"filter": {}, "limit": 10_001}, "limit"),
            ("replay", {"filter": {}, "limit": True}, "limit"),
            ("replay", {"filter": {}, "limit": 10**100}, "limit"),
            ("replay", {"filter": {}, "after": "' OR 1=1 --"}, "after"),
            ("replay", {"filter": {}, "dry_run": "yes"}, "dry_run"),
            ("replay", {"filter": {}, "actor": ""}, "actor"),
            ("replay", {"filter": {}, "actor": "a\x00b"}, "actor"),
        ]
        for action, arguments, field in cases:
            arguments = {"actor": "ops", **arguments}
            with names_the_field(field):
                store.act(action, **arguments)
        for bad, field in ((0, "limit"), (10_001, "limit")):
            with names_the_field(field):
                store.deletions(limit=bad)
        for cursor in ("x", "-1", "1" * 40, "\x00"):
            with names_the_field("after"):
                store.deletions(after=cursor)
        with names_the_field("actor"):
            store.delete(dead.id, actor="")
        assert snapshot(store) == before

        # Texts no execution can hold select nothing; SQL and patterns are only text.
        for text in ("a\x00b", "\udc00", "' OR 1=1 --", "%", "_", "x" * 10_000):
            result = store.act("replay", filter={"job": text}, actor="ops")
            assert (result.matched, result.done) == (0, 0), repr(text)
        assert snapshot(store) == before
