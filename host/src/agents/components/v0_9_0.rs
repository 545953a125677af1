//! `lab:provider@0.9.0`: host bindings. 0.9.0 is 0.8.0 plus `setup` (where the agent
//! keeps a login, for `lab doctor`), exported by every world, the ACP one too; its
//! `types` are 0.2.0's, so the bindings map them onto [`super::v0_2_0`]'s (`with:`).
//! `sessions`', `usage`', `sandbox`' and `acp-agent`'s records are generated anew under
//! this package: their conversions are written once (the macros of the versions that
//! brought them).

use crate::agents::model as m;

/// The tmux worlds' exports (`screen-provider` exports every one of them).
pub mod tmux {
    wasmtime::component::bindgen!({
        path: "../wit/v0.9.0",
        world: "screen-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

/// The `acp-provider` world's exports (0.7.0's `acp-agent`, and `setup`).
pub mod acp {
    wasmtime::component::bindgen!({
        path: "../wit/v0.9.0",
        world: "acp-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

pub use acp::exports::lab::provider::acp_agent;
pub use tmux::exports::lab::provider::answer_rules;
pub use tmux::exports::lab::provider::base;
pub use tmux::exports::lab::provider::dialog_hooker;
pub use tmux::exports::lab::provider::sandbox;
pub use tmux::exports::lab::provider::screen_reader;
pub use tmux::exports::lab::provider::sessions;
pub use tmux::exports::lab::provider::setup;
pub use tmux::exports::lab::provider::usage;

pub const PACKAGE: &str = "lab:provider@0.9.0";

super::v0_4_0::sessions_conversions!(sessions);
super::v0_5_0::usage_conversions!(usage);

super::v0_3_0::acp_conversions!(acp_agent);

super::v0_6_0::sandbox_conversions!(sandbox);

/// A turn's tokens by model, as `turn-usage` said them.
pub fn turn_usage(list: Vec<acp_agent::ModelTokens>) -> Vec<(String, m::Tokens)> {
    list.into_iter()
        .map(|t| {
            let tokens =
                m::Tokens { input: t.input, output: t.output, cache_read: t.cache_read, cache_write: t.cache_write };
            (t.model, tokens)
        })
        .collect()
}

/// A prompt's facts, as `answer-rules.prompt-facts` said them.
pub fn prompt_facts(f: answer_rules::PromptFacts) -> m::PromptFacts {
    m::PromptFacts { subject: f.subject, allow_once: f.allow_once, refuse: f.refuse }
}

/// Where the agent keeps a login, as `setup.login` said it.
pub fn login_hints(h: setup::LoginHints) -> m::LoginHints {
    m::LoginHints { env: h.env, files: h.files, how: h.how }
}
