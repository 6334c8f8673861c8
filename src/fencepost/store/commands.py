"""The store's command verbs: cancel requests to running executions, claimed and
answered by the worker that holds their lease (a part of :class:`~fencepost.store.base.Store`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from datetime import timedelta

from fencepost.domain.checks import (
    require_int,
    require_name,
)
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.models import (
    Command,
    Fence,
)
from fencepost.domain.states import CommandKind
from fencepost.store.core import StoreCore
from fencepost.store.values import (
    DEFAULT_COMMAND_TTL,
    MAX_LIMIT,
    check_fences,
    names_of,
)

__all__ = ["CommandVerbs"]


class CommandVerbs(StoreCore):
    """Commands: an operator's requests to a running execution, and the worker's side."""

    def request(
        self, execution_id: str, kind: CommandKind | str, *, actor: str = "client"
    ) -> Command:
        """Ask a running execution to ``kind`` (cancel, pause, resume); return the command.

        ``kind`` is a :class:`CommandKind` or its value (``"cancel"``); anything else
        raises :class:`ValidationError` on ``kind``. Unknown ids raise :class:`NotFound`.
        By the execution's state, in one transaction:

        * RUNNING: a PENDING command is stored, for the worker holding the
          execution to claim (:meth:`claim_commands`) and complete.
        * SCHEDULED or RETRY_WAIT, and ``kind`` is cancel: the execution is
          cancelled at once (the transition :meth:`cancel` makes, by ``actor``)
          and the command is stored DONE (``done_at = now``, no ``owner`` or ``epoch``).
        * Otherwise — finished, or pause/resume of an execution that is not
          running — :class:`NotRunning` is raised and nothing is stored.
        """
        command_kind, arguments = self._requested(kind, actor)
        return self._request(execution_id, command_kind, **arguments)

    def _requested(self, kind: CommandKind | str, actor: str) -> tuple[CommandKind, dict[str, str]]:
        """:meth:`request`'s kind validated, and the keyword arguments of :meth:`_request`
        (the actor validated, a new command id)."""
        try:
            command_kind = CommandKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in CommandKind)
            raise ValidationError("kind", f"unknown command {kind!r} (one of {known})") from None
        return command_kind, {
            "actor": require_name(actor, "actor"),
            "command_id": self._ids.new(int(self.clock.now().timestamp() * 1000)),
        }

    @abstractmethod
    def _request(
        self, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
    ) -> Command:
        """Store a validated request under ``command_id`` (see :meth:`request`).

        Decide with :func:`fencepost.domain.commands.on_request` on the execution
        as locked by this transaction.
        """

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = DEFAULT_COMMAND_TTL,
        limit: int = 100,
    ) -> list[Command]:
        """Atomically claim up to ``limit`` open commands of ``execution_ids`` for ``owner``.

        Claimable, by the store's clock ``now``: PENDING commands, and CLAIMED ones
        whose claim has expired (``claim_until <= now``). Oldest request first
        (``requested_at``, then id). Each becomes CLAIMED with ``owner`` and
        ``claim_until = now + ttl``. Commands locked by a concurrent claim are
        skipped. This does not check that ``owner`` holds the executions:
        :meth:`complete_command` does. No ``execution_ids``: ``[]``, without a
        round trip to the database.
        """
        owner = require_name(owner, "owner")
        duration = as_duration(ttl, field="ttl")
        count = require_int(limit, "limit", low=1, high=MAX_LIMIT)
        ids = names_of(execution_ids, "execution_ids")
        if not ids:
            return []
        return self._claim_commands(owner, tuple(dict.fromkeys(ids)), ttl=duration, limit=count)

    @abstractmethod
    def _claim_commands(
        self, owner: str, execution_ids: tuple[str, ...], *, ttl: timedelta, limit: int
    ) -> list[Command]:
        """Claim with validated arguments (see :meth:`claim_commands`), in request order."""

    def complete_command(self, command: Command, lease: Fence) -> Command:
        """Mark a claimed command delivered: CLAIMED -> DONE, fenced on both sides.

        Only if, by the store's clock ``now``, the stored command is still CLAIMED
        by ``command.owner`` with ``now < claim_until``; ``lease`` belongs to that
        owner and to the command's execution; and the lease holds the execution
        (RUNNING, same owner, same epoch, ``now < lease_until``). Then ``done_at =
        now`` and ``epoch = lease.epoch``, and the DONE command is returned.
        Otherwise :class:`StaleLease` is raised and nothing changes.
        """
        check_fences((lease,))
        if command.owner is None or command.owner != lease.owner:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        if command.execution_id != lease.execution_id:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        done = self._complete_command(command, lease)
        if done is None:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        return done

    @abstractmethod
    def _complete_command(self, command: Command, lease: Fence) -> Command | None:
        """Apply the fence of :meth:`complete_command`; the DONE command, or None if refused.

        ``command.owner == lease.owner`` and the execution ids already match.
        """

    def release_command(self, command: Command) -> None:
        """Give a claimed command back: CLAIMED by ``command.owner`` -> PENDING, claim cleared.

        For a worker that claimed a command and found it does not hold the
        execution: the holder can then claim it. A command no longer CLAIMED by
        ``command.owner`` (completed, or claimed by another) is left as it is.
        """
        if command.owner is not None:
            self._release_command(command)

    @abstractmethod
    def _release_command(self, command: Command) -> None:
        """Release a command claimed by ``command.owner`` (not None); else do nothing."""

    @abstractmethod
    def commands(self, execution_id: str) -> list[Command]:
        """Every command of one execution, oldest first; :class:`NotFound` if unknown."""
