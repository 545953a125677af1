// Browser tests of the operator UI against a REAL `lab serve`, real tmux, and the
// fake-claude agent (tools/fake-claude: writes Claude Code's transcript, runs the hook
// commands from --settings like Claude Code, and its pickers react to tmux send-keys).
//
//   cargo build -p lab -p fake-claude        # with the CARGO_TARGET_DIR you use
//   cd web && npm ci && npm test             # = node --test
//
// Every test gets its own world: a temp dir under /tmp (short paths: lab's tmux socket
// lives in its home), its own fake-claude script, its own `lab serve` on a free loopback
// port, and one browser context. The tmux server is always killed afterwards.
//
// Binaries: LAB_BIN, else <target>/debug/lab; FAKE_CLAUDE_BIN, else <target>/debug/fake-claude,
//   where <target> = $CARGO_TARGET_DIR, else /root/.cache/lab/target if it exists, else <repo>/target.
// Browser: CHROMIUM_PATH, else /usr/bin/chromium (Debian package; never downloaded).
// Screenshots: $LAB_TEST_OUTPUT, else <repo>/test-output/ui/. LAB_DOCS_IMAGES=1 also writes
//   the phone screenshots to docs/images/phone-*.png.
// LAB_UI_KEEP=1 keeps every test's temp dir (lab's home, agent HOME, fake-claude log);
//   a failing test always keeps it and names it in the error.
// Missing Chromium / binaries / tmux / playwright-core: the tests SKIP with the reason,
// unless LAB_UI_REQUIRED=1 (CI), where that is a failure.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fieldRecord } from "./field_probe.mjs";
import { CHROMIUM_ARGS, FAKE_CLAUDE_BIN, LAB_BIN, WAIT, findChromium, openLoginLink, isExecutable, startWorld as startLabWorld, tomlStr, waitFor } from "./world.mjs";

const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REPO_DIR = path.resolve(WEB_DIR, "..");
const REQUIRED = process.env.LAB_UI_REQUIRED === "1";

/** Per-test ceiling, so a hang fails instead of stalling the run. */
const TEST_TIMEOUT = 90000;

// ------------------------------------------------------------------ discovery

/** Why the suite cannot run here, or null. */
async function missingPrerequisites() {
  const missing = [];
  if (!findChromium()) missing.push("Chromium not found (apt-get install -y chromium, or set CHROMIUM_PATH)");
  if (!isExecutable(LAB_BIN)) missing.push(`no lab binary at ${LAB_BIN} (cargo build -p lab, or set LAB_BIN)`);
  if (!isExecutable(FAKE_CLAUDE_BIN)) missing.push(`no fake-claude binary at ${FAKE_CLAUDE_BIN} (cargo build -p fake-claude, or set FAKE_CLAUDE_BIN)`);
  if (spawnSync("tmux", ["-V"]).status !== 0) missing.push("tmux not on PATH");
  try { await import("playwright-core"); } catch { missing.push("playwright-core not installed (cd web && npm ci)"); }
  return missing.length ? missing.join("; ") : null;
}

// ------------------------------------------------------------------ small helpers

export function outputDir() {
  const dir = process.env.LAB_TEST_OUTPUT || path.join(REPO_DIR, "test-output", "ui");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Viewport screenshot into the output dir; returns the file path. */
export async function screenshot(page, name) {
  const file = path.join(outputDir(), `${name.replace(/[^\w.-]+/g, "-")}.png`);
  await page.screenshot({ path: file, fullPage: false });
  return file;
}

/** Wait until a locator's text matches re; returns the text. */
async function waitText(locator, re, what) {
  return waitFor(async () => {
    const t = (await locator.count()) ? await locator.first().textContent() : null;
    return t !== null && re.test(t) ? t : false;
  }, { what: `${what} to match ${re}` });
}

// ------------------------------------------------------------------ a world per test

/**
 * A world (world.mjs) whose claude-code runs the fake-claude agent with `script`, its
 * event log read through world.events() / world.waitEvent().
 */
async function startWorld(t, script, serveArgs = []) {
  let scriptPath = null;
  let logPath = null;
  const world = await startLabWorld(t, {
    provider: "claude-code",
    serveArgs,
    labToml: (w) => {
      scriptPath = path.join(w.dir, "script.json");
      logPath = path.join(w.dir, "fake.log");
      fs.writeFileSync(scriptPath, JSON.stringify(script, null, 2));
      return [
        "[providers.claude-code]",
        `program = ${tomlStr(FAKE_CLAUDE_BIN)}`,
        `env = { FAKE_CLAUDE_SCRIPT = ${tomlStr(scriptPath)}, FAKE_CLAUDE_LOG = ${tomlStr(logPath)} }`,
        "",
      ].join("\n");
    },
    diagnose: (tail) => `--- fake-claude log (tail) ---\n${tail(logPath, 15)}`,
  });
  world.logPath = logPath;
  /** fake-claude's event log, parsed. */
  world.events = () => {
    let text = "";
    try { text = fs.readFileSync(logPath, "utf8"); } catch { return []; }
    return text.split("\n").filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
  };
  world.waitEvent = (pred, what) => waitFor(() => world.events().find(pred), { what: `fake-claude log: ${what}` });
  return world;
}

/** A page that records uncaught errors and console errors (page.labErrors). */
async function openPage(t, url, { context: contextOptions = {}, init = null, login = null, token = null } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme: "light", ...contextOptions });
  t.after(() => context.close().catch(() => {}));
  await fields.watch(context);
  if (init) await context.addInitScript(init.fn, init.arg);
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.labErrors = [];
  page.on("pageerror", (e) => page.labErrors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // Chromium logs HTTP error statuses the UI handles (409 etc.) as "Failed to load resource".
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) page.labErrors.push(`console: ${m.text()}`);
  });
  // A fresh browser logs in as the operator does: the one-time link lab printed.
  // (page.labToken: for requests a test makes on the page's behalf, e.g. route.fetch.)
  page.labToken = token;
  if (login) {
    await openLoginLink(page, login);
    assert.equal(new URL(page.url()).pathname, "/", `the login link lands on the UI: ${page.url()}`);
    // A test that opens the UI itself (after routing some requests) gets a fresh load.
    if (!url) await page.goto("about:blank");
  }
  if (url) await page.goto(url);
  return page;
}

// ------------------------------------------------------------------ setup

let browser = null;
let skipReason = null;
/** The field names the pages read and the ones lab sent them (field_probe.mjs). */
const fields = fieldRecord();

before(async () => {
  skipReason = await missingPrerequisites();
  if (skipReason) {
    if (REQUIRED) throw new Error(`LAB_UI_REQUIRED=1 but the browser tests cannot run: ${skipReason}`);
    process.stderr.write(`\n*** lab web UI browser tests SKIPPED: ${skipReason}\n*** (LAB_UI_REQUIRED=1 makes this a failure)\n\n`);
    return;
  }
  const { chromium } = await import("playwright-core");
  browser = await chromium.launch({ executablePath: findChromium(), args: CHROMIUM_ARGS });
});

after(async () => {
  if (browser) await browser.close();
});

/**
 * One scenario: a world running `script`, a run created through the API with `prompt`
 * (unless prompt is null), a page on it. On failure: a FAIL- screenshot, lab's log and
 * fake-claude's log in the error, the temp dir kept. At the end of a passing scenario:
 * no uncaught page errors and no duplicate messages in the chat.
 */
function scenario(name, { script, prompt = "go", open = true, todo, serveArgs = [], context, init, login = true }, body) {
  test(name, { timeout: TEST_TIMEOUT, todo }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const world = await startWorld(t, script, serveArgs);
    let page = null;
    try {
      let run = null;
      if (prompt !== null) run = await world.createRun(prompt);
      page = await openPage(t, open ? new URL(run ? `#/runs/${run.id}` : "", world.url).href : null, { context, init, login: login ? world.loginLink : null, token: world.token });
      await body({ t, world, page, run, id: run && run.id });
      const seqs = await page.locator("[data-testid=chat] [data-seq]").evaluateAll((els) => els.map((e) => e.dataset.seq));
      assert.equal(new Set(seqs).size, seqs.length, `duplicate messages in the chat: ${seqs}`);
      assert.deepEqual(page.labErrors, [], "uncaught errors in the page");
    } catch (e) {
      if (!todo) {
        world.failed = true;
        if (page) await screenshot(page, `FAIL-${name}`).catch(() => {});
      }
      e.message = `${e.message}\n${world.diagnostics()}`;
      throw e;
    } finally {
      // Close the page (and its event stream) before lab is stopped.
      if (page) await page.context().close().catch(() => {});
    }
  });
}

// ------------------------------------------------------------------ scripts & page bits

const DB_QUESTION = {
  question: "Which database should we use?",
  header: "Database",
  multiSelect: false,
  options: [
    { label: "PostgreSQL", description: "Relational, runs as a server" },
    { label: "SQLite", description: "Embedded, one file" },
    { label: "Redis", description: "In-memory key-value" },
  ],
};

const DEPLOY_QUESTION = {
  question: "Where should it be deployed?",
  header: "Deploy",
  multiSelect: false,
  options: [
    { label: "Fly.io", description: "Managed" },
    { label: "Own VPS", description: "Self-hosted" },
  ],
};

/** say → one question → say → idle (then fake-claude echoes every message). */
function askScript(question = DB_QUESTION) {
  return { steps: [
    { say: "I'll set up **persistence** for the app. One decision first:" },
    { ask: { questions: [question] } },
    { say: "Thanks, noted. Setting it up now." },
    { idle: {} },
  ] };
}

const sel = {
  card: "[data-testid=dialog-area] [data-testid=dialog-card]",
  option: "[data-testid=dialog-card] [data-testid=dialog-option]",
  status: "[data-testid=dialog-area] [data-testid=dialog-status]",
  input: "[data-testid=composer-input]",
  lock: "[data-testid=composer-lock-reason]",
  badge: "[data-testid=run-view] .run-header [data-testid=state-badge]",
  msg: (role, kind) => `[data-testid=chat] [data-testid=message][data-role=${role}][data-kind=${kind}]`,
};

/** A string as a literal inside a RegExp. */
const reEsc = (t) => String(t).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

async function waitBadge(page, state) {
  await page.locator(`${sel.badge}[data-state=${state}]`).waitFor();
}

/** Wait for the answerable question card; returns its tool id. */
async function waitQuestionCard(page) {
  const card = page.locator(`${sel.card}[data-kind=question]`);
  await card.waitFor();
  await page.locator(sel.option).first().waitFor();
  return card.getAttribute("data-tool-id");
}

/**
 * Record every text the dialog status line shows from now on (the card may be
 * re-rendered, so observe the whole dialog area).
 */
async function recordStatuses(page) {
  await page.evaluate(() => {
    window.__statuses = [];
    window.__cards = [];
    const area = document.querySelector("[data-testid=dialog-area]");
    const note = () => {
      for (const el of area.querySelectorAll("[data-testid=dialog-status]")) {
        const s = el.textContent;
        if (s && window.__statuses[window.__statuses.length - 1] !== s) window.__statuses.push(s);
      }
      for (const el of area.querySelectorAll("[data-testid=dialog-card]")) {
        const c = `${el.dataset.kind}${el.classList.contains("readonly") ? ":readonly" : ""}`;
        if (window.__cards[window.__cards.length - 1] !== c) window.__cards.push(c);
      }
    };
    new MutationObserver(note).observe(area, { subtree: true, childList: true, characterData: true });
  });
}

/**
 * Hold the page's event stream at `view`: every (re)connection to /runs/{id}/events is
 * answered with one `view` event and a 1-hour retry, so the page keeps showing that
 * state, exactly as if its stream had stalled, while the real run moves on.
 */
async function holdEventStream(page, view) {
  await page.route(/\/runs\/[^/]+\/events(\?.*)?$/, (route) => route.fulfill({
    status: 200,
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    body: `retry: 3600000\nevent: view\ndata: ${JSON.stringify(view)}\n\n`,
  }));
}

// ------------------------------------------------------------------ tests

