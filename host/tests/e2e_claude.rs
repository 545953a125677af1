//! End-to-end: lab driving the REAL Claude Code binary.
//!
//! Each test starts its own world: a `lab serve` on a loopback port with its own home,
//! an agent HOME pre-seeded with `.claude.json` (onboarding done, the API key approved,
//! the workdir trusted — docs/providers/claude-code/observed-2.1.198.md §2), and its own
//! `messages-standin` on 127.0.0.1 as the only "model". lab.toml points
//! `[providers.claude-code]` at `$LAB_CLAUDE_BIN` with the offline environment. Every
//! step an operator takes goes through lab's HTTP API (POST /runs, GET …/messages,
//! GET …/events, POST …/dialog/answer, POST …/messages, POST …/stop); tmux send-keys is
//! used directly only where the scenario has the operator use the TUI. Each scenario
//! checks lab's API *and* what Claude Code recorded (transcript, hook payloads) or sent
//! to the stand-in.
//!
//! The agent HOME also carries a user-level `~/.claude/settings.json` with observe-only
//! recorder hooks (PreToolUse/PostToolUse on the two dialog tools, Notification, Stop)
//! that append each payload with a timestamp to `<world>/hooks.jsonl`; Claude Code merges
//! them additively with lab's `--settings` hooks. They let the tests see which hooks
//! fired (no PostToolUse on Esc, PostToolUse with `answers: {}` on auto-continue).
//!
//! The binary: `LAB_CLAUDE_BIN` (scripts/test sets it from scripts/install-claude.sh;
//! `LAB_CLAUDE_VERSION=x scripts/e2e` checks another version). Missing or not
//! executable: with `CI=true` every test fails; otherwise each prints a loud SKIPPED.
//!
//! Concurrency: the tests run in parallel (cargo's default), at most `LAB_E2E_JOBS`
//! (default 2) real claude processes at a time (a counting semaphore below, a guard for
//! many-core machines). No serialisation was needed: 6 concurrent claudes on 2 cores
//! passed. The whole file takes ~70 s here, most of it the 60 s auto-continue test;
//! the others take 3–10 s each.
//!
//! Operators in these tests answer the moment lab shows a dialog (~10 ms after the
//! hook, before Claude Code has drawn its picker), which is what proves lab's settle
//! wait before playing keys (`PICKER_SETTLE` in host/src/runs/answer/keystrokes.rs).
//!
//! Printed per run, on stderr and appended to `test-output/e2e/latency.txt`: the dialog
//! latency (spool file written → dialog on lab's SSE stream), when the picker was drawn
//! and when the pending tool_use reached the transcript (relative to the spool), and
//! the Notification / auto-continue timings. A failing test keeps its evidence (lab's
//! log, hook payloads, stand-in requests, transcript, runtime files) under
//! `test-output/e2e/failed-<test>-<pid>/`.

mod common;

use common::*;
use messages_standin::{Matcher, Reply, Script, Standin};
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// How long a launch may take to reach the first dialog on a loaded 2-core machine
/// (1.4–3 s when idle).
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// The AskUserQuestion picker text once it is drawn (compat §7).
const PICKER: &str = "Enter to select";
/// Pause between keys the "operator" types in the TUI (lab's own pacing).
const TUI_KEY_DELAY: Duration = Duration::from_millis(250);
const QUESTION: &str = "Which database should we use?";

// ---------------------------------------------------------------------------------------
// The binary, its version, the concurrency limit
// ---------------------------------------------------------------------------------------

fn claude_bin() -> Option<PathBuf> {
    agent_bin("LAB_CLAUDE_BIN", "scripts/install-claude.sh", "the end-to-end tests against the real claude")
}

/// `2.1.198` from `claude --version` ("2.1.198 (Claude Code)").
fn claude_version(bin: &Path) -> String {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        let out = std::process::Command::new(bin)
            .arg("--version")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .output()
            .expect("run claude --version");
        String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("unknown").to_string()
    })
    .clone()
}

/// The release whose picker geometry the cursor scenario checks in detail (Up wraps
/// from option 1 onto "Type something.", compat §7).
const WRAP_OBSERVED_ON: &str = "2.1.198";

/// Whether this release answers an AskUserQuestion by itself after 60 s idle (2.1.198
/// does; 2.1.200 stopped it).
fn auto_continues(version: &str) -> bool {
    let parts = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    parts(version) < parts("2.1.200")
}

#[test]
fn releases_before_2_1_200_auto_continue() {
    assert!(auto_continues("2.1.198") && auto_continues("2.0.99"));
    assert!(!auto_continues("2.1.200") && !auto_continues("2.1.332") && !auto_continues("3.0.0"));
}

/// At most this many real claude processes at a time (each is a Bun binary that is
/// CPU-hungry at start-up; the key recipes are paced at 250 ms).
fn max_jobs() -> usize {
    std::env::var("LAB_E2E_JOBS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(2)
}

// ---------------------------------------------------------------------------------------
// A test's world
// ---------------------------------------------------------------------------------------

struct E2e {
    name: &'static str,
    started: Instant,
    /// `None` only while lab serve is being restarted.
    lab: Option<Lab>,
    standin: Standin,
    w: World,
    claude: PathBuf,
    /// lab serve's stderr (its log), appended across restarts.
    lab_log: PathBuf,
    _slot: Slot,
}

/// Sets up a world for `name` with `script`, or `None` when the suite is skipped.
fn setup(name: &'static str, script: Script) -> Option<E2e> {
    setup_with_env(name, script, &[])
}

/// [`setup`], with extra variables in the agent's environment (lab.toml `env`).
fn setup_with_env(name: &'static str, script: Script, extra_env: &[(&str, &str)]) -> Option<E2e> {
    let claude = claude_bin()?;
    let slot = Slot::take(max_jobs());
    let w = World::new();

    // .claude.json: exactly what docs/providers/claude-code/observed-2.1.198.md §2 says
    // works, and `firstStartVersion` as a fresh install writes it (2.1.332 then starts in
    // its fullscreen renderer unless the run's settings pin the classic one).
    let seed = json!({
        "hasCompletedOnboarding": true,
        "firstStartVersion": claude_version(&claude),
        "theme": "dark",
        "customApiKeyResponses": {"approved": [&STANDIN_KEY[STANDIN_KEY.len() - 20..]], "rejected": []},
        "projects": {w.workdir.to_str().unwrap(): {"hasTrustDialogAccepted": true}}
    });
    std::fs::write(w.agent_home.join(".claude.json"), serde_json::to_vec_pretty(&seed).unwrap()).unwrap();

    // Observe-only recorder hooks in the user's settings (merged with lab's --settings).
    let rec = w.dir.path().join("rec-hook");
    std::fs::write(
        &rec,
        format!(
            "#!/bin/sh\np=$(cat)\nt=$(date +%s%3N)\nprintf '{{\"hook\":\"%s\",\"at_ms\":%s,\"payload\":%s}}\\n' \"$1\" \"$t\" \"$p\" >> {}\nexit 0\n",
            lab::util::shell::quote(w.dir.path().join("hooks.jsonl").to_str().unwrap())
        ),
    )
    .unwrap();
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook =
        |event: &str| json!([{"type": "command", "command": format!("{} {event}", rec.display()), "timeout": 10}]);
    let user_settings = json!({"hooks": {
        "PreToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode", "hooks": hook("PreToolUse")}],
        "PostToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode", "hooks": hook("PostToolUse")}],
        "Notification": [{"hooks": hook("Notification")}],
        "PermissionRequest": [{"hooks": hook("PermissionRequest")}],
        "Stop": [{"hooks": hook("Stop")}],
    }});
    std::fs::create_dir_all(w.agent_home.join(".claude")).unwrap();
    std::fs::write(w.agent_home.join(".claude/settings.json"), serde_json::to_vec_pretty(&user_settings).unwrap())
        .unwrap();

    let standin = Standin::start(script).expect("start the messages stand-in");
    let mut env = claude_offline_env(standin.base_url());
    env.extend([("LANG", "C.UTF-8".into()), ("TERM", "xterm-256color".into())]);
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| (*k, v.clone()))
        .chain(extra_env.iter().map(|(k, v)| (*k, v.to_string())))
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ {} }}\n",
        claude.display().to_string(),
        env.join(", ")
    ));
    let lab_log = w.dir.path().join("lab-serve.log");
    let mut e = E2e { name, started: Instant::now(), lab: None, standin, w, claude, lab_log, _slot: slot };
    e.lab = Some(e.serve());
    eprintln!("[{name}] claude {} at {}", claude_version(&e.claude), e.claude.display());
    Some(e)
}

