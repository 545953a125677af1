//! Launching Codex CLI 0.169.0 (docs/providers/codex/compat.md, "Launch").
//!
//! ```text
//! codex --no-daemon
//!       [-c 'hooks.<Event>=[{hooks=[{type="command",command="<cmd>",timeout=30}]}]' …]
//!       [-c 'hooks.state={"/<session-flags>/config.toml:<event>:0:<i>"={trusted_hash="sha256:…"}, …}']
//!       [<permission-mode flags>] [[--] <prompt>]
//! ```
//!
//! - `--no-daemon`: without it the TUI starts a shared background app-server that
//!   outlives the run; with it one Ctrl-C at the idle prompt ends the process.
//! - Hooks go on the command line (`-c`), one `hooks.<Event>` array per event with the
//!   host-built commands in the order given; nothing is written to the user's
//!   `CODEX_HOME`. Hooks from `-c` must be trusted or the TUI stops on "Hooks need
//!   review"; lab trusts **its own hooks only**, for this run only, by passing their
//!   trust records on the command line too ([`trust_override`]): codex merges
//!   `hooks.state` from the user's config and the session flags, never from a project's
//!   config. Any other hook codex has not seen reviewed (a cloned repository's
//!   `.codex/config.toml`, an unreviewed one of the user's) keeps codex's "Hooks need
//!   review" screen, which lab shows as a card ([`crate::screen`]). No
//!   `--dangerously-bypass-hook-trust`: it runs every untrusted hook.
//! - Model provider, base URL, API keys, sandbox and approval defaults: the user's
//!   `$CODEX_HOME/config.toml` and the run's environment (lab.toml `[providers.codex]
//!   env`). Nothing about them is hard-coded here. No environment is added.
//! - Permission modes ([`crate::PERMISSION_MODES`]) map to codex's own flags:
//!   `default` → none (the config decides); `read-only` → `-s read-only -a on-request`;
//!   `workspace-write` → `-s workspace-write -a on-request`; `never` →
//!   `-s workspace-write -a never`; `danger-full-access` →
//!   `--dangerously-bypass-approvals-and-sandbox`.
//! - The prompt is the last argument; one that starts with `-` follows `--`. Empty: the
//!   host types it once codex is up.
//! - Transcript: `TranscriptLocation::FromSessionInfo` — codex creates the rollout
//!   lazily at the first turn under `$CODEX_HOME/sessions/YYYY/MM/DD/` with its own
//!   session id, and names it in the SessionStart hook payload (`transcript_path`).

use lab_provider_sdk::{Continuation, EarlierRun, LaunchRequest, LaunchSpec, TranscriptLocation};

/// Seconds codex waits for one of lab's hook commands.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// Build the launch spec for a run.
pub fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
    build(req, None)
}

/// Build the launch spec that continues `earlier`'s conversation: `codex resume <id>`
/// (the same session goes on) or `codex fork <id>` (a new session from a copy of it),
/// with the same flags as a new run's:
///
/// ```text
/// codex resume|fork --no-daemon [-c hooks…] [<permission-mode flags>] -- <session id> [<prompt>]
/// ```
///
/// Codex names the rollout it writes in the SessionStart hook, as for a new run.
pub fn continue_session(req: LaunchRequest, how: Continuation, earlier: EarlierRun) -> Result<LaunchSpec, String> {
    let id = earlier.session_id.as_str();
    if id.len() != 36 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Err(format!("the earlier session id {id:?} is not one Codex writes (a UUID)"));
    }
    let verb = match how {
        Continuation::Resume => "resume",
        Continuation::Fork => "fork",
    };
    build(req, Some((verb, id)))
}

/// The argv: `codex [resume|fork] --no-daemon …`, the positionals last.
fn build(req: LaunchRequest, earlier: Option<(&str, &str)>) -> Result<LaunchSpec, String> {
    if !req.prompt.is_empty() && req.prompt.trim().is_empty() {
        return Err("the prompt is blank: Codex needs a first prompt".into());
    }
    if req.program.is_empty() {
        return Err("no program to run (expected the path of `codex`)".into());
    }
    let mut argv = vec![req.program.clone()];
    if let Some((verb, _)) = earlier {
        argv.push(verb.into());
    }
    argv.push("--no-daemon".into());
    let hooks = hooks_by_event(&req)?;
    for (event, commands) in &hooks {
        argv.push("-c".into());
        argv.push(hook_override(event, commands));
    }
    if !hooks.is_empty() {
        argv.push("-c".into());
        argv.push(trust_override(&hooks));
    }
    argv.extend(mode_flags(req.permission_mode.as_deref())?.iter().map(|s| s.to_string()));
    if let Some((_, id)) = earlier {
        argv.push("--".into());
        argv.push(id.into());
        if !req.prompt.is_empty() {
            argv.push(req.prompt);
        }
    } else if !req.prompt.is_empty() {
        if req.prompt.starts_with('-') {
            argv.push("--".into());
        }
        argv.push(req.prompt);
    }
    Ok(LaunchSpec { argv, transcript: TranscriptLocation::FromSessionInfo, session_id: None, env: Vec::new() })
}

