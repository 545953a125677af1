// A file's unified patch (GET /runs/{id}/diff, git's own output) read into lines the
// diff view draws: pure, no DOM (unit-tested in tests/diffparse.test.mjs). Nothing
// here computes a diff; it only reads the one git made.

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$/;

/**
 * The hunks of one file's patch: `[{header, section, oldStart, newStart, lines}]`, each
 * line `{type: "ctx"|"add"|"del"|"note", old, new, text}` with its line numbers on each
 * side (null where it has none). `note` is git's "\ No newline at end of file". The
 * header lines before the first hunk (diff --git, index, ---, +++, mode, rename) are
 * left out; a patch without hunks (binary, mode only) has none.
 */
export function parsePatch(patch) {
  const hunks = [];
  let cur = null;
  let oldNo = 0;
  let newNo = 0;
  const lines = String(patch || "").split("\n");
  // The split leaves one empty string after the patch's last newline.
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const raw of lines) {
    const m = HUNK.exec(raw);
    if (m) {
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      cur = { header: raw, section: m[5] || "", oldStart: oldNo, newStart: newNo, lines: [] };
      hunks.push(cur);
      continue;
    }
    if (!cur) continue;
    const sign = raw.charAt(0);
    const text = raw.slice(1);
    if (sign === "+") cur.lines.push({ type: "add", old: null, new: newNo++, text });
    else if (sign === "-") cur.lines.push({ type: "del", old: oldNo++, new: null, text });
    else if (sign === " " || raw === "") cur.lines.push({ type: "ctx", old: oldNo++, new: newNo++, text });
    else if (sign === "\\") cur.lines.push({ type: "note", old: null, new: null, text: raw.slice(2) });
    // Anything else (a header of a following file in a malformed patch) is not a line.
  }
  return hunks;
}

/**
 * A hunk's lines side by side: `[{left, right}]`, context on both sides, each run of
 * deletions beside the additions that follow it (the longer side's extra lines face
 * an empty cell, null). A note goes with the side of the line before it.
 */
export function sideBySide(hunk) {
  const rows = [];
  let dels = [];
  let adds = [];
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i++) rows.push({ left: dels[i] || null, right: adds[i] || null });
    dels = [];
    adds = [];
  };
  let last = null;
  for (const line of hunk.lines) {
    if (line.type === "del") {
      if (adds.length) flush();
      dels.push(line);
    } else if (line.type === "add") {
      adds.push(line);
    } else if (line.type === "note") {
      if (last && last.type === "add") adds.push(line);
      else if (last && last.type === "del") dels.push(line);
      else { flush(); rows.push({ left: line, right: line }); }
    } else {
      flush();
      rows.push({ left: line, right: line });
    }
    if (line.type !== "note") last = line;
  }
  flush();
  return rows;
}

/**
 * Where a review comment on this line points: the new side's line number for added and
 * context lines, the old side's for a deleted one; null for a note.
 */
export function commentTarget(line) {
  if (!line || line.type === "note") return null;
  if (line.type === "del") return { side: "old", line: line.old };
  return { side: "new", line: line.new };
}

/** A stable key of a comment's place: `side:line` within its file. */
export const placeKey = (t) => `${t.side}:${t.line}`;

/** The one-letter mark of a file's status, and its word. */
export const STATUS = {
  added: { mark: "A", word: "added" },
  modified: { mark: "M", word: "modified" },
  deleted: { mark: "D", word: "deleted" },
  renamed: { mark: "R", word: "renamed" },
};

/** "3 files changed, +12 −4" from a diff summary (or null). */
export function summaryText(s) {
  if (!s) return "";
  const n = Number(s.files_changed) || 0;
  return `${n} file${n === 1 ? "" : "s"} changed, +${Number(s.additions) || 0} −${Number(s.deletions) || 0}`;
}
