// A run's changes (GET /runs/{id}/diff): the file list, each file's patch unified or
// side by side with syntax highlighting, review comments on any line sent to the agent
// in one message (POST /runs/{id}/review), and merge or discard of the run's worktree.
import { api, enc } from "./api.js";
import { basename, h, plusMinus, setBadge, shortId, stateBadge } from "./dom.js";
import { STATUS, commentTarget, parsePatch, placeKey, sideBySide, summaryText } from "./diffparse.js";
import { highlightLine, langOf } from "./highlight.js";
import { refreshRunsNow, renderRunList } from "./runlist.js";
import { agentName, store } from "./store.js";

// A file's lines drawn only once it is near the viewport (a big diff paints at once).
const LAZY_MARGIN = "1200px 0px";
// A patch this long waits for a click before it is drawn.
const FOLD_LINES = 1500;
const MODE_KEY = "lab.diffMode";

const draftKey = (id) => `lab.review.${id}`;

function loadDrafts(runId) {
  try {
    const d = JSON.parse(sessionStorage.getItem(draftKey(runId)) || "null");
    if (d && Array.isArray(d.comments)) return { comments: d.comments, summary: String(d.summary || "") };
  } catch { /* none */ }
  return { comments: [], summary: "" };
}

/** Tokens of every line of a file's hunks, each side carrying its own comment state. */
function highlightHunks(hunks, lang) {
  for (const hunk of hunks) {
    let oldState = null;
    let newState = null;
    for (const line of hunk.lines) {
      if (line.type === "note") { line.tokens = [{ cls: "", text: line.text }]; continue; }
      const r = highlightLine(line.text, lang, line.type === "del" ? oldState : newState);
      line.tokens = r.tokens;
      if (line.type === "del") oldState = r.state;
      else if (line.type === "add") newState = r.state;
      else { oldState = r.state; newState = r.state; }
    }
  }
}

function codeCell(line, sign) {
  const td = h("td", { class: "code" });
  if (!line) { td.classList.add("empty"); return td; }
  if (line.type === "note") {
    td.classList.add("note");
    td.textContent = line.text;
    return td;
  }
  td.append(h("span", { class: "sign", "aria-hidden": "true" }, sign));
  for (const t of line.tokens || [{ cls: "", text: line.text }]) {
    td.append(t.cls ? h("span", { class: `tk-${t.cls}` }, t.text) : document.createTextNode(t.text));
  }
  return td;
}

const SIGN = { add: "+", del: "-", ctx: " " };

/** A status line: `content` (text, a node or a list of them; empty hides it), `kind` its colour. */
function showStatus(el, base, content, kind) {
  const nodes = Array.isArray(content) ? content : content ? [content] : [];
  el.replaceChildren(...nodes);
  el.className = `${base} ${kind}`;
  el.hidden = !nodes.length;
}

export class DiffView {
  constructor(root, runId) {
    this.root = root;
    this.runId = runId;
    this.diff = null;
    this.mode = localStorage.getItem(MODE_KEY) === "split" ? "split" : "unified";
    this.drafts = loadDrafts(runId);
    this.openBox = null; // {path, side, line}
    this.build();
    this.load();
  }

  get run() { return store.runs.get(this.runId) || this.runDetail || null; }