/// The request's commands grouped by event, events in first-seen order.
fn hooks_by_event(req: &LaunchRequest) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for h in &req.hooks {
        let event = h.binding.event.as_str();
        if event.is_empty() || !event.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(format!("hook event `{event}` is not a codex event name"));
        }
        if h.command.trim().is_empty() {
            return Err(format!("the hook command for {event} is empty"));
        }
        match out.iter_mut().find(|(e, _)| e == event) {
            Some((_, cmds)) => cmds.push(h.command.clone()),
            None => out.push((event.to_string(), vec![h.command.clone()])),
        }
    }
    Ok(out)
}

/// `hooks.<Event>=[{hooks=[{type="command",command="…",timeout=30}, …]}]` (a TOML value).
pub fn hook_override(event: &str, commands: &[String]) -> String {
    let hooks: Vec<String> = commands
        .iter()
        .map(|c| format!("{{type=\"command\",command={},timeout={HOOK_TIMEOUT_SECS}}}", toml_str(c)))
        .collect();
    format!("hooks.{event}=[{{hooks=[{}]}}]", hooks.join(","))
}

/// The source codex gives hooks from `-c` (its session-flags layer) in their keys.
pub const SESSION_FLAGS_SOURCE: &str = "/<session-flags>/config.toml";

/// `hooks.state={"<key>"={trusted_hash="sha256:…"}, …}`: the trust record of each of
/// lab's handlers, keyed as codex keys them (`<source>:<event_label>:<group>:<handler>`;
/// lab passes one group per event). Codex compares the hash with the one it computes
/// from the handler it loaded; a changed command is untrusted again.
pub fn trust_override(hooks: &[(String, Vec<String>)]) -> String {
    let mut entries = Vec::new();
    for (event, commands) in hooks {
        let label = event_label(event);
        for (i, command) in commands.iter().enumerate() {
            let key = format!("{SESSION_FLAGS_SOURCE}:{label}:0:{i}");
            entries.push(format!("{}={{trusted_hash={}}}", toml_str(&key), toml_str(&trust_hash(&label, command))));
        }
    }
    format!("hooks.state={{{}}}", entries.join(","))
}

