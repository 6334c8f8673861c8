// The fencepost dashboard: a single page over the service's JSON API.
//
// Safety rules this file keeps:
// * Every value from the API (job names, inputs, errors, ids) reaches the page as a
//   text node or an attribute set through the DOM, never as markup: nothing here
//   hands a string to the HTML parser (no innerHTML and the like).
// * Every state-changing request sends the fencepost_csrf cookie's value back in the
//   X-CSRF-Token header (double-submit); the server refuses browser requests without it.
// * Links are built only as "#/..." with encodeURIComponent'd ids, so no value can
//   become a javascript: URL.

const REFRESH_MS = 2500;
const PAGE_SIZE = 50;
const CONFIRM_MS = 4000; // how long a "Confirm …" button waits for its second click
const STATES = ["SCHEDULED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"];
const CSRF_COOKIE = "fencepost_csrf";
// The chart plots each poll's claim-lateness percentiles over this trailing window.
const CHART_WINDOW_SECONDS = 60;
const CHART_MAX_SAMPLES = 240;
const SVG_NS = "http://www.w3.org/2000/svg";
// The Jobs view counts each job's executions created in this trailing window.
const JOBS_WINDOW_SECONDS = 86400;
// The warning about work nobody serves lists this many job versions, then a count.
const UNSERVED_SHOWN = 10;
// The Queues & limits view counts throttled executions over this trailing window.
const THROTTLED_WINDOW_SECONDS = 3600;
// The SLO view reads the service-level report (30 days of executions) at most this
// often while it stays open: the report is the heaviest read the page makes.
const SLO_REFRESH_MS = 30000;

// -- DOM helpers -------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

// h("td", {class: "x"}, "text", child): an element whose string children become text nodes.
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function show(node, visible) {
  node.hidden = !visible;
}

// -- formatting ----------------------------------------------------------------------------

const pad = (n) => String(n).padStart(2, "0");

function formatTime(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.abs(seconds);
  if (s === 0) return "0 s";
  if (s < 0.01) return `${Number((seconds * 1000).toFixed(2))} ms`;
  if (s < 1) return `${Math.round(seconds * 1000)} ms`;
  if (s < 120) return `${Number(seconds.toFixed(s < 10 ? 2 : 1))} s`;
  if (s < 7200) return `${Number((seconds / 60).toFixed(1))} min`;
  if (s < 172800) return `${Number((seconds / 3600).toFixed(1))} h`;
  return `${Number((seconds / 86400).toFixed(1))} d`;
}

function relative(iso) {
  if (!iso) return "";
  // Whole seconds: the page polls every few seconds, finer would only flicker.
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds === 0) return "now";
  return seconds > 0 ? `in ${formatSeconds(seconds)}` : `${formatSeconds(-seconds)} ago`;
}

// The smallest 1, 2 or 5 times a power of ten that is >= value: a round axis maximum.
function roundUp(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= value);
}

// "(in 5 s)": kept current by updateRelativeTimes() on every poll, without a re-render.
function relativeSpan(iso) {
  return iso ? h("span", { class: "relative", "data-at": iso }, ` (${relative(iso)})`) : null;
}

function updateRelativeTimes() {
  for (const span of document.querySelectorAll("[data-at]")) {
    span.textContent = ` (${relative(span.dataset.at)})`;
  }
}

// A time cell: local time, the relative time beside it, the exact ISO text on hover.
function timeCell(iso, withRelative = false) {
  return h(
    "td",
    { title: iso || undefined, class: "time" },
    formatTime(iso),
    withRelative ? relativeSpan(iso) : null,
  );
}

function json(value) {
  return value === null || value === undefined ? "–" : JSON.stringify(value, null, 2);
}

function stateBadge(state) {
  // Only known states become a class name; anything else is shown as plain text.
  const known = STATES.includes(state);
  return h("span", { class: known ? `state state-${state}` : "state" }, state);
}

// Ids are long (UUIDv7): lists show the start and the end, the whole id on hover, and a
// copy of the link text copies the whole id.
function shortId(id) {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}

function executionLink(id) {
  const link = h("a", { href: `#/executions/${encodeURIComponent(id)}`, class: "id", title: id }, shortId(id));
  link.addEventListener("copy", (event) => {
    event.clipboardData.setData("text/plain", id);
    event.preventDefault();
  });
  return link;
}

// An error as stored: one line, or a message and its traceback. A traceback is a
// monospace block that shows its last line (the exception) until opened.
function errorBlock(text, open = false) {
  if (!text) return "";
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  if (lines.length <= 1) return h("code", { class: "error-line" }, text);
  return h(
    "details",
    { class: "trace", open },
    h("summary", {}, lines[lines.length - 1].trim()),
    h("pre", {}, text),
  );
}

