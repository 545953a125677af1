//! Start-up, on the parts the composition root opened and loaded ([`Parts`]): the runs
//! found in the registry picked up by their transports (or put to rest), the hosts
//! linked, and the background tasks started: liveness, evictions, the providers'
//! folder watched, the search index built if it is new.

use super::providers::{self, acp_agents, look, Watch, LOOK_EVERY};
use super::registry::Status;
use super::{live::liveness, run_list, search, transport, Lives, Parts, Runs, CHANGES_CAPACITY};
use crate::runs::core::{Core, News, Turns};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

impl Runs {
    /// Start the runs on `parts` (opened and loaded by the composition root,
    /// `cli::serve::compose`): resume active runs (their tmux sessions outlive `lab
    /// serve`), end the ones whose session is gone, put ended ones to rest, link the
    /// hosts, and start watching.
    pub async fn start(parts: Parts) -> anyhow::Result<Arc<Runs>> {
        let Parts {
            home,
            config,
            registry,
            books,
            index_ready,
            providers,
            providers_seen: look,
            sessions,
            tmux,
            lab_exe,
            hosts,
            mirrors,
        } = parts;
        let set = providers.now();
        for (f, _) in &set.loaded {
            tracing::info!(provider = %f.info.name, version = %f.info.version, build = %f.digest, dialog_hooker = f.dialog_hooker, source = %f.source, "provider loaded");
        }
        let acp_agents = providers::acp_agents(&config, &set);
        let acp_dir = home.acp_dir();
        let remote = Arc::new(transport::remote::RemoteRuns::new(hosts, mirrors));
        let runs = Arc::new(Runs {
            core: Arc::new(Core {
                home,
                config,
                providers,
                registry,
                files: crate::runs::core::FileWatch::default(),
                news: News {
                    shutdown: watch::channel(false).0,
                    changes: broadcast::channel(CHANGES_CAPACITY).0,
                    listed: broadcast::channel(run_list::NEWS_CAPACITY).0,
                },
                books,
                turns: Turns::default(),
            }),
            here: Arc::new(transport::tmux::TmuxRuns::on(sessions.clone(), tmux, lab_exe)),
            lives: Lives::default(),
            acp: Arc::new(transport::acp::AcpRuns::new(acp_dir, acp_agents, sessions, remote.hosts())),
            remote,
        });
        {
            // What runners report reaches their runs, in order, one at a time.
            let (tx, mut rx) = tokio::sync::mpsc::channel(crate::machines::hosts::link::EVENTS_QUEUE);
            runs.remote.hosts().set_events(tx);
            let weak = Arc::downgrade(&runs);
            tokio::spawn(async move {
                while let Some((host, event)) = rx.recv().await {
                    let Some(runs) = weak.upgrade() else { break };
                    runs.remote.on_host(&runs, host, event).await;
                }
            });
        }
        // Hosts lab reaches over ssh: linked by lab serve itself, for as long as it runs.
        crate::machines::hosts::keep_all_linked(
            runs.remote.hosts(),
            runs.home.clone(),
            runs.here.lab_exe.clone(),
            runs.news.shutdown.subscribe(),
        );
        runs.start_watcher()?;
        // Active runs in lab's tmux: followed once liveness has seen their session
        // (one `list-sessions` for all); those whose session is gone are ended without
        // reading their history ([`Core::end_all`]).
        let mut in_tmux = Vec::new();
        // Ended runs rest in the registry, read when first looked at or listed; until
        // then their id and date are all they cost.
        let (resting, records) = runs.registry.sift(|head| !head.may_rest())?;
        runs.lives.at_rest.write().unwrap().extend(resting.into_iter().map(|h| (h.id, h.created_at)));
        for rec in records {
            let active = rec.status == Status::Active;
            let run = runs.attach(rec, false, None);
            run.found.first_view.store(true, Ordering::SeqCst);
            let rec = run.record();
            if rec.worktree.as_ref().is_some_and(|w| !w.discarded) {
                runs.core.clone().spawn_diff_watch(run.clone());
            }
            if !active {
                // Its chat is read when first looked at.
                run.found.unread.store(true, Ordering::SeqCst);
            } else if let transport::Resume::AfterLiveness(run) = runs.transport(&rec).resume(&runs, run) {
                in_tmux.push(run);
            }
        }
        runs.gc_orphans();
        runs.remote.await_hosts(&runs);
        // Each agent's own version, asked now in the background for GET /providers.
        for (f, _) in &set.loaded {
            runs.agent_version(&f.info.name, &f.info.default_program);
        }
        runs.clone().spawn_provider_watch(look);
        {
            let runs = Arc::downgrade(&runs);
            tokio::spawn(async move {
                if index_ready.await == Ok(search::Opened::Fresh) {
                    if let Some(runs) = runs.upgrade() {
                        runs.core.clone().spawn_reindex();
                    }
                }
            });
        }
        liveness::spawn(runs.clone(), in_tmux);
        runs.clone().spawn_evictions();
        Ok(runs)
    }
}

impl Runs {
    /// Watch `<home>/providers/` ([`providers`]): a change that held still is loaded
    /// and serves new runs; the ACP agents are resolved again with it.
    pub(super) fn spawn_provider_watch(self: Arc<Self>, loaded: Vec<(String, [i64; 8])>) {
        let weak = Arc::downgrade(&self);
        let mut shutdown = self.shutdown_signal();
        drop(self);
        tokio::spawn(async move {
            let mut watch = Watch::new(loaded);
            let mut tick = tokio::time::interval(LOOK_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.changed() => break,
                }
                let Some(runs) = weak.upgrade() else { break };
                let dir = runs.home.providers_dir();
                let look = tokio::task::spawn_blocking(move || look(&dir)).await.unwrap_or_default();
                if !watch.seen(look) {
                    continue;
                }
                let runs2 = runs.clone();
                let Ok(set) = tokio::task::spawn_blocking(move || runs2.providers.reload()).await else { continue };
                runs.acp.set_agents(acp_agents(&runs.config, &set));
                for (f, _) in &set.loaded {
                    runs.agent_version(&f.info.name, &f.info.default_program);
                }
            }
        });
    }
}
