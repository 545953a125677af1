//! The `[notify]` webhook: operators away from the browser hear when a run starts to
//! wait on them (docs/notify.md).
//!
//! - What fires ([`Transitions`]): a run's view changing *into* a configured state, seen
//!   on [`crate::runs::Runs::changes`]; for `question`, once per dialog `tool_id`. The
//!   first view of a run found when `lab serve` starts fires nothing.
//! - What is sent ([`payload`], [`ntfy_headers`]): one JSON POST per notification,
//!   plus `Title`, `Click` and `Tags` headers so an ntfy topic URL shows a readable
//!   notification as is.
//! - How ([`Queue`], [`retry_delay`]): a bounded queue (the oldest is dropped when it is
//!   full) and one delivery task, each attempt with a timeout, retried with exponential
//!   backoff. Nothing here ever waits on a run or the HTTP API, and nothing they do
//!   waits on a receiver.
//!
//! Header values (credentials) and the URL's path (an ntfy topic is its own password)
//! are never logged.
//!
//! [`push`] is the other way: Web Push to the operator's browsers and phones.

pub mod push;

use crate::agents::model::DialogBody;
use crate::runs::live::view::{Derived, RunState};
use crate::runs::Change;
use crate::store::config::{Config, NotifyConfig};
use crate::store::paths::{Home, RunId};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde::Serialize;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, Notify};

/// The states notified when `events` is not set: the ones where a run waits on the operator.
pub const DEFAULT_EVENTS: [RunState; 2] = [RunState::Question, RunState::NeedsInput];
/// Notifications waiting for delivery at most; past that the oldest is dropped.
pub const QUEUE_CAPACITY: usize = 64;
/// One attempt (connect, send, response headers) at most.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per notification; the waits between them are [`retry_delay`].
pub const MAX_ATTEMPTS: u32 = 5;
/// The wait after the first failed attempt; it doubles after each further one.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
/// A summary longer than this (in characters) is cut, with `…`.
pub const SUMMARY_MAX_CHARS: usize = 500;

/// `[notify]`, checked: what [`spawn`] needs.
#[derive(Debug)]
pub struct Settings {
    url: reqwest::Url,
    /// Marked sensitive: never shown by `Debug`.
    headers: HeaderMap,
    events: Vec<RunState>,
    /// Without a trailing `/`.
    base_url: String,
}

/// Headers the HTTP client sets itself: `[notify] headers` may not name them.
const RESERVED_HEADERS: [&str; 5] = ["content-length", "host", "transfer-encoding", "connection", "content-type"];

fn event_name(s: RunState) -> &'static str {
    match s {
        RunState::Starting => "starting",
        RunState::Working => "working",
        RunState::Idle => "idle",
        RunState::Question => "question",
        RunState::NeedsInput => "needs_input",
        RunState::Ended => "ended",
    }
}

/// The states `events` may name.
const EVENTS: [RunState; 4] = [RunState::Question, RunState::NeedsInput, RunState::Idle, RunState::Ended];

fn parse_event(name: &str) -> Result<RunState, String> {
    EVENTS.into_iter().find(|s| event_name(*s) == name).ok_or_else(|| {
        let known: Vec<&str> = EVENTS.iter().map(|s| event_name(*s)).collect();
        format!("unknown event {name:?} in events (known: {})", known.join(", "))
    })
}

/// An http(s) URL with a host. `what` names it in errors; the URL itself is not
/// repeated (it may hold a secret).
fn web_url(text: &str, what: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text.trim()).map_err(|e| format!("{what} is not a URL ({e})"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("{what} must be an http:// or https:// URL, not {}:", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{what} has no host"));
    }
    Ok(url)
}

/// Where lab serves, as a link base: an unspecified address (`0.0.0.0`) becomes loopback.
fn served_base(local: SocketAddr) -> String {
    let shown = if local.ip().is_unspecified() {
        let lo: std::net::IpAddr =
            if local.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() };
        SocketAddr::new(lo, local.port())
    } else {
        local
    };
    format!("http://{shown}")
}

impl Settings {
    /// `[notify]` from `<home>/lab.toml`, checked; `None` when there is none.
    pub fn load(home: &Home, served_on: SocketAddr) -> anyhow::Result<Option<Settings>> {
        let path = home.config_file();
        let Some(cfg) = Config::load(&path)?.notify else { return Ok(None) };
        Settings::new(&cfg, served_on).map(Some).map_err(|e| anyhow::anyhow!("{}: [notify] {e}", path.display()))
    }

