// One execution's life as a picture: drawTimeline(model) -> <svg>.
//
// `model` is the answer of GET /executions/{id}/timeline (fencepost.domain.timeline
// decides it): leases (one per epoch, with the stale writes refused on each), waits and
// marks between `start` and `end`. The drawing is pure DOM: every element is made with
// createElementNS, every string reaches it as textContent or an attribute value (a
// hostile owner name stays text), and no element carries a style attribute (the page's
// CSP forbids inline styles): the look is css/timeline.css's, by class.
//
// Layout, top to bottom, in viewBox units (the <svg> scales to its box's width):
//   the time axis; one row per lease (label "epoch N · owner — ending", then its bar);
//   the waits (one thin lane); the marks (ticks). Bars run from a lease's claim to its
//   end, or to now, hatched, while it runs (then the dashed box ahead is its current
//   lease_until: heartbeats are not audited, so no earlier one is known). A refused
//   write is a red cross on the bar of the epoch it carried; one that came after its
//   lease ended sits on the dashed "after-life" that extends the bar to it.

const SVG_NS = "http://www.w3.org/2000/svg";

// The drawing's width in viewBox units: about a phone's width in CSS pixels, so that
// text drawn at 10 units stays legible at 390 px (the stylesheet caps the width).
const WIDTH = 420;
const LEFT = 6;
const RIGHT = 14; // room for the ending glyph at the right edge
const AXIS_HEIGHT = 30;
const LEASE_ROW = 34;
const BAR_TOP = 14;
const BAR_HEIGHT = 12;
const WAIT_ROW = 30;
const MARK_ROW = 34;
const LABEL_CHARS = 30;

const ENDINGS = {
  succeeded: { glyph: "✓", words: "succeeded" },
  failed: { glyph: "✗", words: "failed (dead letter)" },
  retrying: { glyph: "✗", words: "failed, retrying" },
  timed_out: { glyph: "!", words: "expired" },
  taken_over: { glyph: "»", words: "taken over" },
  cancelled: { glyph: "⊘", words: "cancelled" },
  released: { glyph: "↩", words: "released" },
  running: { glyph: "", words: "running" },
};

const WAIT_WORDS = {
  due: "waiting until due",
  retry_delay: "retry delay",
  throttled: "throttled",
  snoozed: "snoozed",
  paused: "paused",
};

// -- small helpers ------------------------------------------------------------------------

function el(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined) node.setAttribute(key, String(value));
  }
  if (text !== null) node.textContent = String(text);
  return node;
}

function titled(node, text) {
  node.append(el("title", {}, text));
  return node;
}

// Milliseconds since 1970 of an ISO instant (the API gives microseconds; Date wants ms).
function ms(iso) {
  if (iso === null || iso === undefined) return null;
  const value = Date.parse(String(iso).replace(/(\.\d{3})\d+/, "$1"));
  return Number.isFinite(value) ? value : null;
}

const cls = (word) => String(word).replace(/[^a-z0-9]+/gi, "-").toLowerCase();
const pad = (n, width = 2) => String(n).padStart(width, "0");

function clipped(text, chars = LABEL_CHARS) {
  const value = String(text ?? "");
  return value.length > chars ? `${value.slice(0, chars - 1)}…` : value;
}

export function formatDuration(milliseconds) {
  const s = Math.abs(milliseconds) / 1000;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${Number(s.toFixed(s < 10 ? 2 : 1))} s`;
  if (s < 7200) return `${Number((s / 60).toFixed(1))} min`;
  if (s < 172800) return `${Number((s / 3600).toFixed(1))} h`;
  return `${Number((s / 86400).toFixed(1))} d`;
}

function clockText(at, step) {
  const d = new Date(at);
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (step >= 86400000) return `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  if (step >= 3600000) return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
  if (step >= 60000) return time;
  const seconds = `${time}:${pad(d.getSeconds())}`;
  return step >= 1000 ? seconds : `${seconds}.${pad(d.getMilliseconds(), 3)}`;
}

// A round tick step giving at most `most` ticks over `span` milliseconds.
const STEPS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5,
  18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5, 1728e5, 6048e5, 12096e5, 2592e6, 7776e6, 31536e6,
];

function tickStep(span, most) {
  return STEPS.find((step) => span / step <= most) ?? span / most;
}

// -- the drawing --------------------------------------------------------------------------

