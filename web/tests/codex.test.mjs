// The Codex CLI provider in the UI, end to end: the real `codex` (LAB_CODEX_BIN) against
// the Responses-API stand-in on loopback (RESPONSES_STANDIN_BIN), a real `lab serve`, real
// tmux, Chromium. An approval codex asks for is a permission card; a click on its "Yes"
// runs the command. Without codex the test is skipped with a loud line, unless
// LAB_UI_REQUIRED=1 (scripts/test), where that is a failure.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { CHROMIUM_ARGS, LAB_BIN, RESPONSES_STANDIN_BIN, findChromium, openLoginLink, startWorld, tomlStr, waitFor } from "./world.mjs";

const CODEX = process.env.LAB_CODEX_BIN || "";
const CHROMIUM = findChromium();
/** codex starts slower than the fake agent. */
const CODEX_WAIT = 30000;

const missing = [
  [CODEX && fs.existsSync(CODEX), "LAB_CODEX_BIN (scripts/install-codex.sh)"],
  [fs.existsSync(RESPONSES_STANDIN_BIN), `the responses-standin binary at ${RESPONSES_STANDIN_BIN} (cargo build -p responses-standin)`],
  [fs.existsSync(LAB_BIN), `the lab binary at ${LAB_BIN}`],
  [CHROMIUM, "Chromium"],
].filter(([ok]) => !ok).map(([, what]) => what);

/** Start `cmd` and resolve with the first stdout line matching `re` (its match). */
function startAndRead(cmd, args, opts, re) {
  const proc = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "inherit"] });
  const line = new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: proc.stdout });
    rl.on("line", (l) => { const m = l.match(re); if (m) resolve(m); });
    proc.once("exit", (code) => reject(new Error(`${cmd} exited (${code}) before it was ready`)));
    setTimeout(() => reject(new Error(`${cmd} was not ready in time`)), CODEX_WAIT);
  });
  return { proc, line };
}

test("codex: an approval is a permission card; a click on 'Yes' runs the command", { timeout: 120000 }, async (t) => {
  if (missing.length) {
    if (process.env.LAB_UI_REQUIRED === "1") throw new Error(`cannot run: missing ${missing.join("; ")}`);
    process.stderr.write(`\n*** codex browser test SKIPPED: missing ${missing.join("; ")}\n\n`);
    t.skip("codex not available");
    return;
  }
  const cleanup = [];
  t.after(async () => { for (const f of cleanup.reverse()) await f(); });

  const script = {
    turns: [
      { match: { contains: "TOUCHME" }, reply: { exec_command: { cmd: "touch from-ui.txt", require_escalated: true, justification: "The UI test asks" } } },
      { match: "output_for_previous", reply: { text: "Done from the UI." } },
    ],
  };
  const scriptDir = fs.mkdtempSync("/tmp/lab-codex-script-");
  cleanup.push(async () => fs.rmSync(scriptDir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(scriptDir, "script.json"), JSON.stringify(script));
  const standin = startAndRead(RESPONSES_STANDIN_BIN, ["--script", path.join(scriptDir, "script.json")], {}, /listening on (127\.0\.0\.1:\d+)/);
  cleanup.push(async () => { standin.proc.kill("SIGKILL"); });
  const [, standinAddr] = await standin.line;

  // Nothing may leave the machine: every proxy variable points at a closed loopback port.
  const dead = "http://127.0.0.1:9";
  const world = await startWorld(t, {
    provider: "codex",
    prefix: "/tmp/lab-codex-ui-",
    // Nothing of this process's OpenAI, codex, proxy or tmux settings reaches lab or codex.
    dropEnv: /^(OPENAI_|CODEX)|proxy|PROXY|^TMUX/,
    labToml: (w) => {
      const codexHome = path.join(w.dir, "c");
      fs.mkdirSync(codexHome);
      fs.writeFileSync(path.join(codexHome, "config.toml"), [
        'model = "stand-in-model"', 'model_provider = "standin"', 'approval_policy = "on-request"',
        'sandbox_mode = "workspace-write"', "check_for_update_on_startup = false", "",
        "[model_providers.standin]", 'name = "Stand-in"', `base_url = ${tomlStr(`http://${standinAddr}/v1`)}`,
        'wire_api = "responses"', 'env_key = "STANDIN_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0", "",
        `[projects.${tomlStr(w.workdir)}]`, 'trust_level = "trusted"', "",
        "[features]", "plugins = false", "", "[analytics]", "enabled = false", "",
      ].join("\n"));
      const env = {
        CODEX_HOME: codexHome, STANDIN_API_KEY: "sk-standin", LANG: "C.UTF-8", TERM: "xterm-256color",
        NO_PROXY: "127.0.0.1,localhost,::1", no_proxy: "127.0.0.1,localhost,::1",
        HTTP_PROXY: dead, HTTPS_PROXY: dead, ALL_PROXY: dead, http_proxy: dead, https_proxy: dead, all_proxy: dead,
      };
      return `[providers.codex]\nprogram = ${tomlStr(CODEX)}\nenv = { ${Object.entries(env).map(([k, v]) => `${k} = ${tomlStr(v)}`).join(", ")} }\n`;
    },
  });
  const { workdir, loginLink } = world;
  const base = world.url;
  const run = await world.createRun("please TOUCHME");

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  cleanup.push(async () => { await browser.close(); });
  const page = await browser.newPage();
  page.setDefaultTimeout(CODEX_WAIT);
  await openLoginLink(page, loginLink);
  await page.goto(`${base}#/runs/${run.id}`);
  const card = page.locator('[data-testid=dialog-card][data-kind=permission][data-answerable=true]');
  await card.waitFor();
  assert.match(await card.textContent(), /touch from-ui\.txt/);
  assert.match(await card.locator(".card-title").textContent(), /Codex CLI/);
  await card.locator("[data-testid=dialog-option]", { hasText: "Yes, proceed (y)" }).click();
  await waitFor(async () => fs.existsSync(path.join(workdir, "from-ui.txt")), { what: "the command to run" });
  await card.waitFor({ state: "detached" });
  const view = await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.text === "Done from the UI."), "the run to go idle with the agent's reply");
  assert.equal(view.pending_dialog, null);
});
