// Dialog cards: the answerable ones (one question; a plan, permission or generic prompt
// with options) and the read-only ones (several questions, a prompt lab cannot answer,
// "needs input"). Untrusted text only ever goes in as text nodes; the plan's markdown
// goes through renderMarkdown (escapes everything first).
import { enc } from "./api.js";
import { attachBox, attachCommand, h, safeLink, uid } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { firstLine } from "./messages.js";
import { isStoppedOnError } from "./waiting.js";

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

/**
 * What every answerable card shares: its status line, its focus on open, and how its
 * option buttons look while an answer is on its way. A card sets `this.status`,
 * `this.buttons` (the option buttons, roving tab stop) and `this.el`.
 */
class Card {
  setStatus(text, tone = "") {
    this.status.textContent = text || "";
    this.status.className = `dialog-status${tone ? ` ${tone}` : ""}`;
  }

  focusFirst() {
    const b = this.buttons.find((x) => x.tabIndex === 0) || this.buttons[0];
    if (b && !b.disabled) b.focus();
  }

  markButtons(busy, chosen = []) {
    this.buttons.forEach((b, i) => {
      b.disabled = busy;
      b.classList.toggle("chosen", busy && chosen.includes(i));
    });
  }
}

/** The card for a single answerable question: native buttons, Other, status. */
export class QuestionCard extends Card {
  constructor(dialog, { onAnswer, agent = "The agent" }) {
    super();
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
      h("div", { class: "card-title" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), `${agent} is asking`),
      sourceNote(dialog),
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
    rovingKey(e, this.buttons, (j) => this.setRoving(j));
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


  setBusy(busy, chosen = []) {
    this.busy = busy;
    this.markButtons(busy, chosen);
    this.otherInput.disabled = busy;
    this.otherSubmit.disabled = busy;
    if (this.multiSubmit) this.multiSubmit.disabled = busy || this.selected.size === 0;
    this.el.classList.toggle("busy", busy);
    this.el.setAttribute("aria-busy", String(busy));
  }

}

/**
 * The card for several answerable questions (the agent's tabbed picker): one answer per
 * question — an option, several for a multiple-choice one, or typed text — then one
 * "Submit answers", sent as one answer per question in order.
 */
export class QuestionsCard extends Card {
  constructor(dialog, { onAnswer, agent = "The agent" }) {
    super();
    this.dialog = dialog;
    const titleId = uid("q");
    const statusId = uid("st");
    this.status = h("p", { class: "dialog-status", "data-testid": "dialog-status", id: statusId, role: "status", "aria-live": "polite" });
    const total = dialog.questions.length;
    this.parts = dialog.questions.map((q, qi) => {
      const part = { multi: !!q.multi_select, selected: new Set(), buttons: [] };
      const labelId = uid("qt");
      const group = h("div", { class: "options", role: "group", "aria-labelledby": labelId });
      part.buttons = (q.options || []).map((opt, i) => {
        const btn = h("button", {
          type: "button", class: "option", "data-testid": "dialog-option", "data-question": qi, "data-index": i,
          "aria-pressed": "false",
          onclick: () => {
            if (this.busy) return;
            if (part.multi) {
              if (part.selected.has(i)) part.selected.delete(i); else part.selected.add(i);
            } else {
              part.selected = new Set(part.selected.has(i) ? [] : [i]);
            }
            if (part.selected.size) part.other.value = "";
            this.refresh();
          },
        },
          h("span", { class: "opt-key", "aria-hidden": "true" }, part.multi ? "" : String(i + 1)),
          h("span", { class: "opt-text" },
            h("span", { class: "opt-label" }, opt.label || `Option ${i + 1}`),
            opt.description ? h("span", { class: "opt-desc" }, opt.description) : null));
        group.append(btn);
        return btn;
      });
      const otherId = uid("other");
      part.other = h("input", {
        id: otherId, type: "text", class: "other-input", "data-testid": "dialog-other-input", "data-question": qi,
        autocomplete: "off", placeholder: "Or type your own answer",
        oninput: () => { if (part.other.value.trim()) part.selected.clear(); this.refresh(); },
      });
      part.el = h("div", { class: "q-part", "data-testid": "dialog-question", "data-question": qi },
        ...questionBlock(q, qi, total, labelId),
        group,
        h("div", { class: "other" }, h("label", { for: otherId }, "Other"), part.other));
      return part;
    });
    this.submit = h("button", {
      type: "button", class: "primary", "data-testid": "dialog-submit-answers", disabled: true,
      onclick: () => {
        const answers = this.answers();
        if (this.busy || !answers) return;
        onAnswer(answers, []);
      },
    }, "Submit answers");
    this.el = h("section", {
      class: "dialog-card kind-question", role: "group", "aria-labelledby": titleId, "aria-describedby": statusId,
      "data-testid": "dialog-card", "data-kind": "question", "data-tool-id": dialog.tool_id, "data-answerable": "true",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), `${agent} is asking ${total} questions`),
      sourceNote(dialog),
      ...this.parts.map((p) => p.el),
      h("div", { class: "multi-actions" }, this.submit),
      this.status);
  }

