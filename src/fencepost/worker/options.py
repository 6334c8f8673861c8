"""How a worker claims and paces itself: :class:`WorkerOptions`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fencepost.domain.checks import INT32_MAX, MAX_QUEUE, require_int, require_name
from fencepost.domain.errors import ValidationError
from fencepost.worker.prefetch import DEFAULT_CONCURRENCY, DEFAULT_PREFETCH


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How a worker claims and paces itself. Every interval is in seconds."""

    owner: str | None = None  #: lease owner and node id; default ``host:pid``
    concurrency: int = DEFAULT_CONCURRENCY  #: handlers running at once
    prefetch: int = DEFAULT_PREFETCH  #: most leases held ahead of the handlers (0: none)
    buckets: tuple[int, ...] | None = None  #: claim only from these buckets
    max_per_bucket: int | None = None  #: cap RUNNING executions per bucket
    queues: Iterable[str] | None = None  #: claim only from these queues (None: every queue)
    #: At most N leases of a queue (one of ``queues``) held at once, buffered ones included.
    queue_concurrency: Mapping[str, int] | None = None
    grace: float = 30.0  #: on shutdown, how long running handlers may finish
    poll_interval: float = 0.05  #: idle wait between claims (NOTIFY wakes earlier)
    command_interval: float = 0.25  #: how often held executions' commands are polled
    progress_interval: float = 1.0  #: checkpoint progress is written at most this often
    reap_interval: float = 5.0  #: how often expired leases are timed out
    node_ttl: float = 30.0  #: node registration lifetime (renewed at a third of it)
    command_ttl: float = 5.0  #: how long a claimed command stays ours
    max_backoff: float = 5.0  #: the longest wait between tries while the store is down
    flush_batch: int = 128  #: while busy, completions are written once this many wait ...
    flush_delay: float = 0.02  #: ... or once the oldest has waited this long


def check_queues(
    queues: Iterable[str] | None, queue_concurrency: Mapping[str, int] | None
) -> tuple[tuple[str, ...] | None, dict[str, int]]:
    """A worker's ``queues`` (names, in order, once each) and ``queue_concurrency``, checked.

    Each limit is an integer >= 1 for one of ``queues``: a limit on a queue the
    worker does not claim from would never apply. Errors name the option.
    """
    if isinstance(queues, str):
        raise ValidationError("queues", f"must be a collection of names, not the string {queues!r}")
    names = None
    if queues is not None:
        names = tuple(Counter(require_name(q, "queues", max_len=MAX_QUEUE) for q in queues))
        if not names:
            raise ValidationError("queues", "must name at least one queue (None: every queue)")
    limits: dict[str, int] = {}
    if queue_concurrency is not None:
        if not isinstance(queue_concurrency, Mapping):
            raise ValidationError(
                "queue_concurrency", f"must map queue names to limits, got {queue_concurrency!r}"
            )
        for name, n in queue_concurrency.items():
            if names is None:
                raise ValidationError(
                    "queue_concurrency", f"limits {name!r}: name the worker's queues too"
                )
            if name not in names:
                raise ValidationError(
                    "queue_concurrency",
                    f"limits {name!r}, which is not one of the worker's queues {list(names)}",
                )
            limits[name] = require_int(n, "queue_concurrency", low=1, high=INT32_MAX)
    return names, limits
