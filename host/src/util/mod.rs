//! Helpers every layer may use, depending on nothing of lab's: the time as lab writes
//! it.

pub mod time;
