"""The service-level report over HTTP: ``GET /slo``, both clients, the ``fencepost_slo_*``
metrics and ``AsyncStore.slo``.

Each test prepares executions of known verdicts on a ManualClock (every backend) and
checks the figures each surface gives: the same report the store computes (its rules
are the contract suite's), under the names the API documents.

Timeline of :func:`prepare` (seconds after ``T0``; the report is taken at 400):

* ``a``: claimed at 2, completed at 3: meets both objectives.
* ``b``: claimed at 30 (late), completed at 40: a claim miss, a finish met.
* ``c``: never claimed: a claim miss and a finish miss (``late_claim`` both).
* ``e``: claimed at 1, failed at 2 and waiting for its retry an hour later: the claim
  met, the finish missed (``handler_failed``).
* ``d``: submitted for a minute before ``T0``: a backfill, excluded from both.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest

from fencepost.api import create_app
from fencepost.api.metrics import SLO_CACHE_SECONDS, Metrics, SloCollector, create_metrics
from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.reports import SloReport
from fencepost.domain.slo import SloOptions, slo_arguments
from fencepost.store.base import Store
from fencepost.store.memory import MemoryStore
from fencepost.store.values import StoreConfig
from fencepost.store.verbs.reports import SloRequest
from fencepost.testing import ManualClock
from fencepost.testing.clock import MANUAL_EPOCH as T0
from fencepost.wire.reports import Slo
from tests.api.support import TestClient
from tests.api.test_async_client import run
from tests.api.test_metrics import Scrape, scrape
from tests.conftest import ASYNC_BACKENDS

pytestmark = pytest.mark.manual_clock

#: The report's instant in :func:`prepare`: every execution is decided by then.
REPORT_AT = 400
SLO_FAMILIES = (
    "fencepost_slo_share",
    "fencepost_slo_target",
    "fencepost_slo_budget_remaining",
    "fencepost_slo_burn_rate",
    "fencepost_slo_misses",
    "fencepost_slo_excluded",
)


def prepare(store: Store, clock: ManualClock) -> dict[str, str]:
    """The executions of the module doc's timeline; their ids by job. The clock ends at 400."""

    def at(seconds: float) -> None:
        clock.set(T0 + timedelta(seconds=seconds))

    ids = {job: store.submit(job).id for job in ("a", "b", "c", "e")}
    ids["d"] = store.submit("d", execute_at=T0 - timedelta(minutes=1)).id
    at(1)
    (e,) = store.claim("w", jobs=["e"], ttl=60)
    at(2)
    (a,) = store.claim("w", jobs=["a"], ttl=60)
    store.fail(e, "boom", retry_in=3600)
    at(3)
    store.complete(a, "ok")
    at(30)
    (b,) = store.claim("w", jobs=["b"], ttl=60)
    at(40)
    store.complete(b, "ok")
    at(REPORT_AT)
    return ids


def instant(seconds: float) -> str:
    """``T0 + seconds`` as the API writes an instant."""
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


# -- GET /slo ----------------------------------------------------------------------------


