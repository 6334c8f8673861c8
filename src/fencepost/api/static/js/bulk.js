// Acting on many executions: a selection (ids ticked on the page, or everything a filter
// matches), and a bulk bar that replays, cancels, retries now or deletes them through
// POST /executions/actions.
//
// An action goes in three steps, each in the page (no native dialog):
// 1. a dry run: "N will be replayed, M skipped", and the first 20 it applies to;
// 2. a second click on "Confirm replay of N";
// 3. batches of BATCH executions in id order, each call carrying the previous one's
//    next_cursor until it is null, with a <progress> of what is done and skipped.
// Then a notice and a refresh. A read-only session (canAct() false) gets none of it:
// no checkboxes, no bar.

import { refreshNow } from "../app.js";
import { api } from "./api.js";
import { h, show } from "./dom.js";
import { executionLink, stateBadge } from "./format.js";
import { actionFilter, apiSearch } from "./filters.js";
import { canAct, notice, report } from "./session.js";

// Executions per call once confirmed: small enough to show progress, large enough to be quick.
export const BATCH = 500;

// Each action: its button, what the dry run says of it, and what the notice says after.
export const ACTIONS = {
  replay: {
    label: "Replay",
    title: "run dead letters (FAILED) again with fresh attempts",
    future: "will be replayed",
    past: "Replayed",
  },
  cancel: {
    label: "Cancel",
    title: "cancel waiting ones now; ask the workers of running ones to stop theirs",
    future: "will be cancelled",
    past: "Cancelled",
  },
  retry_now: {
    label: "Retry now",
    title: "make waiting ones due in the future due now",
    future: "will be made due now",
    past: "Made due now",
  },
  delete: {
    label: "Delete",
    title: "delete finished ones (SUCCEEDED, FAILED, CANCELLED, SKIPPED) and their records",
    future: "will be deleted",
    past: "Deleted",
  },
};

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// The selection and bulk bar of one list view (`name`: "executions", "dead-letters").
// `actions`: the ACTIONS keys it offers. `filter()`: the list's filters as
// GET /executions takes them (resolved now), for "all matching".
export function bulkControls({ name, actions, filter }) {
  const selected = new Set();
  let everything = false; // "all N matching this filter" instead of the ticked ids
  let key = null; // the filters the selection was made under
  let pageIds = [];
  let total = 0;
  let more = false;
  let busy = false;
  const boxes = new Map(); // id -> its checkbox on the current page

  const pageBox = h("input", { type: "checkbox", id: `${name}-select-page` });
  const pageLabel = h("label", { class: "select-page" }, pageBox, " Select this page");
  const summary = h("span", { class: "bulk-summary", id: `${name}-selection`, "aria-live": "polite" });
  const allButton = h("button", { type: "button", id: `${name}-select-all`, class: "link-like" });
  const clearButton = h("button", { type: "button", class: "link-like" }, "Clear selection");
  const actionButtons = actions.map((action) =>
    h(
      "button",
      { type: "button", class: "action", title: ACTIONS[action].title, "data-action": action, onclick: () => prepare(action) },
      ACTIONS[action].label,
    ),
  );
  const panel = h("div", { class: "bulk-panel", id: `${name}-bulk-panel`, "aria-live": "polite" });
  const bar = h(
    "div",
    { class: "bulk-bar", id: `${name}-bulk`, role: "region", "aria-label": "Act on the selected executions" },
    h("div", { class: "bulk-line" }, summary, allButton, clearButton, h("span", { class: "bulk-actions" }, ...actionButtons)),
    panel,
  );
  const toolbar = h("div", { class: "bulk-toolbar", id: `${name}-bulk-toolbar` }, pageLabel);

  pageBox.addEventListener("change", () => {
    everything = false;
    for (const id of pageIds) {
      if (pageBox.checked) selected.add(id);
      else selected.delete(id);
    }
    for (const [id, box] of boxes) box.checked = selected.has(id);
    changedSelection();
  });
  allButton.addEventListener("click", () => {
    everything = true;
    changedSelection();
  });
  clearButton.addEventListener("click", clear);

  function clear() {
    selected.clear();
    everything = false;
    for (const box of boxes.values()) box.checked = false;
    changedSelection();
  }

  // Any change of what is selected voids a dry run shown for the previous selection.
  function changedSelection() {
    if (!busy) panel.replaceChildren();
    update();
  }

  function count() {
    return everything ? total : selected.size;
  }

  function update() {
    const allowed = canAct();
    for (const [id, box] of boxes) if (!box.isConnected) boxes.delete(id); // rows re-rendered
    show(toolbar, allowed && pageIds.length > 0);
    const onPage = pageIds.filter((id) => selected.has(id)).length;
    pageBox.checked = everything || (pageIds.length > 0 && onPage === pageIds.length);
    pageBox.indeterminate = !everything && onPage > 0 && onPage < pageIds.length;
    const wholePage = pageIds.length > 0 && onPage === pageIds.length;
    const offerAll = !everything && wholePage && (more || total > pageIds.length);
    allButton.textContent = `Select all ${total} matching this filter`;
    show(allButton, offerAll);
    summary.textContent = everything
      ? `All ${plural(total, "execution")} matching this filter are selected.`
      : `${selected.size} selected.`;
    for (const button of actionButtons) button.disabled = busy || count() === 0;
    clearButton.disabled = busy;
    show(bar, allowed && (count() > 0 || busy || panel.childElementCount > 0));
  }

  // The selection as POST /executions/actions names it (ids in id order: the batches'
  // cursor runs in that order).
  function selection() {
    return everything ? { filter: actionFilter(filter()) } : { ids: [...selected].sort() };
  }

  async function prepare(action, all = false) {
    if (busy) return;
    if (all) {
      everything = true;
      update();
    }
    const words = ACTIONS[action];
    const chosen = selection();
    busy = true;
    update();
    panel.replaceChildren(h("p", {}, "Counting…"));
    let dry;
    let considered;
    try {
      const counted = chosen.filter
        ? api("GET", `/executions/counts${apiSearch(chosen.filter)}`)
        : Promise.resolve({ total: chosen.ids.length });
      [dry, considered] = await Promise.all([
        api("POST", "/executions/actions", { action, ...chosen, dry_run: true, limit: BATCH }),
        counted,
      ]);
    } catch (error) {
      busy = false;
      panel.replaceChildren();
      update();
      report(error);
      return;
    }
    busy = false;
    const skipped = Math.max(0, considered.total - dry.matched);
    const shown = dry.preview.map((e) =>
      h(
        "tr",
        { "data-id": e.id },
        h("td", { "data-label": "id" }, executionLink(e.id)),
        h("td", { class: "job", "data-label": "job" }, e.job),
        h("td", { "data-label": "state" }, stateBadge(e.state)),
      ),
    );
    const confirm = h(
      "button",
      { type: "button", class: "action confirming", id: `${name}-bulk-confirm`, onclick: () => run(action, chosen, dry.matched, chosen.filter ? skipped : 0) },
      `Confirm ${words.label.toLowerCase()} of ${dry.matched}`,
    );
    const back = h("button", { type: "button", onclick: () => changedSelection() }, "Back");
    // (replaceChildren would write a null as the text "null": h() leaves it out)
    panel.replaceChildren(
      ...[
      h("p", { class: "bulk-dry-run" }, `${dry.matched} ${words.future}, ${skipped} skipped.`),
      shown.length
        ? h(
            "table",
            { class: "grid stack bulk-preview" },
            h("caption", {}, dry.matched > shown.length ? `The first ${shown.length}:` : "They are:"),
            h("thead", {}, h("tr", {}, h("th", {}, "id"), h("th", {}, "job"), h("th", {}, "state"))),
            h("tbody", {}, ...shown),
          )
        : null,
      h("div", { class: "actions" }, dry.matched > 0 ? confirm : null, back),
      ].filter(Boolean),
    );
    update();
    if (dry.matched > 0) confirm.focus();
  }

  // `expected`: how many the dry run found the action applies to; `passed`: how many
  // of a filter's matches it found it does not (the batches never read those).
  async function run(action, chosen, expected, passed) {
    if (busy) return;
    busy = true;
    const words = ACTIONS[action];
    const planned = chosen.ids ? chosen.ids.length : expected;
    const bar = h("progress", { max: Math.max(planned, 1), value: 0, id: `${name}-bulk-progress` });
    const text = h("span", { class: "bulk-progress-text" });
    let done = 0;
    let skipped = 0;
    const progress = () => {
      bar.value = Math.min(done + skipped, planned);
      text.textContent = `${done} done, ${skipped} skipped of ${planned}`;
    };
    progress();
    panel.replaceChildren(h("p", { class: "bulk-running" }, `${words.label}: `, bar, " ", text));
    update();
    let cursor = null;
    try {
      do {
        const batch = await api("POST", "/executions/actions", { action, ...chosen, limit: BATCH, cursor });
        done += batch.done;
        skipped += batch.skipped;
        cursor = batch.next_cursor;
        progress();
      } while (cursor);
    } catch (error) {
      busy = false;
      panel.replaceChildren(h("p", { class: "bulk-stopped" }, `Stopped after ${done} done, ${skipped} skipped.`));
      update();
      report(error);
      refreshNow();
      return;
    }
    busy = false;
    panel.replaceChildren();
    selected.clear();
    everything = false;
    update();
    notice(`${words.past} ${done}, skipped ${skipped + passed}.`);
    refreshNow();
  }

  return {
    toolbar,
    bar,
    // A fresh page of the list: `ids` on it, `total` matching, `hasMore` pages after.
    // A new filter `filterKey` starts a new selection.
    page(filterKey, ids, count, hasMore) {
      if (filterKey !== key) {
        key = filterKey;
        if (!busy) {
          selected.clear();
          everything = false;
          panel.replaceChildren();
        }
      }
      pageIds = ids;
      total = count;
      more = hasMore;
      update();
    },
    // The checkbox cell of one row (null for a read-only session: no column at all).
    cell(id) {
      if (!canAct()) return null;
      const box = h("input", { type: "checkbox", class: "pick", "aria-label": `select ${id}` });
      box.checked = everything || selected.has(id);
      box.addEventListener("change", () => {
        if (everything) {
          // Unticking one of "all matching": back to the ticked ids of this page.
          everything = false;
          for (const other of pageIds) selected.add(other);
        }
        if (box.checked) selected.add(id);
        else selected.delete(id);
        changedSelection();
      });
      boxes.set(id, box);
      return h("td", { class: "pick-cell" }, box);
    },
    // The head of the checkbox column (null for a read-only session).
    headCell() {
      return canAct() ? h("th", { class: "pick-cell" }, h("span", { class: "visually-hidden" }, "selected")) : null;
    },
    // Forget the selection and any dry run shown (the view was opened afresh: a
    // confirmation left from an earlier visit must not wait there to be clicked).
    reset() {
      if (busy) return;
      key = null;
      selected.clear();
      everything = false;
      panel.replaceChildren();
      update();
    },
    // Start `action` on everything the filter matches ("Replay all matching").
    startAll(action) {
      return prepare(action, true);
    },
    isBusy: () => busy,
  };
}
