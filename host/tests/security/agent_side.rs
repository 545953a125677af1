//! Security tests: what the agent's side writes (hook payloads, spool, marker and session
//! files, transcripts, the screen, what it runs in its own terminal) must not steer lab
//! (docs/security.md "A malicious repository", "A prompt-injected agent"). Real `lab
//! serve`, real tmux, fake-claude or a shell-script agent.

use crate::common::*;
use serde_json::Value;
use std::time::Duration;

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// A world whose plainlog provider runs `script`.
fn shell_agent_world(script: &str) -> World {
    World::with_plainlog(lab::agents::components::fixtures::PLAINLOG, script)
}

/// Row 9: the agent's environment leads no tmux command to lab's server, so a `tmux
/// kill-server` in anything the agent runs ends nothing of lab's.
#[test]
fn a_tmux_kill_server_run_by_an_agent_ends_no_run() {
    let w = shell_agent_world(
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
env > "$t.env"
printf '%s\n' '{"role":"user","text":"hi"}' >> "$t"
case "$4" in kill*) tmux kill-server > "$t.kill" 2>&1; echo "exit $?" >> "$t.kill" ;; esac
sleep 600
"#,
    );
    // Where a tmux with no TMUX goes (the default server) is this test's own directory,
    // never the machine's default server.
    let tmpdir = w.dir.path().join("tmux-default");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let lab = Lab::start_with(&w, |c| {
        c.env("TMUX_TMPDIR", &tmpdir).env("TMUX", format!("{},1,0", w.home.join("tmux.sock").display()));
    });
    let transcripts = w.agent_home.join(".plainlog");
    let envs = |n: usize| {
        wait_for(Duration::from_secs(20), "the agents to start", || {
            let found: Vec<_> = std::fs::read_dir(&transcripts)
                .ok()?
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".env"))
                .collect();
            (found.len() >= n).then_some(found)
        })
    };
    let calm = run_id(&lab.create_run(&w, "plainlog", "stay"));
    envs(1);
    let killer = run_id(&lab.create_run(&w, "plainlog", "kill"));
    let kill_log = wait_for(Duration::from_secs(20), "the agent's tmux kill-server", || {
        std::fs::read_dir(&transcripts)
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".kill"))
            .and_then(|e| std::fs::read_to_string(e.path()).ok())
            .filter(|s| s.contains("exit "))
    });
    assert!(!kill_log.contains("exit 0"), "the agent reached a tmux server: {kill_log}");
    std::thread::sleep(Duration::from_millis(1500));
    for id in [&calm, &killer] {
        let (status, run) = lab.get(&format!("/runs/{id}"));
        assert_eq!(status, 200);
        assert_ne!(run["state"], "ended", "{id} ended: {run}");
    }
    let sessions = String::from_utf8_lossy(&w.tmux(&["list-sessions", "-F", "#{session_name}"]).stdout).into_owned();
    assert!(sessions.contains(&format!("lab-{calm}")) && sessions.contains(&format!("lab-{killer}")), "{sessions}");
    // Neither the pane's TMUX nor lab serve's own reached the agent.
    for e in envs(2) {
        let env = std::fs::read_to_string(e.path()).unwrap();
        assert!(env.contains("TMUX_TMPDIR="), "lab serve's environment reached the agent: {env}");
        assert!(!env.lines().any(|l| l.starts_with("TMUX=") || l.starts_with("TMUX_PANE=")), "{env}");
    }
}

fn answer(lab: &Lab, id: &str, tool_id: &str, option: u64) -> (u16, Value) {
    lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &serde_json::json!({"tool_id": tool_id, "answers": [{"option": option}]}),
    )
}

fn keys_read(log: &std::path::Path) -> usize {
    World::log_events(log).iter().filter(|e| e["event"] == "key").count()
}

/// The answer's progress once it has finished (played, lost or failed).
fn finished_answer(lab: &Lab, id: &str) -> Value {
    wait_for(Duration::from_secs(30), "the answer to finish", || {
        let (_, run) = lab.get(&format!("/runs/{id}"));
        Some(run["answer"].clone()).filter(|a| a["finished_at"].is_string())
    })
}

