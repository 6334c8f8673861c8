// Formatting of times, durations, states, ids and errors for display.

import { h } from "./dom.js";

export const STATES = ["SCHEDULED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"];

// -- formatting ----------------------------------------------------------------------------

export const pad = (n) => String(n).padStart(2, "0");

export function formatTime(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.abs(seconds);
  if (s === 0) return "0 s";
  if (s < 0.01) return `${Number((seconds * 1000).toFixed(2))} ms`;
  if (s < 1) return `${Math.round(seconds * 1000)} ms`;
  if (s < 120) return `${Number(seconds.toFixed(s < 10 ? 2 : 1))} s`;
  if (s < 7200) return `${Number((seconds / 60).toFixed(1))} min`;
  if (s < 172800) return `${Number((seconds / 3600).toFixed(1))} h`;
  return `${Number((seconds / 86400).toFixed(1))} d`;
}

export function relative(iso) {
  if (!iso) return "";
  // Whole seconds: the page polls every few seconds, finer would only flicker.
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds === 0) return "now";
  return seconds > 0 ? `in ${formatSeconds(seconds)}` : `${formatSeconds(-seconds)} ago`;
}

// "(in 5 s)": kept current by updateRelativeTimes() on every poll, without a re-render.
export function relativeSpan(iso) {
  return iso ? h("span", { class: "relative", "data-at": iso }, ` (${relative(iso)})`) : null;
}

export function updateRelativeTimes() {
  for (const span of document.querySelectorAll("[data-at]")) {
    span.textContent = ` (${relative(span.dataset.at)})`;
  }
}

// A time cell: local time, the relative time beside it, the exact ISO text on hover.
export function timeCell(iso, withRelative = false) {
  return h(
    "td",
    { title: iso || undefined, class: "time" },
    formatTime(iso),
    withRelative ? relativeSpan(iso) : null,
  );
}

export function json(value) {
  return value === null || value === undefined ? "–" : JSON.stringify(value, null, 2);
}

export function stateBadge(state) {
  // Only known states become a class name; anything else is shown as plain text.
  const known = STATES.includes(state);
  return h("span", { class: known ? `state state-${state}` : "state" }, state);
}

// Ids are long (UUIDv7): lists show the start and the end, the whole id on hover, and a
// copy of the link text copies the whole id.
export function shortId(id) {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

export function executionLink(id) {
  const link = h("a", { href: `#/executions/${encodeURIComponent(id)}`, class: "id", title: id }, shortId(id));
  link.addEventListener("copy", (event) => {
    event.clipboardData.setData("text/plain", id);
    event.preventDefault();
  });
  return link;
}

// An error as stored: one line, or a message and its traceback. A traceback is a
// monospace block that shows its last line (the exception) until opened.
export function errorBlock(text, open = false) {
  if (!text) return "";
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  if (lines.length <= 1) return h("code", { class: "error-line" }, text);
  return h(
    "details",
    { class: "trace", open },
    h("summary", {}, lines[lines.length - 1].trim()),
    h("pre", {}, text),
  );
}

export function bucketSpec(buckets) {
  // [0, 1, 2, 3, 7] -> "0-3,7"
  const sorted = [...new Set(buckets)].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j += 1;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

export const present = (value) => value !== null && value !== undefined;