  build() {
    this.badge = stateBadge(null);
    this.summaryEl = h("span", { class: "diff-summary", "data-testid": "diff-summary" });
    this.modeBtns = ["unified", "split"].map((m) => h("button", {
      type: "button", class: "small seg", "data-testid": `diff-mode-${m}`, "aria-pressed": String(this.mode === m),
      onclick: () => this.setMode(m),
    }, m === "unified" ? "Unified" : "Side by side"));
    this.refreshBtn = h("button", { type: "button", class: "small", "data-testid": "diff-refresh", onclick: () => this.load() }, "Refresh");
    this.staleEl = h("p", { class: "diff-stale", "data-testid": "diff-stale", role: "status", hidden: true },
      "The agent changed files since this was loaded. ",
      h("button", { type: "button", class: "small", onclick: () => this.load() }, "Refresh"));
    this.wtEl = h("div", { class: "run-meta", "data-testid": "diff-worktree" });
    this.strategy = h("select", { "data-testid": "merge-strategy", "aria-label": "How to merge" },
      h("option", { value: "merge" }, "Merge commit"),
      h("option", { value: "squash" }, "Squash"));
    this.mergeBtn = h("button", { type: "button", class: "primary", "data-testid": "merge-button", onclick: () => this.merge() }, "Merge");
    this.discardBtn = h("button", { type: "button", class: "danger", "data-testid": "discard-button", onclick: () => this.discard() }, "Discard");
    this.actionStatus = h("div", { class: "action-status", "data-testid": "work-status", role: "status", "aria-live": "polite", hidden: true });

    this.fileList = h("ul", { class: "diff-files", "data-testid": "diff-file-list", "aria-label": "Changed files" });
    this.filesEl = h("div", { class: "diff-body", "data-testid": "diff-body", tabindex: "-1" }, h("p", { class: "muted diff-loading" }, "Loading the diff…"));

    this.summaryInput = h("textarea", {
      class: "review-summary", "data-testid": "review-summary", rows: "1", "aria-label": "Review summary (optional)",
      placeholder: "Summary for the agent (optional)",
      oninput: () => { this.drafts.summary = this.summaryInput.value; this.saveDrafts(); },
    });
    this.summaryInput.value = this.drafts.summary;
    this.reviewCount = h("span", { class: "review-count", "data-testid": "review-count" });
    this.sendBtn = h("button", { type: "button", class: "primary", "data-testid": "review-send", onclick: () => this.sendReview() }, "Send review");
    this.reviewStatus = h("p", { class: "review-status", "data-testid": "review-status", role: "status", "aria-live": "polite", hidden: true });
    this.reviewBar = h("div", { class: "review-bar", "data-testid": "review-bar" },
      h("div", { class: "review-row" }, this.reviewCount, this.summaryInput, this.sendBtn), this.reviewStatus);

    this.root.replaceChildren(h("section", { class: "diff-view", "data-testid": "diff-view", "data-run-id": this.runId },
      h("header", { class: "run-header" },
        h("div", { class: "run-header-top" },
          h("a", { href: `#/runs/${enc(this.runId)}`, class: "button-link", "data-testid": "back-to-chat" }, "← Chat"),
          this.titleEl = h("h1", { class: "run-title" }, `Changes · ${shortId(this.runId)}`),
          this.badge, this.summaryEl,
          h("span", { class: "spacer" }),
          h("span", { class: "seg-group", role: "group", "aria-label": "Diff layout" }, ...this.modeBtns),
          this.refreshBtn),
        this.wtEl,
        h("div", { class: "work-actions" }, this.strategy, this.mergeBtn, this.discardBtn),
        this.actionStatus,
        this.staleEl),
      h("div", { class: "diff-layout" },
        h("nav", { class: "diff-nav", "aria-label": "Files" }, this.fileList),
        this.filesEl),
      this.reviewBar));
    this.renderHeader();
    this.renderReviewBar();
  }

  async load() {
    this.refreshBtn.disabled = true;
    const [runRes, res] = await Promise.all([
      api("GET", `runs/${enc(this.runId)}`),
      api("GET", `runs/${enc(this.runId)}/diff`),
    ]);
    this.refreshBtn.disabled = false;
    if (this.destroyed) return;
    if (runRes.ok && runRes.data) {
      this.runDetail = runRes.data;
      store.runs.set(this.runId, runRes.data);
      renderRunList();
    }
    if (!res.ok) {
      this.diff = null;
      const text = res.status === 404 ? res.message
        : res.error === "no_worktree" ? `No changes to show: ${res.message}`
          : `The diff could not be read: ${res.message}`;
      this.fileList.replaceChildren();
      this.filesEl.replaceChildren(h("p", { class: "diff-empty", "data-testid": "diff-error" }, text));
      this.renderHeader();
      return;
    }
    this.diff = res.data;
    this.loadedSummary = JSON.stringify([res.data.files_changed, res.data.additions, res.data.deletions]);
    this.staleEl.hidden = true;
    this.renderFiles();
    this.renderHeader();
  }

  onRunsUpdated() {
    this.renderHeader();
    const d = this.run && this.run.diff;
    if (d && this.diff) {
      const now = JSON.stringify([d.files_changed, d.additions, d.deletions]);
      this.staleEl.hidden = now === this.loadedSummary;
    }
  }