    /// Check `[notify]`: an http(s) `url`, valid header names and values, known events,
    /// an http(s) `base_url` (default: `served_on`).
    pub fn new(cfg: &NotifyConfig, served_on: SocketAddr) -> Result<Settings, String> {
        let url = web_url(&cfg.url, "url")?;
        let mut headers = HeaderMap::new();
        for (name, value) in &cfg.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: {name:?} is not a valid header name"))?;
            if RESERVED_HEADERS.contains(&header.as_str()) {
                return Err(format!("headers: {name} is set by lab itself"));
            }
            // The value is a secret: the error does not repeat it.
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("headers: the value of {name} is not a valid header value (one line of text)"))?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let events = match &cfg.events {
            None => DEFAULT_EVENTS.to_vec(),
            Some(names) if names.is_empty() => {
                return Err("events is empty: leave it out for the default (question, needs_input)".into())
            }
            Some(names) => {
                let mut events = Vec::new();
                for n in names {
                    let e = parse_event(n)?;
                    if !events.contains(&e) {
                        events.push(e);
                    }
                }
                events
            }
        };
        let base_url = match &cfg.base_url {
            None => served_base(served_on),
            Some(b) => {
                let u = web_url(b, "base_url")?;
                if u.query().is_some() || u.fragment().is_some() {
                    return Err("base_url must not have a query or a fragment".into());
                }
                u.as_str().trim_end_matches('/').to_string()
            }
        };
        Ok(Settings { url, headers, events, base_url })
    }

    pub fn events(&self) -> &[RunState] {
        &self.events
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The receiver's host, which is all the log says about where notifications go.
    fn host(&self) -> &str {
        self.url.host_str().unwrap_or("?")
    }
}

/// The tool_id of the view's pending dialog.
fn dialog_id(d: &Derived) -> Option<&str> {
    d.pending_dialog.as_ref().map(|p| p.dialog.id.as_str())
}

/// Decides which changes are notified, remembering per run the dialogs already seen.
#[derive(Debug, Default)]
pub struct Transitions {
    seen_dialogs: HashMap<RunId, HashSet<String>>,
}

impl Transitions {
    /// Whether `change` is a transition into one of `events` that calls for a
    /// notification: into a state from another one; for `question`, into a dialog not
    /// seen before. A change with no `before` (a run found at start-up) never fires, nor
    /// one whose prompt an answer rule answered.
    pub fn observe(&mut self, events: &[RunState], change: &Change) -> bool {
        let after = &change.after;
        let seen = self.seen_dialogs.entry(change.run_id.clone()).or_default();
        let fires = match &change.before {
            None => false,
            Some(_) if !events.contains(&after.state) => false,
            Some(before) if after.state == RunState::Question => dialog_id(after).is_some_and(|id| {
                !seen.contains(id) && (before.state != RunState::Question || dialog_id(before) != Some(id))
            }),
            Some(before) => before.state != after.state,
        };
        if let Some(id) = dialog_id(after) {
            seen.insert(id.to_string());
        }
        if after.state == RunState::Ended {
            self.seen_dialogs.remove(&change.run_id);
        }
        // A prompt an answer rule answered: seen, and nobody called for it.
        fires && change.answered_by.is_none()
    }
}

/// `dialog` in the payload: which dialog the run waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DialogRef {
    /// "question", "plan", "permission" or "generic".
    pub kind: &'static str,
    pub tool_id: String,
}

/// The JSON body of a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Payload {
    pub run_id: RunId,
    pub provider: String,
    /// The workdir's last folder only: the payload goes to a third party (an ntfy
    /// server), and the full path says more than which project it is (user names, a
    /// client's name in a folder above).
    pub project: String,
    pub state: RunState,
    pub title: String,
    pub summary: String,
    pub link: String,
    pub dialog: Option<DialogRef>,
    pub at: String,
}

/// The last component of the workdir: which project a notification is about.
fn project(workdir: &str) -> &str {
    workdir.trim_end_matches('/').rsplit('/').next().filter(|s| !s.is_empty()).unwrap_or(workdir)
}

