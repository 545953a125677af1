// lab operator UI. Talks only to the HTTP API in docs/api.md (served by `lab serve`).
// No build step: plain ES modules in this folder, no dependencies. This module is the
// entry point: the home view, routing (`#/runs/<id>`, `#/runs/<id>/at/<seq>`, `#/runs/<id>/terminal`, `#/runs/<id>/diff`,
// `#/devices`, `#/usage`, `#/audit`, `#/rules`), start-up.
import { shareDeviceKey } from "./api.js";
import { DiffView } from "./diffview.js";
import { DevicesView } from "./devices.js";
import { h, stateBadge } from "./dom.js";
import { initNewRunForm, loadHosts, loadInfo, loadProviders } from "./newrun.js";
import { initNotify, setTitle } from "./notify.js";
import { initPush } from "./push.js";
import { renderRunList, startRunPolling } from "./runlist.js";
import { RunView } from "./runview.js";
import { initSearch } from "./search.js";
import { store } from "./store.js";
import { TerminalView } from "./terminal.js";
import { AuditView } from "./audit.js";
import { RulesView } from "./rules.js";
import { UsageView, startLimitWindows } from "./usage.js";

class HomeView {
  constructor(root) {
    root.replaceChildren(h("section", { class: "empty-state" },
      h("h1", {}, "No run selected"),
      h("p", {}, "Pick a run on the left, or start a new one."),
      h("p", { class: "muted" }, "Runs that need you show a ", stateBadge("question", { "data-testid": null }), " or ",
        stateBadge("needs_input", { "data-testid": null }), " badge.")));
  }
  destroy() {}
}

// ------------------------------------------------------------------ routing

const mainEl = document.getElementById("main");

function parseRoute() {
  const hash = location.hash.replace(/^#/, "");
  let m = hash.match(/^\/runs\/([^/]+)\/terminal\/?$/);
  if (m) return { name: "terminal", id: decodeURIComponent(m[1]) };
  m = hash.match(/^\/runs\/([^/]+)\/diff\/?$/);
  if (m) return { name: "diff", id: decodeURIComponent(m[1]) };
  if (/^\/devices\/?$/.test(hash)) return { name: "devices" };
  if (/^\/usage\/?$/.test(hash)) return { name: "usage" };
  m = hash.match(/^\/rules\/?(?:([^/?]+))?$/);
  if (m) return { name: "rules", id: m[1] ? decodeURIComponent(m[1]) : "" };
  m = hash.match(/^\/audit\/?(?:\?run=([^&]*))?$/);
  if (m) return { name: "audit", id: m[1] ? decodeURIComponent(m[1]) : "" };
  m = hash.match(/^\/runs\/([^/]+)\/at\/(\d+)\/?$/);
  if (m) return { name: "run", id: decodeURIComponent(m[1]), seq: Number(m[2]) };
  m = hash.match(/^\/runs\/([^/]+)\/?$/);
  if (m) return { name: "run", id: decodeURIComponent(m[1]) };
  return { name: "home" };
}

let lastRouteKey = null;
function route() {
  const r = parseRoute();
  const key = `${r.name}:${r.id || ""}:${r.seq ?? ""}`;
  if (key === lastRouteKey) return;
  lastRouteKey = key;
  if (store.currentView) store.currentView.destroy();
  setTitle("lab");
  document.body.dataset.route = r.name; // the phone layout shows either the run list or a run
  if (r.name === "run") store.currentView = new RunView(mainEl, r.id, { focusSeq: r.seq });
  else if (r.name === "terminal") store.currentView = new TerminalView(mainEl, r.id);
  else if (r.name === "diff") store.currentView = new DiffView(mainEl, r.id);
  else if (r.name === "devices") store.currentView = new DevicesView(mainEl);
  else if (r.name === "usage") store.currentView = new UsageView(mainEl);
  else if (r.name === "audit") store.currentView = new AuditView(mainEl, { run: r.id });
  else if (r.name === "rules") store.currentView = new RulesView(mainEl, { open: r.id });
  else store.currentView = new HomeView(mainEl);
  renderRunList();
}

function init() {
  initNewRunForm();
  initNotify();
  shareDeviceKey();
  initPush();
  loadProviders();
  loadHosts();
  loadInfo();
  initSearch();
  startLimitWindows();
  window.addEventListener("hashchange", route);
  route();
  startRunPolling();
}

init();