  renderHeader() {
    const run = this.run;
    setBadge(this.badge, run && run.state);
    if (run) this.titleEl.textContent = `Changes · ${basename(run.workdir) || shortId(run.id)}`;
    this.summaryEl.textContent = this.diff ? summaryText(this.diff) : "";
    const wt = run && run.worktree;
    const bits = [];
    if (wt) {
      bits.push(h("span", { class: "mono", title: "The run's branch" }, wt.branch));
      bits.push(h("span", {}, "from ", h("span", { class: "mono", title: wt.base }, `${wt.base_ref || "a detached HEAD"} @ ${String(wt.base).slice(0, 8)}`)));
      bits.push(h("span", { class: "mono wt-path", title: "Worktree" }, wt.path));
      if (wt.merged) bits.push(h("span", { class: "tag ok", "data-testid": "merged-tag", title: wt.merged }, `merged ${String(wt.merged).slice(0, 8)}`));
      if (wt.discarded) bits.push(h("span", { class: "tag", "data-testid": "discarded-tag" }, "discarded"));
    }
    this.wtEl.replaceChildren(...bits.flatMap((b, i) => (i ? [h("span", { class: "sep", "aria-hidden": "true" }, "·"), b] : [b])));
    const usable = !!(wt && !wt.discarded);
    const ended = run && run.state === "ended";
    this.mergeBtn.disabled = !usable || this.busy;
    this.strategy.disabled = !usable || this.busy;
    this.mergeBtn.title = wt && wt.base_ref ? `Merge ${wt.branch} into ${wt.base_ref}` : "";
    this.discardBtn.hidden = !usable;
    this.discardBtn.disabled = !ended || this.busy;
    this.discardBtn.title = ended ? "Remove the worktree and its branch" : "Stop the run first";
    this.sendBtn.disabled = !this.drafts.comments.length || this.sending || !!ended;
  }

  setMode(m) {
    if (m === this.mode) return;
    this.mode = m;
    try { localStorage.setItem(MODE_KEY, m); } catch { /* private mode */ }
    for (const b of this.modeBtns) b.setAttribute("aria-pressed", String(b.dataset.testid === `diff-mode-${m}`));
    this.renderFiles();
  }

  // --- files

  renderFiles() {
    if (this.observer) this.observer.disconnect();
    const files = (this.diff && this.diff.files) || [];
    this.fileList.replaceChildren(...files.map((f, i) => {
      const st = STATUS[f.status] || { mark: "?", word: f.status };
      return h("li", {},
        h("a", { href: `#/runs/${enc(this.runId)}/diff`, "data-testid": "diff-file-link", "data-path": f.path, title: f.path,
          onclick: (e) => { e.preventDefault(); this.showFile(i); } },
          h("span", { class: `st st-${f.status}`, title: st.word }, st.mark),
          h("span", { class: "path" }, f.path),
          h("span", { class: "counts" }, f.binary ? "bin" : plusMinus(f.additions, f.deletions))));
    }));
    if (!files.length) {
      this.filesEl.replaceChildren(h("p", { class: "diff-empty", "data-testid": "diff-empty" }, "No changes yet: the worktree is as its base."));
      return;
    }
    const nodes = [];
    if (this.diff.truncated) {
      nodes.push(h("p", { class: "diff-truncated", "data-testid": "diff-truncated", role: "note" },
        "This diff is too large to show whole: some patches (or files) are left out."));
    }
    this.sections = files.map((f, i) => this.fileSection(f, i));
    nodes.push(...this.sections.map((s) => s.el));
    this.filesEl.replaceChildren(...nodes);
    if (typeof IntersectionObserver === "function") {
      this.observer = new IntersectionObserver((entries) => {
        for (const e of entries) if (e.isIntersecting) this.drawSection(Number(e.target.dataset.index));
      }, { root: this.filesEl, rootMargin: LAZY_MARGIN });
      for (const s of this.sections) this.observer.observe(s.el);
    } else {
      this.sections.forEach((_, i) => this.drawSection(i));
    }
  }

