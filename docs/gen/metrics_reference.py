"""Write ``reference/metrics.md`` from the metric objects ``GET /metrics`` serves.

The page is read from real registries (:func:`fencepost.api.metrics.create_metrics`
over a memory store, and a worker's :class:`fencepost.worker.metrics.WorkerMetrics`
bound to a worker of one job): every family's name, type, help and labels come from
the objects themselves, so a new metric or label appears at the next build.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))

from _markdown import GENERATED, cell, code, escape

import fencepost
from fencepost.api.metrics import StoreCollector, create_metrics
from fencepost.jobs.registry import JobRegistry
from fencepost.jobs.spec import spec_from_function
from fencepost.worker.metrics import WorkerMetrics
from fencepost.worker.runtime import Worker

#: The series suffixes each type exposes, as the Prometheus text format names them.
SERIES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
}


def families(store: fencepost.Store) -> dict[str, object]:
    return {family.name: family for family in create_metrics(store).registry.collect()}


def example(n: int = 0) -> int:
    return n


def worker_families(store: fencepost.Store) -> dict[str, object]:
    """The families a worker of the job ``example`` exports, besides the service's."""
    registry = JobRegistry([spec_from_function(example, name="example")])
    metrics = WorkerMetrics()
    metrics.bind(Worker(store, registry), registry)
    return {family.name: family for family in metrics.registry.collect()}


def page() -> str:
    # An empty store shows which label values are exported from the start (at zero);
    # one with an execution in a named queue, a limit and a throttle record makes every
    # label appear on some sample.
    with fencepost.connect("memory://") as empty, fencepost.connect("memory://") as used:
        used.pause_queue("example")
        used.submit("example", queue="example")
        used.resume_queue("example")  # a throttle record: its wait
        used.set_limit("queue:example", rate="10/s", concurrency=2)
        fresh = families(empty)
        seen = families(used)
        from_store = {family.name for family in StoreCollector(empty).describe()}
        from_worker = worker_families(empty)
    fresh.update(from_worker)
    rows_store: list[str] = []
    rows_process: list[str] = []
    rows_worker: list[str] = []
    details: list[str] = []
    for name, family in {**seen, **from_worker}.items():
        labels: dict[str, set[str]] = defaultdict(set)
        for sample in family.samples:  # type: ignore[attr-defined]
            for label in sample.labels:
                labels.setdefault(label, set())  # every label named, values or not
        for sample in fresh[name].samples:  # type: ignore[attr-defined]
            for label, value in sample.labels.items():
                labels[label].add(value)
        kind = family.type  # type: ignore[attr-defined]
        buckets = sorted(labels.pop("le", set()), key=float)
        exposed = ", ".join(code(name + suffix) for suffix in SERIES.get(kind, ("",)))
        label_text = ", ".join(code(label) for label in labels) or "none"
        row = f"| {exposed} | {kind} | {label_text} | {cell(escape(family.documentation))} |"  # type: ignore[attr-defined]
        if name in from_worker:
            rows_worker.append(row)
        else:
            (rows_store if name in from_store else rows_process).append(row)
        notes = []
        for label, values in labels.items():
            if values and label != "job":  # the worker's: one example job, not a rule
                notes.append(
                    f"`{label}` takes the values "
                    + ", ".join(code(v) for v in sorted(values))
                    + ", each exported from the start (at zero)."
                )
        if buckets:
            notes.append("Buckets (`le`, seconds): " + ", ".join(code(b) for b in buckets) + ".")
        if notes:
            details += [f"`{name}`", "", *[f":   {note}" for note in notes], ""]
    header = ["| Series | Type | Labels | Help |", "| --- | --- | --- | --- |"]
    lines = [
        GENERATED.format(script="metrics_reference.py"),
        "# Metrics",
        "",
        "`GET /metrics` on `fencepost serve` answers in the Prometheus text format "
        "(OpenMetrics when the `Accept` header asks for it) and needs a token with the "
        "`read` scope; `fencepost worker --metrics-port PORT` serves a worker's at "
        "`http://127.0.0.1:PORT/metrics`, without a token. Every metric is listed here, "
        "read from the service's and a worker's own registries when this page was built. "
        "[Metrics, alerts and tracing](../how-to/observability.md) shows what to alert on.",
        "",
        "## Read from the store at each scrape",
        "",
        "Database-wide figures: every replica of the service reports the same value for "
        "the whole cluster, so aggregate them with `max`, not `sum`. "
        "`fencepost_store_up` is 0 when the store could not be read; the others are then "
        "left out of that scrape.",
        "",
        *header,
        *rows_store,
        "",
        "## Counted by this process",
        "",
        "What this service process (its API, embedded workers, materializer and reaper) "
        "did since it started. Sum them across processes.",
        "",
        *header,
        *rows_process,
        "",
        "## Counted by a worker",
        "",
        "What a `fencepost worker --metrics-port` process (or `App.run_worker(metrics_port=...)`) "
        "did since it started, by job. A worker on a database (`--db`) also exports the "
        "counters of the section above, as its own work; a remote worker (`--server`) does "
        "not, because the service it calls counts them. `job` takes the names of the jobs "
        "the worker runs, each exported from the start (at zero).",
        "",
        *header,
        *rows_worker,
        "",
        "## Label values and buckets",
        "",
        *details,
    ]
    return "\n".join(lines).rstrip() + "\n"


with mkdocs_gen_files.open("reference/metrics.md", "w") as out:
    out.write(page())
