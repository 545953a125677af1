//! The tailer: follows one run's channels — its transcript (through the
//! [`crate::runs::live::transcript`] reader, parsed by the provider), spool, marker and session
//! file — and keeps the facts the view is derived from. The decisions are in
//! [`crate::runs::live::view`], [`crate::runs::answer::answer_guard`] and [`crate::runs::live::spool`].

use crate::agents::components::Provider;
use crate::agents::model::{Content, Dialog, Message, ParseOutput, Role, ToolUse, TurnSignal, UsageLimit};
use crate::runs::live::hook_channels::{
    MarkerChannel, SessionChannel, SessionNews, Source, SpoolChannel, ThisMachine, Whereabouts,
};
use crate::runs::live::hook_file::HookFile;
use crate::runs::live::message_store::{parse_chunk, MessageStore};
use crate::runs::live::transcript::{Step, TranscriptReader};
use crate::runs::live::view::{self, Derived, Facts, SeqMessage};
use crate::store::paths::{RunFiles, RunId};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The backstop poll (file notifications are the fast path, and a lost one makes every
/// run look again): first one [`POLL_MIN`] after a change or a wake, then twice as
/// long after each look that finds nothing new, up to [`POLL_MAX`]. A look is a `stat`
/// of the run's files ([`Tail::changed_on_disk`]); only a change is read. A run idle
/// for a minute is looked at once a minute: 1,000 idle runs wake lab ~16 times a
/// second.
pub const POLL_MIN: Duration = Duration::from_secs(1);
pub const POLL_MAX: Duration = Duration::from_secs(64);

/// The backstop poll's pace (see [`POLL_MIN`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: POLL_MIN }
    }
}

impl Backoff {
    /// Something changed, or the run was woken: look again soon.
    pub fn reset(&mut self) {
        self.next = POLL_MIN;
    }

    /// How long to wait before the next look; the wait after it doubles (up to
    /// [`POLL_MAX`]) unless [`Backoff::reset`] comes first.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(POLL_MAX);
        d
    }
}

/// The wait before the next look: the backoff's `delay`, at most [`POLL_MIN`] while
/// the run's files are not all watched (`watched` false: a transcript whose directory
/// cannot be watched yet), and no later than `deadline` (when the view changes with
/// time alone, [`Tail::grace_remaining`]).
pub fn poll_delay(delay: Duration, watched: bool, deadline: Option<Duration>) -> Duration {
    let delay = if watched { delay } else { delay.min(POLL_MIN) };
    deadline.map_or(delay, |d| delay.min(d))
}

/// What the transcript's messages said, as the tailer took them in: the turn, the
/// tool calls still open, and what the dialog mapper made of them.
#[derive(Default)]
struct TranscriptFacts {
    turn: Option<TurnSignal>,
    /// When an idle turn signal was last taken in.
    idle_since: Option<SystemTime>,
    /// The text (and time) of the run's last message when that message says the turn
    /// ended on an error ([`crate::agents::model::TURN_ERROR_KIND`]); older messages taken in
    /// after it do not count as later.
    turn_error: Option<(String, Option<SystemTime>)>,
    /// The newest message timestamp the transcript has shown (see [`late_flush`]).
    newest: Option<SystemTime>,
    resolved: HashSet<String>,
    /// Tool calls seen in the transcript with no result yet, oldest first (resolved
    /// ones are dropped: memory stays bounded on a long history).
    tool_calls: Vec<ToolUse>,
    /// How many tool calls the transcript has given in all.
    calls_total: usize,
    /// The dialog mapper's answer per open tool call (kept when the transcript is read
    /// again: the same call maps the same).
    mapped: HashMap<String, Option<Dialog>>,
    /// When each tool call was first seen (for the spool grace period; kept too).
    first_seen: HashMap<String, std::time::Instant>,
    /// The run's newest message when it is an assistant's or system's text with nothing
    /// after it, not yet asked about: an agent says there that it hit a usage limit.
    limit_candidate: Option<Message>,
    /// What the agent said of a usage limit ([`Tail::usage_limit`]), until the run
    /// moves on (any later message).
    usage_limit: Option<UsageLimit>,
}

impl TranscriptFacts {
    /// The transcript is read again from its start: what its messages said is void
    /// (the mapper's answers and first sightings stay).
    fn forget(&mut self) {
        let TranscriptFacts { mapped, first_seen, .. } = std::mem::take(self);
        *self = TranscriptFacts { mapped, first_seen, ..TranscriptFacts::default() };
    }
}

/// One run's live state: what its channels said (each through its reader), the
/// answered marks, whether lab has yet to type its first prompt, and whether it ended.
/// Changed only through [`crate::runs::Run::update`], which derives and publishes the view.
pub struct Tail {
    src: Source,
    /// The transcript's reader: where it has been read to.
    transcript: TranscriptReader,
    /// The run's messages, shared with readers that must not wait for the tailer (SSE,
    /// GET): an index of the transcript and the newest messages.
    messages: Arc<MessageStore>,
    /// What the transcript's messages said.
    facts: TranscriptFacts,
    /// The hook channels: the pending prompt, the blocked marker, the session info.
    spool: SpoolChannel,
    marker: MarkerChannel,
    session: SessionChannel,
    /// A prompt read off the screen.
    screen: ScreenFact,
    pub session_id: Option<String>,
    answered: HashSet<String>,
    /// lab has yet to type the run's first prompt (one too large for the agent's
    /// command line): messages wait until it has.
    pub prompt_pending: bool,
    pub ended: bool,
}

