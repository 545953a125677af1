// A sandboxed run's network, in its view: a notice in the dock for each destination its
// agent was refused, with a one-click "Allow" (the agent's retry then passes), and in
// the header the run's sandbox and its allowlist, which the operator edits
// (PUT /runs/{id}/egress). A run without a sandbox shows neither.
import { api, enc } from "./api.js";
import { ago, fullTime, h } from "./dom.js";

/** How many refused destinations the dock shows one by one. */
const MAX_NOTICES = 5;

/** `host:port`, with brackets around an IPv6 host. */
export function destOf(s) {
  const host = String(s.host || "");
  return `${host.includes(":") ? `[${host}]` : host}:${s.port}`;
}

export class RunEgress {
  constructor({ runId }) {
    this.runId = runId;
    this.egress = null;
    this.sandbox = "none";
    this.busy = false;
    /** The refused destinations, above the dialog area. */
    this.notices = h("div", { class: "egress-notices", "data-testid": "egress-refused", role: "status", hidden: true });
    this.summary = h("summary", { "data-testid": "sandbox-summary" });
    this.list = h("ul", { class: "egress-allow", "data-testid": "egress-allow" });
    this.addInput = h("input", {
      type: "text", placeholder: "host:port", "aria-label": "A destination to allow (host:port)",
      "data-testid": "egress-add-input", class: "mono",
    });
    this.error = h("p", { class: "header-error", role: "alert", "data-testid": "egress-error", hidden: true });
    this.reached = h("p", { class: "muted small", "data-testid": "egress-reached" });
    this.panel = h("details", { class: "sandbox-panel", "data-testid": "sandbox-panel", hidden: true },
      this.summary,
      h("p", { class: "muted small" }, "The agent reaches the network only through lab, and only these destinations:"),
      this.list,
      h("form", { class: "egress-add", onsubmit: (e) => { e.preventDefault(); this.add(this.addInput.value.trim()); } },
        this.addInput, h("button", { type: "submit", "data-testid": "egress-add" }, "Allow")),
      this.reached,
      this.error);
  }

  /** Show `run`'s sandbox and `egress` (the view's, else the run's own). */
  render(run, egress) {
    this.sandbox = (run && run.sandbox) || "none";
    this.egress = egress || (run && run.egress) || null;
    const on = this.sandbox !== "none" && !!this.egress;
    this.panel.hidden = !on;
    this.notices.hidden = true;
    if (!on) return;
    const e = this.egress;
    const allow = Array.isArray(e.allow) ? e.allow : [];
    const refused = Array.isArray(e.refused) ? e.refused : [];
    const reached = Array.isArray(e.reached) ? e.reached : [];
    const others = e.refused_others && e.refused_others.count ? e.refused_others : null;
    const sig = JSON.stringify([this.sandbox, allow, refused, reached, others]);
    if (this.panel.dataset.sig === sig) { this.notices.hidden = !refused.length && !others; return; }
    this.panel.dataset.sig = sig;
    this.summary.textContent = `Sandbox: ${this.sandbox} · ${allow.length} allowed${refused.length ? ` · ${refused.length} refused` : ""}`;
    this.list.replaceChildren(...allow.map((a) => h("li", {},
      h("span", { class: "mono" }, a), " ",
      h("button", { type: "button", class: "link-button", "data-testid": "egress-remove", "data-dest": a,
        onclick: () => this.put(allow.filter((x) => x !== a)) }, "Remove"))));
    this.reached.textContent = reached.length
      ? `Reached: ${reached.map((s) => `${destOf(s)} (${s.count}×)`).join(", ")}`
      : "Nothing reached yet.";
    // A few, each with why (a flood of refused names would fill the dock): first those
    // Allow cannot fix (refused for another reason), then the most recent; the rest
    // counted in one line.
    const rank = (s) => (s.why ? 0 : 1);
    const shown = [...refused]
      .sort((a, b) => rank(a) - rank(b) || String(b.last || "").localeCompare(String(a.last || "")))
      .slice(0, MAX_NOTICES);
    const notices = shown.map((s) => {
      const dest = destOf(s);
      const when = ` (${s.count}×, last ${s.last ? ago(s.last) : "?"})`;
      // Refused for another reason than the allowlist (a name with no public address):
      // allowing it changes nothing, so no button; the address itself can be allowed.
      if (s.why) {
        return h("div", { class: "egress-notice", "data-testid": "egress-notice", "data-dest": dest },
          h("span", {}, "The agent was refused ", h("span", { class: "mono" }, dest), `${when}: ${s.why}.`));
      }
      return h("div", { class: "egress-notice", "data-testid": "egress-notice", "data-dest": dest },
        h("span", {}, "The agent was refused ", h("span", { class: "mono" }, dest),
          `${when}: it is not on this run's allowlist.`),
        h("button", { type: "button", class: "primary", "data-testid": "egress-allow-button", title: s.last ? fullTime(s.last) : "",
          onclick: () => this.add(dest) }, "Allow"));
    });
    const more = refused.length - shown.length;
    if (more > 0 || others) {
      const parts = [];
      if (more > 0) parts.push(`${more} more refused destination${more === 1 ? "" : "s"}`);
      if (others) {
        const sample = Array.isArray(others.sample) && others.sample.length ? ` (${others.sample.join(", ")}, …)` : "";
        parts.push(`${others.count} more refused connection${others.count === 1 ? "" : "s"} to yet other destinations${sample}`);
      }
      notices.push(h("div", { class: "egress-notice", "data-testid": "egress-others" }, h("span", {}, `…and ${parts.join(", and ")}.`)));
    }
    this.notices.replaceChildren(...notices);
    this.notices.hidden = !notices.length;
  }

  /** Put `dest` on the allowlist. */
  add(dest) {
    if (!dest) return;
    const allow = Array.isArray(this.egress && this.egress.allow) ? this.egress.allow : [];
    if (allow.includes(dest)) return;
    this.put([...allow, dest]);
  }

  /** `PUT /runs/{id}/egress`: the allowlist replaced; the view follows from its answer. */
  async put(allow) {
    if (this.busy) return;
    this.busy = true;
    this.error.hidden = true;
    const res = await api("PUT", `runs/${enc(this.runId)}/egress`, { allow });
    this.busy = false;
    if (!res.ok) {
      this.error.textContent = res.message;
      this.error.hidden = false;
      this.panel.open = true;
      return;
    }
    this.addInput.value = "";
    this.panel.dataset.sig = "";
    this.render({ sandbox: this.sandbox }, res.data);
  }
}
