// The Dead letters view.

import { api, path, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { errorBlock, executionLink, timeCell } from "../format.js";
import { PAGE_SIZE, changed, pagerFor, updatePager } from "../render.js";
import { actionButton } from "../session.js";

export async function loadDeadLetters() {
  const pager = pagerFor("dead-letters", "");
  const page = await api(
    "GET",
    `/dead-letters${query({ order: "desc", cursor: pager.cursor, limit: PAGE_SIZE })}`,
  );
  return () => {
    updatePager("dead-letters", page.next_cursor);
    if (!changed("dead-letters", page)) return;
    const rows = page.items.map((e) =>
      h(
        "tr",
        { "data-id": e.id },
        h("td", {}, executionLink(e.id)),
        h("td", { class: "job" }, e.job),
        h("td", { class: "num" }, `${e.attempt}/${e.max_attempts}`),
        timeCell(e.updated_at, true),
        h("td", { class: "error" }, errorBlock(e.error)),
        h("td", {}, actionButton("Replay", "run it again with fresh attempts", () => api("POST", path("executions", e.id, "replay")), "Execution replayed.", true)),
      ),
    );
    $("dead-letters").replaceChildren(...(rows.length ? rows : [emptyRow(6, "No dead letters.")]));
  };
}