/// A prompt read off the screen and still shown there, and how many messages the
/// transcript had then: a screen prompt is over once the run moves on.
#[derive(Default)]
struct ScreenFact {
    dialog: Option<Dialog>,
    at_messages: usize,
}

impl Tail {
    pub fn new(
        run: RunId,
        provider: Arc<dyn Provider>,
        transcript: Option<PathBuf>,
        files: RunFiles,
        fallback_deep_link: Option<String>,
    ) -> Tail {
        let inert = Tail::new_inert(run, files);
        if let Some(t) = &transcript {
            inert.messages.set_source(provider.clone(), t.clone());
        }
        let src =
            Source { hooker: provider.dialog_hooker(), provider: Some(provider), fallback_deep_link, ..inert.src };
        Tail { src, transcript: TranscriptReader::new(transcript), ..inert }
    }

    /// The run goes on after its end (resumed): its agent runs again and its
    /// transcript is read on from where it was; nothing shown on its screen before
    /// counts. `prompt_pending`: lab has a first message to type once the agent is up.
    pub fn revive(&mut self, prompt_pending: bool) {
        self.ended = false;
        self.prompt_pending = prompt_pending;
        self.screen = ScreenFact::default();
        if self.src.hooker {
            self.await_session_info();
        }
    }

    /// Where the run's agent runs ([`Whereabouts`]): its plan files, its transcript.
    pub fn set_place(&mut self, place: Arc<dyn Whereabouts>) {
        self.src.place = place;
    }

    /// Where what its transcript says about usage is counted and its messages indexed.
    pub fn set_books(&mut self, books: Arc<crate::runs::books::Books>) {
        self.src.books = Some(books);
    }

    /// The transcript is not known at spawn: the session-info channel will name it.
    pub fn await_session_info(&mut self) {
        self.session.awaiting = self.transcript.path().is_none();
    }

    /// A run whose provider is not loaded: nothing can be read, only shown as is.
    pub fn new_inert(run: RunId, files: RunFiles) -> Tail {
        Tail {
            src: Source {
                run,
                provider: None,
                hooker: false,
                fallback_deep_link: None,
                place: Arc::new(ThisMachine { plan_roots: Vec::new() }),
                books: None,
            },
            transcript: TranscriptReader::new(None),
            messages: Arc::new(MessageStore::new()),
            facts: TranscriptFacts::default(),
            spool: SpoolChannel::new(HookFile::new(files.spool, "spool")),
            marker: MarkerChannel::new(HookFile::new(files.marker, "blocked marker")),
            session: SessionChannel::new(HookFile::new(files.session, "session info")),
            screen: ScreenFact::default(),
            session_id: None,
            answered: HashSet::new(),
            prompt_pending: false,
            ended: false,
        }
    }

    pub fn messages(&self) -> Arc<MessageStore> {
        self.messages.clone()
    }

    pub fn transcript_path(&self) -> Option<&Path> {
        self.transcript.path()
    }

    /// A run on another host whose agent named its transcript late: that path there
    /// (kept in the run's record).
    pub fn transcript_elsewhere(&self) -> Option<&str> {
        self.session.named_there.as_deref()
    }

    /// Whether its runner is yet to be told to follow that path (true once).
    pub fn take_transcript_elsewhere_news(&mut self) -> bool {
        std::mem::take(&mut self.session.news_there)
    }

    /// Read whatever changed on disk. Never fails: problems are logged and the
    /// offending bytes skipped, so one bad line cannot stop a run's chat.
    pub async fn refresh(&mut self) -> Derived {
        self.read().await;
        self.derive().await
    }

    /// Read whatever changed on disk (as [`Tail::refresh`], without deriving the view),
    /// and delete a spool whose prompt is over.
    pub async fn read(&mut self) {
        if !self.ended {
            self.read_session_info().await;
            self.refresh_transcript().await;
            if self.src.hooker {
                let facts = &self.facts;
                let open = || facts.tool_calls.iter().filter(|c| !facts.resolved.contains(&c.id)).cloned().collect();
                self.spool.refresh(&self.src, facts.calls_total, open).await;
                self.marker.refresh(&self.src).await;
            }
        } else if self.messages.is_empty() {
            // An ended run read for the first time (after a restart).
            self.refresh_transcript().await;
        }
        // The view's rule for a stale spool ([`view::derive`]), without deriving it.
        let stale = self
            .spool
            .fact
            .as_ref()
            .is_some_and(|s| !view::spool_is_live(s, Some(&self.facts.resolved), self.facts.idle_since));
        if stale && !self.ended {
            self.spool.remove_stale(&self.src.run);
        }
    }

    /// The last read before the run ends: what is new since the tail last read. A
    /// transcript this tail never looked at (a run found at start whose agent was
    /// already gone) is left unread: ending the run costs nothing of its history, and
    /// its chat is read when someone looks at it. The session info is read either way
    /// (it may name that transcript, and it is deleted with the run). Whether the
    /// transcript was read.
    pub async fn read_before_end(&mut self) -> bool {
        if self.transcript.looked() {
            self.read().await;
            return true;
        }
        self.read_session_info().await;
        false
    }

    /// While the transcript is not named yet: what the session info says.
    async fn read_session_info(&mut self) {
        if self.session.awaiting {
            let news = self.session.refresh(&self.src).await;
            self.take_session_news(news);
        }
    }

