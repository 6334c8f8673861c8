"""The HTTP service's schedules slice, over the memory and SQLite stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost.api import create_app, schedules
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.catalogue import JobDefaults, job_entry
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.scheduler.handle import ScheduleHandle
from fencepost.scheduler.materializer import NO_SCHEDULER
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem

#: A cron schedule whose fire times do not depend on when the test runs.
DAILY = {"job": "report", "cron": "0 6 * * *", "start_at": "2030-01-01T00:00:00Z"}


def _z(instant: datetime) -> str:
    """The API's text of an aware instant (UTC with ``Z``)."""
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _add(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/schedules", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


# -- add --------------------------------------------------------------------------------


def test_add_returns_the_stored_schedule(client: TestClient, store: Store) -> None:
    body = {
        "job": "report",
        "version": 3,
        "inputs": {"day": "monday"},
        "cron": "30  2 * * mon-fri",
        "timezone": "America/New_York",
        "misfire": "catch_up",
        "misfire_grace_seconds": 30,
        "max_catch_up": 5,
        "overlap": "skip",
        "dst_gap": "skip",
        "dst_fold": "twice",
        "start_at": "2030-01-01T00:00:00-05:00",
        "end_at": "2031-01-01T00:00:00+00:00",
        "max_attempts": 7,
        "priority": -3,
        "id": "nightly-report",
    }
    created = _add(client, **body)
    stored = store.get_schedule("nightly-report")
    assert (stored.job, stored.job_version, stored.inputs) == ("report", 3, {"day": "monday"})
    assert (stored.cron, stored.every, stored.timezone) == (
        "30 2 * * MON-FRI",
        None,
        body["timezone"],
    )
    assert (stored.misfire.value, stored.misfire_grace, stored.max_catch_up) == (
        "catch_up",
        timedelta(seconds=30),
        5,
    )
    assert (stored.overlap.value, stored.dst_gap.value, stored.dst_fold.value) == (
        "skip",
        "skip",
        "twice",
    )
    assert stored.start_at == datetime(2030, 1, 1, 5, tzinfo=UTC)
    assert stored.end_at == datetime(2031, 1, 1, tzinfo=UTC)
    assert (stored.max_attempts, stored.priority, stored.paused) == (7, -3, False)
    assert created == {
        "id": "nightly-report",
        "job": "report",
        "version": 3,
        "inputs": {"day": "monday"},
        "cron": "30 2 * * MON-FRI",
        "every_seconds": None,
        "timezone": "America/New_York",
        "dst_gap": "skip",
        "dst_fold": "twice",
        "misfire": "catch_up",
        "misfire_grace_seconds": 30.0,
        "max_catch_up": 5,
        "overlap": "skip",
        "start_at": "2030-01-01T05:00:00Z",
        "end_at": "2031-01-01T00:00:00Z",
        "max_attempts": 7,
        "priority": -3,
        "queue": "default",
        "paused": False,
        "watermark": _z(stored.watermark),
        "next_due": _z(stored.next_due),
        "created_at": _z(stored.created_at),
        "updated_at": _z(stored.updated_at),
        # 2030-01-01 is a Tuesday: 02:30 in New York (EST) is 07:30 UTC.
        "next_fire_at": "2030-01-01T07:30:00Z",
        "limit_key": None,
        # Only an add says it: no materializer runs beside this app.
        "warnings": [NO_SCHEDULER],
    }


def test_add_an_interval_schedule_with_defaults(client: TestClient, store: Store) -> None:
    created = _add(client, job="poll", every_seconds=90, start_at="2030-01-01T00:00:00Z")
    stored = store.get_schedule(created["id"])
    assert (stored.cron, stored.every, stored.timezone) == (None, timedelta(seconds=90), "UTC")
    assert (stored.misfire.value, stored.overlap.value) == ("coalesce", "allow")
    assert (stored.max_attempts, stored.job_version, stored.inputs) == (3, None, {})
    assert (created["every_seconds"], created["cron"]) == (90.0, None)
    assert created["next_fire_at"] == "2030-01-01T00:00:00Z"  # start_at is inclusive


def test_add_paused(client: TestClient, store: Store) -> None:
    created = _add(client, **DAILY, paused=True)
    assert store.get_schedule(created["id"]).paused is True
    assert (created["paused"], created["next_fire_at"]) == (True, None)


def test_idempotent_add_201_then_200_then_409(client: TestClient, store: Store) -> None:
    body = {**DAILY, "id": "daily", "inputs": {"to": "ops"}}
    first = client.post("/schedules", json=body)
    again = client.post("/schedules", json=body)
    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    before = store.get_schedule("daily")
    other = client.post("/schedules", json={**body, "cron": "0 7 * * *"})
    assert_problem(other, 409, "idempotency-conflict")
    assert [s.id for s in store.schedules().items] == ["daily"]
    assert store.get_schedule("daily") == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"cron": "61 * * * *"}, "cron", id="cron-minute-out-of-range"),
        pytest.param({"cron": "* * * *"}, "cron", id="cron-four-fields"),
        pytest.param({"cron": "0 0 30 2 *"}, "cron", id="cron-never-fires"),
        pytest.param({"timezone": "Mars/Olympus_Mons"}, "timezone", id="unknown-timezone"),
        pytest.param({"every_seconds": 60}, "cron", id="both-cron-and-every"),
        pytest.param({"cron": None}, "cron", id="neither-cron-nor-every"),
        pytest.param({"start_at": "2030-01-01T00:00:00"}, "start_at", id="naive-start-at"),
        pytest.param({"start_at": 1_900_000_000}, "start_at", id="start-at-as-number"),
        pytest.param({"start_at": "1900000000"}, "start_at", id="start-at-as-digits"),
        pytest.param(
            {"start_at": "0001-01-01T00:00:00+05:00"}, "start_at", id="start-at-before-year-1"
        ),
        pytest.param({"end_at": "2029-01-01T00:00:00Z"}, "end_at", id="end-before-start"),
        pytest.param({"misfire": "sometimes"}, "misfire", id="bad-misfire"),
        pytest.param({"overlap": "maybe"}, "overlap", id="bad-overlap"),
        pytest.param({"dst_gap": "jump"}, "dst_gap", id="bad-dst-gap"),
        pytest.param({"dst_fold": "thrice"}, "dst_fold", id="bad-dst-fold"),
        pytest.param({"misfire_grace_seconds": -1}, "misfire_grace_seconds", id="negative-grace"),
        pytest.param({"max_catch_up": 0}, "max_catch_up", id="zero-catch-up"),
        pytest.param({"max_attempts": 0}, "max_attempts", id="zero-attempts"),
        pytest.param({"max_attempts": 2**40}, "max_attempts", id="attempts-beyond-int32"),
        pytest.param({"version": "2"}, "version", id="version-as-string"),
        pytest.param({"version": 0}, "version", id="version-zero"),
        pytest.param({"priority": 2**31}, "priority", id="priority-out-of-range"),
        pytest.param({"paused": "yes"}, "paused", id="paused-as-string"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
        pytest.param({"job": ""}, "job", id="empty-job"),
        pytest.param({"id": "a/b"}, "id", id="id-with-slash"),
        pytest.param({"id": "x" * 201}, "id", id="id-too-long"),
        pytest.param({"id": "   "}, "id", id="blank-id"),
        pytest.param({"id": "a\x00b"}, "id", id="id-with-nul"),
        pytest.param({"job": "re\x00port"}, "job", id="job-with-nul"),
    ],
)
def test_bad_add_is_a_problem_and_stores_nothing(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    assert_problem(client.post("/schedules", json={**DAILY, **body}), 422, "validation", field)
    assert store.schedules().items == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"every_seconds": 0}, "every_seconds", id="zero-interval"),
        pytest.param({"every_seconds": 1e-9}, "every_seconds", id="interval-below-a-microsecond"),
        pytest.param({"every_seconds": 1e20}, "every_seconds", id="interval-too-long"),
        pytest.param({"every_seconds": "60"}, "every_seconds", id="interval-as-string"),
        pytest.param({"every_seconds": 60, "timezone": "Europe/Paris"}, "timezone", id="zoned"),
    ],
)
def test_bad_interval_is_a_problem_and_stores_nothing(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    response = client.post("/schedules", json={"job": "poll", **body})
    assert_problem(response, 422, "validation", field)
    assert store.schedules().items == []


def test_missing_job_and_missing_body(client: TestClient, store: Store) -> None:
    assert_problem(client.post("/schedules", json={"cron": "* * * * *"}), 422, "validation", "job")
    assert_problem(client.post("/schedules"), 422, "validation", "body")
    assert store.schedules().items == []


def test_inputs_that_are_not_json_are_refused(client: TestClient, store: Store) -> None:
    response = client.post(
        "/schedules",
        content=b'{"job": "x", "cron": "* * * * *", "inputs": {"ratio": NaN}}',
        headers={"Content-Type": "application/json"},
    )
    assert_problem(response, 422, "validation", "inputs")
    assert store.schedules().items == []


def test_oversized_body_is_413(client: TestClient, store: Store) -> None:
    response = client.post("/schedules", json={**DAILY, "inputs": {"blob": "a" * 5000}})
    assert_problem(response, 413, "body-too-large", "body")
    assert store.schedules().items == []


def test_store_field_names_become_the_apis() -> None:
    for store_name, api_name in [
        ("every", "every_seconds"),
        ("job_version", "version"),
        ("misfire_grace", "misfire_grace_seconds"),
        ("cron", "cron"),
    ]:
        with pytest.raises(ValidationError) as caught, schedules._api_names():
            raise ValidationError(store_name, "is wrong")
        assert (caught.value.field, caught.value.message) == (api_name, "is wrong")


# -- reading ----------------------------------------------------------------------------


def test_get_one(client: TestClient, store: Store) -> None:
    created = _add(client, **DAILY, id="daily")
    response = client.get("/schedules/daily")
    assert response.status_code == 200, response.text
    assert response.json() == {k: v for k, v in created.items() if k != "warnings"}
    assert response.json()["next_fire_at"] == "2030-01-01T06:00:00Z"
    store.add_schedule(
        "old",
        cron="0 * * * *",
        start_at=datetime(2020, 1, 1, tzinfo=UTC),
        end_at=datetime(2020, 2, 1, tzinfo=UTC),
        id="ended",
    )
    ended = client.get("/schedules/ended").json()
    assert (ended["end_at"], ended["next_fire_at"]) == ("2020-02-01T00:00:00Z", None)


def test_next_fire_at_is_after_the_stores_now(client: TestClient, store: Store) -> None:
    store.add_schedule("tick", every=timedelta(hours=1), id="hourly")
    before = store.clock.now()
    fire = datetime.fromisoformat(client.get("/schedules/hourly").json()["next_fire_at"])
    after = store.clock.now()
    assert before < fire <= after + timedelta(hours=1)


def test_list_paginates_and_filters(client: TestClient, store: Store) -> None:
    for index in range(5):
        store.add_schedule(
            "a" if index % 2 else "b", cron="0 6 * * *", id=f"s{index}", paused=index == 4
        )
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get("/schedules", params=params).json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [s.id for s in store.schedules().items] == ["s0", "s1", "s2", "s3", "s4"]
    only_a = client.get("/schedules", params={"job": "a"}).json()
    assert [item["id"] for item in only_a["items"]] == ["s1", "s3"]
    paused = client.get("/schedules", params={"paused": "true"}).json()["items"]
    assert [(item["id"], item["paused"], item["next_fire_at"]) for item in paused] == [
        ("s4", True, None)
    ]
    active = client.get("/schedules", params={"paused": "false"}).json()["items"]
    assert [item["id"] for item in active] == ["s0", "s1", "s2", "s3"]
    assert all(item["next_fire_at"] is not None for item in active)


def test_list_with_bad_filters(client: TestClient) -> None:
    assert_problem(client.get("/schedules?limit=0"), 422, "validation", "limit")
    assert_problem(client.get("/schedules?limit=1001"), 422, "validation", "limit")
    assert_problem(client.get("/schedules?paused=perhaps"), 422, "validation", "paused")
    assert_problem(client.get("/schedules?job="), 422, "validation", "job")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("GET", "/preview"),
    ],
)
def test_unknown_id_is_404(client: TestClient, method: str, path: str) -> None:
    body = {"priority": 1} if method == "PATCH" else None
    response = client.request(method, f"/schedules/nope{path}", json=body)
    assert_problem(response, 404, "not-found")


