"""The history partitioned by day on a real PostgreSQL server (migration 10).

Idempotency keys hold across days, prune drops whole days with their keys and
commands (and gives back a day a replay revived meanwhile), and a database made
before migration 10 is converted with its rows readable where they were.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost import IdempotencyConflict, Lease, StaleLease, State, Store
from fencepost.domain.ids import IdGenerator
from fencepost.store.postgres import conversion, history, live_window
from fencepost.store.postgres.connection import MIGRATIONS_PACKAGE, QUERIES, Database
from fencepost.store.sql import latest_version, migration_files
from fencepost.testing import ManualClock
from tests.integration import _pg
from tests.postgres import require_postgres

#: The newest schema version (each release's migrations add to it).
LATEST = latest_version(MIGRATIONS_PACKAGE)


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


def _days_ago(days: int) -> ManualClock:
    return ManualClock(_pg.server_now() - timedelta(days=days))


def _partitions(schema: str) -> list[str]:
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        return [p.name for p in history.partitions(conn)]


def _tables(schema: str) -> set[str]:
    with _pg.connect() as conn:
        found = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    return {str(name) for (name,) in found}


def _finish(store: Store, job: str) -> None:
    while leases := store.claim("setup", limit=100, jobs=[job]):
        assert store.complete_many([(lease, "done") for lease in leases]) == [None] * len(leases)


def test_an_idempotency_key_holds_across_days(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(3)) as old:
        first = old.submit("report", inputs={"day": "a"}, idempotency_key="report-a")
    with fencepost.connect(_pg.url(schema)) as store:
        again = store.submit("report", inputs={"day": "a"}, idempotency_key="report-a")
        assert again.id == first.id  # found in the older day, not stored twice
        with pytest.raises(IdempotencyConflict):
            store.submit("report", inputs={"day": "b"}, idempotency_key="report-a")
        (batch,) = store.submit_many(
            [{"job": "report", "inputs": {"day": "a"}, "idempotency_key": "report-a"}]
        )
        assert batch.id == first.id
        assert store.find("report-a") == store.get(first.id)
        assert store.query(job="report").items == [store.get(first.id)]
    assert history.partition_name("executions", history.day_of(first.id)) in _partitions(schema)


def test_prune_drops_whole_days_with_their_keys_and_commands(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        kept = old.submit_many([{"job": "old", "idempotency_key": f"old-{i}"} for i in range(50)])
        cancelled = old.submit("old-cancelled", idempotency_key="old-cancelled")
        old.request(cancelled.id, "cancel", actor="ops")  # cancelled, and a command row
        _finish(old, "old")
    day = history.partition_name("executions", history.day_of(kept[0].id))
    assert day in _partitions(schema)
    with fencepost.connect(_pg.url(schema)) as store:
        fresh = store.submit("fresh", idempotency_key="fresh-1")
        assert store.prune(older_than=timedelta(days=5), dry_run=True) == 51
        seen: list[int] = []
        assert store.prune(older_than=timedelta(days=5), on_batch=seen.append) == 51
        assert seen == [51]  # one day, dropped whole
        for table in ("executions", "execution_data", "transitions"):
            assert history.sibling(day, table) not in _tables(schema)
        with pytest.raises(fencepost.NotFound):
            store.get(kept[0].id)
        # The keys went with their day: a key can name a new execution again.
        assert store.find("old-0") is None
        reused = store.submit("old", idempotency_key="old-0")
        assert reused.id != kept[0].id
        assert store.get(fresh.id).state is State.SCHEDULED
        with _pg.connect() as conn:
            left = conn.execute(
                f"SELECT (SELECT count(*) FROM {schema}.commands),"
                f" (SELECT count(*) FROM {schema}.execution_keys)"
            ).fetchone()
        assert left == (0, 2)  # fresh-1 and the reused old-0


def test_a_day_a_replay_revived_while_it_was_detached_is_attached_back(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        dead = old.submit("flaky", max_attempts=1, idempotency_key="flaky-1")
        (lease,) = old.claim("setup", jobs=["flaky"])
        old.fail(lease, "boom", retryable=False)
    store = fencepost.connect(_pg.url(schema))
    real_detach = history._detach

    def replay_first(
        conn: psycopg.Connection[Any], p: history.Partition, concurrently: bool
    ) -> None:
        if store.get(dead.id).state is State.FAILED:
            store.replay(dead.id, actor="ops")  # after prune decided the day could go
        real_detach(conn, p, concurrently)

    monkeypatch.setattr(history, "_detach", replay_first)
    try:
        assert store.prune(older_than=timedelta(days=5)) == 0
        revived = store.get(dead.id)
        assert revived.state is State.SCHEDULED
        assert store.find("flaky-1") == revived
        assert history.partition_name("executions", history.day_of(dead.id)) in _partitions(schema)
        assert [e.execution_id for e in store.claim("worker", jobs=["flaky"])] == [dead.id]
    finally:
        store.close()


def _hold_days(
    schema: str, days: list[str], locked: threading.Event, release: threading.Event
) -> None:
    """Hold an ACCESS EXCLUSIVE lock on these days of the three tables (as DROP would)."""
    with _pg.connect() as conn, conn.transaction():
        for day in days:
            for table in ("executions", "execution_data", "transitions"):
                name = f"{schema}.{history.sibling(day, table)}"
                conn.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
        locked.set()
        release.wait(30)


def test_claims_completions_and_heartbeats_touch_only_the_live_days(schema: str) -> None:
    """With a finished day and the empty days made ahead locked as a DROP would lock
    them, the hot verbs still run: their plans hold only the days with live
    executions, and today's (a generic plan over every partition would wait for the
    locks). Reads that name no day (get, query) would wait, and are not hot."""
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        old.submit_many([{"job": "old"} for _ in range(20)])
        _finish(old, "old")
        (finished,) = old.submit_many([{"job": "old"}])
        _finish(old, "old")
    day = history.partition_name("executions", history.day_of(finished.id))
    # Noon: the window reaches into tomorrow within a minute of midnight.
    noon = _pg.server_now().replace(hour=12, minute=0, second=0, microsecond=0)
    with fencepost.connect(_pg.url(schema), clock=ManualClock(noon)) as store:
        store.submit_many([{"job": "fresh"} for _ in range(4)])
        assert store.claim("warm-up", jobs=["nothing"]) == []  # the window is read
        locked, release = threading.Event(), threading.Event()
        today = history.day_of(store.submit("marker").id)
        ahead = [history.partition_name("executions", today + n) for n in (1, 2)]
        assert set(ahead) <= set(_partitions(schema))
        days = [day, *ahead]
        holder = threading.Thread(target=_hold_days, args=(schema, days, locked, release))
        holder.start()
        assert locked.wait(10)
        outcome: list[object] = []

        def hot_verbs() -> None:
            leases = store.claim("worker", limit=4, jobs=["fresh"])
            beats = store.heartbeat_many([(lease, None) for lease in leases[:2]])
            done = store.complete_many([(lease, "ok") for lease in leases[:2]])
            one = store.complete(leases[2], "ok")
            outcome.extend([len(leases), beats, done, one.state])

        verbs = threading.Thread(target=hot_verbs)
        verbs.start()
        # The locks are held until release is set: verbs that finish before that did not
        # wait for them (a verb that did would still be waiting, however long we wait).
        verbs.join(10)
        blocked = verbs.is_alive()
        release.set()
        holder.join()
        verbs.join()
        assert not blocked, "a hot verb waited for a finished or an empty day's lock"
        assert outcome[0] == 4
        assert not any(isinstance(b, StaleLease) for b in outcome[1])  # type: ignore[attr-defined]
        assert outcome[2] == [None, None]
        assert outcome[3] is State.SUCCEEDED


def test_a_store_that_only_heartbeats_touches_only_the_live_days(schema: str) -> None:
    """A store that never claims (another process leases; this one renews, as a service
    taking a remote worker's heartbeats does) reads the live days too: with a finished
    day and the empty days made ahead locked as a DROP would lock them, its heartbeats
    do not wait for them."""
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        (finished,) = old.submit_many([{"job": "old"}])
        _finish(old, "old")
    day = history.partition_name("executions", history.day_of(finished.id))
    noon = _pg.server_now().replace(hour=12, minute=0, second=0, microsecond=0)
    url = _pg.url(schema)
    with (
        fencepost.connect(url, clock=ManualClock(noon)) as claimer,
        fencepost.connect(url, clock=ManualClock(noon)) as beater,
    ):
        claimer.submit_many([{"job": "fresh"} for _ in range(2)])
        leases = claimer.claim("worker", limit=2, jobs=["fresh"])
        assert len(leases) == 2
        (first,) = beater.heartbeat_many([(leases[0], None)])
        assert not isinstance(first, StaleLease)
        assert beater._live.bounds[0] != ""  # type: ignore[attr-defined]  # read: bounded
        today = history.day_of(leases[0].execution_id)
        ahead = [history.partition_name("executions", today + n) for n in (1, 2)]
        assert set(ahead) <= set(_partitions(schema))
        locked, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_days, args=(schema, [day, *ahead], locked, release))
        holder.start()
        assert locked.wait(10)
        beats: list[object] = []

        def heartbeats() -> None:
            beats.extend(beater.heartbeat_many([(lease, {"step": 2}) for lease in leases]))

        renewing = threading.Thread(target=heartbeats)
        renewing.start()
        renewing.join(10)  # finishes now unless it waits for the locks
        blocked = renewing.is_alive()
        release.set()
        holder.join()
        renewing.join()
        assert not blocked, "a heartbeat waited for a finished or an empty day's lock"
        assert len(beats) == 2
        assert not any(isinstance(b, StaleLease) for b in beats)
        assert claimer.get(leases[1].execution_id).progress == {"step": 2}


def test_a_replayed_dead_letter_of_an_old_day_is_claimed_and_completed(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay makes an old day live again: a store whose window was read before the
    replay claims it within the window's refresh, and one whose window still starts
    after it completes its lease all the same (that statement runs unbounded)."""
    monkeypatch.setattr(live_window.LiveWindow, "REFRESH", 0.5)
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        dead = old.submit("flaky", max_attempts=1)
        (lease,) = old.claim("setup", jobs=["flaky"])
        old.fail(lease, "boom", retryable=False)
    with fencepost.connect(_pg.url(schema)) as claimer, fencepost.connect(_pg.url(schema)) as late:
        assert claimer.claim("w", jobs=["flaky"]) == []
        assert late.claim("w", jobs=["flaky"]) == []  # late's window: today on
        assert late._live.bounds[0] > dead.id  # type: ignore[attr-defined]
        claimer.replay(dead.id, actor="ops")
        deadline = time.monotonic() + 5
        leases: list[Lease] = []
        while not leases and time.monotonic() < deadline:
            leases = claimer.claim("w", jobs=["flaky"])
            time.sleep(0.05)
        assert [lease.execution_id for lease in leases] == [dead.id]
        monkeypatch.setattr(live_window.LiveWindow, "REFRESH", 3600.0)  # late keeps its window
        assert late._live.bounds[0] > dead.id  # type: ignore[attr-defined]
        assert not isinstance(late.heartbeat_many([(leases[0], None)])[0], StaleLease)
        assert late.complete_many([(leases[0], "ok")]) == [None]
        assert late.get(dead.id).state is State.SUCCEEDED


def _version_9(schema: str) -> None:
    """The schema as a release before migration 10 made it."""
    _made_by_release(schema, 9)


def _made_by_release(schema: str, last: int) -> None:
    """The schema as a release whose last migration was ``last`` made it."""
    with _pg.connect() as conn, conn.transaction():
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(QUERIES["create_migrations_table"])
        for version, name, sql in migration_files(MIGRATIONS_PACKAGE):
            if version <= last:
                conn.execute(sql)
                conn.execute(QUERIES["record_migration"], {"version": version, "name": name})


def test_a_database_from_before_partitions_is_converted_with_its_rows(schema: str) -> None:
    _version_9(schema)
    ids = IdGenerator()
    made = int((_pg.server_now() - timedelta(days=4)).timestamp() * 1000)
    rows = [ids.new(made + i) for i in range(100)]
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(
            "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
            " updated_at, idempotency_key) SELECT i, 'legacy', 'SUCCEEDED', now(), 3, 0, now(),"
            " now(), 'legacy-' || g FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(i, g)",
            (rows,),
        )
        conn.execute("INSERT INTO execution_data SELECT id, '{}' FROM executions")
        conn.execute(
            "INSERT INTO transitions (execution_id, event, to_state, epoch, at)"
            " SELECT id, 'SUBMITTED', 'SCHEDULED', 0, now() FROM executions"
        )
        conn.execute(
            "INSERT INTO commands (id, execution_id, kind, state, requested_by, requested_at)"
            " VALUES (gen_random_uuid(), %s, 'cancel', 'DONE', 'ops', now())",
            (rows[0],),
        )
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.migrations_applied == list(range(10, LATEST + 1))
        assert store.get(rows[5]).job == "legacy"
        assert store.find("legacy-6") == store.get(rows[5])
        assert [t.event.value for t in store.transitions(rows[0])] == ["SUBMITTED"]
        assert len(store.commands(rows[0])) == 1
        # A key of a converted row still holds; a new one is stored in a day partition.
        with pytest.raises(IdempotencyConflict):
            store.submit("legacy", inputs={"other": 1}, idempotency_key="legacy-1")
        new = store.submit("new")
        assert store.get(new.id).job == "new"
        with _pg.connect() as conn:
            (where,) = conn.execute(
                f"SELECT tableoid::regclass::text FROM {schema}.executions WHERE id = %s",
                (rows[0],),
            ).fetchone() or (None,)
        assert str(where).endswith("executions_p0")
        # The audit's seq carries on after the converted rows'.
        seqs = [t.seq for t in store.transitions(new.id)]
        assert seqs
        assert min(seqs) > 100
    parts = _partitions(schema)
    assert parts[0] == "executions_p0"
    assert len(parts) >= 3


def test_prune_by_row_deletes_keys_and_commands_at_the_edges(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(3)) as old:
        done = old.submit("old", idempotency_key="edge-1")
        old.submit("keeper")  # still waiting: its day stays, prune deletes by row
        old.request(done.id, "cancel", actor="ops")  # finished, with a command row
        _finish(old, "old")
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.prune(older_than=timedelta(days=1)) == 1
        assert store.find("edge-1") is None
        with _pg.connect() as conn:
            left = conn.execute(
                f"SELECT (SELECT count(*) FROM {schema}.commands),"
                f" (SELECT count(*) FROM {schema}.execution_keys)"
            ).fetchone()
        assert left == (0, 0)
        assert store.submit("old", idempotency_key="edge-1").id != done.id


def _seed_version_9(schema: str, count: int, *, state: str) -> list[str]:
    """``count`` keyed executions in ``state``, as a release before migration 10 stored them."""
    ids = IdGenerator()
    made = int(_pg.server_now().timestamp() * 1000) - count
    rows = [ids.new(made + i) for i in range(count)]
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(
            "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
            " updated_at, idempotency_key) SELECT i, 'legacy', %s, now(), 3, 0, now(),"
            " now(), 'seeded-' || i FROM unnest(%s::uuid[]) AS t(i)",
            (state, rows),
        )
        conn.execute("INSERT INTO execution_data SELECT id, '{}' FROM executions")
    return rows


def _keys_missing(schema: str) -> int:
    with _pg.connect() as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {schema}.executions AS e LEFT JOIN {schema}.execution_keys AS k"
            " ON k.key = e.idempotency_key AND k.execution_id = e.id"
            " WHERE e.idempotency_key IS NOT NULL AND k.key IS NULL"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_db_migrate_converts_online_while_an_older_release_claims(schema: str) -> None:
    """``fencepost db migrate`` prepares migration 10 in batches, while writers of the
    previous schema (raw SQL here, as a release before 10 wrote) claim, complete and
    submit keyed executions; afterwards every key is in execution_keys, including the
    keys submitted meanwhile. After the swap, that release's keyed submit (ON CONFLICT
    on a unique index the partitioned table does not have) is refused, never stored
    unknown to execution_keys: restart older processes after `db migrate`."""
    _version_9(schema)
    _seed_version_9(schema, 30_000, state="SCHEDULED")
    stop = threading.Event()
    waits: list[float] = []
    failures: list[BaseException] = []
    submitted: list[str] = []
    refused: list[str] = []
    ids = IdGenerator()

    def older_release() -> None:
        try:
            with _pg.connect() as conn:
                conn.execute(f"SET search_path TO {schema}")
                while not stop.is_set():
                    begun = time.perf_counter()
                    claimed = conn.execute(
                        "UPDATE executions SET state = 'RUNNING', epoch = epoch + 1"
                        " WHERE id IN (SELECT id FROM executions WHERE state = 'SCHEDULED'"
                        " ORDER BY priority DESC, due_at, id LIMIT 10 FOR UPDATE SKIP LOCKED)"
                        " RETURNING id"
                    ).fetchall()
                    waits.append(time.perf_counter() - begun)
                    conn.execute(
                        "UPDATE executions SET state = 'SUCCEEDED' WHERE id = ANY(%s)",
                        ([i for (i,) in claimed],),
                    )
                    if refused:
                        continue
                    new = ids.new(int(time.time() * 1000))
                    try:
                        with conn.transaction():
                            conn.execute(
                                "INSERT INTO executions (id, job, state, due_at, max_attempts,"
                                " bucket, created_at, updated_at, idempotency_key) VALUES"
                                " (%s, 'during', 'SCHEDULED', now(), 3, 0, now(), now(), %s)"
                                " ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL"
                                " DO NOTHING",
                                (new, f"during-{new}"),
                            )
                            conn.execute("INSERT INTO execution_data VALUES (%s, '{}')", (new,))
                    except psycopg.errors.InvalidColumnReference:
                        # After the swap an older release's keyed submit is refused (no
                        # unique index of keys on the partitioned table): never a key
                        # stored without execution_keys knowing it.
                        refused.append(new)
                        continue
                    submitted.append(new)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    thread = threading.Thread(target=older_release, daemon=True)
    thread.start()
    try:
        while len(waits) < 5 and not failures:
            time.sleep(0.05)
        before = len(submitted)
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("fencepost")),
                "db",
                "migrate",
                "--db",
                _pg.url(schema),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        # The writer carries on against the partitioned tables, until its keyed submit
        # is refused (however slowly a loaded machine runs it).
        deadline = time.monotonic() + 30
        while not refused and not failures and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert failures == []
    assert run.returncode == 0, run.stderr
    assert "fencepost: copying idempotency keys" in run.stderr
    assert "fencepost: checking the first partition's bound" in run.stderr
    applied = ", ".join(map(str, range(10, LATEST + 1)))
    assert run.stdout.strip() == f"migrated to version {LATEST} (applied {applied})"
    assert len(submitted) > before, "the older release kept submitting during the migration"
    assert refused, "the older release wrote on after the swap, and its keyed submit was refused"
    print(f"\nslowest claim of the older release: {max(waits) * 1000:.1f} ms")
    assert _keys_missing(schema) == 0
    with fencepost.connect(_pg.url(schema)) as store:
        for key in (f"during-{submitted[before]}", f"during-{submitted[-1]}"):
            found = store.find(key)
            assert found is not None
            assert found.job == "during"
    assert "execution_history_prepared" not in _tables(schema)
    with _pg.connect() as conn:
        triggers = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'executions_keys_sync'"
            " AND tgrelid::regclass::text LIKE %s",
            (f"{schema}.%",),
        ).fetchone()
    assert triggers == (0,)


