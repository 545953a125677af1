//! Where the reports of the ACP agents on hosts' runners go ([`super::agents`]): each
//! agent's pipe, by host and number, as the link hears them.

use super::protocol::AgentUp;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// Where each agent's reports go, by host and number.
#[derive(Default)]
pub struct AgentPipes {
    next: AtomicU64,
    open: Mutex<HashMap<(String, u64), mpsc::UnboundedSender<AgentUp>>>,
}

impl AgentPipes {
    pub(super) fn add(&self, host: &str, events: mpsc::UnboundedSender<AgentUp>) -> u64 {
        let agent = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().unwrap().insert((host.to_string(), agent), events);
        agent
    }

    pub(super) fn remove(&self, host: &str, agent: u64) {
        self.open.lock().unwrap().remove(&(host.to_string(), agent));
    }

    /// A report of agent `agent` from host `host`'s runner (one it does not have is
    /// dropped); its end closes its pipe.
    pub(super) fn deliver(&self, host: &str, agent: u64, event: AgentUp) {
        let key = (host.to_string(), agent);
        let mut open = self.open.lock().unwrap();
        let Some(tx) = open.get(&key) else { return };
        let ended = matches!(event, AgentUp::Exited { .. });
        let _ = tx.send(event);
        if ended {
            open.remove(&key);
        }
    }

    /// Host `host`'s link ended: so did its agents (their runner stops them).
    pub(super) fn host_gone(&self, host: &str) {
        self.open.lock().unwrap().retain(|(h, _), tx| {
            if h == host {
                let reason = format!("the link to host `{host}` ended, and the agent with it");
                let _ = tx.send(AgentUp::Exited { reason });
            }
            h != host
        });
    }
}
