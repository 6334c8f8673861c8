"""The store contract suite: the behaviour every backend must show.

Use it from a test module by providing a ``store_factory`` fixture — a callable
``(clock, **connect_options) -> Store`` that opens a fresh, empty store reading
time from ``clock`` (None: the system clock) — and subclassing :class:`StoreContract`::

    @pytest.fixture
    def store_factory(tmp_path):
        return lambda clock, **options: MyStore(tmp_path / "db", clock=clock, **options)

    class TestMyStore(StoreContract):
        pass

fencepost's own suite parametrizes that one fixture over every backend it ships.
All times are driven by a :class:`~fencepost.testing.ManualClock`, so every
boundary (``now == lease_until``, ``now == due_at``) is tested exactly.

One module a section, each a mixin on the shared fixtures of :mod:`.support`
(a backend being written may subclass one section alone):

* :mod:`.leasing` — :class:`LeasingContract`: claim, heartbeat, fencing, expiry and reaping;
* :mod:`.outcomes` — :class:`OutcomesContract`: complete, fail and retry, release, timeouts,
  abort;
* :mod:`.submitting` — :class:`SubmittingContract`: submit, submit_many, idempotency, find;
* :mod:`.reading` — :class:`ReadingContract`: get, transitions, attempts, query and paging;
* :mod:`.finding` — :class:`FindingContract`: query by attempt outcome and by due time;
* :mod:`.narrowing` — :class:`NarrowingContract`: query and count_by_state by limit key,
  owner, creation and finish time, error text;
* :mod:`.commands` — :class:`CommandsContract`: commands, cancel, reschedule, replay;
* :mod:`.schedules` — :class:`SchedulesContract`: schedule definitions;
* :mod:`.materializing` — :class:`MaterializingContract`: acquire, materialize, backfill;
* :mod:`.reports` — :class:`ReportsContract`: buckets, nodes, stats;
* :mod:`.slo` — :class:`SloContract`: the service-level report, its budget and pruning;
* :mod:`.pruning` — :class:`PruningContract`: prune;
* :mod:`.catalogue` — :class:`CatalogueContract`: the job catalogue and the submit rules
  it decides.
* :mod:`.queues` — :class:`QueuesContract`: named queues and queue-restricted claims.
* :mod:`.resizing` — :class:`BucketCountContract`: changing the bucket count.
* :mod:`.running_now` — :class:`RunningNowContract`: running a schedule now.
* :mod:`.snoozing` — :class:`SnoozingContract`: snooze, its fence and its bound.
* :mod:`.limit_keys` — :class:`LimitKeysContract`: limit keys on executions and schedules.
* :mod:`.flow_limits` — :class:`FlowLimitsContract`: rates, concurrency and per-key
  limits as every claim obeys them.
* :mod:`.flow_queues` — :class:`FlowQueuesContract`: paused queues, setting, removing
  and declaring limits, bad values.
* :mod:`.bulk` — :class:`BulkContract`: acting on many executions by ids or by filter,
  in batches (replay, cancel, retry now, delete), and deleting one.
* :mod:`.history` — :class:`HistoryContract`: the history charts' minute rows, their
  roll-up and its watermark, the windows, and prune.
"""

from __future__ import annotations

from fencepost.testing.contract.bulk import BulkContract
from fencepost.testing.contract.catalogue import CatalogueContract
from fencepost.testing.contract.commands import CommandsContract
from fencepost.testing.contract.finding import FindingContract
from fencepost.testing.contract.flow_limits import FlowLimitsContract
from fencepost.testing.contract.flow_queues import FlowQueuesContract
from fencepost.testing.contract.history import HistoryContract
from fencepost.testing.contract.leasing import LeasingContract
from fencepost.testing.contract.limit_keys import LimitKeysContract
from fencepost.testing.contract.materializing import MaterializingContract
from fencepost.testing.contract.narrowing import NarrowingContract
from fencepost.testing.contract.outcomes import OutcomesContract
from fencepost.testing.contract.pruning import PruningContract
from fencepost.testing.contract.queues import QueuesContract
from fencepost.testing.contract.reading import ReadingContract
from fencepost.testing.contract.reports import ReportsContract
from fencepost.testing.contract.resizing import BucketCountContract
from fencepost.testing.contract.running_now import RunningNowContract
from fencepost.testing.contract.schedules import SchedulesContract
from fencepost.testing.contract.slo import SloContract
from fencepost.testing.contract.snoozing import SnoozingContract
from fencepost.testing.contract.submitting import SubmittingContract
from fencepost.testing.contract.support import (
    ContractFixtures,
    StoreFactory,
    assert_audit_valid,
    at,
    executions,
)

__all__ = [
    "BucketCountContract",
    "BulkContract",
    "CatalogueContract",
    "CommandsContract",
    "ContractFixtures",
    "FindingContract",
    "FlowLimitsContract",
    "FlowQueuesContract",
    "HistoryContract",
    "LeasingContract",
    "LimitKeysContract",
    "MaterializingContract",
    "NarrowingContract",
    "OutcomesContract",
    "PruningContract",
    "QueuesContract",
    "ReadingContract",
    "ReportsContract",
    "RunningNowContract",
    "SchedulesContract",
    "SloContract",
    "SnoozingContract",
    "StoreContract",
    "StoreFactory",
    "SubmittingContract",
    "assert_audit_valid",
    "at",
    "executions",
]


class StoreContract(
    LeasingContract,
    OutcomesContract,
    SubmittingContract,
    ReadingContract,
    FindingContract,
    NarrowingContract,
    CommandsContract,
    SchedulesContract,
    MaterializingContract,
    ReportsContract,
    PruningContract,
    CatalogueContract,
    QueuesContract,
    BucketCountContract,
    RunningNowContract,
    SnoozingContract,
    LimitKeysContract,
    FlowLimitsContract,
    FlowQueuesContract,
    SloContract,
    BulkContract,
    HistoryContract,
):
    """The behavioural specification of :class:`~fencepost.store.base.Store`: every section."""
