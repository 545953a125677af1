//! The runner stream: what `lab runner` and `lab serve` say to each other over one
//! WebSocket (`GET /runners/connect`), and the rules both sides check. Pure: encoding,
//! decoding and the checks; the I/O is in [`super::link`] (serve) and
//! [`crate::runner`] (the runner).
//!
//! The credential (`lab hosts add NAME`) never crosses the wire: each side proves it
//! knows it over the other's fresh nonce ([`proof`]), lab serve first.
//!
//! 1. The runner's upgrade request carries [`NAME_HEADER`], [`VERSION_HEADER`] and
//!    [`NONCE_HEADER`] (32 random bytes, hex) — no credential.
//! 2. lab serve answers 401 for a host it does not know (it cannot prove anything), 409
//!    for another lab version (naming both), else upgrades; both answers carry
//!    [`SERVE_NONCE_HEADER`] and [`SERVE_PROOF_HEADER`]: its proof over both nonces.
//! 3. The runner checks that proof before it sends or does anything; a server that
//!    cannot prove it is left (the runner says why and dials again later).
//! 4. The runner's first frame, its hello, carries its own proof; lab serve checks it
//!    before it sends or asks anything ([`close::UNPROVEN`] if wrong), then refuses a
//!    second connection of a host whose runner is connected ([`close::BUSY`]).
//!
//! Then each side sends JSON text frames ([`Up`], [`Down`]), at most [`MAX_FRAME`]
//! bytes; anything else ends the connection with a reason.

use serde::{Deserialize, Serialize};

/// The runner's host name (as added with `lab hosts add`).
pub const NAME_HEADER: &str = "x-lab-runner-name";
/// The runner's lab version ([`VERSION`]); it must equal lab serve's.
pub const VERSION_HEADER: &str = "x-lab-runner-version";
/// The runner's nonce in its upgrade request: 64 hex digits.
pub const NONCE_HEADER: &str = "x-lab-runner-nonce";
/// lab serve's nonce in its answer: 64 hex digits.
pub const SERVE_NONCE_HEADER: &str = "x-lab-serve-nonce";
/// lab serve's proof in its answer ([`proof::serve`]).
pub const SERVE_PROOF_HEADER: &str = "x-lab-serve-proof";
/// The route runners dial.
pub const PATH: &str = "/runners/connect";
/// The version both ends must run: this lab's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 1 << 20;

/// WebSocket close codes lab serve ends a runner's connection with (4000–4999 are the
/// application's): the runner stops for these instead of dialling again.
pub mod close {
    /// The host's credential was removed (`lab hosts remove`).
    pub const REVOKED: u16 = 4001;
    /// The runner sent something that is not the protocol.
    pub const PROTOCOL: u16 = 4002;
    /// The runner's hello did not prove its credential.
    pub const UNPROVEN: u16 = 4004;
    /// Its host has a runner connected already: this one is refused (it dials again,
    /// and gets in once the other is gone).
    pub const BUSY: u16 = 4005;
}

/// The proofs each side gives on the runner link: HMAC-SHA256, keyed with the SHA-256
/// of the host's credential (all lab serve keeps of it, in `hosts.json`), over a label
/// naming the side, the host and both nonces. A side's proof is good for its
/// connection only (the other side's nonce is fresh) and cannot be played back as the
/// other side's (the label).
pub mod proof {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    /// The key both sides prove with: the credential's SHA-256, hex (what lab serve keeps).
    pub use crate::machines::hosts::credentials::key_of;

    /// A fresh nonce: 32 random bytes, hex.
    pub fn nonce() -> std::io::Result<String> {
        crate::util::secrets::random_hex(32)
    }

    /// Whether `s` is a nonce as [`nonce`] makes them.
    pub fn is_nonce(s: &str) -> bool {
        s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }

