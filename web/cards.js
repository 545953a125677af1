// Dialog cards: the answerable question card and the read-only ones (several
// questions, a plan, "needs input").
import { enc } from "./api.js";
import { attachBox, attachCommand, h, safeLink, uid } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

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
export class QuestionCard {
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
      h("div", { class: "card-title" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "?"), "The agent is asking"),
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
export function readOnlyCard(view, runId, run) {
  const d = view.pending_dialog;
  const titleId = uid("ct");
  const status = h("p", { class: "dialog-status", "data-testid": "dialog-status", role: "status", "aria-live": "polite" });

  if (d && d.kind === "plan") {
    const el = h("section", {
      class: "dialog-card kind-plan", role: "region", "aria-labelledby": titleId,
      "data-testid": "dialog-card", "data-kind": "plan", "data-tool-id": d.tool_id,
    },
      h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "▤"),
        "The agent has a plan and is waiting for approval"),
      h("div", { class: "plan md", "data-testid": "dialog-plan", tabindex: "0", "aria-label": "Plan",
        html: renderMarkdown(d.plan || "_(The plan text is not available.)_") }),
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
    const title = qs.length > 1 ? `The agent is asking ${qs.length} questions` : "The agent is asking";
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

  // Generic: a dialog of a kind this page has no card for (its kind and message, if
  // any), or question/needs_input with no structured dialog (what the agent said).
  const b = view.blocked || {};
  const type = d ? { testid: "dialog-kind", text: String(d.kind || "") } : { testid: "blocked-type", text: b.notification_type };
  const message = d ? { testid: "dialog-message", text: d.message || d.title || b.message } : { testid: "blocked-message", text: b.message };
  const el = h("section", {
    class: "dialog-card kind-generic", role: "region", "aria-labelledby": titleId,
    "data-testid": "dialog-card", "data-kind": "generic", "data-tool-id": d ? d.tool_id : null,
  },
    h("div", { class: "card-title", id: titleId }, h("span", { class: "card-icon", "aria-hidden": "true" }, "!"),
      "The agent needs input — open the terminal"),
    message.text || type.text ? h("p", { class: "blocked" },
      type.text ? h("span", { class: "chip", "data-testid": type.testid }, type.text) : null,
      message.text ? h("span", { "data-testid": message.testid }, String(message.text)) : null) : null,
    dialogHint(view, runId, run),
    status);
  return { el, status };
}
