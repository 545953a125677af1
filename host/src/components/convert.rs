//! Conversions between the generated host bindings and the SDK's plain types, which
//! are what the rest of the host (and the HTTP API) speaks.

use super::bindings::{dialog_hooker as h, types as w};
use lab_provider_sdk as sdk;

pub fn info(i: w::ProviderInfo) -> sdk::ProviderInfo {
    sdk::ProviderInfo {
        name: i.name,
        version: i.version,
        description: i.description,
        default_program: i.default_program,
    }
}

pub fn launch_request(r: sdk::LaunchRequest) -> w::LaunchRequest {
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

pub fn launch_spec(s: w::LaunchSpec) -> sdk::LaunchSpec {
    sdk::LaunchSpec { argv: s.argv, transcript_path: s.transcript_path, session_id: s.session_id }
}

fn role(r: w::Role) -> sdk::Role {
    match r {
        w::Role::User => sdk::Role::User,
        w::Role::Assistant => sdk::Role::Assistant,
        w::Role::System => sdk::Role::System,
        w::Role::Tool => sdk::Role::Tool,
    }
}

pub fn parse_output(o: w::ParseOutput) -> sdk::ParseOutput {
    sdk::ParseOutput {
        messages: o
            .messages
            .into_iter()
            .map(|m| sdk::Message {
                role: role(m.role),
                kind: m.kind,
                text: m.text,
                tool_use_id: m.tool_use_id,
                tool_name: m.tool_name,
                tool_input: m.tool_input,
                is_error: m.is_error,
                timestamp: m.timestamp,
            })
            .collect(),
        turn: o.turn.map(|t| match t {
            w::TurnSignal::Working => sdk::TurnSignal::Working,
            w::TurnSignal::Idle => sdk::TurnSignal::Idle,
        }),
        session_id: o.session_id,
        diagnostics: o.diagnostics.into_iter().map(|d| sdk::Diagnostic { line: d.line, message: d.message }).collect(),
    }
}

pub fn tool_call(c: sdk::ToolCall) -> w::ToolCall {
    w::ToolCall { id: c.id, name: c.name, input: c.input }
}

pub fn dialog_in(d: w::Dialog) -> sdk::Dialog {
    sdk::Dialog {
        tool_id: d.tool_id,
        tool_name: d.tool_name,
        kind: match d.kind {
            w::DialogKind::Question => sdk::DialogKind::Question,
            w::DialogKind::Plan => sdk::DialogKind::Plan,
        },
        answerable: d.answerable,
        questions: d
            .questions
            .into_iter()
            .map(|q| sdk::Question {
                header: q.header,
                question: q.question,
                multi_select: q.multi_select,
                options: q
                    .options
                    .into_iter()
                    .map(|o| sdk::DialogOption { label: o.label, description: o.description })
                    .collect(),
            })
            .collect(),
        plan: d.plan,
        deep_link: d.deep_link,
    }
}

pub fn dialog_out(d: sdk::Dialog) -> w::Dialog {
    w::Dialog {
        tool_id: d.tool_id,
        tool_name: d.tool_name,
        kind: match d.kind {
            sdk::DialogKind::Question => w::DialogKind::Question,
            sdk::DialogKind::Plan => w::DialogKind::Plan,
        },
        answerable: d.answerable,
        questions: d
            .questions
            .into_iter()
            .map(|q| w::Question {
                header: q.header,
                question: q.question,
                multi_select: q.multi_select,
                options: q
                    .options
                    .into_iter()
                    .map(|o| w::DialogOption { label: o.label, description: o.description })
                    .collect(),
            })
            .collect(),
        plan: d.plan,
        deep_link: d.deep_link,
    }
}

pub fn hook_context(c: sdk::HookContext) -> h::HookContext {
    h::HookContext {
        run_id: c.run_id,
        spool_write: c.spool_write,
        spool_clear: c.spool_clear,
        marker_write: c.marker_write,
    }
}

pub fn pending(p: h::Pending) -> sdk::Pending {
    sdk::Pending { tool_use_id: p.tool_use_id, dialog: p.dialog.map(dialog_in) }
}

pub fn blocked(b: h::Blocked) -> sdk::Blocked {
    sdk::Blocked { notification_type: b.notification_type, message: b.message }
}

pub fn answer(a: sdk::Answer) -> h::Answer {
    match a {
        sdk::Answer::Option(i) => h::Answer::Option(i),
        sdk::Answer::Options(v) => h::Answer::Options(v),
        sdk::Answer::Other(s) => h::Answer::Other(s),
    }
}

pub fn key_op(k: h::KeyOp) -> sdk::KeyOp {
    match k {
        h::KeyOp::Key(s) => sdk::KeyOp::Key(s),
        h::KeyOp::Literal(s) => sdk::KeyOp::Literal(s),
    }
}
