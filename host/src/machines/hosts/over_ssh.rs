//! Hosts lab reaches over ssh (`lab hosts add NAME --ssh …`): lab serve keeps each
//! linked itself. One try: the machine's master up ([`Master::up`]), lab of this build
//! there ([`bootstrap::ensure_lab`]), then `lab runner proxy` run through the master,
//! and the runner protocol as lines over that session's stdio
//! ([`super::lines`]) — the same calls and reports as a dial-back runner's, into the
//! same [`Hosts`]: the runs do not know which way their host is reached.
//!
//! A link that ends (ssh killed, the network gone: a ping every [`PING_EVERY`] unanswered
//! for [`SILENT_LIMIT`]) is dialled again at once, then backing off to [`LAST_RETRY`]
//! while it fails; the host shows `connecting` with the last error meanwhile. A
//! refusal another try will not fix (a host key not known or changed, the login
//! refused, a machine lab cannot run on, a runner there newer than this lab) shows
//! `down` with its reason and is tried again only every [`REFUSED_RETRY`] (never a
//! refused login every few seconds). The runs on the machine go on meanwhile: its
//! runner daemon and tmux outlive the link; when it is back, the runs are followed
//! again from what lab holds of them.

use super::lines::{read_frame, write_frame};
use super::link::{Dialing, HostEvent, Hosts, Pending, RunnerFacts, PING_EVERY, SILENT_LIMIT};
use super::protocol::{self, Down, Up};
use crate::machines::ssh::{bootstrap, Master, SshError, SshTarget};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, BufReader};
use tokio::sync::{mpsc, watch};

/// The first wait before dialling again after a failed try.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest wait between failed tries.
pub const LAST_RETRY: Duration = Duration::from_secs(2);
/// The wait after a refusal another try will not fix.
pub const REFUSED_RETRY: Duration = Duration::from_secs(60);
/// How long the runner has to say hello once its proxy runs.
pub const HELLO_WITHIN: Duration = Duration::from_secs(15);
/// Where the runner keeps its home there (expanded by the machine's shell).
pub const REMOTE_HOME: &str = "${XDG_STATE_HOME:-$HOME/.local/state}/lab/runner";

/// Why one try ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ended {
    /// The link was up, and ended: dial again at once.
    Cut(String),
    /// It did not get up: dial again, backing off.
    Failed(String),
    /// Another try will not fix it.
    Refused(String),
    /// The host was removed, or lab serve stops.
    Stopped,
}

fn failed(e: SshError) -> Ended {
    match e {
        SshError::HostKey(m) | SshError::Denied(m) | SshError::Unsuitable(m) => Ended::Refused(m),
        e => Ended::Failed(e.to_string()),
    }
}

/// The hosts lab.toml names (`[hosts.<name>]`), checked: a bad one is an error naming
/// it (lab serve does not start with it).
pub fn configured(
    config: &crate::store::config::Config,
) -> Result<std::collections::BTreeMap<String, SshTarget>, String> {
    config
        .hosts
        .iter()
        .map(|(name, h)| {
            let target = SshTarget {
                destination: h.ssh.clone(),
                port: h.port,
                identity: h.identity.clone(),
                known_hosts: h.known_hosts.clone(),
                lab: h.lab.clone(),
            };
            super::credentials::check_name(name)
                .and_then(|()| target.check())
                .map(|()| (name.clone(), target))
                .map_err(|e| format!("lab.toml [hosts.{name}]: {e}"))
        })
        .collect()
}

/// A link in [`Hosts`], detached when dropped before its end was handled.
struct Attached {
    hosts: Arc<Hosts>,
    name: String,
    conn: u64,
    done: bool,
}

impl Drop for Attached {
    fn drop(&mut self) {
        if !self.done {
            let (hosts, name, conn) = (self.hosts.clone(), self.name.clone(), self.conn);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { hosts.detach(&name, conn).await });
            }
        }
    }
}

/// Why a link ended before the runner's hello, from what ssh and the proxy said on
/// stderr (their last line): a runner there newer than this lab is a refusal.
fn before_hello(said: &str) -> Ended {
    let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("the runner there ended before its hello");
    let last: String = last.trim().chars().filter(|c| !c.is_control()).take(300).collect();
    if last.contains("newer than this lab serve") {
        Ended::Refused(last.trim_start_matches("lab runner: ").to_string())
    } else {
        Ended::Failed(last)
    }
}

