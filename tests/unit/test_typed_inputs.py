"""Typed inputs convert before the call, and results are checked against the job's output.

Through a real in-process :class:`Worker` on the memory store and on a SQLite file:
a handler typed ``at: datetime, report: ReportSpec`` receives a ``datetime`` and a
``ReportSpec``; inputs that cannot convert are refused at submit and, if stored
anyway, fail the execution at once (no retry) naming the field; a result that does
not match the declared output fails with ``result_invalid`` naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pydantic
import pytest
from typing_extensions import TypedDict

from fencepost.app import App
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Execution
from fencepost.domain.payloads import MAX_DEPTH
from fencepost.domain.states import AttemptOutcome, State
from fencepost.jobs.context import Context
from fencepost.jobs.definitions import load_definition
from tests.unit.test_worker import finished, running, wait_until


class ReportSpec(pydantic.BaseModel):
    title: str
    pages: int = 1


class Line(pydantic.BaseModel):
    sku: str
    qty: int


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


class Address(TypedDict):
    street: str
    number: int


@dataclasses.dataclass
class Window:
    start: date
    days: int


class Invoice(pydantic.BaseModel):
    total: Decimal
    issued: date


@pytest.fixture(params=["memory", "sqlite"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/typed.db"
    app = App(url)
    yield app
    app.close()


def run_all(app: App, *ids: str) -> list[Execution]:
    """Run a worker until every execution in ``ids`` is finished; their final states."""
    with running(app.worker(concurrency=2)):
        return [wait_until(lambda i=i: finished(app.store, i), 10) for i in ids]


def test_rich_hints_arrive_converted(app: App) -> None:
    received: dict[str, Any] = {}

    @app.job("typed", max_attempts=3)
    def typed(
        ctx: Context,
        at: datetime,
        report: ReportSpec,
        day: date,
        ref: UUID,
        amount: Decimal,
        tier: Tier,
        address: Address,
        lines: list[Line],
        window: Window,
        note: str = "none",
    ) -> str:
        received.update(locals())
        return "ok"

    inputs = {
        "at": "2026-11-28T02:00:00Z",
        "report": {"title": "nightly", "pages": 3},
        "day": "2026-11-28",
        "ref": "0192f1c2-0000-7000-8000-000000000001",
        "amount": "12.50",
        "tier": "gold",
        "address": {"street": "Main", "number": 7},
        "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
        "window": {"start": "2026-11-01", "days": 30},
    }
    (done,) = run_all(app, app.submit("typed", inputs).id)
    assert (done.state, done.result, done.attempt) == (State.SUCCEEDED, "ok", 1)
    assert received["at"] == datetime(2026, 11, 28, 2, tzinfo=UTC)
    assert received["report"] == ReportSpec(title="nightly", pages=3)
    assert received["day"] == date(2026, 11, 28)
    assert received["ref"] == UUID("0192f1c2-0000-7000-8000-000000000001")
    assert received["amount"] == Decimal("12.50")
    assert isinstance(received["amount"], Decimal)
    assert received["tier"] is Tier.GOLD
    assert received["address"] == {"street": "Main", "number": 7}
    assert received["lines"] == [Line(sku="a", qty=1), Line(sku="b", qty=2)]
    assert received["window"] == Window(start=date(2026, 11, 1), days=30)
    assert received["note"] == "none"  # left out: the handler's own default
    assert done.inputs == inputs  # what is stored stays the JSON that was submitted


def test_async_handlers_receive_converted_inputs_too(app: App) -> None:
    @app.job("typed-async")
    async def typed_async(at: datetime, report: ReportSpec) -> list[str]:
        return [type(at).__name__, type(report).__name__]

    inputs = {"at": "2026-11-28T02:00:00+01:00", "report": {"title": "t"}}
    (done,) = run_all(app, app.submit("typed-async", inputs).id)
    assert done.result == ["datetime", "ReportSpec"]


def test_inputs_that_do_not_convert_are_refused_at_submit(app: App) -> None:
    @app.job("when")
    def when(at: datetime, report: ReportSpec | None = None) -> None: ...

    cases = [
        ({"at": "not a date"}, "inputs.at"),
        ({"at": "2026-11-28T02:00:00Z", "report": {"pages": 2}}, "inputs.report.title"),
        (
            {"at": "2026-11-28T02:00:00Z", "report": {"title": "t", "pages": "x"}},
            "inputs.report.pages",
        ),
        ({"at": 10**30}, "inputs.at"),
    ]
    for inputs, field in cases:
        with pytest.raises(ValidationError) as caught:
            app.submit("when", inputs)
        assert caught.value.field == field, inputs
    assert app.store.query(job="when").items == []  # nothing stored


def test_inputs_stored_past_the_check_fail_at_once_naming_the_field(app: App) -> None:
    calls: list[object] = []

    @app.job("when", max_attempts=5)
    def when(at: datetime) -> None:
        calls.append(at)

    @app.job("plain", max_attempts=5)
    def plain(day: str, limit: int = 3) -> None:
        calls.append(day)

    # The store alone knows no job schemas: these reach the worker.
    bad_date = app.store.submit("when", {"at": "not a date"}, version=1).id
    missing = app.store.submit("plain", {"limit": 2}, version=1).id
    unknown = app.store.submit("plain", {"day": "d", "colour": "red"}, version=1).id
    wrong_type = app.store.submit("when", {"at": ["2026-11-28"]}, version=1).id
    done = run_all(app, bad_date, missing, unknown, wrong_type)
    for execution in done:
        assert (execution.state, execution.attempt) == (State.FAILED, 1), execution.error
        assert [a.outcome for a in app.store.attempts(execution.id)] == [AttemptOutcome.FAILED]
    errors = [e.error or "" for e in done]
    assert "inputs.at: Input should be a valid datetime" in errors[0]
    assert "inputs.day: is required" in errors[1]
    assert "inputs.colour: is not an input of this job" in errors[2]
    assert "inputs.at:" in errors[3]
    assert calls == []  # no handler ran


def test_the_explicit_schema_publishes_but_hints_still_convert(app: App) -> None:
    @app.job("explicit", inputs={"type": "object", "properties": {"at": {"type": "string"}}})
    def explicit(at: datetime) -> str:
        return type(at).__name__

    assert app.registry.get("explicit").input_schema["properties"] == {"at": {"type": "string"}}
    with pytest.raises(ValidationError) as caught:  # binding is checked at submit as well
        app.submit("explicit", {"at": "soon"})
    assert caught.value.field == "inputs.at"
    (done,) = run_all(app, app.submit("explicit", {"at": "2026-11-28"}).id)
    assert done.result == "datetime"


def test_a_result_matching_the_output_schema_succeeds_and_a_mismatch_fails_once(
    app: App,
) -> None:
    schema = {
        "type": "object",
        "properties": {"total": {"type": "integer"}},
        "required": ["total"],
    }

    @app.job("sum", output=schema, max_attempts=5)
    def total(values: list[int]) -> Any:
        return {"total": sum(values)} if all(v >= 0 for v in values) else {"total": "negative"}

    good, bad = app.submit("sum", {"values": [1, 2]}).id, app.submit("sum", {"values": [-1]}).id
    ok, refused = run_all(app, good, bad)
    assert (ok.state, ok.result) == (State.SUCCEEDED, {"total": 3})
    assert (refused.state, refused.attempt) == (State.FAILED, 1)
    assert refused.error is not None
    assert refused.error.startswith("result_invalid: result.total: ")
    assert "'negative' is not of type 'integer'" in refused.error
    assert refused.result is None
    assert [a.outcome for a in app.store.attempts(bad)] == [AttemptOutcome.FAILED]


def test_an_output_type_validates_and_dumps_the_result(app: App) -> None:
    @app.job("invoice", output=Invoice, max_attempts=4)
    def invoice(total: str, raw: bool = False) -> Any:
        if raw:  # a dict, converted by the output type if it can be
            return {"total": total, "issued": "2026-11-28"}
        return Invoice(total=Decimal(total), issued=date(2026, 11, 28))

    @app.job("window")
    def window() -> Window:  # no output=: the return annotation is not used, yet a
        return Window(start=date(2026, 1, 1), days=2)  # dataclass result is dumped to JSON

    ids = [
        app.submit("invoice", {"total": "10.25"}).id,
        app.submit("invoice", {"total": "12.5", "raw": True}).id,
        app.submit("invoice", {"total": "twelve", "raw": True}).id,
        app.submit("window").id,
    ]
    model, converted, invalid, dumped = run_all(app, *ids)
    assert (model.state, model.result) == (
        State.SUCCEEDED,
        {"total": "10.25", "issued": "2026-11-28"},
    )
    assert converted.result == {"total": "12.5", "issued": "2026-11-28"}
    assert (invalid.state, invalid.attempt) == (State.FAILED, 1)
    assert (invalid.error or "").startswith("result_invalid: result.total: ")
    assert dumped.result == {"start": "2026-01-01", "days": 2}
    assert app.registry.get("window").output_schema is None


def test_a_definition_file_s_output_schema_checks_python_results(app: App, tmp_path: Path) -> None:
    (tmp_path / "fp_typed_outputs.py").write_text(
        "from datetime import date\n"
        "def count(day: date, n: int):\n"
        "    return {'day': day.isoformat(), 'rows': n if n >= 0 else 'none'}\n"
    )
    (tmp_path / "count.yaml").write_text(
        "name: count\n"
        "output: {type: object, properties: {rows: {type: integer}}, required: [rows]}\n"
        "retry: {max_attempts: 4}\n"
        "run: {python: 'fp_typed_outputs:count'}\n"
    )
    spec = load_definition(tmp_path / "count.yaml")
    assert spec.output_schema == {
        "type": "object",
        "properties": {"rows": {"type": "integer"}},
        "required": ["rows"],
    }
    assert spec.input_schema["properties"]["day"] == {"type": "string", "format": "date"}
    app.add_job(spec)
    good = app.submit("count", {"day": "2026-11-28", "n": 5}).id
    bad = app.submit("count", {"day": "2026-11-28", "n": -1}).id
    ok, refused = run_all(app, good, bad)
    assert ok.result == {"day": "2026-11-28", "rows": 5}  # the handler got a date
    assert (refused.state, refused.attempt) == (State.FAILED, 1)
    assert (refused.error or "").startswith("result_invalid: result.rows: ")


def test_an_invalid_output_schema_is_refused_at_registration(app: App) -> None:
    with pytest.raises(ValidationError) as caught:

        @app.job("bad-output", output={"type": "objekt"})
        def bad() -> None: ...

    assert caught.value.field == "output"
    with pytest.raises(ValidationError) as caught:

        @app.job("nul-output", output={"type": "object", "description": "a\x00b"})
        def nul() -> None: ...

    assert caught.value.field == "output"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


class Node(pydantic.BaseModel):
    n: Node | str


def test_hostile_inputs_through_conversion_fail_cleanly_or_succeed(app: App) -> None:
    received: list[Any] = []

    @app.job("hostile", max_attempts=3)
    def hostile(text: ReportSpec, tree: Node, count: Decimal, ref: UUID | None = None) -> str:
        received.append((text.title, count))
        return "ok"

    ok_inputs = {
        "text": {"title": "x" * 1000},
        "tree": nested(MAX_DEPTH - 3),
        "count": 10**300,
    }
    stored = [
        ok_inputs,
        {**ok_inputs, "count": -(10**300), "ref": "-" * 40},
        {**ok_inputs, "text": {"title": "\u2028" * 50_000}},
        {**ok_inputs, "tree": {"n": 10**400}},
        {"\U0010ffff" * 100: 1, **ok_inputs},
    ]
    ids = [app.store.submit("hostile", inputs, version=1).id for inputs in stored]
    done = run_all(app, *ids)
    assert [e.state for e in done] == [
        State.SUCCEEDED,
        State.FAILED,
        State.SUCCEEDED,
        State.FAILED,
        State.FAILED,
    ]
    assert all(e.attempt == 1 for e in done)
    assert "inputs.ref:" in (done[1].error or "")
    assert "inputs.tree.n" in (done[3].error or "")
    assert "is not an input of this job" in (done[4].error or "")
    assert received[0] == ("x" * 1000, Decimal(10**300))
    # Everything stayed readable and listable afterwards.
    assert {e.id for e in app.store.query(job="hostile").items} == set(ids)


@pytest.mark.parametrize(
    "inputs",
    [
        {"report": {"title": "\ud800"}},
        {"report": {"title": "a\x00b"}},
        {"report": {"title": "t"}, "\ud800": 1},
        {"report": {"title": "t"}, "\x00": 1},
        {"report": nested(MAX_DEPTH + 5)},
    ],
    ids=["surrogate", "nul", "surrogate-key", "nul-key", "too-deep"],
)
def test_unstorable_inputs_are_refused_at_submit_and_never_crash_conversion(
    app: App, inputs: dict[str, Any]
) -> None:
    @app.job("unstorable")
    def unstorable(report: ReportSpec) -> None: ...

    with pytest.raises(ValidationError) as caught:
        app.submit("unstorable", inputs)
    assert caught.value.field.startswith("inputs")
    assert app.store.query(job="unstorable").items == []


class Opaque:
    """A class pydantic has no schema for."""


def test_a_hint_pydantic_cannot_handle_fails_the_submit_and_the_worker_naming_it(
    app: App,
) -> None:
    @app.job("opaque", max_attempts=4)
    def opaque(thing: Opaque) -> None: ...

    with pytest.raises(ValidationError) as caught:
        app.submit("opaque", {"thing": 1})
    assert caught.value.field == "inputs"
    assert "cannot derive a JSON Schema from type hints" in caught.value.message
    # A worker publishes every job's schema before it claims: it refuses to start.
    waiting = app.store.submit("opaque", {"thing": 1}, version=1)
    with pytest.raises(ValidationError) as refused:
        app.worker(concurrency=2)
    assert refused.value.field == "inputs"
    assert "inputs.thing: cannot use its type hint" in refused.value.message
    assert app.store.get(waiting.id).state is State.SCHEDULED  # never claimed
