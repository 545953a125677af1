//! The dialog mapper for ACP agents (pure): an agent's `session/request_permission` or
//! `elicitation/create` request → the spooled request lab keeps while it waits → the
//! run's [`Dialog`]; the operator's [`Answer`]s → the JSON-RPC result the agent gets.
//! The agent's own options are shown as they are; nothing here is agent-specific.

use crate::agents::model::{Answer, Dialog, DialogBody, DialogOption, Question};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// One request of the agent's that waits for the operator, as lab spools it. `n` is
/// lab's own number for it (the agent's JSON-RPC id may be any JSON value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    Permission {
        n: u64,
        tool_call_id: Option<String>,
        title: String,
        tool_kind: Option<String>,
        /// The command the call runs (`rawInput.command`), where the agent says it apart
        /// from its title: what the operator is asked to allow.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        options: Vec<PermissionOption>,
    },
    Elicitation {
        n: u64,
        tool_call_id: Option<String>,
        message: String,
        schema: Value,
    },
}

/// A command shown on a permission card is cut here (a line of shell, not a file).
const MAX_COMMAND: usize = 4096;

/// `text` cut to at most `max` bytes on a char boundary, marked when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", crate::util::text::head(text, max))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionOption {
    pub option_id: String,
    pub name: String,
    pub kind: String,
}

/// The dialog id of lab's request number `n` (before the spool's write time is added,
/// see [`crate::runs::live::spool::identify`]).
pub fn dialog_id(n: u64) -> String {
    format!("acp-{n}")
}

/// lab's request number in a dialog id made by [`dialog_id`] (and identified).
pub fn request_number(dialog_id: &str) -> Option<u64> {
    dialog_id.strip_prefix("acp-")?.split('~').next()?.parse().ok()
}