impl E2e {
    /// Start `lab serve` for this world: the test's environment minus anything that
    /// could point the agent elsewhere (lab.toml sets what the agent needs), stderr to
    /// a log file.
    fn serve(&self) -> Lab {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.lab_log).unwrap();
        Lab::start_with(&self.w, |cmd| {
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy().into_owned();
                if k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k == "TMUX" || k == "TMUX_PANE" {
                    cmd.env_remove(&k);
                }
            }
            cmd.stderr(log);
        })
    }

    fn lab(&self) -> &Lab {
        self.lab.as_ref().expect("lab serve is running")
    }

    fn restart_lab(&mut self) {
        self.lab.take().expect("lab serve is running").stop();
        self.lab = Some(self.serve());
    }

    fn create(&self, prompt: &str, permission_mode: Option<&str>) -> Run {
        self.create_in(&self.w.workdir, prompt, permission_mode)
    }

    fn create_in(&self, workdir: &Path, prompt: &str, permission_mode: Option<&str>) -> Run {
        let run = self.lab().create_run_in(workdir, "claude-code", prompt, permission_mode);
        let id = run["id"].as_str().unwrap().to_string();
        let events = EventLog::open(self.lab(), &id);
        Run {
            id,
            target: run["tmux_target"].as_str().unwrap().to_string(),
            session_id: run["session_id"].as_str().map(str::to_string),
            events,
            created: Instant::now(),
        }
    }

    fn view(&self, run: &Run) -> Value {
        self.lab().view(&run.id)
    }

    fn wait_view(&self, run: &Run, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(timeout, &format!("[{}] {what}", self.name), || Some(self.view(run)).filter(|v| pred(v)))
    }

    fn answer(&self, run: &Run, tool_id: &str, answers: Value) -> (u16, Value) {
        self.lab().post(&format!("/runs/{}/dialog/answer", run.id), &json!({"tool_id": tool_id, "answers": answers}))
    }

    fn runtime_file(&self, run: &Run, kind: &str) -> PathBuf {
        self.w.runtime().join(format!("{}.{kind}.json", run.id))
    }

    fn wait_gone(&self, path: &Path, what: &str) {
        wait_for(STEP_TIMEOUT, &format!("[{}] {what}", self.name), || (!path.exists()).then_some(()));
    }

    /// `$HOME/.claude/projects/<slug>/<session>.jsonl` (compat §5).
    fn transcript_path(&self, run: &Run) -> Option<PathBuf> {
        let sid = run.session_id.clone().or_else(|| {
            let (_, r) = self.lab().get(&format!("/runs/{}", run.id));
            r["session_id"].as_str().map(str::to_string)
        })?;
        let slug: String =
            self.w.workdir.to_str().unwrap().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        Some(self.w.agent_home.join(".claude/projects").join(slug).join(format!("{sid}.jsonl")))
    }

    /// The transcript Claude Code writes for this run, one JSON value per line.
    fn transcript(&self, run: &Run) -> Vec<Value> {
        let Some(path) = self.transcript_path(run) else { return Vec::new() };
        std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Hook payloads recorded by the user-level recorder hooks: `{hook, at_ms, payload}`.
    fn hooks(&self) -> Vec<Value> {
        std::fs::read_to_string(self.w.dir.path().join("hooks.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn hooks_named(&self, hook: &str) -> Vec<Value> {
        self.hooks().into_iter().filter(|h| h["hook"] == hook).collect()
    }

    fn wait_hook(&self, hook: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(timeout, &format!("[{}] a {hook} hook", self.name), || {
            self.hooks_named(hook).into_iter().find(|h| pred(&h["payload"]))
        })
    }

    fn screen(&self, run: &Run) -> String {
        String::from_utf8_lossy(&self.w.tmux(&["capture-pane", "-p", "-t", &run.target]).stdout).into_owned()
    }

    fn wait_screen(&self, run: &Run, needle: &str, timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen(run);
            if s.contains(needle) {
                return s;
            }
            if start.elapsed() > timeout {
                panic!("[{}] the screen never showed {needle:?}; it shows:\n{s}", self.name);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The operator types keys in the TUI, paced like lab's own recipes.
    fn tui_keys(&self, run: &Run, keys: &[&str]) {
        for k in keys {
            let out = self.w.tmux(&["send-keys", "-t", &run.target, k]);
            assert!(out.status.success(), "send-keys {k}: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(TUI_KEY_DELAY);
        }
    }

    /// Wait for the first pending dialog on the SSE stream; check it is the stand-in's
    /// tool call, spooled; record the latency from the spool file's mtime to its
    /// arrival on the stream.
    fn wait_dialog(&self, run: &mut Run) -> Value {
        let (at, ev) = run.events.wait(LAUNCH_TIMEOUT, &format!("[{}] a pending dialog on SSE", self.name), |v| {
            !v["pending_dialog"].is_null()
        });
        let d = ev["pending_dialog"].clone();
        assert_eq!(ev["state"], "question", "{ev}");
        assert_eq!(d["source"], "spool", "the first dialog lab shows comes from the spool: {d}");
        let emitted = self.standin.emitted_tool_uses();
        let tool_id = d["tool_id"].as_str().unwrap();
        assert!(
            emitted.iter().any(|t| t.id == tool_id),
            "{tool_id} is one of the stand-in's tool_use ids: {emitted:?}"
        );
        let spool = self.runtime_file(run, "spool");
        let spooled: Value = serde_json::from_slice(&std::fs::read(&spool).expect("the spool exists")).unwrap();
        assert_eq!(spooled["tool_use_id"], tool_id, "{spooled}");
        assert_eq!(spooled["hook_event_name"], "PreToolUse");
        let written = std::fs::metadata(&spool).unwrap().modified().unwrap();
        let ms = at.duration_since(written).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(-1.0);
        let launch = run.created.elapsed();
        let line = format!(
            "e2e latency spool→SSE: {ms:.0} ms  ({} run {}, dialog on SSE {:.1} s after POST /runs)",
            self.name,
            run.id,
            launch.as_secs_f64()
        );
        record_latency(&line);
        self.watch_draw_and_flush(run, written, tool_id.to_string());
        d
    }

    /// Diagnostic only, in the background (the test is not held up): when the dialog
    /// is drawn in the pane, and when its pending tool_use line lands in the transcript,
    /// relative to the spool write.
    fn watch_draw_and_flush(&self, run: &Run, written: SystemTime, tool_id: String) {
        let socket = self.w.home.join("tmux.sock");
        let (target, name, rid) = (run.target.clone(), self.name, run.id.clone());
        let transcript = self.transcript_path(run);
        std::thread::spawn(move || {
            let start = Instant::now();
            let since = || SystemTime::now().duration_since(written).map(|d| d.as_millis()).unwrap_or(0);
            let (mut drawn, mut flushed) = (None, None);
            let first_flush_check = since();
            while start.elapsed() < Duration::from_secs(10) && (drawn.is_none() || flushed.is_none()) {
                if drawn.is_none() {
                    let out = std::process::Command::new("tmux")
                        .arg("-S")
                        .arg(&socket)
                        .args(["capture-pane", "-p", "-t", &target])
                        .output();
                    // The world is gone (the test ended): nothing to report.
                    let Some(out) = out.ok().filter(|o| o.status.success()) else { return };
                    let screen = String::from_utf8_lossy(&out.stdout);
                    if screen.contains(PICKER) || screen.contains("Exit plan mode") {
                        drawn = Some(since());
                    }
                }
                if flushed.is_none() {
                    let text = transcript.as_ref().and_then(|t| std::fs::read_to_string(t).ok()).unwrap_or_default();
                    if text.contains(&format!("\"id\":\"{tool_id}\"")) {
                        flushed = Some(since());
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let show = |v: Option<u128>| v.map(|ms| format!("{ms} ms")).unwrap_or_else(|| "not within 10 s".into());
            let flush = match flushed {
                Some(ms) if ms <= first_flush_check => format!("≤ {ms} ms (already there at the first look)"),
                other => show(other),
            };
            let line = format!(
                "e2e after the spool: picker drawn {}, pending tool_use in the transcript {flush}  ({name} run {rid})",
                show(drawn)
            );
            record_latency(&line);
        });
    }
}

/// `$LAB_TEST_OUTPUT/e2e`, else `<repo>/test-output/e2e` (git-ignored).
fn output_dir() -> PathBuf {
    std::env::var_os("LAB_TEST_OUTPUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../test-output")))
        .join("e2e")
}

/// A figure worth seeing in every run: on the process's stderr (not captured by
/// libtest) and appended to `test-output/e2e/latency.txt`.
fn record_latency(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
    let dir = output_dir();
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("latency.txt")) {
        let _ = writeln!(f, "{line}");
    }
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

impl Drop for E2e {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "\n===== [{}] failed after {:.1} s; diagnostics =====",
                self.name,
                self.started.elapsed().as_secs_f64()
            );
            let out = self.w.tmux(&["list-panes", "-a", "-F", "#{session_name}"]);
            for s in String::from_utf8_lossy(&out.stdout).lines() {
                let screen = self.w.tmux(&["capture-pane", "-p", "-t", s]);
                eprintln!("--- screen of {s}:\n{}", String::from_utf8_lossy(&screen.stdout).trim_end());
            }
            eprintln!("--- hooks:");
            for h in self.hooks() {
                let p = &h["payload"];
                eprintln!("  {} {} {} {}", h["at_ms"], h["hook"], p["tool_use_id"], p["notification_type"]);
            }
            eprintln!("--- stand-in requests:");
            for r in self.standin.requests() {
                eprintln!(
                    "  #{} +{}ms {} {} {:?} reply={:?}",
                    r.index, r.elapsed_ms, r.method, r.path, r.kind, r.reply
                );
            }
            let log = std::fs::read_to_string(&self.lab_log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- lab serve log (last {} lines):", tail.len());
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
            // Keep the evidence: the world's files are deleted with it.
            let keep = output_dir().join(format!("failed-{}-{}", self.name, std::process::id()));
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::copy(&self.lab_log, keep.join("lab-serve.log"));
            let _ = std::fs::copy(self.w.dir.path().join("hooks.jsonl"), keep.join("hooks.jsonl"));
            let _ = std::fs::write(
                keep.join("standin-requests.json"),
                serde_json::to_vec_pretty(&self.standin.requests()).unwrap_or_default(),
            );
            let _ = copy_tree(&self.w.agent_home.join(".claude/projects"), &keep.join("transcripts"));
            let _ = copy_tree(&self.w.runtime(), &keep.join("runtime"));
            eprintln!("--- evidence kept in {}", keep.display());
        } else {
            eprintln!("[{}] passed in {:.1} s", self.name, self.started.elapsed().as_secs_f64());
        }
        // lab serve stops first (Lab's Drop); then the tmux server, and we wait for claude
        // and its hook processes to be gone — on SIGHUP claude still writes its state
        // (~/.claude.json) and may run a Stop hook, which would recreate the world's
        // directory after World's Drop removed it. Then World's Drop and the stand-in.
        self.lab.take();
        let panes = self.w.tmux(&["list-panes", "-a", "-F", "#{pane_pid}"]);
        let pids: Vec<i32> = String::from_utf8_lossy(&panes.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .flat_map(process_tree)
            .collect();
        let _ = self.w.tmux(&["kill-server"]);
        // Gone, or a zombie waiting for whoever inherited it.
        let alive = |p: &i32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|st| st.rfind(')').map(|i| st[i + 1..].trim_start().starts_with('Z')))
                .is_some_and(|zombie| !zombie)
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids.iter().any(alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in pids.iter().filter(|p| alive(p)) {
            unsafe {
                libc::kill(*p, libc::SIGKILL);
            }
        }
    }
}

struct Run {
    id: String,
    target: String,
    session_id: Option<String>,
    events: EventLog,
    created: Instant,
}

// ---------------------------------------------------------------------------------------
// lab's SSE stream
// ---------------------------------------------------------------------------------------

/// No flicker: once the dialog left the view it never came back, and every event that
/// showed it showed it from the spool.
fn assert_no_flicker(events: &mut EventLog, tool_id: &str) {
    let seen = events.drain();
    let showing: Vec<bool> = seen.iter().map(|(_, v)| v["pending_dialog"]["tool_id"] == tool_id).collect();
    let first = showing.iter().position(|s| *s).expect("the dialog was on the stream");
    let last = showing.iter().rposition(|s| *s).unwrap();
    assert!(showing[first..=last].iter().all(|s| *s), "the dialog flickered on SSE: {showing:?}");
    for (_, v) in seen.iter().filter(|(_, v)| v["pending_dialog"]["tool_id"] == tool_id) {
        assert_eq!(v["pending_dialog"]["source"], "spool", "{v}");
    }
}

// ---------------------------------------------------------------------------------------
// Scripts and small helpers
// ---------------------------------------------------------------------------------------

/// One question, three options: PostgreSQL, SQLite, Redis.
fn ask_script() -> Script {
    Script::new()
        .turn(
            Matcher::Any,
            Reply::tool_use_with_text("AskUserQuestion", three_options(), "I need to ask you something."),
        )
        .after_tool_result("Thanks, noted your choice.")
        .side_reply("Pick a database")
}

fn two_questions() -> Value {
    json!({"questions": [
        {"question": QUESTION, "header": "Database", "multiSelect": false, "options": [
            {"label": "Postgres", "description": "Relational, robust"},
            {"label": "SQLite", "description": "Embedded, simple"},
            {"label": "MongoDB", "description": "Document store"}]},
        {"question": "Which web framework?", "header": "Framework", "multiSelect": false, "options": [
            {"label": "Axum", "description": "Tokio-based"},
            {"label": "Actix", "description": "Actor-based"}]}
    ]})
}

/// `Your questions have been answered: "<q>"="<label>". …` — the fragment naming the answer.
fn answered(question: &str, label: &str) -> String {
    format!("\"{question}\"=\"{label}\"")
}

fn wait_tool_result(e: &E2e, tool_id: &str) -> (String, bool) {
    e.standin
        .wait_for_tool_result(tool_id, STEP_TIMEOUT)
        .unwrap_or_else(|| panic!("[{}] the stand-in never received a tool_result for {tool_id}", e.name))
}

/// The transcript's `tool_result` blocks for `tool_id`: `(content text, is_error, toolUseResult)`.
fn transcript_results(lines: &[Value], tool_id: &str) -> Vec<(String, bool, Value)> {
    let mut out = Vec::new();
    for l in lines.iter().filter(|l| l["type"] == "user") {
        for b in l["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" && b["tool_use_id"] == tool_id {
                out.push((
                    messages_standin::tool_result_text(b),
                    b["is_error"].as_bool().unwrap_or(false),
                    l["toolUseResult"].clone(),
                ));
            }
        }
    }
    out
}

fn transcript_has_tool_use(lines: &[Value], tool_id: &str) -> bool {
    lines.iter().filter(|l| l["type"] == "assistant").any(|l| {
        l["message"]["content"].as_array().into_iter().flatten().any(|b| b["type"] == "tool_use" && b["id"] == tool_id)
    })
}

fn tool_id(d: &Value) -> String {
    d["tool_id"].as_str().expect("a tool_id").to_string()
}

fn labels(d: &Value, q: usize) -> Vec<String> {
    d["questions"][q]["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap().to_string()).collect()
}

fn single_select_keys(n: usize, i: usize) -> Vec<String> {
    let mut keys = vec!["Down".to_string(); n + 1];
    keys.extend(vec!["Up".to_string(); n + 1]);
    keys.extend(vec!["Down".to_string(); i]);
    keys.push("Enter".into());
    keys
}

/// The pane's process and all its descendants.
fn process_tree(root: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid: i32 = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        parent_of.push((pid, ppid));
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

/// Scenario 1: One question, three options, answered with option index 1 through lab.
#[test]
fn single_question_is_spooled_shown_and_answered_by_option_index() {
    let Some(e) = setup("single_question", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    assert_eq!(d["kind"], "question");
    assert_eq!(d["tool_name"], "AskUserQuestion");
    assert_eq!(d["answerable"], true);
    assert_eq!(d["questions"][0]["question"], QUESTION);
    assert_eq!(d["questions"][0]["multi_select"], false);
    assert_eq!(labels(&d, 0), ["PostgreSQL", "SQLite", "Redis"]);
    let id = tool_id(&d);
    assert!(e.runtime_file(&run, "settings").exists());
    // The classic renderer, pinned by the run's settings: a fresh install of 2.1.332
    // would draw in the alternate screen.
    let alt = e.w.tmux(&["display-message", "-p", "-t", &run.target, "#{alternate_on}"]).stdout;
    assert_eq!(String::from_utf8_lossy(&alt).trim(), "0", "the run draws in the main screen");
    // The operator answers the moment lab shows the dialog (~10 ms after the hook,
    // before Claude Code has drawn its picker): lab must not race the picker.

    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["keys"], json!(single_select_keys(3, 1)));

    // What Claude Code sent back to the "model".
    let (result, is_error) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "SQLite")), "{result}");
    assert!(!is_error);
    assert_eq!(e.standin.tool_results_for(&id).len(), 1);
    // PostToolUse fired with the answer; lab's spool is gone; the view moved on.
    let post = e.wait_hook("PostToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    assert_eq!(post["payload"]["tool_input"]["answers"][QUESTION], "SQLite", "{post}");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["state"] != "question");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the answer", |v| v["state"] == "idle");
    assert!(v["pending_dialog"].is_null());
    let msgs = v["messages"].as_array().unwrap();
    let tr = msgs.iter().find(|m| m["kind"] == "tool_result" && m["tool_use_id"] == id.as_str()).expect("tool_result");
    assert!(tr["text"].as_str().unwrap().contains("SQLite"), "{tr}");
    assert!(msgs.iter().any(|m| m["kind"] == "tool_use" && m["tool_use_id"] == id.as_str()));
    assert!(msgs.iter().any(|m| m["role"] == "assistant" && m["text"] == "Thanks, noted your choice."));
    let seqs: Vec<u64> = msgs.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    // The transcript agrees.
    let t = e.transcript(&run);
    let rs = transcript_results(&t, &id);
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert_eq!(rs[0].2["answers"][QUESTION], "SQLite");
    assert_no_flicker(&mut run.events, &id);
}

/// Scenario 2: Free text full of tmux and shell metacharacters, typed through lab's Other recipe.
#[test]
fn free_text_answer_is_recorded_verbatim() {
    let Some(e) = setup("free_text", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let text = "Use C-c; then \"Enter\" — ok é, 'single' $HOME \\n;";
    let (status, body) = e.answer(&run, &id, json!([{"other": text}]));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["keys"].as_array().unwrap().iter().filter(|k| **k == format!("text:{text}")).count(), 1, "{body}");

    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, text)), "not verbatim: {result}");
    let post = e.wait_hook("PostToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    assert_eq!(post["payload"]["tool_input"]["answers"][QUESTION], text);
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the answer", |v| v["state"] == "idle");
    let tr = v["messages"].as_array().unwrap().iter().find(|m| m["kind"] == "tool_result").cloned().unwrap();
    assert!(tr["text"].as_str().unwrap().contains(text), "{tr}");
    let rs = transcript_results(&e.transcript(&run), &id);
    assert_eq!(rs[0].2["answers"][QUESTION], text);
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
}

/// Scenario 3: The operator presses Esc in the TUI: no PostToolUse fires; lab's transcript
/// backstop drops the dialog and its GC deletes the spool. Then the operator stops the run.
#[test]
fn esc_in_the_tui_clears_the_dialog_through_the_transcript_backstop() {
    let Some(e) = setup("esc", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let spool = e.runtime_file(&run, "spool");
    e.wait_screen(&run, PICKER, STEP_TIMEOUT);
    e.tui_keys(&run, &["Escape"]);

    let (_, ev) = run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    assert_ne!(ev["state"], "question");
    e.wait_gone(&spool, "lab's GC to delete the stale spool");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after Esc", |v| v["state"] == "idle");
    let msgs = v["messages"].as_array().unwrap();
    let tr = msgs.iter().find(|m| m["kind"] == "tool_result" && m["tool_use_id"] == id.as_str()).expect("tool_result");
    assert_eq!(tr["is_error"], true, "{tr}");
    assert!(msgs
        .iter()
        .any(|m| m["role"] == "system" && m["text"].as_str().unwrap().starts_with("[Request interrupted")));
    // What Claude Code did: an error tool_result in the transcript, no PostToolUse hook,
    // and no request to the model (the turn ends locally).
    let rs = transcript_results(&e.transcript(&run), &id);
    assert_eq!(rs.len(), 1);
    assert!(rs[0].1, "is_error: {rs:?}");
    assert!(e.hooks_named("PostToolUse").is_empty(), "no PostToolUse on Esc: {:?}", e.hooks_named("PostToolUse"));
    assert!(e.standin.tool_results_for(&id).is_empty());
    assert_eq!(e.standin.main_requests().len(), 1);
    let (status, body) = e.answer(&run, &id, json!([{"option": 0}]));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    assert_no_flicker(&mut run.events, &id);

    // The operator stops the run.
    let (status, body) = e.lab().post(&format!("/runs/{}/stop", run.id), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "ended");
    assert!(!e.w.tmux(&["has-session", "-t", &format!("={}", run.target)]).status.success());
    assert_eq!(runtime_files(&e.w.runtime()), Vec::<String>::new(), "runtime files left behind");
}

/// Scenario 4: The claude process is SIGKILLed while its dialog is pending.
#[test]
fn killing_claude_mid_dialog_ends_the_run_and_removes_its_files() {
    let Some(e) = setup("kill", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    // Claude Code writes its transcript asynchronously: wait until the pending tool_use
    // is in it (lab's chat shows it), so the evidence below is deterministic.
    e.wait_view(&run, STEP_TIMEOUT, "the pending tool_use in the chat", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use" && m["tool_use_id"] == id.as_str())
    });
    let out = e.w.tmux(&["display-message", "-p", "-t", &run.target, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("pane pid");
    let tree = process_tree(pid);
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    eprintln!("[kill] pane pid {pid} ({}), killing {tree:?}", comm.trim());
    for p in &tree {
        unsafe {
            libc::kill(*p, libc::SIGKILL);
        }
    }
    let (_, ev) = run.events.wait(STEP_TIMEOUT, "the run to end on SSE", |v| v["state"] == "ended");
    assert!(ev["pending_dialog"].is_null());
    for f in ["settings", "spool", "marker"] {
        assert!(!e.runtime_file(&run, f).exists(), "{f} file left behind");
    }
    let (_, r) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!(r["state"], "ended");
    assert!(r["ended_at"].is_string(), "{r}");
    let (status, body) = e.answer(&run, &id, json!([{"option": 0}]));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "hello?"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("run_ended")), "{body}");
    // Claude Code died with the question open: the tool_use is in its transcript, no
    // result anywhere.
    let t = e.transcript(&run);
    assert!(transcript_has_tool_use(&t, &id));
    assert!(transcript_results(&t, &id).is_empty());
    assert!(e.standin.tool_results_for(&id).is_empty());
    assert!(e.hooks_named("PostToolUse").is_empty());
}

/// Scenario 5: `lab serve` restarts while the dialog is pending: the dialog is still there
/// (the spool survived) and answering it works.
#[test]
fn a_lab_restart_mid_dialog_keeps_it_shown_and_answerable() {
    let Some(mut e) = setup("restart", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    // The transcript lines of the pending turn land a few ms after the spool; restart
    // once they are in the chat, so the messages can be compared across the restart.
    let before = e.wait_view(&run, STEP_TIMEOUT, "the pending tool_use in the chat", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use" && m["tool_use_id"] == id.as_str())
    });
    e.restart_lab();

    let (status, list) = e.lab().get("/runs");
    assert_eq!(status, 200);
    assert!(list.as_array().unwrap().iter().any(|r| r["id"] == run.id.as_str()), "{list}");
    let v = e.wait_view(&run, STEP_TIMEOUT, "the dialog after the restart", |v| v["state"] == "question");
    assert_eq!(v["pending_dialog"]["tool_id"], id.as_str());
    assert_eq!(v["pending_dialog"]["source"], "spool");
    assert_eq!(v["pending_dialog"]["answerable"], true);
    // Stable seqs: what was shown before is shown again with the same numbers. Claude
    // Code may write the turn's user line after the reply (a late flush), so the list
    // after the restart can hold more, after those.
    let (before, after) = (before["messages"].as_array().unwrap(), v["messages"].as_array().unwrap());
    assert!(after.len() >= before.len(), "messages were lost across the restart: {after:?}");
    assert_eq!(&after[..before.len()], &before[..], "seq numbers are stable across the restart");
    let mut events = EventLog::open(e.lab(), &run.id);
    let (status, body) = e.answer(&run, &id, json!([{"option": 2}]));
    assert_eq!(status, 202, "{body}");
    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "Redis")), "{result}");
    events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["state"] != "question");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    e.wait_view(&run, STEP_TIMEOUT, "idle after the answer", |v| v["state"] == "idle");
}

