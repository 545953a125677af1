//! Which ACP agents lab can run, and how each starts: lab.toml's `[agents.<name>]`, and
//! the agents ACP provider components declare (WIT 0.3.0 `acp-agent`), with lab.toml's
//! `[providers.<name>]` (program, env, pass_env) applied over a declaration as over any
//! component. A name has one owner: a tmux provider component, else an ACP provider
//! component, else lab.toml's `[agents]`; what loses is reported.

use crate::agents::components::ComponentFacts;
use crate::agents::model::AcpLaunch;
use crate::store::config::{AgentConfig, Config};
use std::collections::BTreeMap;

/// An ACP agent lab can run.
#[derive(Debug, Clone)]
pub struct AcpAgent {
    /// How it starts (for a component: its declaration with lab.toml applied).
    pub config: AgentConfig,
    /// The component that declares it (None: lab.toml's `[agents.<name>]`).
    pub component: Option<ComponentFacts>,
}

impl AcpAgent {
    pub fn display_name(&self, name: &str) -> String {
        self.config.display_name.clone().unwrap_or_else(|| name.to_string())
    }

    pub fn description(&self) -> String {
        match &self.component {
            Some(c) if !c.info.description.is_empty() => c.info.description.clone(),
            _ => format!("an ACP agent ({})", self.config.acp[0].rsplit('/').next().unwrap_or_default()),
        }
    }

    /// Where it was defined, for logs and `lab providers`.
    pub fn origin(&self, name: &str) -> String {
        match &self.component {
            Some(c) => c.source.to_string(),
            None => format!("[agents.{name}] in lab.toml"),
        }
    }
}

/// A component's declaration as lab starts it: `[providers.<name>] program` replaces
/// the declared command, its `env` goes over the declared environment, its `pass_env`
/// applies.
pub fn from_component(config: &Config, facts: &ComponentFacts, launch: &AcpLaunch) -> AgentConfig {
    let name = &facts.info.name;
    let overrides = config.provider(name);
    let program = match &overrides.program {
        Some(p) => p.to_string_lossy().into_owned(),
        None => facts.info.default_program.clone(),
    };
    let mut env: BTreeMap<String, String> = launch.env.iter().cloned().collect();
    env.extend(overrides.env);
    AgentConfig {
        acp: std::iter::once(program).chain(launch.args.iter().cloned()).collect(),
        env,
        pass_env: overrides.pass_env,
        display_name: Some(facts.info.display_name.clone()).filter(|d| !d.trim().is_empty()),
        start_timeout_secs: launch.start_timeout_secs,
        permission_modes: Some(facts.info.permission_modes.clone()).filter(|m| !m.is_empty()),
    }
}

