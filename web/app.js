// lab operator UI. Talks only to the HTTP API in docs/api.md (served by `lab serve`).
// No build step: plain ES modules, no dependencies.
import { renderMarkdown } from "./markdown.js";

const RUNS_POLL_MS = 2000;
const TERMINAL_POLL_MS = 1000;
const ANSWER_STALE_MS = 20000;
const STATES = ["starting", "working", "idle", "question", "needs_input", "ended"];
// The 409 codes of POST /runs/{id}/messages that mean "the composer is locked".
const LOCK_CODES = ["dialog_pending", "agent_waiting", "tool_pending", "prompt_pending"];

// ------------------------------------------------------------------ helpers

/** Create an element. attrs: plain attributes, plus on* handlers, dataset via data-*. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "html") el.innerHTML = v; // only ever given renderMarkdown() output
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let uidCounter = 0;
const uid = (p) => `${p}-${++uidCounter}`;

const enc = encodeURIComponent;

/** Call the API. Never throws: returns {ok, status, data} or {ok:false, status, error, message}. */
async function api(method, path, body) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    return { ok: false, status: 0, error: "network", message: `Cannot reach lab: ${e.message}` };
  }
  // A session that ended (token rotated, lab restarted): back to the login page.
  if (res.status === 401) { location.reload(); return { ok: false, status: 401, error: "unauthorized", message: "Log in again." }; }
  const text = await res.text().catch(() => "");
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (res.ok) return { ok: true, status: res.status, data };
  return {
    ok: false,
    status: res.status,
    error: (data && data.error) || `http_${res.status}`,
    message: (data && data.message) || text.trim().slice(0, 300) || `HTTP ${res.status} ${res.statusText}`,
  };
}

/** Quote a word for a POSIX shell only when it needs it. */
function shq(s) {
  s = String(s);
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function attachCommand(run) {
  if (!run || !run.tmux_target) return null;
  const sock = run.tmux_socket ? `-S ${shq(run.tmux_socket)} ` : "";
  return `tmux ${sock}attach -t ${shq(run.tmux_target)}`;
}

function parseTime(t) {
  if (t === null || t === undefined || t === "") return null;
  if (typeof t === "number") return new Date(t < 1e12 ? t * 1000 : t);
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? null : d;
}

function ago(t) {
  const d = parseTime(t);
  if (!d) return "";
  const s = Math.max(0, (Date.now() - d.getTime()) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return d.toLocaleDateString();
}

function fullTime(t) {
  const d = parseTime(t);
  return d ? d.toLocaleString() : "";
}

function basename(p) {
  const parts = String(p || "").split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : String(p || "");
}

function shortId(id) {
  id = String(id || "");
  return id.length > 12 ? id.slice(0, 8) : id;
}

/** Resolve a deep link; only http(s) URLs are ever turned into links. */
function safeLink(url) {
  if (!url || typeof url !== "string") return null;
  let u;
  try { u = new URL(url, location.href); } catch { return null; }
  if (u.protocol !== "http:" && u.protocol !== "https:") return null;
  const internal = u.origin === location.origin;
  return { href: internal ? u.pathname + u.search + u.hash : u.href, internal, host: u.host };
}

function stateBadge(state, attrs = {}) {
  const s = STATES.includes(state) ? state : "unknown";
  return h("span", { class: `badge state-${s}`, "data-testid": "state-badge", "data-state": state || "", ...attrs },
    h("span", { class: "badge-dot", "aria-hidden": "true" }), state || "…");
}

function setBadge(el, state) {
  const s = STATES.includes(state) ? state : "unknown";
  el.className = `badge state-${s}`;
  el.dataset.state = state || "";
  el.replaceChildren(h("span", { class: "badge-dot", "aria-hidden": "true" }), state || "…");
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h("textarea", { class: "offscreen", readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    ta.remove();
    return ok;
  }
}

/** The attach command with a copy button. */
function attachBox(cmd, { compact = false } = {}) {
  if (!cmd) return null;
  const status = h("span", { class: "copy-status", role: "status" });
  const btn = h("button", {
    type: "button", class: "copy", "data-testid": "copy-attach", "aria-label": "Copy attach command",
    onclick: async () => {
      const ok = await copyText(cmd);
      status.textContent = ok ? "Copied" : "Copy failed — select the text";
      setTimeout(() => { status.textContent = ""; }, 1800);
    },
  }, "Copy");
  return h("div", { class: `attach${compact ? " compact" : ""}` },
    h("span", { class: "attach-label" }, "Attach:"),
    h("code", { class: "attach-cmd", "data-testid": "attach-command" }, cmd),
    btn, status);
}

// ------------------------------------------------------------------ global state

const store = {
  runs: new Map(),          // id -> run object from GET /runs
  providers: [],
  liveState: new Map(),     // id -> state from the selected run's SSE (fresher than the poll)
};

let currentView = null;     // RunView | TerminalView | HomeView

// ------------------------------------------------------------------ run list

const runListEl = document.getElementById("run-list");
const runListStatus = document.getElementById("run-list-status");
const runItems = new Map();  // id -> li

function runState(run) {
  return store.liveState.get(run.id) || run.state;
}

function renderRunList() {
  const runs = [...store.runs.values()].sort((a, b) => {
    const ta = parseTime(a.created_at)?.getTime() ?? 0;
    const tb = parseTime(b.created_at)?.getTime() ?? 0;
    return tb - ta || String(b.id).localeCompare(String(a.id));
  });
  const selected = currentView && currentView.runId;
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
          run.created_at ? ` · ${ago(run.created_at)}` : ""));
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

async function pollRuns() {
  const res = await api("GET", "runs");
  if (res.ok && Array.isArray(res.data)) {
    const fresh = new Map(res.data.map((r) => [r.id, r]));
    store.runs = fresh;
    for (const id of store.liveState.keys()) {
      if (!currentView || currentView.runId !== id) store.liveState.delete(id);
    }
    runListStatus.textContent = "";
    runListStatus.classList.remove("error");
    renderRunList();
    if (currentView && currentView.onRunsUpdated) currentView.onRunsUpdated();
    if (!res.data.length && !newRunDetails.open && !newRunDetails.dataset.touched) newRunDetails.open = true;
  } else if (!res.ok) {
    runListStatus.textContent = res.message;
    runListStatus.classList.add("error");
  }
}

function startRunPolling() {
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
  return () => tick();
}

// ------------------------------------------------------------------ new run form

const newRunDetails = document.getElementById("new-run");
const newRunForm = document.getElementById("new-run-form");
const providerSelect = document.getElementById("nr-provider");

newRunDetails.addEventListener("toggle", () => { newRunDetails.dataset.touched = "1"; });

async function loadProviders() {
  const res = await api("GET", "providers");
  providerSelect.replaceChildren();
  if (!res.ok || !Array.isArray(res.data)) {
    providerSelect.append(h("option", { value: "" }, "(providers unavailable)"));
    showFormError(res.ok ? "Unexpected /providers response" : res.message);
    return;
  }
  store.providers = res.data;
  if (!res.data.length) providerSelect.append(h("option", { value: "" }, "(no providers loaded)"));
  for (const p of res.data) {
    const label = `${p.name}${p.version ? ` ${p.version}` : ""}${p.dialog_hooker ? "" : " (no live dialogs)"}`;
    providerSelect.append(h("option", { value: p.name }, label));
  }
  const remembered = localStorage.getItem("lab.provider");
  if (remembered && res.data.some((p) => p.name === remembered)) providerSelect.value = remembered;
  else if (res.data.some((p) => p.name === "claude-code")) providerSelect.value = "claude-code";
}

function showFormError(msg) {
  const el = newRunForm.querySelector(".form-error");
  el.textContent = msg || "";
  el.hidden = !msg;
}

function initNewRunForm() {
  const workdir = newRunForm.elements.workdir;
  workdir.value = localStorage.getItem("lab.workdir") || "";
  newRunForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    showFormError("");
    const f = newRunForm.elements;
    const provider = f.provider.value;
    const wd = f.workdir.value.trim();
    if (!provider) return showFormError("Choose a provider.");
    if (!wd.startsWith("/")) { f.workdir.focus(); return showFormError("The working directory must be an absolute path."); }
    const body = { provider, workdir: wd, prompt: f.prompt.value };
    if (f.permission_mode.value && f.permission_mode.value !== "default") body.permission_mode = f.permission_mode.value;
    const submit = newRunForm.querySelector("button[type=submit]");
    submit.disabled = true;
    submit.textContent = "Starting…";
    const res = await api("POST", "runs", body);
    submit.disabled = false;
    submit.textContent = "Start run";
    if (!res.ok) return showFormError(res.message);
    localStorage.setItem("lab.workdir", wd);
    localStorage.setItem("lab.provider", provider);
    f.prompt.value = "";
    newRunDetails.open = false;
    const run = res.data;
    if (run && run.id) {
      store.runs.set(run.id, run);
      renderRunList();
      location.hash = `#/runs/${enc(run.id)}`;
    }
    refreshRunsNow();
  });
  // Ctrl/Cmd+Enter in the prompt starts the run.
  newRunForm.elements.prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); newRunForm.requestSubmit(); }
  });
}

