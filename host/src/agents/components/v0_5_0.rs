//! `lab:provider@0.5.0`: host bindings. 0.5.0 is 0.4.0 plus the `usage` interface
//! (tokens per response, the context window, the account's windows, API errors),
//! exported by every tmux world; its `types` are 0.2.0's, so the bindings map them
//! onto [`super::v0_2_0`]'s (`with:`). `sessions`' records are 0.4.0's, generated anew
//! under this package: [`super::v0_4_0`]'s conversions are written once for both
//! ([`sessions_conversions!`](super::v0_4_0)).

/// The tmux worlds' exports (`screen-provider` exports every one of them).
pub mod tmux {
    wasmtime::component::bindgen!({
        path: "../wit/v0.5.0",
        world: "screen-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

/// The `acp-provider` world's export (0.3.0's, under the new package version).
pub mod acp {
    wasmtime::component::bindgen!({
        path: "../wit/v0.5.0",
        world: "acp-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

pub use acp::exports::lab::provider::acp_agent;
pub use tmux::exports::lab::provider::base;
pub use tmux::exports::lab::provider::dialog_hooker;
pub use tmux::exports::lab::provider::screen_reader;
pub use tmux::exports::lab::provider::sessions;
pub use tmux::exports::lab::provider::usage;

pub const PACKAGE: &str = "lab:provider@0.5.0";

super::v0_4_0::sessions_conversions!(sessions);

super::v0_3_0::acp_conversions!(acp_agent);

/// The conversions of `usage`' own records, for a package's generated module (0.5.0's
/// here, 0.6.0's in [`super::v0_6_0`]).
macro_rules! usage_conversions {
    ($usage:ident) => {
        fn tokens(t: $usage::Tokens) -> crate::agents::model::Tokens {
            crate::agents::model::Tokens {
                input: t.input,
                output: t.output,
                cache_read: t.cache_read,
                cache_write: t.cache_write,
            }
        }

        pub fn usage_report(r: $usage::UsageReport) -> crate::agents::model::UsageReport {
            use crate::agents::model as m;
            m::UsageReport {
                responses: r
                    .responses
                    .into_iter()
                    .map(|x| m::ResponseUsage {
                        response_id: x.response_id,
                        model: x.model,
                        tokens: tokens(x.tokens),
                        timestamp: x.timestamp,
                    })
                    .collect(),
                model: r.model,
                context: r.context.map(|c| m::ContextUse { used: c.used, window: c.window }),
                windows: r
                    .windows
                    .into_iter()
                    .map(|w| m::LimitWindow {
                        name: w.name,
                        used_percent: f64::from(w.used_permille.min(1000)) / 10.0,
                        resets_at: w.resets_at,
                        minutes: w.minutes,
                    })
                    .collect(),
                errors: r.errors.into_iter().map(|e| m::ApiError { text: e.text, timestamp: e.timestamp }).collect(),
            }
        }
    };
}
pub(crate) use usage_conversions;

usage_conversions!(usage);
