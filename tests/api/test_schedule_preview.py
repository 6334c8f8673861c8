"""``POST /schedules/preview``: the fire times of a rule stored nowhere (an unsaved edit).

Over every backend (the route reads only the store's clock): the answer must be what
the same rule stored as a schedule previews (``GET /schedules/{id}/preview``, which
:class:`~fencepost.scheduler.handle.ScheduleHandle` answers), and a hostile body a
422 naming its field, never a 500.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.scheduler.handle import ScheduleHandle
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem
from tests.hostile import EDGE_FLOATS, FIXED_STRINGS, UNSTORABLE_CHARS, deep_dict

AFTER = "2026-03-06T12:00:00Z"


def preview(client: TestClient, **body: Any) -> list[str]:
    response = client.post("/schedules/preview", json=body)
    assert response.status_code == 200, response.text
    fires: list[str] = response.json()["fire_times"]
    return fires


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
def test_a_rule_previews_as_the_same_stored_schedule_does(
    client: TestClient, store: Store, dst_gap: str, expected: list[str]
) -> None:
    rule = {"cron": "30 2 * * *", "timezone": "America/New_York", "dst_gap": dst_gap}
    assert preview(client, **rule, after=AFTER, count=3) == expected
    stored = client.post("/schedules", json={"job": "report", "id": "d", **rule})
    assert stored.status_code == 201, stored.text
    assert client.get("/schedules/d/preview", params={"count": 3, "after": AFTER}).json() == {
        "fire_times": expected
    }
    handle = ScheduleHandle(store, store.get_schedule("d"))
    assert [t.isoformat() for t in handle.preview(3, after=datetime.fromisoformat(AFTER))] == [
        datetime.fromisoformat(t).isoformat() for t in expected
    ]
    # Nothing was stored by the previews: only the schedule added above.
    assert [s.id for s in store.schedules().items] == ["d"]


def test_an_interval_keeps_its_anchor_and_bounds(client: TestClient, store: Store) -> None:
    stored = client.post(
        "/schedules",
        json={"job": "poll", "every_seconds": 5400, "id": "p", "end_at": "2030-01-01T06:00:00Z"},
    ).json()
    after = "2030-01-01T00:00:00Z"
    # A stored interval schedule is anchored at its creation: the page sends that.
    rule = {"every_seconds": 5400, "end_at": "2030-01-01T06:00:00Z", "after": after}
    fires = preview(client, **rule, anchor=stored["created_at"], count=10)
    assert fires == client.get("/schedules/p/preview", params={"after": after}).json()["fire_times"]
    assert 1 <= len(fires) <= 4  # 6 h of 90 min slots, ending at end_at
    # Without an anchor: start_at, else the Unix epoch (every 90 min from 00:00 UTC).
    assert preview(client, every_seconds=5400, after=after, count=2) == [
        "2030-01-01T01:30:00Z",
        "2030-01-01T03:00:00Z",
    ]
    start = {"start_at": "2030-01-01T00:10:00Z"}
    assert preview(client, every_seconds=5400, after=after, count=2, **start) == [
        "2030-01-01T00:10:00Z",
        "2030-01-01T01:40:00Z",
    ]


@pytest.mark.manual_clock
def test_without_after_it_starts_at_the_stores_now(client: TestClient, clock: ManualClock) -> None:
    clock.set(datetime(2030, 6, 1, 5, 59, tzinfo=UTC))
    assert preview(client, cron="0 6 * * *", timezone="Europe/Paris") == [
        f"2030-06-{day:02}T04:00:00Z" for day in range(2, 12)
    ]
    clock.advance(timedelta(hours=12))
    assert preview(client, cron="0 * * * *", count=1) == ["2030-06-01T18:00:00Z"]


def test_count_is_at_most_a_thousand(client: TestClient) -> None:
    fires = preview(client, cron="* * * * *", after=AFTER, count=1000)
    assert (len(fires), fires[-1]) == (1000, "2026-03-07T04:40:00Z")
    # A rule that stops firing gives fewer.
    assert preview(client, cron="0 0 29 2 *", after="9990-01-01T00:00:00Z", count=1000) == [
        f"{year}-02-29T00:00:00Z" for year in (9992, 9996)
    ]


def _hostile_strings() -> list[Any]:
    texts = [t for t in FIXED_STRINGS if t.strip()]
    texts += ["%", "_", "%_%", "x" * 3000, "* * * * * * *", "61 * * * *", "0 3 * * * \x00"]
    return texts + [f"0 3 * * *{c}" for c in UNSTORABLE_CHARS]


#: Bodies and the field each must be refused for: hostile text in the rule and the
#: zone, numbers past every edge, wrong types, nesting, and rules that cannot be.
HOSTILE_BODIES: list[tuple[dict[str, Any], str]] = [
    *(({"cron": text}, "cron") for text in _hostile_strings()),
    *(
        ({"cron": "0 3 * * *", "timezone": text}, "timezone")
        for text in [*_hostile_strings(), "", "localtime", "America", "../UTC"]
    ),
    *(
        ({"every_seconds": n}, "every_seconds")
        for n in [
            0,
            -1,
            -1e-7,
            1e-7,
            2**63,
            -(2**63) - 1,
            2**64,
            10**100,
            1e308,
            -1e308,
            "60",
            True,
        ]
    ),
    *(
        ({"cron": "0 3 * * *", "count": n}, "count")
        for n in [0, -1, 1001, 2**63, 10**100, 1.5, "10", True, None, *EDGE_FLOATS[:4]]
    ),
    *(
        ({"cron": "0 3 * * *", "after": text}, "after")
        for text in [
            "2026-03-06T12:00:00",  # naive
            "1772798400",
            1772798400,
            "",
            "\x00",
            "0000-01-01T00:00:00Z",
            "10000-01-01T00:00:00Z",
        ]
    ),
    ({"cron": ["0 3 * * *"]}, "cron"),
    ({"cron": deep_dict(80)}, "cron"),
    ({"cron": "0 3 * * *", "every_seconds": 60}, "cron"),  # both rules
    ({}, "cron"),  # no rule
    ({"every_seconds": 60, "timezone": "Europe/Paris"}, "timezone"),
    ({"cron": "0 3 * * *", "dst_gap": "jump"}, "dst_gap"),
    ({"cron": "0 3 * * *", "misfire": "skip"}, "misfire"),  # not a rule field
    (
        {"cron": "0 3 * * *", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"},
        "end_at",
    ),
    ({"cron": "0 3 * * *", "anchor": "yesterday"}, "anchor"),
]


def test_a_hostile_rule_is_a_422_naming_its_field(client: TestClient, store: Store) -> None:
    for body, field in HOSTILE_BODIES:
        # Sent as text: a lone surrogate is valid JSON (an escape) but not UTF-8.
        text = json.dumps(body)
        response = client.post(
            "/schedules/preview", content=text, headers={"Content-Type": "application/json"}
        )
        assert_problem(response, 422, "validation", field)
    for value in ("NaN", "Infinity", "-Infinity"):
        response = client.post(
            "/schedules/preview",
            content=f'{{"every_seconds": {value}}}',
            headers={"Content-Type": "application/json"},
        )
        assert_problem(response, 422, "validation", "every_seconds")
    for text in ["[]", "null", '"0 3 * * *"', "{", "\x00"]:
        response = client.post(
            "/schedules/preview", content=text, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, (text, response.text)
    assert store.schedules().items == []


READER = "preview-reader-token-0123456789"


def test_a_read_token_previews_and_nobody_else(store: Store) -> None:
    auth = Auth({READER: Principal(name="reader", scopes=frozenset({Scope.READ}))})
    with TestClient(create_app(store, auth=auth)) as client:
        body = {"cron": "0 3 * * *", "after": AFTER, "count": 1}
        headers = {"Authorization": f"Bearer {READER}"}
        response = client.post("/schedules/preview", json=body, headers=headers)
        assert response.json() == {"fire_times": ["2026-03-07T03:00:00Z"]}
        assert_problem(client.post("/schedules/preview", json=body), 401, "unauthorized")


def test_openapi_declares_the_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    route = paths["/schedules/preview"]["post"]
    assert {"200", "401", "403", "413", "422"} <= set(route["responses"])
    schema = client.get("/openapi.json").json()["components"]["schemas"]["RulePreview"]
    names = {name for variant in schema["oneOf"] for name in variant["properties"]}
    assert {"cron", "every_seconds", "timezone", "anchor", "after", "count"} <= names


@pytest.mark.parametrize(
    ("name", "policy"),
    [("MISFIRE", Misfire), ("OVERLAP", Overlap), ("DST_GAP", DstGap), ("DST_FOLD", DstFold)],
)
def test_the_console_editor_offers_every_policy_and_no_other(name: str, policy: Any) -> None:
    # The page lists the choices itself (no request for them): they must be the service's.
    script = resources.files("fencepost.api").joinpath("static/js/views/schedules.js").read_text()
    found = re.search(rf"export const {name} = \[(.*?)\];", script)
    assert found is not None, name
    assert sorted(re.findall(r'"(\w+)"', found[1])) == sorted(p.value for p in policy)