/// Scenario 6: The answer guard against the real picker: a stale tool_id, two concurrent
/// answers (exactly one plays keys), a repeated answer.
#[test]
fn stale_concurrent_and_repeated_answers_play_keys_once() {
    let Some(e) = setup("guard", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let (status, body) = e.answer(&run, "toolu_01StaleStaleStaleStale", json!([{"option": 0}]));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_changed")), "{body}");

    let url = e.lab().url.clone();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = [0usize, 2]
        .into_iter()
        .map(|option| {
            let (url, rid, tid, barrier) = (url.clone(), run.id.clone(), id.clone(), barrier.clone());
            let client = e.lab().client_from(reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)));
            std::thread::spawn(move || {
                barrier.wait();
                let r = client
                    .post(format!("{url}/runs/{rid}/dialog/answer"))
                    .json(&json!({"tool_id": tid, "answers": [{"option": option}]}))
                    .send()
                    .unwrap();
                (option, r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
            })
        })
        .collect();
    let results: Vec<(usize, u16, Value)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<&(usize, u16, Value)> = results.iter().filter(|r| r.1 == 202).collect();
    assert_eq!(winners.len(), 1, "exactly one answer plays keys: {results:?}");
    let loser = results.iter().find(|r| r.1 != 202).unwrap();
    assert_eq!((loser.1, loser.2["error"].as_str()), (409, Some("no_dialog")), "{loser:?}");
    let label = ["PostgreSQL", "SQLite", "Redis"][winners[0].0];

    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, label)), "{result}");
    e.wait_view(&run, STEP_TIMEOUT, "idle after the answer", |v| v["state"] == "idle");
    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    // Exactly one tool_result reached the model, in exactly one follow-up request.
    assert_eq!(e.standin.tool_results_for(&id).len(), 1);
    let mains = e.standin.main_requests();
    assert_eq!(mains.len(), 2, "the first request and the one carrying the answer");
    e.wait_hook("PostToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    assert_eq!(e.hooks_named("PostToolUse").len(), 1);
    assert_eq!(transcript_results(&e.transcript(&run), &id).len(), 1);
}

