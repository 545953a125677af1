//! `lab agent-exec --env-file <file> -- <argv…>`: how a run's agent is started inside
//! its tmux pane. The agent's environment (lab serve's, plus the provider's `env` from
//! lab.toml — API keys among them) travels in a 0600 file under runtime/, never on a
//! command line where `ps` would show it; this reads the file, deletes it, and execs
//! the agent with exactly that environment (plus the pane's own `TERM`, `TMUX`,
//! `TMUX_PANE`). Like `lab hook`, it loads nothing else.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Variables the pane sets for its program, which win over the file's.
const PANE_VARS: &[&str] = &["TERM", "TMUX", "TMUX_PANE", "COLORTERM"];

pub fn main(args: &[String]) -> i32 {
    let (file, argv) = match args {
        [flag, file, sep, argv @ ..] if flag == "--env-file" && sep == "--" && !argv.is_empty() => (file, argv),
        _ => {
            eprintln!("lab agent-exec: usage: lab agent-exec --env-file <file> -- <program> [args…]");
            return 2;
        }
    };
    let env: BTreeMap<String, String> = match std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(env) => env,
        Err(e) => {
            eprintln!("lab agent-exec: cannot read the environment file {file}: {e}");
            return 2;
        }
    };
    let _ = std::fs::remove_file(file);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_clear().envs(&env);
    for k in PANE_VARS {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    let err = cmd.exec();
    eprintln!("lab agent-exec: cannot start {}: {err}", argv[0]);
    127
}