// ------------------------------------------------------------------ messages

function prettyMaybeJson(text) {
  const t = String(text ?? "");
  const s = t.trim();
  if (!(s.startsWith("{") || s.startsWith("["))) return { text: t, obj: null };
  try {
    const obj = JSON.parse(s);
    return { text: JSON.stringify(obj, null, 2), obj };
  } catch {
    return { text: t, obj: null };
  }
}

function firstLine(text, max = 100) {
  const line = String(text ?? "").split("\n").find((l) => l.trim()) || "";
  const t = line.trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function toolPreview(obj, text) {
  if (obj && typeof obj === "object" && !Array.isArray(obj)) {
    for (const k of ["command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "skill"]) {
      if (typeof obj[k] === "string" && obj[k].trim()) return firstLine(obj[k]);
    }
    if (Array.isArray(obj.questions) && obj.questions[0]?.question) return firstLine(obj.questions[0].question);
    return "";
  }
  return firstLine(text);
}

const MAX_PRE = 60000;
function preBlock(text, cls = "") {
  const t = String(text ?? "");
  const pre = h("pre", { class: `tool-body ${cls}` }, t.length > MAX_PRE ? t.slice(0, MAX_PRE) : t);
  if (t.length <= MAX_PRE) return pre;
  const more = h("button", {
    type: "button", class: "link-button",
    onclick: () => { pre.textContent = t; more.remove(); },
  }, `Show all ${t.length.toLocaleString()} characters`);
  return h("div", {}, pre, more);
}

const ROLE_LABEL = { user: "You", assistant: "Claude", system: "System", tool: "Tool" };

function renderMessage(m, toolNames) {
  const role = String(m.role || "");
  const kind = String(m.kind || "");
  const attrs = {
    class: `msg role-${role.replace(/\W/g, "")} kind-${kind.replace(/\W/g, "")}`,
    "data-testid": "message",
    "data-role": role,
    "data-kind": kind,
    "data-seq": m.seq,
    title: m.timestamp ? fullTime(m.timestamp) : null,
  };

  if (kind === "tool_use") {
    const { text, obj } = prettyMaybeJson(m.text);
    const name = m.tool_name || "tool";
    // The provider's summary often starts with the tool's name, which the row shows.
    const summary = String(m.text ?? "");
    const stripped = summary.startsWith(`${name}: `) ? summary.slice(name.length + 2) : summary;
    const fromInput = m.input && typeof m.input === "object" ? toolPreview(m.input, "") : "";
    const preview = fromInput || (obj ? toolPreview(obj, m.text) : firstLine(stripped));
    const detail = m.input !== undefined ? JSON.stringify(m.input, null, 2) : text;
    return h("article", attrs,
      h("details", { class: "tool" },
        h("summary", {},
          h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
          h("span", { class: "tool-name", "data-testid": "tool-name" }, name),
          h("span", { class: "tool-preview" }, preview)),
        preBlock(detail)));
  }

  if (kind === "tool_result") {
    const name = m.tool_name || (m.tool_use_id && toolNames.get(m.tool_use_id)) || "tool";
    const body = String(m.text ?? "");
    const lines = body ? body.split("\n").length : 0;
    return h("article", attrs,
      h("details", { class: "tool result" },
        h("summary", {},
          h("span", { class: "tool-icon", "aria-hidden": "true" }, "↳"),
          h("span", { class: "tool-name", "data-testid": "tool-name" }, name),
          h("span", { class: "tool-preview" }, body ? `${firstLine(body, 80)}${lines > 1 ? ` (${lines} lines)` : ""}` : "(empty result)")),
        preBlock(body)));
  }

  if (kind === "thinking" || kind === "redacted_thinking") {
    return h("article", attrs,
      h("details", { class: "thinking" },
        h("summary", {}, h("span", { class: "tool-icon", "aria-hidden": "true" }, "…"), "Thinking"),
        h("div", { class: "md", html: renderMarkdown(m.text) })));
  }

  if (role === "system") {
    return h("article", attrs, h("div", { class: "sys" }, m.text ?? ""));
  }

  if (kind === "text" || kind === "") {
    return h("article", attrs,
      h("div", { class: "who" }, ROLE_LABEL[role] || role),
      h("div", { class: "md bubble", html: renderMarkdown(m.text) }));
  }

  // Unknown kinds: shown plainly, collapsed when long.
  const text = String(m.text ?? "");
  if (text.length > 200 || text.includes("\n")) {
    return h("article", attrs,
      h("details", { class: "tool other" },
        h("summary", {}, h("span", { class: "tool-name" }, kind), h("span", { class: "tool-preview" }, firstLine(text))),
        preBlock(text)));
  }
  return h("article", attrs, h("div", { class: "sys" }, h("span", { class: "kind-tag" }, kind), " ", text));
}

// ------------------------------------------------------------------ event stream

/**
 * EventSource wrapper. The browser reconnects by itself (sending Last-Event-ID);
 * if the source gets CLOSED (HTTP error), we reopen it with backoff.
 */
class ViewStream {
  constructor(url, { onView, onStatus, onClosed }) {
    this.url = url;
    this.onView = onView;
    this.onStatus = onStatus;
    this.onClosed = onClosed;
    this.backoff = 1000;
    this.timer = null;
    this.stopped = false;
    this.open();
  }

  open() {
    if (this.stopped) return;
    this.onStatus("connecting");
    const es = new EventSource(this.url);
    this.es = es;
    es.addEventListener("open", () => { this.onStatus("live"); });
    es.addEventListener("view", (e) => {
      this.backoff = 1000;
      this.onStatus("live");
      let data;
      try { data = JSON.parse(e.data); } catch { return; }
      this.onView(data);
    });
    es.addEventListener("error", () => {
      if (this.stopped) return;
      if (es.readyState === EventSource.CLOSED) {
        this.onStatus("offline");
        clearTimeout(this.timer);
        this.timer = setTimeout(async () => {
          if (this.stopped) return;
          const keepGoing = this.onClosed ? await this.onClosed() : true;
          if (keepGoing) this.open();
        }, this.backoff);
        this.backoff = Math.min(this.backoff * 2, 15000);
      } else {
        this.onStatus("reconnecting");
      }
    });
  }

  close() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
  }
}

// ------------------------------------------------------------------ dialog cards

function dialogHint(view, runId, run) {
  const d = view.pending_dialog;
  const deep = safeLink((d && d.deep_link) || (view.blocked && view.blocked.deep_link));
  const terminalHref = `#/runs/${enc(runId)}/terminal`;
  const links = [];
  if (deep) {
    const sameAsTerminal = deep.internal && deep.href.endsWith(terminalHref);
    links.push(h("a", {
      href: deep.href, class: "deep-link", "data-testid": "deep-link",
      target: deep.internal ? null : "_blank", rel: deep.internal ? null : "noopener noreferrer",
    }, deep.internal ? (sameAsTerminal ? "Open the terminal view" : "Open") : `Open on ${deep.host} ↗`));
    if (!sameAsTerminal) links.push(h("a", { href: terminalHref, class: "terminal-link" }, "Terminal view"));
  } else {
    links.push(h("a", { href: terminalHref, class: "terminal-link" }, "Open the terminal view"));
  }
  return h("div", { class: "card-foot" },
    h("p", { class: "hint", "data-testid": "dialog-hint" }, "Answer this in the terminal"),
    h("div", { class: "card-links" }, ...links),
    attachBox(attachCommand(run), { compact: true }));
}

function questionBlock(q, idx, total, labelId) {
  return [
    h("div", { class: "q-head" },
      total > 1 ? h("span", { class: "q-num" }, `${idx + 1}/${total}`) : null,
      q.header ? h("span", { class: "chip" }, q.header) : null,
      q.multi_select ? h("span", { class: "chip subtle" }, "multiple choice") : null),
    h("h3", { class: "q-text", id: labelId }, q.question || "(no question text)"),
  ];
}

/** The card for a single answerable question: native buttons, Other, status. */
class QuestionCard {
  constructor(dialog, { onAnswer }) {
    this.dialog = dialog;
    const q = dialog.questions[0];
    this.multi = !!q.multi_select;
    const titleId = uid("q");
    const statusId = uid("st");
    this.selected = new Set();

    this.status = h("p", { class: "dialog-status", "data-testid": "dialog-status", id: statusId, role: "status", "aria-live": "polite" });
    const optionsGroup = h("div", { class: "options", role: "group", "aria-label": "Options" });
    this.buttons = (q.options || []).map((opt, i) => {
      const labelId = uid("ol");
      const descId = uid("od");
      const btn = h("button", {
        type: "button", class: "option", "data-testid": "dialog-option", "data-index": i,
        "aria-labelledby": labelId, "aria-describedby": opt.description ? descId : null,
        "aria-pressed": this.multi ? "false" : null,
        tabindex: i === 0 ? "0" : "-1",
        onclick: () => {
          if (this.busy) return;
          if (this.multi) {
            if (this.selected.has(i)) this.selected.delete(i); else this.selected.add(i);
            btn.setAttribute("aria-pressed", String(this.selected.has(i)));
            this.multiSubmit.disabled = this.selected.size === 0;
          } else {
            onAnswer([{ option: i }], [i]);
          }
        },
        onfocus: () => this.setRoving(i),
      },
        h("span", { class: "opt-key", "aria-hidden": "true" }, this.multi ? "" : String(i + 1)),
        h("span", { class: "opt-text" },
          h("span", { class: "opt-label", id: labelId }, opt.label || `Option ${i + 1}`),
          opt.description ? h("span", { class: "opt-desc", id: descId }, opt.description) : null));
      optionsGroup.append(btn);
      return btn;
    });
    optionsGroup.addEventListener("keydown", (e) => this.onKey(e));

    const otherId = uid("other");
    this.otherInput = h("input", {
      id: otherId, type: "text", class: "other-input", "data-testid": "dialog-other-input",
      autocomplete: "off", placeholder: "Type your own answer",
      onkeydown: (e) => { if (e.key === "Enter" && !e.isComposing) { e.preventDefault(); this.submitOther(onAnswer); } },
    });
    this.otherSubmit = h("button", {
      type: "button", class: "secondary", "data-testid": "dialog-other-submit",
      onclick: () => this.submitOther(onAnswer),
    }, "Send");
    this.multiSubmit = this.multi ? h("button", {
      type: "button", class: "primary", "data-testid": "dialog-multi-submit", disabled: true,
      onclick: () => {
        if (this.busy || !this.selected.size) return;
        const picks = [...this.selected].sort((a, b) => a - b);
        onAnswer([{ options: picks }], picks);
      },
    }, "Submit selection") : null;

    this.el = h("section", {
      class: "dialog-card kind-question", role: "group", "aria-labelledby": titleId, "aria-describedby": statusId,
      "data-testid": "dialog-card", "data-kind": "question", "data-tool-id": dialog.tool_id,
    },
      h("div", { class: "card-title" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), "Claude is asking"),
      ...questionBlock(q, 0, 1, titleId),
      optionsGroup,
      this.multiSubmit ? h("div", { class: "multi-actions" }, this.multiSubmit) : null,
      h("div", { class: "other" },
        h("label", { for: otherId }, "Other"),
        this.otherInput, this.otherSubmit),
      this.status);
  }

  setRoving(i) {
    this.buttons.forEach((b, k) => { b.tabIndex = k === i ? 0 : -1; });
  }

  onKey(e) {
    const n = this.buttons.length;
    const i = this.buttons.indexOf(document.activeElement);
    if (i < 0 || !n) return;
    let j;
    switch (e.key) {
      case "ArrowDown": case "ArrowRight": j = (i + 1) % n; break;
      case "ArrowUp": case "ArrowLeft": j = (i - 1 + n) % n; break;
      case "Home": j = 0; break;
      case "End": j = n - 1; break;
      default: return;
    }
    e.preventDefault();
    this.setRoving(j);
    this.buttons[j].focus();
  }

  submitOther(onAnswer) {
    if (this.busy) return;
    const text = this.otherInput.value.trim();
    if (!text) {
      this.setStatus("Type an answer first.", "error");
      this.otherInput.focus();
      return;
    }
    onAnswer([{ other: text }], []);
  }

  focusFirst() {
    const b = this.buttons.find((x) => x.tabIndex === 0) || this.buttons[0];
    if (b && !b.disabled) b.focus();
  }

  setBusy(busy, chosen = []) {
    this.busy = busy;
    this.buttons.forEach((b, i) => {
      b.disabled = busy;
      b.classList.toggle("chosen", busy && chosen.includes(i));
    });
    this.otherInput.disabled = busy;
    this.otherSubmit.disabled = busy;
    if (this.multiSubmit) this.multiSubmit.disabled = busy || this.selected.size === 0;
    this.el.classList.toggle("busy", busy);
    this.el.setAttribute("aria-busy", String(busy));
  }

  setStatus(text, tone = "") {
    this.status.textContent = text || "";
    this.status.className = `dialog-status${tone ? ` ${tone}` : ""}`;
  }
}

/** Read-only cards: several questions, a plan, or the generic needs-input card. */
function readOnlyCard(view, runId, run) {
  const d = view.pending_dialog;
  const titleId = uid("ct");
  const status = h("p", { class: "dialog-status", "data-testid": "dialog-status", role: "status", "aria-live": "polite" });

  if (d && d.kind === "plan") {
    const el = h("section", {
      class: "dialog-card kind-plan", role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": "plan", "data-tool-id": d.tool_id,
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "▤"),
        "Claude has a plan and is waiting for approval"),
      h("div", { class: "plan md", "data-testid": "dialog-plan", tabindex: "0", "aria-label": "Plan",
        html: renderMarkdown(d.plan || "_(The plan text is not available.)_") }),
      dialogHint(view, runId, run),
      status);
    return { el, status };
  }

  if (d) {
    const qs = Array.isArray(d.questions) ? d.questions : [];
    const blocks = qs.map((q, i) => {
      const qid = uid("rq");
      return h("div", { class: "ro-question", role: "group", "aria-labelledby": qid },
        ...questionBlock(q, i, qs.length, qid),
        h("ul", { class: "ro-options" },
          ...(q.options || []).map((o, k) => h("li", { "data-testid": "dialog-readonly-option", "data-index": k },
            h("span", { class: "opt-label" }, o.label),
            o.description ? h("span", { class: "opt-desc" }, o.description) : null))));
    });
    const title = qs.length > 1 ? `Claude is asking ${qs.length} questions` : "Claude is asking";
    const el = h("section", {
      class: "dialog-card kind-question readonly", role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": "question", "data-tool-id": d.tool_id, "data-answerable": "false",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), title),
      ...blocks,
      dialogHint(view, runId, run),
      status);
    return { el, status };
  }

  // Generic: question/needs_input with no structured dialog.
  const b = view.blocked || {};
  const el = h("section", {
    class: "dialog-card kind-generic", role: "region", "aria-labelledby": titleId,
    "data-testid": "dialog-card", "data-kind": "generic",
  },
    h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "!"),
      "Claude needs input — open the terminal"),
    b.message || b.notification_type ? h("p", { class: "blocked" },
      b.notification_type ? h("span", { class: "chip", "data-testid": "blocked-type" }, b.notification_type) : null,
      b.message ? h("span", { "data-testid": "blocked-message" }, b.message) : null) : null,
    dialogHint(view, runId, run),
    status);
  return { el, status };
}

