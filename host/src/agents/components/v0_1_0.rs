//! `lab:provider@0.1.0`: host bindings and the one conversion into the host's model.
//!
//! Kept so components built before 0.2.0 keep working (docs/wit-compat.md rule 4).
//! What 0.1.0 left to the host lives here and nowhere else: its `kind` strings become
//! contents, its key list becomes an [`AnswerPlan`] with the timings 0.1.0 components
//! were written for ([`PAUSE`], [`SETTLE`]), and its `spool-clear` command gets the
//! `--id-field` it always appended.

use crate::agents::model as m;
use std::time::Duration;

wasmtime::component::bindgen!({
    path: "../wit/v0.1.0",
    world: "hooker-provider",
});

pub use self::lab::provider::types as w;
use dialog_hooker as h;
pub use exports::lab::provider::base;
pub use exports::lab::provider::dialog_hooker;

pub const PACKAGE: &str = "lab:provider@0.1.0";

/// 0.1.0's documented pause between two key ops.
pub const PAUSE: Duration = Duration::from_millis(250);

/// 0.1.0 had no "is drawn" signal; the host waited this long after the spool was
/// written before the first key. A 0.1.0 plan has this as its drawn budget, and the
/// adapter's `is-drawn` looks for the dialog's own words on the pane
/// (`Dialog::words_shown_in`): keys go only onto the prompt on screen, once it has held
/// still for [`STILL`].
pub const SETTLE: Duration = Duration::from_millis(1500);
/// How long a 0.1.0 prompt must show unchanged before the first key (its agent was
/// never asked to take keys the moment it draws).
pub const STILL: Duration = Duration::from_millis(300);

/// The hook bindings a 0.1.0 component gets (its three hook-context commands).
pub fn hook_wiring() -> Vec<m::HookBinding> {
    let b = |event: &str, channel| m::HookBinding { event: event.into(), matcher: None, channel };
    vec![
        b("spool-write (0.1.0)", m::Channel::DialogSpool),
        // The component appends ` --id-field <field>` itself.
        b("spool-clear (0.1.0)", m::Channel::DialogClear(Vec::new())),
        b("marker-write (0.1.0)", m::Channel::BlockedMarker),
    ]
}

/// The 0.1.0 hook context from the commands built for [`hook_wiring`].
pub fn hook_context(run_id: &str, hooks: &[m::HookCommand]) -> Result<h::HookContext, String> {
    let find = |pred: fn(&m::Channel) -> bool| {
        hooks
            .iter()
            .find(|c| pred(&c.binding.channel))
            .map(|c| c.command.clone())
            .ok_or_else(|| "a hook command is missing".to_string())
    };
    Ok(h::HookContext {
        run_id: run_id.into(),
        spool_write: find(|c| matches!(c, m::Channel::DialogSpool))?,
        spool_clear: find(|c| matches!(c, m::Channel::DialogClear(_)))?,
        marker_write: find(|c| matches!(c, m::Channel::BlockedMarker))?,
    })
}

pub fn info(i: w::ProviderInfo) -> m::ProviderInfo {
    m::ProviderInfo {
        display_name: i.name.clone(),
        name: i.name,
        version: i.version,
        description: i.description,
        default_program: i.default_program,
        permission_modes: Vec::new(),
    }
}

pub fn launch_request(r: m::LaunchRequest) -> w::LaunchRequest {
    w::LaunchRequest {
        run_id: r.run_id,
        session_id: r.session_id,
        workdir: r.workdir,
        prompt: r.prompt,
        permission_mode: r.permission_mode,
        program: r.program,
        settings_path: r.settings_path,
        env: r.env,
    }
}

pub fn launch_spec(s: w::LaunchSpec) -> m::LaunchSpec {
    m::LaunchSpec {
        argv: s.argv,
        transcript: s.transcript_path.map_or(m::Transcript::None, m::Transcript::Path),
        session_id: s.session_id,
        env: Vec::new(),
    }
}

fn role(r: w::Role) -> m::Role {
    match r {
        w::Role::User => m::Role::User,
        w::Role::Assistant => m::Role::Assistant,
        w::Role::System => m::Role::System,
        w::Role::Tool => m::Role::Tool,
    }
}

