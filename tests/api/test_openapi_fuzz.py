"""Property-based fuzzing of every operation in the service's own OpenAPI spec.

Schemathesis reads ``/openapi.json`` from the app in-process and sends generated
requests, valid and invalid, to each operation. Every answer must be a non-5xx
that the spec documents: its status code, content type, headers and body schema.
The app comes from :func:`create_app`, so routes that other modules add later are
fuzzed without changing this file.

:func:`test_the_api_passes_every_check_with_auth_on` is ``st run --checks all`` run
in-process through schemathesis's engine, with a token, on SQLite and PostgreSQL:
every phase, every check, a fixed seed and one worker, so that CI sees the same run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import jsonschema
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.engine import events, from_schema
from schemathesis.specs.openapi.checks import (
    RejectedPositiveData,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.states import CommandKind
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem, running

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]

#: A fixed seed and no example database: every run sends the same requests. In process a
#: request is slow only when the machine is (one SQLite commit behind a busy disk took
#: 10 s in a CI run, schemathesis's default read timeout): conformance is checked here,
#: latency by the benchmarks. The coverage phase is left to the all-checks run, which
#: sends its cases on both databases with every check: the pytest plugin would enumerate
#: them when the tests are collected, in each test process (half of the whole suite's
#: collection time), only to send them again with fewer checks.
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 6,
        "request-timeout": 60,
        "generation": {"deterministic": True, "database": "none"},
        "phases": {"coverage": {"enabled": False}},
    }
)

#: Test cases per operation and phase in the all-checks run, per backend.
ALL_CHECKS_EXAMPLES = 10
#: The apps' bound on a long-poll (GET /executions/{id}?wait=), in the spec as ``wait``'s
#: maximum: a generated wait runs out on an unfinished execution, so keep it short.
MAX_WAIT = 0.05

PROBLEM_JSON = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def build_app(store: Store) -> FastAPI:
    """The app under test, auth off; its spec holds every route any module registers."""
    return create_app(store, max_wait=MAX_WAIT)


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


# -- every check, auth on, on each database ---------------------------------------------

#: The one token the app knows; the run sends it on every request.
ADMIN_TOKEN = "fuzz-admin-token-0123456789"


def _cron_field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        number.map(str),
        st.integers(1, high).map(lambda step: f"*/{step}"),
        st.tuples(number, number).map(lambda pair: f"{min(pair)}-{max(pair)}"),
    )


#: Cron expressions that fire (days of the month up to 28 exist in every month), with
#: or without a leading seconds field: what ``format: cron`` promises.
CRON = st.builds(
    " ".join,
    st.tuples(
        _cron_field(0, 59),
        _cron_field(0, 23),
        _cron_field(1, 28),
        _cron_field(1, 12),
        _cron_field(0, 6),
    ),
)
schemathesis.openapi.format(
    "cron", st.one_of(CRON, st.builds("{} {}".format, _cron_field(0, 59), CRON))
)


def _spec_cannot_say(case: schemathesis.Case, response: Any) -> bool:
    """True if a schema-valid request was refused by a rule no JSON Schema can state.

    A schema cannot compare two fields (``end_at`` after ``start_at``), nor know the
    stored schedule a PATCH changes: clearing its only rule (``cron``), a zone for an
    interval one (``timezone``), a bound that crosses its other bound (``end_at``).
    Only those refusals are let through, each naming its field; any other one fails.
    """
    if response.status_code != 422:
        return False
    field = response.json().get("field")
    body = case.body if isinstance(case.body, dict) else {}
    operation = case.operation.label
    if operation in _SUBMITTING and _CATALOGUED.match(str(field)):
        return True
    if operation == "POST /jobs":
        return bool(_PUBLISHED.match(str(field)))
    if operation == "PATCH /schedules/{schedule_id}":
        return field in {"cron", "timezone", "end_at"}
    if operation == "POST /schedules/preview" and field == "cron":
        # Exactly one rule, cron or every_seconds: both null or both given is refused.
        return (body.get("cron") is None) == (body.get("every_seconds") is None)
    if operation == "POST /jobs/limits":
        # A declared limit's rate, bounded as PUT /limits/{scope}'s is (below).
        return bool(re.fullmatch(r"limits\.\d+\.rate", str(field)))
    if operation == "PUT /limits/{scope}":
        # The pattern states a rate's grammar; its bounds (at most a million starts a
        # second, at least one in 1,000 days) are a quotient no pattern can state.
        return field == "rate"
    if operation in {"POST /schedules", "POST /schedules/preview"} and field == "end_at":
        start, end = body.get("start_at"), body.get("end_at")
        return (
            isinstance(start, str)
            and isinstance(end, str)
            and datetime.fromisoformat(end) <= datetime.fromisoformat(start)
        )
    return False


#: Operations that create work: the job catalogue (what earlier requests of the run
#: published through ``POST /jobs``) decides which jobs and versions exist and what
#: inputs they take, which the spec cannot know.
_SUBMITTING = {
    "POST /executions",
    "POST /executions/batch",
    "POST /schedules",
    "PATCH /schedules/{schedule_id}",
}
_CATALOGUED = re.compile(r"^(items\.\d+\.)?(job|version|inputs([.\[].*)?)$")
#: What a published definition may be refused for that no JSON Schema can state: its
#: digest (a hash of the rest), its schemas (valid JSON Schemas, within the nesting
#: and size limits), and one default against another (retry_max_delay >= base).
_PUBLISHED = re.compile(
    r"^entries\.\d+\.(digest|input_schema|output_schema|"
    r"defaults\.retry_base_delay|defaults\.retry_max_delay)$"
)


def all_checks_config(max_examples: int) -> schemathesis.Config:
    """Every check and every phase, one worker, a fixed seed: the same run every time."""
    return schemathesis.Config.from_dict(
        {
            "seed": 6,
            "workers": 1,
            "headers": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
            "generation": {
                "deterministic": True,
                "database": "none",
                "max-examples": max_examples,
            },
            "checks": {"enabled": True},
            "operations": [
                {
                    # DELETE on an execution cancels it: the record stays, CANCELLED, to be
                    # read and audited (the spec says so). Only a schedule is removed. The
                    # check judges the read after the DELETE too (its attempts, its trail),
                    # so it is off for every operation on one execution.
                    "include-path-regex": r"^/executions/\{execution_id\}",
                    "checks": {"use_after_free": {"enabled": False}},
                }
            ],
        }
    )


def run_every_check(app: FastAPI, known: dict[str, list[str]], max_examples: int) -> list[str]:
    """Run schemathesis's engine over ``app`` (as ``st run --checks all`` does); the failures.

    ``known`` maps path parameters to ids that exist, so that operations on one
    execution or schedule also reach past a 404.
    """
    spec = schemathesis.openapi.from_asgi(
        "/openapi.json", app, config=all_checks_config(max_examples)
    )

    @spec.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        if not path_parameters:
            return st.just(path_parameters)
        names = [name for name in path_parameters if known.get(name)]
        if not names:
            return st.just(path_parameters)
        existing = st.fixed_dictionaries({name: st.sampled_from(known[name]) for name in names})
        return st.one_of(
            st.just(path_parameters), existing.map(lambda ids: {**path_parameters, **ids})
        )

    @spec.hook
    def filter_failure(context: Any, failure: Any, case: schemathesis.Case, response: Any) -> bool:
        return not (isinstance(failure, RejectedPositiveData) and _spec_cannot_say(case, response))

    found: list[str] = []
    for event in from_schema(spec).execute():
        if isinstance(event, events.NonFatalError | events.FatalError):
            found.append(
                f"{getattr(event, 'label', 'engine')}: {getattr(event, 'value', None) or event}"
            )
        elif isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            found.extend(_failures(event.recorder))
        elif isinstance(event, events.EngineFinished):
            found.extend(f"{f.operation}: {f.title}: {f.message}" for f in event.failures)
    return found


def _failures(recorder: Any) -> Iterator[str]:
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.failure_info is None:
                continue
            failure = check.failure_info.failure
            interaction = recorder.interactions.get(failure.case_id or case_id)
            answer = ""
            if interaction is not None and interaction.response is not None:
                answer = (
                    f"[{interaction.response.status_code}] {interaction.response.content[:300]!r}"
                )
            yield (
                f"{failure.operation}: {failure.title} {answer}\n"
                f"    {check.failure_info.code_sample[:600]}"
            )


def seed_everything(store: Store) -> dict[str, list[str]]:
    """:func:`seed`'s executions, a schedule of each rule, a claimed command: their ids."""
    executions = seed(store)
    cron = store.add_schedule("fuzz-cron", cron="0 3 * * *", timezone="Europe/Paris", id="nightly")
    every = store.add_schedule("fuzz-every", every=60, id="minutely")
    command = store.request(executions[1], CommandKind.CANCEL, actor="fuzz")
    store.set_limit("job:fuzz", rate="50/s", concurrency=5, actor="fuzz")
    store.pause_queue("fuzz-paused", actor="fuzz")
    return {
        "execution_id": executions,
        "schedule_id": [cron.id, every.id],
        "task": [cron.id, every.id],
        "command_id": [command.id],
        "node_id": ["fuzz-node"],
        "scope": ["job:fuzz", "queue:fuzz-paused"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.timeout(300)  # about 30 s on an idle machine; the coverage phase is most of it
def test_the_api_passes_every_check_with_auth_on(store: Store) -> None:
    """``st run --checks all`` with an admin token, in-process: no 5xx, nothing undeclared.

    Every phase runs (examples, coverage, fuzzing, stateful) with every check: status
    codes, content types, headers and bodies as declared; schema-valid requests
    accepted and schema-invalid ones refused; ``Allow`` on a 405; resources gone after
    a DELETE and there after a create.
    """
    known = seed_everything(store)
    tokens = {ADMIN_TOKEN: Principal(name="fuzz", scopes=frozenset({Scope.ADMIN}))}
    app = create_app(store, auth=Auth(tokens), max_wait=MAX_WAIT)
    failures = run_every_check(app, known, max_examples=ALL_CHECKS_EXAMPLES)
    assert failures == [], "\n".join(failures)


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


def test_no_object_in_the_spec_lets_a_key_the_api_refuses_through(bare_app: FastAPI) -> None:
    # patternProperties constrains only the keys that match; a key that does not match
    # would be schema-valid with any value, and refused. Every keyed object says its
    # pattern in propertyNames instead.
    keyed, stack = [], [bare_app.openapi()]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            assert "patternProperties" not in node, node
            if "propertyNames" in node:
                keyed.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    assert keyed
    assert all("pattern" in node["propertyNames"] for node in keyed)


@pytest.mark.parametrize("key", ["", " ", "\u3000", "q\x00"])
def test_a_claim_with_a_queue_name_the_api_refuses_is_refused_by_its_spec(
    bare_app: FastAPI, key: str
) -> None:
    spec = bare_app.openapi()
    body = {"owner": "w", "queues": {key: 1}}
    schema = {
        **spec["paths"]["/claims"]["post"]["requestBody"]["content"]["application/json"]["schema"],
        "components": spec["components"],
    }
    validator = jsonschema.Draft202012Validator(schema)
    assert not validator.is_valid(body)
    assert validator.is_valid({"owner": "w", "queues": {"q": 1}})
    with TestClient(bare_app) as client:
        refused = client.post("/claims", json=body)
    assert_problem(refused, 422, "validation", "queues")
    assert "list" not in refused.json()["detail"]  # the object was the branch meant


@pytest.mark.parametrize(
    ("queues", "field", "says"),
    [
        pytest.param({"q": -1}, "queues.q", "greater than or equal to 0", id="object-value"),
        pytest.param({"q": "1"}, "queues.q", "valid integer", id="object-value-type"),
        pytest.param([" "], "queues.0", "", id="list-item"),
        pytest.param(5, "queues", "valid list", id="neither"),
        # A caller's key spelt like pydantic's name for a branch is still the caller's.
        pytest.param({"list[x]": -1}, "queues.list[x]", "greater than", id="key-like-a-tag"),
        pytest.param({"dict[a]": "x"}, "queues.dict[a]", "valid integer", id="key-like-a-tag-2"),
    ],
)
def test_a_bad_union_names_the_branch_the_input_chose(
    bare_app: FastAPI, queues: Any, field: str, says: str
) -> None:
    with TestClient(bare_app) as client:
        refused = client.post("/claims", json={"owner": "w", "queues": queues})
    assert_problem(refused, 422, "validation", field)
    assert says in refused.json()["detail"]


# -- what fuzzing found, pinned -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(b"\x80 not utf-8", "body", id="body-not-utf8"),
        pytest.param(b'{"job": "a\\ud800"}', "job", id="job-lone-surrogate"),
        pytest.param(b'{"job": "a\\u0000"}', "job", id="job-nul"),
        pytest.param(b'{"job": "a", "bucket_key": "\\udfff"}', "bucket_key", id="bucket-key"),
        pytest.param(b'{"job": "a", "inputs": {"\\ud800": 1}}', "inputs", id="inputs-key"),
        pytest.param(b'{"job": "a", "inputs": {"v": ["\\ud800"]}}', "inputs", id="inputs-value"),
        pytest.param(b'{"job": "a", "inputs": ["a"]}', "inputs", id="inputs-not-an-object"),
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


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        pytest.param("PUT", "/executions", "GET, HEAD, POST", id="executions"),
        pytest.param("OPTIONS", "/schedules/nightly", "DELETE, GET, HEAD, PATCH", id="schedule"),
        pytest.param("OPTIONS", "/nodes/n", "DELETE, PUT", id="node"),
        pytest.param("PUT", "/executions/batch", "POST", id="batch-is-its-own-resource"),
    ],
)
def test_a_405_allows_every_method_of_the_resource(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    refused = client.request(method, path)
    assert_problem(refused, 405, "method-not-allowed")
    assert refused.headers["allow"] == allowed


def test_the_spec_bounds_buckets_by_the_apps_store() -> None:
    store = fencepost.connect("memory://", num_buckets=16)
    try:
        spec = create_app(store).openapi()
    finally:
        store.close()
    marked, stack = [], [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("x-fencepost-bucket"):
                marked.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    # The filter of GET /executions (of its counts and of a bulk action's filter), and the
    # buckets a claim or a node names.
    assert len(marked) == 5
    for bucket in marked:
        [number] = [b for b in [bucket, *bucket.get("anyOf", [])] if b.get("type") == "integer"]
        assert (number["minimum"], number["maximum"]) == (0, 15)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"timezone": "America"}, "timezone", id="zone-directory"),
        pytest.param({"timezone": "x" * 300}, "timezone", id="zone-name-too-long"),
        pytest.param({"start_at": "0001-06-01T00:00:00Z"}, "start_at", id="year-1"),
    ],
)
def test_schedule_values_that_crashed_are_refused(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    response = client.post("/schedules", json={"job": "j", "cron": "0 3 * * *", **body})
    assert_problem(response, 422, "validation", field)
    assert store.schedules().items == []


@pytest.mark.parametrize(
    ("verb", "body"), [("claim", {"owner": "w"}), ("complete", {"owner": "w", "epoch": 1})]
)
def test_a_slot_out_of_range_in_utc_is_refused(
    client: TestClient, store: Store, verb: str, body: dict[str, Any]
) -> None:
    store.add_schedule("j", every=60, id="tick")
    response = client.post(f"/jobs/tick/0001-01-01T00:00:00+05:00/{verb}", json=body)
    assert_problem(response, 422, "validation", "slot")


def test_a_number_without_a_fraction_is_an_integer(client: TestClient, store: Store) -> None:
    response = client.post("/executions", json={"job": "j", "priority": 5.0, "max_attempts": 2.0})
    assert response.status_code == 201, response.text
    assert (response.json()["priority"], response.json()["max_attempts"]) == (5, 2)
    assert_problem(
        client.post("/executions", json={"job": "j", "priority": 5.5}), 422, "validation"
    )


def test_an_epoch_no_json_reader_holds_exactly_is_refused(client: TestClient) -> None:
    body = {"owner": "w", "epoch": 2**53}
    assert_problem(client.post("/executions/x/complete", json=body), 422, "validation", "epoch")
