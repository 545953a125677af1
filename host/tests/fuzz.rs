//! Bounded fuzzing (property tests with proptest) of every parser that reads bytes lab
//! does not control: the transcript, the dialog spool and the blocked marker (through
//! the real claude-code component and the host's component API), the host's own line
//! reader, `lab hook`'s stdin (the real binary), the HTTP bodies of every POST route
//! of a running `lab serve`, and what an ACP agent sends (JSON-RPC lines, permission
//! requests and forms with the operator's answers, `session/update`s, journal lines).
//!
//! Inputs are both random bytes and structured: valid-looking JSON lines with random
//! fields, truncated or with flipped bytes, huge strings, deep nesting. Every test has
//! a case count and a wall-clock budget (cases past the budget are skipped), so the
//! whole file runs in well under a minute; `PROPTEST_CASES` raises the count for a
//! longer local run. Properties: no panic, no trap, no hang (each call is timed), and
//! the documented outcome (a clear error or a sensible result).

mod common;

use common::*;
use lab::agents::components::{fixtures, CallError, CallErrorKind, ComponentHost, Limits, ProviderHandle};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run `test` on up to `cases` values of `strategy`, skipping cases once `budget` is
/// spent. Failures are shrunk briefly and reported with the input.
fn fuzz<S: Strategy>(
    name: &str,
    cases: u32,
    budget: Duration,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(cases),
        failure_persistence: None,
        max_shrink_iters: 200,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let start = Instant::now();
    let ran = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        if start.elapsed() > budget {
            return Ok(());
        }
        ran.set(ran.get() + 1);
        test(v)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    eprintln!("{name}: {} cases in {:?}", ran.get(), start.elapsed());
    assert!(ran.get() > 0, "{name}: no case ran");
}

// ---- generators ------------------------------------------------------------------

/// Short strings of every kind, now and then a huge one or control characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z0-9 _.-]{0,16}",
        3 => any::<String>(),
        1 => "[\\x00-\\x1f\\x7f\u{80}-\u{9f}\u{202e}\u{feff}]{0,8}",
        1 => (1usize..200_000).prop_map(|n| "é".repeat(n / 2)),
    ]
}

fn small_text() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-zA-Z0-9 _.-]{0,16}", 1 => any::<String>()]
}

/// Any JSON value, nested a little.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        small_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((small_text(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A field that is usually the expected kind of thing, sometimes any JSON, sometimes absent.
fn field<S: Strategy<Value = Value> + 'static>(usual: S) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![10 => usual.prop_map(Some), 1 => json_value().prop_map(Some), 1 => Just(None)]
}

fn one_of(words: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![4 => prop::sample::select(words).prop_map(Value::from), 1 => small_text().prop_map(Value::from)]
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(fields.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))).collect::<Map<_, _>>())
}

/// A content block of a transcript message.
fn block() -> impl Strategy<Value = Value> {
    (
        field(one_of(&["text", "tool_use", "tool_result", "thinking", "image", "document", "redacted_thinking"])),
        field(text().prop_map(Value::from)),
        field(small_text().prop_map(Value::from)),
        field(one_of(&["AskUserQuestion", "ExitPlanMode", "Bash", "Read", "TodoWrite"])),
        field(json_value()),
        field(prop_oneof![text().prop_map(Value::from), json_value()]),
        field(any::<bool>().prop_map(Value::from)),
    )
        .prop_map(|(ty, t, id, name, input, content, is_error)| {
            object(vec![
                ("type", ty),
                ("text", t.clone()),
                ("thinking", t),
                ("id", id.clone()),
                ("tool_use_id", id),
                ("name", name),
                ("input", input),
                ("content", content),
                ("is_error", is_error),
            ])
        })
}

/// A transcript line as Claude Code writes them, with random fields.
fn transcript_line() -> impl Strategy<Value = Value> {
    (
        field(one_of(&["user", "assistant", "system", "summary", "progress", "file-history-snapshot"])),
        field(small_text().prop_map(Value::from)),
        field(small_text().prop_map(Value::from)),
        field(one_of(&["user", "assistant"])),
        field(prop_oneof![text().prop_map(Value::from), prop::collection::vec(block(), 0..4).prop_map(Value::Array)]),
        field(one_of(&["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"])),
        field(any::<bool>().prop_map(Value::from)),
        field(one_of(&["isMeta", "isSidechain", "isCompactSummary", "isApiErrorMessage"])),
    )
        .prop_map(|(ty, session, ts, role, content, stop, flag_value, flag_name)| {
            let message = object(vec![("role", role), ("content", content), ("stop_reason", stop)]);
            let mut line = object(vec![
                ("type", ty),
                ("sessionId", session),
                ("timestamp", ts),
                ("message", Some(message)),
                ("uuid", Some(Value::from("u-1"))),
            ]);
            if let (Some(Value::String(name)), Some(v)) = (flag_name, flag_value) {
                line[name] = v;
            }
            line
        })
}

