// Unit tests of waiting.js (node only): when a run starts waiting, and what to say.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  WaitWatch, faviconHref, firstPlainLine, isStoppedOnError, isWaiting, notificationFor, titleWithCount, waitKind, waitingCount,
} from "../waiting.js";

const q = (toolId, question = "Which database?") => ({
  state: "question", pending_dialog: { kind: "question", tool_id: toolId, questions: [{ question, options: [] }] }, blocked: null,
});
const idle = { state: "idle", pending_dialog: null, blocked: null };
const blockedView = (message = "Claude needs your permission to use Bash") => ({
  state: "needs_input", pending_dialog: null, blocked: { kind: "needs_input", message },
});

test("waiting states, count and title", () => {
  assert.ok(isWaiting("question") && isWaiting("needs_input"));
  assert.ok(!isWaiting("idle") && !isWaiting("working") && !isWaiting(undefined));
  assert.equal(waitingCount(["idle", "question", "needs_input", "ended", "working"]), 2);
  assert.equal(titleWithCount("lab", 0), "lab");
  assert.equal(titleWithCount("lab", 1), "(1) lab");
  assert.equal(titleWithCount("webshop · lab", 12), "(12) webshop · lab");
});

test("favicon: plain without waiting runs, the count (9+ above nine) otherwise", () => {
  const plain = decodeURIComponent(faviconHref(0));
  assert.ok(plain.startsWith("data:image/svg+xml,<svg"), plain);
  assert.ok(!plain.includes("<text"), plain);
  assert.ok(decodeURIComponent(faviconHref(3)).includes(">3</text>"));
  assert.ok(decodeURIComponent(faviconHref(12)).includes(">9+</text>"));
  assert.notEqual(faviconHref(1), faviconHref(2));
});

test("waitKind: known dialog kinds, unknown ones as generic, a block as needs_input", () => {
  assert.equal(waitKind(q("t1")), "question");
  for (const kind of ["plan", "permission", "generic"]) assert.equal(waitKind({ state: "question", pending_dialog: { kind } }), kind);
  assert.equal(waitKind({ state: "question", pending_dialog: { kind: "elicitation" } }), "generic");
  assert.equal(waitKind(blockedView()), "needs_input");
  assert.equal(waitKind({ state: "question", pending_dialog: null }), "generic");
  const stopped = { state: "needs_input", pending_dialog: null, blocked: { kind: "error", message: "Rate limited: 429" } };
  assert.equal(waitKind(stopped), "error");
  assert.equal(isStoppedOnError(stopped), true);
  assert.equal(isStoppedOnError({ ...stopped, state: "idle" }), false);
  assert.equal(isStoppedOnError(blockedView()), false);
  const n = notificationFor("r1", { id: "r1", workdir: "/tmp/x/webshop" }, stopped);
  assert.deepEqual([n.title, n.body], ["webshop: the agent stopped on an error", "Rate limited: 429"]);
});

test("notificationFor: the question, the plan's first line, the blocked message; link and tag", () => {
  const run = { id: "r1", workdir: "/tmp/x/webshop" };
  const n = notificationFor("r1", run, q("t1", "Which database should we use?"));
  assert.deepEqual(n, { title: "webshop: the agent is asking", body: "Which database should we use?", tag: "lab-run-r1", url: "#/runs/r1" });
  const plan = notificationFor("r1", run, { state: "question", pending_dialog: { kind: "plan", tool_id: "p", plan: "\n# Migration **plan**\n\n1. a" } });
  assert.equal(plan.title, "webshop: a plan waits for approval");
  assert.equal(plan.body, "Migration plan");
  const b = notificationFor("r 2/x", null, blockedView("needs permission to run ls"));
  assert.equal(b.title, "r 2/x: the agent needs input");
  assert.equal(b.body, "needs permission to run ls");
  assert.equal(b.url, "#/runs/r%202%2Fx");
  const unknown = notificationFor("r1", run, { state: "question", pending_dialog: { kind: "elicitation", generic: { title: "Pick a server", text: "" } } });
  assert.equal(unknown.title, "webshop: the agent needs input");
  assert.equal(unknown.body, "Pick a server");
  // Permission: "<tool>: <the summary's first line>"; generic: its title; the agent by name.
  const perm = notificationFor("r1", run, { state: "question", pending_dialog: {
    kind: "permission", tool_id: "perm-1", tool_name: "exec_command", options: [],
    permission: { tool: "Shell", summary: "rm -rf build\nRemove the build folder", reason: null },
  } }, "Codex");
  assert.equal(perm.title, "webshop: Codex asks for permission");
  assert.equal(perm.body, "Shell: rm -rf build");
  const noTool = notificationFor("r1", run, { state: "question", pending_dialog: { kind: "permission", tool_name: "Bash", permission: { summary: "ls" } } });
  assert.equal(noTool.body, "Bash: ls");
  const generic = notificationFor("r1", run, { state: "question", pending_dialog: {
    kind: "generic", tool_id: "trust-1", tool_name: "trust", options: [],
    generic: { title: "Trust /work/webshop?", text: "Do you trust the files in this folder?" },
  } }, "Some Agent");
  assert.equal(generic.title, "webshop: Some Agent needs input");
  assert.equal(generic.body, "Trust /work/webshop?");
  const untitled = notificationFor("r1", run, { state: "question", pending_dialog: { kind: "generic", generic: { title: "", text: "\n  Hooks need review\nmore" } } });
  assert.equal(untitled.body, "Hooks need review");
  assert.equal(notificationFor("r1", run, q("t1"), "Some Agent").title, "webshop: Some Agent is asking");
  const empty = notificationFor("r1", run, { state: "needs_input", pending_dialog: null, blocked: null });
  assert.equal(empty.body, "Open the run to see what it waits for.");
  const long = notificationFor("r1", run, q("t", "x".repeat(500)));
  assert.equal(long.body.length, 200);
  assert.ok(long.body.endsWith("…"));
  assert.equal(firstPlainLine("  \n- **Risk**: `x`"), "Risk: x");
});

