//! The live pane views lab serve opened on this link ([`Op::Pane`]): each a tmux
//! control-mode client here ([`crate::machines::terminal::Terminal::watch`]), what it sees
//! sent up as [`Up::Pane`], keys and resizes typed in on a thread of its own. They end
//! with [`Op::PaneClose`] or the link (dropping [`Panes`] ends every one).

use crate::machines::hosts::protocol::{self, Op, PaneUp, Reply, Up};
use crate::machines::terminal::{PaneEvent, PaneWatch, Terminal};
use crate::machines::tmux::Tmux;
use base64::Engine;
use std::collections::HashMap;
use tokio::sync::mpsc::UnboundedSender;

/// The most views one link may have open.
pub const MAX_PANES: usize = 64;

/// What goes in to one view.
enum In {
    Keys(Vec<u8>),
    Resize(u16, u16),
}

/// The views of one link, by lab serve's number.
#[derive(Default)]
pub struct Panes {
    open: HashMap<u64, std::sync::mpsc::Sender<In>>,
}

impl Panes {
    /// Do a pane op ([`Op::Pane`], [`Op::PaneKeys`], [`Op::PaneResize`], [`Op::PaneClose`]).
    pub fn on_op(&mut self, tmux: &Tmux, out: &UnboundedSender<Up>, op: Op) -> Reply {
        if let Err(message) = protocol::check_op(&op) {
            return Reply::Error { message };
        }
        let send = |tx: Option<&std::sync::mpsc::Sender<In>>, i: In| match tx {
            Some(tx) if tx.send(i).is_ok() => Reply::Done,
            _ => Reply::Error { message: "no such pane view".into() },
        };
        match op {
            Op::Pane { pane, target } => self.open(tmux, out, pane, &target),
            Op::PaneKeys { pane, data } => match base64::engine::general_purpose::STANDARD.decode(&data) {
                Ok(bytes) => send(self.open.get(&pane), In::Keys(bytes)),
                Err(_) => Reply::Error { message: "keys that are not base64".into() },
            },
            Op::PaneResize { pane, cols, rows } => send(self.open.get(&pane), In::Resize(cols, rows)),
            Op::PaneClose { pane } => {
                self.open.remove(&pane);
                Reply::Done
            }
            _ => Reply::Error { message: "not a pane op".into() },
        }
    }

    fn open(&mut self, tmux: &Tmux, out: &UnboundedSender<Up>, pane: u64, target: &str) -> Reply {
        if self.open.len() >= MAX_PANES || self.open.contains_key(&pane) {
            return Reply::Error { message: format!("at most {MAX_PANES} pane views, each its own number") };
        }
        let (tx, mut events) = tokio::sync::mpsc::channel(256);
        let watch = match tmux.watch(target, tx) {
            Ok(w) => w,
            Err(e) => return Reply::Error { message: e.to_string() },
        };
        let (keys, typed) = std::sync::mpsc::channel();
        std::thread::spawn(move || typist(watch, typed));
        let up = out.clone();
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                for event in wire(ev) {
                    if up.send(Up::Pane { pane, event }).is_err() {
                        return;
                    }
                }
            }
        });
        self.open.insert(pane, keys);
        Reply::Done
    }
}

/// Types into the pane until the view is closed (its sender dropped); then the watch
/// (the tmux client) goes.
fn typist(mut watch: Box<dyn PaneWatch>, typed: std::sync::mpsc::Receiver<In>) {
    for i in typed {
        let done = match i {
            In::Keys(b) => watch.keys(&b),
            In::Resize(c, r) => watch.resize(c, r),
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "typing into a pane view failed");
        }
    }
}

/// A pane event as frames: output cut to [`protocol::MAX_PANE_CHUNK`] pieces.
pub fn wire(ev: PaneEvent) -> Vec<PaneUp> {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    match ev {
        PaneEvent::Size { cols, rows } => vec![PaneUp::Size { cols, rows }],
        PaneEvent::Output(bytes) => {
            bytes.chunks(protocol::MAX_PANE_CHUNK).map(|c| PaneUp::Output { data: b64(c) }).collect()
        }
        PaneEvent::Ended(reason) => vec![PaneUp::Ended { reason }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_goes_up_in_bounded_chunks() {
        let big = vec![b'x'; protocol::MAX_PANE_CHUNK * 2 + 1];
        let frames = wire(PaneEvent::Output(big));
        assert_eq!(frames.len(), 3);
        assert_eq!(wire(PaneEvent::Size { cols: 3, rows: 4 }), [PaneUp::Size { cols: 3, rows: 4 }]);
    }
}
