// One execution: its fields, actions, attempts and audit trail.

import { api, path } from "../api.js";
import { $, emptyRow, h } from "../dom.js";
import { errorBlock, formatSeconds, formatTime, json, relativeSpan, stateBadge, timeCell } from "../format.js";
import { changed } from "../render.js";
import { actionButton } from "../session.js";

export function isPaused(commands) {
  const toggles = commands.filter((c) => c.kind === "pause" || c.kind === "resume");
  return toggles.length > 0 && toggles[toggles.length - 1].kind === "pause";
}

export function executionActions(e, commands) {
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

export async function loadExecution(route) {
  const id = route.id;
  const [execution, attempts, transitions, commands] = await Promise.all([
    api("GET", path("executions", id)),
    api("GET", path("executions", id, "attempts")),
    api("GET", path("executions", id, "transitions")),
    api("GET", path("executions", id, "commands")),
  ]);
  return () => {
    if (!changed("execution", [execution, attempts, transitions, commands])) return;
    const e = execution;
    $("execution-id").textContent = e.id;
    $("execution-actions").replaceChildren(...executionActions(e, commands));
    const fields = [
      ["job", e.version === null ? e.job : `${e.job} (version ${e.version})`],
      ["state", stateBadge(e.state)],
      ["attempt", `${e.attempt} of ${e.max_attempts}`],
      ["epoch", e.epoch],
      ["due", h("span", { title: e.due_at }, formatTime(e.due_at), relativeSpan(e.due_at))],
      ["lease", e.lease_owner ? `${e.lease_owner} until ${formatTime(e.lease_until)}` : "–"],
      ["priority", e.priority],
      ["queue", e.queue],
      ["bucket", e.bucket_key === null ? e.bucket : `${e.bucket} (key ${e.bucket_key})`],
      // A run asked for now (run_schedule) has no slot of the rule.
      ["schedule", e.schedule_id === null ? "–" : e.slot === null ? `${e.schedule_id} (run now)` : `${e.schedule_id} @ ${e.slot}`],
      ["idempotency key", e.idempotency_key ?? "–"],
      ["timeout", formatSeconds(e.timeout_seconds)],
      ["created", formatTime(e.created_at)],
      ["updated", formatTime(e.updated_at)],
      ["error", e.error ? errorBlock(e.error, true) : "–"],
    ];
    $("execution-fields").replaceChildren(
      ...fields.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    $("execution-inputs").textContent = json(e.inputs);
    $("execution-result").textContent = json(e.result);
    $("execution-progress").textContent = json(e.progress);
    const attemptRows = attempts.map((a) =>
      h(
        "tr",
        {},
        h("td", { class: "num" }, a.attempt),
        h("td", { class: "num" }, a.epoch),
        h("td", {}, a.owner),
        timeCell(a.started_at),
        timeCell(a.ended_at),
        h("td", {}, a.outcome ?? "running"),
        h("td", { class: "error" }, errorBlock(a.error)),
      ),
    );
    $("attempts").replaceChildren(...(attemptRows.length ? attemptRows : [emptyRow(7, "Not started yet.")]));
    const transitionRows = transitions.map((t) =>
      h(
        "tr",
        {},
        h("td", { class: "num" }, t.seq),
        timeCell(t.at),
        h("td", {}, t.event),
        h("td", {}, t.from_state ? stateBadge(t.from_state) : "–"),
        h("td", {}, stateBadge(t.to_state)),
        h("td", { class: "num" }, t.epoch),
        h("td", {}, t.actor ?? ""),
        h("td", {}, t.reason ?? ""),
      ),
    );
    $("transitions").replaceChildren(...transitionRows);
  };
}
