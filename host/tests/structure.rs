//! The shape of `host/src` (issues 29 and 53): no file over 600 production lines, no
//! import cycle between its files nor between its top-level modules, no struct holding a run's live state with more than 12
//! fields, no `use super::*` outside tests, and a map in `lib.rs` that names every
//! top-level module.
//!
//! The code is read as a compiler would see it, roughly: comments, strings and char
//! literals are blanked first ([`scrub`]); production code is what is left once every
//! `#[cfg(test)]` item is cut out, braces matched ([`test_spans`]); an import is every
//! `crate::`, `super::` and `self::` path wherever it appears, and every `use` of a
//! child module ([`imports_of`]). Production lines: the lines of production code that
//! are neither blank nor comments.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

const MAX_PRODUCTION_LINES: usize = 600;
const MAX_FIELDS: usize = 12;
/// The structs that hold a run's live state: the run, its state's owner, what the
/// owner's channel readers keep, and `Runs` with the owners of its parts.
const LIVE_STATE: &[&str] = &[
    "Run",
    "Tail",
    "Source",
    "TranscriptReader",
    "TranscriptFacts",
    "MessageStore",
    "SpoolChannel",
    "MarkerChannel",
    "SessionChannel",
    "ScreenFact",
    "HookFile",
    "Runs",
    "Core",
    "Lives",
    "Turns",
    "Providers",
    "FileWatch",
    "TmuxRuns",
    "RemoteRuns",
    "AcpRuns",
];

/// The top-level modules, layer by layer from the top: a module imports only modules
/// of the layers below its own (lib.rs's map lists them in this order).
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["edge", "runner"],
    &["notify", "rules"],
    &["runs"],
    &["machines"],
    &["agents", "worktree"],
    &["sandbox"],
    &["store"],
    &["util"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

// ---- reading the code ---------------------------------------------------------------------

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with every comment, string and char literal's contents replaced by spaces
/// (newlines kept, byte offsets unchanged), so what is left is code.
fn scrub(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, r: Range<usize>| {
        for c in &mut out[r] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i..end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i..j);
            i = j;
        } else if (b[i] == b'r' || (b[i] == b'b' && rest.get(1) == Some(&b'r'))) && (i == 0 || !is_ident(b[i - 1])) && {
            let from = if b[i] == b'b' { i + 2 } else { i + 1 };
            let hashes = b[from..].iter().take_while(|&&c| c == b'#').count();
            b.get(from + hashes) == Some(&b'"')
        } {
            // A raw string: r"…", r#"…"#, br"…".
            let from = if b[i] == b'b' { i + 2 } else { i + 1 };
            let hashes = b[from..].iter().take_while(|&&c| c == b'#').count();
            let open = from + hashes + 1;
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let end = b[open..].windows(close.len()).position(|w| w == close.as_slice()).map_or(b.len(), |n| open + n);
            blank(&mut out, open..end);
            i = (end + close.len()).min(b.len());
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = j.min(b.len());
            blank(&mut out, i + 1..end);
            i = end + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}', 'é'), or a lifetime ('a) left alone.
            let len = text[i + 1..].chars().next().map_or(0, char::len_utf8);
            if rest.get(1) == Some(&b'\\') {
                let end = b[i + 2..].iter().position(|&c| c == b'\'').map_or(b.len(), |n| i + 2 + n);
                blank(&mut out, i + 1..end);
                i = end + 1;
            } else if len > 0 && b.get(i + 1 + len) == Some(&b'\'') {
                blank(&mut out, i + 1..i + 1 + len);
                i += len + 2;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only whole characters were blanked")
}

