//! `lab providers check <file.wasm>`: load a provider component with the real loader
//! (same engine, sandbox and limits as `lab serve`) and run a short self-test through
//! it, so an author finds out what lab will make of the file before installing it.
//!
//! The report says what the component exports, which WIT package version(s) it was
//! built against, whether this lab loads it (and why not), the provider's info, and
//! the outcome of each self-test call. A call that traps, runs past its deadline or hits
//! the memory cap fails the check; so does an answer lab would reject (an empty argv, a
//! relative transcript path, hook settings that are not JSON, invalid key names, a
//! dialog whose tool_id is not the call's id). Odd-but-legal results are warnings.

use crate::components::{ComponentFacts, ComponentHost, Limits, ProviderHandle, BUNDLED, WIT_PACKAGE};
use crate::paths::{resolve_home, Home, RunFiles, RunId};
use anyhow::{anyhow, Result};
use lab_provider_sdk::{Answer, Dialog, DialogKind, HookContext, LaunchRequest, ParseOutput, ToolCall};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The WIT packages this lab loads.
pub const LOADS: &[&str] = &[WIT_PACKAGE];

/// Sample transcript lines: chat lines in a few common shapes, and one that is no JSON.
const SAMPLE_TRANSCRIPT: &str = concat!(
    r#"{"role":"user","text":"Hello from lab providers check","ts":"2025-01-01T00:00:00Z"}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":"Hello from lab providers check"},"uuid":"00000000-0000-4000-8000-000000000001","timestamp":"2025-01-01T00:00:00Z"}"#,
    "\n",
    r#"{"role":"assistant","text":"Hello! How can I help?","ts":"2025-01-01T00:00:01Z"}"#,
    "\n",
    "this line is not JSON\n",
);

/// One tool input in every dialog shape providers commonly map (a single question with
/// options, a list of questions, a plan).
fn sample_dialog_input() -> String {
    serde_json::json!({
        "question": "Which database should we use?",
        "header": "Database",
        "options": [
            {"label": "PostgreSQL", "description": "Relational"},
            {"label": "SQLite", "description": "Embedded"}
        ],
        "questions": [{
            "question": "Which database should we use?",
            "header": "Database",
            "multiSelect": false,
            "options": [
                {"label": "PostgreSQL", "description": "Relational"},
                {"label": "SQLite", "description": "Embedded"}
            ]
        }],
        "plan": "1. Add the table\n2. Migrate"
    })
    .to_string()
}

/// Tool names under which the sample dialog input is offered to `map-dialog`.
const DIALOG_TOOL_NAMES: &[&str] = &["AskUserQuestion", "ExitPlanMode", "ask_user", "ask", "question"];

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub failures: usize,
    pub warnings: usize,
}

struct Report<'a> {
    out: &'a mut dyn Write,
    outcome: Outcome,
}

impl Report<'_> {
    fn line(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}", text.as_ref());
    }
    fn field(&mut self, key: &str, value: impl AsRef<str>) {
        self.line(format!("{key:<13}{}", value.as_ref()));
    }
    fn ok(&mut self, what: impl AsRef<str>) {
        self.line(format!("  ok    {}", what.as_ref()));
    }
    fn warn(&mut self, what: impl AsRef<str>) {
        self.outcome.warnings += 1;
        self.line(format!("  warn  {}", what.as_ref()));
    }
    fn fail(&mut self, what: impl AsRef<str>) {
        self.outcome.failures += 1;
        self.line(format!("  FAIL  {}", what.as_ref()));
    }
    fn info(&mut self, what: impl AsRef<str>) {
        self.line(format!("        {}", what.as_ref()));
    }
}

