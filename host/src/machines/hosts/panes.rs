//! The live pane views open on the hosts' runners ([`super::protocol::Op::Pane`]):
//! where each view's events go, by host and number, as the link hears them.

use super::protocol::PaneUp;
use crate::machines::terminal::PaneEvent;
use base64::Engine;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The live pane views open on the hosts' runners: where each view's events go, by
/// host and number.
#[derive(Default)]
pub struct PaneViews {
    next: AtomicU64,
    open: Mutex<HashMap<(String, u64), tokio::sync::mpsc::Sender<PaneEvent>>>,
}

impl PaneViews {
    pub(super) fn add(&self, host: &str, events: tokio::sync::mpsc::Sender<PaneEvent>) -> u64 {
        let pane = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().unwrap().insert((host.to_string(), pane), events);
        pane
    }

    pub(super) fn remove(&self, host: &str, pane: u64) {
        self.open.lock().unwrap().remove(&(host.to_string(), pane));
    }

    /// An event of view `pane` from host `host`'s runner (one it does not have is
    /// dropped). A viewer too slow to keep up loses its view, never the link's time.
    pub(super) fn deliver(&self, host: &str, pane: u64, event: PaneUp) {
        let key = (host.to_string(), pane);
        let Some(tx) = self.open.lock().unwrap().get(&key).cloned() else { return };
        let event = match event {
            PaneUp::Size { cols, rows } => PaneEvent::Size { cols, rows },
            PaneUp::Output { data } => match base64::engine::general_purpose::STANDARD.decode(&data) {
                Ok(b) => PaneEvent::Output(b),
                Err(_) => PaneEvent::Ended("the runner sent output that is not base64".into()),
            },
            PaneUp::Ended { reason } => PaneEvent::Ended(reason),
        };
        if tx.try_send(event).is_err() {
            let _ = tx.try_send(PaneEvent::Ended("the view fell behind".into()));
            self.open.lock().unwrap().remove(&key);
        }
    }

    /// Host `host`'s link ended: its views end.
    pub(super) fn host_gone(&self, host: &str) {
        let mut open = self.open.lock().unwrap();
        open.retain(|(h, _), tx| {
            if h == host {
                let _ = tx.try_send(PaneEvent::Ended("the machine's link went".into()));
            }
            h != host
        });
    }
}
