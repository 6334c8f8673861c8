"""Job definition files: what loads, and every refusal naming its file, field and reason."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Lease
from fencepost.domain.retry import RetryPolicy
from fencepost.jobs.context import Context
from fencepost.jobs.definitions import (
    DefinitionError,
    load_definition,
    load_definitions,
    parse_duration,
)
from fencepost.jobs.runners import CommandRunner, HttpRunner
from fencepost.jobs.spec import DEFAULT_LEASE_TTL

EXAMPLES = Path(__file__).parents[2] / "examples" / "definitions"

ISSUE_EXAMPLE = """\
name: nightly-report
version: 3
inputs: {type: object, properties: {day: {type: string}}, required: [day]}   # JSON Schema
retry: {max_attempts: 5, base_delay: 1, max_delay: 300}
timeout: 600
lease_ttl: 30
run:
  command: ["python", "-m", "reports", "--day", "{inputs.day}"]
"""


def minimal(**changes: Any) -> dict[str, Any]:
    """A valid definition document with ``changes`` applied (a value of None drops the key)."""
    doc: dict[str, Any] = {"name": "job", "version": 1, "run": {"command": ["true"]}}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def write(directory: Path, name: str, content: str | dict[str, Any]) -> Path:
    path = directory / name
    if isinstance(content, dict):
        content = json.dumps(content) if name.endswith(".json") else yaml.safe_dump(content)
    path.write_text(content, encoding="utf-8")
    return path


def refusal(path: Path) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    return caught.value


def assert_refused(path: Path, field: str, reason: str) -> None:
    error = refusal(path)
    assert error.path == path
    assert error.field == field
    assert reason in error.reason, error.reason
    assert str(error) == f"{path}: {field}: {error.reason}"


def context(**changes: Any) -> Context:
    fields: dict[str, Any] = {
        "execution_id": "e-1",
        "owner": "w",
        "epoch": 1,
        "lease_until": datetime.now(UTC) + timedelta(seconds=30),
        "due_at": datetime.now(UTC),
        "attempt": 1,
        "max_attempts": 3,
        "job": "job",
        "job_version": 1,
        "inputs": {},
        "timeout": None,
        "schedule_id": None,
        "slot": None,
    }
    fields.update(changes)
    return Context(Lease(**fields))


@pytest.fixture
def forget_new_modules() -> Iterator[None]:
    """Drop modules a test imported from its tmp_path, so the next test imports its own."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


# -- what loads ----------------------------------------------------------------------


def test_the_issue_example_loads(tmp_path: Path) -> None:
    path = write(tmp_path, "nightly.yaml", ISSUE_EXAMPLE)
    spec = load_definition(path)
    assert spec.key == ("nightly-report", 3)
    assert spec.input_schema["required"] == ["day"]
    assert spec.max_attempts == 5
    assert spec.retry == RetryPolicy(base_delay=1, max_delay=300)
    assert spec.timeout == timedelta(seconds=600)
    assert spec.lease_ttl == timedelta(seconds=30)
    assert spec.source == str(path)
    assert isinstance(spec.run, CommandRunner)
    assert spec.run.argv == ("python", "-m", "reports", "--day", "{inputs.day}")
    assert not spec.is_async


def test_optional_keys_take_their_defaults(tmp_path: Path) -> None:
    spec = load_definition(write(tmp_path, "job.json", minimal()))
    assert spec.input_schema == {"type": "object"}
    assert spec.max_attempts is None
    assert spec.retry is None
    assert spec.timeout is None
    assert spec.lease_ttl == DEFAULT_LEASE_TTL


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param(10, 10, id="int"),
        pytest.param(2.5, 2.5, id="float"),
        pytest.param("500ms", 0.5, id="ms"),
        pytest.param("30s", 30, id="s"),
        pytest.param("10m", 600, id="m"),
        pytest.param("1h", 3600, id="h"),
        pytest.param("1d", 86400, id="d"),
        pytest.param("1h30m", 5400, id="compound"),
        pytest.param("1.5s", 1.5, id="decimal"),
    ],
)
def test_durations_are_seconds_or_unit_strings(value: object, seconds: float) -> None:
    assert parse_duration(value, field="timeout") == timedelta(seconds=seconds)


def test_retry_with_only_max_attempts_keeps_the_store_policy(tmp_path: Path) -> None:
    spec = load_definition(write(tmp_path, "job.yaml", minimal(retry={"max_attempts": 2})))
    assert spec.max_attempts == 2
    assert spec.retry is None


