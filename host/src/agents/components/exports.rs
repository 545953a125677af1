//! What a component exports, per WIT version: its [`Version`], the export indices found
//! when it was loaded ([`Indices`]), those exports loaded in an instance ([`Guests`]) and
//! what lab may ask of it ([`Capabilities`]).

use super::{
    v0_1_0 as v1, v0_2_0 as v2, v0_3_0 as v3, v0_4_0 as v4, v0_5_0 as v5, v0_6_0 as v6, v0_7_0 as v7, v0_8_0 as v8,
    v0_9_0 as v9,
};
use crate::agents::model as m;

/// The WIT package version a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V0_1_0,
    V0_2_0,
    V0_3_0,
    V0_4_0,
    V0_5_0,
    V0_6_0,
    V0_7_0,
    V0_8_0,
    V0_9_0,
}

impl Version {
    pub fn package(self) -> &'static str {
        match self {
            Version::V0_1_0 => v1::PACKAGE,
            Version::V0_2_0 => v2::PACKAGE,
            Version::V0_3_0 => v3::PACKAGE,
            Version::V0_4_0 => v4::PACKAGE,
            Version::V0_5_0 => v5::PACKAGE,
            Version::V0_6_0 => v6::PACKAGE,
            Version::V0_7_0 => v7::PACKAGE,
            Version::V0_8_0 => v8::PACKAGE,
            Version::V0_9_0 => v9::PACKAGE,
        }
    }
}

/// What a component exports, found out by trying each interface's generated
/// `GuestIndices` when it is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub version: Version,
    pub dialog_hooker: bool,
    pub screen_reader: bool,
    /// An ACP provider (0.3.0 `acp-agent`): it declares an agent the host speaks the
    /// Agent Client Protocol with, and exports nothing else.
    pub acp: bool,
    /// What its agent can do with an earlier conversation (0.4.0 `sessions`, asked
    /// once when loaded; nothing for older components and ACP providers).
    pub abilities: m::Abilities,
}

impl Capabilities {
    /// Whether it reads usage from transcripts (0.5.0 `usage`, every tmux world since).
    pub fn reads_usage(&self) -> bool {
        matches!(self.version, Version::V0_5_0 | Version::V0_6_0 | Version::V0_7_0 | Version::V0_8_0 | Version::V0_9_0)
            && !self.acp
    }
    /// Whether it says what its agent needs in a sandbox (0.6.0 `sandbox`, every tmux
    /// world since).
    pub fn says_sandbox_needs(&self) -> bool {
        matches!(self.version, Version::V0_6_0 | Version::V0_7_0 | Version::V0_8_0 | Version::V0_9_0) && !self.acp
    }
}

/// The export indices of one component, per version.
pub enum Indices {
    V1 {
        base: v1::base::GuestIndices,
        hooker: Option<v1::dialog_hooker::GuestIndices>,
    },
    V2 {
        base: v2::base::GuestIndices,
        hooker: Option<v2::dialog_hooker::GuestIndices>,
        screen: Option<v2::screen_reader::GuestIndices>,
    },
    V3 {
        base: v3::base::GuestIndices,
        hooker: Option<v3::dialog_hooker::GuestIndices>,
        screen: Option<v3::screen_reader::GuestIndices>,
    },
    V4 {
        base: v4::base::GuestIndices,
        hooker: Option<v4::dialog_hooker::GuestIndices>,
        screen: Option<v4::screen_reader::GuestIndices>,
        sessions: v4::sessions::GuestIndices,
    },
    Acp {
        agent: v3::acp_agent::GuestIndices,
    },
    Acp4 {
        agent: v4::acp_agent::GuestIndices,
    },
    V5 {
        base: v5::base::GuestIndices,
        hooker: Option<v5::dialog_hooker::GuestIndices>,
        screen: Option<v5::screen_reader::GuestIndices>,
        sessions: v5::sessions::GuestIndices,
        usage: v5::usage::GuestIndices,
    },
    Acp5 {
        agent: v5::acp_agent::GuestIndices,
    },
    V6 {
        base: v6::base::GuestIndices,
        hooker: Option<v6::dialog_hooker::GuestIndices>,
        screen: Option<v6::screen_reader::GuestIndices>,
        sessions: v6::sessions::GuestIndices,
        usage: v6::usage::GuestIndices,
        sandbox: v6::sandbox::GuestIndices,
    },
    Acp6 {
        agent: v6::acp_agent::GuestIndices,
    },
    V7 {
        base: v7::base::GuestIndices,
        hooker: Option<v7::dialog_hooker::GuestIndices>,
        screen: Option<v7::screen_reader::GuestIndices>,
        sessions: v7::sessions::GuestIndices,
        usage: v7::usage::GuestIndices,
        sandbox: v7::sandbox::GuestIndices,
    },
    Acp7 {
        agent: v7::acp_agent::GuestIndices,
    },
    V8 {
        base: v8::base::GuestIndices,
        hooker: Option<v8::dialog_hooker::GuestIndices>,
        screen: Option<v8::screen_reader::GuestIndices>,
        sessions: v8::sessions::GuestIndices,
        usage: v8::usage::GuestIndices,
        sandbox: v8::sandbox::GuestIndices,
        rules: Option<v8::answer_rules::GuestIndices>,
    },
    Acp8 {
        agent: v8::acp_agent::GuestIndices,
    },
    V9 {
        base: v9::base::GuestIndices,
        hooker: Option<v9::dialog_hooker::GuestIndices>,
        screen: Option<v9::screen_reader::GuestIndices>,
        sessions: v9::sessions::GuestIndices,
        usage: v9::usage::GuestIndices,
        sandbox: v9::sandbox::GuestIndices,
        rules: Option<v9::answer_rules::GuestIndices>,
        setup: Option<v9::setup::GuestIndices>,
    },
    Acp9 {
        agent: v9::acp_agent::GuestIndices,
        setup: Option<v9::setup::GuestIndices>,
    },
}

