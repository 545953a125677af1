//! Helpers every layer may use, depending on nothing of lab's: the time as lab writes
//! it, the text checks of what an operator or a device may type, secrets, POSIX
//! shell quoting, which addresses are the public internet's, and memory given back.

pub mod memory;
pub mod net;
pub mod secrets;
pub mod shell;
pub mod text;
pub mod time;
