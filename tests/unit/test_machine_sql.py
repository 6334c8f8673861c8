"""Every state transition the SQL blocks write is an edge of :mod:`fencepost.domain.machine`.

The hot paths (claim, complete, and what submits and materializes) write their
transitions as SQL literals rather than through :func:`~fencepost.domain.machine.apply`.
This test reads every named block of both dialects and checks what it writes:

* each audit record ``'EVENT', from, 'TO'`` inserted into ``transitions`` is an edge
  (a from-state that is a column or a parameter stands for the states the block's
  guards admit, or those of the block that selected the rows);
* each ``UPDATE executions SET state = 'X'`` is reachable, by one event, from every
  state its guards (``state = '...'``, ``state IN (...)``) admit;
* each state an ``INSERT INTO executions`` writes is where a new execution may be.

Blocks that write no transition are listed in :data:`NO_TRANSITION`, and blocks that
write the state the machine decided in Python (``SqlStore._persist``) in
:data:`MACHINE_DECIDED`: a block in neither list fails, so a new block cannot slip
through unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pytest

from fencepost.domain.machine import EDGES, is_edge
from fencepost.domain.states import Event, State
from fencepost.store.sql import load_queries

DIALECTS = {
    "sqlite": load_queries("fencepost.store.sqlite", "queries.sql"),
    "postgres": load_queries("fencepost.store.postgres", "queries.sql"),
}

#: Blocks that write the state and audit record that ``domain.machine.apply`` decided
#: (bound as parameters by ``SqlStore._persist``), in both dialects.
#: SQLite's insert_occurrence binds the state the materializer's Change decided
#: (SCHEDULED, or SKIPPED through ``apply``) and its records go through insert_transition.
MACHINE_DECIDED = frozenset({"write_change", "insert_transition", "insert_occurrence"})

#: Blocks whose rows another block selected (their guards are that block's).
GUARDED_BY = {
    ("sqlite", "claim_update"): (
        "claim_candidates_queue",
        "claim_candidates_capped_queue",
    ),
    ("sqlite", "insert_claimed"): (
        "claim_candidates_queue",
        "claim_candidates_capped_queue",
    ),
}

#: Blocks that write no transition: reads, session and transaction control, migrations,
#: commands, nodes, schedules, payload columns, heartbeats, audits of refusals, pruning.
NO_TRANSITION = frozenset(
    {
        # session, transactions, migrations
        "pragmas",
        "synchronous_full",
        "synchronous_normal",
        "begin_immediate",
        "begin",
        "commit",
        "rollback",
        "savepoint",
        "release_savepoint",
        "rollback_to_savepoint",
        "has_migrations_table",
        # the store's schema: where its tables are, and moving them (store/postgres/schemas.py)
        "find_store_schema",
        "schema_state",
        "moved_to",
        "store_relations",
        "store_statistics",
        "create_migrations_table",
        "applied_migrations",
        "record_migration",
        "lock_migrations",
        # the bucket count the store records, and a resize moving executions' buckets
        "record_num_buckets",
        "recorded_num_buckets",
        "set_num_buckets",
        "lock_executions_for_resize",
        "unfinished_buckets",
        "move_to_buckets",
        "configure_session",
        "backend_pid",
        "listen",
        "done_channel",
        "schema_objects",
        "store_now",
        "analyze_sample",
        "newest_partition",
        # flow control (store/flow.py, store/sqlflow.py): limits, buckets, throttles
        "flow_limits",
        "flow_limits_locked",
        "flow_running",
        "flow_state",
        "flow_buckets_held",
        "flow_buckets_of",
        "flow_candidates",
        "flow_put",
        "flow_put_bucket",
        "flow_put_throttle",
        "flow_set_limit",
        "flow_declare_limit",
        "flow_get_limit",
        "flow_clear_limit",
        "flow_delete_limit",
        "flow_pause",
        "flow_unpause",
        "flow_resume_throttles",
        "flow_log_change",
        "flow_changes",
        "flow_throttled",
        "flow_throttles_of",
        "flow_prune",
        "flow_prune_throttles",
        "flow_prune_buckets",
        "flow_add_totals",
        "flow_resume_totals",
        "flow_throttle_totals",
        # reads and locks
        "get_execution",
        "lock_execution",
        "find_execution",
        "find_idempotency_keys",
        "submitted_before",
        "ended_by_holders",
        "execution_exists",
        "executions_by_keys",
        "query_executions",
        "query_executions_newest_first",
        "query_schedule_executions",
        "query_schedule_executions_newest_first",
        # the console's pages and counts, by the index each reads first
        "query_state_executions",
        "query_state_executions_newest_first",
        "query_key_executions",
        "query_key_executions_newest_first",
        "query_error_executions",
        "query_error_executions_newest_first",
        "query_finished_executions",
        "query_finished_executions_newest_first",
        "count_by_state",
        "count_filtered_by_state",
        "count_states_by_state",
        "count_schedule_by_state",
        "count_key_by_state",
        "count_error_by_state",
        "count_finished_by_state",
        "count_finished_narrow_by_state",
        "select_transitions",
        "select_commands",
        "expired_leases",
        "waiting_schedule_executions",
        "watched_executions",
        "claim_candidates_queue",
        "claim_candidates_capped_queue",
        "claim_live_queues",
        "caller_savepoint",
        "caller_release_savepoint",
        "caller_rollback_to_savepoint",
        "caller_session",
        "caller_settings",
        "main_database_file",
        "lock_buckets",
        "orphans",
        "bucket_counts",
        "bucket_counts_unfinished",
        "stats",
        "job_counts",
        "due_groups",
        "slo",
        "slo_worst",
        "slo_rollups_between",
        "count_prunable",
        "prunable",
        # the history charts (store/sqlhistory.py): minute rows and their watermark
        "history_watermark",
        "history_watermark_nowait",
        "history_read_watermark",
        "history_make_watermark",
        "history_finished",
        "history_throttled",
        "history_add",
        "history_advance",
        "history_points",
        "history_points_job",
        "history_points_queue",
        "history_points_job_queue",
        "history_by_job",
        "history_by_queue",
        "history_prune",
        # payload columns and leases renewed (no state change)
        "insert_execution_data",
        "set_result",
        "set_error",
        "set_progress",
        "heartbeat_fenced",
        # a refused call's audit record (from-state = to-state, not an edge)
        "insert_stale_refusal",
        "insert_stale_refusals",
        # commands, nodes, schedules
        "insert_command",
        "claim_commands",
        "complete_command",
        "release_command",
        "register_node",
        "deregister_node",
        "select_nodes",
        # the job catalogue
        "insert_job",
        "select_job_entry",
        "select_catalogue",
        "catalogue_keys",
        # work submitted before its job was published, given the job's defaults
        # (attempts, timeout, priority, queue: no state changes)
        "unpublished_jobs",
        "adopt_execution_defaults",
        "forget_unset_defaults",
        "adopt_schedule_defaults",
        "mark_schedule_unset",
        "insert_schedule",
        "get_schedule",
        "lock_schedule",
        "share_schedule",
        "list_schedules",
        "write_schedule",
        "delete_schedule",
        "acquire_schedules",
        "materialize_fenced",
        "release_schedules",
        # the SLO's facts on the row (no state change) and prune's rollups of them
        "mark_stale_refusal",
        "flow_hold",
        "flow_resume_held",
        "slo_rollup",
        # pruning
        "prune_batch",
        "prune_commands",
        "prune_transitions",
        "prune_execution_data",
        "prune_executions",
        "day_being_pruned",
        # deleting one finished execution (Store.delete), and the record it leaves
        "deletable",
        "delete_throttles",
        "delete_execution",
        "insert_deletion",
        "select_deletions",
        "prune_deletions",
        "roll_up_day",
        # a pause's occurrences not yet started, read and locked (SKIPPED by write_change)
        "unstarted_schedule_executions",
    }
)

_STATE_VALUES = frozenset(s.value for s in State)
_STATES = "|".join(sorted(_STATE_VALUES))
_EVENTS = "|".join(e.value for e in Event)
_COMMENT = re.compile(r"--[^\n]*")
_IN_LIST = re.compile(r"\bIN\s*\(\s*'[^)]*\)", re.IGNORECASE)
_ASSIGNMENT = re.compile(r"\bSET\s+state\s*=\s*'\w+'", re.IGNORECASE)
_GUARD_IN = re.compile(r"\bstate\s+IN\s*\(([^)]*)\)", re.IGNORECASE)
_GUARD_EQ = re.compile(rf"\bstate\s*=\s*'({_STATES})'(?!\s*,)", re.IGNORECASE)
_GUARD_AS = re.compile(rf"'({_STATES})'\s+AS\s+state\b", re.IGNORECASE)
_SET_STATE = re.compile(
    rf"UPDATE\s+executions\b[^;]*?\bSET\s+state\s*=\s*(?:'({_STATES})'|([:%]\(?\w+\)?s?))",
    re.IGNORECASE | re.DOTALL,
)
#: An audit record in a VALUES or SELECT list: 'EVENT', from, 'TO' (each maybe "AS name").
_TRIPLE = re.compile(
    rf"'({_EVENTS})'(?:\s+AS\s+\w+)?\s*,\s*(NULL|'\w+'|[\w.?%():]+)(?:\s+AS\s+\w+)?"
    rf"\s*,\s*'({_STATES})'",
    re.IGNORECASE,
)
_INSERT_EXECUTIONS = re.compile(
    r"INSERT\s+INTO\s+executions\b(.*?)(?:\bRETURNING\b|\bON\s+CONFLICT\b|\Z)",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class Writes:
    """What one block writes, as read from its text."""

    #: (event, from-state or None; "?" when a column or parameter, to-state)
    records: tuple[tuple[Event, State | str | None, State], ...]
    #: states set on existing rows by literal (UPDATE executions SET state = 'X')
    updates: tuple[State, ...]
    #: whether the block sets the state from a parameter (the machine's decision)
    parameter: bool
    #: states new rows are inserted in
    created: tuple[State, ...]
    #: the states the block's guards admit
    guards: frozenset[State]

    def any(self) -> bool:
        return bool(self.records or self.updates or self.parameter or self.created)


def read_writes(sql: str) -> Writes:
    """Find the transitions one block writes (see the module doc)."""
    text = _COMMENT.sub("", sql)
    conditions = _ASSIGNMENT.sub("SET state = <written>", text)  # a write is no guard
    named = [s for m in _GUARD_IN.finditer(conditions) for s in re.findall(r"'(\w+)'", m[1])]
    named += [m[1] for m in _GUARD_EQ.finditer(conditions)]
    named += [m[1] for m in _GUARD_AS.finditer(conditions)]
    guards = {State(s) for s in named if s in _STATE_VALUES}  # commands' states are not
    listless = _IN_LIST.sub("IN (...)", text)
    records = []
    for event, source, target in _TRIPLE.findall(listless):
        literal = re.fullmatch(r"'(\w+)'", source)
        from_state: State | str | None = (
            None if source.upper() == "NULL" else State(literal[1]) if literal else "?"
        )
        records.append((Event(event), from_state, State(target)))
    updates, parameter = [], False
    for literal, param in _SET_STATE.findall(text):
        if literal:
            updates.append(State(literal))
        elif param:
            parameter = True
    created = [
        State(s)
        for m in _INSERT_EXECUTIONS.finditer(listless)
        for s in re.findall(rf"'({_STATES})'", m[1])
    ]
    return Writes(tuple(records), tuple(updates), parameter, tuple(created), frozenset(guards))


def problems(writes: Writes, guards: Iterable[State] | None = None) -> list[str]:
    """Why the writes of one block break the machine (empty: they do not).

    ``guards``: the states admitted where another block selected the rows.
    """
    admitted = frozenset(guards) if guards is not None else writes.guards
    found = []
    for event, source, target in writes.records:
        if event is Event.STALE_REFUSED:
            continue
        sources = admitted if source == "?" else {source}
        if source == "?" and not sources:
            found.append(f"{event} to {target} from a state no guard names")
        for state in sources:
            if not is_edge(event, state if state != "?" else None, target):
                found.append(f"{event}: {state} -> {target} is not an edge")
    for target in writes.updates:
        if not admitted:
            found.append(f"sets {target} without a state guard")
        elif not any(
            all(target in by_source.get(state, frozenset()) for state in admitted)
            for by_source in EDGES.values()
        ):
            found.append(f"sets {target} from {sorted(admitted)}: no event allows it")
    first = EDGES[Event.SUBMITTED][None]
    after_first = first | {t for by in EDGES.values() for s in first for t in by.get(s, ())}
    for target in writes.created:
        if target not in after_first:
            found.append(f"creates a row in {target}")
        elif target not in first and not any(t == target for _, _, t in writes.records):
            found.append(f"creates a row in {target} without its audit record")
    return found


def _guards_of(dialect: str, name: str, queries: Mapping[str, str]) -> frozenset[State] | None:
    others = GUARDED_BY.get((dialect, name))
    if others is None:
        return None
    return frozenset().union(*(read_writes(queries[o]).guards for o in others))


CASES = [(d, name) for d, queries in DIALECTS.items() for name in queries]


@pytest.mark.parametrize(("dialect", "name"), CASES, ids=[f"{d}:{n}" for d, n in CASES])
def test_every_block_writes_only_edges_of_the_machine(dialect: str, name: str) -> None:
    queries = DIALECTS[dialect]
    writes = read_writes(queries[name])
    if name in NO_TRANSITION:
        assert not writes.any(), f"{name} is listed as writing no transition but writes {writes}"
        return
    if name in MACHINE_DECIDED:
        assert writes.records == (), name
        assert writes.updates == (), name
        assert writes.created == (), name
        return
    assert writes.any(), f"{dialect}:{name} is in no list: does it write a transition?"
    assert problems(writes, _guards_of(dialect, name, queries)) == []


def test_the_blocks_that_write_transitions_are_the_expected_ones() -> None:
    writing = {(d, n) for d, n in CASES if n not in NO_TRANSITION and n not in MACHINE_DECIDED}
    assert writing == {
        ("sqlite", "insert_execution"),
        ("sqlite", "insert_submitted"),
        ("sqlite", "insert_claimed"),
        ("sqlite", "insert_completed"),
        ("sqlite", "claim_update"),
        ("sqlite", "complete_fenced"),
        ("postgres", "insert_executions"),
        ("postgres", "claim"),
        ("postgres", "claim_capped"),
        ("postgres", "claim_queues"),
        ("postgres", "claim_capped_queues"),
        ("postgres", "complete_fenced"),
        ("postgres", "complete_returning"),
        ("postgres", "insert_occurrences"),
    }


def test_every_listed_block_exists_in_some_dialect() -> None:
    known = {name for queries in DIALECTS.values() for name in queries}
    assert (NO_TRANSITION | MACHINE_DECIDED) - known == set()


@pytest.mark.parametrize(
    ("sql", "complaint"),
    [
        (
            "UPDATE executions SET state = 'SUCCEEDED' WHERE id = :id AND state = 'SCHEDULED'",
            "no event allows it",
        ),
        (
            "UPDATE executions SET state = 'RUNNING' WHERE id = :id",
            "without a state guard",
        ),
        (
            "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, at)\n"
            "VALUES (?1, 'COMPLETED', 'SCHEDULED', 'SUCCEEDED', ?2, ?3)",
            "is not an edge",
        ),
        (
            "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, at)\n"
            "SELECT id, 'REPLAYED', state, 'SCHEDULED', epoch, :now FROM executions\n"
            "WHERE state IN ('RETRY_WAIT', 'FAILED')",
            "is not an edge",
        ),
        (
            "INSERT INTO executions (id, job, state) VALUES (?1, ?2, 'RUNNING')",
            "creates a row in RUNNING",
        ),
    ],
)
def test_a_transition_the_machine_does_not_allow_is_caught(sql: str, complaint: str) -> None:
    found = problems(read_writes(sql))
    assert any(complaint in p for p in found), found


def test_the_hot_path_blocks_are_read_as_transitions() -> None:
    """The reader sees what the claim and completion blocks write (it is not blind)."""
    claim = read_writes(DIALECTS["postgres"]["claim"])
    assert claim.updates == (State.RUNNING,)
    assert (Event.CLAIMED, "?", State.RUNNING) in claim.records
    assert claim.guards == {State.SCHEDULED, State.RETRY_WAIT, State.RUNNING}
    done = read_writes(DIALECTS["sqlite"]["insert_completed"])
    assert done.records == ((Event.COMPLETED, State.RUNNING, State.SUCCEEDED),)
    skipped = read_writes(DIALECTS["postgres"]["insert_occurrences"])
    assert (Event.SKIPPED, State.SCHEDULED, State.SKIPPED) in skipped.records
