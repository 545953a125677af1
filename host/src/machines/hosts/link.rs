//! lab serve's side of the runner stream: who is connected, and one task per
//! connection that keeps it honest — the hello first with the runner's proof
//! ([`protocol::proof`]), every frame checked, a ping every [`PING_EVERY`] (a runner
//! silent for [`SILENT_LIMIT`] is gone), the host's credential re-read every
//! [`CHECK_EVERY`] (removed, or replaced by a new one: the runner is told and cut off),
//! and one connection per host (a second is refused while the first lives).

use super::credentials::HostCredentials;
use super::protocol::{self, close, Down, Op, Reply, Up};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The calls of one connection waiting for their reply, by id.
pub(super) type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// How often lab serve pings a runner (and re-checks its credential).
pub const PING_EVERY: Duration = Duration::from_secs(5);
/// A runner that sent nothing (not even a pong) for this long is gone.
pub const SILENT_LIMIT: Duration = Duration::from_secs(20);
/// How long a new connection has to say hello.
pub const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// How often a connection's credential is compared with the hosts file: a removed or
/// replaced credential ends its connection within this.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What lab serve asked of a new connection (made at its upgrade): the host's proof key
/// then and both nonces.
#[derive(Debug, Clone)]
pub struct Challenge {
    /// The host's credential's SHA-256 when the runner dialled.
    pub key: String,
    pub runner_nonce: String,
    pub serve_nonce: String,
    /// Where it dialled from (for the log).
    pub remote: String,
}

/// `GET /hosts`: one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostBody {
    pub name: String,
    /// How lab reaches it: "ssh" (lab dials it with the system ssh client) or
    /// "dial-back" (its runner dials lab serve).
    pub transport: &'static str,
    /// "connected", "connecting" (lab dials it, over ssh, and is trying) or "down".
    pub state: &'static str,
    /// Runs of this host that are active.
    pub runs: usize,
    /// The connected runner's lab version (null while down).
    pub version: Option<String>,
    /// Since when it is in this state (null: down since before lab serve started).
    pub since: Option<String>,
    /// The machine's own name, as its runner says (null while down).
    pub hostname: Option<String>,
    /// Why the last try to reach it failed, or its last link ended (null: none yet).
    pub last_error: Option<String>,
}

/// A host lab dials itself (over ssh), while it is not connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialing {
    /// Trying again (`connecting`), or waiting on the operator (`down`: a refusal
    /// another try would not fix, retried seldom).
    pub trying: bool,
    pub last_error: Option<String>,
}

struct Link {
    conn: u64,
    since: String,
    facts: RunnerFacts,
    /// Frames to send to the runner, encoded (and checked to fit) by the caller.
    out: mpsc::UnboundedSender<String>,
    pending: Pending,
}

/// What a connected runner said of its machine (its hello).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerFacts {
    /// The machine's own name (display, and the attach command's ssh target).
    pub hostname: String,
    /// The runner's lab home there.
    pub home: String,
    pub tmux_socket: String,
    pub lab_exe: String,
    /// The basics of its environment, for agents started there.
    pub env: Vec<(String, String)>,
}

/// What happens to a host, for whoever follows its runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// Its runner connected (again).
    Connected,
    /// Its runner reported on a run (a transcript chunk, a hook file, a session's end).
    Report(Up),
    /// Its runner's connection ended.
    Down,
}

/// Where host events go: `(host, event)`, in the order they happened.
pub type Events = mpsc::Sender<(String, HostEvent)>;

/// How many host events may wait for the runs to take them. A runner whose reports
/// come faster than they are processed waits (its connection is not read meanwhile,
/// so TCP pushes back on it): memory stays bounded at this many frames of at most
/// [`protocol::MAX_FRAME`] bytes, and other runners' connections are not held up
/// beyond their turn in the queue.
pub const EVENTS_QUEUE: usize = 64;

/// The runners: credentials and live connections. One per lab serve.
pub struct Hosts {
    credentials: HostCredentials,
    links: Mutex<BTreeMap<String, Link>>,
    events: Mutex<Option<Events>>,
    /// When each host last went down (while lab serve runs).
    down_since: Mutex<BTreeMap<String, String>>,
    /// The hosts lab dials itself, while not connected.
    dialing: Mutex<BTreeMap<String, Dialing>>,
    /// The hosts lab.toml names (`[hosts.<name>]`), reached over ssh.
    configured: Mutex<BTreeMap<String, crate::machines::ssh::SshTarget>>,
    next_conn: AtomicU64,
    /// The live pane views open on the hosts' runners ([`super::panes::PaneViews`]).
    pub(super) panes: super::panes::PaneViews,
    /// The ACP agents running on the hosts' runners ([`super::agent_pipes::AgentPipes`]).
    pub(super) agents: super::agent_pipes::AgentPipes,
}

