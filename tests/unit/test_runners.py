"""The runners behind definition files: real subprocesses and a real local HTTP server."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fencepost.domain.errors import Cancelled, PermanentFailure, ValidationError
from fencepost.domain.models import Lease
from fencepost.jobs.context import Context, RunControl
from fencepost.jobs.runners import CommandFailed, CommandRunner, HttpFailed, HttpRunner, templates
from fencepost.jobs.runners.command import KILL_GRACE, TAIL_CHARS

PY = sys.executable


def context(control: RunControl | None = None, **changes: Any) -> Context:
    """A context for one attempt, driven by ``control``; ``changes`` override the
    lease's fields."""
    fields: dict[str, Any] = {
        "execution_id": "0190-exec",
        "owner": "worker-1",
        "epoch": 7,
        "lease_until": datetime.now(UTC) + timedelta(seconds=30),
        "due_at": datetime.now(UTC),
        "attempt": 2,
        "max_attempts": 5,
        "job": "report",
        "job_version": 1,
        "inputs": {},
        "timeout": None,
        "schedule_id": "s-1",
        "slot": "2026-03-29T01:00:00Z",
    }
    fields.update(changes)
    return Context(Lease(**fields), control)


def python(code: str, *args: str) -> CommandRunner:
    """A command running ``code`` with this interpreter (``code`` must hold no braces)."""
    return CommandRunner([PY, "-c", code, *args])


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process: a zombie has exited and merely awaits its reaper.

    (In a container whose PID 1 does not reap orphans, a killed grandchild stays a zombie.)
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs: assume alive, the conservative answer
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.01)
    raise AssertionError(f"{path} was not written")


# -- templates -----------------------------------------------------------------------


def test_templates_substitute_from_the_mapping_only() -> None:
    template = templates.parse("{{x}} {inputs.a}-{attempt}/{slot}", field="f")
    values = templates.values_for(context(slot=None), {"a": "A"})
    assert templates.render(template, values) == "{x} A-2/"


@pytest.mark.parametrize(
    ("value", "text"),
    [("s", "s"), (None, ""), (5, "5"), (1.5, "1.5"), (True, "true"), ([1, "é"], '[1,"é"]')],
)
def test_template_values_render_as_text_or_compact_json(value: object, text: str) -> None:
    template = templates.parse("{inputs.v}", field="f")
    assert templates.render(template, {"inputs.v": value}) == text


def test_a_json_body_keeps_the_type_of_a_whole_string_field() -> None:
    body = {"n": "{inputs.n}", "label": "n={inputs.n}", "list": ["{slot}"], "k": 1}
    values = templates.values_for(context(slot=None), {"n": 5})
    assert templates.render_json(body, values, field="json") == {
        "n": 5,
        "label": "n=5",
        "list": [None],
        "k": 1,
    }


def test_a_missing_input_is_a_permanent_failure_naming_it() -> None:
    template = templates.parse("--day={inputs.day}", field="f")
    with pytest.raises(PermanentFailure, match="needs input 'day'"):
        templates.render(template, templates.values_for(context(), {}))


# -- command -------------------------------------------------------------------------


def test_command_sees_its_identity_and_returns_its_stdout_tail() -> None:
    names = ["EXECUTION_ID", "SLOT", "ATTEMPT", "EPOCH", "JOB"]
    code = f"import os; print(*[os.environ['FENCEPOST_' + n] for n in {names!r}], sep='|')"
    result = python(code + "; print('  ')")(context(), {})
    assert result == "0190-exec|2026-03-29T01:00:00Z|2|7|report"


def test_an_unscheduled_execution_has_an_empty_slot_variable() -> None:
    code = "import os; print(repr(os.environ['FENCEPOST_SLOT']))"
    assert python(code)(context(slot=None, schedule_id=None), {}) == "''"


def test_command_keeps_the_environment_of_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FP_TEST_MARKER", "kept")
    assert python("import os; print(os.environ['FP_TEST_MARKER'])")(context(), {}) == "kept"


def test_a_template_value_is_one_argument_inserted_literally() -> None:
    tricky = "two words {execution_id} }{ $HOME; rm -rf /"
    runner = python("import json, sys; print(json.dumps(sys.argv[1:]))", "{inputs.v}", "x{{y}}")
    assert json.loads(runner(context(), {"v": tricky})) == [tricky, "x{y}"]


def test_only_the_last_characters_of_the_output_are_kept() -> None:
    code = "import sys; sys.stdout.write('a' * 100000 + 'b' * 10); sys.stderr.write('e' * 100000)"
    result = python(code)(context(), {})
    assert len(result) == TAIL_CHARS
    assert result.endswith("a" * (TAIL_CHARS - 10) + "b" * 10)