/// What answer rules need of a permission this module drew ([`Request::dialog`]): the
/// command (or, when the agent names none, its title) and the options by their ACP
/// kind — `allow_once` lets the call go ahead, `reject_once` refuses it (never the
/// `_always` ones, which would answer later calls too). Other prompts: none.
pub fn prompt_facts(dialog: &Dialog) -> Option<crate::agents::model::PromptFacts> {
    let DialogBody::Permission { summary, options, .. } = &dialog.body else {
        return None;
    };
    request_number(&dialog.id)?;
    let find = |kind: &str| options.iter().position(|o| o.description == kind).map(|i| i as u32);
    Some(crate::agents::model::PromptFacts {
        // A title that is a command in backticks (`` `ls -la` ``): the command.
        subject: Some(summary.strip_prefix('`').and_then(|s| s.strip_suffix('`')).unwrap_or(summary))
            .filter(|s| !s.is_empty() && !s.contains('`'))
            .map(str::to_string),
        allow_once: find("allow_once"),
        refuse: find("reject_once"),
    })
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Request {
    pub fn n(&self) -> u64 {
        match self {
            Request::Permission { n, .. } | Request::Elicitation { n, .. } => *n,
        }
    }

    /// `session/request_permission`'s params.
    pub fn permission(n: u64, params: &Value) -> Result<Request, String> {
        let call = params.get("toolCall").ok_or("no toolCall")?;
        let options = params
            .get("options")
            .and_then(Value::as_array)
            .ok_or("no options")?
            .iter()
            .map(|o| {
                Ok(PermissionOption {
                    option_id: text(o, "optionId").ok_or("an option without optionId")?,
                    name: text(o, "name").ok_or("an option without name")?,
                    kind: text(o, "kind").unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if options.is_empty() {
            return Err("no options".into());
        }
        let tool_call_id = text(call, "toolCallId");
        let title = text(call, "title").or_else(|| tool_call_id.clone()).unwrap_or_else(|| "a tool call".into());
        let command = call
            .pointer("/rawInput/command")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|c| !c.is_empty() && *c != title.trim())
            .map(|c| clip(c, MAX_COMMAND));
        Ok(Request::Permission { n, tool_call_id, title, tool_kind: text(call, "kind"), command, options })
    }

    /// `elicitation/create`'s params (form mode only: lab draws the form as questions).
    pub fn elicitation(n: u64, params: &Value) -> Result<Request, String> {
        let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
        if mode != "form" {
            return Err(format!("elicitation mode {mode:?} is not supported (only \"form\")"));
        }
        let schema = params.get("requestedSchema").cloned().ok_or("no requestedSchema")?;
        let req = Request::Elicitation {
            n,
            tool_call_id: text(params, "toolCallId"),
            message: text(params, "message").unwrap_or_default(),
            schema,
        };
        req.dialog()?;
        Ok(req)
    }

    /// The dialog the operator sees.
    pub fn dialog(&self) -> Result<Dialog, String> {
        let (call_id, tool_name, body) = match self {
            Request::Permission { tool_call_id, title, tool_kind, command, options, .. } => {
                let options = options
                    .iter()
                    .map(|o| DialogOption { label: o.name.clone(), description: o.kind.clone() })
                    .collect();
                let tool = tool_kind.clone().unwrap_or_else(|| "tool".into());
                // The command itself when the agent names it apart, its title then the why.
                let (summary, reason) = match command {
                    Some(c) => (c.clone(), Some(title.clone())),
                    None => (title.clone(), None),
                };
                let body =
                    DialogBody::Permission { tool: tool.clone(), summary, reason, options, feedback_option: None };
                (tool_call_id.clone(), tool, body)
            }
            Request::Elicitation { tool_call_id, message, schema, .. } => {
                let fields = fields(schema)?;
                let one = fields.len() == 1;
                let questions = fields
                    .iter()
                    .map(|f| Question {
                        header: f.title.clone(),
                        question: if one || f.description.is_empty() { message.clone() } else { f.description.clone() },
                        multi_select: f.multi,
                        options: f.options.iter().map(|o| o.shown.clone()).collect(),
                    })
                    .collect();
                (tool_call_id.clone(), "question".to_string(), DialogBody::Question(questions))
            }
        };
        Ok(Dialog { id: dialog_id(self.n()), call_id, tool_name, body, answerable: true, deep_link: None })
    }

    /// The result the agent gets for the operator's answers (`Err`: the answers do not
    /// fit the dialog, a bad request).
    pub fn result(&self, answers: &[Answer]) -> Result<Value, String> {
        match self {
            Request::Permission { options, .. } => {
                let [Answer::Option(i)] = answers else {
                    return Err("a permission takes one answer: {\"option\": N}".into());
                };
                let o = options.get(*i as usize).ok_or_else(|| format!("option {i} is not one of the dialog's"))?;
                Ok(json!({"outcome": {"outcome": "selected", "optionId": o.option_id}}))
            }
            Request::Elicitation { schema, .. } => {
                let fields = fields(schema)?;
                if answers.len() != fields.len() {
                    return Err(format!("{} answers for {} questions", answers.len(), fields.len()));
                }
                let mut content = Map::new();
                for (f, a) in fields.iter().zip(answers) {
                    let (key, value) = f.answer(a)?;
                    content.insert(key, value);
                }
                Ok(json!({"action": "accept", "content": content}))
            }
        }
    }

    /// The result when the run stops with this request still waiting.
    pub fn cancelled(&self) -> Value {
        match self {
            Request::Permission { .. } => json!({"outcome": {"outcome": "cancelled"}}),
            Request::Elicitation { .. } => json!({"action": "cancel"}),
        }
    }

    /// What the chat says of the answer.
    pub fn answered_text(&self, answers: &[Answer]) -> String {
        let dialog = self.dialog().ok();
        let label = |q: usize, i: u32| -> String {
            let d = dialog.as_ref();
            let opts = match d.map(|d| &d.body) {
                Some(DialogBody::Question(qs)) => qs.get(q).map(|q| q.options.clone()).unwrap_or_default(),
                Some(_) => d.map(|d| d.options().to_vec()).unwrap_or_default(),
                None => Vec::new(),
            };
            opts.get(i as usize).map(|o| o.label.clone()).unwrap_or_else(|| format!("option {i}"))
        };
        let parts: Vec<String> = answers
            .iter()
            .enumerate()
            .map(|(q, a)| match a {
                Answer::Option(i) => label(q, *i),
                Answer::Options(is) => is.iter().map(|i| label(q, *i)).collect::<Vec<_>>().join(", "),
                Answer::Other(t) | Answer::Feedback { text: t, .. } => format!("“{t}”"),
            })
            .collect();
        format!("Answered: {}", parts.join("; "))
    }
}

/// One field of an elicitation form, as a question.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    key: String,
    title: String,
    description: String,
    /// An array of choices.
    multi: bool,
    options: Vec<Choice>,
    /// The sibling `<key>_custom` free-text field an "other" answer goes to.
    custom: Option<String>,
    ty: String,
}

#[derive(Debug, Clone, PartialEq)]
struct Choice {
    value: Value,
    shown: DialogOption,
}

fn choices(v: &Value) -> Vec<Choice> {
    let titled = v.get("oneOf").or_else(|| v.get("anyOf")).and_then(Value::as_array);
    if let Some(list) = titled {
        return list
            .iter()
            .filter_map(|c| {
                let value = c.get("const")?.clone();
                let label = text(c, "title").unwrap_or_else(|| plain(&value));
                Some(Choice {
                    shown: DialogOption { label, description: text(c, "description").unwrap_or_default() },
                    value,
                })
            })
            .collect();
    }
    v.get("enum")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|value| Choice {
                    shown: DialogOption { label: plain(value), description: String::new() },
                    value: value.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn plain(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

/// Keys in natural order (`question_2` before `question_10`).
fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut num: Option<u64> = None;
    for c in s.chars() {
        match (c.to_digit(10), num) {
            (Some(d), Some(n)) => num = Some(n.saturating_mul(10).saturating_add(d as u64)),
            (Some(d), None) => num = Some(d as u64),
            (None, Some(n)) => {
                out.push((std::mem::take(&mut word), n));
                num = None;
                word.push(c);
            }
            (None, None) => word.push(c),
        }
    }
    out.push((word, num.unwrap_or(0)));
    out
}

fn fields(schema: &Value) -> Result<Vec<Field>, String> {
    let props = schema.get("properties").and_then(Value::as_object).ok_or("the form has no properties")?;
    let mut keys: Vec<&String> = props.keys().collect();
    keys.sort_by_key(|k| natural_key(k));
    let mut out = Vec::new();
    for key in keys {
        if let Some(base) = key.strip_suffix("_custom") {
            if props.contains_key(base) {
                continue;
            }
        }
        let p = &props[key];
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("string").to_string();
        let (multi, mut options) = match ty.as_str() {
            "array" => (true, p.get("items").map(choices).unwrap_or_default()),
            "boolean" => (
                false,
                vec![
                    Choice {
                        value: json!(true),
                        shown: DialogOption { label: "Yes".into(), description: String::new() },
                    },
                    Choice {
                        value: json!(false),
                        shown: DialogOption { label: "No".into(), description: String::new() },
                    },
                ],
            ),
            _ => (false, choices(p)),
        };
        options.truncate(64);
        let custom = Some(format!("{key}_custom")).filter(|c| props.contains_key(c));
        out.push(Field {
            key: key.clone(),
            title: text(p, "title").unwrap_or_else(|| key.clone()),
            description: text(p, "description").unwrap_or_default(),
            multi,
            options,
            custom,
            ty,
        });
    }
    if out.is_empty() {
        return Err("the form has no fields".into());
    }
    if out.len() > 16 {
        return Err(format!("the form has {} fields; lab shows at most 16", out.len()));
    }
    Ok(out)
}

impl Field {
    fn pick(&self, i: u32) -> Result<Value, String> {
        self.options
            .get(i as usize)
            .map(|c| c.value.clone())
            .ok_or_else(|| format!("option {i} is not one of {:?}'s", self.title))
    }

    fn answer(&self, a: &Answer) -> Result<(String, Value), String> {
        match a {
            Answer::Option(i) if !self.multi => Ok((self.key.clone(), self.pick(*i)?)),
            Answer::Options(is) if self.multi => {
                Ok((self.key.clone(), Value::Array(is.iter().map(|i| self.pick(*i)).collect::<Result<_, _>>()?)))
            }
            Answer::Option(_) => Err(format!("{:?} takes several options: {{\"options\": [..]}}", self.title)),
            Answer::Options(_) => Err(format!("{:?} takes one option: {{\"option\": N}}", self.title)),
            Answer::Other(t) => match (&self.custom, self.ty.as_str()) {
                (Some(c), _) => Ok((c.clone(), json!(t))),
                (None, "string") if self.options.is_empty() => Ok((self.key.clone(), json!(t))),
                (None, "number") => t
                    .trim()
                    .parse::<f64>()
                    .map(|x| (self.key.clone(), json!(x)))
                    .map_err(|_| format!("{:?} takes a number", self.title)),
                (None, "integer") => t
                    .trim()
                    .parse::<i64>()
                    .map(|x| (self.key.clone(), json!(x)))
                    .map_err(|_| format!("{:?} takes a whole number", self.title)),
                _ => Err(format!("{:?} takes one of its options, not text", self.title)),
            },
            Answer::Feedback { .. } => Err("this dialog takes no feedback".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permission() -> Request {
        Request::permission(
            7,
            &json!({"sessionId": "s", "toolCall": {"toolCallId": "toolu_1", "title": "`rm -rf build`", "kind": "execute"},
                "options": [{"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
                            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}]}),
        )
        .unwrap()
    }

    #[test]
    fn rules_learn_the_command_and_the_once_options_from_the_protocol() {
        let facts = prompt_facts(&permission().dialog().unwrap()).unwrap();
        assert_eq!(facts.subject.as_deref(), Some("rm -rf build"));
        assert_eq!((facts.allow_once, facts.refuse), (Some(1), Some(2)), "never allow_always");
        let only_always = Request::permission(
            2,
            &json!({"toolCall": {"toolCallId": "t", "title": "Edit a.rs", "kind": "edit", "rawInput": {"command": "x"}},
                "options": [{"optionId": "a", "name": "Always", "kind": "allow_always"}]}),
        )
        .unwrap();
        let facts = prompt_facts(&only_always.dialog().unwrap()).unwrap();
        assert_eq!((facts.subject.as_deref(), facts.allow_once, facts.refuse), (Some("x"), None, None));
        assert_eq!(prompt_facts(&question().dialog().unwrap()), None, "a form is no permission");
    }

    /// A question form as an ACP adapter sends it (shared/notes/acp-observed.md).
    fn question() -> Request {
        Request::elicitation(
            3,
            &json!({"mode": "form", "sessionId": "s", "toolCallId": "toolu_q", "message": "Which database?",
                "requestedSchema": {"type": "object", "properties": {
                    "question_0": {"type": "string", "title": "Database", "oneOf": [
                        {"const": "Postgres", "title": "Postgres", "description": "relational"},
                        {"const": "SQLite", "title": "SQLite", "description": "a file"}]},
                    "question_0_custom": {"type": "string", "title": "Other"}}}}),
        )
        .unwrap()
    }

    #[test]
    fn a_permission_is_a_permission_dialog_with_the_agent_s_options() {
        let d = permission().dialog().unwrap();
        assert_eq!((d.id.as_str(), d.call_id.as_deref(), d.kind()), ("acp-7", Some("toolu_1"), "permission"));
        let labels: Vec<_> = d.options().iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Always Allow", "Allow", "Reject"]);
        assert_eq!(request_number("acp-7~1a2b"), Some(7));
        assert_eq!(request_number("toolu_1"), None);
        let r = permission().result(&[Answer::Option(1)]).unwrap();
        assert_eq!(r, json!({"outcome": {"outcome": "selected", "optionId": "allow"}}));
        assert!(permission().result(&[Answer::Option(3)]).unwrap_err().contains("option 3"));
        assert!(permission().result(&[Answer::Other("x".into())]).is_err());
        assert!(permission().result(&[]).is_err());
        assert_eq!(permission().cancelled(), json!({"outcome": {"outcome": "cancelled"}}));
        assert_eq!(permission().answered_text(&[Answer::Option(2)]), "Answered: Reject");
    }

    #[test]
    fn a_form_is_a_question_and_other_goes_to_its_custom_field() {
        let q = question();
        let d = q.dialog().unwrap();
        assert_eq!(d.kind(), "question");
        let qs = d.questions();
        assert_eq!(qs.len(), 1, "the _custom field is the question's Other, not a question");
        assert_eq!((qs[0].header.as_str(), qs[0].question.as_str()), ("Database", "Which database?"));
        assert_eq!(qs[0].options[1].label, "SQLite");
        assert_eq!(
            q.result(&[Answer::Option(1)]).unwrap(),
            json!({"action": "accept", "content": {"question_0": "SQLite"}})
        );
        assert_eq!(
            q.result(&[Answer::Other("DuckDB".into())]).unwrap(),
            json!({"action": "accept", "content": {"question_0_custom": "DuckDB"}})
        );
        assert!(q.result(&[Answer::Options(vec![0])]).is_err());
        assert!(q.result(&[Answer::Option(0), Answer::Option(0)]).is_err());
        assert_eq!(q.cancelled(), json!({"action": "cancel"}));
    }

    #[test]
    fn forms_with_several_fields_keep_their_order_and_types() {
        let props: Map<String, Value> = (0..12)
            .map(|i| (format!("question_{i}"), json!({"type": "string", "title": format!("Q{i}"), "enum": ["a", "b"]})))
            .chain([
                ("tags".to_string(), json!({"type": "array", "title": "Tags", "items": {"enum": ["x", "y", "z"]}})),
                ("ok".to_string(), json!({"type": "boolean", "title": "OK?"})),
                ("n".to_string(), json!({"type": "integer", "title": "How many"})),
            ])
            .collect();
        let r = Request::elicitation(1, &json!({"message": "m", "requestedSchema": {"properties": props}})).unwrap();
        let d = r.dialog().unwrap();
        let headers: Vec<_> = d.questions().iter().map(|q| q.header.as_str()).collect();
        assert_eq!(&headers[..3], ["How many", "OK?", "Q0"]);
        assert_eq!(headers[4], "Q2", "natural order: question_2 before question_10");
        assert!(d.questions().iter().find(|q| q.header == "Tags").unwrap().multi_select);
        let mut answers = vec![Answer::Other("4".into()), Answer::Option(1)];
        answers.extend((0..12).map(|_| Answer::Option(0)));
        answers.push(Answer::Options(vec![0, 2]));
        let v = r.result(&answers).unwrap();
        assert_eq!(
            (&v["content"]["n"], &v["content"]["ok"], &v["content"]["tags"]),
            (&json!(4), &json!(false), &json!(["x", "z"]))
        );
        answers[0] = Answer::Other("four".into());
        assert!(r.result(&answers).unwrap_err().contains("whole number"));
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        assert!(Request::permission(1, &json!({})).unwrap_err().contains("toolCall"));
        assert!(Request::permission(1, &json!({"toolCall": {}, "options": []})).unwrap_err().contains("no options"));
        assert!(Request::permission(1, &json!({"toolCall": {}, "options": [{"name": "x"}]})).is_err());
        assert!(Request::elicitation(1, &json!({"mode": "url", "url": "https://x"})).unwrap_err().contains("url"));
        assert!(Request::elicitation(1, &json!({"requestedSchema": {"properties": {}}}))
            .unwrap_err()
            .contains("no fields"));
    }

    #[test]
    fn the_spool_round_trips() {
        for r in [permission(), question()] {
            let bytes = serde_json::to_vec(&r).unwrap();
            assert_eq!(serde_json::from_slice::<Request>(&bytes).unwrap(), r);
        }
    }

    /// A permission whose call names its command apart from its title (the agent's
    /// description): the card shows the command, the title as the reason; a spool
    /// written before this field reads as before.
    #[test]
    fn a_command_named_apart_from_the_title_is_what_the_card_shows() {
        let p = json!({"sessionId": "s", "toolCall": {"toolCallId": "t1", "title": "Write a marker file", "kind": "execute",
            "rawInput": {"command": "echo x > f.txt", "commands": ["echo x > f.txt"]}},
            "options": [{"optionId": "a", "name": "Allow once", "kind": "allow_once"}]});
        let d = Request::permission(1, &p).unwrap().dialog().unwrap();
        match d.body {
            DialogBody::Permission { summary, reason, .. } => {
                assert_eq!((summary.as_str(), reason.as_deref()), ("echo x > f.txt", Some("Write a marker file")));
            }
            other => panic!("{other:?}"),
        }
        let same = json!({"sessionId": "s", "toolCall": {"toolCallId": "t2", "title": "ls", "rawInput": {"command": "ls"}},
            "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]});
        let r = Request::permission(2, &same).unwrap();
        assert!(matches!(&r, Request::Permission { command: None, .. }), "{r:?}");
        let long = "x".repeat(MAX_COMMAND + 10);
        let p = json!({"toolCall": {"toolCallId": "t3", "title": "t", "rawInput": {"command": long}},
            "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]});
        match Request::permission(3, &p).unwrap() {
            Request::Permission { command: Some(c), .. } => assert!(c.len() <= MAX_COMMAND + 3 && c.ends_with('…')),
            other => panic!("{other:?}"),
        }
        let old = r#"{"kind":"permission","n":4,"tool_call_id":"t4","title":"ls","tool_kind":"execute","options":[]}"#;
        assert!(matches!(serde_json::from_str::<Request>(old).unwrap(), Request::Permission { command: None, .. }));
    }
}