fn content(msg: w::Message) -> m::Content {
    match (msg.kind.as_str(), msg.tool_use_id) {
        ("tool_use", Some(id)) => m::Content::ToolUse(m::ToolUse {
            id,
            name: msg.tool_name.unwrap_or_default(),
            input_json: msg.tool_input.unwrap_or_else(|| "{}".into()),
            summary: msg.text,
        }),
        ("tool_result", Some(id)) => {
            m::Content::ToolResult(m::ToolResult { id, text: msg.text, is_error: msg.is_error })
        }
        ("text", _) => m::Content::Text(msg.text),
        ("thinking", _) => m::Content::Thinking(msg.text),
        (kind, _) => m::Content::Other { kind: kind.to_string(), text: msg.text },
    }
}

pub fn parse_output(o: w::ParseOutput) -> m::ParseOutput {
    m::ParseOutput {
        messages: o
            .messages
            .into_iter()
            .map(|msg| m::Message { role: role(msg.role), timestamp: msg.timestamp.clone(), content: content(msg) })
            .collect(),
        turn: o.turn.map(|t| match t {
            w::TurnSignal::Working => m::TurnSignal::Working,
            w::TurnSignal::Idle => m::TurnSignal::Idle,
        }),
        session_id: o.session_id,
        diagnostics: o.diagnostics.into_iter().map(|d| m::Diagnostic { line: d.line, message: d.message }).collect(),
    }
}

pub fn tool_call(c: m::ToolUse) -> w::ToolCall {
    w::ToolCall { id: c.id, name: c.name, input: c.input_json }
}

fn option_in(o: w::DialogOption) -> m::DialogOption {
    m::DialogOption { label: o.label, description: o.description }
}

pub fn dialog_in(d: w::Dialog) -> m::Dialog {
    let body = match d.kind {
        w::DialogKind::Question => m::DialogBody::Question(
            d.questions
                .into_iter()
                .map(|q| m::Question {
                    header: q.header,
                    question: q.question,
                    multi_select: q.multi_select,
                    options: q.options.into_iter().map(option_in).collect(),
                })
                .collect(),
        ),
        w::DialogKind::Plan => {
            m::DialogBody::Plan { plan: d.plan, options: Vec::new(), feedback_option: None, plan_file: None }
        }
    };
    m::Dialog {
        id: d.tool_id.clone(),
        call_id: Some(d.tool_id),
        tool_name: d.tool_name,
        body,
        // 0.1.0 answered questions only.
        answerable: d.answerable && matches!(d.kind, w::DialogKind::Question),
        deep_link: d.deep_link,
    }
}

/// A model dialog as 0.1.0 knew it; none for kinds 0.1.0 did not have.
pub fn dialog_out(d: &m::Dialog) -> Option<w::Dialog> {
    let option = |o: &m::DialogOption| w::DialogOption { label: o.label.clone(), description: o.description.clone() };
    let (kind, questions, plan) = match &d.body {
        m::DialogBody::Question(qs) => (
            w::DialogKind::Question,
            qs.iter()
                .map(|q| w::Question {
                    header: q.header.clone(),
                    question: q.question.clone(),
                    multi_select: q.multi_select,
                    options: q.options.iter().map(option).collect(),
                })
                .collect(),
            None,
        ),
        m::DialogBody::Plan { plan, .. } => (w::DialogKind::Plan, Vec::new(), plan.clone()),
        _ => return None,
    };
    Some(w::Dialog {
        tool_id: d.id.clone(),
        tool_name: d.tool_name.clone(),
        kind,
        answerable: d.answerable,
        questions,
        plan,
        deep_link: d.deep_link.clone(),
    })
}

pub fn pending(p: h::Pending) -> Option<m::Dialog> {
    p.dialog.map(dialog_in).map(|d| m::Dialog { id: p.tool_use_id.clone(), call_id: Some(p.tool_use_id), ..d })
}

pub fn blocked(b: h::Blocked) -> m::Blocked {
    m::Blocked { kind: b.notification_type, message: b.message }
}

/// 0.1.0 answers; `None` for the feedback answer it did not have.
pub fn answer(a: &m::Answer) -> Option<h::Answer> {
    Some(match a {
        m::Answer::Option(i) => h::Answer::Option(*i),
        m::Answer::Options(v) => h::Answer::Options(v.clone()),
        m::Answer::Other(s) => h::Answer::Other(s.clone()),
        m::Answer::Feedback { .. } => return None,
    })
}

pub fn answer_plan(ops: Vec<h::KeyOp>) -> m::AnswerPlan {
    m::AnswerPlan {
        drawn_within: SETTLE,
        settle: STILL,
        pause: PAUSE,
        steps: ops
            .into_iter()
            .map(|k| match k {
                h::KeyOp::Key(s) => m::KeyOp::Key(s),
                h::KeyOp::Literal(s) => m::KeyOp::Literal(s),
            })
            .collect(),
    }
}
