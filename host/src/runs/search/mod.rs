//! Search across every run's messages: an SQLite FTS5 index under lab's home
//! (`search.db`, 0600), fed by the runs' tails as messages arrive and queried by
//! `GET /search`. Ranked BM25-style among a query's newest [`RANK_WINDOW`] matches;
//! words, `"phrases"` and `prefix*` ([`query`]; prefixes of 2 and 3 characters have
//! their own index, longer ones are looked up among the words that start so).
//!
//! - **Kept up to date**: a tail hands each batch of new messages over ([`SearchIndex::add`]);
//!   one writer thread takes them in, a transaction per batch (at most
//!   [`BATCH_WAIT`] after they arrive). Each run's next message number is kept, so a
//!   transcript read again (after a restart) adds nothing twice.
//! - **Opened without a wait**: [`SearchIndex::open`] returns at once; the writer
//!   thread opens the file, and reads it whole (SQLite's `quick_check`) only if lab serve
//!   did not close it in order ([`SearchIndex::close`] marks it so and empties its
//!   write-ahead log). Until then searches find nothing and say `indexing`.
//! - **Rebuilt when missing or damaged**: a file that does not open, fails that check
//!   or lacks lab's tables is moved aside (`search.db.damaged`) and a new one made;
//!   [`Ready`] says so, and lab serve indexes every run again from its transcript.
//! - **Bounded**: past `max_bytes` the oldest messages are dropped, then the freed pages.

pub mod query;
mod rebuild;

use crate::agents::model::Role;
use crate::runs::live::view::SeqMessage;
use crate::store::fsutil;
use crate::store::paths::RunId;
use anyhow::{Context as _, Result};
use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the writer waits for more messages before it commits a batch.
pub const BATCH_WAIT: Duration = Duration::from_millis(200);
/// How many of a query's newest matches are ranked for its best hits.
pub const RANK_WINDOW: i64 = 1000;
/// The most of one message's text that is indexed.
const TEXT_CAP: usize = 16 * 1024;
/// Of a tool's output (a file read, a command's output) longer than twice this, its
/// start and its end are indexed, this much of each: where a command says what it
/// did and how it ended, without the index growing with every file an agent reads.
const TOOL_ENDS: usize = 2 * 1024;
/// The schema lab's index has (a different one is rebuilt).
const SCHEMA: &str = "lab-search-3";
/// The write-ahead log's size kept after it is folded in (SQLite's `journal_size_limit`).
const WAL_KEPT: i64 = 4 << 20;

/// One hit of `GET /search`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hit {
    pub run_id: String,
    pub seq: u64,
    pub role: String,
    /// The message around the match, the match between `«` and `»`.
    pub snippet: String,
    pub timestamp: String,
}

/// A message as the index keeps it.
struct Doc {
    seq: u64,
    role: &'static str,
    timestamp: String,
    text: String,
}

enum Job {
    Add(RunId, Vec<Doc>),
    /// The run's messages are numbered anew (its transcript was replaced).
    Forget(RunId),
    /// Answer once everything sent before is committed.
    Flush(mpsc::Sender<()>),
    /// Every run was read into it (after a build from the transcripts).
    Complete,
    /// lab serve stops: the index is marked as closed in order, its log folded in, and
    /// the writer ends (answering once done).
    Close(mpsc::Sender<()>),
}

/// The index: a writer thread and a connection for queries.
pub struct SearchIndex {
    jobs: Mutex<mpsc::Sender<Job>>,
    /// None until the writer has looked at the file (or if it could not be opened).
    reader: Mutex<Option<Connection>>,
    /// It is being looked at or built from the transcripts (hits may be missing until
    /// it is done).
    building: Arc<AtomicBool>,
    /// Each run's next message number not yet indexed (the writer's, shared): a tail
    /// reading a transcript again hands over nothing the index has.
    next: Next,
}

type Next = Arc<Mutex<Known>>;

/// What the writer has taken in, as a tail may look at it.
#[derive(Default)]
struct Known {
    /// Each run's next message number not yet indexed.
    next: HashMap<String, u64>,
    /// Runs whose [`Job::Forget`] the writer has yet to take: their messages are all new.
    forgotten: std::collections::HashSet<String>,
}

/// What opening found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The index as it was.
    AsItWas,
    /// A new, empty index (none was there, or a damaged one was moved aside), or one
    /// whose build from the transcripts did not finish: every run is to be read into it
    /// ([`SearchIndex::mark_complete`] when done).
    Fresh,
    /// It could not be opened nor made (the reason is logged): searches find nothing.
    Unusable,
}

