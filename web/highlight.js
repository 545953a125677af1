// Syntax highlighting for the diff view, served by lab with the rest of the UI (no CDN,
// no dependency): a small tokenizer per language family that marks keywords, strings,
// comments, numbers and type-like names. Pure, no DOM: it returns tokens the view puts
// in spans as text, so nothing here can inject markup (tests/diffparse.test.mjs).
//
// It colours lines one at a time, carrying only "inside a block comment" (or a
// multi-line string) from one line to the next, which is what a diff hunk allows: a
// hunk starts mid-file, so nothing before it is known.

const words = (s) => new Set(s.split(/\s+/).filter(Boolean));

const C_LIKE_OPS = { line: ["//"], block: [["/*", "*/"]] };

const LANGS = {
  rust: {
    ...C_LIKE_OPS, strings: ['"'], chars: true,
    keywords: words(`as async await break const continue crate dyn else enum extern false fn for if impl in let loop match
      mod move mut pub ref return self Self static struct super trait true type unsafe use where while`),
  },
  js: {
    ...C_LIKE_OPS, strings: ['"', "'", "`"], multiline: ["`"],
    keywords: words(`async await break case catch class const continue debugger default delete do else export extends
      false finally for from function if import in instanceof let new null of return static super switch this throw
      true try typeof undefined var void while with yield interface type enum implements private public protected readonly`),
  },
  go: {
    ...C_LIKE_OPS, strings: ['"', "`"], multiline: ["`"], chars: true,
    keywords: words(`break case chan const continue default defer else fallthrough for func go goto if import interface
      map package range return select struct switch type var nil true false`),
  },
  c: {
    ...C_LIKE_OPS, strings: ['"'], chars: true,
    keywords: words(`auto break case char class const constexpr continue default delete do double else enum extern false
      float for goto if inline int long namespace new nullptr private protected public return short signed sizeof
      static struct switch template this throw true try typedef typename union unsigned using virtual void volatile while
      #include #define #ifdef #ifndef #endif #if #else #pragma`),
  },
  java: {
    ...C_LIKE_OPS, strings: ['"'], chars: true,
    keywords: words(`abstract boolean break byte case catch char class const continue default do double else enum extends
      final finally float for fun if implements import instanceof int interface long new null object override package
      private protected public return short static super switch this throw throws true false try val var void while when`),
  },
  python: {
    line: ["#"], block: [['"""', '"""'], ["'''", "'''"]], strings: ['"', "'"],
    keywords: words(`and as assert async await break class continue def del elif else except False finally for from global
      if import in is lambda None nonlocal not or pass raise return True try while with yield self`),
  },
  shell: {
    line: ["#"], block: [], strings: ['"', "'"],
    keywords: words(`if then else elif fi for in do done while until case esac function return local export set unset
      exit echo cd source readonly shift trap`),
  },
  ruby: {
    line: ["#"], block: [], strings: ['"', "'"],
    keywords: words(`begin class def do else elsif end ensure false if module nil require rescue return self then true unless until when while yield`),
  },
  toml: { line: ["#"], block: [], strings: ['"', "'"], keywords: words("true false") },
  yaml: { line: ["#"], block: [], strings: ['"', "'"], keywords: words("true false null yes no") },
  json: { line: [], block: [], strings: ['"'], keywords: words("true false null") },
  css: { line: [], block: [["/*", "*/"]], strings: ['"', "'"], keywords: words("important media import from to") },
  html: { line: [], block: [["<!--", "-->"]], strings: ['"', "'"], keywords: words("") },
  sql: {
    line: ["--"], block: [["/*", "*/"]], strings: ["'"],
    keywords: words(`select from where insert into update delete create table drop alter add index primary key foreign
      references not null and or join left right inner outer on group by order having limit values set as default unique`),
    caseless: true,
  },
};

const EXT = {
  rs: "rust", js: "js", mjs: "js", cjs: "js", jsx: "js", ts: "js", tsx: "js", mts: "js",
  go: "go", c: "c", h: "c", cc: "c", cpp: "c", cxx: "c", hpp: "c", cs: "java", java: "java", kt: "java", kts: "java",
  scala: "java", swift: "java", py: "python", pyi: "python", sh: "shell", zsh: "shell",
  rb: "ruby", toml: "toml", yaml: "yaml", yml: "yaml", json: "json", css: "css", scss: "css",
  html: "html", htm: "html", xml: "html", svg: "html", vue: "html", sql: "sql", wit: "rust",
};
const NAMES = { Dockerfile: "shell", Makefile: "shell", Cargo_lock: "toml", "Cargo.lock": "toml" };