/// Damage applied to otherwise well-formed bytes.
#[derive(Debug, Clone)]
enum Damage {
    None,
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    DeepNesting(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => Just(Damage::None),
        2 => any::<prop::sample::Index>().prop_map(Damage::Truncate),
        2 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Flip(i, b)),
        1 => (any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(i, b)| Damage::Insert(i, b)),
        1 => (1usize..20_000).prop_map(Damage::DeepNesting),
    ]
}

fn apply_damage(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::None => {}
        Damage::Truncate(i) if !bytes.is_empty() => bytes.truncate(i.index(bytes.len())),
        Damage::Flip(i, b) if !bytes.is_empty() => {
            let at = i.index(bytes.len());
            bytes[at] ^= b | 1;
        }
        Damage::Insert(i, more) => {
            let at = i.index(bytes.len() + 1);
            bytes.splice(at..at, more.iter().copied());
        }
        Damage::DeepNesting(depth) => {
            let mut deep = "[".repeat(*depth).into_bytes();
            deep.extend_from_slice(&b"]".repeat(*depth));
            deep.push(b'\n');
            bytes.extend_from_slice(&deep);
        }
        _ => {}
    }
    bytes
}

/// JSON text of `value`, damaged; or just random bytes.
fn json_bytes(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (value, damage()).prop_map(|(v, d)| apply_damage(serde_json::to_vec(&v).unwrap(), &d)),
        1 => prop::collection::vec(any::<u8>(), 0..2048),
        1 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
    ]
}

/// A transcript chunk: some lines, joined, damaged.
fn transcript_chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (prop::collection::vec(transcript_line(), 1..6), damage()).prop_map(|(lines, d)| {
            let mut b = Vec::new();
            for l in lines {
                b.extend_from_slice(&serde_json::to_vec(&l).unwrap());
                b.push(b'\n');
            }
            apply_damage(b, &d)
        }),
        1 => prop::collection::vec(any::<u8>(), 0..4096),
    ]
}

fn question() -> impl Strategy<Value = Value> {
    (
        field(text().prop_map(Value::from)),
        field(small_text().prop_map(Value::from)),
        field(any::<bool>().prop_map(Value::from)),
        field(
            prop::collection::vec(
                (field(small_text().prop_map(Value::from)), field(text().prop_map(Value::from)))
                    .prop_map(|(l, d)| object(vec![("label", l), ("description", d)])),
                0..7,
            )
            .prop_map(Value::Array),
        ),
    )
        .prop_map(|(q, h, m, o)| object(vec![("question", q), ("header", h), ("multiSelect", m), ("options", o)]))
}

/// The tool input of a dialog tool: questions or a plan, with random fields.
fn dialog_input() -> impl Strategy<Value = Value> {
    let questions =
        prop_oneof![3 => prop::collection::vec(question(), 1..2), 1 => prop::collection::vec(question(), 0..5)];
    (field(questions.prop_map(Value::Array)), field(text().prop_map(Value::from)))
        .prop_map(|(qs, plan)| object(vec![("questions", qs), ("plan", plan)]))
}

/// A PreToolUse payload (what the dialog spool holds), random fields.
fn spool_payload() -> impl Strategy<Value = Value> {
    (
        field(one_of(&["PreToolUse", "PostToolUse"])),
        field(one_of(&["AskUserQuestion", "ExitPlanMode", "Bash"])),
        field(dialog_input()),
        field(small_text().prop_map(Value::from)),
        field(small_text().prop_map(Value::from)),
    )
        .prop_map(|(event, name, input, id, session)| {
            object(vec![
                ("hook_event_name", event),
                ("tool_name", name),
                ("tool_input", input),
                ("tool_use_id", id),
                ("session_id", session),
            ])
        })
}

