//! The built-in demo conversation (`messages-standin --demo`, [`Script::demo`]): a short,
//! scripted exchange that shows every dialog card lab has, for `scripts/serve --demo`.
//!
//! Whatever the operator types as the first prompt, the "agent":
//!
//! 1. answers with a short text and an `AskUserQuestion` (one question, single select,
//!    three options);
//! 2. after the answer, a multi-select `AskUserQuestion` (four options);
//! 3. after that, an `ExitPlanMode` with a short markdown plan built from the answers (the
//!    run should be in permission mode `plan`: that is where Claude Code shows its
//!    "Exit plan mode?" prompt);
//! 4. then a closing text that quotes the operator's answers.
//!
//! The reply is a pure function of the request ([`reply`]): the step is read from the
//! conversation the request carries, not from a counter, so any number of runs can go
//! through the demo at once, and a repeated request gets the same answer. Robustness
//! rules: a side request (no `tools`: title generation, …) never gets a tool call (the
//! server answers those with [`Script::side_reply`] before this is asked); a step's tool
//! is only called when the request offers it; a request the demo does not expect (a
//! result of some other tool, a message after the demo ended) gets a harmless text.

use crate::{last_user_blocks, tool_result_text, Reply, Script, ToolUseReply};
use serde_json::{json, Value};

/// The single-select question (step 1); also how its tool call is recognised later.
pub const QUESTION_LANGUAGE: &str = "Which language should the demo project use?";
/// The multi-select question (step 2).
pub const QUESTION_EXTRAS: &str = "Which extras should it have?";
/// The first line of the plan (step 3).
pub const PLAN_TITLE: &str = "# Demo plan";
/// The title the stand-in gives side requests (Claude Code's session-title request).
pub const SIDE_REPLY: &str = "lab demo";

const LANGUAGES: [(&str, &str); 3] = [
    ("Rust", "Fast, memory-safe; what lab is written in"),
    ("Python", "Quick to write, batteries included"),
    ("TypeScript", "JavaScript with types"),
];
const EXTRAS: [(&str, &str); 4] = [
    ("Tests", "A unit test for the greeting"),
    ("CI", "A workflow that runs the tests"),
    ("Docs", "A README with usage"),
    ("Logging", "Structured logs"),
];

impl Script {
    /// The built-in demo script: no scripted turns; every main request is answered by
    /// the demo conversation ([`reply`]).
    pub fn demo() -> Script {
        Script { builtin: Some(crate::Builtin::Demo), side_reply: SIDE_REPLY.to_string(), ..Script::default() }
    }
}

/// The demo's steps, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Language,
    Extras,
    Plan,
}

const STEPS: [Step; 3] = [Step::Language, Step::Extras, Step::Plan];

impl Step {
    fn tool(self) -> &'static str {
        match self {
            Step::Language | Step::Extras => "AskUserQuestion",
            Step::Plan => "ExitPlanMode",
        }
    }

    /// Whether `block` (an assistant `tool_use`) is this step's tool call.
    fn is_call(self, block: &Value) -> bool {
        if block.get("type").and_then(Value::as_str) != Some("tool_use")
            || block.get("name").and_then(Value::as_str) != Some(self.tool())
        {
            return false;
        }
        let input = block.get("input").unwrap_or(&Value::Null);
        match self {
            Step::Language => first_question(input) == Some(QUESTION_LANGUAGE),
            Step::Extras => first_question(input) == Some(QUESTION_EXTRAS),
            // Claude Code 2.1.198 sends the ExitPlanMode call back with an empty input (the
            // plan lives in a plan file then): any ExitPlanMode is the demo's plan step.
            Step::Plan => true,
        }
    }
}

fn first_question(input: &Value) -> Option<&str> {
    input.pointer("/questions/0/question").and_then(Value::as_str)
}

/// What the demo knows from one request's conversation.
#[derive(Debug, Default)]
struct Conversation {
    /// The steps whose tool call the assistant already made, with the call's id.
    calls: Vec<(Step, String)>,
    /// `(tool_use_id, text, is_error)` of every tool_result in the conversation.
    results: Vec<(String, String, bool)>,
    /// The first user text (the operator's prompt), if any.
    first_prompt: Option<String>,
}

