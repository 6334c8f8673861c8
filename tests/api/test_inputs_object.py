"""Inputs are a JSON object on every path above the store: HTTP, the Python client, the App.

A handler takes its inputs as keywords, so a list, a string, a number or a boolean
could only fail at run time: every path refuses them naming ``inputs`` (or the
batch item's ``items.3.inputs``) and stores nothing; None (``null``) is ``{}``, and
an object is stored as given. On every backend (the ``store`` fixture). The store's
own refusal is in the contract suite (``SubmittingContract``, ``SchedulesContract``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fencepost
from fencepost.client import Client
from fencepost.domain.errors import ValidationError
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem

#: JSON that is not an object, with the name the HTTP API gives its type.
NOT_OBJECTS = [
    pytest.param([1, 2], "array", id="list"),
    pytest.param([], "array", id="empty-list"),
    pytest.param("not-an-object", "string", id="string"),
    pytest.param("", "string", id="empty-string"),
    pytest.param(-7, "number", id="int"),
    pytest.param(1.5, "number", id="float"),
    pytest.param(10**30, "number", id="huge-int"),
    pytest.param(True, "boolean", id="true"),
    pytest.param(False, "boolean", id="false"),
]
NESTED = {"a": {"b": [1, {"c": None}], "d": ""}, "é": 2.5, "deep": {"x": {"y": {"z": []}}}}
#: Inputs sent, and the inputs stored: null is {}.
OBJECTS = [
    pytest.param(None, {}, id="null"),
    pytest.param({}, {}, id="empty"),
    pytest.param(NESTED, NESTED, id="nested"),
]
MESSAGE = "must be a JSON object (a mapping of input names to values), got"


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


@pytest.fixture
def app(store: Store) -> fencepost.App:
    """An App on the store, with a job that takes any keyword inputs."""
    app = fencepost.App(store)

    @app.job("any")
    def anything(**inputs: Any) -> None: ...

    return app


def nothing_stored(store: Store) -> bool:
    return store.query().items == [] and store.schedules().items == []


# -- HTTP -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("inputs", "kind"), NOT_OBJECTS)
def test_http_refuses_inputs_that_are_not_an_object(
    client: TestClient, store: Store, inputs: Any, kind: str
) -> None:
    kept = client.post("/schedules", json={"job": "j", "every_seconds": 60, "id": "kept"})
    assert kept.status_code == 201, kept.text
    requests = [
        ("POST", "/executions", {"job": "j", "inputs": inputs}, "inputs"),
        (
            "POST",
            "/executions/batch",
            {"items": [{"job": "j"}] * 3 + [{"job": "j", "inputs": inputs}]},
            "items.3.inputs",
        ),
        ("POST", "/schedules", {"job": "j", "every_seconds": 60, "inputs": inputs}, "inputs"),
        ("PATCH", "/schedules/kept", {"inputs": inputs, "priority": 3}, "inputs"),
    ]
    for method, path, body, field in requests:
        response = client.request(method, path, json=body)
        assert_problem(response, 422, "validation", field=field)
        assert f"{MESSAGE} {kind}" in response.json()["detail"], response.text
    assert store.query().items == []
    assert [s.id for s in store.schedules().items] == ["kept"]
    added = {k: v for k, v in kept.json().items() if k != "warnings"}  # only POST warns
    assert client.get("/schedules/kept").json() == added, "a refused PATCH changed it"


@pytest.mark.parametrize(("inputs", "stored"), OBJECTS)
def test_http_stores_an_object_or_null_as_an_object(
    client: TestClient, store: Store, inputs: Any, stored: Any
) -> None:
    one = client.post("/executions", json={"job": "j", "inputs": inputs})
    assert one.status_code == 201, one.text
    batch = client.post("/executions/batch", json={"items": [{"job": "j", "inputs": inputs}]})
    assert batch.status_code == 201, batch.text
    added = client.post("/schedules", json={"job": "j", "every_seconds": 60, "inputs": inputs})
    assert added.status_code == 201, added.text
    other = client.post("/schedules", json={"job": "k", "every_seconds": 60, "inputs": {"o": 1}})
    patched = client.patch(f"/schedules/{other.json()['id']}", json={"inputs": inputs})
    assert patched.status_code == 200, patched.text

    ids = [one.json()["id"], batch.json()["items"][0]["id"]]
    for answer in (one.json(), batch.json()["items"][0], added.json(), patched.json()):
        assert answer["inputs"] == stored
    assert [store.get(i).inputs for i in ids] == [stored, stored]
    assert [client.get(f"/executions/{i}").json()["inputs"] for i in ids] == [stored, stored]
    assert [s.inputs for s in store.schedules().items] == [stored, stored]
    leases = client.post("/claims", json={"owner": "w", "limit": 10}).json()["leases"]
    assert {lease["execution_id"]: lease["inputs"] for lease in leases} == dict.fromkeys(
        ids, stored
    )


def test_the_spec_says_inputs_are_an_object(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model in ("SubmitRequest", "SubmitItem", "ScheduleUpdate"):
        inputs = schemas[model]["properties"]["inputs"]
        assert sorted(option["type"] for option in inputs["anyOf"]) == ["null", "object"], model
    for rule in schemas["ScheduleCreate"]["oneOf"]:
        inputs = rule["properties"]["inputs"]
        assert sorted(option["type"] for option in inputs["anyOf"]) == ["null", "object"]
    # A result and progress may still be any JSON.
    assert schemas["CompleteRequest"]["properties"]["result"] == {
        "$ref": "#/components/schemas/JsonPayload",
        "title": "Result",
    }


# -- the Python client and the App ----------------------------------------------------------


def python_calls(remote: Client, app: fencepost.App) -> list[tuple[str, Callable[[Any], Any], str]]:
    """Every Python verb that takes inputs above the store, and the field a refusal names."""
    remote.add_schedule("j", every=60, id="kept")
    return [
        ("Client.submit", lambda v: remote.submit("j", v), "inputs"),
        (
            "Client.submit_many",
            lambda v: remote.submit_many([{"job": "j"}] * 3 + [{"job": "j", "inputs": v}]),
            "items.3.inputs",
        ),
        ("Client.add_schedule", lambda v: remote.add_schedule("j", every=60, inputs=v), "inputs"),
        ("Client.update_schedule", lambda v: remote.update_schedule("kept", inputs=v), "inputs"),
        ("App.submit", lambda v: app.submit("any", v), "inputs"),
        ("App.schedule", lambda v: app.schedule("any", every=60, inputs=v), "inputs"),
    ]


@pytest.mark.parametrize("inputs", [p.values[0] for p in NOT_OBJECTS], ids=repr)
def test_client_and_app_refuse_inputs_that_are_not_an_object(
    store: Store, remote: Client, app: fencepost.App, inputs: Any
) -> None:
    calls = python_calls(remote, app)
    kept = store.get_schedule("kept")
    for verb, call, field in calls:
        with pytest.raises(ValidationError) as caught:
            call(inputs)
        assert caught.value.field == field, verb
        assert MESSAGE in str(caught.value), (verb, str(caught.value))
    assert store.query().items == []
    assert store.schedules().items == [kept]


@pytest.mark.parametrize(("inputs", "stored"), OBJECTS)
def test_client_and_app_store_an_object_or_null_as_an_object(
    store: Store, remote: Client, app: fencepost.App, inputs: Any, stored: Any
) -> None:
    calls = {verb: call for verb, call, _ in python_calls(remote, app)}
    submitted = [
        calls["Client.submit"](inputs),
        calls["Client.submit_many"](inputs)[3],  # after three items without inputs
        calls["App.submit"](inputs),
    ]
    scheduled = [
        calls["Client.add_schedule"](inputs),
        calls["Client.update_schedule"](inputs),
        calls["App.schedule"](inputs).schedule,
    ]
    for execution in submitted:
        assert execution.inputs == store.get(execution.id).inputs == stored
    for schedule in scheduled:
        assert schedule.inputs == store.get_schedule(schedule.id).inputs == stored
    assert [e.inputs for e in store.query(limit=10).items] == [stored, {}, {}, {}, stored, stored]