/// A Notification payload (what the blocked marker holds), random fields.
fn marker_payload() -> impl Strategy<Value = Value> {
    (
        field(one_of(&["Notification", "Stop"])),
        field(one_of(&["permission_prompt", "idle_prompt", "auth_success", "elicitation_dialog"])),
        field(text().prop_map(Value::from)),
    )
        .prop_map(|(event, ty, msg)| {
            object(vec![("hook_event_name", event), ("notification_type", ty), ("message", msg)])
        })
}

// ---- the provider's parsers, through the host's component API --------------------

fn claude_code() -> ProviderHandle {
    let host = ComponentHost::new(None, Limits::default()).unwrap();
    host.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap().1
}

/// A call into the component must come back, in time, without trapping.
/// A call's outcome, failing the case if it trapped or ran long; the provider's own
/// refusal (an error value) is a fine answer to bad input.
fn no_trap<T>(what: &str, started: Instant, r: Result<T, CallError>) -> Result<Result<T, String>, TestCaseError> {
    let took = started.elapsed();
    prop_assert!(took < Duration::from_secs(3), "{what} took {took:?}");
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) if e.refusal().is_some() => Ok(Err(e.to_string())),
        Err(e) => {
            let bad = matches!(e.kind, CallErrorKind::Trap(_) | CallErrorKind::Timeout { .. });
            Err(TestCaseError::fail(format!("{what}: {e} (trap/timeout: {bad})")))
        }
    }
}

#[test]
fn transcript_parser_survives_anything() {
    let p = claude_code();
    let with_messages = std::cell::Cell::new(0);
    fuzz("transcript", 1000, Duration::from_secs(20), transcript_chunk(), |chunk| {
        let t = Instant::now();
        let out = no_trap("parse-transcript", t, p.parse_transcript(chunk.clone()).blocking())?
            .map_err(|e| TestCaseError::fail(format!("parse-transcript refused: {e}")))?;
        with_messages.set(with_messages.get() + usize::from(!out.messages.is_empty()));
        // Every message is accounted to a line of the chunk.
        let lines = chunk.split(|b| *b == b'\n').count() as u32;
        for d in &out.diagnostics {
            prop_assert!(d.line < lines, "diagnostic for line {} of {lines}", d.line);
        }
        Ok(())
    });
    eprintln!("transcript: {} chunks with messages", with_messages.get());
    assert!(with_messages.get() > 10, "the generator hardly makes parseable lines: {}", with_messages.get());
    // And it still parses a good line afterwards.
    let good = br#"{"type":"user","message":{"role":"user","content":"hi"},"timestamp":"t"}
"#;
    assert_eq!(p.parse_transcript(good.to_vec()).blocking().unwrap().messages.len(), 1);
}

#[test]
fn spool_marker_and_dialog_mapper_survive_anything() {
    let p = claude_code();
    let dialogs = std::cell::Cell::new(0);
    fuzz("spool", 1000, Duration::from_secs(12), json_bytes(spool_payload()), |bytes| {
        let t = Instant::now();
        let parsed = no_trap("pending-dialog", t, p.pending_dialog(bytes.clone(), Vec::new()).blocking())?;
        if let Ok(Some(d)) = parsed {
            prop_assert!(!d.id.is_empty());
            dialogs.set(dialogs.get() + 1);
        }
        Ok(())
    });
    eprintln!("spool: {} dialogs", dialogs.get());
    assert!(dialogs.get() > 3, "the generator hardly makes dialogs: {}", dialogs.get());
    fuzz("marker", 500, Duration::from_secs(8), json_bytes(marker_payload()), |bytes| {
        let t = Instant::now();
        if let Ok(blocked) = no_trap("blocked-state", t, p.blocked_state(bytes.clone()).blocking())? {
            // Accepted: the type as given, or "unknown" when there was none.
            let v: Value =
                serde_json::from_slice(&bytes).map_err(|e| TestCaseError::fail(format!("accepted non-JSON: {e}")))?;
            prop_assert_eq!(&blocked.kind, v["notification_type"].as_str().unwrap_or("unknown"));
        }
        Ok(())
    });
    let call = (one_of(&["AskUserQuestion", "ExitPlanMode", "Bash"]), json_bytes(dialog_input()), small_text());
    fuzz("map-dialog", 500, Duration::from_secs(8), call, |(name, input, id)| {
        let name = name.as_str().unwrap_or_default().to_string();
        let call = lab::agents::model::ToolUse {
            id,
            summary: name.clone(),
            name,
            input_json: String::from_utf8_lossy(&input).into_owned(),
        };
        let t = Instant::now();
        no_trap("map-dialog", t, p.map_dialog(call).blocking())?
            .map_err(|e| TestCaseError::fail(format!("map-dialog refused: {e}")))?;
        Ok(())
    });
}