  /** One answer per question, or null while one is missing. */
  answers() {
    const out = [];
    for (const p of this.parts) {
      const text = p.other.value.trim();
      if (text) out.push({ other: text });
      else if (p.multi && p.selected.size) out.push({ options: [...p.selected].sort((a, b) => a - b) });
      else if (!p.multi && p.selected.size) out.push({ option: [...p.selected][0] });
      else return null;
    }
    return out;
  }

  refresh() {
    for (const p of this.parts) {
      p.buttons.forEach((b, i) => b.setAttribute("aria-pressed", String(p.selected.has(i))));
    }
    const ready = !!this.answers();
    this.submit.disabled = this.busy || !ready;
    this.setStatus(ready ? "" : "Answer every question, then submit.");
  }

  focusFirst() {
    const b = this.parts[0] && this.parts[0].buttons[0];
    if (b && !b.disabled) b.focus();
  }

  setBusy(busy) {
    this.busy = busy;
    for (const p of this.parts) {
      p.buttons.forEach((b) => { b.disabled = busy; });
      p.other.disabled = busy;
    }
    this.submit.disabled = busy || !this.answers();
    this.el.classList.toggle("busy", busy);
    this.el.setAttribute("aria-busy", String(busy));
  }

}

// ------------------------------------------------------------------ shared parts

/** Whether this page answers `d` with a card of its own: "question", "questions", "choice" or null. */
export function answerableCard(d) {
  if (!d || !d.answerable) return null;
  if (d.kind === "question") {
    if (!Array.isArray(d.questions) || !d.questions.length) return null;
    return d.questions.length === 1 ? "question" : "questions";
  }
  if (["plan", "permission", "generic"].includes(d.kind) && Array.isArray(d.options) && d.options.length) return "choice";
  return null;
}

/** Lab's kind of a block (`blocked.kind`) in words; a kind this page does not know, as sent. */
export function blockedKindText(kind) {
  const words = { needs_input: "needs input", idle: "waiting for a message", error: "error" };
  return kind ? words[kind] || String(kind) : "";
}

/** A small note when lab read the prompt off the agent's screen. */
function sourceNote(d) {
  if (!d || d.source !== "screen") return null;
  return h("p", { class: "source-note", "data-testid": "dialog-source" }, "read from the agent's screen");
}

const KIND = {
  plan: { icon: "▤", cls: "kind-plan" },
  permission: { icon: "⚠", cls: "kind-permission" },
  generic: { icon: "!", cls: "kind-generic" },
  question: { icon: "?", cls: "kind-question" },
};

function cardTitle(d, agent) {
  switch (d.kind) {
    case "plan": return `${agent} has a plan and is waiting for approval`;
    case "permission": return `${agent} asks for permission`;
    case "generic": return (d.generic && d.generic.title) || `${agent} is waiting`;
    default: return `${agent} is asking`;
  }
}

/** What a plan, permission or generic prompt shows above its options. */
function promptBody(d) {
  if (d.kind === "plan") {
    return [h("div", { class: "plan md", "data-testid": "dialog-plan", tabindex: "0", "aria-label": "Plan",
      html: renderMarkdown(d.plan || "_(The plan text is not available.)_") })];
  }
  if (d.kind === "permission") {
    const p = d.permission || {};
    return [
      h("div", { class: "perm-tool" },
        h("span", { class: "chip", "data-testid": "permission-tool" }, String(p.tool || d.tool_name || "tool"))),
      h("pre", { class: "perm-summary", "data-testid": "permission-summary", tabindex: "0" },
        h("code", {}, String(p.summary ?? ""))),
      p.reason ? h("p", { class: "perm-reason", "data-testid": "permission-reason" }, String(p.reason)) : null,
    ];
  }
  if (d.kind === "generic") {
    const g = d.generic || {};
    return [g.text ? h("pre", { class: "generic-text", "data-testid": "generic-text", tabindex: "0" }, String(g.text)) : null];
  }
  return [];
}