export function drawTimeline(model) {
  const start = ms(model.start) ?? 0;
  const now = ms(model.now) ?? start;
  const end = Math.max(ms(model.end) ?? start, start + 1000);
  const span = end - start;
  const inner = WIDTH - LEFT - RIGHT;
  const x = (at) => LEFT + (Math.min(Math.max(at, start), end) - start) / span * inner;
  const leases = Array.isArray(model.leases) ? model.leases : [];
  const waits = Array.isArray(model.waits) ? model.waits : [];
  const marks = Array.isArray(model.marks) ? model.marks : [];
  const height = AXIS_HEIGHT + leases.length * LEASE_ROW + WAIT_ROW + MARK_ROW;

  const root = el("svg", {
    class: "timeline",
    viewBox: `0 0 ${WIDTH} ${height}`,
    width: "100%",
    role: "img",
    "aria-label": `Timeline of execution ${model.execution_id ?? ""}`,
    "data-start": model.start,
    "data-end": model.end,
  });
  root.append(el("title", {}, `Execution ${model.execution_id ?? ""}: ${model.state ?? ""}`));

  const grid = el("g", { class: "tl-grid" });
  root.append(grid);
  root.append(axis(x, start, end, height, grid));
  let top = AXIS_HEIGHT;
  for (const lease of leases) {
    root.append(leaseRow(lease, x, top, now));
    top += LEASE_ROW;
  }
  root.append(waitRow(waits, x, top, now));
  top += WAIT_ROW;
  root.append(markRow(marks, x, top));
  if (now >= start && now <= end) {
    root.append(
      titled(
        el("line", { class: "tl-now", x1: x(now), x2: x(now), y1: AXIS_HEIGHT - 6, y2: height }),
        `now: ${model.now}`,
      ),
    );
  }
  return root;
}

function axis(x, start, end, height, grid) {
  const group = el("g", { class: "tl-axis" });
  const baseline = AXIS_HEIGHT - 8;
  group.append(el("line", { class: "tl-axis-line", x1: x(start), x2: x(end), y1: baseline, y2: baseline }));
  const step = tickStep(end - start, 4);
  // Ticks at round local times: a step of a day or more starts at a local midnight.
  const offset = step >= 864e5 ? new Date(start).getTimezoneOffset() * 60000 : 0;
  const first = Math.ceil((start - offset) / step) * step + offset;
  for (let at = first; at <= end; at += step) {
    const tx = x(at);
    group.append(el("line", { class: "tl-tick", x1: tx, x2: tx, y1: baseline - 3, y2: baseline + 3 }));
    const anchor = tx < LEFT + 20 ? "start" : tx > WIDTH - RIGHT - 20 ? "end" : "middle";
    group.append(
      el("text", { class: "tl-tick-label", x: tx, y: baseline - 6, "text-anchor": anchor }, clockText(at, step)),
    );
    grid.append(el("line", { x1: tx, x2: tx, y1: baseline, y2: height }));
  }
  return group;
}