def test_an_interrupted_preparation_carries_on(schema: str) -> None:
    _version_9(schema)
    _seed_version_9(schema, 5_000, state="SUCCEEDED")

    class Interrupted(Exception):
        pass

    def stop_after_a_batch(stage: str, done: int, total: int | None) -> None:
        if stage == "copying idempotency keys" and done >= 1_000:
            raise Interrupted

    db = Database(_pg.url(schema))
    try:
        with pytest.raises(Interrupted):
            conversion.prepare(db, progress=stop_after_a_batch, batch=1_000)
        assert conversion.needs_preparing(db)
        assert conversion.prepare(db, batch=1_000) == 5_000  # copied again: harmless
        assert conversion.needs_preparing(db)  # prepared, not yet migrated
    finally:
        db.close()
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.migrations_applied == list(range(10, LATEST + 1))
        assert store.find("seeded-x") is None
    assert _keys_missing(schema) == 0


def test_a_dropped_day_s_keys_go_slice_by_slice_and_the_neighbours_keys_stay(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keys of a day dropped whole are found by the day's ids (execution_keys_execution)
    and deleted a slice of KEYS_SLICE_MS of ids at a time: all of them, over slices with
    and without keys, and no key of an older or newer day."""
    monkeypatch.setattr(history, "KEYS_SLICE_MS", 60_000)
    with fencepost.connect(_pg.url(schema), clock=_days_ago(12)) as older:
        older.submit_many([{"job": "waiting", "idempotency_key": f"older-{i}"} for i in range(3)])
    midnight = _pg.server_now().replace(hour=0, minute=0, second=0, microsecond=0)
    day_start = midnight - timedelta(days=10)
    clock = ManualClock(day_start)
    doomed = []
    with fencepost.connect(_pg.url(schema), clock=clock) as old:
        # Several keys in a slice, empty slices between, the last a minute before the
        # next day, whose first slice must not reach into the next day.
        for seconds in (1800, 1830, 1890, 2310, 2760, 86_370):
            clock.set(day_start + timedelta(seconds=seconds))
            doomed += old.submit_many(
                [{"job": "old", "idempotency_key": f"old-{seconds}-{i}"} for i in range(4)]
                + [{"job": "old"}]
            )
        _finish(old, "old")
    assert len({history.day_of(e.id) for e in doomed}) == 1
    next_day = ManualClock(day_start + timedelta(days=1, seconds=10))
    with fencepost.connect(_pg.url(schema), clock=next_day) as after:
        after.submit("waiting", idempotency_key="next-day")  # still waiting: its day stays
    with fencepost.connect(_pg.url(schema), clock=_days_ago(3)) as newer:
        newer.submit_many([{"job": "recent", "idempotency_key": f"newer-{i}"} for i in range(4)])
    with fencepost.connect(_pg.url(schema)) as store:
        seen: list[int] = []
        assert store.prune(older_than=timedelta(days=5), on_batch=seen.append) == 30
        assert seen == [30]  # the day dropped whole
        assert history.partition_name("executions", history.day_of(doomed[0].id)) not in (
            _partitions(schema)
        )
    with _pg.connect() as conn:
        keys = {k for (k,) in conn.execute(f"SELECT key FROM {schema}.execution_keys")}
    assert keys == {f"older-{i}" for i in range(3)} | {f"newer-{i}" for i in range(4)} | {
        "next-day"
    }


def _keys_index(schema: str) -> tuple[bool, bool] | None:
    """(valid, unique) of execution_keys_execution, None where there is none."""
    with _pg.connect() as conn:
        found = conn.execute(
            "SELECT i.indisvalid, i.indisunique FROM pg_index AS i"
            " WHERE i.indexrelid = to_regclass(%s)",
            (f"{schema}.{conversion.KEYS_INDEX}",),
        ).fetchone()
    return None if found is None else (bool(found[0]), bool(found[1]))


def _insert_keys(conn: psycopg.Connection[Any], schema: str, keys: list[str]) -> None:
    conn.execute(
        f"INSERT INTO {schema}.execution_keys (key, execution_id)"
        " SELECT k, gen_random_uuid() FROM unnest(%s::text[]) AS t(k)",
        (keys,),
    )


def test_db_migrate_builds_migration_11_s_index_while_submits_go_on(schema: str) -> None:
    """Before migration 11, ``fencepost db migrate`` builds its index CONCURRENTLY: while
    the build waits for a writer's open transaction, another writer's insert into
    execution_keys goes through (a plain CREATE INDEX would queue it behind the build)."""
    _made_by_release(schema, 10)
    with _pg.connect() as conn:
        _insert_keys(conn, schema, [f"k-{i}" for i in range(1_000)])
    assert _keys_index(schema) is None
    db = Database(_pg.url(schema))
    with _pg.connect() as open_writer, _pg.connect() as other_writer:
        open_writer.execute("BEGIN")
        _insert_keys(open_writer, schema, ["open"])
        stages: list[str] = []
        building = threading.Thread(
            target=lambda: conversion.prepare(db, progress=lambda s, d, t: stages.append(s))
        )
        building.start()
        try:
            deadline = time.monotonic() + 10
            while _keys_index(schema) is None:  # the build has begun, and waits
                assert time.monotonic() < deadline, "the index build did not start"
                time.sleep(0.01)
            other_writer.execute("SET lock_timeout = '2s'")
            _insert_keys(other_writer, schema, ["meanwhile"])
            assert building.is_alive()  # still waiting for the open transaction
        finally:
            open_writer.execute("COMMIT")
            building.join(30)
            db.close()
    assert not building.is_alive()
    assert stages == ["indexing idempotency keys by execution"] * 2  # begun, done
    assert _keys_index(schema) == (True, False)
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.migrations_applied == list(range(11, LATEST + 1))  # it found the index


@pytest.mark.parametrize("how", ["db migrate", "store"])
def test_an_index_an_interrupted_build_left_invalid_is_built_again(schema: str, how: str) -> None:
    _made_by_release(schema, 10)
    with _pg.connect() as conn:
        conn.execute(
            f"INSERT INTO {schema}.execution_keys (key, execution_id)"
            " VALUES ('a', '01900000-0000-7000-8000-000000000001'),"
            " ('b', '01900000-0000-7000-8000-000000000001')"
        )
        with pytest.raises(psycopg.errors.UniqueViolation):  # a build that failed midway
            conn.execute(
                f"CREATE UNIQUE INDEX CONCURRENTLY {conversion.KEYS_INDEX}"
                f" ON {schema}.execution_keys (execution_id)"
            )
    assert _keys_index(schema) == (False, True)
    if how == "db migrate":
        db = Database(_pg.url(schema))
        try:
            conversion.prepare(db)
        finally:
            db.close()
        assert _keys_index(schema) == (True, False)
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.migrations_applied == list(range(11, LATEST + 1))
    assert _keys_index(schema) == (True, False)
