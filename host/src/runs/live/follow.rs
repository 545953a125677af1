//! Watching runs: the tailer task per run (file notifications first, a backstop poll
//! that backs off), looking at the screen while a run has nothing else to show, and
//! clearing what crashed runs left in runtime/. It owns no state of its own: the
//! task's pace and pane watch live in the task; what it learns goes through
//! [`Run::update`].

use crate::runs::live::tailer::{self, Tail};
use crate::runs::live::view::RunState;
use crate::runs::registry::Status;
use crate::runs::{live::liveness, live::screen, Core, Read, Run, Runs};
use crate::store::fsutil;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// What the tailer's refresh saw of the run, for what it does next.
struct Seen {
    ended: bool,
    transcript: Option<PathBuf>,
    spooled: bool,
    prompt_pending: bool,
    on_screen: bool,
    /// A run on another host named its transcript there: its runner is to follow it.
    transcript_elsewhere: bool,
    /// The usage limit its agent hit, while that is its last word.
    usage_limit: Option<crate::agents::model::UsageLimit>,
}

/// The run a file lab watches is named for: a runtime file (`<run-id>.…`), an egress
/// file (`egress/<run-id>.ledger.json`), or a file in a sandboxed run's jail directory
/// (`runtime/<run-id>.box/…`); none for any other path.
pub fn owner_of<'a>(path: &'a Path, runtime: &Path, egress: &Path) -> Option<&'a str> {
    let parent = path.parent()?;
    let named = if parent == runtime || parent == egress {
        path.file_name()?
    } else if parent.parent() == Some(runtime) && parent.extension().is_some_and(|e| e == "box") {
        parent.file_name()?
    } else {
        return None;
    };
    crate::store::paths::RunFiles::owner(named.to_str()?)
}

/// How many runs found at start read their transcript at once ([`Runs::spawn_tailer`]).
pub const CATCH_UP_AT_ONCE: usize = 2;

