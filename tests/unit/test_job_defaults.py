"""A job's defaults applied to a submit or a schedule (``fencepost.jobs.defaults``).

``App`` and the HTTP API both go through these functions; their own tests pin the
behaviour end to end, these pin the arguments handed to the store.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.jobs.context import Context
from fencepost.jobs.defaults import job_defaults
from fencepost.jobs.registry import JobRegistry
from fencepost.jobs.spec import spec_from_function


def report(ctx: Context, day: str) -> None:
    """A handler taking one input."""


@pytest.fixture
def registry() -> JobRegistry:
    return JobRegistry(
        [
            spec_from_function(report, name="report", version=1),
            spec_from_function(
                report, name="report", version=2, max_attempts=7, timeout=timedelta(seconds=60)
            ),
        ]
    )


def test_a_submit_takes_the_latest_version_and_its_defaults(registry: JobRegistry) -> None:
    assert job_defaults(registry, "report", {"day": "d"}) == {
        "job": "report",
        "inputs": {"day": "d"},
        "version": 2,
        "max_attempts": 7,
        "timeout": timedelta(seconds=60),
    }


def test_what_the_caller_gives_wins(registry: JobRegistry) -> None:
    arguments = job_defaults(registry, "report", {"day": "d"}, version=2, max_attempts=2, timeout=5)
    assert (arguments["max_attempts"], arguments["timeout"]) == (2, 5)


def test_defaults_the_job_lacks_are_left_to_the_store(registry: JobRegistry) -> None:
    assert job_defaults(registry, "report", {"day": "d"}, version=1) == {
        "job": "report",
        "inputs": {"day": "d"},
        "version": 1,
    }


def test_without_a_registry_the_arguments_pass_through() -> None:
    assert job_defaults(None, "anything", [1], version=3, max_attempts=4) == {
        "job": "anything",
        "inputs": [1],
        "version": 3,
        "max_attempts": 4,
    }


def test_a_schedule_takes_no_timeout(registry: JobRegistry) -> None:
    assert job_defaults(registry, "report", {"day": "d"}, schedule=True) == {
        "job": "report",
        "inputs": {"day": "d"},
        "version": 2,
        "max_attempts": 7,
    }


@pytest.mark.parametrize(
    ("job", "version", "inputs", "field"),
    [
        pytest.param("nope", None, {"day": "d"}, "job", id="unknown-job"),
        pytest.param("report", 9, {"day": "d"}, "version", id="unknown-version"),
        pytest.param("report", None, {}, "inputs.day", id="bad-inputs"),
    ],
)
def test_errors_name_the_field(
    registry: JobRegistry, job: str, version: int | None, inputs: object, field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        job_defaults(registry, job, inputs, version=version)  # type: ignore[arg-type]
    assert caught.value.field == field
