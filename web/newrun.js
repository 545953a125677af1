// The "Start a run" form, and the demo set-up (GET /info).
import { api, enc } from "./api.js";
import { h } from "./dom.js";
import { refreshRunsNow, renderRunList, onRunsPolled } from "./runlist.js";
import { store } from "./store.js";

const newRunDetails = document.getElementById("new-run");
const newRunForm = document.getElementById("new-run-form");
const providerSelect = document.getElementById("nr-provider");
const providerRefused = document.getElementById("nr-provider-refused");
const providerCan = document.getElementById("nr-provider-can");
const modeField = document.getElementById("nr-mode-field");
const modeSelect = document.getElementById("nr-mode");
const hostField = document.getElementById("nr-host-field");
const hostSelect = document.getElementById("nr-host");
// A mode to select when the provider offers it (the demo wants "plan").
let wantedMode = null;

newRunDetails.addEventListener("toggle", () => {
  newRunDetails.dataset.touched = "1";
  // Which hosts are connected, and which providers serve (they are swapped while lab
  // serves), change: asked again each time the form opens.
  if (newRunDetails.open) { loadHosts(); loadProviders(); }
});

/**
 * The host select (GET /hosts): "This machine" first, then every host lab knows, a
 * host whose runner is not connected marked so (lab refuses it with host_down): one lab
 * is dialling again over ssh says "connecting…", and why the last try failed is its
 * tooltip. No hosts: no select, runs go on this machine.
 */
export async function loadHosts() {
  const res = await api("GET", "hosts");
  const hosts = res.ok && Array.isArray(res.data) ? res.data : [];
  const keep = hostSelect.value || localStorage.getItem("lab.host") || "";
  const label = (x) => x.state === "connected" ? x.name
    : `${x.name} (${x.state === "connecting" ? "connecting…" : "not connected"})`;
  hostSelect.replaceChildren(h("option", { value: "" }, "This machine"), ...hosts.map((x) => h("option", {
    value: x.name, "data-state": x.state, title: x.last_error ? `last error: ${x.last_error}` : x.transport || "",
  }, label(x))));
  hostField.hidden = !hosts.length;
  hostSelect.disabled = !hosts.length;
  hostSelect.value = hosts.some((x) => x.name === keep) ? keep : "";
}
// With no runs yet, the form opens by itself (until the operator opens or closes it).
onRunsPolled((runs) => {
  if (!runs.length && !newRunDetails.open && !newRunDetails.dataset.touched) newRunDetails.open = true;
});

/** How often the providers are asked again (they are swapped while lab serves). */
const PROVIDERS_EVERY_MS = 15000;
let providersTimer = null;

export async function loadProviders() {
  if (!providersTimer) providersTimer = setInterval(loadProviders, PROVIDERS_EVERY_MS);
  const res = await api("GET", "providers");
  if (!res.ok || !Array.isArray(res.data)) {
    providerSelect.replaceChildren(h("option", { value: "" }, "(providers unavailable)"));
    delete providerSelect.dataset.sig;
    showFormError(res.ok ? "Unexpected /providers response" : res.message);
    return;
  }
  store.providers = res.data;
  // The open run shows which build it uses, and whether new runs get another.
  if (store.currentView && store.currentView.onRunsUpdated) store.currentView.onRunsUpdated();
  // Redrawn only when something changed (not under an operator choosing).
  const sig = JSON.stringify(res.data);
  if (providerSelect.dataset.sig === sig) return;
  providerSelect.dataset.sig = sig;
  providerSelect.replaceChildren();
  const keep = providerSelect.dataset.chosen;
  // Those serving new runs are offered; a removed one's live runs still name it.
  const serving = res.data.filter((p) => !p.state || p.state === "serving");
  if (!serving.length) providerSelect.append(h("option", { value: "" }, "(no providers loaded)"));
  for (const p of serving) {
    // The agent's name and, where lab could ask it, the agent's own version; the
    // provider's version, build and source are not the agent's (they go in the tooltip).
    const agent = `${p.display_name || p.name}${p.agent_version ? ` ${p.agent_version}` : ""}`;
    const label = `${agent}${p.dialog_hooker ? "" : " (no live dialogs)"}`;
    providerSelect.append(h("option", { value: p.name, title: providerTitle(p) }, label));
  }
  // Files lab refused, and why: a build dropped in that does not serve.
  const refused = res.data.flatMap((p) => p.state === "refused"
    ? [`${p.source}: ${p.error}`]
    : (Array.isArray(p.refused) ? p.refused.map((r) => `${r.source}: ${r.error}`) : []));
  providerRefused.hidden = !refused.length;
  providerRefused.textContent = refused.length ? `Refused: ${refused.join("; ")}` : "";
  // The provider chosen before, else used last, else the first one lab lists.
  const remembered = keep || localStorage.getItem("lab.provider");
  if (remembered && serving.some((p) => p.name === remembered)) providerSelect.value = remembered;
  else if (serving.length) providerSelect.value = serving[0].name;
  showModes();
}

/**
 * The permission-mode select: the selected provider's `permission_modes`, the first
 * selected; a provider without modes gets no select. The chosen mode is always sent.
 */