impl Runs {
    /// Follow a run until it ends: a full refresh on every wake (file notifications,
    /// answers, messages, its end) and whenever the backstop poll's look (a `stat` of
    /// its files, [`tailer::Backoff`]) finds a change or a time-based deadline passes.
    ///
    /// `catch_up`: the run was found at start, its transcript (maybe long) not read
    /// yet: that first read takes its turn with the others' ([`CATCH_UP_AT_ONCE`], so
    /// memory does not grow with the number of runs), and what it held of the chat is
    /// dropped after it if nobody is looking.
    pub(in crate::runs) fn spawn_tailer(self: Arc<Self>, run: Arc<Run>, catch_up: bool) {
        tokio::spawn(async move {
            let mut backoff = tailer::Backoff::default();
            let mut watched = false;
            let mut refresh = true;
            let mut look = false;
            let mut pane = screen::PaneWatch::default();
            let started = std::time::Instant::now();
            let mut catch_up = catch_up;
            loop {
                if refresh {
                    let turn =
                        if std::mem::take(&mut catch_up) { self.turns.catch_up.acquire().await.ok() } else { None };
                    let (seen, derived) = run
                        .update(&self.registry, Read::Channels, async |tail: &mut Tail| Seen {
                            ended: tail.ended,
                            transcript: tail.transcript_path().map(Path::to_path_buf),
                            spooled: tail.has_spool(),
                            prompt_pending: tail.prompt_pending,
                            on_screen: tail.screen().is_some(),
                            transcript_elsewhere: tail.take_transcript_elsewhere_news(),
                            usage_limit: tail.usage_limit().cloned(),
                        })
                        .await;
                    if let Some(limit) = seen.usage_limit.clone() {
                        self.spawn_limit_wait(&run, limit);
                    }
                    if let Some(turn) = turn {
                        drop(turn);
                        if run.view.receiver_count() == 0 {
                            run.messages.evict();
                        }
                    }
                    if seen.transcript_elsewhere {
                        // Its record names the path now (saved under the tail's lock).
                        let runs = self.clone();
                        let run = run.clone();
                        tokio::spawn(async move { run.transport().transcript_elsewhere(&runs, &run).await });
                    }
                    if let Some(t) = &seen.transcript {
                        self.follow_transcript(&run, t);
                    }
                    watched = seen.transcript.as_deref().is_none_or(|t| self.watch_transcript_dir(t));
                    look = !seen.ended && screen::should_look(&derived, seen.spooled, seen.prompt_pending);
                    if look {
                        run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| {
                            let current = tail.screen().cloned();
                            let shown = self
                                .read_screen(&run, &mut pane, tail.message_count() == 0, started.elapsed(), current)
                                .await;
                            if shown.as_ref().map(|d| &d.id) != tail.screen().map(|d| &d.id) {
                                tail.set_screen(shown);
                            }
                        })
                        .await;
                    } else if seen.on_screen && derived.state != RunState::Question {
                        run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| tail.set_screen(None)).await;
                    }
                    if !look {
                        pane.reset();
                    }
                    if seen.ended {
                        break;
                    }
                }
                let deadline = run.tail.lock().await.grace_remaining();
                let deadline =
                    if look { Some(deadline.map_or(screen::POLL, |d| d.min(screen::POLL))) } else { deadline };
                let delay = tailer::poll_delay(backoff.next_delay(), watched, deadline);
                tokio::select! {
                    _ = run.wake.notified() => {
                        backoff.reset();
                        refresh = true;
                    }
                    _ = tokio::time::sleep(delay) => {
                        let changed = run.tail.lock().await.changed_on_disk();
                        if changed {
                            backoff.reset();
                        }
                        refresh = changed || deadline.is_some();
                    }
                }
            }
        });
    }

    pub(in crate::runs) fn start_watcher(self: &Arc<Self>) -> anyhow::Result<()> {
        use notify::Watcher;
        // A path that changed, or None: events were lost (the kernel's queue overflowed),
        // so every run and the liveness loop look again.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<PathBuf>>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) if ev.need_rescan() => {
                let _ = tx.send(None);
            }
            Ok(ev) => {
                for p in ev.paths {
                    let _ = tx.send(Some(p));
                }
            }
            Err(_) => {
                let _ = tx.send(None);
            }
        })?;
        watcher.watch(&self.home.runtime_dir(), notify::RecursiveMode::NonRecursive)?;
        // The sandboxed runs' allowlists and ledgers (their proxies write the ledgers).
        let egress = self.home.egress_dir();
        fsutil::private_dir(&egress)?;
        watcher.watch(&egress, notify::RecursiveMode::NonRecursive)?;
        *self.files.watcher.lock().unwrap() = Some(watcher);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(path) = rx.recv().await {
                let Some(runs) = me.upgrade() else { break };
                match path {
                    Some(path) if runs.is_liveness_signal(&path) => runs.here.liveness.notify_one(),
                    Some(path) if path.parent() == Some(runs.home.egress_dir().as_path()) => {
                        if let Some(run) = runs.run_for_path(&path) {
                            runs.read_egress(&run);
                        }
                    }
                    Some(path) => {
                        if let Some(run) = runs.run_for_path(&path) {
                            run.wake();
                        }
                    }
                    None => {
                        tracing::debug!("file notifications were lost; every run looks again");
                        runs.here.liveness.notify_one();
                        for run in runs.list() {
                            runs.read_egress(&run);
                            run.wake();
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// Which run a changed file belongs to: runtime files are named `<run-id>.…`
    /// (temp files `.<run-id>.…`); transcripts are looked up by path.
    pub(in crate::runs) fn run_for_path(&self, path: &Path) -> Option<Arc<Run>> {
        if let Some(id) = owner_of(path, &self.home.runtime_dir(), &self.home.egress_dir()) {
            return self.lives.get_awake(&crate::store::paths::RunId::parse(id)?);
        }
        let id = self.files.transcripts.lock().unwrap().get(path).cloned()?;
        self.lives.awake.read().unwrap().get(&id).cloned()
    }

    /// Delete runtime files that belong to no active run (left by a crash), and temp
    /// files of active runs old enough that no hook is still writing them.
    pub(in crate::runs) fn gc_orphans(&self) {
        let now = SystemTime::now();
        self.remove_runtime_files(|name, modified| {
            let id = crate::store::paths::RunFiles::owner(name).unwrap_or_default();
            let awake = crate::store::paths::RunId::parse(id).and_then(|id| self.lives.get_awake(&id));
            let active = awake.is_some_and(|r| r.record().status == Status::Active);
            let age = modified.and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
            crate::store::paths::runtime_file_is_garbage(name, active, age)
        });
    }
}

impl Core {
    /// One look at a run's pane ([`screen`]): what prompt it shows, if any.
    pub(in crate::runs) async fn read_screen(
        &self,
        run: &Arc<Run>,
        pane: &mut screen::PaneWatch,
        before_first_line: bool,
        running_for: std::time::Duration,
        current: Option<crate::agents::model::Dialog>,
    ) -> Option<crate::agents::model::Dialog> {
        let term = run.terminal();
        let target = run.record().tmux_target;
        let Some(text) = tokio::task::spawn_blocking(move || term.capture(&target).ok()).await.ok().flatten() else {
            return current;
        };
        let quiet_for = pane.observe(&text, std::time::Instant::now());
        if quiet_for < screen::QUIET {
            // Still moving: keep what was read before (if anything) until it settles.
            return current;
        }
        let read = match run.provider.as_ref().map(|p| &p.provider) {
            Some(p) if p.screen_reader() => match p.read_screen(text.clone()).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "the provider could not read the screen");
                    None
                }
            },
            _ => None,
        };
        screen::decide(read, before_first_line, &text, quiet_for, running_for)
    }
}

