//! Small JSON helpers for reading agent payloads without a schema.

use serde_json::Value;

/// The string at a `/`-separated path (`"message/role"`), if it is a string.
pub fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    at(v, path)?.as_str()
}

/// The value at a `/`-separated path; array elements by index (`"content/0/text"`).
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').filter(|p| !p.is_empty()).try_fold(v, |cur, key| match cur {
        Value::Object(m) => m.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// A required string field, with an error that names it.
pub fn require_str<'a>(v: &'a Value, path: &str) -> Result<&'a str, String> {
    str_at(v, path).ok_or_else(|| format!("missing string field `{path}`"))
}

/// Parse bytes as a JSON object, with a clear error.
pub fn object(bytes: &[u8]) -> Result<Value, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err("not a JSON object".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let v = json!({"a": {"b": [{"c": "x"}]}});
        assert_eq!(str_at(&v, "a/b/0/c"), Some("x"));
        assert_eq!(str_at(&v, "a/b/1/c"), None);
        assert!(require_str(&v, "a/z").unwrap_err().contains("a/z"));
        assert!(object(b"[1]").is_err());
        assert!(object(b"{").unwrap_err().starts_with("not JSON"));
    }
}