function leaseRow(lease, x, top, now) {
  const ending = ENDINGS[lease.ending] ?? { glyph: "?", words: String(lease.ending) };
  const running = lease.end === null || lease.end === undefined;
  const begin = ms(lease.start);
  const finish = running ? Math.max(now, begin) : ms(lease.end);
  const owner = String(lease.owner ?? "");
  const row = el("g", {
    class: `tl-lease tl-ending-${cls(lease.ending)}${running ? " tl-running" : ""}`,
    "data-epoch": lease.epoch,
    "data-owner": owner,
  });
  const label = `epoch ${lease.epoch} · ${clipped(owner)} — ${ending.words}`;
  row.append(el("text", { class: "tl-label", x: LEFT, y: top + 10 }, label));

  const barTop = top + BAR_TOP;
  const x0 = x(begin);
  const x1 = Math.max(x(finish), x0 + 1);
  const described = [
    `epoch ${lease.epoch}${lease.attempt ? ` (attempt ${lease.attempt})` : ""} · ${owner}`,
    `${lease.start} – ${running ? "now (running)" : lease.end} (${formatDuration(finish - begin)})`,
    `${ending.words}${lease.detail ? `: ${lease.detail}` : ""}`,
  ];
  if (lease.lease_until) described.push(`lease until ${lease.lease_until} (heartbeats are not audited)`);
  row.append(
    titled(el("rect", { class: "tl-bar", x: x0, y: barTop, width: x1 - x0, height: BAR_HEIGHT }), described.join("\n")),
  );
  if (running) {
    // The open end: hatched, and a dashed box ahead to the current lease_until.
    for (let hx = Math.max(x0, x1 - 12); hx < x1; hx += 4) {
      row.append(el("line", { class: "tl-hatch", x1: hx, y1: barTop + BAR_HEIGHT, x2: Math.min(hx + 4, x1), y2: barTop }));
    }
    const until = ms(lease.lease_until);
    if (until !== null && x(until) > x1) {
      row.append(
        titled(
          el("rect", { class: "tl-open", x: x1, y: barTop, width: x(until) - x1, height: BAR_HEIGHT }),
          `lease until ${lease.lease_until}`,
        ),
      );
    }
  } else {
    // In a group of its own: a <title> inside the <text> would join its textContent.
    const glyph = el("g", { class: "tl-ending" });
    glyph.append(el("text", { x: x1 + 1, y: barTop + BAR_HEIGHT - 2 }, ending.glyph));
    row.append(titled(glyph, described[2]));
  }

  const refused = Array.isArray(lease.refused) ? lease.refused : [];
  const last = Math.max(...refused.map((r) => ms(r.at) ?? -Infinity), -Infinity);
  if (last > finish) {
    // Its holder kept calling after the lease ended: every write it made was refused.
    const ax = x(last);
    row.append(
      titled(
        el("rect", { class: "tl-afterlife", x: x1, y: barTop + 3, width: Math.max(ax - x1, 1), height: BAR_HEIGHT - 6 }),
        `after its lease ended, ${owner} still called until ${new Date(last).toISOString()}: refused`,
      ),
    );
  }
  for (const write of refused) {
    const rx = x(ms(write.at) ?? begin);
    const cy = barTop + BAR_HEIGHT / 2;
    const cross = el("g", { class: "tl-refused", "data-x": rx.toFixed(2), "data-verb": write.verb });
    cross.append(
      el("path", { d: `M${rx - 4} ${cy - 4}L${rx + 4} ${cy + 4}M${rx - 4} ${cy + 4}L${rx + 4} ${cy - 4}` }),
    );
    titled(cross, `stale ${write.verb} refused at ${write.at} from owner ${write.owner ?? "(unknown)"}`);
    row.append(cross);
  }
  return row;
}

function waitRow(waits, x, top, now) {
  const row = el("g", { class: "tl-waits" });
  row.append(el("text", { class: "tl-label", x: LEFT, y: top + 10 }, waits.length ? "waits:" : "waits: none"));
  // A legend of the kinds present, on the label's line.
  let lx = LEFT + 40;
  for (const kind of Object.keys(WAIT_WORDS).filter((k) => waits.some((w) => w.kind === k))) {
    row.append(el("rect", { class: `tl-wait tl-wait-${cls(kind)}`, x: lx, y: top + 4, width: 7, height: 7 }));
    const words = WAIT_WORDS[kind];
    row.append(el("text", { class: "tl-legend", x: lx + 9, y: top + 10 }, words));
    lx += 9 + words.length * 5.2 + 8;
  }
  for (const wait of waits) {
    const begin = ms(wait.start);
    if (begin === null) continue;
    const open = wait.end === null || wait.end === undefined;
    const finish = open ? Math.max(now, begin) : ms(wait.end);
    const x0 = x(begin);
    const x1 = Math.max(x(finish), x0 + 1);
    const words = WAIT_WORDS[wait.kind] ?? String(wait.kind);
    const text = [
      `${words}: ${formatDuration(finish - begin)}${open ? " so far" : ""}`,
      `${wait.start} – ${open ? "(still waiting)" : wait.end}`,
    ];
    if (wait.detail) text.push(String(wait.detail));
    row.append(
      titled(
        el("rect", {
          class: `tl-wait tl-wait-${cls(wait.kind)}${open ? " tl-open-end" : ""}`,
          x: x0,
          y: top + 16,
          width: x1 - x0,
          height: 6,
        }),
        text.join("\n"),
      ),
    );
  }
  return row;
}

function markRow(marks, x, top) {
  const row = el("g", { class: "tl-marks" });
  row.append(el("text", { class: "tl-label", x: LEFT, y: top + 10 }, marks.length ? "events" : "events: none"));
  for (const mark of marks) {
    const at = ms(mark.at);
    if (at === null) continue;
    const mx = x(at);
    const kind = String(mark.kind ?? "").replace(/_/g, " ");
    const words = [`${kind} at ${mark.at}`];
    if (mark.actor) words[0] += ` by ${mark.actor}`;
    if (mark.detail) words.push(String(mark.detail));
    const tick = el("g", { class: `tl-mark tl-mark-${cls(mark.kind)}` });
    tick.append(el("line", { x1: mx, x2: mx, y1: top + 15, y2: top + 29 }));
    tick.append(el("circle", { cx: mx, cy: top + 15, r: 2.5 }));
    row.append(titled(tick, words.join("\n")));
  }
  return row;
}