def test_retry_max_delay_defaults_to_at_least_base_delay(tmp_path: Path) -> None:
    short = load_definition(write(tmp_path, "a.yaml", minimal(retry={"base_delay": "2s"})))
    assert short.retry == RetryPolicy(base_delay=2, max_delay=300)
    long = load_definition(write(tmp_path, "b.yaml", minimal(retry={"base_delay": "10m"})))
    assert long.retry == RetryPolicy(base_delay=600, max_delay=600)


def test_http_definition_builds_an_http_runner(tmp_path: Path) -> None:
    http = {
        "method": "post",
        "url": "https://example.test/reports/{inputs.day}",
        "json": {"day": "{inputs.day}"},
        "headers": {"Idempotency-Key": "{execution_id}"},
        "timeout": "2s",
    }
    inputs = {"type": "object", "properties": {"day": {"type": "string"}}}
    spec = load_definition(write(tmp_path, "h.yaml", minimal(inputs=inputs, run={"http": http})))
    assert isinstance(spec.run, HttpRunner)
    assert spec.run.method == "POST"
    assert spec.run.timeout == 2.0
    assert spec.run.headers == {"Idempotency-Key": "{execution_id}"}


def test_python_target_next_to_the_file(tmp_path: Path, forget_new_modules: None) -> None:
    (tmp_path / "fp_handlers_a.py").write_text(
        "def add(x: int, y: int) -> int:\n    return x + y\n"
    )
    path = write(tmp_path, "add.yaml", minimal(run={"python": "fp_handlers_a:add"}))
    path_before = list(sys.path)
    spec = load_definition(path)
    assert sys.path == path_before  # the directory was on sys.path for the import only
    assert spec.source == str(path)
    assert spec.input_schema["required"] == ["x", "y"]  # from the type hints
    assert spec.run(context(), {"x": 2, "y": 3}) == 5


def test_python_target_takes_the_file_schema_and_settings(
    tmp_path: Path, forget_new_modules: None
) -> None:
    (tmp_path / "fp_handlers_b.py").write_text(
        "class Jobs:\n"
        "    @staticmethod\n"
        "    async def greet(ctx, **names):\n"
        "        return ctx.execution_id\n"
    )
    schema = {"type": "object", "properties": {"who": {"type": "string"}}}
    doc = minimal(inputs=schema, timeout="1m", run={"python": "fp_handlers_b:Jobs.greet"})
    spec = load_definition(write(tmp_path, "greet.yaml", doc))
    assert spec.input_schema == schema
    assert spec.timeout == timedelta(minutes=1)
    assert spec.is_async


def test_python_target_on_the_normal_import_path(tmp_path: Path) -> None:
    spec = load_definition(write(tmp_path, "j.yaml", minimal(run={"python": "json:dumps"})))
    assert spec.run(context(), {"obj": [1]}) == "[1]"


def test_load_definitions_reads_every_definition_file_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yml", minimal(name="b"))
    write(tmp_path, "a.json", minimal(name="a"))
    write(tmp_path, "c.YAML", minimal(name="c"))
    write(tmp_path, "README.md", "not a definition")
    write(tmp_path, ".hidden.yaml", "not: [valid")
    (tmp_path / "sub.yaml").mkdir()
    (tmp_path / "sub.yaml" / "d.yaml").write_text(yaml.safe_dump(minimal(name="d")))
    assert [s.name for s in load_definitions(tmp_path)] == ["a", "b", "c"]


def test_the_example_definitions_load(forget_new_modules: None) -> None:
    specs = {spec.name: spec for spec in load_definitions(EXAMPLES)}
    assert set(specs) == {"add", "greet", "healthz"}
    assert isinstance(specs["greet"].run, CommandRunner)
    assert isinstance(specs["healthz"].run, HttpRunner)
    assert specs["add"].run(context(), {"x": 40, "y": 2}) == 42