impl Hosts {
    pub fn new(credentials: HostCredentials) -> Self {
        Hosts {
            credentials,
            links: Mutex::new(BTreeMap::new()),
            events: Mutex::new(None),
            down_since: Mutex::new(BTreeMap::new()),
            dialing: Mutex::new(BTreeMap::new()),
            configured: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU64::new(1),
            panes: Default::default(),
            agents: Default::default(),
        }
    }

    pub fn credentials(&self) -> &HostCredentials {
        &self.credentials
    }

    /// Whether host `name`'s runner is connected now.
    pub fn connected(&self, name: &str) -> bool {
        self.links.lock().unwrap().contains_key(name)
    }

    /// What host `name`'s runner said of its machine, while connected.
    pub fn facts(&self, name: &str) -> Option<RunnerFacts> {
        self.links.lock().unwrap().get(name).map(|l| l.facts.clone())
    }

    /// Where runners' reports go (one follower: the runs).
    pub fn set_events(&self, events: Events) {
        *self.events.lock().unwrap() = Some(events);
    }

    /// Whether `name` is a host: added (`lab hosts add`) or named in lab.toml.
    pub fn known(&self, name: &str) -> anyhow::Result<bool> {
        Ok(self.configured.lock().unwrap().contains_key(name)
            || self.credentials.list()?.iter().any(|h| h.name == name))
    }

    /// The hosts lab.toml names (set when lab serve starts).
    pub fn set_configured(&self, hosts: BTreeMap<String, crate::machines::ssh::SshTarget>) {
        *self.configured.lock().unwrap() = hosts;
    }

    /// Every host lab knows and how each is reached ([`super::reach`]): added with
    /// `lab hosts add`, or named in lab.toml (reached over ssh; an added one of the same
    /// name wins).
    pub fn reaches(&self) -> anyhow::Result<BTreeMap<String, Arc<dyn super::Reach>>> {
        let records = self.credentials.list()?;
        Ok(super::reaches(&self.configured.lock().unwrap(), &records))
    }

    /// How host `name` is reached (a host lab does not know: as one whose runner dials
    /// in, the way of a runner still connected after its host was removed).
    pub fn reach(&self, name: &str) -> Arc<dyn super::Reach> {
        self.reaches().ok().and_then(|mut all| all.remove(name)).unwrap_or_else(super::unknown)
    }

    /// Host `name` (which lab dials) is not connected: trying again or not, and why.
    pub fn set_dialing(&self, name: &str, dialing: Option<Dialing>) {
        let mut d = self.dialing.lock().unwrap();
        match dialing {
            Some(x) => d.insert(name.to_string(), x),
            None => d.remove(name),
        };
    }

    /// Hand `event` to the runs, waiting while the queue is full.
    pub(super) async fn report(&self, name: &str, event: HostEvent) {
        let tx = self.events.lock().unwrap().clone();
        if let Some(tx) = tx {
            let _ = tx.send((name.to_string(), event)).await;
        }
    }

    /// Since when host `name` is down, if it went down while lab serve runs.
    pub fn down_since(&self, name: &str) -> Option<String> {
        self.down_since.lock().unwrap().get(name).cloned()
    }

    /// Ask host `name`'s runner to do `op`; its reply, or why there is none (not
    /// connected, the connection ended, no reply within `within`). A reply of
    /// [`Reply::Error`] is the runner's refusal or its terminal's failure.
    pub async fn call(&self, name: &str, op: Op, within: Duration) -> Result<Reply, String> {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let down = protocol::encode(&Down::Call { id, op });
        // A frame the runner would refuse ends its connection: not sent.
        if down.len() > protocol::MAX_FRAME {
            return Err(format!("a call of over {} bytes cannot be sent to host `{name}`", protocol::MAX_FRAME));
        }
        let (tx, rx) = oneshot::channel();
        {
            let links = self.links.lock().unwrap();
            let link = links.get(name).ok_or_else(|| format!("host `{name}` is not connected"))?;
            link.pending.lock().unwrap().insert(id, tx);
            link.out.send(down).map_err(|_| format!("host `{name}`'s connection ended"))?;
        }
        match tokio::time::timeout(within, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(format!("host `{name}`'s connection ended before it answered")),
            Err(_) => Err(format!("host `{name}` did not answer within {} ms", within.as_millis())),
        }
    }

