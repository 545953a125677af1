//! What Codex's rollout says about usage (WIT `usage`).
//!
//! | line | usage |
//! |---|---|
//! | `turn_context` | `payload.model`: the model the next responses come from |
//! | `token_usage_record` | one response: `payload.response_id`, `payload.usage` (`input_tokens` counts the cached ones too: input = input − `cached_input_tokens`; `cached_input_tokens` → cache read, `cache_write_input_tokens` → cache write; `output_tokens` includes reasoning) |
//! | `event_msg` `token_count` | the context in use (`info.last_token_usage.total_tokens` of `info.model_context_window`) and the account's windows (`rate_limits.primary` / `secondary`: `used_percent`, `window_minutes`, `resets_at` or `resets_in_seconds`) |
//! | `event_msg` `error` / `stream_error` | an API error (`message`) |
//!
//! `token_count` repeats the totals after each response (`last_token_usage` is the same
//! response as the `token_usage_record` before it, observed in 0.169.0): its numbers
//! are never counted as a response, only `token_usage_record`s are.

use lab_provider_sdk::json::{at, str_at};
use lab_provider_sdk::{jsonl, ApiError, ContextUse, LimitWindow, ResponseUsage, Tokens, UsageReport};
use serde_json::Value;

pub fn read_usage(chunk: &[u8]) -> UsageReport {
    let mut out = UsageReport::default();
    for (_, raw) in jsonl::lines(chunk) {
        let Ok(v) = serde_json::from_slice::<Value>(raw) else { continue };
        let timestamp = str_at(&v, "timestamp").unwrap_or("").to_string();
        let Some(p) = v.get("payload") else { continue };
        match str_at(&v, "type").unwrap_or("") {
            "turn_context" => {
                if let Some(m) = str_at(p, "model").filter(|m| !m.is_empty()) {
                    out.model = Some(m.to_string());
                }
            }
            "token_usage_record" => {
                let (Some(id), Some(u)) = (str_at(p, "response_id"), p.get("usage")) else { continue };
                let n = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
                let cached = n("cached_input_tokens");
                let tokens = Tokens {
                    input: n("input_tokens").saturating_sub(cached),
                    output: n("output_tokens"),
                    cache_read: cached,
                    cache_write: n("cache_write_input_tokens"),
                };
                out.responses.push(ResponseUsage { response_id: id.to_string(), model: None, tokens, timestamp });
            }
            "event_msg" => match str_at(p, "type").unwrap_or("") {
                "token_count" => token_count(p, &v, &mut out),
                "error" | "stream_error" => {
                    let text = str_at(p, "message").unwrap_or("error").to_string();
                    out.errors.push(ApiError { text, timestamp });
                }
                _ => {}
            },
            _ => {}
        }
    }
    out
}

fn token_count(p: &Value, line: &Value, out: &mut UsageReport) {
    if let Some(last) = at(p, "info/last_token_usage") {
        let n = |key: &str| last.get(key).and_then(Value::as_u64);
        let used = n("total_tokens").or_else(|| Some(n("input_tokens")? + n("output_tokens").unwrap_or(0)));
        if let Some(used) = used {
            let window = at(p, "info/model_context_window").and_then(Value::as_u64);
            out.context = Some(ContextUse { used, window });
        }
    }
    let now = str_at(line, "timestamp").and_then(unix_seconds);
    let windows: Vec<LimitWindow> = ["primary", "secondary"]
        .iter()
        .filter_map(|k| at(p, &format!("rate_limits/{k}")).filter(|w| w.is_object()))
        .filter_map(|w| {
            let used_percent = w.get("used_percent").and_then(Value::as_f64)?;
            let minutes = w.get("window_minutes").and_then(Value::as_u64).and_then(|m| u32::try_from(m).ok());
            let resets_at = w.get("resets_at").and_then(Value::as_i64).or_else(|| {
                let secs = w.get("resets_in_seconds").and_then(Value::as_i64)?;
                Some(now? + secs)
            });
            let used_permille = (used_percent.clamp(0.0, 100.0) * 10.0).round() as u32;
            Some(LimitWindow { name: window_name(minutes), used_permille, resets_at, minutes })
        })
        .collect();
    if !windows.is_empty() {
        out.windows = windows;
    }
}

/// "5h", "weekly", "90 min": what the UI calls a window of that length.
fn window_name(minutes: Option<u32>) -> String {
    match minutes {
        Some(10080) => "weekly".into(),
        Some(1440) => "daily".into(),
        Some(m) if m % 60 == 0 => format!("{}h", m / 60),
        Some(m) => format!("{m} min"),
        None => "limit".into(),
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time ("2026-11-30T10:41:33.740Z").
fn unix_seconds(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + h * 3600 + mi * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_come_from_usage_records_and_the_context_and_windows_from_token_counts() {
        // Lines as codex 0.169.0 wrote them (notes/codex-0.169.0/rollout_after.jsonl), the
        // windows as a signed-in account's rollout carries them.
        let chunk = [
            r#"{"timestamp":"2026-11-30T10:41:33.700Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.1-codex"}}"#,
            r#"{"timestamp":"2026-11-30T10:41:33.888Z","type":"token_usage_record","payload":{"response_id":"resp_1","usage":{"input_tokens":1000,"cached_input_tokens":800,"cache_write_input_tokens":0,"output_tokens":50,"reasoning_output_tokens":20,"total_tokens":1050}}}"#,
            r#"{"timestamp":"2026-11-30T10:41:34.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"output_tokens":50,"total_tokens":1050},"last_token_usage":{"input_tokens":1000,"output_tokens":50,"total_tokens":1050},"model_context_window":258400},"rate_limits":{"primary":{"used_percent":12.5,"window_minutes":300,"resets_in_seconds":600},"secondary":{"used_percent":40.0,"window_minutes":10080,"resets_at":1765000000}}}}"#,
            r#"{"timestamp":"2026-11-30T10:41:35.000Z","type":"event_msg","payload":{"type":"error","message":"stream disconnected"}}"#,
        ]
        .join("\n")
            + "\n";
        let out = read_usage(chunk.as_bytes());
        assert_eq!(out.model.as_deref(), Some("gpt-5.1-codex"));
        assert_eq!(out.responses.len(), 1, "token_count's repeat is not a response");
        assert_eq!(out.responses[0].response_id, "resp_1");
        assert_eq!(out.responses[0].tokens, Tokens { input: 200, output: 50, cache_read: 800, cache_write: 0 });
        assert_eq!(out.context, Some(ContextUse { used: 1050, window: Some(258400) }));
        let at_line = unix_seconds("2026-11-30T10:41:34.000Z").unwrap();
        assert_eq!(
            out.windows,
            vec![
                LimitWindow {
                    name: "5h".into(),
                    used_permille: 125,
                    resets_at: Some(at_line + 600),
                    minutes: Some(300)
                },
                LimitWindow {
                    name: "weekly".into(),
                    used_permille: 400,
                    resets_at: Some(1765000000),
                    minutes: Some(10080)
                },
            ]
        );
        assert_eq!(out.errors.len(), 1);
    }

    #[test]
    fn an_rfc3339_time_is_read_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_seconds("2026-11-30T10:41:34.000Z"), Some(1796035294));
        assert_eq!(unix_seconds("nope"), None);
    }
}
