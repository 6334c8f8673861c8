"""Nodes and bucket ownership: who declared which buckets, and what nobody covers."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fencepost.domain.models import Execution

#: The kind of node that claims executions: the only kind that owns or covers buckets.
WORKER = "worker"
#: The kind of node a live materializer registers as (its id is its ``owner``): what
#: tells an operator, and ``fencepost schedule add``, that schedules will fire.
SCHEDULER = "scheduler"


def default_node_id() -> str:
    """``host:pid``: unique per live process, recognisable in an operator's listing."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Registration:
    """A checked registration, as ``Store.register_node`` hands it to its backend."""

    node_id: str
    kind: str
    buckets: tuple[int, ...] | None  #: None means any bucket
    ttl: timedelta  #: the registration lapses this long after it is written
    jobs: tuple[tuple[str, int], ...] = ()  #: the (job, version) pairs it serves


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """A registered scheduler or worker process."""

    id: str  #: host:pid unless the process chose another id
    kind: str  #: "worker", "scheduler", ...
    buckets: tuple[int, ...] | None  #: the buckets it claims from; None means any bucket
    started_at: datetime
    heartbeat_at: datetime
    expires_at: datetime  #: its registration lapses here unless renewed
    #: The ``(job, version)`` pairs it serves (a worker's registry); empty for other kinds.
    jobs: tuple[tuple[str, int], ...] = ()

    def is_live(self, now: datetime) -> bool:
        """Registered and renewed in time: ``now < expires_at``."""
        return now < self.expires_at


@dataclass(frozen=True, kw_only=True, slots=True)
class BucketReport:
    """Who owns which bucket among the live workers, and the work nobody will pick up.

    Only workers (nodes of kind :data:`WORKER`) claim, so only they own or cover
    buckets: a live scheduler, whatever buckets it declared, changes nothing here.
    Workers that declared no buckets claim from any bucket: they cover every
    bucket (so nothing is unowned while one lives) but own none of them
    (they never make a bucket "owned twice").
    """

    num_buckets: int
    owners: dict[int, list[str]]  #: bucket -> live nodes that declared it
    duplicated: dict[int, list[str]]  #: buckets declared by two or more live nodes
    unowned: list[int]  #: buckets that no live node claims from
    floating: list[str]  #: live nodes that claim from any bucket
    orphans: list[Execution] = field(default_factory=list)  #: stuck work in unowned buckets


def ownership(nodes: Iterable[Node], num_buckets: int) -> BucketReport:
    """The ownership part of a :class:`BucketReport` for these live nodes.

    Nodes of any kind but :data:`WORKER` are left out: a materializer claims no
    execution, so a bucket only it "covers" is still one nobody will pick up.
    """
    owners: dict[int, list[str]] = {}
    floating: list[str] = []
    for node in sorted((n for n in nodes if n.kind == WORKER), key=lambda n: n.id):
        if node.buckets is None:
            floating.append(node.id)
            continue
        for bucket in sorted(set(node.buckets)):
            owners.setdefault(bucket, []).append(node.id)
    unowned = [] if floating else [b for b in range(num_buckets) if b not in owners]
    return BucketReport(
        num_buckets=num_buckets,
        owners=owners,
        duplicated={b: ids for b, ids in sorted(owners.items()) if len(ids) > 1},
        unowned=unowned,
        floating=floating,
    )