function bucketSpec(buckets) {
  // [0, 1, 2, 3, 7] -> "0-3,7"
  const sorted = [...new Set(buckets)].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j += 1;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

function emptyRow(columns, text) {
  return h("tr", { class: "empty" }, h("td", { colspan: columns }, text));
}

// -- the API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decode(rest.join("="));
  }
  return "";
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    const token = cookie(CSRF_COOKIE);
    if (!token) {
      throw new ApiError(403, {
        title: "CSRF token missing",
        detail: "the page's fencepost_csrf cookie is gone: reload the page",
      });
    }
    headers["X-CSRF-Token"] = token;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, { title: "Service unreachable", detail: String(error.message || error) });
  }
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (!response.ok) {
    throw new ApiError(response.status, data || { title: response.statusText, detail: `HTTP ${response.status}` });
  }
  return data;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

const path = (...segments) => "/" + segments.map((s) => encodeURIComponent(s)).join("/");

// -- banner, notice, sign-in ---------------------------------------------------------------

const ui = {
  session: null,
  bannerFromRefresh: false,
  signingIn: false,
};

function banner(text, fromRefresh = false) {
  $("banner-text").textContent = text;
  ui.bannerFromRefresh = fromRefresh;
  show($("banner"), true);
}

function clearRefreshBanner() {
  if (ui.bannerFromRefresh) {
    show($("banner"), false);
    ui.bannerFromRefresh = false;
  }
}

let noticeTimer = null;
function notice(text) {
  const box = $("notice");
  box.textContent = text;
  show(box, true);
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => show(box, false), 5000);
}

function report(error, fromRefresh = false) {
  if (error instanceof ApiError && error.status === 401 && ui.session && ui.session.auth) {
    askToSignIn();
    return;
  }
  if (error instanceof ApiError) {
    const { title, detail } = error.problem;
    banner(detail && title ? `${title}: ${detail}` : detail || title, fromRefresh);
  } else {
    banner(`Unexpected error: ${error.message || error}`, fromRefresh);
    // A bug in this page, not a service problem: keep it visible to developers too.
    console.warn(error);
  }
}

function askToSignIn() {
  ui.signingIn = true;
  if (ui.session) ui.session = { ...ui.session, name: null, scopes: [] };
  showWho();
  show($("sign-in"), true);
  show($("main"), false);
  $("token").focus();
}

function canAct() {
  const s = ui.session;
  return !s || !s.auth || s.scopes.includes("admin");
}

function showWho() {
  const s = ui.session;
  $("who").textContent = s && s.auth && s.name ? `signed in as ${s.name}` : "";
  show($("sign-out"), Boolean(s && s.auth && s.name));
}

async function loadSession() {
  ui.session = await api("GET", "/session");
  showWho();
  return ui.session;
}

async function signIn(event) {
  event.preventDefault();
  const input = $("token");
  try {
    await api("POST", "/session", { token: input.value });
  } catch (error) {
    input.select();
    if (error instanceof ApiError && error.status === 401) banner("Sign-in refused: unknown token");
    else report(error);
    return;
  }
  input.value = "";
  ui.signingIn = false;
  show($("sign-in"), false);
  show($("main"), true);
  show($("banner"), false);
  await loadSession();
  refreshNow();
}

async function signOut() {
  try {
    await api("DELETE", "/session");
    await loadSession();
  } catch (error) {
    report(error);
    return;
  }
  askToSignIn();
}

// An action button: disabled while its request runs; on success, a notice and a refresh.
// An operator action. One that cannot be taken back (cancel, replay) asks first: the
// first click turns the button into "Confirm <label>" for a few seconds, and only a
// second click acts (in the page: a native dialog would block the whole tab).
function actionButton(label, title, run, done, confirm = false) {
  const allowed = canAct();
  const button = h("button", {
    type: "button",
    class: "action",
    title: allowed ? title : "needs the admin scope",
    disabled: !allowed,
  }, label);
  let armed = null;
  button.addEventListener("click", async () => {
    if (confirm && armed === null) {
      button.textContent = `Confirm ${label.toLowerCase()}`;
      button.classList.add("confirming");
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
        button.classList.remove("confirming");
      }, CONFIRM_MS);
      return;
    }
    if (armed !== null) clearTimeout(armed);
    armed = null;
    button.classList.remove("confirming");
    button.textContent = label;
    button.disabled = true;
    try {
      await run();
    } catch (error) {
      report(error);
      return;
    } finally {
      // A refresh replaces the button when the data changed; when it did not (a
      // command requested, or a refusal), this one must work again.
      button.disabled = false;
    }
    notice(done);
    refreshNow();
  });
  return button;
}

// -- routing -------------------------------------------------------------------------------

