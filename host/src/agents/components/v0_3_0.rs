//! `lab:provider@0.3.0`: host bindings. 0.3.0 is 0.2.0 plus the `acp-agent`
//! interface; its `types` are 0.2.0's, so the bindings map them onto
//! [`super::v0_2_0`]'s (`with:`) and every conversion of a tmux provider's values is
//! that module's. Only the ACP declaration converts here.

/// The tmux worlds' exports (`screen-provider` exports every one of them).
pub mod tmux {
    wasmtime::component::bindgen!({
        path: "../wit/v0.3.0",
        world: "screen-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

/// The `acp-provider` world's export.
pub mod acp {
    wasmtime::component::bindgen!({
        path: "../wit/v0.3.0",
        world: "acp-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

pub use acp::exports::lab::provider::acp_agent;
pub use tmux::exports::lab::provider::base;
pub use tmux::exports::lab::provider::dialog_hooker;
pub use tmux::exports::lab::provider::screen_reader;

pub const PACKAGE: &str = "lab:provider@0.3.0";

/// The conversion of `acp-agent`'s launch record, for a package's generated module
/// (0.3.0's here; every later package's generates it anew).
macro_rules! acp_conversions {
    ($acp_agent:ident) => {
        pub fn acp_launch(l: $acp_agent::AcpLaunch) -> crate::agents::model::AcpLaunch {
            crate::agents::model::AcpLaunch {
                args: l.args,
                env: l.env,
                start_timeout_secs: (l.start_timeout_secs > 0).then_some(u64::from(l.start_timeout_secs)),
            }
        }
    };
}
pub(crate) use acp_conversions;

acp_conversions!(acp_agent);
