// One execution, to understand it: its outcome in words, its timeline (leases, waits and
// marks, drawn by js/timeline.js), its fields, its attempts, its inputs, result and
// progress as folded JSON, and its audit trail.
//
// A finished execution states its own outcome ("Succeeded on attempt 2 of 5 at …"): the
// `error` a row keeps is its latest failure, which for one that then succeeded (or was
// cancelled or skipped) is an earlier attempt's, and stays in the attempts table.

import { api, path } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { errorBlock, formatSeconds, formatTime, relativeSpan, stateBadge, timeCell } from "../format.js";
import { jsonTree } from "../jsonview.js";
import { changed, rendered } from "../render.js";
import { actionButton, canAct } from "../session.js";
import { drawTimeline } from "../timeline.js";

const FINISHED = ["SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"];
const PAYLOADS = [
  ["inputs", "Inputs"],
  ["result", "Result"],
  ["progress", "Progress"],
];

export function isPaused(commands) {
  const toggles = commands.filter((c) => c.kind === "pause" || c.kind === "resume");
  return toggles.length > 0 && toggles[toggles.length - 1].kind === "pause";
}

// The buttons of one execution (none for a read-only session: it may not act).
export function executionActions(e, commands) {
  if (!canAct()) return [];
  const id = e.id;
  const buttons = [];
  if (e.state === "SCHEDULED" || e.state === "RETRY_WAIT") {
    buttons.push(actionButton("Cancel", "cancel before it starts", () => api("DELETE", path("executions", id)), "Execution cancelled.", true));
  }
  if (e.state === "RUNNING") {
    buttons.push(actionButton("Cancel", "ask its worker to stop it", () => api("POST", path("executions", id, "cancel")), "Cancel requested; its worker will stop it.", true));
    buttons.push(
      isPaused(commands)
        ? actionButton("Resume", "ask its worker to resume it", () => api("POST", path("executions", id, "resume")), "Resume requested.")
        : actionButton("Pause", "ask its worker to pause it", () => api("POST", path("executions", id, "pause")), "Pause requested."),
    );
  }
  if (e.state === "FAILED") {
    buttons.push(actionButton("Replay", "run it again with fresh attempts", () => api("POST", path("executions", id, "replay")), "Execution replayed.", true));
  }
  return buttons;
}

// -- the view's DOM ------------------------------------------------------------------------

let built = false;

function build() {
  if (built) return;
  built = true;
  const attempts = h(
    "table",
    { class: "grid stack attempts" },
    h("thead", {}, h("tr", {}, ...["attempt", "epoch", "owner", "started", "ended", "outcome", "error"].map((c) => h("th", {}, c)))),
    h("tbody", { id: "attempts" }),
  );
  const trail = h(
    "table",
    { class: "grid stack audit" },
    h("thead", {}, h("tr", {}, ...["seq", "at", "event", "from", "to", "epoch", "actor", "reason"].map((c) => h("th", {}, c)))),
    h("tbody", { id: "transitions" }),
  );
  $("view-execution").replaceChildren(
    h("p", {}, h("a", { href: "#/executions" }, "← Executions")),
    h("h2", {}, "Execution ", h("code", { id: "execution-id" })),
    h("p", { id: "execution-outcome", class: "outcome" }),
    h("div", { id: "execution-actions", class: "actions" }),
    h(
      "figure",
      { class: "timeline-figure" },
      h("figcaption", {}, "Timeline: one bar per lease (epoch), the waits between them, and what happened when"),
      h("div", { id: "execution-timeline" }),
    ),
    h("dl", { id: "execution-fields", class: "fields" }),
    h("h3", {}, "Attempts"),
    h("div", { class: "table-box" }, attempts),
    h(
      "div",
      { class: "payloads" },
      ...PAYLOADS.map(([name, title]) => h("section", {}, h("h3", {}, title), h("div", { id: `execution-${name}`, class: "payload" }))),
    ),
    h("h3", {}, "Audit trail"),
    h("div", { class: "table-box" }, trail),
  );
}

// Another execution opens: empty the view first, so that none of the previous one's
// buttons are there to click until this one's data arrives.
export function clearExecution(id) {
  build();
  rendered.delete("execution");
  rendered.delete("execution-timeline");
  $("execution-id").textContent = id;
  for (const part of ["execution-outcome", "execution-actions", "execution-timeline", "execution-fields", "attempts", "transitions"]) {
    $(part).replaceChildren();
  }
  for (const [name] of PAYLOADS) $(`execution-${name}`).replaceChildren();
}