describe("lab web UI in a real browser", () => {
  scenario("the run list follows one event stream: a run started elsewhere shows and changes state, and the list is never polled", {
    script: { steps: [{ say: "Hello from the list." }, { idle: {} }] }, prompt: null, open: false,
  }, async ({ world, page }) => {
    const lists = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (r.method() === "GET" && /^\/runs(\/events)?$/.test(u.pathname)) lists.push(u.pathname + u.search);
    });
    await page.goto(world.url);
    await page.locator(".run-list-empty").waitFor();
    const run = await world.createRun("go");
    await page.locator(`[data-testid=run-item][data-run-id="${run.id}"]`).waitFor();
    await world.waitView(run.id, (v) => v.state === "idle", "the run idles");
    await page.waitForFunction((id) => document.querySelector(`[data-testid=run-item][data-run-id="${id}"]`)?.dataset.state === "idle", run.id);
    assert.equal(await page.getByTestId("run-list-older").isVisible(), false, "no older runs to offer");
    assert.ok(lists.length >= 1 && lists.every((l) => l.startsWith("/runs/events")), `the list was asked for, not followed: ${lists}`);
  });

  scenario("a long chat opens on its newest page and loads older pages as the operator scrolls up: in order, none twice", {
    script: { steps: [...Array.from({ length: 450 }, (_, i) => ({ say: `line ${i}` })), { idle: {} }] }, open: false,
  }, async ({ world, page, id }) => {
    const v = await world.waitView(id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "line 449"), "the whole chat");
    const total = v.messages.length;
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "line 449" }).waitFor();
    const seqs = () => page.locator("[data-testid=chat] [data-seq]").evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
    // The newest page (and the page before it, should the first not fill the screen), not the whole chat.
    const first = await seqs();
    assert.ok(first.length < total && first.length <= 400, `loaded ${first.length} of ${total} at first`);
    assert.equal(first[first.length - 1], total - 1);
    assert.equal(await page.getByTestId("load-older").isVisible(), true, "older messages are offered");
    // Scrolling up loads the rest, page by page, keeping the order.
    await waitFor(async () => {
      await page.getByTestId("chat").evaluate((el) => { el.scrollTop = 0; el.dispatchEvent(new Event("scroll")); });
      return (await seqs()).length === total;
    }, { what: "every page loaded by scrolling up" });
    assert.deepEqual(await seqs(), Array.from({ length: total }, (_, i) => i), "every message once, in seq order");
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "line 0" }).first().waitFor();
    assert.equal(await page.getByTestId("load-older").isVisible(), false, "nothing older is offered");
  });

  scenario("the token: a fresh browser gets the login form (the token logs it in); the link lab printed logs a browser in, once", { script: { steps: [{ idle: {} }] }, prompt: null, open: false, login: false }, async ({ t, world, page }) => {
    assert.ok(world.loginLink && world.token, `lab serve with no flags printed a login link: ${JSON.stringify(world.banner)}`);
    // No token, no session: the UI is not served; the API answers 401.
    const res = await page.goto(world.url);
    assert.equal(res.status(), 401);
    await page.getByRole("heading", { name: "lab" }).waitFor();
    assert.equal(await page.getByTestId("run-list").count(), 0, "no UI without the token");
    assert.equal((await fetch(new URL("runs", world.url))).status, 401, "a script without the token");
    assert.equal((await fetch(new URL("runs", world.url), { headers: world.authHeaders() })).status, 200, "a script with it");
    // The form (its inline script runs under the page's Content-Security-Policy): the
    // output of `lab token` logs a phone in.
    await page.locator("#token").fill(world.token);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByTestId("run-list").waitFor();
    await page.getByText("No runs yet. Start one above.").waitFor();
    assert.equal(await page.getByTestId("no-token-banner").isHidden(), true);
    // The link: a chat app's preview fetches it and burns nothing; its page's one button
    // logs a fresh browser in; it works once.
    const preview = await fetch(world.loginLink, { headers: { "user-agent": "Slackbot-LinkExpanding 1.0" } });
    assert.equal(preview.status, 200);
    assert.equal(preview.headers.get("set-cookie"), null, "a preview gets no session");
    const fresh = async () => { const c = await page.context().browser().newContext(); t.after(() => c.close().catch(() => {})); return c.newPage(); };
    const other = await fresh();
    await openLoginLink(other, world.loginLink);
    await other.getByTestId("run-list").waitFor();
    // The session is the cookie and the device key this origin's page keeps: without the
    // key (what another server on another port of 127.0.0.1 would have: the cookie), the
    // API refuses and the page goes to the login form, once, no reload loop.
    assert.match(await other.evaluate(() => localStorage.getItem("lab.deviceKey")), /^[0-9a-f]{64}$/);
    const [cookie] = await other.context().cookies();
    const alone = { headers: { cookie: `${cookie.name}=${cookie.value}` } };
    assert.equal((await fetch(world.url, alone)).status, 200, "the cookie alone loads the UI's files");
    assert.equal((await fetch(new URL("runs", world.url), alone)).status, 401, "but not the API");
    await other.evaluate(() => localStorage.removeItem("lab.deviceKey"));
    await other.reload();
    await other.locator("#token").waitFor();
    assert.equal(new URL(other.url()).pathname, "/login");
    const used = await fresh();
    await used.goto(world.loginLink);
    await used.getByTestId("redeem").click();
    await used.getByRole("alert").filter({ hasText: "used already" }).waitFor();
    assert.equal(new URL(used.url()).pathname, "/login", "a used login link logs nobody in");
  });

  scenario("pairing a phone: the devices page draws the one-time link's QR code, the phone logs in with it and is logged out from the list", { script: { steps: [{ idle: {} }] }, prompt: null }, async ({ t, world, page }) => {
    page.on("dialog", (d) => d.accept());
    await page.getByTestId("devices-link").click();
    await page.getByTestId("devices-view").waitFor();
    const rows = page.locator("[data-testid=device]");
    await rows.filter({ has: page.getByTestId("device-current") }).waitFor();
    assert.equal(await rows.count(), 1, "only this browser is logged in");
    await page.getByTestId("pair-name").fill("Test phone");
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === "/pair");
    await page.getByTestId("pair-button").click();
    const pair = await (await answered).json();
    const url = (await page.getByTestId("pair-url").textContent()).trim();
    assert.equal(url, pair.url);
    assert.ok(url.startsWith(new URL("login?code=", world.url).href), url);
    assert.match(await page.getByTestId("pair-status").textContent(), /Works once, for [45]:\d\d more/);
    // The canvas shows exactly lab's modules (sampled at each module's centre), quiet zone light.
    const drawn = await page.getByTestId("pair-qr").evaluate((c, size) => {
      const px = c.width / (size + 8);
      const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const dark = (x, y) => data[(Math.floor((y + 0.5) * px) * c.width + Math.floor((x + 0.5) * px)) * 4] < 128;
      const rows = [];
      for (let y = 0; y < size; y++) { let r = ""; for (let x = 0; x < size; x++) r += dark(x + 4, y + 4) ? "1" : "0"; rows.push(r); }
      return { rows, quietDark: dark(0, 0) || dark(size + 7, size + 7) };
    }, pair.qr.size);
    assert.deepEqual(drawn.rows, pair.qr.rows);
    assert.equal(drawn.quietDark, false);

    // The phone opens the link: in, and listed by its name.
    const phoneContext = await page.context().browser().newContext({
      viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true,
      userAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    });
    t.after(() => phoneContext.close().catch(() => {}));
    const phone = await phoneContext.newPage();
    await openLoginLink(phone, url);
    await phone.getByTestId("run-list").waitFor();
    const phoneRow = rows.filter({ hasText: "Test phone" });
    await phoneRow.waitFor(); // the list refreshes by itself
    assert.match(await phoneRow.textContent(), /paired/);
    const stranger = await page.context().browser().newContext();
    t.after(() => stranger.close().catch(() => {}));
    const late = await stranger.newPage();
    await late.goto(url);
    await late.getByTestId("redeem").click();
    await late.getByRole("alert").filter({ hasText: "used already" }).waitFor();

    // Logged out from here: the phone is out at once, this browser stays in.
    await phoneRow.getByTestId("device-revoke").click();
    await phoneRow.waitFor({ state: "detached" });
    assert.equal((await phone.reload()).status(), 401);
    await phone.locator("#token").waitFor();
    await page.getByTestId("run-list").waitFor();
    assert.equal(await rows.count(), 1);
    // Logging this device out ends its own session: the login form.
    await rows.first().getByTestId("device-revoke").click();
    await page.locator("#token").waitFor();
  });

  scenario("--no-token: the UI says anyone on this machine can start agents", { script: { steps: [{ idle: {} }] }, prompt: null, serveArgs: ["--no-token"] }, async ({ world, page }) => {
    assert.equal(world.loginLink, null, "no login link without a token");
    await page.getByTestId("run-list").waitFor();
    const banner = page.getByTestId("no-token-banner");
    await banner.waitFor();
    assert.match(await banner.textContent(), /anyone who can reach this port/);
    assert.equal(await page.getByTestId("demo-banner").isHidden(), true);
  });

  scenario("home page: assets, run list, new-run form with providers", { script: { steps: [{ idle: {} }] }, prompt: null }, async ({ world, page }) => {
    // Every ES module under web/ (app.js imports the rest) is served as JavaScript.
    const modules = fs.readdirSync(WEB_DIR).filter((f) => f.endsWith(".js"));
    assert.ok(modules.length > 5 && modules.includes("app.js"), `modules: ${modules}`);
    for (const [p, type] of [["/", "text/html"], ["/style.css", "text/css"], ...modules.map((m) => [`/${m}`, "text/javascript"])]) {
      const res = await fetch(new URL(p, world.url), { headers: world.authHeaders() });
      assert.equal(res.status, 200, `${p} status`);
      assert.ok((res.headers.get("content-type") || "").includes(type), `${p} content-type ${res.headers.get("content-type")}`);
    }
    await page.getByTestId("run-list").waitFor();
    await page.getByText("No runs yet. Start one above.").waitFor();
    // With no runs the form opens by itself.
    await page.locator("#new-run[open]").waitFor();
    // Not a demo: no demo banner.
    assert.equal((await world.api("GET", "/info")).body.demo, false);
    assert.equal(await page.getByTestId("demo-banner").isVisible(), false, "no demo banner outside a demo");
    // The agent's own version is asked in the background (fake-claude says 2.1.198, as
    // Claude Code words it); once lab knows it, a fresh page shows it.
    const providers = await waitFor(async () => {
      const b = (await world.api("GET", "/providers")).body;
      return Array.isArray(b) && b.find((p) => p.name === "claude-code")?.agent_version ? b : null;
    }, { what: "the agent's version in GET /providers" });
    assert.equal(providers.find((p) => p.name === "claude-code").agent_version, "2.1.198");
    await page.reload();
    await waitFor(async () => (await page.locator("#nr-provider option:not([value=''])").count()) === providers.length, { what: "provider options" });
    // No provider name is hard-coded: the form starts on the first one lab lists.
    assert.equal(await page.getByTestId("new-run-provider").inputValue(), providers[0].name);
    // Each option names the agent (display name), never the provider's own version as if it were the agent's.
    const first = page.locator("#nr-provider option").first();
    assert.equal((await first.textContent()).trim(), [providers[0].display_name || providers[0].name, providers[0].agent_version].filter(Boolean).join(" "));
    // Under the select: what lab does with runs of the chosen provider.
    const can = page.getByTestId("new-run-provider-can");
    const canOf = (p) => {
      const a = p.abilities;
      return [`answers ${a.prompts.join(", ")} prompts`, a.resume ? "resume" : "no resume", a.fork ? "fork" : "no fork",
        a.usage ? "usage counted" : "no usage", a.sandbox ? "sandbox" : "no sandbox"].join(" · ");
    };
    assert.equal(await can.textContent(), canOf(providers[0]));
    const acp = providers.find((p) => p.transport === "acp");
    await page.getByTestId("new-run-provider").selectOption(acp.name);
    await waitFor(async () => (await can.textContent()) === canOf(acp), { what: `${acp.name}'s abilities under the select` });
    assert.match(await can.textContent(), /answers permission, question prompts · resume · no fork/);
    await page.getByTestId("new-run-provider").selectOption(providers[0].name);
    // Its tooltip: the provider's version, build and source.
    assert.equal(await first.getAttribute("title"), `provider ${providers[0].name} ${providers[0].version}, build ${providers[0].digest}, from ${providers[0].source}`);
    // No agent's name in the UI's code.
    for (const m of fs.readdirSync(WEB_DIR).filter((f) => f.endsWith(".js"))) {
      assert.doesNotMatch(fs.readFileSync(path.join(WEB_DIR, m), "utf8"), /claude/i, `web/${m} names an agent`);
    }
    await screenshot(page, "01-home");
  });

  scenario("a provider swapped while the UI is open: the run shows the build it uses, the form the new one and what was refused", { script: askScript(), prompt: "Add persistence" }, async ({ world, page }) => {
    await waitQuestionCard(page);
    const serving = async () => (await world.api("GET", "/providers")).body.find((p) => p.name === "claude-code" && p.state === "serving");
    const bundled = await serving();
    const runProvider = page.getByTestId("run-provider");
    await waitFor(async () => (await runProvider.getAttribute("data-build")) === bundled.digest, { what: "the run's build in its header" });
    assert.doesNotMatch(await runProvider.textContent(), /not the build new runs get/);
    assert.equal(await runProvider.getAttribute("title"), `provider claude-code ${bundled.version}, build ${bundled.digest}, from bundled:claude-code`);
    // Another build of the provider dropped in while lab serves.
    const file = path.join(world.home, "providers", "claude-code.wasm");
    fs.copyFileSync(path.join(REPO_DIR, "host/tests/fixtures/wit-0.2.0/lab_provider_claude_code.wasm"), file);
    const swapped = await waitFor(async () => { const p = await serving(); return p.source === file ? p : null; }, { what: "the new build to serve" });
    // The form, opened, offers the new build; the run says it is on another one.
    const summary = page.locator("#new-run > summary");
    await summary.click();
    const option = page.locator("#nr-provider option[value=claude-code]");
    await waitFor(async () => (await option.getAttribute("title")) === `provider claude-code ${swapped.version}, build ${swapped.digest}, from ${file}`, { what: "the new build in the form" });
    await waitFor(async () => /not the build new runs get/.test(await runProvider.textContent()), { what: "the run marked as on another build" });
    assert.equal(await runProvider.getAttribute("data-build"), bundled.digest, "the run keeps its build");
    // A corrupt build: refused, said under the provider select; the build before serves.
    fs.writeFileSync(file, "\0asm not a component");
    await waitFor(async () => ((await serving()).refused || []).length > 0, { what: "the refusal in GET /providers" });
    await summary.click();
    await summary.click();
    const note = page.getByTestId("new-run-provider-refused");
    await waitFor(async () => /not a loadable WebAssembly component/.test(await note.textContent()), { what: "the refusal under the provider select" });
    assert.ok(await note.isVisible());
    assert.equal(await option.getAttribute("title"), `provider claude-code ${swapped.version}, build ${swapped.digest}, from ${file}`);
  });

  scenario("question card: click option 2 → answering → card gone, tool_result in chat, composer unlocks", { script: askScript(), prompt: "Add persistence" }, async ({ world, page, id }) => {
    const toolId = await waitQuestionCard(page);
    const v = await world.view(id);
    assert.equal(v.state, "question");
    assert.equal(toolId, v.pending_dialog.tool_id);
    const card = page.locator(sel.card);
    assert.equal(await card.locator(".q-text").textContent(), "Which database should we use?");
    assert.deepEqual(await page.locator(`${sel.option} .opt-label`).allTextContents(), ["PostgreSQL", "SQLite", "Redis"]);
    assert.equal(await page.locator(`${sel.option} .opt-desc`).nth(1).textContent(), "Embedded, one file");
    await waitBadge(page, "question");
    // The chat so far: the prompt, the agent's markdown, the pending tool call.
    await page.locator(sel.msg("user", "text")).filter({ hasText: "Add persistence" }).waitFor();
    assert.equal(await page.locator(`${sel.msg("assistant", "text")} strong`).first().textContent(), "persistence");
    assert.equal(await page.locator(sel.input).isDisabled(), true);
    await screenshot(page, "02-question-card");

    await recordStatuses(page);
    await page.locator(sel.option).nth(1).click();
    // While lab plays the keys: the status says so (how far it got), the pick is highlighted, nothing is clickable.
    await waitText(page.locator(sel.status), /^Answering…/, "the card status");
    assert.equal(await page.locator(sel.option).nth(1).evaluate((b) => b.classList.contains("chosen")), true);
    assert.equal(await page.locator(sel.option).nth(0).isDisabled(), true);
    await screenshot(page, "03-question-answering");

    await page.locator(sel.card).waitFor({ state: "detached" });
    const result = page.locator(sel.msg("tool", "tool_result")).filter({ hasText: "SQLite" });
    await result.waitFor();
    assert.equal(await result.locator("[data-testid=tool-name]").textContent(), "AskUserQuestion");
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "Thanks, noted." }).waitFor();
    await waitBadge(page, "idle");
    await page.locator(`${sel.input}:enabled`).waitFor();
    assert.equal(await page.locator(sel.lock).isHidden(), true);
    const statuses = await page.evaluate(() => window.__statuses);
    assert.equal(statuses[0], "Answering…", `status sequence ${JSON.stringify(statuses)}`);
    // The POST returns once lab accepted the answer; the keys' progress follows from the event stream.
    assert.ok(statuses.some((s) => /^Answering… key \d+ of \d+$/.test(s)), `status sequence ${JSON.stringify(statuses)}`);
    // After the last key the card says the answer is sent until the prompt goes; when
    // the last key's report and the prompt's end reach the page in one view (a loaded
    // machine), the card leaves first, right after the key before the last.
    const last = /^Answering… key (\d+) of (\d+)$/.exec(statuses[statuses.length - 1] || "");
    assert.ok(statuses.includes("Answer sent — waiting for the agent…") || (last && +last[1] === +last[2] - 1),
      `status sequence ${JSON.stringify(statuses)}`);
    // lab marks the dialog not answerable while it plays the keys; the operator's own
    // card must not flip to the read-only "answer in the terminal" card meanwhile.
    const cards = await page.evaluate(() => window.__cards);
    assert.ok(cards.every((c) => c === "question"), `cards seen while answering: ${JSON.stringify(cards)}`);
    assert.ok(!statuses.some((s) => /still open/.test(s)), `status sequence ${JSON.stringify(statuses)}`);
    await screenshot(page, "04-question-answered");

    const answer = await world.waitEvent((e) => e.event === "answer", "the answer");
    assert.equal(answer.tool_use_id, toolId);
    assert.deepEqual(answer.answers, { "Which database should we use?": "SQLite" });
    assert.equal(world.events().filter((e) => e.event === "answer").length, 1);
  });

  scenario("question card keyboard: Tab reaches the options, arrows move (wrapping), Enter answers", { script: askScript() }, async ({ world, page }) => {
    await waitQuestionCard(page);
    const focused = () => page.evaluate(() => {
      const a = document.activeElement;
      return a && a.dataset.testid === "dialog-option" ? Number(a.dataset.index) : (a && (a.dataset.testid || a.tagName));
    });
    // Start in the transcript, and Tab forward until an option has the focus.
    await page.getByTestId("chat").focus();
    await waitFor(async () => {
      if (typeof (await focused()) === "number") return true;
      await page.keyboard.press("Tab");
      return false;
    }, { timeout: 5000, interval: 10, what: "Tab to reach an option" });
    assert.equal(await focused(), 0, "Tab lands on the first option (roving tabindex)");
    const moves = [["ArrowDown", 1], ["ArrowDown", 2], ["ArrowDown", 0], ["ArrowUp", 2], ["ArrowUp", 1], ["End", 2], ["Home", 0], ["ArrowLeft", 2]];
    for (const [key, want] of moves) {
      await page.keyboard.press(key);
      assert.equal(await focused(), want, `after ${key}`);
    }
    // Only the focused option is in the tab order.
    assert.deepEqual(await page.locator(sel.option).evaluateAll((bs) => bs.map((b) => b.tabIndex)), [-1, -1, 0]);
    await screenshot(page, "05-question-keyboard-focus");
    await page.keyboard.press("Enter");
    await waitText(page.locator(sel.status), /Answering…|Answer sent/, "the card status");
    assert.equal(await page.locator(sel.option).nth(2).evaluate((b) => b.classList.contains("chosen")), true);
    const answer = await world.waitEvent((e) => e.event === "answer", "the answer");
    assert.deepEqual(answer.answers, { "Which database should we use?": "Redis" });
    await page.locator(sel.msg("tool", "tool_result")).filter({ hasText: "Redis" }).waitFor();
    await page.locator(sel.card).waitFor({ state: "detached" });
  });

  scenario("question card Other: free text is recorded verbatim by the agent", { script: askScript() }, async ({ world, page }) => {
    await waitQuestionCard(page);
    const text = `DuckDB; keep it "embedded" & small — $HOME \`x\` 'quoted' <b>not html</b> ;`;
    // An empty Other is refused in the page, without a request.
    await page.getByTestId("dialog-other-submit").click();
    await waitText(page.locator(sel.status), /^Type an answer first\.$/, "the card status");
    await page.getByTestId("dialog-other-input").fill(text);
    await screenshot(page, "06-question-other");
    await page.getByTestId("dialog-other-submit").click();
    await waitText(page.locator(sel.status), /Answering…|Answer sent/, "the card status");
    const answer = await world.waitEvent((e) => e.event === "answer", "the answer");
    assert.deepEqual(answer.answers, { "Which database should we use?": text });
    const result = page.locator(sel.msg("tool", "tool_result")).filter({ hasText: "DuckDB" });
    await result.waitFor();
    assert.ok((await result.textContent()).includes(text), "the tool_result shows the text verbatim");
    assert.equal(await result.locator("b").count(), 0, "no HTML from the answer");
    await page.locator(sel.card).waitFor({ state: "detached" });
  });

  scenario("composer lock: disabled with the reason while the question is pending (API: 409 dialog_pending); after answering a message reaches the agent", { script: askScript() }, async ({ world, page, id }) => {
    await waitQuestionCard(page);
    const input = page.locator(sel.input);
    assert.equal(await input.isDisabled(), true);
    assert.equal(await page.getByTestId("composer-send").isDisabled(), true);
    await waitText(page.locator(sel.lock), /^Answer the question above first$/, "the lock reason");
    assert.equal(await page.locator(sel.lock).isVisible(), true);
    assert.equal(await input.getAttribute("aria-describedby"), await page.locator(sel.lock).getAttribute("id"));
    const r = await world.api("POST", `/runs/${id}/messages`, { text: "sneaking in" });
    assert.equal(r.status, 409, JSON.stringify(r.body));
    assert.equal(r.body.error, "dialog_pending");
    await screenshot(page, "07-composer-locked");

    await page.locator(sel.option).first().click();
    await page.locator(sel.card).waitFor({ state: "detached" });
    await waitBadge(page, "idle");
    await page.locator(`${sel.input}:enabled`).waitFor();
    const message = "Please use migrations — and keep the schema in one file; thanks!";
    await input.click();
    await page.keyboard.type(message);
    await page.keyboard.press("Enter");
    const got = await world.waitEvent((e) => e.event === "user_message" && e.source === "composer", "the composer message");
    assert.equal(got.text, message);
    await page.locator(sel.msg("user", "text")).filter({ hasText: message }).waitFor();
    assert.equal(await input.inputValue(), "", "the composer is cleared after sending");
    assert.equal(world.events().some((e) => e.event === "user_message" && e.text === "sneaking in"), false, "the 409'd message never reached the agent");
    await screenshot(page, "08-composer-sent");
  });

  const PLAN = [
    "# Migration plan",
    "",
    "1. Add the `users` table",
    "2. Backfill from the CSV export",
    "",
    "- **Risk**: a short write freeze",
    "- Rollback: drop the table",
  ].join("\n");

  scenario("plan card (ExitPlanMode): plan rendered as markdown; answered from the page when the provider can, else the terminal hint", { script: { steps: [{ say: "Here is my plan." }, { plan: PLAN }, { idle: {} }] } }, async ({ world, page, id }) => {
    const card = page.locator(`${sel.card}[data-kind=plan]`);
    await card.waitFor();
    const plan = card.getByTestId("dialog-plan");
    assert.equal(await plan.locator("h1").textContent(), "Migration plan");
    assert.deepEqual(await plan.locator("ol > li").allTextContents(), ["Add the users table", "Backfill from the CSV export"]);
    assert.equal(await plan.locator("ol > li code").textContent(), "users");
    assert.equal(await plan.locator("ul > li").count(), 2);
    assert.equal(await plan.locator("ul > li strong").textContent(), "Risk");
    assert.ok(!(await plan.textContent()).includes("# Migration"), "no raw markdown");
    const agent = await world.agentName();
    await waitText(card.getByTestId("dialog-title"), new RegExp(`^${reEsc(agent)} has a plan and is waiting for approval$`), "the card title");
    const v = await world.view(id);
    assert.equal(v.pending_dialog.kind, "plan");
    await screenshot(page, "09-plan-card");
    if (!v.pending_dialog.answerable) {
      // A provider that cannot answer plans (lab:provider@0.1.0): the terminal.
      assert.equal(await card.getByTestId("dialog-hint").textContent(), "Answer this in the terminal");
      assert.equal(await card.locator("button[data-testid=dialog-option], [data-testid=dialog-other-input]").count(), 0, "no answer controls");
      assert.match(await card.getByTestId("attach-command").textContent(), /^tmux -S \S+tmux\.sock attach -t \S+$/);
      await waitText(page.locator(sel.lock), new RegExp(`^${reEsc(agent)} is waiting in the terminal$`), "the lock reason");
      const r = await world.api("POST", `/runs/${id}/dialog/answer`, { tool_id: v.pending_dialog.tool_id, answers: [{ option: 0 }] });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.equal(r.body.error, "not_answerable");
      assert.equal(world.events().some((e) => e.event === "answer"), false);
      return;
    }
    // The plan's own options as buttons; the first approves it.
    assert.deepEqual(await card.locator("[data-testid=dialog-option] .opt-label").allTextContents(), v.pending_dialog.options.map((o) => o.label));
    await waitText(page.locator(sel.lock), /^Answer the prompt above first$/, "the lock reason");
    await card.locator("[data-testid=dialog-option]").first().click();
    const answer = await world.waitEvent((e) => e.event === "answer" && e.tool_name === "ExitPlanMode", "the answer");
    assert.equal(answer.outcome, "approved", JSON.stringify(answer));
    await page.locator(sel.card).waitFor({ state: "detached" });
  });

  scenario("multi-question card: one answer per question, then one submit", { script: { steps: [{ ask: { questions: [DB_QUESTION, DEPLOY_QUESTION] } }, { idle: {} }] } }, async ({ world, page, id }) => {
    const card = page.locator(`${sel.card}[data-kind=question][data-answerable=true]`);
    await card.waitFor();
    const agent = await world.agentName();
    await waitText(card.locator(".card-title"), new RegExp(`^\\?${reEsc(agent)} is asking 2 questions$`), "the card title");
    const parts = card.getByTestId("dialog-question");
    assert.equal(await parts.count(), 2);
    assert.deepEqual(await parts.nth(0).locator("[data-testid=dialog-option] .opt-label").allTextContents(), ["PostgreSQL", "SQLite", "Redis"]);
    assert.deepEqual(await parts.nth(1).locator("[data-testid=dialog-option] .opt-label").allTextContents(), ["Fly.io", "Own VPS"]);
    await waitText(page.locator(sel.lock), /^Answer the questions above first$/, "the lock reason");
    const submit = card.getByTestId("dialog-submit-answers");
    assert.equal(await submit.isDisabled(), true, "nothing chosen yet");
    await parts.nth(0).locator("[data-testid=dialog-option]").nth(1).click();
    assert.equal(await submit.isDisabled(), true, "the second question is still open");
    await parts.nth(1).locator("[data-testid=dialog-option]").nth(0).click();
    assert.equal(await parts.nth(1).locator("[data-testid=dialog-option]").nth(0).getAttribute("aria-pressed"), "true");
    await submit.click();
    const answer = await world.waitEvent((e) => e.event === "answer" && e.tool_name === "AskUserQuestion", "the answer");
    assert.match(JSON.stringify(answer), /SQLite/);
    assert.match(JSON.stringify(answer), /Fly\.io/);
    await page.locator(sel.card).waitFor({ state: "detached" });
    const v = await world.waitView(id, (v) => v.state === "idle", "idle after the answers");
    assert.equal(v.pending_dialog, null);
    await screenshot(page, "10-multi-question-card");
  });

  scenario("generic card: the agent reports it waits (Notification) with no dialog → needs_input, 'open the terminal' with its message", {
    script: { steps: [{ say: "Let me look around." }, { notify: { notification_type: "permission_prompt", message: "Needs your permission to use Bash" } }, { sleep_ms: 600000 }] },
  }, async ({ world, page, id }) => {
    const v = await world.waitView(id, (v) => v.state === "needs_input", "state needs_input");
    assert.equal(v.pending_dialog, null);
    assert.equal(v.blocked.kind, "needs_input");
    assert.equal(v.blocked.notification_type, "permission_prompt", "the agent's own word, deprecated, one release more");
    const agent = await world.agentName();
    const card = page.locator(`${sel.card}[data-kind=generic]`);
    await card.waitFor();
    await waitText(card.locator(".card-title"), new RegExp(`^!${reEsc(agent)} needs input — open the terminal$`), "the card title");
    assert.equal(await card.getByTestId("blocked-type").textContent(), "needs input");
    // What the agent's Notification hook said is what the operator reads.
    const notified = await world.waitEvent((e) => e.event === "notification", "the notification");
    assert.equal(v.blocked.message, notified.message);
    assert.equal(await card.getByTestId("blocked-message").textContent(), notified.message);
    assert.equal(await card.getByTestId("dialog-hint").textContent(), "Answer this in the terminal");
    await waitBadge(page, "needs_input");
    await waitText(page.locator(sel.lock), new RegExp(`^${reEsc(agent)} is waiting in the terminal$`), "the lock reason");
    await screenshot(page, "11-generic-card");
  });

  scenario("a turn the model API refused: a 'stopped on an error' card with what the API said, the composer open, a resend clears it", {
    script: { steps: [
      { api_error: { error: "rate_limit", text: "API Error: Request rejected (429) · per-minute rate limit" } },
      { idle: {} }, { say: "Hello again." }, { idle: {} }] },
  }, async ({ world, page, id }) => {
    const v = await world.waitView(id, (v) => v.state === "needs_input", "state needs_input");
    assert.equal(v.blocked.kind, "error");
    const agent = await world.agentName();
    const card = page.locator(`${sel.card}[data-kind=error]`);
    await card.waitFor();
    await waitText(card.locator(".card-title"), new RegExp(`^!${reEsc(agent)} stopped on an error$`), "the card title");
    assert.equal(await card.getByTestId("blocked-message").textContent(), "Rate limited: API Error: Request rejected (429) · per-minute rate limit");
    await page.locator("[data-testid=message][data-kind=turn_error]").waitFor();
    await waitBadge(page, "needs_input");
    assert.equal(await page.locator(sel.lock).isHidden(), true, "the composer is open: the agent waits for a message");
    await screenshot(page, "11b-stopped-on-an-error");
    await page.locator(sel.input).fill("try again");
    await page.getByTestId("composer-send").click();
    await world.waitView(id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "Hello again."), "the reply to the resend");
    await card.waitFor({ state: "detached" });
  });

  scenario("a dialog of a kind the page does not know is shown as the generic card", {
    script: { steps: [{ say: "Ready." }, { idle: {} }] }, open: false,
  }, async ({ world, page, id }) => {
    // The API's flat dialog shape, with a kind this page does not know (kinds may grow).
    const dialog = {
      kind: "elicitation", tool_id: "toolu_x1", call_id: "toolu_x1", tool_name: "Elicit", answerable: false,
      questions: [], plan: null, options: [], feedback_option: null, permission: null,
      generic: { title: "Pick a server", text: "" }, deep_link: null, source: "spool",
    };
    await holdEventStream(page, { run_id: id, state: "question", pending_dialog: dialog, blocked: null, composer_lock: null, messages: [] });
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=generic][data-tool-id=toolu_x1]`);
    await card.waitFor();
    assert.equal(await card.getByTestId("dialog-kind").textContent(), "elicitation");
    assert.equal(await card.getByTestId("dialog-message").textContent(), "Pick a server");
    assert.equal(await card.getByTestId("dialog-hint").textContent(), "Answer this in the terminal");
    assert.equal(await card.locator("button[data-testid=dialog-option]").count(), 0, "no answer controls");
  });

  scenario("no_dialog: a stale card, answered elsewhere meanwhile → click → replaced by the current state with the reason", { script: askScript(), open: false }, async ({ world, page, id }) => {
    const stale = await world.waitView(id, (v) => v.state === "question", "the question");
    await holdEventStream(page, stale);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const toolId = await waitQuestionCard(page);
    // Someone else answers it (the first option) while this page is not told.
    const r = await world.api("POST", `/runs/${id}/dialog/answer`, { tool_id: toolId, answers: [{ option: 0 }] });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await world.waitView(id, (v) => v.state === "idle", "the run to go idle");
    assert.equal(await page.locator(sel.option).count(), 3, "the page still shows the stale card");
    await page.locator(sel.option).nth(2).click();
    const notice = page.locator("[data-testid=dialog-area] .dialog-notice[data-testid=dialog-status]");
    await waitText(notice, /^That question was already answered$/, "the notice");
    assert.equal(await page.locator(sel.card).count(), 0, "the stale card is gone");
    await page.locator(sel.msg("tool", "tool_result")).filter({ hasText: "PostgreSQL" }).waitFor();
    await waitBadge(page, "idle");
    await page.locator(`${sel.input}:enabled`).waitFor();
    await screenshot(page, "12-no-dialog-notice");
    const answers = world.events().filter((e) => e.event === "answer");
    assert.equal(answers.length, 1, "only the first answer reached the agent");
    assert.deepEqual(answers[0].answers, { "Which database should we use?": "PostgreSQL" });
  });

  scenario("dialog_changed: a stale card while the next question is pending → click → the new question with the reason", {
    script: { steps: [{ ask: { questions: [DB_QUESTION] } }, { ask: { questions: [DEPLOY_QUESTION] } }, { say: "Both noted." }, { idle: {} }] },
    open: false,
  }, async ({ world, page, id }) => {
    const stale = await world.waitView(id, (v) => v.state === "question", "the first question");
    await holdEventStream(page, stale);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const first = await waitQuestionCard(page);
    const r = await world.api("POST", `/runs/${id}/dialog/answer`, { tool_id: first, answers: [{ option: 0 }] });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const v = await world.waitView(id, (v) => v.pending_dialog && v.pending_dialog.tool_id !== first, "the second question");
    const second = v.pending_dialog.tool_id;
    assert.equal(await page.locator(`${sel.card}[data-tool-id="${first}"]`).count(), 1, "the page still shows the first question");
    await page.locator(sel.option).nth(1).click();
    const card = page.locator(`${sel.card}[data-tool-id="${second}"]`);
    await card.waitFor();
    await waitText(card.getByTestId("dialog-status"), /^The question changed before your answer was sent$/, "the card status");
    assert.equal(await card.locator(".q-text").textContent(), DEPLOY_QUESTION.question);
    assert.deepEqual(await card.locator("[data-testid=dialog-option] .opt-label").allTextContents(), ["Fly.io", "Own VPS"]);
    await screenshot(page, "13-dialog-changed");
    let answers = world.events().filter((e) => e.event === "answer");
    assert.equal(answers.length, 1, "the stale click did not reach the agent");
    assert.deepEqual(answers[0].answers, { [DB_QUESTION.question]: "PostgreSQL" });
    // The new card works: answer it from the page.
    await card.getByTestId("dialog-option").nth(1).click();
    const second_answer = await world.waitEvent((e) => e.event === "answer" && e.tool_use_id === second, "the second answer");
    assert.deepEqual(second_answer.answers, { [DEPLOY_QUESTION.question]: "Own VPS" });
    answers = world.events().filter((e) => e.event === "answer");
    assert.equal(answers.length, 2);
  });

  scenario("markdown safety in a live chat: HTML from the agent is shown as text, never run", {
    script: { steps: [
      { say: 'Look: <img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script> and [a link](javascript:window.__xss=3) and **bold** and [docs](https://example.com/d)' },
      { sleep_ms: 300 },
      { say: "That was all." },
      { idle: {} },
    ] },
  }, async ({ page }) => {
    const bubble = page.locator(sel.msg("assistant", "text")).filter({ hasText: "Look:" });
    await bubble.waitFor();
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "That was all." }).waitFor();
    const text = await bubble.textContent();
    assert.ok(text.includes('<img src=x onerror="window.__xss=1">'), text);
    assert.ok(text.includes("<script>window.__xss=2</script>"), text);
    assert.equal(await page.locator("[data-testid=chat] img, [data-testid=chat] script, [data-testid=chat] [onerror]").count(), 0);
    assert.equal(await bubble.locator("strong").textContent(), "bold");
    const hrefs = await bubble.locator("a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    assert.deepEqual(hrefs, ["https://example.com/d"], "only the http(s) link is a link");
    await screenshot(page, "14-markdown-safety");
    assert.equal(await page.evaluate(() => typeof window.__xss), "undefined");
  });

  scenario("lab serve exits promptly on SIGTERM while the UI has a run open", {
    script: { steps: [{ say: "Idle now." }, { idle: {} }] },
  }, async ({ world, page }) => {
    await waitBadge(page, "idle");
    await waitFor(async () => (await page.getByTestId("connection-status").getAttribute("data-state")) === "live", { what: "the event stream to be live" });
    const { graceful, ms } = await world.stopLab(3000);
    assert.ok(graceful, `lab serve was still running ${ms} ms after SIGTERM (killed)`);
  });

  scenario("a demo (lab serve --demo): the banner, and the start form set up for the demo", {
    script: { steps: [{ idle: {} }] }, prompt: null, serveArgs: ["--demo", "--demo-workdir", "/tmp/lab-demo-workdir"],
  }, async ({ world, page }) => {
    const info = (await world.api("GET", "/info")).body;
    assert.equal(info.demo, true, JSON.stringify(info));
    assert.equal(info.demo_workdir, "/tmp/lab-demo-workdir");
    const banner = page.getByTestId("demo-banner");
    await banner.waitFor();
    assert.equal((await banner.textContent()).trim(), "Demo — the agent talks to a scripted stand-in on this machine; nothing leaves it");
    await page.locator("#new-run[open]").waitFor();
    await waitFor(async () => (await page.getByTestId("new-run-workdir").inputValue()) === "/tmp/lab-demo-workdir", { what: "the demo workdir in the form" });
    // Plan mode when the provider offers it; a provider without modes gets no select.
    const modes = (await world.providerInfo()).permission_modes || [];
    if (modes.includes("plan")) {
      await waitFor(async () => (await page.getByTestId("new-run-permission-mode").inputValue()) === "plan", { what: "plan mode" });
    } else {
      assert.equal(await page.getByTestId("new-run-permission-mode").isVisible(), false, `modes ${JSON.stringify(modes)}: no select`);
    }
    assert.ok((await page.getByTestId("new-run-prompt").inputValue()).length > 0, "a prompt is filled in");
    // The banner sits above the app, which still fits the window.
    const b = await banner.boundingBox();
    const sidebar = await page.locator(".sidebar").boundingBox();
    assert.ok(b.y === 0 && sidebar.y >= b.height - 1, `banner ${JSON.stringify(b)} sidebar ${JSON.stringify(sidebar)}`);
    assert.ok(sidebar.y + sidebar.height <= 860 + 1, `the app overflows the window: ${JSON.stringify(sidebar)}`);
    await screenshot(page, "18-demo-banner");
  });

  scenario("start a run from the form, then stop it (confirm) → ended", { script: { steps: [{ say: "Ready when you are." }, { idle: {} }] }, prompt: null }, async ({ world, page }) => {
    await page.getByTestId("run-list").waitFor();
    const details = page.locator("#new-run");
    if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
    await waitFor(async () => (await page.locator("#nr-provider option[value=claude-code]").count()) === 1, { what: "the claude-code provider option" });
    await page.getByTestId("new-run-provider").selectOption("claude-code");
    await page.getByTestId("new-run-workdir").fill(world.workdir);
    const prompt = "Start from the form: tidy up the README";
    await page.getByTestId("new-run-prompt").fill(prompt);
    await screenshot(page, "15-form-filled");
    await page.getByTestId("new-run-submit").click();

    await page.waitForURL(/#\/runs\/[^/]+$/);
    const id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/runs\//, ""));
    const run = (await world.api("GET", `/runs/${id}`)).body;
    assert.equal(run.provider, "claude-code");
    assert.equal(run.workdir, world.workdir);
    // The mode the form showed (the provider's first) is the run's, sent explicitly.
    assert.equal(run.permission_mode, (await world.providerInfo()).permission_modes[0], "the shown mode is sent");
    await page.locator(`[data-testid=run-view][data-run-id="${id}"]`).waitFor();
    await page.locator(sel.msg("user", "text")).filter({ hasText: prompt }).waitFor();
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "Ready when you are." }).waitFor();
    await waitBadge(page, "idle");
    await page.locator(`[data-testid=run-item][data-run-id="${id}"][data-state=idle]`).waitFor();
    const start = await world.waitEvent((e) => e.event === "start", "start");
    assert.equal(start.prompt, prompt);
    assert.equal(start.cwd, world.workdir);
    assert.equal(world.tmux("has-session", "-t", run.tmux_target).status, 0, "the tmux session is there");
    await screenshot(page, "16-run-started");

    let confirmText = null;
    page.once("dialog", (d) => { confirmText = d.message(); d.accept(); });
    await page.getByTestId("stop-button").click();
    await waitBadge(page, "ended");
    assert.match(confirmText, new RegExp(`^Stop run ${id}\\?`));
    await page.locator(`[data-testid=run-item][data-run-id="${id}"][data-state=ended]`).waitFor();
    assert.equal(await page.getByTestId("stop-button").isDisabled(), true);
    assert.equal(await page.locator(sel.input).isDisabled(), true);
    await waitText(page.locator(sel.lock), /^The run has ended$/, "the lock reason");
    assert.equal((await world.api("GET", `/runs/${id}`)).body.state, "ended");
    assert.notEqual(world.tmux("has-session", "-t", run.tmux_target).status, 0, "the tmux session is gone");
    await screenshot(page, "17-run-stopped");
  });
});

// ------------------------------------------------------------------ permission, plan and generic prompts

/** A held view with `dialog` pending (the other fields as the host sends them). */
function dialogView(id, dialog) {
  return { run_id: id, state: "question", pending_dialog: dialog, blocked: null, composer_lock: { code: "dialog_pending", message: "a dialog is pending" }, messages: [] };
}

/** A pending_dialog as the host serializes it (host/src/runs/live/view.rs DialogJson). */
function dialogJson(kind, fields) {
  return {
    tool_id: `${kind}-0001`, call_id: null, tool_name: kind, kind, answerable: true,
    questions: [], plan: null, options: [], feedback_option: null, deep_link: null, source: "spool",
    ...fields,
  };
}

const PERMISSION = dialogJson("permission", {
  tool_id: "perm-00c0ffee", call_id: "toolu_01perm", tool_name: "Bash",
  options: [
    { label: "Yes", description: "" },
    { label: "Yes, and always allow access to webshop/ from this project", description: "" },
    { label: "No", description: "Tell the agent what to do instead" },
  ],
  feedback_option: 2,
  permission: { tool: "Bash", summary: "rm -rf build <img src=x onerror=\"window.__xss=1\">\nRemove the build folder", reason: "Deletes files outside the sandbox" },
});

/**
 * Route GET /providers through to lab and change what it says (the display name, the
 * permission modes) — to prove the page takes them from there.
 */
async function patchProviders(page, patch) {
  await page.route(/\/providers$/, async (route) => {
    // route.fetch sends the page's headers, not its cookie: lab's token as a script would.
    const auth = page.labToken ? { authorization: `Bearer ${page.labToken}` } : {};
    const res = await route.fetch({ headers: { ...route.request().headers(), ...auth } });
    const list = (await res.json()).map((p) => (p.name === "claude-code" ? { ...p, ...patch } : p));
    await route.fulfill({ response: res, json: list, headers: { ...res.headers(), "x-lab-test-fake": "1" } });
  });
}

/**
 * Answer POST /runs/{id}/dialog/answer in the page with `reply` ({status, json}) and
 * record the bodies sent (the run behind the held view has no such dialog).
 */
async function interceptAnswers(page, reply = { status: 202, json: { keys: ["1"], answer: null } }) {
  const bodies = [];
  await page.route(/\/runs\/[^/]+\/dialog\/answer$/, async (route) => {
    bodies.push(route.request().postDataJSON());
    await route.fulfill({ status: reply.status, contentType: "application/json", body: JSON.stringify(reply.json) });
  });
  return bodies;
}

describe("permission, plan and generic prompts", () => {
  const idleScript = { script: { steps: [{ say: "Ready." }, { idle: {} }] }, open: false };

  // A rendering test: the bundled provider of this build may not produce permission
  // dialogs, so the view is held at one (page.route on the event stream) and the answer
  // is intercepted; the end-to-end test below does it for real.
  scenario("permission card (rendering test): tool, summary as code, reason, options in order; Yes answers {option: 0}; the agent by its display name", idleScript, async ({ world, page, id }) => {
    await patchProviders(page, { display_name: "Agent Smith" });
    await holdEventStream(page, dialogView(id, PERMISSION));
    const bodies = await interceptAnswers(page);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=permission][data-tool-id=${PERMISSION.tool_id}]`);
    await card.waitFor();
    await waitText(card.getByTestId("dialog-title"), /^Agent Smith asks for permission$/, "the title with the display name");
    assert.equal(await card.getByTestId("permission-tool").textContent(), "Bash");
    const summary = card.getByTestId("permission-summary");
    assert.equal(await summary.evaluate((e) => e.tagName), "PRE");
    assert.equal(await summary.locator("code").textContent(), PERMISSION.permission.summary, "verbatim, as text");
    assert.equal(await card.locator("img").count(), 0, "no HTML from the summary");
    assert.equal(await card.getByTestId("permission-reason").textContent(), "Deletes files outside the sandbox");
    assert.deepEqual(await card.locator("[data-testid=dialog-option] .opt-label").allTextContents(), PERMISSION.options.map((o) => o.label));
    assert.equal(await card.locator("[data-testid=dialog-option][data-feedback=true]").getAttribute("data-index"), "2");
    assert.equal(await card.getByTestId("dialog-source").count(), 0, "from the spool: no screen note");
    await waitText(page.locator(sel.lock), /^Answer the prompt above first$/, "the lock reason");
    await screenshot(page, "20-permission-card");

    await card.locator("[data-testid=dialog-option]").first().click();
    await waitText(page.locator(sel.status), /^Answer sent — waiting for the agent…$/, "the card status");
    assert.deepEqual(bodies, [{ tool_id: PERMISSION.tool_id, answers: [{ option: 0 }] }]);
    assert.equal(await card.locator("[data-testid=dialog-option]").first().evaluate((b) => b.classList.contains("chosen")), true);
    assert.equal(await card.locator("[data-testid=dialog-option]").nth(1).isDisabled(), true);
    assert.equal(await page.evaluate(() => typeof window.__xss), "undefined");
  });

  scenario("an accepted answer that could not be played (rendering test): the card says why, and the prompt can be answered again", idleScript, async ({ world, page, id }) => {
    // lab took the answer (202), then found the prompt gone before its keys: the view's
    // `answer` says so (here it arrives before the POST's reply, which the page must handle).
    const started_at = "2026-11-30T18:00:00.000Z";
    const failed = {
      tool_id: PERMISSION.tool_id, state: "failed", keys: ["1"], played: 0, started_at, finished_at: "2026-11-30T18:00:01.000Z",
      error: { error: "no_dialog", message: "no dialog is pending for that tool_id (nothing pending, or it was already answered)" },
    };
    await holdEventStream(page, { ...dialogView(id, PERMISSION), answer: failed });
    const bodies = await interceptAnswers(page, { status: 202, json: { keys: ["1"], answer: { ...failed, state: "waiting", error: undefined, finished_at: undefined } } });
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=permission][data-tool-id=${PERMISSION.tool_id}]`);
    await card.waitFor();
    await card.locator("[data-testid=dialog-option]").first().click();
    await waitText(card.getByTestId("dialog-status"), /^The answer was not played: no dialog is pending for that tool_id/, "the reason on the card");
    assert.equal(bodies.length, 1);
    assert.equal(await card.locator("[data-testid=dialog-option]").first().isDisabled(), false, "the options work again");
    await card.locator("[data-testid=dialog-option]").nth(1).click();
    await waitFor(async () => bodies.length === 2, { what: "a second answer sent" });
    assert.deepEqual(bodies[1], { tool_id: PERMISSION.tool_id, answers: [{ option: 1 }] });
  });

  for (const [state, error, lead] of [
    ["failed", { error: "not_on_screen", message: "the prompt was not on the agent's screen (drawn and still for 0 ms) within 5000 ms of the answer, so nothing was typed: look at the terminal" }, /^Nothing was typed: the prompt was not on the agent's screen/],
    ["lost", { error: "answer_lost", message: "the keys were typed 2 times but the prompt is still on the agent's screen, unchanged, 3 s later: answer it in the terminal" }, /^The answer did not take: the keys were typed 2 times/],
  ]) {
    scenario(`an answer ${state} with ${error.error} (rendering test): the card says so, shows the attach command, and can be answered again`, idleScript, async ({ world, page, id }) => {
      const started_at = "2026-11-30T18:00:00.000Z";
      const done = { tool_id: PERMISSION.tool_id, state, keys: ["1"], played: state === "lost" ? 1 : 0, started_at, finished_at: "2026-11-30T18:00:06.000Z", error };
      await holdEventStream(page, { ...dialogView(id, PERMISSION), answer: done });
      const bodies = await interceptAnswers(page, { status: 202, json: { keys: ["1"], answer: { ...done, state: "waiting", played: 0, error: undefined, finished_at: undefined } } });
      await page.goto(new URL(`#/runs/${id}`, world.url).href);
      const card = page.locator(`${sel.card}[data-kind=permission][data-tool-id=${PERMISSION.tool_id}]`);
      await card.waitFor();
      assert.equal(await card.locator("details.card-terminal").evaluate((d) => d.open), false, "closed before");
      await card.locator("[data-testid=dialog-option]").first().click();
      await waitText(card.getByTestId("dialog-status"), lead, "the reason on the card");
      assert.equal(await card.locator("details.card-terminal").evaluate((d) => d.open), true, "the terminal part is open");
      assert.match(await card.getByTestId("attach-command").textContent(), /^tmux .*attach -t /);
      assert.equal(await card.locator("[data-testid=dialog-option]").first().isDisabled(), false, "the options work again");
      assert.equal(bodies.length, 1);
    });
  }

  scenario("permission card (rendering test): the feedback option asks for text first, then sends {feedback}; keyboard only", idleScript, async ({ world, page, id }) => {
    await holdEventStream(page, dialogView(id, { ...PERMISSION, source: "screen" }));
    const bodies = await interceptAnswers(page);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=permission]`);
    await card.waitFor();
    assert.equal(await card.getByTestId("dialog-source").textContent(), "read from the agent's screen");
    // The first option has the focus; arrows move it, End reaches the feedback option.
    await waitFor(async () => page.evaluate(() => document.activeElement && document.activeElement.dataset.index === "0"), { what: "focus on the first option" });
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.index), "1");
    await page.keyboard.press("End");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.index), "2");
    const box = card.getByTestId("dialog-feedback");
    assert.equal(await box.isVisible(), false, "no text box before the option is chosen");
    await page.keyboard.press("Enter");
    await box.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "dialog-feedback-input", "the text box takes the focus");
    assert.equal(await card.locator("[data-feedback=true]").getAttribute("aria-expanded"), "true");
    assert.deepEqual(bodies, [], "choosing the feedback option sends nothing yet");
    // Empty text is refused in the page.
    await page.keyboard.press("Enter");
    await waitText(page.locator(sel.status), /^Type what to say first\.$/, "the card status");
    const text = `Use "make clean" instead <b>please</b> & keep $HOME`;
    await page.keyboard.type(text);
    await screenshot(page, "21-permission-feedback");
    await page.keyboard.press("Enter");
    await waitText(page.locator(sel.status), /^Answer sent/, "the card status");
    assert.deepEqual(bodies, [{ tool_id: PERMISSION.tool_id, answers: [{ feedback: { option: 2, text } }] }]);
  });

  scenario("permission card (rendering test): answered elsewhere meanwhile → 409 no_dialog → the current state with the reason", idleScript, async ({ world, page, id }) => {
    await holdEventStream(page, dialogView(id, PERMISSION));
    const bodies = await interceptAnswers(page, { status: 409, json: { error: "no_dialog", message: "no dialog is pending" } });
    // The page re-reads the view after a 409: the prompt is gone by then.
    await page.route(/\/runs\/[^/]+\/messages(\?.*)?$/, (route) => route.request().method() === "GET"
      ? route.fulfill({ json: { run_id: id, state: "idle", pending_dialog: null, blocked: null, composer_lock: null, messages: [] } })
      : route.continue());
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    await page.locator(`${sel.card}[data-kind=permission]`).waitFor();
    await page.locator(sel.option).nth(1).click();
    const notice = page.locator("[data-testid=dialog-area] .dialog-notice[data-testid=dialog-status]");
    await waitText(notice, /^That prompt was already answered$/, "the notice");
    assert.equal(await page.locator(sel.card).count(), 0);
    assert.deepEqual(bodies, [{ tool_id: PERMISSION.tool_id, answers: [{ option: 1 }] }]);
    await page.locator(`${sel.input}:enabled`).waitFor();
  });

  scenario("permission card (rendering test): not answerable → the options listed, answer in the terminal", idleScript, async ({ world, page, id }) => {
    const agent = await world.agentName();
    await holdEventStream(page, dialogView(id, { ...PERMISSION, answerable: false, permission: { tool: "mcp__db__query", summary: "{\"sql\":\"drop table users\"}", reason: null } }));
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=permission][data-answerable=false]`);
    await card.waitFor();
    assert.equal(await card.getByTestId("permission-summary").textContent(), "{\"sql\":\"drop table users\"}");
    assert.equal(await card.getByTestId("permission-reason").count(), 0, "no reason: no line");
    assert.deepEqual(await card.locator("[data-testid=dialog-readonly-option] .opt-label").allTextContents(), PERMISSION.options.map((o) => o.label));
    assert.equal(await card.locator("button[data-testid=dialog-option]").count(), 0, "no answer controls");
    assert.equal(await card.getByTestId("dialog-hint").textContent(), "Answer this in the terminal");
    await waitText(page.locator(sel.lock), new RegExp(`^${reEsc(agent)} is waiting in the terminal$`), "the lock reason");
  });

  const PLAN_OPTIONS = dialogJson("plan", {
    tool_id: "toolu_01plan", call_id: "toolu_01plan", tool_name: "ExitPlanMode",
    plan: "# Migration plan\n\n1. Add the `users` table\n2. Backfill\n\n<script>window.__xss=1</script>",
    options: [{ label: "Yes", description: "" }, { label: "No, keep planning", description: "" }],
    feedback_option: 1,
  });

  scenario("plan card with options (rendering test): the plan as markdown, options as buttons, the feedback option with a text box", idleScript, async ({ world, page, id }) => {
    await holdEventStream(page, dialogView(id, PLAN_OPTIONS));
    const bodies = await interceptAnswers(page);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=plan][data-answerable=true]`);
    await card.waitFor();
    const plan = card.getByTestId("dialog-plan");
    assert.equal(await plan.locator("h1").textContent(), "Migration plan");
    assert.equal(await plan.locator("ol > li code").textContent(), "users");
    assert.equal(await card.locator("script").count(), 0);
    assert.deepEqual(await card.locator("[data-testid=dialog-option] .opt-label").allTextContents(), ["Yes", "No, keep planning"]);
    await card.locator("[data-testid=dialog-option][data-feedback=true]").click();
    await card.getByTestId("dialog-feedback-input").fill("Split step 2 into batches");
    await screenshot(page, "22-plan-options");
    await card.getByTestId("dialog-feedback-submit").click();
    await waitText(page.locator(sel.status), /^Answer sent/, "the card status");
    assert.deepEqual(bodies, [{ tool_id: PLAN_OPTIONS.tool_id, answers: [{ feedback: { option: 1, text: "Split step 2 into batches" } }] }]);
    assert.equal(await page.evaluate(() => typeof window.__xss), "undefined");
  });

  scenario("generic card (rendering test): title, text in a <pre>, options as buttons when answerable", idleScript, async ({ world, page, id }) => {
    const trust = dialogJson("generic", {
      tool_id: "trust-00ab", tool_name: "trust", source: "screen",
      options: [{ label: "Yes, I trust this folder", description: "The run goes on" }, { label: "No, exit", description: "The run ends" }],
      generic: { title: "Trust /work/webshop?", text: "Quick safety check: is this a project you trust?\n\n<b>1. Yes</b>" },
    });
    await holdEventStream(page, dialogView(id, trust));
    const bodies = await interceptAnswers(page);
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=generic][data-tool-id=trust-00ab]`);
    await card.waitFor();
    assert.equal(await card.getByTestId("dialog-title").textContent(), "Trust /work/webshop?");
    const text = card.getByTestId("generic-text");
    assert.equal(await text.evaluate((e) => e.tagName), "PRE");
    assert.equal(await text.textContent(), trust.generic.text);
    assert.equal(await card.locator("b").count(), 0);
    assert.equal(await card.getByTestId("dialog-source").textContent(), "read from the agent's screen");
    assert.deepEqual(await card.locator("[data-testid=dialog-option] .opt-label").allTextContents(), ["Yes, I trust this folder", "No, exit"]);
    await screenshot(page, "23-generic-options");
    await card.locator("[data-testid=dialog-option]").first().click();
    await waitText(page.locator(sel.status), /^Answer sent/, "the card status");
    assert.deepEqual(bodies, [{ tool_id: "trust-00ab", answers: [{ option: 0 }] }]);
  });

  scenario("generic card (rendering test): not answerable → its text and 'answer it in the terminal' with the terminal link", idleScript, async ({ world, page, id }) => {
    const review = dialogJson("generic", {
      tool_id: "screen-77", tool_name: "screen", answerable: false, source: "screen",
      options: [], generic: { title: "Hooks need review", text: "3 hooks changed since the last run.\nReview them in the agent." },
    });
    await holdEventStream(page, dialogView(id, review));
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=generic][data-answerable=false]`);
    await card.waitFor();
    assert.equal(await card.getByTestId("dialog-title").textContent(), "Hooks need review");
    assert.equal(await card.getByTestId("generic-text").textContent(), review.generic.text);
    assert.equal(await card.getByTestId("dialog-hint").textContent(), "Answer this in the terminal");
    assert.equal(await card.locator(".terminal-link, [data-testid=deep-link]").first().getAttribute("href"), `#/runs/${id}/terminal`);
    assert.equal(await card.locator("button[data-testid=dialog-option]").count(), 0);
  });

  scenario("new-run form: the permission modes are the selected provider's (first = default, not sent); none → no select", {
    script: { steps: [{ say: "Ready." }, { idle: {} }] }, prompt: null, open: false,
  }, async ({ world, page }) => {
    await patchProviders(page, { permission_modes: ["default", "plan", "acceptEdits"] });
    await page.goto(world.url);
    const details = page.locator("#new-run");
    await details.locator("summary").waitFor();
    if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
    const mode = page.getByTestId("new-run-permission-mode");
    await waitFor(async () => (await mode.locator("option").count()) === 3, { what: "the provider's modes" });
    assert.deepEqual(await mode.locator("option").evaluateAll((os) => os.map((o) => o.value)), ["default", "plan", "acceptEdits"]);
    assert.equal(await mode.inputValue(), "default");
    await mode.selectOption("plan");
    await page.getByTestId("new-run-workdir").fill(world.workdir);
    await page.getByTestId("new-run-prompt").fill("plan it");
    await page.getByTestId("new-run-submit").click();
    await page.waitForURL(/#\/runs\/[^/]+$/);
    const id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/runs\//, ""));
    assert.equal((await world.api("GET", `/runs/${id}`)).body.permission_mode, "plan");
    const start = await world.waitEvent((e) => e.event === "start", "start");
    assert.equal(start.permission_mode, "plan");

    // A provider without modes: no select, nothing sent.
    await page.unroute(/\/providers$/);
    await patchProviders(page, { permission_modes: [] });
    await page.reload();
    await page.locator("#nr-provider option[value=claude-code]").waitFor({ state: "attached" });
    await waitFor(async () => !(await mode.isVisible()) && (await mode.isDisabled()), { what: "no permission-mode select" });
  });

  scenario("end to end: fake-claude's bash step → a permission card → Yes → the agent ran it", {
    script: { steps: [
      { say: "Cleaning up." },
      { bash: { command: "rm -rf build", description: "Remove the build folder", output: "removed build/", notify_after_ms: 60000 } },
      { say: "Cleaned." },
      { idle: {} },
    ] },
  }, async ({ t, world, page, id }) => {
    const provider = await world.providerInfo();
    if (provider.wit === "lab:provider@0.1.0") {
      const why = `the bundled claude-code provider is ${provider.wit}, which makes no permission dialogs (PermissionRequest): this end-to-end test needs the provider ported to lab:provider@0.2.0`;
      process.stderr.write(`\n*** SKIPPED: ${why}\n\n`);
      t.skip(why);
      return;
    }
    const agent = await world.agentName();
    const card = page.locator(`${sel.card}[data-kind=permission]`);
    await card.waitFor();
    const hook = await world.waitEvent((e) => e.event === "hook" && e.hook_event_name === "PermissionRequest", "the PermissionRequest hook");
    assert.equal(hook.exit_code, 0, JSON.stringify(hook));
    await waitText(card.getByTestId("dialog-title"), new RegExp(`^${reEsc(agent)} asks for permission$`), "the card title");
    assert.equal(await card.getByTestId("permission-tool").textContent(), "Bash");
    assert.match(await card.getByTestId("permission-summary").textContent(), /^rm -rf build/);
    const labels = await card.locator("[data-testid=dialog-option] .opt-label").allTextContents();
    assert.equal(labels[0], "Yes", `options ${JSON.stringify(labels)}`);
    await waitText(page.locator(sel.lock), /^Answer the prompt above first$/, "the lock reason");
    await screenshot(page, "24-permission-e2e");
    await card.locator("[data-testid=dialog-option]").first().click();
    const answer = await world.waitEvent((e) => e.event === "answer" && e.tool_name === "Bash", "the answer");
    assert.equal(answer.outcome, "approved", JSON.stringify(answer));
    assert.equal(answer.option, 0);
    await page.locator(sel.msg("tool", "tool_result")).filter({ hasText: "removed build/" }).waitFor();
    await page.locator(sel.card).waitFor({ state: "detached" });
    await page.locator(sel.msg("assistant", "text")).filter({ hasText: "Cleaned." }).waitFor();
    await waitBadge(page, "idle");
    assert.equal(world.events().filter((e) => e.event === "answer").length, 1);
    const v = await world.view(id);
    assert.equal(v.pending_dialog, null);
  });
});