/// Where each `#[cfg(test)]` item of scrubbed code is: from the attribute to the end
/// of the item (its matching `}`, or its `;`).
fn test_spans(code: &str) -> Vec<Range<usize>> {
    let b = code.as_bytes();
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let start = from + n;
        let mut j = start;
        let (mut parens, mut end) = (0i32, None);
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => parens += 1,
                b')' | b']' => parens -= 1,
                b';' if parens == 0 => {
                    end = Some(j + 1);
                    break;
                }
                b'{' if parens == 0 => {
                    let mut depth = 0;
                    for (k, &c) in b.iter().enumerate().skip(j) {
                        match c {
                            b'{' => depth += 1,
                            b'}' => {
                                depth -= 1;
                                if depth == 0 {
                                    end = Some(k + 1);
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let end = end.unwrap_or(b.len());
        spans.push(start..end);
        from = end;
    }
    spans
}

fn without(text: &str, spans: &[Range<usize>]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for s in spans {
        out.push_str(&text[at..s.start]);
        at = s.end;
    }
    out.push_str(&text[at..]);
    out
}

/// A file's production code, scrubbed ([`scrub`]), its test items cut out.
fn production_code(text: &str) -> String {
    let code = scrub(text);
    without(&code, &test_spans(&code))
}

/// A file's production text as written (comments and strings kept), its test items
/// cut out.
fn production(text: &str) -> String {
    without(text, &test_spans(&scrub(text)))
}

fn production_lines(text: &str) -> usize {
    production(text).lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).count()
}

/// `path: what` for each file under `dir` whose text `finds` something in.
fn offenders(dir: &Path, finds: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files
        .iter()
        .filter_map(|f| finds(&std::fs::read_to_string(f).unwrap()).map(|what| format!("{}: {what}", f.display())))
        .collect()
}

// ---- imports --------------------------------------------------------------------------------

/// `src/runs/tailer.rs` → `["runs", "tailer"]`; `mod.rs` and `lib.rs` name their folder.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

/// A path's segments made absolute from the crate root, seen from `module`; None for
/// a path that does not start in the crate (`std::…`, a dependency).
fn absolute(module: &[String], modules: &BTreeSet<Vec<String>>, segs: &[&str]) -> Option<Vec<String>> {
    let (mut abs, from): (Vec<String>, usize) = match segs.first().copied() {
        Some("crate") => (Vec::new(), 1),
        Some("super") => (module[..module.len().saturating_sub(1)].to_vec(), 1),
        Some("self") => (module.to_vec(), 1),
        // A child module, named relative to this one (`use tailer::Tail;`).
        Some(first) if modules.contains(&[module, &[first.to_string()]].concat()) => (module.to_vec(), 0),
        _ => return None,
    };
    for s in &segs[from..] {
        if *s == "super" {
            abs.pop();
        } else {
            abs.push(s.to_string());
        }
    }
    Some(abs)
}

/// Every path a `use` statement's body names (`a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e).
fn use_paths(stmt: &str) -> Vec<String> {
    fn expand(prefix: &str, body: &str, out: &mut Vec<String>) {
        match body.find('{') {
            None => out.push(format!("{prefix}{body}")),
            Some(open) => {
                let head = &body[..open];
                let inner = &body[open + 1..body.rfind('}').unwrap_or(body.len())];
                let mut depth = 0;
                let mut start = 0;
                let mut items = Vec::new();
                for (i, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            items.push(&inner[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                items.push(&inner[start..]);
                for item in items.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
                    expand(&format!("{prefix}{head}"), item, out);
                }
            }
        }
    }
    let body: String = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
    let body = body.replace(" ::", "::").replace(":: ", "::");
    let mut flat = Vec::new();
    expand("", &body, &mut flat);
    flat.into_iter().map(|p| p.split(" as ").next().unwrap_or(&p).trim().to_string()).collect()
}

/// Every `crate::…`, `super::…` and `self::…` path in code, wherever it is (a type, a
/// call, a pattern), as segments: `crate::runs::now()` → crate, runs, now.
fn inline_paths(code: &str) -> Vec<Vec<&str>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"].iter().flat_map(|p| code.match_indices(p).map(|(i, _)| i)) {
        if start > 0 && (is_ident(b[start - 1]) || b[start - 1] == b':' || b[start - 1] == b'$') {
            continue;
        }
        let mut segs = Vec::new();
        let mut i = start;
        loop {
            let end = b[i..].iter().position(|&c| !is_ident(c)).map_or(b.len(), |n| i + n);
            if end == i {
                break;
            }
            segs.push(&code[i..end]);
            if b[end..].starts_with(b"::") && b.get(end + 2).is_some_and(|&c| is_ident(c)) {
                i = end + 2;
            } else {
                break;
            }
        }
        out.push(segs);
    }
    out
}

/// What a file's production code imports from the crate: the modules (the longest
/// prefix of each path that is one), its own ancestors left out (a module may use its
/// parents' items: that is no cycle of files).
fn imports_of(m: &[String], modules: &BTreeSet<Vec<String>>, code: &str) -> BTreeSet<Vec<String>> {
    let mut paths: Vec<Vec<String>> = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        // `use` as a word (not the end of `excuse`, not a path segment).
        let a_word = rest[..i].bytes().last().is_none_or(|c| !is_ident(c) && c != b':');
        let tail = &rest[i + 4..];
        let end = tail.find(';').unwrap_or(tail.len());
        if a_word {
            for p in use_paths(&tail[..end]) {
                let segs: Vec<&str> = p.split("::").collect();
                paths.extend(absolute(m, modules, &segs));
            }
        }
        rest = &tail[end.min(tail.len())..];
    }
    for segs in inline_paths(code) {
        paths.extend(absolute(m, modules, &segs));
    }
    paths
        .into_iter()
        .filter_map(|p| (0..=p.len()).rev().map(|n| p[..n].to_vec()).find(|q| modules.contains(q)))
        .filter(|target| target.as_slice() != m && !m.starts_with(target))
        .collect()
}

type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// Module → the other modules of the crate under `root` its production code imports.
fn imports(root: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(root, f)).collect();
    files
        .iter()
        .map(|f| {
            let m = module_of(root, f);
            let code = production_code(&std::fs::read_to_string(f).unwrap());
            let deps = imports_of(&m, &modules, &code);
            (m, deps)
        })
        .collect()
}

/// The same graph between top-level modules (the crate root left out).
fn top_level(graph: &Graph) -> Graph {
    let mut top = Graph::new();
    for (m, deps) in graph {
        let Some(from) = m.first() else { continue };
        let entry = top.entry(vec![from.clone()]).or_default();
        for d in deps {
            if let Some(to) = d.first().filter(|to| *to != from) {
                entry.insert(vec![to.clone()]);
            }
        }
    }
    top
}

/// The import cycles of `graph`: each strongly connected part of more than one module,
/// as its modules' paths (`a::b`), sorted.
fn cycles(graph: &Graph) -> BTreeSet<Vec<String>> {
    // Tarjan's algorithm.
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on_stack: BTreeSet<&'g Vec<String>>,
        found: BTreeSet<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, m: &'g Vec<String>) {
            let i = self.index.len();
            self.index.insert(m, i);
            self.low.insert(m, i);
            self.stack.push(m);
            self.on_stack.insert(m);
            for d in self.graph.get(m).into_iter().flatten() {
                let Some((d, _)) = self.graph.get_key_value(d) else { continue };
                if !self.index.contains_key(d) {
                    self.visit(d);
                    let low = self.low[m].min(self.low[d]);
                    self.low.insert(m, low);
                } else if self.on_stack.contains(d) {
                    let low = self.low[m].min(self.index[d]);
                    self.low.insert(m, low);
                }
            }
            if self.low[m] == self.index[m] {
                let mut part = Vec::new();
                while let Some(x) = self.stack.pop() {
                    self.on_stack.remove(x);
                    part.push(x.join("::"));
                    if x == m {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.insert(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: BTreeSet::new(),
    };
    for m in graph.keys() {
        if !walk.index.contains_key(m) {
            walk.visit(m);
        }
    }
    walk.found
}

fn fields_of(code: &str, name: &str) -> Option<usize> {
    let start = code.find(&format!("pub struct {name} {{")).or_else(|| code.find(&format!("struct {name} {{")))?;
    let body = &code[start..];
    let open = body.find('{')?;
    let mut depth = 0;
    let mut count = 0;
    for line in body[open..].lines() {
        let t = line.trim();
        if depth == 1 && !t.starts_with('#') && t.contains(':') && t.ends_with(',') {
            count += 1;
        }
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        if depth <= 0 {
            break;
        }
    }
    Some(count)
}

// ---- the gates ----------------------------------------------------------------------------

#[test]
fn no_file_in_host_src_is_over_600_production_lines() {
    let over = offenders(&src(), |text| {
        let n = production_lines(text);
        (n > MAX_PRODUCTION_LINES).then(|| n.to_string())
    });
    assert!(over.is_empty(), "over {MAX_PRODUCTION_LINES} production lines: {over:#?}");
}

#[test]
fn no_import_cycle_in_host_src() {
    let graph = imports(&src());
    assert!(graph.len() > 20, "the modules were found: {:?}", graph.keys().collect::<Vec<_>>());
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert!(
        graph[&m("runs::live::tailer")].contains(&m("runs::live::message_store")),
        "the gate sees `use super::message_store::…`"
    );
    assert!(
        graph[&m("runs::api")].contains(&m("runs::registry")),
        "the gate sees `super::registry::RunRecord` in a signature"
    );
    assert_eq!(cycles(&graph), BTreeSet::new(), "import cycles between files");
    assert_eq!(cycles(&top_level(&graph)), BTreeSet::new(), "import cycles between top-level modules");
}

/// The gate itself, on a crate made for it: a cycle through an inline path is found,
/// while a path in a string, a comment or a test module is not an import.
#[test]
fn the_cycle_gate_sees_inline_paths_and_nothing_in_tests_strings_or_comments() {
    let d = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n");
    // a → b through a type in a signature; b → a through a `use`.
    write("a.rs", "pub struct A;\npub fn f(_: crate::b::B) {}\n");
    write("b.rs", "use crate::a::A;\npub struct B(A);\n");
    // c names d only in a string, a comment and a test module; d uses c.
    write(
        "c.rs",
        "// crate::d::D\n/* crate::d::D */\npub const S: &str = \"crate::d::D\";\npub const R: &str = r#\"crate::d\"#;\n\
         pub fn l<'a>(x: &'a str) -> &'a str { x }\n\
         #[cfg(test)]\nmod tests {\n    use crate::d::D;\n    fn f() { let _ = '{'; }\n}\npub struct C;\n",
    );
    write("d/mod.rs", "pub struct D(pub crate::c::C);\n");
    let graph = imports(d.path());
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(graph[&m("c")], BTreeSet::new(), "nothing in strings, comments or tests");
    assert_eq!(graph[&m("d")], [m("c")].into(), "an inline path in a tuple struct");
    assert_eq!(cycles(&graph), [vec!["a".to_string(), "b".to_string()]].into());
    let d_top: Graph = [(m("d"), [m("c")].into()), (m("c"), [m("d::x")].into())].into();
    assert_eq!(
        cycles(&top_level(&d_top)),
        [vec!["c".to_string(), "d".to_string()]].into(),
        "between top-level modules"
    );
    // What follows a test module is production code again.
    assert_eq!(production_lines(&std::fs::read_to_string(d.path().join("c.rs")).unwrap()), 5);
}

#[test]
fn no_struct_holding_a_run_s_live_state_has_more_than_12_fields() {
    let mut files = Vec::new();
    rust_files(&src().join("runs"), &mut files);
    let mut found = BTreeMap::new();
    for f in &files {
        let code = production_code(&std::fs::read_to_string(f).unwrap());
        for name in LIVE_STATE {
            if let Some(n) = fields_of(&code, name) {
                found.insert(*name, n);
            }
        }
    }
    assert_eq!(found.len(), LIVE_STATE.len(), "every live-state struct was found: {found:?}");
    for (name, n) in &found {
        assert!(*n <= MAX_FIELDS, "{name} has {n} fields (at most {MAX_FIELDS})");
    }
}

/// A module says what it takes from its parent: no `use super::*` outside test modules
/// (a type's methods spread over files through a glob import hid what each file used).
#[test]
fn no_production_code_imports_its_parent_by_glob() {
    let globbing = offenders(&src(), |text| {
        production_code(text).lines().any(|l| l.trim() == "use super::*;").then(|| "glob".to_string())
    });
    assert!(globbing.is_empty(), "`use super::*` in production code: {globbing:#?}");
}

/// `lib.rs` opens with the crate's map: a table with a row for every top-level module.
#[test]
fn the_map_in_lib_rs_names_every_top_level_module() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let rows: BTreeSet<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("//! | [`")).filter_map(|l| l.split('`').next()).collect();
    let code = production_code(&lib);
    let modules: Vec<&str> = code
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').trim())
        .collect();
    assert!(modules.len() > 5, "the modules were found: {modules:?}");
    let missing: Vec<&&str> = modules.iter().filter(|m| !rows.contains(**m)).collect();
    assert!(missing.is_empty(), "top-level modules missing from lib.rs's map: {missing:?}");
    let stale: Vec<&&str> = rows.iter().filter(|r| !modules.contains(r)).collect();
    assert!(stale.is_empty(), "rows of lib.rs's map that are no module: {stale:?}");
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Each top-level edge of `graph` that does not point down the layers, as `from → to`
/// (a module in no layer is an offender too).
fn upward_edges(graph: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    for (m, deps) in top_level(graph) {
        let Some(from) = layer_of(&m[0]) else {
            bad.push(format!("{} is in no layer of LAYERS", m[0]));
            continue;
        };
        for d in deps {
            if layer_of(&d[0]).is_none_or(|to| to <= from) {
                bad.push(format!("{} → {}", m[0], d[0]));
            }
        }
    }
    bad
}

/// Dependencies point down: cli → edge, runner → notify, rules → runs → machines → agents,
/// worktree → sandbox → store → util. A new top-level module takes a layer; an import up (or
/// across a layer) fails here, so no cycle between top-level modules can come back.
#[test]
fn dependencies_point_down_the_layers() {
    let graph = imports(&src());
    assert_eq!(upward_edges(&graph), Vec::<String>::new(), "imports against the layers (LAYERS)");
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let rows: Vec<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("//! | [`")).filter_map(|l| l.split('`').next()).collect();
    let order: Vec<Option<usize>> = rows.iter().map(|r| layer_of(r)).collect();
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] <= w[1]),
        "lib.rs's map lists the top-level modules layer by layer, as LAYERS does: {rows:?}"
    );
}