impl Indices {
    pub fn capabilities(&self) -> Capabilities {
        let none = m::Abilities::default();
        match self {
            Indices::V1 { hooker, .. } => Capabilities {
                version: Version::V0_1_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: false,
                acp: false,
                abilities: none,
            },
            Indices::V2 { hooker, screen, .. } => Capabilities {
                version: Version::V0_2_0,
                dialog_hooker: hooker.is_some(),
                // Answering a screen dialog needs dialog-hooker too.
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::V3 { hooker, screen, .. } => Capabilities {
                version: Version::V0_3_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::V4 { hooker, screen, .. } => Capabilities {
                version: Version::V0_4_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                // Asked once instantiated ([`ProviderHandle::ask_abilities`]).
                abilities: none,
            },
            Indices::Acp { .. } => Capabilities {
                version: Version::V0_3_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::Acp4 { .. } => Capabilities {
                version: Version::V0_4_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::V5 { hooker, screen, .. } => Capabilities {
                version: Version::V0_5_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::Acp5 { .. } => Capabilities {
                version: Version::V0_5_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::V6 { hooker, screen, .. } => Capabilities {
                version: Version::V0_6_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::Acp6 { .. } => Capabilities {
                version: Version::V0_6_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::V7 { hooker, screen, .. } => Capabilities {
                version: Version::V0_7_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::Acp7 { .. } => Capabilities {
                version: Version::V0_7_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::V8 { hooker, screen, .. } => Capabilities {
                version: Version::V0_8_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::Acp8 { .. } => Capabilities {
                version: Version::V0_8_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
            Indices::V9 { hooker, screen, .. } => Capabilities {
                version: Version::V0_9_0,
                dialog_hooker: hooker.is_some(),
                screen_reader: screen.is_some() && hooker.is_some(),
                acp: false,
                abilities: none,
            },
            Indices::Acp9 { .. } => Capabilities {
                version: Version::V0_9_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: none,
            },
        }
    }
}

/// The loaded exports of one instance.
pub(crate) enum Guests {
    V1 {
        base: v1::base::Guest,
        hooker: Option<v1::dialog_hooker::Guest>,
    },
    V2 {
        base: v2::base::Guest,
        hooker: Option<v2::dialog_hooker::Guest>,
        screen: Option<v2::screen_reader::Guest>,
    },
    V3 {
        base: v3::base::Guest,
        hooker: Option<v3::dialog_hooker::Guest>,
        screen: Option<v3::screen_reader::Guest>,
    },
    V4 {
        base: v4::base::Guest,
        hooker: Option<v4::dialog_hooker::Guest>,
        screen: Option<v4::screen_reader::Guest>,
        sessions: v4::sessions::Guest,
    },
    Acp {
        agent: v3::acp_agent::Guest,
    },
    Acp4 {
        agent: v4::acp_agent::Guest,
    },
    V5 {
        base: v5::base::Guest,
        hooker: Option<v5::dialog_hooker::Guest>,
        screen: Option<v5::screen_reader::Guest>,
        sessions: v5::sessions::Guest,
        usage: v5::usage::Guest,
    },
    Acp5 {
        agent: v5::acp_agent::Guest,
    },
    V6 {
        base: v6::base::Guest,
        hooker: Option<v6::dialog_hooker::Guest>,
        screen: Option<v6::screen_reader::Guest>,
        sessions: v6::sessions::Guest,
        usage: v6::usage::Guest,
        sandbox: v6::sandbox::Guest,
    },
    Acp6 {
        agent: v6::acp_agent::Guest,
    },
    V7 {
        base: v7::base::Guest,
        hooker: Option<v7::dialog_hooker::Guest>,
        screen: Option<v7::screen_reader::Guest>,
        sessions: v7::sessions::Guest,
        usage: v7::usage::Guest,
        sandbox: v7::sandbox::Guest,
    },
    Acp7 {
        agent: v7::acp_agent::Guest,
    },
    V8 {
        base: v8::base::Guest,
        hooker: Option<v8::dialog_hooker::Guest>,
        screen: Option<v8::screen_reader::Guest>,
        sessions: v8::sessions::Guest,
        usage: v8::usage::Guest,
        sandbox: v8::sandbox::Guest,
        rules: Option<v8::answer_rules::Guest>,
    },
    Acp8 {
        agent: v8::acp_agent::Guest,
    },
    V9 {
        base: v9::base::Guest,
        hooker: Option<v9::dialog_hooker::Guest>,
        screen: Option<v9::screen_reader::Guest>,
        sessions: v9::sessions::Guest,
        usage: v9::usage::Guest,
        sandbox: v9::sandbox::Guest,
        rules: Option<v9::answer_rules::Guest>,
        setup: Option<v9::setup::Guest>,
    },
    Acp9 {
        agent: v9::acp_agent::Guest,
        setup: Option<v9::setup::Guest>,
    },
}
