//! What the end-to-end benchmarks share (included with `#[path]`, next to
//! `tests/common`, which each bench declares as `mod common` at its root): percentiles,
//! environment knobs, a run's event stream, CPU and RSS from /proc, and a history of
//! ended runs written straight into a registry.
#![allow(dead_code)]

pub mod delay_line;

use crate::common::*;
use lab::runs::registry::{Registry, Status};
use lab::store::paths::{Home, RunId};
use serde_json::Value;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Lines};
use std::time::{Duration, SystemTime};

// ---- figures ----------------------------------------------------------------------------

/// Percentiles of a sample (nearest rank on the sorted values).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pct {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub n: usize,
}

pub fn pct(mut v: Vec<f64>) -> Pct {
    if v.is_empty() {
        return Pct::default();
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    Pct { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: v[v.len() - 1], n: v.len() }
}

/// One line of percentiles: `label` padded to `width`, then p50/p90/p99/max and n.
pub fn print_pct(label: &str, width: usize, v: Vec<f64>) {
    let p = pct(v);
    println!(
        "{label:<width$} p50 {:7.2} ms  p90 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms  (n={})",
        p.p50, p.p90, p.p99, p.max, p.n
    );
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Milliseconds from `earlier` to `later` on the system clock (0 if it went backwards).
pub fn ms_between(earlier: SystemTime, later: SystemTime) -> f64 {
    ms(later.duration_since(earlier).unwrap_or_default())
}

/// Microseconds since the Unix epoch (what fake-claude's `key` events carry as `at_us`).
pub fn epoch_us(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

// ---- knobs ------------------------------------------------------------------------------

pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?}: not a number")),
        Err(_) => default,
    }
}

pub fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(env_num(name, default))
}

/// A comma-separated list of counts (`LAB_IDLE_RUNS=50,200`).
pub fn env_counts(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().parse().unwrap_or_else(|_| panic!("{name}: run counts, comma-separated")))
        .collect()
}

// ---- a run's event stream ---------------------------------------------------------------

/// `GET /runs/{id}/events`, read line by line; each view is stamped when it arrived.
pub struct Events {
    lines: Lines<BufReader<reqwest::blocking::Response>>,
}

impl Events {
    pub fn open(lab: &Lab, id: &str) -> Events {
        let resp = lab.event_stream(&format!("/runs/{id}/events"), &[], Duration::from_secs(600));
        assert_eq!(resp.status().as_u16(), 200, "GET /runs/{id}/events");
        Events { lines: BufReader::new(resp).lines() }
    }

    /// The next view and when it arrived.
    pub fn next_view(&mut self) -> (SystemTime, Value) {
        loop {
            let Some(Ok(line)) = self.lines.next() else { panic!("the event stream ended") };
            let Some(data) = line.strip_prefix("data: ") else { continue };
            let arrived = SystemTime::now();
            return (arrived, serde_json::from_str(data).expect("a view"));
        }
    }

    /// The next view showing a dialog captured by the hook (`source: spool`) whose tool
    /// id is not in `seen`; adds it. Returns when it arrived and the tool id.
    pub fn next_spool_question(&mut self, seen: &mut HashSet<String>) -> (SystemTime, String) {
        loop {
            let (arrived, v) = self.next_view();
            if v["state"] != "question" || v["pending_dialog"]["source"] != "spool" {
                continue;
            }
            let tool_id = v["pending_dialog"]["tool_id"].as_str().expect("the dialog's tool id").to_string();
            if seen.insert(tool_id.clone()) {
                return (arrived, tool_id);
            }
        }
    }
}

/// When each run's spool last appeared, as an inotify watch on the runtime directory
/// saw it (the system clock read when the event arrived). The spool's mtime comes from
/// the kernel's coarse clock (a tick, 4 ms here, before the write at worst); this is
/// the write itself plus one inotify wake, the same wake lab's own watch pays.
pub struct SpoolWatch {
    seen: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, SystemTime>>>,
    _watcher: notify::RecommendedWatcher,
}