    fn mac(key: &str, side: &str, host: &str, runner_nonce: &str, serve_nonce: &str) -> String {
        let mut m = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes any key");
        m.update(format!("lab runner link v1\n{side}\n{host}\n{runner_nonce}\n{serve_nonce}").as_bytes());
        m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// lab serve's proof.
    pub fn serve(key: &str, host: &str, runner_nonce: &str, serve_nonce: &str) -> String {
        mac(key, "serve", host, runner_nonce, serve_nonce)
    }

    /// The runner's proof.
    pub fn runner(key: &str, host: &str, runner_nonce: &str, serve_nonce: &str) -> String {
        mac(key, "runner", host, runner_nonce, serve_nonce)
    }

    /// Whether `offered` is `expected` (constant time).
    pub fn matches(offered: &str, expected: &str) -> bool {
        crate::util::secrets::ct_eq(offered.as_bytes(), expected.as_bytes())
    }
}

/// Runner → lab serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Up {
    /// First frame: who and where the runner is.
    Hello {
        /// The runner's proof of its credential ([`proof::runner`]).
        proof: String,
        /// The machine's own host name (shown to the operator; not trusted for anything).
        hostname: String,
        /// The runner's lab home on that machine.
        home: String,
        /// The runner's tmux server socket there (for the attach command).
        tmux_socket: String,
        /// The `lab` binary there (hook commands and `lab agent-exec` run it).
        lab_exe: String,
        /// The environment an agent starts with there, before lab.toml's and the
        /// provider's: the basics of the runner's own (PATH, HOME, locale, proxies…).
        env: Vec<(String, String)>,
    },
    /// The outcome of the [`Down::Call`] with the same `id`.
    Reply { id: u64, reply: Reply },
    /// New bytes of a watched run's transcript, from byte `offset` (base64).
    Transcript { run: String, offset: u64, data: String },
    /// A watched run's hook file now holds `content` (None: it is gone).
    RunFile { run: String, file: HookFile, content: Option<String> },
    /// A watched run's terminal session is gone.
    Ended { run: String },
    /// What live pane view `pane` ([`Op::Pane`]) saw.
    Pane { pane: u64, event: PaneUp },
    /// What ACP agent `agent` ([`Op::AgentStart`]) wrote, or that it ended.
    Agent { agent: u64, event: AgentUp },
    /// The answer to [`Down::Ping`].
    Pong,
}

/// What an ACP agent a runner started sends up, in the order it happened: every byte of
/// its stdout before its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentUp {
    /// Bytes of its stdout (base64), at most [`MAX_PANE_CHUNK`] before encoding.
    Output { data: String },
    /// Bytes of its stderr (base64), as [`AgentUp::Output`].
    Stderr { data: String },
    /// It ended, and why.
    Exited { reason: String },
}

/// What a live pane view sends up ([`crate::machines::terminal::PaneEvent`] on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PaneUp {
    Size {
        cols: u16,
        rows: u16,
    },
    /// Bytes drawn (base64), at most [`MAX_PANE_CHUNK`] before encoding.
    Output {
        data: String,
    },
    Ended {
        reason: String,
    },
}

/// The most bytes of a pane's output one [`PaneUp::Output`] carries.
pub const MAX_PANE_CHUNK: usize = 64 << 10;

/// The hook files a runner sends up. The session info may name the run's transcript:
/// a path on the runner's machine, which lab serve never opens; it has the runner
/// follow it ([`Op::Watch`]) and reads the run's mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookFile {
    Spool,
    Marker,
    Session,
    /// A sandboxed run's egress ledger (`<home>/egress/<run>.ledger.json`, its proxy's).
    Ledger,
}

/// The files lab serve writes on the runner's machine for a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchFile {
    /// `<runtime>/<run>.settings.json`: the agent's hook settings.
    Settings,
    /// `<runtime>/<run>.launch.json`: what `lab agent-exec` starts.
    Launch,
    /// `<home>/egress/<run>.allow.json`: a sandboxed run's allowlist. Written first for
    /// a sandboxed launch: it makes the run's jail directory (`<runtime>/<run>.box/`),
    /// where its settings and launch file then go.
    EgressAllow,
}

