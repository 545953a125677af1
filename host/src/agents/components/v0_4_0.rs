//! `lab:provider@0.4.0`: host bindings. 0.4.0 is 0.3.0 plus the `sessions` interface
//! (resume, fork, usage limits), exported by every tmux world; its `types` are 0.2.0's,
//! so the bindings map them onto [`super::v0_2_0`]'s (`with:`) and every conversion of
//! a tmux provider's values is that module's. Only `sessions`' own records convert here.

use crate::agents::model as m;

/// The tmux worlds' exports (`screen-provider` exports every one of them).
pub mod tmux {
    wasmtime::component::bindgen!({
        path: "../wit/v0.4.0",
        world: "screen-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

/// The `acp-provider` world's export (0.3.0's, under the new package version).
pub mod acp {
    wasmtime::component::bindgen!({
        path: "../wit/v0.4.0",
        world: "acp-provider",
        with: { "lab:provider/types": crate::agents::components::v0_2_0::w },
    });
}

pub use acp::exports::lab::provider::acp_agent;
pub use tmux::exports::lab::provider::base;
pub use tmux::exports::lab::provider::dialog_hooker;
pub use tmux::exports::lab::provider::screen_reader;
pub use tmux::exports::lab::provider::sessions;

pub const PACKAGE: &str = "lab:provider@0.4.0";

super::v0_3_0::acp_conversions!(acp_agent);

/// The conversions of `sessions`' own records, for a package's generated module
/// (0.4.0's here, 0.5.0's in [`super::v0_5_0`]).
macro_rules! sessions_conversions {
    ($sessions:ident) => {
        pub fn abilities(a: $sessions::SessionAbilities) -> crate::agents::model::Abilities {
            crate::agents::model::Abilities { resume: a.resume, fork: a.fork }
        }

        pub fn continuation(how: crate::agents::model::Continuation) -> $sessions::Continuation {
            match how {
                crate::agents::model::Continuation::Resume => $sessions::Continuation::Resume,
                crate::agents::model::Continuation::Fork => $sessions::Continuation::Fork,
            }
        }

        pub fn earlier_run(e: crate::agents::model::EarlierRun) -> $sessions::EarlierRun {
            $sessions::EarlierRun { session_id: e.session_id, transcript_path: e.transcript_path, workdir: e.workdir }
        }

        pub fn usage_limit(l: $sessions::LimitReached) -> crate::agents::model::UsageLimit {
            crate::agents::model::UsageLimit { resets_at: l.resets_at, text: l.text }
        }
    };
}
pub(crate) use sessions_conversions;

sessions_conversions!(sessions);

/// A transcript message as the component made it (for `usage-limit`).
pub fn message_out(msg: &m::Message) -> super::v0_2_0::w::Message {
    use super::v0_2_0::w;
    w::Message {
        role: match msg.role {
            m::Role::User => w::Role::User,
            m::Role::Assistant => w::Role::Assistant,
            m::Role::System => w::Role::System,
            m::Role::Tool => w::Role::Tool,
        },
        content: match &msg.content {
            m::Content::Text(t) => w::Content::Text(t.clone()),
            m::Content::Thinking(t) => w::Content::Thinking(t.clone()),
            m::Content::ToolUse(u) => w::Content::ToolUse(super::v0_2_0::tool_use_out(u)),
            m::Content::ToolResult(r) => {
                w::Content::ToolResult(w::ToolResult { id: r.id.clone(), text: r.text.clone(), is_error: r.is_error })
            }
            m::Content::Other { kind, text } => w::Content::Other((kind.clone(), text.clone())),
        },
        timestamp: msg.timestamp.clone(),
    }
}
