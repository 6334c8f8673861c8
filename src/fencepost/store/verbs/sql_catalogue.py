"""The job catalogue of the SQL stores as plans: publishing entries (a conflicting
digest refuses the whole batch), reading them back, and adopting a published job's
defaults for the work submitted before it was known (see store.catalogue).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fencepost.domain.catalogue import JobEntry, definition_json, entry_from_definition
from fencepost.domain.errors import CatalogueConflict, ValidationError
from fencepost.store.executors import Plan, Statement, Steps

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

log = logging.getLogger("fencepost.store")


def publish_plan(store: SqlStore, entries: Sequence[JobEntry]) -> Plan[list[JobEntry]]:
    """``CatalogueVerbs._publish``: each entry inserted unless its (name, version) is
    there; a stored one with another digest raises :class:`CatalogueConflict`, which
    rolls the whole batch back."""

    def steps() -> Steps[list[JobEntry]]:
        out = []
        now = store._now_param()
        for entry in entries:
            key = {"name": entry.name, "version": entry.version}
            definition = {"digest": entry.digest, "definition": definition_json(entry), "now": now}
            yield Statement(store._q("insert_job"), key | definition)
            row = yield Statement(store._q("select_job_entry"), key, "one")
            if row[2] != entry.digest:  # raising rolls the whole batch back
                raise CatalogueConflict(entry.name, entry.version, row[2], entry.digest)
            # Same digest, same definition: only the time it was first published is new.
            out.append(replace(entry, published_at=store.rows.instant(row[4])))
        return out

    return Plan(steps())


def unpublished_jobs_plan(store: SqlStore) -> Plan[set[str]]:
    """The jobs of work submitted while they were not in the catalogue."""

    def steps() -> Steps[set[str]]:
        found = yield Statement(store._q("unpublished_jobs"), None, "all")
        return {job for (job,) in found}

    return Plan(steps(), atomic=False)


def adopt_defaults_plan(store: SqlStore, entry: JobEntry) -> Plan[int]:
    """The defaults of ``entry`` given to its job's work submitted before it was known,
    where the submitter left them out; how many executions and schedules took them."""
    defaults = entry.defaults
    params = {
        "job": entry.name,
        "max_attempts": defaults.max_attempts,
        "timeout": None if defaults.timeout is None else store._d(defaults.timeout),
        "priority": defaults.priority,
        "queue": defaults.queue,
    }

    def steps() -> Steps[int]:
        adopted = yield Statement(store._q("adopt_execution_defaults"), params, "count")
        yield Statement(store._q("forget_unset_defaults"), {"job": entry.name})
        adopted += yield Statement(store._q("adopt_schedule_defaults"), params, "count")
        return int(adopted)

    return Plan(steps())


def mark_schedule_unset_plan(store: SqlStore, schedule_id: str, unset: str) -> Plan[None]:
    """Note which defaults a schedule of an unpublished job left out."""

    def steps() -> Steps[None]:
        yield Statement(store._q("mark_schedule_unset"), {"id": schedule_id, "unset": unset})

    return Plan(steps())


def read_catalogue_plan(store: SqlStore) -> Plan[list[JobEntry]]:
    """Every entry this version can read (see :func:`entry_or_none`)."""

    def steps() -> Steps[list[JobEntry]]:
        found = yield Statement(store._q("select_catalogue"), None, "all")
        entries = (entry_or_none(store, row) for row in found)
        return [entry for entry in entries if entry is not None]

    return Plan(steps(), atomic=False)


def catalogue_keys_plan(store: SqlStore) -> Plan[set[tuple[str, int]]]:
    """The (name, version) of every entry."""

    def steps() -> Steps[set[tuple[str, int]]]:
        found = yield Statement(store._q("catalogue_keys"), None, "all")
        return {(name, version) for name, version in found}

    return Plan(steps(), atomic=False)


def entry_or_none(store: SqlStore, row: tuple[Any, ...]) -> JobEntry | None:
    """An entry from a row of ``select_catalogue``, or None for a row this version cannot
    read (written by hand, or by a newer fencepost): that job is then unknown here, the
    others are not."""
    _, _, digest, definition, published_at = row
    try:
        return entry_from_definition(
            definition, digest=digest, published_at=store.rows.instant(published_at)
        )
    except (ValidationError, ValueError, TypeError) as exc:
        log.error("job catalogue: cannot read %s version %s: %s", row[0], row[1], exc)
        return None
