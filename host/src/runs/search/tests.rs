use super::{Opened, SearchIndex};
use crate::agents::model::Role;
use crate::agents::model::{Content, Message};
use crate::runs::view::SeqMessage;
use crate::store::paths::RunId;
use std::time::Duration;

fn msg(seq: u64, role: Role, text: &str) -> SeqMessage {
    SeqMessage::new(
        seq,
        Message { role, content: Content::Text(text.into()), timestamp: format!("2026-12-05T01:00:{seq:02}Z") },
    )
}

fn run(id: &str) -> RunId {
    RunId::parse(id).unwrap()
}

#[test]
fn messages_are_found_ranked_with_the_match_marked_and_never_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    let (idx, opened) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(opened, Opened::Fresh);
    let a = run("run-a");
    idx.add(
        &a,
        &[
            msg(0, Role::User, "why is the cache slow?"),
            msg(1, Role::Assistant, "The cache bug: the key ignores the locale, so every request misses."),
        ],
    );
    // The same messages again (a transcript read again after a restart) add nothing.
    idx.add(&a, &[msg(0, Role::User, "why is the cache slow?"), msg(1, Role::Assistant, "The cache bug: again")]);
    idx.add(&run("run-b"), &[msg(0, Role::Assistant, "Nothing about caches here, only a cachet.")]);
    assert!(idx.flush(Duration::from_secs(5)));
    let hits = idx.search("cache bug", 10, None).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!((hits[0].run_id.as_str(), hits[0].seq, hits[0].role.as_str()), ("run-a", 1, "assistant"));
    assert!(hits[0].snippet.contains("«cache» «bug»"), "{}", hits[0].snippet);
    assert_eq!(hits[0].timestamp, "2026-12-05T01:00:01Z");
    // A phrase, a prefix, one run only.
    assert_eq!(idx.search("\"key bug\"", 10, None).unwrap().len(), 0);
    assert_eq!(idx.search("\"cache bug\"", 10, None).unwrap().len(), 1);
    let prefix = idx.search("cach*", 10, None).unwrap();
    assert_eq!(prefix.len(), 3, "{prefix:?}");
    assert_eq!(idx.search("cach*", 10, Some(&run("run-b"))).unwrap().len(), 1);
    assert_eq!(idx.search("NEAR(cache", 10, None).unwrap().len(), 0, "syntax is text, not an error");
    // A run whose messages are numbered anew is indexed anew.
    idx.forget(&a);
    idx.add(&a, &[msg(0, Role::User, "a fresh start")]);
    assert!(idx.flush(Duration::from_secs(5)));
    assert_eq!(idx.search("bug", 10, None).unwrap().len(), 0);
    assert_eq!(idx.search("fresh", 10, None).unwrap().len(), 1);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
}

#[test]
fn an_index_reopened_keeps_its_messages_and_a_damaged_one_is_made_anew() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    {
        let (idx, _) = SearchIndex::open(&path, 1 << 30).unwrap();
        idx.add(&run("run-a"), &[msg(0, Role::User, "papaya")]);
        assert!(idx.flush(Duration::from_secs(5)));
    }
    // Its build never finished: built again (what it has is kept).
    let (idx, opened) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(opened, Opened::Fresh);
    idx.mark_complete();
    assert!(idx.flush(Duration::from_secs(5)));
    drop(idx);
    let (idx, opened) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(opened, Opened::AsItWas);
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 1);
    // Seq 0 is known: adding it again changes nothing.
    idx.add(&run("run-a"), &[msg(0, Role::User, "papaya")]);
    assert!(idx.flush(Duration::from_secs(5)));
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 1);
    drop(idx);
    std::fs::write(&path, b"this is not an SQLite database, it was overwritten").unwrap();
    let (idx, opened) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(opened, Opened::Fresh);
    assert!(path.with_extension("db.damaged").exists());
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 0);
}

#[test]
fn past_its_bound_the_oldest_messages_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    let (idx, _) = SearchIndex::open(&path, 256 * 1024).unwrap();
    for batch in 0..40u64 {
        let msgs: Vec<SeqMessage> = (0..50u64)
            .map(|i| msg(batch * 50 + i, Role::Assistant, &format!("word{batch}x{i} {}", "filler text ".repeat(40))))
            .collect();
        idx.add(&run("run-a"), &msgs);
        assert!(idx.flush(Duration::from_secs(10)));
    }
    assert_eq!(idx.search("word0x0", 10, None).unwrap().len(), 0, "the oldest went");
    assert_eq!(idx.search("word39x49", 10, None).unwrap().len(), 1, "the newest stay");
}
