"""The contract of pruning: old finished executions go, in batches, and nothing else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.states import CommandKind, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures, assert_audit_valid, at, executions
from fencepost.testing.factory import ExecutionFactory


class PruningContract(ContractFixtures):
    """Prune old finished executions in batches, from a cutoff fixed when the call starts."""

    def test_prune_deletes_only_old_finished_executions(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        old = [
            make.succeeded("done", idempotency_key="reused").id,
            make.dead("dead").id,
            store.cancel(make.scheduled("cancelled").id).id,
        ]
        store.add_schedule("job", every=60, id="s")
        (skipped,) = store.add_occurrences(
            "s", [Occurrence(slot=at(60), due_at=at(60), skipped="misfire")]
        )
        old.append(skipped.id)
        # An execution with commands: cancelled while running, by a command.
        aborted = make.running("aborted")
        store.request(aborted.execution_id, "pause")
        (command,) = store.claim_commands("worker", [aborted.execution_id])
        store.complete_command(command, aborted)
        store.request(aborted.execution_id, "cancel")  # left PENDING
        store.abort(aborted)
        old.append(aborted.execution_id)
        running = make.running("running", ttl=10_000)
        kept = [
            running.execution_id,
            make.scheduled("waiting").id,
            make.retry_waiting("retrying").id,
        ]
        store.request(running.execution_id, "pause")
        clock.set(100)
        old.append(make.succeeded("boundary").id)  # updated_at == now - older_than: pruned
        clock.set(100.5)
        kept.append(make.succeeded("young").id)
        clock.set(200)

        def stored() -> list[str]:
            return sorted(e.id for e in executions(store))

        everything = stored()
        assert store.prune(older_than=100, dry_run=True) == len(old) == 6
        assert stored() == everything, "a dry run deletes nothing"
        assert len(store.transitions(aborted.execution_id)) > 0

        totals: list[int] = []
        assert store.prune(older_than=timedelta(seconds=100), batch=4, on_batch=totals.append) == 6
        assert totals == [4, 6]
        assert stored() == sorted(kept)
        for execution_id in old:
            for read in (store.get, store.transitions, store.commands):
                with pytest.raises(NotFound):
                    read(execution_id)
        assert [c.kind for c in store.commands(running.execution_id)] == [CommandKind.PAUSE]
        assert store.get(running.execution_id).state is State.RUNNING
        assert store.prune(older_than=100, on_batch=totals.append) == 0
        assert totals == [4, 6], "no batch deleted anything: no call"
        assert store.prune(older_than=100, dry_run=True) == 0
        assert store.get_schedule("s").id == "s", "schedules stay"
        fresh = store.submit("done", idempotency_key="reused")
        assert fresh.id not in old, "a pruned execution's idempotency key is free again"
        assert store.complete(running, "ok").state is State.SUCCEEDED
        assert_audit_valid(store, running.execution_id)

    def test_prune_in_batches(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(7)])
        for lease in store.claim("w", limit=7):
            clock.advance(1)
            store.complete(lease, None)
        clock.set(1000)
        totals: list[int] = []
        assert store.prune(older_than=0, batch=3, on_batch=totals.append) == 7
        assert totals == [3, 6, 7], "after each batch, the total so far"
        assert executions(store) == []
        store.submit_many([{"job": "job"} for _ in range(4)])
        for lease in store.claim("w", limit=4):
            store.complete(lease, None)
        totals.clear()
        assert store.prune(older_than=0, batch=2, on_batch=totals.append) == 4
        assert totals == [2, 4], "an empty last batch is not reported"

    def test_a_second_prune_with_the_same_cutoff_starts_over(
        self, store: Store, clock: ManualClock
    ) -> None:
        early, late = store.submit_many([{"job": "job"}, {"job": "job"}])
        [lease_late] = store.claim("w", ids=[late.id])
        store.complete(lease_late, None)
        assert store.prune(older_than=0) == 1  # the later id only; the earlier one is running
        [lease_early] = store.claim("w", ids=[early.id])
        store.complete(lease_early, None)
        assert store.prune(older_than=0, dry_run=True) == 1
        assert store.prune(older_than=0) == 1, "the earlier id is not skipped"
        assert executions(store) == []

    def test_prune_batches_that_are_done_stay_done(self, store: Store, clock: ManualClock) -> None:
        made = []
        for second in (30, 10, 20):
            clock.set(second)
            made.append(store.cancel(store.submit("job").id))
        clock.set(100)
        totals: list[int] = []

        def stop_after_one_batch(deleted: int) -> None:
            totals.append(deleted)
            raise RuntimeError("interrupted")

        with pytest.raises(RuntimeError, match="interrupted"):
            store.prune(older_than=0, batch=1, on_batch=stop_after_one_batch)
        assert totals == [1]
        left = {e.id for e in executions(store)}
        assert len(left) == 2, "one batch of one was deleted, and stays deleted"
        assert left < {e.id for e in made}

    def test_prune_cutoff_is_fixed_when_the_call_starts(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.cancel(store.submit("job").id)
        clock.set(50)
        young = store.cancel(store.submit("job").id)
        clock.set(100)

        def time_passes(deleted: int) -> None:
            clock.set(1000)  # the second execution is now old enough, but too late

        assert store.prune(older_than=60, batch=1, on_batch=time_passes) == 1
        assert [e.id for e in executions(store)] == [young.id]

    def test_bad_prune_names_the_field(self, store: Store, make: ExecutionFactory) -> None:
        done = make.succeeded()
        cases: list[tuple[dict[str, Any], str]] = [
            ({"older_than": -1}, "older_than"),
            ({"older_than": "30d"}, "older_than"),
            ({"older_than": None}, "older_than"),
            ({"older_than": 0, "batch": 0}, "batch"),
            ({"older_than": 0, "batch": 100_001}, "batch"),
            ({"older_than": 0, "batch": 2.5}, "batch"),
            ({"older_than": 0, "on_batch": 5}, "on_batch"),
        ]
        for arguments, field in cases:
            with pytest.raises(ValidationError) as caught:
                store.prune(**arguments)
            assert caught.value.field == field
        assert store.get(done.id) == done, "nothing was deleted"
        assert store.prune(older_than=0, batch=100_000) == 1
