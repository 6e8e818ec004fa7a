// The dashboard's shell: sign-in with an API key kept in this tab's sessionStorage only,
// the navigation, the client-side router under /dashboard, and the message area.

import {Api, ApiError, Socket} from "./api.js";
import {h, replace} from "./dom.js";
import {renderJob} from "./job.js";
import {renderJobs} from "./jobs.js";
import {renderKeys} from "./keys.js";
import {renderOverview} from "./overview.js";

const BASE = "/dashboard";
const KEY_ITEM = "queuelog.dashboard.key";
const root = document.getElementById("app");

let session = null;  // {api, socket, viewer, main, messages, dispose}

/** What a role may do on this page; the server checks the same again on every call. */
function abilities(role) {
  return {
    act: role === "ADMIN",  // retry, pause and resume, bulk retry, API keys
    cancel: role === "ADMIN" || role === "PRODUCER",  // a producer sees only its own jobs
    seesProducers: role === "ADMIN" || role === "VIEWER",
  };
}

function signInPage(problem) {
  const input = h("input", {
    type: "password", id: "key", name: "key", autocomplete: "off", required: true,
    spellcheck: "false",
  });
  const error = h("p", {class: "error", role: "alert"}, problem || "");
  const button = h("button", {type: "submit"}, "Sign in");
  const form = h("form", {class: "signin", onsubmit: async (event) => {
    event.preventDefault();
    button.disabled = true;
    // A key pasted as the header's value ("Bearer qlk_…") is the same key.
    const key = input.value.trim().replace(/^bearer\s+/i, "");
    try {
      await start(key);
    } catch (e) {
      replace(error, `That key was not accepted: ${e instanceof ApiError ? e.toString() : e}`);
      button.disabled = false;
      input.focus();
    }
  }},
  h("h1", {}, "queuelog"),
  h("p", {}, "Sign in with an API key. It is kept in this browser tab only, until you sign out."),
  h("label", {for: "key"}, "API key"), input, button, error);
  replace(root, h("main", {class: "signin-page"}, form));
  input.focus();
}

/** Check the key (viewer { role name }) and open the dashboard with it. */
async function start(key) {
  const refused = (reason) => signOut(`Signed out: the server refused the key (${reason}).`);
  const api = new Api(key, null);
  const {viewer} = await api.query("query Viewer { viewer { name role allowedTypes } }");
  sessionStorage.setItem(KEY_ITEM, key);
  api.onRefused = refused;
  const live = h("span", {class: "live", role: "status"}, "");
  const socket = new Socket(key, {
    onRefused: refused,
    onState: (state) => {
      live.dataset.state = state;
      replace(live, state === "live" ? "● live" : state === "connecting" ? "○ connecting" : `○ ${state}`);
    },
  });
  const messages = h("div", {class: "messages", "aria-live": "polite"});
  const main = h("main", {id: "main", tabindex: "-1"});
  session = {api, socket, viewer, main, messages, dispose: null, can: abilities(viewer.role)};
  const links = [["Overview", ""], ["Jobs", "/jobs"]];
  if (session.can.act) links.push(["API keys", "/keys"]);
  const nav = h("nav", {"aria-label": "Main"},
    links.map(([label, path]) => h("a", {href: BASE + path, "data-route": path}, label)));
  const header = h("header", {class: "top"},
    h("a", {class: "brand", href: BASE}, "queuelog"), nav,
    h("div", {class: "who"}, live,
      h("span", {class: "identity"}, viewer.name, " · ", h("span", {class: "role"}, viewer.role)),
      h("button", {type: "button", class: "secondary", id: "sign-out", onclick: () => signOut()},
        "Sign out")));
  replace(root, header, messages, main);
  route();
}

function signOut(reason) {
  sessionStorage.removeItem(KEY_ITEM);
  if (session) {
    if (session.dispose) session.dispose();
    session.socket.close();
    session = null;
  }
  history.replaceState(null, "", location.pathname + location.search);
  signInPage(reason);
}

/** Show a message; errors stay until dismissed, notices fade. */
export function notify(text, kind = "error") {
  if (!session) return;
  const item = h("div", {class: `message ${kind}`, role: kind === "error" ? "alert" : "status"},
    h("span", {}, text),
    h("button", {type: "button", class: "link", "aria-label": "Dismiss",
      onclick: () => item.remove()}, "×"));
  session.messages.append(item);
  if (kind !== "error") setTimeout(() => item.remove(), 6000);
}

/** Run an API call, reporting its failure in plain words; returns undefined on failure. */
async function attempt(what, action) {
  try {
    return await action();
  } catch (e) {
    notify(`${what} failed: ${e instanceof ApiError ? e.toString() : e.message || e}`);
    return undefined;
  }
}

export function navigate(path, replaceState = false) {
  const url = path.startsWith(BASE) ? path : BASE + path;
  if (replaceState) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

function route() {
  if (!session) return;
  if (session.dispose) session.dispose();
  session.dispose = null;
  const path = location.pathname.replace(/\/+$/, "").slice(BASE.length) || "";
  const params = new URLSearchParams(location.search);
  const ctx = {...session, navigate, notify, attempt, params};
  const view = h("div", {class: "view"});
  replace(session.main, view);
  replace(session.messages);  // messages belong to the page they were shown on
  let active = "";
  let match;
  if (path === "") {
    session.dispose = renderOverview(ctx, view);
  } else if (path === "/jobs") {
    active = "/jobs";
    session.dispose = renderJobs(ctx, view);
  } else if ((match = path.match(/^\/jobs\/([^/]+)$/))) {
    active = "/jobs";
    session.dispose = renderJob(ctx, view, decodeURIComponent(match[1]));
  } else if (path === "/keys" && session.can.act) {
    active = "/keys";
    session.dispose = renderKeys(ctx, view);
  } else {
    replace(view, h("h1", {}, "Not found"), h("p", {}, "This page does not exist."),
      h("a", {href: BASE}, "Back to the overview"));
  }
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.route === active) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

// Links inside the dashboard change the route without reloading the page.
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a[href]");
  if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey ||
      event.shiftKey || link.target) return;
  const url = new URL(link.href);
  if (url.origin !== location.origin || !(url.pathname === BASE || url.pathname.startsWith(BASE + "/"))) return;
  event.preventDefault();
  history.pushState(null, "", url.pathname + url.search);
  route();
  if (session) session.main.focus({preventScroll: true});
});
window.addEventListener("popstate", route);

const saved = sessionStorage.getItem(KEY_ITEM);
if (saved) {
  start(saved).catch((e) => signOut(`Signed out: ${e instanceof ApiError ? e.toString() : e}`));
} else {
  signInPage();
}