# -- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "field", "reason"),
    [
        pytest.param("d.yaml", "- a\n- b\n", "document", "must be a mapping, got list", id="list"),
        pytest.param("d.yaml", "just text\n", "document", "must be a mapping, got str", id="str"),
        pytest.param("d.yaml", "", "document", "the file is empty", id="empty"),
        pytest.param("d.json", "[1]", "document", "must be a mapping", id="json-list"),
        pytest.param("d.yaml", "name: [x\n", "document", "is not valid YAML", id="yaml-syntax"),
        pytest.param("d.json", '{"name": }', "document", "is not valid JSON", id="json-syntax"),
        pytest.param(
            "d.yaml",
            "name: a\nversion: 1\nrun: {command: [x]}\ntimeout: 5\ntimeout: 6\n",
            "timeout",
            "appears twice (lines 4 and 5)",
            id="yaml-duplicate-key",
        ),
        pytest.param(
            "d.yaml",
            "name: a\nversion: 1\nrun: {command: [x]}\nretry:\n  base_delay: 1\n  base_delay: 2\n",
            "retry.base_delay",
            "appears twice",
            id="yaml-duplicate-nested-key",
        ),
        pytest.param(
            "d.json",
            '{"name": "a", "name": "b", "version": 1, "run": {"command": ["x"]}}',
            "document",
            "key 'name' appears twice",
            id="json-duplicate-key",
        ),
        pytest.param("d.txt", "name: a\n", "file", "must end in .yaml, .yml, .json", id="suffix"),
    ],
)
def test_unreadable_documents_are_refused(
    tmp_path: Path, name: str, content: str, field: str, reason: str
) -> None:
    assert_refused(write(tmp_path, name, content), field, reason)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    assert_refused(path, "file", "is not UTF-8 text")


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    assert_refused(tmp_path / "gone.yaml", "file", "cannot be read")


SCHEMA_WITH_DAY = {"type": "object", "properties": {"day": {"type": "string"}}}


