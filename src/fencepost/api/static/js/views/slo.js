// The SLO view: the service-level report.

import { api } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { executionLink, formatSeconds, formatTime, stateBadge, present, timeCell } from "../format.js";
import { changed } from "../render.js";
import { historyLink } from "./history.js";

// The SLO view reads the service-level report (30 days of executions) at most this
// often while it stays open: the report is the heaviest read the page makes.
export const SLO_REFRESH_MS = 30000;

// -- service level -------------------------------------------------------------------------

// The last report and when it was read; kept while the view stays open (SLO_REFRESH_MS).
export const slo = { report: null, readAt: 0 };

export const percent = (share) => (present(share) ? `${(share * 100).toFixed(2)}%` : "–");

// A number of misses, often a fraction of one: "0.004", "-1.96", "1234.5".
export function misses(count) {
  return Math.abs(count) >= 10 ? count.toFixed(1) : String(Number(count.toPrecision(3)));
}

export function burnCell(burn) {
  const hours = Math.round(burn.window_seconds / 3600);
  const missed = burn.total - burn.met;
  return h(
    "td",
    {
      class: `num burn burn-${hours}h`,
      title: `${missed} of ${burn.total} decided in the last ${hours} h missed`,
    },
    present(burn.rate) ? burn.rate.toFixed(2) : "–",
  );
}

export function verdictFlag(objective) {
  if (!present(objective.share)) return h("span", { class: "flag no-data" }, "no data");
  return objective.missed
    ? h("span", { class: "flag missed" }, "MISSED")
    : h("span", { class: "flag met" }, "MET");
}

// Rows of one figure per objective: misses by class, or exclusions by reason.
export function breakdownRows(objectives, key, attribute) {
  const names = [...new Set(objectives.flatMap((o) => Object.keys(o[key])))];
  return names.map((name) =>
    h(
      "tr",
      { [attribute]: name },
      h("td", { class: "name" }, name),
      ...objectives.map((o) => h("td", { class: `num ${o.name}` }, o[key][name] ?? "–")),
    ),
  );
}

export async function loadSlo(route) {
  // Read again when the view was just opened, else at most every SLO_REFRESH_MS.
  if (route.opened || !slo.report || Date.now() - slo.readAt >= SLO_REFRESH_MS) {
    slo.report = await api("GET", "/slo");
    slo.readAt = Date.now();
  }
  const report = slo.report;
  return () => {
    if (!$("slo-history-link")) {
      // The report's burn rates at two instants; the Over time view charts them.
      $("slo-objectives").closest("table").after(
        h("p", { class: "figures" }, "Misses and burn rates over the last hour, day or week: ",
          h("a", { id: "slo-history-link", href: historyLink({ window: "week" }) }, "Over time"), "."),
      );
    }
    if (!changed("slo", report)) return;
    const objectives = [report.claimed, report.finished];
    $("slo-window").textContent = formatSeconds(report.window_seconds);
    $("slo-start").textContent = formatTime(report.start);
    $("slo-at").textContent = formatTime(report.at);
    $("slo-claim-within").textContent = formatSeconds(report.claimed.within_seconds);
    $("slo-finish-within").textContent = formatSeconds(report.finished.within_seconds);
    $("slo-rolled-up").textContent = String(report.rolled_up);
    $("slo-objectives").replaceChildren(
      ...objectives.map((o) =>
        h(
          "tr",
          { "data-objective": o.name, class: o.missed ? "missed" : undefined },
          h("td", { class: "name" }, o.name),
          h("td", { class: "num met" }, o.met),
          h("td", { class: "num total" }, o.total),
          h("td", { class: "num share" }, percent(o.share)),
          h("td", { class: "num target" }, percent(o.target)),
          h("td", { class: "verdict" }, verdictFlag(o)),
          h("td", { class: "num budget", title: String(o.budget) }, misses(o.budget)),
          h("td", { class: "num consumed" }, o.consumed),
          h(
            "td",
            { class: o.remaining < 0 ? "num remaining overspent" : "num remaining", title: String(o.remaining) },
            misses(o.remaining),
          ),
          ...o.burn.map(burnCell),
        ),
      ),
    );
    $("slo-misses").replaceChildren(...breakdownRows(objectives, "misses", "data-class"));
    $("slo-excluded").replaceChildren(...breakdownRows(objectives, "excluded", "data-reason"));
    const worst = report.worst.map((o) =>
      h(
        "tr",
        { "data-id": o.execution_id },
        h("td", {}, executionLink(o.execution_id)),
        h("td", { class: "job" }, o.job),
        h("td", {}, stateBadge(o.state)),
        timeCell(o.planned_at),
        timeCell(o.claimed_at),
        h("td", { class: "num lateness" }, formatSeconds(o.lateness_seconds)),
        h("td", { class: "verdict" }, o.verdict ?? "undecided"),
      ),
    );
    $("slo-worst").replaceChildren(
      ...(worst.length ? worst : [emptyRow(7, "No executions planned in the window.")]),
    );
  };
}
