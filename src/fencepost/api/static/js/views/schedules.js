// The Schedules view, and one schedule's page: its next fire times in its own zone
// (DST shifts marked), its latest runs and misfires, Run now, Pause/Resume, and an
// editor that previews the edited rule's fire times before saving it.

import { ApiError, api, path, query } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { errorBlock, executionLink, formatSeconds, formatTime, stateBadge, timeCell } from "../format.js";
import { PAGE_SIZE, changed, pagerFor, rendered, updatePager } from "../render.js";
import { actionButton, canAct } from "../session.js";

// A schedule's page shows this many fire times, latest executions and misfires.
export const PREVIEW_COUNT = 10;
export const RUNS_SHOWN = 10;
// The editor previews the edited rule this long after the last keystroke.
export const PREVIEW_DELAY_MS = 300;

// The policies a schedule takes, as fencepost.domain.policies names them (the
// service refuses any other with a 422 naming the field).
export const MISFIRE = ["coalesce", "catch_up", "skip"];
export const OVERLAP = ["allow", "skip", "buffer_one", "buffer_all", "replace"];
export const DST_GAP = ["shift", "skip"];
export const DST_FOLD = ["once", "twice"];

export function scheduleRule(s) {
  if (s.cron !== null) return s.timezone === "UTC" ? s.cron : `${s.cron} (${s.timezone})`;
  return `every ${formatSeconds(s.every_seconds)}`;
}

export function scheduleLink(id) {
  return h("a", { href: `#/schedules/${encodeURIComponent(id)}`, class: "id schedule-link" }, id);
}

// Pause asks first (its slots are skipped until a resume); resume does not.
export function scheduleToggle(s) {
  if (!canAct()) return null;
  const where = path("schedules", s.id);
  return s.paused
    ? actionButton("Resume", "fire again from the next slot", () => api("POST", `${where}/resume`), "Schedule resumed.")
    : actionButton("Pause", "stop firing (slots are recorded SKIPPED)", () => api("POST", `${where}/pause`), "Schedule paused.", true);
}

// -- times in a schedule's own zone -------------------------------------------------------

const formats = new Map();

function format(timeZone, options) {
  const key = `${timeZone}|${JSON.stringify(options)}`;
  if (!formats.has(key)) formats.set(key, new Intl.DateTimeFormat("en-GB", { timeZone, ...options }));
  return formats.get(key);
}

function parts(iso, timeZone, options) {
  let zone = timeZone;
  try {
    format(zone, {});
  } catch {
    zone = "UTC"; // a zone this browser does not know: UTC, which the offset then shows
  }
  const found = {};
  for (const part of format(zone, options).formatToParts(new Date(iso))) found[part.type] = part.value;
  return found;
}

// The UTC offset of `zone` at an instant: "+01:00", "-04:00", "+00:00".
export function zoneOffset(iso, zone) {
  const name = parts(iso, zone, { timeZoneName: "longOffset" }).timeZoneName || "GMT";
  return name === "GMT" ? "+00:00" : name.replace("GMT", "");
}

// An instant as a wall time in `zone`: "Mon 2026-03-30 09:00".
export function wallTime(iso, zone) {
  const p = parts(iso, zone, {
    weekday: "short",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
  });
  const seconds = p.second && p.second !== "00" ? `:${p.second}` : "";
  return `${p.weekday} ${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}${seconds}`;
}

// Fire times as a list in the schedule's zone; where the zone's UTC offset differs from
// the previous fire time's, the item says so ("DST: +01:00 → +02:00").
export function fireTimeItems(fireTimes, zone) {
  let previous = null;
  return fireTimes.map((iso) => {
    const offset = zoneOffset(iso, zone);
    const shifted = previous !== null && offset !== previous;
    const item = h(
      "li",
      { "data-fire": iso, "data-offset": offset, class: shifted ? "dst" : undefined },
      h("time", { datetime: iso, title: iso }, `${wallTime(iso, zone)} ${offset}`),
      shifted ? h("span", { class: "dst-shift" }, `DST: ${previous} → ${offset}`) : null,
    );
    previous = offset;
    return item;
  });
}

// -- the list -----------------------------------------------------------------------------

