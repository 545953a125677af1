// The Codex CLI provider in the UI, end to end: the real `codex` (LAB_CODEX_BIN) against
// the Responses-API stand-in on loopback (RESPONSES_STANDIN_BIN), a real `lab serve`, real
// tmux, Chromium. An approval codex asks for is a permission card; a click on its "Yes"
// runs the command. Without codex the test is skipped with a loud line, unless
// LAB_UI_REQUIRED=1 (scripts/test), where that is a failure.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TARGET = process.env.CARGO_TARGET_DIR || (fs.existsSync("/root/.cache/lab/target") ? "/root/.cache/lab/target" : path.join(REPO, "target"));
const LAB = process.env.LAB_BIN || path.join(TARGET, "debug", "lab");
const STANDIN = process.env.RESPONSES_STANDIN_BIN || path.join(TARGET, "debug", "responses-standin");
const CODEX = process.env.LAB_CODEX_BIN || "";
const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));
const WAIT = 30000;

const missing = [
  [CODEX && fs.existsSync(CODEX), "LAB_CODEX_BIN (scripts/install-codex.sh)"],
  [fs.existsSync(STANDIN), `the responses-standin binary at ${STANDIN} (cargo build -p responses-standin)`],
  [fs.existsSync(LAB), `the lab binary at ${LAB}`],
  [CHROMIUM, "Chromium"],
].filter(([ok]) => !ok).map(([, what]) => what);

async function waitFor(fn, what) {
  const end = Date.now() + WAIT;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Start `cmd` and resolve with the first stdout line matching `re` (its match). */
function startAndRead(cmd, args, opts, re) {
  const proc = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "inherit"] });
  const line = new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: proc.stdout });
    rl.on("line", (l) => { const m = l.match(re); if (m) resolve(m); });
    proc.once("exit", (code) => reject(new Error(`${cmd} exited (${code}) before it was ready`)));
    setTimeout(() => reject(new Error(`${cmd} was not ready in time`)), WAIT);
  });
  return { proc, line };
}

const toml = (s) => JSON.stringify(s);

test("codex: an approval is a permission card; a click on 'Yes' runs the command", { timeout: 120000 }, async (t) => {
  if (missing.length) {
    if (process.env.LAB_UI_REQUIRED === "1") throw new Error(`cannot run: missing ${missing.join("; ")}`);
    process.stderr.write(`\n*** codex browser test SKIPPED: missing ${missing.join("; ")}\n\n`);
    t.skip("codex not available");
    return;
  }
  const dir = fs.mkdtempSync("/tmp/lab-codex-ui-");
  const [home, codexHome, workdir] = ["h", "c", "shop"].map((d) => path.join(dir, d));
  for (const d of [home, codexHome, workdir]) fs.mkdirSync(d);
  const cleanup = [];
  t.after(async () => {
    for (const f of cleanup.reverse()) await f();
    spawnSync("tmux", ["-S", path.join(home, "tmux.sock"), "kill-server"]);
    // A leftover temp dir (a pane process still writing a hook file) fails nothing.
    try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }); } catch (e) {
      process.stderr.write(`warning: could not remove ${dir} (${e.code})\n`);
    }
  });

  const script = {
    turns: [
      { match: { contains: "TOUCHME" }, reply: { exec_command: { cmd: "touch from-ui.txt", require_escalated: true, justification: "The UI test asks" } } },
      { match: "output_for_previous", reply: { text: "Done from the UI." } },
    ],
  };
  fs.writeFileSync(path.join(dir, "script.json"), JSON.stringify(script));
  const standin = startAndRead(STANDIN, ["--script", path.join(dir, "script.json")], {}, /listening on (127\.0\.0\.1:\d+)/);
  cleanup.push(async () => { standin.proc.kill("SIGKILL"); });
  const [, standinAddr] = await standin.line;

  fs.writeFileSync(path.join(codexHome, "config.toml"), [
    'model = "stand-in-model"', 'model_provider = "standin"', 'approval_policy = "on-request"',
    'sandbox_mode = "workspace-write"', "check_for_update_on_startup = false", "",
    "[model_providers.standin]", 'name = "Stand-in"', `base_url = ${toml(`http://${standinAddr}/v1`)}`,
    'wire_api = "responses"', 'env_key = "STANDIN_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0", "",
    `[projects.${toml(workdir)}]`, 'trust_level = "trusted"', "",
    "[features]", "plugins = false", "", "[analytics]", "enabled = false", "",
  ].join("\n"));
  // Nothing may leave the machine: every proxy variable points at a closed loopback port.
  const dead = "http://127.0.0.1:9";
  const env = {
    CODEX_HOME: codexHome, STANDIN_API_KEY: "sk-standin", LANG: "C.UTF-8", TERM: "xterm-256color",
    NO_PROXY: "127.0.0.1,localhost,::1", no_proxy: "127.0.0.1,localhost,::1",
    HTTP_PROXY: dead, HTTPS_PROXY: dead, ALL_PROXY: dead, http_proxy: dead, https_proxy: dead, all_proxy: dead,
  };
  fs.writeFileSync(path.join(home, "lab.toml"), `[providers.codex]\nprogram = ${toml(CODEX)}\nenv = { ${Object.entries(env).map(([k, v]) => `${k} = ${toml(v)}`).join(", ")} }\n`);
  const labEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(OPENAI_|CODEX)|proxy|PROXY|^TMUX/.test(k)));
  // lab's login link (`lab: login link (…): http://…/login?code=…`) follows its first line.
  const lab = startAndRead(LAB, ["serve", "--addr", "127.0.0.1:0", "--home", home], { env: { ...labEnv, HOME: dir } }, /^lab: login link .*: ((http:\/\/[^/\s]+)\/login\?code=\S+)$/);
  cleanup.push(async () => { lab.proc.kill("SIGTERM"); await new Promise((r) => setTimeout(r, 300)); });
  const [, loginLink, url] = await lab.line;
  const base = `${url}/`;
  // A script's way in: lab's token from its home.
  const auth = { authorization: `Bearer ${fs.readFileSync(path.join(home, "token"), "utf8").trim()}` };

  const res = await fetch(new URL("runs", base), {
    method: "POST", headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ provider: "codex", workdir, prompt: "please TOUCHME" }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const run = await res.json();

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
  cleanup.push(async () => { await browser.close(); });
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  await page.goto(loginLink);
  await page.goto(`${base}#/runs/${run.id}`);
  const card = page.locator('[data-testid=dialog-card][data-kind=permission][data-answerable=true]');
  await card.waitFor();
  assert.match(await card.textContent(), /touch from-ui\.txt/);
  assert.match(await card.locator(".card-title").textContent(), /Codex CLI/);
  await card.locator("[data-testid=dialog-option]", { hasText: "Yes, proceed (y)" }).click();
  await waitFor(async () => fs.existsSync(path.join(workdir, "from-ui.txt")), "the command to run");
  await card.waitFor({ state: "detached" });
  const view = await waitFor(async () => {
    const v = await (await fetch(new URL(`runs/${run.id}/messages`, base), { headers: auth })).json();
    return v.state === "idle" && v.messages.some((m) => m.text === "Done from the UI.") && v;
  }, "the run to go idle with the agent's reply");
  assert.equal(view.pending_dialog, null);
});
