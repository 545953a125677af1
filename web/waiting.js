// Runs that wait on the operator: which ones, when one starts waiting (worth a
// notification), and what to say. Pure: no DOM, no I/O (unit-tested in waiting.test.mjs);
// notify.js does the telling.

/** The run states in which the agent waits on the operator. */
export const WAITING_STATES = ["question", "needs_input"];

/** The dialog kinds a notification names; any other kind is shown as generic. */
const KNOWN_KINDS = ["question", "plan", "permission", "generic"];

const BODY_MAX = 200;

export function isWaiting(state) {
  return WAITING_STATES.includes(state);
}

/** How many of `states` (run states) are waiting. */
export function waitingCount(states) {
  let n = 0;
  for (const s of states) if (isWaiting(s)) n += 1;
  return n;
}

/** The page title with the count of waiting runs in front: "(2) lab". */
export function titleWithCount(base, count) {
  return count > 0 ? `(${count}) ${base}` : base;
}

/**
 * The tab icon: an SVG data URL, the plain "lab" mark, or with the count of waiting runs
 * in an orange disc (9+ above nine).
 */
export function faviconHref(count) {
  const mark = '<rect x="2" y="2" width="60" height="60" rx="14" fill="#2456d6"/>' +
    '<path d="M20 16v32h24" fill="none" stroke="#fff" stroke-width="8" stroke-linecap="round" stroke-linejoin="round"/>';
  let badge = "";
  if (count > 0) {
    const text = count > 9 ? "9+" : String(count);
    badge = '<circle cx="44" cy="20" r="19" fill="#e8590c" stroke="#fff" stroke-width="3"/>' +
      `<text x="44" y="28" text-anchor="middle" font-family="Arial,sans-serif" font-weight="700" font-size="${text.length > 1 ? 19 : 24}" fill="#fff">${text}</text>`;
  }
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">${mark}${badge}</svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
}

/**
 * What the run waits for: the pending dialog's kind (question, plan, permission,
 * generic; an unknown kind is "generic"), else "error" for a run stopped on an error,
 * "needs_input" for another blocked run, else "generic".
 */
export function waitKind(view) {
  const d = view && view.pending_dialog;
  if (d) return KNOWN_KINDS.includes(d.kind) ? d.kind : "generic";
  if (isStoppedOnError(view)) return "error";
  return view && view.state === "needs_input" ? "needs_input" : "generic";
}

/**
 * Whether the run's last turn ended on an error (the model API refused it: a rate
 * limit, an overload, billing): blocked on kind "error", the agent back at its prompt
 * for the operator to send again.
 */
export function isStoppedOnError(view) {
  const b = view && view.blocked;
  return !!(view && view.state === "needs_input" && b && b.kind === "error");
}

function clip(text) {
  const t = String(text ?? "").replace(/\s+/g, " ").trim();
  return t.length > BODY_MAX ? `${t.slice(0, BODY_MAX - 1)}…` : t;
}

