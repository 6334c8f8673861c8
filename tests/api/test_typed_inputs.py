"""A service started with typed jobs refuses inputs their hints cannot convert, naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pydantic
import pytest

import fencepost
from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.errors import ValidationError
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem


class ReportSpec(pydantic.BaseModel):
    title: str
    pages: int = 1


@pytest.fixture
def typed_client(store: Store) -> Iterator[TestClient]:
    app = fencepost.App(store)

    @app.job("when")
    def when(at: datetime, report: ReportSpec | None = None) -> None:
        """A job whose hints convert its inputs."""

    with TestClient(create_app(store, registry=app.registry)) as http:
        yield http


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        ({"at": "not a date"}, "inputs.at"),
        (
            {"at": "2026-11-28T02:00:00Z", "report": {"title": "t", "pages": "x"}},
            "inputs.report.pages",
        ),
        ({"at": 10**30}, "inputs.at"),
        ({"at": "2026-11-28T02:00:00Z", "colour": "red"}, "inputs.colour"),
    ],
    ids=["not-a-date", "nested-model-field", "huge-timestamp", "unknown"],
)
def test_inputs_that_do_not_convert_are_422_naming_the_field(
    typed_client: TestClient, store: Store, inputs: dict[str, Any], field: str
) -> None:
    response = typed_client.post("/executions", json={"job": "when", "inputs": inputs})
    assert_problem(response, 422, "validation", field)
    with (
        Client("http://testserver", http=typed_client) as remote,
        pytest.raises(ValidationError) as caught,
    ):
        remote.submit("when", inputs)
    assert caught.value.field == field
    assert store.query().items == []


@pytest.mark.parametrize("title", ["\\ud800", "a\\u0000b"], ids=["lone-surrogate", "nul"])
def test_unstorable_strings_inside_a_model_are_422_not_500(
    typed_client: TestClient, store: Store, title: str
) -> None:
    body = (
        '{"job": "when", "inputs": {"at": "2026-11-28T02:00:00Z", "report": {"title": "'
        + title
        + '"}}}'
    )
    response = typed_client.post(
        "/executions", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"].startswith("inputs")
    assert store.query().items == []


def test_converting_inputs_are_stored_as_submitted(typed_client: TestClient, store: Store) -> None:
    inputs = {"at": "2026-11-28T02:00:00+01:00", "report": {"title": "t"}}
    response = typed_client.post("/executions", json={"job": "when", "inputs": inputs})
    assert response.status_code == 201, response.text
    assert store.get(response.json()["id"]).inputs == inputs
