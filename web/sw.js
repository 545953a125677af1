// lab's service worker (served at /sw.js, scope /): the pushes (docs/push.md) shown as
// notifications whose buttons answer the run's dialog through the answer guard, and the
// UI's shell kept so a reopened app paints at once. It knows no agent: a push names the
// dialog's tool_id and its options' indexes, and the answer is lab's usual one.
//
// The handlers are named functions on `self` (handlePush, handleClick) that the event
// listeners call: the browser tests drive the same functions (a test cannot dispatch a
// trusted notificationclick).

const SHELL = "lab-shell-v2";
// The UI's own files (GET /{file}); never the API.
const SHELL_FILES = [
  "/app.js", "/api.js", "/cards.js", "/continuation.js", "/devices.js", "/diffparse.js", "/diffview.js", "/dom.js", "/eventstream.js",
  "/highlight.js", "/markdown.js", "/messages.js", "/newrun.js", "/notify.js", "/push.js", "/runlist.js",
  "/runview.js", "/search.js", "/store.js", "/style.css", "/terminal.js", "/usage.js", "/audit.js", "/rules.js", "/egress.js", "/xterm.mjs", "/xterm.css", "/waiting.js", "/manifest.webmanifest",
  "/icon-192.png", "/icon-512.png",
];
const SHELL_SET = new Set(SHELL_FILES);
// Where the page leaves this device's key (api.js, shareDeviceKey): the answer path sends it.
const DEVICE = "lab-device";

async function deviceKey() {
  try {
    const hit = await (await caches.open(DEVICE)).match("/device-key");
    return hit ? await hit.text() : "";
  } catch { return ""; }
}

self.addEventListener("install", (event) => {
  // Best effort: a file that fails to load is fetched normally later.
  event.waitUntil(caches.open(SHELL).then((c) => Promise.allSettled(SHELL_FILES.map((f) => c.add(f)))).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== SHELL && k !== DEVICE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

/**
 * The shell's files from the cache at once, refreshed from lab behind it; the page itself
 * ("/") from lab first (it is the login form while logged out), the cache only when lab
 * cannot be reached. Everything else goes to lab untouched.
 */
self.addEventListener("fetch", (event) => {
  const req = event.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (req.mode === "navigate" && url.pathname === "/") {
    event.respondWith(fetch(req).then((res) => {
      if (res.ok) { const copy = res.clone(); caches.open(SHELL).then((c) => c.put("/", copy)); }
      return res;
    }).catch(() => caches.match("/").then((hit) => hit || Response.error())));
    return;
  }
  if (!SHELL_SET.has(url.pathname)) return;
  event.respondWith(caches.open(SHELL).then(async (cache) => {
    const hit = await cache.match(url.pathname);
    const fresh = fetch(req).then((res) => { if (res.ok) cache.put(url.pathname, res.clone()); return res; });
    if (hit) { event.waitUntil(fresh.catch(() => {})); return hit; }
    return fresh;
  }));
});

/** Show one push: its title and body, the dialog's options as action buttons. */
self.handlePush = async function handlePush(p) {
  if (!p || typeof p !== "object" || !p.run_id) return;
  const max = (self.Notification && Notification.maxActions) || 2;
  const options = (p.dialog && Array.isArray(p.dialog.options)) ? p.dialog.options : [];
  await self.registration.showNotification(String(p.title || "lab"), {
    body: String(p.body || ""),
    tag: `lab-${p.run_id}`,
    renotify: true,
    requireInteraction: p.state === "question" || p.state === "needs_input",
    icon: "/icon-192.png",
    data: p,
    actions: options.slice(0, max).map((o, i) => ({ action: `option-${i}`, title: String(o.label) })),
  });
};

/** Why an answer was not taken, in words for the notification. */
function refusal(status, body) {
  const code = body && body.error;
  if (code === "dialog_changed") return "Not answered: the prompt changed before your answer arrived (dialog_changed). Tap to open the run.";
  if (code === "no_dialog") return "Not answered: it was already answered, or nothing waits any more (no_dialog).";
  if (status === 401) return "Not answered: this device is not logged in to lab any more. Tap to open lab.";
  return `Not answered: ${(body && body.message) || `lab answered ${status}`}`;
}

/**
 * A click on a notification: an option button answers the dialog (the guard decides:
 * a stale one is refused and answers nothing), the notification then says what
 * happened; a tap on the notification itself opens the run.
 */
self.handleClick = async function handleClick(notification, action) {
  const p = notification.data || {};
  notification.close();
  const m = /^option-(\d+)$/.exec(action || "");
  const options = (p.dialog && p.dialog.options) || [];
  const chosen = m ? options[Number(m[1])] : null;
  if (!chosen) return openRun(p.url || "/");
  let status = 0;
  let body = null;
  try {
    const headers = { "content-type": "application/json", accept: "application/json" };
    const key = await deviceKey();
    if (key) headers["x-lab-device-key"] = key;
    const res = await fetch(`/runs/${encodeURIComponent(p.run_id)}/dialog/answer`, {
      method: "POST",
      headers,
      credentials: "same-origin",
      body: JSON.stringify({ tool_id: p.dialog.tool_id, answers: [{ option: chosen.option }] }),
    });
    status = res.status;
    body = await res.json().catch(() => null);
  } catch (e) {
    body = { message: `cannot reach lab (${e.message})` };
  }
  const ok = status >= 200 && status < 300;
  await self.registration.showNotification(ok ? "Answered" : String(p.title || "lab"), {
    body: ok ? `${chosen.label} — ${p.title || ""}`.trim() : refusal(status, body),
    tag: `lab-${p.run_id}`,
    icon: "/icon-192.png",
    data: { run_id: p.run_id, url: p.url, answered: ok, error: ok ? null : (body && body.error) || `http_${status}` },
  });
  return { status, body };
};

async function openRun(url) {
  const target = new URL(url, self.location.origin).href;
  const list = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const client = list.find((c) => new URL(c.url).origin === self.location.origin);
  if (client) {
    await client.focus().catch(() => {});
    if ("navigate" in client) await client.navigate(target).catch(() => {});
    return client;
  }
  return self.clients.openWindow(target);
}

self.addEventListener("push", (event) => {
  let p = null;
  try { p = event.data ? event.data.json() : null; } catch { p = null; }
  event.waitUntil(self.handlePush(p));
});

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(self.handleClick(event.notification, event.action));
});
