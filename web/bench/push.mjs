// Hook → push, measured: a real `lab serve` with SUBS subscriptions (keys made here) on a
// push service stand-in (loopback), fake-claude asking ROUNDS questions one after the
// other (each answered through the API once all its pushes arrived). Per push: the time
// from fake-claude's dialog hook returning (its log's `ts`) to the push's POST arriving
// at the stand-in, every push decrypted (http_ece) to check it is that question's.
//
//   cargo build -p lab -p fake-claude        # or --release
//   cd web && LAB_BIN=<target>/debug/lab FAKE_CLAUDE_BIN=<target>/debug/fake-claude SUBS=50 ROUNDS=10 node bench/push.mjs
//
// Prints p50, p90, p99 and the worst. Results: docs/perf.md, "Hook to push".
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";
import { FAKE_CLAUDE_BIN, startWorld, tomlStr, waitFor } from "../tests/world.mjs";

const require = createRequire(import.meta.url);
const ece = require("http_ece");
const SUBS = Number(process.env.SUBS || 50);
const ROUNDS = Number(process.env.ROUNDS || 10);

const cleanups = [];
const t = { after: (fn) => cleanups.push(fn) };
const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };

const arrivals = []; // {path, at, body}
const service = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => { arrivals.push({ path: req.url, at: Date.now(), body: Buffer.concat(chunks) }); res.statusCode = 201; res.end(); });
});
await new Promise((r) => service.listen(0, "127.0.0.1", r));

try {
  let logPath = null;
  const questions = Array.from({ length: ROUNDS }, (_, i) => ({
    question: `Question ${i}?`, header: `Q${i}`, multiSelect: false,
    options: [{ label: "Yes", description: "" }, { label: "No", description: "" }],
  }));
  const world = await startWorld(t, {
    provider: "claude-code",
    prefix: "/tmp/lpb-",
    labToml: (w) => {
      const script = path.join(w.dir, "script.json");
      logPath = path.join(w.dir, "fake.log");
      fs.writeFileSync(script, JSON.stringify({ steps: [...questions.map((q) => ({ ask: { questions: [q] } })), { idle: {} }] }));
      return `[providers.claude-code]\nprogram = ${tomlStr(FAKE_CLAUDE_BIN)}\nenv = { FAKE_CLAUDE_SCRIPT = ${tomlStr(script)}, FAKE_CLAUDE_LOG = ${tomlStr(logPath)} }\n`;
    },
  });
  const subs = new Map(); // path -> {ecdh, auth}
  for (let i = 0; i < SUBS; i++) {
    const ecdh = crypto.createECDH("prime256v1");
    ecdh.generateKeys();
    const auth = crypto.randomBytes(16);
    const p = `/push/${i}`;
    subs.set(p, { ecdh, auth });
    const r = await world.api("POST", "/push/subscriptions", {
      endpoint: `http://127.0.0.1:${service.address().port}${p}`,
      keys: { p256dh: ecdh.getPublicKey().toString("base64url"), auth: auth.toString("base64url") },
    });
    if (r.status !== 201) throw new Error(`subscribe: ${r.status} ${JSON.stringify(r.body)}`);
  }
  const hooks = () => fs.readFileSync(logPath, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((e) => e.event === "hook" && e.tool_use_id && e.exit_code === 0);
  const run = await world.createRun("ask away");
  const latencies = [];
  let seen = 0;
  let lastTool = null;
  for (let round = 0; round < ROUNDS; round++) {
    const v = await world.waitView(run.id, (v) => v.pending_dialog && v.pending_dialog.tool_id !== lastTool, `question ${round}`);
    const tool = v.pending_dialog.tool_id;
    const batch = await waitFor(() => (arrivals.length >= seen + SUBS ? arrivals.slice(seen, seen + SUBS) : null), { what: `${SUBS} pushes for question ${round}`, timeout: 30000 });
    seen += SUBS;
    // The dialog's first hook (the one that spooled it) for this tool call.
    const hook = hooks().find((e) => e.tool_use_id === tool || (v.pending_dialog.call_id && e.tool_use_id === v.pending_dialog.call_id));
    if (!hook) throw new Error(`no hook logged for ${tool}`);
    const hookAt = Date.parse(hook.ts);
    for (const a of batch) {
      const { ecdh, auth } = subs.get(a.path);
      const p = JSON.parse(ece.decrypt(a.body, { version: "aes128gcm", privateKey: ecdh, authSecret: auth }).toString("utf8"));
      if (p.dialog.tool_id !== tool) throw new Error(`push for ${p.dialog.tool_id}, expected ${tool}`);
      latencies.push(a.at - hookAt);
    }
    lastTool = tool;
    const ans = await world.api("POST", `/runs/${run.id}/dialog/answer`, { tool_id: tool, answers: [{ option: 0 }] });
    if (ans.status !== 202) throw new Error(`answer: ${ans.status} ${JSON.stringify(ans.body)}`);
  }
  console.log(`hook → push POST at the stand-in: ${SUBS} subscriptions × ${ROUNDS} questions = ${latencies.length} pushes, all decrypted`);
  console.log(`p50 ${quantile(latencies, 0.5)} ms, p90 ${quantile(latencies, 0.9)} ms, p99 ${quantile(latencies, 0.99)} ms, worst ${Math.max(...latencies)} ms`);
} finally {
  for (const fn of cleanups.reverse()) await fn();
  service.close();
}
