//! Launching Claude Code: the argv and the transcript path.
//!
//! ```text
//! claude --session-id <uuid> [--settings <file>] [--permission-mode <mode>] [[--] <prompt>]
//! ```
//!
//! - `--session-id` pins the session id, so the transcript path is known at spawn.
//! - `--settings` is passed only when the host wrote a per-run settings file (the
//!   hooks from [`crate::hook_settings`]); Claude Code merges it additively over the
//!   repository's own `.claude` settings. The request's `hooks` are not used here:
//!   they reach Claude Code through that file.
//! - No extra environment (`env` is empty).
//! - `--permission-mode` is passed only when the run asked for one. With none, Claude
//!   Code uses whatever the user's and the repository's settings say (its own default
//!   is `default`), exactly as if the operator had started `claude` by hand. A blank
//!   mode counts as none. The mode must be a plain word (ASCII letters, digits, `-`,
//!   `_`) — it is not checked against a list, so newer Claude Code modes work.
//! - The prompt is always the last argument. A prompt that starts with `-` would be
//!   read as an option, so it is preceded by the end-of-options marker `--`. An empty
//!   prompt means the host types it in once Claude Code is up (a prompt too large for
//!   the command line): then there is no prompt argument and Claude Code starts idle.
//!
//! Transcript: `<config>/projects/<slug>/<session-id>.jsonl`, where `<config>` is
//! `$CLAUDE_CONFIG_DIR` if set, else `$HOME/.claude` (both from the agent's environment
//! as given in the request), and `<slug>` is the working directory with every character
//! that is not an ASCII letter or digit replaced by `-` (`/tmp/a_b.c` → `-tmp-a-b-c`).
//! Claude Code computes the slug with a JavaScript regex over UTF-16 code units, so a
//! character outside the Basic Multilingual Plane becomes two `-`.

use lab_provider_sdk::{Continuation, EarlierRun, LaunchRequest, LaunchSpec, TranscriptLocation};

/// Build the launch spec for a run.
pub fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
    let workdir = checked(&req)?;
    let transcript = transcript_path(&req, workdir, &req.session_id)?;
    let argv = vec![req.program.clone(), "--session-id".into(), req.session_id.clone()];
    finish(argv, req.clone(), transcript, req.session_id)
}

/// Build the launch spec that continues `earlier`'s conversation:
///
/// ```text
/// resume: claude --resume <earlier> [--settings …] [--permission-mode …] [[--] <prompt>]
/// fork:   claude --resume <earlier> --fork-session --session-id <new> [--settings …] …
/// ```
///
/// Observed with 2.1.332: `--resume <id>` keeps the session id and appends to the
/// session's own transcript (found whatever the working directory); `--fork-session`
/// with `--session-id` writes a new transcript, under the new working directory's
/// project folder, that starts with a copy of the earlier conversation.
pub fn continue_session(req: LaunchRequest, how: Continuation, earlier: EarlierRun) -> Result<LaunchSpec, String> {
    let workdir = checked(&req)?;
    let earlier_id = earlier.session_id.as_str();
    if earlier_id.is_empty()
        || earlier_id.len() > 128
        || earlier_id.starts_with('-')
        || !earlier_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(format!("the earlier session id {earlier_id:?} is not one Claude Code writes"));
    }
    let mut argv = vec![req.program.clone(), "--resume".into(), earlier_id.to_string()];
    match how {
        Continuation::Resume => {
            let transcript = match earlier.transcript_path.filter(|t| t.starts_with('/')) {
                Some(t) => t,
                None => transcript_path(&req, workdir, earlier_id)?,
            };
            finish(argv, req, transcript, earlier_id.to_string())
        }
        Continuation::Fork => {
            argv.extend(["--fork-session".into(), "--session-id".into(), req.session_id.clone()]);
            let transcript = transcript_path(&req, workdir, &req.session_id)?;
            let id = req.session_id.clone();
            finish(argv, req, transcript, id)
        }
    }
}

/// What every launch needs of the request: a prompt that is not blank, a program, a
/// session id, an absolute workdir (returned, normalised).
fn checked(req: &LaunchRequest) -> Result<&str, String> {
    if !req.prompt.is_empty() && req.prompt.trim().is_empty() {
        return Err("the prompt is blank: Claude Code needs a first prompt".into());
    }
    if req.program.is_empty() {
        return Err("no program to run (expected the path of `claude`)".into());
    }
    if req.session_id.is_empty() {
        return Err("no session id to hand to Claude Code".into());
    }
    let workdir = normalise_dir(&req.workdir);
    if !workdir.starts_with('/') {
        return Err(format!("workdir `{}` is not an absolute path", req.workdir));
    }
    Ok(workdir)
}