/// The layer gate itself: an import up, one across a layer and a module in no layer are
/// each found; imports down are not.
#[test]
fn the_layer_gate_finds_an_import_up_across_or_from_nowhere() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let graph: Graph = [
        (m("runs::tailer"), [m("store::paths"), m("agents::model"), m("util::time")].into()),
        (m("util::time"), [m("runs::view")].into()),
        (m("agents::acp"), [m("worktree::call"), m("store")].into()),
        (m("newthing"), BTreeSet::new()),
    ]
    .into();
    assert_eq!(upward_edges(&graph), ["agents → worktree", "newthing is in no layer of LAYERS", "util → runs"]);
}

// ---- where a run lives ------------------------------------------------------------------------

/// How production code asks where a run lives or how lab speaks to it: a branch on
/// the `host` of a run's record (`rec`, `run.record()`) or request (`req`), on its
/// being an ACP run, or on the tail's run being elsewhere.
fn place_question_words() -> Vec<String> {
    // The tail's old seam to a run elsewhere: every tail has its `Whereabouts` now.
    let mut words: Vec<String> =
        ["is_acp_record(", "acp_session(", "acp_agent(", "Elsewhere", "set_remote(", "src.remote", ".remote.watch_"]
            .map(String::from)
            .to_vec();
    for value in ["rec", "req", "record()", "record"] {
        for asked in [".is_some()", ".is_none()", ".as_deref()", ".as_ref()", " {", " else"] {
            words.push(format!("{value}.host{asked}"));
        }
    }
    words
}

