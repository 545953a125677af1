// The one way the web tests start a world: a temp dir with lab's home, the agent's
// HOME and a workdir, a lab.toml the test writes, a real `lab serve` on 127.0.0.1:0
// with its login link and token read as a script would, and the cleanup (SIGTERM lab,
// kill the world's own tmux server, remove the dir) registered on the test.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

export const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Generous wait for anything that depends on the agent, tmux or the event stream. */
export const WAIT = 20000;

/** Keep every world's temp dir (LAB_UI_KEEP=1); a failed world's is always kept. */
const KEEP = process.env.LAB_UI_KEEP === "1";

export const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

export function targetDir() {
  if (process.env.CARGO_TARGET_DIR) return process.env.CARGO_TARGET_DIR;
  if (fs.existsSync("/root/.cache/lab/target")) return "/root/.cache/lab/target";
  return path.join(REPO_DIR, "target");
}

export function findChromium() {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"].filter(Boolean);
  return candidates.find((p) => fs.existsSync(p)) || null;
}

export const LAB_BIN = process.env.LAB_BIN || path.join(targetDir(), "debug", "lab");
export const FAKE_CLAUDE_BIN = process.env.FAKE_CLAUDE_BIN || path.join(targetDir(), "debug", "fake-claude");
export const RESPONSES_STANDIN_BIN = process.env.RESPONSES_STANDIN_BIN || path.join(targetDir(), "debug", "responses-standin");

export function isExecutable(p) {
  try { fs.accessSync(p, fs.constants.X_OK); return fs.statSync(p).isFile(); } catch { return false; }
}

