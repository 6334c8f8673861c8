"""A submit encodes its inputs once: the job catalogue's schema check encodes them to
check them as a handler gets them, and that text is what the store keeps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.domain import payloads


@pytest.fixture
def app(tmp_path: Path) -> Iterator[fencepost.App]:
    app = fencepost.App(f"sqlite:///{tmp_path / 'fencepost.db'}")

    @app.job("report")
    def report(day: str) -> None: ...

    yield app
    app.close()


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The values encoded as a submit's ``inputs`` from now on."""
    seen: list[Any] = []
    encode = payloads.encode

    def counting(value: Any, *, field: str, limit: int | None = None) -> str:
        if field == "inputs":
            seen.append(value)
        return encode(value, field=field, limit=limit)

    monkeypatch.setattr(payloads, "encode", counting)
    return seen


def test_a_published_job_s_inputs_are_encoded_once(app: fencepost.App, encoded: list[Any]) -> None:
    app.submit("report", {"day": "warm-up"})  # publishes the job: not what is counted
    encoded.clear()
    execution = app.submit("report", {"day": "2026-12-07"}, idempotency_key="k")
    assert encoded == [{"day": "2026-12-07"}]
    assert app.store.get(execution.id).inputs == {"day": "2026-12-07"}
    encoded.clear()
    app.store.submit_many([{"job": "report", "inputs": {"day": str(n)}} for n in range(3)])
    assert encoded == [{"day": str(n)} for n in range(3)]


def test_an_unpublished_job_s_inputs_are_encoded_once(tmp_path: Path, encoded: list[Any]) -> None:
    store = fencepost.connect(f"sqlite:///{tmp_path / 'plain.db'}")
    try:
        store.submit("anything", {"a": [1, 2]})
        assert encoded == [{"a": [1, 2]}]
    finally:
        store.close()
