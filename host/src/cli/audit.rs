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
/// Every field is printed escaped ([`shown`]): what a caller put in an entry (a field
/// name in a refusal's reason, a device's name) can neither start a line of its own
/// nor reach the terminal as a control sequence.
pub fn line(e: &Entry) -> String {
    let who = match &e.actor {
        Actor::Device { device_id, device_name } => format!("{} ({})", shown(device_name), shown(device_id)),
        Actor::Other(s) => shown(s),
    };
    let outcome = match (e.outcome, &e.reason) {
        (Outcome::Applied, _) => "applied".to_string(),
        (Outcome::Refused, Some(r)) => format!("REFUSED {}", shown(r)),
        (Outcome::Refused, None) => "REFUSED".to_string(),
    };
    let detail = match &e.detail {
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(m) if m.is_empty() => String::new(),
        // JSON escapes what is below a space and quotes; the rest of what does not print
        // is escaped here.
        d => format!(" {}", unprintable(&d.to_string(), false)),
    };
    let run = e.run_id.as_deref().map_or("-".to_string(), shown);
    format!("{}  {who}  {}  {run}  {outcome}{detail}", shown(&e.t), shown(&e.action))
}

/// `s` with what does not print escaped (a control character as `\n`, `\t`, `\r` or
/// `\u{1b}`; the invisible formatting ones too: bidi overrides, zero widths, line
/// separators), and a backslash as `\\` (so an escape is never forged).
pub fn shown(s: &str) -> String {
    unprintable(s, true)
}

fn unprintable(s: &str, backslash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' if backslash => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Characters that change how text reads without being seen.
fn invisible(c: char) -> bool {
    matches!(c as u32, 0xad | 0x061c | 0x180e | 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x206f | 0xfeff | 0xfff9..=0xfffb)
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

    #[test]
    fn every_field_is_printed_escaped() {
        let forged = "x`\n2026-12-07T10:00:00.000Z  Phone (d-1)  run.stop  r-1  applied\x1b[2J\u{202e}\\n";
        let mut e = audit::entry(
            Actor::Other("nobody".into()),
            "device.login",
            None,
            serde_json::json!({"name": "a\u{202e}b\x1b"}),
            Some(format!("bad_request: unknown field `{forged}`")),
        );
        e.t = "T".into();
        let l = line(&e);
        assert_eq!(l.lines().count(), 1, "{l}");
        assert!(!l.chars().any(|c| c.is_control() || c == '\u{202e}'), "{l:?}");
        assert!(
            l.contains("`x`\\n2026-12-07T10:00:00.000Z  Phone (d-1)  run.stop  r-1  applied\\u{1b}[2J\\u{202e}\\\\n`"),
            "{l}"
        );
        assert!(l.ends_with(r#"{"name":"a\u{202e}b\u001b"}"#), "{l}");
        let dev = Actor::Device { device_id: "d\n1".into(), device_name: "Ph\tone".into() };
        let mut e = audit::entry(dev, "run.stop", Some("r\x07".into()), serde_json::Value::Null, None);
        e.t = "T".into();
        assert_eq!(line(&e), r"T  Ph\tone (d\n1)  run.stop  r\u{7}  applied");
    }
}