/// Where those questions may be asked: the transports (`runs/transport/`, picked by
/// `Runs::transport` and `Runs::transport_for`), and the run's record, whose fields say
/// where it lives.
fn may_ask_where_a_run_lives(rel: &Path) -> bool {
    rel.starts_with("runs/transport") || rel == Path::new("runs/registry.rs")
}

/// Each place question in `code` (production code, scrubbed), as `line: question`.
fn place_questions(code: &str) -> Vec<String> {
    let words = place_question_words();
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        found.extend(words.iter().filter(|w| line.contains(w.as_str())).map(|w| format!("line {}: {w}", n + 1)));
    }
    found
}

/// wezterm's `Domain`: the mux never asks "is this remote?". Outside the transports,
/// nothing in host/src branches on where a run lives or how lab speaks to it, so a new
/// place (a machine over SSH, a sandbox) is a new transport file, not a cut through.
#[test]
fn only_the_transports_ask_where_a_run_lives() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("runs/transport/mod.rs")), "the transports were found");
    let mut asked = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        if may_ask_where_a_run_lives(rel) {
            continue;
        }
        let code = production_code(&std::fs::read_to_string(f).unwrap());
        asked.extend(place_questions(&code).into_iter().map(|q| format!("{}: {q}", rel.display())));
    }
    assert!(asked.is_empty(), "where a run lives is asked outside runs/transport/: {asked:#?}");
}

