"""The HTTP job runner honours ``Retry-After`` on a 429 or 503, against a real local server.

A 429 or 503 with a readable ``Retry-After`` (seconds or an HTTP date) raises
:class:`Retry` with that delay, so the worker fails the attempt and makes the retry
due exactly then; without the header (or on another status) it stays the retryable
:class:`HttpFailed` and the job's backoff applies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fencepost.app import App
from fencepost.domain.errors import HttpFailed, Retry
from fencepost.domain.models import Lease
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.jobs.context import Context
from fencepost.jobs.runners import HttpRunner


class _Server(ThreadingHTTPServer):
    #: Answers to give, in order: (status, headers); then 200 with a JSON body.
    answers: list[tuple[int, dict[str, str]]]
    seen: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.seen.append(self.path)
        if self.server.answers:
            status, headers = self.server.answers.pop(0)
            body = f"status {status}".encode()
            content_type = "text/plain"
        else:
            status, headers = 200, {}
            body = json.dumps({"ok": True}).encode()
            content_type = "application/json"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, _Server]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.answers = []
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def context() -> Context:
    now = datetime.now(UTC)
    lease = Lease(
        execution_id="0190-exec",
        owner="w",
        epoch=1,
        lease_until=now + timedelta(seconds=30),
        attempt=1,
        max_attempts=3,
        job="call",
        job_version=None,
        inputs={},
        timeout=None,
        schedule_id=None,
        slot=None,
        due_at=now,
    )
    return Context(lease)


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_in_seconds_becomes_retry(server: tuple[str, _Server], status: int) -> None:
    base, httpd = server
    httpd.answers = [(status, {"Retry-After": "7"})]
    with pytest.raises(Retry) as caught:
        HttpRunner(method="POST", url=f"{base}/hook")(context(), {})
    assert caught.value.after == 7.0
    assert str(caught.value) == (
        f"POST {base}/hook: HTTP {status}: status {status} (retry after 7 s)"
    )
    cause = caught.value.__cause__
    assert isinstance(cause, HttpFailed)
    assert cause.status == status


def test_a_retry_after_http_date_becomes_retry(server: tuple[str, _Server]) -> None:
    base, httpd = server
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=90)
    httpd.answers = [(503, {"Retry-After": format_datetime(when, usegmt=True)})]
    before = datetime.now(UTC)
    with pytest.raises(Retry) as caught:
        HttpRunner(method="POST", url=f"{base}/hook")(context(), {})
    after = datetime.now(UTC)
    # Measured from the runner's now, which lies between before and after.
    assert (when - after).total_seconds() <= caught.value.after <= (when - before).total_seconds()
    httpd.answers = [(429, {"Retry-After": "Tue, 01 Dec 2015 11:00:00 GMT"})]  # past: now
    with pytest.raises(Retry) as past:
        HttpRunner(method="POST", url=f"{base}/hook")(context(), {})
    assert past.value.after == 0.0


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (429, {}),
        (503, {}),
        (429, {"Retry-After": "soon"}),
        (429, {"Retry-After": "-3"}),
        (429, {"Retry-After": "9" * 40}),  # past the 100 years any delay may be: a mistake
        (500, {"Retry-After": "5"}),  # only 429 and 503 say when to come back
        (408, {"Retry-After": "5"}),
    ],
)
def test_otherwise_the_answer_stays_a_plain_retryable_failure(
    server: tuple[str, _Server], status: int, headers: dict[str, str]
) -> None:
    base, httpd = server
    httpd.answers = [(status, headers)]
    with pytest.raises(HttpFailed) as caught:
        HttpRunner(method="POST", url=f"{base}/hook")(context(), {})
    assert not isinstance(caught.value, Retry)
    assert caught.value.status == status


def test_a_worker_retries_an_http_job_exactly_when_the_server_asked(
    server: tuple[str, _Server], tmp_path: Path
) -> None:
    """A 429 with ``Retry-After: 1``: the retry is due one second after the failure, not
    after the job's hour-long backoff; the second attempt gets the 200."""
    base, httpd = server
    httpd.answers = [(429, {"Retry-After": "1"})]
    (tmp_path / "call.yaml").write_text(
        "name: call\nversion: 1\n"
        "retry: {max_attempts: 2, base_delay: 1h, max_delay: 1h}\n"
        f"run:\n  http:\n    method: POST\n    url: {base}/hook\n"
    )
    app = App("memory://", definitions=tmp_path)
    try:
        eid = app.submit("call").id
        worker = app.worker(poll_interval=0.01)
        worker.start()
        try:
            done = app.store.wait(eid, timeout=30)
        finally:
            worker.stop(immediate=True)
            assert worker.join(10), "the worker did not stop"
        assert (done.state, done.result, done.attempt) == (State.SUCCEEDED, {"ok": True}, 2)
        (failed,) = [t for t in app.store.transitions(eid) if t.event is Event.FAILED]
        assert failed.to_state is State.RETRY_WAIT
        assert failed.reason == f"Retry: POST {base}/hook: HTTP 429: status 429 (retry after 1 s)"
        assert done.due_at == failed.at + timedelta(seconds=1)
        first, second = app.store.attempts(eid)
        assert (first.outcome, second.outcome) == (
            AttemptOutcome.FAILED,
            AttemptOutcome.SUCCEEDED,
        )
        assert second.started_at >= done.due_at
        assert httpd.seen == ["/hook", "/hook"]
    finally:
        app.close()
