//! What an ACP agent says of its usage, read from the protocol itself (pure): the
//! `usage` of a `session/prompt` response (`inputTokens`, `outputTokens`,
//! `cachedReadTokens`, `cachedWriteTokens`, `thoughtTokens`, `totalTokens`), a
//! `usage_update` session update (`used`, `size`: the context window), and the model a
//! session says it uses (`models.currentModelId`, or the `model` config option). The
//! recorder journals them; the journal's reader gives them to the usage book.

use crate::agents::model::{ContextUse, Tokens};
use serde_json::Value;

/// The tokens a prompt response reports; None when it reports none (an agent that does
/// not say, or says only in its own `_meta`).
pub fn turn_tokens(result: &Value) -> Option<Tokens> {
    let u = result.get("usage").filter(|u| u.is_object())?;
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    let (input, output, cache_read, cache_write, thought) =
        (n("inputTokens"), n("outputTokens"), n("cachedReadTokens"), n("cachedWriteTokens"), n("thoughtTokens"));
    if u["inputTokens"].as_u64().is_none() && u["outputTokens"].as_u64().is_none() {
        return None;
    }
    // Agents read the fields two ways; their own total tells which. Cached tokens: apart
    // from `inputTokens` (the total adds them on) or inside it (the total does not), and
    // then taken out of it. Thought tokens: apart from `outputTokens`, or inside it.
    let total = n("totalTokens");
    let cached = cache_read + cache_write;
    let within = cached > 0 && total > 0 && total < input + output + cached && input >= cached;
    let input = if within { input - cached } else { input };
    let apart = thought > 0 && total >= input + output + cached + thought;
    Some(Tokens { input, output: output + if apart { thought } else { 0 }, cache_read, cache_write })
}

/// How full the context window is, from a `usage_update`.
pub fn context(update: &Value) -> Option<ContextUse> {
    let used = update["used"].as_u64()?;
    Some(ContextUse { used, window: update["size"].as_u64().filter(|s| *s > 0) })
}

/// The model a `session/new` (or `session/load`) result says the session uses, as a
/// price table names it: `provider/model` ids lose their provider. None when it does
/// not say, or says only a router (`auto`).
pub fn session_model(result: &Value) -> Option<String> {
    let from_models = result["models"]["currentModelId"].as_str();
    let from_options = || {
        result["configOptions"].as_array()?.iter().find(|o| o["category"] == "model" || o["id"] == "model")?
            ["currentValue"]
            .as_str()
    };
    let id = from_models.or_else(from_options)?;
    let name = id.rsplit('/').next().unwrap_or(id).trim();
    (!name.is_empty() && name != "auto" && name.len() <= 200).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_response_s_usage_becomes_tokens_and_its_absence_none() {
        // As an agent reported a turn: the total is the sum of the four.
        let r = json!({"stopReason": "end_turn", "usage": {"inputTokens": 7718, "outputTokens": 6,
            "totalTokens": 7939, "cachedReadTokens": 199, "cachedWriteTokens": 16}});
        assert_eq!(turn_tokens(&r), Some(Tokens { input: 7718, output: 6, cache_read: 199, cache_write: 16 }));
        // Another agent's reading: its input holds the cached tokens, its total does not
        // add them on again; the cached part is taken out of the input.
        let inside = json!({"usage": {"inputTokens": 21694, "outputTokens": 30, "totalTokens": 21724,
            "cachedReadTokens": 299, "cachedWriteTokens": 69}});
        assert_eq!(turn_tokens(&inside), Some(Tokens { input: 21326, output: 30, cache_read: 299, cache_write: 69 }));
        let apart = json!({"usage": {"inputTokens": 10, "outputTokens": 5, "thoughtTokens": 3, "totalTokens": 18}});
        assert_eq!(turn_tokens(&apart).unwrap().output, 8, "thought tokens the total holds apart are output");
        let within = json!({"usage": {"inputTokens": 10, "outputTokens": 5, "thoughtTokens": 3, "totalTokens": 15}});
        assert_eq!(turn_tokens(&within).unwrap().output, 5, "not twice");
        assert_eq!(turn_tokens(&json!({"stopReason": "end_turn", "_meta": {"quota": {}}})), None);
        assert_eq!(turn_tokens(&json!({"usage": "lots"})), None);
        assert_eq!(turn_tokens(&json!({"usage": {}})), None);
    }

    #[test]
    fn the_context_and_the_model_as_sessions_say_them() {
        assert_eq!(
            context(&json!({"sessionUpdate": "usage_update", "used": 7933, "size": 1000000})),
            Some(ContextUse { used: 7933, window: Some(1_000_000) })
        );
        assert_eq!(context(&json!({"sessionUpdate": "usage_update"})), None);
        let oc = json!({"configOptions": [{"id": "model", "category": "model", "currentValue": "acme/model-7"}]});
        assert_eq!(session_model(&oc).as_deref(), Some("model-7"));
        assert_eq!(session_model(&json!({"models": {"currentModelId": "model-8"}})).as_deref(), Some("model-8"));
        assert_eq!(session_model(&json!({"models": {"currentModelId": "auto"}})), None, "a router is no model");
        assert_eq!(session_model(&json!({})), None);
    }
}
