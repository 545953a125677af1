// The read-only terminal view of a run (GET /runs/{id}/terminal, polled).
import { api, enc } from "./api.js";
import { attachBox, attachCommand, h, setBadge, shortId, stateBadge } from "./dom.js";
import { store } from "./store.js";

const TERMINAL_POLL_MS = 1000;

export class TerminalView {
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
