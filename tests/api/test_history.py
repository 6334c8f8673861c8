"""The history charts over HTTP: ``GET /history``, ``GET /history/summary``, both clients,
and the service's background roll-up (:class:`~fencepost.api.history.HistoryRoller`).

The executions are the contract suite's :func:`finished_in_known_minutes` (every
backend), read at t=500: the figures are the store's, under the names the API
documents, and a request rolls up what finished before it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fencepost import App
from fencepost.api.history import HistoryRoller
from fencepost.api.service import Service, ServiceOptions
from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import StoreUnavailable, ValidationError
from fencepost.domain.history import RollUp
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract.history import finished_in_known_minutes
from fencepost.testing.contract.support import at
from fencepost.wire.history import History, HistorySummary
from tests.api.support import TestClient, assert_problem
from tests.api.test_async_client import run

pytestmark = pytest.mark.manual_clock

#: The chart's instant: everything finished by t=400, the grace (60 s) has passed.
READ_AT = 500


def iso(seconds: float) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


@pytest.fixture
def prepared(store: Store, clock: ManualClock) -> Store:
    finished_in_known_minutes(store, clock)
    clock.set(READ_AT)
    return store


def test_get_history_rolls_up_then_gives_one_point_per_step(
    client: TestClient, prepared: Store
) -> None:
    assert prepared.history().rolled_up_to is None, "nothing rolled up before the request"
    response = client.get("/history", params={"window": "hour"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["window"], body["step_seconds"], len(body["points"])) == ("hour", 60, 60)
    assert (body["start"], body["end"]) == (iso(540 - 3600), iso(540))
    assert (body["job"], body["queue"], body["rolled_up_to"]) == (None, None, iso(440))
    by_at = {p["at"]: p for p in body["points"]}
    assert by_at[iso(0)] == {
        "at": iso(0),
        "succeeded": 1,
        "dead": 0,
        "retried": 0,
        "timed_out": 0,
        "cancelled": 0,
        "skipped": 1,
        "claims": 5,
        "lateness_p50": 1.0,
        "lateness_p99": 30.0,
        "throttled_seconds": 0.0,
        "claim_counted": 4,
        "claim_missed": 1,
        "finish_counted": 0,
        "finish_missed": 0,
        "claim_burn": pytest.approx(25.0),
        "finish_burn": None,
    }
    assert (by_at[iso(360)]["finish_missed"], by_at[iso(360)]["finish_burn"]) == (
        1,
        pytest.approx(1000.0),
    )
    assert body == History.from_domain(prepared.history()).model_dump(mode="json")
    for window, step, count in (("day", 900, 96), ("week", 3600, 168)):
        wide = client.get("/history", params={"window": window}).json()
        assert (wide["step_seconds"], len(wide["points"])) == (step, count)
        assert sum(p["succeeded"] for p in wide["points"]) == 4
    assert client.get("/history").json()["window"] == "hour", "the default window"


def test_filters_narrow_the_chart_and_an_empty_one_is_no_filter(
    client: TestClient, prepared: Store
) -> None:
    everything = client.get("/history").json()
    assert client.get("/history?job=&queue=").json() == everything
    only_a = client.get("/history", params={"job": "a", "queue": "q"}).json()
    assert (only_a["job"], only_a["queue"]) == ("a", "q")
    assert sum(p["claims"] for p in only_a["points"]) == 2
    assert only_a == History.from_domain(prepared.history(job="a", queue="q")).model_dump(
        mode="json"
    )


@pytest.mark.parametrize(
    "name",
    ["%", "_", "a%", "nul\x00", "'; DROP TABLE history_minutes; --", "x" * 5000, " ", "é"],
)
def test_names_no_execution_has_give_an_empty_chart(
    client: TestClient, prepared: Store, name: str
) -> None:
    for params in ({"job": name}, {"queue": name}, {"job": "a", "queue": name}):
        response = client.get("/history", params=params)
        assert response.status_code == 200, response.text
        points = response.json()["points"]
        assert len(points) == 60
        assert all(p["claims"] == p["succeeded"] == 0 for p in points)


def test_get_history_summary_by_job_and_by_queue(client: TestClient, prepared: Store) -> None:
    by_queue = client.get("/history/summary", params={"window": "day", "by": "queue"})
    assert by_queue.status_code == 200, by_queue.text
    body = by_queue.json()
    assert (body["window"], body["by"], body["end"]) == ("day", "queue", iso(900))
    assert body["rows"] == [
        {
            "name": "default",
            "succeeded": 2,
            "dead": 1,
            "retried": 2,
            "claims": 3,
            "lateness_p50": 1.0,
            "lateness_p99": 2.5,
            "throttled_seconds": 0.0,
        },
        {
            "name": "q",
            "succeeded": 2,
            "dead": 0,
            "retried": 0,
            "claims": 2,
            "lateness_p50": 0.5,
            "lateness_p99": 30.0,
            "throttled_seconds": 0.0,
        },
    ]
    by_job = client.get("/history/summary").json()
    assert (by_job["window"], by_job["by"]) == ("hour", "job")
    assert [r["name"] for r in by_job["rows"]] == ["a", "b", "bf", "c", "s-job", "t"]
    assert by_job == HistorySummary.from_domain(prepared.history_summary()).model_dump(mode="json")


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/history", {"window": "month"}, "window"),
        ("/history", {"window": ""}, "window"),
        ("/history", {"window": "HOUR"}, "window"),
        ("/history", {"window": "hour\x00"}, "window"),
        ("/history", {"window": "1" * 5000}, "window"),
        ("/history/summary", {"window": "year"}, "window"),
        ("/history/summary", {"by": "name"}, "by"),
        ("/history/summary", {"by": ""}, "by"),
        ("/history/summary", {"by": "'; --"}, "by"),
    ],
)
def test_bad_parameters_are_a_422_naming_them(
    client: TestClient, path: str, params: dict[str, str], field: str
) -> None:
    assert_problem(client.get(path, params=params), 422, "validation", field)


# -- the clients -------------------------------------------------------------------------


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_both_clients_read_the_stores_charts(
    client: TestClient, remote: Client, prepared: Store
) -> None:
    chart = remote.history(window="day", job="a")
    assert chart == prepared.history(window="day", job="a")
    assert sum(p.claims for p in chart.points) == 2
    assert run(client.app, lambda a: a.history(window="week")) == prepared.history(window="week")
    summary = remote.history_summary(window="week", by="queue")
    assert summary == prepared.history_summary(window="week", by="queue")
    assert run(client.app, lambda a: a.history_summary()) == prepared.history_summary()


@pytest.mark.parametrize(
    ("verb", "arguments", "field"),
    [
        ("history", {"window": "month"}, "window"),
        ("history", {"job": 1}, "job"),
        ("history", {"queue": ["q"]}, "queue"),
        ("history_summary", {"by": "name"}, "by"),
    ],
)
def test_the_clients_refuse_before_sending(
    client: TestClient, verb: str, arguments: dict[str, Any], field: str
) -> None:
    sent: list[Any] = []
    with (
        Client("http://testserver", http=client) as remote,
        pytest.raises(ValidationError) as refused,
    ):
        getattr(remote, verb)(**arguments)
    assert refused.value.field == field

    async def scenario(aclient: AsyncClient) -> BaseException | None:
        try:
            await getattr(aclient, verb)(**arguments)
        except ValidationError as exc:
            return exc
        return None

    error = run(client.app, scenario, sent=sent)
    assert isinstance(error, ValidationError)
    assert error.field == field
    assert sent == [], "refused before anything was sent"


def test_app_rolls_up_then_reads_as_the_api_does(prepared: Store) -> None:
    app = App(prepared)
    assert prepared.history().rolled_up_to is None
    chart = app.history(window="day", queue="q")
    assert (chart.rolled_up_to, chart.queue) == (at(440), "q")
    assert sum(p.succeeded for p in chart.points) == 2
    assert app.history_summary(by="queue") == prepared.history_summary(by="queue")


# -- the service's roll-up -----------------------------------------------------------------


def test_the_roller_rolls_up_in_the_background(prepared: Store) -> None:
    roller = HistoryRoller(prepared, interval=3600)
    roller.start()
    try:
        assert roller.passed.wait(30), "the first pass runs at once"
    finally:
        roller.stop()
    assert prepared.history().rolled_up_to == at(440)
    assert sum(p.succeeded for p in prepared.history().points) == 4


class Flaky:
    """A store whose first two roll-ups fail, then one reads a batch, the next catches up."""

    def __init__(self) -> None:
        self.calls = 0
        self.caught_up = threading.Event()

    def roll_up_history(self, *, max_rows: int = 0, wait: bool = True) -> RollUp:
        self.calls += 1
        if self.calls == 1:
            raise StoreUnavailable("down")
        if self.calls == 2:
            raise RuntimeError("a bug in one pass")
        caught_up = self.calls >= 4
        if caught_up:
            self.caught_up.set()
        return RollUp(executions=self.calls, rolled_up_to=None, caught_up=caught_up)


def test_the_roller_outlives_a_failed_pass() -> None:
    store = Flaky()
    roller = HistoryRoller(store, interval=0.01)
    roller.start()
    try:
        assert store.caught_up.wait(30)
    finally:
        roller.stop()
    assert store.calls == 4, "the third pass reads batch after batch until caught up"
    assert roller.passes == 3


def test_the_service_runs_a_roller_unless_told_not_to(store: Store) -> None:
    service = Service(store)
    assert isinstance(service.history, HistoryRoller)
    assert service.history.interval == 30
    assert Service(store, options=ServiceOptions(history_interval=0)).history is None
