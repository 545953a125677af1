// Web Push end to end, checked by libraries other than lab's: a push service stand-in
// on loopback (the RFC 8030 receiving side: it takes POSTs and answers 201, or 410 for
// a subscription it forgot), a subscription whose key pair this test made (node's
// crypto), the VAPID JWT verified with node's crypto against GET /push/key, and the
// payload decrypted with the `http_ece` package (lab encrypts with web-push-native).
//
// Runs with the browser tests (same binaries: LAB_BIN, FAKE_CLAUDE_BIN; skipped without
// them unless LAB_UI_REQUIRED=1); no browser is needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";
import { FAKE_CLAUDE_BIN, LAB_BIN, isExecutable, startWorld, tomlStr, waitFor } from "./world.mjs";

const require = createRequire(import.meta.url);
const REQUIRED = process.env.LAB_UI_REQUIRED === "1";

const b64u = (buf) => Buffer.from(buf).toString("base64url");

/** The push service stand-in: records every request; `status(path)` picks the answer. */
async function pushService(t, status = () => 201) {
  const received = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ path: req.url, method: req.method, headers: req.headers, body: Buffer.concat(chunks) });
      res.statusCode = status(req.url);
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => server.close(r)));
  return { received, url: (p) => `http://127.0.0.1:${server.address().port}${p}` };
}

/** A browser's side of a subscription: its P-256 key pair and auth secret. */
function browserKeys() {
  const ecdh = crypto.createECDH("prime256v1");
  ecdh.generateKeys();
  const auth = crypto.randomBytes(16);
  return { ecdh, auth, keys: { p256dh: b64u(ecdh.getPublicKey()), auth: b64u(auth) } };
}

/** Verify `vapid t=<jwt>, k=<key>` against lab's public key; returns the JWT's claims. */
function verifyVapid(header, publicKey) {
  const m = /^vapid t=([\w-]+\.[\w-]+\.[\w-]+), k=([\w-]+)$/.exec(header || "");
  assert.ok(m, `Authorization is VAPID (RFC 8292): ${header}`);
  assert.equal(m[2], publicKey, "k= is GET /push/key's key");
  const raw = Buffer.from(publicKey, "base64url");
  const key = crypto.createPublicKey({ format: "jwk", key: { kty: "EC", crv: "P-256", x: b64u(raw.subarray(1, 33)), y: b64u(raw.subarray(33, 65)) } });
  const [h, p, s] = m[1].split(".");
  const ok = crypto.verify("sha256", Buffer.from(`${h}.${p}`), { key, dsaEncoding: "ieee-p1363" }, Buffer.from(s, "base64url"));
  assert.ok(ok, "the JWT's ES256 signature verifies with lab's public key");
  assert.equal(JSON.parse(Buffer.from(h, "base64url")).alg, "ES256");
  return JSON.parse(Buffer.from(p, "base64url"));
}

const QUESTION = {
  question: "Which database should we use?", header: "Database", multiSelect: false,
  options: [{ label: "PostgreSQL", description: "server" }, { label: "SQLite", description: "one file" }],
};

