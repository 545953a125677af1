//! The podman jail: a throw-away container of the image the operator names (lab.toml
//! `[sandbox] image`), with no network but its own loopback (where the bridge to the
//! proxy listens), the [`Plan`]'s paths bound at their own paths, the pane's terminal
//! passed through, and the agent's environment named variable by variable (podman
//! copies each value from its own). Host-specific settings (a runtime, lower ulimits)
//! belong in the operator's `containers.conf`.

use super::{Jail, Plan};

pub struct Podman;

/// The variables podman is told to pass into the container: every one `lab
/// agent-exec` sets for the agent.
pub fn env_args(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names.into_iter().flat_map(|n| ["--env".to_string(), n]).collect()
}

impl Jail for Podman {
    fn argv(&self, plan: &Plan, workdir: &str, inner: &[String], env: &[String]) -> Result<Vec<String>, String> {
        let image = plan
            .image
            .as_deref()
            .filter(|i| !i.is_empty() && !i.starts_with('-'))
            .ok_or("a podman sandbox needs an image: name it in lab.toml as [sandbox] image = \"…\"")?;
        let mut a: Vec<String> =
            [&plan.program, "run", "--rm", "-i", "--network", "none", "--init"].iter().map(|s| s.to_string()).collect();
        // A terminal for an agent in a pane; none for one spoken to over its stdio (an
        // ACP agent: a terminal would turn its lines' ends into CR LF).
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            a.insert(4, "-t".into());
        }
        // The run's home: the jail's own, but for the state bound into it.
        a.extend(["--mount".into(), format!("type=tmpfs,destination={}", plan.home)]);
        let mut vol = |src: &str, ro: bool| {
            if std::path::Path::new(src).exists() {
                a.push("--volume".into());
                a.push(format!("{src}:{src}{}", if ro { ":ro" } else { "" }));
            }
        };
        for r in plan.readable.iter().chain([&plan.lab_exe]) {
            vol(r, true);
        }
        for w in &plan.writable {
            vol(w, false);
        }
        for b in plan.binds.iter().filter(|b| std::path::Path::new(&b.from).exists()) {
            a.push("--volume".into());
            a.push(format!("{}:{}{}", b.from, b.at, if b.write { "" } else { ":ro" }));
        }
        // lab's own paths inside a volume: an empty tmpfs over each (podman mounts a
        // parent before what is inside it, so the run's own binds come back on top).
        for k in &plan.masked {
            a.extend(["--mount".into(), format!("type=tmpfs,destination={k}")]);
        }
        a.extend(["--workdir".into(), workdir.to_string()]);
        // The agent's variables as named (podman copies each value from its own).
        a.extend(env_args(env.iter().filter(|k| *k != "PATH" && *k != "HOSTNAME").cloned()));
        a.push(image.to_string());
        a.extend(inner.iter().cloned());
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_podman_jail_needs_an_image_and_has_no_network() {
        let mut plan = super::super::bwrap::tests::plan();
        plan.kind = super::super::Kind::Podman;
        plan.program = "/usr/bin/podman".into();
        assert!(Podman.argv(&plan, "/w", &[], &[]).unwrap_err().contains("[sandbox] image"));
        plan.image = Some("localhost/agent:1".into());
        let inner = vec!["/usr/local/bin/lab".to_string(), "agent-exec".into()];
        let a = Podman.argv(&plan, "/w", &inner, &["HOME".into(), "PATH".into()]).unwrap();
        assert_eq!(&a[..3], ["/usr/bin/podman", "run", "--rm"]);
        assert!(a.windows(2).any(|w| w == ["--network", "none"]));
        assert!(a.windows(2).any(|w| w == ["--workdir", "/w"]));
        assert!(
            a.windows(2).any(|w| w == ["--env", "HOME"]) && !a.iter().any(|x| x == "PATH"),
            "the agent's variables: {a:?}"
        );
        let img = a.iter().position(|x| x == "localhost/agent:1").unwrap();
        assert_eq!(&a[img + 1..], &inner[..]);
        plan.image = Some("--privileged".into());
        assert!(Podman.argv(&plan, "/w", &[], &[]).is_err(), "an image is never a flag");
    }
}