function showModes() {
  const p = store.providers.find((x) => x.name === providerSelect.value);
  const can = abilitiesText(p);
  providerCan.textContent = can;
  providerCan.hidden = !can;
  const modes = p && Array.isArray(p.permission_modes) ? p.permission_modes.map(String) : [];
  const keep = modeSelect.value;
  modeSelect.replaceChildren(...modes.map((m) => h("option", { value: m }, m)));
  modeField.hidden = !modes.length;
  modeSelect.disabled = !modes.length;
  if (wantedMode && modes.includes(wantedMode)) modeSelect.value = wantedMode;
  else if (modes.includes(keep)) modeSelect.value = keep;
  else if (modes.length) modeSelect.value = modes[0];
}

providerSelect.addEventListener("change", () => {
  providerSelect.dataset.chosen = providerSelect.value;
  showModes();
});

/**
 * What lab does with runs of a provider (GET /providers `abilities`), in a line under
 * its select: the prompt kinds it answers, resume, fork, usage, sandbox. "" when the
 * provider does not say.
 */
export function abilitiesText(p) {
  const a = p && p.abilities;
  if (!a || typeof a !== "object") return "";
  const kinds = Array.isArray(a.prompts) ? a.prompts.map(String) : [];
  const parts = [kinds.length ? `answers ${kinds.join(", ")} prompts` : "no prompts answered from lab"];
  parts.push(a.resume ? "resume" : "no resume", a.fork ? "fork" : "no fork");
  parts.push(a.usage ? "usage counted" : "no usage");
  parts.push(a.sandbox ? "sandbox" : "no sandbox");
  return parts.join(" · ");
}

/** A provider's version, build and source, for its tooltip. */
export function providerTitle(p) {
  const build = p.digest ? `, build ${p.digest}` : "";
  const from = p.source ? `, from ${p.source}` : "";
  return `provider ${p.name}${p.version ? ` ${p.version}` : ""}${build}${from}`;
}

function showFormError(msg) {
  const el = newRunForm.querySelector(".form-error");
  el.textContent = msg || "";
  el.hidden = !msg;
}

export function initNewRunForm() {
  const workdir = newRunForm.elements.workdir;
  workdir.value = localStorage.getItem("lab.workdir") || "";
  newRunForm.elements.sandbox.value = localStorage.getItem("lab.sandbox") || "";
  newRunForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    showFormError("");
    const f = newRunForm.elements;
    const provider = f.provider.value;
    const wd = f.workdir.value.trim();
    if (!provider) return showFormError("Choose a provider.");
    if (!wd.startsWith("/")) { f.workdir.focus(); return showFormError("The working directory must be an absolute path."); }
    const body = { provider, workdir: wd, prompt: f.prompt.value };
    // The mode the form shows is the mode the run gets: sent always, the first one too.
    // Left out, the agent's own default applies, and that moves between releases (one
    // release asks each time, a newer one decides by itself: "auto").
    if (!modeSelect.disabled && modeSelect.value) body.permission_mode = modeSelect.value;
    if (!hostSelect.disabled && hostSelect.value) body.host = hostSelect.value;
    if (f.sandbox.value) body.sandbox = f.sandbox.value;
    const submit = newRunForm.querySelector("button[type=submit]");
    submit.disabled = true;
    submit.textContent = "Starting…";
    const res = await api("POST", "runs", body);
    submit.disabled = false;
    submit.textContent = "Start run";
    if (!res.ok) return showFormError(res.message);
    localStorage.setItem("lab.workdir", wd);
    localStorage.setItem("lab.provider", provider);
    localStorage.setItem("lab.host", body.host || "");
    localStorage.setItem("lab.sandbox", f.sandbox.value);
    f.prompt.value = "";
    newRunDetails.open = false;
    const run = res.data;
    if (run && run.id) {
      store.runs.set(run.id, run);
      renderRunList();
      location.hash = `#/runs/${enc(run.id)}`;
    }
    refreshRunsNow();
  });
  // Ctrl/Cmd+Enter in the prompt starts the run.
  newRunForm.elements.prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); newRunForm.requestSubmit(); }
  });
}

/** GET /info: the no-token warning; demo mode's banner and the start form set up for its runs. */
export async function loadInfo() {
  const res = await api("GET", "info");
  if (!res.ok || !res.data) return;
  if (res.data.token_required === false) {
    document.body.classList.add("bannered");
    document.getElementById("no-token-banner").hidden = false;
  }
  if (res.data.demo !== true) return;
  document.body.classList.add("demo", "bannered");
  document.getElementById("demo-banner").hidden = false;
  const f = newRunForm.elements;
  if (res.data.demo_workdir) f.workdir.value = res.data.demo_workdir;
  // The demo ends with a plan, which the agent shows in plan mode (when its provider has one).
  wantedMode = "plan";
  showModes();
  // Any prompt starts the demo (two questions, then a plan); one is filled in so a click is enough.
  if (!f.prompt.value) f.prompt.value = "Show me around";
  if (!newRunDetails.dataset.touched) newRunDetails.open = true;
}