/// What [`SearchIndex::open`] found, said by its writer once it has looked.
pub type Ready = tokio::sync::oneshot::Receiver<Opened>;

impl SearchIndex {
    /// The index at `path`, at most `max_bytes` on disk. Returns at once: the file is
    /// opened, checked (after a stop that was not orderly: SQLite's `quick_check`,
    /// which reads the whole file) and, if damaged, moved aside and made anew by the
    /// writer thread; meanwhile messages handed over wait for it, searches find nothing
    /// and [`SearchIndex::building`] is true. [`Ready`] says what it found.
    pub fn open(path: &Path, max_bytes: u64) -> Result<(Arc<SearchIndex>, Ready)> {
        let (tx, rx) = mpsc::channel();
        let building = Arc::new(AtomicBool::new(true));
        let next: Next = Arc::default();
        let index = Arc::new(SearchIndex { jobs: Mutex::new(tx), reader: Mutex::new(None), building, next });
        let (said, ready) = tokio::sync::oneshot::channel();
        let path = path.to_path_buf();
        // The writer holds the index only weakly: dropping every handle still ends it
        // (its jobs' channel closes).
        let (reader, building, next) = (Arc::downgrade(&index), index.building.clone(), index.next.clone());
        std::thread::Builder::new().name("lab-search".into()).spawn(move || {
            let opened = match look(&path) {
                Ok((writer, opened)) => {
                    let found = Connection::open_with_flags(
                        &path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )
                    .with_context(|| format!("opening {} to read", path.display()))
                    .and_then(|r| {
                        r.busy_timeout(Duration::from_secs(2))?;
                        Ok(r)
                    })
                    .and_then(|r| Writer::new(writer, max_bytes, building.clone(), next).map(|w| (r, w)));
                    match found {
                        Ok((r, w)) => Some((r, w, opened)),
                        Err(e) => {
                            tracing::warn!(index = %path.display(), error = %format!("{e:#}"), "the search index could not be opened; search finds nothing until lab serve starts again");
                            None
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(index = %path.display(), error = %format!("{e:#}"), "the search index could not be opened nor made; search finds nothing until lab serve starts again");
                    None
                }
            };
            let Some((r, mut w, opened)) = opened else {
                building.store(false, Ordering::SeqCst);
                let _ = said.send(Opened::Unusable);
                // Jobs are taken and dropped; a flush is answered.
                while let Ok(job) = rx.recv() {
                    if let Job::Flush(f) | Job::Close(f) = job {
                        let _ = f.send(());
                    }
                }
                return;
            };
            // Under the reader's lock: a search that found something sees it done.
            if let Some(index) = reader.upgrade() {
                let mut slot = index.reader.lock().unwrap();
                *slot = Some(r);
                if opened == Opened::AsItWas {
                    building.store(false, Ordering::SeqCst);
                }
            }
            let _ = said.send(opened);
            w.run(rx)
        })?;
        Ok((index, ready))
    }

    /// Index a run's new messages (those it has already are skipped).
    pub fn add(&self, run: &RunId, messages: &[SeqMessage]) {
        let from = {
            let k = self.next.lock().unwrap();
            if k.forgotten.contains(run.as_str()) {
                0
            } else {
                k.next.get(run.as_str()).copied().unwrap_or(0)
            }
        };
        let docs: Vec<Doc> = messages.iter().filter(|m| m.seq >= from).filter_map(doc).collect();
        if !docs.is_empty() {
            let _ = self.jobs.lock().unwrap().send(Job::Add(run.clone(), docs));
        }
    }

    /// The run's messages are numbered anew: what the index has of it goes.
    pub fn forget(&self, run: &RunId) {
        self.next.lock().unwrap().forgotten.insert(run.to_string());
        let _ = self.jobs.lock().unwrap().send(Job::Forget(run.clone()));
    }

    /// Every run lab knows was read into the index.
    /// (It says so once everything added before is committed.)
    pub fn mark_complete(&self) {
        let _ = self.jobs.lock().unwrap().send(Job::Complete);
    }

    /// lab serve stops: what was added before is committed, the index marked as closed
    /// in order (the next start trusts it without reading it all) and its write-ahead
    /// log folded in and emptied. Waits at most `within`; nothing is taken in after.
    pub fn close(&self, within: Duration) -> bool {
        let (tx, rx) = mpsc::channel();
        if self.jobs.lock().unwrap().send(Job::Close(tx)).is_err() {
            return false;
        }
        rx.recv_timeout(within).is_ok()
    }

    /// Whether it is being looked at or built from the transcripts.
    pub fn building(&self) -> bool {
        self.building.load(Ordering::SeqCst)
    }

    /// Wait until what was added before is committed (at most `within`).
    pub fn flush(&self, within: Duration) -> bool {
        let (tx, rx) = mpsc::channel();
        if self.jobs.lock().unwrap().send(Job::Flush(tx)).is_err() {
            return false;
        }
        rx.recv_timeout(within).is_ok()
    }

    /// The best `limit` hits for `q` ([`query::to_fts`]), in one run or all: its newest
    /// [`RANK_WINDOW`] matches (FTS5 walks them newest first, whatever their number),
    /// ranked BM25-style among themselves ([`query::score`]), each best one's snippet made
    /// by FTS5. (FTS5's own `bm25()` reads every match of every term first: a word every
    /// run has would cost each query a walk through the whole index.)
    pub fn search(&self, q: &str, limit: usize, run: Option<&RunId>) -> Result<Vec<Hit>> {
        let Some(fts) = query::to_fts(q) else { return Ok(Vec::new()) };
        let terms = query::terms(q);
        let reader = self.reader.lock().unwrap();
        let Some(c) = reader.as_ref() else { return Ok(Vec::new()) };
        let mut stmt = c.prepare_cached(
            "SELECT rowid, run, seq, role, ts, text FROM msgs WHERE msgs MATCH ?1 AND (?2 IS NULL OR run = ?2) \
             ORDER BY rowid DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![fts, run.map(RunId::as_str), RANK_WINDOW], |r| {
            Ok(Candidate {
                rowid: r.get(0)?,
                run_id: r.get(1)?,
                seq: r.get::<_, i64>(2)? as u64,
                role: r.get(3)?,
                timestamp: r.get(4)?,
                text: r.get(5)?,
            })
        })?;
        let found = rows.collect::<Result<Vec<_>, _>>()?;
        let lower: Vec<String> = found.iter().map(|f| f.text.to_lowercase()).collect();
        let df: Vec<usize> = terms.iter().map(|t| lower.iter().filter(|l| query::count(l, t) > 0).count()).collect();
        let avg = lower.iter().map(|l| l.split_whitespace().count()).sum::<usize>() as f64 / found.len().max(1) as f64;
        let mut ranked: Vec<(f64, &Candidate)> =
            found.iter().zip(&lower).map(|(f, l)| (query::score(l, &terms, &df, found.len(), avg), f)).collect();
        // Best first; among equals, newest first (the walk's order, kept by a stable sort).
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut snip = c.prepare_cached(
            "SELECT snippet(msgs, 0, '«', '»', '…', 24) FROM msgs WHERE msgs MATCH ?1 AND rowid = ?2",
        )?;
        let mut hits = Vec::new();
        for (_, f) in ranked.into_iter().take(limit) {
            let snippet: String = snip.query_row(params![fts, f.rowid], |r| r.get(0))?;
            hits.push(Hit {
                run_id: f.run_id.clone(),
                seq: f.seq,
                role: f.role.clone(),
                snippet,
                timestamp: f.timestamp.clone(),
            });
        }
        Ok(hits)
    }
}

/// A match being ranked.
struct Candidate {
    rowid: i64,
    run_id: String,
    seq: u64,
    role: String,
    timestamp: String,
    text: String,
}

/// What of a message is searched: its text (a tool call's one-line summary, a result's
/// output), capped ([`indexed_text`]).
fn doc(m: &SeqMessage) -> Option<Doc> {
    let text = m.text.trim();
    if text.is_empty() {
        return None;
    }
    Some(Doc { seq: m.seq, role: role_name(m.role), timestamp: m.timestamp.clone(), text: indexed_text(m.role, text) })
}

/// The part of a message's text that is indexed: at most [`TEXT_CAP`] bytes; of a tool's
/// output over twice [`TOOL_ENDS`], its first and last [`TOOL_ENDS`] bytes with `…`
/// between (cut at characters).
fn indexed_text(role: Role, text: &str) -> String {
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let ceil = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    if role == Role::Tool && text.len() > 2 * TOOL_ENDS {
        return format!("{} … {}", &text[..floor(TOOL_ENDS)], &text[ceil(text.len() - TOOL_ENDS)..]);
    }
    text[..floor(text.len().min(TEXT_CAP))].to_string()
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    }
}