/** The first non-empty line of a markdown text, without its heading/list/emphasis marks. */
export function firstPlainLine(text) {
  const line = String(text ?? "").split("\n").find((l) => l.trim()) || "";
  return line.trim().replace(/^(#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)/, "").replace(/[*_`]/g, "").trim();
}

function runName(run, runId) {
  const wd = run && typeof run.workdir === "string" ? run.workdir : "";
  const parts = wd.split("/").filter(Boolean);
  if (parts.length) return parts[parts.length - 1];
  const id = String(runId ?? "");
  return id.length > 12 ? id.slice(0, 8) : id;
}

const HEADLINE = {
  question: (agent) => `${agent} is asking`,
  plan: () => "a plan waits for approval",
  permission: (agent) => `${agent} asks for permission`,
  needs_input: (agent) => `${agent} needs input`,
  error: (agent) => `${agent} stopped on an error`,
  generic: (agent) => `${agent} needs input`,
};

/** The first non-empty line of a text, trimmed. */
function firstLine(text) {
  return (String(text ?? "").split("\n").find((l) => l.trim()) || "").trim();
}

/**
 * The notification for a run that started waiting: {title, body, tag, url}. The body is
 * the first question, the plan's first line, the permission asked for ("Shell: rm -rf
 * build"), the generic prompt's title, or what the agent said it waits for. `agent`
 * names the agent (its provider's display name), "the agent" when unknown.
 */
export function notificationFor(runId, run, view, agent = "the agent") {
  const kind = waitKind(view);
  const d = (view && view.pending_dialog) || {};
  const blocked = (view && view.blocked) || {};
  const firstQuestion = Array.isArray(d.questions) && d.questions[0] ? d.questions[0].question : "";
  let body = "";
  if (kind === "question") body = firstQuestion;
  else if (kind === "plan") body = firstPlainLine(d.plan);
  else if (kind === "permission") {
    const p = d.permission || {};
    const tool = p.tool || d.tool_name || "";
    const summary = firstLine(p.summary);
    body = tool && summary ? `${tool}: ${summary}` : tool || summary;
  } else if (d.generic && (d.generic.title || d.generic.text)) body = d.generic.title || firstLine(d.generic.text);
  else body = firstQuestion;
  if (!clip(body)) body = blocked.message || "";
  if (!clip(body)) body = "Open the run to see what it waits for.";
  return {
    title: `${runName(run, runId)}: ${HEADLINE[kind](String(agent || "the agent"))}`,
    body: clip(body),
    tag: `lab-run-${runId}`,
    url: `#/runs/${encodeURIComponent(runId)}`,
  };
}

/**
 * Decides when a run *starts* waiting, from two sources: the GET /runs poll (every run,
 * state only) and full views (the open run's event stream, or a view fetched for a poll
 * candidate). Runs already waiting when the page loads (the first poll, or views before
 * it) never count; a dialog (by tool id) counts once, whichever source sees it first.
 */
export class WaitWatch {
  constructor() {
    this.primed = false;
    this.runs = new Map(); // id -> {state, toolId}
    this.told = new Set(); // dialog tool ids and wait keys already notified (or there at load)
    this.entered = new Map(); // id -> how many times the run started waiting (keys blocks)
  }

  /**
   * A GET /runs poll: [{id, state}]. Returns the ids of runs that have just started
   * waiting; fetch their view and pass it to `candidate`.
   */
  poll(runs) {
    const started = [];
    for (const { id, state } of runs) {
      const prev = this.runs.get(id);
      if (this.primed && isWaiting(state) && !isWaiting(prev && prev.state)) started.push(id);
      this.record(id, state, isWaiting(state) && prev ? prev.toolId : null, !this.primed);
    }
    this.primed = true;
    return started;
  }

  /** The view fetched for a poll candidate. True: notify now. */
  candidate(id, view) {
    if (!view || !isWaiting(view.state)) return false;
    return this.claim(id, view);
  }

  /** A live view of a run (its event stream). True: notify now. */
  view(id, view) {
    if (!view || !view.state) return false;
    const prev = this.runs.get(id);
    const toolId = view.pending_dialog ? view.pending_dialog.tool_id : null;
    const startsWaiting = isWaiting(view.state) && (!isWaiting(prev && prev.state) ||
      (toolId && prev && prev.toolId && prev.toolId !== toolId));
    if (!this.primed || !startsWaiting) {
      this.record(id, view.state, toolId, !this.primed);
      return false;
    }
    return this.claim(id, view);
  }

  // --- internals

  key(id, view) {
    if (view.pending_dialog && view.pending_dialog.tool_id) return `dialog:${view.pending_dialog.tool_id}`;
    return `wait:${id}:${this.entered.get(id) || 0}`;
  }

  record(id, state, toolId, atLoad) {
    const prev = this.runs.get(id);
    if (isWaiting(state) && !isWaiting(prev && prev.state)) this.entered.set(id, (this.entered.get(id) || 0) + 1);
    this.runs.set(id, { state, toolId: toolId || null });
    if (atLoad && isWaiting(state)) this.told.add(this.key(id, { pending_dialog: toolId ? { tool_id: toolId } : null }));
  }

  claim(id, view) {
    const toolId = view.pending_dialog ? view.pending_dialog.tool_id : null;
    const prev = this.runs.get(id);
    if (!isWaiting(prev && prev.state)) this.entered.set(id, (this.entered.get(id) || 0) + 1);
    this.runs.set(id, { state: view.state, toolId });
    const key = this.key(id, view);
    if (this.told.has(key)) return false;
    this.told.add(key);
    return true;
  }
}
