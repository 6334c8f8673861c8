"""Property-based fuzzing of every operation in the service's own OpenAPI spec.

Schemathesis reads ``/openapi.json`` from the app in-process and sends generated
requests, valid and invalid, to each operation. Every answer must be a non-5xx
that the spec documents: its status code, content type, headers and body schema.
The app comes from :func:`create_app`, so routes that other modules add later are
fuzzed without changing this file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import fencepost
from fencepost.api import create_app
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem, running

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]

#: A fixed seed and no example database: every run sends the same requests.
CONFIG = schemathesis.Config.from_dict(
    {"seed": 6, "generation": {"deterministic": True, "database": "none"}}
)

PROBLEM_JSON = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def build_app(store: Store) -> FastAPI:
    """The app under test, auth off; its spec holds every route any module registers."""
    return create_app(store)


def load_schema() -> schemathesis.BaseSchema:
    """The app's spec, read at collection so that each operation is its own test.

    The spec does not depend on the store; requests go to the ``app`` fixture's app.
    """
    store = fencepost.connect("memory://")
    try:
        return schemathesis.openapi.from_asgi("/openapi.json", build_app(store), config=CONFIG)
    finally:
        store.close()


schema = load_schema()

#: Ids of the executions :func:`seed` stored, filled in by the ``app`` fixture.
SEEDED: list[str] = []


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
    """Now and then name an execution that exists: a random id only ever finds a 404."""
    if path_parameters is None or "execution_id" not in path_parameters:
        return st.just(path_parameters)
    known = st.deferred(lambda: st.sampled_from(SEEDED))
    return st.one_of(
        st.just(path_parameters), known.map(lambda i: {**path_parameters, "execution_id": i})
    )


def seed(store: Store) -> list[str]:
    """Executions in the states the operator routes act on: scheduled, running, failed."""
    scheduled = store.submit("fuzz", inputs={"n": 1}, idempotency_key="fuzz-1")
    started = running(store, "fuzz-running")
    failed = store.submit("fuzz-failed", max_attempts=1)
    [lease] = store.claim("worker-1", jobs=["fuzz-failed"])
    store.fail(lease, error="boom")
    return [scheduled.id, started, failed.id]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    """An app over a seeded SQLite store in a temporary file."""
    store = fencepost.connect(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}")
    try:
        SEEDED[:] = seed(store)
        yield build_app(store)
    finally:
        SEEDED.clear()
        store.close()


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: schemathesis.Case, app: FastAPI) -> None:
    case.call_and_validate(checks=CHECKS, app=app)


# -- the spec itself --------------------------------------------------------------------


@pytest.fixture
def bare_app() -> Iterator[FastAPI]:
    """An app over an empty memory store, to read its spec."""
    store = fencepost.connect("memory://")
    try:
        yield build_app(store)
    finally:
        store.close()


def test_every_error_response_is_declared_as_a_problem(bare_app: FastAPI) -> None:
    spec = bare_app.openapi()
    declared = {
        (method.upper(), path, status): response.get("content")
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if int(status) >= 400
    }
    assert declared
    assert {key: content for key, content in declared.items() if content != PROBLEM_JSON} == {}
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_a_route_that_does_not_declare_422_still_documents_a_problem(bare_app: FastAPI) -> None:
    app = bare_app

    @app.get("/probe")
    def probe(n: int) -> int:
        return n

    spec = app.openapi()
    assert spec["paths"]["/probe"]["get"]["responses"]["422"]["content"] == PROBLEM_JSON
    assert "Problem" in spec["components"]["schemas"]
    assert not {"HTTPValidationError", "ValidationError"} & set(spec["components"]["schemas"])
    with TestClient(app) as client:
        assert_problem(client.get("/probe", params={"n": "x"}), 422, "validation", "n")


# -- what fuzzing found, pinned -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(b"\x80 not utf-8", "body", id="body-not-utf8"),
        pytest.param(b'{"job": "a\\ud800"}', "job", id="job-lone-surrogate"),
        pytest.param(b'{"job": "a\\u0000"}', "job", id="job-nul"),
        pytest.param(b'{"job": "a", "bucket_key": "\\udfff"}', "bucket_key", id="bucket-key"),
        pytest.param(b'{"job": "a", "inputs": {"\\ud800": 1}}', "inputs", id="inputs-key"),
        pytest.param(b'{"job": "a", "inputs": ["\\ud800"]}', "inputs", id="inputs-value"),
        pytest.param(b'{"job": "a", "version": 2147483648}', "version", id="version-int32"),
        pytest.param(
            b'{"job": "a", "max_attempts": 9223372036854775808}',
            "max_attempts",
            id="attempts-int64",
        ),
        pytest.param(b'{"job": "a", "priority": 2147483648}', "priority", id="priority-int32"),
        pytest.param(b'{"job": "a", "delay_seconds": 1e12}', "delay_seconds", id="delay-huge"),
        pytest.param(
            b'{"job": "a", "execute_at": "0001-01-01T00:00:00+01:00"}', "execute_at", id="year-0"
        ),
        pytest.param(
            b'{"job": "a", "execute_at": "9999-12-31T23:00:00-05:00"}',
            "execute_at",
            id="year-10000",
        ),
    ],
)
def test_submit_refuses_what_no_store_can_hold(
    client: TestClient, store: Store, body: bytes, field: str
) -> None:
    response = client.post(
        "/executions", content=body, headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 422, "validation", field)
    assert store.query().items == []


def test_a_bucket_past_any_store_column_is_refused(client: TestClient) -> None:
    response = client.get("/executions", params={"bucket": 2**63})
    assert_problem(response, 422, "validation", "bucket")


def test_framework_errors_are_problems(client: TestClient) -> None:
    assert_problem(client.get("/no-such-route"), 404, "not-found")
    refused = client.put("/executions")
    assert_problem(refused, 405, "method-not-allowed")
    assert "POST" in refused.headers["allow"]