# -- changing ---------------------------------------------------------------------------


def test_patch_changes_the_given_fields(client: TestClient, store: Store) -> None:
    created = _add(client, **DAILY, id="daily", end_at="2031-01-01T00:00:00Z")
    response = client.patch(
        "/schedules/daily",
        json={
            "cron": "0 9 * * *",
            "timezone": "Europe/Paris",
            "misfire": "skip",
            "priority": 4,
            "inputs": {"to": "ops"},
            "end_at": None,
        },
    )
    assert response.status_code == 200, response.text
    stored = store.get_schedule("daily")
    assert (stored.cron, stored.timezone, stored.misfire.value) == (
        "0 9 * * *",
        "Europe/Paris",
        "skip",
    )
    assert (stored.priority, stored.inputs, stored.end_at) == (4, {"to": "ops"}, None)
    assert stored.start_at == datetime(2030, 1, 1, tzinfo=UTC)  # not given: unchanged
    changed = response.json()
    assert (changed["cron"], changed["timezone"], changed["end_at"]) == (
        "0 9 * * *",
        "Europe/Paris",
        None,
    )
    assert changed["next_fire_at"] == "2030-01-01T08:00:00Z"  # 09:00 in Paris (CET)
    assert changed["created_at"] == created["created_at"]
    assert changed["updated_at"] == _z(stored.updated_at)
    assert client.get("/schedules/daily").json() == changed


