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

import { decode } from "./js/api.js";
import { $, h, show } from "./js/dom.js";
import { STATES, updateRelativeTimes } from "./js/format.js";
import { rendered, wirePager } from "./js/render.js";
import { askToSignIn, clearRefreshBanner, loadSession, report, signIn, signOut, ui } from "./js/session.js";
import { loadDeadLetters } from "./js/views/dead-letters.js";
import { clearExecution, loadExecution } from "./js/views/execution.js";
import { loadExecutions } from "./js/views/executions.js";
import { loadJob, loadJobs } from "./js/views/jobs.js";
import { loadNodes } from "./js/views/nodes.js";
import { loadHistory } from "./js/views/history.js";
import { loadStats } from "./js/views/overview.js";
import { loadQueues } from "./js/views/queues.js";
import { loadSchedule, loadSchedules } from "./js/views/schedules.js";
import { loadSlo } from "./js/views/slo.js";

const REFRESH_MS = 2500;

// "#/executions?job=x" -> {name: "executions", id: null, params}; "#/executions/<id>" -> detail.
function currentRoute() {
  const hash = location.hash.startsWith("#/") ? location.hash.slice(2) : "executions";
  const [pathPart, search = ""] = hash.split("?");
  const [name, id] = pathPart.split("/");
  const params = new URLSearchParams(search);
  if (name === "executions" && id) return { name: "execution", id: decode(id), params };
  if (name === "jobs" && id) return { name: "job", id: decode(id), params };
  if (name === "schedules" && id) return { name: "schedule", id: decode(id), params };
  if (["executions", "schedules", "dead-letters", "jobs", "nodes", "queues", "slo", "history"].includes(name)) return { name, id: null, params };
  return { name: "executions", id: null, params };
}

const VIEWS = ["executions", "execution", "schedules", "dead-letters", "jobs", "job", "nodes", "queues", "slo", "schedule", "history"];
// A detail view's tab is its list's.
const TABS = { execution: "executions", job: "jobs", schedule: "schedules" };

function showView(name) {
  for (const view of VIEWS) show($(`view-${view}`), view === name);
  const tab = TABS[name] || name;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.dataset.view === tab);
  }
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
  schedule: loadSchedule,
  history: loadHistory,
};


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
  if (route.name === "execution") clearExecution(route.id);
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
  // A hidden tab polls nothing: it refreshes at once when it is shown again.
  timer = $("live").checked && document.visibilityState !== "hidden" ? setTimeout(tick, REFRESH_MS) : null;
}

async function tick() {
  await refresh();
  schedule();
}

export function refreshNow() {
  clearTimeout(timer);
  tick();
}

// Go to a view; refresh even when the URL is already there (no hashchange fires then).
export function navigate(hash) {
  if (location.hash === hash) refreshNow();
  else location.hash = hash;
}

// -- start ---------------------------------------------------------------------------------

function wire() {
  $("jobs-head").append(...STATES.map((s) => h("th", { class: "num" }, s)));
  wirePager("schedules", false);
  $("live").addEventListener("change", () => ($("live").checked ? refreshNow() : clearTimeout(timer)));
  $("banner-close").addEventListener("click", () => show($("banner"), false));
  $("sign-in").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", refreshNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") clearTimeout(timer);
    else if ($("live").checked) refreshNow();
  });
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