/// Scenario 7: ExitPlanMode in permission mode `plan`: shown with the plan text and the
/// prompt's own options, and approved from lab.
#[test]
fn exit_plan_mode_is_shown_with_its_plan_and_approved_from_lab() {
    let plan = "# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n";
    let script = Script::new()
        .tool_use("ExitPlanMode", json!({"plan": plan}))
        .after_tool_result("Plan approved; starting.")
        .side_reply("Plan a hello function");
    let Some(e) = setup("plan", script) else { return };
    let mut run = e.create("Plan a hello function.", Some("plan"));
    let (_, r) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!(r["permission_mode"], "plan");
    let d = e.wait_dialog(&mut run);
    assert_eq!(d["kind"], "plan", "{d}");
    assert_eq!(d["tool_name"], "ExitPlanMode");
    // 2.1.332's hook payload carries no plan: the card gets it from the transcript's
    // call, which may be written a moment after the hook.
    let v = e.wait_view(&run, STEP_TIMEOUT, "the plan's text", |v| v["pending_dialog"]["plan"].is_string());
    let d = v["pending_dialog"].clone();
    assert_eq!(d["plan"], plan);
    assert_eq!(d["answerable"], true, "{d}");
    assert_eq!(d["options"][0]["label"], "Yes", "the prompt's own options: {d}");
    assert!(d["deep_link"].is_string(), "{d}");
    let id = tool_id(&d);
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "go on"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");
    let pre = e.wait_hook("PreToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    assert_eq!(pre["payload"]["permission_mode"], "plan");

    // Approved from lab ("Exit plan mode? ❯ 1. Yes").
    let (status, body) = e.answer(&run, &id, json!([{"option": 0}]));
    assert_eq!(status, 202, "{body}");
    let (result, is_error) = wait_tool_result(&e, &id);
    // 2.1.198: "User has approved your plan…"; 2.1.332: "User has approved exiting plan mode…".
    assert!(result.starts_with("User has approved"), "{result}");
    assert!(!is_error);
    run.events.wait(STEP_TIMEOUT, "the plan dialog to leave the SSE view", |v| v["state"] != "question");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    e.wait_view(&run, STEP_TIMEOUT, "idle after approval", |v| v["state"] == "idle");
    let stop = e.wait_hook("Stop", STEP_TIMEOUT, |p| p["permission_mode"].is_string());
    assert_ne!(stop["payload"]["permission_mode"], "plan", "Claude Code left plan mode: {stop}");
}

/// Scenario 7b: a plan rejected from lab with what to change: Claude Code stays in plan
/// mode and the feedback reaches the model.
#[test]
fn exit_plan_mode_rejected_from_lab_with_feedback_reaches_the_model() {
    let plan = "# Plan\n\n1. Rewrite everything.\n";
    let script = Script::new()
        .tool_use("ExitPlanMode", json!({"plan": plan}))
        .turn(Matcher::Contains("keep the old parser".into()), Reply::text("Understood, I will keep it."))
        .side_reply("Plan a rewrite");
    let Some(e) = setup("plan_feedback", script) else { return };
    let mut run = e.create("Plan a rewrite.", Some("plan"));
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let feedback = d["feedback_option"].as_u64().expect("the plan prompt takes feedback");
    let (status, body) =
        e.answer(&run, &id, json!([{"feedback": {"option": feedback, "text": "keep the old parser"}}]));
    assert_eq!(status, 202, "{body}");
    let (result, is_error) = wait_tool_result(&e, &id);
    assert!(is_error, "the plan was rejected: {result}");
    wait_for(STEP_TIMEOUT, "the feedback to reach the model", || {
        e.standin.main_requests().iter().any(|r| r.body.to_string().contains("keep the old parser")).then_some(())
    });
    run.events.wait(STEP_TIMEOUT, "the plan dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    let stop = e.wait_hook("Stop", STEP_TIMEOUT, |p| p["permission_mode"].is_string());
    assert_eq!(stop["payload"]["permission_mode"], "plan", "still planning: {stop}");
}

/// Scenario 7d: the plan as a model writes it on 2.1.332: into the plan file Claude Code
/// names in its request (the stand-in fills the path in), then ExitPlanMode (deferred
/// behind ToolSearch there; on a release without ToolSearch that step is an error
/// result) called with no input. The card shows the file's text and the plan-file
/// prompt's rows, and "Yes, manually approve edits" from lab leaves plan mode.
#[test]
fn a_plan_written_to_its_plan_file_is_shown_with_its_text_and_approved_from_lab() {
    let plan = "# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n";
    let write = json!({"file_path": "{{path_with:/.claude/plans/}}", "content": plan});
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use_with_text("Write", write, "I will write the plan."))
        .turn(
            Matcher::ToolResultForPrevious,
            Reply::tool_use("ToolSearch", json!({"query": "select:ExitPlanMode", "max_results": 1})),
        )
        .turn(Matcher::ToolResultForPrevious, Reply::tool_use("ExitPlanMode", json!({})))
        .after_tool_result("Plan approved; starting.")
        .side_reply("Plan a hello function");
    let Some(e) = setup("plan_file", script) else { return };
    let mut run = e.create("Plan a hello function.", Some("plan"));
    let d = e.wait_dialog(&mut run);
    assert_eq!((d["kind"].as_str(), d["tool_name"].as_str()), (Some("plan"), Some("ExitPlanMode")), "{d}");
    let file = e.standin.emitted_tool_uses()[0].input["file_path"].as_str().unwrap().to_string();
    assert!(file.starts_with('/') && file.contains("/.claude/plans/"), "the plan file Claude Code named: {file}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), plan, "the model wrote its plan there");
    assert_eq!(d["plan"], plan, "the card has the file's text: {d}");
    let labels: Vec<&str> = d["options"].as_array().unwrap().iter().filter_map(|o| o["label"].as_str()).collect();
    assert_eq!(labels.get(1), Some(&"Yes, manually approve edits"), "the plan-file prompt's rows: {d}");
    assert_eq!(d["answerable"], true, "{d}");
    let id = tool_id(&d);
    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!(status, 202, "{body}");
    let (result, is_error) = wait_tool_result(&e, &id);
    assert!(result.starts_with("User has approved"), "{result}");
    assert!(!is_error);
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    e.wait_view(&run, STEP_TIMEOUT, "idle after approval", |v| v["state"] == "idle");
    let stop = e.wait_hook("Stop", STEP_TIMEOUT, |p| p["permission_mode"].is_string());
    assert_eq!(stop["payload"]["permission_mode"], "default", "edits are approved one by one: {stop}");
}

/// Scenario 7c: a run in a folder Claude Code has never seen: its workspace-trust screen
/// (shown before any hook runs) is read off the screen as a dialog, answered from lab,
/// and the run goes on to its first question.
#[test]
fn a_never_seen_folder_shows_the_trust_dialog_and_the_run_goes_on() {
    let Some(e) = setup("trust", ask_script()) else { return };
    let fresh = e.w.dir.path().join("fresh-project");
    std::fs::create_dir_all(&fresh).unwrap();
    let mut run = e.create_in(&fresh, "Please pick a database for me.", None);
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the trust dialog on SSE", |v| v["pending_dialog"]["source"] == "screen");
    let shown = run.created.elapsed();
    record_latency(&format!(
        "e2e trust screen: the dialog on SSE {:.1} s after POST /runs  (run {})",
        shown.as_secs_f64(),
        run.id
    ));
    assert!(shown < Duration::from_secs(8), "the trust dialog took {shown:?}");
    let d = &v["pending_dialog"];
    assert_eq!(
        (&d["kind"], &d["answerable"], &v["state"]),
        (&json!("generic"), &json!(true), &json!("question")),
        "{d}"
    );
    assert_eq!(d["options"][0]["label"], "Yes, I trust this folder", "{d}");
    assert!(e.hooks().is_empty(), "no hook runs before trust");
    let (status, body) = e.answer(&run, d["tool_id"].as_str().unwrap(), json!([{"option": 0}]));
    assert_eq!(status, 202, "{body}");
    // The run proceeds: the first question of the run appears, from the spool.
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the run's first question", |v| v["pending_dialog"]["source"] == "spool");
    assert_eq!(v["pending_dialog"]["questions"][0]["question"], QUESTION);
}

/// Scenario 7e: a never-seen folder whose own `.claude/settings.json` pre-approves a
/// tool: its trust card says so before the operator trusts it, and trusting it from lab
/// lets the run go on.
#[test]
fn a_never_seen_folder_with_its_own_allow_rules_says_so_on_its_trust_card() {
    let Some(e) = setup("trust_settings", ask_script()) else { return };
    let fresh = e.w.dir.path().join("cloned-project");
    std::fs::create_dir_all(fresh.join(".claude")).unwrap();
    let settings = json!({"permissions": {"allow": ["Bash(ls:*)", "Bash(make test:*)"]}});
    std::fs::write(fresh.join(".claude/settings.json"), settings.to_string()).unwrap();
    let mut run = e.create_in(&fresh, "Please pick a database for me.", None);
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the trust dialog on SSE", |v| v["pending_dialog"]["source"] == "screen");
    let d = &v["pending_dialog"];
    assert_eq!((&d["kind"], &d["answerable"]), (&json!("generic"), &json!(true)), "{d}");
    let text = d["generic"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Bash(ls:*)") && text.contains("Bash(make test:*)"), "the card names the rules: {d}");
    assert_eq!(d["options"][0]["label"], "Yes, I trust this folder", "{d}");
    let (status, body) = e.answer(&run, d["tool_id"].as_str().unwrap(), json!([{"option": 0}]));
    assert_eq!(status, 202, "{body}");
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the run's first question", |v| v["pending_dialog"]["source"] == "spool");
    assert_eq!(v["pending_dialog"]["questions"][0]["question"], QUESTION);
}

/// Scenario 8: Two questions: both shown with a deep link, and answered from lab (one
/// answer per question: the tab-and-review recipe).
#[test]
fn two_questions_are_answered_from_lab() {
    let script = Script::new()
        .tool_use("AskUserQuestion", two_questions())
        .after_tool_result("Thanks, noted both choices.")
        .side_reply("Pick a stack");
    let Some(e) = setup("two_questions", script) else { return };
    let mut run = e.create("Pick a stack for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    assert_eq!(d["kind"], "question");
    assert_eq!(d["answerable"], true, "{d}");
    assert_eq!(d["questions"].as_array().unwrap().len(), 2);
    assert_eq!(d["questions"][1]["question"], "Which web framework?");
    assert_eq!(labels(&d, 1), ["Axum", "Actix"]);
    let link = d["deep_link"].as_str().expect("a deep link");
    assert!(link.contains(&run.id), "{link}");
    let (status, body) = e.answer(&run, &id, json!([{"option": 2}]));
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "one answer per question: {body}");

    let (status, body) = e.answer(&run, &id, json!([{"option": 2}, {"option": 1}]));
    assert_eq!(status, 202, "{body}");
    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "MongoDB")), "{result}");
    assert!(result.contains(&answered("Which web framework?", "Actix")), "{result}");
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["state"] != "question");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    assert_no_flicker(&mut run.events, &id);
}