// ------------------------------------------------------------------ run view

const CONN_LABEL = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", offline: "offline — retrying" };

class RunView {
  constructor(root, runId) {
    this.root = root;
    this.runId = runId;
    this.messages = new Map();    // seq -> message
    this.maxSeq = null;
    this.toolNames = new Map();   // tool_use_id -> tool_name
    this.view = { state: null, pending_dialog: null, blocked: null };
    this.cardKey = null;
    this.card = null;
    this.notice = null;           // {text, key}
    this.answering = null;        // {toolId, phase, chosen}

    this.build();
    this.loadRun();
    this.stream = new ViewStream(`runs/${enc(runId)}/events`, {
      onView: (v) => this.applyView(v),
      onStatus: (s) => this.setConn(s),
      onClosed: () => this.checkExists(),
    });
  }

  get run() { return store.runs.get(this.runId) || this.runDetail || null; }

  build() {
    this.badge = stateBadge(null, { "aria-live": "polite", "aria-atomic": "true", id: "run-state" });
    this.conn = h("span", { class: "conn", "data-testid": "connection-status", role: "status" }, "connecting…");
    this.titleEl = h("h1", { class: "run-title" }, shortId(this.runId));
    this.metaEl = h("div", { class: "run-meta" });
    this.attachSlot = h("div", { class: "attach-slot" });
    this.stopBtn = h("button", {
      type: "button", class: "danger", "data-testid": "stop-button",
      onclick: () => this.stop(),
    }, "Stop");
    this.headerError = h("p", { class: "header-error", role: "alert", hidden: true });

    this.chat = h("div", {
      class: "chat", "data-testid": "chat", role: "log", "aria-live": "off", "aria-label": "Transcript", tabindex: "0",
    });
    this.emptyNote = h("p", { class: "chat-empty" }, "Waiting for the transcript…");
    this.chat.append(this.emptyNote);
    // Keep the transcript pinned to the bottom while the operator is there,
    // including when the dock (card/composer) grows or shrinks.
    this.stick = true;
    this.chat.addEventListener("scroll", () => {
      this.stick = this.chat.scrollHeight - this.chat.scrollTop - this.chat.clientHeight < 40;
    }, { passive: true });
    if (typeof ResizeObserver === "function") {
      this.resizeObs = new ResizeObserver(() => { if (this.stick) this.chat.scrollTop = this.chat.scrollHeight; });
      this.resizeObs.observe(this.chat);
    }

    this.dialogArea = h("div", { class: "dialog-area", "data-testid": "dialog-area" });

    const inputId = uid("composer");
    this.input = h("textarea", {
      id: inputId, class: "composer-input", "data-testid": "composer-input", rows: "2",
      placeholder: "Message Claude — Enter to send, Shift+Enter for a new line",
      onkeydown: (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
          e.preventDefault();
          this.send();
        }
      },
      oninput: () => this.autosize(),
    });
    this.sendBtn = h("button", { type: "submit", class: "primary", "data-testid": "composer-send" }, "Send");
    this.lockReason = h("p", { class: "lock-reason", "data-testid": "composer-lock-reason", id: uid("lock"), hidden: true });
    this.composerError = h("p", { class: "composer-error", "data-testid": "composer-error", role: "alert", hidden: true });
    this.composer = h("form", {
      class: "composer", "data-testid": "composer", "aria-label": "Message composer",
      onsubmit: (e) => { e.preventDefault(); this.send(); },
    },
      h("label", { for: inputId, class: "visually-hidden" }, "Message to the agent"),
      h("div", { class: "composer-row" }, this.input, this.sendBtn),
      this.lockReason, this.composerError);

