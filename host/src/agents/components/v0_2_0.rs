//! `lab:provider@0.2.0`: host bindings and the one conversion each way between its
//! types and the host's model.

use crate::agents::model as m;
use std::time::Duration;

wasmtime::component::bindgen!({
    path: "../wit/v0.2.0",
    world: "screen-provider",
});

pub use self::lab::provider::types as w;
pub use exports::lab::provider::base;
pub use exports::lab::provider::dialog_hooker;
pub use exports::lab::provider::screen_reader;

pub const PACKAGE: &str = "lab:provider@0.2.0";

pub fn info(i: w::ProviderInfo) -> m::ProviderInfo {
    m::ProviderInfo {
        name: i.name,
        display_name: i.display_name,
        version: i.version,
        description: i.description,
        default_program: i.default_program,
        permission_modes: i.permission_modes,
    }
}

fn channel_in(c: w::Channel) -> m::Channel {
    match c {
        w::Channel::DialogSpool => m::Channel::DialogSpool,
        w::Channel::DialogClear(p) => m::Channel::DialogClear(p),
        w::Channel::BlockedMarker => m::Channel::BlockedMarker,
        w::Channel::SessionInfo => m::Channel::SessionInfo,
    }
}

fn channel_out(c: &m::Channel) -> w::Channel {
    match c {
        m::Channel::DialogSpool => w::Channel::DialogSpool,
        m::Channel::DialogClear(p) => w::Channel::DialogClear(p.clone()),
        m::Channel::BlockedMarker => w::Channel::BlockedMarker,
        m::Channel::SessionInfo => w::Channel::SessionInfo,
    }
}

pub fn binding_in(b: w::HookBinding) -> m::HookBinding {
    m::HookBinding { event: b.event, matcher: b.matcher, channel: channel_in(b.channel) }
}

fn binding_out(b: &m::HookBinding) -> w::HookBinding {
    w::HookBinding { event: b.event.clone(), matcher: b.matcher.clone(), channel: channel_out(&b.channel) }
}

pub fn hook_commands(hooks: &[m::HookCommand]) -> Vec<w::HookCommand> {
    hooks.iter().map(|h| w::HookCommand { binding: binding_out(&h.binding), command: h.command.clone() }).collect()
}

pub fn launch_request(r: m::LaunchRequest) -> w::LaunchRequest {
    w::LaunchRequest {
        hooks: hook_commands(&r.hooks),
        run_id: r.run_id,
        session_id: r.session_id,
        workdir: r.workdir,
        prompt: r.prompt,
        permission_mode: r.permission_mode,
        program: r.program,
        env: r.env,
        settings_path: r.settings_path,
    }
}

