// The Over time view: charts of stored history (GET /history), by window, job and queue.
//
// History is rolled up by the service from finished executions (per minute, kept for
// days), so these charts show the same figures after a reload, to every operator.
// The window, job and queue live in the URL: "#/history?window=day&job=report".

import { api, query } from "../api.js";
import { $, h } from "../dom.js";
import { formatSeconds, formatTime } from "../format.js";
import { timeChart } from "../charts.js";
import { changed } from "../render.js";

export const WINDOWS = { hour: "Last hour", day: "Last day", week: "Last week" };
// Stored history changes by the minute: read again at most this often while a view
// that charts it stays open (and at once when it is opened or its filters change).
export const HISTORY_REFRESH_MS = 30000;

// The charts of the Over time view, top to bottom.
export const HISTORY_CHARTS = [
  {
    name: "throughput",
    title: "Throughput by outcome",
    caption: "executions that finished in each step (retried: after more than one attempt)",
    series: ["succeeded", "dead", "retried", "timed_out", "cancelled", "skipped"],
  },
  {
    name: "lateness",
    title: "Claim lateness",
    caption: "first claim after the planned time, of the claims in each step",
    series: ["lateness_p99", "lateness_p50"],
  },
  {
    name: "failures",
    title: "Failures and dead letters",
    caption: "dead letters, attempts that timed out, and SLO misses",
    series: ["dead", "timed_out", "claim_missed", "finish_missed"],
  },
  {
    name: "throttled",
    title: "Throttled time",
    caption: "how long limits and paused queues held executions past their due time",
    series: ["throttled_seconds"],
  },
  {
    name: "burn",
    title: "SLO burn rate",
    caption: "the share missed over the share allowed: above 1 spends the error budget too fast",
    series: ["claim_burn", "finish_burn"],
    threshold: 1,
  },
];

// The window, job and queue a route asks for; an unknown window is the hour.
export function historyParams(params) {
  const window = params.get("window");
  return {
    window: Object.hasOwn(WINDOWS, window ?? "") ? window : "hour",
    job: params.get("job") || null,
    queue: params.get("queue") || null,
  };
}

export function historyLink(params) {
  return `#/history${query(params)}`;
}

// "per minute", "per 15 min", "per hour": what one point of a window stands for.
export function stepText(seconds) {
  if (seconds === 60) return "per minute";
  if (seconds === 3600) return "per hour";
  return `per ${formatSeconds(seconds)}`;
}

// Reads of GET /history kept between polls: by what they asked, with when.
export class HistoryReader {
  constructor() {
    this.key = null;
    this.readAt = 0;
    this.data = null;
  }

  // The data for `key`, read by `read()` when the view was just opened, the key
  // changed, or HISTORY_REFRESH_MS passed; else the last data.
  async get(key, opened, read) {
    if (opened || !this.data || key !== this.key || Date.now() - this.readAt >= HISTORY_REFRESH_MS) {
      const data = await read();
      Object.assign(this, { key, readAt: Date.now(), data });
    }
    return this.data;
  }
}

// A panel of charts over one GET /history answer: {element, update(history)}.
export function chartPanel(specs) {
  const charts = specs.map((spec) => timeChart(spec));
  const element = h("div", { class: "chart-grid" }, ...charts.map((c) => c.element));
  return {
    element,
    update(history) {
      for (const chart of charts) chart.update(history.points);
    },
  };
}

// "Stored history is rolled up to 12:01:00; each point is one minute."
export function historyNote(history) {
  const upTo = history.rolled_up_to
    ? `rolled up to ${formatTime(history.rolled_up_to)}`
    : "not rolled up yet (nothing has finished since the service started keeping it)";
  return (
    `${formatTime(history.start)} to ${formatTime(history.end)}, one point ${stepText(history.step_seconds)}; ` +
    `stored history ${upTo}. An execution is counted about a minute after it finishes.`
  );
}

// -- the view ------------------------------------------------------------------------

const reader = new HistoryReader();
let view = null;

function picker(id, label) {
  const select = h("select", { id, name: id });
  select.addEventListener("change", () => {
    const params = {
      window: $("history-window").value,
      job: $("history-job").value,
      queue: $("history-queue").value,
    };
    location.hash = historyLink(params);
  });
  return h("label", {}, label, " ", select);
}

function build() {
  const panel = chartPanel(HISTORY_CHARTS);
  const section = $("view-history");
  section.replaceChildren(
    h("h2", {}, "Over time"),
    h("form", { class: "filters history-pickers", id: "history-pickers" }, picker("history-window", "Window"), picker("history-job", "Job"), picker("history-queue", "Queue")),
    h("p", { class: "figures", id: "history-note" }),
    panel.element,
  );
  $("history-window").replaceChildren(...Object.entries(WINDOWS).map(([value, text]) => h("option", { value }, text)));
  return { panel };
}

// A select's options: "all" first, then the names, the chosen one kept even when the
// window holds nothing of it.
function fillNames(select, all, names, chosen) {
  const listed = [...new Set([...names, ...(chosen ? [chosen] : [])])].sort();
  select.replaceChildren(h("option", { value: "" }, all), ...listed.map((name) => h("option", { value: name }, name)));
  select.value = chosen ?? "";
}

export async function loadHistory(route) {
  const params = historyParams(route.params);
  const { history, jobs, queues } = await reader.get(JSON.stringify(params), route.opened, async () => {
    const [history, jobs, queues] = await Promise.all([
      api("GET", `/history${query(params)}`),
      api("GET", `/history/summary${query({ window: params.window, by: "job" })}`),
      api("GET", `/history/summary${query({ window: params.window, by: "queue" })}`),
    ]);
    return { history, jobs, queues };
  });
  return () => {
    if (!view) view = build();
    if (changed("history-pickers", [params, jobs.rows.map((r) => r.name), queues.rows.map((r) => r.name)])) {
      $("history-window").value = params.window;
      fillNames($("history-job"), "all jobs", jobs.rows.map((r) => r.name), params.job);
      fillNames($("history-queue"), "all queues", queues.rows.map((r) => r.name), params.queue);
    }
    $("history-note").textContent = historyNote(history);
    view.panel.update(history);
  };
}