    this.root.replaceChildren(
      h("section", { class: "run-view", "data-testid": "run-view", "data-run-id": this.runId },
        h("header", { class: "run-header" },
          h("div", { class: "run-header-top" },
            this.titleEl, this.badge, this.conn,
            h("span", { class: "spacer" }),
            h("a", { href: `#/runs/${enc(this.runId)}/terminal`, class: "button-link", "data-testid": "terminal-link" }, "Terminal"),
            this.stopBtn),
          this.metaEl,
          this.attachSlot,
          this.headerError),
        this.chat,
        h("div", { class: "dock" }, this.dialogArea, this.composer)));
    this.renderHeader();
    this.updateComposer();
  }

  async loadRun() {
    const res = await api("GET", `runs/${enc(this.runId)}`);
    if (this.destroyed) return;
    if (res.ok && res.data) {
      this.runDetail = res.data;
      if (!store.runs.has(this.runId)) store.runs.set(this.runId, res.data);
      this.renderHeader();
      this.renderCard();
      renderRunList();
    } else if (res.status === 404) {
      this.showNotFound(res.message);
    }
  }

  async checkExists() {
    const res = await api("GET", `runs/${enc(this.runId)}`);
    if (res.status === 404) { this.showNotFound(res.message); return false; }
    return !this.destroyed;
  }

  showNotFound(message) {
    this.stream && this.stream.close();
    this.root.replaceChildren(h("section", { class: "empty-state" },
      h("h1", {}, "Run not found"),
      h("p", {}, message || `There is no run ${this.runId}.`),
      h("p", {}, h("a", { href: "#/" }, "Back to the run list"))));
  }

  onRunsUpdated() { this.renderHeader(); this.renderCard(); }

  renderHeader() {
    const run = this.run;
    const state = this.view.state || (run && run.state);
    setBadge(this.badge, state);
    if (run) {
      const bits = [
        h("span", { class: "mono", title: "Run id" }, run.id),
        h("span", {}, run.provider || ""),
        h("span", { class: "mono", title: "Working directory" }, run.workdir || ""),
        run.created_at ? h("span", { title: fullTime(run.created_at) }, `started ${ago(run.created_at)}`) : null,
        run.ended_at ? h("span", { title: fullTime(run.ended_at) }, `ended ${ago(run.ended_at)}`) : null,
        run.session_id ? h("span", { class: "mono", title: "Session id" }, `session ${shortId(run.session_id)}`) : null,
      ].filter(Boolean);
      const sig = JSON.stringify([run.id, run.provider, run.workdir, run.created_at, run.ended_at, run.session_id, ago(run.created_at)]);
      if (this.metaEl.dataset.sig !== sig) {
        this.metaEl.dataset.sig = sig;
        this.metaEl.replaceChildren(...bits.flatMap((b, i) => (i ? [h("span", { class: "sep", "aria-hidden": "true" }, "·"), b] : [b])));
        this.titleEl.textContent = basename(run.workdir) || shortId(run.id);
        this.titleEl.title = run.workdir || "";
      }
      const cmd = attachCommand(run);
      if (this.attachSlot.dataset.cmd !== (cmd || "")) {
        this.attachSlot.dataset.cmd = cmd || "";
        this.attachSlot.replaceChildren(attachBox(cmd) || "");
      }
    }
    this.stopBtn.disabled = state === "ended";
    document.title = `${state === "question" || state === "needs_input" ? "● " : ""}${this.titleEl.textContent} · lab`;
  }

  setConn(s) {
    this.conn.textContent = CONN_LABEL[s] || s;
    this.conn.dataset.state = s;
  }

  // --- the view from SSE (or GET /messages)

  applyView(v) {
    if (!v || (v.run_id && String(v.run_id) !== String(this.runId))) return;
    if (Array.isArray(v.messages) && v.messages.length) this.addMessages(v.messages);
    else if (this.emptyNote && !this.messages.size) this.emptyNote.textContent = "No messages yet.";
    this.view = {
      state: v.state ?? this.view.state,
      pending_dialog: v.pending_dialog ?? null,
      blocked: v.blocked ?? null,
      composer_lock: v.composer_lock ?? null,
    };
    if (this.view.state) store.liveState.set(this.runId, this.view.state);
    this.renderHeader();
    this.renderCard();
    this.updateComposer();
    renderRunList();
  }

  addMessages(list) {
    const nearBottom = this.stick || this.chat.scrollHeight - this.chat.scrollTop - this.chat.clientHeight < 120;
    let added = false;
    for (const raw of list) {
      const seq = raw ? Number(raw.seq) : NaN;
      if (!Number.isFinite(seq) || this.messages.has(seq)) continue;
      const m = { ...raw, seq };
      this.messages.set(seq, m);
      if (this.maxSeq === null || seq > this.maxSeq) this.maxSeq = seq;
      if (m.kind === "tool_use" && m.tool_use_id && m.tool_name) this.toolNames.set(m.tool_use_id, m.tool_name);
      const el = renderMessage(m, this.toolNames);
      // Insert in seq order (normally an append).
      let before = null;
      const last = this.chat.lastElementChild;
      if (last && last.dataset.seq !== undefined && Number(last.dataset.seq) > m.seq) {
        for (const child of this.chat.children) {
          if (child.dataset.seq !== undefined && Number(child.dataset.seq) > m.seq) { before = child; break; }
        }
      }
      this.chat.insertBefore(el, before);
      added = true;
    }
    if (added && this.emptyNote) { this.emptyNote.remove(); this.emptyNote = null; }
    if (added && (nearBottom || !this.scrolledOnce)) {
      this.scrolledOnce = true;
      this.chat.scrollTop = this.chat.scrollHeight;
      this.stick = true;
    }
  }

  async refreshView() {
    const last = this.maxSeq;
    const res = await api("GET", `runs/${enc(this.runId)}/messages${last !== null ? `?after=${last}` : ""}`);
    if (res.ok && res.data) this.applyView(res.data);
  }

  // --- dialog card

  /**
   * The pending dialog as this page treats it. lab marks a dialog it has played an
   * answer for as not answerable until the agent resolves it; the one this page is
   * answering stays the answerable card (busy, with its status) instead of turning
   * into the read-only "answer in the terminal" card mid-answer.
   */
  pendingDialog() {
    const d = this.view.pending_dialog;
    if (d && !d.answerable && this.answering && this.answering.toolId === d.tool_id) return { ...d, answerable: true };
    return d;
  }

  computeCardKey() {
    const v = this.view;
    const d = this.pendingDialog();
    if (d) return JSON.stringify(["d", d]);
    if (v.state === "question" || v.state === "needs_input") return JSON.stringify(["g", v.state, v.blocked]);
    return null;
  }

  renderCard(force = false) {
    const key = this.computeCardKey();
    const runKey = attachCommand(this.run) || "";
    const fullKey = key && `${key}|${runKey}`;
    if (!force && fullKey === this.cardKey) return;
    const hadFocus = this.dialogArea.contains(document.activeElement) ||
      document.activeElement === document.body || document.activeElement === this.input || !document.activeElement;
    const prevToolId = this.card && this.card.toolId;
    this.cardKey = fullKey;
    if (this.notice && this.notice.key !== key) this.notice = null;
    if (this.staleTimer) { clearTimeout(this.staleTimer); this.staleTimer = null; }

    const d = this.pendingDialog();
    if (this.answering && (!d || d.tool_id !== this.answering.toolId) && this.answering.phase !== "sending") this.answering = null;

    if (!key) {
      this.card = null;
      const nodes = [];
      if (this.notice) {
        nodes.push(h("div", { class: "dialog-notice", "data-testid": "dialog-status", role: "status", "aria-live": "polite" }, this.notice.text));
        const notice = this.notice;
        clearTimeout(this.noticeTimer);
        this.noticeTimer = setTimeout(() => {
          if (this.notice === notice && !this.card) { this.notice = null; this.dialogArea.replaceChildren(); }
        }, 15000);
      }
      this.dialogArea.replaceChildren(...nodes);
      return;
    }

    if (d && d.kind === "question" && d.answerable && Array.isArray(d.questions) && d.questions.length === 1) {
      const card = new QuestionCard(d, { onAnswer: (answers, chosen) => this.answer(d, answers, chosen) });
      this.card = { toolId: d.tool_id, el: card.el, qc: card };
      const attach = attachBox(attachCommand(this.run), { compact: true });
      card.el.append(h("details", { class: "card-terminal" },
        h("summary", {}, "Or answer in the terminal"),
        h("div", { class: "card-links" }, h("a", { href: `#/runs/${enc(this.runId)}/terminal`, class: "terminal-link" }, "Terminal view")),
        attach));
      if (this.answering && this.answering.toolId === d.tool_id) {
        card.setBusy(true, this.answering.chosen || []);
        card.setStatus(this.answering.phase === "sending" ? "Answering…" : "Answer sent — waiting for Claude…");
      }
      if (this.notice) card.setStatus(this.notice.text, "notice");
      this.dialogArea.replaceChildren(card.el);
      if (hadFocus && prevToolId !== d.tool_id && !card.busy) card.focusFirst();
    } else {
      const { el, status } = readOnlyCard(this.view, this.runId, this.run);
      this.card = { toolId: d ? d.tool_id : null, el };
      if (this.notice) { status.textContent = this.notice.text; status.classList.add("notice"); }
      this.dialogArea.replaceChildren(el);
    }
  }

  async answer(dialog, answers, chosen) {
    if (this.answering && this.answering.phase === "sending") return;
    const qc = this.card && this.card.qc;
    this.notice = null;
    this.answering = { toolId: dialog.tool_id, phase: "sending", chosen };
    if (qc) { qc.setBusy(true, chosen); qc.setStatus("Answering…"); }
    const res = await api("POST", `runs/${enc(this.runId)}/dialog/answer`, { tool_id: dialog.tool_id, answers });
    if (this.destroyed) return;
    const stillSame = () => this.card && this.card.toolId === dialog.tool_id && this.card.qc;

    if (res.ok) {
      this.answering = { toolId: dialog.tool_id, phase: "sent", chosen };
      if (stillSame()) {
        this.card.qc.setStatus("Answer sent — waiting for Claude…", "ok");
        // If the same dialog is still pending long after, let the operator try again.
        this.staleTimer = setTimeout(() => {
          if (stillSame() && this.answering && this.answering.toolId === dialog.tool_id) {
            this.answering = null;
            this.card.qc.setBusy(false);
            this.card.qc.setStatus("The question is still open — the answer may not have registered. Try again or use the terminal.", "error");
          }
        }, ANSWER_STALE_MS);
      } else {
        this.answering = null;
      }
      return;
    }

    this.answering = null;
    if (res.status === 409 && (res.error === "dialog_changed" || res.error === "no_dialog")) {
      const text = res.error === "dialog_changed"
        ? "The question changed before your answer was sent"
        : "That question was already answered";
      await this.refreshView();
      this.notice = { text, key: this.computeCardKey() };
      this.renderCard(true);
      return;
    }
    if (stillSame()) {
      this.card.qc.setBusy(false);
      this.card.qc.setStatus(res.message, "error");
      this.card.qc.focusFirst();
    }
  }

  // --- composer

  lockReasonText() {
    const v = this.view;
    const state = v.state || (this.run && this.run.state);
    if (state === "ended") return "The run has ended";
    const d = this.pendingDialog();
    if (d) {
      return d.kind === "question" && d.answerable ? "Answer the question above first" : "Claude is waiting in the terminal";
    }
    if (state === "question") return "Claude is waiting in the terminal";
    // The server's reason (the agent runs a tool or waits for permission, lab is still
    // typing the first prompt, …): exactly what sending would be refused with.
    const lock = v.composer_lock;
    if (lock && lock.code === "agent_waiting") return "Claude is waiting in the terminal";
    if (lock && lock.message) return lock.message.charAt(0).toUpperCase() + lock.message.slice(1);
    if (state === "needs_input" && !(v.blocked && v.blocked.notification_type === "idle_prompt")) {
      return "Claude is waiting in the terminal";
    }
    return null;
  }

  updateComposer() {
    const reason = this.lockReasonText();
    // A stale lock error ("dialog pending", "tool pending", …) goes away once the composer unlocks.
    if (this.wasLocked && !reason && LOCK_CODES.includes(this.composerError.dataset.code)) this.showComposerError("");
    this.wasLocked = !!reason;
    const locked = !!reason || this.sending;
    this.input.disabled = !!reason;
    this.sendBtn.disabled = locked;
    this.lockReason.textContent = reason || "";
    this.lockReason.hidden = !reason;
    if (reason) this.input.setAttribute("aria-describedby", this.lockReason.id);
    else this.input.removeAttribute("aria-describedby");
    this.composer.classList.toggle("locked", !!reason);
    this.composer.classList.toggle("ended", (this.view.state || (this.run && this.run.state)) === "ended");
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  showComposerError(msg, code = "") {
    this.composerError.dataset.code = msg ? code : "";
    this.composerError.textContent = msg || "";
    this.composerError.hidden = !msg;
  }

  async send() {
    if (this.sending || this.lockReasonText()) return;
    const text = this.input.value;
    if (!text.trim()) return;
    this.showComposerError("");
    this.sending = true;
    this.updateComposer();
    const res = await api("POST", `runs/${enc(this.runId)}/messages`, { text });
    this.sending = false;
    if (this.destroyed) return;
    this.updateComposer();
    if (res.ok) {
      if (this.input.value === text) this.input.value = "";
      this.autosize();
      if (!this.input.disabled) this.input.focus();
      return;
    }
    this.showComposerError(res.message || "Sending failed.", res.error);
    if (LOCK_CODES.includes(res.error)) this.refreshView();
  }

  async stop() {
    if (!confirm(`Stop run ${this.runId}? This ends the agent's tmux session.`)) return;
    this.stopBtn.disabled = true;
    this.headerError.hidden = true;
    const res = await api("POST", `runs/${enc(this.runId)}/stop`, {});
    if (this.destroyed) return;
    if (!res.ok) {
      this.stopBtn.disabled = false;
      this.headerError.textContent = res.message;
      this.headerError.hidden = false;
      return;
    }
    if (res.data && res.data.state) {
      this.view.state = res.data.state;
      store.liveState.set(this.runId, res.data.state);
    }
    refreshRunsNow();
    this.renderHeader();
    this.updateComposer();
    this.renderCard();
  }

  destroy() {
    this.destroyed = true;
    this.stream && this.stream.close();
    this.resizeObs && this.resizeObs.disconnect();
    clearTimeout(this.staleTimer);
    clearTimeout(this.noticeTimer);
    store.liveState.delete(this.runId);
  }
}

