// A run on another host from the UI (issue 34): a real `lab serve`, a real `lab runner`
// with its own home and tmux server (the "host"), fake-claude started there, Chromium.
// The start form offers the host; the run's page says where it runs and how to attach;
// the question card is clicked and the answer's keys are played on the host; the
// runner killed, the page says the host is not connected.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { CHROMIUM_ARGS, FAKE_CLAUDE_BIN, LAB_BIN, findChromium, openLoginLink, isExecutable, startWorld, tomlStr, waitFor } from "./world.mjs";

const CHROMIUM = findChromium();
const missing = [
  [isExecutable(FAKE_CLAUDE_BIN), `fake-claude at ${FAKE_CLAUDE_BIN}`],
  [isExecutable(LAB_BIN), `the lab binary at ${LAB_BIN}`],
  [CHROMIUM, "Chromium"],
].filter(([ok]) => !ok).map(([, what]) => what);

test("hosts: a run started on a host from the form, its question clicked, its host gone", { timeout: 90000 }, async (t) => {
  if (missing.length) {
    if (process.env.LAB_UI_REQUIRED === "1") throw new Error(`cannot run: missing ${missing.join("; ")}`);
    t.skip(`missing ${missing.join("; ")}`);
    return;
  }
  let logPath = null;
  const world = await startWorld(t, {
    provider: "claude-code",
    prefix: "/tmp/lab-hosts-ui-",
    labToml: (w) => {
      logPath = path.join(w.dir, "fake.log");
      const script = path.join(w.dir, "script.json");
      fs.writeFileSync(script, JSON.stringify({ steps: [
        { ask: { questions: [{ question: "Which database?", header: "DB", options: [{ label: "Postgres", description: "" }, { label: "SQLite", description: "" }] }] } },
        { say: "Going with it." },
        { idle: {} },
      ] }));
      return `[providers.claude-code]\nprogram = ${tomlStr(FAKE_CLAUDE_BIN)}\nenv = { FAKE_CLAUDE_SCRIPT = ${tomlStr(script)}, FAKE_CLAUDE_LOG = ${tomlStr(logPath)} }\n`;
    },
  });
  const added = spawnSync(LAB_BIN, ["hosts", "--home", world.home, "add", "far"], { encoding: "utf8" });
  assert.equal(added.status, 0, added.stderr);
  const runnerHome = path.join(world.dir, "runner-far");
  const runner = spawn(LAB_BIN, ["runner", "--connect", world.url, "--name", "far", "--home", runnerHome], {
    env: { ...process.env, LAB_RUNNER_CREDENTIAL: added.stdout.trim() },
    stdio: ["ignore", "ignore", "ignore"],
  });
  // Its tmux server's socket is in the world's dir: stopped before that dir goes.
  const runnerExited = new Promise((r) => runner.once("exit", r));
  world.onEnd(async () => {
    runner.kill("SIGKILL");
    await runnerExited;
    const killed = spawnSync("tmux", ["-S", path.join(runnerHome, "tmux.sock"), "kill-server"], { encoding: "utf8" });
    assert.ok(killed.status === 0 || /no server running/.test(killed.stderr), `the runner's tmux server: ${killed.stderr}`);
  });
  await waitFor(async () => (await world.api("GET", "/hosts")).body.some((h) => h.name === "far" && h.state === "connected"), { what: "the runner" });

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  t.after(async () => { await browser.close(); });
  const page = await browser.newPage();
  await openLoginLink(page, world.loginLink);
  await page.goto(world.url);
  const details = page.locator("#new-run");
  // Opened by setting it (the page may open it itself as it loads: a click racing that
  // would close it again).
  await details.evaluate((d) => { d.open = true; });
  const hostSelect = page.getByTestId("new-run-host");
  await waitFor(async () => (await page.locator("#nr-host option[value=far]").count()) === 1, { what: "the host option" });
  assert.deepEqual(await page.locator("#nr-host option").allTextContents(), ["This machine", "far"]);
  await page.getByTestId("new-run-provider").selectOption("claude-code");
  await hostSelect.selectOption("far");
  await page.getByTestId("new-run-workdir").fill(world.workdir);
  await page.getByTestId("new-run-prompt").fill("pick a database");
  await page.getByTestId("new-run-submit").click();
  await page.waitForURL(/#\/runs\/[^/]+$/);
  const id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/runs\//, ""));
  const run = (await world.api("GET", `/runs/${id}`)).body;
  assert.equal(run.host, "far");
  await page.getByTestId("run-host").filter({ hasText: "on far" }).waitFor();
  assert.match(await page.locator(".attach-slot").textContent(), /ssh -t far 'tmux -S .*runner-far\/tmux\.sock attach -t/);

  const q = page.locator("[data-testid=dialog-area] [data-testid=dialog-card][data-kind=question]");
  await q.waitFor();
  await q.locator("[data-testid=dialog-option]", { hasText: "SQLite" }).click();
  const submit = q.getByTestId("dialog-submit-answers");
  if (await submit.count() && !(await submit.isDisabled())) await submit.click();
  await waitFor(() => {
    let text = "";
    try { text = fs.readFileSync(logPath, "utf8"); } catch { return false; }
    return text.split("\n").some((l) => l.includes("\"answer\"") && l.includes("SQLite"));
  }, { what: "fake-claude on the host to get SQLite" });
  await world.waitView(id, (v) => v.state === "idle", "idle");

  runner.kill("SIGKILL");
  await page.getByTestId("host-disconnected").filter({ hasText: "Host far is not connected" }).waitFor();
});
