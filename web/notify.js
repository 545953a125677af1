// Telling the operator that a run waits: a browser notification when any run starts
// waiting (asked for once, from the "Notify me" button), the count of waiting runs in
// the tab title and icon, and an optional chime (off by default, remembered).
// The decisions are in waiting.js; this module is the I/O around them.
import { api, enc } from "./api.js";
import { onRunsPolled, runState } from "./runlist.js";
import { agentName, store } from "./store.js";
import { WaitWatch, faviconHref, notificationFor, titleWithCount, waitingCount } from "./waiting.js";

const SOUND_KEY = "lab.sound";
// GET /runs/{id}/messages?after=<u64::MAX>: the run's state and dialog, no messages.
const STATE_ONLY = "?after=18446744073709551615";

const watch = new WaitWatch();
let baseTitle = "lab";
let shownCount = null;
let audio = null;

const permissionBtn = document.getElementById("notify-permission");
const soundBtn = document.getElementById("sound-toggle");
const favicon = document.getElementById("favicon");

/** The page title without the count; the count of waiting runs goes in front. */
export function setTitle(base) {
  baseTitle = base;
  updateAttention();
}

/** A live view of a run (its event stream): may notify, updates the count. */
export function noteView(runId, view) {
  if (watch.view(runId, view)) tell(runId, view);
  updateAttention();
}

function updateAttention() {
  const count = waitingCount([...store.runs.values()].map(runState));
  const title = titleWithCount(baseTitle, count);
  if (document.title !== title) document.title = title;
  if (count !== shownCount) {
    shownCount = count;
    favicon.href = faviconHref(count);
    favicon.dataset.count = String(count);
  }
}

async function onPoll(runs) {
  const started = watch.poll(runs.map((r) => ({ id: r.id, state: runState(r) })));
  updateAttention();
  for (const id of started) {
    const res = await api("GET", `runs/${enc(id)}/messages${STATE_ONLY}`);
    if (res.ok && res.data && watch.candidate(id, res.data)) tell(id, res.data);
  }
}

function tell(runId, view) {
  const run = store.runs.get(runId);
  const name = agentName(run);
  const note = notificationFor(runId, run, view, name === "The agent" ? "the agent" : name);
  if (soundOn()) chime();
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  let n;
  try {
    n = new Notification(note.title, { body: note.body, tag: note.tag, data: { url: note.url, run_id: runId } });
  } catch {
    return; // e.g. a browser that only allows notifications from a service worker
  }
  n.onclick = () => {
    window.focus();
    location.hash = note.url;
    n.close();
  };
}

// --- "Notify me": asks once, from the click, never on load

function showPermissionButton() {
  permissionBtn.hidden = !("Notification" in window) || Notification.permission !== "default";
}

async function askPermission() {
  try {
    await Notification.requestPermission();
  } catch {
    /* an old browser: the callback form only */
  }
  showPermissionButton();
}

// --- the chime

function soundOn() {
  return localStorage.getItem(SOUND_KEY) === "on";
}

function showSound() {
  const on = soundOn();
  soundBtn.setAttribute("aria-pressed", String(on));
  soundBtn.title = on ? "Sound on: a chime when a run starts waiting" : "Sound off";
}

function chime() {
  const Ctx = window.AudioContext || window.webkitAudioContext;
  if (!Ctx) return;
  try {
    audio = audio || new Ctx();
    const t = audio.currentTime;
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.type = "sine";
    osc.frequency.setValueAtTime(880, t);
    osc.frequency.setValueAtTime(1175, t + 0.12);
    gain.gain.setValueAtTime(0.0001, t);
    gain.gain.exponentialRampToValueAtTime(0.2, t + 0.02);
    gain.gain.exponentialRampToValueAtTime(0.0001, t + 0.45);
    osc.connect(gain).connect(audio.destination);
    osc.start(t);
    osc.stop(t + 0.5);
  } catch {
    /* no audio: the notification and the title still tell */
  }
}

export function initNotify() {
  showPermissionButton();
  permissionBtn.addEventListener("click", askPermission);
  showSound();
  soundBtn.addEventListener("click", () => {
    localStorage.setItem(SOUND_KEY, soundOn() ? "off" : "on");
    showSound();
    // Browsers let audio start only from a gesture: set it up (and confirm) on this click.
    if (soundOn()) chime();
  });
  onRunsPolled(onPoll);
  updateAttention();
}