describe("the live terminal and the audit log", () => {
  scenario("live terminal: the agent's screen streams; one device takes control and types, another watches read-only; a card answered meanwhile is refused; the audit log has each action once", {
    script: { steps: [{ ask: { questions: [DB_QUESTION] } }, { say: "Noted from the terminal." }, { idle: {} }] },
  }, async ({ t, world, page, id }) => {
    await waitQuestionCard(page);
    const pending = (await world.view(id)).pending_dialog;
    await page.goto(new URL(`#/runs/${id}/terminal`, world.url).href);
    const rows = (p) => p.locator("[data-testid=terminal-screen] .xterm-rows");
    await waitText(rows(page), /Which database should we use\?/, "the question on the agent's own screen");
    assert.equal(await page.getByTestId("terminal-screen").getAttribute("data-control"), "none");
    assert.equal(await page.getByTestId("terminal-screen").getAttribute("data-cols"), "200");
    // A second device (paired by name) watches the same screen.
    const paired = await world.api("POST", "/pair", { name: "Second screen" });
    assert.equal(paired.status, 201, JSON.stringify(paired.body));
    const other = await openPage(t, new URL(`#/runs/${id}/terminal`, world.url).href, { login: paired.body.url, token: world.token });
    await waitText(rows(other), /Which database should we use\?/, "the second device's screen");
    // The first takes control: the second is told who has it and stays read-only.
    await page.getByTestId("terminal-take").click();
    await page.locator("[data-testid=terminal-screen][data-control=you]").waitFor();
    await other.locator("[data-testid=terminal-screen][data-control=other]").waitFor();
    await waitText(other.getByTestId("terminal-who"), /has control \(read-only here\)/, "who has control, on the other device");
    const view = await world.view(id);
    assert.equal(view.composer_lock.code, "terminal_controlled");
    // A card answered meanwhile (here: through the API) is refused, with the reason.
    const refused = await world.api("POST", `/runs/${id}/dialog/answer`, { tool_id: pending.tool_id, answers: [{ option: 1 }] });
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.error, "terminal_controlled");
    // Keys on the read-only device go nowhere; the first device answers in the pane.
    await other.locator("[data-testid=terminal-screen] .xterm").click();
    await other.keyboard.type("ignored");
    await page.locator("[data-testid=terminal-screen] .xterm").click();
    await page.keyboard.press("Enter");
    await page.getByTestId("back-to-chat").waitFor();
    await world.waitView(id, (v) => v.pending_dialog === null && v.state === "idle", "the question answered in the pane");
    await waitText(rows(page), /Noted from the terminal\./, "the agent went on");
    await world.waitEvent((e) => e.event === "ready" && e.widget === "composer", "the agent's composer, ready for keys");
    await page.keyboard.type("hello from the terminal");
    await page.keyboard.press("Enter");
    await world.waitView(id, (v) => v.messages.some((m) => m.role === "user" && /hello from the terminal/.test(m.text || "")), "the typed line reached the agent");
    await waitText(rows(other), /hello from the terminal/, "the line on the watching device's screen");
    assert.doesNotMatch(await rows(page).innerText(), /ignored/, "the read-only device typed nothing");
    // Release: both are read-only again and the composer opens.
    await page.getByTestId("terminal-take").click();
    await page.locator("[data-testid=terminal-screen][data-control=none]").waitFor();
    await other.locator("[data-testid=terminal-screen][data-control=none]").waitFor();
    await world.waitView(id, (v) => v.composer_lock === null && v.terminal_control === null, "the composer unlocked");
    // The audit log: each action once, with the device that did it.
    await page.goto(new URL(`#/audit`, world.url).href);
    await page.locator("[data-testid=audit-entry][data-action='terminal.take']").waitFor();
    const log = (await world.api("GET", `/audit?run=${id}`)).body.entries;
    const actions = log.map((e) => `${e.action}:${e.outcome}`);
    assert.deepEqual(actions, ["run.start:applied", "terminal.take:applied", "dialog.answer:refused", "terminal.release:applied"], JSON.stringify(log));
    const take = log[1];
    assert.equal(typeof take.actor.device_id, "string");
    assert.equal(log[3].actor.device_id, take.actor.device_id, "released by the device that took it");
    assert.equal(log[2].actor, "bearer");
    assert.match(log[2].reason, /^terminal_controlled: /);
    assert.deepEqual(log[2].detail, { tool_id: pending.tool_id, answers: [{ option: 1 }] });
    assert.equal(await page.locator("[data-testid=audit-entry][data-outcome=refused]").count(), 1);
    await other.context().close();
  });
});

