// The Jobs view and one job's page.

import { api, path, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { STATES, formatSeconds, formatTime, json, stateBadge } from "../format.js";
import { changed } from "../render.js";
import { HistoryReader, WINDOWS, chartPanel, historyLink, historyNote } from "./history.js";

// The Jobs view counts each job's executions created in this trailing window.
export const JOBS_WINDOW_SECONDS = 86400;

export const DURATION_DEFAULTS = ["timeout", "lease_ttl", "retry_base_delay", "retry_max_delay"];

// A job's defaults as one line: "max_attempts=5 timeout=30 s queue=reports" ("–": none set).
export function defaultsText(defaults) {
  const parts = [];
  for (const [key, value] of Object.entries(defaults || {})) {
    if (value === null || value === undefined) continue;
    parts.push(`${key}=${DURATION_DEFAULTS.includes(key) ? formatSeconds(value) : value}`);
  }
  return parts.length ? parts.join(" ") : "–";
}

export function inputNames(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : null;
  // By name, as the API's "inputs" (a stored schema keeps no order of its keys).
  return properties && !Array.isArray(properties) ? Object.keys(properties).sort() : [];
}

export function jobLink(name) {
  return h("a", { href: `#/jobs/${encodeURIComponent(name)}`, class: "job-link" }, name);
}

export function countCells(counts) {
  return STATES.map((s) => h("td", { class: "num", "data-state": s }, counts[s] ?? 0));
}

export function countItems(counts) {
  return STATES.map((s) => h("li", {}, stateBadge(s), h("span", { class: "count", "data-state": s }, counts[s] ?? 0)));
}

// A job's live workers ("0, no live worker" when none) and its due executions waiting
// now, with how many of them no live worker serves.
export function workersText(waiting) {
  if (!waiting) return "–";
  return waiting.workers ? String(waiting.workers) : "0, no live worker";
}

export function dueText(waiting) {
  if (!waiting) return "–";
  return waiting.unserved ? `${waiting.due} (${waiting.unserved} unserved)` : String(waiting.due);
}

export function waitingCells(waiting) {
  const warn = (bad) => (bad ? "num unserved-cell" : "num");
  return [
    h("td", { class: `workers ${warn(waiting && !waiting.workers)}` }, workersText(waiting)),
    h("td", { class: `due ${warn(waiting && waiting.unserved)}` }, dueText(waiting)),
  ];
}

export async function loadJobs() {
  const list = await api("GET", `/jobs${query({ window: JOBS_WINDOW_SECONDS })}`);
  return () => {
    if (!changed("jobs", list)) return;
    $("jobs-window").textContent = formatSeconds(list.window_seconds);
    const rows = list.jobs.map((job) =>
      h(
        "tr",
        { "data-job": job.name },
        h("td", { class: "job" }, jobLink(job.name)),
        h("td", { class: "num latest" }, `${job.latest.version} (of ${job.versions.length})`),
        h("td", { class: "defaults" }, defaultsText(job.latest.defaults)),
        h("td", { class: "inputs" }, job.inputs.length ? job.inputs.join(", ") : "–"),
        h("td", { class: "nodes" }, job.nodes.length ? job.nodes.join(", ") : "–"),
        ...waitingCells(job.waiting),
        ...countCells(job.counts),
      ),
    );
    $("jobs").replaceChildren(
      ...(rows.length ? rows : [emptyRow(7 + STATES.length, "No job published yet: workers publish the jobs they run.")]),
    );
  };
}

// A job page's charts: what finished and how late its claims were.
export const JOB_CHARTS = [
  {
    name: "job-throughput",
    title: "Throughput by outcome",
    caption: "its executions that finished in each step",
    series: ["succeeded", "dead", "retried", "timed_out", "cancelled"],
  },
  {
    name: "job-lateness",
    title: "Claim lateness",
    caption: "first claim after the planned time",
    series: ["lateness_p99", "lateness_p50"],
  },
];

const jobHistory = new HistoryReader();
// The charts shown, for one job: another job's page makes its own.
let shownCharts = null;

function jobCharts(name, window) {
  if (shownCharts && shownCharts.name === name) return shownCharts;
  const panel = chartPanel(JOB_CHARTS);
  const windows = h(
    "nav",
    { class: "filters job-windows", "aria-label": "Window" },
    ...Object.entries(WINDOWS).map(([value, text]) =>
      h("a", { href: `#/jobs/${encodeURIComponent(name)}${query({ window: value })}`, "data-window": value }, text),
    ),
    h("a", { id: "job-history-link", href: historyLink({ window, job: name }) }, "All charts of this job"),
  );
  let section = $("job-history");
  if (!section) {
    section = h("section", { id: "job-history" });
    $("job-versions").before(section);
  }
  section.replaceChildren(h("h3", {}, "Over time"), windows, h("p", { class: "figures", id: "job-history-note" }), panel.element);
  shownCharts = { name, panel };
  return shownCharts;
}

export async function loadJob(route) {
  const window = Object.hasOwn(WINDOWS, route.params.get("window") ?? "") ? route.params.get("window") : "day";
  const [job, history] = await Promise.all([
    api("GET", `${path("jobs", route.id)}${query({ window: JOBS_WINDOW_SECONDS })}`),
    jobHistory.get(JSON.stringify([route.id, window]), route.opened, () =>
      api("GET", `/history${query({ window, job: route.id })}`),
    ),
  ]);
  return () => {
    const charts = jobCharts(route.id, window);
    for (const link of document.querySelectorAll(".job-windows a[data-window]")) {
      link.classList.toggle("current", link.dataset.window === window);
    }
    $("job-history-link").setAttribute("href", historyLink({ window, job: route.id }));
    $("job-history-note").textContent = historyNote(history);
    charts.panel.update(history);
    if (!changed("job", job)) return;
    const latest = job.versions[job.versions.length - 1];
    $("job-name").textContent = job.name;
    $("job-window").textContent = formatSeconds(job.window_seconds);
    const fields = [
      ["latest", latest.version],
      ["versions", job.versions.map((v) => v.version).join(", ")],
      ["nodes", job.nodes.length ? job.nodes.join(", ") : "none live"],
      ["workers", workersText(job.waiting)],
      ["due", dueText(job.waiting)],
    ];
    $("job-fields").replaceChildren(
      ...fields.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    $("job-counts").replaceChildren(...countItems(job.counts));
    // The latest first: what a submit that names no version runs.
    const versions = [...job.versions].reverse().map((v) => {
      const nodes = v.served_by || [];
      const details = [
        ["digest", h("code", {}, v.digest)],
        ["published", h("span", { title: v.published_at || undefined }, formatTime(v.published_at))],
        ["source", `${v.source.kind} ${v.source.where}`.trim()],
        ["description", v.description || "–"],
        ["defaults", defaultsText(v.defaults)],
        ["inputs", inputNames(v.input_schema).join(", ") || "–"],
        ["nodes", nodes.length ? nodes.join(", ") : "none live"],
      ];
      return h(
        "section",
        { class: "job-version", "data-version": v.version },
        h("h3", {}, `Version ${v.version}`),
        h(
          "dl",
          { class: "fields" },
          ...details.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
        ),
        h(
          "div",
          { class: "schemas" },
          h("div", {}, h("h4", {}, "Input schema"), h("pre", { class: "input-schema" }, json(v.input_schema))),
          h("div", {}, h("h4", {}, "Output schema"), h("pre", { class: "output-schema" }, json(v.output_schema))),
        ),
      );
    });
    $("job-versions").replaceChildren(...versions);
  };
}
