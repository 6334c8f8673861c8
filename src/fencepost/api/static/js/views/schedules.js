// The Schedules view.

import { api, path, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { formatSeconds, timeCell } from "../format.js";
import { PAGE_SIZE, changed, pagerFor, updatePager } from "../render.js";
import { actionButton } from "../session.js";

export function scheduleRule(s) {
  if (s.cron !== null) return s.timezone === "UTC" ? s.cron : `${s.cron} (${s.timezone})`;
  return `every ${formatSeconds(s.every_seconds)}`;
}

export async function loadSchedules() {
  const pager = pagerFor("schedules", "");
  const page = await api("GET", `/schedules${query({ cursor: pager.cursor, limit: PAGE_SIZE })}`);
  return () => {
    updatePager("schedules", page.next_cursor);
    if (!changed("schedules", page)) return;
    const rows = page.items.map((s) => {
      const id = s.id;
      const toggle = s.paused
        ? actionButton("Resume", "fire again from the next slot", () => api("POST", path("schedules", id, "resume")), "Schedule resumed.")
        : actionButton("Pause", "stop firing (slots are recorded SKIPPED)", () => api("POST", path("schedules", id, "pause")), "Schedule paused.");
      return h(
        "tr",
        { "data-id": id },
        h("td", {}, h("a", { href: `#/executions?schedule=${encodeURIComponent(id)}`, class: "id" }, id)),
        h("td", { class: "job" }, s.job),
        h("td", { class: "rule" }, scheduleRule(s)),
        s.next_fire_at ? timeCell(s.next_fire_at, true) : h("td", {}, s.paused ? "paused" : "none left"),
        h("td", {}, s.misfire),
        h("td", {}, s.overlap),
        h("td", {}, s.paused ? "paused" : "active"),
        h("td", {}, toggle),
      );
    });
    $("schedules").replaceChildren(...(rows.length ? rows : [emptyRow(8, "No schedules.")]));
  };
}