// ------------------------------------------------------------------ being told; the phone

/**
 * An init script: window.Notification records every notification the page raises
 * (window.__notes: the instances, with title, body, tag, data and the page's onclick)
 * instead of showing it; requestPermission calls are counted. With arg.permission set,
 * the page sees that permission (and a request answers "denied"); otherwise the real
 * one (context.grantPermissions). AudioContext oscillators are counted (the chime).
 */
function notificationRecorder(arg) {
  window.__notes = [];
  window.__permissionRequests = 0;
  window.__oscillators = 0;
  window.__fakePermission = arg && arg.permission;
  const Real = window.Notification;
  window.Notification = class {
    constructor(title, options = {}) {
      Object.assign(this, { title, body: options.body, tag: options.tag, data: options.data, closed: false });
      window.__notes.push(this);
    }
    close() { this.closed = true; }
    static get permission() { return window.__fakePermission || (Real ? Real.permission : "denied"); }
    static async requestPermission() {
      window.__permissionRequests += 1;
      if (window.__fakePermission) { window.__fakePermission = "denied"; return "denied"; }
      return Real.requestPermission();
    }
  };
  if (window.AudioContext) {
    const create = window.AudioContext.prototype.createOscillator;
    window.AudioContext.prototype.createOscillator = function (...a) { window.__oscillators += 1; return create.apply(this, a); };
  }
}