pub fn launch_spec(s: w::LaunchSpec) -> m::LaunchSpec {
    m::LaunchSpec {
        argv: s.argv,
        transcript: match s.transcript {
            w::TranscriptLocation::Path(p) => m::Transcript::Path(p),
            w::TranscriptLocation::FromSessionInfo => m::Transcript::FromSessionInfo,
            w::TranscriptLocation::None => m::Transcript::None,
        },
        session_id: s.session_id,
        env: s.env,
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

pub fn tool_use_in(u: w::ToolUse) -> m::ToolUse {
    m::ToolUse { id: u.id, name: u.name, input_json: u.input_json, summary: u.summary }
}

pub fn tool_use_out(u: &m::ToolUse) -> w::ToolUse {
    w::ToolUse { id: u.id.clone(), name: u.name.clone(), input_json: u.input_json.clone(), summary: u.summary.clone() }
}

pub fn parse_output(o: w::ParseOutput) -> m::ParseOutput {
    m::ParseOutput {
        messages: o
            .messages
            .into_iter()
            .map(|msg| m::Message {
                role: role(msg.role),
                timestamp: msg.timestamp,
                content: match msg.content {
                    w::Content::Text(t) => m::Content::Text(t),
                    w::Content::Thinking(t) => m::Content::Thinking(t),
                    w::Content::ToolUse(u) => m::Content::ToolUse(tool_use_in(u)),
                    w::Content::ToolResult(r) => {
                        m::Content::ToolResult(m::ToolResult { id: r.id, text: r.text, is_error: r.is_error })
                    }
                    w::Content::Other((kind, text)) => m::Content::Other { kind, text },
                },
            })
            .collect(),
        turn: o.turn.map(|t| match t {
            w::TurnSignal::Working => m::TurnSignal::Working,
            w::TurnSignal::Idle => m::TurnSignal::Idle,
        }),
        session_id: o.session_id,
        diagnostics: o.diagnostics.into_iter().map(|d| m::Diagnostic { line: d.line, message: d.message }).collect(),
    }
}

fn options_in(v: Vec<w::DialogOption>) -> Vec<m::DialogOption> {
    v.into_iter().map(|o| m::DialogOption { label: o.label, description: o.description }).collect()
}

fn options_out(v: &[m::DialogOption]) -> Vec<w::DialogOption> {
    v.iter().map(|o| w::DialogOption { label: o.label.clone(), description: o.description.clone() }).collect()
}

pub fn dialog_in(d: w::Dialog) -> m::Dialog {
    let body = match d.body {
        w::DialogBody::Question(qs) => m::DialogBody::Question(
            qs.into_iter()
                .map(|q| m::Question {
                    header: q.header,
                    question: q.question,
                    multi_select: q.multi_select,
                    options: options_in(q.options),
                })
                .collect(),
        ),
        w::DialogBody::Plan(p) => m::DialogBody::Plan {
            plan: p.plan,
            options: options_in(p.options),
            feedback_option: p.feedback_option,
            plan_file: p.plan_file,
        },
        w::DialogBody::Permission(p) => m::DialogBody::Permission {
            tool: p.tool,
            summary: p.summary,
            reason: p.reason,
            options: options_in(p.options),
            feedback_option: p.feedback_option,
        },
        w::DialogBody::Generic(g) => {
            m::DialogBody::Generic { title: g.title, text: g.text, options: options_in(g.options) }
        }
    };
    m::Dialog {
        id: d.id,
        call_id: d.call_id,
        tool_name: d.tool_name,
        body,
        answerable: d.answerable,
        deep_link: d.deep_link,
    }
}

pub fn dialog_out(d: &m::Dialog) -> w::Dialog {
    let body = match &d.body {
        m::DialogBody::Question(qs) => w::DialogBody::Question(
            qs.iter()
                .map(|q| w::Question {
                    header: q.header.clone(),
                    question: q.question.clone(),
                    multi_select: q.multi_select,
                    options: options_out(&q.options),
                })
                .collect(),
        ),
        m::DialogBody::Plan { plan, options, feedback_option, plan_file } => w::DialogBody::Plan(w::PlanBody {
            plan: plan.clone(),
            options: options_out(options),
            feedback_option: *feedback_option,
            plan_file: plan_file.clone(),
        }),
        m::DialogBody::Permission { tool, summary, reason, options, feedback_option } => {
            w::DialogBody::Permission(w::PermissionBody {
                tool: tool.clone(),
                summary: summary.clone(),
                reason: reason.clone(),
                options: options_out(options),
                feedback_option: *feedback_option,
            })
        }
        m::DialogBody::Generic { title, text, options } => w::DialogBody::Generic(w::GenericBody {
            title: title.clone(),
            text: text.clone(),
            options: options_out(options),
        }),
    };
    w::Dialog {
        id: d.id.clone(),
        call_id: d.call_id.clone(),
        tool_name: d.tool_name.clone(),
        body,
        answerable: d.answerable,
        deep_link: d.deep_link.clone(),
    }
}

pub fn blocked(b: w::Blocked) -> m::Blocked {
    m::Blocked { kind: b.kind, message: b.message }
}

pub fn session_facts(f: w::SessionFacts) -> m::SessionFacts {
    m::SessionFacts { transcript_path: f.transcript_path, session_id: f.session_id }
}

pub fn answer(a: &m::Answer) -> w::Answer {
    match a {
        m::Answer::Option(i) => w::Answer::Option(*i),
        m::Answer::Options(v) => w::Answer::Options(v.clone()),
        m::Answer::Other(s) => w::Answer::Other(s.clone()),
        m::Answer::Feedback { option, text } => w::Answer::Feedback((*option, text.clone())),
    }
}

pub fn answer_plan(p: w::AnswerPlan) -> m::AnswerPlan {
    m::AnswerPlan {
        drawn_within: Duration::from_millis(p.drawn_within_ms.into()),
        settle: Duration::from_millis(p.settle_ms.into()),
        pause: Duration::from_millis(p.pause_ms.into()),
        steps: p
            .steps
            .into_iter()
            .map(|k| match k {
                w::KeyOp::Key(s) => m::KeyOp::Key(s),
                w::KeyOp::Literal(s) => m::KeyOp::Literal(s),
            })
            .collect(),
    }
}

pub fn samples(s: w::Samples) -> m::Samples {
    m::Samples {
        transcript_lines: s.transcript_lines,
        dialog_calls: s.dialog_calls.into_iter().map(tool_use_in).collect(),
    }
}