/// A host lab serve reaches over ssh and keeps linked itself.
pub struct OverSsh(pub SshTarget);

impl super::Reach for OverSsh {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    /// No runner dials in as it: it has no credential.
    fn dials_in(&self) -> bool {
        false
    }

    /// As lab reaches it: its destination, port, key and known hosts.
    fn attach_command(&self, _host: &str, socket: &str, target: &str) -> Vec<String> {
        let mut words = super::terminal::ssh_attach(&self.0.destination, socket, target);
        words.splice(2..2, self.0.attach_options());
        words
    }

    fn fingerprint(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    fn keep_linked(
        &self,
        linker: super::Linker,
        ended: watch::Receiver<bool>,
    ) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        let master = Arc::new(Master::new(self.0.clone(), linker.home.ssh_control(&linker.name)));
        Some(Box::pin(keep(linker.hosts, linker.name, master, linker.lab_exe, ended)))
    }
}

/// Keep host `name` linked until `ended` says true.
async fn keep(
    hosts: Arc<Hosts>,
    name: String,
    master: Arc<Master>,
    lab_exe: PathBuf,
    mut ended: watch::Receiver<bool>,
) {
    let mut wait = Duration::ZERO;
    let mut last_error: Option<String> = None;
    // lab of this build there as last checked: on every link it is looked at again
    // (who may write it and its folders, its identity) and hashed again only if its
    // identity changed.
    let mut checked: Option<bootstrap::Installed> = None;
    loop {
        hosts.set_dialing(&name, Some(Dialing { trying: true, last_error: last_error.clone() }));
        let r = tokio::select! {
            r = link_once(&hosts, &name, &master, &lab_exe, &mut checked) => r,
            _ = ended.changed() => Ended::Stopped,
        };
        if !matches!(r, Ended::Cut(_)) {
            checked = None;
        }
        let (why, next, trying) = match r {
            Ended::Stopped => break,
            Ended::Cut(why) => (why, Duration::ZERO, true),
            Ended::Failed(why) => {
                let w = (wait * 2).clamp(FIRST_RETRY, LAST_RETRY);
                (why, w, true)
            }
            Ended::Refused(why) => (why, REFUSED_RETRY, false),
        };
        if *ended.borrow() {
            break;
        }
        tracing::warn!(host = %name, %why, retry_in_ms = next.as_millis() as u64, "host not linked");
        last_error = Some(why.clone());
        hosts.set_dialing(&name, Some(Dialing { trying, last_error: Some(why) }));
        wait = next;
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = ended.changed() => break,
        }
    }
    hosts.set_dialing(&name, None);
    tracing::info!(host = %name, "no longer linked over ssh (removed, or lab serve stops)");
}

