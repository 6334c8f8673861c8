"""``fencepost jobs``: the job catalogue — what the deployment runs, who serves it, what ran."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, span, when
from fencepost.domain.jobviews import JobView, input_fields, job_views
from fencepost.domain.states import State

if TYPE_CHECKING:
    import argparse

    from fencepost.domain.catalogue import JobDefaults, JobEntry
    from fencepost.domain.reports import Unserved


def add_parsers(commands: Any) -> None:
    """Register ``jobs``."""
    p = common.command(commands, "jobs", jobs)
    p.add_argument("name", nargs="?", metavar="NAME", help="show this job in full")
    p.add_argument(
        "--window",
        default="24h",
        metavar="DURATION",
        help="count the executions created in this span (default 24h)",
    )


def jobs(args: argparse.Namespace, out: Output) -> int:
    """the job catalogue: every job, its versions, defaults, inputs, serving nodes, runs

    Every job a worker published: its latest version (and how many there are), that
    version's defaults and inputs, the live nodes serving it, how many live workers
    serve it ("no live worker" when none) and its due executions waiting now (with
    those no live worker serves), and its executions created in the last --window by
    their current state (created, so each run is counted once, in the window it was
    submitted in). Due executions of jobs that nobody published, which no live worker
    serves, are named below the table. With NAME, that job in full: every version's
    schemas, defaults, source and digest, and the nodes serving each version.
    """
    window = common.duration(args.window, "--window")
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        if args.name is None:
            entries = store.jobs()
        else:
            with common.option("NAME"):
                entries = store.job(args.name)
        nodes = store.nodes(live_only=True)
        counts = store.job_counts(window=window, job=args.name)
        unserved = store.unserved()
    views = job_views(entries, nodes, counts)
    if args.name is not None:
        (view,) = views
        if out.as_json:
            out.document(job_document(view, unserved))
        else:
            _show(view, unserved, out)
        return 0
    if out.as_json:
        out.document(
            {
                "at": counts.at,
                "window": counts.window,
                "jobs": [_summary_document(view, unserved) for view in views],
                "unpublished_unserved": _unpublished(views, unserved),
            }
        )
        return 0
    states = [s.value for s in State]
    rows = [
        [
            view.name,
            f"{view.latest.version} (of {len(view.versions)})",
            defaults_text(view.latest.defaults),
            ", ".join(input_fields(view.latest.input_schema)) or "-",
            ", ".join(view.nodes) or "-",
            workers_text(view),
            due_text(view.name, unserved),
            *(view.counts[s] for s in State),
        ]
        for view in views
    ]
    out.table(
        ("job", "latest", "defaults", "inputs", "nodes", "workers", "due", *states),
        rows,
        title=f"jobs, executions created in the last {span(counts.window)} by state "
        f"(at {when(counts.at)})",
        right=states,
        caption=None if rows else "no job published (workers publish the jobs they run)",
    )
    unpublished = _unpublished(views, unserved)
    if unpublished:
        named = ", ".join(f"{g['label']} ({g['count']})" for g in unpublished)
        out.line(f"due executions of unpublished jobs no live worker serves: {named}")
    return 0


def workers_text(view: JobView) -> str:
    """How many live workers serve any version of the job, or ``0 (no live worker)``."""
    return str(len(view.nodes)) if view.nodes else "0 (no live worker)"


def due_text(job: str, unserved: Unserved) -> str:
    """The job's due executions waiting now, and those no live worker serves:
    ``3``, ``2 (2 unserved)``, or ``3 (1 unserved: v5)`` when a pinned version has none."""
    due, waiting = unserved.due_of(job)
    if not waiting:
        return str(due)
    pinned = [
        f"v{g.job_version}"
        for g in unserved.executions
        if g.job == job and g.job_version is not None
    ]
    return f"{due} ({waiting} unserved{': ' + ', '.join(pinned) if pinned else ''})"


def _unpublished(views: list[JobView], unserved: Unserved) -> list[dict[str, Any]]:
    """Unserved due groups of jobs the listing does not show (nobody published them)."""
    shown = {view.name for view in views}
    return [
        {"job": g.job, "version": g.job_version, "count": g.count, "label": g.label}
        for g in unserved.executions
        if g.job not in shown
    ]


def defaults_text(defaults: JobDefaults) -> str:
    """A job's defaults as one cell: ``max_attempts=5 timeout=30s queue=reports``."""
    parts = []
    for name, value in defaults.to_json().items():
        shown = span(value) if name in ("timeout", "lease_ttl") else value
        parts.append(f"{name}={shown}")
    return " ".join(parts) or "-"


def _show(view: JobView, unserved: Unserved, out: Output) -> None:
    out.fields(
        [
            ("job", view.name),
            ("latest", view.latest.version),
            ("versions", ", ".join(str(e.version) for e in view.versions)),
            ("nodes", ", ".join(view.nodes) or "-"),
            ("workers", workers_text(view)),
            ("due", due_text(view.name, unserved)),
        ],
        title=f"job {view.name}",
    )
    out.table(
        [s.value for s in State],
        [[view.counts[s] for s in State]],
        title=f"executions created in the last {span(view.window)} by state (at {when(view.at)})",
        right=[s.value for s in State],
    )
    for entry in reversed(view.versions):  # the latest first: what a submit runs
        out.fields(
            [
                ("version", entry.version),
                ("digest", entry.digest),
                ("published", when(entry.published_at)),
                ("source", f"{entry.source.kind} {entry.source.where}".strip()),
                ("description", entry.description or "-"),
                ("defaults", defaults_text(entry.defaults)),
                ("inputs", ", ".join(input_fields(entry.input_schema)) or "-"),
                ("nodes", ", ".join(view.served_by.get(entry.version, ())) or "-"),
            ],
            title=f"{view.name} version {entry.version}",
        )
        for label, schema in (
            ("input schema", entry.input_schema),
            ("output schema", entry.output_schema),
        ):
            out.line(f"{label}:")
            text = "-" if schema is None else json.dumps(schema, indent=2, ensure_ascii=False)
            for line in text.splitlines():
                out.line(f"  {line}")
        out.line()


def entry_document(entry: JobEntry) -> dict[str, Any]:
    """One version of a job as JSON: its definition, digest and publication time."""
    return {**entry.definition(), "digest": entry.digest, "published_at": entry.published_at}


def job_document(view: JobView, unserved: Unserved) -> dict[str, Any]:
    """``fencepost jobs NAME --json``: the job in full."""
    return {
        "name": view.name,
        "at": view.at,
        "window": view.window,
        "counts": {s.value: n for s, n in view.counts.items()},
        "nodes": list(view.nodes),
        **_waiting(view, unserved),
        "versions": [
            {**entry_document(e), "served_by": list(view.served_by.get(e.version, ()))}
            for e in view.versions
        ],
    }


def _waiting(view: JobView, unserved: Unserved) -> dict[str, int]:
    due, waiting = unserved.due_of(view.name)
    return {"workers": len(view.nodes), "due": due, "unserved": waiting}


def _summary_document(view: JobView, unserved: Unserved) -> dict[str, Any]:
    latest = view.latest
    return {
        "name": view.name,
        "latest_version": latest.version,
        "versions": [e.version for e in view.versions],
        "defaults": latest.defaults.to_json(),
        "inputs": input_fields(latest.input_schema),
        "description": latest.description,
        "nodes": list(view.nodes),
        **_waiting(view, unserved),
        "counts": {s.value: n for s, n in view.counts.items()},
    }
