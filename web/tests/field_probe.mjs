// Which fields of the API's JSON the UI reads, and which the API sends: the check
// that the page reads only fields lab really sends (a renamed or dropped field shows
// here, not as a card that silently renders nothing).
//
// - Reads: an init script in every page wraps what `JSON.parse` returns to the UI's
//   two API readers (api.js, for every request; eventstream.js, for the event stream)
//   in proxies that report each field name the page reads, at any depth.
// - Sent: every JSON response from lab itself (not one a test fakes with page.route)
//   that the page receives, all field names at any depth: recorded from the real runs
//   the browser tests drive; and every event lab's event streams sent (the data
//   eventstream.js parses, as it came, before any read).

/**
 * The init script (runs in the page before its own scripts). `binding`: the name of
 * the exposed binding that takes a field name.
 */
export function fieldProbe(binding, OPAQUE, sentBinding) {
  const seen = new Set();
  const report = (name) => {
    if (seen.has(name)) return;
    seen.add(name);
    const send = window[binding];
    if (typeof send === "function") Promise.resolve(send(name)).catch(() => {});
  };
  // What JavaScript itself looks up on any object (a promise's resolution looks for
  // `then`, JSON.stringify for `toJSON`): not fields.
  const skip = new Set(["then", "toJSON", ...Object.getOwnPropertyNames(Object.prototype)]);
  const opaque = new Set(OPAQUE);
  const proxies = new WeakMap();
  const wrap = (value) => {
    if (value === null || typeof value !== "object") return value;
    const known = proxies.get(value);
    if (known) return known;
    const isArray = Array.isArray(value);
    const field = (k) => typeof k === "string" && !isArray && !skip.has(k);
    const proxy = new Proxy(value, {
      get(target, k, receiver) {
        const value = Reflect.get(target, k, receiver);
        if (!field(k)) return wrap(value);
        report(k);
        return opaque.has(k) ? value : wrap(value);
      },
      has(target, k) {
        if (field(k)) report(k);
        return Reflect.has(target, k);
      },
    });
    proxies.set(value, proxy);
    return proxy;
  };
  const sentNames = new Set();
  const reportSent = (v) => {
    if (Array.isArray(v)) { for (const x of v) reportSent(x); return; }
    if (!v || typeof v !== "object") return;
    for (const [k, x] of Object.entries(v)) {
      if (!sentNames.has(k)) {
        sentNames.add(k);
        const send = window[sentBinding];
        if (typeof send === "function") Promise.resolve(send(k)).catch(() => {});
      }
      if (!opaque.has(k)) reportSent(x);
    }
  };
  const parse = JSON.parse;
  JSON.parse = function (text, reviver) {
    const value = parse.call(this, text, reviver);
    // The caller's frame (the first after this one's): only the UI's two API readers,
    // not its parses of the agent's own text (a tool call's input).
    const caller = String(new Error().stack || "").split("\n").filter((l) => /^\s*at /.test(l))[1] || "";
    // What an event stream brought is what lab sent (fetched answers are recorded as
    // they arrive, outside the page).
    if (/\/eventstream\.js[:?]/.test(caller)) reportSent(value);
    return /\/(api|eventstream)\.js[:?]/.test(caller) ? wrap(value) : value;
  };
}

/**
 * Fields whose value is the agent's own, not the API's shape (a tool call's `input`):
 * the names inside are neither reads nor sent fields.
 */
export const OPAQUE = ["input"];

/** Every field name in a JSON value, at any depth (not inside an OPAQUE field). */
export function fieldNames(value, into = new Set()) {
  if (Array.isArray(value)) for (const v of value) fieldNames(v, into);
  else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      into.add(k);
      if (!OPAQUE.includes(k)) fieldNames(v, into);
    }
  }
  return into;
}

/**
 * Field names the API sends that no browser scenario here produces, each with where
 * it is sent for real (keep this short: a scenario that produces it is better).
 */
const UNEXERCISED = new Map([
  // generic (screen) dialogs: real in host/tests/runs.rs (an unrecognised screen) and
  // host/tests/e2e_codex.rs (codex's trust and hooks screens).
  ["title", "pending_dialog.generic.title"],
]);

/**
 * The record of one test file: `watch(context)` on every browser context (before its
 * pages load), `await settle()` before reading, then
 * `unsent()`: the names the UI read that no real answer carried.
 */
export function fieldRecord() {
  const read = new Set();
  const sent = new Set();
  const pending = [];
  const binding = "__labFieldRead";
  const sentBinding = "__labFieldSent";
  return {
    read, sent,
    async watch(context) {
      await context.exposeBinding(binding, (_source, name) => { read.add(String(name)); });
      await context.exposeBinding(sentBinding, (_source, name) => { sent.add(String(name)); });
      await context.addInitScript({ content: `(${fieldProbe})(${JSON.stringify(binding)}, ${JSON.stringify(OPAQUE)}, ${JSON.stringify(sentBinding)});` });
      context.on("response", (res) => {
        const h = res.headers();
        // lab's own answers carry its security headers; a test's page.route fakes do
        // not (or say so: x-lab-test-fake).
        if (h["x-content-type-options"] !== "nosniff" || h["x-lab-test-fake"]) return;
        if (!String(h["content-type"] || "").startsWith("application/json")) return;
        pending.push(res.json().then((j) => fieldNames(j, sent)).catch(() => {}));
      });
    },
    async settle() { await Promise.all(pending.splice(0)); },
    unsent() { return [...read].filter((n) => !sent.has(n) && !UNEXERCISED.has(n)).sort(); },
  };
}
