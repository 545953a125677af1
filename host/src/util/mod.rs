//! Helpers every layer may use, depending on nothing of lab's: the time as lab writes
//! it, and the text checks of what an operator or a device may type.

pub mod text;
pub mod time;
