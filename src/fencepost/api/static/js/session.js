// The banner, notices, sign-in session and the operator's action button.

import { refreshNow } from "../app.js";
import { ApiError, api } from "./api.js";
import { $, h, show } from "./dom.js";

export const CONFIRM_MS = 4000; // how long a "Confirm …" button waits for its second click

// -- banner, notice, sign-in ---------------------------------------------------------------

export const ui = {
  session: null,
  bannerFromRefresh: false,
  signingIn: false,
};

export function banner(text, fromRefresh = false) {
  $("banner-text").textContent = text;
  ui.bannerFromRefresh = fromRefresh;
  show($("banner"), true);
}

export function clearRefreshBanner() {
  if (ui.bannerFromRefresh) {
    show($("banner"), false);
    ui.bannerFromRefresh = false;
  }
}

export let noticeTimer = null;
export function notice(text) {
  const box = $("notice");
  box.textContent = text;
  show(box, true);
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => show(box, false), 5000);
}

export function report(error, fromRefresh = false) {
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

export function askToSignIn() {
  ui.signingIn = true;
  if (ui.session) ui.session = { ...ui.session, name: null, scopes: [] };
  showWho();
  show($("sign-in"), true);
  show($("main"), false);
  $("token").focus();
}

export function canAct() {
  const s = ui.session;
  return !s || !s.auth || s.scopes.includes("admin");
}

export function showWho() {
  const s = ui.session;
  $("who").textContent = s && s.auth && s.name ? `signed in as ${s.name}` : "";
  show($("sign-out"), Boolean(s && s.auth && s.name));
}

export async function loadSession() {
  ui.session = await api("GET", "/session");
  showWho();
  return ui.session;
}

export async function signIn(event) {
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

export async function signOut() {
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
export function actionButton(label, title, run, done, confirm = false) {
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