def test_a_non_zero_exit_is_a_retryable_command_failure() -> None:
    code = "import sys; sys.stderr.write('x' * 1000 + 'disk full\\n'); sys.exit(3)"
    with pytest.raises(CommandFailed) as caught:
        python(code)(context(), {})
    assert caught.value.returncode == 3
    assert str(caught.value).startswith("exit code 3: xxx")
    assert str(caught.value).endswith("disk full")
    assert len(str(caught.value)) == len("exit code 3: ") + 500
    assert not isinstance(caught.value, PermanentFailure)


def test_a_silent_failure_says_just_the_exit_code() -> None:
    with pytest.raises(CommandFailed, match=r"^exit code 1$"):
        CommandRunner(["false"])(context(), {})


def test_a_command_killed_by_a_signal_names_it() -> None:
    with pytest.raises(CommandFailed, match=r"^killed by signal SIGKILL$") as caught:
        python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")(context(), {})
    assert caught.value.returncode == -9


def test_a_missing_executable_is_a_permanent_failure(tmp_path: Path) -> None:
    with pytest.raises(PermanentFailure, match="cannot run 'fp-no-such-program'"):
        CommandRunner(["fp-no-such-program"])(context(), {})
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PermanentFailure, match="Permission denied"):
        CommandRunner([str(script)])(context(), {})


def test_a_missing_input_fails_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    runner = CommandRunner(["touch", str(marker), "{inputs.day}"])
    with pytest.raises(PermanentFailure, match="'day'"):
        runner(context(), {})
    assert not marker.exists()


def test_a_context_already_stopping_starts_nothing(tmp_path: Path) -> None:
    control = RunControl()
    ctx = context(control)
    control.request_stop("worker shutting down")
    marker = tmp_path / "ran"
    with pytest.raises(Cancelled, match="worker shutting down"):
        CommandRunner(["touch", str(marker)])(ctx, {})
    assert not marker.exists()


def run_in_thread(runner: CommandRunner, ctx: Context) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(runner(ctx, {}))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_a_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The shell and its background grandchild: a signal to the shell alone would
    # leave the grandchild running.
    script = 'sleep 30 & echo $$ $! > "$1"; sleep 30'
    runner = CommandRunner(["sh", "-c", script, "sh", str(pids)])
    control = RunControl()
    ctx = context(control)
    thread, outcome = run_in_thread(runner, ctx)
    shell, grandchild = map(int, wait_for_file(pids).split())
    assert running(shell)
    assert running(grandchild)

    started = time.monotonic()
    control.request_stop("timed out")
    thread.join(KILL_GRACE + 5)
    assert not thread.is_alive()
    assert time.monotonic() - started < KILL_GRACE + 2
    [error] = outcome
    assert isinstance(error, Cancelled)
    assert error.reason == "timed out"
    assert not running(shell)
    assert not running(grandchild)


def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = 'trap "" TERM; sleep 30 & echo $$ $! > "$1"; wait'
    runner = CommandRunner(["sh", "-c", script, "sh", str(pids)], kill_grace=0.3)
    control = RunControl()
    ctx = context(control)
    thread, outcome = run_in_thread(runner, ctx)
    shell, grandchild = map(int, wait_for_file(pids).split())
    control.request_stop("cancelled by user")
    thread.join(5)
    assert isinstance(outcome[0], Cancelled)
    assert not running(shell)
    # SIGKILL is delivered asynchronously: on a loaded machine the sleep may take a moment.
    deadline = time.monotonic() + 2.0
    while running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not running(grandchild)


def test_processes_left_behind_by_a_finished_command_are_ended() -> None:
    runner = CommandRunner(["sh", "-c", "sleep 30 & echo $!"], kill_grace=0.3)
    leftover = int(runner(context(), {}))
    assert not running(leftover)


def test_command_runner_refuses_bad_argv() -> None:
    with pytest.raises(ValidationError, match="non-empty list"):
        CommandRunner([])
    with pytest.raises(ValidationError, match="non-empty list"):
        CommandRunner("echo hi")
    with pytest.raises(ValidationError) as caught:
        CommandRunner(["echo", "{nope}"])
    assert caught.value.field == "command[1]"
    with pytest.raises(ValidationError) as caught:
        CommandRunner(["sleep", 5])  # type: ignore[list-item]
    assert caught.value.field == "command[1]"


