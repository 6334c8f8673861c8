// Charts of stored history: the one wrapper around uPlot (vendored, no build step).
//
// A chart is a <figure>: a caption, the plot uPlot draws on a canvas, the window's
// totals, and the figures themselves as a table (folded; for screen readers, copying,
// and a test that reads what was drawn). Values reach the page as text only: uPlot
// writes its legend and axes with textContent and draws the rest on the canvas.

import uPlot from "../vendor/uplot-1.6.32/uPlot.esm.js";
import { h } from "./dom.js";
import { formatSeconds, formatTime, pad } from "./format.js";

// Every series a chart can draw: a field of a GET /history point, its label, its
// colour (a canvas takes no CSS), and the scale it is read on.
export const SERIES = {
  succeeded: { label: "succeeded", color: "#2f855a", scale: "count" },
  dead: { label: "dead letters", color: "#c53030", scale: "count" },
  retried: { label: "retried", color: "#dd6b20", scale: "count" },
  timed_out: { label: "timed out", color: "#805ad5", scale: "count" },
  cancelled: { label: "cancelled", color: "#4a5568", scale: "count" },
  skipped: { label: "skipped", color: "#a0aec0", scale: "count" },
  claims: { label: "claims", color: "#2b6cb0", scale: "count" },
  claim_missed: { label: "claim SLO misses", color: "#d69e2e", scale: "count" },
  finish_missed: { label: "finish SLO misses", color: "#d53f8c", scale: "count" },
  lateness_p50: { label: "lateness p50", color: "#3182ce", scale: "seconds" },
  // Wider, and drawn before p50: where the two coincide, both still show.
  lateness_p99: { label: "lateness p99", color: "#e53e3e", scale: "seconds", width: 4 },
  throttled_seconds: { label: "throttled time", color: "#b7791f", scale: "seconds" },
  claim_burn: { label: "claim burn", color: "#2b6cb0", scale: "burn" },
  finish_burn: { label: "finish burn", color: "#d53f8c", scale: "burn" },
};

// How each scale's values read on an axis, in the legend and in the table.
const UNITS = {
  count: { text: (v) => String(Math.round(v * 100) / 100), range: [0, 1] },
  seconds: { text: (v) => formatSeconds(v), range: [0, 0.01] },
  burn: { text: (v) => v.toFixed(Math.abs(v) >= 10 ? 0 : Math.abs(v) >= 1 ? 1 : 2), range: [0, 1] },
};

// The tick steps of a count axis: whole numbers only.
const COUNT_STEPS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1000, 10000, 100000, 1000000].map((p) => m * p)).sort((a, b) => a - b);