impl SpoolWatch {
    pub fn new(w: &World) -> SpoolWatch {
        use notify::Watcher;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let into = seen.clone();
        let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let at = SystemTime::now();
            let Ok(ev) = ev else { return };
            // `lab hook` writes a temp file and renames it over the spool.
            if !matches!(ev.kind, notify::EventKind::Create(_) | notify::EventKind::Modify(_)) {
                return;
            }
            let mut seen = into.lock().unwrap();
            for p in &ev.paths {
                if let Some(id) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".spool.json")) {
                    seen.insert(id.to_string(), at);
                }
            }
        })
        .expect("an inotify watch");
        watcher.watch(&w.runtime(), notify::RecursiveMode::NonRecursive).expect("watching the runtime directory");
        SpoolWatch { seen, _watcher: watcher }
    }

    /// When run `id`'s spool last appeared, after `after`: lab may have shown the
    /// dialog before this watch's thread had its turn, so it waits (up to 10 s) for the
    /// event rather than take an older one.
    pub fn appeared(&self, id: &str, after: Option<SystemTime>) -> SystemTime {
        wait_for(Duration::from_secs(10), "the bench's inotify watch to see the spool written", || {
            self.seen.lock().unwrap().get(id).copied().filter(|t| after.is_none_or(|a| *t > a))
        })
    }
}

/// When the dialog hook last wrote run `id`'s spool (the file's mtime).
pub fn spool_written(w: &World, id: &str) -> SystemTime {
    std::fs::metadata(w.runtime().join(format!("{id}.spool.json"))).and_then(|m| m.modified()).expect("the spool")
}

// ---- processes --------------------------------------------------------------------------

/// /proc/<pid>/stat: (ppid, utime+stime, cutime+cstime) in clock ticks.
pub fn stat(pid: u32) -> Option<(u32, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: fields are counted after its `)`.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // rest[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    Some((n(1)? as u32, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// Every live process as (pid, ppid).
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?.0)))
        .collect()
}