/// lab serve → runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Down {
    /// The answer to `hello`: the runner is connected.
    Welcome {
        /// lab serve's version.
        version: String,
    },
    /// Do `op` on the runner's terminal; answered by one [`Up::Reply`].
    Call { id: u64, op: Op },
    /// Answered by [`Up::Pong`]: a link that carries no pings of its own (an ssh
    /// session's stdio) is known alive by these.
    Ping,
}

/// What lab serve asks of the terminal on the runner's machine: the terminal seam
/// ([`crate::machines::terminal::Terminal`]) and starting and ending a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    Capture {
        target: String,
    },
    Key {
        target: String,
        key: String,
    },
    Literal {
        target: String,
        text: String,
    },
    Paste {
        target: String,
        buffer: String,
        text: String,
    },
    Alive {
        target: String,
    },
    /// A new detached session `target` running `argv` (no shell).
    Start {
        target: String,
        argv: Vec<String>,
    },
    Kill {
        target: String,
    },
    /// The absolute path of `program` there (on PATH unless a path): answered `text`.
    Resolve {
        program: String,
    },
    /// Whether `path` is a directory there: `done` or an error.
    IsDir {
        path: String,
    },
    /// Write one of run `run`'s launch files there (0600).
    Write {
        run: String,
        file: LaunchFile,
        content: String,
    },
    /// Follow run `run`: its transcript from byte `offset` (none: no transcript), its
    /// spool and marker, and whether session `target` is alive; sent up as
    /// [`Up::Transcript`], [`Up::RunFile`] and [`Up::Ended`].
    Watch {
        run: String,
        target: String,
        transcript: Option<String>,
        offset: u64,
    },
    /// Stop following run `run`.
    Unwatch {
        run: String,
    },
    /// The text of the plan file `path` a plan dialog names, read there only from
    /// inside the agent's home (`home`, else the runner's own HOME) or `workdir`, as an
    /// untrusted file (the rules of a local run's plan files): answered `text`.
    ReadPlan {
        path: String,
        workdir: String,
        home: Option<String>,
    },
    /// A run's git work there ([`crate::worktree::call`]): answered `text`, the JSON of
    /// its [`crate::worktree::call::WorkOutcome`].
    Work {
        call: Box<crate::worktree::call::WorkCall>,
    },
    /// Type `steps` into `target` with `pause_ms` after each but the last, there: an
    /// answer in one message, its pauses kept on the agent's machine.
    Play {
        target: String,
        steps: Vec<Step>,
        pause_ms: u32,
    },
    /// Play an answer onto `dialog` in `target` once the provider build `build` (its
    /// digest; this runner's own bundled build) sees it drawn on the pane there and the
    /// pane held still `settle_ms`, looking for at most `look_ms`: answered `text`, the
    /// JSON of an [`Answered`].
    Answer {
        target: String,
        build: String,
        dialog: Box<crate::agents::model::Dialog>,
        steps: Vec<Step>,
        pause_ms: u32,
        settle_ms: u32,
        look_ms: u32,
    },
    /// Open live view `pane` (a number lab serve chose) of session `target`'s pane:
    /// what it sees goes up as [`Up::Pane`] until [`Op::PaneClose`] or the link ends.
    Pane {
        pane: u64,
        target: String,
    },
    /// Type bytes (base64) into view `pane`'s pane.
    PaneKeys {
        pane: u64,
        data: String,
    },
    /// Make view `pane`'s pane `cols` × `rows`.
    PaneResize {
        pane: u64,
        cols: u16,
        rows: u16,
    },
    /// Close view `pane`.
    PaneClose {
        pane: u64,
    },
    /// Start ACP agent `agent` (a number lab serve chose) of run `run`: `argv` (its
    /// program resolved there) with exactly `env`, in `cwd`, its own process group. Its
    /// stdout and stderr go up as [`Up::Agent`] until it ends; it lives as long as this
    /// link (its stdio is the link's).
    AgentStart {
        agent: u64,
        run: String,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: String,
    },
    /// Write bytes (base64) to agent `agent`'s stdin.
    AgentInput {
        agent: u64,
        data: String,
    },
    /// Signal agent `agent`'s process group: SIGTERM, or SIGKILL with `kill`.
    AgentStop {
        agent: u64,
        kill: bool,
    },
}