/// `lab providers check`: print the report; an error if the file cannot be loaded or
/// the self-test fails.
pub fn run(file: &Path, home: Option<PathBuf>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let outcome = check(file, home, &mut out)?;
    out.flush().ok();
    if outcome.failures > 0 {
        return Err(anyhow!(
            "{}: the self-test failed ({} failure{}); lab would load it but it misbehaves",
            file.display(),
            outcome.failures,
            if outcome.failures == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

/// Check one file, writing the report to `out`. `Err` when the component cannot be
/// loaded; otherwise the self-test's failures and warnings.
pub fn check(file: &Path, home: Option<PathBuf>, out: &mut dyn Write) -> Result<Outcome> {
    let mut r = Report { out, outcome: Outcome::default() };
    let bytes = std::fs::read(file).map_err(|e| anyhow!("cannot read {}: {e}", file.display()))?;
    r.field("component", format!("{} ({})", file.display(), size(bytes.len())));
    let limits = Limits::default();
    let host = ComponentHost::new(None, limits)?;
    let (facts, provider) = match host.load_file(file) {
        Ok(loaded) => loaded,
        Err(e) => {
            let (packages, why) = diagnose(&host, &bytes, &format!("{e:#}"));
            if let Some(packages) = packages {
                let shown = if packages.is_empty() { "none".to_string() } else { packages.join(", ") };
                r.field("WIT package", format!("{shown} (this lab loads {})", LOADS.join(", ")));
            }
            r.field("loadable", "no");
            for l in &why {
                r.info(l);
            }
            return Err(anyhow!("{} cannot be loaded by this lab: {}", file.display(), why[0]));
        }
    };
    describe(&mut r, &facts, limits);
    r.line("self-test (the sandbox and limits of lab serve):");
    self_test(&mut r, &facts, &provider, limits.call_deadline);
    let Outcome { failures, warnings } = r.outcome;
    if failures == 0 {
        let home = resolve_home(home).map(|h| Home::new(h).providers_dir().display().to_string());
        let dest = home.unwrap_or_else(|_| "<lab home>/providers".into());
        r.line(format!(
            "result: OK{} — install it with: cp {} {dest}/",
            if warnings > 0 { format!(" with {warnings} warning(s)") } else { String::new() },
            file.display()
        ));
    } else {
        r.line(format!("result: FAILED ({failures} failure(s), {warnings} warning(s))"));
    }
    Ok(r.outcome)
}

fn size(n: usize) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", n.div_ceil(1024))
    }
}

fn describe(r: &mut Report, facts: &ComponentFacts, limits: Limits) {
    let exports = if facts.dialog_hooker { "base, dialog-hooker" } else { "base (no dialog-hooker)" };
    r.field("exports", exports);
    r.field("WIT package", format!("{} (this lab loads {})", facts.wit_packages.join(", "), LOADS.join(", ")));
    r.field("loadable", "yes");
    let i = &facts.info;
    r.field("provider", format!("{} {}", i.name, i.version));
    r.field("description", &i.description);
    r.field(
        "program",
        format!("{} (default; lab.toml [providers.{}] program = … overrides it)", i.default_program, i.name),
    );
    let mode = if facts.dialog_hooker {
        "dialog-hooker: live dialogs from the spool, answered from lab with keystrokes"
    } else {
        "transcript-only: dialogs from the transcript, shown but answered in the terminal"
    };
    r.field("capability", mode);
    r.field(
        "sandbox",
        format!(
            "no files, env or network; {} ms per call; {} MiB memory",
            limits.call_deadline.as_millis(),
            limits.memory_bytes >> 20
        ),
    );
    if BUNDLED.iter().any(|(n, _)| *n == i.name) {
        r.field("note", format!("installed, it replaces lab's bundled `{}` provider", i.name));
    }
}

/// Why a component did not load, most useful line first; and the packages it exports,
/// if it compiles at all.
fn diagnose(host: &ComponentHost, bytes: &[u8], error: &str) -> (Option<Vec<String>>, Vec<String>) {
    let mut why = Vec::new();
    if !bytes.starts_with(b"\0asm") || bytes.len() < 8 {
        why.push("not a WebAssembly file (no \\0asm header)".to_string());
        return (None, why);
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        why.push(
            "a core WebAssembly module, not a component: build the cdylib with --target wasm32-wasip2 \
             (wasm32-unknown-unknown and wasm32-wasip1 give core modules)"
                .to_string(),
        );
        return (None, why);
    }
    let packages = match host.compile(bytes) {
        Ok((component, _)) => crate::components::exported_packages(host.engine(), &component),
        Err(e) => {
            why.push(format!("not a valid component: {e:#}"));
            return (None, why);
        }
    };
    let ours: Vec<&String> = packages.iter().filter(|p| p.starts_with("lab:provider")).collect();
    if ours.is_empty() {
        why.push(format!(
            "it exports no lab:provider interface (exports: {}); a provider exports {WIT_PACKAGE}/base \
             (lab_provider_sdk::export_provider!)",
            if packages.is_empty() { "none".to_string() } else { packages.join(", ") }
        ));
    } else if !ours.iter().any(|p| LOADS.contains(&p.as_str())) {
        let found: Vec<&str> = ours.iter().map(|s| s.as_str()).collect();
        why.push(format!(
            "it was built against {}; this lab loads {}: rebuild it with this lab's lab-provider-sdk \
             (the one `lab new-provider` points at), or run it with a lab that loads {}",
            found.join(", "),
            LOADS.join(", "),
            found.join(", ")
        ));
    }
    why.push(error.to_string());
    (Some(packages), why)
}

/// Time a call.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let v = f();
    (v, start.elapsed())
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// A call that took more than half its deadline works, but not with much to spare.
fn slow(r: &mut Report, what: &str, took: Duration, deadline: Duration) {
    if took * 2 > deadline {
        r.warn(format!("{what} took {} of its {} deadline", ms(took), ms(deadline)));
    }
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

fn self_test(r: &mut Report, facts: &ComponentFacts, p: &ProviderHandle, deadline: Duration) {
    match timed(|| p.info_blocking()) {
        (Ok(_), took) => r.ok(format!("info ({})", ms(took))),
        (Err(e), _) => r.fail(e.to_string()),
    }
    test_launch(r, facts, p);
    test_parse(r, p, deadline);
    let dialogs = test_map_dialog(r, p);
    if facts.dialog_hooker {
        test_hooker(r, p, &dialogs);
    }
}

fn sample_request(facts: &ComponentFacts) -> LaunchRequest {
    LaunchRequest {
        run_id: "r-check0000001".into(),
        session_id: "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f".into(),
        workdir: "/tmp/lab-check/workdir".into(),
        prompt: "Say hello.".into(),
        permission_mode: None,
        program: format!("/usr/local/bin/{}", facts.info.default_program),
        settings_path: facts.dialog_hooker.then(|| "/tmp/lab-check/runtime/r-check0000001.settings.json".into()),
        env: vec![
            ("HOME".into(), "/home/lab-check".into()),
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("USER".into(), "lab-check".into()),
        ],
    }
}

fn test_launch(r: &mut Report, facts: &ComponentFacts, p: &ProviderHandle) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return r.fail(format!("launch: cannot start a runtime: {e}")),
    };
    let (res, took) = timed(|| rt.block_on(p.launch(sample_request(facts))));
    match res {
        Err(e) => r.fail(e.to_string()),
        Ok(Err(msg)) => {
            r.warn(format!("launch refused a sample request ({}): {msg}", ms(took)));
            r.info("(lab shows this error to the operator when a run cannot start)");
        }
        Ok(Ok(spec)) => {
            if spec.argv.is_empty() {
                return r.fail("launch returned an empty argv (lab refuses to start it)");
            }
            r.ok(format!("launch ({}): argv {:?}", ms(took), spec.argv));
            match &spec.transcript_path {
                Some(t) if Path::new(t).is_absolute() => r.info(format!("transcript {t}")),
                Some(t) => r.fail(format!("launch: the transcript path {t:?} is not absolute")),
                None => r.warn("launch gave no transcript path: lab cannot show this run's messages"),
            }
        }
    }
}

fn summary(out: &ParseOutput) -> String {
    let turn = match out.turn {
        Some(t) => format!("turn {}", if t == lab_provider_sdk::TurnSignal::Idle { "idle" } else { "working" }),
        None => "no turn signal".into(),
    };
    format!("{}, {}, {turn}", plural(out.messages.len(), "message"), plural(out.diagnostics.len(), "diagnostic"))
}

fn test_parse(r: &mut Report, p: &ProviderHandle, deadline: Duration) {
    let lines = SAMPLE_TRANSCRIPT.lines().count();
    let (first, took) = timed(|| p.parse_transcript_blocking(SAMPLE_TRANSCRIPT.as_bytes().to_vec()));
    let first = match first {
        Ok(out) => out,
        Err(e) => return r.fail(e.to_string()),
    };
    r.ok(format!("parse-transcript on {lines} sample lines ({}): {}", ms(took), summary(&first)));
    for m in &first.messages {
        let text: String = m.text.chars().take(60).collect();
        r.info(format!("{} {}: {text:?}", format!("{:?}", m.role).to_lowercase(), m.kind));
    }
    for d in &first.diagnostics {
        r.info(format!("line {}: {}", d.line, d.message));
    }
    for d in first.diagnostics.iter().filter(|d| d.line as usize >= lines) {
        r.warn(format!("diagnostic for line {} of a {lines}-line chunk (lines are 0-based)", d.line));
    }
    match p.parse_transcript_blocking(SAMPLE_TRANSCRIPT.as_bytes().to_vec()) {
        Ok(again) if again == first => r.ok("parse-transcript is deterministic (same bytes, same output)"),
        Ok(_) => r.fail("parse-transcript gave a different output for the same bytes (lab re-reads transcripts)"),
        Err(e) => r.fail(e.to_string()),
    }
    for (what, chunk) in
        [("bytes that are not UTF-8", b"\xff\xfe\xfd not utf-8\n".to_vec()), ("a lone newline", b"\n".to_vec())]
    {
        match p.parse_transcript_blocking(chunk) {
            Ok(_) => r.ok(format!("parse-transcript survives {what}")),
            Err(e) => r.fail(format!("on {what}: {e}")),
        }
    }
    // The tailer hands over up to 1 MiB of complete lines in one call.
    let mut big = String::with_capacity(1 << 20);
    while big.len() + SAMPLE_TRANSCRIPT.len() <= 1 << 20 {
        big.push_str(SAMPLE_TRANSCRIPT);
    }
    let n = big.lines().count();
    let (res, took) = timed(|| p.parse_transcript_blocking(big.into_bytes()));
    match res {
        Ok(out) => {
            r.ok(format!("parse-transcript on a 1 MiB chunk of {n} lines ({}): {}", ms(took), summary(&out)));
            slow(r, "parse-transcript on 1 MiB", took, deadline);
        }
        Err(e) => {
            r.fail(format!("on a 1 MiB chunk ({n} lines, the most lab sends in one call): {e}"));
        }
    }
}

fn describe_dialog(d: &Dialog) -> String {
    let kind = match d.kind {
        DialogKind::Question => "question",
        DialogKind::Plan => "plan",
    };
    let options: usize = d.questions.iter().map(|q| q.options.len()).sum();
    format!(
        "{kind} dialog, {}, {}{}, {}",
        plural(d.questions.len(), "question"),
        plural(options, "option"),
        if d.plan.is_some() { ", plan text" } else { "" },
        if d.answerable { "answerable" } else { "not answerable" }
    )
}

fn call(id: &str, name: &str, input: String) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), input }
}