/** Arrow keys, Home and End move the focus among `buttons` (one tab stop). */
function rovingKey(e, buttons, setRoving) {
  const n = buttons.length;
  const i = buttons.indexOf(document.activeElement);
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
  setRoving(j);
  buttons[j].focus();
}

/**
 * The card for an answerable plan, permission or generic prompt: its content, then its
 * options as buttons in order. The option at `feedback_option` asks for text first
 * and answers `{"feedback": {"option", "text"}}`; every other one `{"option": i}`.
 */
export class ChoiceCard extends Card {
  constructor(dialog, { onAnswer, agent = "The agent" }) {
    super();
    this.dialog = dialog;
    const kind = KIND[dialog.kind] || KIND.generic;
    const titleId = uid("ct");
    const statusId = uid("st");
    const fb = Number.isInteger(dialog.feedback_option) ? dialog.feedback_option : null;
    this.feedbackIndex = fb;

    this.status = h("p", { class: "dialog-status", "data-testid": "dialog-status", id: statusId, role: "status", "aria-live": "polite" });
    const optionsGroup = h("div", { class: "options", role: "group", "aria-label": "Options" });
    this.buttons = dialog.options.map((opt, i) => {
      const labelId = uid("ol");
      const descId = uid("od");
      const isFb = i === fb;
      const btn = h("button", {
        type: "button", class: `option${isFb ? " has-feedback" : ""}`, "data-testid": "dialog-option", "data-index": i,
        "data-feedback": isFb ? "true" : null,
        "aria-labelledby": labelId, "aria-describedby": opt.description ? descId : null,
        "aria-expanded": isFb ? "false" : null,
        tabindex: i === 0 ? "0" : "-1",
        onclick: () => {
          if (this.busy) return;
          if (isFb) this.toggleFeedback(btn);
          else onAnswer([{ option: i }], [i]);
        },
        onfocus: () => this.setRoving(i),
      },
        h("span", { class: "opt-key", "aria-hidden": "true" }, String(i + 1)),
        h("span", { class: "opt-text" },
          h("span", { class: "opt-label", id: labelId }, opt.label || `Option ${i + 1}`),
          opt.description ? h("span", { class: "opt-desc", id: descId }, opt.description) : null,
          isFb && !opt.description ? h("span", { class: "opt-desc" }, "Asks you what to say") : null));
      optionsGroup.append(btn);
      return btn;
    });
    optionsGroup.addEventListener("keydown", (e) => rovingKey(e, this.buttons, (j) => this.setRoving(j)));

    this.feedbackBox = null;
    if (fb !== null && this.buttons[fb]) {
      const inputId = uid("fb");
      const fbLabel = (dialog.options[fb] && dialog.options[fb].label) || "Feedback";
      this.feedbackInput = h("textarea", {
        id: inputId, class: "feedback-input", "data-testid": "dialog-feedback-input", rows: "2",
        placeholder: "What should happen instead?",
        oninput: () => { if (this.status.classList.contains("error")) this.setStatus(""); },
        onkeydown: (e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.submitFeedback(onAnswer); }
          if (e.key === "Escape") { e.preventDefault(); this.toggleFeedback(this.buttons[fb], false); }
        },
      });
      this.feedbackSubmit = h("button", {
        type: "button", class: "primary", "data-testid": "dialog-feedback-submit",
        onclick: () => this.submitFeedback(onAnswer),
      }, "Send");
      this.feedbackBox = h("div", { class: "feedback-box", "data-testid": "dialog-feedback", hidden: true },
        h("label", { for: inputId }, fbLabel),
        h("div", { class: "feedback-row" }, this.feedbackInput, this.feedbackSubmit));
      this.buttons[fb].setAttribute("aria-controls", uid("fbbox"));
      this.feedbackBox.id = this.buttons[fb].getAttribute("aria-controls");
    }

