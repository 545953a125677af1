// An ACP agent in the UI (issue 33): the scripted ACP agent `fake-acp` (tools/fake-acp,
// FAKE_ACP_BIN) configured only in lab.toml, a real `lab serve`, real tmux, Chromium. Its
// permission request is a permission card with the agent's own options; a click on
// "Allow" runs the command; its form is a question card; a click answers it. The UI has
// no ACP-specific code: this is the same card as for tmux agents.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { CHROMIUM_ARGS, LAB_BIN, findChromium, openLoginLink, startWorld, targetDir, tomlStr, waitFor } from "./world.mjs";

const FAKE_ACP = process.env.FAKE_ACP_BIN || path.join(targetDir(), "debug", "fake-acp");
const CHROMIUM = findChromium();

const missing = [
  [fs.existsSync(FAKE_ACP), `fake-acp at ${FAKE_ACP} (cargo build -p fake-acp)`],
  [fs.existsSync(LAB_BIN), `the lab binary at ${LAB_BIN}`],
  [CHROMIUM, "Chromium"],
].filter(([ok]) => !ok).map(([, what]) => what);

test("acp: a permission card with the agent's options is clicked, then a form's question", { timeout: 90000 }, async (t) => {
  if (missing.length) {
    if (process.env.LAB_UI_REQUIRED === "1") throw new Error(`cannot run: missing ${missing.join("; ")}`);
    process.stderr.write(`\n*** acp browser test SKIPPED: missing ${missing.join("; ")}\n\n`);
    t.skip("fake-acp not available");
    return;
  }
  const world = await startWorld(t, {
    provider: "fake",
    prefix: "/tmp/lab-acp-ui-",
    labToml: () => `[agents.fake]\nacp = [${tomlStr(FAKE_ACP)}]\ndisplay_name = "Fake ACP"\n`,
  });
  const info = await world.providerInfo();
  assert.equal(info.transport, "acp");
  const run = await world.createRun("run:touch from-ui.txt;ask:Which database?;say:All done from the UI.");

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  t.after(async () => { await browser.close(); });
  const page = await browser.newPage();
  await openLoginLink(page, world.loginLink);
  await page.goto(`${world.url}#/runs/${run.id}`);

  const card = page.locator("[data-testid=dialog-area] [data-testid=dialog-card][data-kind=permission][data-answerable=true]");
  await card.waitFor();
  assert.match(await card.textContent(), /touch from-ui\.txt/);
  assert.match(await card.locator(".card-title").textContent(), /Fake ACP/);
  const labels = await card.locator("[data-testid=dialog-option] .opt-label").allTextContents();
  assert.deepEqual(labels, ["Always Allow", "Allow", "Reject"]);
  await card.locator("[data-testid=dialog-option]").nth(labels.indexOf("Allow")).click();
  await waitFor(async () => fs.existsSync(path.join(world.workdir, "from-ui.txt")), { what: "the command to run" });

  const q = page.locator("[data-testid=dialog-area] [data-testid=dialog-card][data-kind=question]");
  await q.waitFor();
  assert.match(await q.textContent(), /Which database\?/);
  await q.locator("[data-testid=dialog-option]", { hasText: "SQLite" }).click();
  const submit = q.getByTestId("dialog-submit-answers");
  if (await submit.count() && !(await submit.isDisabled())) await submit.click();
  const view = await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.text.includes("All done from the UI.")), "the run to go idle");
  assert.equal(view.pending_dialog, null);
  assert.ok(view.messages.some((m) => m.text === "Answered: SQLite"), JSON.stringify(view.messages.map((m) => m.text)));
  await page.locator("[data-testid=chat] [data-testid=message]", { hasText: "All done from the UI." }).first().waitFor();
});

test("answer rules: \"Always allow this in this repository\" on a card makes the rule, and the next identical prompt is answered by it", { timeout: 90000 }, async (t) => {
  if (missing.length) {
    if (process.env.LAB_UI_REQUIRED === "1") throw new Error(`cannot run: missing ${missing.join("; ")}`);
    t.skip("fake-acp not available");
    return;
  }
  const world = await startWorld(t, {
    provider: "fake",
    prefix: "/tmp/lab-rules-ui-",
    labToml: () => `[agents.fake]\nacp = [${tomlStr(FAKE_ACP)}]\ndisplay_name = "Fake ACP"\n`,
  });
  const run = await world.createRun("run:touch ruled.txt;say:first done");
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  t.after(async () => { await browser.close(); });
  const page = await browser.newPage();
  await openLoginLink(page, world.loginLink);
  await page.goto(`${world.url}#/runs/${run.id}`);

  const card = page.locator("[data-testid=dialog-area] [data-testid=dialog-card][data-kind=permission][data-answerable=true]");
  await card.waitFor();
  await card.getByText("Always allow this…").click();
  await card.locator("[data-testid=always-allow][data-scope=repository]").click();
  await waitFor(async () => fs.existsSync(path.join(world.workdir, "ruled.txt")), { what: "the command to run" });
  await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.role !== "user" && m.text.includes("first done")), "the first turn's end");
  const rules = (await world.api("GET", "/rules")).body;
  assert.equal(rules.length, 1, JSON.stringify(rules));
  assert.deepEqual(rules[0].match, { provider: "fake", tool: "execute", pattern: "touch ruled.txt", workdir: world.workdir });
  assert.equal(rules[0].action, "allow");

  // The same prompt again: lab answers it by the rule, and the page says so.
  fs.rmSync(path.join(world.workdir, "ruled.txt"));
  const sent = await world.api("POST", `/runs/${run.id}/messages`, { text: "say:again;run:touch ruled.txt;say:second done" });
  assert.equal(sent.status, 202, JSON.stringify(sent.body));
  const v = await world.waitView(run.id, (v) => v.state === "idle" && v.messages.some((m) => m.role !== "user" && m.text.includes("second done")), "the second turn's end");
  assert.ok(fs.existsSync(path.join(world.workdir, "ruled.txt")), "the rule let the command run");
  assert.equal(v.answer.answered_by.rule, rules[0].id, JSON.stringify(v.answer));
  const note = page.locator("[data-testid=dialog-area] [data-testid=rule-note]");
  await note.waitFor();
  assert.match(await note.textContent(), /Answered by rule “Allow execute touch ruled\.txt in /);
  // The rule's page: what it answered today (the card's prompt and this one), its dry
  // run switched on, then removed.
  await note.getByTestId("rule-edit-link").click();
  const row = page.locator(`[data-testid=rules-view] [data-testid=rule][data-rule="${rules[0].id}"]`);
  await row.waitFor();
  assert.match(await row.getByTestId("rule-today").textContent(), /2 today/);
  await row.getByTestId("rule-dry-run").check();
  await waitFor(async () => (await world.api("GET", "/rules")).body[0].dry_run === true, { what: "the dry run switched on" });
  await page.locator(`[data-testid=rules-view] [data-testid=rule][data-rule="${rules[0].id}"] [data-testid=rule-delete]`).click();
  await waitFor(async () => (await world.api("GET", "/rules")).body.length === 0, { what: "the rule to be removed" });
});