/// What [`Op::Answer`] did, as the reply's text (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "typed", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answered {
    /// The keys were typed onto `pane`.
    Yes { pane: String },
    /// Nothing was typed, and why: lab serve plays the answer itself.
    No { why: String },
}

/// The longest [`Op::Answer`] looks for its prompt before it leaves the answer to lab serve.
pub const MAX_LOOK_MS: u32 = 2_000;

/// One step of [`Op::Play`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    Key(String),
    Literal(String),
}

impl From<&crate::agents::model::KeyOp> for Step {
    fn from(op: &crate::agents::model::KeyOp) -> Step {
        match op {
            crate::agents::model::KeyOp::Key(k) => Step::Key(k.clone()),
            crate::agents::model::KeyOp::Literal(t) => Step::Literal(t.clone()),
        }
    }
}

impl From<Step> for crate::agents::model::KeyOp {
    fn from(step: Step) -> crate::agents::model::KeyOp {
        match step {
            Step::Key(k) => crate::agents::model::KeyOp::Key(k),
            Step::Literal(t) => crate::agents::model::KeyOp::Literal(t),
        }
    }
}

/// The most steps one [`Op::Play`] holds, and the longest pause between them.
pub const MAX_STEPS: usize = 256;
pub const MAX_PAUSE_MS: u32 = 5_000;

/// A call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Done,
    Text {
        text: String,
    },
    Alive {
        alive: bool,
    },
    /// The runner refused the call or the terminal failed: why.
    Error {
        message: String,
    },
}

/// The most a typed or pasted text may hold.
pub const MAX_TEXT: usize = 256 << 10;
/// The most a session's command line may hold, all arguments together.
pub const MAX_ARGV: usize = 16 << 10;