// -- what it says --------------------------------------------------------------------------

const at = (iso) => h("time", { datetime: iso, title: iso }, formatTime(iso));

function lastTo(transitions, state) {
  for (let i = transitions.length - 1; i >= 0; i -= 1) if (transitions[i].to_state === state) return transitions[i];
  return null;
}

// The first line of an error (its message, where fencepost keeps it first), the whole
// text on demand.
export function reasonBlock(text) {
  if (!text) return "";
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  if (lines.length <= 1) return h("span", { class: "reason-line" }, text);
  return h("details", { class: "reason" }, h("summary", {}, lines[0].trim()), h("pre", {}, text));
}

// One sentence on where the execution stands, finished or not.
export function outcomeOf(e, attempts, transitions) {
  const of = `${e.max_attempts}`;
  if (e.state === "SUCCEEDED") {
    const won = [...attempts].reverse().find((a) => a.outcome === "SUCCEEDED");
    const when = won?.ended_at ?? lastTo(transitions, "SUCCEEDED")?.at ?? e.updated_at;
    return ["Succeeded on attempt ", `${won ? won.attempt : e.attempt} of ${of}`, " at ", at(when), "."];
  }
  if (e.state === "FAILED") {
    const end = lastTo(transitions, "FAILED");
    return ["Failed for good on attempt ", `${e.attempt} of ${of}`, " at ", at(end ? end.at : e.updated_at), ": a dead letter."];
  }
  if (e.state === "CANCELLED") {
    const end = lastTo(transitions, "CANCELLED");
    return ["Cancelled at ", at(end ? end.at : e.updated_at), end && end.actor ? ` by ${end.actor}` : "", "."];
  }
  if (e.state === "SKIPPED") {
    const end = lastTo(transitions, "SKIPPED");
    return ["Skipped at ", at(end ? end.at : e.updated_at), end && end.reason ? `: ${end.reason}` : "", "."];
  }
  if (e.state === "RUNNING") {
    const claim = lastTo(transitions, "RUNNING");
    return ["Running attempt ", `${e.attempt} of ${of}`, ` under ${e.lease_owner ?? "?"}`, claim ? [" since ", at(claim.at)] : "", "."];
  }
  if (e.state === "RETRY_WAIT") {
    return [`Attempt ${e.attempt} of ${of} failed; the next is due `, at(e.due_at), relativeSpan(e.due_at), "."];
  }
  return [e.attempt > 0 ? `Waiting for attempt ${e.attempt + 1} of ${of}, due ` : "Waiting, due ", at(e.due_at), relativeSpan(e.due_at), "."];
}

function fieldsOf(e) {
  const fields = [
    ["job", e.version === null ? e.job : `${e.job} (version ${e.version})`],
    ["state", stateBadge(e.state)],
    ["attempt", `${e.attempt} of ${e.max_attempts}`],
    ["epoch", e.epoch],
    ["due", h("span", { title: e.due_at }, formatTime(e.due_at), relativeSpan(e.due_at))],
    ["lease", e.lease_owner ? `${e.lease_owner} until ${formatTime(e.lease_until)}` : "–"],
    ["priority", e.priority],
    ["queue", e.queue],
    ["limit key", e.limit_key ?? "–"],
    ["bucket", e.bucket_key === null ? e.bucket : `${e.bucket} (key ${e.bucket_key})`],
    // A run asked for now (run_schedule) has no slot of the rule.
    ["schedule", e.schedule_id === null ? "–" : e.slot === null ? `${e.schedule_id} (run now)` : `${e.schedule_id} @ ${e.slot}`],
    ["idempotency key", e.idempotency_key ?? "–"],
    ["timeout", formatSeconds(e.timeout_seconds)],
    ["created", formatTime(e.created_at)],
    ["updated", formatTime(e.updated_at)],
  ];
  // Its own error only while it is its own: a dead letter's, or the failure an
  // unfinished execution retries after. A success's stays with its attempt.
  if (e.error && e.state === "FAILED") fields.push(["error", errorBlock(e.error, true)]);
  else if (e.error && !FINISHED.includes(e.state)) fields.push(["last error", errorBlock(e.error)]);
  return fields;
}

function labelled(cell, label) {
  cell.setAttribute("data-label", label);
  return cell;
}

