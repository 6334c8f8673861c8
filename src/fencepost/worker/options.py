"""How a worker claims and paces itself: :class:`WorkerOptions`."""

from __future__ import annotations

from dataclasses import dataclass

from fencepost.worker.prefetch import DEFAULT_CONCURRENCY, DEFAULT_PREFETCH


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How a worker claims and paces itself. Every interval is in seconds."""

    owner: str | None = None  #: lease owner and node id; default ``host:pid``
    concurrency: int = DEFAULT_CONCURRENCY  #: handlers running at once
    prefetch: int = DEFAULT_PREFETCH  #: most leases held ahead of the handlers (0: none)
    buckets: tuple[int, ...] | None = None  #: claim only from these buckets
    max_per_bucket: int | None = None  #: cap RUNNING executions per bucket
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
