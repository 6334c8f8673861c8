"""The in-memory backend: a real store that passes the same contract, kept in dicts.

Every change goes through :func:`fencepost.domain.machine.apply`. Payloads are
round-tripped through JSON on the way in, so what a caller reads back is what a
serializing backend would give (tuples become lists, and so on). Nothing
survives the process; use it for tests and for trying things out.

It stays a reference model beside the SQL stores rather than a peer of
:class:`~fencepost.store.sqlstore.SqlStore`: what the verbs decide is already shared
(validation and the fail, release and abort decisions in :class:`Store`, every
transition in ``domain.machine``, commands in ``domain.commands``, schedules in
``domain.schedules``), and what is left is how rows are found and kept, which for
dicts is a few lines where SQL needs a statement. Emulating the SQL hooks over dicts
would cost more code than it saves. Where it differs from the SQL stores, on purpose:

* one lock serializes every verb (no concurrency to skip locked rows around);
* the claim, the bucket cap and every filter are Python over all rows, not index scans;
* ``prune`` deletes oldest ``updated_at`` first (SQLite walks ids; PostgreSQL skips
  rows a concurrent transaction holds);
* the audit ``seq`` is one counter for the store; ``clock_offset`` is None (one process).
"""

from fencepost.store.memory.catalogue import MemoryCatalogue
from fencepost.store.memory.flow import MemoryFlowControl
from fencepost.store.memory.leasing import MemoryLeasing
from fencepost.store.memory.reports import MemoryReports
from fencepost.store.memory.schedules import MemorySchedules

__all__ = ["MemoryStore"]


class MemoryStore(
    MemoryLeasing, MemoryFlowControl, MemorySchedules, MemoryCatalogue, MemoryReports
):
    """Executions in process memory, guarded by one lock.

    Each section of the contract is a part over one :class:`~.core.MemoryCore` (its
    state and what they share): leasing, flow control, schedules, the catalogue, reports.
    """
