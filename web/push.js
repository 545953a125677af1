// Push to this device (docs/push.md): the service worker registered on load (it keeps
// the shell for an installed app; no permission is asked), and a button that asks for
// notification permission only when clicked, subscribes through the browser's push
// service with lab's key (GET /push/key) and gives lab the subscription; clicked again,
// it unsubscribes.
import { api, enc } from "./api.js";

const ID_KEY = "lab.pushId";
const btn = document.getElementById("push-toggle");
const status = document.getElementById("push-status");

const supported = () => "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;

function say(text, kind = "") {
  if (!status) return;
  status.textContent = text;
  status.className = `push-status ${kind}`;
  status.hidden = !text;
}

function show(on) {
  btn.setAttribute("aria-pressed", String(on));
  btn.textContent = on ? "Push on" : "Push";
  btn.title = on ? "This device gets a push when a run waits on you; click to stop" : "Get a push on this device when a run waits on you, with the page closed";
}

/** The subscription's key as pushManager.subscribe takes it. */
function keyBytes(b64) {
  const s = atob(b64.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((b64.length + 3) % 4));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

async function subscribe(reg) {
  const perm = await Notification.requestPermission();
  if (perm !== "granted") { say("Notifications are blocked for this site: allow them in the browser to get pushes.", "error"); return; }
  const key = await api("GET", "push/key");
  if (!key.ok) { say(key.message, "error"); return; }
  let sub;
  try {
    sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key.data.public_key) });
  } catch (e) {
    say(`This browser could not subscribe: ${e.message}`, "error");
    return;
  }
  const res = await api("POST", "push/subscriptions", sub.toJSON());
  if (!res.ok) { await sub.unsubscribe().catch(() => {}); say(res.message, "error"); return; }
  localStorage.setItem(ID_KEY, res.data.id);
  show(true);
  say("");
}

async function unsubscribe(reg) {
  const sub = await reg.pushManager.getSubscription();
  const id = localStorage.getItem(ID_KEY);
  if (id) {
    const res = await api("DELETE", `push/subscriptions/${enc(id)}`, {});
    if (!res.ok && res.status !== 404) { say(res.message, "error"); return; }
  }
  if (sub) await sub.unsubscribe().catch(() => {});
  localStorage.removeItem(ID_KEY);
  show(false);
  say("");
}

export async function initPush() {
  if (!btn || !supported()) return;
  let reg;
  try {
    reg = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
  } catch (e) {
    say(`No service worker: ${e.message}`, "error");
    return;
  }
  const sub = await reg.pushManager.getSubscription().catch(() => null);
  show(!!(sub && localStorage.getItem(ID_KEY)));
  btn.hidden = false;
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    try {
      if (btn.getAttribute("aria-pressed") === "true") await unsubscribe(reg);
      else await subscribe(reg);
    } finally {
      btn.disabled = false;
    }
  });
}
