use super::{Opened, SearchIndex};
use crate::agents::model::Role;
use crate::agents::model::{Content, Message};
use crate::runs::live::view::SeqMessage;
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
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
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
        let (idx, _ready) = SearchIndex::open(&path, 1 << 30).unwrap();
        idx.add(&run("run-a"), &[msg(0, Role::User, "papaya")]);
        assert!(idx.flush(Duration::from_secs(5)));
    }
    // Its build never finished: built again (what it has is kept).
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
    idx.mark_complete();
    assert!(idx.flush(Duration::from_secs(5)));
    drop(idx);
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::AsItWas));
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 1);
    // Seq 0 is known: adding it again changes nothing.
    idx.add(&run("run-a"), &[msg(0, Role::User, "papaya")]);
    assert!(idx.flush(Duration::from_secs(5)));
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 1);
    drop(idx);
    std::fs::write(&path, b"this is not an SQLite database, it was overwritten").unwrap();
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
    assert!(path.with_extension("db.damaged").exists());
    assert_eq!(idx.search("papaya", 10, None).unwrap().len(), 0);
}

#[test]
fn past_its_bound_the_oldest_messages_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    let (idx, _ready) = SearchIndex::open(&path, 256 * 1024).unwrap();
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

#[test]
fn opening_touches_nothing_until_the_writer_has_looked_and_a_closed_index_leaves_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    {
        let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
        assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
        idx.add(&run("run-a"), &[msg(0, Role::User, "guava")]);
        idx.mark_complete();
        assert!(idx.close(Duration::from_secs(5)), "closed in order");
        // Nothing is taken in after.
        assert!(!idx.flush(Duration::from_millis(200)));
    }
    let wal = path.with_extension("db-wal");
    assert!(std::fs::metadata(&wal).map(|m| m.len() == 0).unwrap_or(true), "its log is folded in and emptied");
    // Another holds the file: open returns all the same, finds nothing and says it is
    // looking, until the file is free.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE; UPDATE meta SET value = value WHERE key = 'schema';").unwrap();
    let (idx, mut ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert!(idx.building());
    assert_eq!(idx.search("guava", 10, None).unwrap(), vec![]);
    assert_eq!(ready.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty));
    other.execute_batch("COMMIT").unwrap();
    drop(other);
    assert_eq!(ready.blocking_recv(), Ok(Opened::AsItWas));
    assert!(!idx.building());
    assert_eq!(idx.search("guava", 10, None).unwrap().len(), 1);
}

#[test]
fn a_long_tool_output_is_indexed_by_its_ends_and_an_earlier_labs_index_is_made_anew() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search.db");
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
    let middle = "filler ".repeat(2000);
    let out = format!("startword {middle} middleword {middle} endword");
    idx.add(&run("run-a"), &[msg(0, Role::Tool, &out), msg(1, Role::Assistant, &format!("{middle} saidword"))]);
    assert!(idx.flush(Duration::from_secs(5)));
    for (word, n) in [("startword", 1), ("endword", 1), ("middleword", 0), ("saidword", 1)] {
        assert_eq!(idx.search(word, 10, None).unwrap().len(), n, "{word}");
    }
    // Multi-byte characters where the ends are cut: cut between characters.
    let wide = "€".repeat(3000);
    assert!(super::indexed_text(Role::Tool, &wide).contains(" … "));
    drop(idx);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("UPDATE meta SET value = 'lab-search-1' WHERE key = 'schema'", []).unwrap();
    drop(c);
    let (idx, ready) = SearchIndex::open(&path, 1 << 30).unwrap();
    assert_eq!(ready.blocking_recv(), Ok(Opened::Fresh));
    assert!(!path.with_extension("db.damaged").exists(), "not damaged: only older");
    assert_eq!(idx.search("startword", 10, None).unwrap().len(), 0);
}