// The open <details> under `node` by a key, to open them again after a re-render.
function openKeys(node) {
  return new Set([...node.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
}

function reopen(node, keys) {
  for (const details of node.querySelectorAll("details[data-key]")) if (keys.has(details.dataset.key)) details.open = true;
}

function keyed(block, key) {
  if (block instanceof Element && block.tagName === "DETAILS") block.setAttribute("data-key", key);
  return block;
}

// -- the loader ----------------------------------------------------------------------------

function drawPicture(model, e) {
  const box = $("execution-timeline");
  if (model instanceof Error) {
    // The rest of the page stands without its picture.
    rendered.delete("execution-timeline");
    box.replaceChildren(h("p", { class: "figures" }, `No timeline: ${model.message}`));
    return;
  }
  // A finished execution's picture only changes with its records; a live one's moves
  // with `now` and is redrawn on every poll (the picture alone).
  const stable = FINISHED.includes(e.state) ? { ...model, now: null } : model;
  if (!changed("execution-timeline", stable)) return;
  let picture;
  try {
    picture = drawTimeline(model);
  } catch (error) {
    console.error("drawTimeline failed", error); // a bug of the page's: let it be seen
    box.replaceChildren(h("p", { class: "figures" }, "No timeline: it could not be drawn."));
    return;
  }
  picture.setAttribute("role", "img");
  picture.setAttribute("aria-label", `Timeline of execution ${e.id}: ${model.leases.length} leases`);
  box.replaceChildren(picture);
}

export async function loadExecution(route) {
  build();
  const id = route.id;
  const [execution, attempts, transitions, commands, timeline] = await Promise.all([
    api("GET", path("executions", id)),
    api("GET", path("executions", id, "attempts")),
    api("GET", path("executions", id, "transitions")),
    api("GET", path("executions", id, "commands")),
    // Its picture is a part apart: an error there leaves the rest of the page standing.
    api("GET", path("executions", id, "timeline")).catch((error) => (error instanceof Error ? error : new Error(String(error)))),
  ]);
  return () => {
    const e = execution;
    drawPicture(timeline, e);
    if (!changed("execution", [execution, attempts, transitions, commands])) return;
    $("execution-id").textContent = e.id;
    $("execution-outcome").replaceChildren(h("span", {}, outcomeOf(e, attempts, transitions).flat()));
    $("execution-outcome").className = `outcome outcome-${e.state}`;
    $("execution-actions").replaceChildren(...executionActions(e, commands));
    $("execution-fields").replaceChildren(
      ...fieldsOf(e).flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    for (const [name] of PAYLOADS) {
      const box = $(`execution-${name}`);
      box.replaceChildren(jsonTree(e[name], box.firstElementChild));
    }
    const attemptBox = $("attempts");
    const attemptsOpen = openKeys(attemptBox);
    const attemptRows = attempts.map((a) =>
      h(
        "tr",
        { "data-attempt": a.attempt },
        h("td", { class: "num", "data-label": "attempt" }, a.attempt),
        h("td", { class: "num", "data-label": "epoch" }, a.epoch),
        h("td", { class: "owner", "data-label": "owner" }, a.owner),
        labelled(timeCell(a.started_at), "started"),
        labelled(timeCell(a.ended_at), "ended"),
        h("td", { "data-label": "outcome" }, a.outcome ?? "running"),
        h("td", { class: "error", "data-label": "error" }, keyed(reasonBlock(a.error), `a${a.attempt}`)),
      ),
    );
    attemptBox.replaceChildren(...(attemptRows.length ? attemptRows : [emptyRow(7, "Not started yet.")]));
    reopen(attemptBox, attemptsOpen);
    const trail = $("transitions");
    const trailOpen = openKeys(trail);
    const transitionRows = transitions.map((t) =>
      h(
        "tr",
        { "data-seq": t.seq, "data-event": t.event },
        h("td", { class: "num", "data-label": "seq" }, t.seq),
        labelled(timeCell(t.at), "at"),
        h("td", { "data-label": "event" }, t.event),
        h("td", { "data-label": "from" }, t.from_state ? stateBadge(t.from_state) : "–"),
        h("td", { "data-label": "to" }, stateBadge(t.to_state)),
        h("td", { class: "num", "data-label": "epoch" }, t.epoch),
        h("td", { class: "actor", "data-label": "actor" }, t.actor ?? ""),
        h("td", { class: "reason-cell", "data-label": "reason" }, keyed(reasonBlock(t.reason), `t${t.seq}`)),
      ),
    );
    trail.replaceChildren(...transitionRows);
    reopen(trail, trailOpen);
  };
}