/// Whether the runner does `op`: only sessions named as lab names them (`lab-…`),
/// key names as providers' plans use them, texts and command lines within bounds.
pub fn check_op(op: &Op) -> Result<(), String> {
    let target = match op {
        Op::Capture { target }
        | Op::Key { target, .. }
        | Op::Literal { target, .. }
        | Op::Paste { target, .. }
        | Op::Alive { target }
        | Op::Start { target, .. }
        | Op::Kill { target }
        | Op::Watch { target, .. }
        | Op::Play { target, .. }
        | Op::Pane { target, .. }
        | Op::Answer { target, .. } => target,
        Op::PaneKeys { data, .. } => {
            return if data.len() > MAX_TEXT { Err("keys over the limit".into()) } else { Ok(()) };
        }
        Op::PaneResize { .. } | Op::PaneClose { .. } | Op::AgentStop { .. } => return Ok(()),
        Op::AgentInput { data, .. } => {
            return if data.len() > MAX_TEXT { Err("input over the limit".into()) } else { Ok(()) };
        }
        Op::AgentStart { run, argv, env, cwd, .. } => {
            crate::store::paths::RunId::parse(run).ok_or_else(|| format!("{run:?} is not a run id"))?;
            if argv.is_empty() || argv[0].is_empty() {
                return Err("an empty command line".into());
            }
            let all = argv.iter().chain(env.iter().flat_map(|(k, v)| [k, v])).chain([cwd]);
            if all.clone().map(|a| a.len() + 1).sum::<usize>() > MAX_TEXT {
                return Err(format!("a command line and environment over {MAX_TEXT} bytes"));
            }
            if all.clone().any(|a| a.contains('\0')) || env.iter().any(|(k, _)| k.is_empty() || k.contains('=')) {
                return Err("a NUL byte, or an environment name that is empty or holds `=`".into());
            }
            return if std::path::Path::new(cwd).is_absolute() {
                Ok(())
            } else {
                Err(format!("{cwd:?} is not an absolute path"))
            };
        }
        Op::Resolve { program } => {
            return if program.is_empty() || program.contains('\0') {
                Err("an empty program name".into())
            } else {
                Ok(())
            };
        }
        Op::IsDir { path } => {
            return if std::path::Path::new(path).is_absolute() && !path.contains('\0') {
                Ok(())
            } else {
                Err(format!("{path:?} is not an absolute path"))
            };
        }
        Op::Write { run, content, .. } => {
            return match crate::store::paths::RunId::parse(run) {
                None => Err(format!("{run:?} is not a run id")),
                Some(_) if content.len() > MAX_TEXT => Err("a launch file over the limit".into()),
                Some(_) => Ok(()),
            };
        }
        Op::Unwatch { run } => {
            return crate::store::paths::RunId::parse(run)
                .map(|_| ())
                .ok_or_else(|| format!("{run:?} is not a run id"));
        }
        Op::Work { call } => return crate::worktree::call::check(call),
        Op::ReadPlan { path, workdir, home } => {
            let absolute = |p: &str| std::path::Path::new(p).is_absolute() && !p.contains('\0') && p.len() <= 4096;
            return if [Some(path), Some(workdir), home.as_ref()].into_iter().flatten().all(|p| absolute(p)) {
                Ok(())
            } else {
                Err("a plan file, workdir or home that is not an absolute path".into())
            };
        }
    };
    if let Op::Watch { run, transcript, .. } = op {
        crate::store::paths::RunId::parse(run).ok_or_else(|| format!("{run:?} is not a run id"))?;
        if transcript.as_deref().is_some_and(|t| !std::path::Path::new(t).is_absolute()) {
            return Err("a transcript path that is not absolute".into());
        }
    }
    let lab_name = |s: &str| {
        s.strip_prefix("lab-").is_some_and(|rest| {
            (1..=64).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
    };
    if !lab_name(target) {
        return Err(format!("{target:?} is not a session lab names (lab-[a-z0-9-]+)"));
    }
    match op {
        Op::Key { key, .. }
            if key.is_empty() || key.len() > 16 || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            Err(format!("{key:?} is not a key name ([A-Za-z0-9-]{{1,16}})"))
        }
        Op::Literal { text, .. } | Op::Paste { text, .. } if text.len() > MAX_TEXT => {
            Err(format!("a text of {} bytes is over the {MAX_TEXT}-byte limit", text.len()))
        }
        Op::Paste { buffer, .. } if !lab_name(buffer) => Err(format!("{buffer:?} is not a buffer lab names")),
        Op::Play { steps, pause_ms, .. } if steps.len() > MAX_STEPS || *pause_ms > MAX_PAUSE_MS => {
            Err(format!("a plan of at most {MAX_STEPS} steps and {MAX_PAUSE_MS} ms pauses"))
        }
        Op::Answer { build, .. }
            if build.is_empty() || build.len() > 64 || !build.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Err(format!("{build:?} is not a build digest"))
        }
        Op::Answer { steps, pause_ms, settle_ms, look_ms, .. }
            if steps.len() > MAX_STEPS
                || *pause_ms > MAX_PAUSE_MS
                || *settle_ms > MAX_PAUSE_MS
                || *look_ms > MAX_LOOK_MS =>
        {
            Err(format!(
                "an answer of at most {MAX_STEPS} steps, {MAX_PAUSE_MS} ms pauses and {MAX_LOOK_MS} ms of looking"
            ))
        }
        Op::Play { steps, .. } | Op::Answer { steps, .. } => steps.iter().try_for_each(|s| match s {
            Step::Key(key)
                if key.is_empty() || key.len() > 16 || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
            {
                Err(format!("{key:?} is not a key name ([A-Za-z0-9-]{{1,16}})"))
            }
            Step::Literal(text) if text.len() > MAX_TEXT => Err("a text over the limit".into()),
            _ => Ok(()),
        }),
        Op::Start { argv, .. } if argv.is_empty() || argv[0].is_empty() => Err("an empty command line".into()),
        Op::Start { argv, .. } if argv.iter().map(|a| a.len() + 1).sum::<usize>() > MAX_ARGV => {
            Err(format!("a command line over {MAX_ARGV} bytes"))
        }
        Op::Start { argv, .. } if argv.iter().any(|a| a.contains('\0')) => Err("a NUL byte in the command line".into()),
        _ => Ok(()),
    }
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("not a message of the runner protocol: {0}")]
    Malformed(String),
}