// ---- the host's transcript line reader -------------------------------------------

#[test]
fn the_line_reader_returns_whole_lines_and_skips_only_overlong_ones() {
    use lab::runs::live::transcript::{LineBuf, Piece};
    let content = prop::collection::vec(prop_oneof![4 => any::<u8>(), 1 => Just(b'\n')], 0..3000);
    fuzz(
        "LineBuf",
        300,
        Duration::from_secs(5),
        (content, prop::collection::vec(1usize..700, 1..20), 1usize..200),
        |(bytes, cuts, max_line)| {
            // What the lines are, read in one go: kept when at most max_line long.
            let mut want = Vec::new();
            let mut rest = &bytes[..];
            while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
                if nl <= max_line {
                    want.extend_from_slice(&rest[..=nl]);
                }
                rest = &rest[nl + 1..];
            }
            // The same bytes pushed in arbitrary pieces.
            let mut lines = LineBuf::new(max_line);
            let (mut got, mut consumed, mut at) = (Vec::new(), 0, 0);
            let mut cuts = cuts.into_iter().cycle();
            while at < bytes.len() {
                let end = (at + cuts.next().unwrap()).min(bytes.len());
                for piece in lines.push(&bytes[at..end]) {
                    match piece {
                        Piece::Lines(l) => {
                            prop_assert!(l.ends_with(b"\n"), "a partial line was given out");
                            consumed += l.len();
                            got.extend_from_slice(&l);
                        }
                        Piece::Skipped { len, .. } => consumed += len,
                    }
                }
                prop_assert!(lines.held() <= max_line, "held {} over {max_line}", lines.held());
                at = end;
            }
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(consumed + lines.held(), bytes.len(), "every byte is given out, skipped or held");
            prop_assert!(lines.held() == 0 || rest.len() == lines.held(), "only the incomplete last line is held");
            Ok(())
        },
    );
}

// ---- ACP: what an agent sends ------------------------------------------------------

fn acp_option() -> impl Strategy<Value = Value> {
    (
        field(small_text().prop_map(Value::from)),
        field(small_text().prop_map(Value::from)),
        field(one_of(&["allow_once", "reject_once", "allow_always"])),
    )
        .prop_map(|(id, name, kind)| object(vec![("optionId", id), ("name", name), ("kind", kind)]))
}

fn acp_schema_field() -> impl Strategy<Value = Value> {
    let choice = (field(small_text().prop_map(Value::from)), field(small_text().prop_map(Value::from)))
        .prop_map(|(c, t)| object(vec![("const", c), ("title", t)]));
    (
        field(one_of(&["string", "array", "boolean", "number", "integer", "object"])),
        field(prop::collection::vec(choice, 0..5).prop_map(Value::Array)),
        field(prop::collection::vec(small_text().prop_map(Value::from), 0..4).prop_map(Value::Array)),
        field(small_text().prop_map(Value::from)),
    )
        .prop_map(|(ty, one_of, en, title)| {
            let items = json!({"enum": en.clone().unwrap_or(json!([]))});
            object(vec![("type", ty), ("oneOf", one_of), ("enum", en), ("title", title), ("items", Some(items))])
        })
}

/// The params of `session/request_permission` or `elicitation/create`, usually well
/// formed, often not.
fn acp_request() -> impl Strategy<Value = (bool, Value)> {
    let call = (field(small_text().prop_map(Value::from)), field(small_text().prop_map(Value::from)))
        .prop_map(|(id, title)| object(vec![("toolCallId", id), ("title", title)]));
    let permission = (field(call), field(prop::collection::vec(acp_option(), 0..5).prop_map(Value::Array)))
        .prop_map(|(c, o)| (true, object(vec![("toolCall", c), ("options", o)])));
    let props = prop::collection::vec(
        (prop_oneof![3 => "question_[0-9]{1,2}(_custom)?", 1 => small_text()], acp_schema_field()),
        0..20,
    )
    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()));
    let form = (
        field(one_of(&["form", "url"])),
        field(small_text().prop_map(Value::from)),
        field(props.prop_map(|p| json!({"properties": p}))),
    )
        .prop_map(|(mode, msg, schema)| {
            (false, object(vec![("mode", mode), ("message", msg), ("requestedSchema", schema)]))
        });
    prop_oneof![permission, form, (any::<bool>(), json_value())]
}