/// At most `max` characters of `text` on one line, cut with `…`.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The notification for `change` (pure): `base_url` without a trailing `/`, `at` the time.
pub fn payload(change: &Change, base_url: &str, at: String) -> Payload {
    let after = &change.after;
    let dialog = after.pending_dialog.as_ref().map(|p| &p.dialog);
    let proj = one_line(project(&change.workdir), 80);
    let (title, summary) = match (after.state, dialog) {
        (RunState::Question, Some(crate::agents::model::Dialog { body: DialogBody::Plan { plan, .. }, .. })) => {
            let first = plan
                .as_deref()
                .unwrap_or("")
                .lines()
                .map(|l| l.trim().trim_start_matches('#').trim())
                .find(|l| !l.is_empty());
            (format!("{proj}: a plan awaits approval"), first.unwrap_or("The agent has a plan to approve.").to_string())
        }
        (
            RunState::Question,
            Some(crate::agents::model::Dialog { body: DialogBody::Permission { tool, summary, .. }, .. }),
        ) => (format!("{proj}: the agent asks for permission"), format!("{tool}: {summary}")),
        (RunState::Question, Some(crate::agents::model::Dialog { body: DialogBody::Generic { title, .. }, .. })) => {
            (format!("{proj}: the agent waits on a prompt"), title.clone())
        }
        (RunState::Question, Some(d)) => {
            let q = d.questions().first().map(|q| if q.question.trim().is_empty() { &q.header } else { &q.question });
            let text = q.filter(|t| !t.trim().is_empty()).cloned().unwrap_or_else(|| format!("{} waits", d.tool_name));
            (format!("{proj}: the agent asks a question"), text)
        }
        (RunState::NeedsInput, _) => {
            let text = after
                .blocked
                .as_ref()
                .map(|b| b.message.trim().to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "The agent waits for input in its terminal.".into());
            (format!("{proj}: the agent needs input"), text)
        }
        (RunState::Idle, _) => {
            (format!("{proj}: the agent is idle"), "The agent finished its turn and waits for a message.".into())
        }
        (RunState::Ended, _) => (format!("{proj}: the run ended"), "The run has ended.".into()),
        (state, _) => (format!("{proj}: {}", event_name(state)), format!("The run is {}.", event_name(state))),
    };
    Payload {
        run_id: change.run_id.clone(),
        provider: change.provider.clone(),
        project: project(&change.workdir).to_string(),
        state: after.state,
        title,
        summary: one_line(&summary, SUMMARY_MAX_CHARS),
        link: format!("{base_url}/#/runs/{}", change.run_id),
        dialog: dialog.map(|d| DialogRef { kind: d.kind(), tool_id: d.id.clone() }),
        at,
    }
}

/// A header value for any text: as is when it is printable ASCII, else RFC 2047
/// (`=?UTF-8?B?…?=`, which ntfy decodes). Control characters become spaces.
pub fn header_text(text: &str) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if clean.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return clean;
    }
    use base64::Engine;
    format!("=?UTF-8?B?{}?=", base64::engine::general_purpose::STANDARD.encode(clean.as_bytes()))
}

/// The ntfy headers for `p` (`Title`, `Click`, `Tags`), leaving out any that
/// `[notify] headers` sets itself.
pub fn ntfy_headers(p: &Payload, configured: &HeaderMap) -> Vec<(&'static str, String)> {
    [
        ("title", header_text(&p.title)),
        ("click", header_text(&p.link)),
        ("tags", format!("lab,{}", event_name(p.state))),
    ]
    .into_iter()
    .filter(|(name, _)| !configured.contains_key(*name))
    .collect()
}

/// The wait before the next attempt after attempt `failed` (counted from 1) failed, or
/// `None` when that was the last one: 0.5 s, 1 s, 2 s, 4 s, then give up.
pub fn retry_delay(failed: u32) -> Option<Duration> {
    (1..MAX_ATTEMPTS).contains(&failed).then(|| FIRST_RETRY * 2u32.pow(failed - 1))
}

/// A bounded FIFO of notifications waiting for delivery.
pub struct Queue<T> {
    items: Mutex<VecDeque<T>>,
    capacity: usize,
    ready: Notify,
}

