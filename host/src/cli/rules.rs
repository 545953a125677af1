//! `lab rules list|add|remove|test`: the answer rules from the command line. With a
//! `lab serve` running for the home, every change goes through it (its rule set is the
//! one owner; the change takes effect for the next prompt, audited as the API's are);
//! with none, `rules.toml` is changed in place (audited as a command's).

use super::local_client::control;
use crate::rules::book::Book;
use crate::rules::evaluate::{evaluate, Facts};
use crate::rules::rule::{Action, Match, Rule};
use crate::store::paths::{resolve_home, Home};
use anyhow::anyhow;
use axum::http::Method;
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum RulesAction {
    /// Every rule, lab.toml's first, and how many prompts each answered today.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Add a rule: what it says (--allow, --deny with --message, --ask) and which
    /// prompts it matches (every option given must match).
    Add {
        /// Its name, as cards and the audit log show it.
        name: String,
        #[arg(long, group = "what")]
        allow: bool,
        #[arg(long, group = "what")]
        deny: bool,
        #[arg(long, group = "what")]
        ask: bool,
        /// What a deny tells the agent.
        #[arg(long)]
        message: Option<String>,
        #[arg(long)]
        provider: Option<String>,
        /// The tool as the provider names it (Bash, Edit, exec_command, execute).
        #[arg(long)]
        tool: Option<String>,
        /// A prefix of the command, path or URL (ending at a word or path boundary), or
        /// a glob with `*` and `?`.
        #[arg(long)]
        pattern: Option<String>,
        /// The run's folder or repository is this folder or inside it.
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// The machine (`local` for this one).
        #[arg(long)]
        host: Option<String>,
        /// A prompt kind (permission when none is given): permission, question, plan, generic.
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Show what it would answer, answer nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove a rule by its id.
    Remove { id: String },
    /// Which rule would answer a prompt with these facts.
    Test {
        #[arg(long)]
        provider: String,
        #[arg(long)]
        tool: String,
        /// The command, path or URL.
        #[arg(long)]
        subject: Option<String>,
        #[arg(long)]
        workdir: Option<PathBuf>,
        #[arg(long)]
        host: Option<String>,
        #[arg(long, default_value = "permission")]
        kind: String,
    },
}

pub fn run(home: Option<PathBuf>, action: RulesAction) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let serve = Serve::of(&home)?;
    match action {
        RulesAction::List { json } => {
            let rules: Vec<Value> = match &serve {
                Some(s) => s.call(Method::GET, "/rules", Value::Null)?,
                None => book(&home)?.rules().iter().map(|r| serde_json::to_value(r).unwrap_or_default()).collect(),
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&rules)?);
            } else {
                print!("{}", table(&rules));
            }
        }
        RulesAction::Add {
            name,
            allow,
            deny,
            ask,
            message,
            provider,
            tool,
            pattern,
            workdir,
            host,
            kinds,
            dry_run,
        } => {
            let action = match (allow, deny, ask) {
                (true, _, _) => Action::Allow,
                (_, true, _) => Action::Deny,
                (_, _, true) => Action::Ask,
                _ => return Err(anyhow!("say what the rule does: --allow, --deny or --ask")),
            };
            let workdir = workdir.map(absolute).transpose()?;
            let rule = Rule {
                id: String::new(),
                name,
                action,
                message,
                matches: Match { provider, tool, kinds: (!kinds.is_empty()).then_some(kinds), pattern, workdir, host },
                dry_run,
                shared: false,
            };
            let kept: Value = match &serve {
                Some(s) => s.call(Method::POST, "/rules", serde_json::to_value(&rule)?)?,
                None => {
                    let detail = json!({"name": rule.name, "via": "lab rules add"});
                    let added = book(&home)?.add(rule).map_err(|e| anyhow!("{e}"));
                    crate::cli::audit::cli_result(&home.root, "rule.add", detail, &added);
                    serde_json::to_value(added?)?
                }
            };
            println!("{}", kept["id"].as_str().unwrap_or_default());
        }
        RulesAction::Remove { id } => {
            match &serve {
                Some(s) => {
                    let _: Value = s.call(Method::DELETE, &format!("/rules/{id}"), json!({}))?;
                }
                None => {
                    let detail = json!({"rule": id, "via": "lab rules remove"});
                    let removed = book(&home)?.remove(&id).map_err(|e| anyhow!("{e} ({id})"));
                    crate::cli::audit::cli_result(&home.root, "rule.remove", detail, &removed);
                    removed?;
                }
            }
            eprintln!("lab: rule {id} removed");
        }
        RulesAction::Test { provider, tool, subject, workdir, host, kind } => {
            let workdir = workdir.map(absolute).transpose()?;
            let rules = book(&home)?.rules();
            let f = Facts::asked(&provider, &kind, &tool, subject.as_deref(), workdir.as_deref(), host.as_deref());
            let v = evaluate(&rules, &f);
            match v.rule {
                Some(r) => println!("{}: rule {} ({})", r.action.name(), r.id, r.name),
                None => println!("ask: no rule answers it (the operator does)"),
            }
            if let Some(r) = v.would {
                println!("dry run: rule {} ({}) would {}", r.id, r.name, r.action.name());
            }
        }
    }
    Ok(())
}

/// The rule set as this home's files hold it (lab.toml's shared rules, `rules.toml`).
fn book(home: &Home) -> anyhow::Result<Book> {
    let config = crate::store::config::Config::load(&home.config_file())?;
    Book::open(home, &config.rules).map_err(|e| anyhow!(e))
}

fn absolute(p: PathBuf) -> anyhow::Result<String> {
    let p = if p.is_relative() { std::env::current_dir()?.join(p) } else { p };
    Ok(p.display().to_string())
}

/// The running `lab serve` of a home, reached through its control socket.
struct Serve {
    home: Home,
    token: String,
    rt: tokio::runtime::Runtime,
}

impl Serve {
    /// The serve of `home`, if one answers on its control socket now.
    fn of(home: &Home) -> anyhow::Result<Option<Serve>> {
        if std::os::unix::net::UnixStream::connect(home.control_socket()).is_err() {
            return Ok(None);
        }
        let token = crate::edge::token::read_token(&crate::edge::token::token_path(&home.root))?
            .ok_or_else(|| anyhow!("this lab has no token yet"))?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Some(Serve { home: home.clone(), token, rt }))
    }

    fn call<T: serde::de::DeserializeOwned>(&self, method: Method, path: &str, body: Value) -> anyhow::Result<T> {
        self.rt.block_on(control(&self.home, &self.token, method, path, body))
    }
}

/// `ID  ACTION  NAME  MATCH  TODAY`, one rule a line.
fn table(rules: &[Value]) -> String {
    let mut out = format!("{:<16} {:<6} {:<36} {:<7} MATCH\n", "ID", "ACTION", "NAME", "TODAY");
    for r in rules {
        let mut action = r["action"].as_str().unwrap_or_default().to_string();
        if r["dry_run"] == true {
            action += "?";
        }
        let m = r["match"].as_object().map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect::<Vec<_>>()
                .join(" ")
        });
        let today = r["answered_today"].as_u64().map_or("-".to_string(), |n| n.to_string());
        let name: String = r["name"].as_str().unwrap_or_default().chars().take(36).collect();
        out += &format!(
            "{:<16} {:<6} {:<36} {:<7} {}\n",
            r["id"].as_str().unwrap_or_default(),
            action,
            name,
            today,
            m.unwrap_or_default()
        );
    }
    out
}