fn acp_answers() -> impl Strategy<Value = Vec<lab::agents::model::Answer>> {
    use lab::agents::model::Answer;
    let one = prop_oneof![
        (0u32..8).prop_map(Answer::Option),
        prop::collection::vec(0u32..8, 0..4).prop_map(Answer::Options),
        small_text().prop_map(Answer::Other),
        ((0u32..4), small_text()).prop_map(|(option, text)| Answer::Feedback { option, text }),
    ];
    prop::collection::vec(one, 0..5)
}

/// A request lab cannot use is refused with a reason; one it can use maps to a dialog,
/// and any answers give the agent a result or a clear refusal; never a panic.
#[test]
fn acp_requests_and_answers_survive_anything() {
    use lab::agents::acp::dialog::Request;
    fuzz(
        "ACP requests",
        400,
        Duration::from_secs(8),
        (acp_request(), acp_answers()),
        |((permission, params), answers)| {
            let req = if permission { Request::permission(3, &params) } else { Request::elicitation(3, &params) };
            let Ok(req) = req else { return Ok(()) };
            let d = req.dialog();
            prop_assert!(d.is_ok(), "an accepted request maps to a dialog: {d:?}");
            let d = d.unwrap();
            prop_assert_eq!(lab::agents::acp::dialog::request_number(&d.id), Some(3));
            if let Ok(v) = req.result(&answers) {
                prop_assert!(v.is_object(), "{v}");
            }
            let _ = (req.cancelled(), req.answered_text(&answers));
            let back: Request = serde_json::from_slice(&serde_json::to_vec(&req).unwrap()).unwrap();
            prop_assert_eq!(back, req);
            Ok(())
        },
    );
}

/// JSON-RPC lines, journal lines and `session/update`s of any shape: classified,
/// parsed or skipped, never a panic.
#[test]
fn acp_lines_and_updates_survive_anything() {
    let dir = tempfile::tempdir().unwrap();
    let rec = lab::agents::acp::recorder::Recorder::new("fuzz".into(), dir.path().join("j.jsonl"));
    let update = (
        field(one_of(&[
            "agent_message_chunk",
            "agent_thought_chunk",
            "tool_call",
            "tool_call_update",
            "plan",
            "usage_update",
        ])),
        field(json_value()),
        field(one_of(&["pending", "completed", "failed"])),
        field(json_value()),
    )
        .prop_map(|(k, content, status, raw)| {
            object(vec![
                ("sessionUpdate", k),
                ("content", content),
                ("status", status),
                ("rawOutput", raw),
                ("toolCallId", Some(json!("c"))),
            ])
        });
    let line = prop_oneof![json_bytes(json_value()), prop::collection::vec(any::<u8>(), 0..200)];
    fuzz("ACP lines", 400, Duration::from_secs(8), (line, update), |(bytes, u)| {
        let _ = lab::agents::acp::rpc::parse_line(&bytes);
        let _ = lab::agents::acp::journal::parse(&bytes);
        rec.update(&u);
        Ok(())
    });
    rec.flush();
    let out = lab::agents::acp::journal::parse(&std::fs::read(dir.path().join("j.jsonl")).unwrap_or_default());
    assert!(out.diagnostics.is_empty(), "what the recorder wrote reads back: {:?}", out.diagnostics);
}

// ---- `lab hook`, the real binary ---------------------------------------------------

fn hook_stdin() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => json_bytes(spool_payload()),
        2 => json_bytes(marker_payload()),
        1 => (1usize..3 << 20).prop_map(|n| format!(r#"{{"pad":"{}"}}"#, "z".repeat(n)).into_bytes()),
    ]
}

#[derive(Debug, Clone)]
enum Verb {
    SpoolWrite,
    MarkerWrite,
    SpoolClear,
    Junk(Vec<String>),
}

fn verb() -> impl Strategy<Value = Verb> {
    prop_oneof![
        3 => Just(Verb::SpoolWrite),
        2 => Just(Verb::MarkerWrite),
        2 => Just(Verb::SpoolClear),
        1 => prop::collection::vec(small_text(), 0..4).prop_map(Verb::Junk),
    ]
}

