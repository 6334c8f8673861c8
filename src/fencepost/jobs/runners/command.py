"""Run a job as an external command: argv from templates, never through a shell.

The command runs in its own session, hence its own process group, so that a
stop (timeout, cancel, worker shutdown) reaches everything it started — a
shell's background children included — and so that nothing it started outlives
the attempt: when the command exits, any process still left in its group is
ended the same way (SIGTERM, a grace period, SIGKILL).

Only the last :data:`TAIL_CHARS` characters of stdout and stderr are kept
(decoded as UTF-8, undecodable bytes replaced): a chatty command costs no
memory beyond that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from fencepost.domain.errors import FencepostError, ValidationError
from fencepost.jobs.context import Context
from fencepost.jobs.runners import templates
from fencepost.worker.errors import Cancelled, PermanentFailure

#: How much of stdout and stderr is kept, in characters (from the end).
TAIL_CHARS = 4096

#: How long a stopped command's process group has between SIGTERM and SIGKILL, in seconds.
KILL_GRACE = 2.0

#: How much of stderr a :class:`CommandFailed` message quotes, in characters.
_STDERR_EXCERPT = 500

#: How often the runner looks for a stop request while the command runs.
_POLL = 0.05

#: How long to wait for the output readers once every process in the group is gone. They
#: only outlast that when a process escaped the group (setsid) still holding the pipes.
_READER_JOIN = 1.0


class CommandFailed(FencepostError):
    """A command exited with a non-zero status or was killed by a signal (retryable).

    ``returncode`` is the exit status, or minus the signal number; ``stderr`` is
    the tail of its standard error.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class CommandRunner:
    """``run(ctx, inputs)`` for a command job: returns the command's stdout tail.

    ``argv`` is a list of templates (see :mod:`~fencepost.jobs.runners.templates`);
    each becomes exactly one argument. The command's environment is the
    worker's plus ``FENCEPOST_EXECUTION_ID``, ``FENCEPOST_SLOT`` (empty when
    unscheduled), ``FENCEPOST_ATTEMPT``, ``FENCEPOST_EPOCH`` and ``FENCEPOST_JOB``;
    its stdin is empty.

    Exit status 0 returns stdout's tail, trailing whitespace stripped. Any other
    status raises :class:`CommandFailed`; an executable that is missing or not
    executable raises :class:`PermanentFailure`. When the context asks to stop,
    the process group gets SIGTERM, then SIGKILL after ``kill_grace`` seconds,
    and :class:`Cancelled` is raised.
    """

    def __init__(self, argv: Sequence[str], *, kill_grace: float = KILL_GRACE) -> None:
        if isinstance(argv, str) or not argv:
            raise ValidationError("command", "must be a non-empty list of strings")
        for index, arg in enumerate(argv):
            if not isinstance(arg, str):
                raise ValidationError(f"command[{index}]", f"must be a string, got {arg!r}")
        self.argv = tuple(argv)
        self.kill_grace = kill_grace
        self._templates = tuple(
            templates.parse(arg, field=f"command[{i}]") for i, arg in enumerate(self.argv)
        )

    def __repr__(self) -> str:
        return f"CommandRunner({list(self.argv)!r})"

    def __call__(self, ctx: Context, inputs: dict[str, Any]) -> str:
        """Run the command for one attempt (blocking; call it on a worker thread)."""
        if ctx.stopping:
            raise Cancelled(ctx.stop_reason or "stop requested")
        values = templates.values_for(ctx, inputs)
        argv = [templates.render(t, values) for t in self._templates]
        proc = _start(argv, _environment(ctx))
        assert proc.stdout is not None  # both are PIPE
        assert proc.stderr is not None
        stdout, stderr = _Tail(proc.stdout, "stdout"), _Tail(proc.stderr, "stderr")
        try:
            returncode = _wait_unless_stopped(proc, ctx)
        finally:
            # Whatever ended the wait (exit, stop request, an exception in this thread),
            # nothing the command started may keep running after the attempt.
            _end_group(proc, self.kill_grace)
        if returncode is None:
            raise Cancelled(ctx.stop_reason or "stop requested")
        return _outcome(returncode, stdout.text(), stderr.text())


