// The run list in the sidebar, fed by the run list's event stream (GET /runs/events)
// and older pages on request (GET /runs?limit&before).
import { api, enc } from "./api.js";
import { ViewStream } from "./eventstream.js";
import { ago, basename, h, parseTime, plusMinus, shortId, stateBadge } from "./dom.js";
import { summaryText } from "./diffparse.js";
import { store } from "./store.js";

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

/** Call fn(runs) after every change of the run list (its first snapshot included). */
export function onRunsPolled(fn) {
  pollListeners.push(fn);
}

/** How many runs the list asks for at a time (the newest first). */
const PAGE = 50;
/** Where the next older page starts (null: none older, or not known yet). */
let older = null;
/** Whether the operator loaded older pages (a snapshot's cursor then stays theirs). */
let olderLoaded = false;
const olderButton = h("button", { type: "button", class: "run-list-older", "data-testid": "run-list-older", hidden: true }, "Show older runs");
runListEl.after(olderButton);
olderButton.addEventListener("click", async () => {
  if (!older) return;
  olderButton.disabled = true;
  const res = await api("GET", `runs?limit=${PAGE}&before=${enc(older)}`);
  olderButton.disabled = false;
  if (!res.ok || !res.data) {
    runListStatus.textContent = res.message || "Cannot load older runs";
    runListStatus.classList.add("error");
    return;
  }
  olderLoaded = true;
  older = res.data.next;
  for (const r of res.data.runs) store.runs.set(r.id, r);
  changed();
});

function changed() {
  runListStatus.textContent = "";
  runListStatus.classList.remove("error");
  olderButton.hidden = !older;
  renderRunList();
  if (store.currentView && store.currentView.onRunsUpdated) store.currentView.onRunsUpdated();
  const runs = [...store.runs.values()];
  for (const fn of pollListeners) fn(runs);
}

/** A run-list event (GET /runs/events): the first page, or one run that changed. */
function onListEvent(ev) {
  if (ev.type === "snapshot" && Array.isArray(ev.runs)) {
    for (const r of ev.runs) store.runs.set(r.id, r);
    if (!olderLoaded) older = ev.next;
    for (const id of store.liveState.keys()) {
      if (!store.currentView || store.currentView.runId !== id) store.liveState.delete(id);
    }
    changed();
  } else if ((ev.type === "added" || ev.type === "changed") && ev.run && ev.run.id) {
    store.runs.set(ev.run.id, ev.run);
    changed();
  } else if (ev.type === "removed" && ev.run && ev.run.id) {
    store.runs.delete(ev.run.id);
    changed();
  }
}

/** The newest page again now (e.g. after starting or stopping a run). */
export async function refreshRunsNow() {
  const res = await api("GET", `runs?limit=${PAGE}`);
  if (res.ok && res.data && Array.isArray(res.data.runs)) {
    for (const r of res.data.runs) store.runs.set(r.id, r);
    if (!olderLoaded) older = res.data.next;
    changed();
  }
}

/**
 * Follow the run list: one event stream of its changes (nothing is asked while nothing
 * changes); the browser reconnects by itself and is sent the newest page again.
 */
export function startRunPolling() {
  new ViewStream("runs/events", {
    event: "runs",
    onView: onListEvent,
    onStatus: (status) => {
      if (status === "live") {
        runListStatus.textContent = "";
        runListStatus.classList.remove("error");
      } else if (status === "offline") {
        runListStatus.textContent = "Cannot reach lab; trying again…";
        runListStatus.classList.add("error");
      }
    },
    // A closed stream (lab restarted, a session ended): a plain request finds out which
    // (a 401 goes to the login page), then the stream opens again.
    onClosed: async () => { await api("GET", "runs?limit=1"); return true; },
  });
}
