// One run as a live chat: header, transcript, dialog card, composer.
import { api, enc } from "./api.js";
import { Continuation } from "./continuation.js";
import { RunEgress } from "./egress.js";
import { ChoiceCard, QuestionCard, QuestionsCard, answerableCard, readOnlyCard } from "./cards.js";
import { summaryText } from "./diffparse.js";
import { ago, attachBox, attachCommand, basename, fullTime, h, plusMinus, setBadge, shortId, stateBadge, uid } from "./dom.js";
import { ViewStream } from "./eventstream.js";
import { renderMessage } from "./messages.js";
import { noteView, setTitle } from "./notify.js";
import { refreshRunsNow, renderRunList } from "./runlist.js";
import { agentName, store } from "./store.js";
import { RunUsage } from "./usage.js";

const ANSWER_STALE_MS = 20000;
// Messages per page: the newest page when the chat opens, older ones on scrolling up.
const PAGE = 200;
// Older messages are fetched when the chat is scrolled this close to its top.
const OLDER_MARGIN_PX = 400;
// How long the chat loads older pages to reach a message a search hit names.
const REVEAL_MS = 30000;
// The 409 codes of POST /runs/{id}/messages that mean "the composer is locked".
const LOCK_CODES = ["dialog_pending", "agent_waiting", "tool_pending", "prompt_pending"];

const CONN_LABEL = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", offline: "offline — retrying" };


/**
 * The run's provider; for a live run, the build it uses (the one it started with) and
 * whether that is still the build new runs get.
 */
function providerBit(run) {
  const b = run.provider_build;
  if (!b) return h("span", { "data-testid": "run-provider" }, run.provider || "");
  const serving = store.providers.find((p) => p.name === run.provider && p.state === "serving");
  const older = serving && serving.digest && serving.digest !== b.digest;
  const text = `${run.provider} ${b.version} · build ${b.digest.slice(0, 8)}${older ? " (not the build new runs get)" : ""}`;
  const title = `provider ${run.provider} ${b.version}, build ${b.digest}, from ${b.source}`;
  return h("span", { "data-testid": "run-provider", "data-build": b.digest, title }, text);
}

export class RunView {
  constructor(root, runId, { focusSeq } = {}) {
    this.root = root;
    this.runId = runId;
    this.focusSeq = Number.isFinite(focusSeq) ? focusSeq : null;
    this.usage = new RunUsage(runId);
    this.messages = new Map();    // seq -> message
    this.maxSeq = null;
    this.minSeq = null;
    this.moreBefore = false;     // older messages exist that are not loaded
    this.loadingOlder = false;
    this.toolNames = new Map();   // tool_use_id -> tool_name
    this.view = { state: null, pending_dialog: null, blocked: null };
    this.cardKey = null;
    this.card = null;
    this.notice = null;           // {text, key}
    this.answering = null;        // {toolId, phase, chosen}

    this.build();
    this.loadRun();
    this.start();
  }

  /**
   * The newest page of the chat first, then the live stream from after it (older pages
   * come as the operator scrolls up: a long chat is never loaded whole).
   */
  async start() {
    const res = await api("GET", `runs/${enc(this.runId)}/messages?limit=${PAGE}`);
    if (this.destroyed) return;
    if (res.status === 404) { this.showNotFound(res.message); return; }
    if (res.ok && res.data) {
      this.moreBefore = !!res.data.more_before;
      this.applyView(res.data);
    }
    this.stream = new ViewStream(() => `runs/${enc(this.runId)}/events${this.maxSeq !== null ? `?after=${this.maxSeq}` : ""}`, {
      onView: (v) => this.applyView(v),
      onStatus: (s) => this.setConn(s),
      onClosed: () => this.checkExists(),
    });
    this.renderOlder();
    if (this.focusSeq !== null) this.reveal(this.focusSeq);
  }

  /**
   * Show message `seq` (a search hit): the pages down to it loaded, scrolled to the
   * middle of the chat and highlighted.
   */
  async reveal(seq) {
    const deadline = Date.now() + REVEAL_MS;
    while (!this.destroyed && !this.messages.has(seq) && this.moreBefore && (this.minSeq === null || this.minSeq > seq) && Date.now() < deadline) {
      if (this.loadingOlder) await new Promise((r) => setTimeout(r, 50));
      else await this.loadOlder();
    }
    if (this.destroyed) return;
    const el = this.chat.querySelector(`[data-seq="${seq}"]`);
    if (!el) return;
    for (const old of this.chat.querySelectorAll(".hit")) old.classList.remove("hit");
    el.classList.add("hit");
    el.dataset.hit = "true";
    this.stick = false;
    el.scrollIntoView({ block: "center" });
  }

