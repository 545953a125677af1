// Answer rules: `#/rules` (and `#/rules/<id>`, that rule opened): every rule, what it
// matches, how many prompts it answered today, its dry run switched, edited (as the
// JSON the API takes) or removed; lab.toml's shown, not changed. docs/rules.md.
import { api, enc } from "./api.js";
import { h } from "./dom.js";

/** The match as one line: `tool=Bash pattern=cargo test workdir=…`. */
function matchText(m) {
  return Object.entries(m || {}).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(",") : v}`).join("  ") || "(every prompt)";
}

/** What PUT takes: the rule without what lab keeps beside it. */
function editable(r) {
  const { id, shared, answered_today, ...rest } = r; // eslint-disable-line no-unused-vars
  return rest;
}

export class RulesView {
  constructor(root, { open } = {}) {
    this.root = root;
    this.open = open || "";
    this.list = h("div", { class: "rules-list", "data-testid": "rules-list" });
    this.status = h("p", { class: "muted", role: "status" }, "Loading…");
    root.replaceChildren(h("section", { class: "rules-view", "data-testid": "rules-view" },
      h("header", { class: "run-header" }, h("div", { class: "run-header-top" }, h("h1", { class: "run-title" }, "Answer rules"))),
      h("p", { class: "muted" }, "lab answers the prompts these match by itself, through the same checks as your answers; a deny beats an allow, and an allow never reaches a chained command. Make one from a permission card (“Always allow this…”) or with `lab rules add`."),
      this.status, this.list));
    this.load();
  }

  async load() {
    const res = await api("GET", "rules");
    if (this.destroyed) return;
    if (!res.ok) { this.status.textContent = res.message; return; }
    const rules = res.data || [];
    this.status.textContent = rules.length ? `${rules.length} rules; answered today: ${rules.reduce((n, r) => n + (r.answered_today || 0), 0)} prompts` : "No rules yet.";
    this.list.replaceChildren(...rules.map((r) => this.row(r)));
  }

  row(r) {
    const status = h("span", { class: "rule-status", role: "status", "aria-live": "polite" });
    const put = async (body) => {
      const res = await api("PUT", `rules/${enc(r.id)}`, body);
      if (res.ok) this.load(); else status.textContent = res.message;
    };
    const editor = h("textarea", { class: "rule-json", rows: "8", "data-testid": "rule-json", spellcheck: "false" }, JSON.stringify(editable(r), null, 2));
    const edit = h("details", { class: "rule-edit", open: this.open === r.id ? true : null },
      h("summary", { "data-testid": "rule-edit" }, "Edit"),
      editor,
      h("button", { type: "button", class: "primary", "data-testid": "rule-save", onclick: () => {
        let body;
        try { body = JSON.parse(editor.value); } catch (e) { status.textContent = `Not JSON: ${e.message}`; return; }
        put(body);
      } }, "Save"));
    const dry = h("input", { type: "checkbox", "data-testid": "rule-dry-run", checked: r.dry_run ? true : null, disabled: r.shared ? true : null,
      onchange: () => put({ ...editable(r), dry_run: dry.checked }) });
    const remove = h("button", { type: "button", class: "secondary", "data-testid": "rule-delete", disabled: r.shared ? true : null,
      onclick: async () => {
        const res = await api("DELETE", `rules/${enc(r.id)}`, {});
        if (res.ok) this.load(); else status.textContent = res.message;
      } }, "Remove");
    return h("article", { class: `rule-row action-${r.action}`, "data-testid": "rule", "data-rule": r.id, id: `rule-${r.id}` },
      h("div", { class: "rule-head" },
        h("strong", { class: "rule-action" }, r.action), " ", h("span", { class: "rule-name" }, r.name),
        r.shared ? h("span", { class: "chip" }, "lab.toml") : null,
        h("span", { class: "muted", "data-testid": "rule-today" }, ` · ${r.answered_today || 0} today`)),
      h("div", { class: "rule-match muted" }, matchText(r.match)),
      r.message ? h("div", { class: "rule-message" }, `Tells the agent: ${r.message}`) : null,
      h("div", { class: "rule-controls" },
        h("label", {}, dry, " Dry run (say what it would answer, answer nothing)"),
        r.shared ? h("span", { class: "muted" }, "Change it in lab.toml") : remove),
      r.shared ? null : edit,
      status);
  }

  destroy() { this.destroyed = true; }
}
