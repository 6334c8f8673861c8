"""The contract of the job catalogue, and of the rules every submit takes from it.

Publishing (idempotent by digest, a changed definition refused, nothing of a refused
batch written), reading entries back, the jobs a node serves, and what a submit, a
batch and a schedule of a published job get: the version pinned, the inputs checked
against its schema, the job's defaults where the caller left None, its retry delays;
a job no one published allowed (flagged, and given the job's defaults when it is
published) or refused by ``unknown_jobs``. Hostile entries are
refused naming the field, or stored and readable.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.catalogue import JobDefaults, JobEntry, JobSource, job_entry, served_by
from fencepost.domain.errors import CatalogueConflict, NotFound, ValidationError
from fencepost.domain.payloads import MAX_DEPTH
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures, StoreFactory, at, names_the_field

#: The schema of the jobs below: a required string ``day`` and an optional ``limit``.
DAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"day": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["day"],
    "additionalProperties": False,
}


def report(version: int = 1, **fields: Any) -> JobEntry:
    """An entry of the job ``report`` at ``version`` (schema :data:`DAY_SCHEMA`)."""
    options: dict[str, Any] = {"input_schema": DAY_SCHEMA} | fields
    return job_entry("report", version, **options)


class CatalogueContract(ContractFixtures):
    """The job catalogue and the submit rules it decides."""

    # -- publishing and reading ------------------------------------------------------------

    def test_publishing_stores_the_entry_at_the_store_now(
        self, store: Store, clock: ManualClock
    ) -> None:
        clock.set(3)
        entry = report(
            description="the daily report", source=JobSource(kind="file", where="r.yaml")
        )
        (stored,) = store.publish_jobs([entry])
        assert stored.published_at == at(3)
        assert stored.digest == entry.digest
        assert stored.digest.startswith("sha256:")
        assert stored.definition() == entry.definition()
        assert store.jobs() == [stored]
        assert store.job("report") == [stored]

    def test_publishing_the_same_definition_again_changes_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        (first,) = store.publish_jobs([report()])
        clock.set(10)
        (again,) = store.publish_jobs([report()])
        assert again == first
        assert again.published_at == at(0)
        assert store.jobs() == [first]

    def test_a_changed_definition_under_a_published_version_is_refused_naming_both_digests(
        self, store: Store
    ) -> None:
        (stored,) = store.publish_jobs([report()])
        changed = report(defaults=JobDefaults(max_attempts=2))
        other = job_entry("other", 1)
        with pytest.raises(CatalogueConflict) as caught:
            store.publish_jobs([other, changed])
        refusal = caught.value
        assert (refusal.job, refusal.version) == ("report", 1)
        assert (refusal.stored_digest, refusal.digest) == (stored.digest, changed.digest)
        assert stored.digest in str(refusal)
        assert changed.digest in str(refusal)
        assert "'report' version 1" in str(refusal)
        assert store.jobs() == [stored]  # nothing of the batch: not even "other"

    def test_two_definitions_of_one_version_in_one_batch_are_refused(self, store: Store) -> None:
        with pytest.raises(CatalogueConflict):
            store.publish_jobs([report(), report(description="another")])
        assert store.jobs() == []

    def test_versions_are_listed_oldest_first_and_unknown_jobs_are_not_found(
        self, store: Store
    ) -> None:
        store.publish_jobs([report(2), job_entry("alpha", 1), report(1)])
        assert [e.key for e in store.jobs()] == [("alpha", 1), ("report", 1), ("report", 2)]
        assert [e.version for e in store.job("report")] == [1, 2]
        with pytest.raises(NotFound) as caught:
            store.job("nope")
        assert caught.value.subject == "job"
        assert store.publish_jobs([]) == []

    def test_nodes_say_which_jobs_they_serve(self, store: Store) -> None:
        store.register_node("w1", jobs=[("report", 1), ("report", 2), ("report", 1)], ttl=30)
        store.register_node("w2", jobs=[("report", 2)], ttl=30)
        store.register_node("s1", kind="scheduler", ttl=30)
        nodes = {n.id: n for n in store.nodes()}
        assert nodes["w1"].jobs == (("report", 1), ("report", 2))
        assert nodes["s1"].jobs == ()
        assert served_by(nodes.values()) == {("report", 1): ["w1"], ("report", 2): ["w1", "w2"]}
        store.register_node("w1", jobs=[("report", 3)], ttl=30)  # a renewal replaces them
        assert {n.id: n.jobs for n in store.nodes()}["w1"] == (("report", 3),)
        with names_the_field("jobs"):
            store.register_node("w3", jobs=[("report", 0)])
        with names_the_field("jobs"):
            store.register_node("w3", jobs=[("re\x00port", 1)])

    # -- hostile entries -------------------------------------------------------------------

    def test_hostile_entries_are_refused_by_field_and_nothing_is_written(
        self, store: Store
    ) -> None:
        fine = job_entry("fine", 1)
        deep: dict[str, Any] = {"type": "object"}
        for _ in range(MAX_DEPTH):
            deep = {"type": "object", "properties": {"a": deep}}
        bad: dict[str, Callable[[], JobEntry]] = {
            "[1].name": lambda: JobEntry(name="re\x00port", version=1),
            "[1].version": lambda: JobEntry(name="report", version=0),
            "[1].input_schema": lambda: JobEntry(
                name="report", version=1, input_schema={"\ud800": {"type": "string"}}
            ),
            "[1].description": lambda: JobEntry(name="report", version=1, description="a\x00"),
            "[1].digest": lambda: JobEntry(name="report", version=1, digest="sha256:00"),
        }
        for field, build in bad.items():
            with names_the_field(field):
                store.publish_jobs([fine, build()])
        with names_the_field("[1].input_schema"):
            store.publish_jobs([fine, JobEntry(name="report", version=1, input_schema=deep)])
        huge = {"type": "object", "description": "x" * (1024 * 1024 + 1)}
        with names_the_field("[1].input_schema"):
            store.publish_jobs([fine, JobEntry(name="report", version=1, input_schema=huge)])
        with names_the_field("input_schema"):
            job_entry("report", 1, input_schema={"type": "no-such-type"})
        assert store.jobs() == []

    def test_unusual_but_valid_entries_are_stored_and_read_back(self, store: Store) -> None:
        wide = {
            "type": "object",
            "properties": {f"field-{i}": {"type": "string", "maxLength": i} for i in range(500)},
        }
        entries = [
            job_entry("rapport-été ✓", 2**31 - 1, description="ünïcødé 🎉"),
            job_entry("wide", 1, input_schema=wide),
            job_entry("x" * 200, 1, defaults=JobDefaults(priority=-(2**31), queue="q")),
        ]
        stored = store.publish_jobs(entries)
        assert [e.digest for e in stored] == [e.digest for e in entries]
        assert {e.key: e.definition() for e in store.jobs()} == {
            e.key: e.definition() for e in entries
        }
        e = store.submit("wide", {"field-3": "abc"})
        assert store.get(e.id).inputs == {"field-3": "abc"}
        with names_the_field("inputs.field-3"):
            store.submit("wide", {"field-3": "abcd"})
        assert store.claim("w", jobs=["wide"])[0].inputs == {"field-3": "abc"}

    # -- the submit rules ------------------------------------------------------------------

    def test_a_submit_is_pinned_to_the_latest_version_unless_it_names_one(
        self, store: Store
    ) -> None:
        store.publish_jobs([report(1), report(2)])
        assert store.submit("report", {"day": "d"}).job_version == 2
        assert store.submit("report", {"day": "d"}, version=1).job_version == 1
        store.publish_jobs([report(3)])
        assert store.submit("report", {"day": "d"}).job_version == 3  # a publish here: at once
        with pytest.raises(ValidationError) as caught:
            store.submit("report", {"day": "d"}, version=9)
        assert caught.value.field == "version"
        assert "known: 1, 2, 3" in str(caught.value)
        assert len(store.query().items) == 3

    def test_inputs_that_do_not_match_the_schema_are_refused_naming_the_field(
        self, store: Store
    ) -> None:
        store.publish_jobs([report()])
        cases = {
            "inputs.day": {"day": 20261128},
            "inputs.limit": {"day": "d", "limit": 0},
            "inputs.extra": {"day": "d", "extra": 1},
        }
        for field, inputs in cases.items():
            with names_the_field(field):
                store.submit("report", inputs)
        with names_the_field("inputs.day"):
            store.submit("report")  # None means {}: the required day is missing
        with names_the_field("inputs"):
            store.submit("report", {"day": "a\x00b"})  # passes the schema, not the store
        assert store.query().items == []
        assert store.submit("report", {"day": "2026-11-28"}).inputs == {"day": "2026-11-28"}

    def test_the_jobs_defaults_fill_only_what_the_caller_left_none(self, store: Store) -> None:
        defaults = JobDefaults(
            max_attempts=2, timeout=timedelta(seconds=5), priority=7, queue="reports"
        )
        store.publish_jobs([report(defaults=defaults)])
        filled = store.submit("report", {"day": "d"})
        assert (filled.max_attempts, filled.timeout, filled.priority, filled.queue) == (
            2,
            timedelta(seconds=5),
            7,
            "reports",
        )
        given = store.submit(
            "report", {"day": "d"}, max_attempts=4, timeout=1, priority=0, queue="default"
        )
        assert (given.max_attempts, given.timeout, given.priority, given.queue) == (
            4,
            timedelta(seconds=1),
            0,
            "default",
        )
        [batched] = store.submit_many([{"job": "report", "inputs": {"day": "d"}}])
        assert (batched.priority, batched.queue) == (7, "reports")
        assert [lease.execution_id for lease in store.claim("w", limit=5, queues=["reports"])] == [
            filled.id,
            batched.id,
        ]
        store.publish_jobs([job_entry("plain", 1)])
        plain = store.submit("plain")
        assert (plain.max_attempts, plain.timeout, plain.priority, plain.queue) == (
            3,
            None,
            0,
            "default",
        )

    def test_an_unknown_job_is_allowed_whatever_the_catalogue_holds(self, store: Store) -> None:
        assert store.submit("anything").job_version is None
        store.publish_jobs([report(), job_entry("alpha", 1)])
        # The same answer before and after a worker published: deploy order decides nothing.
        later = store.submit("anything", {"x": 1})
        assert (later.job_version, later.max_attempts, later.queue) == (None, 3, "default")
        with names_the_field("job"):
            store.submit("\ud800")
        assert len(store.query().items) == 2

    def test_entry_for_names_the_version_a_submit_would_run(self, store: Store) -> None:
        assert store.entry_for("report") is None  # not published: a submit is flagged
        first, second = store.publish_jobs([report(1), report(2)])
        assert store.entry_for("report") == second
        assert store.entry_for("report", 1) == first
        with names_the_field("version"):
            store.entry_for("report", 3)

    def test_a_submit_names_its_submitter_in_the_audit_trail(self, store: Store) -> None:
        one = store.submit("report", {"day": "d"}, actor="alice")
        found, created = store.submit_or_find("report", inputs={"day": "e"}, actor="bob")
        batch = store.submit_many([{"job": "a"}, {"job": "b"}], actor="carol")
        anonymous = store.submit("report", {"day": "f"})
        actors = [store.transitions(e.id)[0].actor for e in (one, found, *batch, anonymous)]
        assert created
        assert actors == ["alice", "bob", "carol", "carol", None]
        for bad in ("", "a\x00b", "\ud800", 7):
            with names_the_field("actor"):
                store.submit("report", {"day": "g"}, actor=bad)  # type: ignore[arg-type]
            with names_the_field("actor"):
                store.submit_many([{"job": "a"}], actor=bad)  # type: ignore[arg-type]
        assert len(store.query().items) == 5

    def test_work_submitted_before_publication_takes_the_published_defaults(
        self, store: Store, clock: ManualClock
    ) -> None:
        defaults = JobDefaults(
            max_attempts=2,
            timeout=timedelta(seconds=1),
            priority=7,
            queue="reports",
            retry_base_delay=30,
        )
        left_out = store.submit("report", {"day": "d"})
        given = store.submit(
            "report", {"day": "d"}, max_attempts=5, timeout=9, priority=1, queue="default"
        )
        [batched] = store.submit_many([{"job": "report", "inputs": {"day": "b"}, "priority": -1}])
        done = store.submit("report", {"day": "done"})
        store.cancel(done.id)
        schedule = store.add_schedule("report", every=60, inputs={"day": "s"}, priority=2)
        assert (left_out.max_attempts, left_out.timeout, left_out.queue) == (3, None, "default")

        store.publish_jobs([report(defaults=defaults)])

        adopted = store.get(left_out.id)
        assert (adopted.max_attempts, adopted.timeout, adopted.priority, adopted.queue) == (
            2,
            timedelta(seconds=1),
            7,
            "reports",
        )
        assert adopted.job_version is None  # unpinned: its inputs are checked at its claim
        kept = store.get(given.id)
        assert (kept.max_attempts, kept.timeout, kept.priority, kept.queue) == (
            5,
            timedelta(seconds=9),
            1,
            "default",
        )
        mixed = store.get(batched.id)
        assert (mixed.max_attempts, mixed.priority, mixed.queue) == (2, -1, "reports")
        assert store.get(done.id).max_attempts == 3  # finished: keeps what it had
        planned = store.get_schedule(schedule.id)
        assert (planned.max_attempts, planned.priority, planned.queue) == (2, 2, "reports")
        assert store.adopt_unpublished() == 0  # nothing waits any more

        # The job's retry delays apply to it too: its first failure waits at most 30 s.
        clock.set(100)
        [lease] = store.claim("w", limit=1, queues=["reports"], ids=[left_out.id])
        failed = store.fail(lease, "boom")
        assert failed.state is State.RETRY_WAIT
        assert failed.due_at <= at(130)

    def test_a_worker_registration_adopts_what_a_stale_submitter_stored(self, store: Store) -> None:
        store.publish_jobs([report(defaults=JobDefaults(max_attempts=6))])
        # What a submitter that had not seen the publication yet stores (its view of
        # the catalogue is up to a second old): the store's defaults, flagged.
        late = store.submit("other", {})
        store.publish_jobs([job_entry("other", 1, defaults=JobDefaults(max_attempts=4))])
        assert store.get(late.id).max_attempts == 4
        stale = store.submit_many([{"job": "third"}])[0]
        assert stale.max_attempts == 3
        # Published by another process (this store's view is not told): the next
        # registration of a worker serving it adopts the waiting execution.
        store._publish([job_entry("third", 1, defaults=JobDefaults(max_attempts=8))])
        assert store.get(stale.id).max_attempts == 3
        store.register_node("w1", jobs=[("third", 1)])
        assert store.get(stale.id).max_attempts == 8

    def test_unknown_jobs_allow_and_refuse(
        self, store_factory: StoreFactory, clock: ManualClock
    ) -> None:
        with pytest.warns(DeprecationWarning, match="auto"):
            former = store_factory(clock, unknown_jobs="auto")
        assert former.config.unknown_jobs == "allow"
        allowing = store_factory(clock, unknown_jobs="allow")
        allowing.publish_jobs([report()])
        assert allowing.submit("anything", {"x": 1}).job_version is None
        with names_the_field("inputs.day"):
            allowing.submit("report", {})  # a published job is still checked
        refusing = store_factory(clock, unknown_jobs="refuse")
        with pytest.raises(ValidationError) as caught:
            refusing.submit("anything")
        assert caught.value.field == "job"
        assert "known: none" in str(caught.value)
        assert refusing.query().items == []
        with names_the_field("unknown_jobs"):
            store_factory(clock, unknown_jobs="sometimes")

    def test_a_batch_follows_the_same_rules_and_names_the_item(self, store: Store) -> None:
        store.publish_jobs([report(1, defaults=JobDefaults(priority=5)), report(2)])
        items: list[dict[str, Any]] = [
            {"job": "report", "inputs": {"day": "a"}},
            {"job": "report", "inputs": {"day": "b"}, "version": 1},
            {"job": "report", "inputs": {"day": "c"}},
            {"job": "report", "inputs": {"day": 3}},
        ]
        with names_the_field("[3].inputs.day"):
            store.submit_many(items)
        with names_the_field("[1].version"):
            store.submit_many([items[0], {"job": "report", "version": 7, "inputs": {"day": "x"}}])
        with names_the_field("[1].job"):
            store.submit_many([items[0], {"job": "a\x00b"}])
        assert store.query().items == []
        done = store.submit_many([*items[:3], {"job": "unknown", "priority": 4}])
        assert [(e.job_version, e.priority) for e in done] == [(2, 0), (1, 5), (2, 0), (None, 4)]

    def test_submit_or_find_follows_the_same_rules(self, store: Store) -> None:
        store.publish_jobs([report(defaults=JobDefaults(max_attempts=2))])
        with names_the_field("inputs.day"):
            store.submit_or_find("report", inputs={"day": 1}, idempotency_key="k")
        first, created = store.submit_or_find("report", inputs={"day": "d"}, idempotency_key="k")
        again, created_again = store.submit_or_find(
            "report", inputs={"day": "d"}, idempotency_key="k"
        )
        assert (created, created_again) == (True, False)
        assert again.id == first.id
        assert (first.max_attempts, first.job_version) == (2, 1)

    def test_a_failure_waits_the_jobs_own_retry_delays(
        self, store: Store, clock: ManualClock
    ) -> None:
        quick = JobDefaults(retry_base_delay=0.001, retry_max_delay=0.001)
        store.publish_jobs([report(defaults=quick)])
        store.submit("report", {"day": "d"})
        (lease,) = store.claim("w", ttl=10)
        failed = store.fail(lease, "boom")
        assert failed.state is State.RETRY_WAIT
        assert failed.due_at - at(0) <= timedelta(milliseconds=1)
        clock.set(1)
        (lease,) = store.claim("w", ttl=5)
        clock.set(6)  # the lease expired: no delay, the job's or the store's (claimable now)
        assert store.reap_expired() == 1
        reaped = store.get(lease.execution_id)
        assert reaped.state is State.RETRY_WAIT
        assert reaped.due_at == lease.due_at

    # -- schedules -------------------------------------------------------------------------

    def test_a_schedule_follows_the_same_rules(self, store: Store) -> None:
        defaults = JobDefaults(max_attempts=2, priority=4, queue="nightly")
        store.publish_jobs([report(1), report(2, defaults=defaults), job_entry("other", 5)])
        with names_the_field("inputs.day"):
            store.add_schedule("report", every=60, inputs={"day": 1})
        with names_the_field("version"):
            store.add_schedule("report", every=60, inputs={"day": "d"}, version=4)
        assert store.schedules().items == []
        unknown = store.add_schedule("unknown", every=60)  # allowed, as a submit is
        assert (unknown.job_version, unknown.max_attempts) == (None, 3)
        s = store.add_schedule("report", every=60, inputs={"day": "d"})
        assert (s.job_version, s.max_attempts, s.priority, s.queue) == (2, 2, 4, "nightly")
        pinned = store.add_schedule("report", every=60, inputs={"day": "d"}, version=1)
        assert (pinned.job_version, pinned.max_attempts, pinned.priority, pinned.queue) == (
            1,
            3,
            0,
            "default",
        )
        with names_the_field("inputs.day"):
            store.update_schedule(s.id, inputs={"day": 5})
        with names_the_field("version"):
            store.update_schedule(s.id, version=8)
        assert store.get_schedule(s.id).inputs == {"day": "d"}
        assert store.update_schedule(s.id, version=1).job_version == 1
        moved = store.update_schedule(s.id, job="other", inputs={})
        assert (moved.job, moved.job_version) == ("other", 5)
