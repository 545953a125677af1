// A run's live terminal: the agent's own screen drawn by xterm.js (vendored: xterm.mjs,
// its license in xterm.LICENSE.txt), streamed over GET /runs/{id}/terminal/stream
// (a WebSocket). Read-only until this device takes control (POST
// /runs/{id}/terminal/control); while it has it, keys typed here reach the agent, and
// lab itself types nothing into the run (the composer and the cards say so).
import { api, deviceKey, enc } from "./api.js";
import { attachBox, attachCommand, h, setBadge, shortId, stateBadge } from "./dom.js";
import { store } from "./store.js";
import { Terminal } from "./xterm.mjs";

// xterm.js draws with <style> elements of its own: the page's policy allows those that
// carry the page's nonce (a <style> that came in with any HTML still does not apply).
let styleNonceSet = false;
function allowTerminalStyles() {
  if (styleNonceSet) return;
  styleNonceSet = true;
  const nonce = document.querySelector('meta[name="lab-style-nonce"]')?.content;
  if (!nonce) return;
  const create = document.createElement.bind(document);
  document.createElement = (tag, options) => {
    const el = create(tag, options);
    if (String(tag).toLowerCase() === "style") el.nonce = nonce;
    return el;
  };
}

const RETRY_MS = 2000;

export class TerminalView {
  constructor(root, runId) {
    allowTerminalStyles();
    this.root = root;
    this.runId = runId;
    this.you = false;
    this.attachSlot = h("div", { class: "attach-slot" });
    this.status = h("p", { class: "terminal-status", role: "status", "data-testid": "terminal-status" });
    this.who = h("span", { class: "muted", "data-testid": "terminal-who" }, "connecting…");
    this.takeBtn = h("button", { type: "button", "data-testid": "terminal-take", onclick: () => this.setControl(!this.you) }, "Take control");
    this.fitBtn = h("button", { type: "button", class: "secondary", hidden: true, "data-testid": "terminal-fit", title: "Make the agent's terminal the size of this screen", onclick: () => this.fit() }, "Fit to screen");
    this.host = h("div", { class: "terminal-host", "data-testid": "terminal-screen", "data-control": "none" });
    this.badge = stateBadge(null);
    root.replaceChildren(h("section", { class: "terminal-view", "data-testid": "terminal-view" },
      h("header", { class: "run-header" },
        h("div", { class: "run-header-top" },
          h("a", { href: `#/runs/${enc(runId)}`, class: "button-link", "data-testid": "back-to-chat" }, "← Chat"),
          h("h1", { class: "run-title" }, `Terminal · ${shortId(runId)}`),
          this.badge,
          h("span", { class: "spacer" }),
          this.who, this.fitBtn, this.takeBtn),
        this.attachSlot,
        this.status),
      this.host));
    this.term = new Terminal({ cols: 80, rows: 24, scrollback: 2000, fontSize: 13, disableStdin: true, cursorBlink: false,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" });
    this.term.open(this.host);
    this.term.onData((d) => this.send({ keys: d }));
    this.loadAttach();
    this.connect();
    this.onRunsUpdated();
  }

  onRunsUpdated() {
    const run = store.runs.get(this.runId);
    if (run) setBadge(this.badge, run.state);
  }

  async loadAttach() {
    const res = await api("GET", `runs/${enc(this.runId)}/terminal`);
    if (this.destroyed) return;
    const cmd = (res.ok && res.data && res.data.attach) || attachCommand(store.runs.get(this.runId));
    if (cmd) this.attachSlot.replaceChildren(attachBox(cmd, { compact: true }));
  }

  connect() {
    const url = new URL(`runs/${enc(this.runId)}/terminal/stream`, location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const key = deviceKey();
    if (key) url.searchParams.set("device_key", key);
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onmessage = (e) => {
      if (typeof e.data !== "string") { this.term.write(new Uint8Array(e.data)); return; }
      let msg;
      try { msg = JSON.parse(e.data); } catch { return; }
      if (msg.type === "size") this.resizeTo(msg.cols, msg.rows);
      else if (msg.type === "control") this.showControl(msg.holder, msg.you);
      else if (msg.type === "refused") this.say(msg.reason, true);
      else if (msg.type === "ended") { this.ended = true; this.say(`The terminal view ended: ${msg.reason}`, true); }
    };
    ws.onopen = () => this.say("");
    ws.onclose = () => {
      if (this.destroyed || this.ended) return;
      this.say("The connection to lab was lost; reconnecting…", true);
      this.timer = setTimeout(() => this.connect(), RETRY_MS);
    };
  }

  resizeTo(cols, rows) {
    this.term.resize(cols, rows);
    this.host.dataset.cols = String(cols);
    this.host.dataset.rows = String(rows);
  }

  showControl(holder, you) {
    this.you = !!you;
    this.term.options.disableStdin = !this.you;
    this.host.dataset.control = this.you ? "you" : holder ? "other" : "none";
    this.takeBtn.textContent = this.you ? "Release control" : "Take control";
    this.fitBtn.hidden = !this.you;
    this.who.textContent = this.you ? "You have control: keys go to the agent"
      : holder ? `${holder.device_name || holder.device_id} has control (read-only here)` : "Read-only";
    if (this.you) this.term.focus();
  }

  async setControl(take) {
    const res = await api("POST", `runs/${enc(this.runId)}/terminal/control`, { take });
    if (!res.ok) this.say(res.message, true);
  }

  send(msg) {
    if (!this.you || !this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify(msg));
  }

  // The pane made the size of this screen: the cells that fit in the view at 13 px.
  fit() {
    const cell = this.host.querySelector(".xterm-rows > div")?.getBoundingClientRect();
    const width = this.host.clientWidth, height = this.host.clientHeight;
    const cw = (cell && cell.width && this.term.cols) ? cell.width / this.term.cols : 7.8;
    const ch = (cell && cell.height) ? cell.height : 15;
    const cols = Math.max(20, Math.floor(width / cw) - 1), rows = Math.max(5, Math.floor(height / ch) - 1);
    this.send({ resize: [cols, rows] });
  }

  say(text, error = false) {
    this.status.textContent = text || "";
    this.status.classList.toggle("error", !!error);
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
    this.term.dispose();
  }
}