fn descendants(root: u32, all: &[(u32, u32)]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(c, pp) in all {
            if pp == p {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// CPU ticks so far: (lab serve + its live descendants + its reaped children,
/// tmux server + its reaped children, the agents: the tmux server's live descendants).
fn ticks(lab: u32, server: u32) -> (u64, u64, u64) {
    let all = processes();
    let own = |pid: u32| stat(pid).map_or(0, |(_, t, c)| t + c);
    let lab_total = own(lab) + descendants(lab, &all).into_iter().map(own).sum::<u64>();
    let server_total = own(server);
    let agents = descendants(server, &all).into_iter().map(|p| stat(p).map_or(0, |(_, t, _)| t)).sum();
    (lab_total, server_total, agents)
}

/// CPU over a window, in % of one core.
#[derive(Debug, Clone, Copy)]
pub struct CpuSplit {
    /// lab serve with everything it spawned (live descendants and reaped children).
    pub lab: f64,
    /// The tmux server with what it reaped (the session-closed hook's shells).
    pub tmux: f64,
    /// The agents (the tmux server's live descendants): shown apart, not counted.
    pub agents: f64,
    pub secs: f64,
}

impl CpuSplit {
    pub fn total(&self) -> f64 {
        self.lab + self.tmux
    }
}

/// The tmux server's pid in `w`.
pub fn tmux_server_pid(w: &World) -> u32 {
    let out = String::from_utf8(w.tmux(&["display-message", "-p", "#{pid}"]).stdout).unwrap();
    out.trim().parse().expect("the tmux server's pid")
}

/// Samples utime+stime of lab serve and the tmux server (see [`CpuSplit`]) over `window`.
pub fn cpu_split(lab: &Lab, w: &World, window: Duration) -> CpuSplit {
    let server = tmux_server_pid(w);
    let lab_pid = lab.child.id();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (l0, s0, a0) = ticks(lab_pid, server);
    let t0 = std::time::Instant::now();
    std::thread::sleep(window);
    let (l1, s1, a1) = ticks(lab_pid, server);
    let secs = t0.elapsed().as_secs_f64();
    let pct = |d: u64| d as f64 / hz / secs * 100.0;
    CpuSplit {
        lab: pct(l1.saturating_sub(l0)),
        tmux: pct(s1.saturating_sub(s0)),
        agents: pct(a1.saturating_sub(a0)),
        secs,
    }
}

pub fn rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmRSS:") / 1024.0
}

/// A `kB` field of /proc/<pid>/status (`VmRSS:`, `RssAnon:`, …); 0 if absent.
pub fn status_kib(pid: u32, name: &str) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

// ---- runs -------------------------------------------------------------------------------

/// Start `n` claude-code runs through `POST /runs`; their ids.
pub fn create_runs(lab: &Lab, w: &World, n: usize, prompt: &str) -> Vec<String> {
    (0..n).map(|_| lab.create_run(w, "claude-code", prompt)["id"].as_str().unwrap().to_string()).collect()
}

/// Wait until every run in `ids` is in `state` (one `GET /runs` per look).
pub fn wait_all_in_state(lab: &Lab, ids: &[String], state: &str, timeout: Duration) {
    let want: HashSet<&str> = ids.iter().map(String::as_str).collect();
    wait_for(timeout, &format!("{} runs {state}", ids.len()), || {
        let (status, list) = lab.get("/runs");
        assert_eq!(status, 200, "GET /runs: {list}");
        let n = list
            .as_array()?
            .iter()
            .filter(|r| r["state"] == state && r["id"].as_str().is_some_and(|id| want.contains(id)))
            .count();
        (n == want.len()).then_some(())
    });
}

/// One transcript of about `kib` KiB: a recorded Claude Code session's lines, repeated.
pub fn transcript(kib: usize) -> Vec<u8> {
    let sample = include_str!("../../../providers/claude-code/testdata/session-ask-answered.jsonl");
    let mut out = Vec::with_capacity(kib * 1024 + sample.len());
    while out.len() < kib * 1024 {
        out.extend_from_slice(sample.as_bytes());
    }
    out
}

/// Writes `n` ended claude-code runs into `w`'s registry, each with `body` as its
/// transcript; their ids. lab serve must not be running. See [`history`].
pub fn ended_history(w: &World, n: usize, body: &[u8]) -> Vec<RunId> {
    history(w, n, body, Status::Ended)
}

/// Writes `n` claude-code runs in `status` into `w`'s registry (active ones name a tmux
/// session that does not exist: their server died), each with its own transcript path
/// under `w`'s temp dir holding `body`: hard links of one file, so 10,000 runs of 1 MiB
/// take seconds and 1 MiB of disk (each run still opens and reads its own path; the
/// bytes come from the page cache, as they do on a machine that has just written
/// them). Their ids. lab serve must not be running.
pub fn history(w: &World, n: usize, body: &[u8], status: Status) -> Vec<RunId> {
    let home = Home::new(w.home.clone());
    home.prepare().unwrap();
    let dir = w.dir.path().join("transcripts");
    std::fs::create_dir_all(&dir).unwrap();
    let original = dir.join("original.jsonl");
    std::fs::write(&original, body).unwrap();
    let registry = Registry::open(&home.registry()).unwrap();
    let mut ids = Vec::new();
    let mut records = Vec::new();
    for i in 0..n {
        let id = RunId::generate();
        let t = dir.join(format!("{i}.jsonl"));
        let _ = std::fs::remove_file(&t);
        std::fs::hard_link(&original, &t).unwrap();
        let at = format!("2026-11-30T00:{:02}:{:02}.{:03}Z", (i / 60) % 60, i % 60, i % 1000);
        let socket = w.home.join("tmux.sock").display().to_string();
        let mut rec = a_record(id.clone(), status, &at, &socket, Some(t.display().to_string()));
        rec.prompt = "hello".into();
        rec.ended_at = (status == Status::Ended).then(|| "2026-11-30T01:00:00.000Z".into());
        records.push(rec);
        ids.push(id);
        if records.len() == 500 {
            registry.put_all(&records).unwrap();
            records.clear();
        }
    }
    registry.put_all(&records).unwrap();
    ids
}

/// `w`'s history used as weeks of work leave it: lab serve started on it builds the
/// search index and the usage books from every transcript (waited for, at most
/// `within`), one action per run is taken through the API (a stop of an ended run:
/// an audit entry each), and it is stopped in order. Returns how long the build took.
pub fn use_history(w: &World, ids: &[RunId], within: Duration) -> Duration {
    let lab = w.serve();
    let t = std::time::Instant::now();
    wait_for(within, "the search index built from every transcript", || {
        let (status, v) = lab.get("/search?q=hello");
        assert_eq!(status, 200, "{v}");
        (v["indexing"] == false).then_some(())
    });
    let built = t.elapsed();
    for id in ids {
        lab.post(&format!("/runs/{id}/stop"), &serde_json::json!({}));
    }
    lab.stop();
    built
}

/// The bytes of `w`'s search index on disk (its file and its write-ahead log).
pub fn index_bytes(w: &World) -> u64 {
    ["search.db", "search.db-wal"].iter().map(|f| std::fs::metadata(w.home.join(f)).map(|m| m.len()).unwrap_or(0)).sum()
}

/// From spawning `lab serve` on `w` to the first answer of `GET path` (asked every
/// millisecond from before the spawn, as a browser left open on lab asks again), and
/// the serve. The address is one taken and freed just before.
pub fn first_answer(w: &World, path: &str) -> (Duration, Lab) {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let token = std::fs::read_to_string(w.home.join("token")).ok().map(|t| t.trim().to_string());
    let url = format!("http://{addr}{path}");
    let t = std::time::Instant::now();
    let asker = std::thread::spawn(move || {
        let client = bearer_client(
            token.as_deref(),
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .connect_timeout(Duration::from_millis(200)),
        );
        let until = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = client.get(&url).send() {
                assert_eq!(r.status().as_u16(), 200, "the first answer to {url}");
                return std::time::Instant::now();
            }
            assert!(std::time::Instant::now() < until, "no answer from lab serve at {url} within 120 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let lab = Lab::start_on(w, &addr.to_string(), |_| {});
    let answered = asker.join().unwrap();
    (answered - t, lab)
}

/// VmHWM (the peak) and VmRSS of `pid`, in MiB.
pub fn peak_and_rss_mib(pid: u32) -> (f64, f64) {
    (status_kib(pid, "VmHWM:") / 1024.0, status_kib(pid, "VmRSS:") / 1024.0)
}

/// What a restart of `lab serve` on a home full of ended runs costs.
#[derive(Debug, Clone)]
pub struct Restart {
    /// From spawning `lab serve` to the first answer of `GET /runs?limit=50`.
    pub first_answer: Duration,
    /// From spawning `lab serve` to its "serving" line (another start).
    pub serving: Duration,
    pub rss_serving_mib: f64,
    /// `GET /runs`, each of `list_samples` requests, in ms.
    pub list: Pct,
    /// After those lists.
    pub rss_listed_mib: f64,
    /// `GET /runs?limit=50` (the newest page, as the UI asks), `list_samples` times.
    pub page: Pct,
    /// The first `GET /runs/{id}/messages` of two runs (their transcripts read), then
    /// the first one again.
    pub first_views: [Duration; 2],
    pub again: Duration,
    /// After the lists and the views.
    pub rss_after_mib: f64,
    /// Every chat opened as the web UI opens it (`?limit=200`: its newest page), one
    /// after the other, in ms each.
    pub open_all: Pct,
    /// After that: what holding every opened chat costs.
    pub rss_all_open_mib: f64,
}

/// Starts `lab serve` on `w` once (filling the component compile cache) and stops it,
/// then starts it again and measures that restart ([`Restart`]). `ids`: the ended runs
/// in the registry (at least two); the first `open` of them are opened as the UI opens
/// a chat.
pub fn measure_restart(w: &World, ids: &[RunId], list_samples: usize, open: usize) -> Restart {
    w.serve().stop();
    let (first_answer, lab) = first_answer(w, "/runs?limit=50");
    lab.stop();
    let t = std::time::Instant::now();
    let lab = w.serve();
    let serving = t.elapsed();
    let pid = lab.child.id();
    let rss_serving_mib = rss_mib(pid);
    let mut list = Vec::new();
    for _ in 0..list_samples.max(1) {
        let t = std::time::Instant::now();
        let (status, runs) = lab.get("/runs");
        list.push(ms(t.elapsed()));
        assert_eq!(status, 200, "GET /runs: {runs}");
        assert_eq!(runs.as_array().unwrap().len(), ids.len());
    }
    let rss_listed_mib = rss_mib(pid);
    let mut page = Vec::new();
    for _ in 0..list_samples.max(1) {
        let t = std::time::Instant::now();
        let (status, p) = lab.get("/runs?limit=50");
        page.push(ms(t.elapsed()));
        assert_eq!(status, 200, "GET /runs?limit=50: {p}");
    }
    let mut first_views = [Duration::ZERO; 2];
    for (i, id) in ids.iter().take(2).enumerate() {
        let t = std::time::Instant::now();
        let v = lab.view(id.as_str());
        first_views[i] = t.elapsed();
        assert!(!v["messages"].as_array().unwrap().is_empty(), "the chat is shown");
    }
    let t = std::time::Instant::now();
    lab.view(ids[0].as_str());
    let again = t.elapsed();
    let rss_after_mib = rss_mib(pid);
    let mut open_all = Vec::new();
    for id in ids.iter().take(open) {
        let t = std::time::Instant::now();
        let (status, v) = lab.get(&format!("/runs/{id}/messages?limit=200"));
        open_all.push(ms(t.elapsed()));
        assert_eq!(status, 200, "{v}");
        assert!(!v["messages"].as_array().unwrap().is_empty(), "the chat is shown");
    }
    let rss_all_open_mib = rss_mib(pid);
    lab.stop();
    Restart {
        first_answer,
        serving,
        rss_serving_mib,
        list: pct(list),
        rss_listed_mib,
        page: pct(page),
        first_views,
        again,
        rss_after_mib,
        open_all: pct(open_all),
        rss_all_open_mib,
    }
}