export async function loadSchedules() {
  const pager = pagerFor("schedules", "");
  const page = await api("GET", `/schedules${query({ cursor: pager.cursor, limit: PAGE_SIZE })}`);
  return () => {
    updatePager("schedules", page.next_cursor);
    if (!changed("schedules", page)) return;
    const rows = page.items.map((s) =>
      h(
        "tr",
        { "data-id": s.id },
        h("td", {}, scheduleLink(s.id)),
        h("td", { class: "job" }, s.job),
        h("td", { class: "rule" }, scheduleRule(s)),
        s.next_fire_at ? timeCell(s.next_fire_at, true) : h("td", {}, s.paused ? "paused" : "none left"),
        h("td", {}, s.misfire),
        h("td", {}, s.overlap),
        h("td", {}, s.paused ? "paused" : "active"),
        h("td", {}, scheduleToggle(s)),
      ),
    );
    $("schedules").replaceChildren(...(rows.length ? rows : [emptyRow(8, "No schedules.")]));
  };
}

// -- one schedule -------------------------------------------------------------------------

// The page's parts, built once per schedule shown; the editor survives refreshes.
const page = { id: null, editor: null };
// Why each misfire was skipped (its SKIPPED transition's reason): read once each.
const reasons = new Map();

function statesBut(excluded) {
  return ["SCHEDULED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"].filter((s) => s !== excluded);
}

function executionsPath(id, states) {
  const search = new URLSearchParams({ schedule: id, order: "desc", limit: String(RUNS_SHOWN) });
  for (const state of states) search.append("state", state);
  return `/executions?${search}`;
}

async function readReasons(skipped) {
  const unknown = skipped.filter((e) => !reasons.has(e.id));
  const trails = await Promise.all(unknown.map((e) => api("GET", `${path("executions", e.id)}/transitions`)));
  unknown.forEach((e, i) => {
    const last = trails[i].filter((t) => t.to_state === "SKIPPED").pop();
    reasons.set(e.id, last ? last.reason : null);
  });
}

function build(id) {
  page.id = id;
  page.editor = null;
  for (const key of ["schedule-fields", "schedule-upcoming", "schedule-runs", "schedule-misfires", "schedule-actions"]) rendered.delete(key);
  $("view-schedule").replaceChildren(
    h("p", {}, h("a", { href: "#/schedules" }, "← Schedules")),
    h("h2", {}, "Schedule ", h("code", { id: "schedule-id" }, id)),
    h("div", { id: "schedule-actions", class: "actions" }),
    h("dl", { id: "schedule-fields", class: "fields" }),
    h("div", { id: "schedule-edit" }),
    h("div", { class: "schedule-columns" },
      h("section", {}, h("h3", {}, "Next fire times ", h("small", { id: "schedule-zone" })), h("ol", { id: "schedule-upcoming", class: "fire-times" })),
      h("section", {},
        h("h3", {}, "Latest executions ", h("small", {}, h("a", { id: "schedule-executions", href: `#/executions${query({ schedule: id })}` }, "all"))),
        h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "id"), h("th", {}, "state"), h("th", {}, "slot"), h("th", {}, "updated"))), h("tbody", { id: "schedule-runs" })),
      ),
    ),
    h("h3", {}, "Misfires ", h("small", {}, "(occurrences recorded SKIPPED: missed, paused, or overlapping)")),
    h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "id"), h("th", {}, "slot"), h("th", {}, "recorded"), h("th", {}, "reason"))), h("tbody", { id: "schedule-misfires" })),
  );
}

export async function loadSchedule(route) {
  const id = route.id;
  const where = path("schedules", id);
  const [schedule, upcoming, runs, skipped] = await Promise.all([
    api("GET", where),
    api("GET", `${where}/preview${query({ count: PREVIEW_COUNT })}`),
    api("GET", executionsPath(id, statesBut("SKIPPED"))),
    api("GET", executionsPath(id, ["SKIPPED"])),
  ]);
  await readReasons(skipped.items);
  return () => {
    if (page.id !== id) build(id);
    renderSchedule(schedule, upcoming, runs, skipped);
  };
}