def test_patch_one_rule_replaces_the_other(client: TestClient, store: Store) -> None:
    _add(client, **{**DAILY, "timezone": "Asia/Tokyo"}, id="daily")
    to_interval = client.patch("/schedules/daily", json={"every_seconds": 600})
    assert to_interval.status_code == 200, to_interval.text
    stored = store.get_schedule("daily")
    assert (stored.cron, stored.every, stored.timezone) == (None, timedelta(minutes=10), "UTC")
    assert (to_interval.json()["cron"], to_interval.json()["every_seconds"]) == (None, 600.0)
    to_cron = client.patch("/schedules/daily", json={"cron": "15 * * * *"})
    assert to_cron.status_code == 200, to_cron.text
    stored = store.get_schedule("daily")
    assert (stored.cron, stored.every) == ("15 * * * *", None)


def test_patch_version_and_paused(client: TestClient, store: Store) -> None:
    _add(client, **DAILY, id="daily", version=2)
    response = client.patch("/schedules/daily", json={"version": None, "paused": True})
    assert response.status_code == 200, response.text
    stored = store.get_schedule("daily")
    assert (stored.job_version, stored.paused) == (None, True)
    assert (response.json()["version"], response.json()["next_fire_at"]) == (None, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({}, "body", id="empty"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
        pytest.param({"id": "other"}, "id", id="id"),
        pytest.param({"cron": "0 0 * *"}, "cron", id="malformed-cron"),
        pytest.param({"timezone": "Mars/Olympus_Mons"}, "timezone", id="unknown-timezone"),
        pytest.param({"cron": "0 7 * * *", "every_seconds": 60}, "cron", id="both-rules"),
        pytest.param({"cron": None}, "cron", id="no-rule-left"),
        pytest.param({"end_at": "2031-01-01T00:00:00"}, "end_at", id="naive-end-at"),
        pytest.param({"end_at": "2029-01-01T00:00:00Z"}, "end_at", id="end-before-start"),
        pytest.param({"misfire": "sometimes"}, "misfire", id="bad-misfire"),
        pytest.param({"overlap": None}, "overlap", id="null-overlap"),
        pytest.param({"job": None}, "job", id="null-job"),
        pytest.param({"job": "re\x00port"}, "job", id="job-with-nul"),
        pytest.param({"every_seconds": -5}, "every_seconds", id="negative-interval"),
        pytest.param({"max_attempts": 0}, "max_attempts", id="zero-attempts"),
        pytest.param({"misfire_grace_seconds": None}, "misfire_grace_seconds", id="null-grace"),
    ],
)
def test_bad_patch_is_a_problem_and_changes_nothing(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    _add(client, **DAILY, id="daily")
    before = store.get_schedule("daily")
    assert_problem(client.patch("/schedules/daily", json=body), 422, "validation", field)
    assert store.get_schedule("daily") == before


def test_patch_timezone_of_an_interval_is_refused(client: TestClient, store: Store) -> None:
    _add(client, job="poll", every_seconds=60, id="poll")
    before = store.get_schedule("poll")
    response = client.patch("/schedules/poll", json={"timezone": "Europe/Paris"})
    assert_problem(response, 422, "validation", "timezone")
    assert store.get_schedule("poll") == before


def test_pause_and_resume(client: TestClient, store: Store) -> None:
    _add(client, **DAILY, id="daily")
    for _ in range(2):  # pausing a paused schedule returns it unchanged
        paused = client.post("/schedules/daily/pause")
        assert paused.status_code == 200, paused.text
        assert (paused.json()["paused"], paused.json()["next_fire_at"]) == (True, None)
        assert store.get_schedule("daily").paused is True
    resumed = client.post("/schedules/daily/resume")
    assert resumed.status_code == 200, resumed.text
    assert (resumed.json()["paused"], resumed.json()["next_fire_at"]) == (
        False,
        "2030-01-01T06:00:00Z",
    )
    assert store.get_schedule("daily").paused is False


def test_delete(client: TestClient, store: Store) -> None:
    _add(client, **DAILY, id="daily")
    _add(client, **DAILY, id="kept")
    response = client.delete("/schedules/daily")
    assert response.status_code == 204, response.text
    assert response.content == b""
    with pytest.raises(NotFound):
        store.get_schedule("daily")
    assert [s.id for s in store.schedules().items] == ["kept"]
    assert_problem(client.delete("/schedules/daily"), 404, "not-found")


# -- preview ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dst_gap", "expected"),
    [
        # 02:30 on 2026-03-08 does not exist in New York (02:00 EST -> 03:00 EDT).
        pytest.param(
            "shift",
            ["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
            id="shift-to-the-end-of-the-gap",
        ),
        pytest.param(
            "skip",
            ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"],
            id="skip-the-gap",
        ),
    ],
)
def test_preview_across_spring_forward(
    client: TestClient, store: Store, dst_gap: str, expected: list[str]
) -> None:
    _add(
        client,
        job="report",
        cron="30 2 * * *",
        timezone="America/New_York",
        dst_gap=dst_gap,
        id="d",
    )
    after = "2026-03-06T12:00:00Z"
    response = client.get("/schedules/d/preview", params={"count": 3, "after": after})
    assert response.status_code == 200, response.text
    assert response.json() == {"fire_times": expected}
    handle = ScheduleHandle(store, store.get_schedule("d"))
    from_handle = handle.preview(3, after=datetime.fromisoformat(after))
    assert response.json()["fire_times"] == [_z(t) for t in from_handle]


def test_preview_defaults_to_ten_after_now(client: TestClient, store: Store) -> None:
    _add(client, job="poll", every_seconds=3600, start_at="2030-01-01T00:00:00Z", id="hourly")
    response = client.get("/schedules/hourly/preview")
    assert response.status_code == 200, response.text
    assert response.json()["fire_times"] == [f"2030-01-01T{h:02}:00:00Z" for h in range(10)]
    many = client.get("/schedules/hourly/preview", params={"count": 1000}).json()["fire_times"]
    assert (len(many), many[-1]) == (1000, "2030-02-11T15:00:00Z")


def test_preview_of_a_bounded_schedule_stops_at_its_end(client: TestClient) -> None:
    _add(client, **DAILY, end_at="2030-01-03T06:00:00Z", id="short")
    fires = client.get("/schedules/short/preview", params={"count": 5}).json()["fire_times"]
    assert fires == ["2030-01-01T06:00:00Z", "2030-01-02T06:00:00Z", "2030-01-03T06:00:00Z"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"count": 0}, "count", id="count-zero"),
        pytest.param({"count": 1001}, "count", id="count-too-large"),
        pytest.param({"count": "ten"}, "count", id="count-not-a-number"),
        pytest.param({"after": "2026-03-06T12:00:00"}, "after", id="naive-after"),
        pytest.param({"after": "1772798400"}, "after", id="after-as-number"),
        pytest.param({"after": "yesterday"}, "after", id="after-not-a-time"),
    ],
)
def test_bad_preview_is_a_problem(
    client: TestClient, store: Store, params: dict[str, Any], field: str
) -> None:
    _add(client, **DAILY, id="daily")
    before = store.get_schedule("daily")
    response = client.get("/schedules/daily/preview", params=params)
    assert_problem(response, 422, "validation", field)
    assert store.get_schedule("daily") == before