@pytest.mark.parametrize(
    ("doc", "field", "reason"),
    [
        # the fixed structure: unknown, missing and mistyped keys
        (minimal(timout=5), "timout", "is not a known key (did you mean 'timeout'?)"),
        (minimal(schedule="daily"), "schedule", "is not a known key (expected one of name,"),
        (minimal(retry={"max_attempt": 3}), "retry.max_attempt", "did you mean 'max_attempts'?"),
        (minimal(run={"shell": "echo"}), "run.shell", "is not a known key"),
        (minimal(name=None), "name", "is required"),
        (minimal(run=None), "run", "is required"),
        (minimal(name=""), "name", "must be a non-empty string"),
        (minimal(description=5), "description", "must be a string"),
        # version: an int >= 1, and a bool is not an int
        (minimal(version="3"), "version", "must be an integer, got '3'"),
        (minimal(version=True), "version", "must be an integer, got True"),
        (minimal(version=1.0), "version", "must be an integer"),
        (minimal(version=0), "version", "must be >= 1, got 0"),
        # run: exactly one kind
        (minimal(run={}), "run", "must have exactly one of command, python, http; got none"),
        (
            minimal(run={"command": ["x"], "http": {"method": "GET", "url": "http://h"}}),
            "run",
            "got command, http",
        ),
        (minimal(run=["x"]), "run", "must be a mapping, got list"),
        # inputs: a valid JSON Schema
        (minimal(inputs={"type": "banana"}), "inputs.type", "is not a valid JSON Schema"),
        # output: a valid JSON Schema too, and storable JSON
        (minimal(output={"type": "banana"}), "output.type", "is not a valid JSON Schema"),
        (minimal(output=["x"]), "output", "must be a mapping, got list"),
        (minimal(output={"description": "a\u0000b"}), "output", "U+0000"),
        (minimal(output={"description": "\ud800"}), "output", "surrogate"),
        (minimal(outputs={"type": "object"}), "outputs", "did you mean 'output'?"),
        (
            minimal(inputs={"properties": {"day": {"minLength": -1}}}),
            "inputs.properties.day.minLength",
            "is not a valid JSON Schema",
        ),
        (minimal(inputs="object"), "inputs", "must be a mapping, got str"),
        # retry
        (minimal(retry=3), "retry", "must be a mapping, got int"),
        (minimal(retry={"max_attempts": 0}), "retry.max_attempts", "must be >= 1, got 0"),
        (minimal(retry={"max_attempts": "5"}), "retry.max_attempts", "must be an integer"),
        (minimal(retry={"base_delay": 0}), "retry.base_delay", "must be > 0 seconds, got 0"),
        (minimal(retry={"base_delay": -1}), "retry.base_delay", "must be > 0 seconds"),
        (
            minimal(retry={"base_delay": 10, "max_delay": 5}),
            "retry.max_delay",
            "must be >= base_delay (10 s), got 5",
        ),
        # timeout and lease_ttl
        (minimal(timeout=0), "timeout", "must be > 0 seconds, got 0"),
        (minimal(timeout=-5), "timeout", "must be > 0 seconds"),
        (minimal(timeout="0s"), "timeout", "must be > 0 seconds"),
        (minimal(timeout="soon"), "timeout", "must be a number of seconds or a duration like"),
        (minimal(timeout="10"), "timeout", "must be a number of seconds or a duration like"),
        (minimal(timeout=True), "timeout", "must be a number of seconds"),
        (minimal(lease_ttl=0), "lease_ttl", "must be > 0 seconds"),
        (minimal(lease_ttl="5 minutes"), "lease_ttl", "must be a number of seconds"),
        (minimal(timeout=1e20), "timeout", "is too long"),
        (minimal(timeout="99999999999d"), "timeout", "is too long"),
        # command
        (minimal(run={"command": "echo hi"}), "run.command", "must be a non-empty list"),
        (minimal(run={"command": []}), "run.command", "must be a non-empty list"),
        (minimal(run={"command": ["sleep", 5]}), "run.command[1]", "must be a string, got 5"),
        (minimal(run={"command": [" "]}), "run.command[0]", "must name a program"),
        # templates
        (
            minimal(run={"command": ["echo", "{inputz.day}"]}),
            "run.command[1]",
            "unknown template field {inputz.day} (allowed: {inputs.<name>}, {execution_id},",
        ),
        (minimal(run={"command": ["echo", "{}"]}), "run.command[1]", "unknown template field {}"),
        (minimal(run={"command": ["echo", "{0}"]}), "run.command[1]", "unknown template field"),
        (
            minimal(run={"command": ["echo", "{inputs.day.year}"]}),
            "run.command[1]",
            "unknown template field",
        ),
        (
            minimal(run={"command": ["echo", "{execution_id.__class__}"]}),
            "run.command[1]",
            "unknown template field",
        ),
        (
            minimal(run={"command": ["echo", "{execution_id!r}"]}),
            "run.command[1]",
            "may not have a format spec or conversion",
        ),
        (
            minimal(run={"command": ["echo", "{attempt:>5}"]}),
            "run.command[1]",
            "may not have a format spec or conversion",
        ),
        (minimal(run={"command": ["echo", "{oops"]}), "run.command[1]", "malformed template"),
        (minimal(run={"command": ["echo", "oops}"]}), "run.command[1]", "malformed template"),
        (
            minimal(inputs=SCHEMA_WITH_DAY, run={"command": ["echo", "{inputs.dya}"]}),
            "run.command[1]",
            "{inputs.dya} names no property of the inputs schema (known: day)",
        ),
        # python
        (minimal(run={"python": "json.dumps"}), "run.python", "must be 'module.path:attribute'"),
        (minimal(run={"python": "json:"}), "run.python", "must be 'module.path:attribute'"),
        (minimal(run={"python": ["json:dumps"]}), "run.python", "must be 'module.path:attribute'"),
        (
            minimal(run={"python": "fp_no_such_module:f"}),
            "run.python",
            "cannot import module 'fp_no_such_module': not found on sys.path or in",
        ),
        (
            minimal(run={"python": "json:no_such"}),
            "run.python",
            "module 'json' has no attribute 'no_such'",
        ),
        (minimal(run={"python": "json:__doc__"}), "run.python", "'json:__doc__' is not callable"),
        # http
        (
            minimal(run={"http": {"method": "FETCH", "url": "http://h"}}),
            "run.http.method",
            "must be one of DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, got 'FETCH'",
        ),
        (minimal(run={"http": {"url": "http://h"}}), "run.http.method", "is required"),
        (minimal(run={"http": {"method": "GET"}}), "run.http.url", "is required"),
        (
            minimal(run={"http": {"method": "GET", "url": "ftp://h/x"}}),
            "run.http.url",
            "must be an http:// or https:// URL",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "/relative"}}),
            "run.http.url",
            "must be an http:// or https:// URL",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://[::1/x"}}),
            "run.http.url",
            "is not a valid URL",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "timeout": 0}}),
            "run.http.timeout",
            "must be > 0 seconds",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "body": "{}"}}),
            "run.http.body",
            "is not a known key (expected one of method, url, json, headers, timeout)",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "hedaers": {}}}),
            "run.http.hedaers",
            "is not a known key (did you mean 'headers'?)",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h/{inputs.x!s}"}}),
            "run.http.url",
            "may not have a format spec or conversion",
        ),
        (
            minimal(
                inputs=SCHEMA_WITH_DAY,
                run={"http": {"method": "POST", "url": "http://h", "json": {"d": "{inputs.x}"}}},
            ),
            "run.http.json.d",
            "{inputs.x} names no property of the inputs schema",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "headers": ["A: b"]}}),
            "run.http.headers",
            "must be a mapping",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "headers": {"A": 1}}}),
            "run.http.headers.A",
            "must be a string, got 1",
        ),
        (
            minimal(run={"http": {"method": "GET", "url": "http://h", "headers": {"A B": "c"}}}),
            "run.http.headers",
            "'A B' is not a valid header name",
        ),
        (
            minimal(
                run={
                    "http": {
                        "method": "GET",
                        "url": "http://h",
                        "headers": {"X-Fencepost-Epoch": "1"},
                    }
                }
            ),
            "run.http.headers.X-Fencepost-Epoch",
            "is set by fencepost itself",
        ),
        (
            minimal(
                inputs=SCHEMA_WITH_DAY,
                run={"http": {"method": "GET", "url": "http://h", "headers": {"K": "{inputs.y}"}}},
            ),
            "run.http.headers.K",
            "{inputs.y} names no property",
        ),
    ],
)
def test_definitions_are_refused_naming_file_field_and_reason(
    tmp_path: Path, doc: dict[str, Any], field: str, reason: str
) -> None:
    assert_refused(write(tmp_path, "job.json", doc), field, reason)