fn bash_script(command: &str) -> Script {
    Script::new()
        .turn(
            Matcher::Any,
            Reply::tool_use_with_text(
                "Bash",
                json!({"command": command, "description": "Create a marker file"}),
                "Let me run a command.",
            ),
        )
        .after_tool_result("The command ran.")
        .side_reply("Run a command")
}

/// The permission dialog of the run's Bash call, as it reaches SSE.
fn wait_permission(e: &E2e, run: &mut Run, command: &str) -> Value {
    let seen = Instant::now();
    let (_, v) = run
        .events
        .wait(LAUNCH_TIMEOUT, "the permission dialog on SSE", |v| v["pending_dialog"]["kind"] == "permission");
    let d = v["pending_dialog"].clone();
    record_latency(&format!(
        "e2e Bash permission prompt: the dialog on SSE {:.1} s after POST /runs  (run {})",
        seen.elapsed().as_secs_f64(),
        run.id
    ));
    assert_eq!(
        (&d["source"], &d["answerable"], &d["tool_name"]),
        (&json!("spool"), &json!(true), &json!("Bash")),
        "{d}"
    );
    assert_eq!(d["permission"]["tool"], "Bash");
    assert!(d["permission"]["summary"].as_str().unwrap().contains(command), "{d}");
    assert_eq!(d["options"][0]["label"], "Yes", "{d}");
    assert_eq!(d["options"].as_array().unwrap().len(), 3, "{d}");
    assert!(d["feedback_option"].is_u64(), "'No' takes what to do instead: {d}");
    // The PermissionRequest hook carries no tool_use_id: lab ties the prompt to the call.
    let p = e.wait_hook("PermissionRequest", STEP_TIMEOUT, |p| p["tool_name"] == "Bash");
    assert!(p["payload"].get("tool_use_id").is_none(), "{p}");
    d
}

/// Scenario 9: A Bash tool call in the default permission mode: its permission prompt is
/// a dialog as soon as it is drawn (the PermissionRequest hook), with the prompt's own
/// options, and "Yes" from lab runs the command.
#[test]
fn a_bash_permission_prompt_is_a_dialog_approved_from_lab() {
    let command = "touch e2e-bash-marker && echo touched";
    let Some(e) = setup("bash_permission", bash_script(command)) else { return };
    // Named explicitly: 2.1.198's default, while 2.1.332 defaults to `auto` (no prompt).
    let mut run = e.create("Create a marker file.", Some("default"));
    let d = wait_permission(&e, &mut run, command);
    // A message now would answer the prompt ("1" approves): refused.
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "1 ok go"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");
    assert!(!e.w.workdir.join("e2e-bash-marker").exists(), "the refused message approved the command");
    let tool_use = e.standin.emitted_tool_uses()[0].id.clone();
    assert!(e.standin.tool_results_for(&tool_use).is_empty());

    let (status, body) = e.answer(&run, d["tool_id"].as_str().unwrap(), json!([{"option": 0}]));
    assert_eq!(status, 202, "{body}");
    let (result, is_error) = wait_tool_result(&e, &tool_use);
    assert_eq!((result.trim(), is_error), ("touched", false));
    assert!(e.w.workdir.join("e2e-bash-marker").exists());
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared (PostToolUse by tool and input)");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the command", |v| v["state"] == "idle");
    assert!(v["blocked"].is_null());
}

/// The stand-in's first tool call, once the model made it.
fn first_tool_use(e: &E2e) -> String {
    wait_for(STEP_TIMEOUT, "the model's tool call", || e.standin.emitted_tool_uses().first().map(|t| t.id.clone()))
}

/// The run's audit entries of `action`.
fn audited(e: &E2e, run: &Run, action: &str) -> Vec<Value> {
    let (s, a) = e.lab().get(&format!("/audit?run={}", run.id));
    assert_eq!(s, 200, "{a}");
    a["entries"].as_array().unwrap().iter().filter(|x| x["action"] == action).cloned().collect()
}

/// Answer rules (issue 78): a Bash prompt an allow rule matches is answered by lab,
/// nobody else: the command runs, the run's answer names the rule, the audit log has
/// it, and no push goes out for it.
#[test]
fn an_allow_rule_answers_claude_s_bash_prompt_by_itself() {
    let command = "touch e2e-rule-marker";
    let Some(e) = setup("rule_allow", bash_script(command)) else { return };
    use base64::Engine;
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
    let (endpoint, pushes) = push_standin();
    let secret = web_push_native::p256::SecretKey::random(&mut web_push_native::p256::elliptic_curve::rand_core::OsRng);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let keys = json!({"p256dh": b64.encode(secret.public_key().to_encoded_point(false).as_bytes()), "auth": b64.encode([9u8; 16])});
    let (status, body) = e.lab().post("/push/subscriptions", &json!({"endpoint": endpoint, "keys": keys}));
    assert_eq!(status, 201, "{body}");
    let workdir = e.w.workdir.display().to_string();
    let (status, rule) = e.lab().post(
        "/rules",
        &json!({"name": "markers here", "action": "allow",
                "match": {"provider": "claude-code", "tool": "Bash", "pattern": "touch e2e-rule-*", "workdir": workdir}}),
    );
    assert_eq!(status, 201, "{rule}");
    let run = e.create("Create a marker file.", Some("default"));
    let tool_use = first_tool_use(&e);
    let (result, is_error) = wait_tool_result(&e, &tool_use);
    assert!(!is_error, "allowed: {result}");
    assert!(e.w.workdir.join("e2e-rule-marker").exists(), "the command ran");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the command", |v| v["state"] == "idle");
    assert_eq!(v["answer"]["answered_by"], json!({"rule": rule["id"], "name": "markers here"}), "{}", v["answer"]);
    assert_eq!(v["answer"]["state"], "played", "{}", v["answer"]);
    let entries = audited(&e, &run, "rule.answer");
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["outcome"], "applied");
    assert_eq!(entries[0]["detail"]["subject"]["text"], command, "{entries:?}");
    assert!(audited(&e, &run, "dialog.answer").is_empty(), "nobody else answered it");
    // The push worker has looked at the prompt and the turn's end by now: nothing sent.
    assert!(pushes.try_recv().is_err(), "a prompt a rule answered is pushed to nobody");
}

/// A deny rule's message reaches the model: the command does not run.
#[test]
fn a_deny_rule_refuses_claude_s_bash_call_with_its_message() {
    let command = "rm -f e2e-keep-me";
    let script = bash_script(command)
        .turn(Matcher::Contains("Never delete files in this repository".into()), Reply::text("Understood."));
    let Some(e) = setup("rule_deny", script) else { return };
    std::fs::write(e.w.workdir.join("e2e-keep-me"), "keep").unwrap();
    let (status, rule) = e.lab().post(
        "/rules",
        &json!({"name": "no deleting", "action": "deny", "message": "Never delete files in this repository.",
                "match": {"tool": "Bash", "pattern": "rm"}}),
    );
    assert_eq!(status, 201, "{rule}");
    let run = e.create("Delete a file.", Some("default"));
    let tool_use = first_tool_use(&e);
    let (_, is_error) = wait_tool_result(&e, &tool_use);
    assert!(is_error, "the call was refused");
    wait_for(STEP_TIMEOUT, "the rule's message to reach the model", || {
        let reqs = e.standin.main_requests();
        reqs.iter().any(|r| r.body.to_string().contains("Never delete files in this repository")).then_some(())
    });
    assert!(e.w.workdir.join("e2e-keep-me").exists(), "the denied command ran");
    let v = e.view(&run);
    assert_eq!(v["answer"]["answered_by"]["name"], "no deleting", "{}", v["answer"]);
    assert_eq!(audited(&e, &run, "rule.answer")[0]["detail"]["action"], "deny");
}

