// The Executions view: the list, its filters (kept in the URL) and paging.

import { api, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { STATES, errorBlock, executionLink, stateBadge, timeCell } from "../format.js";
import { PAGE_SIZE, changed, pagerFor, updatePager } from "../render.js";

// The filter form shows the URL's filters when they change, and is left alone while
// the user edits it between polls.
let shownFilters = null;

// Forget the filters shown, so the form shows the URL's again (the Reset button).
export function resetFilters() {
  shownFilters = null;
}

export function showFilters(filters) {
  const key = JSON.stringify(filters);
  if (key === shownFilters) return;
  shownFilters = key;
  $("filter-state").value = STATES.includes(filters.state) ? filters.state : "";
  $("filter-job").value = filters.job;
  $("filter-queue").value = filters.queue;
  $("filter-schedule").value = filters.schedule;
}

export async function loadExecutions(route) {
  const filters = {
    state: route.params.get("state") || "",
    job: route.params.get("job") || "",
    queue: route.params.get("queue") || "",
    schedule: route.params.get("schedule") || "",
  };
  showFilters(filters);
  const pager = pagerFor("executions", JSON.stringify(filters));
  const page = await api(
    "GET",
    `/executions${query({ ...filters, order: "desc", cursor: pager.cursor, limit: PAGE_SIZE })}`,
  );
  return () => {
    updatePager("executions", page.next_cursor);
    if (!changed("executions", page)) return;
    const rows = page.items.map((e) =>
      h(
        "tr",
        { "data-id": e.id },
        h("td", {}, executionLink(e.id)),
        h("td", { class: "job" }, e.job),
        h("td", { class: "queue" }, e.queue),
        h("td", {}, stateBadge(e.state)),
        h("td", { class: "num" }, `${e.attempt}/${e.max_attempts}`),
        timeCell(e.due_at, true),
        h("td", { class: "num" }, e.bucket),
        timeCell(e.updated_at),
        h("td", { class: "error" }, errorBlock(e.error)),
      ),
    );
    $("executions").replaceChildren(...(rows.length ? rows : [emptyRow(9, "No executions match.")]));
  };
}

// Paused: the latest pause or resume command of a running execution is a pause.
