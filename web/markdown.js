// Safe markdown for agent text. No DOM: importable from node for tests.
//
// Safety model: every piece of source text is HTML-escaped BEFORE any markdown
// rule runs, so no character of the input can ever open a tag or an attribute.
// The only markup in the output is what this module emits itself, and the only
// attribute built from input is a link href, which must be http:// or https://
// (already escaped, so it cannot leave its double-quoted attribute).

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escape text for use in HTML content or a double/single-quoted attribute. */
export function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// Placeholders are delimited by U+0000, which is stripped from the input first,
// so input can never forge one.
const PH = "\u0000";

/** A URL (already HTML-escaped) is allowed as a link only if it is http(s). */
function safeHref(escapedUrl) {
  const url = escapedUrl.trim();
  if (!/^https?:\/\/[^\s]+$/i.test(url)) return null;
  return url;
}

function link(href, textHtml) {
  return `<a href="${href}" target="_blank" rel="noopener noreferrer nofollow">${textHtml}</a>`;
}

/**
 * Inline markdown on ONE block of raw text: code spans, links, autolinks,
 * bold, italic, strikethrough, backslash escapes, hard line breaks.
 */
export function renderInline(raw) {
  let s = escapeHtml(String(raw ?? "").replace(/\u0000/g, ""));
  const stash = [];
  const keep = (html) => `${PH}${stash.push(html) - 1}${PH}`;

  // Code spans first: their content is literal.
  s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, ticks, code) => {
    let c = code;
    if (/^ .* $/.test(c) && c.trim() !== "") c = c.slice(1, -1);
    return keep(`<code>${c}</code>`);
  });

  // Backslash escapes of markdown punctuation.
  s = s.replace(/\\([\\`*_{}\[\]()#+\-.!~|])/g, (_, ch) => keep(ch));

  // [text](url "title") — only http(s) targets become links.
  s = s.replace(/\[([^\]\n]*)\]\(\s*([^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+&quot;[^\n]*?&quot;)?\s*\)/g,
    (whole, text, url) => {
      const href = safeHref(url);
      const inner = emphasis(text);
      return href ? keep(link(href, inner)) : keep(inner);
    });

  // <https://...> autolinks (the brackets were escaped to &lt; &gt;).
  s = s.replace(/&lt;(https?:\/\/(?:[^\s&\u0000]|&amp;)+?)&gt;/gi, (_, url) => keep(link(url, url)));

  // Bare URLs. &amp; may be part of a URL; any other entity ends it.
  s = s.replace(/\bhttps?:\/\/(?:[^\s&\u0000]|&amp;)+/gi, (url) => {
    let tail = "";
    const m = url.match(/(?:[.,;:!?*_~]|&amp;)+$/);
    if (m) { tail = m[0]; url = url.slice(0, -tail.length); }
    // Drop an unbalanced trailing ")" (e.g. "(see https://x.y/z)").
    while (url.endsWith(")") && (url.match(/\(/g) || []).length < (url.match(/\)/g) || []).length) {
      tail = ")" + tail; url = url.slice(0, -1);
    }
    return keep(link(url, url)) + tail;
  });

  s = emphasis(s);
  s = s.replace(/\n/g, "<br>\n");

  // Restore stashed pieces (they may nest: a link holding a code span).
  const restore = (t) => t.replace(/\u0000(\d+)\u0000/g, (_, i) => restore(stash[Number(i)]));
  return restore(s);
}

// Span lengths are bounded so that unclosed markers cost linear, not quadratic, time.
function emphasis(s) {
  return s
    .replace(/\*\*(?=\S)([\s\S]{0,500}?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)([\s\S]{0,500}?\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?!\*)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)([\s\S]{0,500}?\S)~~/g, "<del>$1</del>");
}

// ---------------------------------------------------------------- blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST_ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$/;
const TABLE_SEP = /^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function indentOf(line) {
  const m = line.match(/^[ \t]*/)[0];
  let n = 0;
  for (const ch of m) n += ch === "\t" ? 4 - (n % 4) : 1;
  return n;
}

function stripIndent(line, n) {
  let i = 0, col = 0;
  while (i < line.length && col < n && (line[i] === " " || line[i] === "\t")) {
    col += line[i] === "\t" ? 4 - (col % 4) : 1;
    i++;
  }
  return line.slice(i);
}

function splitRow(line) {
  let t = line.trim();
  if (t.startsWith("|")) t = t.slice(1);
  if (t.endsWith("|") && !t.endsWith("\\|")) t = t.slice(0, -1);
  const cells = [];
  let cur = "";
  for (let i = 0; i < t.length; i++) {
    if (t[i] === "\\" && t[i + 1] === "|") { cur += "|"; i++; continue; }
    if (t[i] === "|") { cells.push(cur.trim()); cur = ""; continue; }
    cur += t[i];
  }
  cells.push(cur.trim());
  return cells;
}

function isTableStart(line, next) {
  return line.includes("|") && next !== undefined && next.includes("|") && next.includes("-") && TABLE_SEP.test(next);
}

function isBlockStart(line, next) {
  return FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line) ||
    LIST_ITEM.test(line) || isTableStart(line, next);
}

// Quotes and lists nest by recursion; past this depth the rest is plain text.
const MAX_DEPTH = 12;

function renderBlocks(lines, tight, depth = 0) {
  if (depth > MAX_DEPTH) return `<p>${renderInline(lines.join("\n").trim())}</p>`;
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];

    if (/^\s*$/.test(line)) { i++; continue; }

    // Fenced code block: contents are escaped and otherwise untouched.
    const fence = line.match(FENCE);
    if (fence) {
      const marker = fence[1];
      const indent = indentOf(line);
      const lang = (fence[2] || "").replace(/[^\w+#.-]/g, "");
      const body = [];
      i++;
      while (i < lines.length) {
        const l = lines[i];
        const close = l.match(/^ {0,3}(`{3,}|~{3,})\s*$/);
        if (close && close[1][0] === marker[0] && close[1].length >= marker.length) { i++; break; }
        body.push(stripIndent(l, indent));
        i++;
      }
      const cls = lang ? ` class="language-${escapeHtml(lang)}"` : "";
      out.push(`<pre><code${cls}>${escapeHtml(body.join("\n"))}</code></pre>`);
      continue;
    }

    const h = line.match(HEADING);
    if (h) {
      const level = h[1].length;
      out.push(`<h${level}>${renderInline(h[2] || "")}</h${level}>`);
      i++;
      continue;
    }

    if (HR.test(line)) { out.push("<hr>"); i++; continue; }

    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && !/^\s*$/.test(lines[i])) {
        body.push(lines[i].replace(QUOTE, ""));
        i++;
      }
      out.push(`<blockquote>${renderBlocks(body, false, depth + 1)}</blockquote>`);
      continue;
    }

    // GFM table: header row, separator row, body rows.
    if (isTableStart(line, lines[i + 1])) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map((c) =>
        c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "");
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes("|") && !/^\s*$/.test(lines[i])) {
        rows.push(splitRow(lines[i]));
        i++;
      }
      const cell = (tag, text, k) => {
        // A class, not a style attribute: the page's Content-Security-Policy allows no inline styles.
        const a = aligns[k] ? ` class="md-align-${aligns[k]}"` : "";
        return `<${tag}${a}>${renderInline(text ?? "")}</${tag}>`;
      };
      const thead = `<thead><tr>${head.map((c, k) => cell("th", c, k)).join("")}</tr></thead>`;
      const tbody = rows.length
        ? `<tbody>${rows.map((r) => `<tr>${head.map((_, k) => cell("td", r[k], k)).join("")}</tr>`).join("")}</tbody>`
        : "";
      out.push(`<div class="md-table"><table>${thead}${tbody}</table></div>`);
      continue;
    }

    const li = line.match(LIST_ITEM);
    if (li) {
      const ordered = /\d/.test(li[2]);
      const baseIndent = li[1].length;
      const items = [];
      let cur = null;
      let loose = false;
      let sawBlank = false;
      while (i < lines.length) {
        const l = lines[i];
        const m = l.match(LIST_ITEM);
        if (m && indentOf(l) <= baseIndent + 1 && /\d/.test(m[2]) === ordered) {
          if (sawBlank && cur) loose = true;
          const contentOffset = m[1].length + m[2].length + Math.min(m[3].length || 1, 4);
          cur = { lines: [m[4]], offset: contentOffset, start: ordered ? parseInt(m[2], 10) : null };
          items.push(cur);
          sawBlank = false;
          i++;
          continue;
        }
        if (/^\s*$/.test(l)) {
          // A blank line ends the list unless the next line continues it.
          const next = lines[i + 1];
          if (next === undefined) { i++; break; }
          const nm = next.match(LIST_ITEM);
          if ((nm && indentOf(next) <= baseIndent + 1 && /\d/.test(nm[2]) === ordered) || indentOf(next) >= cur.offset) {
            sawBlank = true;
            cur.lines.push("");
            i++;
            continue;
          }
          i++;
          break;
        }
        if (indentOf(l) >= Math.min(cur.offset, baseIndent + 2)) {
          cur.lines.push(stripIndent(l, cur.offset));
          i++;
          continue;
        }
        // Lazy continuation of the item's paragraph.
        if (!sawBlank && !isBlockStart(l, lines[i + 1])) {
          cur.lines.push(l.trim());
          i++;
          continue;
        }
        break;
      }
      const tag = ordered ? "ol" : "ul";
      const start = ordered && items[0].start !== 1 ? ` start="${items[0].start}"` : "";
      const body = items.map((it) => {
        while (it.lines.length && it.lines[it.lines.length - 1] === "") it.lines.pop();
        return `<li>${renderBlocks(it.lines, !loose, depth + 1)}</li>`;
      }).join("");
      out.push(`<${tag}${start}>${body}</${tag}>`);
      continue;
    }

    // Paragraph: runs until a blank line or the start of another block.
    const para = [line.trim()];
    i++;
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !isBlockStart(lines[i], lines[i + 1])) {
      para.push(lines[i].trim());
      i++;
    }
    const html = renderInline(para.join("\n"));
    out.push(tight ? html : `<p>${html}</p>`);
  }
  return out.join(tight ? "\n" : "");
}

/** Render markdown source to an HTML string that is safe to assign to innerHTML. */
export function renderMarkdown(src) {
  const text = String(src ?? "").replace(/\u0000/g, "").replace(/\r\n?/g, "\n");
  return renderBlocks(text.split("\n"), false);
}