/// A push service stand-in on 127.0.0.1: answers 201 to every POST and hands the bodies
/// over.
fn push_standin() -> (String, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/push/phone", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut r = BufReader::new(&stream);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_ok() {
                let _ = tx.send(body);
            }
            let _ = (&stream).write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, rx)
}

/// Scenario 9c: the permission prompt answered from a push: lab pushes the prompt with
/// its options to a subscribed device (its key pair made here); the device's "Yes"
/// button (what the service worker's action does: the push's tool_id and the option's
/// index) runs the command.
#[test]
fn a_bash_permission_prompt_is_answered_yes_from_a_push_action() {
    use base64::Engine;
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
    let command = "touch e2e-push-marker && echo touched";
    let Some(e) = setup("bash_push", bash_script(command)) else { return };
    let (endpoint, pushes) = push_standin();
    let secret = web_push_native::p256::SecretKey::random(&mut web_push_native::p256::elliptic_curve::rand_core::OsRng);
    let auth = [9u8; 16];
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let keys =
        json!({"p256dh": b64.encode(secret.public_key().to_encoded_point(false).as_bytes()), "auth": b64.encode(auth)});
    let (status, body) = e.lab().post("/push/subscriptions", &json!({"endpoint": endpoint, "keys": keys}));
    assert_eq!(status, 201, "{body}");

    let mut run = e.create("Create a marker file.", Some("default"));
    let d = wait_permission(&e, &mut run, command);
    let push = loop {
        let body = pushes.recv_timeout(STEP_TIMEOUT).expect("a push for the permission prompt");
        let plain = web_push_native::decrypt(body, &secret, &web_push_native::Auth::clone_from_slice(&auth)).unwrap();
        let p: Value = serde_json::from_slice(&plain).unwrap();
        if p["state"] == "question" {
            break p;
        }
    };
    assert_eq!(push["run_id"], run.id.as_str());
    assert_eq!(push["dialog"]["kind"], "permission");
    assert_eq!(push["dialog"]["tool_id"], d["tool_id"]);
    assert!(push["body"].as_str().unwrap().contains(command), "{push}");
    let yes = &push["dialog"]["options"][0];
    assert_eq!(yes["label"], "Yes", "{push}");
    let offered: Vec<u64> =
        push["dialog"]["options"].as_array().unwrap().iter().map(|o| o["option"].as_u64().unwrap()).collect();
    assert!(
        !offered.contains(&d["feedback_option"].as_u64().unwrap()),
        "the option asking for text is not a button: {push}"
    );

    let (status, body) =
        e.answer(&run, push["dialog"]["tool_id"].as_str().unwrap(), json!([{"option": yes["option"]}]));
    assert_eq!(status, 202, "{body}");
    let tool_use = e.standin.emitted_tool_uses()[0].id.clone();
    let (result, is_error) = wait_tool_result(&e, &tool_use);
    assert_eq!((result.trim(), is_error), ("touched", false));
    assert!(e.w.workdir.join("e2e-push-marker").exists());
}

/// Scenario 9b: "No, and tell Claude what to do differently" from lab: the command does
/// not run, the text reaches the model, the dialog ends with the call's result.
#[test]
fn a_bash_permission_prompt_is_refused_from_lab_with_what_to_do_instead() {
    let command = "touch e2e-refused-marker && echo touched";
    let script =
        bash_script(command).turn(Matcher::Contains("use mkdir instead".into()), Reply::text("OK, mkdir it is."));
    let Some(e) = setup("bash_refused", script) else { return };
    let mut run = e.create("Create a marker file.", Some("default"));
    let d = wait_permission(&e, &mut run, command);
    let feedback = d["feedback_option"].as_u64().unwrap();
    let answer = json!([{"feedback": {"option": feedback, "text": "use mkdir instead"}}]);
    let (status, body) = e.answer(&run, d["tool_id"].as_str().unwrap(), answer);
    assert_eq!(status, 202, "{body}");
    let tool_use = e.standin.emitted_tool_uses()[0].id.clone();
    let (_, is_error) = wait_tool_result(&e, &tool_use);
    assert!(is_error, "the call was refused");
    wait_for(STEP_TIMEOUT, "the operator's words to reach the model", || {
        e.standin.main_requests().iter().any(|r| r.body.to_string().contains("use mkdir instead")).then_some(())
    });
    assert!(!e.w.workdir.join("e2e-refused-marker").exists(), "the refused command ran");
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared (its call has a result)");
}

/// Scenario 10: The composer is locked while a dialog is pending; after the answer a message goes
/// through and reaches the model.
#[test]
fn the_composer_is_locked_while_a_dialog_is_pending_then_reaches_the_model() {
    let text = "Follow-up: keep C-c; \"Enter\" literal — é";
    let script = ask_script().turn(Matcher::Contains("Follow-up: keep C-c".into()), Reply::text("Got your follow-up."));
    let Some(e) = setup("composer", script) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "are you there?"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");

    let (status, body) = e.answer(&run, &id, json!([{"option": 0}]));
    assert_eq!(status, 202, "{body}");
    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "PostgreSQL")), "{result}");
    e.wait_view(&run, STEP_TIMEOUT, "idle after the answer", |v| v["state"] == "idle");

    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": text}));
    assert_eq!(status, 202, "{body}");
    let reached = e.standin.wait_until(STEP_TIMEOUT, |reqs| {
        reqs.iter().any(|r| r.is_main() && messages_standin::last_user_text(&r.body).contains(text))
    });
    assert!(reached, "the message never reached the model");
    assert!(!e
        .standin
        .main_requests()
        .iter()
        .any(|r| messages_standin::last_user_text(&r.body).contains("are you there?")));
    let v = e.wait_view(&run, STEP_TIMEOUT, "the reply in the chat", |v| {
        v["state"] == "idle"
            && v["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "assistant" && m["text"] == "Got your follow-up.")
    });
    assert!(v["messages"].as_array().unwrap().iter().any(|m| m["role"] == "user" && m["text"] == text), "{v}");
}

/// Scenario 10b: The model API refuses the turn (400 "credit balance is too low", which
/// Claude Code does not retry; 2.1.332 fires StopFailure, no Stop): the run is not left
/// `working` but `needs_input`, blocked on an `error` with what the API said and the
/// composer open; the operator's resend reaches the model and the run goes on.
#[test]
fn a_turn_the_api_refuses_blocks_the_run_on_the_error_and_a_resend_goes_on() {
    let script = Script::new()
        .turn(
            Matcher::Any,
            Reply::Error {
                status: 400,
                error_type: "invalid_request_error".into(),
                message: "Your credit balance is too low to access the Anthropic API.".into(),
            },
        )
        .turn(Matcher::Contains("Topped up".into()), Reply::text("Hello after the resend."))
        .side_reply("Say hello");
    let Some(e) = setup("api_refused", script) else { return };
    let run = e.create("Say hello.", Some("default"));
    let v = e.wait_view(&run, LAUNCH_TIMEOUT, "needs_input on the API's error", |v| v["state"] == "needs_input");
    assert_eq!(v["blocked"]["kind"], "error", "{v}");
    let said = v["blocked"]["message"].as_str().unwrap();
    assert!(said.to_lowercase().contains("credit balance"), "{said}");
    assert!(v["composer_lock"].is_null(), "{v}");
    // (Not always the last message: 2.1.198 writes the turn's prompt line after it.)
    let err = v["messages"].as_array().unwrap().iter().find(|m| m["kind"] == "turn_error").cloned();
    assert_eq!(err.as_ref().map(|m| &m["text"]), Some(&v["blocked"]["message"]), "{v}");

    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "Topped up, try again."}));
    assert_eq!(status, 202, "{body}");
    let v = e.wait_view(&run, STEP_TIMEOUT, "the reply to the resend", |v| {
        v["state"] == "idle"
            && v["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "assistant" && m["text"] == "Hello after the resend.")
    });
    assert!(v["blocked"].is_null(), "{v}");
}

/// Scenario 11: The operator moved the cursor in the TUI (Down, Down, Up, Up, Up — Up wraps on
/// 2.1.198) before answering through lab: the right option still lands.
#[test]
fn an_answer_lands_on_the_right_option_after_the_operator_moved_the_cursor() {
    let Some(e) = setup("moved_cursor", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    e.wait_screen(&run, PICKER, STEP_TIMEOUT);
    e.tui_keys(&run, &["Down", "Down", "Up", "Up", "Up"]);
    let screen = e.screen(&run);
    let cursor = screen
        .lines()
        .find(|l| l.trim_start().strip_prefix("❯ ").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())))
        .unwrap_or("?")
        .trim()
        .to_string();
    eprintln!("[moved_cursor] cursor after Down Down Up Up Up: {cursor:?}");
    if claude_version(&e.claude) == WRAP_OBSERVED_ON {
        // Up wraps from option 1 onto "Type something." (compat §7): the cursor really
        // is somewhere the opening-position recipe would get wrong.
        assert_eq!(cursor, "❯ 4. Type something.", "{screen}");
    }
    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!(status, 202, "{body}");
    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "SQLite")), "{result} (cursor was on {cursor:?})");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
}

