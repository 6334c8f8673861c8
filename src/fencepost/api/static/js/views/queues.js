// The Queues & limits view.

import { api, path, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { formatSeconds, present, timeCell } from "../format.js";
import { changed } from "../render.js";
import { actionButton, canAct } from "../session.js";
import { historyLink } from "./history.js";

// The Queues & limits view counts throttled executions over this trailing window.
export const THROTTLED_WINDOW_SECONDS = 3600;

// -- queues and limits ----------------------------------------------------------------------


// A limit in a few words: "50/s (burst 5), 3 at once, per key" ("–": none).
export function limitText(limit) {
  if (!limit) return "–";
  const parts = [];
  if (present(limit.rate)) parts.push(`${limit.rate} (burst ${limit.burst})`);
  if (present(limit.concurrency)) parts.push(`${limit.concurrency} at once`);
  if (limit.per_key) parts.push("per key");
  return parts.length ? parts.join(", ") : "–";
}

// A scope's throttled executions in the window: "12 (held 3.5 min)", or "0".
export function throttledText(count) {
  return count ? `${count.count} (held ${formatSeconds(count.held_seconds)})` : "0";
}

// Pause asks first (nothing of the queue starts until a resume); resume does not. A
// read-only token gets neither.
export function queueToggle(queue) {
  if (!canAct()) return null;
  const where = path("queues", queue.name);
  return queue.paused
    ? actionButton("Resume", "claim from this queue again", () => api("POST", `${where}/resume`), "Queue resumed.")
    : actionButton("Pause", "claim nothing more from this queue until resumed (running executions finish)", () => api("POST", `${where}/pause`), "Queue paused.", true);
}

// A queue's last hour from stored history: "120 (3 dead)", and "12 ms / 1.2 s".
export function finishedText(row) {
  if (!row) return "0";
  const finished = row.succeeded + row.dead;
  return row.dead ? `${finished} (${row.dead} dead)` : String(finished);
}

export function latenessText(row) {
  return row && row.claims ? `${formatSeconds(row.lateness_p50)} / ${formatSeconds(row.lateness_p99)}` : "–";
}

export async function loadQueues() {
  const [limits, queues, throttled, hour] = await Promise.all([
    api("GET", "/limits"),
    api("GET", "/queues"),
    api("GET", `/throttled${query({ window: THROTTLED_WINDOW_SECONDS })}`),
    api("GET", `/history/summary${query({ window: "hour", by: "queue" })}`),
  ]);
  return () => {
    if (!changed("queues", [limits, queues, throttled, hour])) return;
    const lastHour = new Map(hour.rows.map((row) => [row.name, row]));
    for (const span of document.querySelectorAll(".throttled-window")) {
      span.textContent = formatSeconds(THROTTLED_WINDOW_SECONDS);
    }
    const held = new Map(throttled.map((t) => [t.scope, t]));
    // A queue that is only paused has no rate nor concurrency: the Queues table shows it.
    const limitRows = limits
      .filter((limit) => present(limit.rate) || present(limit.concurrency))
      .map((limit) =>
        h(
          "tr",
          { "data-scope": limit.scope },
          h("td", { class: "scope" }, limit.scope),
          h("td", { class: "rate" }, limit.rate ?? "–"),
          h("td", { class: "num burst" }, limit.burst ?? "–"),
          h("td", { class: "num concurrency" }, limit.concurrency ?? "–"),
          h("td", { class: "per-key" }, limit.per_key ? "yes" : "no"),
          h("td", { class: "source" }, limit.source),
          h("td", { class: "updated-by" }, limit.updated_by ?? "–"),
          timeCell(limit.updated_at, true),
          h("td", { class: "num throttled" }, throttledText(held.get(limit.scope))),
        ),
      );
    $("limits").replaceChildren(...(limitRows.length ? limitRows : [emptyRow(9, "No limits.")]));
    const queueRows = queues.map((queue) => {
      const counts = queue.counts || {};
      return h(
        "tr",
        { "data-queue": queue.name, class: queue.paused ? "paused" : undefined },
        h("td", { class: "queue" }, h("a", { href: `#/executions${query({ queue: queue.name })}`, class: "queue-link" }, queue.name)),
        h("td", { class: "status" }, h("span", { class: queue.paused ? "flag paused" : "flag active" }, queue.paused ? "paused" : "active")),
        h("td", { class: "paused-by" }, queue.paused_by ?? "–"),
        queue.paused ? timeCell(queue.paused_at, true) : h("td", {}, "–"),
        h("td", { class: "limit" }, limitText(queue.limit)),
        h("td", { class: "num waiting" }, (counts.SCHEDULED ?? 0) + (counts.RETRY_WAIT ?? 0)),
        h("td", { class: "num running" }, counts.RUNNING ?? 0),
        h("td", { class: "num finished" }, h("a", { href: historyLink({ window: "hour", queue: queue.name }), title: "charts of this queue" }, finishedText(lastHour.get(queue.name)))),
        h("td", { class: "num lateness" }, latenessText(lastHour.get(queue.name))),
        h("td", { class: "num throttled" }, throttledText(held.get(`queue:${queue.name}`))),
        h("td", {}, queueToggle(queue)),
      );
    });
    $("queues").replaceChildren(...(queueRows.length ? queueRows : [emptyRow(11, "No queues yet.")]));
    const throttledRows = throttled.map((t) =>
      h(
        "tr",
        { "data-scope": t.scope },
        h("td", { class: "scope" }, t.scope),
        h("td", { class: "num count" }, t.count),
        h("td", { class: "num held" }, formatSeconds(t.held_seconds)),
      ),
    );
    $("throttled").replaceChildren(
      ...(throttledRows.length ? throttledRows : [emptyRow(3, "Nothing was throttled.")]),
    );
  };
}