    /// What the session info said: its session id, and the transcript to follow.
    fn take_session_news(&mut self, news: SessionNews) {
        if let Some(sid) = news.session_id {
            self.session_id = Some(sid);
        }
        let Some(named) = news.transcript else { return };
        // On another host the path is the host's: its runner follows it, and what it
        // sends up is read here from the run's mirror (lab serve opens no path a host's
        // payload names).
        let (p, there) = self.src.place.transcript(named);
        if there.is_some() {
            self.session.named_there = there;
            self.session.news_there = true;
        }
        if let Some(provider) = &self.src.provider {
            self.messages.set_source(provider.clone(), p.clone());
            self.transcript.set_path(p);
        }
    }

    async fn refresh_transcript(&mut self) {
        loop {
            match self.transcript.step(&self.src.run) {
                Step::Done => return self.ask_usage_limit().await,
                Step::Restarted => self.forget_transcript(),
                Step::Read(chunks) => {
                    for c in chunks {
                        let out = self.parse(&c.bytes, c.first_line).await;
                        let len = c.bytes.len();
                        self.count_usage(c.bytes, c.at + len as u64).await;
                        self.apply(out, c.at, len);
                    }
                }
            }
        }
    }

    /// What the chunk (ending `end` bytes into the transcript) says about usage,
    /// counted in the run's usage book; a chunk its log says was read is not asked again.
    async fn count_usage(&self, chunk: Vec<u8>, end: u64) {
        let (Some(provider), Some(books)) = (&self.src.provider, &self.src.books) else { return };
        if !provider.reads_usage() || !books.uncounted(&self.src.run, end) {
            return;
        }
        match provider.read_usage(chunk).await {
            Ok(report) => books.count(&self.src.run, end, report),
            Err(e) => tracing::warn!(run = %self.src.run, error = %e, "the provider could not read the run's usage"),
        }
    }

    /// Whether the run's last word says its agent hit a usage limit: asked of the
    /// provider once per such message, when the transcript has been read up to now (a
    /// long catch-up asks once, of its last message).
    async fn ask_usage_limit(&mut self) {
        let Some(msg) = self.facts.limit_candidate.take() else { return };
        let Some(provider) = &self.src.provider else { return };
        match provider.usage_limit(msg).await {
            Ok(limit) => self.facts.usage_limit = limit,
            // A provider built before `sessions` says nothing of limits.
            Err(e) if e.kind == crate::agents::provider::CallErrorKind::Unsupported => {}
            Err(e) => {
                tracing::warn!(run = %self.src.run, error = %e, "the provider could not say whether a usage limit was hit")
            }
        }
    }

    /// What the agent said of its account's usage limit, while it is the run's last word.
    pub fn usage_limit(&self) -> Option<&UsageLimit> {
        self.facts.usage_limit.as_ref()
    }

    /// Forget what the transcript gave (it is read again from its start).
    fn forget_transcript(&mut self) {
        if let Some(books) = &self.src.books {
            books.renumbered(&self.src.run);
        }
        self.messages.clear();
        self.facts.forget();
    }

    async fn parse(&self, chunk: &[u8], first_line: u64) -> ParseOutput {
        let Some(provider) = &self.src.provider else { return ParseOutput::default() };
        parse_chunk(provider.as_ref(), chunk, Some((&self.src.run, first_line))).await
    }

    /// Take in what transcript bytes `at..at+len` gave.
    fn apply(&mut self, out: ParseOutput, at: u64, len: usize) {
        let stamps: Vec<Option<SystemTime>> = out.messages.iter().map(|m| parse_timestamp(&m.timestamp)).collect();
        let late = late_flush(&stamps, self.facts.newest);
        if let Some(newest) = stamps.iter().flatten().max() {
            self.facts.newest = Some(self.facts.newest.map_or(*newest, |n| n.max(*newest)));
        }
        // Only the chunk's last message can be the run's last word (one clone per chunk,
        // not per message, on a long catch-up).
        if let Some(last) = out.messages.last() {
            self.facts.usage_limit = None;
            self.facts.limit_candidate = match (&last.role, &last.content) {
                (Role::Assistant | Role::System, Content::Text(_) | Content::Other { .. }) => Some(last.clone()),
                _ => None,
            };
        }
        let first = self.messages.len();
        let mut msgs = Vec::with_capacity(out.messages.len());
        for m in out.messages {
            match &m.content {
                Content::ToolResult(r) => {
                    self.facts.resolved.insert(r.id.clone());
                }
                Content::ToolUse(u) => {
                    self.facts.first_seen.entry(u.id.clone()).or_insert_with(std::time::Instant::now);
                    self.facts.tool_calls.push(u.clone());
                    self.facts.calls_total += 1;
                }
                _ => {}
            }
            let at = stamps[msgs.len()];
            match &m.content {
                Content::Other { kind, text } if kind == crate::agents::model::TURN_ERROR_KIND => {
                    self.facts.turn_error = Some((text.clone(), at));
                }
                // A message clears it unless it is older (a prompt line written after its
                // turn ended, see [`late_flush`]).
                _ => {
                    if self.facts.turn_error.as_ref().is_none_or(|(_, err)| !older(at, *err)) {
                        self.facts.turn_error = None;
                    }
                }
            }
            let seq = first + msgs.len() as u64;
            msgs.push(SeqMessage::new(seq, m));
        }
        if let Some(books) = &self.src.books {
            books.index(&self.src.run, &msgs);
        }
        self.messages.append(at, len, msgs);
        // Resolved calls are done with: only open ones are ever looked at again.
        let resolved = &self.facts.resolved;
        self.facts.tool_calls.retain(|c| !resolved.contains(&c.id));
        self.facts.mapped.retain(|id, _| !resolved.contains(id));
        self.facts.first_seen.retain(|id, _| !resolved.contains(id));
        if out.turn.is_some() && !late {
            self.facts.turn = out.turn;
            if out.turn == Some(TurnSignal::Idle) {
                // When the transcript said so (its file's time as read), not when lab
                // read it: a spool written after the idle line stays live even when
                // both are read at once (lab catching up, a host's link back after a
                // cut), and both times are the same clock's (the files here).
                self.facts.idle_since = Some(self.transcript.modified().unwrap_or_else(SystemTime::now));
            }
        }
        if out.session_id.is_some() {
            self.session_id = out.session_id;
        }
    }

