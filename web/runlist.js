// The run list in the sidebar, fed by polling GET /runs.
import { api, enc } from "./api.js";
import { ago, basename, h, parseTime, plusMinus, shortId, stateBadge } from "./dom.js";
import { summaryText } from "./diffparse.js";
import { store } from "./store.js";

const RUNS_POLL_MS = 2000;

const runListEl = document.getElementById("run-list");
const runListStatus = document.getElementById("run-list-status");
const runItems = new Map();  // id -> li

export function runState(run) {
  return store.liveState.get(run.id) || run.state;
}

export function renderRunList() {
  const runs = [...store.runs.values()].sort((a, b) => {
    const ta = parseTime(a.created_at)?.getTime() ?? 0;
    const tb = parseTime(b.created_at)?.getTime() ?? 0;
    return tb - ta || String(b.id).localeCompare(String(a.id));
  });
  const selected = store.currentView && store.currentView.runId;
  const seen = new Set();
  let prev = null;
  for (const run of runs) {
    seen.add(run.id);
    let li = runItems.get(run.id);
    if (!li) {
      li = h("li", { class: "run-item", "data-testid": "run-item", "data-run-id": run.id });
      runItems.set(run.id, li);
    }
    const state = runState(run);
    const sig = JSON.stringify([run, state, selected === run.id, ago(run.created_at)]);
    if (li.dataset.sig !== sig) {
      li.dataset.sig = sig;
      li.dataset.state = state || "";
      const a = h("a", {
        href: `#/runs/${enc(run.id)}`,
        "aria-current": selected === run.id ? "page" : null,
        title: `${run.id}\n${run.workdir || ""}`,
      },
        h("span", { class: "run-item-top" },
          h("span", { class: "run-item-name" }, basename(run.workdir) || shortId(run.id)),
          stateBadge(state)),
        h("span", { class: "run-item-meta" },
          h("span", { class: "mono" }, shortId(run.id)),
          " · ", run.provider || "?",
          run.created_at ? ` · ${ago(run.created_at)}` : "",
          run.parent ? h("span", { class: "run-item-fork", "data-testid": "run-item-fork", title: `Forked from ${run.parent}` }, ` · fork of ${shortId(run.parent)}`) : null,
          run.diff && run.diff.files_changed ? [" · ", h("span", { class: "run-item-diff", "data-testid": "run-item-diff", title: summaryText(run.diff) },
            ...plusMinus(run.diff.additions, run.diff.deletions))] : null));
      li.replaceChildren(a);
      li.classList.toggle("selected", selected === run.id);
      li.classList.toggle("attention", state === "question" || state === "needs_input");
    }
    // Keep DOM order equal to the sorted order without rebuilding (keeps focus).
    const want = prev ? prev.nextSibling : runListEl.firstChild;
    if (want !== li) runListEl.insertBefore(li, want);
    prev = li;
  }
  for (const [id, li] of runItems) {
    if (!seen.has(id)) { li.remove(); runItems.delete(id); }
  }
  let empty = runListEl.querySelector(".run-list-empty");
  if (!runs.length && !empty) {
    runListEl.append(h("li", { class: "run-list-empty" }, "No runs yet. Start one above."));
  } else if (runs.length && empty) {
    empty.remove();
  }
}

const pollListeners = [];

/** Call fn(runs) after every successful GET /runs poll. */
export function onRunsPolled(fn) {
  pollListeners.push(fn);
}

async function pollRuns() {
  const res = await api("GET", "runs");
  if (res.ok && Array.isArray(res.data)) {
    const fresh = new Map(res.data.map((r) => [r.id, r]));
    store.runs = fresh;
    for (const id of store.liveState.keys()) {
      if (!store.currentView || store.currentView.runId !== id) store.liveState.delete(id);
    }
    runListStatus.textContent = "";
    runListStatus.classList.remove("error");
    renderRunList();
    if (store.currentView && store.currentView.onRunsUpdated) store.currentView.onRunsUpdated();
    for (const fn of pollListeners) fn(res.data);
  } else if (!res.ok) {
    runListStatus.textContent = res.message;
    runListStatus.classList.add("error");
  }
}

let refreshNow = () => {};

/** Poll GET /runs now (e.g. after starting or stopping a run). */
export function refreshRunsNow() {
  refreshNow();
}

/** Start polling GET /runs every RUNS_POLL_MS (and when the tab becomes visible). */
export function startRunPolling() {
  let timer = null;
  let inflight = false;
  let again = false;
  const tick = async () => {
    clearTimeout(timer);
    if (inflight) { again = true; return; }
    inflight = true;
    await pollRuns();
    inflight = false;
    if (again) { again = false; tick(); return; }
    timer = setTimeout(tick, RUNS_POLL_MS);
  };
  tick();
  document.addEventListener("visibilitychange", () => { if (!document.hidden) tick(); });
  refreshNow = () => tick();
}