def test_yaml_values_that_are_not_json_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "d.yaml",
        textwrap.dedent(
            """\
            name: a
            version: 1
            inputs: {type: object, properties: {day: {default: 2026-01-01}}}
            run: {command: [x]}
            """
        ),
    )
    assert_refused(path, "inputs", "is not JSON-serializable")


def test_a_python_target_that_fails_on_import_is_refused(
    tmp_path: Path, forget_new_modules: None
) -> None:
    (tmp_path / "fp_broken.py").write_text("raise RuntimeError('boom at import')\n")
    path = write(tmp_path, "b.yaml", minimal(run={"python": "fp_broken:f"}))
    assert_refused(path, "run.python", "cannot import module 'fp_broken': RuntimeError: boom")


def test_a_missing_dependency_of_the_target_is_named(
    tmp_path: Path, forget_new_modules: None
) -> None:
    (tmp_path / "fp_needy.py").write_text("import fp_not_installed\n")
    path = write(tmp_path, "n.yaml", minimal(run={"python": "fp_needy:f"}))
    assert_refused(path, "run.python", "No module named 'fp_not_installed'")


def test_a_python_target_whose_hints_give_no_schema_is_refused(
    tmp_path: Path, forget_new_modules: None
) -> None:
    (tmp_path / "fp_positional.py").write_text("def f(a, /):\n    return a\n")
    path = write(tmp_path, "p.yaml", minimal(run={"python": "fp_positional:f"}))
    assert_refused(path, "run.python", "parameter 'a' must accept a keyword")


def test_definition_error_is_a_validation_error(tmp_path: Path) -> None:
    error = refusal(write(tmp_path, "job.json", minimal(version=0)))
    assert isinstance(error, ValidationError)
    assert error.message == error.reason


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path / "nowhere")
    assert str(caught.value) == f"{tmp_path / 'nowhere'}: directory: does not exist"


def test_a_file_given_as_the_directory_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", minimal())
    with pytest.raises(DefinitionError) as caught:
        load_definitions(path)
    assert (caught.value.field, caught.value.reason) == ("directory", "is not a directory")


def test_a_directory_without_definition_files_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "name: job")
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path)
    assert caught.value.path == tmp_path
    assert caught.value.reason == "holds no definition files (*.yaml, *.yml, *.json)"


def test_the_same_name_and_version_in_two_files_names_both(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", minimal(name="report", version=2))
    second = write(tmp_path, "b.json", minimal(name="report", version=2))
    write(tmp_path, "c.yaml", minimal(name="report", version=3))
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path)
    assert caught.value.path == second
    assert caught.value.field == "version"
    assert str(first) in caught.value.reason
    assert str(caught.value) == (
        f"{second}: version: job 'report' version 2 is already defined in {first}"
    )


def test_one_bad_file_fails_the_directory_naming_that_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", minimal(name="a"))
    bad = write(tmp_path, "b.yaml", minimal(name="b", timeout=-1))
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path)
    assert (caught.value.path, caught.value.field) == (bad, "timeout")


def test_a_file_without_a_version_defines_version_1_as_app_job_does(tmp_path: Path) -> None:
    write(tmp_path, "job.yaml", minimal(version=None))
    (spec,) = load_definitions(tmp_path)
    assert spec.version == 1
