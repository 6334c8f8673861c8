"""The job catalogue's pure parts: entries and digests, defaults, and the store setting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.catalogue import (
    Catalogue,
    JobDefaults,
    JobSource,
    entry_from_definition,
    job_entry,
)
from fencepost.domain.errors import ValidationError
from fencepost.jobs.catalogue import entry_of
from fencepost.jobs.definitions import load_definitions
from fencepost.jobs.spec import spec_from_function

DEFINITION = """
name: nightly-report
version: 3
description: Build the report
inputs: {type: object, properties: {day: {type: string}}, required: [day]}
retry: {max_attempts: 2, base_delay: 0.5, max_delay: 10}
timeout: 1s
run:
  command: [python, -c, "pass"]
"""


def test_the_same_definition_file_in_two_places_has_one_digest(tmp_path: Path) -> None:
    entries = []
    for host in ("host-a/deploy", "host-b/elsewhere/defs"):
        directory = tmp_path / host
        directory.mkdir(parents=True)
        (directory / "nightly.yaml").write_text(DEFINITION)
        (spec,) = load_definitions(directory)
        entries.append(entry_of(spec))
    first, second = entries
    assert first.digest == second.digest
    assert first.source == JobSource(kind="file", where="nightly.yaml")
    assert first.description == "Build the report"
    assert first.defaults == JobDefaults(
        max_attempts=2,
        retry_base_delay=0.5,
        retry_max_delay=10.0,
        timeout=timedelta(seconds=1),
        lease_ttl=timedelta(seconds=30),
    )
    assert first.input_schema["required"] == ["day"]


def test_any_change_to_a_definition_changes_the_digest() -> None:
    base = job_entry("job", 1)
    changed = [
        job_entry("job", 2),
        job_entry("job", 1, description="x"),
        job_entry("job", 1, defaults=JobDefaults(priority=1)),
        job_entry("job", 1, input_schema={"type": "object", "required": ["a"]}),
        job_entry("job", 1, output_schema={"type": "integer"}),
        job_entry("job", 1, source=JobSource(kind="file", where="job.yaml")),
    ]
    assert len({base.digest, *(e.digest for e in changed)}) == 1 + len(changed)
    # Key order and the time it was published do not count.
    reordered = job_entry("job", 1, input_schema={"required": ["a"], "type": "object"})
    assert reordered.digest == changed[3].digest


def test_a_definition_read_back_keeps_its_digest_and_a_forged_one_is_refused() -> None:
    entry = job_entry("job", 1, defaults=JobDefaults(timeout=timedelta(milliseconds=1500)))
    again = entry_from_definition(entry.definition(), digest=entry.digest)
    assert again == entry
    with pytest.raises(ValidationError) as caught:
        entry_from_definition(entry.definition(), digest="sha256:" + "0" * 64)
    assert caught.value.field == "digest"
    with pytest.raises(ValidationError) as unknown:
        entry_from_definition({**entry.definition(), "extra": 1})
    assert unknown.value.field == "extra"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_attempts": 0}, "defaults.max_attempts"),
        ({"max_attempts": True}, "defaults.max_attempts"),
        ({"priority": 2**31}, "defaults.priority"),
        ({"timeout": -1}, "defaults.timeout"),
        ({"lease_ttl": float("nan")}, "defaults.lease_ttl"),
        ({"retry_max_delay": 5}, "defaults.retry_base_delay"),
        ({"retry_base_delay": 5, "retry_max_delay": 1}, "defaults.retry_max_delay"),
        ({"queue": "a\x00"}, "defaults.queue"),
    ],
)
def test_bad_defaults_name_their_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        JobDefaults(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_function_job_publishes_its_hints_schema_and_defaults() -> None:
    def handler(day: str, limit: int = 3) -> None: ...

    spec = spec_from_function(handler, name="report", version=2, max_attempts=4, timeout=9)
    entry = entry_of(spec)
    assert entry.key == ("report", 2)
    assert entry.input_schema["required"] == ["day"]
    assert (entry.defaults.max_attempts, entry.defaults.timeout) == (4, timedelta(seconds=9))
    assert entry.source.kind == "code"
    assert entry.source.where.endswith("handler")


def test_the_catalogue_resolves_versions_and_unknown_jobs_by_the_setting() -> None:
    catalogue = Catalogue([job_entry("a", 1), job_entry("a", 3), job_entry("b", 1)])
    assert catalogue.lookup("a", None, "allow").version == 3  # type: ignore[union-attr]
    assert catalogue.lookup("a", 1, "allow").version == 1  # type: ignore[union-attr]
    assert catalogue.lookup("zzz", None, "allow") is None  # whatever the catalogue holds
    assert Catalogue().lookup("zzz", None, "allow") is None
    with pytest.raises(ValidationError, match="known: 1, 3") as version:
        catalogue.lookup("a", 2, "allow")
    assert version.value.field == "version"
    with pytest.raises(ValidationError, match="known: a, b") as job:
        catalogue.lookup("zzz", None, "refuse")
    assert job.value.field == "job"
    with pytest.raises(ValidationError, match="known: none"):
        Catalogue().lookup("zzz", None, "refuse")


def test_connect_takes_unknown_jobs_as_an_argument_or_from_the_url() -> None:
    assert fencepost.connect("memory://").config.unknown_jobs == "allow"
    with pytest.warns(DeprecationWarning, match="auto"):
        former = fencepost.connect("memory://?unknown_jobs=auto")
    assert former.config.unknown_jobs == "allow"
    assert fencepost.connect("memory://?unknown_jobs=refuse").config.unknown_jobs == "refuse"
    assert (
        fencepost.connect("memory://?unknown_jobs=refuse", unknown_jobs="allow").config.unknown_jobs
        == "allow"
    )
    with pytest.raises(ValidationError) as caught:
        fencepost.connect("memory://?unknown_jobs=maybe")
    assert caught.value.field == "url.unknown_jobs"
    with pytest.raises(ValidationError) as argument:
        fencepost.connect("memory://", unknown_jobs="maybe")
    assert argument.value.field == "unknown_jobs"