/// Row 2: keys go only onto a prompt the provider sees on screen. Here the operator
/// opened another window in the run's session, so the pane shows a shell, not the
/// question: the answer ends `not_on_screen` and no key reaches anything. Once the
/// question is back on screen, the same prompt is answered.
#[test]
fn an_answer_to_a_prompt_not_on_screen_types_nothing() {
    let w = World::new();
    let (log, lab, id, tool_id) = run_at_question(&w);
    let session = format!("=lab-{id}:");
    let sink = w.dir.path().join("sink");
    let out =
        w.tmux(&["new-window", "-P", "-F", "#{window_id}", "-t", &session, &format!("cat -v > {}", sink.display())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let window = String::from_utf8_lossy(&out.stdout).trim().to_string();
    wait_for(Duration::from_secs(5), "the other window", || sink.exists().then_some(()));
    let keys_before = keys_read(&log);

    let (status, body) = answer(&lab, &id, &tool_id, 0);
    assert_eq!(status, 202, "{body}");
    let a = finished_answer(&lab, &id);
    assert_eq!((a["state"].as_str(), a["error"]["error"].as_str()), (Some("failed"), Some("not_on_screen")), "{a}");
    assert!(a["error"]["message"].as_str().unwrap().contains("nothing was typed"), "{a}");
    assert_eq!(a["played"], 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read(&sink).unwrap(), b"", "keys reached the other window");
    assert_eq!(keys_read(&log), keys_before, "keys reached the agent");
    let v = lab.view(&id);
    assert_eq!(
        (v["state"].as_str(), v["pending_dialog"]["tool_id"].as_str()),
        (Some("question"), Some(tool_id.as_str()))
    );
    assert_eq!(v["pending_dialog"]["answerable"], true, "offered again");

    // Back on screen: answered.
    assert!(w.tmux(&["kill-window", "-t", &window]).status.success());
    let (status, body) = answer(&lab, &id, &tool_id, 1);
    assert_eq!(status, 202, "{body}");
    let a = finished_answer(&lab, &id);
    assert_eq!(a["state"], "played", "{a}");
    lab.wait_view(&id, "the reply", |v| v.to_string().contains("Thanks, noted."));
}

/// Row 4: a plan file named by a spool payload is read only from inside the agent's
/// home or workdir, never through a symlink, never a FIFO or a kernel file; the server
/// keeps answering at once whatever it is.
#[test]
fn a_plan_file_outside_the_agent_s_folders_or_not_a_plain_file_is_never_read() {
    let w = World::new();
    let plan = "# The real plan";
    w.use_fake_claude(&serde_json::json!({"steps": [{"plan": {"plan": plan, "file_only": true}}, {"idle": {}}]}));
    let secret = "lab-serve-secret-0123456789";
    let lab = Lab::start_with(&w, |c| {
        c.env("LAB_TEST_SECRET", secret);
    });
    let id = run_id(&lab.create_run(&w, "claude-code", "plan it"));
    let v = lab.wait_view(&id, "the plan dialog", |v| v["pending_dialog"]["kind"] == "plan");
    assert_eq!(v["pending_dialog"]["plan"], plan, "the agent's own plan file is read");
    let spool = w.runtime().join(format!("{id}.spool.json"));
    let payload: Value = serde_json::from_slice(&std::fs::read(&spool).unwrap()).unwrap();

    let outside = w.dir.path().join("outside.md");
    std::fs::write(&outside, format!("{secret} outside")).unwrap();
    let link = w.agent_home.join(".claude/plans/link.md");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let fifo = w.agent_home.join(".claude/plans/fifo.md");
    mkfifo(&fifo);
    let big = w.workdir.join("big.md");
    std::fs::write(&big, "x".repeat(300 * 1024)).unwrap();
    for (n, bad) in [
        "/proc/self/environ",
        outside.to_str().unwrap(),
        link.to_str().unwrap(),
        fifo.to_str().unwrap(),
        big.to_str().unwrap(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = payload.clone();
        p["tool_input"]["planFilePath"] = Value::from(bad);
        p["tool_use_id"] = Value::from(format!("toolu_bad_{n}"));
        let tmp = w.runtime().join(format!(".{id}.spool.json.tmp.test.{n}"));
        std::fs::write(&tmp, serde_json::to_vec(&p).unwrap()).unwrap();
        std::fs::rename(&tmp, &spool).unwrap();
        let v = wait_for(Duration::from_secs(10), "the new plan dialog", || {
            let started = std::time::Instant::now();
            let v = lab.view(&id);
            assert!(started.elapsed() < Duration::from_secs(1), "the server was slow to answer ({bad})");
            Some(v).filter(|v| {
                v["pending_dialog"]["tool_id"].as_str().is_some_and(|t| t.starts_with(&format!("toolu_bad_{n}")))
            })
        });
        assert!(v["pending_dialog"]["plan"].is_null(), "{bad}: {}", v["pending_dialog"]);
        let (_, run) = lab.get(&format!("/runs/{id}"));
        for body in [v.to_string(), run.to_string()] {
            assert!(!body.contains(secret) && !body.contains("xxxxxxxx"), "{bad} leaked into a view");
        }
    }
}

fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo has no other precondition.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Row 5: the hook files lab reads (spool, marker) swapped for a FIFO or a symlink to
/// lab's own environment are refused without blocking: the server keeps answering at
/// once and shows nothing of them.
#[test]
fn hook_files_swapped_for_a_fifo_or_a_symlink_are_refused_without_blocking() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let secret = "lab-serve-secret-9876543210";
    let lab = Lab::start_with(&w, |c| {
        c.env("LAB_TEST_SECRET", secret);
    });
    let id = run_id(&lab.create_run(&w, "claude-code", "go"));
    lab.wait_state(&id, "question");
    let (spool, marker) = (w.runtime().join(format!("{id}.spool.json")), w.runtime().join(format!("{id}.marker.json")));
    std::fs::remove_file(&spool).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", &spool).unwrap();
    let _ = std::fs::remove_file(&marker);
    mkfifo(&marker);
    let until = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < until {
        let started = std::time::Instant::now();
        let v = lab.view(&id);
        let (_, run) = lab.get(&format!("/runs/{id}"));
        assert!(started.elapsed() < Duration::from_secs(1), "the server was slow to answer: {:?}", started.elapsed());
        assert!(!v.to_string().contains(secret) && !run.to_string().contains(secret));
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _) = lab.get("/runs");
    assert_eq!(status, 200);
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert!(log.contains("symlink") && log.contains("FIFO"), "the refusals are in the log");
}

/// Row 5: a transcript line over the length limit is skipped with one warning, and the
/// lines around it are shown.
#[test]
fn an_overlong_transcript_line_is_skipped_with_one_warning() {
    let w = shell_agent_world(&format!(
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
printf '%s\n' '{{"role":"user","text":"before"}}' >> "$t"
printf '{{"role":"assistant","text":"' >> "$t"
i=0; while [ $i -lt 9 ]; do head -c {mib} /dev/zero | tr '\0' 'x' >> "$t"; sleep 0.2; i=$((i+1)); done
printf '"}}\n' >> "$t"
printf '%s\n' '{{"role":"assistant","text":"after"}}' >> "$t"
sleep 600
"#,
        mib = 1 << 20
    ));
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "plainlog", "go"));
    let v = wait_for(Duration::from_secs(30), "the line after the long one", || {
        Some(lab.view(&id)).filter(|v| v.to_string().contains("\"after\""))
    });
    let texts: Vec<&str> = v["messages"].as_array().unwrap().iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(texts, ["before", "after"], "{v}");
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert_eq!(log.matches("skipping a transcript line over the length limit").count(), 1, "one warning");
}