/// The question gate itself: a branch on a run's host or on ACP is found; the same words
/// in a comment, a string or a test module are not.
#[test]
fn the_place_gate_finds_a_branch_on_a_host_and_nothing_in_comments() {
    let code = production_code(
        "fn f(rec: &R) {\n    if rec.host.is_some() {}\n    // rec.host.is_some()\n    let s = \"acp_session(\";\n    \
         match &rec.host {\n        _ => {}\n    }\n}\n#[cfg(test)]\nmod tests {\n    fn g() { runs.is_acp_record(&r); }\n}\n",
    );
    assert_eq!(place_questions(&code), ["line 2: rec.host.is_some()", "line 5: rec.host {"]);
    assert_eq!(
        place_questions("if let Some(h) = run.record().host.as_deref() {}"),
        ["line 1: record().host.as_deref()"]
    );
    assert!(place_questions("match &origin.host {").is_empty(), "a URL's host is no run's");
    assert_eq!(
        place_questions("pub remote: Option<Arc<dyn Elsewhere>>,\nlet p = match &self.src.remote {"),
        ["line 1: Elsewhere", "line 2: src.remote"],
        "the tail asking whether its run is elsewhere"
    );
    assert!(may_ask_where_a_run_lives(Path::new("runs/transport/acp.rs")));
    assert!(!may_ask_where_a_run_lives(Path::new("runs/launch/mod.rs")));
}

