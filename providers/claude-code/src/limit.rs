//! Claude Code stopped because its account reached a usage limit, and when it resets.
//!
//! What the transcript shows (as [`crate::transcript`] turns it into messages):
//!
//! - 2.1.332 with an API key, the API answering `429 rate_limit_error` (observed): an
//!   `assistant` line with `isApiErrorMessage: true`, `error: "rate_limit"` and the text
//!   `API Error: Request rejected (429) · <the API's message>`, which becomes the system
//!   message `turn_error` "Rate limited: API Error: Request rejected (429) · …". Claude
//!   Code puts no reset time of its own in it; one is known only when the API's message
//!   names it.
//! - A subscription's limits, in Claude Code's words: "You've hit your session limit ·
//!   resets 3pm (UTC)", "… usage limit reached …"; older releases wrote
//!   `Claude AI usage limit reached|<reset as Unix seconds>`.
//!
//! A reset time is read from `|<seconds>`, from `resets <RFC 3339 time>`, or from
//! `resets <h>[:mm[:ss]][am|pm] (UTC)` — the next such time after the message's own
//! timestamp. A time in another zone is not converted (a component has no time zone
//! data): the limit is reported without a reset time, and lab does not guess one.

use lab_provider_sdk::{Content, Message, Role, UsageLimit};

/// Whether `msg` says Claude Code stopped at a usage limit, and when it resets.
pub fn usage_limit(msg: &Message) -> Option<UsageLimit> {
    if !matches!(msg.role, Role::System | Role::Assistant) {
        return None;
    }
    let text = match &msg.content {
        Content::Text(t) => t,
        Content::Other((_, t)) => t,
        _ => return None,
    };
    let lower = text.to_ascii_lowercase();
    let said = lower.starts_with("rate limited:")
        || lower.contains("usage limit reached")
        || (lower.contains("hit your") && lower.contains("limit"));
    if !said {
        return None;
    }
    Some(UsageLimit { resets_at: resets_at(text, &msg.timestamp), text: text.clone() })
}

/// When the limit `text` speaks of resets, in Unix seconds.
fn resets_at(text: &str, timestamp: &str) -> Option<i64> {
    if let Some((_, secs)) = text.rsplit_once('|') {
        if let Ok(s) = secs.trim().parse::<i64>() {
            return Some(s);
        }
    }
    let lower = text.to_ascii_lowercase();
    let after = &text[lower.find("resets ")? + "resets ".len()..];
    let after = after.strip_prefix("at ").unwrap_or(after);
    let word = after.split_whitespace().next()?.trim_end_matches(['.', ',', ')']);
    if let Some(t) = rfc3339(word) {
        return Some(t);
    }
    // A time of day: only in UTC (said so, or in a `Z` form).
    let rest = after[after.find(word)? + word.len()..].trim_start();
    if !(rest.starts_with("(UTC)") || rest.starts_with("UTC")) {
        return None;
    }
    let of_day = time_of_day(word)?;
    let now = rfc3339(timestamp)?;
    let day = now - now.rem_euclid(86_400);
    let at = day + of_day;
    Some(if at <= now { at + 86_400 } else { at })
}

/// `3pm`, `3:30pm`, `11:24:31pm`, `15:30`, `15:30:05` → seconds into the day.
fn time_of_day(word: &str) -> Option<i64> {
    let w = word.to_ascii_lowercase();
    let (clock, half) = match (w.strip_suffix("am"), w.strip_suffix("pm")) {
        (Some(c), _) => (c.to_string(), Some(false)),
        (_, Some(c)) => (c.to_string(), Some(true)),
        _ => (w.clone(), None),
    };
    let parts: Vec<i64> = clock.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let (h, m, s) = match parts[..] {
        [h] if half.is_some() => (h, 0, 0),
        [h, m] => (h, m, 0),
        [h, m, s] => (h, m, s),
        _ => return None,
    };
    if !(0..60).contains(&m) || !(0..60).contains(&s) {
        return None;
    }
    let h = match half {
        Some(pm) if (1..=12).contains(&h) => h % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None if (0..24).contains(&h) => h,
        None => return None,
    };
    Some(h * 3600 + m * 60 + s)
}

/// `2026-12-04T23:20:56(.123)Z` (UTC only) → Unix seconds.
fn rfc3339(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !t.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(text: &str, ts: &str) -> Message {
        Message {
            role: Role::System,
            content: Content::Other(("turn_error".into(), text.into())),
            timestamp: ts.into(),
        }
    }

    const AT: &str = "2026-12-04T23:20:56.562Z";
    const AT_SECS: i64 = 1_796_426_456;

    #[test]
    fn the_observed_rate_limit_is_a_limit_with_no_reset_time() {
        let text = "Rate limited: API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.";
        assert_eq!(usage_limit(&sys(text, AT)), Some(UsageLimit { resets_at: None, text: text.into() }));
    }

    #[test]
    fn a_reset_time_is_read_where_it_is_said() {
        let at = |text: &str| usage_limit(&sys(text, AT)).and_then(|l| l.resets_at);
        assert_eq!(at("Claude AI usage limit reached|1796430000"), Some(1_796_430_000));
        assert_eq!(at("Rate limited: API Error: Request rejected (429) · You've hit your session limit · resets 2026-12-05T01:00:00Z."), Some(AT_SECS - 23 * 3600 - 20 * 60 - 56 + 86_400 + 3600));
        assert_eq!(at("You've hit your session limit · resets 11:21:30pm (UTC)"), Some(AT_SECS + 34), "later today");
        assert_eq!(
            at("You've hit your session limit · resets 3pm (UTC)"),
            Some(AT_SECS - 8 * 3600 - 20 * 60 - 56 + 86_400),
            "tomorrow"
        );
        assert_eq!(at("You've hit your weekly limit · resets 23:30 UTC"), Some(AT_SECS + 9 * 60 + 4));
        assert_eq!(at("You've hit your session limit · resets 3pm (Europe/Berlin)"), None, "no zone data: not guessed");
        assert_eq!(at("You've hit your session limit · resets 13pm (UTC)"), None);
        assert_eq!(at("You've hit your session limit"), None);
    }

    #[test]
    fn other_messages_are_not_limits() {
        assert_eq!(usage_limit(&sys("API server error: API Error: 529 Overloaded", AT)), None);
        let user =
            Message { role: Role::User, content: Content::Text("usage limit reached".into()), timestamp: AT.into() };
        assert_eq!(usage_limit(&user), None, "the operator's words are not the agent's");
        let tool = Message {
            role: Role::Assistant,
            content: Content::Thinking("I hit your limit".into()),
            timestamp: AT.into(),
        };
        assert_eq!(usage_limit(&tool), None);
    }
}
