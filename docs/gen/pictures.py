"""Draw the two pictures of the explanation pages from the code, at every build.

* ``images/state-machine.svg``: :data:`fencepost.domain.machine.EDGES`, drawn by
  Graphviz's ``dot`` (Debian's ``graphviz`` package; ``make system-deps``).
* ``images/lease-timeline.svg``: the run of ``examples/lease_timeline.py`` (its
  :func:`record`, on a SQLite store with a ManualClock): each worker's lease on the
  execution due at t=10, its epoch, the expiry, the takeover and the refused stale
  completion, at the instants the store gave them.

Both are black on a white card, legible in the light and the dark theme.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape

import graphviz
import mkdocs_gen_files

from fencepost.domain.machine import EDGES
from fencepost.domain.states import TERMINAL_STATES, State

ROOT = Path(__file__).resolve().parents[2]
INK = "#1f2933"
MUTED = "#52606d"
FONT = "Helvetica,Arial,sans-serif"


def _without_doctype(svg: str) -> str:
    """dot's SVG minus its XML declaration, DOCTYPE (a DTD address nothing needs to
    fetch) and comments: an SVG element a page can also inline."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    return re.sub(r"<!--.*?-->\s*", "", svg, flags=re.S)


def state_machine() -> str:
    dot = graphviz.Digraph("states", format="svg")
    dot.attr(
        rankdir="LR",
        bgcolor="white",
        pad="0.3",
        nodesep="0.5",
        ranksep="0.9",
        fontname=FONT,
    )
    dot.attr(
        "node", fontname=FONT, fontsize="12", color=INK, fontcolor=INK, shape="box", style="rounded"
    )
    dot.attr("edge", fontname=FONT, fontsize="10", color=MUTED, fontcolor=INK)
    dot.node("start", label="", shape="circle", width="0.18", style="filled", fillcolor=INK)
    for state in State:
        terminal = state in TERMINAL_STATES
        dot.node(
            state.value,
            label=state.value,
            peripheries="2" if terminal else "1",
            style="rounded,filled",
            fillcolor="#e4e7eb" if terminal else "#ffffff",
        )
    # One arrow per pair of states, naming every event that moves along it.
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for event, moves in EDGES.items():
        for source, targets in moves.items():
            for target in sorted(targets):
                labels[("start" if source is None else source.value, target.value)].append(
                    event.value
                )
    for (source, target), events in labels.items():
        dot.edge(source, target, label="\n".join(events))
    return _without_doctype(dot.pipe(encoding="utf-8"))