// A hand-edited URL may hold a malformed escape ("%E0"): keep it as typed.
function decode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

// "#/executions?job=x" -> {name: "executions", id: null, params}; "#/executions/<id>" -> detail.
function currentRoute() {
  const hash = location.hash.startsWith("#/") ? location.hash.slice(2) : "executions";
  const [pathPart, search = ""] = hash.split("?");
  const [name, id] = pathPart.split("/");
  const params = new URLSearchParams(search);
  if (name === "executions" && id) return { name: "execution", id: decode(id), params };
  if (name === "jobs" && id) return { name: "job", id: decode(id), params };
  if (["executions", "schedules", "dead-letters", "jobs", "nodes", "queues", "slo"].includes(name)) return { name, id: null, params };
  return { name: "executions", id: null, params };
}

const VIEWS = ["executions", "execution", "schedules", "dead-letters", "jobs", "job", "nodes", "queues", "slo"];
// A detail view's tab is its list's.
const TABS = { execution: "executions", job: "jobs" };

function showView(name) {
  for (const view of VIEWS) show($(`view-${view}`), view === name);
  const tab = TABS[name] || name;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.dataset.view === tab);
  }
}

// -- paging state (cursors are kept here, filters live in the URL) -------------------------

const paging = {
  executions: { cursor: null, previous: [], next: null, key: "" },
  schedules: { cursor: null, previous: [], next: null, key: "" },
  "dead-letters": { cursor: null, previous: [], next: null, key: "" },
};

function pagerFor(name, key) {
  const pager = paging[name];
  if (pager.key !== key) Object.assign(pager, { cursor: null, previous: [], next: null, key });
  return pager;
}