  /** The "earlier messages" control at the top of the chat, while there are any. */
  renderOlder() {
    this.olderBtn.hidden = !this.moreBefore;
    this.olderBtn.disabled = this.loadingOlder;
    this.olderBtn.textContent = this.loadingOlder ? "Loading earlier messages…" : "Earlier messages";
  }

  /** Fetch the page before the oldest loaded message, keeping the viewport where it is. */
  async loadOlder() {
    if (!this.moreBefore || this.loadingOlder || this.minSeq === null) return;
    this.loadingOlder = true;
    this.renderOlder();
    const res = await api("GET", `runs/${enc(this.runId)}/messages?before=${this.minSeq}&limit=${PAGE}`);
    this.loadingOlder = false;
    if (this.destroyed) return;
    if (res.ok && res.data) {
      const height = this.chat.scrollHeight;
      const top = this.chat.scrollTop;
      this.moreBefore = !!res.data.more_before;
      this.addMessages(res.data.messages || [], { older: true });
      this.chat.scrollTop = top + (this.chat.scrollHeight - height);
    }
    this.renderOlder();
  }

  get run() { return store.runs.get(this.runId) || this.runDetail || null; }

  /** The agent's name as its provider gives it ("The agent" until it is known). */
  get agent() { return agentName(this.run); }

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
    this.continuation = new Continuation({ runId: this.runId, onResumed: (run) => this.resumed(run) });
    this.egress = new RunEgress({ runId: this.runId });
    this.endReason = h("p", { class: "muted end-reason", "data-testid": "end-reason", hidden: true });
    this.hostNotice = h("p", { class: "header-error", "data-testid": "host-disconnected", role: "status", hidden: true });
    this.mirrorNotice = h("p", { class: "header-error", "data-testid": "transcript-stopped", role: "status", hidden: true });

    this.chat = h("div", {
      class: "chat", "data-testid": "chat", role: "log", "aria-live": "off", "aria-label": "Transcript", tabindex: "0",
    });
    this.emptyNote = h("p", { class: "chat-empty" }, "Waiting for the transcript…");
    this.olderBtn = h("button", {
      type: "button", class: "older", "data-testid": "load-older", hidden: true,
      onclick: () => this.loadOlder(),
    }, "Earlier messages");
    this.chat.append(this.olderBtn, this.emptyNote);
    // Keep the transcript pinned to the bottom while the operator is there,
    // including when the dock (card/composer) grows or shrinks.
    this.stick = true;
    this.chat.addEventListener("scroll", () => {
      this.stick = this.chat.scrollHeight - this.chat.scrollTop - this.chat.clientHeight < 40;
      if (this.chat.scrollTop < OLDER_MARGIN_PX) this.loadOlder();
    }, { passive: true });
    if (typeof ResizeObserver === "function") {
      this.resizeObs = new ResizeObserver(() => { if (this.stick) this.chat.scrollTop = this.chat.scrollHeight; });
      this.resizeObs.observe(this.chat);
    }

    this.dialogArea = h("div", { class: "dialog-area", "data-testid": "dialog-area" });