/// Whether `lab hook` must write this payload: one JSON object within the limit.
fn acceptable(stdin: &[u8]) -> bool {
    stdin.len() <= lab::agents::hook::MAX_PAYLOAD && serde_json::from_slice::<Value>(stdin).is_ok_and(|v| v.is_object())
}

#[test]
fn lab_hook_exits_0_silently_and_writes_whole_files_or_nothing() {
    let d = tempfile::tempdir().unwrap();
    fuzz("lab hook", 60, Duration::from_secs(15), (verb(), hook_stdin()), |(verb, stdin)| {
        let dir = tempfile::tempdir_in(d.path()).unwrap();
        let target = dir.path().join("r-1.spool.json");
        let previous = br#"{"tool_use_id":"toolu_1","tool_name":"AskUserQuestion","tool_input":{}}"#;
        let mut args: Vec<String> = vec!["hook".into()];
        match &verb {
            Verb::SpoolWrite => args.extend(["spool-write".into(), target.display().to_string()]),
            Verb::MarkerWrite => args.extend(["marker-write".into(), target.display().to_string()]),
            Verb::SpoolClear => {
                std::fs::write(&target, previous).unwrap();
                args.extend([
                    "spool-clear".into(),
                    target.display().to_string(),
                    "--id-field".into(),
                    "tool_use_id".into(),
                ])
            }
            Verb::Junk(junk) => args.extend(junk.iter().cloned()),
        }
        let started = Instant::now();
        let mut child = Command::new(LAB)
            .args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        let feed = stdin.clone();
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&feed);
        });
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                return Err(TestCaseError::fail("lab hook hung"));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        writer.join().unwrap();
        let out = child.wait_with_output().unwrap();
        prop_assert_eq!(status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
        prop_assert!(out.stdout.is_empty(), "stdout: {:?}", String::from_utf8_lossy(&out.stdout));
        let files: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        prop_assert!(files.iter().all(|f| f == "r-1.spool.json"), "left behind: {files:?}");
        let now = std::fs::read(&target).ok();
        match verb {
            Verb::SpoolWrite | Verb::MarkerWrite if acceptable(&stdin) => prop_assert_eq!(now, Some(stdin)),
            Verb::SpoolWrite | Verb::MarkerWrite | Verb::Junk(_) => prop_assert_eq!(now, None),
            Verb::SpoolClear => {
                let same_id =
                    acceptable(&stdin) && serde_json::from_slice::<Value>(&stdin).unwrap()["tool_use_id"] == "toolu_1";
                let expected = if same_id { None } else { Some(previous.to_vec()) };
                prop_assert_eq!(now, expected);
            }
        }
        Ok(())
    });
}

// ---- HTTP bodies of a running lab serve --------------------------------------------