/// `argv` with the settings file, the permission mode and the prompt, last.
fn finish(
    mut argv: Vec<String>,
    req: LaunchRequest,
    transcript: String,
    session: String,
) -> Result<LaunchSpec, String> {
    if let Some(settings) = req.settings_path.as_deref() {
        if settings.is_empty() {
            return Err("the settings path is empty".into());
        }
        argv.push("--settings".into());
        argv.push(settings.into());
    }
    if let Some(mode) = req.permission_mode.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        if !mode.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(format!(
                "permission mode `{mode}` is not a plain word (expected e.g. `auto`, `default`, `plan`, `acceptEdits`)"
            ));
        }
        argv.push("--permission-mode".into());
        argv.push(mode.into());
    }
    if !req.prompt.is_empty() {
        if req.prompt.starts_with('-') {
            argv.push("--".into());
        }
        argv.push(req.prompt);
    }
    Ok(LaunchSpec {
        argv,
        transcript: TranscriptLocation::Path(transcript),
        session_id: Some(session),
        env: Vec::new(),
    })
}

/// `<config>/projects/<slug>/<session>.jsonl` for a normalised absolute workdir.
fn transcript_path(req: &LaunchRequest, workdir: &str, session: &str) -> Result<String, String> {
    let config = match req.env_var("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            if !dir.starts_with('/') {
                return Err(format!("CLAUDE_CONFIG_DIR `{dir}` is not an absolute path"));
            }
            normalise_dir(dir).to_string()
        }
        None => {
            let home = req
                .env_var("HOME")
                .filter(|v| !v.is_empty())
                .ok_or("neither CLAUDE_CONFIG_DIR nor HOME is set in the agent's environment, so the transcript cannot be found")?;
            if !home.starts_with('/') {
                return Err(format!("HOME `{home}` is not an absolute path"));
            }
            let home = normalise_dir(home);
            if home == "/" {
                "/.claude".to_string()
            } else {
                format!("{home}/.claude")
            }
        }
    };
    let config = if config == "/" { String::new() } else { config };
    Ok(format!("{config}/projects/{}/{}.jsonl", project_slug(workdir), session))
}

/// A directory path without trailing slashes (the root stays `/`).
fn normalise_dir(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    if t.is_empty() && p.starts_with('/') {
        "/"
    } else {
        t
    }
}