const notes = (page) => page.evaluate(() => window.__notes.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data })));
const favicon = (page) => page.locator("link#favicon").evaluate((l) => ({ href: l.getAttribute("href"), count: l.dataset.count }));

async function waitNotes(page, n) {
  return waitFor(async () => { const all = await notes(page); return all.length >= n && all; }, { what: `${n} notification(s)` });
}

const GRANTED = { context: { permissions: ["notifications"] }, init: { fn: notificationRecorder } };

describe("being told: notifications, title and icon", () => {
  scenario("the open run starts waiting: one notification per question, with the question; title and icon count it", {
    script: { steps: [{ say: "Ready when you are." }, { idle: {} }, { ask: { questions: [DB_QUESTION] } }, { ask: { questions: [DEPLOY_QUESTION] } }, { say: "Both noted." }, { idle: {} }] },
    ...GRANTED,
  }, async ({ world, page, id }) => {
    await waitBadge(page, "idle");
    await waitFor(async () => (await page.getByTestId("connection-status").getAttribute("data-state")) === "live", { what: "the event stream" });
    await waitFor(async () => (await page.title()) === "webshop · lab", { what: "the run's title" });
    const idleIcon = await favicon(page);
    assert.equal(idleIcon.count, "0");
    assert.ok(idleIcon.href.startsWith("data:image/svg+xml,"), idleIcon.href);
    assert.equal(await page.getByTestId("notify-permission").isVisible(), false, "granted already: no button");
    assert.deepEqual(await notes(page), []);

    // A message makes the agent ask.
    assert.equal((await world.api("POST", `/runs/${id}/messages`, { text: "go on" })).status, 202);
    const [first] = await waitNotes(page, 1);
    assert.equal(first.title, `webshop: ${await world.agentName()} is asking`);
    assert.equal(first.body, DB_QUESTION.question);
    assert.equal(first.data.url, `#/runs/${encodeURIComponent(id)}`);
    await waitFor(async () => (await page.title()) === "(1) webshop · lab", { what: "the count in the title" });
    const waitingIcon = await favicon(page);
    assert.equal(waitingIcon.count, "1");
    assert.notEqual(waitingIcon.href, idleIcon.href, "the icon changes");
    assert.ok(decodeURIComponent(waitingIcon.href).includes(">1</text>"), "the icon shows the count");

    // Answering it brings the next question at once: a new dialog, a new notification.
    await waitQuestionCard(page);
    await page.locator(sel.option).first().click();
    const second = (await waitNotes(page, 2))[1];
    assert.equal(second.body, DEPLOY_QUESTION.question);
    await page.locator(`${sel.option} .opt-label`).filter({ hasText: "Fly.io" }).waitFor();
    await page.locator(sel.option).first().click();
    await waitBadge(page, "idle");
    await waitFor(async () => (await page.title()) === "webshop · lab", { what: "the count to go" });
    assert.equal((await favicon(page)).count, "0");
    // Two dialogs, two notifications: the stream and the poll never told one twice.
    await world.waitView(id, (v) => v.state === "idle", "idle");
    await page.locator(`[data-testid=run-item][data-run-id="${id}"][data-state=idle]`).waitFor();
    assert.deepEqual((await notes(page)).map((n) => n.body), [DB_QUESTION.question, DEPLOY_QUESTION.question]);
  });

  scenario("a run waiting at load is not announced; another that starts waiting is, from the list; the chime; clicking opens it", {
    script: askScript(), prompt: null, open: false, ...GRANTED,
  }, async ({ world, page }) => {
    const a = await world.createRun("first");
    await world.waitView(a.id, (v) => v.state === "question", "run a waiting");
    await page.goto(world.url);
    await page.locator(`[data-testid=run-item][data-run-id="${a.id}"][data-state=question]`).waitFor();
    await waitFor(async () => (await page.title()) === "(1) lab", { what: "the count in the title" });
    assert.equal((await favicon(page)).count, "1");

    // The chime: off by default; on with a click, remembered.
    const sound = page.getByTestId("sound-toggle");
    assert.equal(await sound.getAttribute("aria-pressed"), "false");
    await sound.click();
    assert.equal(await sound.getAttribute("aria-pressed"), "true");
    assert.equal(await page.evaluate(() => localStorage.getItem("lab.sound")), "on");
    const chimesBefore = await page.evaluate(() => window.__oscillators);

    const b = await world.createRun("second");
    const all = await waitNotes(page, 1);
    await page.locator(`[data-testid=run-item][data-run-id="${b.id}"][data-state=question]`).waitFor();
    await waitFor(async () => (await page.title()) === "(2) lab", { what: "two waiting runs in the title" });
    assert.equal(all.length, 1, `only run b is announced: ${JSON.stringify(all)}`);
    assert.equal(all[0].tag, `lab-run-${b.id}`);
    assert.equal(all[0].body, DB_QUESTION.question);
    assert.ok((await page.evaluate(() => window.__oscillators)) > chimesBefore, "a chime with the notification");
    assert.equal((await favicon(page)).count, "2");

    // Clicking the notification opens the run.
    await page.evaluate(() => window.__notes[0].onclick());
    await page.waitForURL(new RegExp(`#/runs/${b.id}$`));
    await page.locator(`[data-testid=run-view][data-run-id="${b.id}"] ${sel.card}`).waitFor();
    assert.equal(await page.evaluate(() => window.__notes[0].closed), true);

    // After a reload both wait "at load": nothing new; the chime setting stays.
    await page.reload();
    await page.locator(`[data-testid=run-view][data-run-id="${b.id}"] ${sel.card}`).waitFor();
    await waitFor(async () => (await page.title()) === "(2) webshop · lab", { what: "the count after the reload" });
    assert.equal(await page.getByTestId("sound-toggle").getAttribute("aria-pressed"), "true");
    await page.locator(`[data-testid=run-item][data-run-id="${a.id}"][data-state=question]`).waitFor();
    assert.deepEqual(await notes(page), []);
  });

  scenario("'Notify me' asks for permission only when clicked, then goes away", {
    script: { steps: [{ idle: {} }] }, prompt: null, init: { fn: notificationRecorder, arg: { permission: "default" } },
  }, async ({ page }) => {
    const button = page.getByTestId("notify-permission");
    await button.waitFor();
    await page.getByText("No runs yet. Start one above.").waitFor();
    assert.equal(await page.evaluate(() => window.__permissionRequests), 0, "never asked on load");
    await button.click();
    await button.waitFor({ state: "hidden" });
    assert.equal(await page.evaluate(() => window.__permissionRequests), 1);
  });
});

