"""bench/scale_sim.py, on small inputs: its saturation logic, not its figures.

The simulation extrapolates docs/scale.md's figures from measured ones; what must hold
whatever the inputs: no stage delivers more than its capacity, a load under capacity
is claimed on time, an overload's backlog grows at the excess, clusters add capacity
and shards on one database do not.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_sim.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_sim", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_sim"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


sim = _load()

#: Small round capacities: a database that claims 1,000/s and inserts 2,000/s.
SMALL = sim.Capacities(pg_submit=2_000, pg_claim_complete=1_000, worker=400, materializer=500)


def test_claims_never_exceed_the_capacity_of_the_bottleneck() -> None:
    topologies = [
        sim.Topology("1 PG"),
        sim.Topology("1 PG, 2 workers", workers=2),
        sim.Topology("1 PG, slow handlers", workers=3, concurrency=4, handler_seconds=0.02),
        sim.Topology("3 PG, 10 shards", clusters=3, shards=10),
    ]
    for rate in (100, 900, 5_000):
        for peak in (1, 10):
            workload = sim.Workload(rate=rate, peak=peak, peak_seconds=5, period=60, lookahead=5)
            for topology in topologies:
                r = sim.simulate(SMALL, topology, workload, seconds=60, dt=0.1)
                ceiling = min(r.capacity["database"], r.capacity["workers"])
                assert r.claimed_peak <= ceiling * 1.0001, (topology.name, rate, peak)
                assert r.claimed <= r.due + 1e-6
                assert all(0 <= busy <= 1.0001 for busy in r.busy.values())


def test_a_load_under_capacity_is_claimed_on_time() -> None:
    r = sim.simulate(SMALL, sim.Topology("1 PG"), sim.Workload(rate=300), seconds=60, dt=0.1)
    assert r.bottleneck == "none"
    assert r.slo_met
    assert r.backlog_end == pytest.approx(0, abs=1e-6)
    assert r.p99 <= 0.1 + 1e-9  # the resolution: claimed by the end of its step
    assert r.claimed == pytest.approx(300 * 60)


def test_an_overload_backlog_grows_at_the_excess_over_the_database() -> None:
    # Inserts nearly free, workers plentiful: claims are bounded by the database alone.
    caps = sim.Capacities(pg_submit=1e12, pg_claim_complete=1_000, worker=1e6, materializer=1e6)
    r = sim.simulate(caps, sim.Topology("1 PG"), sim.Workload(rate=1_500), seconds=100, dt=0.1)
    assert r.bottleneck == "database"
    assert r.backlog_end == pytest.approx(500 * 100, rel=0.01)
    assert r.claimed_peak == pytest.approx(1_000, rel=0.001)
    assert not r.slo_met


def test_inserts_and_claims_share_one_database() -> None:
    # Each execution costs the database 1/2000 + 1/1000 s: 666.7/s in all, although
    # claims alone would reach 1,000/s.
    assert sim.lifecycle_rate(SMALL) == pytest.approx(2_000 / 3)
    caps = sim.Capacities(pg_submit=2_000, pg_claim_complete=1_000, worker=1e6, materializer=1e6)
    under = sim.simulate(caps, sim.Topology("1 PG"), sim.Workload(rate=640), seconds=120)
    over = sim.simulate(caps, sim.Topology("1 PG"), sim.Workload(rate=700), seconds=120)
    assert under.slo_met
    assert under.backlog_end == pytest.approx(0, abs=1e-6)
    assert over.bottleneck == "database"
    assert over.backlog_end > 0


def test_an_overloaded_database_is_shared_fairly() -> None:
    assert sim.fair_share(0.3, 0.4, 1.0) == (0.3, 0.4)  # enough for both
    assert sim.fair_share(0.2, 5.0, 1.0) == (0.2, 0.8)  # one leaves room to the other
    assert sim.fair_share(5.0, 0.1, 1.0) == (0.9, 0.1)
    assert sim.fair_share(5.0, 5.0, 1.0) == (0.5, 0.5)


def test_shards_on_one_database_add_no_capacity_and_clusters_do() -> None:
    workload = sim.Workload(rate=3_000)
    one = sim.simulate(SMALL, sim.Topology("1 PG"), workload, seconds=30)
    sharded = sim.simulate(SMALL, sim.Topology("1 PG", shards=64), workload, seconds=30)
    assert sharded.claimed <= one.claimed  # the ownership renewals cost a little
    assert not one.slo_met
    assert not sharded.slo_met
    # 3,000/s needs 4.5 databases' worth; 8 shards cannot be dealt over 5, 6 or 7
    # clusters without one holding 2 of them (750/s, more than one database's 666.7).
    assert sim.clusters_needed(SMALL, workload, shards=8) == 8
    assert sim.clusters_needed(SMALL, workload, shards=1024) == 5
    uneven = sim.simulate(SMALL, sim.Topology("5 PG", clusters=5, shards=8), workload, seconds=120)
    enough = sim.simulate(SMALL, sim.Topology("8 PG", clusters=8, shards=8), workload, seconds=120)
    assert not uneven.slo_met
    assert uneven.backlog_end > 0
    assert enough.slo_met
    assert enough.backlog_end == pytest.approx(0, abs=1e-6)
    assert enough.capacity["database"] == 8 * 1_000


def test_shards_are_dealt_over_clusters_busiest_first() -> None:
    shares = sim.Topology("x", clusters=3, shards=10).shares()
    assert shares == [(0.4, 1), (0.3, 2)]
    assert sum(share * n for share, n in shares) == pytest.approx(1)
    with pytest.raises(ValueError, match="cannot cover"):
        sim.Topology("x", clusters=4, shards=2)


def test_a_burst_drains_at_the_bottleneck_rate() -> None:
    # 1,000 due in the first 10 ms, one worker of 1,000/s: the last claimed after ~1 s.
    burst = sim.Workload(rate=1_000 / 60, peak=6_000, peak_seconds=0.01, period=60, lookahead=1)
    caps = sim.Capacities(pg_submit=1e9, pg_claim_complete=1e9, worker=1_000, materializer=1e9)
    r = sim.simulate(caps, sim.Topology("w", workers=1), burst, seconds=10, dt=0.005)
    assert r.p99 == pytest.approx(0.99, abs=0.01)
    assert r.max_lateness == pytest.approx(1.0, abs=0.01)


def test_inputs_that_cannot_be_are_refused() -> None:
    with pytest.raises(ValueError, match="pg_claim_complete"):
        sim.Capacities(pg_claim_complete=0)
    with pytest.raises(ValueError, match="holds more than"):
        sim.Workload(rate=1, peak=100, peak_seconds=60, period=3600)
    with pytest.raises(ValueError, match="workers"):
        sim.Topology("x", workers=0)


def test_the_script_prints_its_tables(capsys: pytest.CaptureFixture[str]) -> None:
    # The sweep (a few seconds) is left out: simulate() is what it prints, tested above.
    assert sim.main(["--pg-scale", "2", "--only", "inputs,calibration,sharded"]) == 0
    out = capsys.readouterr().out
    for title in ("## Inputs", "## Calibration", "the sharded workload"):
        assert title in out
    assert "## Sweep" not in out
    with pytest.raises(SystemExit):
        sim.main(["--only", "sweeps"])
    assert "unknown part(s) sweeps" in capsys.readouterr().err