impl<T> Queue<T> {
    pub fn new(capacity: usize) -> Self {
        Queue { items: Mutex::new(VecDeque::new()), capacity: capacity.max(1), ready: Notify::new() }
    }

    /// Add `item`; when the queue is full the oldest item makes room and is returned.
    pub fn push(&self, item: T) -> Option<T> {
        let dropped = {
            let mut items = self.items.lock().unwrap();
            let dropped = if items.len() >= self.capacity { items.pop_front() } else { None };
            items.push_back(item);
            dropped
        };
        self.ready.notify_one();
        dropped
    }

    pub fn try_pop(&self) -> Option<T> {
        self.items.lock().unwrap().pop_front()
    }

    /// The oldest item, waiting for one if there is none.
    pub async fn pop(&self) -> T {
        loop {
            if let Some(item) = self.try_pop() {
                return item;
            }
            self.ready.notified().await;
        }
    }
}

/// The HTTP client of lab's outgoing notices (the webhook, Web Push): `timeout` per
/// attempt (connect included), redirects never followed, lab's user agent.
pub fn outbound_client(timeout: Duration, what: &str) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("lab/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot set up the {what} HTTP client: {e}"))
}

/// Start notifying: one task reads `changes` and queues notifications, one delivers
/// them. Neither is ever waited on.
pub fn spawn(settings: Settings, mut changes: broadcast::Receiver<Change>) -> anyhow::Result<()> {
    let client = outbound_client(ATTEMPT_TIMEOUT, "[notify]")?;
    let settings = Arc::new(settings);
    let queue = Arc::new(Queue::new(QUEUE_CAPACITY));
    tracing::info!(host = settings.host(), events = ?settings.events.iter().map(|e| event_name(*e)).collect::<Vec<_>>(), "notifying a webhook");
    {
        let (settings, queue) = (settings.clone(), queue.clone());
        tokio::spawn(async move {
            let mut transitions = Transitions::default();
            loop {
                match changes.recv().await {
                    Ok(change) => {
                        if !transitions.observe(&settings.events, &change) {
                            continue;
                        }
                        let p = payload(&change, &settings.base_url, crate::util::time::now_rfc3339());
                        tracing::debug!(run = %p.run_id, state = event_name(p.state), "notification queued");
                        if let Some(old) = queue.push(p) {
                            tracing::warn!(run = %old.run_id, state = event_name(old.state), "the notification queue is full: dropped its oldest notification");
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "notify fell behind the runs: some changes were not looked at")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }
    tokio::spawn(async move {
        loop {
            let p = queue.pop().await;
            deliver(&client, &settings, &p).await;
        }
    });
    Ok(())
}

/// POST `p` until a 2xx answer, at most [`MAX_ATTEMPTS`] times. True once delivered.
async fn deliver(client: &reqwest::Client, settings: &Settings, p: &Payload) -> bool {
    let body = match serde_json::to_vec(p) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(run = %p.run_id, error = %e, "cannot encode a notification");
            return false;
        }
    };
    let mut attempt = 1;
    loop {
        match post(client, settings, p, &body).await {
            Ok(()) => {
                tracing::info!(run = %p.run_id, state = event_name(p.state), attempt, host = settings.host(), "notification delivered");
                return true;
            }
            Err(why) => {
                tracing::debug!(run = %p.run_id, attempt, host = settings.host(), why = %why, "notification attempt failed");
                match retry_delay(attempt) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => {
                        tracing::warn!(run = %p.run_id, state = event_name(p.state), attempts = attempt, host = settings.host(), last_error = %why, "gave up on a notification");
                        return false;
                    }
                }
                attempt += 1;
            }
        }
    }
}

async fn post(client: &reqwest::Client, settings: &Settings, p: &Payload, body: &[u8]) -> Result<(), String> {
    let mut req = client
        .post(settings.url.clone())
        .headers(settings.headers.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_vec());
    for (name, value) in ntfy_headers(p, &settings.headers) {
        req = req.header(name, value);
    }
    let resp = req.send().await.map_err(|e| describe(&e))?;
    let status = resp.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {status}"))
    }
}

/// A request error with its causes, without the URL.
fn describe(e: &reqwest::Error) -> String {
    let mut out = if e.is_timeout() { "timed out".to_string() } else { "request failed".to_string() };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out += &format!(": {s}");
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::{BlockedKind, BlockedView, Dialog, DialogBody, DialogOption, Question};
    use crate::runs::live::view::{DialogSource, PendingDialog};

    fn addr() -> SocketAddr {
        "127.0.0.1:7777".parse().unwrap()
    }

    fn cfg(url: &str) -> NotifyConfig {
        NotifyConfig { url: url.into(), ..NotifyConfig::default() }
    }

    fn id() -> RunId {
        RunId::generate()
    }

    fn derived(state: RunState) -> Derived {
        Derived { state, pending_dialog: None, blocked: None, spool_is_stale: false, turn_idle: false }
    }

    fn question(tool_id: &str, text: &str) -> Derived {
        let dialog = Dialog {
            id: tool_id.into(),
            call_id: Some(tool_id.into()),
            tool_name: "Ask".into(),
            body: DialogBody::Question(vec![Question {
                header: "Database".into(),
                question: text.into(),
                multi_select: false,
                options: vec![DialogOption { label: "A".into(), description: String::new() }],
            }]),
            answerable: true,
            deep_link: None,
        };
        Derived {
            pending_dialog: Some(PendingDialog { dialog, source: DialogSource::Spool }),
            ..derived(RunState::Question)
        }
    }

    fn change(run: &RunId, before: Option<Derived>, after: Derived) -> Change {
        Change {
            run_id: run.clone(),
            provider: "p".into(),
            workdir: "/src/shop/".into(),
            before,
            after,
            answered_by: None,
        }
    }

    #[test]
    fn settings_default_to_the_waiting_states_and_the_served_address() {
        let s = Settings::new(&cfg("https://ntfy.example/topic"), "0.0.0.0:7000".parse().unwrap()).unwrap();
        assert_eq!(s.events(), DEFAULT_EVENTS);
        assert_eq!(s.base_url(), "http://127.0.0.1:7000");
        let s = Settings::new(&cfg("http://127.0.0.1:9/hook"), "[::1]:80".parse().unwrap()).unwrap();
        assert_eq!(s.base_url(), "http://[::1]:80");
        let c = NotifyConfig {
            base_url: Some("https://lab.example/".into()),
            events: Some(vec!["ended".into(), "question".into(), "ended".into()]),
            ..cfg("http://h/x")
        };
        let s = Settings::new(&c, addr()).unwrap();
        assert_eq!(s.base_url(), "https://lab.example");
        assert_eq!(s.events(), [RunState::Ended, RunState::Question]);
    }

    #[test]
    fn bad_settings_are_refused_with_a_reason_that_keeps_secrets() {
        let err = |c: NotifyConfig| Settings::new(&c, addr()).unwrap_err();
        assert!(err(cfg("ftp://h/secret-topic")).contains("http:// or https://"));
        assert!(!err(cfg("ftp://h/secret-topic")).contains("secret-topic"));
        assert!(err(cfg("not a url")).contains("url is not a URL"));
        assert!(err(cfg("file:///etc/passwd")).contains("http:// or https://"));
        let events =
            |e: &[&str]| NotifyConfig { events: Some(e.iter().map(|s| s.to_string()).collect()), ..cfg("http://h") };
        assert!(err(events(&["sometimes"])).contains("unknown event \"sometimes\""));
        assert!(err(events(&["working"])).contains("unknown event"));
        assert!(err(events(&[])).contains("events is empty"));
        let headers = |k: &str, v: &str| NotifyConfig {
            headers: [(k.to_string(), v.to_string())].into_iter().collect(),
            ..cfg("http://h")
        };
        let e = err(headers("Authorization", "Bearer s3cret\nX-Evil: 1"));
        assert!(e.contains("Authorization") && !e.contains("s3cret"), "{e}");
        assert!(err(headers("Bad Name", "x")).contains("not a valid header name"));
        assert!(err(headers("Content-Type", "text/plain")).contains("set by lab itself"));
        let base = |b: &str| NotifyConfig { base_url: Some(b.into()), ..cfg("http://h") };
        assert!(err(base("lab.example")).contains("base_url is not a URL"));
        assert!(err(base("https://lab.example/?x=1")).contains("query"));
        // Header values are kept, and hidden.
        let s = Settings::new(&headers("Authorization", "Bearer s3cret"), addr()).unwrap();
        assert_eq!(s.headers["authorization"], "Bearer s3cret");
        assert!(!format!("{s:?}").contains("s3cret"));
    }

    #[test]
    fn transitions_fire_into_configured_states_once_per_dialog() {
        let mut t = Transitions::default();
        let ev = DEFAULT_EVENTS;
        let run = id();
        assert!(!t.observe(&ev, &change(&run, Some(derived(RunState::Starting)), derived(RunState::Working))));
        assert!(t.observe(&ev, &change(&run, Some(derived(RunState::Working)), question("t1", "Which?"))));
        // The same dialog again (a flicker through working) is not news.
        assert!(!t.observe(&ev, &change(&run, Some(question("t1", "Which?")), derived(RunState::Working))));
        assert!(!t.observe(&ev, &change(&run, Some(derived(RunState::Working)), question("t1", "Which?"))));
        // A new dialog is, even without leaving `question`.
        assert!(t.observe(&ev, &change(&run, Some(question("t1", "Which?")), question("t2", "And?"))));
        assert!(t.observe(&ev, &change(&run, Some(question("t2", "And?")), derived(RunState::NeedsInput))));
        // A change within the same state is not a transition.
        let mut blocked = derived(RunState::NeedsInput);
        blocked.blocked =
            Some(BlockedView { kind: BlockedKind::NeedsInput, message: "m".into(), agent_kind: "x".into() });
        assert!(!t.observe(&ev, &change(&run, Some(derived(RunState::NeedsInput)), blocked)));
        // Unconfigured states never fire.
        assert!(!t.observe(&ev, &change(&run, Some(derived(RunState::Working)), derived(RunState::Ended))));
        assert!(t.seen_dialogs.is_empty(), "an ended run is forgotten");
        assert!(t.observe(&[RunState::Ended], &change(&id(), Some(derived(RunState::Idle)), derived(RunState::Ended))));
    }

    #[test]
    fn states_found_at_start_up_do_not_fire_and_their_dialog_stays_known() {
        let mut t = Transitions::default();
        let run = id();
        assert!(!t.observe(&DEFAULT_EVENTS, &change(&run, None, question("t1", "Which?"))));
        assert!(!t.observe(&DEFAULT_EVENTS, &change(&run, Some(derived(RunState::Working)), question("t1", "Which?"))));
        assert!(t.observe(&DEFAULT_EVENTS, &change(&run, Some(derived(RunState::Working)), question("t2", "New?"))));
        assert!(!t.observe(&DEFAULT_EVENTS, &change(&id(), None, derived(RunState::NeedsInput))));
    }

    #[test]
    fn a_prompt_an_answer_rule_answered_calls_nobody_and_stays_seen() {
        let mut t = Transitions::default();
        let run = id();
        let mut ruled = change(&run, Some(derived(RunState::Working)), question("t1", "Run ls?"));
        ruled.answered_by = Some(crate::runs::AnsweredBy { rule: "r-1".into(), name: "ls".into() });
        assert!(!t.observe(&DEFAULT_EVENTS, &ruled));
        // Seen: the same prompt again (a later view of it) does not call either.
        assert!(!t.observe(&DEFAULT_EVENTS, &change(&run, Some(derived(RunState::Working)), question("t1", "Run ls?"))));
        assert!(t.observe(&DEFAULT_EVENTS, &change(&run, Some(derived(RunState::Working)), question("t2", "Run rm?"))));
    }

    #[test]
    fn the_payload_says_what_waits_and_links_to_the_run() {
        let run = id();
        let p = payload(
            &change(&run, Some(derived(RunState::Working)), question("toolu_1", "Which database?\nPick one.")),
            "https://lab.example",
            "2026-01-01T00:00:00.000Z".into(),
        );
        assert_eq!(p.state, RunState::Question);
        assert_eq!(p.summary, "Which database? Pick one.");
        assert_eq!(p.title, "shop: the agent asks a question");
        assert_eq!(p.link, format!("https://lab.example/#/runs/{run}"));
        assert_eq!(p.dialog, Some(DialogRef { kind: "question", tool_id: "toolu_1".into() }));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["state"], "question");
        assert_eq!(json["dialog"]["kind"], "question");
        assert_eq!(json["run_id"], run.to_string());
        assert_eq!(json["project"], "shop");
        assert!(json.get("workdir").is_none(), "the full path stays on this machine: {json}");
        assert_eq!(json["at"], "2026-01-01T00:00:00.000Z");

        let mut plan = question("toolu_2", "");
        if let Some(d) = plan.pending_dialog.as_mut() {
            d.dialog.body = DialogBody::Plan {
                plan: Some("\n## Migrate the schema\n\n1. step".into()),
                options: Vec::new(),
                feedback_option: None,
                plan_file: None,
            };
        }
        let p = payload(&change(&run, None, plan), "http://b", String::new());
        assert_eq!((p.summary.as_str(), p.title.as_str()), ("Migrate the schema", "shop: a plan awaits approval"));
        assert_eq!(p.dialog.unwrap().kind, "plan");

        let mut perm = question("p~1", "");
        if let Some(d) = perm.pending_dialog.as_mut() {
            d.dialog.body = DialogBody::Permission {
                tool: "Shell".into(),
                summary: "rm -rf build".into(),
                reason: None,
                options: Vec::new(),
                feedback_option: None,
            };
        }
        let p = payload(&change(&run, None, perm), "http://b", String::new());
        assert_eq!(
            (p.summary.as_str(), p.title.as_str()),
            ("Shell: rm -rf build", "shop: the agent asks for permission")
        );

        let mut blocked = derived(RunState::NeedsInput);
        blocked.blocked = Some(BlockedView {
            kind: BlockedKind::NeedsInput,
            message: "Allow rm?".into(),
            agent_kind: "permission".into(),
        });
        let p = payload(&change(&run, None, blocked), "http://b", String::new());
        assert_eq!((p.summary.as_str(), p.dialog.is_none()), ("Allow rm?", true));
        let p = payload(&change(&run, None, derived(RunState::Ended)), "http://b", String::new());
        assert_eq!(serde_json::to_value(&p).unwrap()["dialog"], serde_json::Value::Null);

        let long = question("t", &"x".repeat(2000));
        let p = payload(&change(&run, None, long), "http://b", String::new());
        assert_eq!(p.summary.chars().count(), SUMMARY_MAX_CHARS);
        assert!(p.summary.ends_with('…'));
    }

    #[test]
    fn ntfy_headers_are_readable_and_yield_to_configured_ones() {
        let run = id();
        let p = payload(&change(&run, None, question("t", "Q?")), "http://b", String::new());
        let h = ntfy_headers(&p, &HeaderMap::new());
        assert_eq!(h[0], ("title", "shop: the agent asks a question".to_string()));
        assert_eq!(h[1], ("click", format!("http://b/#/runs/{run}")));
        assert_eq!(h[2], ("tags", "lab,question".to_string()));
        let mut mine = HeaderMap::new();
        mine.insert("Tags", HeaderValue::from_static("robot"));
        assert!(ntfy_headers(&p, &mine).iter().all(|(n, _)| *n != "tags"));
        assert_eq!(header_text("plain: ok"), "plain: ok");
        assert_eq!(header_text("a\nb"), "a b");
        assert_eq!(header_text("café"), "=?UTF-8?B?Y2Fmw6k=?=");
        assert!(HeaderValue::from_str(&header_text("ünïcode ✓\r\n")).is_ok());
    }

    #[test]
    fn retries_back_off_exponentially_then_give_up() {
        let waits: Vec<Option<Duration>> = (1..=6).map(retry_delay).collect();
        let ms = |m| Some(Duration::from_millis(m));
        assert_eq!(waits, [ms(500), ms(1000), ms(2000), ms(4000), None, None]);
        assert_eq!(retry_delay(0), None);
    }

    #[test]
    fn a_full_queue_drops_its_oldest() {
        let q = Queue::new(2);
        assert_eq!(q.push(1), None);
        assert_eq!(q.push(2), None);
        assert_eq!(q.push(3), Some(1));
        assert_eq!((q.try_pop(), q.try_pop(), q.try_pop()), (Some(2), Some(3), None));
    }

    #[tokio::test]
    async fn pop_waits_for_a_push() {
        let q = Arc::new(Queue::new(4));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.pop().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q.push("x");
        assert_eq!(tokio::time::timeout(Duration::from_secs(2), waiter).await.unwrap().unwrap(), "x");
    }
}
