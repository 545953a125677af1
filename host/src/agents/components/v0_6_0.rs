//! `lab:provider@0.6.0`: host bindings. 0.6.0 is 0.5.0 plus the `sandbox` interface
//! (what the agent needs inside a sandbox), exported by every tmux world; its `types`
//! are 0.2.0's, so the bindings map them onto [`super::v0_2_0`]'s (`with:`).
//! `sessions`' and `usage`' records are generated anew under this package: their
//! conversions are written once ([`sessions_conversions!`](super::v0_4_0),
//! [`usage_conversions!`](super::v0_5_0)).

/// The tmux worlds' exports (`screen-provider` exports every one of them).
pub mod tmux {
    wasmtime::component::bindgen!({
        path: "../wit/v0.6.0",
        world: "screen-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

/// The `acp-provider` world's export (0.3.0's, under the new package version).
pub mod acp {
    wasmtime::component::bindgen!({
        path: "../wit/v0.6.0",
        world: "acp-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

pub use acp::exports::lab::provider::acp_agent;
pub use tmux::exports::lab::provider::base;
pub use tmux::exports::lab::provider::dialog_hooker;
pub use tmux::exports::lab::provider::sandbox;
pub use tmux::exports::lab::provider::screen_reader;
pub use tmux::exports::lab::provider::sessions;
pub use tmux::exports::lab::provider::usage;

pub const PACKAGE: &str = "lab:provider@0.6.0";

super::v0_4_0::sessions_conversions!(sessions);
super::v0_5_0::usage_conversions!(usage);

super::v0_3_0::acp_conversions!(acp_agent);

/// The conversion of `sandbox`' needs record, for a package's generated module (0.6.0's
/// here, 0.7.0's in [`super::v0_7_0`]).
macro_rules! sandbox_conversions {
    ($sandbox:ident) => {
        pub fn needs(n: $sandbox::SandboxNeeds) -> crate::sandbox::Needs {
            crate::sandbox::Needs { writable: n.writable, readable: n.readable, hosts: n.hosts }
        }
    };
}
pub(crate) use sandbox_conversions;

sandbox_conversions!(sandbox);
