//! `lab providers check <file.wasm>`: load a provider component with the real loader
//! (same engine, sandbox and limits as `lab serve`) and run a short self-test through
//! it, so an author finds out what lab will make of the file before installing it.
//!
//! The report says what the component exports, which WIT package version(s) it was
//! built against, whether this lab loads it (and why not), the provider's info, and
//! the outcome of each self-test call. A call that traps, runs past its deadline or hits
//! the memory cap fails the check; so does an answer lab would reject (an empty argv, a
//! relative transcript path, hook settings that are not JSON, invalid key names, a
//! mapped dialog whose call_id is not the call's id). Odd-but-legal results are warnings.
//! The samples (transcript lines, dialog calls) come from the provider itself.

use crate::agents::components::{ComponentFacts, ComponentHost, Limits, BUNDLED, WIT_PACKAGES};
use crate::agents::model::{
    Answer, Dialog, DialogBody, HookBinding, LaunchRequest, ParseOutput, Samples, ToolUse, Transcript,
};
use crate::agents::provider::{Blocking as _, Provider};
use crate::store::paths::{resolve_home, Home, RunFiles, RunId};
use anyhow::{anyhow, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The WIT packages this lab loads.
pub const LOADS: &[&str] = WIT_PACKAGES;

/// A line no provider parses into a message: the robustness checks use it.
const NOT_JSON: &str = "this line is not JSON\n";

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
    if !facts.capabilities.acp {
        r.field("sandbox", sandbox_needs(&provider));
        // What lab serve refuses at load.
        if let Ok(needs) = provider.sandbox_needs(Vec::new()).blocking() {
            if let Err(e) = crate::sandbox::bounds::check_needs(&needs) {
                r.fail(format!("lab serve refuses it: it asks its sandbox for more than lab gives a provider: {e}"));
            }
        }
    }
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

/// What the provider says its agent needs in a sandbox (with no environment), in a line.
fn sandbox_needs(provider: &crate::agents::components::ProviderHandle) -> String {
    match provider.sandbox_needs(Vec::new()).blocking() {
        Ok(n) => {
            let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
            format!("writes {}; reads {}; reaches {}", list(&n.writable), list(&n.readable), list(&n.hosts))
        }
        Err(e) if e.kind == crate::agents::provider::CallErrorKind::Unsupported => {
            "not asked (built against a WIT before 0.6.0: a sandboxed run gets its workdir and no hosts)".into()
        }
        Err(e) => format!("the question failed: {e}"),
    }
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
    let caps = facts.capabilities;
    let exports = match (caps.acp, caps.dialog_hooker, caps.screen_reader) {
        (true, _, _) => "acp-agent",
        (false, true, true) => "base, dialog-hooker, screen-reader",
        (false, true, false) => "base, dialog-hooker",
        (false, false, _) => "base (no dialog-hooker)",
    };
    r.field("exports", exports);
    if !caps.acp {
        let a = caps.abilities;
        let sessions = match (a.resume, a.fork) {
            (true, true) => "resume, fork",
            (true, false) => "resume (no fork)",
            (false, true) => "fork (no resume)",
            (false, false) => "neither resume nor fork (lab answers both 422 not_supported)",
        };
        r.field("sessions", sessions);
        r.field(
            "usage",
            if caps.reads_usage() {
                "asked of each transcript chunk (tokens per response, context, account windows)"
            } else {
                "not asked (built against a WIT before 0.5.0: its runs show no usage)"
            },
        );
    }
    r.field("WIT package", format!("{} (this lab loads {})", facts.wit_packages.join(", "), LOADS.join(", ")));
    r.field("loadable", "yes");
    let i = &facts.info;
    r.field("provider", format!("{} {} ({})", i.name, i.version, i.display_name));
    r.field("description", &i.description);
    r.field(
        "program",
        format!("{} (default; lab.toml [providers.{}] program = … overrides it)", i.default_program, i.name),
    );
    if !i.permission_modes.is_empty() {
        r.field("modes", i.permission_modes.join(", "));
    }
    let mode = if caps.acp {
        "acp: lab runs the agent and speaks the Agent Client Protocol with it; its permission requests \
         and forms are the dialogs"
    } else if facts.dialog_hooker {
        "dialog-hooker: live dialogs from the agent's hooks, answered from lab with keystrokes"
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
        Ok((component, _)) => crate::agents::components::exported_packages(host.engine(), &component),
        Err(e) => {
            why.push(format!("not a valid component: {e:#}"));
            return (None, why);
        }
    };
    let ours: Vec<&String> = packages.iter().filter(|p| p.starts_with("lab:provider")).collect();
    if ours.is_empty() {
        why.push(format!(
            "it exports no lab:provider interface (exports: {}); a provider exports {}/base \
             (lab_provider_sdk::export_provider!)",
            if packages.is_empty() { "none".to_string() } else { packages.join(", ") },
            WIT_PACKAGES[0]
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

fn self_test(r: &mut Report, facts: &ComponentFacts, p: &dyn Provider, deadline: Duration) {
    match timed(|| p.info().blocking()) {
        (Ok(_), took) => r.ok(format!("info ({})", ms(took))),
        (Err(e), _) => r.fail(e.to_string()),
    }
    if facts.capabilities.acp {
        match timed(|| crate::agents::components::acp_declaration(facts, p)) {
            (Ok(l), took) => r.ok(format!(
                "launch ({}): {} {}; env: {}",
                ms(took),
                facts.info.default_program,
                l.args.join(" "),
                if l.env.is_empty() {
                    "none".into()
                } else {
                    l.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
                }
            )),
            (Err(e), _) => r.fail(e),
        }
        return;
    }
    let samples = match p.self_test_samples().blocking() {
        Ok(s) => {
            r.ok(format!(
                "self-test-samples: {} and {}",
                plural(s.transcript_lines.len(), "transcript line"),
                plural(s.dialog_calls.len(), "dialog call")
            ));
            if s.transcript_lines.is_empty() {
                r.warn("no sample transcript lines: parsing is only checked for robustness");
            }
            s
        }
        Err(e) if e.kind == crate::agents::components::CallErrorKind::Unsupported => {
            r.info(format!("(no self-test samples: built against {})", facts.capabilities.version.package()));
            Samples::default()
        }
        Err(e) => {
            r.fail(e.to_string());
            Samples::default()
        }
    };
    let bindings = if facts.dialog_hooker { test_wiring(r, p) } else { Vec::new() };
    // As lab serve does: a settings path only when the provider makes a settings file.
    let with_file = facts.dialog_hooker
        && matches!(p.hook_settings("r-check0000001".into(), sample_hooks(&bindings)).blocking(), Ok(Some(_)));
    test_launch(r, facts, p, &bindings, with_file);
    test_parse(r, p, &samples, deadline);
    let dialogs = test_map_dialog(r, p, &samples);
    if facts.dialog_hooker {
        test_hooker(r, p, &bindings, &dialogs);
    }
}

fn sample_request(
    facts: &ComponentFacts,
    hooks: Vec<crate::agents::model::HookCommand>,
    with_file: bool,
) -> LaunchRequest {
    LaunchRequest {
        run_id: "r-check0000001".into(),
        session_id: "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f".into(),
        workdir: "/tmp/lab-check/workdir".into(),
        prompt: "Say hello.".into(),
        permission_mode: None,
        program: format!("/usr/local/bin/{}", facts.info.default_program),
        settings_path: with_file.then(|| "/tmp/lab-check/runtime/r-check0000001.settings.json".into()),
        env: vec![
            ("HOME".into(), "/home/lab-check".into()),
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("USER".into(), "lab-check".into()),
        ],
        hooks,
    }
}

fn sample_files() -> (RunId, RunFiles) {
    let run = RunId::parse("r-check0000001").expect("a valid run id");
    let files = RunFiles::new(Path::new("/tmp/lab-check/runtime"), &run);
    (run, files)
}

fn sample_hooks(bindings: &[HookBinding]) -> Vec<crate::agents::model::HookCommand> {
    let lab = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("lab"));
    crate::runs::launch::hook_settings::commands(&lab, &sample_files().1, bindings.to_vec())
}

fn test_wiring(r: &mut Report, p: &dyn Provider) -> Vec<HookBinding> {
    match p.hook_wiring().blocking() {
        Err(e) => {
            r.fail(e.to_string());
            Vec::new()
        }
        Ok(bindings) => {
            match crate::runs::launch::hook_settings::validate(&bindings) {
                Ok(()) => r.ok(format!("hook-wiring: {}", plural(bindings.len(), "binding"))),
                Err(e) => r.fail(format!("hook-wiring: {e}")),
            }
            for b in &bindings {
                let matcher = b.matcher.as_deref().map(|m| format!(" [{m}]")).unwrap_or_default();
                r.info(format!("{}{matcher} → {:?}", b.event, b.channel));
            }
            if !bindings.iter().any(|b| b.channel == crate::agents::model::Channel::DialogSpool) {
                r.warn("no binding feeds the dialog spool: no live dialogs");
            }
            bindings
        }
    }
}

fn test_launch(r: &mut Report, facts: &ComponentFacts, p: &dyn Provider, bindings: &[HookBinding], with_file: bool) {
    let request = sample_request(facts, sample_hooks(bindings), with_file);
    let (program, hooks) = (request.program.clone(), request.hooks.clone());
    let (res, took) = timed(|| p.launch(request).blocking());
    match res {
        Err(e) if e.refusal().is_some() => {
            r.warn(format!("launch refused a sample request ({}): {e}", ms(took)));
            r.info("(lab shows this error to the operator when a run cannot start)");
        }
        Err(e) => r.fail(e.to_string()),
        Ok(spec) => {
            // The very rules lab serve starts a run by.
            if let Err(e) = crate::runs::check_spec(&spec, &program, &hooks) {
                return r.fail(format!("launch ({}): lab would not start this: {e}", ms(took)));
            }
            r.ok(format!("launch ({}): argv {:?}", ms(took), spec.argv));
            match &spec.transcript {
                Transcript::Path(t) => r.info(format!("transcript {t}")),
                Transcript::FromSessionInfo => r.info("transcript: named later by the session-info hook"),
                Transcript::None => r.warn("launch gave no transcript: lab cannot show this run's messages"),
            }
        }
    }
}

fn summary(out: &ParseOutput) -> String {
    let turn = match out.turn {
        Some(t) => format!("turn {}", if t == crate::agents::model::TurnSignal::Idle { "idle" } else { "working" }),
        None => "no turn signal".into(),
    };
    format!("{}, {}, {turn}", plural(out.messages.len(), "message"), plural(out.diagnostics.len(), "diagnostic"))
}

fn test_parse(r: &mut Report, p: &dyn Provider, samples: &Samples, deadline: Duration) {
    let mut chunk = String::new();
    for line in &samples.transcript_lines {
        chunk.push_str(line.trim_end_matches('\n'));
        chunk.push('\n');
    }
    chunk.push_str(NOT_JSON);
    let lines = chunk.lines().count();
    let (first, took) = timed(|| p.parse_transcript(chunk.clone().into_bytes()).blocking());
    let first = match first {
        Ok(out) => out,
        Err(e) => return r.fail(e.to_string()),
    };
    r.ok(format!("parse-transcript on {lines} sample lines ({}): {}", ms(took), summary(&first)));
    for m in &first.messages {
        let seq = crate::runs::live::view::SeqMessage::new(0, m.clone());
        let text: String = seq.text.chars().take(60).collect();
        r.info(format!("{} {}: {text:?}", format!("{:?}", m.role).to_lowercase(), seq.kind));
    }
    for d in &first.diagnostics {
        r.info(format!("line {}: {}", d.line, d.message));
    }
    for d in first.diagnostics.iter().filter(|d| d.line as usize >= lines) {
        r.warn(format!("diagnostic for line {} of a {lines}-line chunk (lines are 0-based)", d.line));
    }
    // Each sample line alone must give at least one message (that is what it is for).
    for (i, line) in samples.transcript_lines.iter().enumerate() {
        match p.parse_transcript(format!("{}\n", line.trim_end_matches('\n')).into_bytes()).blocking() {
            Ok(out) if !out.messages.is_empty() => {}
            Ok(out) => r.fail(format!(
                "sample transcript line {} gives no message ({})",
                i + 1,
                out.diagnostics.first().map_or("no diagnostic".into(), |d| d.message.clone())
            )),
            Err(e) => r.fail(format!("sample transcript line {}: {e}", i + 1)),
        }
    }
    match p.parse_transcript(chunk.clone().into_bytes()).blocking() {
        Ok(again) if again == first => r.ok("parse-transcript is deterministic (same bytes, same output)"),
        Ok(_) => r.fail("parse-transcript gave a different output for the same bytes (lab re-reads transcripts)"),
        Err(e) => r.fail(e.to_string()),
    }
    for (what, bytes) in
        [("bytes that are not UTF-8", b"\xff\xfe\xfd not utf-8\n".to_vec()), ("a lone newline", b"\n".to_vec())]
    {
        match p.parse_transcript(bytes).blocking() {
            Ok(_) => r.ok(format!("parse-transcript survives {what}")),
            Err(e) => r.fail(format!("on {what}: {e}")),
        }
    }
    // The tailer hands over up to 1 MiB of complete lines in one call.
    let mut big = String::with_capacity(1 << 20);
    while big.len() + chunk.len() <= 1 << 20 {
        big.push_str(&chunk);
    }
    let n = big.lines().count();
    let (res, took) = timed(|| p.parse_transcript(big.into_bytes()).blocking());
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
    let detail = match &d.body {
        DialogBody::Question(qs) => {
            let options: usize = qs.iter().map(|q| q.options.len()).sum();
            format!("{}, {}", plural(qs.len(), "question"), plural(options, "option"))
        }
        DialogBody::Plan { plan, options, .. } => {
            format!("{}{}", plural(options.len(), "option"), if plan.is_some() { ", plan text" } else { "" })
        }
        DialogBody::Permission { tool, options, .. } => format!("{tool}, {}", plural(options.len(), "option")),
        DialogBody::Generic { options, .. } => plural(options.len(), "option"),
    };
    format!("{} dialog, {detail}, {}", d.kind(), if d.answerable { "answerable" } else { "not answerable" })
}

fn call(id: &str, name: &str, input: &str) -> ToolUse {
    ToolUse { id: id.into(), name: name.into(), input_json: input.into(), summary: name.into() }
}

/// Map the provider's sample dialog calls; the dialogs it yields (for the hooker tests).
fn test_map_dialog(r: &mut Report, p: &dyn Provider, samples: &Samples) -> Vec<Dialog> {
    let mut dialogs = Vec::new();
    for c in samples.dialog_calls.iter().cloned() {
        let (id, name) = (c.id.clone(), c.name.clone());
        match p.map_dialog(c).blocking() {
            Err(e) => r.fail(format!("map-dialog({name}): {e}")),
            Ok(None) => r.fail(format!("map-dialog({name}): its own sample dialog call is not a dialog")),
            Ok(Some(d)) => {
                if d.call_id.as_deref() != Some(id.as_str()) {
                    r.fail(format!(
                        "map-dialog({name}) gave call_id {:?} for call {id:?}: it must be the call's id \
                         (lab links a dialog to its tool_result by it)",
                        d.call_id
                    ));
                    continue;
                }
                r.ok(format!("map-dialog({name}): {}", describe_dialog(&d)));
                if matches!(&d.body, DialogBody::Question(q) if q.is_empty()) {
                    r.warn(format!("map-dialog({name}): a question dialog without questions shows nothing to answer"));
                }
                if d.answerable && d.questions().iter().any(|q| q.options.is_empty()) {
                    r.warn(format!("map-dialog({name}): answerable, but a question has no options"));
                }
                dialogs.push(d);
            }
        }
    }
    let first = samples.dialog_calls.first().map_or("ask", |c| c.name.as_str()).to_string();
    for (what, c) in [
        ("input that is not JSON", call("toolu_check_98", &first, "not json")),
        ("an empty tool name", call("toolu_check_99", "", "{}")),
    ] {
        if let Err(e) = p.map_dialog(c).blocking() {
            r.fail(format!("on {what}: {e}"));
        } else {
            r.ok(format!("map-dialog survives {what}"));
        }
    }
    dialogs
}

fn test_hooker(r: &mut Report, p: &dyn Provider, bindings: &[HookBinding], dialogs: &[Dialog]) {
    let hooks = sample_hooks(bindings);
    match timed(|| p.hook_settings("r-check0000001".into(), hooks.clone()).blocking()) {
        (Err(e), _) if e.refusal().is_some() => {
            r.fail(format!("hook-settings refused the sample hooks: {e} (lab cannot launch runs)"))
        }
        (Err(e), _) => r.fail(e.to_string()),
        (Ok(None), took) => r.ok(format!("hook-settings ({}): none (the hooks go on the command line)", ms(took))),
        (Ok(Some(doc)), took) => match serde_json::from_str::<serde_json::Value>(&doc) {
            Err(e) => r.fail(format!("hook-settings is not JSON ({e}); lab refuses to write it")),
            Ok(v) => {
                r.ok(format!("hook-settings ({}): {} bytes of JSON", ms(took), doc.len()));
                let strings = json_strings(&v);
                for h in &hooks {
                    if !strings.iter().any(|s| s.contains(h.command.as_str())) {
                        r.warn(format!("hook-settings never runs the command for {}", h.binding.event));
                    }
                }
            }
        },
    }
    match p.pending_dialog(b"not json".to_vec(), Vec::new()).blocking() {
        Err(e) if e.refusal().is_some() => r.ok(format!("pending-dialog rejects a malformed spool: {e}")),
        Err(e) => r.fail(format!("pending-dialog on a malformed spool: {e}")),
        Ok(_) => r.warn("pending-dialog accepted a spool that is not JSON"),
    }
    match p.blocked_state(b"not json".to_vec()).blocking() {
        Err(e) if e.refusal().is_none() => r.fail(format!("blocked-state on a malformed marker: {e}")),
        _ => r.ok("blocked-state survives a malformed marker"),
    }
    match p.session_info(b"not json".to_vec()).blocking() {
        Err(e) if e.refusal().is_none() && e.kind != crate::agents::components::CallErrorKind::Unsupported => {
            r.fail(format!("session-info on a malformed payload: {e}"))
        }
        _ => r.ok("session-info survives a malformed payload"),
    }
    if p.screen_reader() {
        for (what, pane) in [("an empty pane", String::new()), ("a pane of plain output", "$ make\nok\n".repeat(20))] {
            match p.read_screen(pane).blocking() {
                Ok(None) => r.ok(format!("read-screen: nothing on {what}")),
                Ok(Some(d)) => r.warn(format!("read-screen sees a {} dialog on {what}", d.kind())),
                Err(e) => r.fail(format!("read-screen on {what}: {e}")),
            }
        }
    }
    let Some(d) = dialogs.iter().find(|d| d.answerable) else {
        r.info("(no sample dialog is answerable: plan-answer not exercised)");
        return;
    };
    let first = |d: &Dialog| -> Vec<Answer> {
        match &d.body {
            DialogBody::Question(qs) => {
                qs.iter().map(|q| if q.multi_select { Answer::Options(vec![0]) } else { Answer::Option(0) }).collect()
            }
            _ => vec![Answer::Option(0)],
        }
    };
    match timed(|| p.plan_answer(d.clone(), first(d)).blocking()) {
        (Err(e), _) if e.refusal().is_some() => {
            r.fail(format!("plan-answer refused the first option of an answerable {}: {e}", d.tool_name))
        }
        (Err(e), _) => r.fail(e.to_string()),
        (Ok(plan), took) => match crate::runs::answer::keystrokes::validate(&plan) {
            Err(e) => r.fail(format!("plan-answer for {}: {e}", d.tool_name)),
            Ok(()) => {
                let played: Vec<String> = plan.steps.iter().map(crate::runs::answer::keystrokes::describe).collect();
                r.ok(format!("plan-answer({}, first option) ({}): {played:?}", d.tool_name, ms(took)));
                r.info(format!(
                    "(played {} apart once the prompt is drawn, waiting at most {})",
                    ms(plan.pause),
                    ms(plan.drawn_within)
                ));
            }
        },
    }
    match p.is_drawn(d.clone(), String::new()).blocking() {
        Ok(false) => r.ok("is-drawn: an empty pane does not show the prompt"),
        Ok(true) => r.warn("is-drawn says an empty pane shows the prompt (lab would type before it is drawn)"),
        Err(e) => r.fail(format!("is-drawn: {e}")),
    }
    let out_of_range: Vec<Answer> = first(d).iter().map(|_| Answer::Option(999)).collect();
    match p.plan_answer(d.clone(), out_of_range).blocking() {
        Err(e) if e.refusal().is_some() => r.ok("plan-answer rejects an option out of range"),
        Err(e) => r.fail(format!("plan-answer on an option out of range: {e}")),
        Ok(_) => r.warn("plan-answer accepted option 999 (lab checks nothing: it plays what it gets)"),
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
    use crate::agents::components::fixtures;

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
        assert!(text.contains("sessions     neither resume nor fork"), "{text}");
        assert!(text.contains("sandbox      writes nothing; reads nothing; reaches nothing"), "{text}");
        assert!(
            text.contains(
                "lab:provider@0.9.0 (this lab loads lab:provider@0.9.0, lab:provider@0.8.0, lab:provider@0.7.0, lab:provider@0.6.0, lab:provider@0.5.0, lab:provider@0.4.0, lab:provider@0.3.0, lab:provider@0.2.0, lab:provider@0.1.0)"
            ),
            "{text}"
        );
        assert!(text.contains("provider     plainlog 0.1.0"), "{text}");
        assert!(text.contains("map-dialog(ask): question dialog, 1 question, 2 options, not answerable"), "{text}");
        assert!(text.contains("cp ") && text.contains("/nonexistent/lab-home/providers/"), "{text}");
    }

    #[test]
    fn an_acp_provider_shows_its_declaration() {
        let (res, text) = report(Path::new(fixtures::ACP_FIXTURE));
        assert_eq!(res.unwrap().failures, 0, "{text}");
        assert!(text.contains("exports      acp-agent"), "{text}");
        assert!(text.contains("provider     fake-acp 0.1.0 (Fake ACP (declared))"), "{text}");
        assert!(text.contains("modes        ask, yolo"), "{text}");
        assert!(text.contains("capability   acp: lab runs the agent"), "{text}");
        assert!(text.contains(": fake-acp --declared-by component; env: FAKE_ACP_DECLARED"), "{text}");
        assert!(!text.contains("parse-transcript"), "nothing of a tmux provider is asked: {text}");
        assert!(text.contains("result: OK"), "{text}");
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