test("WaitWatch: runs already waiting at load never notify; a later wait does, once", () => {
  const w = new WaitWatch();
  assert.deepEqual(w.poll([{ id: "a", state: "question" }, { id: "b", state: "idle" }]), [], "the first poll only primes");
  // The open run's stream then shows a's pending dialog: still the one from load.
  assert.equal(w.view("a", q("ta")), false);
  assert.deepEqual(w.poll([{ id: "a", state: "question" }, { id: "b", state: "idle" }]), []);
  // b starts waiting: the poll names it, its fetched view decides, once.
  assert.deepEqual(w.poll([{ id: "a", state: "question" }, { id: "b", state: "question" }]), ["b"]);
  assert.equal(w.candidate("b", q("tb")), true);
  assert.deepEqual(w.poll([{ id: "a", state: "question" }, { id: "b", state: "question" }]), []);
  assert.equal(w.view("b", q("tb")), false, "the stream's view of the same dialog does not notify again");
  // A fetched view that is no longer waiting: nothing.
  assert.deepEqual(w.poll([{ id: "c", state: "needs_input" }]), ["c"], "a run new since load");
  assert.equal(w.candidate("c", idle), false);
});

test("WaitWatch: the stream first, then the poll: one notification per dialog", () => {
  const w = new WaitWatch();
  w.poll([{ id: "a", state: "working" }]);
  assert.equal(w.view("a", q("t1")), true);
  assert.equal(w.view("a", q("t1")), false, "the same view again");
  assert.deepEqual(w.poll([{ id: "a", state: "question" }]), [], "the poll sees no transition");
  // The next question right after the first, with no idle in between: a new dialog.
  assert.equal(w.view("a", q("t2")), true);
  // A stale poll that flips a back to waiting: its fetched view is the same dialog.
  w.poll([{ id: "a", state: "working" }]);
  assert.deepEqual(w.poll([{ id: "a", state: "question" }]), ["a"]);
  assert.equal(w.candidate("a", q("t2")), false, "t2 was told already");
});

test("WaitWatch: blocks without a dialog notify each time the run starts waiting again", () => {
  const w = new WaitWatch();
  w.poll([{ id: "a", state: "working" }]);
  assert.equal(w.view("a", blockedView()), true);
  assert.equal(w.view("a", blockedView()), false);
  assert.deepEqual(w.poll([{ id: "a", state: "needs_input" }]), []);
  assert.equal(w.view("a", { ...idle, state: "working" }), false);
  assert.equal(w.view("a", blockedView()), true, "a second permission prompt, same words");
  // Via the poll only.
  w.poll([{ id: "a", state: "working" }]);
  assert.deepEqual(w.poll([{ id: "a", state: "needs_input" }]), ["a"]);
  assert.equal(w.candidate("a", blockedView()), true);
  assert.equal(w.candidate("a", blockedView()), false, "the same wait, fetched twice");
});

test("WaitWatch: views before the first poll count as 'at load'", () => {
  const w = new WaitWatch();
  assert.equal(w.view("a", q("t1")), false);
  assert.deepEqual(w.poll([{ id: "a", state: "question" }]), []);
  assert.equal(w.view("a", q("t1")), false);
  assert.equal(w.view("a", q("t2")), true, "a new dialog after load does");
});

test("WaitWatch: permission and generic prompts count as waiting, once per dialog", () => {
  const w = new WaitWatch();
  w.poll([{ id: "a", state: "working" }]);
  const perm = { state: "question", blocked: null, pending_dialog: { kind: "permission", tool_id: "perm-1", permission: { tool: "Bash", summary: "ls" } } };
  const generic = { state: "question", blocked: null, pending_dialog: { kind: "generic", tool_id: "trust-1", generic: { title: "Trust?", text: "" } } };
  assert.equal(waitingCount([perm.state, generic.state, "idle"]), 2);
  assert.equal(w.view("a", perm), true);
  assert.equal(w.view("a", perm), false);
  assert.equal(w.view("a", generic), true, "the next prompt, another dialog");
});
