//! `lab completions bash|zsh|fish` and `lab man`: generated from the command line's
//! own definition, so they never fall behind a new subcommand or flag.

use clap::CommandFactory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut cmd = super::Cli::command();
    let mut out = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, "lab", &mut out);
    out
}

/// The man page, lab(1), in roff: every subcommand with its options in one page.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let cmd = super::Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    // One page for all: each subcommand's section after the main one.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        out.extend_from_slice(format!(".SH \"LAB {}\"\n", name.to_uppercase()).as_bytes());
        let full = sub.clone().bin_name(format!("lab {name}")).display_name(format!("lab-{name}"));
        let has_subcommands = full.get_subcommands().next().is_some();
        let man = clap_mangen::Man::new(full);
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        if has_subcommands {
            man.render_subcommands_section(&mut out)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_know_every_subcommand_in_each_shell() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(completions(shell)).unwrap();
            for sub in ["serve", "doctor", "service", "rules", "completions", "man", "hosts"] {
                assert!(text.contains(sub), "{shell:?} completions lack {sub}");
            }
        }
        let bash = String::from_utf8(completions(Shell::Bash)).unwrap();
        assert!(bash.contains("complete -F _lab"), "a bash completion function");
    }

    #[test]
    fn the_man_page_has_every_subcommand_and_its_options() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(page.starts_with(".ie") || page.contains(".TH lab 1"), "{}", &page[..200.min(page.len())]);
        for section in ["LAB SERVE", "LAB DOCTOR", "LAB SERVICE", "LAB RULES"] {
            assert!(page.contains(section), "no {section}");
        }
        assert!(page.contains("allowed\\-host"), "serve's options are in it");
    }
}