/// The index's file, opened to write: as it was, or made anew (none was there, or it
/// was damaged and is moved aside).
fn look(path: &Path) -> Result<(Connection, Opened)> {
    Ok(match open_checked(path) {
        Ok(Some(c)) => {
            let complete = c.query_row("SELECT 1 FROM meta WHERE key = 'complete'", [], |_| Ok(())).is_ok();
            (c, if complete { Opened::AsItWas } else { Opened::Fresh })
        }
        Ok(None) => (create(path)?, Opened::Fresh),
        Err(why) if why.downcast_ref::<Outdated>().is_some() => {
            tracing::info!(index = %path.display(), "the search index is of an earlier lab ({why}); it is built again");
            for ext in ["db", "db-wal", "db-shm"] {
                fsutil::remove_if_exists(&path.with_extension(ext))
                    .with_context(|| format!("removing {}", path.with_extension(ext).display()))?;
            }
            (create(path)?, Opened::Fresh)
        }
        Err(why) => {
            let aside = path.with_extension("db.damaged");
            tracing::warn!(index = %path.display(), aside = %aside.display(), "the search index is damaged ({why:#}); it is moved aside and built again");
            std::fs::rename(path, &aside).with_context(|| format!("moving {} aside", path.display()))?;
            for ext in ["db-wal", "db-shm"] {
                let _ = fsutil::remove_if_exists(&path.with_extension(ext));
            }
            (create(path)?, Opened::Fresh)
        }
    })
}