describe("phone-sized UI (390×844, touch)", () => {
  const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 };

  /** No horizontal overflow: the page is no wider than the phone. */
  async function assertFits(page, what) {
    const w = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(w <= 390, `${what}: the page is ${w} px wide`);
  }

  /** Every visible button/link/option/input in `scope` is at least 44 px tall. */
  async function assertTargets(scope, what) {
    const sizes = await scope.locator("button, a, input, textarea, select, summary").evaluateAll((els) => els
      .filter((e) => e.checkVisibility({ visibilityProperty: true }))
      .map((e) => ({ what: `${e.tagName}${e.dataset.testid ? `[${e.dataset.testid}]` : ""} ${e.textContent.trim().slice(0, 20)}`, h: e.getBoundingClientRect().height })));
    assert.ok(sizes.length > 0, `${what}: no targets found`);
    const small = sizes.filter((s) => s.h < 44);
    assert.deepEqual(small, [], `${what}: targets under 44 px`);
  }

  /** A phone screenshot (CSS pixels, to keep it small); LAB_DOCS_IMAGES=1 also writes docs/images/. */
  async function phoneShot(page, name) {
    await screenshot(page, name);
    if (process.env.LAB_DOCS_IMAGES === "1") {
      await page.screenshot({ path: path.join(REPO_DIR, "docs", "images", `${name}.png`), scale: "css" });
    }
  }

  scenario("run list, question card, composer and terminal view fit a phone; targets ≥ 44 px", {
    script: askScript(), open: false, context: PHONE,
  }, async ({ world, page, id }) => {
    await world.waitView(id, (v) => v.state === "question", "the question");
    await page.goto(world.url);
    const item = page.locator(`[data-testid=run-item][data-run-id="${id}"][data-state=question]`);
    await item.waitFor();
    await assertFits(page, "run list");
    await assertTargets(page.locator(".sidebar"), "run list");
    await phoneShot(page, "phone-run-list");

    await item.tap();
    await waitQuestionCard(page);
    await page.locator(sel.msg("assistant", "text")).first().waitFor();
    await assertFits(page, "question card");
    await assertTargets(page.locator(sel.card), "question card");
    await assertTargets(page.locator(".run-header"), "run header");
    const header = await page.locator("[data-testid=run-view] .run-header").boundingBox();
    assert.ok(header.x >= 0 && header.x + header.width <= 390, `run header ${JSON.stringify(header)}`);
    const attach = await page.locator(".run-header [data-testid=attach-command]").boundingBox();
    assert.ok(attach.x + attach.width <= 390, `attach line ${JSON.stringify(attach)}`);
    await phoneShot(page, "phone-question-card");

    await page.locator(sel.option).nth(1).tap();
    await page.locator(sel.card).waitFor({ state: "detached" });
    await page.locator(`${sel.input}:enabled`).waitFor();
    await page.locator(sel.input).fill("Use migrations, please.");
    await assertFits(page, "composer");
    await assertTargets(page.getByTestId("composer"), "composer");
    await phoneShot(page, "phone-composer");
    await page.getByTestId("composer-send").tap();
    await page.locator(sel.msg("user", "text")).filter({ hasText: "Use migrations" }).waitFor();

    await page.getByTestId("terminal-link").tap();
    const screen = page.getByTestId("terminal-screen");
    await waitText(screen, /\S/, "the terminal screen");
    await assertFits(page, "terminal view");
    await assertTargets(page.locator("[data-testid=terminal-view] .run-header"), "terminal header");
    await phoneShot(page, "phone-terminal");
    await page.getByTestId("back-to-chat").tap();
    await page.getByTestId("back-to-runs").tap();
    await page.locator(`[data-testid=run-item][data-run-id="${id}"]`).waitFor();
    await assertFits(page, "back on the run list");
  });

  scenario("a permission card fits a phone; its options and the feedback box are ≥ 44 px (rendering test)", {
    script: { steps: [{ say: "Ready." }, { idle: {} }] }, open: false, context: PHONE,
  }, async ({ world, page, id }) => {
    await holdEventStream(page, dialogView(id, PERMISSION));
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const card = page.locator(`${sel.card}[data-kind=permission]`);
    await card.waitFor();
    await card.locator("[data-feedback=true]").tap();
    await card.getByTestId("dialog-feedback-input").waitFor();
    await assertFits(page, "permission card");
    await assertTargets(card, "permission card");
    await phoneShot(page, "phone-permission-card");
  });
});