def test_get_slo_gives_both_objectives_budgets_classes_and_offenders(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    ids = prepare(store, clock)
    response = client.get("/slo", params={"window": 3600})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["at"], body["start"]) == (instant(REPORT_AT), instant(REPORT_AT - 3600))
    assert (body["window_seconds"], body["rolled_up"]) == (3600, 0)
    assert (body["claim_within_seconds"], body["finish_within_seconds"]) == (10, 300)
    claimed, finished = body["claimed"], body["finished"]
    assert claimed == {
        "name": "claim",
        "within_seconds": 10,
        "target": 0.99,
        "met": 2,
        "total": 4,
        "share": 0.5,
        "missed": True,
        "misses": {"late_claim": 2},
        "excluded": {"backfill": 1, "replay": 0, "throttled": 0},
        "budget": pytest.approx(0.04),
        "consumed": 2,
        "remaining": pytest.approx(-1.96),
        "burn": [
            {"window_seconds": 3600, "met": 2, "total": 4, "rate": pytest.approx(50)},
            {"window_seconds": 21600, "met": 2, "total": 4, "rate": pytest.approx(50)},
        ],
    }
    assert finished["misses"] == {
        "late_claim": 1,
        "renewal_failed": 0,
        "timed_out": 0,
        "handler_failed": 1,
        "stale_completion_refused": 0,
        "ran_long": 0,
    }
    assert (finished["met"], finished["total"], finished["missed"]) == (2, 4, True)
    assert finished["excluded"] == {"backfill": 1, "replay": 0, "throttled": 0}
    assert (finished["budget"], finished["remaining"]) == (
        pytest.approx(0.004),
        pytest.approx(-1.996),
    )
    assert [b["rate"] for b in finished["burn"]] == [pytest.approx(500)] * 2
    worst = body["worst"]
    assert [o["execution_id"] for o in worst] == [ids[j] for j in "dcbae"]
    assert worst[0] == {
        "execution_id": ids["d"],
        "job": "d",
        "state": "SCHEDULED",
        "planned_at": instant(-60),
        "claimed_at": None,
        "lateness_seconds": REPORT_AT + 60,
        "verdict": "backfill",
    }
    assert worst[2] == {
        "execution_id": ids["b"],
        "job": "b",
        "state": "SUCCEEDED",
        "planned_at": instant(0),
        "claimed_at": instant(30),
        "lateness_seconds": 30,
        "verdict": "late_claim",
    }
    assert [o["verdict"] for o in worst] == ["backfill", "late_claim", "late_claim", "met", "met"]
    # The body is the store's report, field by field.
    assert body == Slo.from_domain(store.slo(window=3600)).model_dump(mode="json")