    this.el = h("section", {
      class: `dialog-card ${kind.cls}`, role: "group", "aria-labelledby": titleId, "aria-describedby": statusId,
      "data-testid": "dialog-card", "data-kind": dialog.kind, "data-tool-id": dialog.tool_id, "data-answerable": "true",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, kind.icon),
        h("span", { "data-testid": "dialog-title" }, cardTitle(dialog, agent))),
      sourceNote(dialog),
      ...promptBody(dialog),
      optionsGroup,
      this.feedbackBox,
      this.status);
  }

  setRoving(i) {
    this.buttons.forEach((b, k) => { b.tabIndex = k === i ? 0 : -1; });
  }

  toggleFeedback(btn, open = this.feedbackBox.hidden) {
    this.feedbackBox.hidden = !open;
    btn.setAttribute("aria-expanded", String(open));
    if (open) this.feedbackInput.focus();
    else btn.focus();
  }

  submitFeedback(onAnswer) {
    if (this.busy) return;
    const text = this.feedbackInput.value.trim();
    if (!text) {
      this.setStatus("Type what to say first.", "error");
      this.feedbackInput.focus();
      return;
    }
    onAnswer([{ feedback: { option: this.feedbackIndex, text } }], [this.feedbackIndex]);
  }


  setBusy(busy, chosen = []) {
    this.busy = busy;
    this.markButtons(busy, chosen);
    if (this.feedbackBox) {
      this.feedbackInput.disabled = busy;
      this.feedbackSubmit.disabled = busy;
    }
    this.el.classList.toggle("busy", busy);
    this.el.setAttribute("aria-busy", String(busy));
  }

}

/** Read-only cards: several questions, a prompt lab cannot answer, or "needs input". */
export function readOnlyCard(view, runId, run, agent = "The agent") {
  const d = view.pending_dialog;
  const titleId = uid("ct");
  const status = h("p", { class: "dialog-status", "data-testid": "dialog-status", role: "status", "aria-live": "polite" });

  if (d && (d.kind === "plan" || d.kind === "permission" || d.kind === "generic")) {
    const kind = KIND[d.kind];
    const opts = Array.isArray(d.options) ? d.options : [];
    const el = h("section", {
      class: `dialog-card ${kind.cls} readonly`, role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": d.kind, "data-tool-id": d.tool_id, "data-answerable": "false",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, kind.icon),
        h("span", { "data-testid": "dialog-title" }, cardTitle(d, agent))),
      sourceNote(d),
      ...promptBody(d),
      opts.length ? h("ul", { class: "ro-options" },
        ...opts.map((o, k) => h("li", { "data-testid": "dialog-readonly-option", "data-index": k },
          h("span", { class: "opt-label" }, String(o.label ?? "")),
          o.description ? h("span", { class: "opt-desc" }, String(o.description)) : null))) : null,
      dialogHint(view, runId, run),
      status);
    return { el, status };
  }

  if (d && d.kind === "question") {
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
    const title = qs.length > 1 ? `${agent} is asking ${qs.length} questions` : `${agent} is asking`;
    const el = h("section", {
      class: "dialog-card kind-question readonly", role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": "question", "data-tool-id": d.tool_id, "data-answerable": "false",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), title),
      sourceNote(d),
      ...blocks,
      dialogHint(view, runId, run),
      status);
    return { el, status };
  }

  // The last turn ended on an error: what the API said, and that sending again retries.
  if (!d && isStoppedOnError(view)) {
    const b = view.blocked || {};
    const el = h("section", {
      class: "dialog-card kind-error", role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": "error",
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "!"),
        `${agent} stopped on an error`),
      h("p", { class: "blocked" }, h("span", { "data-testid": "blocked-message" }, String(b.message || ""))),
      h("p", { class: "dialog-hint" }, "Send a message below to try again."),
      status);
    return { el, status };
  }

  // A dialog of a kind this page does not know (its kind and message, if any), or
  // question/needs_input with no structured dialog (what the agent said).
  const b = view.blocked || {};
  const type = d ? { testid: "dialog-kind", text: String(d.kind || "") } : { testid: "blocked-type", text: blockedKindText(b.kind) };
  const g = (d && d.generic) || {};
  const message = d ? { testid: "dialog-message", text: g.title || firstLine(g.text) || b.message } : { testid: "blocked-message", text: b.message };
  const el = h("section", {
    class: "dialog-card kind-generic", role: "region", "aria-labelledby": titleId,
    "data-testid": "dialog-card", "data-kind": "generic", "data-tool-id": d ? d.tool_id : null,
  },
    h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "!"),
      `${agent} needs input — open the terminal`),
    message.text || type.text ? h("p", { class: "blocked" },
      type.text ? h("span", { class: "chip", "data-testid": type.testid }, type.text) : null,
      message.text ? h("span", { "data-testid": message.testid }, String(message.text)) : null) : null,
    dialogHint(view, runId, run),
    status);
  return { el, status };
}
