// DOM helpers and small formatters shared by every part of the UI.

export const STATES = ["starting", "working", "idle", "question", "needs_input", "ended"];

/** Create an element. attrs: plain attributes, plus on* handlers, dataset via data-*. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "html") el.innerHTML = v; // only ever given renderMarkdown() output
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let uidCounter = 0;
export const uid = (p) => `${p}-${++uidCounter}`;

const PLAIN = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** Quote a word for a POSIX shell only when it needs it. */
export function shq(s) {
  s = String(s);
  return PLAIN.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function attachCommand(run) {
  if (!run || !run.tmux_target) return null;
  if (!run.host) {
    const sock = run.tmux_socket ? `-S ${shq(run.tmux_socket)} ` : "";
    return `tmux ${sock}attach -t ${shq(run.tmux_target)}`;
  }
  // A run on another host: its tmux is there (the host as lab names it, for ssh). ssh
  // joins its words and the host's shell parses them again: the remote command goes as
  // one quoted word, and what the host's runner reported must be plain (lab refuses a
  // runner whose paths are not; nothing is shown rather than a command that is unsafe).
  const parts = [run.host, run.tmux_socket, run.tmux_target].filter((p) => p);
  if (!parts.every((p) => PLAIN.test(String(p)))) return null;
  const sock = run.tmux_socket ? `-S ${run.tmux_socket} ` : "";
  return `ssh -t ${run.host} ${shq(`tmux ${sock}attach -t ${run.tmux_target}`)}`;
}

export function parseTime(t) {
  if (t === null || t === undefined || t === "") return null;
  if (typeof t === "number") return new Date(t < 1e12 ? t * 1000 : t);
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? null : d;
}

export function ago(t) {
  const d = parseTime(t);
  if (!d) return "";
  const s = Math.max(0, (Date.now() - d.getTime()) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return d.toLocaleDateString();
}

export function fullTime(t) {
  const d = parseTime(t);
  return d ? d.toLocaleString() : "";
}

export function basename(p) {
  const parts = String(p || "").split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : String(p || "");
}

export function shortId(id) {
  id = String(id || "");
  return id.length > 12 ? id.slice(0, 8) : id;
}

/** Resolve a deep link; only http(s) URLs are ever turned into links. */
export function safeLink(url) {
  if (!url || typeof url !== "string") return null;
  let u;
  try { u = new URL(url, location.href); } catch { return null; }
  if (u.protocol !== "http:" && u.protocol !== "https:") return null;
  const internal = u.origin === location.origin;
  return { href: internal ? u.pathname + u.search + u.hash : u.href, internal, host: u.host };
}

export function stateBadge(state, attrs = {}) {
  const s = STATES.includes(state) ? state : "unknown";
  return h("span", { class: `badge state-${s}`, "data-testid": "state-badge", "data-state": state || "", ...attrs },
    h("span", { class: "badge-dot", "aria-hidden": "true" }), state || "…");
}

export function setBadge(el, state) {
  const s = STATES.includes(state) ? state : "unknown";
  el.className = `badge state-${s}`;
  el.dataset.state = state || "";
  el.replaceChildren(h("span", { class: "badge-dot", "aria-hidden": "true" }), state || "…");
}

/** "+12 −3" as two coloured spans (a diff's additions and deletions). */
export function plusMinus(additions, deletions) {
  return [h("span", { class: "plus" }, `+${additions}`), " ", h("span", { class: "minus" }, `−${deletions}`)];
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h("textarea", { class: "offscreen", readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    ta.remove();
    return ok;
  }
}

/** The attach command with a copy button. */
export function attachBox(cmd, { compact = false } = {}) {
  if (!cmd) return null;
  const status = h("span", { class: "copy-status", role: "status" });
  const btn = h("button", {
    type: "button", class: "copy", "data-testid": "copy-attach", "aria-label": "Copy attach command",
    onclick: async () => {
      const ok = await copyText(cmd);
      status.textContent = ok ? "Copied" : "Copy failed — select the text";
      setTimeout(() => { status.textContent = ""; }, 1800);
    },
  }, "Copy");
  return h("div", { class: `attach${compact ? " compact" : ""}` },
    h("span", { class: "attach-label" }, "Attach:"),
    h("code", { class: "attach-cmd", "data-testid": "attach-command" }, cmd),
    btn, status);
}