// ------------------------------------------------------------------ terminal view

class TerminalView {
  constructor(root, runId) {
    this.root = root;
    this.runId = runId;
    this.attachSlot = h("div", { class: "attach-slot" });
    this.screen = h("pre", { class: "terminal-screen", "data-testid": "terminal-screen", tabindex: "0", "aria-label": "Terminal screen (read-only)" }, "Loading…");
    this.status = h("p", { class: "terminal-status", role: "status" });
    this.badge = stateBadge(null);
    root.replaceChildren(h("section", { class: "terminal-view", "data-testid": "terminal-view" },
      h("header", { class: "run-header" },
        h("div", { class: "run-header-top" },
          h("a", { href: `#/runs/${enc(runId)}`, class: "button-link", "data-testid": "back-to-chat" }, "← Chat"),
          h("h1", { class: "run-title" }, `Terminal · ${shortId(runId)}`),
          this.badge,
          h("span", { class: "spacer" }),
          h("span", { class: "muted" }, "read-only, refreshed every second")),
        this.attachSlot,
        this.status),
      this.screen));
    this.tick();
  }

  onRunsUpdated() {
    const run = store.runs.get(this.runId);
    if (run) setBadge(this.badge, run.state);
  }

  async tick() {
    const res = await api("GET", `runs/${enc(this.runId)}/terminal`);
    if (this.destroyed) return;
    if (res.ok && res.data) {
      const cmd = res.data.attach || attachCommand(store.runs.get(this.runId));
      if (this.attachSlot.dataset.cmd !== (cmd || "")) {
        this.attachSlot.dataset.cmd = cmd || "";
        this.attachSlot.replaceChildren(attachBox(cmd) || "");
      }
      const text = String(res.data.screen ?? "");
      if (this.screen.textContent !== text) this.screen.textContent = text;
      this.status.textContent = "";
      this.status.classList.remove("error");
    } else {
      this.status.textContent = res.message;
      this.status.classList.add("error");
      const cmd = attachCommand(store.runs.get(this.runId));
      if (cmd && !this.attachSlot.dataset.cmd) {
        this.attachSlot.dataset.cmd = cmd;
        this.attachSlot.replaceChildren(attachBox(cmd));
      }
    }
    this.onRunsUpdated();
    this.timer = setTimeout(() => this.tick(), TERMINAL_POLL_MS);
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
  }
}