    /// The newest unresolved tool call that the provider maps to a dialog (the
    /// dormant transcript fallback). Mapper results are cached per tool call id.
    async fn transcript_dialog(&mut self) -> Option<(Dialog, std::time::Duration)> {
        let unresolved: Vec<ToolUse> = self
            .facts
            .tool_calls
            .iter()
            .rev()
            .filter(|c| !self.facts.resolved.contains(&c.id))
            .take(8)
            .cloned()
            .collect();
        for call in unresolved {
            if !self.facts.mapped.contains_key(&call.id) {
                let id = call.id.clone();
                let Some(provider) = &self.src.provider else { return None };
                match provider.map_dialog(call.clone()).await {
                    Ok(d) => {
                        self.facts.mapped.insert(id, d);
                    }
                    Err(e) => tracing::warn!(run = %self.src.run, error = %e, "the dialog mapper failed"),
                }
            }
            if let Some(Some(d)) = self.facts.mapped.get(&call.id) {
                let age = self.facts.first_seen.get(&call.id).map(|t| t.elapsed()).unwrap_or_default();
                return Some((d.clone(), age));
            }
        }
        None
    }

    pub async fn derive(&mut self) -> Derived {
        let (transcript_dialog, transcript_dialog_age) =
            match if self.ended { None } else { self.transcript_dialog().await } {
                Some((d, age)) => (Some(d), age),
                None => (None, std::time::Duration::ZERO),
            };
        let message_count = self.messages.len() as usize;
        view::derive(&Facts {
            ended: self.ended,
            message_count,
            turn: self.facts.turn,
            idle_since: self.facts.idle_since,
            turn_error: self.facts.turn_error.as_ref().map(|(text, _)| text.clone()),
            resolved: Some(&self.facts.resolved),
            hook_cleared: Some(&self.spool.cleared),
            answered: Some(&self.answered),
            transcript_dialog,
            transcript_dialog_age,
            hooker: self.src.hooker,
            spool: self.spool.fact.clone(),
            screen: self.screen().cloned(),
            marker: self.marker.fact.clone(),
            transcript_modified: self.transcript.modified(),
            fallback_deep_link: self.src.fallback_deep_link.clone(),
        })
    }

    /// Whether any of the files the run is read from changed since the last refresh
    /// saw them: `stat`s only, nothing is read (the backstop poll's look).
    pub fn changed_on_disk(&self) -> bool {
        if self.ended {
            return false;
        }
        self.transcript.changed_on_disk()
            || (self.session.awaiting && self.session.file.changed_on_disk())
            || (self.src.hooker && (self.spool.file.changed_on_disk() || self.marker.file.changed_on_disk()))
    }

    /// How long until an unresolved tool call's spool grace ends ([`view::SPOOL_GRACE`]):
    /// then the view may change with no file changing (the transcript fallback shows
    /// the dialog). None when no such call is waiting.
    pub fn grace_remaining(&self) -> Option<Duration> {
        if !self.src.hooker || self.ended {
            return None;
        }
        self.facts
            .tool_calls
            .iter()
            .filter(|c| !self.facts.resolved.contains(&c.id) && !matches!(self.facts.mapped.get(&c.id), Some(None)))
            .filter_map(|c| self.facts.first_seen.get(&c.id))
            .filter_map(|seen| view::SPOOL_GRACE.checked_sub(seen.elapsed()))
            .min()
    }

    /// The live prompt lab may answer: the spooled one (if its prompt is not over), else
    /// the one on screen.
    pub fn live_dialog(&self) -> Option<&Dialog> {
        let spooled = self
            .spool
            .fact
            .as_ref()
            .filter(|s| view::spool_is_live(s, Some(&self.facts.resolved), self.facts.idle_since))
            .and_then(|s| s.dialog.as_ref());
        spooled.or(self.screen())
    }

    /// What the screen shows now, as the provider read it (None: no prompt there).
    pub fn set_screen(&mut self, dialog: Option<Dialog>) {
        if dialog.as_ref().map(|d| &d.id) != self.screen.dialog.as_ref().map(|d| &d.id) {
            self.screen.at_messages = self.message_count();
        }
        self.screen.dialog = dialog;
    }

    /// The prompt read off the screen, while the run has not moved on since (no new
    /// transcript message: once there is one, the prompt was answered).
    pub fn screen(&self) -> Option<&Dialog> {
        self.screen.dialog.as_ref().filter(|_| self.message_count() == self.screen.at_messages)
    }

    /// The newest tool call with no result yet, by name (see [`crate::runs::answer::input::composer_lock`]).
    pub fn open_call(&self) -> Option<&str> {
        self.facts.tool_calls.last().map(|c| c.name.as_str())
    }

    /// How many messages the transcript has given so far.
    pub fn message_count(&self) -> usize {
        self.messages.len() as usize
    }

    /// Whether a spool (of any kind) is present.
    pub fn has_spool(&self) -> bool {
        self.spool.fact.is_some()
    }

    pub fn resolved(&self) -> &HashSet<String> {
        &self.facts.resolved
    }

    pub fn answered(&self) -> &HashSet<String> {
        &self.answered
    }

