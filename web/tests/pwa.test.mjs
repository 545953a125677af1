// The installable app and its service worker in real headless Chromium against a real
// `lab serve`: the worker registers, the manifest parses and Chromium finds no
// installability errors, and a push from lab answers the run's question from its
// notification's button.
//
// The push is lab's own: lab POSTs it to a push service stand-in (loopback) for a
// subscription whose keys this test made; the test decrypts it (http_ece) and hands the
// plaintext to the worker as a real `push` event (CDP ServiceWorker.deliverPushMessage:
// headless Chromium has no push service of its own). A click on a notification button
// cannot be made trusted from a test, so the test calls the worker's own click handler
// (`self.handleClick`, what its `notificationclick` listener calls) on the notification
// the worker showed.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";
import { CHROMIUM_ARGS, FAKE_CLAUDE_BIN, LAB_BIN, findChromium, openLoginLink, isExecutable, startWorld, tomlStr, waitFor } from "./world.mjs";

const require = createRequire(import.meta.url);
const REQUIRED = process.env.LAB_UI_REQUIRED === "1";
let chromium = null;
let skip = null;

before(async () => {
  const missing = [];
  if (!findChromium()) missing.push("Chromium");
  for (const p of [LAB_BIN, FAKE_CLAUDE_BIN]) if (!isExecutable(p)) missing.push(p);
  try { await import("playwright-core"); } catch { missing.push("playwright-core"); }
  if (missing.length) {
    skip = `missing ${missing.join(", ")}`;
    if (REQUIRED) throw new Error(`LAB_UI_REQUIRED=1 but ${skip}`);
    return;
  }
  ({ chromium } = await import("playwright-core"));
});

const Q1 = { question: "Which database should we use?", header: "Database", multiSelect: false,
  options: [{ label: "PostgreSQL", description: "server" }, { label: "SQLite", description: "one file" }] };
const Q2 = { question: "Deploy where?", header: "Deploy", multiSelect: false,
  options: [{ label: "Fly", description: "" }, { label: "A VPS", description: "" }] };

