// Unit tests for the markdown renderer: `node --test` (from web/).
import { test } from "node:test";
import assert from "node:assert/strict";
import { renderMarkdown, renderInline, escapeHtml } from "./markdown.js";

const ALLOWED_TAGS = new Set([
  "p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
  "ul", "ol", "li", "a", "blockquote", "hr", "table", "thead", "tbody", "tr", "th", "td", "div",
]);
const ALLOWED_ATTRS = new Set(["href", "target", "rel", "class", "start"]);

// Every "<" in the output must be a tag this renderer emits, with only the
// attributes it emits, all double-quoted, with no raw quote or "<" inside.
function assertSafe(html, input) {
  const tagRe = /<(\/?)([a-zA-Z0-9]+)((?:\s+[a-z]+="[^"<>]*")*)\s*>/g;
  let rest = html.replace(tagRe, (whole, close, name, attrs) => {
    assert.ok(ALLOWED_TAGS.has(name.toLowerCase()), `tag <${name}> not allowed, input: ${JSON.stringify(input)}\n${html}`);
    for (const m of attrs.matchAll(/([a-z]+)="([^"]*)"/g)) {
      const [, attr, value] = m;
      assert.ok(ALLOWED_ATTRS.has(attr), `attribute ${attr} not allowed: ${html}`);
      if (attr === "href") assert.match(value, /^https?:\/\//i, `unsafe href ${value}`);
      if (attr === "class") assert.match(value, /^(language-[\w+#.-]+|md-table)$/);
    }
    return "";
  });
  assert.ok(!rest.includes("<"), `stray "<" in output for ${JSON.stringify(input)}:\n${html}`);
  assert.ok(!rest.includes(">"), `stray ">" in output for ${JSON.stringify(input)}:\n${html}`);
  assert.ok(!/["']/.test(rest), `raw quote in text for ${JSON.stringify(input)}:\n${html}`);
  assert.ok(!html.includes("\u0000"), "placeholder leaked");
}

test("escapeHtml escapes the five HTML specials", () => {
  assert.equal(escapeHtml(`<a href="x" onclick='y'>&</a>`),
    "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
  assert.equal(escapeHtml(null), "");
});

test("raw HTML is shown as text, never as markup", () => {
  const cases = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "hello <b>bold</b> <iframe src=javascript:alert(1)></iframe>",
    "<svg/onload=alert(1)>",
    "<!-- comment --> <style>body{display:none}</style>",
    "# <img src=x onerror=alert(1)>",
    "- <script>alert(1)</script>\n- item",
    "> <img src=x onerror=alert(1)>",
    "| <b>a</b> | b |\n|---|---|\n| <script>x</script> | y |",
  ];
  for (const input of cases) {
    const html = renderMarkdown(input);
    assertSafe(html, input);
    assert.ok(!/<(img|script|iframe|svg|style|b)\b/i.test(html), html);
  }
  assert.equal(renderMarkdown("<img src=x onerror=alert(1)>"),
    "<p>&lt;img src=x onerror=alert(1)&gt;</p>");
  assert.equal(renderMarkdown("<script>alert(1)</script>"),
    "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
});

test("javascript:, data: and other non-http links do not become links", () => {
  for (const input of [
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click]( javascript:alert(1) )",
    "[click](data:text/html,<script>alert(1)</script>)",
    "[click](vbscript:msgbox)",
    "[click](//evil.example/x)",
    "[click](/relative/path)",
    "[click](java&#115;cript:alert(1))",
    "<javascript:alert(1)>",
    "javascript:alert(1)",
  ]) {
    const html = renderMarkdown(input);
    assertSafe(html, input);
    assert.ok(!html.includes("<a "), `${input} -> ${html}`);
  }
  assert.equal(renderMarkdown("[click](javascript:alert(1))"), "<p>click</p>");
});

test("quotes in link URLs cannot break out of the href attribute", () => {
  const input = `[x](https://example.com/"onmouseover="alert(1))`;
  const html = renderMarkdown(input);
  assertSafe(html, input);
  assert.ok(!/\sonmouseover=/i.test(html.replace(/&quot;/g, "")) || html.includes("&quot;onmouseover=&quot;"), html);
  assert.ok(!html.includes(`"onmouseover`), html);

  const bare = `see https://example.com/?q="><img src=x onerror=alert(1)> now`;
  const out = renderMarkdown(bare);
  assertSafe(out, bare);
  assert.ok(out.includes(`<a href="https://example.com/?q=" `), out);

  const single = `[x](https://example.com/'onclick='alert(1))`;
  assertSafe(renderMarkdown(single), single);
});

test("http and https links render with rel=noopener", () => {
  assert.equal(renderInline("[docs](https://example.com/a?b=1&c=2)"),
    `<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">docs</a>`);
  assert.equal(renderInline("go to http://example.com/x."),
    `go to <a href="http://example.com/x" target="_blank" rel="noopener noreferrer nofollow">http://example.com/x</a>.`);
  assert.equal(renderInline("<https://example.com>"),
    `<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">https://example.com</a>`);
  assert.equal(renderInline("(see https://example.com/a_(b))"),
    `(see <a href="https://example.com/a_(b)" target="_blank" rel="noopener noreferrer nofollow">https://example.com/a_(b)</a>)`);
});

test("code spans and fenced blocks are literal and escaped", () => {
  assert.equal(renderInline("run `rm -rf <dir> && echo \"*x*\"` now"),
    "run <code>rm -rf &lt;dir&gt; &amp;&amp; echo &quot;*x*&quot;</code> now");
  const src = "```html\n<script>alert(1)</script>\n**not bold**\n```";
  assert.equal(renderMarkdown(src),
    `<pre><code class="language-html">&lt;script&gt;alert(1)&lt;/script&gt;\n**not bold**</code></pre>`);
  const evilLang = "```\"><img src=x onerror=alert(1)>\ncode\n```";
  assertSafe(renderMarkdown(evilLang), evilLang);
  // A URL inside a code span stays text.
  assert.equal(renderInline("`https://example.com`"), "<code>https://example.com</code>");
  // A URL directly followed by a code span does not swallow it.
  const glued = "https://example.com`<b>`";
  const out = renderInline(glued);
  assertSafe(out, glued);
  assert.ok(out.endsWith("<code>&lt;b&gt;</code>"), out);
});

test("headings, emphasis, lists, paragraphs", () => {
  assert.equal(renderMarkdown("# Title\n\nSome **bold** and *it* and _it_ and ~~gone~~."),
    "<h1>Title</h1><p>Some <strong>bold</strong> and <em>it</em> and <em>it</em> and <del>gone</del>.</p>");
  assert.equal(renderMarkdown("### Sub ###"), "<h3>Sub</h3>");
  assert.equal(renderMarkdown("snake_case_name stays"), "<p>snake_case_name stays</p>");
  assert.equal(renderMarkdown("2 * 3 * 4"), "<p>2 * 3 * 4</p>");
  assert.equal(renderMarkdown("- a\n- b\n  - c\n- d"),
    "<ul><li>a</li><li>b\n<ul><li>c</li></ul></li><li>d</li></ul>");
  assert.equal(renderMarkdown("1. one\n2. two"), "<ol><li>one</li><li>two</li></ol>");
  assert.equal(renderMarkdown("3. three\n4. four"), `<ol start="3"><li>three</li><li>four</li></ol>`);
  assert.equal(renderMarkdown("line one\nline two\n\nnext para"),
    "<p>line one<br>\nline two</p><p>next para</p>");
  assert.equal(renderMarkdown("para\n- item"), "<p>para</p><ul><li>item</li></ul>");
  assert.equal(renderMarkdown("> quoted **b**"), "<blockquote><p>quoted <strong>b</strong></p></blockquote>");
  assert.equal(renderMarkdown("---"), "<hr>");
  assert.equal(renderMarkdown("\\*not italic\\*"), "<p>*not italic*</p>");
});

test("tables", () => {
  assert.equal(renderMarkdown("| a | b |\n|:--|--:|\n| 1 | 2 |"),
    `<div class="md-table"><table><thead><tr><th class="md-align-left">a</th><th class="md-align-right">b</th></tr></thead>` +
    `<tbody><tr><td class="md-align-left">1</td><td class="md-align-right">2</td></tr></tbody></table></div>`);
});

test("placeholder markers in the input cannot be forged", () => {
  const input = "a \u00000\u0000 `x` \u00001\u0000";
  const html = renderMarkdown(input);
  assertSafe(html, input);
  assert.equal(html, "<p>a 0 <code>x</code> 1</p>");
});

test("non-string input is handled", () => {
  assert.equal(renderMarkdown(undefined), "");
  assert.equal(renderMarkdown(null), "");
  assert.equal(renderMarkdown(42), "<p>42</p>");
});

test("fuzz: random mixes of markdown and HTML specials always render safely", () => {
  const pieces = [
    "<", ">", "\"", "'", "&", "`", "``", "```", "*", "**", "_", "__", "~~", "[", "]", "(", ")",
    "javascript:", "https://e.x/", "http://", "<img src=x onerror=alert(1)>", "<script>", "\n",
    "\n\n", "# ", "- ", "1. ", "> ", "|", "---", "\\", "a", "b c", "&quot;", "&lt;", "\u0000",
    "onerror=", "=", " ", "    ", "~~~", "<https://e.x/\">",
  ];
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  for (let k = 0; k < 3000; k++) {
    let s = "";
    const len = 1 + rand(30);
    for (let j = 0; j < len; j++) s += pieces[rand(pieces.length)];
    assertSafe(renderMarkdown(s), s);
  }
});

test("deep nesting and unclosed markers stay fast and safe", () => {
  const inputs = [
    "> ".repeat(5000) + "<img src=x onerror=alert(1)>",
    Array.from({ length: 3000 }, (_, i) => " ".repeat(2 * (i % 200)) + "- <b>x</b>").join("\n"),
    "**a ".repeat(20000),
    "~~a ".repeat(20000),
    "`a".repeat(20000),
    "[a](".repeat(20000),
  ];
  for (const input of inputs) {
    const t = performance.now();
    const html = renderMarkdown(input);
    const ms = performance.now() - t;
    assert.ok(ms < 2000, `took ${Math.round(ms)} ms for ${JSON.stringify(input.slice(0, 20))}…`);
    assertSafe(html, input.slice(0, 40));
  }
});
