// Rendering bookkeeping shared by the views: paging cursors and change detection.

import { refreshNow } from "../app.js";
import { $ } from "./dom.js";

// Rows per page of every list.
export const PAGE_SIZE = 50;
import { canAct } from "./session.js";

// -- paging state (cursors are kept here, filters live in the URL) -------------------------

export const paging = {
  executions: { cursor: null, previous: [], next: null, key: "" },
  schedules: { cursor: null, previous: [], next: null, key: "" },
  "dead-letters": { cursor: null, previous: [], next: null, key: "" },
};

export function pagerFor(name, key) {
  const pager = paging[name];
  if (pager.key !== key) Object.assign(pager, { cursor: null, previous: [], next: null, key });
  return pager;
}

export function wirePager(name, hasPrevious) {
  const pager = paging[name];
  $(`${name}-first`).addEventListener("click", () => {
    Object.assign(pager, { cursor: null, previous: [] });
    refreshNow();
  });
  $(`${name}-next`).addEventListener("click", () => {
    if (!pager.next) return;
    pager.previous.push(pager.cursor);
    pager.cursor = pager.next;
    refreshNow();
  });
  if (hasPrevious) {
    $(`${name}-prev`).addEventListener("click", () => {
      if (!pager.previous.length) return;
      pager.cursor = pager.previous.pop();
      refreshNow();
    });
  }
}

export function updatePager(name, nextCursor) {
  const pager = paging[name];
  pager.next = nextCursor;
  $(`${name}-first`).disabled = pager.cursor === null;
  $(`${name}-next`).disabled = !nextCursor;
  const previous = $(`${name}-prev`);
  if (previous) previous.disabled = pager.previous.length === 0;
}

// -- views ---------------------------------------------------------------------------------

// Each view loads its data, then renders it only if it changed since the last render:
// a steady page keeps its DOM (and the user's selection, focus and scroll) between polls.
export const rendered = new Map();

export function changed(view, data) {
  const text = JSON.stringify([data, canAct()]);
  if (rendered.get(view) === text) return false;
  rendered.set(view, text);
  return true;
}