/// Scenario 12: The real 2.1.198 behaviour operators will meet: an AskUserQuestion left alone
/// auto-continues after 60 s. PostToolUse fires with `answers: {}`, the spool is
/// cleared, the tool_result appears and the dialog leaves lab's view. (Takes ~65 s.)
/// A version that does not auto-continue (2.1.332) keeps the dialog answerable instead.
#[test]
fn auto_continue_after_60s_idle_clears_the_dialog() {
    let Some(e) = setup("auto_continue", ask_script()) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let opened =
        e.wait_hook("PreToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str())["at_ms"].as_u64().unwrap();
    let version = claude_version(&e.claude);
    let left = e.standin.wait_for_tool_result(&id, Duration::from_secs(75));
    match left {
        None if !auto_continues(&version) => {
            eprintln!(
                "[auto_continue] claude {version} did not auto-continue within 75 s; the dialog stays answerable"
            );
            let v = e.view(&run);
            assert_eq!(v["pending_dialog"]["tool_id"], id.as_str());
            assert_eq!(v["pending_dialog"]["answerable"], true);
            let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
            assert_eq!(status, 202, "{body}");
            let (result, _) = wait_tool_result(&e, &id);
            assert!(result.contains(&answered(QUESTION, "SQLite")), "{result}");
            return;
        }
        None => panic!("claude {version} did not auto-continue the picker within 75 s"),
        Some((result, _)) => {
            assert!(result.starts_with("No response after 60s"), "{result}");
        }
    }
    let post = e.wait_hook("PostToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    let after = post["at_ms"].as_u64().unwrap() - opened;
    record_latency(&format!(
        "e2e auto-continue: PostToolUse {:.1} s after PreToolUse  (run {})",
        after as f64 / 1000.0,
        run.id
    ));
    assert_eq!(post["payload"]["tool_input"]["answers"], json!({}), "{post}");
    assert_eq!(post["payload"]["tool_input"]["afkTimeoutMs"], 60000, "{post}");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    let (_, ev) = run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    assert_ne!(ev["state"], "question");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after auto-continue", |v| v["state"] == "idle");
    let tr = v["messages"].as_array().unwrap().iter().find(|m| m["kind"] == "tool_result").cloned().unwrap();
    assert!(tr["text"].as_str().unwrap().starts_with("No response after 60s"), "{tr}");
    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    assert_no_flicker(&mut run.events, &id);
}

/// Scenario 12b: On 2.1.198 the picker's idle timer reads the (undocumented) environment variable
/// `CLAUDE_AFK_TIMEOUT_MS` (default 60000; `askUserQuestionTimeout` in settings does
/// nothing). Set through lab.toml's `env`, it moves the auto-continue: here to 8 s.
#[test]
fn claude_afk_timeout_ms_in_the_agent_env_moves_the_auto_continue() {
    let Some(e) = setup_with_env("afk_env", ask_script(), &[("CLAUDE_AFK_TIMEOUT_MS", "8000")]) else { return };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    let opened =
        e.wait_hook("PreToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str())["at_ms"].as_u64().unwrap();
    let version = claude_version(&e.claude);
    let Some((result, _)) = e.standin.wait_for_tool_result(&id, Duration::from_secs(25)) else {
        assert!(!auto_continues(&version), "claude {version} ignored CLAUDE_AFK_TIMEOUT_MS=8000");
        eprintln!("[afk_env] claude {version} did not auto-continue with CLAUDE_AFK_TIMEOUT_MS=8000");
        let (status, body) = e.answer(&run, &id, json!([{"option": 0}]));
        assert_eq!(status, 202, "{body}");
        return;
    };
    assert!(result.starts_with("No response after 8s"), "{result}");
    let post = e.wait_hook("PostToolUse", STEP_TIMEOUT, |p| p["tool_use_id"] == id.as_str());
    assert_eq!(post["payload"]["tool_input"]["afkTimeoutMs"], 8000, "{post}");
    let after = post["at_ms"].as_u64().unwrap() - opened;
    record_latency(&format!(
        "e2e auto-continue with CLAUDE_AFK_TIMEOUT_MS=8000: PostToolUse {:.1} s after PreToolUse  (run {})",
        after as f64 / 1000.0,
        run.id
    ));
    assert!((7000..20000).contains(&after), "{after} ms");
    e.wait_gone(&e.runtime_file(&run, "spool"), "the spool to be cleared");
    e.wait_view(&run, STEP_TIMEOUT, "idle after auto-continue", |v| {
        v["state"] == "idle" && v["pending_dialog"].is_null()
    });
}

/// Scenario 12c: On demand (`scripts/e2e --ignored push_out`, ~80 s): a large
/// `CLAUDE_AFK_TIMEOUT_MS` keeps the picker open past 60 s, and lab can still answer it.
#[test]
#[ignore = "slow (~80 s): re-verifies that CLAUDE_AFK_TIMEOUT_MS pushes the auto-continue out"]
fn push_out_the_auto_continue_with_claude_afk_timeout_ms() {
    let Some(e) = setup_with_env("afk_push_out", ask_script(), &[("CLAUDE_AFK_TIMEOUT_MS", "86400000")]) else {
        return;
    };
    let mut run = e.create("Please pick a database for me.", None);
    let d = e.wait_dialog(&mut run);
    let id = tool_id(&d);
    assert!(e.standin.wait_for_tool_result(&id, Duration::from_secs(75)).is_none(), "it auto-continued anyway");
    assert!(e.hooks_named("PostToolUse").is_empty());
    let v = e.view(&run);
    assert_eq!(v["pending_dialog"]["tool_id"], id.as_str());
    let (status, body) = e.answer(&run, &id, json!([{"option": 1}]));
    assert_eq!(status, 202, "{body}");
    let (result, _) = wait_tool_result(&e, &id);
    assert!(result.contains(&answered(QUESTION, "SQLite")), "{result}");
}

/// Issue "Safe by default", item 4 against the real binary: a first prompt too large to
/// be one process argument (Linux caps one at 128 KiB) is typed in by lab once the pane
/// is ready, and a 256 KiB multi-line message goes in as one bracketed paste: both
/// reach the model whole.
#[test]
fn a_prompt_too_large_for_argv_and_a_256_kib_message_reach_the_model_whole() {
    // Lines of distinct text, so a lost or duplicated chunk shows.
    let prompt = distinct_lines("prompt", 200 * 1024);
    let message = distinct_lines("message", 256 * 1024 - 16);
    let script = Script::new()
        .turn(Matcher::Contains("prompt line 000000".into()), Reply::text("Read your long prompt."))
        .turn(Matcher::Contains("message line 000000".into()), Reply::text("Read your long message."))
        .side_reply("Long input");
    let Some(e) = setup("long_input", script) else { return };
    let run = e.create(&prompt, None);

    let whole = |needle: &str| {
        e.standin.wait_until(Duration::from_secs(90), |reqs| {
            reqs.iter().any(|r| r.is_main() && messages_standin::last_user_text(&r.body).contains(needle))
        })
    };
    assert!(whole(&prompt), "the 200 KiB prompt never reached the model whole");
    let start = Instant::now();
    let replied = loop {
        let v = e.view(&run);
        if v["state"] == "idle"
            && v["messages"].as_array().unwrap().iter().any(|m| m["text"] == "Read your long prompt.")
        {
            break true;
        }
        if start.elapsed() > Duration::from_secs(90) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !replied {
        let v = e.view(&run);
        let summary: Vec<String> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{} {} {}B", m["role"], m["kind"], m["text"].as_str().map_or(0, str::len)))
            .collect();
        let users: Vec<usize> =
            e.standin.main_requests().iter().map(|r| messages_standin::last_user_text(&r.body).len()).collect();
        let lines: Vec<String> = e
            .transcript(&run)
            .iter()
            .map(|l| {
                format!(
                    "{}/{}/{} {}",
                    l["type"].as_str().unwrap_or("?"),
                    l["subtype"].as_str().unwrap_or(""),
                    l["message"]["stop_reason"].as_str().unwrap_or(""),
                    l["timestamp"].as_str().unwrap_or("")
                )
            })
            .collect();
        panic!(
            "no idle reply to the long prompt: state {} lock {} messages {summary:?}; main requests' last user text sizes {users:?}; transcript {lines:?}",
            v["state"], v["composer_lock"]
        );
    }

    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": message}));
    assert_eq!(status, 202, "{body}");
    assert!(whole(&message), "the 256 KiB message never reached the model whole");
    e.wait_view(&run, Duration::from_secs(60), "the reply to the message", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["text"] == "Read your long message.")
    });
}

/// The text of every message of a view, in order, as `role: text`.
fn chat_lines(v: &Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap_or(""), m["text"].as_str().unwrap_or("")))
        .collect()
}

/// Whether the stand-in got a main request whose conversation holds every one of `needles`.
fn standin_saw(e: &E2e, needles: &[&str]) -> bool {
    e.standin.main_requests().iter().any(|r| {
        let msgs = r.body["messages"].to_string();
        needles.iter().all(|n| msgs.contains(n))
    })
}

/// Resume and fork (issue 56) with the real Claude Code: a run in a worktree is told a
/// word, stopped by the operator, lab serve restarted, and the run is listed as
/// resumable with why it ended; resumed with a question, the agent's next request
/// carries the earlier turns (the stand-in sees them) and the chat goes on after the
/// old messages, none of them twice. Forked, the new run has its own branch and
/// worktree with the parent's uncommitted file, the parent's history, and a request
/// with the earlier turns; the parent's files are left as they were.
#[test]
fn a_stopped_run_is_resumed_after_a_restart_and_forked_into_its_own_branch() {
    let Some(mut e) = setup("resume_fork", Script::new()) else { return };
    let repo = e.w.workdir.clone();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["-c", "user.email=op@example.com", "-c", "user.name=op", "commit", "-q", "--allow-empty", "-m", "start"],
    ] {
        let out = std::process::Command::new("git").args(args).current_dir(&repo).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Claude Code trusts a folder below a trusted one: lab's worktrees are where the
    // operator's runs go.
    let seed_path = e.w.agent_home.join(".claude.json");
    let mut seed: Value = serde_json::from_slice(&std::fs::read(&seed_path).unwrap()).unwrap();
    seed["projects"][e.w.home.join("worktrees").to_str().unwrap()] = json!({"hasTrustDialogAccepted": true});
    std::fs::write(&seed_path, serde_json::to_vec_pretty(&seed).unwrap()).unwrap();

    let run = e.create("Remember the word PAPAYA.", None);
    let (_, body) = e.lab().get(&format!("/runs/{}", run.id));
    let worktree = body["worktree"]["path"].as_str().expect("a run in a repository gets a worktree").to_string();
    e.wait_view(&run, LAUNCH_TIMEOUT, "the first reply", |v| {
        v["state"] == "idle" && chat_lines(v).iter().any(|l| l.starts_with("assistant: "))
    });
    let (status, stopped) = e.lab().post(&format!("/runs/{}/stop", run.id), &json!({}));
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["state"], "ended", "{stopped}");
    let before = chat_lines(&e.view(&run));

    e.restart_lab();
    let (_, listed) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!((listed["resumable"].as_bool(), listed["forkable"].as_bool()), (Some(true), Some(true)), "{listed}");
    assert_eq!(listed["end_reason"], "stopped by the operator", "{listed}");

    let (status, resumed) =
        e.lab().post(&format!("/runs/{}/resume", run.id), &json!({"prompt": "Which word did I ask you to remember?"}));
    assert_eq!(status, 200, "{resumed}");
    assert_eq!((resumed["id"].as_str(), resumed["resumable"].as_bool()), (Some(run.id.as_str()), Some(false)));
    assert_ne!(resumed["state"], "ended", "{resumed}");
    wait_for(LAUNCH_TIMEOUT, "[resume_fork] the resumed request with the earlier turn", || {
        standin_saw(&e, &["Remember the word PAPAYA.", "Which word did I ask you to remember?"]).then_some(())
    });
    let v = e.wait_view(&run, STEP_TIMEOUT, "the resumed run's reply", |v| {
        let lines = chat_lines(v);
        let asked = lines.iter().position(|l| l.contains("Which word did I ask you to remember?"));
        asked.is_some_and(|i| lines[i + 1..].iter().any(|l| l.starts_with("assistant: ")))
    });
    let after = chat_lines(&v);
    assert_eq!(&after[..before.len()], &before[..], "the old messages stay first, as they were");
    assert_eq!(after.iter().filter(|l| l.contains("Remember the word PAPAYA.")).count(), 1, "{after:#?}");

    // The parent's work so far, uncommitted: the fork starts with it.
    std::fs::write(Path::new(&worktree).join("notes.txt"), "from the parent\n").unwrap();
    let (status, fork) = e.lab().post(&format!("/runs/{}/fork", run.id), &json!({"prompt": "Fork: say the word."}));
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["id"].as_str().unwrap().to_string();
    assert_ne!(fork_id, run.id);
    assert_eq!(fork["parent"], run.id.as_str(), "{fork}");
    assert_eq!(fork["worktree"]["branch"], format!("lab/{fork_id}"), "{fork}");
    let fork_tree = fork["worktree"]["path"].as_str().unwrap().to_string();
    assert_ne!(fork_tree, worktree);
    assert_eq!(std::fs::read_to_string(Path::new(&fork_tree).join("notes.txt")).unwrap(), "from the parent\n");
    assert_eq!(std::fs::read_to_string(Path::new(&worktree).join("notes.txt")).unwrap(), "from the parent\n");
    wait_for(LAUNCH_TIMEOUT, "[resume_fork] the fork's request with the parent's turns", || {
        standin_saw(&e, &["Remember the word PAPAYA.", "Fork: say the word."]).then_some(())
    });
    let fv = wait_for(STEP_TIMEOUT, "[resume_fork] the fork's chat with the parent's history", || {
        Some(e.lab().view(&fork_id)).filter(|v| {
            let lines = chat_lines(v);
            lines.iter().any(|l| l.contains("Remember the word PAPAYA."))
                && lines.iter().any(|l| l.contains("Fork: say the word."))
        })
    });
    assert_ne!(fv["state"], "ended", "{fv}");
    // The fork's files are its own from now on.
    std::fs::write(Path::new(&fork_tree).join("notes.txt"), "the fork's\n").unwrap();
    assert_eq!(std::fs::read_to_string(Path::new(&worktree).join("notes.txt")).unwrap(), "from the parent\n");
    for id in [run.id.as_str(), fork_id.as_str()] {
        let (status, body) = e.lab().post(&format!("/runs/{id}/stop"), &json!({}));
        assert_eq!(status, 200, "{body}");
    }
}