/// Decode one text frame.
pub fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, FrameError> {
    if text.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(text.len()));
    }
    serde_json::from_str(text).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Encode one frame.
pub fn encode<T: Serialize>(msg: &T) -> String {
    serde_json::to_string(msg).expect("protocol messages serialise")
}

/// The refusal for a runner of another version, naming both (None: the same).
pub fn version_refusal(runner: &str) -> Option<String> {
    (runner != VERSION).then(|| {
        format!(
            "this lab serve is version {VERSION} and the runner is version {}: run the same lab on both machines",
            if runner.is_empty() { "(not given)" } else { runner }
        )
    })
}

/// Whether a hello's paths and environment can be used to launch there: absolute
/// paths of plain characters ([`crate::util::shell::is_plain`]: they go into command lines
/// the operator pastes, which ssh hands to a second shell), variable names an
/// environment holds.
pub fn check_facts(home: &str, tmux_socket: &str, lab_exe: &str, env: &[(String, String)]) -> Result<(), String> {
    for (what, p) in [("home", home), ("tmux_socket", tmux_socket), ("lab_exe", lab_exe)] {
        if !std::path::Path::new(p).is_absolute() || p.len() > 4096 {
            return Err(format!("the hello's {what} is not an absolute path"));
        }
        if !crate::util::shell::is_plain(p) {
            return Err(format!(
                "the hello's {what} has characters lab does not put in a command line (only letters, digits and \
-_./=:,+@%): {:?}",
                clean_label(p)
            ));
        }
    }
    if env.len() > 256 || env.iter().any(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0')) {
        return Err("the hello's environment is not one an agent can start with".into());
    }
    Ok(())
}