/// One try: dial, link, follow the link to its end.
async fn link_once(
    hosts: &Arc<Hosts>,
    name: &str,
    master: &Arc<Master>,
    lab_exe: &std::path::Path,
    checked: &mut Option<bootstrap::Installed>,
) -> Ended {
    let (m, exe, known) = (master.clone(), lab_exe.to_path_buf(), checked.clone());
    let started = Instant::now();
    let installed = match tokio::task::spawn_blocking(move || {
        m.up()?;
        let up = started.elapsed();
        bootstrap::ensure_lab(&m, &exe, protocol::VERSION, known.as_ref()).map(|i| (i, up))
    })
    .await
    {
        Ok(Ok((i, up))) => {
            tracing::debug!(host = %name, master_ms = up.as_millis() as u64, lab_ms = (started.elapsed() - up).as_millis() as u64, "reached");
            i
        }
        Ok(Err(e)) => return failed(e),
        Err(e) => return Ended::Failed(format!("the dial task failed: {e}")),
    };
    // Run only if it is still the file just checked (the check and the run are one
    // command there).
    let command = bootstrap::run_checked(
        &installed.path,
        &installed.identity,
        &format!("runner proxy --home \"{REMOTE_HOME}\" --build {}", crate::util::shell::quote(&installed.build)),
    );
    let mut c = tokio::process::Command::from(master.session(&command));
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => return Ended::Failed(format!("cannot run ssh: {e}")),
    };
    let (Some(mut to), Some(from), Some(mut err)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Ended::Failed("ssh's stdio".into());
    };
    // What ssh and the proxy say on stderr: the reason when the link ends.
    let said = tokio::spawn(async move {
        let mut text = Vec::new();
        let _ = (&mut err).take(64 << 10).read_to_end(&mut text).await;
        String::from_utf8_lossy(&text).trim().to_string()
    });
    let mut from = BufReader::new(from);
    let mut buf = Vec::new();
    let hello = match tokio::time::timeout(HELLO_WITHIN, read_frame(&mut from, &mut buf)).await {
        Ok(Ok(Some(line))) => protocol::decode::<Up>(&line).map_err(|e| e.to_string()),
        Ok(Ok(None)) | Ok(Err(_)) => {
            let _ = child.wait().await;
            return before_hello(&said.await.unwrap_or_default());
        }
        Err(_) => return Ended::Failed(format!("the runner there said no hello within {} s", HELLO_WITHIN.as_secs())),
    };
    let facts = match hello {
        Ok(Up::Hello { hostname, home, tmux_socket, lab_exe, env, .. }) => {
            match protocol::check_facts(&home, &tmux_socket, &lab_exe, &env) {
                Ok(()) => RunnerFacts { hostname: protocol::clean_label(&hostname), home, tmux_socket, lab_exe, env },
                Err(why) => return Ended::Refused(why),
            }
        }
        Ok(other) => return Ended::Refused(format!("the runner there began with {other:?}, not its hello")),
        Err(e) => return Ended::Refused(format!("the runner there does not speak this protocol: {e}")),
    };
    *checked = Some(installed.clone());
    let conn = hosts.next_conn();
    let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
    let pending: Pending = Arc::default();
    if let Err(live) = hosts.attach(name, conn, facts.clone(), out, pending.clone()) {
        return Ended::Refused(format!("host `{name}` has another runner connected (on {live})"));
    }
    // Detached however this ends: also when the host is removed or lab serve stops
    // while the link is up (this future is then dropped mid-way).
    let mut attached = Attached { hosts: hosts.clone(), name: name.to_string(), conn, done: false };
    tracing::info!(
        host = %name,
        hostname = %facts.hostname,
        uploaded = installed.uploaded,
        ms = started.elapsed().as_millis() as u64,
        "linked over ssh"
    );
    hosts.report(name, HostEvent::Connected).await;
    let welcome = protocol::encode(&Down::Welcome { version: protocol::VERSION.to_string() });
    let ping = protocol::encode(&Down::Ping);
    let why = if write_frame(&mut to, &welcome).await.is_err() {
        "the link broke".to_string()
    } else {
        let mut heard = Instant::now();
        let mut tick = tokio::time::interval(PING_EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                line = read_frame(&mut from, &mut buf) => match line {
                    Ok(Some(text)) => {
                        heard = Instant::now();
                        let r = match protocol::decode::<Up>(&text) {
                            Ok(up) => hosts.on_up(name, up, &pending).await,
                            Err(e) => Err(e.to_string()),
                        };
                        if let Err(why) = r {
                            break format!("the runner broke the protocol: {why}");
                        }
                    }
                    Ok(None) => break "the link ended".to_string(),
                    Err(e) => break format!("the link broke: {e}"),
                },
                Some(frame) = out_rx.recv() => {
                    if write_frame(&mut to, &frame).await.is_err() {
                        break "the link broke".to_string();
                    }
                }
                _ = tick.tick() => {
                    if heard.elapsed() > SILENT_LIMIT {
                        break format!("the runner there was silent for {} s", SILENT_LIMIT.as_secs());
                    }
                    if write_frame(&mut to, &ping).await.is_err() {
                        break "the link broke".to_string();
                    }
                }
            }
        }
    };
    attached.done = true;
    hosts.detach(name, conn).await;
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    let said = tokio::time::timeout(Duration::from_secs(1), said).await.ok().and_then(|r| r.ok()).unwrap_or_default();
    let why = match said.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(l) => format!("{why} ({})", l.chars().filter(|c| !c.is_control()).take(200).collect::<String>()),
        None => why,
    };
    tracing::info!(host = %name, %why, "ssh link ended");
    Ended::Cut(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::hosts::HostCredentials;

    #[test]
    fn what_ended_a_link_before_its_hello() {
        let newer =
            "lab runner: the runner on this machine is lab 9.0.0 (build ab), newer than this lab serve's 0.1.0 \
                     (build cd): run lab 9.0.0 or newer on lab serve's machine too\n";
        let Ended::Refused(why) = before_hello(newer) else { panic!("a newer runner is a refusal") };
        assert!(why.starts_with("the runner on this machine is lab 9.0.0") && why.contains("0.1.0"), "{why}");
        assert_eq!(
            before_hello("sh: 1: /x/lab-0.1.0-ab: not found\n\n"),
            Ended::Failed("sh: 1: /x/lab-0.1.0-ab: not found".into())
        );
        assert_eq!(before_hello(""), Ended::Failed("the runner there ended before its hello".into()));
    }

    #[test]
    fn lab_toml_hosts_are_checked_and_listed_beside_added_ones() {
        let config: crate::store::config::Config = toml::from_str(
            "[hosts.build-2]\nssh = \"lab@10.0.0.2\"\nport = 2222\nidentity = \"/k/id\"\nknown_hosts = \"/k/kh\"\n\
             lab = \"~/opt/lab\"\n[hosts.gpu]\nssh = \"gpu-box\"\n",
        )
        .unwrap();
        let hosts = configured(&config).unwrap();
        let t = &hosts["build-2"];
        assert_eq!((t.destination.as_str(), t.port, t.lab.as_deref()), ("lab@10.0.0.2", Some(2222), Some("~/opt/lab")));
        assert_eq!(hosts["gpu"].destination, "gpu-box");
        for (bad, why) in [
            ("[hosts.Bad]\nssh = \"h\"\n", "[hosts.Bad]"),
            ("[hosts.a]\nssh = \"-oProxyCommand=x\"\n", "not an ssh destination"),
            ("[hosts.a]\nssh = \"h\"\nidentity = \"key\"\n", "absolute"),
            ("[hosts.a]\nssh = \"h\"\nlab = \"$(id)\"\n", "lab ="),
        ] {
            let c: crate::store::config::Config = toml::from_str(bad).unwrap();
            let e = configured(&c).unwrap_err();
            assert!(e.contains(why) && e.contains("lab.toml"), "{bad}: {e}");
        }
        assert!(toml::from_str::<crate::store::config::Config>("[hosts.a]\nssh = \"h\"\nuser = \"x\"\n").is_err());

        let d = tempfile::tempdir().unwrap();
        let creds = HostCredentials::new(d.path().join("hosts.json"));
        creds.add("gpu", std::time::SystemTime::now()).unwrap();
        let h = Hosts::new(creds);
        h.set_configured(hosts);
        // `gpu` was added as a dial-back host: that wins over lab.toml's.
        let kinds: Vec<(String, &str)> = h.reaches().unwrap().into_iter().map(|(n, r)| (n, r.kind())).collect();
        assert_eq!(kinds, [("build-2".to_string(), "ssh"), ("gpu".to_string(), "dial-back")]);
        h.set_dialing("build-2", Some(Dialing { trying: true, last_error: Some("No route to host".into()) }));
        let list = h.list(|_| 0);
        let row = |n: &str| list.iter().find(|b| b.name == n).unwrap().clone();
        assert_eq!((row("build-2").transport, row("build-2").state), ("ssh", "connecting"));
        assert_eq!(row("build-2").last_error.as_deref(), Some("No route to host"));
        assert_eq!((row("gpu").transport, row("gpu").state), ("dial-back", "down"));
        h.set_dialing("build-2", Some(Dialing { trying: false, last_error: Some("refused".into()) }));
        assert_eq!(h.list(|_| 0)[0].state, "down");
        // Linked, it is `connected`; the link gone, `connecting` again at once (its
        // dialing entry outlives the link).
        h.set_dialing("build-2", Some(Dialing { trying: true, last_error: None }));
        let facts = RunnerFacts {
            hostname: "b2".into(),
            home: "/h".into(),
            tmux_socket: "/h/tmux.sock".into(),
            lab_exe: "/h/lab".into(),
            env: vec![],
        };
        let (out, _rx) = mpsc::unbounded_channel();
        h.attach("build-2", 7, facts, out, Pending::default()).unwrap();
        assert_eq!(h.list(|_| 0)[0].state, "connected");
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(h.detach("build-2", 7));
        assert_eq!(h.list(|_| 0)[0].state, "connecting");
    }
}
