// The diff view's first paint, measured: a repository of 5,000 files, a run whose
// worktree changed 200 of them (the agent's edits, uncommitted), the diff view opened
// ROUNDS times (a) cold — a fresh page load straight onto #/runs/<id>/diff, the UI's
// own assets included — and (b) from the run's chat (the "Changes" link, as an operator
// goes). "Painted": the first animation frame after the first file's lines are in the
// page and every changed file is in the file list.
//
//   cargo build -p lab -p fake-claude        # or --release
//   cd web && LAB_BIN=<target>/debug/lab FAKE_CLAUDE_BIN=<target>/debug/fake-claude ROUNDS=20 node bench/diffview.mjs
//
// Prints p50, p99 and the worst of each, against the goal (≤ 1 s). Results: docs/perf.md,
// "A run's diff".
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, FAKE_CLAUDE_BIN, findChromium, openLoginLink, startWorld, tomlStr, waitFor } from "../tests/world.mjs";

const ROUNDS = Number(process.env.ROUNDS || 10);
const FILES = 5000;
const CHANGED = 200;

const cleanups = [];
const t = { after: (fn) => cleanups.push(fn) };
const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const git = (dir, ...args) => {
  const r = spawnSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@test.invalid", "-c", "init.defaultBranch=main", ...args], { cwd: dir, encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  return r.stdout.trim();
};
const source = (i, j) => Array.from({ length: 30 }, (_, k) => `pub fn f${i}_${k}(x: u32) -> u32 { x + ${k} } // file ${i}.${j}`).join("\n") + "\n";

let browser = null;
try {
  const script = path.join(fs.mkdtempSync("/tmp/lab-diffbench-"), "script.json");
  fs.writeFileSync(script, JSON.stringify({ steps: [{ idle: {} }] }));
  const world = await startWorld(t, {
    provider: "claude-code",
    prefix: "/tmp/ldb-",
    labToml: () => `[providers.claude-code]\nprogram = ${tomlStr(FAKE_CLAUDE_BIN)}\nenv = { FAKE_CLAUDE_SCRIPT = ${tomlStr(script)} }\n`,
  });
  for (let i = 0; i < FILES; i++) {
    const dir = path.join(world.workdir, `mod${String(i % 50).padStart(2, "0")}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `f${i}.rs`), source(i, 0));
  }
  git(world.workdir, "init", "-q");
  git(world.workdir, "add", "-A");
  git(world.workdir, "commit", "-q", "-m", "5000 files");
  const run = await world.createRun("go");
  if (!run.worktree) throw new Error(`no worktree: ${JSON.stringify(run)}`);
  for (let i = 0; i < CHANGED; i++) {
    const n = i * (FILES / CHANGED);
    const p = path.join(run.worktree.path, `mod${String(n % 50).padStart(2, "0")}`, `f${n}.rs`);
    const lines = fs.readFileSync(p, "utf8").split("\n");
    lines.splice(3, 3, "// changed by the agent", `pub fn g${n}() {}`, `pub fn h${n}() {}`, "// and one more");
    fs.writeFileSync(p, lines.join("\n"));
  }
  const diff = await world.api("GET", `/runs/${run.id}/diff`);
  if (diff.status !== 200 || diff.body.files.length !== CHANGED) throw new Error(`GET diff: ${diff.status} ${diff.body.files && diff.body.files.length}`);

  browser = await chromium.launch({ executablePath: findChromium(), args: CHROMIUM_ARGS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  // The moment of the first frame with the first file's lines and the whole file list.
  await context.addInitScript((changed) => {
    const check = () => {
      if (window.__painted || !document.querySelector("[data-testid=diff-table]")) return;
      if (document.querySelectorAll("[data-testid=diff-file-link]").length < changed) return;
      window.__painted = -1;
      requestAnimationFrame(() => { window.__painted = performance.now(); });
    };
    new MutationObserver(check).observe(document, { childList: true, subtree: true });
  }, CHANGED);
  const page = await context.newPage();
  await openLoginLink(page, world.loginLink);
  const painted = () => waitFor(() => page.evaluate(() => (window.__painted > 0 ? window.__painted : null)), { interval: 20, what: "the diff view painted" });
  const cold = [];
  const fromChat = [];
  for (let r = 0; r < ROUNDS; r++) {
    await page.goto("about:blank");
    await page.goto(new URL(`#/runs/${run.id}/diff`, world.url).href);
    cold.push(await painted()); // performance.now() counts from the navigation's start
    await page.goto(new URL(`#/runs/${run.id}`, world.url).href);
    await page.getByTestId("changes-link").waitFor();
    const t0 = await page.evaluate(() => { window.__painted = 0; const t = performance.now(); location.hash = location.hash + "/diff"; return t; });
    fromChat.push((await painted()) - t0);
  }
  const line = (name, xs) => `${name.padEnd(28)} p50 ${quantile(xs, 0.5).toFixed(0).padStart(5)} ms   p99 ${quantile(xs, 0.99).toFixed(0).padStart(5)} ms   worst ${Math.max(...xs).toFixed(0).padStart(5)} ms   (goal ≤ 1000 ms)`;
  console.log(`diff view first paint: ${FILES} files, ${CHANGED} changed, ${ROUNDS} rounds, lab ${world.url}`);
  console.log(line("cold page load", cold));
  console.log(line("from the chat (Changes)", fromChat));
} finally {
  if (browser) await browser.close();
  for (const fn of cleanups.reverse()) await fn();
}