# -- with a job registry ----------------------------------------------------------------


@pytest.fixture
def registered(store: Store) -> Iterator[TestClient]:
    """A client of an app that knows ``report`` (versions 1 and 2) and nothing else."""
    app = fencepost.App(store)

    @app.job("report", version=1)
    def report_v1(day: str) -> None:
        """Version 1."""

    @app.job("report", version=2, max_attempts=7)
    def report_v2(day: str, verbose: bool = False) -> None:
        """Version 2."""

    with TestClient(create_app(store, registry=app.registry)) as c:
        yield c


def test_registry_pins_the_latest_version_and_the_jobs_attempts(
    registered: TestClient, store: Store
) -> None:
    created = _add(registered, **DAILY, inputs={"day": "mon"})
    stored = store.get_schedule(created["id"])
    assert (stored.job_version, stored.max_attempts, stored.inputs) == (2, 7, {"day": "mon"})
    assert (created["version"], created["max_attempts"]) == (2, 7)
    older = _add(registered, **DAILY, version=1, inputs={"day": "tue"}, max_attempts=2)
    assert (older["version"], older["max_attempts"]) == (1, 2)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"version": 9}, "version", id="unknown-version"),
        pytest.param({"inputs": {"day": 5}}, "inputs.day", id="input-of-wrong-type"),
        pytest.param({"inputs": {}}, "inputs.day", id="missing-input"),
        pytest.param({"inputs": {"day": "mon", "x": 1}}, "inputs.x", id="unknown-input"),
    ],
)
def test_registry_refuses_bad_jobs_and_inputs(
    registered: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    response = registered.post("/schedules", json={**DAILY, "inputs": {"day": "mon"}, **body})
    assert_problem(response, 422, "validation", field)
    assert store.schedules().items == []


def test_a_job_nobody_published_is_accepted_unpinned_as_on_every_path(
    registered: TestClient, store: Store
) -> None:
    created = _add(registered, **(DAILY | {"job": "unknown"}), inputs={"any": 1})
    stored = store.get_schedule(created["id"])
    assert (stored.job, stored.job_version, stored.max_attempts) == ("unknown", None, 3)
    store.publish_jobs([job_entry("unknown", 1, defaults=JobDefaults(max_attempts=6))])
    assert store.get_schedule(created["id"]).max_attempts == 6  # the job's, once published


def test_registry_checks_patched_jobs_and_inputs(registered: TestClient, store: Store) -> None:
    _add(registered, **DAILY, version=1, inputs={"day": "mon"}, id="daily")
    before = store.get_schedule("daily")
    for body, field in [
        ({"inputs": {"day": 5}}, "inputs.day"),
        ({"version": 9}, "version"),
        ({"inputs": {"day": "mon", "verbose": True}}, "inputs.verbose"),  # not in version 1
    ]:
        response = registered.patch("/schedules/daily", json=body)
        assert_problem(response, 422, "validation", field)
        assert store.get_schedule("daily") == before
    upgraded = registered.patch(
        "/schedules/daily", json={"version": 2, "inputs": {"day": "mon", "verbose": True}}
    )
    assert upgraded.status_code == 200, upgraded.text
    stored = store.get_schedule("daily")
    assert (stored.job_version, stored.inputs) == (2, {"day": "mon", "verbose": True})


# -- auth -------------------------------------------------------------------------------

READER = "reader-token-0123456789"
ADMIN = "admin-token-0123456789"


@pytest.fixture
def guarded_client(store: Store) -> Iterator[TestClient]:
    auth = Auth(
        {
            READER: Principal(name="reader", scopes=frozenset({Scope.READ})),
            ADMIN: Principal(name="admin", scopes=frozenset({Scope.ADMIN})),
        }
    )
    with TestClient(create_app(store, auth=auth)) as c:
        yield c


def test_read_token_reads_but_cannot_change(guarded_client: TestClient, store: Store) -> None:
    reader = {"Authorization": f"Bearer {READER}"}
    admin = {"Authorization": f"Bearer {ADMIN}"}
    store.add_schedule("report", cron="0 6 * * *", id="daily")
    before = store.get_schedule("daily")
    for path in ("/schedules", "/schedules/daily", "/schedules/daily/preview"):
        assert guarded_client.get(path, headers=reader).status_code == 200, path
    refused = [
        guarded_client.post("/schedules", json=DAILY, headers=reader),
        guarded_client.patch("/schedules/daily", json={"priority": 1}, headers=reader),
        guarded_client.delete("/schedules/daily", headers=reader),
        guarded_client.post("/schedules/daily/pause", headers=reader),
        guarded_client.post("/schedules/daily/resume", headers=reader),
    ]
    for response in refused:
        assert_problem(response, 403, "forbidden")
    assert [s.id for s in store.schedules().items] == ["daily"]
    assert store.get_schedule("daily") == before
    assert guarded_client.post("/schedules", json=DAILY, headers=admin).status_code == 201


def test_no_token_is_401(guarded_client: TestClient, store: Store) -> None:
    store.add_schedule("report", cron="0 6 * * *", id="daily")
    assert_problem(guarded_client.get("/schedules"), 401, "unauthorized")
    assert_problem(guarded_client.get("/schedules/daily"), 401, "unauthorized")
    assert_problem(guarded_client.post("/schedules", json=DAILY), 401, "unauthorized")
    assert [s.id for s in store.schedules().items] == ["daily"]


# -- the schema -------------------------------------------------------------------------


def test_openapi_declares_the_schedule_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    post = paths["/schedules"]["post"]
    assert {"200", "201", "409", "413", "422", "401", "403"} <= set(post["responses"])
    assert set(post["responses"]["409"]["content"]) == {"application/problem+json"}
    assert set(paths["/schedules/{schedule_id}"]) == {"get", "patch", "delete"}
    assert "204" in paths["/schedules/{schedule_id}"]["delete"]["responses"]
    for path in ("pause", "resume"):
        assert "post" in paths[f"/schedules/{{schedule_id}}/{path}"]
    preview = paths["/schedules/{schedule_id}/preview"]["get"]
    assert {p["name"] for p in preview["parameters"]} == {"schedule_id", "count", "after"}