/** The language of a path (by its name, then its extension), or null: plain text. */
export function langOf(path) {
  const name = String(path || "").split("/").pop();
  if (NAMES[name]) return NAMES[name];
  const dot = name.lastIndexOf(".");
  if (dot <= 0) return null;
  return EXT[name.slice(dot + 1).toLowerCase()] || null;
}

const IDENT = /[A-Za-z_$#@][\w$]*/y;
const NUMBER = /(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[a-zA-Z\d_]*/y;

/**
 * One line's tokens: `{tokens: [{cls, text}], state}`, cls one of "kw", "str", "com",
 * "num", "ty" or "" (plain). `state` goes to the next line: {block: [open, close]} while
 * inside a block comment, {str: quote} inside a multi-line string, else null. The
 * tokens' texts joined are exactly `text`.
 */
export function highlightLine(text, lang, state = null) {
  const def = LANGS[lang];
  const s = String(text);
  if (!def) return { tokens: s ? [{ cls: "", text: s }] : [], state: null };
  const tokens = [];
  const push = (cls, t) => {
    if (!t) return;
    const last = tokens[tokens.length - 1];
    if (last && last.cls === cls) last.text += t;
    else tokens.push({ cls, text: t });
  };
  let i = 0;
  let st = state;
  // A line that starts inside a comment or string from the line before.
  if (st && st.block) {
    const end = s.indexOf(st.block[1]);
    if (end < 0) { push("com", s); return { tokens, state: st }; }
    push("com", s.slice(0, end + st.block[1].length));
    i = end + st.block[1].length;
    st = null;
  } else if (st && st.str) {
    const end = closeQuote(s, 0, st.str);
    if (end < 0) { push("str", s); return { tokens, state: st }; }
    push("str", s.slice(0, end));
    i = end;
    st = null;
  }
  while (i < s.length) {
    const rest = s.slice(i);
    const lineCom = def.line.find((p) => rest.startsWith(p));
    if (lineCom) { push("com", rest); break; }
    const block = def.block.find(([open]) => rest.startsWith(open));
    if (block) {
      const end = s.indexOf(block[1], i + block[0].length);
      if (end < 0) { push("com", rest); return { tokens, state: { block } }; }
      push("com", s.slice(i, end + block[1].length));
      i = end + block[1].length;
      continue;
    }
    const ch = s.charAt(i);
    if (def.strings.includes(ch) && !(ch === "'" && def.chars)) {
      const end = closeQuote(s, i + 1, ch);
      if (end < 0) {
        push("str", rest);
        return { tokens, state: def.multiline && def.multiline.includes(ch) ? { str: ch } : null };
      }
      push("str", s.slice(i, end));
      i = end;
      continue;
    }
    if (ch === "'" && def.chars) {
      // A char literal ('x', '\n'), else a lifetime or label ('a): plain.
      const m = CHAR_LITERAL.exec(s.slice(i));
      push(m ? "str" : "", m ? m[0] : ch);
      i += m ? m[0].length : 1;
      continue;
    }
    NUMBER.lastIndex = i;
    if (/\d/.test(ch) && !/[\w$]/.test(s.charAt(i - 1) || " ")) {
      const m = NUMBER.exec(s);
      if (m) { push("num", m[0]); i += m[0].length; continue; }
    }
    IDENT.lastIndex = i;
    const id = /[A-Za-z_$#@]/.test(ch) ? IDENT.exec(s) : null;
    if (id) {
      const w = id[0];
      const isKw = def.keywords.has(def.caseless ? w.toLowerCase() : w);
      push(isKw ? "kw" : /^[A-Z][a-z]\w*$/.test(w) && lang !== "sql" ? "ty" : "", w);
      i += w.length;
      continue;
    }
    push("", ch);
    i++;
  }
  return { tokens, state: null };
}

/** The index just past the quote that closes a string opened before `from`, or -1. */
function closeQuote(s, from, q) {
  for (let i = from; i < s.length; i++) {
    const c = s.charAt(i);
    if (c === "\\") { i++; continue; }
    if (c === q) return i + 1;
  }
  return -1;
}

/** In languages where ' also starts lifetimes: a char literal is 'x', '\n' or '\u{..}'. */
const CHAR_LITERAL = /^'(?:[^'\\]|\\(?:u\{[\da-fA-F]{1,6}\}|x[\da-fA-F]{2}|.))'/;