/// Claude Code's project folder name for a working directory: every UTF-16 code unit
/// that is not `[a-zA-Z0-9]` becomes `-`.
pub fn project_slug(workdir: &str) -> String {
    let mut out = String::with_capacity(workdir.len());
    for c in workdir.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                out.push('-');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> LaunchRequest {
        LaunchRequest {
            run_id: "r1".into(),
            session_id: "0b6f7c1e-1111-4222-8333-444455556666".into(),
            workdir: "/tmp/a_b.c".into(),
            prompt: "fix the bug".into(),
            permission_mode: None,
            program: "/usr/bin/claude".into(),
            settings_path: None,
            env: vec![("HOME".into(), "/home/op".into())],
            hooks: Vec::new(),
        }
    }

    #[test]
    fn slug_replaces_every_non_alphanumeric() {
        assert_eq!(project_slug("/tmp/a_b.c"), "-tmp-a-b-c");
        assert_eq!(project_slug("/home/op/My Repo"), "-home-op-My-Repo");
        assert_eq!(project_slug("/x/é"), "-x--");
        assert_eq!(project_slug("/x/😀"), "-x---");
    }

    #[test]
    fn minimal_argv_and_transcript_under_home() {
        let s = launch(req()).unwrap();
        assert_eq!(
            s.argv,
            vec!["/usr/bin/claude", "--session-id", "0b6f7c1e-1111-4222-8333-444455556666", "fix the bug"]
        );
        assert_eq!(
            s.transcript,
            TranscriptLocation::Path(
                "/home/op/.claude/projects/-tmp-a-b-c/0b6f7c1e-1111-4222-8333-444455556666.jsonl".into()
            )
        );
        assert_eq!(s.session_id.as_deref(), Some("0b6f7c1e-1111-4222-8333-444455556666"));
        assert!(s.env.is_empty());
    }

    #[test]
    fn full_argv_keeps_prompt_last() {
        let mut r = req();
        r.settings_path = Some("/state/lab/runtime/r1/settings.json".into());
        r.permission_mode = Some("auto".into());
        let s = launch(r).unwrap();
        assert_eq!(
            s.argv,
            vec![
                "/usr/bin/claude",
                "--session-id",
                "0b6f7c1e-1111-4222-8333-444455556666",
                "--settings",
                "/state/lab/runtime/r1/settings.json",
                "--permission-mode",
                "auto",
                "fix the bug"
            ]
        );
    }

    #[test]
    fn blank_mode_is_omitted_and_odd_mode_rejected() {
        let mut r = req();
        r.permission_mode = Some("  ".into());
        assert!(!launch(r).unwrap().argv.contains(&"--permission-mode".to_string()));
        let mut r = req();
        r.permission_mode = Some("auto; rm -rf /".into());
        assert!(launch(r).unwrap_err().contains("permission mode"));
    }

    #[test]
    fn dash_prompt_gets_end_of_options_marker() {
        let mut r = req();
        r.prompt = "--help me".into();
        let s = launch(r).unwrap();
        let n = s.argv.len();
        assert_eq!(&s.argv[n - 2..], ["--", "--help me"]);
    }

    #[test]
    fn config_dir_wins_over_home_and_slashes_are_trimmed() {
        let mut r = req();
        r.workdir = "/srv/repo/".into();
        r.env.push(("CLAUDE_CONFIG_DIR".into(), "/cfg/claude/".into()));
        let s = launch(r).unwrap();
        assert_eq!(
            s.transcript,
            TranscriptLocation::Path(
                "/cfg/claude/projects/-srv-repo/0b6f7c1e-1111-4222-8333-444455556666.jsonl".into()
            )
        );
    }

    #[test]
    fn an_empty_prompt_is_left_off_the_command_line() {
        let mut r = req();
        r.prompt = String::new();
        assert_eq!(
            launch(r).unwrap().argv,
            vec!["/usr/bin/claude", "--session-id", "0b6f7c1e-1111-4222-8333-444455556666"]
        );
    }

    #[test]
    fn clear_errors() {
        let mut r = req();
        r.env.clear();
        assert!(launch(r).unwrap_err().contains("HOME"));
        let mut r = req();
        r.workdir = "repo".into();
        assert!(launch(r).unwrap_err().contains("not an absolute path"));
        let mut r = req();
        r.prompt = " \n".into();
        assert!(launch(r).unwrap_err().contains("prompt is blank"));
        let mut r = req();
        r.env = vec![("HOME".into(), "relative".into())];
        assert!(launch(r).unwrap_err().contains("HOME"));
        let mut r = req();
        r.env = vec![("CLAUDE_CONFIG_DIR".into(), "rel".into()), ("HOME".into(), "/h".into())];
        assert!(launch(r).unwrap_err().contains("CLAUDE_CONFIG_DIR"));
    }

    fn earlier(transcript: Option<&str>) -> EarlierRun {
        EarlierRun {
            session_id: "11111111-2222-4333-8444-555555555555".into(),
            transcript_path: transcript.map(str::to_string),
            workdir: "/tmp/a_b.c".into(),
        }
    }

    #[test]
    fn a_resume_restores_the_earlier_session_and_keeps_its_transcript() {
        let mut r = req();
        r.settings_path = Some("/run/lab/r1.settings.json".into());
        r.prompt = "-go on".into();
        let s =
            continue_session(r, Continuation::Resume, earlier(Some("/home/op/.claude/projects/x/s.jsonl"))).unwrap();
        assert_eq!(
            s.argv,
            [
                "/usr/bin/claude",
                "--resume",
                "11111111-2222-4333-8444-555555555555",
                "--settings",
                "/run/lab/r1.settings.json",
                "--",
                "-go on"
            ]
        );
        assert_eq!(s.session_id.as_deref(), Some("11111111-2222-4333-8444-555555555555"));
        assert_eq!(s.transcript, TranscriptLocation::Path("/home/op/.claude/projects/x/s.jsonl".into()));
        // Without a recorded transcript: where Claude Code keeps that session's.
        let mut r = req();
        r.prompt = String::new();
        let s = continue_session(r, Continuation::Resume, earlier(None)).unwrap();
        assert_eq!(s.argv.len(), 3, "no prompt: Claude Code starts idle: {:?}", s.argv);
        assert_eq!(
            s.transcript,
            TranscriptLocation::Path(
                "/home/op/.claude/projects/-tmp-a-b-c/11111111-2222-4333-8444-555555555555.jsonl".into()
            )
        );
    }

    #[test]
    fn a_fork_copies_the_earlier_session_into_a_new_one_of_its_own() {
        let mut r = req();
        r.workdir = "/w/fork".into();
        let s = continue_session(r, Continuation::Fork, earlier(Some("/t/s.jsonl"))).unwrap();
        assert_eq!(
            s.argv,
            [
                "/usr/bin/claude",
                "--resume",
                "11111111-2222-4333-8444-555555555555",
                "--fork-session",
                "--session-id",
                "0b6f7c1e-1111-4222-8333-444455556666",
                "fix the bug"
            ]
        );
        assert_eq!(s.session_id.as_deref(), Some("0b6f7c1e-1111-4222-8333-444455556666"));
        assert_eq!(
            s.transcript,
            TranscriptLocation::Path(
                "/home/op/.claude/projects/-w-fork/0b6f7c1e-1111-4222-8333-444455556666.jsonl".into()
            )
        );
    }

    #[test]
    fn an_earlier_session_id_that_is_not_claude_s_is_refused() {
        for bad in ["", "--dangerously-skip-permissions", "a b", "x;y", &"a".repeat(129)] {
            let mut e = earlier(None);
            e.session_id = bad.to_string();
            let err = continue_session(req(), Continuation::Resume, e).unwrap_err();
            assert!(err.contains("not one Claude Code writes"), "{bad:?}: {err}");
        }
    }
}