function renderSchedule(s, upcoming, runs, skipped) {
  if (changed("schedule-actions", s)) {
    const where = path("schedules", s.id);
    $("schedule-actions").replaceChildren(
      ...(canAct()
        ? [
            actionButton("Run now", "run the schedule's job once now, besides its slots", () => api("POST", `${where}/run`), "Schedule run: an execution was submitted.", true),
            scheduleToggle(s),
            h("button", { type: "button", class: "action", id: "schedule-edit-open", onclick: () => openEditor(s) }, "Edit"),
          ]
        : []),
    );
  }
  if (changed("schedule-fields", s)) {
    const fields = [
      ["job", s.version === null ? s.job : `${s.job} (version ${s.version})`],
      ["rule", s.cron !== null ? s.cron : `every ${formatSeconds(s.every_seconds)}`],
      ["zone", s.timezone],
      ["status", s.paused ? "paused" : "active"],
      ["next fire", s.next_fire_at ? `${wallTime(s.next_fire_at, s.timezone)} ${zoneOffset(s.next_fire_at, s.timezone)}` : s.paused ? "paused" : "none left"],
      ["misfire", `${s.misfire} (grace ${formatSeconds(s.misfire_grace_seconds)}${s.misfire === "catch_up" ? `, at most ${s.max_catch_up}` : ""})`],
      ["overlap", s.overlap],
      ["DST", `gap: ${s.dst_gap}, fold: ${s.dst_fold}`],
      ["queue", s.queue],
      ["bounds", s.start_at || s.end_at ? `${formatTime(s.start_at)} to ${formatTime(s.end_at)}` : "none"],
      ["updated", formatTime(s.updated_at)],
    ];
    $("schedule-fields").replaceChildren(...fields.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]));
  }
  if (changed("schedule-upcoming", [upcoming, s.timezone])) {
    $("schedule-zone").textContent = `(${s.timezone}${s.paused ? "; paused: none of them runs until resumed" : ""})`;
    const items = fireTimeItems(upcoming.fire_times, s.timezone);
    $("schedule-upcoming").replaceChildren(...(items.length ? items : [h("li", { class: "empty" }, "None: the rule fires no more.")]));
  }
  if (changed("schedule-runs", runs)) {
    const rows = runs.items.map((e) =>
      h("tr", { "data-id": e.id }, h("td", {}, executionLink(e.id)), h("td", {}, stateBadge(e.state)), h("td", { class: "time" }, e.slot ? formatTime(e.slot) : "run now"), timeCell(e.updated_at, true)),
    );
    $("schedule-runs").replaceChildren(...(rows.length ? rows : [emptyRow(4, "No executions yet.")]));
  }
  if (changed("schedule-misfires", [skipped, skipped.items.map((e) => reasons.get(e.id))])) {
    const rows = skipped.items.map((e) =>
      h("tr", { "data-id": e.id }, h("td", {}, executionLink(e.id)), h("td", { class: "time" }, formatTime(e.slot)), timeCell(e.updated_at, true), h("td", { class: "reason" }, errorBlock(reasons.get(e.id) || "") || "–")),
    );
    $("schedule-misfires").replaceChildren(...(rows.length ? rows : [emptyRow(4, "No misfires.")]));
  }
}

// -- the editor ---------------------------------------------------------------------------

function choice(name, label, values, current) {
  return h("label", {}, label, " ", h("select", { name, id: `edit-${name}` }, ...values.map((v) => h("option", { value: v, selected: v === current }, v))));
}

// The rule fields of the editor's form, as POST /schedules/preview takes them.
function ruleOf(form, s) {
  const kind = form.elements.kind.value;
  const rule = { dst_gap: form.elements.dst_gap.value, dst_fold: form.elements.dst_fold.value };
  if (kind === "cron") {
    rule.cron = form.elements.cron.value.trim();
    rule.timezone = form.elements.timezone.value.trim();
  } else {
    // An empty box is no number: send it as typed, for the service to refuse by name.
    const text = form.elements.every_seconds.value.trim();
    rule.every_seconds = text === "" || Number.isNaN(Number(text)) ? text : Number(text);
    rule.timezone = "UTC";
    // Its slots are anchor + k * every: a stored interval's anchor, as the service takes it.
    rule.anchor = s.start_at || s.created_at;
  }
  if (s.start_at) rule.start_at = s.start_at;
  if (s.end_at) rule.end_at = s.end_at;
  return rule;
}

// What Save sends: the rule and the policies (PATCH /schedules/{id}).
function changesOf(form, s) {
  const { anchor, ...rule } = ruleOf(form, s);
  delete rule.start_at;
  delete rule.end_at;
  const grace = form.elements.misfire_grace_seconds.value.trim();
  return {
    ...rule,
    misfire: form.elements.misfire.value,
    misfire_grace_seconds: grace === "" || Number.isNaN(Number(grace)) ? grace : Number(grace),
    overlap: form.elements.overlap.value,
  };
}