def _environment(ctx: Context) -> dict[str, str]:
    return {
        **os.environ,
        "FENCEPOST_EXECUTION_ID": ctx.execution_id,
        "FENCEPOST_SLOT": ctx.slot or "",
        "FENCEPOST_ATTEMPT": str(ctx.attempt),
        "FENCEPOST_EPOCH": str(ctx.epoch),
        "FENCEPOST_JOB": ctx.job,
    }


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, which a stop signals as a whole
        )
    except (FileNotFoundError, PermissionError) as exc:
        # Retrying cannot make a missing or non-executable program appear.
        raise PermanentFailure(f"cannot run {argv[0]!r}: {exc.strerror}") from exc
    except OSError as exc:  # out of processes, file descriptors or memory: may pass
        raise CommandFailed(f"cannot start {argv[0]!r}: {exc}") from exc


def _wait_unless_stopped(proc: subprocess.Popen[bytes], ctx: Context) -> int | None:
    """The command's exit status, or None as soon as the context asks to stop."""
    while not ctx.stopping:
        try:
            return proc.wait(timeout=_POLL)
        except subprocess.TimeoutExpired:
            continue
    return None


def _end_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """End every process left in the command's group: SIGTERM, ``grace`` seconds, SIGKILL.

    Returns at once when the group is already empty (the usual case after an exit).
    """
    group = proc.pid  # start_new_session made the command its group's leader
    if _signal_group(group, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while _group_exists(group, proc) and time.monotonic() < deadline:
            time.sleep(0.02)
        _signal_group(group, signal.SIGKILL)
    proc.wait()


def _group_exists(group: int, proc: subprocess.Popen[bytes]) -> bool:
    # Reap the leader first: as a zombie it would still count as a member.
    proc.poll()
    return _signal_group(group, 0)


def _signal_group(group: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False when no process is left in it."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    return True


def _outcome(returncode: int, stdout: str, stderr: str) -> str:
    if returncode == 0:
        return stdout.rstrip()
    if returncode < 0:
        message = f"killed by signal {_signal_name(-returncode)}"
    else:
        message = f"exit code {returncode}"
    excerpt = stderr.strip()[-_STDERR_EXCERPT:]
    if excerpt:
        message += f": {excerpt}"
    raise CommandFailed(message, returncode=returncode, stderr=stderr)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Tail:
    """The last :data:`TAIL_CHARS` characters of a pipe, drained on a thread.

    Draining continuously matters as much as the bound: a command whose pipe
    fills up blocks on its next write and would never exit.
    """

    # UTF-8 needs at most 4 bytes per character; one more character's worth
    # absorbs a sequence cut in half at the front.
    _KEEP = (TAIL_CHARS + 1) * 4

    def __init__(self, pipe: IO[bytes], name: str) -> None:
        self._pipe = pipe
        self._buffer = bytearray()
        self._thread = threading.Thread(target=self._drain, name=f"fencepost-{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        with self._pipe:
            # os.read returns whatever is there; a buffered read would wait for a full block.
            while chunk := os.read(self._pipe.fileno(), 65536):
                self._buffer += chunk
                if len(self._buffer) > 2 * self._KEEP:  # trim in batches, not per chunk
                    del self._buffer[: -self._KEEP]

    def text(self) -> str:
        """The tail read so far (all of it, once the pipe is closed)."""
        self._thread.join(_READER_JOIN)
        data = bytes(self._buffer[-self._KEEP :])
        # Invalid UTF-8 becomes U+FFFD here and so does U+0000 (no store can hold it):
        # the output is the command's result or error, and must be storable as is.
        return data.decode("utf-8", errors="replace")[-TAIL_CHARS:].replace("\x00", "\ufffd")