// The tick steps of a duration axis: round seconds, minutes and hours.
const SECOND_STEPS = [
  0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
  60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

export const CHART_HEIGHT = 180;
// Below this width the plot still draws (a phone in portrait), just narrower.
const MIN_WIDTH = 200;

const present = (v) => v !== null && v !== undefined;

// The sum of a count series, the largest value of any other, over the window.
export function total(points, key) {
  const values = points.map((p) => p[key]).filter(present);
  if (!values.length) return null;
  return SERIES[key].scale === "count" ? values.reduce((a, b) => a + b, 0) : Math.max(...values);
}

export function valueText(key, value) {
  return present(value) ? UNITS[SERIES[key].scale].text(value) : "–";
}

// Time ticks in local time, 24 h: "14:30" within a day, "12-07 14:00" over days.
function timeTicks(u, ticks) {
  const days = (u.scales.x.max - u.scales.x.min) / 86400;
  return ticks.map((seconds) => {
    const d = new Date(seconds * 1000);
    const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    return days > 1.5 ? `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}` : time;
  });
}

// A scale's axis range: from 0, at least the unit's floor, so that an empty window is
// a flat line on a sensible axis rather than uPlot's guess.
function rangeOf(scale) {
  const [low, floor] = UNITS[scale].range;
  return (u, min, max) => [low, Math.max(floor, present(max) ? max * 1.1 : floor)];
}

// A chart of some SERIES over a window of history points.
//   spec: {name, title, series: [keys of SERIES], caption?: text under the title,
//          height?, threshold?: a value drawn as a dashed line on the first scale}
// Returns {element, update(points)}: update draws the points (GET /history's),
// and changes nothing when they did not change.
export function timeChart(spec) {
  const height = spec.height || CHART_HEIGHT;
  const plot = h("div", { class: "chart-plot" });
  const totals = h("p", { class: "chart-totals" });
  const table = h("table", { class: "grid chart-table" });
  const element = h(
    "figure",
    { class: "history-chart", "data-chart": spec.name },
    h("figcaption", {}, h("span", { class: "chart-title" }, spec.title), spec.caption ? h("small", {}, ` ${spec.caption}`) : null),
    plot,
    totals,
    h("details", { class: "chart-data" }, h("summary", {}, "Figures"), table),
  );
  const scales = [...new Set(spec.series.map((key) => SERIES[key].scale))];
  let chart = null;
  let drawn = null;

  function options(width) {
    const axes = [{ stroke: "#5a6475", grid: { stroke: "#e2e8f0" }, ticks: { stroke: "#e2e8f0" }, values: timeTicks }];
    scales.forEach((scale, i) => {
      axes.push({
        scale,
        side: i === 0 ? 3 : 1,
        stroke: "#5a6475",
        size: 64,
        grid: { show: i === 0, stroke: "#e2e8f0" },
        ticks: { stroke: "#e2e8f0" },
        values: (u, ticks) => ticks.map((v) => UNITS[scale].text(v)),
        // Counts are whole: no tick at 0.5 executions.
        incrs: scale === "count" ? COUNT_STEPS : scale === "seconds" ? SECOND_STEPS : undefined,
      });
    });
    const series = [
      { label: "time", value: (u, v) => (present(v) ? formatTime(new Date(v * 1000).toISOString()) : "–") },
      ...spec.series.map((key) => ({
        label: SERIES[key].label,
        scale: SERIES[key].scale,
        stroke: SERIES[key].color,
        width: SERIES[key].width || 2,
        points: { show: true, size: 4 },
        spanGaps: false,
        value: (u, v) => valueText(key, v),
      })),
    ];
    if (present(spec.threshold)) {
      series.push({
        label: `target ${spec.threshold}`,
        scale: scales[0],
        stroke: "#718096",
        width: 1,
        dash: [6, 4],
        points: { show: false },
        value: () => String(spec.threshold),
      });
    }
    return {
      width,
      height,
      series,
      axes,
      scales: Object.fromEntries([["x", { time: true }], ...scales.map((s) => [s, { range: rangeOf(s) }])]),
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
    };
  }

  function columns(points) {
    const xs = points.map((p) => Date.parse(p.at) / 1000);
    const ys = spec.series.map((key) => points.map((p) => (present(p[key]) ? p[key] : null)));
    if (present(spec.threshold)) ys.push(points.map(() => spec.threshold));
    return [xs, ...ys];
  }

  function renderTable(points) {
    // Only the steps that hold something, newest first: a quiet week is a short table.
    const rows = points
      .filter((p) => spec.series.some((key) => present(p[key]) && p[key] !== 0))
      .reverse()
      .map((p) =>
        h(
          "tr",
          { "data-step": p.at },
          h("td", { class: "time", title: p.at }, formatTime(p.at)),
          ...spec.series.map((key) => h("td", { class: `num ${key}` }, valueText(key, p[key]))),
        ),
      );
    table.replaceChildren(
      h("thead", {}, h("tr", {}, h("th", {}, "from"), ...spec.series.map((key) => h("th", { class: "num" }, SERIES[key].label)))),
      h("tbody", {}, ...(rows.length ? rows : [h("tr", { class: "empty" }, h("td", { colspan: spec.series.length + 1 }, "Nothing in this window."))])),
    );
    // Counts add up over the window; a duration or a rate is shown at its highest.
    totals.replaceChildren(
      ...spec.series.map((key) => {
        const most = SERIES[key].scale === "count" ? "" : " max";
        return h("span", { class: `chart-total ${key}`, "data-series": key }, `${SERIES[key].label}${most} ${valueText(key, total(points, key))}`);
      }),
    );
  }

  function width() {
    return Math.max(MIN_WIDTH, Math.floor(plot.clientWidth || element.clientWidth || 0));
  }

  // A chart in a hidden view has no width yet: it is sized when it is shown.
  const resized = new ResizeObserver(() => {
    if (chart && plot.clientWidth && Math.abs(chart.width - width()) > 1) {
      chart.setSize({ width: width(), height });
    }
  });
  resized.observe(plot);

  function update(points) {
    const key = JSON.stringify(points);
    if (key === drawn) return;
    drawn = key;
    renderTable(points);
    const data = columns(points);
    if (chart) chart.setData(data);
    else chart = new uPlot(options(width()), data, plot);
  }

  return { element, update };
}
