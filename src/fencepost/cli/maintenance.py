"""``fencepost reconcile`` and ``fencepost prune``: the scheduler's housekeeping, by hand.

``reconcile`` plans every due schedule as the materializer does
(:func:`fencepost.scheduler.materializer.plan_schedule`) and lists RUNNING executions
whose lease has expired; with ``--dry-run`` that is all it does, otherwise it then runs
materializer passes and the reaper, as a ``fencepost worker --with-scheduler``
would. ``prune`` deletes finished executions in short batches.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, span, when
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import State
from fencepost.timing.planning import SchedulePlan, occurrence_kind

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from fencepost.domain.models import Execution, Schedule
    from fencepost.scheduler.materializer import MaterializerOptions
    from fencepost.store import Store

log = logging.getLogger("fencepost.cli")

#: Schedules and RUNNING executions read per page.
_PAGE = 500
#: Materializer passes one ``reconcile`` runs at most (each takes up to ``batch`` schedules).
_MAX_PASSES = 1_000


def add_parsers(commands: Any) -> None:
    """Register ``reconcile`` and ``prune``."""
    p = common.command(commands, "reconcile", reconcile)
    p.add_argument("--dry-run", action="store_true", help="plan and report; store nothing")
    common.add_num_buckets(p)
    common.add_logging(p)

    p = common.command(commands, "prune", prune)
    p.add_argument("--older-than", required=True, metavar="DURATION", help="e.g. 14d")
    p.add_argument("--dry-run", action="store_true", help="count them; delete nothing")
    p.add_argument("--batch", type=int, default=1000, metavar="N", help="per transaction (1000)")
    common.add_logging(p)


# -- reconcile -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Planned:
    """One due schedule and what the materializer's planner does with it now."""

    schedule: Schedule
    plan: SchedulePlan

    @property
    def runs(self) -> list[datetime]:
        """Slots to store and run (due at their slot)."""
        return [o.slot for o in self.plan.occurrences if occurrence_kind(o) == "run"]

    @property
    def held(self) -> list[datetime]:
        """Slots to store held back by the overlap policy until the previous run ends."""
        return [o.slot for o in self.plan.occurrences if occurrence_kind(o) == "held"]

    @property
    def skipped(self) -> list[tuple[datetime, str]]:
        """Slots to record SKIPPED, each with the reason."""
        return [(o.slot, o.skipped) for o in self.plan.occurrences if o.skipped is not None]

    def document(self, now: datetime) -> dict[str, Any]:
        """JSON-ready values; ``leased_by`` names a materializer holding it at ``now``."""
        s = self.schedule
        leased = s.lease_until is not None and s.lease_until > now
        return {
            "id": s.id,
            "job": s.job,
            "paused": s.paused,
            "leased_by": s.materializer if leased else None,
            "watermark": s.watermark,
            "new_watermark": self.plan.watermark,
            "next_due": self.plan.next_due,
            "run": self.runs,
            "held": self.held,
            "skipped": [{"slot": slot, "reason": reason} for slot, reason in self.skipped],
            "cancel_running": self.plan.cancel_running,
            "release_held": self.plan.release_held,
            "warnings": self.plan.warnings,
        }


def _action(e: Execution) -> str:
    """What the reaper (or the next claim) does with an expired lease."""
    return "retry" if e.attempt < e.max_attempts else "dead-letter"


def reconcile(args: argparse.Namespace, out: Output) -> int:
    """materialize due schedules and time out expired leases (--dry-run: only say what)

    Plan every due schedule as the materializer would — slots to run, slots SKIPPED
    and why (misfire, overlap, paused), slots held by an overlap policy — and list
    RUNNING executions whose lease has expired (to be retried, or dead-lettered when
    out of attempts). Without --dry-run, then store the plans (materializer passes)
    and time the expired leases out (the reaper).
    """
    from fencepost.domain.nodes import default_node_id
    from fencepost.scheduler.materializer import Materializer, MaterializerOptions
    from fencepost.scheduler.reaper import reap_all

    common.num_buckets(args)
    common.require_db(args)
    common.configure_logging(args)
    options = MaterializerOptions(owner=f"{default_node_id()}:reconcile")
    with common.open_store(args, read_only=args.dry_run) as store:
        now = store.clock.now()
        with out.progress("planning due schedules") as update:
            planned = _plan_due(store, options, now, update)
        expired = _expired(store, now)
        for e in expired:
            log.info(
                "lease expired at %s: %s",
                e.lease_until.isoformat() if e.lease_until else "?",
                _action(e),
                extra={
                    "execution_id": e.id,
                    "epoch": e.epoch,
                    "owner": e.lease_owner,
                    "job": e.job,
                },
            )
        stored = schedules_planned = reaped = None
        stored_by: dict[str, int] | None = None
        if not args.dry_run:
            materializer = Materializer(store, options)
            schedules_planned = 0
            for _ in range(_MAX_PASSES):
                taken = materializer.run_once()
                schedules_planned += taken
                if taken == 0:
                    break
            stored = materializer.stored
            stored_by = {k: materializer.stored_by[k] for k in ("run", "held", "skipped")}
            reaped = reap_all(store)
    if out.as_json:
        out.document(
            {
                "dry_run": args.dry_run,
                "at": now,
                "schedules": [p.document(now) for p in planned],
                "expired_leases": [
                    {
                        "execution_id": e.id,
                        "job": e.job,
                        "owner": e.lease_owner,
                        "epoch": e.epoch,
                        "attempt": e.attempt,
                        "max_attempts": e.max_attempts,
                        "lease_until": e.lease_until,
                        "action": _action(e),
                    }
                    for e in expired
                ],
                "schedules_planned": schedules_planned,
                "stored": stored,
                "stored_by": stored_by,
                "reaped": reaped,
            }
        )
        return 0
    _print_plans(out, planned, now)
    out.table(
        ("id", "job", "owner", "epoch", "attempt", "expired", "action"),
        [
            (
                e.id,
                e.job,
                e.lease_owner,
                e.epoch,
                f"{e.attempt}/{e.max_attempts}",
                f"{span(now - e.lease_until)} ago" if e.lease_until else "-",
                _action(e),
            )
            for e in expired
        ],
        title="expired leases (retry: RETRY_WAIT or taken over; dead-letter: FAILED)",
        caption=None if expired else "none",
    )
    if args.dry_run:
        out.line("dry run: nothing was stored or timed out")
    else:
        # Counted as the listing above counts (to run, held, skipped); the passes run
        # just after the listing's plan, so slots that fell due meanwhile are in too.
        assert stored_by is not None
        out.line(
            f"materialized {schedules_planned} schedule plan(s), storing {stored} "
            f"occurrence(s) ({stored_by['run']} to run, {stored_by['held']} held, "
            f"{stored_by['skipped']} skipped); timed out {reaped} expired lease(s)"
        )
    return 0


