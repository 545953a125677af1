//! Other machines (ADR 0003, issues 34 and 55): each has a runner lab serve speaks the
//! runner protocol with ([`protocol`]), over one of two links — the runner dials `lab
//! serve` and keeps one authenticated WebSocket open ([`link`]), or lab serve reaches
//! the machine over OpenSSH and speaks to the runner's daemon through `lab runner proxy`
//! on the ssh session's stdio ([`over_ssh`], frames as [`lines`]). lab serve knows
//! which hosts there are ([`credentials`], `lab hosts add|list|remove`, lab.toml
//! `[hosts.NAME]`) and which are connected ([`link::Hosts`], `GET /hosts`), whichever
//! the link; a host's terminal is reached through its runner ([`terminal`]), its live
//! pane views too ([`panes`]), and the ACP agents started there ([`agents`], their pipes [`agent_pipes`]).
//!
//! How lab reaches a machine's runner: a [`Reach`] per way, each in its own file —
//! [`over_ssh::OverSsh`] (lab serve dials the machine through OpenSSH and keeps
//! the link itself) and [`DialBack`] (the machine's runner dials lab serve with its
//! credential). What lab knows of a host names its way once ([`reach_of`]); the link,
//! `GET /hosts`, the runs and the terminal ask the way, never which one it is
//! (wezterm's `Domain` again). A new way — a pod through `kubectl exec`, a VM's
//! console — is a new file implementing `Reach` plus its arm in [`reach_of`] and its
//! field in the host's record.

pub mod agent_pipes;
pub mod agents;
pub mod credentials;
pub mod lines;
pub mod link;
pub mod over_ssh;
pub mod panes;
pub mod protocol;
pub mod terminal;

pub use credentials::HostCredentials;
pub use link::{Challenge, HostBody, HostEvent, Hosts, RunnerFacts};
pub use terminal::RemoteTerminal;

use credentials::HostRecord;
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often what lab knows of hosts is looked at again for hosts to link or unlink.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// One way of reaching a machine's runner.
pub trait Reach: Send + Sync {
    /// The way's name, as `GET /hosts` shows it (`transport`).
    fn kind(&self) -> &'static str;

    /// Whether a runner may dial in as this host with the host's credential.
    fn dials_in(&self) -> bool;

    /// The command an operator pastes to attach to tmux `target` (on `socket`) on host
    /// `host`, reached this way.
    fn attach_command(&self, host: &str, socket: &str, target: &str) -> Vec<String>;

    /// What identifies this way to the host: a change (a new port, another key) links
    /// it again.
    fn fingerprint(&self) -> String;

    /// Keep host `name` linked from lab serve's side until `ended` says true; None for
    /// a way whose runner dials in (nothing to keep here).
    fn keep_linked(&self, linker: Linker, ended: watch::Receiver<bool>) -> Option<BoxFuture<'static, ()>>;
}

/// What a way needs to keep a host linked from lab serve's side.
#[derive(Clone)]
pub struct Linker {
    pub hosts: Arc<Hosts>,
    pub name: String,
    pub home: crate::store::paths::Home,
    pub lab_exe: PathBuf,
}

/// A host whose runner dials lab serve (`lab runner --connect …`): lab keeps nothing,
/// the runner proves the credential `lab hosts add` gave it.
pub struct DialBack;

impl Reach for DialBack {
    fn kind(&self) -> &'static str {
        "dial-back"
    }

    fn dials_in(&self) -> bool {
        true
    }

    /// `ssh -t <host> …`: the host as lab names it (name it as your ssh config does).
    fn attach_command(&self, host: &str, socket: &str, target: &str) -> Vec<String> {
        terminal::ssh_attach(host, socket, target)
    }

    fn fingerprint(&self) -> String {
        "dial-back".into()
    }

    fn keep_linked(&self, _linker: Linker, _ended: watch::Receiver<bool>) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

/// The way of a host lab does not know (a runner still connected after its host was
/// removed): one that dials in.
pub fn unknown() -> Arc<dyn Reach> {
    Arc::new(DialBack)
}

/// The way a host record says its host is reached: the registration of every way.
pub fn reach_of(record: &HostRecord) -> Arc<dyn Reach> {
    match &record.ssh {
        Some(target) => Arc::new(over_ssh::OverSsh(target.clone())),
        None => Arc::new(DialBack),
    }
}

/// Every host and its way: lab.toml's (reached over ssh), then the hosts file's (an
/// added host wins over a lab.toml one of the same name).
pub fn reaches(
    configured: &BTreeMap<String, crate::machines::ssh::SshTarget>,
    records: &[HostRecord],
) -> BTreeMap<String, Arc<dyn Reach>> {
    let mut all: BTreeMap<String, Arc<dyn Reach>> = configured
        .iter()
        .map(|(name, t)| (name.clone(), Arc::new(over_ssh::OverSsh(t.clone())) as Arc<dyn Reach>))
        .collect();
    all.extend(records.iter().map(|r| (r.name.clone(), reach_of(r))));
    all
}

/// Keep every host linked whose way is kept from lab serve's side, for as long as lab
/// serve runs (until `stop` says true): a host added (or whose way changed) is linked
/// within [`LOOK_EVERY`], one removed unlinked.
pub fn keep_all_linked(
    hosts: Arc<Hosts>,
    home: crate::store::paths::Home,
    lab_exe: PathBuf,
    stop: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut kept: BTreeMap<String, (String, watch::Sender<bool>)> = BTreeMap::new();
        let mut stop = stop;
        loop {
            match hosts.reaches() {
                Ok(wanted) => {
                    kept.retain(|name, (fingerprint, end)| {
                        let keep = wanted.get(name).is_some_and(|r| r.fingerprint() == *fingerprint);
                        if !keep {
                            let _ = end.send(true);
                        }
                        keep
                    });
                    for (name, reach) in wanted {
                        if kept.contains_key(&name) {
                            continue;
                        }
                        let (end, ended) = watch::channel(false);
                        let linker = Linker {
                            hosts: hosts.clone(),
                            name: name.clone(),
                            home: home.clone(),
                            lab_exe: lab_exe.clone(),
                        };
                        if let Some(keeping) = reach.keep_linked(linker, ended) {
                            tokio::spawn(keeping);
                            kept.insert(name, (reach.fingerprint(), end));
                        }
                    }
                }
                // The hosts kept go on as they are.
                Err(e) => tracing::warn!(error = %e, "cannot read the hosts file"),
            }
            tokio::select! {
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                for (_, (_, end)) in kept {
                    let _ = end.send(true);
                }
                return;
            }
        }
    });
}
