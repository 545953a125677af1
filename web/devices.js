// `#/devices`: the browsers and phones logged in to this lab, each logged out on its
// own, and "Pair a phone": a one-time login link (POST /pair) shown as a QR code the
// phone's camera opens. The QR code's modules come from lab; this only draws them.
import { api, enc } from "./api.js";
import { h, ago, fullTime } from "./dom.js";

const VIA = { token: "logged in with the token", login_link: "the link lab serve printed", pairing: "paired" };
const MODULE_PX = 6;
const QUIET = 4;

/** Draw `qr` ({size, rows: ["0101…"]}) on a canvas, dark on light, with the quiet zone. */
export function drawQr(canvas, qr) {
  const n = qr.size + 2 * QUIET;
  canvas.width = canvas.height = n * MODULE_PX;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#000";
  qr.rows.forEach((row, y) => {
    for (let x = 0; x < row.length; x++) {
      if (row[x] === "1") ctx.fillRect((x + QUIET) * MODULE_PX, (y + QUIET) * MODULE_PX, MODULE_PX, MODULE_PX);
    }
  });
}

export class DevicesView {
  constructor(root) {
    this.root = root;
    this.timers = [];
    this.build();
    this.load();
    // A phone that scanned shows up without a reload.
    this.timers.push(setInterval(() => this.load(), 3000));
  }

  build() {
    this.nameInput = h("input", { id: "pair-name", "data-testid": "pair-name", maxlength: "64", placeholder: "e.g. Anna's phone", autocomplete: "off" });
    this.pairBtn = h("button", { type: "button", class: "primary", "data-testid": "pair-button", onclick: () => this.pair() }, "Pair a phone");
    this.pairStatus = h("p", { class: "pair-status", "data-testid": "pair-status", role: "status" });
    this.canvas = h("canvas", { class: "pair-qr", "data-testid": "pair-qr", hidden: true, role: "img", "aria-label": "QR code of the login link" });
    this.linkEl = h("p", { class: "pair-link", "data-testid": "pair-link", hidden: true });
    this.listEl = h("ul", { class: "device-list", "data-testid": "device-list" });
    this.listStatus = h("p", { class: "run-meta", "data-testid": "devices-status", role: "status" });
    this.root.replaceChildren(h("section", { class: "devices-view", "data-testid": "devices-view" },
      h("header", { class: "run-header" }, h("h2", {}, "Devices"), h("a", { href: "#/", class: "small" }, "Back to runs")),
      h("section", { class: "pair", "aria-labelledby": "pair-h" },
        h("h3", { id: "pair-h" }, "Pair a phone"),
        h("p", { class: "run-meta" }, "Scan the code with the phone's camera: it logs the phone in, once, within 5 minutes. ",
          "The phone can then do everything this page can, until it is logged out below. ",
          "It must reach lab at this page's address (docs/security.md). From a terminal: ", h("code", {}, "lab pair"), "."),
        h("div", { class: "field" }, h("label", { for: "pair-name" }, "Name (optional)"), this.nameInput),
        this.pairBtn, this.pairStatus, this.canvas, this.linkEl),
      h("section", { "aria-labelledby": "devices-h" }, h("h3", { id: "devices-h" }, "Logged in"), this.listStatus, this.listEl)));
  }

  async pair() {
    this.pairBtn.disabled = true;
    const name = this.nameInput.value.trim();
    const res = await api("POST", "pair", name ? { name } : {});
    this.pairBtn.disabled = false;
    if (!res.ok) { this.pairStatus.textContent = res.message; this.pairStatus.className = "pair-status error"; return; }
    drawQr(this.canvas, res.data.qr);
    this.canvas.hidden = false;
    this.linkEl.replaceChildren("Or open this link on the phone: ", h("code", { "data-testid": "pair-url" }, res.data.url));
    this.linkEl.hidden = false;
    this.pairStatus.className = "pair-status";
    const until = Date.parse(res.data.expires_at);
    const tick = () => {
      const left = Math.round((until - Date.now()) / 1000);
      if (left <= 0) {
        this.pairStatus.textContent = "This code has expired: pair again.";
        this.canvas.hidden = this.linkEl.hidden = true;
        return false;
      }
      this.pairStatus.textContent = `Works once, for ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")} more.`;
      return true;
    };
    if (this.countdown) clearInterval(this.countdown);
    tick();
    this.countdown = setInterval(() => { if (!tick()) clearInterval(this.countdown); }, 1000);
    this.timers.push(this.countdown);
  }

  async load() {
    const res = await api("GET", "devices");
    if (!res.ok) { this.listStatus.textContent = res.message; return; }
    if (!res.data.token_required) {
      this.listStatus.textContent = "This lab runs without a token (--no-token): nobody logs in, so there are no devices, and a phone cannot reach it.";
      this.pairBtn.disabled = true;
      this.listEl.replaceChildren();
      return;
    }
    const devices = res.data.devices;
    this.listStatus.textContent = devices.length ? "" : "No browser is logged in with a cookie (scripts use the token).";
    this.listEl.replaceChildren(...devices.map((d) => this.row(d)));
  }

  row(d) {
    const revoke = h("button", { type: "button", class: "small danger", "data-testid": "device-revoke", onclick: () => this.revoke(d, revoke) }, "Log out");
    return h("li", { class: "device", "data-testid": "device", "data-id": d.id },
      h("span", { class: "device-name", "data-testid": "device-name" }, d.name),
      d.current ? h("span", { class: "tag", "data-testid": "device-current" }, "this device") : null,
      h("span", { class: "run-meta" }, `${VIA[d.via] || d.via} ${ago(d.created_at)} · last seen `,
        h("time", { datetime: d.last_seen_at, title: fullTime(d.last_seen_at) }, ago(d.last_seen_at))),
      revoke);
  }

  async revoke(d, btn) {
    const what = d.current ? "Log this device out? You will need the token or a new pairing to come back." : `Log "${d.name}" out? It loses access at once.`;
    if (!confirm(what)) return;
    btn.disabled = true;
    const res = await api("DELETE", `devices/${enc(d.id)}`, {});
    if (!res.ok && res.status !== 404) { btn.disabled = false; this.listStatus.textContent = res.message; return; }
    if (d.current) { location.reload(); return; }
    this.load();
  }

  destroy() {
    this.timers.forEach(clearInterval);
  }
}
