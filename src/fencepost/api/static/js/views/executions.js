// The Executions view: find executions by every filter of GET /executions (kept in the
// URL hash, so a link restores the form and the list), their counts by state for the
// filter, keyset paging, and the bulk bar acting on a selection or on all that match.

import { navigate } from "../../app.js";
import { ApiError, api } from "../api.js";
import { bulkControls } from "../bulk.js";
import { $, emptyRow, h } from "../dom.js";
import { STATES, errorBlock, executionLink, stateBadge, timeCell } from "../format.js";
import { apiFilters, apiSearch, emptyFilters, filterForm, filterHash, readFilters } from "../filters.js";
import { PAGE_SIZE, changed, pagerFor, rendered, updatePager, wirePager } from "../render.js";

// The filters shown above "More filters"; the rest fold under it.
const PRIMARY = ["state", "job", "queue", "error"];
const COLUMNS = ["id", "job", "queue", "state", "attempt", "due", "bucket", "updated", "error"];

let view = null;

// Build the view's DOM into its empty <section> once, on first use.
function build() {
  if (view) return view;
  const form = filterForm({
    prefix: "filter-",
    primary: PRIMARY,
    onApply: (filters) => navigate(filterHash("executions", filters)),
    onReset: () => navigate("#/executions"),
  });
  const bulk = bulkControls({
    name: "executions",
    actions: ["replay", "cancel", "retry_now", "delete"],
    filter: () => apiFilters(view.filters),
  });
  const counts = h("ul", { id: "executions-counts", class: "counts state-counts", "aria-label": "Executions matching the filter, by state" });
  const total = h("span", { id: "executions-total", class: "total" });
  const head = h("tr", { id: "executions-head" });
  const table = h(
    "table",
    { class: "grid stack executions-list" },
    h("thead", {}, head),
    h("tbody", { id: "executions" }),
  );
  const pager = h(
    "div",
    { class: "pager" },
    h("button", { type: "button", id: "executions-first" }, "First page"),
    h("button", { type: "button", id: "executions-prev" }, "Previous page"),
    h("button", { type: "button", id: "executions-next" }, "Next page"),
  );
  $("view-executions").replaceChildren(
    h("h2", {}, "Executions"),
    form.node,
    h("div", { class: "counts-line" }, total, counts),
    bulk.toolbar,
    bulk.bar,
    h("div", { class: "table-box" }, table),
    pager,
  );
  wirePager("executions", true);
  view = { form, bulk, counts, total, head, filters: emptyFilters(), key: "" };
  return view;
}

// A link narrowing the current filter to one state (a click on a count).
function narrowed(filters, state) {
  return filterHash("executions", { ...filters, state: [state] });
}

function renderCounts(filters, answer) {
  view.total.textContent = `${answer.total} matching`;
  view.counts.replaceChildren(
    ...STATES.map((s) => {
      const n = answer.counts[s] ?? 0;
      return h(
        "li",
        { "data-state": s, class: n === 0 ? "zero" : null },
        h("a", { href: narrowed(filters, s), title: `only ${s}`, "aria-label": `${n} ${s}` }, stateBadge(s), h("span", { class: "count" }, n)),
      );
    }),
  );
}

// An error of a finished execution that did not fail is an earlier attempt's: shown
// as such, never as the execution's own.
export function errorCell(e) {
  if (!e.error) return h("td", { class: "error", "data-label": "error" });
  if (["SUCCEEDED", "CANCELLED", "SKIPPED"].includes(e.state)) {
    return h("td", { class: "error earlier", "data-label": "earlier error", title: "an earlier attempt's error" }, "earlier attempt: ", errorBlock(e.error));
  }
  return h("td", { class: "error", "data-label": "error" }, errorBlock(e.error));
}

// A cell's name, shown beside its value where the table stacks (narrow screens).
export function labelled(cell, label) {
  cell.setAttribute("data-label", label);
  return cell;
}

function row(e) {
  return h(
    "tr",
    { "data-id": e.id },
    view.bulk.cell(e.id),
    h("td", { "data-label": "id" }, executionLink(e.id)),
    h("td", { class: "job", "data-label": "job" }, e.job),
    h("td", { class: "queue", "data-label": "queue" }, e.queue),
    h("td", { "data-label": "state" }, stateBadge(e.state)),
    h("td", { class: "num", "data-label": "attempt" }, `${e.attempt}/${e.max_attempts}`),
    labelled(timeCell(e.due_at, true), "due"),
    h("td", { class: "num narrow-hide", "data-label": "bucket" }, e.bucket),
    labelled(timeCell(e.updated_at), "updated"),
    errorCell(e),
  );
}

// The list refused the filter (a 422): empty it, so no rows of another filter stay on
// screen under this one; the banner (the refresh loop's) says why.
function refused() {
  rendered.delete("executions");
  rendered.delete("executions-counts");
  $("executions").replaceChildren(emptyRow(COLUMNS.length + 1, "No executions: the filter was refused (see the message above)."));
  view.counts.replaceChildren();
  view.total.textContent = "";
  view.bulk.page(null, [], 0, false);
  updatePager("executions", null);
}

export async function loadExecutions(route) {
  build();
  if (route.opened) {
    // Reopened: the rows and counts of an earlier visit go first, so that no selection
    // made on them is then voided by this load (as in the Dead letters view).
    view.bulk.reset();
    rendered.delete("executions");
    rendered.delete("executions-counts");
    $("executions").replaceChildren();
    view.counts.replaceChildren();
    view.total.textContent = "";
  }
  const filters = readFilters(route.params);
  view.form.show(filters);
  const key = JSON.stringify(filters);
  const pager = pagerFor("executions", key);
  const resolved = apiFilters(filters);
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
    view.key = key;
    updatePager("executions", page.next_cursor);
    view.bulk.page(key, page.items.map((e) => e.id), counts.total, page.next_cursor !== null);
    if (changed("executions-counts", [filters, counts])) renderCounts(filters, counts);
    if (!changed("executions", page)) return;
    view.head.replaceChildren(...[view.bulk.headCell()].filter(Boolean), ...COLUMNS.map((c) => h("th", { class: c === "bucket" ? "narrow-hide" : null }, c)));
    const rows = page.items.map(row);
    $("executions").replaceChildren(...(rows.length ? rows : [emptyRow(COLUMNS.length + 1, "No executions match.")]));
  };
}