/// The index at `path` if it is there and sound; None if there is none. Read whole
/// (`quick_check`) only if lab serve did not close it in order.
fn open_checked(path: &Path) -> Result<Option<Connection>> {
    if !path.exists() {
        return Ok(None);
    }
    let c = Connection::open(path)?;
    c.busy_timeout(Duration::from_secs(5))?;
    let schema: String =
        c.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0)).context("no schema record")?;
    // An earlier lab's is built again without being read whole first.
    if schema != SCHEMA && schema.starts_with("lab-search-") {
        return Err(Outdated(schema).into());
    }
    anyhow::ensure!(schema == SCHEMA, "schema {schema:?}, not {SCHEMA:?}");
    let clean = c.query_row("SELECT 1 FROM meta WHERE key = 'clean'", [], |_| Ok(())).is_ok();
    if !clean {
        let ok: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        anyhow::ensure!(ok == "ok", "quick_check: {ok}");
    }
    // The FTS tables themselves answer.
    c.query_row("SELECT count(*) FROM msgs WHERE msgs MATCH '\"lab\"'", [], |r| r.get::<_, i64>(0))?;
    // Open now: a stop that is not in order from here on leaves it to be read whole.
    c.execute("DELETE FROM meta WHERE key = 'clean'", [])?;
    fsutil::set_mode(path, 0o600)?;
    Ok(Some(c))
}

/// An index lab made with another schema (sound, but not what this lab reads).
#[derive(Debug)]
struct Outdated(String);

impl std::fmt::Display for Outdated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "schema {:?}, not {SCHEMA:?}", self.0)
    }
}

impl std::error::Error for Outdated {}

