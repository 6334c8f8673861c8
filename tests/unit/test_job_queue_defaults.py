"""A job's own priority and queue: declared in code or in a file, published, applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fencepost import App
from fencepost.domain.errors import ValidationError
from fencepost.jobs.catalogue import entry_of
from fencepost.jobs.definitions import DefinitionError, load_definition
from tests.unit.test_definitions import minimal, write


def test_a_job_in_code_gives_its_executions_its_queue_and_priority() -> None:
    app = App("memory://")

    @app.job("mail", queue="emails", priority=3)
    def mail(to: str) -> None: ...

    @app.job("plain")
    def plain() -> None: ...

    spec = app.registry.get("mail")
    assert (spec.queue, spec.priority) == ("emails", 3)
    defaults = entry_of(spec).defaults
    assert (defaults.queue, defaults.priority) == ("emails", 3)
    own = app.submit("mail", {"to": "a"})
    assert (own.queue, own.priority) == ("emails", 3)
    given = app.submit("mail", {"to": "a"}, queue="urgent", priority=0)
    assert (given.queue, given.priority) == ("urgent", 0)
    assert (app.submit("plain").queue, app.submit("plain").priority) == ("default", 0)
    handle = app.schedule("mail", every=60, inputs={"to": "a"})
    assert (handle.schedule.queue, handle.schedule.priority) == ("emails", 3)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"queue": ""}, "queue"),
        ({"queue": "a\x00b"}, "queue"),
        ({"queue": "a\ud800"}, "queue"),
        ({"queue": "q" * 101}, "queue"),
        ({"queue": "q" * 100_000}, "queue"),
        ({"queue": 5}, "queue"),
        ({"priority": "high"}, "priority"),
        ({"priority": 10**400}, "priority"),
        ({"priority": 2**31}, "priority"),
        ({"priority": True}, "priority"),
    ],
)
def test_a_bad_queue_or_priority_in_code_is_refused_naming_it(
    changes: dict[str, Any], field: str
) -> None:
    app = App("memory://")
    with pytest.raises(ValidationError) as refused:
        app.job("x", **changes)(lambda: None)
    assert refused.value.field == field
    assert len(app.registry) == 0


def test_a_definition_file_declares_its_queue_and_priority(tmp_path: Path) -> None:
    spec = load_definition(write(tmp_path, "j.yaml", minimal(queue="reports", priority=-2)))
    assert (spec.queue, spec.priority) == ("reports", -2)
    assert (entry_of(spec).defaults.queue, entry_of(spec).defaults.priority) == ("reports", -2)
    bare = load_definition(write(tmp_path, "k.yaml", minimal()))
    assert (bare.queue, bare.priority) == (None, None)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"queue": ""}, "queue"),
        ({"queue": "q" * 101}, "queue"),
        ({"queue": "a\x00"}, "queue"),
        ({"queue": ["a"]}, "queue"),
        ({"queue": {"nested": {"deep": 1}}}, "queue"),
        ({"priority": 1.5}, "priority"),
        ({"priority": -(2**31) - 1}, "priority"),
    ],
)
def test_a_bad_queue_or_priority_in_a_file_is_refused_naming_it(
    tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        load_definition(write(tmp_path, "j.yaml", minimal(**changes)))
    assert refused.value.field == field