/** Poll fn until it returns a truthy value (which is returned). */
export async function waitFor(fn, { timeout = WAIT, interval = 100, what = "condition" } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { if (e && e.fatal) throw e; last = e; }
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, interval));
  }
  const shown = last instanceof Error ? last.message : JSON.stringify(last);
  throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${shown})`);
}

/** Call the lab API (with lab's token when given, as a script does); returns {status, body}. */
export async function api(baseUrl, method, p, body, token = null) {
  const headers = body === undefined ? {} : { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(new URL(p, baseUrl), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: res.status, body: json ?? text };
}

/** A TOML basic string. */
export const tomlStr = (s) => JSON.stringify(String(s));

/**
 * Open a login link in `page` as the operator does: its page (a GET, which redeems
 * nothing: a link preview cannot burn it), its one button (the POST that does), then
 * the UI.
 */
export async function openLoginLink(page, link) {
  const res = await page.goto(link);
  if (!res || res.status() !== 200) throw new Error(`the login link answered ${res && res.status()}`);
  await page.getByTestId("redeem").click();
  await page.waitForURL((u) => u.pathname === "/" && !u.search.includes("code="));
}

/**
 * Start a world. `labToml(world)`: the text of lab.toml (the world's dirs are set by
 * then); `provider`: what `createRun` starts; `serveArgs`: more `lab serve` flags;
 * `env`: more of lab serve's environment (HOME is the agent's home, `a/`); `dropEnv`:
 * a pattern of variable names of this process not passed to lab serve; `prefix`: the
 * temp dir's. `diagnose()` (optional) adds to the failure diagnostics.
 */
export async function startWorld(t, { labToml, provider, serveArgs = [], env = {}, dropEnv = null, prefix = "/tmp/lui-", diagnose = null }) {
  const dir = fs.mkdtempSync(prefix);
  const home = path.join(dir, "h");
  const agentHome = path.join(dir, "a");
  const workdir = path.join(dir, "webshop");
  for (const d of [home, agentHome, workdir]) fs.mkdirSync(d);

  const world = {
    dir, home, agentHome, workdir, provider, url: null, token: null, loginLink: null, failed: false, banner: [],
    stderrPath: path.join(dir, "lab.stderr"),
    tmuxSocket: path.join(home, "tmux.sock"),
    tmux(...args) { return spawnSync("tmux", ["-S", this.tmuxSocket, ...args], { encoding: "utf8" }); },
    api(method, p, body) { return api(this.url, method, p, body, this.token); },
    /** Headers a script sends: lab's token. */
    authHeaders() { return this.token ? { authorization: `Bearer ${this.token}` } : {}; },
    async createRun(prompt, extra = {}) {
      const r = await this.api("POST", "/runs", { provider: this.provider, workdir, prompt, ...extra });
      assert.equal(r.status, 201, `POST /runs: ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async view(id) {
      const r = await this.api("GET", `/runs/${id}/messages`);
      assert.equal(r.status, 200, `GET /runs/${id}/messages: ${JSON.stringify(r.body)}`);
      return r.body;
    },
    waitView(id, pred, what) { return waitFor(async () => { const v = await this.view(id); return pred(v) && v; }, { what: `run view: ${what}` }); },
    /** The world's provider as GET /providers lists it (display_name, wit, …). */
    async providerInfo() {
      const r = await this.api("GET", "/providers");
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const p = r.body.find((x) => x.name === this.provider);
      assert.ok(p, `no ${this.provider} provider: ${JSON.stringify(r.body)}`);
      return p;
    },
    /** How the UI names the agent: the provider's display name. */
    async agentName() { const p = await this.providerInfo(); return p.display_name || p.name; },
    /** The tail of lab's log (and what the test adds), for failure messages. */
    diagnostics() {
      const tail = (p, n) => { try { return fs.readFileSync(p, "utf8").split("\n").slice(-n).join("\n"); } catch { return "(none)"; } };
      const more = diagnose ? `${diagnose(tail)}\n` : "";
      return `--- lab serve stderr (tail) ---\n${tail(this.stderrPath, 25)}\n${more}--- kept: ${dir}`;
    },
  };
  fs.writeFileSync(path.join(home, "lab.toml"), labToml(world));

  const errFd = fs.openSync(world.stderrPath, "a");
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !(dropEnv && dropEnv.test(k))));
  const proc = spawn(LAB_BIN, ["serve", "--addr", "127.0.0.1:0", "--home", home, ...serveArgs], {
    env: { ...inherited, HOME: agentHome, LAB_LOG: "info,lab=debug", LAB_PUSH_ALLOW_LOOPBACK_HTTP: "1", ...env },
    stdio: ["ignore", "pipe", errFd],
  });
  fs.closeSync(errFd);
  let exited = null;
  const exitedP = new Promise((r) => proc.once("exit", (code, signal) => { exited = { code, signal }; r(); }));

  /** SIGTERM lab serve; SIGKILL after graceMs. Returns {graceful, ms}. */
  world.stopLab = async (graceMs = 5000) => {
    const started = Date.now();
    if (exited) return { graceful: true, ms: 0 };
    proc.kill("SIGTERM");
    await Promise.race([exitedP, new Promise((r) => setTimeout(r, graceMs))]);
    const graceful = !!exited;
    if (!exited) { proc.kill("SIGKILL"); await exitedP; }
    return { graceful, ms: Date.now() - started };
  };
  /**
   * Register `fn` to run when the test ends, before lab serve is stopped and the
   * world's dir removed (last registered, first run): what a test started that lives
   * in the world's dir (a runner and its tmux server, whose socket is there) must be
   * stopped while its dir still exists.
   */
  const onEnd = [];
  world.onEnd = (fn) => { onEnd.push(fn); };
  t.after(async () => {
    for (const fn of onEnd.reverse()) {
      try { await fn(); } catch (e) { process.stderr.write(`warning: a world's cleanup failed: ${e}\n`); }
    }
    await world.stopLab();
    // `lab serve` leaves runs going in tmux by design; the test's tmux server must go.
    world.tmux("kill-server");
    if (!KEEP && !world.failed) removeWorldDir(dir);
  });

  // The first stdout line is `lab: serving on http://127.0.0.1:PORT`; the login link
  // (`lab: login link (…): http://…/login?code=…`) comes in the same write.
  const lines = world.banner;
  let lineArrived = () => {};
  readline.createInterface({ input: proc.stdout }).on("line", (l) => { lines.push(l); lineArrived(); });
  const nextLine = (i, ms) => Promise.race([
    new Promise((resolve) => { const check = () => { if (lines.length > i) resolve(lines[i]); else lineArrived = check; }; check(); }),
    exitedP.then(() => null),
    new Promise((r) => setTimeout(() => r(null), ms)),
  ]);
  const line = await nextLine(0, WAIT);
  const m = line && line.match(/^lab: serving on (http:\/\/\S+)$/);
  if (!m) {
    world.failed = true;
    throw new Error(`lab serve did not start (first line ${JSON.stringify(line)}, exit ${JSON.stringify(exited)})\n${world.diagnostics()}`);
  }
  world.url = m[1].endsWith("/") ? m[1] : `${m[1]}/`;
  const second = await nextLine(1, 2000);
  const link = second && second.match(/^lab: login link .*: (http:\/\/\S+\/login\?code=\S+)$/);
  if (link) {
    world.loginLink = link[1];
    // What a script does: read the token from lab's home.
    world.token = fs.readFileSync(path.join(home, "token"), "utf8").trim();
  }
  return world;
}

/**
 * Remove a world's temp dir. The pane's processes get SIGHUP from kill-server and may
 * still write a hook file under h/runtime while the tree is removed (ENOTEMPTY, seen on
 * CI): retry for a while; if something still writes there, say what is left and finish
 * in the background. A leftover temp dir is not the behaviour under test, so it never
 * fails one.
 */
export function removeWorldDir(dir) {
  try {
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (e) {
    let left = [];
    try { left = fs.readdirSync(path.join(dir, "h", "runtime")).slice(0, 10); } catch { /* gone meanwhile */ }
    process.stderr.write(`warning: could not remove ${dir} yet (${e.code}; runtime/ holds ${JSON.stringify(left)}); retrying in the background\n`);
    const again = setInterval(() => {
      try { fs.rmSync(dir, { recursive: true, force: true }); clearInterval(again); } catch { /* next time */ }
    }, 1000);
    again.unref();
  }
}