function wirePager(name, hasPrevious) {
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

function updatePager(name, nextCursor) {
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
const rendered = new Map();

function changed(view, data) {
  const text = JSON.stringify([data, canAct()]);
  if (rendered.get(view) === text) return false;
  rendered.set(view, text);
  return true;
}

// The filter form shows the URL's filters when they change, and is left alone while
// the user edits it between polls.
let shownFilters = null;

function showFilters(filters) {
  const key = JSON.stringify(filters);
  if (key === shownFilters) return;
  shownFilters = key;
  $("filter-state").value = STATES.includes(filters.state) ? filters.state : "";
  $("filter-job").value = filters.job;
  $("filter-queue").value = filters.queue;
  $("filter-schedule").value = filters.schedule;
}

async function loadExecutions(route) {
  const filters = {
    state: route.params.get("state") || "",
    job: route.params.get("job") || "",
    queue: route.params.get("queue") || "",
    schedule: route.params.get("schedule") || "",
  };
  showFilters(filters);
  const pager = pagerFor("executions", JSON.stringify(filters));
  const page = await api(
    "GET",
    `/executions${query({ ...filters, order: "desc", cursor: pager.cursor, limit: PAGE_SIZE })}`,
  );
  return () => {
    updatePager("executions", page.next_cursor);
    if (!changed("executions", page)) return;
    const rows = page.items.map((e) =>
      h(
        "tr",
        { "data-id": e.id },
        h("td", {}, executionLink(e.id)),
        h("td", { class: "job" }, e.job),
        h("td", { class: "queue" }, e.queue),
        h("td", {}, stateBadge(e.state)),
        h("td", { class: "num" }, `${e.attempt}/${e.max_attempts}`),
        timeCell(e.due_at, true),
        h("td", { class: "num" }, e.bucket),
        timeCell(e.updated_at),
        h("td", { class: "error" }, errorBlock(e.error)),
      ),
    );
    $("executions").replaceChildren(...(rows.length ? rows : [emptyRow(9, "No executions match.")]));
  };
}

// Paused: the latest pause or resume command of a running execution is a pause.
function isPaused(commands) {
  const toggles = commands.filter((c) => c.kind === "pause" || c.kind === "resume");
  return toggles.length > 0 && toggles[toggles.length - 1].kind === "pause";
}

function executionActions(e, commands) {
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

async function loadExecution(route) {
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

function scheduleRule(s) {
  if (s.cron !== null) return s.timezone === "UTC" ? s.cron : `${s.cron} (${s.timezone})`;
  return `every ${formatSeconds(s.every_seconds)}`;
}

async function loadSchedules() {
  const pager = pagerFor("schedules", "");
  const page = await api("GET", `/schedules${query({ cursor: pager.cursor, limit: PAGE_SIZE })}`);
  return () => {
    updatePager("schedules", page.next_cursor);
    if (!changed("schedules", page)) return;
    const rows = page.items.map((s) => {
      const id = s.id;
      const toggle = s.paused
        ? actionButton("Resume", "fire again from the next slot", () => api("POST", path("schedules", id, "resume")), "Schedule resumed.")
        : actionButton("Pause", "stop firing (slots are recorded SKIPPED)", () => api("POST", path("schedules", id, "pause")), "Schedule paused.");
      return h(
        "tr",
        { "data-id": id },
        h("td", {}, h("a", { href: `#/executions?schedule=${encodeURIComponent(id)}`, class: "id" }, id)),
        h("td", { class: "job" }, s.job),
        h("td", { class: "rule" }, scheduleRule(s)),
        s.next_fire_at ? timeCell(s.next_fire_at, true) : h("td", {}, s.paused ? "paused" : "none left"),
        h("td", {}, s.misfire),
        h("td", {}, s.overlap),
        h("td", {}, s.paused ? "paused" : "active"),
        h("td", {}, toggle),
      );
    });
    $("schedules").replaceChildren(...(rows.length ? rows : [emptyRow(8, "No schedules.")]));
  };
}

async function loadDeadLetters() {
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

async function loadNodes() {
  const [nodes, report] = await Promise.all([api("GET", "/nodes"), api("GET", "/buckets")]);
  return () => {
    if (!changed("nodes", [nodes, report])) return;
    const nodeRows = nodes.map((n) =>
      h(
        "tr",
        {},
        h("td", { class: "id" }, n.id),
        h("td", {}, n.kind),
        h("td", {}, n.buckets === null ? "any" : bucketSpec(n.buckets)),
        timeCell(n.started_at),
        timeCell(n.heartbeat_at, true),
        timeCell(n.expires_at, true),
      ),
    );
    $("nodes").replaceChildren(...(nodeRows.length ? nodeRows : [emptyRow(6, "No live nodes.")]));
    // Buckets owned twice, grouped by the nodes that share them: "30-39 (node-a, node-b)".
    const shared = new Map();
    for (const b of report.buckets.filter((b) => b.duplicated)) {
      const owners = b.owners.join(", ");
      shared.set(owners, [...(shared.get(owners) || []), b.bucket]);
    }
    const duplicates = [...shared].map(([owners, buckets]) => `${bucketSpec(buckets)} (${owners})`);
    const summary = [
      ["buckets", report.num_buckets],
      ["owned twice", duplicates.length ? duplicates.join("; ") : "none"],
      ["holes (no live owner)", report.unowned.length ? bucketSpec(report.unowned) : "none"],
      ["claim from any bucket", report.floating.length ? report.floating.join(", ") : "none"],
      ["orphans", report.orphans.length],
    ];
    $("bucket-summary").replaceChildren(
      ...summary.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    $("bucket-grid").replaceChildren(
      ...report.buckets.map((b) => {
        const status = b.duplicated ? "duplicated" : b.unowned ? "unowned" : b.owners.length ? "owned" : "floating";
        const owners = b.owners.length ? b.owners.join(", ") : report.floating.length ? "any-bucket nodes" : "nobody";
        return h(
          "li",
          { class: `bucket ${status}`, title: `bucket ${b.bucket}: ${b.executions} unfinished; owners: ${owners}` },
          h("span", { class: "bucket-number" }, b.bucket),
          h("span", { class: "bucket-count" }, b.executions),
        );
      }),
    );
    const orphanRows = report.orphans.map((e) =>
      h(
        "tr",
        {},
        h("td", {}, executionLink(e.id)),
        h("td", { class: "job" }, e.job),
        h("td", {}, stateBadge(e.state)),
        h("td", { class: "num" }, e.bucket),
        timeCell(e.due_at, true),
        timeCell(e.updated_at, true),
      ),
    );
    $("orphans").replaceChildren(...(orphanRows.length ? orphanRows : [emptyRow(6, "No orphans.")]));
  };
}

// The defaults a job definition holds in seconds.
const DURATION_DEFAULTS = ["timeout", "lease_ttl", "retry_base_delay", "retry_max_delay"];

// A job's defaults as one line: "max_attempts=5 timeout=30 s queue=reports" ("–": none set).
function defaultsText(defaults) {
  const parts = [];
  for (const [key, value] of Object.entries(defaults || {})) {
    if (value === null || value === undefined) continue;
    parts.push(`${key}=${DURATION_DEFAULTS.includes(key) ? formatSeconds(value) : value}`);
  }
  return parts.length ? parts.join(" ") : "–";
}

function inputNames(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : null;
  // By name, as the API's "inputs" (a stored schema keeps no order of its keys).
  return properties && !Array.isArray(properties) ? Object.keys(properties).sort() : [];
}

function jobLink(name) {
  return h("a", { href: `#/jobs/${encodeURIComponent(name)}`, class: "job-link" }, name);
}

function countCells(counts) {
  return STATES.map((s) => h("td", { class: "num", "data-state": s }, counts[s] ?? 0));
}

function countItems(counts) {
  return STATES.map((s) => h("li", {}, stateBadge(s), h("span", { class: "count", "data-state": s }, counts[s] ?? 0)));
}

// A job's live workers ("0, no live worker" when none) and its due executions waiting
// now, with how many of them no live worker serves.
function workersText(waiting) {
  if (!waiting) return "–";
  return waiting.workers ? String(waiting.workers) : "0, no live worker";
}

function dueText(waiting) {
  if (!waiting) return "–";
  return waiting.unserved ? `${waiting.due} (${waiting.unserved} unserved)` : String(waiting.due);
}

function waitingCells(waiting) {
  const warn = (bad) => (bad ? "num unserved-cell" : "num");
  return [
    h("td", { class: `workers ${warn(waiting && !waiting.workers)}` }, workersText(waiting)),
    h("td", { class: `due ${warn(waiting && waiting.unserved)}` }, dueText(waiting)),
  ];
}

async function loadJobs() {
  const list = await api("GET", `/jobs${query({ window: JOBS_WINDOW_SECONDS })}`);
  return () => {
    if (!changed("jobs", list)) return;
    $("jobs-window").textContent = formatSeconds(list.window_seconds);
    const rows = list.jobs.map((job) =>
      h(
        "tr",
        { "data-job": job.name },
        h("td", { class: "job" }, jobLink(job.name)),
        h("td", { class: "num latest" }, `${job.latest.version} (of ${job.versions.length})`),
        h("td", { class: "defaults" }, defaultsText(job.latest.defaults)),
        h("td", { class: "inputs" }, job.inputs.length ? job.inputs.join(", ") : "–"),
        h("td", { class: "nodes" }, job.nodes.length ? job.nodes.join(", ") : "–"),
        ...waitingCells(job.waiting),
        ...countCells(job.counts),
      ),
    );
    $("jobs").replaceChildren(
      ...(rows.length ? rows : [emptyRow(7 + STATES.length, "No job published yet: workers publish the jobs they run.")]),
    );
  };
}

async function loadJob(route) {
  const job = await api("GET", `${path("jobs", route.id)}${query({ window: JOBS_WINDOW_SECONDS })}`);
  return () => {
    if (!changed("job", job)) return;
    const latest = job.versions[job.versions.length - 1];
    $("job-name").textContent = job.name;
    $("job-window").textContent = formatSeconds(job.window_seconds);
    const fields = [
      ["latest", latest.version],
      ["versions", job.versions.map((v) => v.version).join(", ")],
      ["nodes", job.nodes.length ? job.nodes.join(", ") : "none live"],
      ["workers", workersText(job.waiting)],
      ["due", dueText(job.waiting)],
    ];
    $("job-fields").replaceChildren(
      ...fields.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
    );
    $("job-counts").replaceChildren(...countItems(job.counts));
    // The latest first: what a submit that names no version runs.
    const versions = [...job.versions].reverse().map((v) => {
      const nodes = v.served_by || [];
      const details = [
        ["digest", h("code", {}, v.digest)],
        ["published", h("span", { title: v.published_at || undefined }, formatTime(v.published_at))],
        ["source", `${v.source.kind} ${v.source.where}`.trim()],
        ["description", v.description || "–"],
        ["defaults", defaultsText(v.defaults)],
        ["inputs", inputNames(v.input_schema).join(", ") || "–"],
        ["nodes", nodes.length ? nodes.join(", ") : "none live"],
      ];
      return h(
        "section",
        { class: "job-version", "data-version": v.version },
        h("h3", {}, `Version ${v.version}`),
        h(
          "dl",
          { class: "fields" },
          ...details.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-field": name }, value)]),
        ),
        h(
          "div",
          { class: "schemas" },
          h("div", {}, h("h4", {}, "Input schema"), h("pre", { class: "input-schema" }, json(v.input_schema))),
          h("div", {}, h("h4", {}, "Output schema"), h("pre", { class: "output-schema" }, json(v.output_schema))),
        ),
      );
    });
    $("job-versions").replaceChildren(...versions);
  };
}

// -- queues and limits ----------------------------------------------------------------------

const present = (value) => value !== null && value !== undefined;

// A limit in a few words: "50/s (burst 5), 3 at once, per key" ("–": none).
function limitText(limit) {
  if (!limit) return "–";
  const parts = [];
  if (present(limit.rate)) parts.push(`${limit.rate} (burst ${limit.burst})`);
  if (present(limit.concurrency)) parts.push(`${limit.concurrency} at once`);
  if (limit.per_key) parts.push("per key");
  return parts.length ? parts.join(", ") : "–";
}

// A scope's throttled executions in the window: "12 (held 3.5 min)", or "0".
function throttledText(count) {
  return count ? `${count.count} (held ${formatSeconds(count.held_seconds)})` : "0";
}

function queueToggle(queue) {
  const where = path("queues", queue.name);
  return queue.paused
    ? actionButton("Resume", "claim from this queue again", () => api("POST", `${where}/resume`), "Queue resumed.")
    : actionButton("Pause", "claim nothing more from this queue until resumed (running executions finish)", () => api("POST", `${where}/pause`), "Queue paused.");
}

async function loadQueues() {
  const [limits, queues, throttled] = await Promise.all([
    api("GET", "/limits"),
    api("GET", "/queues"),
    api("GET", `/throttled${query({ window: THROTTLED_WINDOW_SECONDS })}`),
  ]);
  return () => {
    if (!changed("queues", [limits, queues, throttled])) return;
    for (const span of document.querySelectorAll(".throttled-window")) {
      span.textContent = formatSeconds(THROTTLED_WINDOW_SECONDS);
    }
    const held = new Map(throttled.map((t) => [t.scope, t]));
    // A queue that is only paused has no rate nor concurrency: the Queues table shows it.
    const limitRows = limits
      .filter((limit) => present(limit.rate) || present(limit.concurrency))
      .map((limit) =>
        h(
          "tr",
          { "data-scope": limit.scope },
          h("td", { class: "scope" }, limit.scope),
          h("td", { class: "rate" }, limit.rate ?? "–"),
          h("td", { class: "num burst" }, limit.burst ?? "–"),
          h("td", { class: "num concurrency" }, limit.concurrency ?? "–"),
          h("td", { class: "per-key" }, limit.per_key ? "yes" : "no"),
          h("td", { class: "source" }, limit.source),
          h("td", { class: "updated-by" }, limit.updated_by ?? "–"),
          timeCell(limit.updated_at, true),
          h("td", { class: "num throttled" }, throttledText(held.get(limit.scope))),
        ),
      );
    $("limits").replaceChildren(...(limitRows.length ? limitRows : [emptyRow(9, "No limits.")]));
    const queueRows = queues.map((queue) => {
      const counts = queue.counts || {};
      return h(
        "tr",
        { "data-queue": queue.name, class: queue.paused ? "paused" : undefined },
        h("td", { class: "queue" }, h("a", { href: `#/executions${query({ queue: queue.name })}`, class: "queue-link" }, queue.name)),
        h("td", { class: "status" }, h("span", { class: queue.paused ? "flag paused" : "flag active" }, queue.paused ? "paused" : "active")),
        h("td", { class: "paused-by" }, queue.paused_by ?? "–"),
        queue.paused ? timeCell(queue.paused_at, true) : h("td", {}, "–"),
        h("td", { class: "limit" }, limitText(queue.limit)),
        h("td", { class: "num waiting" }, (counts.SCHEDULED ?? 0) + (counts.RETRY_WAIT ?? 0)),
        h("td", { class: "num running" }, counts.RUNNING ?? 0),
        h("td", { class: "num throttled" }, throttledText(held.get(`queue:${queue.name}`))),
        h("td", {}, queueToggle(queue)),
      );
    });
    $("queues").replaceChildren(...(queueRows.length ? queueRows : [emptyRow(9, "No queues yet.")]));
    const throttledRows = throttled.map((t) =>
      h(
        "tr",
        { "data-scope": t.scope },
        h("td", { class: "scope" }, t.scope),
        h("td", { class: "num count" }, t.count),
        h("td", { class: "num held" }, formatSeconds(t.held_seconds)),
      ),
    );
    $("throttled").replaceChildren(
      ...(throttledRows.length ? throttledRows : [emptyRow(3, "Nothing was throttled.")]),
    );
  };
}

// -- service level -------------------------------------------------------------------------

// The last report and when it was read; kept while the view stays open (SLO_REFRESH_MS).
const slo = { report: null, readAt: 0 };

const percent = (share) => (present(share) ? `${(share * 100).toFixed(2)}%` : "–");

// A number of misses, often a fraction of one: "0.004", "-1.96", "1234.5".
function misses(count) {
  return Math.abs(count) >= 10 ? count.toFixed(1) : String(Number(count.toPrecision(3)));
}

function burnCell(burn) {
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

function verdictFlag(objective) {
  if (!present(objective.share)) return h("span", { class: "flag no-data" }, "no data");
  return objective.missed
    ? h("span", { class: "flag missed" }, "MISSED")
    : h("span", { class: "flag met" }, "MET");
}

// Rows of one figure per objective: misses by class, or exclusions by reason.
function breakdownRows(objectives, key, attribute) {
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

async function loadSlo(route) {
  // Read again when the view was just opened, else at most every SLO_REFRESH_MS.
  if (route.opened || !slo.report || Date.now() - slo.readAt >= SLO_REFRESH_MS) {
    slo.report = await api("GET", "/slo");
    slo.readAt = Date.now();
  }
  const report = slo.report;
  return () => {
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

const LOADERS = {
  executions: loadExecutions,
  execution: loadExecution,
  schedules: loadSchedules,
  "dead-letters": loadDeadLetters,
  jobs: loadJobs,
  job: loadJob,
  nodes: loadNodes,
  queues: loadQueues,
  slo: loadSlo,
};

// -- overview: counts and the lateness chart -----------------------------------------------

const samples = [];

async function loadStats() {
  const stats = await api("GET", `/stats${query({ window: CHART_WINDOW_SECONDS })}`);
  return () => {
    const late = stats.claim_lateness;
    samples.push({ at: Date.now(), p50: late.p50, p90: late.p90, p99: late.p99, count: late.count });
    if (samples.length > CHART_MAX_SAMPLES) samples.shift();
    $("counts").replaceChildren(
      ...STATES.map((s) => h("li", {}, stateBadge(s), h("span", { class: "count", "data-state": s }, stats.by_state[s] ?? 0))),
    );
    // Throttled claims (a limit or a paused queue held them) are not in the lateness.
    const throttled = (stats.throttled || []).reduce((sum, t) => sum + t.count, 0);
    // The window's other error classes, by the names the SLO view gives them.
    const errors = Object.entries(stats.errors || {})
      .filter(([name]) => name !== "throttled")
      .map(([name, count]) => `${name} ${count}`);
    $("figures").textContent =
      `due backlog ${stats.due_backlog} · claims in the last ${formatSeconds(stats.window_seconds)}: ` +
      `${late.count} (max ${formatSeconds(late.max)}) · throttled ${throttled} · ` +
      errors.join(" · ");
    renderUnserved(stats.unserved);
    drawChart();
  };
}

// The warning panel: due executions whose job (or pinned version) no live worker
// serves, and active schedules while no scheduler runs. Hidden when there are none.
function renderUnserved(unserved) {
  if (!changed("unserved", unserved ?? null)) return;
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const groups = unserved?.executions ?? [];
  // A long list would push every view off the screen: the first few, then a count.
  const items = groups.slice(0, UNSERVED_SHOWN).map((group) => {
    const pinned = group.version !== null && group.version !== undefined;
    return h(
      "li",
      { "data-job": group.job, "data-version": pinned ? group.version : undefined },
      // Its executions, not its catalogue page: a job nobody published has none.
      h("a", { href: `#/executions${query({ job: group.job })}`, class: "job-link" }, group.job),
      pinned ? ` version ${group.version}` : "",
      ": ",
      h("span", { class: "count" }, plural(group.count, "due execution", "due executions")),
      pinned ? ` pinned to version ${group.version}, which no live worker serves` : ", no live worker serves this job",
    );
  });
  if (groups.length > UNSERVED_SHOWN) {
    const rest = groups.slice(UNSERVED_SHOWN).reduce((sum, group) => sum + group.count, 0);
    const others = plural(groups.length - UNSERVED_SHOWN, "more job", "more jobs");
    items.push(h("li", { class: "more" }, `and ${plural(rest, "due execution", "due executions")} of ${others} (fencepost stats names them all)`));
  }
  if (unserved?.schedules) {
    items.push(
      h(
        "li",
        { "data-schedules": unserved.schedules },
        h("span", { class: "count" }, plural(unserved.schedules, "active schedule", "active schedules")),
        ", no scheduler running: none of them fires (run fencepost serve or fencepost worker --with-scheduler)",
      ),
    );
  }
  $("unserved-list").replaceChildren(...items);
  show($("unserved"), items.length > 0);
}

function drawChart() {
  const chart = $("chart");
  const width = 640;
  const height = 180;
  const left = 64;
  const right = 12;
  const top = 10;
  const bottom = 24;
  // Widest first, so where the percentiles coincide every colour still shows.
  const series = ["p99", "p90", "p50"];
  const values = samples.flatMap((s) => series.map((k) => s[k])).filter((v) => v !== null && v !== undefined);
  const nodes = [svg("rect", { x: left, y: top, width: width - left - right, height: height - top - bottom, class: "plot" })];
  if (!values.length) {
    nodes.push(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "no claims in the window yet"));
    chart.replaceChildren(...nodes);
    return;
  }
  // At least 10 ms: sub-millisecond noise should not look like a spike.
  const maxY = roundUp(Math.max(...values, 0.01));
  const first = samples[0].at;
  const span = Math.max(samples[samples.length - 1].at - first, 1);
  const x = (at) => left + ((at - first) / span) * (width - left - right);
  const y = (v) => top + (1 - v / maxY) * (height - top - bottom);
  for (const fraction of [0, 0.5, 1]) {
    const value = maxY * fraction;
    nodes.push(svg("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), class: "gridline" }));
    nodes.push(svg("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end", class: "axis" }, formatSeconds(value)));
  }
  const elapsed = (samples[samples.length - 1].at - first) / 1000;
  nodes.push(svg("text", { x: left, y: height - 6, class: "axis" }, "page opened"));
  nodes.push(svg("text", { x: width - right, y: height - 6, "text-anchor": "end", class: "axis" }, `+${formatSeconds(elapsed)}`));
  for (const key of series) {
    // A poll without claims leaves a gap: the line is split into runs of known values.
    let run = [];
    const flush = () => {
      if (run.length === 1) nodes.push(svg("circle", { cx: run[0][0], cy: run[0][1], r: 2, class: `series ${key}` }));
      if (run.length > 1) nodes.push(svg("polyline", { points: run.map((p) => p.join(",")).join(" "), class: `series ${key}` }));
      run = [];
    };
    for (const s of samples) {
      if (s[key] === null || s[key] === undefined) flush();
      else run.push([x(s.at).toFixed(1), y(s[key]).toFixed(1)]);
    }
    flush();
  }
  chart.replaceChildren(...nodes);
}

// -- the refresh loop ----------------------------------------------------------------------

let timer = null;
let generation = 0;
let shownRoute = null;
// The view the latest refresh was for: a refresh for another one opens a view.
let refreshedView = null;

// Opening another execution empties the detail view first: until its own data
// arrives, the previous execution's buttons must not be there to click.
function clearStaleDetail(route) {
  const key = `${route.name}/${route.id}`;
  if (key === shownRoute) return;
  shownRoute = key;
  if (route.name === "job") {
    rendered.delete("job");
    $("job-name").textContent = route.id;
    for (const id of ["job-fields", "job-counts", "job-versions"]) $(id).replaceChildren();
    return;
  }
  if (route.name !== "execution") return;
  rendered.delete("execution");
  $("execution-id").textContent = route.id;
  for (const id of ["execution-actions", "execution-fields", "attempts", "transitions"]) $(id).replaceChildren();
  for (const id of ["execution-inputs", "execution-result", "execution-progress"]) $(id).textContent = "";
}

// Load the current view and the stats together, then render both, unless a newer
// refresh started meanwhile (its data wins; a slow response never overwrites it).
async function refresh() {
  if (ui.signingIn) return;
  const mine = ++generation;
  const route = currentRoute();
  route.opened = route.name !== refreshedView;
  refreshedView = route.name;
  clearStaleDetail(route);
  showView(route.name);
  try {
    const renders = await Promise.all([LOADERS[route.name](route), loadStats()]);
    if (mine !== generation) return;
    for (const render of renders) render();
    updateRelativeTimes();
    clearRefreshBanner();
  } catch (error) {
    if (mine === generation) report(error, true);
  }
}

function schedule() {
  clearTimeout(timer);
  timer = $("live").checked ? setTimeout(tick, REFRESH_MS) : null;
}

async function tick() {
  await refresh();
  schedule();
}

function refreshNow() {
  clearTimeout(timer);
  tick();
}

// Go to a view; refresh even when the URL is already there (no hashchange fires then).
function navigate(hash) {
  if (location.hash === hash) refreshNow();
  else location.hash = hash;
}

// -- start ---------------------------------------------------------------------------------

function wire() {
  const select = $("filter-state");
  for (const s of STATES) select.append(h("option", { value: s }, s));
  $("jobs-head").append(...STATES.map((s) => h("th", { class: "num" }, s)));
  $("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = {
      state: $("filter-state").value,
      job: $("filter-job").value.trim(),
      queue: $("filter-queue").value.trim(),
      schedule: $("filter-schedule").value.trim(),
    };
    navigate(`#/executions${query(params)}`);
  });
  $("filter-reset").addEventListener("click", () => {
    shownFilters = null;
    navigate("#/executions");
  });
  wirePager("executions", true);
  wirePager("schedules", false);
  wirePager("dead-letters", false);
  $("chart-window").textContent = formatSeconds(CHART_WINDOW_SECONDS);
  $("live").addEventListener("change", () => ($("live").checked ? refreshNow() : clearTimeout(timer)));
  $("banner-close").addEventListener("click", () => show($("banner"), false));
  $("sign-in").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", refreshNow);
}

async function start() {
  wire();
  try {
    const session = await loadSession();
    if (session.auth && !session.name) {
      askToSignIn();
      return;
    }
  } catch (error) {
    report(error);
  }
  refreshNow();
}

start();
