// A newcomer's path, measured: `lab serve` started → the address (and, with the token,
// the one-time login link) printed → a fresh browser opened on what was printed → lab's
// UI loaded with its providers, logged in. Run with the token (the default since issue
// 28: the login link is opened) and with --no-token (lab before issue 28: the plain
// address is opened), ROUNDS times each, each round a fresh home and browser context.
//
//   cargo build -p lab        # or --release
//   cd web && LAB_BIN=<target>/debug/lab ROUNDS=7 node bench/newcomer.mjs
//
// Prints, per mode, the median and the worst of each phase, and what the newcomer does
// (how many actions). Results: docs/perf.md, "A newcomer's path".
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { chromium } from "playwright-core";

const LAB_BIN = process.env.LAB_BIN;
const ROUNDS = Number(process.env.ROUNDS || 5);
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const TIMEOUT_MS = 30000;
if (!LAB_BIN || !fs.existsSync(LAB_BIN)) {
  console.error("LAB_BIN must name a built lab binary (cargo build --release -p lab)");
  process.exit(2);
}

function startLab(home, extra) {
  const proc = spawn(LAB_BIN, ["serve", "--addr", "127.0.0.1:0", "--home", home, ...extra], {
    env: { ...process.env, LAB_LOG: "warn" },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const lines = [];
  let wake = () => {};
  readline.createInterface({ input: proc.stdout }).on("line", (l) => { lines.push({ l, at: performance.now() }); wake(); });
  const wait = (re) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`lab printed no ${re} in ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
    const look = () => {
      const hit = lines.find((x) => re.test(x.l));
      if (hit) { clearTimeout(timer); resolve({ match: hit.l.match(re), at: hit.at }); } else wake = look;
    };
    look();
  });
  return { proc, wait };
}

const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
const modes = [
  { name: "token (default)", extra: [], open: "link" },
  { name: "--no-token (before issue 28)", extra: ["--no-token"], open: "address" },
];
const results = [];
try {
  for (const mode of modes) {
    const phases = { printed: [], ui: [], total: [] };
    for (let i = 0; i < ROUNDS; i++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lab-newcomer-"));
      const t0 = performance.now();
      const lab = startLab(path.join(dir, "h"), mode.extra);
      try {
        const serving = await lab.wait(/^lab: serving on (http:\/\/\S+)$/);
        const target = mode.open === "link"
          ? await lab.wait(/^lab: login link .*: (http:\/\/\S+\/login\?code=\S+)$/)
          : serving;
        const printed = target.at;
        const context = await browser.newContext();
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT_MS);
        await page.goto(target.match[1]);
        await page.locator("#nr-provider option").first().waitFor({ state: "attached" });
        const done = performance.now();
        await context.close();
        phases.printed.push(printed - t0);
        phases.ui.push(done - printed);
        phases.total.push(done - t0);
      } finally {
        lab.proc.kill("SIGTERM");
        await new Promise((r) => { lab.proc.once("exit", r); setTimeout(r, 5000); });
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
    results.push({ mode: mode.name, opened: mode.open, phases });
  }
} finally {
  await browser.close();
}

const ms = (x) => `${Math.round(x)} ms`;
console.log(`rounds per mode: ${ROUNDS}; lab: ${LAB_BIN}`);
console.log("| mode | newcomer's actions | start → printed (p50 / max) | printed → UI logged in (p50 / max) | total (p50 / max) |");
console.log("| --- | --- | --- | --- | --- |");
for (const r of results) {
  const p = r.phases;
  const cell = (xs) => `${ms(quantile(xs, 0.5))} / ${ms(Math.max(...xs))}`;
  const action = r.opened === "link" ? "1: open the printed login link" : "1: open the printed address";
  console.log(`| ${r.mode} | ${action} | ${cell(p.printed)} | ${cell(p.ui)} | ${cell(p.total)} |`);
}
const [tok, none] = results.map((r) => quantile(r.phases.total, 0.5));
console.log(`token / no-token, total p50: ${(tok / none).toFixed(2)}x`);
