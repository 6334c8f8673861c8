// The filters of GET /executions: kept in the URL hash as typed, sent to the API resolved.
//
// A filter set is an object: `state`, a list of state names, and every other filter a
// string ("" when not given). The hash holds it exactly as the operator typed it, so a
// bookmark restores the form as it was; a time filter may be a duration ago ("1h", "7d",
// as the CLI's) that is turned into an instant each time the list is read, so "created
// in the last hour" stays the last hour. Anything the page cannot read as a time is
// sent as typed: the API refuses it with a 422 naming the field, shown in the banner.

import { h } from "./dom.js";
import { STATES } from "./format.js";

// The filters besides `state`, in the form's order, each with its label.
export const TEXT_FILTERS = {
  job: "Job",
  queue: "Queue",
  error: "Error text",
  schedule: "Schedule",
  bucket: "Bucket",
  limit_key: "Limit key",
  owner: "Lease owner",
  outcome: "Attempt outcome",
};

// Each time range: its name's stem, its label and what it filters on.
export const RANGES = {
  created: "Created",
  due: "Due",
  finished: "Finished",
};

// The quick picks every range offers: how far back "from" goes.
export const QUICK_PICKS = [
  ["1h", "last hour"],
  ["1d", "last day"],
  ["7d", "last week"],
];

// What an attempt may have ended with (GET /executions's `outcome`, any case).
export const OUTCOMES = ["succeeded", "failed", "timed_out", "abandoned", "snoozed", "cancelled"];

// Every filter name the URL and the API share, `state` first.
export const FILTER_NAMES = [
  "state",
  ...Object.keys(TEXT_FILTERS),
  ...Object.keys(RANGES).flatMap((stem) => [`${stem}_after`, `${stem}_before`]),
];

// -- the model -----------------------------------------------------------------------------

export function emptyFilters() {
  const filters = { state: [] };
  for (const name of FILTER_NAMES.slice(1)) filters[name] = "";
  return filters;
}

// The filters a route's parameters hold (unknown parameters are ignored).
export function readFilters(params) {
  const filters = emptyFilters();
  filters.state = params.getAll("state").filter((s) => s !== "");
  for (const name of FILTER_NAMES.slice(1)) filters[name] = params.get(name) || "";
  return filters;
}

export function isEmpty(filters) {
  return filters.state.length === 0 && FILTER_NAMES.slice(1).every((name) => !filters[name]);
}

// "#/executions?state=FAILED&job=x": the filters as typed, `state` repeated.
export function filterHash(view, filters) {
  const search = new URLSearchParams();
  for (const state of filters.state) search.append("state", state);
  for (const name of FILTER_NAMES.slice(1)) if (filters[name]) search.set(name, filters[name]);
  const text = search.toString();
  return `#/${view}${text ? `?${text}` : ""}`;
}

const AGO = /^(\d{1,9}(?:\.\d+)?)\s*([smhdw])$/i;
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?)?(\s*(?:Z|[+-]\d{2}:?\d{2}))?$/i;

// A time filter as the API wants it (ISO 8601 with an offset): "1h" is an hour before
// `now`; "2026-01-31 14:00" is local time (the page shows local times); a text with an
// offset is passed on; anything else is passed on as typed, for the API to refuse.
export function resolveWhen(text, now = Date.now()) {
  const value = text.trim();
  const ago = AGO.exec(value);
  if (ago) {
    const at = new Date(now - Number(ago[1]) * UNIT_SECONDS[ago[2].toLowerCase()] * 1000);
    return Number.isNaN(at.getTime()) ? value : at.toISOString();
  }
  const parts = INSTANT.exec(value);
  if (!parts) return value;
  if (parts[8]) return parts[4] === undefined ? value : value.replace(" ", "T").replace(/\s+/g, "");
  const [year, month, day, hour = 0, minute = 0, second = 0] = parts.slice(1, 7).map((p) => Number(p ?? 0));
  const fraction = parts[7] ? Math.round(Number(parts[7]) * 1000) : 0;
  const at = new Date(2000, 0, 1, hour, minute, second, fraction);
  at.setFullYear(year, month - 1, day); // (the constructor reads years below 100 as 19xx)
  // A date that does not exist (2026-02-31) rolls over in Date: let the API refuse it.
  if (Number.isNaN(at.getTime()) || at.getMonth() !== month - 1 || at.getDate() !== day) return value;
  return at.toISOString();
}

// The filters the API is given: empty ones left out, time ranges resolved at `now`.
export function apiFilters(filters, now = Date.now()) {
  const resolved = {};
  if (filters.state.length) resolved.state = [...filters.state];
  for (const name of Object.keys(TEXT_FILTERS)) {
    if (filters[name]) resolved[name] = name === "error" ? filters[name] : filters[name].trim();
  }
  for (const stem of Object.keys(RANGES)) {
    for (const name of [`${stem}_after`, `${stem}_before`]) {
      if (filters[name].trim()) resolved[name] = resolveWhen(filters[name], now);
    }
  }
  return resolved;
}