// ------------------------------------------------------------------ another origin

/** A page server on a free loopback port: `/` is a blank HTML page. Closed on t. */
async function startPageServer(t) {
  const http = await import("node:http");
  const server = http.createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>other UI</title><p>another origin");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${server.address().port}`;
}

describe("a UI served from another origin", () => {
  // `--allowed-origin` names a UI served elsewhere. Before, its browser's CORS
  // preflight got 405 and no request with the token was ever sent; now the allowed
  // origin reads lab's answers (a list, a created run, lab's JSON error) with its bearer
  // token, and any other origin still reads nothing.
  test("calls lab's API with fetch and its token; another origin cannot", { timeout: TEST_TIMEOUT }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    const allowed = await startPageServer(t);
    const other = await startPageServer(t);
    const world = await startWorld(t, { steps: [{ say: "Hello from the other UI's run." }, { idle: {} }] }, ["--allowed-origin", allowed]);
    try {
      const call = (page) => page.evaluate(async ({ lab, token, workdir }) => {
        const auth = { authorization: `Bearer ${token}` };
        const out = {};
        try {
          const list = await fetch(`${lab}runs`, { headers: auth });
          out.list = { status: list.status, body: await list.json() };
          const made = await fetch(`${lab}runs`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ provider: "claude-code", workdir, prompt: "go" }),
          });
          out.made = { status: made.status, body: await made.json() };
          const bad = await fetch(`${lab}runs/nope`, { headers: auth });
          out.bad = { status: bad.status, body: await bad.json() };
        } catch (e) {
          out.error = String(e);
        }
        return out;
      }, { lab: world.url, token: world.token, workdir: world.workdir });

      const page = await openPage(t, `${allowed}/`);
      const got = await call(page);
      assert.equal(got.error, undefined, `the allowed origin's fetch failed: ${JSON.stringify(got)}`);
      assert.equal(got.list.status, 200);
      assert.deepEqual(got.list.body, []);
      assert.equal(got.made.status, 201, JSON.stringify(got.made));
      assert.ok(got.made.body.id, JSON.stringify(got.made));
      assert.equal(got.bad.status, 404);
      assert.equal(got.bad.body.error, "run_not_found", JSON.stringify(got.bad));
      await world.waitView(got.made.body.id, (v) => v.messages.some((m) => m.role === "assistant"), "the run made from the other UI answers");

      const foreign = await openPage(t, `${other}/`);
      const refused = await call(foreign);
      assert.match(refused.error || "", /Failed to fetch/, `another origin read an answer: ${JSON.stringify(refused)}`);
      const runs = await world.api("GET", "/runs");
      assert.equal(runs.body.length, 1, "the foreign page started no run");
    } catch (e) {
      world.failed = true;
      e.message = `${e.message}\n${world.diagnostics()}`;
      throw e;
    }
  });
});

describe("the agent's work: a worktree's diff, review comments, merge", () => {
  /** Run git in dir (no user config: the world's HOME is the agent's). */
  const git = (dir, ...args) => {
    const r = spawnSync("git", ["-c", "user.name=lab test", "-c", "user.email=lab@test.invalid", "-c", "init.defaultBranch=main", ...args], { cwd: dir, encoding: "utf8" });
    assert.equal(r.status, 0, `git ${args.join(" ")}: ${r.stderr}`);
    return r.stdout.trim();
  };
  /** The world's workdir made a repository: a Rust file and a README, one commit. */
  const makeRepo = (world) => {
    fs.mkdirSync(path.join(world.workdir, "src"));
    fs.writeFileSync(path.join(world.workdir, "src", "lib.rs"), "pub fn price(cents: u32) -> u32 {\n    cents\n}\n");
    fs.writeFileSync(path.join(world.workdir, "README.md"), "# webshop\n");
    git(world.workdir, "init", "-q");
    git(world.workdir, "add", "-A");
    git(world.workdir, "commit", "-q", "-m", "start");
    return git(world.workdir, "rev-parse", "HEAD");
  };
  const EDIT = "pub fn price(cents: u32) -> u32 {\n    // Prices carry tax.\n    cents * 120 / 100\n}\n";
  const EDITS = [
    { write: { path: "src/lib.rs", text: EDIT } },
    { write: { path: "notes/todo.md", text: "- tax rates per country\n" } },
    { write: { path: "logo.bin", bytes: [0, 159, 146, 150, 0, 1] } },
    { say: "Added tax." },
  ];

  scenario("the diff view: files, patches unified and side by side, highlighted; a comment on a line reaches the agent; merge from the page", {
    script: { steps: [...EDITS, { idle: {} }, { write: { path: "src/rate.rs", text: "pub const TAX_RATE: u32 = 20;\n" } }, { say: "I will look at your comment." }, { idle: {} }] }, prompt: null, open: false,
  }, async ({ world, page }) => {
    const base = makeRepo(world);
    const run = await world.createRun("add tax");
    assert.equal(run.worktree.base, base);
    assert.equal(run.worktree.branch, `lab/${run.id}`);
    await world.waitView(run.id, (v) => v.state === "idle" && v.diff && v.diff.files_changed === 3, "the diff summary counts 3 files");

    await page.goto(new URL(`#/runs/${run.id}`, world.url).href);
    const changes = page.getByTestId("changes-link");
    await waitText(changes, /^Changes \+\d+ −1$/, "the run header's changes link");
    await page.locator(`[data-testid=run-item][data-run-id="${run.id}"] [data-testid=run-item-diff]`).waitFor();
    const clicked = Date.now();
    await changes.click();
    await page.getByTestId("diff-view").waitFor();
    await page.locator("[data-testid=diff-file][data-path='src/lib.rs'] [data-testid=diff-table]").waitFor();
    const firstPaintMs = Date.now() - clicked;
    assert.equal(await page.getByTestId("diff-file-link").count(), 3);
    assert.deepEqual(await page.getByTestId("diff-file-link").evaluateAll((els) => els.map((e) => e.dataset.path)).then((p) => p.sort()), ["logo.bin", "notes/todo.md", "src/lib.rs"]);
    await waitText(page.getByTestId("diff-summary"), /^3 files changed, \+\d+ −1$/, "the summary");
    const lib = page.locator("[data-testid=diff-file][data-path='src/lib.rs']");
    // The patch as git made it: the deleted line, the two added ones, highlighted.
    assert.equal(await lib.locator("tr.del .code").count(), 1);
    assert.equal(await lib.locator("tr.add .code").count(), 2);
    assert.match(await lib.locator("tr.add .code").nth(1).textContent(), /cents \* 120 \/ 100/);
    assert.ok(await lib.locator(".tk-kw", { hasText: /^fn$/ }).count() >= 1, "keywords are highlighted");
    assert.equal(await lib.locator(".tk-com").first().textContent(), "// Prices carry tax.");
    await page.locator("[data-testid=diff-file][data-path='logo.bin']").getByText("Binary file — not shown.").waitFor();
    await screenshot(page, "40-diff-unified");

    await page.getByTestId("diff-mode-split").click();
    await lib.locator("table.split").waitFor();
    // Side by side: the old line faces the first new one.
    const row = lib.locator("tr.dl.split", { has: page.locator("td.side-del") });
    assert.equal(await row.count(), 1);
    assert.match(await row.locator("td.side-add.code").textContent(), /Prices carry tax/);
    await screenshot(page, "41-diff-split");

    // A comment on new line 3 (side by side), kept as a draft, then sent.
    await lib.locator("[data-testid=comment-line][data-side=new][data-line='3']").click();
    await page.getByTestId("comment-input").fill("Use a rate constant, not 120/100.");
    await page.getByTestId("comment-add").click();
    await page.getByTestId("comment-draft").waitFor();
    await waitText(page.getByTestId("review-count"), /^1 comment$/, "the review count");
    // The drafts survive switching the layout.
    await page.getByTestId("diff-mode-unified").click();
    await lib.locator("table.unified [data-testid=comment-draft]").waitFor();
    await page.getByTestId("review-summary").fill("One thing before this lands.");
    await screenshot(page, "42-diff-comment");
    await page.getByTestId("review-send").click();
    await waitText(page.getByTestId("review-status"), /^1 comment sent to .+\. See the chat$/, "the review status");
    assert.equal(await page.getByTestId("comment-draft").count(), 0);
    // The agent edits again while the view is open: it says so, and Refresh shows it.
    await page.getByTestId("diff-stale").waitFor();
    await page.getByTestId("diff-stale").getByRole("button", { name: "Refresh" }).click();
    await page.locator("[data-testid=diff-file-link][data-path='src/rate.rs']").waitFor();
    assert.equal(await page.getByTestId("diff-stale").isHidden(), true);

    const v = await world.waitView(run.id, (v) => v.messages.some((m) => m.role === "user" && /Use a rate constant/.test(m.text || "")), "the review in the transcript");
    const msg = v.messages.find((m) => m.role === "user" && /Use a rate constant/.test(m.text || "")).text;
    assert.match(msg, /One thing before this lands\./);
    assert.match(msg, /src\/lib\.rs line 3/);
    assert.match(msg, /> {5}cents \* 120 \/ 100/); // "> " and the line as it is
    await page.getByTestId("review-to-chat").click();
    await page.locator("[data-testid=message][data-role=user]", { hasText: "Use a rate constant" }).waitFor();
    await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "I will look at your comment."), "the agent's reply");

    // Merge from the page (the page asks first).
    await page.getByTestId("changes-link").click();
    await page.getByTestId("diff-view").waitFor();
    page.once("dialog", (d) => d.accept());
    await page.getByTestId("merge-button").click();
    const merged = await waitText(page.getByTestId("work-status"), /^Merged into main as [0-9a-f]{10}\.$/, "the merge status");
    await page.getByTestId("merged-tag").waitFor();
    const head = git(world.workdir, "rev-parse", "HEAD");
    assert.ok(head.startsWith(merged.match(/as ([0-9a-f]+)/)[1]), `the base branch is at the merge: ${head} vs ${merged}`);
    assert.equal(fs.readFileSync(path.join(world.workdir, "src", "lib.rs"), "utf8"), EDIT, "the checkout has the agent's edit");
    assert.equal(git(world.workdir, "status", "--porcelain"), "");
    await screenshot(page, "43-diff-merged");
    // On a phone: one column, nothing wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.locator("[data-testid=diff-file][data-path='src/lib.rs'] [data-testid=diff-table]").waitFor();
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), "no sideways scrolling on a phone");
    await screenshot(page, "45-diff-phone");
    process.stderr.write(`diff view first paint (click → first file's table): ${firstPaintMs} ms\n`);
  });

  scenario("the diff view: a moved file, a patch too large to show whole; a conflicting merge lists the files and changes nothing; discard of an ended run removes its worktree", {
    script: { steps: [...EDITS, { idle: {} }] }, prompt: null, open: false,
  }, async ({ world, page }) => {
    makeRepo(world);
    const run = await world.createRun("add tax");
    await world.waitView(run.id, (v) => v.state === "idle" && v.diff && v.diff.files_changed === 3, "the diff summary counts 3 files");
    // The base moves on in the same line meanwhile.
    fs.writeFileSync(path.join(world.workdir, "src", "lib.rs"), "pub fn price(cents: u32) -> u32 {\n    cents + 1\n}\n");
    git(world.workdir, "commit", "-q", "-am", "base moves on");
    const before = [git(world.workdir, "rev-parse", "HEAD"), git(world.workdir, "status", "--porcelain")];

    // What the agent could leave too (made here, not through its transcript): a file
    // moved, and one too large to show whole.
    fs.mkdirSync(path.join(run.worktree.path, "docs"));
    fs.renameSync(path.join(run.worktree.path, "README.md"), path.join(run.worktree.path, "docs", "README.md"));
    fs.writeFileSync(path.join(run.worktree.path, "big.txt"), Array.from({ length: 6000 }, (_, i) => `line ${i} ${"x".repeat(40)}\n`).join(""));

    await page.goto(new URL(`#/runs/${run.id}/diff`, world.url).href);
    await page.locator("[data-testid=diff-file][data-path='src/lib.rs'] [data-testid=diff-table]").waitFor();
    const moved = page.locator("[data-testid=diff-file][data-path='docs/README.md']");
    assert.equal(await moved.getAttribute("data-status"), "renamed");
    assert.equal(await moved.locator(".file-head .path").textContent(), "README.md → docs/README.md");
    const big = page.locator("[data-testid=diff-file][data-path='big.txt']");
    await big.getByTestId("patch-truncated").waitFor();
    await big.getByTestId("unfold-file").click();
    await big.locator("[data-testid=diff-table] tr.add").first().waitFor();
    assert.ok(await big.locator("tr.add").count() < 6000, "the cut patch shows fewer lines than the file has");
    assert.equal(await page.getByTestId("discard-button").isDisabled(), true, "discard waits for the run to end");
    page.once("dialog", (d) => d.accept());
    await page.getByTestId("merge-button").click();
    await waitText(page.getByTestId("work-status"), /^Not merged — these files conflict with main/, "the conflict");
    assert.deepEqual(await page.getByTestId("work-status-files").locator("li").allTextContents(), ["src/lib.rs"]);
    assert.deepEqual([git(world.workdir, "rev-parse", "HEAD"), git(world.workdir, "status", "--porcelain")], before, "the repository is unchanged");
    await screenshot(page, "44-diff-conflict");

    const stopped = await world.api("POST", `/runs/${run.id}/stop`, {});
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    await waitFor(async () => !(await page.getByTestId("discard-button").isDisabled()), { what: "discard enabled once the run ended" });
    page.once("dialog", (d) => d.accept());
    await page.getByTestId("discard-button").click();
    await waitText(page.getByTestId("work-status"), /^Discarded: the worktree and its branch are gone\.$/, "the discard status");
    await page.getByTestId("diff-error").waitFor();
    assert.equal(fs.existsSync(run.worktree.path), false, "the worktree is gone");
    assert.equal(spawnSync("git", ["rev-parse", "--verify", "-q", `refs/heads/lab/${run.id}`], { cwd: world.workdir }).status, 1, "the branch is gone");
  });

  scenario("an ended run is resumed from its page and forked into a run of its own; the family links both ways", {
    script: { steps: [{ write: { path: "notes.txt", text: "from the agent\n" } }, { say: "Noted." }, { idle: {} }] }, prompt: null, open: false,
  }, async ({ world, page }) => {
    makeRepo(world);
    const run = await world.createRun("Remember the word PAPAYA.");
    await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "Noted."), "the first reply");
    const stopped = await world.api("POST", `/runs/${run.id}/stop`, {});
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.resumable, true, JSON.stringify(stopped.body));

    await page.goto(new URL(`#/runs/${run.id}`, world.url).href);
    await waitBadge(page, "ended");
    await waitText(page.getByTestId("end-reason"), /^Ended: stopped by the operator — it can be resumed\.$/, "why it ended");
    await page.getByTestId("resume-button").click();
    await page.getByTestId("continue-prompt").fill("Which word was it?");
    await screenshot(page, "50-resume-form");
    await page.getByTestId("continue-submit").click();
    await page.locator(sel.msg("user", "text"), { hasText: "Which word was it?" }).waitFor();
    await waitBadge(page, "idle");
    assert.equal(await page.getByTestId("end-reason").isHidden(), true, "live again: no end shown");
    assert.equal(await page.getByTestId("resume-button").isHidden(), true);
    const users = await page.locator(sel.msg("user", "text")).allTextContents();
    assert.equal(users.filter((t) => t.includes("Remember the word PAPAYA.")).length, 1, `the old messages once, first: ${users}`);
    assert.ok(users.findIndex((t) => t.includes("PAPAYA")) < users.findIndex((t) => t.includes("Which word was it?")), `${users}`);

    // A fork from the live run: a new run, its own branch, the parent's history.
    await page.getByTestId("fork-button").click();
    await page.getByTestId("continue-prompt").fill("Try another way.");
    await page.getByTestId("continue-submit").click();
    await waitFor(async () => !page.url().includes(run.id), { what: "the fork's page" });
    const forkId = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/runs\//, ""));
    await page.locator("[data-testid=run-family] [data-testid=family-link]", { hasText: run.id.slice(0, 8) }).waitFor();
    await page.locator(sel.msg("user", "text"), { hasText: "Try another way." }).waitFor();
    await page.locator(sel.msg("user", "text"), { hasText: "Remember the word PAPAYA." }).waitFor();
    await page.locator(`[data-testid=run-item][data-run-id="${forkId}"] [data-testid=run-item-fork]`).waitFor();
    const fork = (await world.api("GET", `/runs/${forkId}`)).body;
    assert.equal(fork.parent, run.id);
    assert.equal(fork.worktree.branch, `lab/${forkId}`);
    assert.equal(fs.readFileSync(path.join(fork.worktree.path, "notes.txt"), "utf8"), "from the agent\n", "the parent's uncommitted file");
    await screenshot(page, "51-fork");
    await page.locator("[data-testid=run-family] [data-testid=family-link]").click();
    await page.locator(`[data-testid=run-family] [data-testid=family-link][data-run-id="${forkId}"]`).waitFor();
    for (const id of [run.id, forkId]) await world.api("POST", `/runs/${id}/stop`, {});
  });

  scenario("a usage limit the agent hit shows when it resets; the operator has the run go on by itself then", {
    script: { steps: [
      { api_error: { error: "rate_limit", text: "API Error: Request rejected (429) · You've hit your session limit · resets 2099-01-01T00:00:00Z" } },
      { idle: {} },
    ] },
  }, async ({ world, page, id }) => {
    const notice = page.getByTestId("usage-limit");
    await notice.waitFor();
    await waitText(page.getByTestId("usage-limit-text"), /^Usage limit reached: Rate limited: API Error: Request rejected \(429\) · You've hit your session limit · resets 2099-01-01T00:00:00Z — It resets at .+\.\s*$/, "the limit and when it resets");
    assert.equal(await page.getByTestId("auto-resume").isChecked(), false, "off by default");
    await page.getByTestId("auto-resume").check();
    await waitText(page.getByTestId("usage-limit-text"), /The run goes on by itself at .+\./, "when lab goes on");
    const run = (await world.api("GET", `/runs/${id}`)).body;
    assert.equal(run.resume_after_limit.on, true, JSON.stringify(run.resume_after_limit));
    const v = (await world.api("GET", `/runs/${id}/messages`)).body;
    assert.equal(v.usage_limit.resets_at, "2099-01-01T00:00:00Z", JSON.stringify(v.usage_limit));
    await screenshot(page, "52-usage-limit");
  });

  scenario("usage: the run's header and the Usage page's charts show the API's numbers; a search hit opens the chat at its message", {
    script: { steps: [
      ...Array.from({ length: 260 }, (_, i) => ({ say: i === 7 ? "The papaya cache invalidation bug is in the key." : `line ${i}` })),
      { idle: {} },
    ] },
    open: false,
  }, async ({ world, page, id }) => {
    await world.waitView(id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "line 259"), "the whole chat");
    const u = await waitFor(async () => {
      const r = (await world.api("GET", `/runs/${id}/usage`)).body;
      return r.responses === 260 ? r : null;
    }, { what: "every response counted" });
    const tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens;
    await page.goto(new URL(`#/runs/${id}`, world.url).href);
    const head = page.getByTestId("run-usage");
    await head.waitFor();
    assert.equal(await head.getAttribute("data-tokens"), String(tokens));
    assert.match(await head.textContent(), /tokens · (cost unknown|\$[0-9.]+)/);

    await page.getByTestId("usage-link").click();
    const day = page.locator("[data-testid=usage-chart-day] [data-testid=usage-bar]");
    await day.first().waitFor();
    const rows = (await world.api("GET", "/usage?group=day")).body.rows;
    assert.equal(await day.count(), rows.length);
    for (const [i, r] of rows.entries()) {
      const total = r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens;
      assert.equal(await day.nth(i).getAttribute("data-key"), r.key);
      assert.equal(await day.nth(i).getAttribute("data-tokens"), String(total));
    }
    const row = page.locator(`[data-testid=usage-table] [data-testid=usage-row][data-key="${id}"]`);
    assert.equal(await row.getAttribute("data-tokens"), String(tokens));
    await page.locator("[data-testid=usage-chart-model] [data-testid=usage-bar]").first().waitFor();
    await screenshot(page, "53-usage");

    // "/" focuses the search box; the hit (an old message, not on the newest page) opens
    // the chat there, scrolled to and highlighted.
    await page.locator("body").click();
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement && document.activeElement.id), "search-input");
    await page.keyboard.type("\"cache invalidation\" papay*");
    const hit = page.locator(`[data-testid=search-hit][data-run-id="${id}"]`);
    await hit.first().waitFor();
    assert.match(await hit.first().locator("mark").first().textContent(), /papaya|cache invalidation/);
    await screenshot(page, "54-search");
    const seq = Number(await hit.first().getAttribute("data-seq"));
    await hit.first().click();
    const msg = page.locator(`[data-testid=chat] [data-seq="${seq}"]`);
    await msg.waitFor();
    await page.waitForFunction((s) => {
      const el = document.querySelector(`[data-testid=chat] [data-seq="${s}"]`);
      if (!el || el.dataset.hit !== "true") return false;
      const box = el.getBoundingClientRect();
      const chat = document.querySelector("[data-testid=chat]").getBoundingClientRect();
      return box.bottom > chat.top && box.top < chat.bottom;
    }, seq);
    assert.match(await msg.textContent(), /papaya cache invalidation/);
    await screenshot(page, "55-search-hit");
  });
});

