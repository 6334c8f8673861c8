"""How set-based backends apply a batch of fenced calls with one statement per round."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from fencepost.domain.models import Fence


def rounds(leases: Sequence[Fence]) -> Iterator[dict[str, int]]:
    """Split a batch so that no execution appears twice in one set-based statement.

    Each round maps execution id -> position in ``leases``. A set-based UPDATE
    that returns the ids it changed then names exactly the accepted items of
    the round. Rounds run in order, which gives a batch the meaning of applying
    its items one after another (a second completion of the same lease in one
    batch is stale, as it would be in two calls). Batches without repeats are
    one round.
    """
    return rounds_of([lease.execution_id for lease in leases])


def rounds_of(ids: Sequence[str]) -> Iterator[dict[str, int]]:
    """:func:`rounds` for a batch given by its ids (executions, schedules): id -> position."""
    pending = list(enumerate(ids))
    while pending:
        round_: dict[str, int] = {}
        later = []
        for position, id_ in pending:
            if id_ in round_:
                later.append((position, id_))
            else:
                round_[id_] = position
        yield round_
        pending = later
