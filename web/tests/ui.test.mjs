// Browser tests of the operator UI against a real `lab serve`.
//
//   cd web && npm ci && npm test
//
// Which server:
//   LAB_URL=http://127.0.0.1:7777   use an already running `lab serve`
//   LAB_BIN=/path/to/lab            start `lab serve` on a free loopback port with a temp --home
//   (neither)                       look for target/debug/lab, $CARGO_TARGET_DIR/debug/lab,
//                                   ~/.cache/lab/target/debug/lab
// Browser: CHROMIUM_PATH, else /usr/bin/chromium (Debian package; never downloaded).
// Screenshots: $LAB_TEST_OUTPUT, else <repo>/test-output/ui/.
// Without a server that serves `/`, or without Chromium, these tests SKIP with the reason,
// unless LAB_UI_REQUIRED=1 (CI), where that is a failure.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REPO_DIR = path.resolve(WEB_DIR, "..");
const REQUIRED = process.env.LAB_UI_REQUIRED === "1";

export const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

// ------------------------------------------------------------------ helpers

export function findChromium() {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"].filter(Boolean);
  return candidates.find((p) => fs.existsSync(p)) || null;
}

export async function launchBrowser() {
  const { chromium } = await import("playwright-core");
  const executablePath = findChromium();
  if (!executablePath) throw new Error("Chromium not found: apt-get install -y chromium, or set CHROMIUM_PATH");
  return chromium.launch({ executablePath, args: CHROMIUM_ARGS });
}

export function outputDir() {
  const dir = process.env.LAB_TEST_OUTPUT || path.join(REPO_DIR, "test-output", "ui");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Full-page screenshot to the output dir; returns the file path. */
export async function screenshot(page, name) {
  const file = path.join(outputDir(), `${name.replace(/[^\w.-]+/g, "-")}.png`);
  await page.screenshot({ path: file, fullPage: false });
  return file;
}

/** A page that records uncaught errors and console errors; assert on page.labErrors. */
export async function openPage(browser, url, { viewport = { width: 1280, height: 860 }, colorScheme = "light" } = {}) {
  const context = await browser.newContext({ viewport, colorScheme });
  const page = await context.newPage();
  page.labErrors = [];
  page.on("pageerror", (e) => page.labErrors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // HTTP error statuses the UI handles (409 etc.) are logged by Chromium as
    // "Failed to load resource"; those are not UI errors.
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) page.labErrors.push(`console: ${m.text()}`);
  });
  if (url) await page.goto(url);
  return page;
}