  fileSection(f, i) {
    const st = STATUS[f.status] || { mark: "?", word: f.status };
    const body = h("div", { class: "file-body" });
    const lines = String(f.patch || "").split("\n").length;
    // Room for the lines before they are drawn, so the scroll bar is about right.
    body.style.minHeight = `${Math.min(lines, 400) * 18}px`;
    const el = h("section", { class: "diff-file", "data-testid": "diff-file", "data-path": f.path, "data-index": String(i), "data-status": f.status },
      h("header", { class: "file-head" },
        h("span", { class: `st st-${f.status}`, title: st.word }, st.mark),
        h("span", { class: "path mono" }, f.old_path ? `${f.old_path} → ${f.path}` : f.path),
        h("span", { class: "counts" }, f.binary ? "binary" : plusMinus(f.additions, f.deletions))),
      body);
    return { el, body, file: f, drawn: false };
  }

  showFile(i) {
    const s = this.sections && this.sections[i];
    if (!s) return;
    this.drawSection(i);
    s.el.scrollIntoView({ block: "start" });
  }

  drawSection(i, { force = false } = {}) {
    const s = this.sections && this.sections[i];
    if (!s || (s.drawn && !force)) return;
    s.drawn = true;
    const f = s.file;
    s.body.style.minHeight = "";
    const notes = [];
    if (f.binary) notes.push(h("p", { class: "file-note" }, "Binary file — not shown."));
    if (f.patch_truncated) notes.push(h("p", { class: "file-note", "data-testid": "patch-truncated" }, "This file's patch is too large to show whole."));
    if (!s.hunks) {
      s.hunks = f.binary ? [] : parsePatch(f.patch);
      highlightHunks(s.hunks, langOf(f.path));
    }
    const count = s.hunks.reduce((n, hk) => n + hk.lines.length, 0);
    if (count > FOLD_LINES && !s.unfolded) {
      s.body.replaceChildren(...notes, h("button", {
        type: "button", class: "small", "data-testid": "unfold-file",
        onclick: () => { s.unfolded = true; this.drawSection(i, { force: true }); },
      }, `Show ${count} lines`));
      return;
    }
    if (!s.hunks.length && !f.binary && !notes.length) notes.push(h("p", { class: "file-note" }, f.status === "renamed" ? "Renamed, content unchanged." : "No line changes (mode only)."));
    const table = this.mode === "split" ? this.splitTable(f, s.hunks) : this.unifiedTable(f, s.hunks);
    s.body.replaceChildren(...notes, ...(s.hunks.length ? [table] : []));
  }

  redrawFile(path) {
    if (!this.sections) return;
    this.sections.forEach((s, i) => { if (s.file.path === path && s.drawn) this.drawSection(i, { force: true }); });
  }

  lineButton(f, line, n) {
    const target = commentTarget(line);
    if (!target) return h("td", { class: "ln" });
    return h("td", { class: "ln" }, h("button", {
      type: "button", class: "ln-btn", "data-testid": "comment-line", "data-side": target.side, "data-line": String(target.line),
      "aria-label": `Comment on ${f.path} line ${target.line}${target.side === "old" ? " (before)" : ""}`,
      title: "Comment on this line",
      onclick: () => this.openComment(f.path, target),
    }, String(n)));
  }

  unifiedTable(f, hunks) {
    const tbody = h("tbody");
    for (const hunk of hunks) {
      tbody.append(h("tr", { class: "hunk" }, h("td", { colspan: "3" }, hunk.header)));
      for (const line of hunk.lines) {
        const tr = h("tr", { class: `dl ${line.type}` },
          line.old !== null && line.type === "del" ? this.lineButton(f, line, line.old) : h("td", { class: "ln" }, line.old ?? ""),
          line.new !== null ? this.lineButton(f, line, line.new) : h("td", { class: "ln" }),
          codeCell(line, SIGN[line.type] || ""));
        tbody.append(tr);
        this.appendComments(tbody, f.path, commentTarget(line), 3);
      }
    }
    return h("table", { class: "diff-table unified", "data-testid": "diff-table" }, tbody);
  }

