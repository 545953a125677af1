//! `lab audit`: the audit log printed ([`crate::edge::audit`]), and the entries of the
//! actions the command line takes itself (a token rotated, a host added or removed):
//! the one who runs them holds lab's token, so they are the token's holder's.

use crate::edge::audit::{self, Actor, Audit, Entry, Filter, Outcome};
use crate::store::paths::resolve_home;
use std::path::{Path, PathBuf};

pub fn run(
    home: Option<PathBuf>,
    run: Option<String>,
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let home = resolve_home(home)?;
    let filter = Filter::parse(run, from, to, limit, "--").map_err(|e| anyhow::anyhow!(e))?;
    let entries = Audit::new(&home).read(&filter)?;
    let mut out = String::new();
    for e in &entries {
        if json {
            out.push_str(&serde_json::to_string(e)?);
        } else {
            out.push_str(&line(e));
        }
        out.push('\n');
    }
    use std::io::Write;
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

/// One entry as a line of text: time, who, action, run, outcome (and why), detail.
pub fn line(e: &Entry) -> String {
    let who = match &e.actor {
        Actor::Device { device_id, device_name } => format!("{device_name} ({device_id})"),
        Actor::Other(s) => s.clone(),
    };
    let outcome = match (e.outcome, &e.reason) {
        (Outcome::Applied, _) => "applied".to_string(),
        (Outcome::Refused, Some(r)) => format!("REFUSED {r}"),
        (Outcome::Refused, None) => "REFUSED".to_string(),
    };
    let detail = match &e.detail {
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(m) if m.is_empty() => String::new(),
        d => format!(" {d}"),
    };
    let run = e.run_id.as_deref().unwrap_or("-");
    format!("{}  {who}  {}  {run}  {outcome}{detail}", e.t, e.action)
}

/// Log an action the command line took.
pub fn cli_action(home: &Path, action: &str, refused: Option<String>, detail: serde_json::Value) {
    Audit::new(home).append(&audit::entry(Actor::bearer(), action, None, detail, refused));
}

/// Log an action the command line took, by how it went.
pub fn cli_result<T>(home: &Path, action: &str, detail: serde_json::Value, result: &anyhow::Result<T>) {
    cli_action(home, action, result.as_ref().err().map(|e| format!("{e:#}")), detail);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_who_what_where_and_how_it_went() {
        let dev = Actor::Device { device_id: "d1".into(), device_name: "Phone".into() };
        let mut e = audit::entry(dev, "dialog.answer", Some("r-1".into()), serde_json::json!({"tool_id": "t"}), None);
        e.t = "T".into();
        assert_eq!(line(&e), r#"T  Phone (d1)  dialog.answer  r-1  applied {"tool_id":"t"}"#);
        let r =
            audit::entry(Actor::bearer(), "run.stop", None, serde_json::Value::Null, Some("run_ended: gone".into()));
        assert!(line(&r).ends_with("bearer  run.stop  -  REFUSED run_ended: gone"), "{}", line(&r));
    }
}