test("the app: worker and manifest installable; a push's button answers the question, a stale one answers nothing (dialog_changed)", { timeout: 120000 }, async (t) => {
  if (skip) { t.skip(skip); return; }
  const ece = require("http_ece");
  const pushes = [];
  const service = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => { pushes.push(Buffer.concat(chunks)); res.statusCode = 201; res.end(); });
  });
  await new Promise((r) => service.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => service.close(r)));

  let logPath = null;
  const world = await startWorld(t, {
    provider: "claude-code",
    labToml: (w) => {
      const script = path.join(w.dir, "script.json");
      logPath = path.join(w.dir, "fake.log");
      fs.writeFileSync(script, JSON.stringify({ steps: [{ ask: { questions: [Q1] } }, { ask: { questions: [Q2] } }, { say: "Both noted." }, { idle: {} }] }));
      return `[providers.claude-code]\nprogram = ${tomlStr(FAKE_CLAUDE_BIN)}\nenv = { FAKE_CLAUDE_SCRIPT = ${tomlStr(script)}, FAKE_CLAUDE_LOG = ${tomlStr(logPath)} }\n`;
    },
    diagnose: (tail) => `--- fake-claude log (tail) ---\n${tail(logPath, 15)}`,
  });
  const answersLogged = () => {
    try { return fs.readFileSync(logPath, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.event === "answer"); } catch { return []; }
  };
  try {
    const origin = new URL(world.url).origin;
    // A real profile (not incognito, where Chromium installs nothing).
    const profile = fs.mkdtempSync("/tmp/lab-pwa-profile-");
    const context = await chromium.launchPersistentContext(profile, { executablePath: findChromium(), args: CHROMIUM_ARGS });
    t.after(async () => { await context.close().catch(() => {}); fs.rmSync(profile, { recursive: true, force: true }); });
    await context.grantPermissions(["notifications"], { origin });
    const page = context.pages()[0] || await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await openLoginLink(page, world.loginLink);
    assert.equal(new URL(page.url()).pathname, "/");

    // The worker registers on load (no permission asked), and controls the page.
    const scope = await page.evaluate(() => navigator.serviceWorker.ready.then((r) => r.scope));
    assert.equal(scope, `${origin}/`);
    const worker = context.serviceWorkers()[0] || await context.waitForEvent("serviceworker");
    assert.equal(new URL(worker.url()).pathname, "/sw.js");
    await page.getByTestId("push-toggle").waitFor();

    // The manifest: served as one, parsed, and Chromium's installability checks pass.
    const man = await page.evaluate(async () => {
      const res = await fetch("/manifest.webmanifest");
      return { type: res.headers.get("content-type"), json: await res.json() };
    });
    assert.equal(man.type, "application/manifest+json");
    assert.equal(man.json.display, "standalone");
    assert.deepEqual(man.json.icons.map((i) => i.sizes), ["192x192", "512x512"]);
    const cdp = await context.newCDPSession(page);
    const installability = await waitFor(async () => {
      const r = await cdp.send("Page.getInstallabilityErrors");
      return r.installabilityErrors.length === 0 ? r : null;
    }, { what: "no installability errors", timeout: 15000 }).catch(async () => cdp.send("Page.getInstallabilityErrors"));
    assert.deepEqual(installability.installabilityErrors, [], "Chromium's installability criteria are met");
    const parsed = await cdp.send("Page.getAppManifest");
    assert.deepEqual(parsed.errors, [], "the manifest parses without errors");

    // lab's push for the first question, decrypted as the browser's push service would hand it over.
    const ecdh = crypto.createECDH("prime256v1");
    ecdh.generateKeys();
    const auth = crypto.randomBytes(16);
    const sub = await world.api("POST", "/push/subscriptions", {
      endpoint: `http://127.0.0.1:${service.address().port}/push/chromium`,
      keys: { p256dh: ecdh.getPublicKey().toString("base64url"), auth: auth.toString("base64url") },
    });
    assert.equal(sub.status, 201, JSON.stringify(sub.body));
    const run = await world.createRun("set it up");
    const v1 = await world.waitView(run.id, (v) => v.state === "question" && v.pending_dialog, "the first question");
    const plain = await waitFor(() => pushes[0] && ece.decrypt(pushes[0], { version: "aes128gcm", privateKey: ecdh, authSecret: auth }).toString("utf8"), { what: "lab's push" });
    const first = JSON.parse(plain);
    assert.equal(first.dialog.tool_id, v1.pending_dialog.tool_id);

    // A real push event in the worker, carrying lab's payload.
    const registrations = [];
    cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => registrations.push(...e.registrations));
    await cdp.send("ServiceWorker.enable");
    const reg = await waitFor(() => registrations.find((r) => r.scopeURL === `${origin}/` && !r.isDeleted), { what: "the worker's registration id" });
    const notifications = () => worker.evaluate(async () => (await self.registration.getNotifications())
      .map((n) => ({ title: n.title, body: n.body, tag: n.tag, actions: n.actions.map((a) => a.title) })));
    // (CDP's delivery is best effort: headless Chromium has been seen to drop one while
    // the worker starts; it is sent again, at most three times.)
    let shown = null;
    for (let attempt = 1; attempt <= 3 && !shown; attempt++) {
      await cdp.send("ServiceWorker.deliverPushMessage", { origin, registrationId: reg.registrationId, data: plain });
      shown = await waitFor(async () => (await notifications())[0], { what: "the notification", timeout: 5000 }).catch(() => null);
    }
    assert.ok(shown, "the worker showed lab's push");
    assert.deepEqual(shown, { title: first.title, body: "Which database should we use?", tag: `lab-${run.id}`, actions: ["PostgreSQL", "SQLite"] });

    // Its second button answers: the guard takes it, the agent gets "SQLite", the run goes on.
    const click = await worker.evaluate(async () => {
      const [n] = await self.registration.getNotifications();
      const r = await self.handleClick(n, "option-1");
      const [after] = await self.registration.getNotifications();
      return { status: r.status, after: after && { title: after.title, body: after.body } };
    });
    assert.equal(click.status, 202);
    assert.equal(click.after.title, "Answered");
    assert.match(click.after.body, /^SQLite/);
    const v2 = await world.waitView(run.id, (v) => v.pending_dialog && v.pending_dialog.tool_id !== v1.pending_dialog.tool_id, "the second question");
    await waitFor(() => answersLogged().length === 1, { what: "the agent's answer" });
    assert.match(JSON.stringify(answersLogged()[0]), /SQLite/);

    // The first push again (a notification left on the lock screen): its button answers
    // nothing, and the notification says why.
    await worker.evaluate((p) => self.handlePush(p), first);
    const stale = await worker.evaluate(async () => {
      const [n] = await self.registration.getNotifications();
      const r = await self.handleClick(n, "option-0");
      const [after] = await self.registration.getNotifications();
      return { status: r.status, error: r.body && r.body.error, body: after && after.body };
    });
    assert.deepEqual([stale.status, stale.error], [409, "dialog_changed"]);
    assert.match(stale.body, /dialog_changed/);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(answersLogged().length, 1, "the stale button typed nothing");
    const still = await world.view(run.id);
    assert.equal(still.pending_dialog.tool_id, v2.pending_dialog.tool_id, "the second question still waits");

    // A tap on the notification itself opens the run.
    await worker.evaluate((p) => self.handlePush(p), first);
    await worker.evaluate(async () => { const [n] = await self.registration.getNotifications(); await self.handleClick(n, ""); });
    await waitFor(() => page.url().endsWith(`#/runs/${run.id}`), { what: "the page on the run" });
    assert.deepEqual(errors, []);
  } catch (e) {
    world.failed = true;
    e.message = `${e.message}\n${world.diagnostics()}`;
    throw e;
  }
});