// ---- the run core ---------------------------------------------------------------------------

/// How many methods `Runs` has: a ratchet, lowered as its methods move to the parts
/// that own what they do (126 when it was first counted; never above 45). The gate
/// fails above it, and below it too, until it is lowered.
const RUNS_METHODS: usize = 44;

/// The brace-matched bodies of every `impl Name {` block in `code` (production code,
/// scrubbed), the type named by its path too (`impl super::Name {`).
fn impl_bodies<'a>(code: &'a str, name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("impl ") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + "impl ".len()..];
        let Some(open) = rest.find('{') else { continue };
        let ty = rest[..open].trim();
        if ty.rsplit("::").next() != Some(name) || ty.contains(' ') {
            continue;
        }
        let open = at + "impl ".len() + open;
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&code[open + 1..open + i]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// How many functions are defined directly in an impl block's `body` (not in nested
/// blocks).
fn methods_in(body: &str) -> usize {
    let mut depth = 0;
    let mut count = 0;
    for line in body.lines() {
        let t = line.trim_start();
        if depth == 0 {
            let t =
                t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(").and_then(|r| r.split_once(") ").map(|x| x.1)));
            let t = t.unwrap_or(line.trim_start());
            let t = t.strip_prefix("async ").unwrap_or(t);
            if t.starts_with("fn ") {
                count += 1;
            }
        }
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
    }
    count
}

/// The public types (struct, enum, trait, any `pub` visibility) `code` defines.
fn public_types(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code.lines() {
        let Some(rest) = line
            .strip_prefix("pub ")
            .or_else(|| line.strip_prefix("pub(").and_then(|r| r.split_once(") ").map(|x| x.1)))
        else {
            continue;
        };
        for kind in ["struct ", "enum ", "trait "] {
            if let Some(name) = rest.strip_prefix(kind) {
                out.push(name.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap().to_string());
            }
        }
    }
    out
}

/// `Runs`' methods per file, and the files that carry `impl Runs` beside a public type
/// of their own.
fn runs_methods() -> (BTreeMap<String, usize>, Vec<String>) {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let (mut per_file, mut beside) = (BTreeMap::new(), Vec::new());
    for f in &files {
        let code = production_code(&std::fs::read_to_string(f).unwrap());
        let bodies = impl_bodies(&code, "Runs");
        if bodies.is_empty() {
            continue;
        }
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        per_file.insert(rel.clone(), bodies.iter().map(|b| methods_in(b)).sum());
        if public_types(&code).iter().any(|t| t != "Runs") {
            beside.push(rel);
        }
    }
    (per_file, beside)
}

/// `Runs` is the set of runs, not a file of methods per feature: its methods are
/// counted (a ratchet down to the goal), and no file that defines a type of its own
/// adds to them.
#[test]
fn runs_is_a_narrow_core() {
    let (per_file, beside) = runs_methods();
    let total: usize = per_file.values().sum();
    assert!(total > 10, "Runs' methods were found: {per_file:?}");
    assert!(total <= RUNS_METHODS, "Runs has {total} methods (at most {RUNS_METHODS}): {per_file:#?}");
    assert!(total == RUNS_METHODS, "Runs is down to {total} methods: lower RUNS_METHODS to {total}");
    assert!(beside.is_empty(), "`impl Runs` in a file that defines a public type of its own: {beside:?}");
}

