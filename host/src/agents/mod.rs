//! What lab knows of agents without naming one: what providers say and how lab speaks
//! to an agent. Every agent's own knowledge lives in its provider component.
//!
//! - [`model`]: the host's own model of what providers say, whatever their WIT version.
//! - [`provider`]: what lab asks of a provider (the whole trait), apart from wasm.
//! - [`components`]: the provider plugin loader (wasmtime, the compile cache, the WIT
//!   versions).
//! - [`acp`]: the Agent Client Protocol, the second way to speak to an agent.
//! - [`hook`]: `lab hook …`, what an agent's hooks execute (spool, marker, session files).
//! - [`agent_exec`]: `lab agent-exec`, how a run's agent is started inside its pane.

pub mod acp;
pub mod agent_exec;
pub mod components;
pub mod hook;
pub mod model;
pub mod provider;