    /// Every host with a credential, and any still connected whose credential went.
    /// `active_runs`: how many active runs a host has.
    pub fn list(&self, active_runs: impl Fn(&str) -> usize) -> Vec<HostBody> {
        let reaches = self.reaches().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the hosts file");
            BTreeMap::new()
        });
        let mut names: Vec<String> = reaches.keys().cloned().collect();
        let links = self.links.lock().unwrap();
        let down = self.down_since.lock().unwrap();
        let dialing = self.dialing.lock().unwrap();
        names.extend(links.keys().cloned());
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let link = links.get(&name);
                let dial = dialing.get(&name).filter(|_| link.is_none());
                HostBody {
                    transport: reaches.get(&name).map_or("dial-back", |r| r.kind()),
                    runs: active_runs(&name),
                    state: match (link, dial) {
                        (Some(_), _) => "connected",
                        (None, Some(d)) if d.trying => "connecting",
                        _ => "down",
                    },
                    last_error: dial.and_then(|d| d.last_error.clone()),
                    version: link.map(|_| protocol::VERSION.to_string()),
                    since: link.map(|l| l.since.clone()).or_else(|| down.get(&name).cloned()),
                    hostname: link.map(|l| l.facts.hostname.clone()),
                    name,
                }
            })
            .collect()
    }

    /// One runner's connection, from its upgrade to its end (the caller knew its host
    /// and version, and sent lab serve's proof).
    pub async fn serve(&self, name: String, challenge: Challenge, mut socket: WebSocket) {
        let conn = self.next_conn();
        let remote = challenge.remote.clone();
        let hello = match tokio::time::timeout(HELLO_WITHIN, socket.recv()).await {
            Ok(Some(Ok(Message::Text(t)))) => match protocol::decode::<Up>(t.as_str()) {
                Ok(Up::Hello { proof, hostname, home, tmux_socket, lab_exe, env }) => {
                    let expected =
                        protocol::proof::runner(&challenge.key, &name, &challenge.runner_nonce, &challenge.serve_nonce);
                    if !protocol::proof::matches(&proof, &expected) {
                        tracing::warn!(host = %name, %remote, "a runner did not prove the host's credential; disconnected");
                        let _ = socket
                            .send(close_frame(close::UNPROVEN, "this runner did not prove the host's credential"))
                            .await;
                        return;
                    }
                    Ok(RunnerFacts { hostname: protocol::clean_label(&hostname), home, tmux_socket, lab_exe, env })
                }
                Ok(_) => Err("expected a hello first".to_string()),
                Err(e) => Err(e.to_string()),
            },
            Ok(Some(Ok(other))) => Err(format!("expected a hello, got {}", kind(&other))),
            Ok(_) => {
                // The runner left before its hello: it did not take lab serve's proof
                // (its credential is not this host's), or it stopped.
                tracing::warn!(host = %name, %remote, "a runner left before its hello (a credential that is not this host's?)");
                return;
            }
            Err(_) => Err(format!("no hello within {} s", HELLO_WITHIN.as_secs())),
        };
        let facts =
            match hello.and_then(|f| protocol::check_facts(&f.home, &f.tmux_socket, &f.lab_exe, &f.env).map(|()| f)) {
                Ok(f) => f,
                Err(why) => {
                    tracing::warn!(host = %name, %why, "a runner did not say hello; disconnected");
                    let _ = socket.send(close_frame(close::PROTOCOL, &why)).await;
                    return;
                }
            };
        let hostname = facts.hostname.clone();
        let home = facts.home.clone();
        let (out, mut out_rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        if let Err(live) = self.attach(&name, conn, facts, out, pending.clone()) {
            // One use of a credential never disconnects the runner that holds it.
            tracing::warn!(host = %name, %remote, %hostname, live = %live, "refused a second runner of a connected host");
            let why = format!(
                "host `{name}` has a runner connected (on {live}); `lab hosts remove {name}` and `lab hosts add {name}` \
                 to give it a new credential and drop that one"
            );
            let _ = socket.send(close_frame(close::BUSY, &why)).await;
            return;
        }
        tracing::info!(host = %name, %hostname, %home, %remote, "runner connected");
        self.report(&name, HostEvent::Connected).await;
        let welcome = Down::Welcome { version: protocol::VERSION.to_string() };
        let why = if socket.send(Message::Text(protocol::encode(&welcome).into())).await.is_err() {
            "the connection broke".to_string()
        } else {
            self.follow(&name, &challenge.key, &mut socket, &mut out_rx, &pending).await
        };
        self.detach(&name, conn).await;
        tracing::info!(host = %name, %why, "runner disconnected");
    }

    /// A new connection number.
    pub(super) fn next_conn(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Host `name`'s runner is connected as `conn` (Err: another is, on the machine
    /// named).
    pub(super) fn attach(
        &self,
        name: &str,
        conn: u64,
        facts: RunnerFacts,
        out: mpsc::UnboundedSender<String>,
        pending: Pending,
    ) -> Result<(), String> {
        let mut links = self.links.lock().unwrap();
        if let Some(live) = links.get(name) {
            return Err(live.facts.hostname.clone());
        }
        let since = crate::util::time::now_rfc3339();
        // A host lab dials keeps its dialing entry while linked (shown only while not):
        // when the link ends it reads `connecting` at once, never `down` in between.
        links.insert(name.to_string(), Link { conn, since, facts, out, pending });
        Ok(())
    }

    /// Connection `conn` of host `name` ended: the runs are told, if it was the live one.
    pub(super) async fn detach(&self, name: &str, conn: u64) {
        let gone = {
            let mut links = self.links.lock().unwrap();
            let ours = links.get(name).is_some_and(|l| l.conn == conn);
            if ours {
                links.remove(name);
                self.down_since.lock().unwrap().insert(name.to_string(), crate::util::time::now_rfc3339());
            }
            ours
        };
        if gone {
            self.panes.host_gone(name);
            self.agents.host_gone(name);
            self.report(name, HostEvent::Down).await;
        }
    }

    /// A frame from host `name`'s runner after its hello: a reply to its waiting call,
    /// or a report for the runs. `Err`: what breaks the protocol.
    pub(super) async fn on_up(&self, name: &str, up: Up, pending: &Pending) -> Result<(), String> {
        match up {
            Up::Reply { id, reply } => {
                // A reply nobody waits for any more (its call timed out) is dropped.
                if let Some(tx) = pending.lock().unwrap().remove(&id) {
                    let _ = tx.send(reply);
                }
                Ok(())
            }
            Up::Pong => Ok(()),
            Up::Pane { pane, event } => {
                self.panes.deliver(name, pane, event);
                Ok(())
            }
            Up::Agent { agent, event } => {
                self.agents.deliver(name, agent, event);
                Ok(())
            }
            Up::Hello { .. } => Err("a second hello".to_string()),
            up @ (Up::Transcript { .. } | Up::RunFile { .. } | Up::Ended { .. }) => {
                self.report(name, HostEvent::Report(up)).await;
                Ok(())
            }
        }
    }

    /// Read frames until the connection ends: why it ended.
    async fn follow(
        &self,
        name: &str,
        key: &str,
        socket: &mut WebSocket,
        out: &mut mpsc::UnboundedReceiver<String>,
        pending: &Pending,
    ) -> String {
        let mut heard = Instant::now();
        let mut tick = tokio::time::interval(PING_EVERY);
        tick.tick().await;
        let mut check = tokio::time::interval(CHECK_EVERY);
        check.tick().await;
        loop {
            tokio::select! {
                frame = socket.recv() => {
                    heard = Instant::now();
                    match frame {
                        None | Some(Err(_)) => return "the connection broke".into(),
                        Some(Ok(Message::Close(_))) => return "the runner closed the connection".into(),
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                        Some(Ok(Message::Text(t))) => {
                            let why = match protocol::decode::<Up>(t.as_str()) {
                                Ok(up) => match self.on_up(name, up, pending).await {
                                    Ok(()) => continue,
                                    Err(why) => why,
                                },
                                Err(e) => e.to_string(),
                            };
                            let _ = socket.send(close_frame(close::PROTOCOL, &why)).await;
                            return format!("it broke the protocol: {why}");
                        }
                        Some(Ok(Message::Binary(_))) => {
                            let _ = socket.send(close_frame(close::PROTOCOL, "binary frames are not the protocol")).await;
                            return "it sent a binary frame".into();
                        }
                    }
                }
                Some(msg) = out.recv() => {
                    if socket.send(Message::Text(msg.into())).await.is_err() {
                        return "the connection broke".into();
                    }
                }
                _ = check.tick() => {
                    // The credential it proved, not just the name: `lab hosts remove` then
                    // `add` (a new credential) ends it too.
                    if !self.credentials.is_current(name, key) {
                        let _ = socket
                            .send(close_frame(close::REVOKED, "this host's credential was removed or replaced"))
                            .await;
                        return "its credential was removed or replaced".into();
                    }
                }
                _ = tick.tick() => {
                    if heard.elapsed() > SILENT_LIMIT {
                        return format!("silent for {} s", SILENT_LIMIT.as_secs());
                    }
                    if socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                        return "the connection broke".into();
                    }
                }
            }
        }
    }
}

fn close_frame(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame { code, reason: reason.chars().take(120).collect::<String>().into() }))
}

fn kind(m: &Message) -> &'static str {
    match m {
        Message::Text(_) => "text",
        Message::Binary(_) => "a binary frame",
        Message::Ping(_) | Message::Pong(_) => "a ping",
        Message::Close(_) => "a close",
    }
}
