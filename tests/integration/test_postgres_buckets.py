"""Bucket ownership on a shared PostgreSQL: confinement and the per-bucket cap under load."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

import fencepost
from fencepost import Store
from fencepost.domain.buckets import bucket_for
from tests import postgres

CAP = 2
WORKERS = 4
PER_BUCKET = 100
ARRIVALS = 300


@pytest.fixture
def schema() -> Iterator[str]:
    postgres.require_postgres()
    name = postgres.new_schema()
    yield name
    postgres.drop_schema(name)


def _keys_by_bucket(buckets: list[int]) -> dict[int, str]:
    """A bucket_key that lands in each wanted bucket."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < len(buckets):
        key = f"tenant-{n}"
        b = bucket_for(key)
        if b in buckets and b not in found:
            found[b] = key
        n += 1
    return found


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cap_and_confinement_hold_under_four_concurrent_workers(schema: str) -> None:
    url = postgres.store_url(schema) + "&pool_max=2"
    buckets = [3, 7, 11, 19]
    keys = _keys_by_bucket(buckets)
    with fencepost.connect(url) as store:
        store.submit_many(
            [{"job": "job", "bucket_key": keys[b]} for b in buckets for _ in range(PER_BUCKET)]
        )
    # Overlapping declarations: each bucket is served by two workers, each worker by two buckets.
    declared = {f"w{i}": [buckets[i], buckets[(i + 1) % WORKERS]] for i in range(WORKERS)}
    outside: list[str] = []
    over_cap: list[Counter[int]] = []
    stop = threading.Event()
    arrivals_done = threading.Event()

    def work(owner: str) -> None:
        rng = random.Random(owner)
        with fencepost.connect(url) as s:
            s.register_node(owner, buckets=declared[owner], ttl=30)
            while not stop.is_set():
                leases = s.claim(
                    owner, limit=3, ttl=30, buckets=declared[owner], max_per_bucket=CAP
                )
                if not leases and arrivals_done.is_set() and not _unfinished(s):
                    return
                for lease in leases:
                    bucket = s.get(lease.execution_id).bucket
                    if bucket not in declared[owner]:
                        outside.append(f"{owner} claimed bucket {bucket}")
                time.sleep(rng.uniform(0.0, 0.005))  # "run" them
                s.complete_many([(lease, owner) for lease in leases])

    def watch() -> None:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            while not stop.is_set():
                rows = conn.execute(
                    "SELECT bucket, count(*) FROM executions WHERE state = 'RUNNING' "
                    "GROUP BY bucket"
                ).fetchall()
                counts: Counter[int] = Counter(dict(rows))
                if counts and max(counts.values()) > CAP:
                    over_cap.append(counts)
                time.sleep(0.002)

    def jump_the_queue() -> None:
        # New work that outranks everything waiting: a claimer whose snapshot
        # predates it ranks a different "top" than one that sees it, which is the
        # race the per-bucket locks close.
        with fencepost.connect(url) as s:
            for n in range(ARRIVALS):
                s.submit("job", bucket_key=keys[buckets[n % len(buckets)]], priority=n + 1)
                time.sleep(0.002)
        arrivals_done.set()

    threads = [threading.Thread(target=work, args=(owner,)) for owner in declared]
    threads.append(threading.Thread(target=jump_the_queue))
    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    stop.set()
    watcher.join()

    assert outside == []
    assert over_cap == [], f"more than {CAP} RUNNING in a bucket: {over_cap[:3]}"
    peaks = _peak_running_per_bucket(schema)
    assert peaks == dict.fromkeys(buckets, CAP), (
        f"audit-derived peaks {peaks} (cap reached, never passed)"
    )
    with fencepost.connect(url) as store:
        states = Counter(e.state for e in _all(store))
        assert states == {fencepost.State.SUCCEEDED: PER_BUCKET * len(buckets) + ARRIVALS}
        report = store.bucket_report()
        assert report.duplicated == {
            b: sorted(o for o in declared if b in declared[o]) for b in buckets
        }
        assert set(report.unowned) == set(range(64)) - set(buckets)


def _peak_running_per_bucket(schema: str) -> dict[int, int]:
    """The most executions each bucket ever had RUNNING at once, from the audit trail.

    Each execution runs from its CLAIMED to its COMPLETED transition, both stamped
    by the server's clock inside the statements. A capped claim starts only after
    the claims and completions it waited for have committed, so under a correct
    cap these intervals never stack higher than the cap.
    """
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        rows = conn.execute(
            "SELECT e.bucket, t.at, CASE t.event WHEN 'CLAIMED' THEN 1 ELSE -1 END "
            "FROM transitions t JOIN executions e ON e.id = t.execution_id "
            "WHERE t.event IN ('CLAIMED', 'COMPLETED') ORDER BY t.at, t.seq"
        ).fetchall()
    running: Counter[int] = Counter()
    peaks: dict[int, int] = {}
    for bucket, _, step in rows:
        running[bucket] += step
        peaks[bucket] = max(peaks.get(bucket, 0), running[bucket])
    return peaks


def _unfinished(store: Store) -> bool:
    return bool(store.query(state=["SCHEDULED", "RUNNING", "RETRY_WAIT"], limit=1).items)


def _all(store: Store) -> list[fencepost.Execution]:
    from fencepost.testing.contract import executions

    return executions(store)
