// The audit log: `#/audit` (and `#/audit?run=<id>`), every operator action, who did it
// (a device, or the token's holder) and whether lab applied or refused it, newest
// first, from GET /audit.
import { api, enc } from "./api.js";
import { h, shortId } from "./dom.js";

function who(actor) {
  if (actor && typeof actor === "object") return actor.device_name || actor.device_id;
  return String(actor || "");
}

function detailText(d) {
  if (d === null || d === undefined) return "";
  if (typeof d === "object" && Object.keys(d).length === 0) return "";
  return typeof d === "string" ? d : JSON.stringify(d);
}

export class AuditView {
  constructor(root, { run } = {}) {
    this.root = root;
    this.run = run || "";
    this.runInput = h("input", { type: "search", placeholder: "run id", value: this.run, "data-testid": "audit-run", "aria-label": "Only this run's actions" });
    this.body = h("tbody", {});
    this.status = h("p", { class: "muted", role: "status" }, "Loading…");
    const form = h("form", { class: "audit-filter", onsubmit: (e) => { e.preventDefault(); this.run = this.runInput.value.trim(); this.load(); } },
      this.runInput, h("button", { type: "submit", class: "secondary" }, "Filter"));
    root.replaceChildren(h("section", { class: "audit-view", "data-testid": "audit-view" },
      h("header", { class: "run-header" }, h("div", { class: "run-header-top" }, h("h1", { class: "run-title" }, "Audit log"))),
      form, this.status,
      h("div", { class: "audit-scroll" }, h("table", { class: "audit-table", "data-testid": "audit-table" },
        h("thead", {}, h("tr", {}, ["Time", "Who", "Action", "Run", "Outcome", "Detail"].map((t) => h("th", {}, t)))),
        this.body))));
    this.load();
  }

  async load() {
    const q = this.run ? `?run=${enc(this.run)}&limit=1000` : "?limit=1000";
    const res = await api("GET", `audit${q}`);
    if (this.destroyed) return;
    if (!res.ok) { this.status.textContent = res.message; return; }
    const entries = (res.data.entries || []).slice().reverse();
    this.status.textContent = entries.length ? `${entries.length} actions, newest first` : "No actions yet.";
    this.body.replaceChildren(...entries.map((e) => h("tr", { "data-testid": "audit-entry", "data-action": e.action, "data-outcome": e.outcome },
      h("td", {}, new Date(e.t).toLocaleString()),
      h("td", {}, who(e.actor)),
      h("td", {}, e.action),
      h("td", {}, e.run_id ? h("a", { href: `#/runs/${enc(e.run_id)}` }, shortId(e.run_id)) : ""),
      h("td", { class: e.outcome === "refused" ? "refused" : "" }, e.outcome === "refused" ? `refused: ${e.reason || ""}` : "applied"),
      h("td", { class: "audit-detail" }, detailText(e.detail)))));
  }

  destroy() { this.destroyed = true; }
}