/// Every ACP agent by name, and a line for each definition that is not used.
/// `tmux_providers`: the names of the loaded tmux provider components.
pub fn resolve(
    config: &Config,
    tmux_providers: &[&str],
    declared: &[(ComponentFacts, AcpLaunch)],
) -> (BTreeMap<String, AcpAgent>, Vec<String>) {
    let mut agents = BTreeMap::new();
    let mut unused = Vec::new();
    for (facts, launch) in declared {
        let name = &facts.info.name;
        if tmux_providers.contains(&name.as_str()) {
            unused.push(format!("the ACP provider {} is not used: a tmux provider is named `{name}`", facts.source));
            continue;
        }
        agents.insert(
            name.clone(),
            AcpAgent { config: from_component(config, facts, launch), component: Some(facts.clone()) },
        );
    }
    for (name, agent) in &config.agents {
        if tmux_providers.contains(&name.as_str()) {
            unused.push(format!("lab.toml's [agents.{name}] is not used: a provider component has that name"));
        } else if let Some(a) = agents.get(name) {
            unused.push(format!(
                "lab.toml's [agents.{name}] is not used: the ACP provider {} declares `{name}` \
                 (set its program and env in [providers.{name}])",
                a.origin(name)
            ));
        } else {
            agents.insert(name.clone(), AcpAgent { config: agent.clone(), component: None });
        }
    }
    (agents, unused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::components::{Capabilities, Source, Version};
    use crate::agents::model::ProviderInfo;

    fn facts(name: &str, modes: &[&str]) -> ComponentFacts {
        ComponentFacts {
            source: Source::File(format!("/p/{name}.wasm").into()),
            info: ProviderInfo {
                name: name.into(),
                display_name: "Gem Agent".into(),
                version: "1.2.3".into(),
                description: "declared".into(),
                default_program: "gem".into(),
                permission_modes: modes.iter().map(|m| m.to_string()).collect(),
            },
            capabilities: Capabilities {
                version: Version::V0_3_0,
                dialog_hooker: false,
                screen_reader: false,
                acp: true,
                abilities: Default::default(),
            },
            dialog_hooker: false,
            wit_packages: vec!["lab:provider@0.3.0".into()],
            from_cache: false,
            digest: "0123456789abcdef".into(),
            prompt_kinds: Vec::new(),
        }
    }

    fn launch() -> AcpLaunch {
        AcpLaunch {
            args: vec!["--acp".into()],
            env: vec![("A".into(), "declared".into()), ("B".into(), "declared".into())],
            start_timeout_secs: Some(5),
        }
    }

    fn config(toml: &str) -> Config {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn a_declaration_starts_as_declared() {
        let (agents, unused) = resolve(&Config::default(), &[], &[(facts("gem", &["ask", "yolo"]), launch())]);
        assert!(unused.is_empty());
        let a = &agents["gem"];
        assert_eq!(a.config.acp, ["gem", "--acp"]);
        assert_eq!(a.config.env["A"], "declared");
        assert_eq!(a.config.pass_env, None);
        assert_eq!(a.config.display_name.as_deref(), Some("Gem Agent"));
        assert_eq!(a.config.permission_modes.as_deref(), Some(&["ask".to_string(), "yolo".to_string()][..]));
        assert_eq!(a.config.start_timeout(), std::time::Duration::from_secs(5));
        assert_eq!((a.description(), a.origin("gem")), ("declared".to_string(), "/p/gem.wasm".to_string()));
    }

    #[test]
    fn lab_toml_provider_settings_apply_over_a_declaration() {
        let c = config(
            "[providers.gem]\nprogram = \"/opt/gem/bin/gem\"\nenv = { B = \"mine\", C = \"mine\" }\npass_env = [\"GEM_*\"]\n",
        );
        let (agents, _) = resolve(&c, &[], &[(facts("gem", &[]), launch())]);
        let a = &agents["gem"].config;
        assert_eq!(a.acp, ["/opt/gem/bin/gem", "--acp"]);
        assert_eq!((a.env["A"].as_str(), a.env["B"].as_str(), a.env["C"].as_str()), ("declared", "mine", "mine"));
        assert_eq!(a.pass_env.as_deref(), Some(&["GEM_*".to_string()][..]));
        assert_eq!(a.permission_modes, None, "no declared modes: the ones the agent reports");
    }

    #[test]
    fn one_owner_per_name_and_the_losers_are_named() {
        let c = config(
            "[agents.gem]\nacp = [\"other\"]\n[agents.cc]\nacp = [\"x\"]\n[agents.solo]\nacp = [\"solo\", \"-v\"]\n",
        );
        let declared = [(facts("gem", &[]), launch()), (facts("cc", &[]), launch())];
        let (agents, unused) = resolve(&c, &["cc"], &declared);
        assert_eq!(agents.keys().collect::<Vec<_>>(), ["gem", "solo"]);
        assert!(agents["gem"].component.is_some(), "the component wins over lab.toml");
        assert_eq!(agents["solo"].config.acp, ["solo", "-v"]);
        assert_eq!(agents["solo"].origin("solo"), "[agents.solo] in lab.toml");
        assert!(agents["solo"].description().contains("(solo)"));
        assert_eq!(unused.len(), 3, "{unused:?}");
        assert!(unused.iter().any(|u| u.contains("/p/cc.wasm is not used: a tmux provider is named `cc`")));
        assert!(unused.iter().any(|u| u.contains("[agents.cc] is not used")));
        assert!(unused.iter().any(|u| u.contains("[agents.gem] is not used") && u.contains("[providers.gem]")));
    }
}