fn create(path: &Path) -> Result<Connection> {
    // Made private before SQLite writes a byte into it.
    drop(fsutil::private_file(path).with_context(|| format!("creating {}", path.display()))?);
    let c = Connection::open(path)?;
    c.execute_batch(&format!(
        "PRAGMA auto_vacuum = INCREMENTAL;
         CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE runs(run TEXT PRIMARY KEY, next_seq INTEGER NOT NULL);
         CREATE VIRTUAL TABLE msgs USING fts5(text, run UNINDEXED, seq UNINDEXED, role UNINDEXED, ts UNINDEXED,
             tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3', columnsize = 0);
         INSERT INTO meta VALUES ('schema', '{SCHEMA}');"
    ))?;
    Ok(c)
}

/// The writer thread's side.
struct Writer {
    c: Connection,
    max_bytes: u64,
    /// Cleared once a build's last message is committed.
    building: Arc<AtomicBool>,
    /// Each run's next message number not yet indexed.
    next: Next,
    /// A build just finished: its log is folded in and emptied.
    fold: bool,
}

impl Writer {
    fn new(c: Connection, max_bytes: u64, building: Arc<AtomicBool>, shared: Next) -> Result<Writer> {
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", "NORMAL")?;
        // The log is folded into the file every ~4 MiB and cut back to that after; at a
        // stop it is emptied ([`Job::Close`]).
        c.pragma_update(None, "journal_size_limit", WAL_KEPT)?;
        for ext in ["db-wal", "db-shm"] {
            let p: PathBuf = PathBuf::from(c.path().unwrap_or_default()).with_extension(ext);
            let _ = fsutil::set_mode(&p, 0o600);
        }
        let next = {
            let mut stmt = c.prepare("SELECT run, next_seq FROM runs")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))?;
            rows.collect::<Result<HashMap<_, _>, _>>()?
        };
        shared.lock().unwrap().next = next;
        Ok(Writer { c, max_bytes, building, next: shared, fold: false })
    }

    fn run(&mut self, rx: mpsc::Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            // A flush is answered now; anything else waits a little for company.
            let now = |j: &Job| matches!(j, Job::Flush(_) | Job::Close(_));
            let mut flushing = now(&first);
            let mut batch = vec![first];
            while !flushing && batch.len() < 256 {
                let Ok(more) = rx.recv_timeout(BATCH_WAIT) else { break };
                flushing = now(&more);
                batch.push(more);
            }
            let closing = batch.iter().any(|j| matches!(j, Job::Close(_)));
            let mut flushes = Vec::new();
            let done = self.commit(batch, &mut flushes);
            if let Err(e) = &done {
                tracing::warn!(error = %format!("{e:#}"), "the search index could not take messages in");
            }
            if closing || self.fold {
                // Its log folded into the file and emptied: none is left at rest.
                self.fold = false;
                if let Err(e) = self.c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
                    tracing::debug!(error = %e, "the search index's log could not be folded in now");
                }
            }
            for f in flushes {
                let _ = f.send(());
            }
            if closing {
                return;
            }
        }
    }

    fn commit(&mut self, batch: Vec<Job>, flushes: &mut Vec<mpsc::Sender<()>>) -> Result<()> {
        let tx = self.c.transaction()?;
        let mut added = false;
        let mut complete = false;
        for job in batch {
            match job {
                Job::Flush(f) => flushes.push(f),
                Job::Close(f) => {
                    tx.execute("INSERT OR REPLACE INTO meta VALUES ('clean', '1')", [])?;
                    flushes.push(f);
                }
                Job::Complete => {
                    tx.execute("INSERT OR REPLACE INTO meta VALUES ('complete', '1')", [])?;
                    complete = true;
                }
                Job::Forget(run) => {
                    tx.execute("DELETE FROM msgs WHERE run = ?1", [run.as_str()])?;
                    tx.execute("DELETE FROM runs WHERE run = ?1", [run.as_str()])?;
                    let mut known = self.next.lock().unwrap();
                    known.next.remove(run.as_str());
                    known.forgotten.remove(run.as_str());
                }
                Job::Add(run, docs) => {
                    let mut known = self.next.lock().unwrap();
                    let next = known.next.entry(run.to_string()).or_insert(0);
                    let mut insert =
                        tx.prepare_cached("INSERT INTO msgs(text, run, seq, role, ts) VALUES (?1, ?2, ?3, ?4, ?5)")?;
                    for d in docs {
                        if d.seq < *next {
                            continue;
                        }
                        insert.execute(params![d.text, run.as_str(), d.seq as i64, d.role, d.timestamp])?;
                        *next = d.seq + 1;
                        added = true;
                    }
                    tx.execute(
                        "INSERT INTO runs(run, next_seq) VALUES (?1, ?2) ON CONFLICT(run) DO UPDATE SET next_seq = ?2",
                        params![run.as_str(), *next as i64],
                    )?;
                }
            }
        }
        tx.commit()?;
        if complete {
            self.building.store(false, Ordering::SeqCst);
            self.fold = true;
        }
        if added {
            self.bound()?;
        }
        Ok(())
    }

    /// Past `max_bytes`: the oldest tenth of the messages goes, then the free pages.
    fn bound(&mut self) -> Result<()> {
        let size = |c: &Connection| -> Result<u64> {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
            let page: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            Ok(((pages - free).max(0) * page) as u64)
        };
        let mut rounds = 0;
        while size(&self.c)? > self.max_bytes && rounds < 10 {
            rounds += 1;
            let n: i64 = self.c.query_row("SELECT count(*) FROM msgs", [], |r| r.get(0))?;
            if n == 0 {
                break;
            }
            self.c.execute(
                "DELETE FROM msgs WHERE rowid IN (SELECT rowid FROM msgs ORDER BY rowid LIMIT ?1)",
                [(n / 10).max(1)],
            )?;
            self.c.execute("INSERT INTO msgs(msgs) VALUES ('optimize')", [])?;
            self.c.execute_batch("PRAGMA incremental_vacuum")?;
            tracing::info!(
                dropped = (n / 10).max(1),
                "the search index reached its size bound; its oldest messages were dropped"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