/// Codex's name for an event in keys and hashes: `PermissionRequest` → `permission_request`.
pub fn event_label(event: &str) -> String {
    let mut out = String::with_capacity(event.len() + 4);
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Codex's `trusted_hash` of one command handler as lab declares it (no matcher, no
/// status message, synchronous, [`HOOK_TIMEOUT_SECS`]): SHA-256 of the handler's
/// normalised identity as compact JSON with sorted keys (pinned against `hooks/list`
/// of 0.169.0 and 0.171.0: testdata/hooks-list-0.171.0.json).
pub fn trust_hash(event_label: &str, command: &str) -> String {
    use sha2::Digest;
    let identity = format!(
        r#"{{"event_name":{},"hooks":[{{"async":false,"command":{},"timeout":{HOOK_TIMEOUT_SECS},"type":"command"}}]}}"#,
        serde_json::Value::from(event_label),
        serde_json::Value::from(command),
    );
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A TOML basic string.
pub fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Codex's flags for a permission mode (none or blank: none).
fn mode_flags(mode: Option<&str>) -> Result<&'static [&'static str], String> {
    Ok(match mode.map(str::trim).unwrap_or("") {
        "" | "default" => &[],
        "read-only" => &["-s", "read-only", "-a", "on-request"],
        "workspace-write" => &["-s", "workspace-write", "-a", "on-request"],
        "never" => &["-s", "workspace-write", "-a", "never"],
        "danger-full-access" => &["--dangerously-bypass-approvals-and-sandbox"],
        other => {
            return Err(format!(
                "permission mode `{other}` is not one of codex's: {}",
                crate::PERMISSION_MODES.join(", ")
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_provider_sdk::{Channel, HookBinding, HookCommand};

    fn req(prompt: &str, mode: Option<&str>, hooks: Vec<HookCommand>) -> LaunchRequest {
        LaunchRequest {
            run_id: "r1".into(),
            session_id: "00000000-0000-4000-8000-000000000000".into(),
            workdir: "/w".into(),
            prompt: prompt.into(),
            permission_mode: mode.map(str::to_string),
            program: "/bin/codex".into(),
            env: vec![("HOME".into(), "/h".into())],
            hooks,
            settings_path: None,
        }
    }

    fn hook(event: &str, command: &str) -> HookCommand {
        HookCommand { binding: HookBinding::new(event, None, Channel::DialogSpool), command: command.into() }
    }

    #[test]
    fn argv_has_no_daemon_hooks_their_trust_and_the_prompt_last() {
        let spec = launch(req(
            "hello",
            None,
            vec![
                hook("SessionStart", "/lab hook s"),
                hook("PermissionRequest", "/lab hook 'p q'"),
                hook("SessionStart", "/lab hook \"x\"\\y"),
            ],
        ))
        .unwrap();
        assert_eq!(
            spec.argv,
            [
                "/bin/codex",
                "--no-daemon",
                "-c",
                r#"hooks.SessionStart=[{hooks=[{type="command",command="/lab hook s",timeout=30},{type="command",command="/lab hook \"x\"\\y",timeout=30}]}]"#,
                "-c",
                r#"hooks.PermissionRequest=[{hooks=[{type="command",command="/lab hook 'p q'",timeout=30}]}]"#,
                "-c",
                &format!(
                    r#"hooks.state={{"/<session-flags>/config.toml:session_start:0:0"={{trusted_hash="{}"}},"/<session-flags>/config.toml:session_start:0:1"={{trusted_hash="{}"}},"/<session-flags>/config.toml:permission_request:0:0"={{trusted_hash="{}"}}}}"#,
                    trust_hash("session_start", "/lab hook s"),
                    trust_hash("session_start", "/lab hook \"x\"\\y"),
                    trust_hash("permission_request", "/lab hook 'p q'"),
                ),
                "hello",
            ]
        );
        assert!(!spec.argv.iter().any(|a| a.contains("bypass")), "no hook-trust bypass: {:?}", spec.argv);
        assert_eq!(spec.transcript, TranscriptLocation::FromSessionInfo);
        assert_eq!(spec.session_id, None);
        assert!(spec.env.is_empty());
    }

    #[test]
    fn modes_map_to_codex_flags() {
        let argv = |m| launch(req("p", Some(m), vec![])).unwrap().argv[2..].to_vec();
        assert_eq!(argv("default"), ["p"]);
        assert_eq!(argv(" "), ["p"]);
        assert_eq!(argv("read-only"), ["-s", "read-only", "-a", "on-request", "p"]);
        assert_eq!(argv("workspace-write"), ["-s", "workspace-write", "-a", "on-request", "p"]);
        assert_eq!(argv("never"), ["-s", "workspace-write", "-a", "never", "p"]);
        assert_eq!(argv("danger-full-access"), ["--dangerously-bypass-approvals-and-sandbox", "p"]);
        for m in crate::PERMISSION_MODES {
            assert!(launch(req("p", Some(m), vec![])).is_ok(), "{m}");
        }
        assert!(launch(req("p", Some("plan"), vec![])).unwrap_err().contains("not one of"));
    }

    #[test]
    fn prompt_edge_cases() {
        assert_eq!(launch(req("-x", None, vec![])).unwrap().argv[2..], ["--", "-x"]);
        assert_eq!(launch(req("", None, vec![])).unwrap().argv.len(), 2, "empty: the host types it");
        assert!(launch(req("  ", None, vec![])).is_err());
        assert!(launch(req("p", None, vec![hook("Bad Event", "c")])).is_err());
        assert!(launch(req("p", None, vec![hook("Stop", " ")])).is_err());
    }

    /// The hashes codex 0.171.0 computed for these handlers (`codex app-server`
    /// `hooks/list`, recorded in testdata; 0.169.0 gives the same): lab's trust records
    /// match them, so codex runs lab's hooks with no review screen.
    #[test]
    fn trust_hashes_are_the_ones_codex_computes() {
        let list: serde_json::Value =
            serde_json::from_str(include_str!("../testdata/hooks-list-0.171.0.json")).unwrap();
        let hooks = list["result"]["data"][0]["hooks"].as_array().unwrap();
        assert_eq!(hooks.len(), 4);
        for h in hooks {
            assert_eq!(h["timeoutSec"], HOOK_TIMEOUT_SECS);
            let key = h["key"].as_str().unwrap();
            let label = key.strip_prefix(SESSION_FLAGS_SOURCE).unwrap().split(':').nth(1).unwrap();
            let event = h["eventName"].as_str().unwrap();
            let event = format!("{}{}", event[..1].to_ascii_uppercase(), &event[1..]);
            assert_eq!(event_label(&event), label, "{key}");
            assert_eq!(trust_hash(label, h["command"].as_str().unwrap()), h["currentHash"].as_str().unwrap(), "{key}");
        }
        assert_eq!(event_label("PostToolUse"), "post_tool_use");
        assert_eq!(event_label("Stop"), "stop");
    }

    #[test]
    fn toml_strings_escape_controls() {
        assert_eq!(toml_str("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }
}