impl Conversation {
    fn read(body: &Value) -> Conversation {
        let mut c = Conversation::default();
        for m in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
            let role = m.get("role").and_then(Value::as_str);
            let blocks = match m.get("content") {
                Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                Some(Value::Array(a)) => a.clone(),
                _ => Vec::new(),
            };
            for b in &blocks {
                match (role, b.get("type").and_then(Value::as_str)) {
                    (Some("assistant"), Some("tool_use")) => {
                        let id = b.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                        if let Some(step) = STEPS.iter().copied().find(|s| s.is_call(b)) {
                            c.calls.push((step, id));
                        }
                    }
                    (Some("user"), Some("tool_result")) => c.results.push((
                        b.get("tool_use_id").and_then(Value::as_str).unwrap_or("").to_string(),
                        tool_result_text(b),
                        b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    )),
                    (Some("user"), Some("text")) if c.first_prompt.is_none() => {
                        let text = b.get("text").and_then(Value::as_str).unwrap_or("");
                        // Claude Code adds <system-reminder> text blocks around the prompt.
                        if !text.trim_start().starts_with('<') && !text.trim().is_empty() {
                            c.first_prompt = Some(text.trim().to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
        c
    }

    fn call_id(&self, step: Step) -> Option<&str> {
        self.calls.iter().find(|(s, _)| *s == step).map(|(_, id)| id.as_str())
    }

    /// The result of `step`'s call: `(text, is_error)`.
    fn result(&self, step: Step) -> Option<(&str, bool)> {
        let id = self.call_id(step)?;
        self.results.iter().find(|(i, _, _)| i == id).map(|(_, t, e)| (t.as_str(), *e))
    }

    /// The operator's answer to `step`'s question, from Claude Code's tool_result text
    /// (`… "<question>"="<answer>" …`).
    fn answer(&self, step: Step, question: &str) -> Option<String> {
        match self.result(step)? {
            (_, true) => None,
            (text, false) => answer_in(text, question),
        }
    }
}

/// The answer to `question` in an AskUserQuestion tool_result text such as
/// `User has answered your questions: "Q?"="Rust". You can now continue …`.
/// Multi-select answers are comma-joined labels; free text is verbatim.
pub fn answer_in(result: &str, question: &str) -> Option<String> {
    let start = result.find(&format!("\"{question}\"=\""))? + question.len() + 4;
    let rest = &result[start..];
    // The closing quote: the one followed by the end, ". " / "." at the end, or ", \"" (the next question).
    let end = rest.char_indices().filter(|(_, c)| *c == '"').map(|(i, _)| i).find(|&i| {
        let after = &rest[i + 1..];
        after.is_empty() || after.starts_with(". ") || after == "." || after.starts_with(", \"")
    })?;
    Some(rest[..end].to_string())
}

/// Which tools the request offers the model.
fn offers(body: &Value, tool: &str) -> bool {
    let listed = |name: &str| {
        body.get("tools")
            .and_then(Value::as_array)
            .is_some_and(|ts| ts.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name)))
    };
    // Claude Code 2.1.332 defers ExitPlanMode (and other tools) behind ToolSearch: not in
    // `tools` until the model loads it, yet a call to it is accepted directly (the
    // end-to-end plan scenarios do the same).
    listed(tool) || (tool == "ExitPlanMode" && listed("ToolSearch"))
}

/// What the demo answers to a main-agent request.
pub fn reply(body: &Value) -> Reply {
    let c = Conversation::read(body);
    let last = last_user_blocks(body);
    let last_results: Vec<&str> = last
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
        .collect();
    // The last user message answers one of the demo's own calls, or is a prompt.
    let after_demo_call = last_results.iter().any(|id| c.calls.iter().any(|(_, cid)| cid == id));
    if !last_results.is_empty() && !after_demo_call {
        return Reply::text(
            "(This is lab's scripted demo: I only know how to show lab's cards, so I'll stop here. \
             Start a new run to see the demo again.)",
        );
    }
    let next = STEPS.iter().copied().find(|s| c.call_id(*s).is_none());
    match next {
        Some(step) if offers(body, step.tool()) => step_reply(step, &c),
        Some(step) => Reply::text(format!(
            "(This is lab's scripted demo. The agent did not offer the {} tool in this request, so \
             there is no card to show; start a new run to see the demo again.)",
            step.tool()
        )),
        None if last_results.iter().any(|id| Some(*id) == c.call_id(Step::Plan)) => Reply::text(closing(&c)),
        None => Reply::text(
            "The demo conversation is over — start a new run (permission mode: plan) to go through it again. \
             Everything here came from a scripted stand-in on this machine.",
        ),
    }
}

fn step_reply(step: Step, c: &Conversation) -> Reply {
    let options = |list: &[(&str, &str)]| -> Vec<Value> {
        list.iter().map(|(label, description)| json!({"label": label, "description": description})).collect()
    };
    let (input, text) = match step {
        Step::Language => {
            let echo =
                c.first_prompt.as_deref().map(|p| format!("You wrote: “{}”. ", shorten(p, 80))).unwrap_or_default();
            (
                json!({"questions": [{
                    "question": QUESTION_LANGUAGE,
                    "header": "Language",
                    "multiSelect": false,
                    "options": options(&LANGUAGES),
                }]}),
                format!(
                    "Hello! This is lab's demo: I am a scripted stand-in for the model, running on this machine. \
                     {echo}Let's plan a tiny hello-world project together — first, one question with a single answer."
                ),
            )
        }
        Step::Extras => {
            let picked = c.answer(Step::Language, QUESTION_LANGUAGE).unwrap_or_else(|| "no answer".into());
            (
                json!({"questions": [{
                    "question": QUESTION_EXTRAS,
                    "header": "Extras",
                    "multiSelect": true,
                    "options": options(&EXTRAS),
                }]}),
                format!("Noted: {picked}. Now a question where you can pick several answers."),
            )
        }
        Step::Plan => (
            json!({"plan": plan(c)}),
            "Thanks! Here is the plan — approve it on its card (or in the run's terminal).".into(),
        ),
    };
    Reply::ToolUse(ToolUseReply { name: step.tool().into(), input, text: Some(text), id: None })
}

fn plan(c: &Conversation) -> String {
    let language = c.answer(Step::Language, QUESTION_LANGUAGE).unwrap_or_else(|| "Rust".into());
    let extras = c.answer(Step::Extras, QUESTION_EXTRAS).filter(|e| !e.is_empty());
    let mut plan = format!(
        "{PLAN_TITLE}: hello world in {language}\n\n\
         1. Create a small {language} project with a `greet(name)` function.\n\
         2. Print `Hello, lab!` from the entry point.\n"
    );
    match extras {
        Some(e) => plan.push_str(&format!("3. Add the extras you picked: **{e}**.\n")),
        None => plan.push_str("3. No extras.\n"),
    }
    plan.push_str("\n_This plan comes from lab's scripted demo; nothing will be built._\n");
    plan
}

fn closing(c: &Conversation) -> String {
    let quote = |step, q| c.answer(step, q).map(|a| format!("“{a}”")).unwrap_or_else(|| "(no answer)".into());
    let verdict = match c.result(Step::Plan) {
        Some((_, false)) => "You approved the plan",
        // Outside plan mode Claude Code refuses ExitPlanMode at once ("You are not in plan
        // mode…"): no plan card was shown.
        Some((text, true)) if text.contains("not in plan mode") => {
            "There was no plan card: this run is not in plan mode (start the demo's runs with permission mode “plan”)"
        }
        _ => "You did not approve the plan",
    };
    format!(
        "{verdict} — in a real run the agent would start work now. Your answers: language {}, extras {}. \
         That was the whole round trip: a single-select question, a multi-select question and a plan, each \
         answered from lab. Start another run to see it again.",
        quote(Step::Language, QUESTION_LANGUAGE),
        quote(Step::Extras, QUESTION_EXTRAS)
    )
}

fn shorten(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() <= max && !s.contains('\n') {
        line.to_string()
    } else {
        format!("{}…", line.chars().take(max).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!([{"name": "AskUserQuestion"}, {"name": "ExitPlanMode"}, {"name": "Bash"}])
    }

    fn body(messages: Value) -> Value {
        json!({"model": "m", "tools": tools(), "messages": messages})
    }

    fn prompt(text: &str) -> Value {
        json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>context</system-reminder>"},
            {"type": "text", "text": text}]})
    }

    fn call(reply: &Reply, id: &str) -> Value {
        let Reply::ToolUse(tu) = reply else { panic!("expected a tool call, got {reply:?}") };
        json!({"role": "assistant", "content": [
            {"type": "text", "text": tu.text.clone().unwrap_or_default()},
            {"type": "tool_use", "id": id, "name": tu.name, "input": tu.input}]})
    }

    fn result(id: &str, text: &str, is_error: bool) -> Value {
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error}]})
    }

    fn tool_use(reply: &Reply) -> &ToolUseReply {
        match reply {
            Reply::ToolUse(tu) => tu,
            other => panic!("expected a tool call, got {other:?}"),
        }
    }

    fn text(reply: &Reply) -> &str {
        match reply {
            Reply::Text(t) => t,
            other => panic!("expected text, got {other:?}"),
        }
    }

    /// Walks the whole demo as Claude Code would send it, answering like its picker does.
    #[test]
    fn the_demo_goes_question_multi_select_plan_closing() {
        let mut msgs = vec![prompt("Show me what lab does")];
        let r1 = reply(&body(json!(msgs)));
        let tu = tool_use(&r1);
        assert_eq!(tu.name, "AskUserQuestion");
        assert_eq!(tu.input["questions"][0]["question"], QUESTION_LANGUAGE);
        assert_eq!(tu.input["questions"][0]["multiSelect"], false);
        assert_eq!(tu.input["questions"][0]["options"].as_array().unwrap().len(), 3);
        assert!(tu.text.as_deref().unwrap().contains("“Show me what lab does”"), "{tu:?}");

        msgs.push(call(&r1, "toolu_1"));
        msgs.push(result("toolu_1", &format!("User has answered your questions: \"{QUESTION_LANGUAGE}\"=\"Python\". You can now continue with the user's answers in mind."), false));
        let r2 = reply(&body(json!(msgs)));
        let tu = tool_use(&r2);
        assert_eq!(tu.name, "AskUserQuestion");
        assert_eq!(tu.input["questions"][0]["question"], QUESTION_EXTRAS);
        assert_eq!(tu.input["questions"][0]["multiSelect"], true);
        assert_eq!(tu.input["questions"][0]["options"].as_array().unwrap().len(), 4);
        assert!(tu.text.as_deref().unwrap().contains("Python"));

        msgs.push(call(&r2, "toolu_2"));
        msgs.push(result("toolu_2", &format!("User has answered your questions: \"{QUESTION_EXTRAS}\"=\"Tests, Docs\". You can now continue with the user's answers in mind."), false));
        let r3 = reply(&body(json!(msgs)));
        let tu = tool_use(&r3);
        assert_eq!(tu.name, "ExitPlanMode");
        let plan = tu.input["plan"].as_str().unwrap();
        assert!(
            plan.starts_with(PLAN_TITLE) && plan.contains("in Python") && plan.contains("**Tests, Docs**"),
            "{plan}"
        );

        // As Claude Code sends it back: the input emptied, a system message after the result.
        msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_3", "name": "ExitPlanMode", "input": {}}]}));
        msgs.push(result("toolu_3", "User has approved your plan. You can now start coding.", false));
        msgs.push(json!({"role": "system", "content": "## Exited Plan Mode"}));
        let r4 = reply(&body(json!(msgs)));
        let closing = text(&r4);
        assert!(closing.starts_with("You approved the plan"), "{closing}");
        assert!(closing.contains("language “Python”") && closing.contains("extras “Tests, Docs”"), "{closing}");

        // A message after the end: a harmless text, no new card.
        msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": closing}]}));
        msgs.push(prompt("again?"));
        assert!(text(&reply(&body(json!(msgs)))).starts_with("The demo conversation is over"));
    }

    #[test]
    fn outside_plan_mode_the_closing_says_there_was_no_plan_card() {
        let msgs = json!([prompt("hi"),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "AskUserQuestion",
                "input": {"questions": [{"question": QUESTION_LANGUAGE}]}}]},
            result("a", &format!("User has answered your questions: \"{QUESTION_LANGUAGE}\"=\"Rust\"."), false),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "AskUserQuestion",
                "input": {"questions": [{"question": QUESTION_EXTRAS}]}}]},
            result("b", &format!("User has answered your questions: \"{QUESTION_EXTRAS}\"=\"CI\"."), false),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "ExitPlanMode", "input": {}}]},
            result("c", "<tool_use_error>You are not in plan mode. To enter plan mode, call the EnterPlanMode tool first.</tool_use_error>", true)]);
        let closing = reply(&body(msgs));
        let closing = text(&closing);
        assert!(closing.starts_with("There was no plan card: this run is not in plan mode"), "{closing}");
        assert!(closing.contains("language “Rust”, extras “CI”"), "{closing}");
    }

    #[test]
    fn the_same_request_gets_the_same_reply() {
        let b = body(json!([prompt("hi")]));
        assert_eq!(reply(&b), reply(&b));
    }

    #[test]
    fn steps_missing_from_the_conversation_come_first() {
        let r3 = Reply::tool_use("ExitPlanMode", json!({"plan": format!("{PLAN_TITLE}: x")}));
        let msgs =
            json!([prompt("hi"), call(&r3, "toolu_3"), result("toolu_3", "The user doesn't want to proceed", true)]);
        // The earlier steps are missing here, so the demo asks them next.
        assert_eq!(tool_use(&reply(&body(msgs))).input["questions"][0]["question"], QUESTION_LANGUAGE);
    }

    #[test]
    fn a_dismissed_question_moves_on_and_the_closing_says_no_answer() {
        let mut msgs = vec![prompt("hi")];
        let r1 = reply(&body(json!(msgs)));
        msgs.push(call(&r1, "a"));
        msgs.push(result("a", "The user doesn't want to proceed with this tool use.", true));
        let r2 = reply(&body(json!(msgs)));
        assert!(tool_use(&r2).text.as_deref().unwrap().contains("no answer"));
        msgs.push(call(&r2, "b"));
        msgs.push(result("b", &format!("User has answered your questions: \"{QUESTION_EXTRAS}\"=\"CI\"."), false));
        let r3 = reply(&body(json!(msgs)));
        msgs.push(call(&r3, "c"));
        msgs.push(result("c", "The user doesn't want to proceed with this tool use.", true));
        let closing = reply(&body(json!(msgs)));
        let closing = text(&closing);
        assert!(closing.starts_with("You did not approve the plan"), "{closing}");
        assert!(closing.contains("language (no answer)") && closing.contains("extras “CI”"), "{closing}");
    }

    #[test]
    fn unexpected_requests_get_harmless_text() {
        // A result for some other tool.
        let other = json!([prompt("hi"),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "Bash", "input": {}}]},
            result("x", "ok", false)]);
        assert!(matches!(reply(&body(other)), Reply::Text(_)));
        // The step's tool is not offered.
        let no_tool = json!({"tools": [{"name": "Bash"}], "messages": [prompt("hi")]});
        assert!(text(&reply(&no_tool)).contains("did not offer the AskUserQuestion tool"));
        // ExitPlanMode deferred behind ToolSearch (2.1.332) counts as offered.
        assert!(offers(&json!({"tools": [{"name": "ToolSearch"}]}), "ExitPlanMode"));
        assert!(!offers(&json!({"tools": [{"name": "ToolSearch"}]}), "AskUserQuestion"));
        assert!(!offers(&json!({"tools": [{"name": "Bash"}]}), "ExitPlanMode"));
        // No messages at all.
        assert!(matches!(reply(&json!({"tools": tools()})), Reply::ToolUse(_)));
        assert!(matches!(reply(&json!({"tools": [], "messages": "junk"})), Reply::Text(_)));
    }

    #[test]
    fn answers_are_read_from_claude_codes_result_text() {
        let q = "Which extras should it have?";
        let t = format!("User has answered your questions: \"{q}\"=\"Tests, CI\". You can now continue.");
        assert_eq!(answer_in(&t, q).as_deref(), Some("Tests, CI"));
        let two = format!("User has answered your questions: \"A?\"=\"x\", \"{q}\"=\"say \"hi\"\". Go.");
        assert_eq!(answer_in(&two, "A?").as_deref(), Some("x"));
        assert_eq!(answer_in(&two, q).as_deref(), Some("say \"hi\""));
        assert_eq!(answer_in(&format!("\"{q}\"=\"end\""), q).as_deref(), Some("end"));
        assert_eq!(answer_in("No response after 60s", q), None);
    }
}
