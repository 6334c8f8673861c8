// The overview above every view: counts by state, figures, work nobody serves, and
// the last hour from stored history (the same after a reload, for every operator).

import { api, query } from "../api.js";
import { $, h, show } from "../dom.js";
import { STATES, formatSeconds, stateBadge } from "../format.js";
import { timeChart } from "../charts.js";
import { changed } from "../render.js";
import { HistoryReader, historyLink, historyNote } from "./history.js";

// The figures line counts claims over this trailing window (GET /stats).
export const STATS_WINDOW_SECONDS = 60;

// The warning about work nobody serves lists this many job versions, then a count.
export const UNSERVED_SHOWN = 10;

// -- overview: counts, figures and the last hour ---------------------------------------------

const reader = new HistoryReader();
let chart = null;

// The overview's chart: what finished and how late claims were, per minute.
function overviewChart() {
  const made = timeChart({
    name: "overview",
    title: "Last hour",
    caption: "finished per minute, and claim lateness",
    series: ["succeeded", "dead", "lateness_p99", "lateness_p50"],
    height: 160,
  });
  $("overview-chart").replaceChildren(
    made.element,
    h("p", { class: "figures" }, h("span", { id: "overview-note" }), " ", h("a", { href: historyLink({ window: "hour" }) }, "More charts")),
  );
  return made;
}

// The last hour of stored history, or the error that kept it away: a chart that cannot
// be read must not take the counts and every view down with it.
async function lastHour() {
  try {
    return await reader.get("hour", false, () => api("GET", `/history${query({ window: "hour" })}`));
  } catch (error) {
    return { error };
  }
}

export async function loadStats() {
  const [stats, history] = await Promise.all([
    api("GET", `/stats${query({ window: STATS_WINDOW_SECONDS })}`),
    lastHour(),
  ]);
  return () => {
    const late = stats.claim_lateness;
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
    if (!chart) chart = overviewChart();
    if (history.error) {
      $("overview-note").textContent = `Stored history could not be read: ${history.error.message}`;
      return;
    }
    $("overview-note").textContent = historyNote(history);
    chart.update(history.points);
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