/// The usage-limit path (issue 56) with the real Claude Code: the stand-in refuses every
/// turn for 8 s with `429 rate_limit_error` saying when the limit resets (and that a
/// retry will not help, as a limit's answer does);
/// lab shows the limit and when it resets on the run, and — the run asked for it — once
/// it has reset, types the operator's message (lab.toml's) into the agent, whose next
/// request carries it; the run goes on.
#[test]
fn a_run_stopped_by_a_usage_limit_goes_on_by_itself_when_the_limit_resets() {
    let script = Script::new().usage_limit(8, "You've hit your session limit · resets {resets} (UTC)");
    let Some(mut e) = setup("usage_limit", script) else { return };
    let config = std::fs::read_to_string(e.w.home.join("lab.toml")).unwrap();
    e.w.write_config(&format!("{config}\n[runs]\nresume_after_limit_prompt = \"The limit has reset: carry on.\"\n"));
    e.restart_lab();
    let (status, run) = e.lab().post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": e.w.workdir, "prompt": "Write the report.", "resume_after_limit": true}),
    );
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["resume_after_limit"], json!({"on": true, "prompt": "The limit has reset: carry on."}), "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    // Every view the run publishes, whenever the test gets to look.
    let mut events = EventLog::open(e.lab(), &id);
    let (_, v) = events.wait(LAUNCH_TIMEOUT, "[usage_limit] the limit on the run", |v| !v["usage_limit"].is_null());
    let shown = &v["usage_limit"];
    let reset = e.standin.usage_limit_until().expect("the limit started");
    assert!(shown["text"].as_str().unwrap().contains("You've hit your session limit · resets "), "{shown}");
    let resets_at = humantime::parse_rfc3339(shown["resets_at"].as_str().unwrap()).unwrap();
    assert_eq!(resets_at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(), reset, "{shown}");
    assert!(!shown["resume_at"].is_null(), "{shown}");
    let answered = e.standin.main_requests().into_iter().filter(|r| r.reply.as_ref().is_some_and(|r| r.status != 429));
    assert!(answered.map(|r| r.at_unix_ms / 1000).all(|at| at >= reset), "nothing answered before the reset");
    wait_for(LAUNCH_TIMEOUT, "[usage_limit] the agent's request after the reset", || {
        standin_saw(&e, &["Write the report.", "The limit has reset: carry on."]).then_some(())
    });
    let sent = e.standin.main_requests().iter().map(|r| r.at_unix_ms).max().unwrap();
    assert!(sent / 1000 >= reset, "went on only after the reset ({sent} ms, reset {reset} s)");
    let v = wait_for(STEP_TIMEOUT, "[usage_limit] the run going on", || {
        Some(e.lab().view(&id)).filter(|v| v["usage_limit"].is_null() && v["state"] == "idle")
    });
    assert!(chat_lines(&v).iter().any(|l| l.contains("The limit has reset: carry on.")), "{:#?}", chat_lines(&v));
}

/// The usage the stand-in reported for every answered main-agent request, summed:
/// (input, output, cache read, cache write).
fn standin_usage(e: &E2e) -> [u64; 4] {
    let mut sum = [0u64; 4];
    for r in e.standin.main_requests() {
        let Some(u) = r.reply.and_then(|r| r.usage) else { continue };
        for (i, k) in ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]
            .iter()
            .enumerate()
        {
            sum[i] += u[k].as_u64().unwrap();
        }
    }
    sum
}

fn usage_figures(v: &Value) -> [u64; 4] {
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
        .map(|k| v[k].as_u64().unwrap_or(u64::MAX))
}

/// Usage and search: a run with two tool calls; lab counts each response once (Claude
/// Code repeats a response's usage on each of its content-block lines), its totals are
/// the sum over the responses the stand-in sent, they survive a restart, lab.toml's
/// price for the model prices them, and the run's words are found by `GET /search`.
#[test]
fn a_runs_usage_is_counted_once_per_response_priced_and_its_words_are_searchable() {
    let notes = ["first-note.txt", "second-note.txt"];
    let script = Script::new()
        .turn(
            Matcher::Contains("Read the two notes".into()),
            Reply::tool_use_with_text(
                "Read",
                json!({"file_path": "{{path_with:/first-note.txt}}"}),
                "Reading the first note.",
            ),
        )
        .turn(
            Matcher::ToolResultForPrevious,
            Reply::tool_use("Read", json!({"file_path": "{{path_with:/second-note.txt}}"})),
        )
        .after_tool_result("Both notes mention the papaya cache invalidation bug.")
        .side_reply("Read notes");
    let Some(mut e) = setup("usage_search", script) else { return };
    for n in notes {
        std::fs::write(e.w.workdir.join(n), format!("{n}: hello\n")).unwrap();
    }
    let [a, b] = notes.map(|n| e.w.workdir.join(n).display().to_string());
    let run = e.create(&format!("Read the two notes {a} and {b} and tell me what they say."), None);
    e.wait_view(&run, LAUNCH_TIMEOUT, "the answer after two reads", |v| {
        v["state"] == "idle" && chat_lines(v).iter().any(|l| l.contains("papaya cache invalidation"))
    });
    let sent = standin_usage(&e);
    let responses =
        e.standin.main_requests().iter().filter(|r| r.reply.as_ref().is_some_and(|r| r.usage.is_some())).count();
    assert!(responses >= 3, "three answered requests at least ({responses})");
    let (status, u) = e.lab().get(&format!("/runs/{}/usage", run.id));
    assert_eq!(status, 200, "{u}");
    let counted = wait_for(STEP_TIMEOUT, "[usage_search] lab's totals to reach the stand-in's", || {
        let (_, u) = e.lab().get(&format!("/runs/{}/usage", run.id));
        (usage_figures(&u) == sent).then_some(u)
    });
    assert_eq!(counted["responses"].as_u64(), Some(responses as u64), "{counted}");
    // Summing the transcript's lines would count the first response twice (its text and
    // its tool call are two lines with the same usage).
    let lines = e.transcript(&run);
    let line_sum: u64 = lines
        .iter()
        .filter(|l| l["type"] == "assistant")
        .filter_map(|l| l["message"]["usage"]["cache_read_input_tokens"].as_u64())
        .sum();
    assert!(line_sum > sent[2], "the transcript repeats a response's usage ({line_sum} > {})", sent[2]);
    let models: Vec<String> = counted["by_model"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(models.len(), 1, "{counted}");
    assert!(counted["context"]["used"].as_u64().unwrap() > 0, "{counted}");
    assert_eq!(counted["series"].as_array().map(|s| !s.is_empty()), Some(true), "{counted}");

    // Words of the run are found, in this run, at the message that holds them.
    let hit = wait_for(STEP_TIMEOUT, "[usage_search] the answer in the search index", || {
        let (_, r) = e.lab().get("/search?q=%22cache%20invalidation%22%20papay*");
        r["hits"].as_array().and_then(|h| h.first().cloned())
    });
    assert_eq!(hit["run_id"], json!(run.id), "{hit}");
    assert_eq!(hit["role"], "assistant", "{hit}");
    assert!(hit["snippet"].as_str().unwrap().contains("«papaya» «cache invalidation»"), "{hit}");
    let (_, page) =
        e.lab().get(&format!("/runs/{}/messages?after={}&limit=1", run.id, hit["seq"].as_u64().unwrap() - 1));
    assert!(page.to_string().contains("papaya cache invalidation"), "{page}");

    // lab.toml prices the model; after a restart the totals are the same, priced.
    let model = &models[0];
    let config = std::fs::read_to_string(e.w.home.join("lab.toml")).unwrap();
    e.w.write_config(&format!(
        "{config}\n[prices.\"{model}\"]\ninput = 2.0\noutput = 10.0\ncache_read = 0.5\ncache_write = 4.0\n"
    ));
    e.restart_lab();
    let (_, u) = e.lab().get(&format!("/runs/{}/usage", run.id));
    assert_eq!(usage_figures(&u), sent, "{u}");
    let cost = (sent[0] as f64 * 2.0 + sent[1] as f64 * 10.0 + sent[2] as f64 * 0.5 + sent[3] as f64 * 4.0) / 1e6;
    assert!((u["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-4, "{u} vs {cost}");
    for group in ["day", "run", "provider", "model"] {
        let (status, rows) = e.lab().get(&format!("/usage?group={group}"));
        assert_eq!(status, 200, "{rows}");
        let rows = rows["rows"].as_array().unwrap().clone();
        assert_eq!(rows.len(), 1, "{group}: {rows:?}");
        assert_eq!(usage_figures(&rows[0]), sent, "{group}");
    }
    let (_, rows) = e.lab().get("/usage?group=provider");
    assert_eq!(rows["rows"][0]["key"], "claude-code");
}