#[derive(Debug, Clone)]
struct Request {
    route: usize,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

/// Bodies shaped for `route` (0: create, 1: message, 2: answer), damaged or not, or
/// anything at all.
fn http_request() -> impl Strategy<Value = Request> {
    let create = (
        field(one_of(&["claude-code", "plainlog"])),
        field(small_text().prop_map(|s| Value::from(format!("/nonexistent-lab-fuzz/{s}")))),
        field(text().prop_map(Value::from)),
        field(one_of(&["auto", "plan", "default", "bypassPermissions"])),
    )
        .prop_map(|(p, w, t, m)| object(vec![("provider", p), ("workdir", w), ("prompt", t), ("permission_mode", m)]));
    // Messages are kept short: typing them into the agent takes real time.
    let message = field("[a-z][a-z ]{0,11}".prop_map(Value::from)).prop_map(|t| object(vec![("text", t)]));
    let answer_item = prop_oneof![
        3 => (0u32..5).prop_map(|i| json!({"option": i})),
        1 => any::<i64>().prop_map(|i| json!({"option": i})),
        1 => prop::collection::vec(any::<i32>(), 0..4).prop_map(|v| json!({"options": v})),
        1 => small_text().prop_map(|t| json!({"other": t})),
        1 => json_value(),
    ];
    let answer = (
        field(prop_oneof![Just(Value::from("toolu_01")), small_text().prop_map(Value::from)]),
        field(prop::collection::vec(answer_item, 1..3).prop_map(Value::Array)),
    )
        .prop_map(|(id, answers)| object(vec![("tool_id", id), ("answers", answers)]));
    let anything = prop_oneof![
        2 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => prop::collection::vec(any::<u8>(), 0..1024),
        // Over every body limit (a long message typed into the agent is for the input
        // tests: it needs the paste path).
        1 => ((2usize << 20) + 64..3 << 20).prop_map(|n| format!(r#"{{"text":"{}"}}"#, "a".repeat(n)).into_bytes()),
    ];
    let content_type = prop_oneof![
        6 => Just(Some("application/json")),
        1 => Just(Some("application/json; charset=utf-8")),
        1 => Just(Some("text/plain")),
        1 => Just(None),
    ];
    let shaped = prop_oneof![
        (Just(0usize), json_bytes(create)),
        (Just(1usize), json_bytes(message)),
        (Just(2usize), json_bytes(answer)),
    ];
    let body = prop_oneof![3 => shaped, 1 => (0usize..5, anything)];
    (body, content_type).prop_map(|((route, body), content_type)| Request { route, content_type, body })
}

#[derive(Debug, Clone)]
struct EdgeRequest {
    post: bool,
    path: usize,
    host: String,
    origin: Option<String>,
    fetch_site: Option<String>,
    auth: Option<String>,
    cookie: Option<String>,
    content_type: Option<String>,
}

/// A header value reqwest can send (visible ASCII and spaces), sometimes a usual one.
fn header_value(usual: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        2 => Just(None),
        3 => prop::sample::select(usual).prop_map(|s| Some(s.to_string())),
        1 => "[ -~]{0,40}".prop_map(|s| Some(s.trim().to_string())),
    ]
}

fn http_edge_request() -> impl Strategy<Value = EdgeRequest> {
    let host = prop_oneof![
        3 => prop::sample::select(&["127.0.0.1:PORT", "localhost:PORT", "app.localhost:PORT", "[::1]:PORT"][..]).prop_map(String::from),
        2 => prop::sample::select(&["evil.example", "evil.example:PORT", "127.0.0.1.nip.io:PORT", "10.0.0.1:PORT", "localhost.evil:PORT"][..]).prop_map(String::from),
        1 => "[!-~]{1,40}",
    ];
    (
        any::<bool>(),
        0usize..6,
        host,
        header_value(&[
            "http://127.0.0.1:PORT",
            "http://localhost:PORT",
            "null",
            "https://evil.example",
            "http://127.0.0.1:1",
        ]),
        header_value(&["same-origin", "cross-site", "same-site", "none"]),
        header_value(&["Bearer x", "Bearer ", "Basic Zm9vOmJhcg=="]),
        header_value(&["lab_session=x", "lab_session="]),
        header_value(&[
            "application/json",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ]),
    )
        .prop_map(|(post, path, host, origin, fetch_site, auth, cookie, content_type)| EdgeRequest {
            post,
            path,
            host,
            origin,
            fetch_site,
            auth,
            cookie,
            content_type,
        })
}

#[test]
fn http_bodies_never_500_never_hang_and_lab_keeps_serving() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let mut lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run["id"].as_str().unwrap().to_string();
    lab.wait_state(&id, "idle");
    let routes = [
        "/runs".to_string(),
        format!("/runs/{id}/messages"),
        format!("/runs/{id}/dialog/answer"),
        "/runs/r-000000000000/messages".to_string(),
        "/runs/..%2F..%2Fetc/dialog/answer".to_string(),
    ];
    // A fresh connection per request: after refusing a large body the server may close
    // a connection the client would otherwise reuse (a client artefact, not an answer).
    let client = lab
        .client_from(reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).pool_max_idle_per_host(0));
    // Status 0: lab refused an oversized body before the client finished sending it
    // (the client then sees a broken pipe instead of the 413); lab must still serve.
    let send = |path: &str, content_type: Option<&str>, body: Vec<u8>| -> Result<(u16, Vec<u8>), String> {
        let oversized = body.len() > 1 << 20;
        let mut r = client.post(format!("{}{path}", lab.url)).body(body);
        if let Some(ct) = content_type {
            r = r.header("content-type", ct);
        }
        let r = match r.send() {
            Ok(r) => r,
            Err(e) if oversized && !e.is_timeout() => {
                let alive = client.get(format!("{}/providers", lab.url)).send().map(|r| r.status().as_u16());
                return match alive {
                    Ok(200) => Ok((0, Vec::new())),
                    other => Err(format!("lab stopped answering after an oversized body ({e:?}): {other:?}")),
                };
            }
            Err(e) => return Err(format!("no answer: {e:?}")),
        };
        let status = r.status().as_u16();
        Ok((status, r.bytes().map_err(|e| e.to_string())?.to_vec()))
    };
    let statuses = std::cell::RefCell::new(std::collections::BTreeMap::<(usize, u16), u32>::new());
    fuzz("http", 300, Duration::from_secs(25), http_request(), |req| {
        let path = &routes[req.route];
        let (status, body) = send(path, req.content_type, req.body).map_err(TestCaseError::fail)?;
        *statuses.borrow_mut().entry((req.route, status)).or_insert(0) += 1;
        prop_assert!(status < 500, "{path}: {status} {}", String::from_utf8_lossy(&body));
        if status >= 400 {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|_| TestCaseError::fail(format!("{path}: {status} is not JSON: {body:?}")))?;
            prop_assert!(v["error"].is_string() && v["message"].is_string(), "{path}: {status} {v}");
        }
        Ok(())
    });
    eprintln!("(route, status): count = {:?}", statuses.borrow());
    // Bodies reached the handlers: some were accepted, not all refused at the door.
    assert!(statuses.borrow().keys().any(|(_, s)| *s == 202), "no message was ever accepted");

    // The edge itself: random Host, Origin, Sec-Fetch-Site, credentials and content
    // types on GET and POST routes. Never a 5xx, every refusal is lab's JSON error.
    let port = lab.url.rsplit(':').next().unwrap().to_string();
    let edge_statuses = std::cell::RefCell::new(std::collections::BTreeMap::<u16, u32>::new());
    let paths = ["/", "/runs", "/providers", "/nope", "/login", "/app.js"];
    fuzz("http edge", 1000, Duration::from_secs(15), http_edge_request(), |req| {
        let host = req.host.replace("PORT", &port);
        let path = paths[req.path % paths.len()];
        let mut r = if req.post {
            client.post(format!("{}{path}", lab.url)).body("{}")
        } else {
            client.get(format!("{}{path}", lab.url))
        };
        r = r.header("host", host.as_str());
        for (name, value) in [
            ("origin", &req.origin),
            ("sec-fetch-site", &req.fetch_site),
            ("authorization", &req.auth),
            ("cookie", &req.cookie),
            ("content-type", &req.content_type),
        ] {
            if let Some(v) = value {
                r = r.header(name, v.replace("PORT", &port));
            }
        }
        let resp = r.send().map_err(|e| TestCaseError::fail(format!("no answer for {req:?}: {e:?}")))?;
        let status = resp.status().as_u16();
        let body = resp.bytes().map_err(|e| TestCaseError::fail(e.to_string()))?;
        *edge_statuses.borrow_mut().entry(status).or_insert(0) += 1;
        prop_assert!(status < 500, "{req:?}: {status}");
        // `GET /` without the token is the login form (401, HTML) a browser shows.
        let login_form = status == 401 && !req.post && path == "/" && body.starts_with(b"<!doctype html>");
        if status >= 400 && !login_form {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|_| TestCaseError::fail(format!("{req:?}: {status} is not JSON: {body:?}")))?;
            prop_assert!(v["error"].is_string(), "{req:?}: {status} {v}");
        }
        Ok(())
    });
    eprintln!("edge status: count = {:?}", edge_statuses.borrow());
    for refused in [421, 403] {
        assert!(edge_statuses.borrow().contains_key(&refused), "the edge never answered {refused}");
    }

    // The stop route last (it ends the run), with junk.
    for body in [&b"\xff\xfe"[..], b"{}", b"[", b""] {
        let (status, _) = send(&format!("/runs/{id}/stop"), Some("application/json"), body.to_vec()).unwrap();
        assert!(status < 500, "stop: {status}");
    }
    assert!(lab.child.try_wait().unwrap().is_none(), "lab serve exited");
    let (status, providers) = lab.get("/providers");
    assert_eq!(status, 200, "{providers}");
    let (status, runs) = lab.get("/runs");
    assert_eq!(status, 200);
    assert!(runs.as_array().unwrap().iter().all(|r| r["workdir"] != "/"), "{runs}");
}
