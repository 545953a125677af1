//! The shape of `host/src` (issue 29): no file over 600 production lines, no import
//! cycle among its modules, no struct holding a run's live state with more than 12
//! fields, and no `use super::*` outside tests. Production lines: what comes before a file's `#[cfg(test)]` module, without
//! blank lines and comments.
//!

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_PRODUCTION_LINES: usize = 600;
const MAX_FIELDS: usize = 12;
/// The structs that hold a run's live state: the run, its state's owner, and what
/// the owner's channel readers keep.
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

/// `path: what` for each file of `host/src` whose text `finds` something in.
fn offenders(finds: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .iter()
        .filter_map(|f| finds(&std::fs::read_to_string(f).unwrap()).map(|what| format!("{}: {what}", f.display())))
        .collect()
}

/// The file's text before its `#[cfg(test)]` module.
fn production(text: &str) -> &str {
    match text.find("\n#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    }
}

fn production_lines(text: &str) -> usize {
    production(text).lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).count()
}

/// `host/src/runs/tailer.rs` → `["runs", "tailer"]`; `mod.rs` and `lib.rs` name their folder.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

/// Every path a `use` statement names, made absolute from the crate root.
fn use_paths(module: &[String], modules: &BTreeSet<Vec<String>>, stmt: &str) -> Vec<Vec<String>> {
    fn expand(prefix: &str, body: &str, out: &mut Vec<String>) {
        // `a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e
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
    let body: String = stmt.split_whitespace().collect::<Vec<_>>().join("");
    let mut flat = Vec::new();
    expand("", &body, &mut flat);
    flat.into_iter()
        .filter_map(|p| {
            let p = p.split(" as ").next().unwrap_or(&p).to_string();
            let segs: Vec<&str> = p.split("::").collect();
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
        })
        .collect()
}

/// Module → the other modules of `host/src` its production code `use`s.
fn imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let m = module_of(f);
        let text = std::fs::read_to_string(f).unwrap();
        let code = production(&text);
        let mut deps = BTreeSet::new();
        let mut rest = code;
        while let Some(i) = rest.find("use ") {
            let at_line_start =
                i == 0 || rest[..i].ends_with('\n') || rest[..i].ends_with("pub ") || rest[..i].ends_with(") ");
            let tail = &rest[i + 4..];
            let end = tail.find(';').unwrap_or(tail.len());
            if at_line_start {
                for p in use_paths(&m, &modules, &tail[..end]) {
                    // The longest prefix that is a module of the crate.
                    if let Some(target) = (0..=p.len()).rev().map(|n| p[..n].to_vec()).find(|q| modules.contains(q)) {
                        if target != m && !m.starts_with(&target) {
                            deps.insert(target);
                        }
                    }
                }
            }
            rest = &tail[end.min(tail.len())..];
        }
        graph.insert(m, deps);
    }
    graph
}

fn fields_of(code: &str, name: &str) -> Option<usize> {
    let start = code.find(&format!("pub struct {name} {{")).or_else(|| code.find(&format!("struct {name} {{")))?;
    let body = &code[start..];
    let open = body.find('{')?;
    let mut depth = 0;
    let mut count = 0;
    for line in body[open..].lines() {
        let t = line.trim();
        if depth == 1 && !t.starts_with("//") && !t.starts_with('#') && t.contains(':') && t.ends_with(',') {
            count += 1;
        }
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        if depth <= 0 {
            break;
        }
    }
    Some(count)
}

#[test]
fn no_file_in_host_src_is_over_600_production_lines() {
    let over = offenders(|text| {
        let n = production_lines(text);
        (n > MAX_PRODUCTION_LINES).then(|| n.to_string())
    });
    assert!(over.is_empty(), "over {MAX_PRODUCTION_LINES} production lines: {over:#?}");
}

#[test]
fn no_import_cycle_among_host_src_modules() {
    let graph = imports();
    assert!(graph.len() > 20, "the modules were found: {:?}", graph.keys().collect::<Vec<_>>());
    assert!(
        graph[&vec!["runs".to_string(), "tailer".to_string()]]
            .contains(&vec!["runs".to_string(), "message_store".to_string()]),
        "the import parser sees `use super::message_store::…`"
    );
    // Depth-first search for a back edge.
    fn visit(
        m: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|x| x == m).unwrap();
                let mut cycle = stack[from..].to_vec();
                cycle.push(m.clone());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(m.clone(), 1);
        stack.push(m.clone());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        let cycle = visit(m, &graph, &mut state, &mut Vec::new());
        let names: Option<Vec<String>> = cycle.map(|c| c.iter().map(|m| m.join("::")).collect());
        assert_eq!(names, None, "an import cycle");
    }
}

#[test]
fn no_struct_holding_a_run_s_live_state_has_more_than_12_fields() {
    let mut files = Vec::new();
    rust_files(&src().join("runs"), &mut files);
    let mut found = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for name in LIVE_STATE {
            if let Some(n) = fields_of(production(&text), name) {
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
    let globbing =
        offenders(|text| production(text).lines().any(|l| l.trim() == "use super::*;").then(|| "glob".to_string()));
    assert!(globbing.is_empty(), "`use super::*` in production code: {globbing:#?}");
}