/// What the hello's free text may hold: printable, at most 255 characters.
pub fn clean_label(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(255).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_what_is_not_the_protocol() {
        let up = Up::Hello {
            proof: "ab".into(),
            hostname: "build-2".into(),
            home: "/home/lab/.lab".into(),
            tmux_socket: "/s".into(),
            lab_exe: "/usr/bin/lab".into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
        };
        let text = encode(&up);
        assert_eq!(
            text,
            r#"{"type":"hello","proof":"ab","hostname":"build-2","home":"/home/lab/.lab","tmux_socket":"/s","lab_exe":"/usr/bin/lab","env":[["PATH","/usr/bin"]]}"#
        );
        assert_eq!(decode::<Up>(&text).unwrap(), up);
        let down = Down::Welcome { version: VERSION.into() };
        assert_eq!(decode::<Down>(&encode(&down)).unwrap(), down);
        assert_eq!(encode(&Down::Ping), r#"{"type":"ping"}"#);
        assert_eq!(decode::<Up>(r#"{"type":"pong"}"#).unwrap(), Up::Pong);
        let session = Up::RunFile { run: "r-1".into(), file: HookFile::Session, content: Some("{}".into()) };
        assert_eq!(decode::<Up>(&encode(&session)).unwrap(), session);
        for bad in [
            "",
            "null",
            "{}",
            r#"{"type":"nope"}"#,
            r#"{"type":"hello","hostname":"a"}"#,
            r#"{"type":"hello","hostname":"a","home":"b","tmux_socket":"c","lab_exe":"d","env":[],"extra":1}"#,
            r#"{"type":"run_file","run":"r-1","file":"settings","content":null}"#,
            r#"{"type":"reply","id":1,"reply":{"reply":"maybe"}}"#,
            "[1,2]",
        ] {
            assert!(matches!(decode::<Up>(bad), Err(FrameError::Malformed(_))), "{bad}");
        }
        let call = Down::Call { id: 7, op: Op::Key { target: "lab-r-1".into(), key: "Enter".into() } };
        assert_eq!(encode(&call), r#"{"type":"call","id":7,"op":{"op":"key","target":"lab-r-1","key":"Enter"}}"#);
        assert_eq!(decode::<Down>(&encode(&call)).unwrap(), call);
        let reply = Up::Reply { id: 7, reply: Reply::Alive { alive: true } };
        assert_eq!(decode::<Up>(&encode(&reply)).unwrap(), reply);
        let huge = format!(r#"{{"type":"ended","run":"{}"}}"#, "a".repeat(MAX_FRAME));
        assert_eq!(decode::<Up>(&huge), Err(FrameError::TooLarge(huge.len())));
    }

    #[test]
    fn another_version_is_refused_naming_both() {
        assert_eq!(version_refusal(VERSION), None);
        let e = version_refusal("0.0.1-old").unwrap();
        assert!(e.contains(&format!("version {VERSION}")) && e.contains("version 0.0.1-old"), "{e}");
        assert!(version_refusal("").unwrap().contains("(not given)"));
    }

    fn agent_start(run: &str, argv: Vec<String>, env: Vec<(String, String)>, cwd: &str) -> Op {
        Op::AgentStart { agent: 1, run: run.into(), argv, env, cwd: cwd.into() }
    }

    #[test]
    fn the_runner_only_does_what_lab_would_ask() {
        let t = || "lab-r-0a1b".to_string();
        for ok in [
            Op::Capture { target: t() },
            Op::Key { target: t(), key: "Down".into() },
            Op::Literal { target: t(), text: "hi;".into() },
            Op::Paste { target: t(), buffer: "lab-r-0a1b".into(), text: "x\ny".into() },
            Op::Start { target: t(), argv: vec!["/usr/bin/lab".into(), "agent-exec".into()] },
            Op::Kill { target: t() },
            Op::AgentStart {
                agent: 1,
                run: "r-0a1b".into(),
                argv: vec!["/usr/bin/agent".into(), "acp".into()],
                env: vec![("HOME".into(), "/home/u".into())],
                cwd: "/w".into(),
            },
            Op::AgentInput { agent: 1, data: "eA==".into() },
            Op::AgentStop { agent: 1, kill: true },
        ] {
            assert_eq!(check_op(&ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            (Op::Capture { target: "main".into() }, "not a session lab names"),
            (Op::Capture { target: "lab-../x".into() }, "not a session lab names"),
            (Op::Alive { target: "lab-".into() }, "not a session lab names"),
            (Op::Key { target: t(), key: "C-c; kill-server".into() }, "not a key name"),
            (Op::Key { target: t(), key: String::new() }, "not a key name"),
            (Op::Literal { target: t(), text: "x".repeat(MAX_TEXT + 1) }, "over the"),
            (Op::Paste { target: t(), buffer: "b".into(), text: String::new() }, "not a buffer"),
            (Op::Start { target: t(), argv: vec![] }, "empty command line"),
            (Op::Start { target: t(), argv: vec!["x".repeat(MAX_ARGV)] }, "over"),
            (Op::Start { target: t(), argv: vec!["a\0b".into()] }, "NUL"),
            (Op::Resolve { program: String::new() }, "empty program"),
            (Op::IsDir { path: "rel".into() }, "not an absolute path"),
            (
                Op::Write { run: "../../etc/passwd".into(), file: LaunchFile::Launch, content: String::new() },
                "not a run id",
            ),
            (
                Op::Watch { run: "r-1".into(), target: t(), transcript: Some("t.jsonl".into()), offset: 0 },
                "not absolute",
            ),
            (Op::Watch { run: "x/y".into(), target: t(), transcript: None, offset: 0 }, "not a run id"),
            (Op::Unwatch { run: "..".into() }, "not a run id"),
            (Op::ReadPlan { path: "plan.md".into(), workdir: "/w".into(), home: None }, "not an absolute path"),
            (Op::ReadPlan { path: "/w/p.md".into(), workdir: "w".into(), home: None }, "not an absolute path"),
            (
                Op::ReadPlan { path: "/w/p.md".into(), workdir: "/w".into(), home: Some("/h\0".into()) },
                "not an absolute path",
            ),
            (Op::Play { target: t(), steps: vec![Step::Key("a b".into())], pause_ms: 0 }, "not a key name"),
            (
                Op::Play { target: t(), steps: vec![Step::Literal("x".repeat(MAX_TEXT + 1))], pause_ms: 0 },
                "over the limit",
            ),
            (Op::Play { target: t(), steps: vec![Step::Key("a".into()); MAX_STEPS + 1], pause_ms: 0 }, "at most"),
            (Op::Play { target: t(), steps: vec![], pause_ms: MAX_PAUSE_MS + 1 }, "at most"),
            (Op::Play { target: "x".into(), steps: vec![], pause_ms: 0 }, "not a session lab names"),
            (agent_start("../r", vec!["/a".into()], vec![], "/w"), "not a run id"),
            (agent_start("r-1", vec![], vec![], "/w"), "empty command line"),
            (agent_start("r-1", vec!["/a".into()], vec![], "w"), "not an absolute path"),
            (agent_start("r-1", vec!["/a\0".into()], vec![], "/w"), "NUL"),
            (agent_start("r-1", vec!["/a".into()], vec![("A=B".into(), "x".into())], "/w"), "holds `=`"),
            (agent_start("r-1", vec!["/a".into()], vec![(String::new(), "x".into())], "/w"), "empty"),
            (agent_start("r-1", vec!["x".repeat(MAX_TEXT)], vec![], "/w"), "over"),
            (Op::AgentInput { agent: 1, data: "x".repeat(MAX_TEXT + 1) }, "over the limit"),
        ] {
            let e = check_op(&bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn labels_are_cleaned() {
        assert_eq!(clean_label("a\u{1b}[31mb\nc"), "a[31mbc");
        assert_eq!(clean_label(&"x".repeat(300)).len(), 255);
    }

    #[test]
    fn proofs_bind_the_key_the_side_the_host_and_both_nonces() {
        let key = proof::key_of("labr_secret");
        assert_eq!(key.len(), 64);
        let (rn, sn) = (proof::nonce().unwrap(), proof::nonce().unwrap());
        assert!(proof::is_nonce(&rn) && proof::is_nonce(&sn) && rn != sn);
        assert!(!proof::is_nonce("abc") && !proof::is_nonce(&"G".repeat(64)) && !proof::is_nonce(&"A".repeat(64)));
        let s = proof::serve(&key, "edge", &rn, &sn);
        assert_eq!(s, proof::serve(&key, "edge", &rn, &sn), "the same inputs, the same proof");
        assert!(proof::is_nonce(&s), "64 hex digits");
        // Every input counts: the side (no reflection), key, host, each nonce.
        for other in [
            proof::runner(&key, "edge", &rn, &sn),
            proof::serve(&proof::key_of("labr_other"), "edge", &rn, &sn),
            proof::serve(&key, "edge2", &rn, &sn),
            proof::serve(&key, "edge", &sn, &sn),
            proof::serve(&key, "edge", &rn, &rn),
        ] {
            assert!(!proof::matches(&other, &s));
        }
        assert!(proof::matches(&s.clone(), &s));
        // The key is the credential's SHA-256, as hosts.json keeps it.
        let d = tempfile::tempdir().unwrap();
        let c = crate::machines::hosts::credentials::HostCredentials::new(d.path().join("hosts.json"));
        let cred = c.add("edge", std::time::SystemTime::now()).unwrap();
        assert_eq!(c.list().unwrap()[0].credential_sha256, proof::key_of(&cred));
    }
}
