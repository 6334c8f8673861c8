"""Commands to running executions: where a request goes, and when a command claim holds.

Pure rules shared by every backend. The memory backend calls them directly; the
SQL backends state the same predicates in their statements (``claim_commands``,
``complete_command``, ``release_command`` in each ``queries.sql``).
"""

from __future__ import annotations

from datetime import datetime

from fencepost.domain.errors import NotRunning
from fencepost.domain.machine import holds, lease_is_live
from fencepost.domain.models import Command, Execution, Fence
from fencepost.domain.states import WAITING_STATES, CommandKind, CommandState, State


def on_request(execution: Execution, kind: CommandKind) -> CommandState:
    """The state a new ``kind`` command for ``execution`` is stored in, or :class:`NotRunning`.

    * RUNNING: PENDING, for the worker that holds it to claim.
    * Not started (SCHEDULED, RETRY_WAIT) and ``kind`` is cancel: DONE — the store
      cancels the execution itself, in the same transaction.
    * Anything else (a finished execution; pause or resume of one that is not
      running) raises :class:`NotRunning`.
    """
    if execution.state is State.RUNNING:
        return CommandState.PENDING
    if execution.state in WAITING_STATES and kind is CommandKind.CANCEL:
        return CommandState.DONE
    raise NotRunning(execution.id, execution.state, kind)


def new_command(
    command_id: str,
    execution_id: str,
    kind: CommandKind,
    state: CommandState,
    actor: str,
    now: datetime,
) -> Command:
    """The command a request stores: unclaimed, DONE at once when ``state`` says so."""
    return Command(
        id=command_id,
        execution_id=execution_id,
        kind=kind,
        state=state,
        requested_by=actor,
        requested_at=now,
        owner=None,
        claim_until=None,
        epoch=None,
        done_at=now if state is CommandState.DONE else None,
    )


#: A command claim is live strictly before ``claim_until``, as a lease is before its
#: ``lease_until``: the same rule.
claim_is_live = lease_is_live


def claimable(command: Command, now: datetime) -> bool:
    """PENDING, or CLAIMED under a claim that has expired (its claimer went quiet)."""
    if command.state is CommandState.PENDING:
        return True
    return command.state is CommandState.CLAIMED and not claim_is_live(command.claim_until, now)


def may_complete(
    row: Command, command: Command, lease: Fence, execution: Execution, now: datetime
) -> bool:
    """The fence of ``complete_command``, on both sides, from the rows as stored.

    ``row`` is the stored command named by ``command``: it must still be CLAIMED
    by ``command.owner`` under a live claim; ``lease`` must belong to that same
    owner and execution and hold ``execution`` (:func:`~fencepost.domain.machine.holds`).
    """
    return (
        row.state is CommandState.CLAIMED
        and row.owner is not None
        and row.owner == command.owner == lease.owner
        and claim_is_live(row.claim_until, now)
        and row.execution_id == command.execution_id == lease.execution_id == execution.id
        and holds(execution, lease.owner, lease.epoch, now)
    )