describe("sandboxes", () => {
  /** A loopback HTTP server answering `reached-<name>`; `hits` counts its requests. */
  async function httpServer(t, name) {
    const http = await import("node:http");
    const srv = http.createServer((req, res) => { srv.hits += 1; res.end(`reached-${name}`); });
    srv.hits = 0;
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    t.after(() => new Promise((r) => srv.close(r)));
    return srv;
  }

  test("sandbox: a run started in bwrap from the form; a refused destination shows in the chat with Allow, and the agent's retry then passes", { timeout: TEST_TIMEOUT }, async (t) => {
    if (skipReason) { t.skip(skipReason); return; }
    if (!["/usr/bin/bwrap", "/bin/bwrap"].some((p) => fs.existsSync(p))) {
      if (process.env.CI === "true") assert.fail("bubblewrap is missing (scripts/test installs it)");
      t.skip("no bubblewrap");
      return;
    }
    const [allowed, refused] = [await httpServer(t, "allowed"), await httpServer(t, "refused")];
    const urlOf = (srv, p) => `http://127.0.0.1:${srv.address().port}/${p}`;
    // The jail sees the workdir: fake-claude's script and log live there.
    let logPath = null;
    const world = await startLabWorld(t, {
      provider: "claude-code",
      labToml: (w) => {
        const dir = path.join(w.workdir, ".fake");
        fs.mkdirSync(dir);
        // Last, a name allowed but resolving to this machine (refused, with why) and a
        // flood of refused destinations (the dock shows a few, counts the rest).
        const probe = `curl -s -m 20 -o /dev/null http://localhost:${allowed.address().port}/name; ` +
          "curl -s -m 60 -o /dev/null 'http://127.0.0.1:[30001-30300]/flood'; echo flooded";
        const script = { steps: [
          { say: "Fetching." }, { fetch: urlOf(refused, "first") }, { fetch: urlOf(allowed, "ok") },
          { wait_file: "go" }, { fetch: urlOf(refused, "again") }, { wait_file: "flood" }, { sh: probe }, { idle: {} },
        ] };
        fs.writeFileSync(path.join(dir, "script.json"), JSON.stringify(script));
        logPath = path.join(dir, "fake.log");
        return [
          "[providers.claude-code]",
          `program = ${tomlStr(FAKE_CLAUDE_BIN)}`,
          `env = { FAKE_CLAUDE_SCRIPT = ${tomlStr(path.join(dir, "script.json"))}, FAKE_CLAUDE_LOG = ${tomlStr(logPath)} }`,
          "", "[sandbox]", `allow = [${tomlStr(`127.0.0.1:${allowed.address().port}`)}, ${tomlStr(`localhost:${allowed.address().port}`)}]`, "",
        ].join("\n");
      },
      diagnose: (tail) => `--- fake-claude log (tail) ---\n${tail(logPath, 15)}`,
    });
    const page = await openPage(t, world.url, { login: world.loginLink, token: world.token });
    try {
      await page.getByTestId("new-run-provider").selectOption("claude-code");
      await page.getByTestId("new-run-workdir").fill(world.workdir);
      await page.getByTestId("new-run-prompt").fill("Fetch both.");
      await page.getByTestId("new-run-sandbox").selectOption("bwrap");
      await page.getByTestId("new-run-submit").click();
      await page.getByTestId("run-view").waitFor();
      const dest = `127.0.0.1:${refused.address().port}`;
      const notice = page.locator(`[data-testid=egress-notice][data-dest="${dest}"]`);
      await notice.waitFor();
      assert.match(await notice.textContent(), /refused .*not on this run's allowlist/);
      await waitText(page.getByTestId("sandbox-summary"), /Sandbox: bwrap · 3 allowed · 1 refused/, "the run's sandbox in its header (its model API and lab.toml's)");
      await waitText(page.locator("[data-testid=chat]"), /reached-allowed/, "the allowed server's answer in the chat");
      assert.match(await page.locator("[data-testid=chat]").textContent(), /HTTP\/1\.1 403 Forbidden/);
      await screenshot(page, "56-egress-refused");
      // One click: on the allowlist, the notice gone, and the agent's retry passes.
      await notice.getByTestId("egress-allow-button").click();
      await notice.waitFor({ state: "detached" });
      const id = new URL(page.url()).hash.split("/")[2];
      const v = await world.waitView(id, (v) => v.egress && v.egress.allow.includes(dest), "the refused server allowed");
      assert.equal(v.egress.refused.length, 0, JSON.stringify(v.egress));
      fs.writeFileSync(path.join(world.workdir, "go"), "");
      await waitText(page.locator("[data-testid=chat]"), /reached-refused/, "the retry's answer in the chat");
      assert.equal(refused.hits, 1, "only the retry reached it");
      await page.getByTestId("sandbox-panel").click();
      await page.locator(`[data-testid=egress-remove][data-dest="${dest}"]`).waitFor();
      await screenshot(page, "57-egress-allowlist");
      const log = (await world.api("GET", `/audit?run=${id}`)).body.entries.map((e) => e.action);
      assert.ok(log.includes("run.egress"), JSON.stringify(log));
      // A name allowed but resolving to this machine: refused with why, no Allow; a
      // flood: a few shown, the rest counted in one line.
      fs.writeFileSync(path.join(world.workdir, "flood"), "");
      await waitText(page.locator("[data-testid=chat]"), /flooded/, "the probe's end in the chat");
      const others = page.getByTestId("egress-others");
      await waitText(others, /more refused destinations.*more refused connections to yet other destinations/, "the flood counted in one line");
      assert.ok((await page.getByTestId("egress-notice").count()) <= 5, "a few notices, not the flood");
      const byName = page.locator(`[data-testid=egress-notice][data-dest="localhost:${allowed.address().port}"]`);
      await waitText(byName, /resolves to no public address/, "the name refused with why");
      assert.equal(await byName.getByTestId("egress-allow-button").count(), 0, "allowing it again would change nothing");
      await screenshot(page, "58-egress-flood");
      // Opened afresh (the view read whole, not from live events): the same.
      await page.reload();
      await waitText(page.getByTestId("egress-others"), /more refused connections to yet other destinations/, "the count after a reload");
      await waitText(byName, /resolves to no public address/, "the name's refusal after a reload");
      assert.deepEqual(page.labErrors, [], "uncaught errors in the page");
    } catch (e) {
      world.failed = true;
      await screenshot(page, "FAIL-sandbox").catch(() => {});
      e.message = `${e.message}\n${world.diagnostics()}`;
      throw e;
    } finally {
      await page.context().close().catch(() => {});
    }
  });
});

// Last, once every scenario above has run: what the pages read against what lab sent.
test("the UI reads only fields the API sends (every page above, against lab's real answers)", async (t) => {
  if (skipReason) { t.skip(skipReason); return; }
  await fields.settle();
  assert.ok(fields.read.size > 20 && fields.sent.size > 20, `too little recorded: read ${fields.read.size}, sent ${fields.sent.size}`);
  const dir = outputDir();
  if (dir) {
    fs.writeFileSync(path.join(dir, "ui-fields.json"), JSON.stringify({ read: [...fields.read].sort(), sent: [...fields.sent].sort() }, null, 1));
  }
  assert.deepEqual(fields.unsent(), [], "fields the UI reads that lab never sent in any scenario (a renamed or dropped API field, or a read of a field the API does not have)");
});