function openEditor(s) {
  if (page.editor) return;
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const cron = s.cron !== null;
  const form = h(
    "form",
    { id: "schedule-editor", class: "editor", novalidate: true },
    h("h3", {}, "Edit"),
    h("fieldset", { class: "rule-kind" },
      h("legend", {}, "Rule"),
      h("label", {}, h("input", { type: "radio", name: "kind", value: "cron", checked: cron }), " cron"),
      h("label", {}, h("input", { type: "radio", name: "kind", value: "every", checked: !cron }), " every"),
    ),
    h("div", { class: "editor-fields" },
      h("label", { class: "for-cron" }, "Cron ", h("input", { name: "cron", id: "edit-cron", value: s.cron ?? "", autocomplete: "off", spellcheck: "false" })),
      h("label", { class: "for-cron" }, "Zone ", h("input", { name: "timezone", id: "edit-timezone", value: s.timezone, list: "edit-zones", autocomplete: "off", spellcheck: "false" })),
      h("datalist", { id: "edit-zones" }, ...zones.map((z) => h("option", { value: z }))),
      h("label", { class: "for-every" }, "Every (seconds) ", h("input", { name: "every_seconds", id: "edit-every", value: s.every_seconds ?? "", inputmode: "decimal", autocomplete: "off" })),
      choice("dst_gap", "DST gap", DST_GAP, s.dst_gap),
      choice("dst_fold", "DST fold", DST_FOLD, s.dst_fold),
      choice("misfire", "Misfire", MISFIRE, s.misfire),
      h("label", {}, "Misfire grace (seconds) ", h("input", { name: "misfire_grace_seconds", id: "edit-grace", value: s.misfire_grace_seconds, inputmode: "decimal", autocomplete: "off" })),
      choice("overlap", "Overlap", OVERLAP, s.overlap),
    ),
    h("h4", {}, "Next fire times of the edited rule ", h("small", { id: "edit-preview-zone" })),
    h("p", { class: "form-error", id: "edit-error", role: "alert", hidden: true }),
    h("ol", { id: "edit-preview", class: "fire-times" }),
  );
  const actions = h("div", { class: "actions" });
  form.append(actions);
  const showKind = () => {
    const kind = form.elements.kind.value;
    for (const label of form.querySelectorAll(".for-cron")) label.hidden = kind !== "cron";
    for (const label of form.querySelectorAll(".for-every")) label.hidden = kind !== "every";
  };
  let timer = null;
  let asked = 0;
  const said = (text) => {
    $("edit-error").textContent = text;
    $("edit-error").hidden = false;
    $("edit-preview").replaceChildren();
  };
  const preview = async () => {
    const mine = ++asked;
    const rule = ruleOf(form, s);
    // Nothing typed yet is no question for the service.
    if (rule.cron === "") return said("cron: give a cron expression, such as 0 3 * * *");
    if (rule.every_seconds === "") return said("every_seconds: give an interval in seconds");
    try {
      const answer = await api("POST", "/schedules/preview", { ...rule, count: PREVIEW_COUNT });
      if (mine !== asked) return;
      $("edit-error").hidden = true;
      $("edit-preview-zone").textContent = `(${rule.timezone})`;
      const items = fireTimeItems(answer.fire_times, rule.timezone);
      $("edit-preview").replaceChildren(...(items.length ? items : [h("li", { class: "empty" }, "None: this rule fires no more.")]));
    } catch (error) {
      if (mine !== asked) return;
      // A bad rule is a 422 naming the field: said beside the form, not in the banner.
      const problem = error instanceof ApiError ? error.problem : { detail: String(error.message || error) };
      said(problem.detail || problem.title);
    }
  };
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(preview, PREVIEW_DELAY_MS);
  };
  form.addEventListener("input", later);
  form.addEventListener("change", () => {
    showKind();
    later();
  });
  form.addEventListener("submit", (event) => event.preventDefault());
  const close = () => {
    clearTimeout(timer);
    asked += 1;
    page.editor = null;
    $("schedule-edit").replaceChildren();
  };
  actions.append(
    actionButton("Save", "store the edited rule and policies (slots not yet planned follow it)", async () => {
      await api("PATCH", path("schedules", s.id), changesOf(form, s));
      close();
    }, "Schedule saved.", true),
    h("button", { type: "button", id: "schedule-edit-cancel", onclick: close }, "Cancel"),
  );
  page.editor = form;
  $("schedule-edit").replaceChildren(form);
  showKind();
  preview();
}