/// The counters themselves, on planted code: methods at the block's top level only,
/// every `impl Runs` block, and public types of any visibility.
#[test]
fn the_core_gate_counts_methods_and_types_it_is_shown() {
    let code = production_code(
        "pub struct Holder;\nimpl Runs {\n    pub fn a(&self) {\n        fn inner() {}\n    }\n    pub(super) async fn b(&self) {}\n    \
         fn c() {}\n}\nimpl MoreRuns {\n    fn d() {}\n}\nimpl Runs {\n    pub(in crate::runs) fn e() {}\n}\n\
         pub(crate) enum E {}\nimpl super::Runs {\n    fn f() {}\n}\nimpl Deref for Runs {\n    fn deref() {}\n}\n#[cfg(test)]\nmod tests {\n    impl Runs {\n        fn t() {}\n    }\n}\n",
    );
    let bodies = impl_bodies(&code, "Runs");
    assert_eq!(bodies.iter().map(|b| methods_in(b)).collect::<Vec<_>>(), [3, 1, 1], "a trait's impl is not counted");
    assert_eq!(public_types(&code), ["Holder", "E"]);
}

/// The rooms of `runs` that open with a map of their children, as `lib.rs` does.
const MAPPED: &[&str] =
    &["runs/mod.rs", "runs/live/mod.rs", "runs/answer/mod.rs", "runs/launch/mod.rs", "runs/continuation/mod.rs"];

/// `runs/mod.rs` and each room of it open with their own map: a row for every child
/// module, none stale.
#[test]
fn the_maps_in_runs_name_every_child() {
    for file in MAPPED {
        let text = std::fs::read_to_string(src().join(file)).unwrap();
        let rows: BTreeSet<&str> =
            text.lines().filter_map(|l| l.strip_prefix("//! | [`")).filter_map(|l| l.split('`').next()).collect();
        let code = production_code(&text);
        let children: Vec<&str> = code
            .lines()
            .map(str::trim)
            .filter_map(|l| {
                l.strip_prefix("pub mod ")
                    .or_else(|| l.strip_prefix("mod "))
                    .or_else(|| l.strip_prefix("pub(").and_then(|r| r.split_once(") mod ")).map(|x| x.1))
            })
            .map(|l| l.trim_end_matches(';').trim())
            .collect();
        assert!(!children.is_empty(), "{file}: the children were found");
        let missing: Vec<&&str> = children.iter().filter(|m| !rows.contains(**m)).collect();
        assert!(missing.is_empty(), "{file}: children missing from its map: {missing:?}");
        let stale: Vec<&&str> = rows.iter().filter(|r| !children.contains(r)).collect();
        assert!(stale.is_empty(), "{file}: rows of its map that are no child: {stale:?}");
    }
}

// ---- how a machine is reached ---------------------------------------------------------------

/// How production code asks which way a host is reached: its record's ssh target, or
/// a way made by name.
const REACH_QUESTIONS: &[&str] = &[".ssh.is_some()", ".ssh.is_none()", "r.ssh", "OverSsh(", "DialBack)", "over_ssh()"];

/// Where that may be asked: the ways themselves and their registration.
fn may_ask_how_a_host_is_reached(rel: &Path) -> bool {
    ["machines/hosts/mod.rs", "machines/hosts/over_ssh.rs"].iter().any(|f| rel == Path::new(f))
}

/// A new way of reaching a machine (a pod, a VM) is a new file and its registration:
/// nothing else in host/src asks which way a host is reached.
#[test]
fn only_the_ways_ask_how_a_host_is_reached() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut asked = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        if may_ask_how_a_host_is_reached(rel) {
            continue;
        }
        let code = production_code(&std::fs::read_to_string(f).unwrap());
        for (n, line) in code.lines().enumerate() {
            asked.extend(
                REACH_QUESTIONS
                    .iter()
                    .filter(|w| line.contains(**w))
                    .map(|w| format!("{}:{}: {w}", rel.display(), n + 1)),
            );
        }
    }
    assert!(asked.is_empty(), "which way a host is reached is asked outside its ways: {asked:#?}");
    let planted = production_code("fn f(r: &HostRecord) -> bool {\n    r.ssh.is_none()\n}\n");
    assert!(REACH_QUESTIONS.iter().any(|w| planted.contains(w)), "the gate sees a planted question");
    assert!(!may_ask_how_a_host_is_reached(Path::new("machines/hosts/link.rs")));
}

