//! Security tests: what the agent's side writes (hook payloads, spool, marker and session
//! files, transcripts, the screen, what it runs in its own terminal) must not steer lab
//! (docs/security.md "A malicious repository", "A prompt-injected agent"). Real `lab
//! serve`, real tmux, fake-claude or a shell-script agent.

use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// A world whose plainlog provider runs `script` (called as `<agent> --transcript <path>
/// -- <prompt>`).
fn shell_agent_world(script: &str) -> World {
    let w = World::new();
    let providers = w.home.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::copy(lab::components::fixtures::PLAINLOG, providers.join("plainlog.wasm")).unwrap();
    let agent = w.dir.path().join("shell-agent");
    std::fs::write(&agent, script).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("[providers.plainlog]\nprogram = {:?}\n", agent.display().to_string()));
    w
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
