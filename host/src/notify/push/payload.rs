//! What one push carries (pure): the run, its state, a title and body a lock screen
//! shows, the run's URL, and the dialog it waits on with the options a notification can
//! offer as buttons. Cut to fit one push (≤ [`MAX_ENCRYPTED`] bytes after encryption).

use crate::agents::model::DialogBody;
use crate::notify;
use crate::runs::live::view::RunState;
use crate::runs::Change;
use crate::store::paths::RunId;
use serde::Serialize;

/// The largest push lab sends, encrypted (RFC 8291 `aes128gcm`, one record).
pub const MAX_ENCRYPTED: usize = 3072;
/// What encryption adds to the plaintext: the header (salt 16, record size 4, key id
/// length 1, key id 65), the padding delimiter (1) and the AES-GCM tag (16).
pub const ENCRYPTION_OVERHEAD: usize = 16 + 4 + 1 + 65 + 1 + 16;
/// The plaintext JSON at most.
pub const MAX_PLAINTEXT: usize = MAX_ENCRYPTED - ENCRYPTION_OVERHEAD;
/// A notification shows this many option buttons at most (more open the run).
pub const MAX_OPTIONS: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushOption {
    pub label: String,
    /// The option's index in the dialog: the answer is `{"option": <this>}` (the list
    /// leaves out an option that asks for text, so it is not always the position here).
    pub option: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushDialog {
    pub tool_id: String,
    pub kind: &'static str,
    pub options: Vec<PushOption>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushPayload {
    pub run_id: RunId,
    pub state: RunState,
    pub title: String,
    pub body: String,
    /// The run in the UI, relative to lab's origin (the service worker opens it there).
    pub url: String,
    pub dialog: Option<PushDialog>,
}

/// The options a notification can answer with: an answerable dialog's own, except one
/// that asks for text (a feedback option); a question only when it is one question of
/// one choice. Empty: the notification only opens the run.
fn options(d: &crate::agents::model::Dialog) -> Vec<PushOption> {
    if !d.answerable {
        return Vec::new();
    }
    let (opts, feedback) = match &d.body {
        DialogBody::Question(qs) if qs.len() == 1 && !qs[0].multi_select => (&qs[0].options, None),
        DialogBody::Question(_) => return Vec::new(),
        DialogBody::Plan { options, feedback_option, .. } | DialogBody::Permission { options, feedback_option, .. } => {
            (options, *feedback_option)
        }
        DialogBody::Generic { options, .. } => (options, None),
    };
    opts.iter()
        .enumerate()
        .filter(|(i, _)| feedback != Some(*i as u32))
        .take(MAX_OPTIONS)
        .map(|(i, o)| PushOption { label: o.label.clone(), option: i as u32 })
        .collect()
}

/// The push for `change` (the same words as the webhook's title and summary).
pub fn payload(change: &Change) -> PushPayload {
    let words = notify::payload(change, "", String::new());
    let dialog = change.after.pending_dialog.as_ref().map(|p| &p.dialog);
    PushPayload {
        run_id: change.run_id.clone(),
        state: change.after.state,
        title: words.title,
        body: words.summary,
        url: format!("/#/runs/{}", change.run_id),
        dialog: dialog.map(|d| PushDialog { tool_id: d.id.clone(), kind: d.kind(), options: options(d) }),
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", crate::util::text::head(text, max.saturating_sub('…'.len_utf8())))
}

/// The payload's JSON, cut until it fits [`MAX_PLAINTEXT`]: the body first, then the
/// option labels, then the title; the last resort drops the options (the notification
/// then opens the run).
pub fn encode(p: &PushPayload) -> Vec<u8> {
    let mut p = p.clone();
    let (mut body_max, mut label_max, mut title_max) = (1200, 120, 200);
    loop {
        let json = serde_json::to_vec(&p).unwrap_or_default();
        if json.len() <= MAX_PLAINTEXT {
            return json;
        }
        let options = p.dialog.as_mut().map(|d| &mut d.options);
        if p.body.len() > body_max {
            p.body = cut(&p.body, body_max);
        } else if let Some(opts) = options.filter(|o| o.iter().any(|o| o.label.len() > label_max)) {
            for o in opts.iter_mut() {
                o.label = cut(&o.label, label_max);
            }
        } else if p.title.len() > title_max {
            p.title = cut(&p.title, title_max);
        } else if body_max > 60 || label_max > 24 || title_max > 60 {
            body_max = (body_max / 2).max(60);
            label_max = (label_max / 2).max(24);
            title_max = (title_max / 2).max(60);
        } else if let Some(d) = p.dialog.as_mut().filter(|d| !d.options.is_empty()) {
            d.options.clear();
        } else {
            // Only lab's own short ids are left.
            return json;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::{Dialog, DialogOption, Question};
    use crate::runs::live::view::{Derived, DialogSource, PendingDialog};

    fn derived(state: RunState, dialog: Option<Dialog>) -> Derived {
        Derived {
            state,
            pending_dialog: dialog.map(|dialog| PendingDialog { dialog, source: DialogSource::Spool }),
            blocked: None,
            spool_is_stale: false,
            turn_idle: false,
        }
    }

    fn change(state: RunState, dialog: Option<Dialog>) -> Change {
        Change {
            run_id: RunId::parse("r-0123456789ab").unwrap(),
            provider: "p".into(),
            workdir: "/srv/webshop".into(),
            before: Some(derived(RunState::Working, None)),
            after: derived(state, dialog),
            answered_by: None,
        }
    }

    fn opt(l: &str) -> DialogOption {
        DialogOption { label: l.into(), description: String::new() }
    }

    fn permission(options: Vec<DialogOption>, feedback: Option<u32>, answerable: bool) -> Dialog {
        Dialog {
            id: "t-1".into(),
            call_id: None,
            tool_name: "T".into(),
            body: DialogBody::Permission {
                tool: "Shell".into(),
                summary: "rm -rf build".into(),
                reason: None,
                options,
                feedback_option: feedback,
            },
            answerable,
            deep_link: None,
        }
    }

    #[test]
    fn a_permission_offers_its_options_but_not_the_one_asking_for_text() {
        let p = payload(&change(
            RunState::Question,
            Some(permission(vec![opt("Yes"), opt("No, and tell it why"), opt("Yes, always")], Some(1), true)),
        ));
        let d = p.dialog.unwrap();
        assert_eq!((d.tool_id.as_str(), d.kind), ("t-1", "permission"));
        assert_eq!(
            d.options,
            vec![PushOption { label: "Yes".into(), option: 0 }, PushOption { label: "Yes, always".into(), option: 2 }]
        );
        assert_eq!(p.url, "/#/runs/r-0123456789ab");
        assert_eq!(p.body, "Shell: rm -rf build");
        assert!(p.title.starts_with("webshop: "), "{}", p.title);
    }

    #[test]
    fn no_buttons_for_a_dialog_lab_cannot_answer_or_several_questions() {
        let p = payload(&change(RunState::Question, Some(permission(vec![opt("Yes")], None, false))));
        assert!(p.dialog.unwrap().options.is_empty());
        let q = |multi| Question {
            header: "H".into(),
            question: "Which?".into(),
            multi_select: multi,
            options: vec![opt("A"), opt("B")],
        };
        let ask = |qs: Vec<Question>| Dialog {
            id: "t-2".into(),
            call_id: None,
            tool_name: "Ask".into(),
            body: DialogBody::Question(qs),
            answerable: true,
            deep_link: None,
        };
        assert_eq!(payload(&change(RunState::Question, Some(ask(vec![q(false)])))).dialog.unwrap().options.len(), 2);
        assert!(payload(&change(RunState::Question, Some(ask(vec![q(true)])))).dialog.unwrap().options.is_empty());
        assert!(payload(&change(RunState::Question, Some(ask(vec![q(false), q(false)]))))
            .dialog
            .unwrap()
            .options
            .is_empty());
        assert_eq!(payload(&change(RunState::Ended, None)).dialog, None);
    }

    #[test]
    fn long_texts_are_cut_to_fit_one_push() {
        let long = "ö".repeat(5000);
        let mut d = permission((0..6).map(|i| opt(&format!("{i} {long}"))).collect(), None, true);
        if let DialogBody::Permission { summary, .. } = &mut d.body {
            *summary = long.clone();
        }
        let p = payload(&change(RunState::Question, Some(d)));
        let json = encode(&p);
        assert!(json.len() <= MAX_PLAINTEXT, "{}", json.len());
        let back: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert!(back["body"].as_str().unwrap().ends_with('…'));
        assert_eq!(back["dialog"]["options"].as_array().unwrap().len(), MAX_OPTIONS);
        assert_eq!(back["dialog"]["tool_id"], "t-1");
        // A short one is sent as it is.
        let short = payload(&change(RunState::Ended, None));
        assert_eq!(encode(&short), serde_json::to_vec(&short).unwrap());
    }

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("ääää", 6), "ä…");
        assert!(cut(&"€".repeat(100), 10).len() <= 10);
    }
}
