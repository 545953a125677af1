//! The run list as a client follows it: pages of it, newest first (`GET
//! /runs?limit&before`), and news of which run's entry may have changed (`GET
//! /runs/events`), so a history of thousands of runs is never sent whole to draw one
//! screen, and a tab left open costs nothing while nothing changes.
//!
//! - [`Cursor`]: where a page ends (the position of its oldest entry), opaque to
//!   clients.
//! - [`page`]: a page of a list sorted oldest first (a pure function).
//! - [`ViewCell`]: a run's published view; every change to it is news for the list.

use crate::store::paths::RunId;
use base64::Engine as _;
use tokio::sync::{broadcast, watch};

/// How many run-list news a slow stream may fall behind before it is sent the list
/// again (it missed some).
pub const NEWS_CAPACITY: usize = 1024;

/// A position in the run list: a run's creation time and id (the list's order).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub created_at: String,
    pub id: String,
}

impl Cursor {
    /// As a client carries it: URL-safe, not meant to be read.
    pub fn encode(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}\n{}", self.created_at, self.id))
    }

    /// One that [`Cursor::encode`] made; None for anything else.
    pub fn decode(s: &str) -> Option<Cursor> {
        if s.len() > 512 {
            return None;
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (created_at, id) = text.split_once('\n')?;
        RunId::parse(id)?;
        (!created_at.is_empty() && created_at.len() <= 64 && !created_at.contains('\n'))
            .then(|| Cursor { created_at: created_at.to_string(), id: id.to_string() })
    }
}

/// Of `sorted` (oldest first, each with its position), the newest `limit` older than
/// `before` (all, without it), newest first; and where the next page starts if older
/// ones remain.
pub fn page<T: Clone>(sorted: &[(Cursor, T)], limit: usize, before: Option<&Cursor>) -> (Vec<T>, Option<Cursor>) {
    let end = match before {
        Some(b) => sorted.partition_point(|(c, _)| c < b),
        None => sorted.len(),
    };
    let start = end.saturating_sub(limit);
    let items = sorted[start..end].iter().rev().map(|(_, t)| t.clone()).collect();
    let next = (start > 0).then(|| sorted[start].0.clone());
    (items, next)
}

/// A run's published view (a watch channel's sending side): each change is also news
/// for the run list (the run's id, on `listed`).
pub struct ViewCell<T> {
    tx: watch::Sender<T>,
    id: RunId,
    listed: broadcast::Sender<RunId>,
}

impl<T> ViewCell<T> {
    pub fn new(initial: T, id: RunId, listed: broadcast::Sender<RunId>) -> ViewCell<T> {
        ViewCell { tx: watch::channel(initial).0, id, listed }
    }

    /// [`watch::Sender::send_if_modified`]; news if it was.
    pub fn send_if_modified(&self, f: impl FnOnce(&mut T) -> bool) -> bool {
        let changed = self.tx.send_if_modified(f);
        if changed {
            self.touch();
        }
        changed
    }

    /// [`watch::Sender::send_modify`]; news.
    pub fn send_modify(&self, f: impl FnOnce(&mut T)) {
        self.tx.send_modify(f);
        self.touch();
    }

    pub fn borrow(&self) -> watch::Ref<'_, T> {
        self.tx.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<T> {
        self.tx.subscribe()
    }

    pub fn receiver_count(&self) -> usize {
        self.tx.receiver_count()
    }

    /// The run's list entry may have changed (its record did). Never blocks; nobody
    /// listening is fine.
    pub fn touch(&self) {
        let _ = self.listed.send(self.id.clone());
    }
}

/// A run in [`Runs::listing`]: one being followed or looked at, or the id of one at
/// rest (its record read from the registry when its body is made, [`Runs::bodies_of`]).
#[derive(Clone)]
pub enum Listed {
    Awake(std::sync::Arc<super::Run>),
    AtRest(RunId),
}

impl Listed {
    pub fn id(&self) -> &RunId {
        match self {
            Listed::Awake(r) => &r.id,
            Listed::AtRest(id) => id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(at: &str, id: &str) -> Cursor {
        Cursor { created_at: at.into(), id: id.into() }
    }

    #[test]
    fn pages_go_newest_first_and_end_where_the_next_begins() {
        let sorted: Vec<(Cursor, u32)> =
            (0..7).map(|i| (c(&format!("2026-12-07T00:00:0{i}.000Z"), &format!("r{i}")), i)).collect();
        let (first, next) = page(&sorted, 3, None);
        assert_eq!(first, [6, 5, 4]);
        let next = next.unwrap();
        let (second, next) = page(&sorted, 3, Some(&next));
        assert_eq!(second, [3, 2, 1]);
        let (third, next) = page(&sorted, 3, next.as_ref());
        assert_eq!((third, next), (vec![0], None));
        // Exactly a page left: no next.
        assert_eq!(page(&sorted, 7, None), ((0..7).rev().collect(), None));
        // A cursor of a run that is gone still places the page.
        let (gap, _) = page(&sorted, 2, Some(&c("2026-12-07T00:00:03.500Z", "zz")));
        assert_eq!(gap, [3, 2]);
        // Equal times: the id orders them, as the list does.
        let same = vec![(c("t", "a"), 1), (c("t", "b"), 2), (c("t", "c"), 3)];
        assert_eq!(page(&same, 1, Some(&c("t", "c"))), (vec![2], Some(c("t", "b"))));
        assert_eq!(page::<u32>(&[], 5, None), (vec![], None));
    }

    #[test]
    fn a_cursor_comes_back_as_it_went_and_junk_is_refused() {
        let cur = c("2026-12-07T05:00:00.123Z", "run-abc");
        assert_eq!(Cursor::decode(&cur.encode()), Some(cur.clone()));
        assert!(cur.encode().chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'));
        for junk in ["", "!!!", "bm9uZXdsaW5l", &"A".repeat(600)] {
            assert_eq!(Cursor::decode(junk), None, "{junk}");
        }
        let bad_id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("2026\n../etc");
        assert_eq!(Cursor::decode(&bad_id), None);
    }
}