# -- http ----------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """``/echo…`` answers with the request as JSON; ``/status/N`` answers N; ``/text`` text."""

    server: _Server

    def _respond(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers)}
        )
        if self.path.startswith("/status/"):
            status = int(self.path.rsplit("/", 1)[1])
            self._send(status, "text/plain", f"status {status} body".encode())
        elif self.path == "/text":
            self._send(200, "text/plain; charset=utf-8", b"t" * 10000)
        elif self.path == "/slow":
            time.sleep(1.0)
            self._send(200, "text/plain", b"late")
        elif self.path == "/bad-json":
            self._send(200, "application/json", b"{not json")
        else:
            echo = {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(body) if body else None,
            }
            self._send(200, "application/json", json.dumps(echo).encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 302:
            self.send_header("Location", "/elsewhere")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _respond

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    seen: list[dict[str, Any]]

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that timed out on /slow hung up first: expected
        super().handle_error(request, client_address)


@pytest.fixture
def server() -> Iterator[tuple[str, _Server]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_http_200_json_is_the_result_and_identity_headers_are_sent(
    server: tuple[str, _Server],
) -> None:
    base, _ = server
    runner = HttpRunner(method="GET", url=f"{base}/echo", headers={"Authorization": "Bearer t"})
    result = runner(context(), {"ignored": True})
    assert result["method"] == "GET"
    assert result["body"] is None  # GET sends no body
    headers = result["headers"]
    assert headers["x-fencepost-execution-id"] == "0190-exec"
    assert headers["x-fencepost-attempt"] == "2"
    assert headers["x-fencepost-epoch"] == "7"
    assert headers["x-fencepost-slot"] == "2026-03-29T01:00:00Z"
    assert headers["authorization"] == "Bearer t"


def test_http_sends_no_slot_header_for_an_unscheduled_execution(
    server: tuple[str, _Server],
) -> None:
    base, _ = server
    result = HttpRunner(method="GET", url=f"{base}/echo")(context(slot=None), {})
    assert "x-fencepost-slot" not in result["headers"]


def test_http_post_sends_the_inputs_without_a_json_body(server: tuple[str, _Server]) -> None:
    base, _ = server
    result = HttpRunner(method="POST", url=f"{base}/echo")(context(), {"day": "2026-03-29"})
    assert result["body"] == {"day": "2026-03-29"}


def test_http_templates_in_body_url_and_headers(server: tuple[str, _Server]) -> None:
    base, _ = server
    runner = HttpRunner(
        method="PUT",
        url=base + "/echo/{inputs.name}?attempt={attempt}",
        json={"n": "{inputs.n}", "note": "run {execution_id}"},
        headers={"Idempotency-Key": "{execution_id}:{attempt}"},
    )
    result = runner(context(), {"name": "a b/c?d", "n": 5})
    assert result["path"] == "/echo/a%20b%2Fc%3Fd?attempt=2"
    assert result["body"] == {"n": 5, "note": "run 0190-exec"}
    assert result["headers"]["idempotency-key"] == "0190-exec:2"


def test_http_text_responses_are_cut_to_the_limit(server: tuple[str, _Server]) -> None:
    base, _ = server
    assert HttpRunner(method="GET", url=f"{base}/text")(context(), {}) == "t" * 4096


def test_http_mislabelled_json_is_returned_as_text(server: tuple[str, _Server]) -> None:
    base, _ = server
    assert HttpRunner(method="GET", url=f"{base}/bad-json")(context(), {}) == "{not json"


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_http_server_errors_and_throttling_are_retryable(
    server: tuple[str, _Server], status: int
) -> None:
    base, _ = server
    with pytest.raises(HttpFailed) as caught:
        HttpRunner(method="POST", url=f"{base}/status/{status}")(context(), {})
    assert caught.value.status == status
    assert str(caught.value) == f"POST {base}/status/{status}: HTTP {status}: status {status} body"


@pytest.mark.parametrize("status", [400, 404, 422, 302])
def test_http_client_errors_and_redirects_are_permanent(
    server: tuple[str, _Server], status: int
) -> None:
    base, httpd = server
    with pytest.raises(PermanentFailure, match=f"HTTP {status}"):
        HttpRunner(method="GET", url=f"{base}/status/{status}")(context(), {})
    assert [r["path"] for r in httpd.seen] == [f"/status/{status}"]  # no redirect followed


def test_http_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, and nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(HttpFailed, match="ConnectError") as caught:
        HttpRunner(method="GET", url=f"http://127.0.0.1:{port}/")(context(), {})
    assert caught.value.status is None


def test_http_timeout_is_retryable(server: tuple[str, _Server]) -> None:
    base, _ = server
    with pytest.raises(HttpFailed, match="Timeout"):
        HttpRunner(method="GET", url=f"{base}/slow", timeout=0.2)(context(), {})


def test_http_a_context_already_stopping_sends_nothing(server: tuple[str, _Server]) -> None:
    base, httpd = server
    control = RunControl()
    ctx = context(control)
    control.request_stop("cancelled")
    with pytest.raises(Cancelled):
        HttpRunner(method="POST", url=f"{base}/echo")(ctx, {})
    assert httpd.seen == []


def test_http_runner_refuses_bad_arguments() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"method": "TRACE", "url": "http://h"}, "method"),
        ({"method": "GET", "url": "file:///etc/passwd"}, "url"),
        ({"method": "GET", "url": "http://h", "timeout": float("inf")}, "timeout"),
        ({"method": "GET", "url": "http://h", "headers": {"x-fencepost-slot": "s"}}, "headers"),
        ({"method": "GET", "url": "http://h/{bogus}"}, "url"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as caught:
            HttpRunner(**kwargs)
        assert caught.value.field.startswith(field), kwargs