  splitTable(f, hunks) {
    const tbody = h("tbody");
    for (const hunk of hunks) {
      tbody.append(h("tr", { class: "hunk" }, h("td", { colspan: "4" }, hunk.header)));
      for (const { left, right } of sideBySide(hunk)) {
        const same = left && left === right;
        const lt = left && left.type === "note" ? "note" : left ? left.type : "none";
        const rt = right && right.type === "note" ? "note" : right ? right.type : "none";
        const tr = h("tr", { class: "dl split" },
          left && left.old !== null && !same ? this.lineButton(f, left, left.old) : h("td", { class: `ln side-${lt}` }, left && left.old !== null ? left.old : ""),
          Object.assign(codeCell(left, SIGN[left && left.type] || ""), { className: `code side-${lt}${left ? "" : " empty"}` }),
          right && right.new !== null ? this.lineButton(f, right, right.new) : h("td", { class: `ln side-${rt}` }),
          Object.assign(codeCell(right, SIGN[right && right.type] || ""), { className: `code side-${rt}${right ? "" : " empty"}` }));
        tbody.append(tr);
        const places = [left && commentTarget(left), right && right !== left ? commentTarget(right) : null];
        for (const p of places) this.appendComments(tbody, f.path, p, 4);
      }
    }
    return h("table", { class: "diff-table split", "data-testid": "diff-table" }, tbody);
  }

  /** The drafts and the open comment box at one line, as rows after it. */
  appendComments(tbody, path, target, span) {
    if (!target) return;
    const key = placeKey(target);
    for (const c of this.drafts.comments) {
      if (c.path !== path || placeKey(c) !== key) continue;
      tbody.append(h("tr", { class: "comment-row" }, h("td", { colspan: String(span) },
        h("div", { class: "comment draft", "data-testid": "comment-draft" },
          h("div", { class: "comment-text" }, c.text),
          h("button", { type: "button", class: "small", "data-testid": "comment-remove", onclick: () => this.removeDraft(c) }, "Remove")))));
    }
    const box = this.openBox;
    if (box && box.path === path && placeKey(box) === key) tbody.append(this.commentBox(box, span));
  }

