//! The time as lab writes it in records, journals and payloads.

use std::time::SystemTime;

/// Now, as RFC 3339 UTC with milliseconds (`2026-12-04T13:39:41.123Z`).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_rfc3339_utc_with_milliseconds() {
        let now = super::now_rfc3339();
        assert_eq!(now.len(), "2026-12-04T13:39:41.123Z".len(), "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
        assert!(humantime::parse_rfc3339(&now).is_ok(), "{now}");
    }
}