impl Core {
    /// Notifications of the run's transcript reach its tailer (a path named late, by
    /// the session info, too).
    fn follow_transcript(&self, run: &Arc<Run>, transcript: &Path) {
        let mut map = self.files.transcripts.lock().unwrap();
        if !map.contains_key(transcript) {
            map.insert(transcript.to_path_buf(), run.id.clone());
        }
    }

    /// Whether `path` is the file tmux's session-closed hook writes.
    pub(in crate::runs) fn is_liveness_signal(&self, path: &Path) -> bool {
        path.parent() == Some(self.home.runtime_dir().as_path())
            && path.file_name().and_then(|n| n.to_str()).is_some_and(liveness::is_signal)
    }

    /// Watch the directory of a run's transcript; whether it is watched (false: not
    /// there yet, or it cannot be, and the tailer polls at its fastest).
    pub(in crate::runs) fn watch_transcript_dir(&self, transcript: &Path) -> bool {
        transcript.parent().is_some_and(|dir| self.watch_dir(dir))
    }

    /// Watch directory `dir` (once); whether it is watched.
    pub(in crate::runs) fn watch_dir(&self, dir: &Path) -> bool {
        use notify::Watcher;
        let mut watched = self.files.watched_dirs.lock().unwrap();
        if watched.iter().any(|d| d == dir) {
            return true;
        }
        if !dir.is_dir() {
            return false;
        }
        if let Some(w) = self.files.watcher.lock().unwrap().as_mut() {
            match w.watch(dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    watched.push(dir.to_path_buf());
                    return true;
                }
                Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "cannot watch; polling instead"),
            }
        }
        false
    }

    /// Remove the files in runtime/ for which `garbage(name, modified)` says so.
    pub(in crate::runs) fn remove_runtime_files(&self, garbage: impl Fn(&str, Option<SystemTime>) -> bool) {
        let Ok(rd) = std::fs::read_dir(self.home.runtime_dir()) else { return };
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
            if garbage(name, modified) {
                tracing::info!(file = %entry.path().display(), "removing a leftover runtime file");
                // A jail directory (`<id>.box/`) goes with what is in it.
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let removed = if is_dir {
                    std::fs::remove_dir_all(entry.path())
                } else {
                    fsutil::remove_if_exists(&entry.path())
                };
                if let Err(e) = removed {
                    tracing::warn!(file = %entry.path().display(), error = %e, "could not remove a runtime file");
                }
            }
        }
    }
}

#[cfg(test)]
mod owner_tests {
    use super::owner_of;
    use std::path::Path;

    #[test]
    fn a_watched_file_names_its_run() {
        let (rt, eg) = (Path::new("/h/runtime"), Path::new("/h/egress"));
        let of = |p: &'static str| owner_of(Path::new(p), rt, eg);
        assert_eq!(of("/h/runtime/r-1.spool.json"), Some("r-1"));
        assert_eq!(of("/h/runtime/.r-1.spool.json.tmp.9"), Some("r-1"));
        assert_eq!(of("/h/egress/r-2.ledger.json"), Some("r-2"));
        assert_eq!(of("/h/runtime/r-3.box/r-3.spool.json"), Some("r-3"));
        assert_eq!(of("/h/runtime/r-3.box/.r-3.marker.json.tmp.1"), Some("r-3"));
        assert_eq!(of("/h/runtime/other/r-4.spool.json"), None, "only a jail directory");
        assert_eq!(of("/elsewhere/r-5.jsonl"), None);
    }
}