  commentBox(box, span) {
    const input = h("textarea", { class: "comment-input", "data-testid": "comment-input", rows: "3", "aria-label": `Comment on ${box.path} line ${box.line}`, placeholder: "What should the agent change here?" });
    const add = () => {
      const text = input.value.trim();
      if (!text) { input.focus(); return; }
      this.drafts.comments.push({ path: box.path, line: box.line, side: box.side, text });
      this.openBox = null;
      this.saveDrafts();
      this.redrawFile(box.path);
      this.renderReviewBar();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); add(); }
      if (e.key === "Escape") { e.preventDefault(); this.closeComment(); }
    });
    const row = h("tr", { class: "comment-row" }, h("td", { colspan: String(span) },
      h("div", { class: "comment box" }, input,
        h("div", { class: "comment-actions" },
          h("button", { type: "button", class: "primary small", "data-testid": "comment-add", onclick: add }, "Add comment"),
          h("button", { type: "button", class: "small", "data-testid": "comment-cancel", onclick: () => this.closeComment() }, "Cancel")))));
    queueMicrotask(() => input.focus());
    return row;
  }

  openComment(path, target) {
    const prev = this.openBox;
    this.openBox = { path, ...target };
    if (prev && prev.path !== path) this.redrawFile(prev.path);
    this.redrawFile(path);
  }

  closeComment() {
    const prev = this.openBox;
    this.openBox = null;
    if (prev) this.redrawFile(prev.path);
  }

  removeDraft(c) {
    this.drafts.comments = this.drafts.comments.filter((x) => x !== c);
    this.saveDrafts();
    this.redrawFile(c.path);
    this.renderReviewBar();
  }

  saveDrafts() {
    try {
      if (this.drafts.comments.length || this.drafts.summary) sessionStorage.setItem(draftKey(this.runId), JSON.stringify(this.drafts));
      else sessionStorage.removeItem(draftKey(this.runId));
    } catch { /* storage full or off: the drafts live in the page */ }
  }

  // --- review

  renderReviewBar() {
    const n = this.drafts.comments.length;
    this.reviewCount.textContent = n ? `${n} comment${n === 1 ? "" : "s"}` : "No comments yet — click a line number to comment";
    this.renderHeader();
  }

  setReviewStatus(text, kind = "") { showStatus(this.reviewStatus, "review-status", text, kind); }

  async sendReview() {
    if (this.sending || !this.drafts.comments.length) return;
    this.sending = true;
    this.renderHeader();
    this.setReviewStatus("Sending…");
    const body = { comments: this.drafts.comments.map(({ path, line, side, text }) => ({ path, line, side, text })) };
    const summary = this.drafts.summary.trim();
    if (summary) body.summary = summary;
    const res = await api("POST", `runs/${enc(this.runId)}/review`, body);
    this.sending = false;
    if (this.destroyed) return;
    if (res.ok) {
      const n = body.comments.length;
      const sent = this.drafts.comments;
      this.drafts = { comments: [], summary: "" };
      this.summaryInput.value = "";
      this.saveDrafts();
      for (const p of new Set(sent.map((c) => c.path))) this.redrawFile(p);
      this.renderReviewBar();
      this.setReviewStatus([`${n} comment${n === 1 ? "" : "s"} sent to ${agentName(this.run)}. `,
        h("a", { href: `#/runs/${enc(this.runId)}`, "data-testid": "review-to-chat" }, "See the chat")], "ok");
      return;
    }
    this.renderHeader();
    this.setReviewStatus(`Not sent: ${res.message}`, "error");
  }

  // --- merge and discard

  setActionStatus(nodes, kind = "") { showStatus(this.actionStatus, "action-status", nodes, kind); }

  fileListNote(text, files) {
    return [h("p", {}, text), h("ul", { class: "status-files", "data-testid": "work-status-files" }, ...(files || []).map((p) => h("li", { class: "mono" }, p)))];
  }

  async merge() {
    const wt = this.run && this.run.worktree;
    if (!wt || this.busy) return;
    const strategy = this.strategy.value;
    if (!confirm(`${strategy === "squash" ? "Squash-merge" : "Merge"} ${wt.branch} into ${wt.base_ref || "its base"}? The agent's uncommitted changes are committed first.`)) return;
    this.busy = true;
    this.renderHeader();
    this.setActionStatus("Merging…");
    const res = await api("POST", `runs/${enc(this.runId)}/merge`, { strategy });
    this.busy = false;
    if (this.destroyed) return;
    if (res.ok) {
      if (res.data && res.data.run) store.runs.set(this.runId, res.data.run);
      const commit = res.data && res.data.commit ? String(res.data.commit) : "";
      this.setActionStatus(`Merged into ${wt.base_ref || "the base"} as ${commit.slice(0, 10)}.`, "ok");
      this.actionStatus.dataset.commit = commit;
      refreshRunsNow();
      this.renderHeader();
      return;
    }
    const files = res.data && Array.isArray(res.data.files) ? res.data.files : null;
    if (res.error === "merge_conflict") {
      this.setActionStatus(this.fileListNote(`Not merged — these files conflict with ${wt.base_ref || "the base"} (nothing was changed):`, files), "error");
    } else if (res.error === "base_dirty") {
      this.setActionStatus(this.fileListNote(`Not merged — the checkout of ${wt.base_ref || "the base"} has uncommitted changes in files the merge writes (nothing was changed):`, files), "error");
    } else {
      this.setActionStatus(`Not merged: ${res.message}`, "error");
    }
    this.actionStatus.dataset.code = res.error || "";
    this.renderHeader();
  }

  async discard() {
    const wt = this.run && this.run.worktree;
    if (!wt || this.busy) return;
    if (!confirm(`Discard this run's work? This deletes the worktree ${wt.path} and the branch ${wt.branch}, with everything in them.`)) return;
    this.busy = true;
    this.renderHeader();
    const res = await api("POST", `runs/${enc(this.runId)}/discard`, {});
    this.busy = false;
    if (this.destroyed) return;
    if (res.ok) {
      if (res.data) store.runs.set(this.runId, res.data);
      this.setActionStatus("Discarded: the worktree and its branch are gone.", "ok");
      refreshRunsNow();
      this.load();
      return;
    }
    this.setActionStatus(`Not discarded: ${res.message}`, "error");
    this.renderHeader();
  }

  destroy() {
    this.destroyed = true;
    if (this.observer) this.observer.disconnect();
  }
}