def test_get_slo_at_its_defaults_is_the_stores_report(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    prepare(store, clock)
    body = client.get("/slo").json()
    assert body == Slo.from_domain(store.slo()).model_dump(mode="json")
    assert body["window_seconds"] == 30 * 86400
    assert (body["claimed"]["target"], body["finished"]["target"]) == (0.99, 0.999)
    assert body["start"] == "2025-12-02T00:00:00Z", "a UTC midnight: whole days"


def test_targets_set_the_budget_and_the_verdicts(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    prepare(store, clock)
    body = client.get(
        "/slo", params={"window": 3600, "claim_target": 0.4, "finish_target": 0.5}
    ).json()
    claimed, finished = body["claimed"], body["finished"]
    assert (claimed["target"], claimed["missed"], finished["missed"]) == (0.4, False, False)
    assert claimed["budget"] == pytest.approx(0.6 * 4)
    assert claimed["remaining"] == pytest.approx(0.6 * 4 - 2)
    assert claimed["burn"][0]["rate"] == pytest.approx(0.5 / 0.6)
    assert finished["budget"] == pytest.approx(2.0)
    assert finished["remaining"] == pytest.approx(0.0)


def test_nothing_decided_has_no_share_and_no_burn_rate(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.submit("fresh")
    clock.advance(5)  # not yet overdue: undecided
    body = client.get("/slo").json()
    for objective in (body["claimed"], body["finished"]):
        assert (objective["total"], objective["share"], objective["missed"]) == (0, None, False)
        assert [b["rate"] for b in objective["burn"]] == [None, None]
        assert objective["budget"] == objective["remaining"] == 0
    assert body["worst"][0]["verdict"] is None


# -- the clients -------------------------------------------------------------------------


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_both_clients_read_the_stores_report(
    client: TestClient, remote: Client, store: Store, clock: ManualClock
) -> None:
    prepare(store, clock)
    arguments: dict[str, Any] = {
        "window": timedelta(hours=2),
        "claim_within": 20,
        "finish_within": timedelta(minutes=2),
        "claim_target": 0.9,
        "finish_target": 0.95,
        "worst": 3,
    }
    want = store.slo(**arguments)
    assert remote.slo(**arguments) == want
    assert run(client.app, lambda a: a.slo(**arguments)) == want
    assert want.claimed.target == 0.9
    assert [o.verdict for o in want.worst if o.verdict is not None]
    assert remote.slo() == store.slo()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param({"claim_target": math.nan}, "claim_target", id="nan"),
        pytest.param({"finish_target": math.inf}, "finish_target", id="inf"),
        pytest.param({"claim_target": "0.99"}, "claim_target", id="text"),
        pytest.param({"finish_target": 1}, "finish_target", id="one"),
        pytest.param({"window": 0}, "window", id="zero-window"),
        pytest.param({"window": 1e308}, "window", id="huge-window"),
    ],
)
def test_the_async_client_refuses_before_sending(
    client: TestClient, arguments: dict[str, Any], field: str
) -> None:
    from fencepost.domain.errors import ValidationError

    sent: list[Any] = []

    async def scenario(aclient: AsyncClient) -> BaseException | None:
        try:
            await aclient.slo(**arguments)
        except ValidationError as exc:
            return exc
        return None

    error = run(client.app, scenario, sent=sent)
    assert isinstance(error, ValidationError)
    assert error.field == field
    assert sent == [], "refused before anything was sent"


# -- AsyncStore ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
def test_the_async_store_gives_the_sync_stores_report(store: Store, clock: ManualClock) -> None:
    prepare(store, clock)
    awaited: Any = store
    got = store.slo(window=3600, claim_target=0.9, worst=2)
    assert awaited.awaited == {"submit": 5, "claim": 3, "complete": 2, "fail": 1, "slo": 1}
    assert got == awaited.sync_store.slo(window=3600, claim_target=0.9, worst=2)
    assert got.claimed.total == 4


# -- metrics -------------------------------------------------------------------------------


@pytest.fixture
def metrics(store: Store) -> Metrics:
    return create_metrics(store)


@pytest.fixture
def scraper(metrics: Metrics) -> Iterator[TestClient]:
    with TestClient(create_app(metrics.store, metrics=metrics)) as c:
        yield c


def test_slo_metrics_are_the_stores_report_at_its_defaults(
    scraper: TestClient, store: Store, clock: ManualClock
) -> None:
    prepare(store, clock)
    result = scrape(scraper)
    assert result.by_label("fencepost_slo_share", "objective") == {"claim": 0.5, "finish": 0.5}
    assert result.by_label("fencepost_slo_target", "objective") == {"claim": 0.99, "finish": 0.999}
    remaining = result.by_label("fencepost_slo_budget_remaining", "objective")
    assert remaining == {"claim": pytest.approx(-1.96), "finish": pytest.approx(-1.996)}
    assert result.value("fencepost_slo_burn_rate", objective="claim", window="1h") == (
        pytest.approx(50)
    )
    assert result.value("fencepost_slo_burn_rate", objective="finish", window="6h") == (
        pytest.approx(500)
    )
    misses = {
        (s.labels["objective"], s.labels["class"]): s.value
        for s in result.samples
        if s.name == "fencepost_slo_misses"
    }
    assert misses == {
        ("claim", "late_claim"): 2,
        ("finish", "late_claim"): 1,
        ("finish", "renewal_failed"): 0,
        ("finish", "timed_out"): 0,
        ("finish", "handler_failed"): 1,
        ("finish", "stale_completion_refused"): 0,
        ("finish", "ran_long"): 0,
    }
    excluded = {
        (s.labels["objective"], s.labels["reason"]): s.value
        for s in result.samples
        if s.name == "fencepost_slo_excluded"
    }
    assert excluded == {
        (objective, reason): 1 if reason == "backfill" else 0
        for objective in ("claim", "finish")
        for reason in ("backfill", "replay", "throttled")
    }
    for family in SLO_FAMILIES:
        assert result.families[family].type == "gauge"


def test_without_decisions_share_and_burn_rate_are_absent(
    scraper: TestClient, store: Store
) -> None:
    result = scrape(scraper)
    assert "fencepost_slo_share" not in [s.name for s in result.samples]
    assert "fencepost_slo_burn_rate" not in [s.name for s in result.samples]
    assert result.by_label("fencepost_slo_budget_remaining", "objective") == {
        "claim": 0,
        "finish": 0,
    }
    assert result.value("fencepost_slo_target", objective="claim") == 0.99


class CountingStore:
    """A store's ``slo``, counted; ``gate``, when set, holds each report until released."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reports = 0
        self.entered = threading.Event()
        self.gate: threading.Event | None = None

    def slo(self, **arguments: Any) -> SloReport:
        self.reports += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        return self.store.slo(**arguments)


def test_one_report_serves_the_scrapes_of_30_seconds(store: Store, clock: ManualClock) -> None:
    prepare(store, clock)
    counting = CountingStore(store)
    now = [0.0]
    collector = SloCollector(cast(Store, counting), monotonic=lambda: now[0])
    assert collector.cache_seconds == SLO_CACHE_SECONDS == 30
    first = collector.report()
    for _ in range(5):
        now[0] += 5.9
        assert collector.report() is first
    assert counting.reports == 1
    now[0] = 30.0
    assert collector.report() is not first
    assert counting.reports == 2

    # Scrapes at once wait for the one report being taken, then share it.
    now[0] = 100.0
    counting.gate = threading.Event()
    counting.entered.clear()
    started = threading.Barrier(9)
    answers: list[SloReport | None] = []

    def scrape_once() -> None:
        started.wait(30)
        answers.append(collector.report())

    threads = [threading.Thread(target=scrape_once) for _ in range(8)]
    for thread in threads:
        thread.start()
    started.wait(30)
    assert counting.entered.wait(30)
    counting.gate.set()
    for thread in threads:
        thread.join(30)
    assert counting.reports == 3
    assert len(answers) == 8
    assert len({id(a) for a in answers}) == 1, "one report for them all"


class _FlakySlo(MemoryStore):
    """A memory store whose SLO report fails while ``down`` (the rest answers)."""

    down = True

    def _slo(self, request: SloRequest) -> SloReport:
        if self.down:
            raise StoreUnavailable("statement timeout")
        return super()._slo(request)


def test_a_failing_report_leaves_out_only_the_slo_families(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _FlakySlo(StoreConfig(clock=ManualClock()))
    store.submit("mail")
    metrics = create_metrics(store)
    with (
        caplog.at_level(logging.WARNING, logger="fencepost.api.metrics"),
        TestClient(create_app(metrics.store, metrics=metrics)) as client,
    ):
        down = [scrape(client) for _ in range(3)]
        store.down = False
        up: Scrape = scrape(client)
    for result in down:
        assert result.value("fencepost_store_up") == 1
        assert result.value("fencepost_executions", state="SCHEDULED") == 1
        assert not [name for name in result.families if name.startswith("fencepost_slo_")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "logged once, not once per scrape"
    assert "statement timeout" in warnings[0]
    assert up.value("fencepost_slo_target", objective="finish") == 0.999


def test_every_slo_takes_the_same_arguments_with_the_same_defaults() -> None:
    """``Store.slo``, ``AsyncStore.slo`` and both clients take the options declared once
    (``SloOptions``, their defaults in ``slo_arguments``), and ``GET /slo``'s query has
    the same names and defaults."""
    import inspect
    import typing

    from fencepost.store.asyncstore import AsyncStore

    def seconds(value: Any) -> Any:
        return value.total_seconds() if isinstance(value, timedelta) else value

    want = {name: seconds(value) for name, value in slo_arguments({}).items()}
    assert want == {
        "window": 30 * 86400,
        "claim_within": 10,
        "finish_within": 300,
        "claim_target": 0.99,
        "finish_target": 0.999,
        "worst": 10,
    }
    assert set(SloOptions.__annotations__) == set(want)
    for verb in (Store.slo, AsyncStore.slo, Client.slo, AsyncClient.slo):
        [options] = [p for p in inspect.signature(verb).parameters.values() if p.name != "self"]
        hint = typing.get_type_hints(verb, include_extras=True)[options.name]
        assert typing.get_args(hint) == (SloOptions,), verb.__qualname__
    from fencepost.api.reports import slo as route

    query = {
        p.name: seconds(p.default)
        for p in inspect.signature(route).parameters.values()
        if p.name != "store"
    }
    assert query == want
