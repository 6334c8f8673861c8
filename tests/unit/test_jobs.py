"""Job specs: input schemas from type hints or JSON Schema, the registry, App.submit."""

from __future__ import annotations

from typing import Any

import pytest

import fencepost
from fencepost.domain.errors import ValidationError
from fencepost.jobs.context import Context
from fencepost.jobs.registry import JobRegistry
from fencepost.jobs.spec import spec_from_function


def report(ctx: Context, day: str, limit: int = 10, tags: list[str] | None = None) -> None:
    """A handler whose hints are its input schema."""


def test_schema_from_hints_accepts_matching_inputs() -> None:
    spec = spec_from_function(report, name="report")
    assert spec.check_inputs({"day": "2026-11-28"}) == {"day": "2026-11-28"}
    assert spec.check_inputs({"day": "d", "limit": 3, "tags": ["a"]})["limit"] == 3
    assert set(spec.input_schema["properties"]) == {"day", "limit", "tags"}
    assert spec.input_schema["required"] == ["day"]


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        pytest.param({}, "inputs.day", id="missing-required"),
        pytest.param({"day": 5}, "inputs.day", id="wrong-type"),
        pytest.param({"day": "d", "limit": "ten"}, "inputs.limit", id="wrong-type-default"),
        pytest.param({"day": "d", "tags": ["a", 2]}, "inputs.tags[1]", id="nested-item"),
        pytest.param({"day": "d", "colour": "red"}, "inputs.colour", id="unknown-field"),
        pytest.param(["d"], "inputs", id="not-an-object"),
    ],
)
def test_schema_from_hints_names_the_offending_field(inputs: Any, field: str) -> None:
    spec = spec_from_function(report, name="report")
    with pytest.raises(ValidationError) as caught:
        spec.check_inputs(inputs)
    assert caught.value.field == field


def test_var_keyword_handlers_accept_extra_fields() -> None:
    def loose(day: str, **rest: Any) -> None: ...

    spec = spec_from_function(loose, name="loose")
    assert spec.check_inputs({"day": "d", "extra": 1}) == {"day": "d", "extra": 1}


def test_explicit_json_schema_wins_over_hints() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    spec = spec_from_function(lambda ctx, **kw: None, name="n", inputs=schema)
    spec.check_inputs({"n": 2})
    with pytest.raises(ValidationError) as caught:
        spec.check_inputs({"n": 0})
    assert caught.value.field == "inputs.n"


def test_an_invalid_json_schema_is_refused_at_registration() -> None:
    with pytest.raises(ValidationError) as caught:
        spec_from_function(report, name="bad", inputs={"type": "objekt"})
    assert caught.value.field == "inputs"


def test_context_parameter_is_optional_and_inputs_are_keywords() -> None:
    def add(x: int, y: int) -> int:
        return x + y

    spec = spec_from_function(add, name="add")
    assert spec.run(None, {"x": 2, "y": 3}) == 5  # type: ignore[arg-type]
    assert not spec.is_async

    async def later(ctx: Context, x: int) -> int:
        return x

    assert spec_from_function(later, name="later").is_async


def test_positional_only_parameters_are_refused() -> None:
    def positional(x: int, /) -> None: ...

    with pytest.raises(ValidationError) as caught:
        spec_from_function(positional, name="p")
    assert caught.value.field == "handler"


def test_registry_versions() -> None:
    registry = JobRegistry()
    registry.add(spec_from_function(report, name="report", version=1))
    registry.add(spec_from_function(report, name="report", version=3))
    assert registry.get("report").version == 3
    assert registry.get("report", 1).version == 1
    with pytest.raises(ValidationError) as unknown_version:
        registry.get("report", 2)
    assert unknown_version.value.field == "version"
    with pytest.raises(ValidationError) as unknown_job:
        registry.get("nope")
    assert unknown_job.value.field == "job"
    with pytest.raises(ValidationError, match="defined twice"):
        registry.add(spec_from_function(report, name="report", version=3))
    assert [s.key for s in registry.restricted(["report"])] == [("report", 1), ("report", 3)]


def test_app_submit_pins_the_version_and_refuses_bad_inputs_without_storing() -> None:
    app = fencepost.App("memory://")

    @app.job("report", version=2, max_attempts=5, timeout=60)
    def report_v2(ctx: Context, day: str) -> None: ...

    execution = app.submit("report", {"day": "2026-11-28"})
    assert (execution.job_version, execution.max_attempts) == (2, 5)
    assert execution.timeout is not None
    assert execution.timeout.total_seconds() == 60
    with pytest.raises(ValidationError) as caught:
        app.submit("report", {"day": 28})
    assert caught.value.field == "inputs.day"
    with pytest.raises(ValidationError) as unknown:
        app.submit("report", {"day": "d"}, version=1)
    assert unknown.value.field == "version"
    assert len(app.store.query().items) == 1
    app.close()