def _load_example():
    path = ROOT / "examples" / "lease_timeline.py"
    spec = importlib.util.spec_from_file_location("lease_timeline_example", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def lease_timeline() -> str:
    example = _load_example()
    with tempfile.TemporaryDirectory() as folder:
        timeline = example.record(Path(folder) / "timeline.db")
    execution = timeline.job10.id
    t_of = example.clock_t
    due = t_of(timeline.job10.due_at)

    # What the calls did to this one execution, in order.
    claims = {}  # epoch -> (worker, t, lease)
    completed = {}  # epoch -> (t, state)
    refusals = []  # (t, worker, epoch): stale, a newer epoch existed
    for step in timeline.steps:
        got = [lease for lease in step.leases if lease.execution_id == execution]
        held = {worker: lease for worker, _, lease in claims.values()}
        if got:
            claims[got[0].epoch] = (step.worker, step.t, got[0])
        elif step.completed is not None and step.completed.id == execution:
            completed[held[step.worker].epoch] = (step.t, str(step.completed.state))
        elif (
            step.refused is not None
            and step.refused.execution_id == execution
            and step.refused.epoch < max(claims)  # stale: a newer epoch was granted
        ):
            refusals.append((step.t, step.worker, step.refused.epoch))
    workers = list(dict.fromkeys(worker for worker, _, _ in claims.values()))
    finished = min((t for t, _ in completed.values()), default=float("inf"))
    # Claims by these workers that got nothing while the execution was unfinished.
    empty = [
        (step.t, step.worker)
        for step in timeline.steps
        if step.worker in workers
        and not step.leases
        and step.refused is None
        and step.completed is None
        and step.t < finished
    ]

    def why_nothing(t: float) -> str:
        if t < due:
            return "claim: nothing due"
        for epoch, (_, start, lease) in claims.items():
            if start <= t < t_of(lease.lease_until):
                return f"claim: nothing (epoch {epoch}'s lease is live)"
        return "claim: nothing"

    spans = []  # (worker, start, end, epoch, how, until)
    for epoch, (worker, start, lease) in sorted(claims.items()):
        until = t_of(lease.lease_until)
        if epoch in completed:
            spans.append((worker, start, completed[epoch][0], epoch, "completed", until))
        else:
            spans.append((worker, start, until, epoch, "expired", until))
    marks = [(t, w, "nothing", why_nothing(t)) for t, w in empty]
    marks += [
        (t, w, "refused", f"complete with epoch {epoch}: refused (StaleLease)")
        for t, w, epoch in refusals
    ]
    marks += [
        (t, claims[epoch][0], "completed", f"complete with epoch {epoch}: {state}")
        for epoch, (t, state) in completed.items()
    ]
    t0 = min([s for _, s, *_ in spans] + [t for t, *_ in marks]) - 1
    t1 = max(u for *_, u in spans) + 1
    width, left, right = 900, 110, 30
    lane_gap, top = 95, 70
    height = top + lane_gap * len(workers) + 50

    def x(t: float) -> float:
        return left + (t - t0) * (width - left - right) / (t1 - t0)

    lane = {worker: top + 30 + i * lane_gap for i, worker in enumerate(workers)}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="{FONT}" font-size="13" '
        f'role="img" aria-labelledby="title">',
        '<title id="title">Lease timeline: two workers, epochs 1 and 2, a refused stale '
        "completion</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" rx="8" fill="white"/>',
        f'<text x="{left}" y="28" font-size="15" font-weight="bold" fill="{INK}">'
        f"One execution (due t={t_of(timeline.job10.due_at):g}), leases of "
        f"{example.TTL} s, by the store's clock</text>",
    ]
    axis_y = height - 40
    out.append(f'<line x1="{x(t0)}" y1="{axis_y}" x2="{x(t1)}" y2="{axis_y}" stroke="{MUTED}"/>')
    for t in range(int(t0), int(t1) + 1):
        out.append(
            f'<line x1="{x(t):.1f}" y1="{axis_y}" x2="{x(t):.1f}" y2="{axis_y + 5}" '
            f'stroke="{MUTED}"/>'
            f'<text x="{x(t):.1f}" y="{axis_y + 20}" text-anchor="middle" font-size="11" '
            f'fill="{MUTED}">t={t}</text>'
        )
    for worker, y in lane.items():
        out.append(
            f'<text x="{left - 14}" y="{y + 5}" text-anchor="end" font-weight="bold" '
            f'fill="{INK}">{escape(worker)}</text>'
            f'<line x1="{x(t0)}" y1="{y}" x2="{x(t1)}" y2="{y}" stroke="#cbd2d9" '
            f'stroke-dasharray="2 4"/>'
        )
    for worker, start, end, epoch, how, until in spans:
        y = lane[worker]
        fill = "#2f855a" if how == "completed" else "#c05621"
        out.append(
            f'<rect x="{x(start):.1f}" y="{y - 11}" width="{x(end) - x(start):.1f}" '
            f'height="22" rx="3" fill="{fill}"/>'
        )
        if until > end:  # the rest of the lease, unused
            out.append(
                f'<rect x="{x(end):.1f}" y="{y - 11}" width="{x(until) - x(end):.1f}" '
                f'height="22" rx="3" fill="none" stroke="{fill}" stroke-dasharray="4 3"/>'
            )
        label = f"epoch {epoch}: lease until t={until:g}"
        if epoch > min(claims):
            label += " (takeover)"
        out.append(f'<text x="{x(start):.1f}" y="{y - 18}" fill="{INK}">{escape(label)}</text>')
        if how == "expired":
            out.append(
                f'<line x1="{x(end):.1f}" y1="{top}" x2="{x(end):.1f}" y2="{axis_y}" '
                f'stroke="#c05621" stroke-dasharray="5 4"/>'
                f'<text x="{x(end) + 6:.1f}" y="{axis_y - 8}" fill="#c05621" font-size="12">'
                f"t={end:g}: epoch {epoch}'s lease expires</text>"
            )
    for t, worker, kind, text in marks:
        y, cx = lane[worker], x(t)
        if kind == "refused":
            out.append(
                f'<line x1="{x(t) - 60:.1f}" y1="{y}" x2="{cx - 9:.1f}" y2="{y}" '
                f'stroke="{MUTED}" stroke-dasharray="3 3"/>'
                f'<path d="M{cx - 8:.1f},{y - 8} L{cx + 8:.1f},{y + 8} M{cx + 8:.1f},{y - 8} '
                f'L{cx - 8:.1f},{y + 8}" stroke="#c53030" stroke-width="3"/>'
                f'<text x="{cx + 14:.1f}" y="{y + 5}" fill="#c53030" font-weight="bold">'
                f"t={t:g}: {escape(text)}</text>"
            )
        elif kind == "completed":
            out.append(
                f'<path d="M{cx - 7:.1f},{y} L{cx - 2:.1f},{y + 6} L{cx + 8:.1f},{y - 7}" '
                f'fill="none" stroke="white" stroke-width="3"/>'
                f'<text x="{cx + 14:.1f}" y="{y + 30}" fill="#2f855a" font-weight="bold">'
                f"t={t:g}: {escape(text)}</text>"
            )
        else:
            out.append(
                f'<circle cx="{cx:.1f}" cy="{y}" r="5" fill="white" stroke="{MUTED}" '
                f'stroke-width="2"/>'
                f'<text x="{cx:.1f}" y="{y + 26}" text-anchor="middle" fill="{MUTED}" '
                f'font-size="12">t={t:g}: {escape(text)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


with mkdocs_gen_files.open("images/state-machine.svg", "w") as out:
    out.write(state_machine())
with mkdocs_gen_files.open("images/lease-timeline.svg", "w") as out:
    out.write(lease_timeline())