def _plan_due(
    store: Store, options: MaterializerOptions, now: datetime, update: Callable[[int], None]
) -> list[Planned]:
    from fencepost.scheduler.materializer import plan_schedule

    planned: list[Planned] = []
    cursor: str | None = None
    while True:
        page = store.schedules(due_before=now, limit=_PAGE, after=cursor)
        for schedule in page.items:
            result = plan_schedule(store, schedule, now, options)
            planned.append(Planned(schedule=schedule, plan=result))
            log.info(
                "plan: %d to run, %d held, %d skipped",
                len(planned[-1].runs),
                len(planned[-1].held),
                len(planned[-1].skipped),
                extra={"schedule_id": schedule.id, "job": schedule.job},
            )
            update(len(planned))
        if page.next_cursor is None:
            return planned
        cursor = page.next_cursor


def _expired(store: Store, now: datetime) -> list[Execution]:
    found: list[Execution] = []
    cursor: str | None = None
    while True:
        page = store.query(state=State.RUNNING, limit=_PAGE, after=cursor)
        found.extend(e for e in page.items if e.lease_until is not None and e.lease_until <= now)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def _print_plans(out: Output, planned: list[Planned], now: datetime) -> None:
    rows = []
    for p in planned:
        runs = p.runs
        notes = []
        s = p.schedule
        if s.paused:
            notes.append("paused")
        if s.lease_until is not None and s.lease_until > now:
            notes.append(f"leased by {s.materializer} until {when(s.lease_until)}")
        if p.plan.cancel_running:
            notes.append("replace: cancels the running run")
        if p.plan.release_held:
            notes.append("releases the oldest held run")
        notes.extend(p.plan.warnings)
        rows.append(
            (
                s.id,
                s.job,
                len(runs),
                f"{when(runs[0])} .. {when(runs[-1])}" if runs else "-",
                len(p.held),
                len(p.skipped),
                when(p.plan.next_due),
                "; ".join(notes) or "-",
            )
        )
    out.table(
        ("schedule", "job", "run", "slots", "held", "skipped", "next due", "notes"),
        rows,
        title="due schedules",
        caption=None if planned else "no schedule is due",
        right=("run", "held", "skipped"),
    )
    skipped_rows = []
    for p in planned:
        by_reason = Counter(reason for _, reason in p.skipped)
        for reason, count in by_reason.items():
            slots = [slot for slot, r in p.skipped if r == reason]
            skipped_rows.append((p.schedule.id, reason, count, when(slots[0]), when(slots[-1])))
    if skipped_rows:
        out.table(
            ("schedule", "reason", "slots", "first", "last"),
            skipped_rows,
            title="slots to record SKIPPED, and why",
            right=("slots",),
        )


# -- prune ---------------------------------------------------------------------------------


def prune(args: argparse.Namespace, out: Output) -> int:
    """delete finished executions (with attempts and transitions) older than a while

    Delete SUCCEEDED, FAILED, CANCELLED and SKIPPED executions last changed at least
    --older-than ago, with their audit trail and commands, oldest first, in short
    transactions of --batch executions (never one long lock).
    """
    older_than = common.duration(args.older_than, "--older-than", allow_zero=True)
    batch = args.batch
    if not 1 <= batch <= 100_000:
        raise ValidationError("--batch", f"must be between 1 and 100000, got {batch}")
    common.require_db(args)
    common.configure_logging(args)
    with common.open_store(args, read_only=args.dry_run) as store:
        if args.dry_run:
            count = store.prune(older_than=older_than, dry_run=True)
        else:
            # The count first only for a terminal's progress bar; piped, one pass.
            total = store.prune(older_than=older_than, dry_run=True) if out.terminal else None
            with out.progress("pruning finished executions", total) as update:

                def on_batch(deleted: int) -> None:
                    log.info("pruned %d finished executions so far", deleted)
                    update(deleted)

                count = store.prune(older_than=older_than, batch=batch, on_batch=on_batch)
    if out.as_json:
        out.document({"dry_run": args.dry_run, "older_than": older_than, "executions": count})
    elif args.dry_run:
        out.line(
            f"would prune {count} finished execution(s) last changed over "
            f"{span(older_than)} ago (dry run: nothing deleted)"
        )
    else:
        out.line(
            f"pruned {count} finished execution(s) last changed over {span(older_than)} ago, "
            "with their attempts and transitions"
        )
    return 0
