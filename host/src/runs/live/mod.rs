//! A run's live state as it is read: the tailer task per run ([`follow`]), the tail
//! over its channels ([`tailer`]: the transcript, the hook files, the screen), the chat
//! as numbered messages and the view derived from all of it; when its session is gone
//! ([`liveness`]); a transcript on another machine mirrored here ([`mirror`]).
//!
//! | child | what it owns |
//! |---|---|
//! | [`tailer`] | one run's live state: its channels read, its view derived |
//! | [`transcript`] | the transcript reader, incremental |
//! | [`hook_channels`] | the spool, marker and session-info readers |
//! | [`hook_file`] | one hook file, read when it changed |
//! | [`spool`] | the spool's rules: the prompt waiting, plan files |
//! | [`screen`] | prompts read off the agent's screen |
//! | [`message_store`] | a run's chat as seq-numbered messages, in pages |
//! | [`view`] | the run's view derived from its facts |
//! | [`follow`] | the tailer task per run, file notifications, screen looks, leftovers |
//! | [`liveness`] | learning that a run's tmux session is gone |
//! | [`mirror`] | the bounded mirror of a transcript on another machine |

pub(in crate::runs) mod follow;
pub mod hook_channels;
pub mod hook_file;
pub mod liveness;
pub mod message_store;
pub mod mirror;
pub mod screen;
pub mod spool;
pub mod tailer;
pub mod transcript;
pub mod view;