/** Call the lab API; returns {status, body}. */
export async function api(baseUrl, method, p, body) {
  const res = await fetch(new URL(p, baseUrl), {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: res.status, body: json ?? text, headers: res.headers };
}

/** Poll fn until it returns a truthy value. */
export async function waitFor(fn, { timeout = 10000, interval = 100, what = "condition" } = {}) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { if (e && e.fatal) throw e; last = e; }
    await new Promise((r) => setTimeout(r, interval));
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last})`);
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

export function findLabBin() {
  const candidates = [
    process.env.LAB_BIN,
    path.join(REPO_DIR, "target", "debug", "lab"),
    process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, "debug", "lab"),
    path.join(os.homedir(), ".cache", "lab", "target", "debug", "lab"),
  ].filter(Boolean);
  return candidates.find((p) => fs.existsSync(p)) || null;
}

/**
 * Start `lab serve` on a free loopback port with its own --home. Resolves once
 * GET / answers with HTML; rejects (with the server's output) if it exits first.
 */
export async function startLab({ bin = findLabBin(), home, env = {}, timeout = 30000 } = {}) {
  if (!bin) throw new Error("no lab binary (set LAB_BIN)");
  home = home || fs.mkdtempSync(path.join(os.tmpdir(), "lab-ui-home-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const proc = spawn(bin, ["serve", "--addr", `127.0.0.1:${port}`, "--home", home], {
    env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stdout.on("data", (d) => { output += d; });
  proc.stderr.on("data", (d) => { output += d; });
  let exited = null;
  proc.on("exit", (code, signal) => { exited = { code, signal }; });
  const stop = async () => {
    if (exited) return;
    proc.kill("SIGTERM");
    await Promise.race([new Promise((r) => proc.once("exit", r)), new Promise((r) => setTimeout(r, 5000))]);
    if (!exited) proc.kill("SIGKILL");
  };
  try {
    await waitFor(async () => {
      if (exited) throw Object.assign(new Error(`lab serve exited (${JSON.stringify(exited)}): ${output.trim()}`), { fatal: true });
      const res = await fetch(url).catch(() => null);
      return res && res.ok && (res.headers.get("content-type") || "").includes("text/html");
    }, { timeout, interval: 200, what: "lab serve to serve /" });
  } catch (e) {
    await stop();
    throw new Error(exited ? `lab serve exited (${JSON.stringify(exited)}): ${output.trim()}` : `${e.message}\n${output}`);
  }
  return { url, home, proc, stop, output: () => output };
}

// ------------------------------------------------------------------ setup

let server = null;      // {url, stop?}
let browser = null;
let skipReason = null;

before(async () => {
  if (!findChromium()) skipReason = "Chromium not found (apt-get install -y chromium, or set CHROMIUM_PATH)";
  else if (process.env.LAB_URL) server = { url: new URL("/", process.env.LAB_URL).href };
  else {
    try { server = await startLab(); } catch (e) { skipReason = `no lab serve that serves /: ${e.message.split("\n")[0]}`; }
  }
  if (skipReason) {
    if (REQUIRED) throw new Error(skipReason);
    return;
  }
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (server && server.stop) await server.stop();
});

function live(t) {
  if (skipReason) { t.skip(skipReason); return false; }
  return true;
}

// ------------------------------------------------------------------ tests

describe("lab web UI", () => {
  test("serves the UI with the right content types", async (t) => {
    if (!live(t)) return;
    for (const [p, type] of [["/", "text/html"], ["/app.js", "javascript"], ["/markdown.js", "javascript"], ["/style.css", "text/css"]]) {
      const res = await fetch(new URL(p, server.url));
      assert.equal(res.status, 200, `${p} status`);
      assert.ok((res.headers.get("content-type") || "").includes(type), `${p} content-type ${res.headers.get("content-type")}`);
    }
  });

  test("home page: run list, new-run form with providers, no errors", async (t) => {
    if (!live(t)) return;
    const page = await openPage(browser, server.url);
    try {
      await page.getByTestId("run-list").waitFor();
      await page.getByTestId("new-run-form").waitFor({ state: "attached" });
      await page.locator("[data-testid=new-run-form] summary, #new-run > summary").first().click().catch(() => {});
      const providers = await (await api(server.url, "GET", "/providers")).body;
      assert.ok(Array.isArray(providers), "GET /providers is a list");
      await waitFor(async () => (await page.locator("#nr-provider option[value]:not([value=''])").count()) === providers.length,
        { what: "provider options" });
      await screenshot(page, "home");
      assert.deepEqual(page.labErrors, []);
    } finally {
      await page.context().close();
    }
  });

  // Scenarios to cover against a live server with the fake agent (tools/fake-claude)
  // scripted to open the dialogs; see the web UI report for the detail of each.
  test.todo("question card: appears with one button per option; click → POST answer → 'Answering…' → card disappears, transcript shows the tool_result, composer unlocks");
  test.todo("question card keyboard: Tab reaches the options, arrows move focus (wrapping), Enter/Space answers");
  test.todo("question card 'Other': free text answer lands as the tool_result text");
  test.todo("409 dialog_changed / no_dialog: card replaced by the current state with the explanation in dialog-status");
  test.todo("composer lock: while state=question the input is disabled with 'Answer the question above first'; POST /messages gives 409 dialog_pending and the UI shows it");
  test.todo("multi-question card: read-only questions, 'Answer this in the terminal', deep link, attach command");
  test.todo("plan card (ExitPlanMode): plan rendered as markdown (no raw HTML), hint, deep link");
  test.todo("generic card: needs_input with no pending_dialog shows 'Claude needs input — open the terminal', blocked.message and notification_type, attach command with copy");
  test.todo("live updates: messages appear without reload, no duplicate data-seq after the SSE connection drops and reconnects");
  test.todo("start a run from the form (permission_mode sent only when not default); stop it (confirm) → badge 'ended', composer disabled");
  test.todo("terminal route #/runs/<id>/terminal shows the pane text and the attach command, refreshed");
});
