//! What `lab doctor` concludes from what it found: one [`Finding`] per thing checked,
//! each a pure function of the facts gathered (by `probe`), so every verdict and every
//! fix line is tested without the machine it describes.

use serde::Serialize;

/// How a check came out. `fail` makes `lab doctor` exit non-zero; `warn` does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

/// One thing checked: its area (`tmux`, `agent`, `provider`, `home`, `serve`, `host`,
/// `sandbox`, `push`), what exactly, what was found, and, unless it is fine, the one
/// line that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub area: &'static str,
    pub subject: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    pub fn new(area: &'static str, subject: impl Into<String>, status: Status, detail: impl Into<String>) -> Self {
        Finding { area, subject: subject.into(), status, detail: detail.into(), fix: None }
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// The oldest tmux lab drives (`capture-pane -e -J`, `display -p` formats, control mode
/// as lab uses it).
pub const TMUX_MIN: (u32, u32) = (3, 0);

/// The first `N.N[.N]` in a program's `--version` output ("tmux 3.3a" → 3.3,
/// "codex-cli 0.171.0" → 0.171.0, "2.1.332 (Claude Code)" → 2.1.332).
pub fn version_in(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // A word start, or a `v` that starts one ("v1.18.33").
        let starts = |j: usize| j == 0 || !bytes[j - 1].is_ascii_alphanumeric() && bytes[j - 1] != b'.';
        let at_word_start = starts(i) || bytes[i - 1] == b'v' && starts(i - 1);
        if bytes[i].is_ascii_digit() && at_word_start {
            let end = text[i..].find(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(text.len(), |n| i + n);
            let v = text[i..end].trim_end_matches('.');
            if v.contains('.') && v.split('.').all(|p| !p.is_empty()) {
                return Some(v.to_string());
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// A version's numbers, for comparing ("0.171.0" < "0.172.0", "3.3" < "3.10").
pub fn numbers(version: &str) -> Vec<u64> {
    let core = version.split(['-', '+']).next().unwrap_or(version);
    core.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// tmux: found (its `-V` output) or not.
pub fn tmux(found: Option<(&str, &str)>) -> Finding {
    let Some((path, version_text)) = found else {
        return Finding::new("tmux", "tmux", Status::Fail, "tmux is not on PATH: lab runs every agent in tmux")
            .fix("install it (Debian: apt-get install tmux) or put it on the PATH lab serve gets");
    };
    let Some(v) = version_in(version_text) else {
        return Finding::new("tmux", "tmux", Status::Warn, format!("{path} says {version_text:?}: no version in it"))
            .fix("check that it is tmux (`tmux -V`)");
    };
    let n = numbers(&v);
    let min = [TMUX_MIN.0 as u64, TMUX_MIN.1 as u64];
    if n.as_slice() < min.as_slice() {
        return Finding::new(
            "tmux",
            "tmux",
            Status::Fail,
            format!("tmux {v} at {path}: lab needs {}.{} or newer", min[0], min[1]),
        )
        .fix("install a newer tmux (Debian 11 and later have one)");
    }
    Finding::new("tmux", "tmux", Status::Ok, format!("tmux {v} ({path})"))
}

/// What was found of one agent a provider runs.
#[derive(Debug, Clone, Default)]
pub struct AgentFacts {
    /// The provider's name (`POST /runs`'s `provider`).
    pub name: String,
    /// The command, as lab.toml or the provider names it.
    pub program: String,
    /// Whether lab.toml names this agent (its program, env or `[agents.<name>]`): one the
    /// operator set up, not only one lab could run.
    pub configured: bool,
    /// Where the program is, if found.
    pub path: Option<String>,
    /// The version its `--version` printed (None: it printed none in time).
    pub version: Option<String>,
    /// The release lab's tests run (docs/compat-matrix.md), if listed.
    pub pinned: Option<String>,
    /// Releases the compatibility matrix has a column for.
    pub tested: Vec<String>,
}

/// One agent: found, its version against the tested one.
pub fn agent(a: &AgentFacts) -> Finding {
    let subject = a.name.clone();
    let Some(path) = &a.path else {
        let detail = format!("`{}` is not found (lab.toml's program, else on PATH)", a.program);
        let fix = format!(
            "install it, or name it in lab.toml: [providers.{}] program = \"/path/to/{}\"",
            a.name,
            a.program.rsplit('/').next().unwrap_or(&a.program)
        );
        // An agent nobody set up is optional: lab offers it when it is there.
        let status = if a.configured { Status::Fail } else { Status::Info };
        return Finding::new("agent", subject, status, detail).fix(fix);
    };
    let Some(v) = a.version.clone() else {
        return Finding::new(
            "agent",
            subject,
            Status::Warn,
            format!("{path}: `--version` printed no version within 5 s"),
        )
        .fix(format!("run `{path} --version` and see what it says"));
    };
    let Some(pinned) = &a.pinned else {
        return Finding::new(
            "agent",
            subject,
            Status::Ok,
            format!("{v} at {path} (no release of it is pinned by lab's tests)"),
        );
    };
    let tested = a.tested.iter().any(|t| t == &v);
    match numbers(&v).cmp(&numbers(pinned)) {
        std::cmp::Ordering::Equal => {
            Finding::new("agent", subject, Status::Ok, format!("{v} at {path}: the release lab's tests pin"))
        }
        _ if tested => Finding::new(
            "agent",
            subject,
            Status::Ok,
            format!("{v} at {path}: in the compatibility matrix (pinned: {pinned})"),
        ),
        std::cmp::Ordering::Greater => Finding::new(
            "agent",
            subject,
            Status::Warn,
            format!("{v} at {path} is newer than the {pinned} lab's tests pin: not tested yet"),
        )
        .fix("most releases work; if prompts stop showing, install the pinned one (scripts/install-*.sh) or run scripts/compat"),
        std::cmp::Ordering::Less => Finding::new(
            "agent",
            subject,
            Status::Warn,
            format!("{v} at {path} is older than the {pinned} lab's tests pin"),
        )
        .fix(format!("update it to {pinned} or newer")),
    }
}

/// Whether an agent is logged in: `None` when its provider does not say where a login
/// is; else its hints and the one found (a variable's name, a file).
pub fn login(name: &str, seen: Option<(&crate::agents::model::LoginHints, Option<String>)>) -> Finding {
    let subject = format!("{name} login");
    match seen {
        None => Finding::new(
            "agent",
            subject,
            Status::Info,
            "cannot tell whether it is logged in: its provider does not say",
        ),
        Some((_, Some(found))) => Finding::new("agent", subject, Status::Ok, format!("logged in ({found})")),
        Some((hints, None)) => {
            let mut looked = Vec::new();
            if !hints.env.is_empty() {
                looked.push(format!("none of {} is set", hints.env.join(", ")));
            }
            if !hints.files.is_empty() {
                looked.push(format!("no {}", hints.files.join(", no ")));
            }
            Finding::new("agent", subject, Status::Warn, format!("not logged in: {}", looked.join("; ")))
                .fix(if hints.how.is_empty() { "log the agent in".to_string() } else { hints.how.clone() })
        }
    }
}

/// The pinned release and the tested columns per agent, from the compatibility matrix's
/// text (docs/compat-matrix.md): its "Pinned" list (`- <Title> (<how>): <version>
/// (…)`) and each section's table header. Keyed by the title without its parenthesis
/// ("Claude Code"), which is the provider's display name.
pub fn matrix(text: &str) -> Vec<(String, String, Vec<String>)> {
    let title = |s: &str| s.split(" (").next().unwrap_or(s).trim().to_string();
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("- ") {
            if let Some((name, after)) = rest.split_once("): ") {
                if let Some(v) = version_in(after.split(' ').next().unwrap_or("")) {
                    out.push((title(name), v, Vec::new()));
                }
            }
        } else if let Some(h) = line.strip_prefix("## ") {
            section = Some(title(h));
        } else if line.starts_with("| scenario |") {
            if let Some(entry) = section.as_ref().and_then(|s| out.iter_mut().find(|e| &e.0 == s)) {
                entry.2 = line.split('|').skip(2).map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
            }
        }
    }
    out
}

/// lab's home: where it is, whether the ownership checks lab serve makes pass, and room.
pub fn home(root: &str, ownership: Result<(), String>, mode: Option<u32>, free_bytes: Option<u64>) -> Vec<Finding> {
    let mut out = Vec::new();
    match (ownership, mode) {
        (Ok(()), Some(m)) if m & 0o022 == 0 && m & 0o077 != 0 => out.push(
            Finding::new(
                "home",
                root,
                Status::Warn,
                format!("mode {m:04o}: other users can read lab's state until lab serve makes it 0700"),
            )
            .fix(format!("chmod 700 {root}")),
        ),
        (Ok(()), Some(m)) if m & 0o077 != 0 => out.push(
            Finding::new(
                "home",
                root,
                Status::Fail,
                format!(
                    "mode {m:04o}: other users can read or change lab's state (transcripts, the token's folder) \
                     until lab serve makes it 0700"
                ),
            )
            .fix(format!("chmod 700 {root}")),
        ),
        (Ok(()), _) => out.push(Finding::new("home", root, Status::Ok, "owned by you, out of other users' reach")),
        (Err(why), _) => {
            out.push(Finding::new("home", root, Status::Fail, format!("{why}: lab serve refuses to start on it")).fix(
                format!("chmod 700 {root} (and make each folder above it yours or root's, not writable by others)"),
            ))
        }
    }
    const GIB: u64 = 1 << 30;
    match free_bytes {
        Some(b) if b < GIB / 10 => out.push(
            Finding::new(
                "home",
                "free space",
                Status::Fail,
                format!("{} MiB free: transcripts and the search index need room", b >> 20),
            )
            .fix("free some space on that disk, or move lab's home (--home, LAB_HOME)"),
        ),
        Some(b) if b < GIB => out.push(
            Finding::new("home", "free space", Status::Warn, format!("{} MiB free", b >> 20))
                .fix("free some space: lab's search index and worktrees grow with every run"),
        ),
        Some(b) => {
            out.push(Finding::new("home", "free space", Status::Ok, format!("{:.1} GiB free", b as f64 / GIB as f64)))
        }
        None => {}
    }
    out
}

/// One of lab's files in its home: what checking it said (None: it is not there).
pub fn store(name: &'static str, path: &str, checked: Option<Result<String, String>>) -> Finding {
    match checked {
        None => Finding::new("home", name, Status::Info, format!("{path}: none yet (made when first needed)")),
        Some(Ok(what)) => Finding::new("home", name, Status::Ok, format!("{path}: {what}")),
        Some(Err(why)) => Finding::new("home", name, Status::Fail, format!("{path}: {why}"))
            .fix(format!("fix or move the file aside (lab keeps the rest): mv {path} {path}.broken")),
    }
}

/// The token file: present and private.
pub fn token(path: &str, mode: Option<u32>) -> Finding {
    match mode {
        None => Finding::new(
            "serve",
            "token",
            Status::Info,
            format!("{path}: none yet (lab serve or `lab token` makes it)"),
        ),
        Some(m) if m & 0o077 != 0 => Finding::new(
            "serve",
            "token",
            Status::Fail,
            format!("{path} has mode {m:04o}: other users can read lab's token and start agents as you"),
        )
        .fix(format!("chmod 600 {path} && lab token --rotate")),
        Some(_) => Finding::new("serve", "token", Status::Ok, format!("{path} (0600)")),
    }
}

/// What was found of lab serve.
#[derive(Debug, Clone)]
pub enum Serving {
    /// Its control socket answered: at this address, this version.
    Running { addr: String, version: String },
    /// None runs; the address it would take is free.
    Stopped { addr: String },
    /// None runs, and something else holds the address.
    PortTaken { addr: String, why: String },
}

pub fn serve(s: &Serving) -> Finding {
    match s {
        Serving::Running { addr, version } => {
            Finding::new("serve", "lab serve", Status::Ok, format!("running (lab {version}), serving http://{addr}"))
        }
        Serving::Stopped { addr } => {
            Finding::new("serve", "lab serve", Status::Warn, format!("not running ({addr} is free)"))
                .fix("start it: `lab serve`, or always on: `lab service install`")
        }
        Serving::PortTaken { addr, why } => Finding::new(
            "serve",
            "lab serve",
            Status::Fail,
            format!("not running, and {addr} is taken by another program ({why})"),
        )
        .fix(format!(
            "stop what listens there (ss -ltnp 'sport = :{}'), or serve on another --addr",
            addr.rsplit(':').next().unwrap_or(addr)
        )),
    }
}

/// One host as the running serve reports it (`GET /hosts`).
pub fn host(name: &str, state: &str, version: Option<&str>, last_error: Option<&str>) -> Finding {
    match state {
        "connected" => {
            let v = version.map_or(String::new(), |v| format!(", lab {v} there"));
            let stale = match version {
                Some(v) if v != env!("CARGO_PKG_VERSION") => format!(" (this lab is {})", env!("CARGO_PKG_VERSION")),
                _ => String::new(),
            };
            Finding::new("host", name, Status::Ok, format!("connected{v}{stale}"))
        }
        other => {
            let why = last_error.map_or_else(|| "never reached yet".to_string(), |e| format!("last error: {e}"));
            Finding::new("host", name, Status::Fail, format!("{other}: {why}"))
                .fix(format!("check the machine is up and reachable (ssh to it by hand), or `lab hosts remove {name}`"))
        }
    }
}

/// bubblewrap: found and able to make a jail here, as lab.toml wants it or not.
pub fn bwrap(wanted: bool, found: Option<&str>, trial: Option<Result<(), String>>) -> Finding {
    let missing = if wanted { Status::Fail } else { Status::Info };
    match (found, trial) {
        (None, _) => Finding::new("sandbox", "bubblewrap", missing, "bwrap is not on PATH: runs cannot be sandboxed with it")
            .fix("install it (Debian: apt-get install bubblewrap)"),
        (Some(path), Some(Err(why))) => Finding::new(
            "sandbox",
            "bubblewrap",
            if wanted { Status::Fail } else { Status::Warn },
            format!("{path} cannot make a jail here: {why}"),
        )
        .fix("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu an AppArmor profile for bwrap)"),
        (Some(path), _) => Finding::new("sandbox", "bubblewrap", Status::Ok, format!("{path} makes a jail here")),
    }
}

/// Web Push's key pair: absent (made by serve), readable and private, or broken.
pub fn push_key(path: &str, checked: Option<Result<u32, String>>) -> Finding {
    match checked {
        None => Finding::new("push", "VAPID key", Status::Info, format!("{path}: none yet (lab serve makes it)")),
        Some(Err(why)) => Finding::new("push", "VAPID key", Status::Fail, why)
            .fix("make a new one: `lab push-key --rotate` (every phone subscribes again)"),
        Some(Ok(mode)) if mode & 0o077 != 0 => Finding::new(
            "push",
            "VAPID key",
            Status::Fail,
            format!("{path} has mode {mode:04o}: others can read the key that signs lab's pushes"),
        )
        .fix("chmod 600 the file, then `lab push-key --rotate`"),
        Some(Ok(_)) => Finding::new("push", "VAPID key", Status::Ok, format!("{path} (0600)")),
    }
}

/// The components: each loaded one, and each refused with its reason.
pub fn provider_loaded(name: &str, version: &str, source: &str) -> Finding {
    Finding::new("provider", name, Status::Ok, format!("{version} from {source}"))
}

pub fn provider_refused(source: &str, why: &str) -> Finding {
    Finding::new("provider", source, Status::Fail, format!("refused: {why}"))
        .fix(format!("`lab providers check {source}` says more; remove or rebuild it"))
}

/// Whether the report as a whole fails.
pub fn failed(findings: &[Finding]) -> usize {
    findings.iter().filter(|f| f.status == Status::Fail).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_found_in_what_programs_print() {
        assert_eq!(version_in("tmux 3.3a").as_deref(), Some("3.3"));
        assert_eq!(version_in("tmux next-3.4").as_deref(), Some("3.4"));
        assert_eq!(version_in("agent-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("2.1.332 (Agent Code)").as_deref(), Some("2.1.332"));
        assert_eq!(version_in("v1.18.33\n").as_deref(), Some("1.18.33"));
        assert_eq!(version_in("dev1.2").as_deref(), None);
        assert_eq!(version_in("agent 1.18.33.").as_deref(), Some("1.18.33"));
        assert_eq!(version_in("build 42"), None);
        assert!(numbers("3.10") > numbers("3.9"));
        assert!(numbers("0.171.0") < numbers("0.172.0"));
    }

    #[test]
    fn tmux_missing_or_old_fails_with_a_fix() {
        let f = tmux(None);
        assert_eq!(f.status, Status::Fail);
        assert!(f.fix.unwrap().contains("apt-get install tmux"));
        assert_eq!(tmux(Some(("/usr/bin/tmux", "tmux 2.9a"))).status, Status::Fail);
        let ok = tmux(Some(("/usr/bin/tmux", "tmux 3.3a")));
        assert_eq!((ok.status, ok.detail.as_str()), (Status::Ok, "tmux 3.3 (/usr/bin/tmux)"));
    }

    fn agent_facts() -> AgentFacts {
        AgentFacts {
            name: "agent-x".into(),
            program: "agentx".into(),
            configured: true,
            path: Some("/opt/agentx".into()),
            version: Some("1.2.0".into()),
            pinned: Some("1.2.0".into()),
            tested: vec!["1.1.0".into(), "1.2.0".into()],
        }
    }

    #[test]
    fn an_agent_is_judged_by_presence_and_its_release_against_the_pinned_one() {
        assert_eq!(agent(&agent_facts()).status, Status::Ok);
        let newer = agent(&AgentFacts { version: Some("1.3.0".into()), ..agent_facts() });
        assert_eq!(newer.status, Status::Warn);
        assert!(newer.detail.contains("newer than the 1.2.0"), "{}", newer.detail);
        let older_tested = agent(&AgentFacts { version: Some("1.1.0".into()), ..agent_facts() });
        assert_eq!(older_tested.status, Status::Ok, "{}", older_tested.detail);
        let older = agent(&AgentFacts { version: Some("1.0.0".into()), ..agent_facts() });
        assert_eq!(older.status, Status::Warn);
        let missing = agent(&AgentFacts { path: None, ..agent_facts() });
        assert_eq!(missing.status, Status::Fail);
        assert!(missing.fix.unwrap().contains("[providers.agent-x] program"));
        let optional = agent(&AgentFacts { path: None, configured: false, ..agent_facts() });
        assert_eq!(optional.status, Status::Info, "an agent nobody set up is not a failure");
        let mute = agent(&AgentFacts { version: None, ..agent_facts() });
        assert_eq!(mute.status, Status::Warn);
        assert!(mute.detail.contains("no version"));
        assert!(numbers("1.2.3-beta.1") == vec![1, 2, 3]);
    }

    #[test]
    fn a_login_is_found_or_the_fix_says_how() {
        let hints = crate::agents::model::LoginHints {
            env: vec!["AGENT_KEY".into()],
            files: vec!["~/.agent/auth.json".into()],
            how: "run `agent login`".into(),
        };
        assert_eq!(login("a", None).status, Status::Info);
        let ok = login("a", Some((&hints, Some("AGENT_KEY".into()))));
        assert_eq!((ok.status, ok.detail.as_str()), (Status::Ok, "logged in (AGENT_KEY)"));
        let out = login("a", Some((&hints, None)));
        assert_eq!(out.status, Status::Warn);
        assert_eq!(out.detail, "not logged in: none of AGENT_KEY is set; no ~/.agent/auth.json");
        assert_eq!(out.fix.as_deref(), Some("run `agent login`"));
    }

    #[test]
    fn the_compatibility_matrix_gives_each_agents_pin_and_tested_releases() {
        let text = "# m\n- Agent X (tmux): 1.2.0 (`@x/agent`)\n- Agent Y (ACP, BYOK): 0.5.1 (`y`)\n\n\
                    ## Agent X (tmux)\n\n| scenario | 1.1.0 | 1.2.0 |\n| --- | --- | --- |\n| `a` | ok | ok |\n";
        let m = matrix(text);
        assert_eq!(m[0], ("Agent X".to_string(), "1.2.0".to_string(), vec!["1.1.0".to_string(), "1.2.0".to_string()]));
        assert_eq!(m[1], ("Agent Y".to_string(), "0.5.1".to_string(), vec![]));
        // The real one parses, and names a pin for every section it has.
        let real = matrix(include_str!("../../../../docs/compat-matrix.md"));
        assert!(real.len() >= 4, "{real:?}");
        assert!(real.iter().all(|(_, pin, tested)| tested.contains(pin)), "{real:?}");
    }

    #[test]
    fn home_store_token_and_key_findings_name_the_problem_and_the_fix() {
        let h = home("/h", Err("/h: owned by uid 7".into()), Some(0o700), Some(50 << 20));
        assert_eq!(h[0].status, Status::Fail);
        assert!(h[0].fix.as_ref().unwrap().contains("chmod 700 /h"));
        assert_eq!(h[1].status, Status::Fail, "50 MiB free");
        assert_eq!(home("/h", Ok(()), Some(0o700), Some(500 << 20))[1].status, Status::Warn);
        assert_eq!(home("/h", Ok(()), Some(0o700), Some(5 << 30))[1].status, Status::Ok);
        assert_eq!(home("/h", Ok(()), Some(0o700), None)[0].status, Status::Ok);
        let open = &home("/h", Ok(()), Some(0o777), None)[0];
        assert_eq!(open.status, Status::Fail);
        assert!(open.detail.contains("mode 0777") && open.fix.as_deref() == Some("chmod 700 /h"), "{open:?}");
        assert_eq!(home("/h", Ok(()), Some(0o755), None)[0].status, Status::Warn, "readable, not writable");
        assert_eq!(token("/h/token", Some(0o644)).status, Status::Fail);
        assert_eq!(token("/h/token", Some(0o600)).status, Status::Ok);
        assert_eq!(token("/h/token", None).status, Status::Info);
        assert_eq!(store("rules", "/h/rules.toml", Some(Err("line 3: bad".into()))).status, Status::Fail);
        assert_eq!(push_key("/h/push/vapid", Some(Ok(0o640))).status, Status::Fail);
        assert_eq!(push_key("/h/push/vapid", Some(Ok(0o600))).status, Status::Ok);
    }

    #[test]
    fn serve_hosts_and_sandbox_findings() {
        assert_eq!(
            serve(&Serving::Running { addr: "127.0.0.1:7777".into(), version: "0.1.0".into() }).status,
            Status::Ok
        );
        assert_eq!(serve(&Serving::Stopped { addr: "127.0.0.1:7777".into() }).status, Status::Warn);
        let taken = serve(&Serving::PortTaken { addr: "127.0.0.1:7777".into(), why: "in use".into() });
        assert_eq!(taken.status, Status::Fail);
        assert!(taken.fix.unwrap().contains(":7777"));
        let down = host("m1", "connecting", None, Some("Connection refused"));
        assert_eq!(down.status, Status::Fail);
        assert!(down.detail.contains("Connection refused"));
        assert_eq!(host("m1", "connected", Some(env!("CARGO_PKG_VERSION")), None).status, Status::Ok);
        assert_eq!(bwrap(false, None, None).status, Status::Info);
        assert_eq!(bwrap(true, None, None).status, Status::Fail);
        assert_eq!(bwrap(false, Some("/usr/bin/bwrap"), Some(Err("no userns".into()))).status, Status::Warn);
        assert_eq!(bwrap(true, Some("/usr/bin/bwrap"), Some(Ok(()))).status, Status::Ok);
        assert_eq!(failed(&[down, taken_copy()]), 2);
    }

    fn taken_copy() -> Finding {
        provider_refused("/h/providers/x.wasm", "not a component")
    }
}