// ------------------------------------------------------------------ home view

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
  m = hash.match(/^\/runs\/([^/]+)\/?$/);
  if (m) return { name: "run", id: decodeURIComponent(m[1]) };
  return { name: "home" };
}

let lastRouteKey = null;
function route() {
  const r = parseRoute();
  const key = `${r.name}:${r.id || ""}`;
  if (key === lastRouteKey) return;
  lastRouteKey = key;
  if (currentView) currentView.destroy();
  document.title = "lab";
  if (r.name === "run") currentView = new RunView(mainEl, r.id);
  else if (r.name === "terminal") currentView = new TerminalView(mainEl, r.id);
  else currentView = new HomeView(mainEl);
  renderRunList();
}

let refreshRunsNow = () => {};

/** Demo mode (GET /info): the banner, and the start form set up for the demo's runs. */
async function loadInfo() {
  const res = await api("GET", "info");
  if (!res.ok || !res.data || res.data.demo !== true) return;
  document.body.classList.add("demo");
  document.getElementById("demo-banner").hidden = false;
  const f = newRunForm.elements;
  if (res.data.demo_workdir) f.workdir.value = res.data.demo_workdir;
  f.permission_mode.value = "plan"; // the demo ends with a plan, which the agent shows in plan mode
  // Any prompt starts the demo (two questions, then a plan); one is filled in so a click is enough.
  if (!f.prompt.value) f.prompt.value = "Show me around";
  if (!newRunDetails.dataset.touched) newRunDetails.open = true;
}

function init() {
  initNewRunForm();
  loadProviders();
  loadInfo();
  window.addEventListener("hashchange", route);
  route();
  refreshRunsNow = startRunPolling();
}

init();