    pub fn mark_answered(&mut self, id: &str) {
        self.answered.insert(id.to_string());
    }

    pub fn unmark_answered(&mut self, id: &str) {
        self.answered.remove(id);
    }
}

/// A message's RFC 3339 timestamp; `None` when it has none or it does not parse.
fn parse_timestamp(ts: &str) -> Option<SystemTime> {
    if ts.is_empty() {
        return None;
    }
    humantime::parse_rfc3339_weak(ts).ok()
}

/// Whether `a` is known to be older than `b` (both times known).
fn older(a: Option<SystemTime>, b: Option<SystemTime>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a < b)
}

/// Whether a chunk is a late flush: every message in it carries a timestamp, and all of
/// them are older than the newest message the transcript has already shown. Agents do
/// not always write lines in the order things happened (a turn's prompt line written
/// after its reply and turn end); such a chunk's turn signal describes the past, not
/// the agent now. A chunk with no messages, or any message without a readable
/// timestamp, is never late.
pub fn late_flush(stamps: &[Option<SystemTime>], newest_seen: Option<SystemTime>) -> bool {
    let Some(seen) = newest_seen else { return false };
    !stamps.is_empty() && stamps.iter().all(|t| t.is_some_and(|t| t < seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_older_than_what_was_shown_is_a_late_flush() {
        let t = |ms: u64| Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
        assert!(late_flush(&[t(800)], t(993)), "the prompt written after its turn's reply");
        assert!(!late_flush(&[t(800), t(1000)], t(993)), "something new in the chunk");
        assert!(!late_flush(&[t(800), None], t(993)), "a message without a time is never late");
        assert!(!late_flush(&[], t(993)), "no messages: nothing to judge by");
        assert!(!late_flush(&[t(800)], None), "nothing shown yet");
        assert!(!late_flush(&[t(993)], t(993)), "equal is not older");
        assert!(parse_timestamp("2026-11-30T12:40:23.805Z") < parse_timestamp("2026-11-30T12:40:23.993Z"));
        assert!(parse_timestamp("2026-11-30T12:40:23.805Z").is_some());
        assert!(parse_timestamp("").is_none() && parse_timestamp("t").is_none());
    }
    use std::io::Write;

    #[test]
    fn the_backstop_poll_backs_off_while_nothing_changes_and_resets_on_a_change() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..9).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        b.reset();
        assert_eq!(b.next_delay(), POLL_MIN);
        assert_eq!(b.next_delay(), POLL_MIN * 2);
    }

    #[test]
    fn the_poll_stays_fast_while_unwatched_and_meets_a_deadline() {
        let s = Duration::from_secs;
        assert_eq!(poll_delay(s(16), true, None), s(16));
        assert_eq!(poll_delay(s(16), false, None), POLL_MIN, "a transcript not watched yet");
        assert_eq!(poll_delay(s(16), true, Some(Duration::from_millis(300))), Duration::from_millis(300));
        assert_eq!(poll_delay(s(2), true, Some(s(5))), s(2));
        assert_eq!(poll_delay(s(16), false, Some(Duration::ZERO)), Duration::ZERO);
    }

    fn hooker_tail(dir: &Path) -> Tail {
        let id = RunId::parse("r-1").unwrap();
        let files = RunFiles::new(dir, &id);
        let mut tail =
            Tail { transcript: TranscriptReader::new(Some(dir.join("t.jsonl"))), ..Tail::new_inert(id, files) };
        tail.src.hooker = true;
        tail
    }

    #[test]
    fn the_poll_s_look_sees_any_change_of_the_run_s_files_by_stat() {
        let d = tempfile::tempdir().unwrap();
        let mut tail = hooker_tail(d.path());
        assert!(!tail.changed_on_disk(), "no files, none seen");
        let transcript = d.path().join("t.jsonl");
        std::fs::write(&transcript, b"{\"partial\":").unwrap();
        assert!(tail.changed_on_disk(), "a new transcript");
        // What a refresh remembers, even of a partial line it did not read.
        tail.transcript.look();
        assert!(!tail.changed_on_disk());
        std::fs::OpenOptions::new().append(true).open(&transcript).unwrap().write_all(b"1}\n").unwrap();
        assert!(tail.changed_on_disk(), "appended");
        tail.transcript.look();

        std::fs::write(tail.spool.file.path(), b"{}").unwrap();
        assert!(tail.changed_on_disk(), "a spool appeared");
        tail.spool.file.seen();
        std::fs::write(tail.marker.file.path(), b"{}").unwrap();
        assert!(tail.changed_on_disk(), "a marker appeared");
        tail.marker.file.seen();
        assert!(!tail.changed_on_disk());
        std::fs::remove_file(tail.spool.file.path()).unwrap();
        assert!(tail.changed_on_disk(), "the spool is gone");

        tail.ended = true;
        assert!(!tail.changed_on_disk(), "an ended run is not followed");
    }

    #[test]
    fn a_dialog_call_waiting_for_its_spool_sets_a_deadline() {
        let d = tempfile::tempdir().unwrap();
        let mut tail = hooker_tail(d.path());
        assert_eq!(tail.grace_remaining(), None);
        let call =
            |id: &str| ToolUse { id: id.into(), name: "Ask".into(), input_json: "{}".into(), summary: "Ask".into() };
        tail.facts.tool_calls.push(call("old"));
        tail.facts.first_seen.insert("old".into(), std::time::Instant::now() - view::SPOOL_GRACE * 2);
        assert_eq!(tail.grace_remaining(), None, "its grace is over");
        tail.facts.tool_calls.push(call("new"));
        tail.facts.first_seen.insert("new".into(), std::time::Instant::now());
        let left = tail.grace_remaining().expect("a deadline");
        assert!(left <= view::SPOOL_GRACE && left > view::SPOOL_GRACE / 2, "{left:?}");
        tail.facts.mapped.insert("new".into(), None);
        assert_eq!(tail.grace_remaining(), None, "not a dialog");
        tail.facts.mapped.remove("new");
        tail.facts.resolved.insert("new".into());
        assert_eq!(tail.grace_remaining(), None, "resolved");
        tail.facts.resolved.clear();
        tail.src.hooker = false;
        assert_eq!(tail.grace_remaining(), None, "no spool to wait for");
    }

    // ---- the reading rules against a fake provider ------------------------------

    use crate::agents::components::Reply;
    use crate::agents::model::{Blocked, DialogBody, Message, Role, SessionFacts, ToolResult};
    use serde_json::{json, Value};

    /// A provider for a made-up agent: transcript lines `{"text"}`, `{"error"}` (a turn
    /// that ended on an error), `{"use": id, "name", "input"}`, `{"result": id}`,
    /// `{"turn": "idle"}`, each with an optional `"at"` (RFC 3339); spools `{"tool", "input"}` are
    /// permission prompts without a call id (the fake finds the call among the open ones
    /// by name and input, as a real provider would); session files `{"transcript"}`.
    struct Fake;

    fn reply<T: Send + 'static>(v: T) -> Reply<T> {
        Box::pin(async move { Ok(v) })
    }

    impl Provider for Fake {
        fn dialog_hooker(&self) -> bool {
            true
        }
        fn parse_transcript(&self, chunk: Vec<u8>) -> Reply<ParseOutput> {
            let mut out = ParseOutput::default();
            for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let v: Value = serde_json::from_slice(line).unwrap();
                let at = v["at"].as_str().unwrap_or_default();
                if let Some(t) = v["text"].as_str() {
                    out.messages.push(Message::text(Role::Assistant, t, at));
                } else if let Some(t) = v["error"].as_str() {
                    let content = Content::Other { kind: crate::agents::model::TURN_ERROR_KIND.into(), text: t.into() };
                    out.messages.push(Message { role: Role::System, content, timestamp: at.into() });
                    out.turn = Some(TurnSignal::Idle);
                } else if let Some(id) = v["use"].as_str() {
                    let name = v["name"].as_str().unwrap().to_string();
                    let call =
                        ToolUse { id: id.into(), summary: name.clone(), name, input_json: v["input"].to_string() };
                    out.messages.push(Message {
                        role: Role::Assistant,
                        content: Content::ToolUse(call),
                        timestamp: String::new(),
                    });
                    out.turn = Some(TurnSignal::Working);
                } else if let Some(id) = v["result"].as_str() {
                    let r = ToolResult { id: id.into(), text: "ok".into(), is_error: false };
                    out.messages.push(Message {
                        role: Role::Tool,
                        content: Content::ToolResult(r),
                        timestamp: String::new(),
                    });
                } else if v["turn"] == "idle" {
                    out.turn = Some(TurnSignal::Idle);
                }
            }
            reply(out)
        }
        fn map_dialog(&self, _call: ToolUse) -> Reply<Option<Dialog>> {
            reply(None)
        }
        fn pending_dialog(&self, spool: Vec<u8>, open_calls: Vec<ToolUse>) -> Reply<Option<Dialog>> {
            let v: Value = serde_json::from_slice(&spool).unwrap();
            let (tool, input) = (v["tool"].as_str().unwrap().to_string(), v["input"].clone());
            let call_id = open_calls
                .iter()
                .rev()
                .find(|c| c.name == tool && serde_json::from_str::<Value>(&c.input_json).ok() == Some(input.clone()))
                .map(|c| c.id.clone());
            let body = DialogBody::Permission {
                tool: tool.clone(),
                summary: input.to_string(),
                reason: None,
                options: Vec::new(),
                feedback_option: None,
            };
            reply(Some(Dialog {
                id: format!("perm-{tool}"),
                call_id,
                tool_name: tool,
                body,
                answerable: true,
                deep_link: None,
            }))
        }
        fn blocked_state(&self, _marker: Vec<u8>) -> Reply<Blocked> {
            reply(Blocked { kind: "waiting".into(), message: String::new() })
        }
        fn session_info(&self, payload: Vec<u8>) -> Reply<SessionFacts> {
            let v: Value = serde_json::from_slice(&payload).unwrap();
            reply(SessionFacts { transcript_path: v["transcript"].as_str().map(str::to_string), session_id: None })
        }
    }

    fn fake_tail(dir: &Path, transcript: Option<PathBuf>) -> Tail {
        let id = RunId::parse("r-1").unwrap();
        Tail::new(id.clone(), Arc::new(Fake), transcript, RunFiles::new(dir, &id), None)
    }

    fn append(path: &Path, lines: &[Value]) {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }

    #[tokio::test]
    async fn a_permission_prompt_keeps_its_token_when_its_call_is_found_and_ends_with_the_call() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        let mut tail = fake_tail(d.path(), Some(t.clone()));
        append(&t, &[json!({"text": "Let me clean up."})]);
        // The prompt is spooled before its call reaches the transcript.
        std::fs::write(tail.spool.file.path(), json!({"tool": "Shell", "input": {"cmd": "rm -rf build"}}).to_string())
            .unwrap();
        let v = tail.refresh().await;
        let shown = v.pending_dialog.expect("the prompt").dialog;
        assert!(shown.id.starts_with("perm-Shell~") && shown.call_id.is_none(), "{shown:?}");
        assert_eq!(v.state, view::RunState::Question);
        // The call arrives: the spool is read again, the call found, the token kept.
        append(&t, &[json!({"use": "c1", "name": "Shell", "input": {"cmd": "rm -rf build"}})]);
        let v = tail.refresh().await;
        let again = v.pending_dialog.expect("still the prompt").dialog;
        assert_eq!((again.id.as_str(), again.call_id.as_deref()), (shown.id.as_str(), Some("c1")));
        assert_eq!(tail.live_dialog().map(|d| d.id.clone()), Some(shown.id.clone()));
        // Refused in the terminal: no clear hook, but the call's result ends it, and the
        // spool is deleted.
        append(&t, &[json!({"result": "c1"})]);
        let v = tail.refresh().await;
        assert!(v.pending_dialog.is_none());
        assert!(!tail.spool.file.path().exists(), "the stale spool is removed");
        assert_eq!(tail.message_count(), 3);
    }

    #[tokio::test]
    async fn a_prompt_with_no_call_ends_when_the_agent_ends_a_turn_after_it() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        let mut tail = fake_tail(d.path(), Some(t.clone()));
        append(&t, &[json!({"text": "hi"}), json!({"turn": "idle"})]);
        tail.refresh().await;
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(tail.spool.file.path(), json!({"tool": "Web", "input": {"url": "x"}}).to_string()).unwrap();
        assert!(tail.refresh().await.pending_dialog.is_some(), "an idle before the spool does not end it");
        append(&t, &[json!({"text": "ok then"}), json!({"turn": "idle"})]);
        let v = tail.refresh().await;
        assert!(v.pending_dialog.is_none());
        assert_eq!(v.state, view::RunState::Idle);
    }

    /// A catch-up (lab busy, or a host's link back after a cut) reads an idle line and a
    /// spool written after it in one go: the prompt is live, its spool kept.
    #[tokio::test]
    async fn an_idle_line_and_a_later_spool_read_at_once_leave_the_prompt_live() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        let mut tail = fake_tail(d.path(), Some(t.clone()));
        append(&t, &[json!({"text": "Written before the prompt."}), json!({"turn": "idle"})]);
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(tail.spool.file.path(), json!({"tool": "Web", "input": {"url": "x"}}).to_string()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let v = tail.refresh().await;
        assert!(v.pending_dialog.is_some(), "the idle came before the spool");
        assert!(tail.spool.file.path().exists(), "a live prompt's spool is kept");
    }

    #[tokio::test]
    async fn a_turn_error_blocks_until_a_newer_message_and_an_older_one_written_late_does_not_count() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        let mut tail = fake_tail(d.path(), Some(t.clone()));
        append(&t, &[json!({"error": "Billing: Credit balance is too low", "at": "2026-12-01T10:00:02Z"})]);
        let v = tail.refresh().await;
        assert_eq!(v.state, view::RunState::NeedsInput);
        assert_eq!(
            v.blocked.as_ref().map(|b| (b.kind, b.message.as_str())),
            Some((crate::agents::model::BlockedKind::Error, "Billing: Credit balance is too low"))
        );
        // 2.1.198 writes the turn's prompt line after the error line: older, so still blocked.
        append(&t, &[json!({"text": "Say hello.", "at": "2026-12-01T10:00:01Z"})]);
        assert_eq!(tail.refresh().await.state, view::RunState::NeedsInput, "a late prompt line");
        // The operator's resend (newer) clears it.
        append(&t, &[json!({"text": "Topped up, try again.", "at": "2026-12-01T10:01:00Z"})]);
        let v = tail.refresh().await;
        assert!(v.blocked.is_none());
        assert_eq!(v.state, view::RunState::Idle, "no new turn signal yet");
        assert!(older(parse_timestamp("2026-12-01T10:00:01Z"), parse_timestamp("2026-12-01T10:00:02Z")));
        assert!(!older(None, parse_timestamp("2026-12-01T10:00:02Z")), "an unknown time is not older");
    }

    #[tokio::test]
    async fn a_transcript_named_late_by_session_info_is_followed() {
        let d = tempfile::tempdir().unwrap();
        let mut tail = fake_tail(d.path(), None);
        tail.await_session_info();
        assert_eq!(tail.refresh().await.state, view::RunState::Starting);
        assert!(tail.transcript_path().is_none());
        let t = d.path().join("rollout.jsonl");
        append(&t, &[json!({"text": "from the rollout"})]);
        std::fs::write(tail.session.file.path(), json!({"transcript": "relative/path.jsonl"}).to_string()).unwrap();
        tail.refresh().await;
        assert!(tail.transcript_path().is_none(), "a relative path is refused");
        assert!(!tail.changed_on_disk());
        std::fs::write(tail.session.file.path(), json!({"transcript": t.display().to_string()}).to_string()).unwrap();
        assert!(tail.changed_on_disk(), "the session file is watched while the transcript is unknown");
        let v = tail.refresh().await;
        assert_eq!(tail.transcript_path(), Some(t.as_path()));
        assert_eq!((v.state, tail.message_count()), (view::RunState::Working, 1));
        assert_eq!(tail.transcript_elsewhere(), None, "a run here");
    }

    /// Ending a run reads what is new since its tail last read; a transcript the tail
    /// never looked at (a run found at start whose agent was gone) is not read at all,
    /// while the session info that names it still is (it goes with the run's files).
    #[tokio::test]
    async fn the_read_before_the_end_costs_what_is_new_and_nothing_for_a_history_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        append(&t, &[json!({"text": "one"}), json!({"text": "two"})]);
        // Never followed, named by its session info only.
        let mut found = fake_tail(d.path(), None);
        found.await_session_info();
        std::fs::write(found.session.file.path(), json!({"transcript": t.display().to_string()}).to_string()).unwrap();
        assert!(!found.read_before_end().await, "nothing of the history read");
        assert_eq!(found.transcript_path(), Some(t.as_path()), "the session info was read");
        assert_eq!(found.message_count(), 0);
        // Read later, when someone looks (as an ended run's chat is).
        found.ended = true;
        found.read().await;
        assert_eq!(found.message_count(), 2);

        // Followed: what was appended since is read, and only that.
        let mut followed = fake_tail(d.path(), Some(t.clone()));
        followed.read().await;
        assert_eq!(followed.message_count(), 2);
        append(&t, &[json!({"text": "three"})]);
        assert!(followed.read_before_end().await);
        assert_eq!(followed.message_count(), 3);
        assert_eq!(followed.messages().read(0..3).await.len(), 3, "the store indexes the whole chat once");
    }

    /// On another host the path named is the host's: never opened here; the run's
    /// mirror is read, and the path is kept for its runner to follow.
    #[tokio::test]
    async fn a_transcript_named_late_on_another_host_is_read_from_the_mirror() {
        let d = tempfile::tempdir().unwrap();
        let mut tail = fake_tail(d.path(), None);
        let mirror = d.path().join("remote").join("r-1.jsonl");
        std::fs::create_dir_all(mirror.parent().unwrap()).unwrap();
        let hosts = crate::machines::hosts::HostCredentials::new(d.path().join("hosts.json"));
        tail.set_place(Arc::new(crate::runs::transport::remote::RemoteRun {
            hosts: Arc::new(crate::machines::hosts::Hosts::new(hosts)),
            host: "m1".into(),
            workdir: "/w".into(),
            home: None,
            mirror: mirror.clone(),
        }));
        tail.await_session_info();
        // A file here at the path the host names: not what is read.
        let there = d.path().join("rollout.jsonl");
        append(&there, &[json!({"text": "a file on lab serve's machine"})]);
        std::fs::write(tail.session.file.path(), json!({"transcript": there.display().to_string()}).to_string())
            .unwrap();
        tail.refresh().await;
        assert_eq!(tail.transcript_path(), Some(mirror.as_path()));
        assert_eq!(tail.transcript_elsewhere(), Some(there.to_str().unwrap()));
        assert!(tail.take_transcript_elsewhere_news(), "its runner is to be told");
        assert_eq!(tail.message_count(), 0, "nothing mirrored yet");
        append(&mirror, &[json!({"text": "from the host"})]);
        let v = tail.refresh().await;
        assert_eq!((v.state, tail.message_count()), (view::RunState::Working, 1));
        assert!(!tail.take_transcript_elsewhere_news(), "told once");
    }

    #[tokio::test]
    async fn a_long_chat_keeps_only_its_newest_messages_in_memory_and_reads_older_pages_from_disk() {
        use crate::runs::live::message_store::{select, Page, RESIDENT_MESSAGES};
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t.jsonl");
        let mut tail = fake_tail(d.path(), Some(t.clone()));
        // 1,000 messages in 20 appends (20 chunks), with tool calls resolved on the way.
        for round in 0..20 {
            let mut lines: Vec<Value> = (0..48).map(|k| json!({"text": format!("m{}", round * 50 + k)})).collect();
            let id = format!("c{round}");
            lines.push(json!({"use": id, "name": "Shell", "input": {"cmd": "ls"}}));
            lines.push(json!({"result": id}));
            append(&t, &lines);
            tail.refresh().await;
        }
        let store = tail.messages();
        assert_eq!(store.len(), 1000);
        assert_eq!(store.resident(), RESIDENT_MESSAGES, "only the newest are held");
        assert!(tail.facts.tool_calls.is_empty() && tail.facts.mapped.is_empty(), "resolved calls are dropped");
        assert_eq!(tail.open_call(), None);
        let texts = |v: &[SeqMessage]| v.iter().map(|m| (m.seq, m.text.clone())).collect::<Vec<_>>();
        let want = |r: std::ops::Range<u64>| r.map(|s| (s, format!("m{s}"))).collect::<Vec<_>>();
        // An old page (read again from disk), the newest page (held), and one across both.
        assert_eq!(texts(&store.read(100..148).await), want(100..148));
        assert_eq!(texts(&store.read(960..998).await), want(960..998));
        let across = store.read(700..800).await;
        assert_eq!(across.iter().map(|m| m.seq).collect::<Vec<_>>(), (700..800).collect::<Vec<_>>());
        assert_eq!(across[0].text, "m700");
        // Nothing held: the same messages, all from disk; new ones are held again.
        store.evict();
        assert_eq!(store.resident(), 0);
        let (range, more_before, _) = select(&Page { limit: Some(30), ..Page::default() }, store.len());
        assert_eq!(range, 970..1000);
        assert!(more_before);
        assert_eq!(texts(&store.read(range).await)[..2], want(970..972)[..]);
        append(&t, &[json!({"text": "m1000"}), json!({"use": "open", "name": "Edit", "input": {}})]);
        tail.refresh().await;
        assert_eq!(store.resident(), 2);
        assert_eq!(texts(&store.read(990..998).await), want(990..998));
        assert_eq!(texts(&store.read(1000..1001).await), want(1000..1001));
        assert_eq!(tail.open_call(), Some("Edit"), "the newest open call, for the composer lock");
        // A transcript replaced under the index: what cannot be read again is left out.
        std::fs::write(&t, b"").unwrap();
        assert!(store.read(0..10).await.is_empty());
    }
}
