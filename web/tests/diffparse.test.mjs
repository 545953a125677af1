// Unit tests of diffparse.js and highlight.js (node only, no browser).
import { test } from "node:test";
import assert from "node:assert/strict";
import { commentTarget, parsePatch, sideBySide, summaryText } from "../diffparse.js";
import { highlightLine, langOf } from "../highlight.js";

// What `git diff` printed for a small change (two hunks, a file without a final newline).
const PATCH = [
  "diff --git a/src/lib.rs b/src/lib.rs",
  "index 3b18e51..b2c4a6e 100644",
  "--- a/src/lib.rs",
  "+++ b/src/lib.rs",
  "@@ -1,4 +1,5 @@ mod top",
  " fn one() {}",
  "-fn two() {}",
  "+fn two() -> u8 { 2 }",
  "+fn three() {}",
  " ",
  " fn four() {}",
  "@@ -10,2 +11,2 @@",
  "-old end",
  "\\ No newline at end of file",
  "+new end",
  "\\ No newline at end of file",
  "",
].join("\n");

test("parsePatch: hunks with both sides' line numbers; headers left out; the no-newline note", () => {
  const hunks = parsePatch(PATCH);
  assert.equal(hunks.length, 2);
  assert.equal(hunks[0].section, "mod top");
  assert.deepEqual(hunks[0].lines.map((l) => [l.type, l.old, l.new, l.text]), [
    ["ctx", 1, 1, "fn one() {}"],
    ["del", 2, null, "fn two() {}"],
    ["add", null, 2, "fn two() -> u8 { 2 }"],
    ["add", null, 3, "fn three() {}"],
    ["ctx", 3, 4, ""],
    ["ctx", 4, 5, "fn four() {}"],
  ]);
  assert.deepEqual(hunks[1].lines.map((l) => [l.type, l.old, l.new]), [
    ["del", 10, null], ["note", null, null], ["add", null, 11], ["note", null, null],
  ]);
  assert.equal(hunks[1].lines[1].text, "No newline at end of file");
});

test("parsePatch: no hunks for a binary file's patch, an empty or missing one; a one-line hunk header", () => {
  assert.deepEqual(parsePatch("diff --git a/x.png b/x.png\nBinary files a/x.png and b/x.png differ\n"), []);
  assert.deepEqual(parsePatch(""), []);
  assert.deepEqual(parsePatch(null), []);
  const [h] = parsePatch("@@ -0,0 +1 @@\n+only\n");
  assert.deepEqual(h.lines, [{ type: "add", old: null, new: 1, text: "only" }]);
});

test("sideBySide: deletions face the additions after them; context on both sides; notes stay on their side", () => {
  const [first, second] = parsePatch(PATCH);
  const rows = sideBySide(first);
  assert.deepEqual(rows.map((r) => [r.left && r.left.old, r.right && r.right.new]), [
    [1, 1], [2, 2], [null, 3], [3, 4], [4, 5],
  ]);
  const rows2 = sideBySide(second);
  assert.deepEqual(rows2.map((r) => [r.left && r.left.type, r.right && r.right.type]), [["del", "add"], ["note", "note"]]);
});

test("commentTarget: new side for added and context lines, old side for deleted ones, none for a note", () => {
  const [h] = parsePatch(PATCH);
  assert.deepEqual(commentTarget(h.lines[0]), { side: "new", line: 1 });
  assert.deepEqual(commentTarget(h.lines[1]), { side: "old", line: 2 });
  assert.deepEqual(commentTarget(h.lines[2]), { side: "new", line: 2 });
  assert.equal(commentTarget({ type: "note" }), null);
});

test("summaryText", () => {
  assert.equal(summaryText({ files_changed: 1, additions: 3, deletions: 0 }), "1 file changed, +3 −0");
  assert.equal(summaryText({ files_changed: 12, additions: 40, deletions: 7 }), "12 files changed, +40 −7");
  assert.equal(summaryText(null), "");
});

test("langOf: by file name, then extension; unknown is plain text", () => {
  assert.equal(langOf("src/main.rs"), "rust");
  assert.equal(langOf("web/app.MJS"), "js");
  assert.equal(langOf("a/b/Makefile"), "shell");
  assert.equal(langOf("README"), null);
  assert.equal(langOf(".gitignore"), null);
  assert.equal(langOf("notes.txt"), null);
});

const classes = (r) => r.tokens.map((t) => [t.cls, t.text]);

test("highlightLine: keywords, strings, numbers, types and a line comment; the tokens rebuild the line", () => {
  const line = 'pub fn add(a: u8) -> Result<u8, Error> { let s = "x // not a comment"; 0x1F } // done';
  const r = highlightLine(line, "rust");
  assert.equal(r.tokens.map((t) => t.text).join(""), line);
  const got = classes(r);
  assert.ok(got.some(([c, t]) => c === "kw" && t === "pub"));
  assert.ok(got.some(([c, t]) => c === "kw" && t === "fn"));
  assert.ok(got.some(([c, t]) => c === "ty" && t === "Result"));
  assert.ok(got.some(([c, t]) => c === "str" && t === '"x // not a comment"'));
  assert.ok(got.some(([c, t]) => c === "num" && t === "0x1F"));
  assert.deepEqual(got[got.length - 1], ["com", "// done"]);
  assert.equal(r.state, null);
});

test("highlightLine: a block comment carries to the next line and ends there", () => {
  const a = highlightLine("let x = 1; /* starts", "js");
  assert.deepEqual(a.state, { block: ["/*", "*/"] });
  const b = highlightLine("still inside */ const y = 'q';", "js", a.state);
  assert.deepEqual(classes(b).slice(0, 2), [["com", "still inside */"], ["", " "]]);
  assert.ok(classes(b).some(([c, t]) => c === "str" && t === "'q'"));
  assert.equal(b.state, null);
});

test("highlightLine: a JS template string across lines; a Rust lifetime is not a string; escaped quotes", () => {
  const a = highlightLine("const t = `one", "js");
  assert.deepEqual(a.state, { str: "`" });
  const b = highlightLine("two` + 1", "js", a.state);
  assert.deepEqual(classes(b)[0], ["str", "two`"]);
  const r = highlightLine("fn f<'a>(s: &'a str) -> char { 'x' }", "rust");
  assert.ok(!classes(r).some(([c, t]) => c === "str" && t.includes("a>")), JSON.stringify(classes(r)));
  assert.ok(classes(r).some(([c, t]) => c === "str" && t === "'x'"));
  const e = highlightLine('x = "a \\" b" # c', "python");
  assert.deepEqual(classes(e).filter(([c]) => c), [["str", '"a \\" b"'], ["com", "# c"]]);
});

test("highlightLine: plain text for an unknown language; markup is only ever text", () => {
  assert.deepEqual(highlightLine("<b>hi</b>", null).tokens, [{ cls: "", text: "<b>hi</b>" }]);
  assert.deepEqual(highlightLine("", "rust").tokens, []);
  const r = highlightLine('<img src=x onerror="alert(1)">', "html");
  assert.equal(r.tokens.map((t) => t.text).join(""), '<img src=x onerror="alert(1)">');
});
