// The Dead letters view: FAILED executions (GET /executions?state=FAILED), narrowed by
// job, queue or error text (kept in the URL hash), each with its Replay button, and the
// bulk bar: replay or delete the ticked ones, or "Replay all N matching" the filter.

import { navigate } from "../../app.js";
import { ApiError, api, path } from "../api.js";
import { bulkControls } from "../bulk.js";
import { $, emptyRow, h, show } from "../dom.js";
import { errorBlock, executionLink, timeCell } from "../format.js";
import { apiFilters, apiSearch, emptyFilters, filterForm, filterHash, readFilters } from "../filters.js";
import { PAGE_SIZE, changed, pagerFor, rendered, updatePager, wirePager } from "../render.js";
import { actionButton, canAct } from "../session.js";

const FILTERS = ["job", "queue", "error"];
const COLUMNS = ["id", "job", "attempts", "failed", "error", ""];

let view = null;

// The view's filters with the state that makes them dead letters.
function deadOnly(filters) {
  return { ...filters, state: ["FAILED"] };
}

function build() {
  if (view) return view;
  const form = filterForm({
    prefix: "dead-filter-",
    names: FILTERS,
    onApply: (filters) => navigate(filterHash("dead-letters", { ...filters, state: [] })),
    onReset: () => navigate("#/dead-letters"),
  });
  const bulk = bulkControls({
    name: "dead-letters",
    actions: ["replay", "delete"],
    filter: () => apiFilters(deadOnly(view.filters)),
  });
  const total = h("span", { id: "dead-letters-total", class: "total" });
  const replayAll = h("button", { type: "button", class: "action", id: "dead-letters-replay-all", onclick: () => bulk.startAll("replay") });
  const head = h("tr", {});
  $("view-dead-letters").replaceChildren(
    h("h2", {}, "Dead letters"),
    form.node,
    h("div", { class: "counts-line" }, total, replayAll),
    bulk.toolbar,
    bulk.bar,
    h(
      "div",
      { class: "table-box" },
      h("table", { class: "grid stack dead-letters-list" }, h("thead", {}, head), h("tbody", { id: "dead-letters" })),
    ),
    h(
      "div",
      { class: "pager" },
      h("button", { type: "button", id: "dead-letters-first" }, "First page"),
      h("button", { type: "button", id: "dead-letters-prev" }, "Previous page"),
      h("button", { type: "button", id: "dead-letters-next" }, "Next page"),
    ),
  );
  wirePager("dead-letters", true);
  view = { form, bulk, total, replayAll, head, filters: emptyFilters() };
  return view;
}

function refused() {
  rendered.delete("dead-letters");
  $("dead-letters").replaceChildren(emptyRow(COLUMNS.length + 1, "No dead letters: the filter was refused (see the message above)."));
  view.total.textContent = "";
  show(view.replayAll, false);
  view.bulk.page(null, [], 0, false);
  updatePager("dead-letters", null);
}

export async function loadDeadLetters(route) {
  build();
  if (route.opened) {
    // Reopened: the rows of an earlier visit go first, so that nothing (a "Replay all"
    // started before this load's reset) can act on them and then be cleared.
    view.bulk.reset();
    rendered.delete("dead-letters");
    $("dead-letters").replaceChildren();
    show(view.replayAll, false);
  }
  const filters = { ...readFilters(route.params), state: [] };
  view.form.show(filters);
  const key = JSON.stringify(filters);
  const pager = pagerFor("dead-letters", key);
  const resolved = apiFilters(deadOnly(filters));
  let page;
  let counts;
  try {
    [page, counts] = await Promise.all([
      api("GET", `/executions${apiSearch(resolved, { order: "desc", cursor: pager.cursor, limit: PAGE_SIZE })}`),
      api("GET", `/executions/counts${apiSearch(resolved)}`),
    ]);
  } catch (error) {
    if (error instanceof ApiError && error.status === 422 && pager.key === key) refused();
    throw error;
  }
  return () => {
    view.filters = filters;
    const n = counts.counts.FAILED ?? 0;
    view.total.textContent = `${n} dead letter${n === 1 ? "" : "s"} match`;
    view.replayAll.textContent = `Replay all ${n} matching`;
    show(view.replayAll, canAct() && n > 0);
    view.replayAll.disabled = view.bulk.isBusy();
    updatePager("dead-letters", page.next_cursor);
    view.bulk.page(key, page.items.map((e) => e.id), n, page.next_cursor !== null);
    if (!changed("dead-letters", page)) return;
    view.head.replaceChildren(...[view.bulk.headCell()].filter(Boolean), ...COLUMNS.map((c) => h("th", {}, c)));
    const rows = page.items.map((e) => {
      const failed = timeCell(e.updated_at, true);
      failed.setAttribute("data-label", "failed");
      return h(
        "tr",
        { "data-id": e.id },
        view.bulk.cell(e.id),
        h("td", { "data-label": "id" }, executionLink(e.id)),
        h("td", { class: "job", "data-label": "job" }, e.job),
        h("td", { class: "num", "data-label": "attempts" }, `${e.attempt}/${e.max_attempts}`),
        failed,
        h("td", { class: "error", "data-label": "error" }, errorBlock(e.error)),
        h(
          "td",
          { class: "row-actions" },
          canAct()
            ? actionButton("Replay", "run it again with fresh attempts", () => api("POST", path("executions", e.id, "replay")), "Execution replayed.", true)
            : null,
        ),
      );
    });
    $("dead-letters").replaceChildren(...(rows.length ? rows : [emptyRow(COLUMNS.length + 1, "No dead letters.")]));
  };
}
