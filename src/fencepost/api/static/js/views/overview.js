// The overview above every view: counts by state, figures, work nobody serves and the chart.

import { api, query } from "../api.js";
import { $, h, show, svg } from "../dom.js";
import { STATES, formatSeconds, roundUp, stateBadge } from "../format.js";
import { changed } from "../render.js";

// The chart plots each poll's claim-lateness percentiles over this trailing window.
export const CHART_WINDOW_SECONDS = 60;
export const CHART_MAX_SAMPLES = 240;

// The warning about work nobody serves lists this many job versions, then a count.
export const UNSERVED_SHOWN = 10;

// -- overview: counts and the lateness chart -----------------------------------------------

export const samples = [];

export async function loadStats() {
  const stats = await api("GET", `/stats${query({ window: CHART_WINDOW_SECONDS })}`);
  return () => {
    const late = stats.claim_lateness;
    samples.push({ at: Date.now(), p50: late.p50, p90: late.p90, p99: late.p99, count: late.count });
    if (samples.length > CHART_MAX_SAMPLES) samples.shift();
    $("counts").replaceChildren(
      ...STATES.map((s) => h("li", {}, stateBadge(s), h("span", { class: "count", "data-state": s }, stats.by_state[s] ?? 0))),
    );
    // Throttled claims (a limit or a paused queue held them) are not in the lateness.
    const throttled = (stats.throttled || []).reduce((sum, t) => sum + t.count, 0);
    // The window's other error classes, by the names the SLO view gives them.
    const errors = Object.entries(stats.errors || {})
      .filter(([name]) => name !== "throttled")
      .map(([name, count]) => `${name} ${count}`);
    $("figures").textContent =
      `due backlog ${stats.due_backlog} · claims in the last ${formatSeconds(stats.window_seconds)}: ` +
      `${late.count} (max ${formatSeconds(late.max)}) · throttled ${throttled} · ` +
      errors.join(" · ");
    renderUnserved(stats.unserved);
    drawChart();
  };
}

// The warning panel: due executions whose job (or pinned version) no live worker
// serves, and active schedules while no scheduler runs. Hidden when there are none.
export function renderUnserved(unserved) {
  if (!changed("unserved", unserved ?? null)) return;
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const groups = unserved?.executions ?? [];
  // A long list would push every view off the screen: the first few, then a count.
  const items = groups.slice(0, UNSERVED_SHOWN).map((group) => {
    const pinned = group.version !== null && group.version !== undefined;
    return h(
      "li",
      { "data-job": group.job, "data-version": pinned ? group.version : undefined },
      // Its executions, not its catalogue page: a job nobody published has none.
      h("a", { href: `#/executions${query({ job: group.job })}`, class: "job-link" }, group.job),
      pinned ? ` version ${group.version}` : "",
      ": ",
      h("span", { class: "count" }, plural(group.count, "due execution", "due executions")),
      pinned ? ` pinned to version ${group.version}, which no live worker serves` : ", no live worker serves this job",
    );
  });
  if (groups.length > UNSERVED_SHOWN) {
    const rest = groups.slice(UNSERVED_SHOWN).reduce((sum, group) => sum + group.count, 0);
    const others = plural(groups.length - UNSERVED_SHOWN, "more job", "more jobs");
    items.push(h("li", { class: "more" }, `and ${plural(rest, "due execution", "due executions")} of ${others} (fencepost stats names them all)`));
  }
  if (unserved?.schedules) {
    items.push(
      h(
        "li",
        { "data-schedules": unserved.schedules },
        h("span", { class: "count" }, plural(unserved.schedules, "active schedule", "active schedules")),
        ", no scheduler running: none of them fires (run fencepost serve or fencepost worker --with-scheduler)",
      ),
    );
  }
  $("unserved-list").replaceChildren(...items);
  show($("unserved"), items.length > 0);
}

export function drawChart() {
  const chart = $("chart");
  const width = 640;
  const height = 180;
  const left = 64;
  const right = 12;
  const top = 10;
  const bottom = 24;
  // Widest first, so where the percentiles coincide every colour still shows.
  const series = ["p99", "p90", "p50"];
  const values = samples.flatMap((s) => series.map((k) => s[k])).filter((v) => v !== null && v !== undefined);
  const nodes = [svg("rect", { x: left, y: top, width: width - left - right, height: height - top - bottom, class: "plot" })];
  if (!values.length) {
    nodes.push(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "no claims in the window yet"));
    chart.replaceChildren(...nodes);
    return;
  }
  // At least 10 ms: sub-millisecond noise should not look like a spike.
  const maxY = roundUp(Math.max(...values, 0.01));
  const first = samples[0].at;
  const span = Math.max(samples[samples.length - 1].at - first, 1);
  const x = (at) => left + ((at - first) / span) * (width - left - right);
  const y = (v) => top + (1 - v / maxY) * (height - top - bottom);
  for (const fraction of [0, 0.5, 1]) {
    const value = maxY * fraction;
    nodes.push(svg("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), class: "gridline" }));
    nodes.push(svg("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end", class: "axis" }, formatSeconds(value)));
  }
  const elapsed = (samples[samples.length - 1].at - first) / 1000;
  nodes.push(svg("text", { x: left, y: height - 6, class: "axis" }, "page opened"));
  nodes.push(svg("text", { x: width - right, y: height - 6, "text-anchor": "end", class: "axis" }, `+${formatSeconds(elapsed)}`));
  for (const key of series) {
    // A poll without claims leaves a gap: the line is split into runs of known values.
    let run = [];
    const flush = () => {
      if (run.length === 1) nodes.push(svg("circle", { cx: run[0][0], cy: run[0][1], r: 2, class: `series ${key}` }));
      if (run.length > 1) nodes.push(svg("polyline", { points: run.map((p) => p.join(",")).join(" "), class: `series ${key}` }));
      run = [];
    };
    for (const s of samples) {
      if (s[key] === null || s[key] === undefined) flush();
      else run.push([x(s.at).toFixed(1), y(s[key]).toFixed(1)]);
    }
    flush();
  }
  chart.replaceChildren(...nodes);
}