    const inputId = uid("composer");
    this.input = h("textarea", {
      id: inputId, class: "composer-input", "data-testid": "composer-input", rows: "2",
      placeholder: "Message the agent — Enter to send, Shift+Enter for a new line",
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
            h("a", { href: "#/", class: "button-link narrow-only", "data-testid": "back-to-runs" }, "← Runs"),
            this.titleEl, this.badge, this.conn,
            h("span", { class: "spacer" }),
            this.changesLink = h("a", { href: `#/runs/${enc(this.runId)}/diff`, class: "button-link changes-link", "data-testid": "changes-link", hidden: true }),
            h("a", { href: `#/runs/${enc(this.runId)}/terminal`, class: "button-link", "data-testid": "terminal-link" }, "Terminal"),
            ...this.continuation.buttons(),
            this.stopBtn),
          this.metaEl,
          this.usage.el,
          this.egress.panel,
          this.continuation.family,
          this.continuation.limit,
          this.endReason,
          this.continuation.form,
          this.attachSlot,
          this.hostNotice,
          this.mirrorNotice,
          this.headerError),
        this.chat,
        h("div", { class: "dock" }, this.egress.notices, this.dialogArea, this.composer)));
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

  onRunsUpdated() { this.renderHeader(); this.renderCard(); this.updateComposer(); }

  renderHeader() {
    const run = this.run;
    const state = this.view.state || (run && run.state);
    setBadge(this.badge, state);
    if (run) {
      const bits = [
        h("span", { class: "mono", title: "Run id" }, run.id),
        providerBit(run),
        h("span", { class: "mono", title: "Working directory" }, run.workdir || ""),
        run.created_at ? h("span", { title: fullTime(run.created_at) }, `started ${ago(run.created_at)}`) : null,
        run.ended_at ? h("span", { title: fullTime(run.ended_at) }, `ended ${ago(run.ended_at)}`) : null,
        run.session_id ? h("span", { class: "mono", title: "Session id" }, `session ${shortId(run.session_id)}`) : null,
        run.host ? h("span", { "data-testid": "run-host", title: "The host it runs on" }, `on ${run.host}`) : null,
      ].filter(Boolean);
      const b = run.provider_build;
      const serving = store.providers.find((p) => p.name === run.provider && p.state === "serving");
      const sig = JSON.stringify([run.id, run.provider, b, serving && serving.digest, run.workdir, run.created_at, run.ended_at, run.session_id, run.host, ago(run.created_at)]);
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
    this.renderChangesLink(run);
    // Its host's runner is gone: what is shown is as of then; lab refuses to type there.
    const down = !!this.view.disconnected && state !== "ended";
    this.hostNotice.hidden = !down;
    this.hostNotice.textContent = down
      ? `Host ${(run && run.host) || ""} is not connected: this is the run as of then, and nothing can be typed there until its runner is back.`
      : "";
    // The mirror of a host run's transcript stopped growing (a cap, lab's disk): why.
    this.mirrorNotice.hidden = !this.view.transcript_stopped;
    this.mirrorNotice.textContent = this.view.transcript_stopped || "";
    this.stopBtn.disabled = state === "ended";
    this.continuation.render(run, this.view.usage_limit);
    this.egress.render(run, this.view.egress);
    const why = state === "ended" && run && run.end_reason;
    this.endReason.hidden = !why;
    this.endReason.textContent = why ? `Ended: ${run.end_reason}${run.resumable ? " — it can be resumed." : ""}` : "";
    setTitle(`${this.titleEl.textContent} · lab`);
  }

  /** "Changes +12 −3": the run's worktree diff, live from the view (else the run list's). */
  renderChangesLink(run) {
    const wt = run && run.worktree;
    const show = !!(wt && !wt.discarded);
    this.changesLink.hidden = !show;
    if (!show) return;
    const d = this.view.diff || run.diff;
    const sig = d ? `${d.files_changed}|${d.additions}|${d.deletions}` : "";
    if (this.changesLink.dataset.sig === sig && this.changesLink.childNodes.length) return;
    this.changesLink.dataset.sig = sig;
    this.changesLink.title = d ? summaryText(d) : "The run's changes";
    this.changesLink.replaceChildren("Changes",
      ...(d ? [" ", ...plusMinus(d.additions, d.deletions)] : []));
  }

  setConn(s) {
    this.conn.textContent = CONN_LABEL[s] || s;
    this.conn.dataset.state = s;
  }

  // --- the view from SSE (or GET /messages)

  applyView(v) {
    if (!v || (v.run_id && String(v.run_id) !== String(this.runId))) return;
    if (Array.isArray(v.messages) && v.messages.length) {
      this.addMessages(v.messages);
      this.usage.refresh();
    }
    else if (this.emptyNote && !this.messages.size) this.emptyNote.textContent = "No messages yet.";
    this.view = {
      state: v.state ?? this.view.state,
      pending_dialog: v.pending_dialog ?? null,
      blocked: v.blocked ?? null,
      composer_lock: v.composer_lock ?? null,
      answer: v.answer ?? null,
      diff: v.diff ?? null,
      disconnected: v.disconnected === true,
      transcript_stopped: typeof v.transcript_stopped === "string" ? v.transcript_stopped : null,
      usage_limit: v.usage_limit ?? null,
      egress: v.egress ?? null,
    };
    if (this.view.state) store.liveState.set(this.runId, this.view.state);
    this.applyAnswerProgress();
    noteView(this.runId, this.view);
    this.renderHeader();
    this.renderCard();
    this.updateComposer();
    renderRunList();
  }

  addMessages(list, { older = false } = {}) {
    const nearBottom = !older && (this.stick || this.chat.scrollHeight - this.chat.scrollTop - this.chat.clientHeight < 120);
    let added = false;
    for (const raw of list) {
      const seq = raw ? Number(raw.seq) : NaN;
      if (!Number.isFinite(seq) || this.messages.has(seq)) continue;
      const m = { ...raw, seq };
      this.messages.set(seq, m);
      if (this.maxSeq === null || seq > this.maxSeq) this.maxSeq = seq;
      if (this.minSeq === null || seq < this.minSeq) this.minSeq = seq;
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
    const rule = this.ruleAnswer();
    if (d) return JSON.stringify(["d", d, rule, this.wouldAnswer(d)]);
    if (v.state === "question" || v.state === "needs_input") return JSON.stringify(["g", v.state, v.blocked, rule]);
    if (rule) return JSON.stringify(["r", rule]);
    return null;
  }

  /** The newest answer, when an answer rule gave it: `{tool_id, rule, name}`, else null. */
  ruleAnswer() {
    const a = this.view.answer;
    return a && a.answered_by ? { tool_id: a.tool_id, rule: a.answered_by.rule, name: a.answered_by.name } : null;
  }

  /** The dry-run rule that would have answered `d`, or null. */
  wouldAnswer(d) {
    const w = this.view.would_answer;
    return d && w && w.tool_id === d.tool_id ? w : null;
  }

  /** "Answered by rule …", with a button that removes the rule. */
  ruleNote(rule) {
    const status = h("span", { class: "rule-note-status", role: "status", "aria-live": "polite" });
    const remove = h("button", {
      type: "button", class: "link-button", "data-testid": "rule-remove",
      onclick: async () => {
        remove.disabled = true;
        const res = await api("DELETE", `rules/${enc(rule.rule)}`, {});
        status.textContent = res.ok || res.status === 404 ? " Removed: lab asks you again next time." : ` ${res.message}`;
        if (!res.ok && res.status !== 404) remove.disabled = false;
      },
    }, "Remove the rule");
    return h("p", { class: "rule-note", "data-testid": "rule-note", "data-rule": rule.rule },
      "Answered by rule ", h("strong", {}, `“${rule.name}”`), " · ",
      h("a", { href: `#/rules/${enc(rule.rule)}`, "data-testid": "rule-edit-link" }, "Edit"), " · ", remove, status);
  }

  /** "Always allow this…": the narrowest rule for the prompt, kept, and the prompt answered by it. */
  alwaysAllow(dialog) {
    const scopes = [["repository", "In this repository"], ["machine", "On this machine"], ["everywhere", "Everywhere"]];
    const buttons = scopes.map(([scope, label]) => h("button", {
      type: "button", class: "secondary", "data-testid": "always-allow", "data-scope": scope,
      onclick: () => this.allowAlways(dialog, scope),
    }, label));
    return h("details", { class: "card-rules", "data-testid": "always-allow-box" },
      h("summary", {}, "Always allow this…"),
      h("p", { class: "hint" }, "Makes an answer rule for this command, path or URL (the same one with more arguments too; never one chained to another), and answers this prompt with it."),
      h("div", { class: "card-links" }, ...buttons));
  }

  async allowAlways(dialog, scope) {
    if (this.answering && this.answering.phase === "sending") return;
    const qc = this.card && this.card.qc;
    this.notice = null;
    this.answering = { toolId: dialog.tool_id, phase: "sending", chosen: [] };
    if (qc) { qc.setBusy(true, []); qc.setStatus("Making the rule…"); }
    const res = await api("POST", `runs/${enc(this.runId)}/dialog/rule`, { tool_id: dialog.tool_id, scope });
    if (this.destroyed) return;
    const stillSame = this.card && this.card.toolId === dialog.tool_id && this.card.qc;
    if (res.ok) {
      const started = res.data && res.data.answer ? res.data.answer.started_at : null;
      this.answering = { toolId: dialog.tool_id, phase: "sent", chosen: [], started };
      if (stillSame) this.card.qc.setStatus(`Rule “${res.data.rule.name}” made; answering with it…`, "ok");
      return;
    }
    this.answering = null;
    if (stillSame) {
      this.card.qc.setBusy(false);
      this.card.qc.setStatus(res.message, "error");
    }
  }

  renderCard(force = false) {
    const key = this.computeCardKey();
    const runKey = `${attachCommand(this.run) || ""}|${this.agent}`;
    const fullKey = key && `${key}|${runKey}`;
    if (!force && fullKey === this.cardKey) return;
    const hadFocus = this.dialogArea.contains(document.activeElement) ||
      document.activeElement === document.body || document.activeElement === this.input || !document.activeElement;
    const prevToolId = this.card && this.card.toolId;
    // The same dialog drawn again (the agent's name arrived, say): the focus stays on
    // the control it was on.
    const active = this.dialogArea.contains(document.activeElement) ? document.activeElement : null;
    const refocus = active && active.dataset.testid ? { testid: active.dataset.testid, index: active.dataset.index } : null;
    this.cardKey = fullKey;
    if (this.notice && this.notice.key !== key) this.notice = null;
    if (this.staleTimer) { clearTimeout(this.staleTimer); this.staleTimer = null; }

    const d = this.pendingDialog();
    if (this.answering && (!d || d.tool_id !== this.answering.toolId) && this.answering.phase !== "sending") this.answering = null;

    const rule = this.ruleAnswer();
    if (!key || !d && !(this.view.state === "question" || this.view.state === "needs_input")) {
      this.card = null;
      const nodes = [];
      if (rule) nodes.push(this.ruleNote(rule));
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

    const answerable = answerableCard(d);
    if (answerable) {
      const Card = { question: QuestionCard, questions: QuestionsCard, choice: ChoiceCard }[answerable];
      const card = new Card(d, { agent: this.agent, onAnswer: (answers, chosen) => this.answer(d, answers, chosen) });
      this.card = { toolId: d.tool_id, el: card.el, qc: card };
      if (rule && rule.tool_id === d.tool_id) card.el.append(this.ruleNote(rule));
      else if (d.kind === "permission") card.el.append(this.alwaysAllow(d));
      const would = this.wouldAnswer(d);
      if (would) {
        const verb = { allow: "allowed", deny: "refused" }[would.action] || "answered";
        card.el.append(h("p", { class: "rule-note", "data-testid": "rule-would" },
          "Rule ", h("strong", {}, `“${would.name}”`), ` (a dry run) would have ${verb} this: nothing was answered.`));
      }
      const attach = attachBox(attachCommand(this.run), { compact: true });
      card.el.append(h("details", { class: "card-terminal" },
        h("summary", {}, "Or answer in the terminal"),
        h("div", { class: "card-links" }, h("a", { href: `#/runs/${enc(this.runId)}/terminal`, class: "terminal-link" }, "Terminal view")),
        attach));
      if (this.answering && this.answering.toolId === d.tool_id) {
        card.setBusy(true, this.answering.chosen || []);
        card.setStatus(this.answeringText());
      }
      if (this.notice) card.setStatus(this.notice.text, "notice");
      this.dialogArea.replaceChildren(card.el);
      if (this.notice && this.notice.terminal) this.openCardTerminal();
      if (hadFocus && prevToolId !== d.tool_id && !card.busy) card.focusFirst();
      else if (refocus && prevToolId === d.tool_id) {
        const sel = `[data-testid="${refocus.testid}"]${refocus.index !== undefined ? `[data-index="${refocus.index}"]` : ""}`;
        const again = card.el.querySelector(sel);
        if (again && !again.disabled) again.focus();
      }
    } else {
      const { el, status } = readOnlyCard(this.view, this.runId, this.run, this.agent);
      this.card = { toolId: d ? d.tool_id : null, el };
      if (rule && d && rule.tool_id === d.tool_id) el.append(this.ruleNote(rule));
      if (this.notice) { status.textContent = this.notice.text; status.classList.add("notice"); }
      this.dialogArea.replaceChildren(el);
    }
  }

  /** The view's answer progress if it is that of the answer this page sent (and lab took). */
  ownProgress() {
    const a = this.answering;
    const p = this.view.answer;
    return a && a.phase === "sent" && p && p.tool_id === a.toolId && p.started_at === a.started ? p : null;
  }

  /** The busy card's status line for the answer under way, from the view's progress. */
  answeringText() {
    if (!this.answering || this.answering.phase === "sending") return "Answering…";
    const p = this.ownProgress();
    if (p) {
      if (p.state === "waiting") return "Answering… waiting for the prompt to be drawn";
      // Every key sent: lab now checks that the prompt went away.
      if (p.state === "playing" && p.played < p.keys.length) return `Answering… key ${p.played} of ${p.keys.length}`;
    }
    return "Answer sent — waiting for the agent…";
  }

  /** Open the card's "answer in the terminal" part (its attach command). */
  openCardTerminal() {
    const details = this.card && this.card.el.querySelector("details.card-terminal");
    if (details) details.open = true;
  }

  /** Follow the answer this page sent: its progress on the card, or why it failed. */
  applyAnswerProgress() {
    const p = this.ownProgress();
    if (!p) return;
    const qc = this.card && this.card.toolId === p.tool_id && this.card.qc;
    if (p.state === "failed" || p.state === "lost") {
      this.answering = null;
      const code = p.error && p.error.error;
      const message = (p.error && p.error.message) || "the answer could not be played";
      const what = p.state === "lost"
        ? "The answer did not take: " + message
        : code === "not_on_screen"
          ? "Nothing was typed: " + message
          : "The answer was not played: " + message;
      this.notice = { text: what, key: this.computeCardKey(), terminal: p.state === "lost" || code === "not_on_screen" };
      if (qc) {
        qc.setBusy(false);
        qc.setStatus(what, "error");
        if (this.notice.terminal) this.openCardTerminal();
      }
      return;
    }
    if (qc) qc.setStatus(this.answeringText(), "ok");
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
    const what = dialog.kind === "question" ? "question" : "prompt";

    if (res.ok) {
      // 202: the guard accepted it and lab plays the keys; the view's `answer` tells how far.
      const started = res.data && res.data.answer ? res.data.answer.started_at : null;
      this.answering = { toolId: dialog.tool_id, phase: "sent", chosen, started };
      if (stillSame()) {
        this.card.qc.setStatus(this.answeringText(), "ok");
        // If the same dialog is still pending long after, let the operator try again.
        this.staleTimer = setTimeout(() => {
          if (stillSame() && this.answering && this.answering.toolId === dialog.tool_id) {
            this.answering = null;
            this.card.qc.setBusy(false);
            this.card.qc.setStatus(`The ${what} is still open — the answer may not have registered. Try again or use the terminal.`, "error");
          }
        }, ANSWER_STALE_MS);
        // The progress may have come on the event stream before this reply.
        this.applyAnswerProgress();
      } else {
        this.answering = null;
      }
      return;
    }

    this.answering = null;
    if (res.status === 409 && (res.error === "dialog_changed" || res.error === "no_dialog")) {
      const text = res.error === "dialog_changed"
        ? `The ${what} changed before your answer was sent`
        : `That ${what} was already answered`;
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

  /**
   * Why the composer is locked, in words, or null when it is open. The server decides
   * (its `composer_lock`, exactly what sending would be refused with); the page only
   * words it: a pending dialog's card says which answer it wants, a prompt the agent
   * shows in its terminal says where to answer it, any other reason is the server's.
   */
  lockReasonText() {
    const lock = this.view.composer_lock;
    if (!lock) return null;
    if (lock.code === "run_ended") return "The run has ended";
    const waiting = `${this.agent} is waiting in the terminal`;
    if (lock.code === "dialog_pending") {
      const card = answerableCard(this.pendingDialog());
      if (card === "questions") return "Answer the questions above first";
      if (card) return card === "question" ? "Answer the question above first" : "Answer the prompt above first";
      return waiting;
    }
    if (lock.code === "agent_waiting") return waiting;
    const text = String(lock.message || lock.code || "");
    return text.charAt(0).toUpperCase() + text.slice(1);
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

  /** The run is live again (resumed): its state as lab answered, the list polled. */
  resumed(run) {
    this.runDetail = run;
    if (run.state) {
      this.view.state = run.state;
      store.liveState.set(this.runId, run.state);
    }
    refreshRunsNow();
    this.renderHeader();
    this.updateComposer();
    this.renderCard();
  }

  destroy() {
    this.destroyed = true;
    this.usage.destroy();
    this.stream && this.stream.close();
    this.resizeObs && this.resizeObs.disconnect();
    clearTimeout(this.staleTimer);
    clearTimeout(this.noticeTimer);
    store.liveState.delete(this.runId);
  }
}
