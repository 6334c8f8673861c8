"""The runs a worker holds, kept alive and steered: heartbeats and commands.

Leases are renewed in one batch per lease length, a third of a lease after their
last renewal (sooner when a checkpoint left progress to write); a refused renewal
means the lease is lost, and the handler's result will be refused. Commands
(cancel, pause, resume) addressed to held executions are claimed, acknowledged
under the run's lease and applied; one for an execution no longer held goes back
for its holder.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta
from functools import partial

from fencepost.domain.errors import StaleLease
from fencepost.domain.models import JSON, Command
from fencepost.domain.states import CommandKind
from fencepost.worker.outbox import Outbox
from fencepost.worker.runs import CANCEL_REQUESTED, Run, RunOutcome, about
from fencepost.worker.state import WorkerState

log = logging.getLogger("fencepost.worker")


class HeldRuns:
    """Heartbeats and commands for the runs a worker holds (a part of ``Worker``).

    A cancel for a run still waiting in the claim buffer is decided at once: its
    outcome goes to ``outbox``.
    """

    def __init__(self, state: WorkerState, outbox: Outbox) -> None:
        self.state = state
        self.outbox = outbox

    def heartbeat(self, now: float) -> None:
        """Renew, in one batch per lease length, every lease whose beat is due.

        A lease is due a third of its length after it was last renewed; a
        checkpoint's progress makes it due after ``progress_interval``.
        """
        due: dict[timedelta, list[tuple[Run, JSON]]] = defaultdict(list)
        for run in list(self.state.runs.values()):
            dirty = run.control.has_progress()
            soon = (
                run.next_beat
                - run.spec.lease_ttl.total_seconds() / 3
                + self.state.options.progress_interval
            )
            if now >= run.next_beat or (dirty and now >= soon):
                dirty, progress = run.control.take_progress()
                due[run.spec.lease_ttl].append((run, progress if dirty else None))
        for ttl, beats in due.items():
            self.state.call(partial(self._renew, ttl, beats, now))

    def _renew(self, ttl: timedelta, beats: list[tuple[Run, JSON]], now: float) -> None:
        renewed = self.state.store.heartbeat_many([(run.lease, p) for run, p in beats], ttl=ttl)
        seconds = ttl.total_seconds()
        for (run, _), verdict in zip(beats, renewed, strict=True):
            if isinstance(verdict, StaleLease):
                if not run.ctx.lease_lost:
                    log.warning(
                        "execution %s (epoch %d, owner %s): heartbeat refused, lease lost; "
                        "the handler's result will be refused",
                        run.lease.execution_id,
                        run.lease.epoch,
                        self.state.owner,
                        extra=about(run.lease),
                    )
                run.control.lose()
                run.next_beat = float("inf")
            else:
                run.lease = verdict
                run.expires = now + seconds
                run.next_beat = now + seconds / 3

    def poll_commands(self, now: float) -> None:
        if not self.state.runs:
            return
        commands = self.state.store.claim_commands(
            self.state.owner, list(self.state.runs), ttl=self.state.options.command_ttl
        )
        for command in commands:
            self._deliver(command, now)

    def _deliver(self, command: Command, now: float) -> None:
        """Acknowledge and apply a command, or give it back if we do not hold its execution."""
        run = self.state.runs.get(command.execution_id)
        try:
            if run is None:  # finished or released since the claim: not ours any more
                raise StaleLease(command.execution_id, self.state.owner, 0)
            self.state.store.complete_command(command, run.lease)
        except StaleLease:
            log.info(
                "command %s for %s: not held by %s; released for its holder",
                command.kind.value,
                command.execution_id,
                self.state.owner,
                extra={"execution_id": command.execution_id, "owner": self.state.owner},
            )
            self.state.store.release_command(command)
            return
        self.state.counters.commands += 1
        log.info(
            "execution %s (epoch %d, owner %s): %s requested by %s",
            run.lease.execution_id,
            run.lease.epoch,
            self.state.owner,
            command.kind.value,
            command.requested_by,
            extra=about(run.lease),
        )
        if command.kind is CommandKind.CANCEL and self.state.buffer.remove(run):
            # Still waiting in the buffer: no handler to stop, cancel it at once.
            run.finished = True
            self.state.runs.pop(run.lease.execution_id, None)
            self.outbox.add(RunOutcome(run, "abort"))
        elif command.kind is CommandKind.CANCEL:
            run.cancel_requested = True
            if run.paused_at is not None:
                run.control.resume()
                run.resume(now)
            run.control.request_stop(CANCEL_REQUESTED)
        elif command.kind is CommandKind.PAUSE:
            if run.paused_at is None:
                run.paused_at = now
                run.control.pause()
        elif command.kind is CommandKind.RESUME and run.paused_at is not None:
            # Time spent paused does not count against the attempt's timeout.
            run.resume(now)
            run.control.resume()