test("a question is pushed: aes128gcm, VAPID that verifies, the payload decrypted by another library; 410 removes the subscription", { timeout: 90000 }, async (t) => {
  const missing = [LAB_BIN, FAKE_CLAUDE_BIN].filter((p) => !isExecutable(p));
  if (missing.length) {
    if (REQUIRED) throw new Error(`LAB_UI_REQUIRED=1 but missing ${missing.join(", ")}`);
    t.skip(`missing ${missing.join(", ")}`);
    return;
  }
  const ece = require("http_ece");
  const service = await pushService(t, (p) => (p.startsWith("/gone") ? 410 : 201));
  let scriptPath = null;
  const world = await startWorld(t, {
    provider: "claude-code",
    labToml: (w) => {
      scriptPath = path.join(w.dir, "script.json");
      fs.writeFileSync(scriptPath, JSON.stringify({ steps: [{ say: "One question first." }, { ask: { questions: [QUESTION] } }, { idle: {} }] }));
      return `[providers.claude-code]\nprogram = ${tomlStr(FAKE_CLAUDE_BIN)}\nenv = { FAKE_CLAUDE_SCRIPT = ${tomlStr(scriptPath)} }\n`;
    },
  });
  try {
    const key = await world.api("GET", "/push/key");
    assert.equal(key.status, 200, JSON.stringify(key.body));
    const raw = Buffer.from(key.body.public_key, "base64url");
    assert.equal(raw.length, 65);
    assert.equal(raw[0], 4, "uncompressed P-256");
    const keyFile = path.join(world.home, "push", "vapid.key");
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600, "the VAPID key is private");

    // Bad subscriptions are refused, saying why.
    const bad = [
      [{ endpoint: "http://push.example.com/x", keys: browserKeys().keys }, /https/],
      [{ endpoint: "https://169.254.169.254/latest", keys: browserKeys().keys }, /not a public address/],
      [{ endpoint: "https://10.0.0.8/push", keys: browserKeys().keys }, /not a public address/],
      [{ endpoint: service.url("/a"), keys: { p256dh: "AAAA", auth: browserKeys().keys.auth } }, /p256dh/],
      [{ endpoint: service.url("/a"), keys: { ...browserKeys().keys, auth: "AAAA" } }, /auth/],
      [{ endpoint: service.url("/a") }, /keys/],
    ];
    for (const [body, why] of bad) {
      const r = await world.api("POST", "/push/subscriptions", body);
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error, "bad_request");
      assert.match(r.body.message, why);
    }

    const phone = browserKeys();
    const sub = await world.api("POST", "/push/subscriptions", { endpoint: service.url("/a/phone"), expirationTime: null, keys: phone.keys });
    assert.equal(sub.status, 201, JSON.stringify(sub.body));
    const gone = await world.api("POST", "/push/subscriptions", { endpoint: service.url("/gone/old-laptop"), keys: browserKeys().keys });
    assert.equal(gone.status, 201);
    let list = await world.api("GET", "/push/subscriptions");
    assert.deepEqual(list.body.map((s) => s.id).sort(), [sub.body.id, gone.body.id].sort());
    assert.ok(!JSON.stringify(list.body).includes(phone.keys.auth), "the list does not show keys");

    const run = await world.createRun("pick a database");
    const view = await world.waitView(run.id, (v) => v.state === "question" && v.pending_dialog, "the question");
    const push = await waitFor(() => service.received.find((r) => r.path === "/a/phone"), { what: "a push at the stand-in" });
    assert.equal(push.method, "POST");
    assert.equal(push.headers["content-encoding"], "aes128gcm");
    assert.ok(Number(push.headers.ttl) > 0, `a TTL: ${push.headers.ttl}`);
    assert.ok(push.body.length <= 3072, `≤ 3 KB encrypted: ${push.body.length}`);
    const claims = verifyVapid(push.headers.authorization, key.body.public_key);
    assert.equal(claims.aud, service.url(""), "aud is the push service's origin, its port included (RFC 8292)");
    assert.match(claims.sub, /^mailto:/);
    assert.ok(claims.exp * 1000 > Date.now() && claims.exp * 1000 <= Date.now() + 24 * 3600 * 1000 + 60000, "exp within 24 h (RFC 8292)");

    const plain = ece.decrypt(push.body, { version: "aes128gcm", privateKey: phone.ecdh, authSecret: phone.auth });
    const payload = JSON.parse(plain.toString("utf8"));
    assert.deepEqual(payload, {
      run_id: run.id,
      state: "question",
      title: payload.title,
      body: "Which database should we use?",
      url: `/#/runs/${run.id}`,
      dialog: { tool_id: view.pending_dialog.tool_id, kind: "question", options: [{ label: "PostgreSQL", option: 0 }, { label: "SQLite", option: 1 }] },
    });
    assert.match(payload.title, /webshop/);

    // The push service forgot the other one: 410 → lab removes it, and only it.
    await waitFor(() => service.received.some((r) => r.path === "/gone/old-laptop"), { what: "a push to the forgotten subscription" });
    list = await waitFor(async () => {
      const l = await world.api("GET", "/push/subscriptions");
      return l.body.length === 1 && l.body;
    }, { what: "the 410'd subscription removed" });
    assert.equal(list[0].id, sub.body.id);
    assert.equal(service.received.filter((r) => r.path === "/gone/old-laptop").length, 1, "a 410 is not retried");

    // Subscriptions persist: on disk, 0600, and the operator removes one by id.
    const file = path.join(world.home, "push", "subscriptions.json");
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const del = await world.api("DELETE", `/push/subscriptions/${sub.body.id}`, {});
    assert.equal(del.status, 204);
    const again = await world.api("DELETE", `/push/subscriptions/${sub.body.id}`, {});
    assert.equal(again.status, 404);
    assert.equal(again.body.error, "subscription_not_found");
    assert.deepEqual(JSON.parse(fs.readFileSync(file, "utf8")), []);
  } catch (e) {
    world.failed = true;
    e.message = `${e.message}\n${world.diagnostics()}`;
    throw e;
  }
});
