//! Hook commands from the `--settings` file, run like Claude Code runs `type: command`
//! hooks: `sh -c <command>`, the payload JSON on stdin, waited for with a timeout.

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Hooks {
    /// The `hooks` object of the settings file (empty when there is none).
    table: Value,
    default_timeout: Duration,
    cwd: String,
}

#[derive(Debug)]
pub struct HookRun {
    pub command: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

impl Hooks {
    pub fn none(cwd: &str) -> Hooks {
        Hooks { table: Value::Null, default_timeout: Duration::from_secs(60), cwd: cwd.into() }
    }

    pub fn load(path: Option<&str>, default_timeout_ms: u64, cwd: &str) -> Result<Hooks, String> {
        let mut h = Hooks::none(cwd);
        h.default_timeout = Duration::from_millis(default_timeout_ms.max(1));
        let Some(path) = path else { return Ok(h) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read settings {path:?}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("bad settings {path:?}: {e}"))?;
        h.table = v.get("hooks").cloned().unwrap_or(Value::Null);
        Ok(h)
    }

    /// Commands configured for `event` whose matcher matches `target` (tool name for
    /// Pre/PostToolUse and PermissionRequest, notification_type for Notification), with
    /// their timeouts.
    pub fn matching(&self, event: &str, target: &str) -> Vec<(String, Duration)> {
        let mut out = Vec::new();
        let Some(groups) = self.table.get(event).and_then(Value::as_array) else { return out };
        for g in groups {
            let matcher = g.get("matcher").and_then(Value::as_str).unwrap_or("");
            if !matcher_matches(matcher, target) {
                continue;
            }
            for h in g.get("hooks").and_then(Value::as_array).into_iter().flatten() {
                let ty = h.get("type").and_then(Value::as_str).unwrap_or("command");
                let Some(cmd) = h.get("command").and_then(Value::as_str) else { continue };
                if ty != "command" {
                    continue;
                }
                let timeout = h
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|t| *t > 0.0)
                    .map(|t| Duration::from_secs_f64(t.min(86_400.0)))
                    .unwrap_or(self.default_timeout);
                out.push((cmd.to_string(), timeout));
            }
        }
        out
    }

    /// Runs every matching command, one after another, and reports how each ended.
    pub fn run(&self, event: &str, target: &str, payload: &Value) -> Vec<HookRun> {
        let stdin = payload.to_string();
        self.matching(event, target)
            .into_iter()
            .map(|(cmd, timeout)| run_one(&cmd, &stdin, timeout, &self.cwd))
            .collect()
    }
}

/// Claude Code's matcher rules (crate::matcher): empty, missing or `*` matches
/// everything; `Name|Name` is a list of exact names; anything else is a regex.
pub fn matcher_matches(matcher: &str, target: &str) -> bool {
    crate::matcher::matches(matcher, target)
}

fn run_one(cmd: &str, stdin: &str, timeout: Duration, cwd: &str) -> HookRun {
    let start = Instant::now();
    let mut run = HookRun {
        command: cmd.to_string(),
        exit_code: None,
        timed_out: false,
        stdout: String::new(),
        stderr: String::new(),
        duration_ms: 0,
    };
    let child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .env("CLAUDE_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            run.stderr = format!("spawn failed: {e}");
            return run;
        }
    };
    // Feed stdin and drain the outputs on threads so no pipe can fill up and stall us.
    if let Some(mut w) = child.stdin.take() {
        let data = stdin.to_string();
        std::thread::spawn(move || {
            let _ = w.write_all(data.as_bytes());
        });
    }
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(1 << 20).read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out_t = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err_t = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                run.exit_code = status.code();
                break;
            }
            Ok(None) if start.elapsed() >= timeout => {
                // The whole group, so `sh -c "sleep 99"` does not leave the sleep behind.
                // SAFETY: plain kill(2) on the process group we created for this child.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                run.timed_out = true;
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break,
        }
    }
    // A hook that backgrounded a child holding the pipes must not hang us: only join the
    // readers if they finish promptly.
    let join = |t: std::thread::JoinHandle<String>| {
        let until = Instant::now() + Duration::from_millis(500);
        while !t.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.is_finished() {
            t.join().unwrap_or_default()
        } else {
            String::new()
        }
    };
    run.stdout = join(out_t);
    run.stderr = join(err_t);
    run.duration_ms = start.elapsed().as_millis() as u64;
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matcher_is_an_exact_name_list() {
        assert!(matcher_matches("AskUserQuestion|ExitPlanMode", "ExitPlanMode"));
        assert!(!matcher_matches("AskUserQuestion|ExitPlanMode", "Bash"));
        assert!(!matcher_matches("AskUser", "AskUserQuestion"));
        assert!(matcher_matches("", "Bash"));
        assert!(matcher_matches("*", "Bash"));
        assert!(matcher_matches("^(?!(AskUserQuestion|ExitPlanMode)$).*", "Bash"));
        assert!(!matcher_matches("^(?!(AskUserQuestion|ExitPlanMode)$).*", "ExitPlanMode"));
    }

    #[test]
    fn runs_a_command_with_stdin_and_exit_code() {
        let h = Hooks {
            table: serde_json::json!({"PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "cat; echo err >&2; exit 2"}]},
                {"matcher": "Other", "hooks": [{"type": "command", "command": "exit 1"}]}
            ]}),
            default_timeout: Duration::from_secs(5),
            cwd: "/".into(),
        };
        let runs = h.run("PreToolUse", "Bash", &serde_json::json!({"a": 1}));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].exit_code, Some(2));
        assert_eq!(runs[0].stdout, r#"{"a":1}"#);
        assert_eq!(runs[0].stderr, "err\n");
    }

    #[test]
    fn a_slow_hook_times_out() {
        let h = Hooks {
            table: serde_json::json!({"Notification": [{"hooks": [{"type": "command", "command": "sleep 5", "timeout": 0.2}]}]}),
            default_timeout: Duration::from_secs(60),
            cwd: "/".into(),
        };
        let runs = h.run("Notification", "idle_prompt", &serde_json::json!({}));
        assert!(runs[0].timed_out);
        assert!(runs[0].duration_ms < 2000);
    }
}