// "?state=FAILED&job=x&cursor=...": resolved filters and paging as a query string.
export function apiSearch(resolved, extra = {}) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries({ ...resolved, ...extra })) {
    if (Array.isArray(value)) for (const item of value) search.append(name, item);
    else if (value !== null && value !== undefined && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// The resolved filters as POST /executions/actions's `filter`: a bucket is a number
// there (one that is not stays text, for the API to refuse naming filter.bucket).
export function actionFilter(resolved) {
  const filter = { ...resolved };
  if (filter.bucket !== undefined && /^\d{1,10}$/.test(filter.bucket)) filter.bucket = Number(filter.bucket);
  return filter;
}

// -- the form ------------------------------------------------------------------------------

// A filter form over `names` (FILTER_NAMES by default): `node` to place, `show(filters)`
// fills it (unless it already shows them: an edit in progress survives the polls),
// `read()` gives what it holds. Ids are `${prefix}${name}` ("filter-job").
// `onApply(filters)` runs on submit and on a quick pick, `onReset()` on Reset.
export function filterForm({ prefix, names = FILTER_NAMES, primary, onApply, onReset }) {
  const inputs = {};
  const stateBoxes = {};
  let shown = null;

  const text = (name, label, attributes = {}) => {
    inputs[name] = h("input", { id: `${prefix}${name}`, name, autocomplete: "off", spellcheck: "false", ...attributes });
    return h("label", { class: `filter filter-${name}` }, h("span", {}, label), inputs[name]);
  };

  const field = (name) => {
    if (name === "state") {
      const boxes = STATES.map((s) => {
        stateBoxes[s] = h("input", { type: "checkbox", id: `${prefix}state-${s}`, name: "state", value: s });
        return h("label", { class: "state-choice" }, stateBoxes[s], h("span", { class: `state state-${s}` }, s));
      });
      return h("fieldset", { class: "filter filter-state" }, h("legend", {}, "State"), ...boxes);
    }
    if (name === "outcome") {
      inputs.outcome = h(
        "select",
        { id: `${prefix}outcome`, name: "outcome" },
        h("option", { value: "" }, "any"),
        ...OUTCOMES.map((o) => h("option", { value: o }, o.replace("_", " "))),
      );
      return h("label", { class: "filter filter-outcome" }, h("span", {}, TEXT_FILTERS.outcome), inputs.outcome);
    }
    if (name === "bucket") return text(name, TEXT_FILTERS.bucket, { inputmode: "numeric" });
    if (name in TEXT_FILTERS) return text(name, TEXT_FILTERS[name]);
    return null;
  };

  const range = (stem) => {
    const after = `${stem}_after`;
    const before = `${stem}_before`;
    const picks = QUICK_PICKS.map(([ago, words]) =>
      h(
        "button",
        {
          type: "button",
          class: "pick",
          "aria-label": `${RANGES[stem]} in the ${words}`,
          onclick: () => {
            inputs[after].value = ago;
            inputs[before].value = "";
            onApply(read());
          },
        },
        words,
      ),
    );
    const hint = "1h, 7d or 2026-01-31 14:00";
    return h(
      "fieldset",
      { class: `filter range range-${stem}` },
      h("legend", {}, RANGES[stem]),
      text(after, "from", { placeholder: hint }),
      text(before, "before", { placeholder: hint }),
      h("span", { class: "picks" }, ...picks),
    );
  };

  const parts = (list) =>
    list.flatMap((name) => {
      if (name.endsWith("_after") && name.slice(0, -6) in RANGES) return [range(name.slice(0, -6))];
      if (name.endsWith("_before")) return [];
      const node = field(name);
      return node ? [node] : [];
    });

  const main = primary ? names.filter((n) => primary.includes(n)) : names;
  const rest = names.filter((n) => !main.includes(n));
  const more = rest.length
    ? h("details", { class: "more-filters" }, h("summary", {}, "More filters"), h("div", { class: "filter-grid" }, ...parts(rest)))
    : null;
  const buttons = h(
    "div",
    { class: "filter-buttons" },
    h("button", { type: "submit" }, "Apply"),
    h("button", { type: "button", id: `${prefix}reset`, onclick: () => { shown = null; onReset(); } }, "Reset"),
  );
  const node = h("form", { class: "filters find", id: `${prefix}form` }, h("div", { class: "filter-grid" }, ...parts(main)), more, buttons);
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    onApply(read());
  });

  function read() {
    const filters = emptyFilters();
    filters.state = STATES.filter((s) => stateBoxes[s] && stateBoxes[s].checked);
    for (const [name, input] of Object.entries(inputs)) filters[name] = input.value;
    return filters;
  }

  function show(filters) {
    const key = JSON.stringify(filters);
    if (key === shown) return;
    shown = key;
    for (const [s, box] of Object.entries(stateBoxes)) box.checked = filters.state.includes(s);
    for (const [name, input] of Object.entries(inputs)) {
      const value = filters[name] || "";
      if (input.tagName === "SELECT" && value && ![...input.options].some((o) => o.value === value)) {
        // A hand-typed outcome the list lacks ("TIMED_OUT", "bogus"): shown as given.
        input.append(h("option", { value }, value));
      }
      input.value = value;
    }
    // Open "More filters" when one of them is set, so the form shows every filter in force.
    if (more && rest.some((n) => (n === "state" ? filters.state.length : filters[n]))) more.open = true;
  }

  return { node, show, read, forget: () => (shown = null) };
}