/// Map the sample calls; the dialogs it yields (for the hooker tests).
fn test_map_dialog(r: &mut Report, p: &ProviderHandle) -> Vec<Dialog> {
    let mut dialogs = Vec::new();
    let input = sample_dialog_input();
    let mut calls: Vec<ToolCall> = vec![call("toolu_check_00", "Bash", r#"{"command":"ls"}"#.into())];
    calls.extend(
        DIALOG_TOOL_NAMES.iter().enumerate().map(|(i, n)| call(&format!("toolu_check_{:02}", i + 1), n, input.clone())),
    );
    for c in calls {
        let (id, name) = (c.id.clone(), c.name.clone());
        match p.map_dialog_blocking(c) {
            Err(e) => r.fail(format!("map-dialog({name}): {e}")),
            Ok(None) => r.ok(format!("map-dialog({name}): not a dialog")),
            Ok(Some(d)) => {
                if d.tool_id != id {
                    r.fail(format!(
                        "map-dialog({name}) gave tool_id {:?} for call {id:?}: it must be the call's id \
                         (lab links a dialog to its tool_result by it)",
                        d.tool_id
                    ));
                    continue;
                }
                r.ok(format!("map-dialog({name}): {}", describe_dialog(&d)));
                if d.kind == DialogKind::Question && d.questions.is_empty() {
                    r.warn(format!("map-dialog({name}): a question dialog without questions shows nothing to answer"));
                }
                if d.answerable && d.questions.iter().any(|q| q.options.is_empty()) {
                    r.warn(format!("map-dialog({name}): answerable, but a question has no options"));
                }
                dialogs.push(d);
            }
        }
    }
    if dialogs.is_empty() {
        r.info(format!("(no sample call is a dialog for this provider; tried {})", DIALOG_TOOL_NAMES.join(", ")));
    }
    for (what, c) in [
        ("input that is not JSON", call("toolu_check_98", DIALOG_TOOL_NAMES[0], "not json".into())),
        ("an empty tool name", call("toolu_check_99", "", "{}".into())),
    ] {
        if let Err(e) = p.map_dialog_blocking(c) {
            r.fail(format!("on {what}: {e}"));
        } else {
            r.ok(format!("map-dialog survives {what}"));
        }
    }
    dialogs
}

fn test_hooker(r: &mut Report, p: &ProviderHandle, dialogs: &[Dialog]) {
    let run = RunId::parse("r-check0000001").expect("a valid run id");
    let files = RunFiles::new(Path::new("/tmp/lab-check/runtime"), &run);
    let lab = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("lab"));
    let ctx: HookContext = crate::runs::hook_settings::context(&lab, &run, &files);
    match timed(|| p.hook_settings_blocking(ctx.clone())) {
        (Err(e), _) => r.fail(e.to_string()),
        (Ok(Err(msg)), _) => r.fail(format!("hook-settings refused a sample context: {msg} (lab cannot launch runs)")),
        (Ok(Ok(doc)), took) => match serde_json::from_str::<serde_json::Value>(&doc) {
            Err(e) => r.fail(format!("hook-settings is not JSON ({e}); lab refuses to write it")),
            Ok(v) => {
                r.ok(format!("hook-settings ({}): {} bytes of JSON", ms(took), doc.len()));
                let strings = json_strings(&v);
                for (cmd, what) in [
                    (&ctx.spool_write, "spool-write (live dialogs)"),
                    (&ctx.spool_clear, "spool-clear (resolving them)"),
                    (&ctx.marker_write, "marker-write (needs-input)"),
                ] {
                    if !strings.iter().any(|s| s.contains(cmd.as_str())) {
                        r.warn(format!("hook-settings never runs the {what} command"));
                    }
                }
            }
        },
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return r.fail(format!("cannot start a runtime: {e}")),
    };
    match rt.block_on(p.pending_dialog(b"not json".to_vec())) {
        Err(e) => r.fail(format!("pending-dialog on a malformed spool: {e}")),
        Ok(Ok(_)) => r.warn("pending-dialog accepted a spool that is not JSON"),
        Ok(Err(msg)) => r.ok(format!("pending-dialog rejects a malformed spool: {msg}")),
    }
    match rt.block_on(p.blocked_state(b"not json".to_vec())) {
        Err(e) => r.fail(format!("blocked-state on a malformed marker: {e}")),
        Ok(_) => r.ok("blocked-state survives a malformed marker"),
    }
    let Some(d) = dialogs.iter().find(|d| d.answerable) else {
        r.info("(no sample dialog is answerable: answer-keys not exercised)");
        return;
    };
    let answers: Vec<Answer> =
        d.questions.iter().map(|q| if q.multi_select { Answer::Options(vec![0]) } else { Answer::Option(0) }).collect();
    match timed(|| p.answer_keys_blocking(d.clone(), answers)) {
        (Err(e), _) => r.fail(e.to_string()),
        (Ok(Err(msg)), _) => {
            r.fail(format!("answer-keys refused the first option of an answerable {}: {msg}", d.tool_name))
        }
        (Ok(Ok(ops)), took) => match crate::runs::keystrokes::validate(&ops) {
            Err(e) => r.fail(format!("answer-keys for {}: {e}", d.tool_name)),
            Ok(()) => {
                let played: Vec<String> = ops.iter().map(crate::runs::keystrokes::describe).collect();
                r.ok(format!("answer-keys({}, first option) ({}): {played:?}", d.tool_name, ms(took)));
                r.info(format!("(lab plays them with {} between ops)", ms(crate::runs::keystrokes::KEY_DELAY)));
            }
        },
    }
    let out_of_range: Vec<Answer> = d.questions.iter().map(|_| Answer::Option(999)).collect();
    match p.answer_keys_blocking(d.clone(), out_of_range) {
        Err(e) => r.fail(format!("answer-keys on an option out of range: {e}")),
        Ok(Ok(_)) => r.warn("answer-keys accepted option 999 (lab checks nothing: it plays what it gets)"),
        Ok(Err(_)) => r.ok("answer-keys rejects an option out of range"),
    }
}

/// Every string in a JSON document.
fn json_strings(v: &serde_json::Value) -> Vec<&str> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) => out.push(s.as_str()),
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::fixtures;

    fn report(file: &Path) -> (Result<Outcome>, String) {
        let mut out = Vec::new();
        let res = check(file, Some(PathBuf::from("/nonexistent/lab-home")), &mut out);
        (res, String::from_utf8(out).unwrap())
    }

    #[test]
    fn plainlog_passes_as_transcript_only() {
        let (res, text) = report(Path::new(fixtures::PLAINLOG));
        let outcome = res.unwrap();
        assert_eq!(outcome.failures, 0, "{text}");
        assert!(text.contains("exports      base (no dialog-hooker)"), "{text}");
        assert!(text.contains("lab:provider@0.1.0 (this lab loads lab:provider@0.1.0)"), "{text}");
        assert!(text.contains("provider     plainlog 0.1.0"), "{text}");
        assert!(text.contains("map-dialog(ask): question dialog, 1 question, 2 options, not answerable"), "{text}");
        assert!(text.contains("cp ") && text.contains("/nonexistent/lab-home/providers/"), "{text}");
    }

    #[test]
    fn claude_code_passes_with_its_hooker_exercised() {
        let (res, text) = report(Path::new(fixtures::CLAUDE_CODE));
        assert_eq!(res.unwrap().failures, 0, "{text}");
        assert!(text.contains("exports      base, dialog-hooker"), "{text}");
        assert!(text.contains("hook-settings"), "{text}");
        assert!(text.contains("answer-keys(AskUserQuestion, first option)"), "{text}");
        assert!(text.contains("replaces lab's bundled `claude-code`"), "{text}");
    }

    #[test]
    fn files_that_are_not_components_are_explained() {
        let d = tempfile::tempdir().unwrap();
        for (name, bytes, expect) in [
            ("garbage.wasm", &b"not wasm at all"[..], "not a WebAssembly file"),
            ("core.wasm", &b"\0asm\x01\0\0\0"[..], "a core WebAssembly module, not a component"),
        ] {
            let f = d.path().join(name);
            std::fs::write(&f, bytes).unwrap();
            let (res, text) = report(&f);
            let e = res.unwrap_err().to_string();
            assert!(e.contains(expect), "{e}");
            assert!(text.contains("loadable     no"), "{text}");
        }
        let e = report(&d.path().join("missing.wasm")).0.unwrap_err().to_string();
        assert!(e.starts_with("cannot read"), "{e}");
    }
}