// ---- one answer player ----------------------------------------------------------------------

/// How production code plays an answer's keys onto a prompt, and where each may be
/// said: the drawn wait and the gone check only in the player; a terminal's `play` in
/// the player, the terminals that implement it, and the runner's half of a machine's
/// terminal (`Op::Play`, the keys lab serve's player sent in one go).
const PLAYER_WORDS: &[(&str, &[&str])] = &[
    ("DrawnWait::new", &["runs/answer/playback.rs"]),
    ("GoneCheck::new", &["runs/answer/playback.rs"]),
    ("wait_drawn(", &["runs/answer/playback.rs"]),
    (".play(", &["runs/answer/playback.rs", "machines/terminal/mod.rs", "machines/hosts/terminal.rs", "runner/mod.rs"]),
];

fn player_words_in(rel: &Path, code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for (word, allowed) in PLAYER_WORDS {
            if line.contains(word) && !allowed.iter().any(|f| rel == Path::new(f)) {
                found.push(format!("{}:{}: {word}", rel.display(), n + 1));
            }
        }
    }
    found
}

/// One answer player serves both ends of a machine's link: lab serve and a runner
/// playing next to its agent both go through `runs::answer::playback`; nothing else
/// waits for a prompt to be drawn or types a plan itself.
#[test]
fn one_answer_player_serves_both_ends_of_the_link() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        found.extend(player_words_in(rel, &production_code(&std::fs::read_to_string(f).unwrap())));
    }
    assert!(found.is_empty(), "an answer played outside the one player: {found:#?}");
    let planted = production_code("async fn answer(t: Tmux) {\n    wait_drawn(&t).await;\n    t.play(&x, &s);\n}\n");
    assert_eq!(player_words_in(Path::new("runner/answer.rs"), &planted).len(), 2, "the gate sees a second player");
    assert!(player_words_in(Path::new("runs/answer/playback.rs"), &planted).is_empty());
}

// ---- providers stand on the SDK alone ------------------------------------------------------

/// The path dependencies of a provider crate's manifest: (dependency, path), from every
/// dependency table.
fn path_dependencies(manifest: &str) -> Vec<(String, String)> {
    let doc: toml::Value = toml::from_str(manifest).expect("a manifest parses");
    let mut out = Vec::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        for (name, dep) in doc.get(table).and_then(toml::Value::as_table).into_iter().flatten() {
            if let Some(path) = dep.get("path").and_then(toml::Value::as_str) {
                out.push((name.clone(), path.to_string()));
            }
        }
    }
    out
}

/// Every provider crate lab bundles (and every fixture) is built from its own crate
/// against the SDK alone: no path into host/ or another crate of lab's, so a provider
/// author needs nothing lab does not publish to them (the SDK and the WIT), and a new
/// agent touches no line of host/src.
#[test]
fn providers_build_against_the_sdk_alone() {
    let root = src().parent().unwrap().parent().unwrap().to_path_buf();
    let mut manifests = Vec::new();
    for dir in ["providers", "providers/fixtures"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let m = e.path().join("Cargo.toml");
            if m.is_file() {
                manifests.push(m);
            }
        }
    }
    assert!(manifests.len() >= 7, "the provider crates: {manifests:?}");
    for m in &manifests {
        let deps = path_dependencies(&std::fs::read_to_string(m).unwrap());
        let crate_dir = m.parent().unwrap();
        for (name, path) in &deps {
            let target = std::fs::canonicalize(crate_dir.join(path)).unwrap();
            assert_eq!(
                (name.as_str(), target.as_path()),
                ("lab-provider-sdk", root.join("sdk").canonicalize().unwrap().as_path()),
                "{}: a path dependency other than the SDK",
                m.display()
            );
        }
        assert!(deps.iter().any(|(n, _)| n == "lab-provider-sdk"), "{}: built against the SDK", m.display());
    }
    let planted = path_dependencies("[dependencies]\nlab = { path = \"../../host\" }\nserde = \"1\"\n");
    assert_eq!(planted, [("lab".to_string(), "../../host".to_string())], "the gate sees a path into host/");
}
