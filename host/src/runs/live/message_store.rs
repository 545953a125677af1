//! The message store: a run's chat as seq-numbered messages. The transcript on disk is
//! the store; memory holds a compact index of it (where each chunk the tailer parsed
//! starts, how long it is, which seqs it gave) and only the newest messages. Older
//! pages are read again from the transcript and parsed again by the provider on demand
//! (the WIT promises a re-read of the same bytes gives the same messages), so memory is
//! bounded per run, whatever its history, and grows only with what is being looked at.

use crate::agents::components::{CallError, Provider};
use crate::agents::model::ParseOutput;
use crate::runs::live::view::SeqMessage;
use crate::store::paths::RunId;
use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The newest messages kept in memory per run: at most this many…
pub const RESIDENT_MESSAGES: usize = 256;
/// …and at most about this many bytes of text (the newest message always stays).
pub const RESIDENT_BYTES: usize = 256 << 10;
/// The most messages one page may ask for (`?limit=`).
pub const MAX_PAGE: usize = 1000;

/// One parsed chunk of the transcript: bytes `offset..offset+len` gave the messages
/// `first_seq..first_seq+count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    first_seq: u64,
    count: u32,
    offset: u64,
    len: u32,
}

#[derive(Default)]
struct Inner {
    /// The transcript the chunks index, and who parses it.
    source: Option<(Arc<dyn Provider>, PathBuf)>,
    chunks: Vec<Chunk>,
    total: u64,
    /// The newest messages (seqs `total - resident.len() .. total`), each with its
    /// size in bytes of text (counted once, as it comes in).
    resident: VecDeque<(usize, SeqMessage)>,
    resident_bytes: usize,
    /// Bumped when the transcript is read again from the start (truncated, replaced).
    generation: u64,
}

#[derive(Default)]
pub struct MessageStore {
    inner: RwLock<Inner>,
}

/// Which messages a reader wants: those with `after < seq < before`, and of them the
/// first `limit` when only `after` is given, else the last `limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Page {
    pub after: Option<u64>,
    pub before: Option<u64>,
    pub limit: Option<usize>,
}

/// The seqs a [`Page`] selects among the first `count` messages, and whether messages
/// before and after them were left out (pure, for the tests and the HTTP layer).
pub fn select(page: &Page, count: u64) -> (Range<u64>, bool, bool) {
    let lo = page.after.map_or(0, |a| a.saturating_add(1)).min(count);
    let hi = page.before.unwrap_or(u64::MAX).min(count).max(lo);
    let range = match page.limit {
        Some(n) if page.after.is_some() && page.before.is_none() => lo..hi.min(lo.saturating_add(n as u64)),
        Some(n) => hi.saturating_sub(n as u64).max(lo)..hi,
        None => lo..hi,
    };
    let more_before = range.start > lo;
    let more_after = range.end < hi;
    (range, more_before, more_after)
}

fn text_bytes(m: &SeqMessage) -> usize {
    m.text.len() + m.input.as_ref().map_or(0, |v| v.to_string().len())
}

impl MessageStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Name the transcript (and its parser) the index will refer to.
    pub fn set_source(&self, provider: Arc<dyn Provider>, path: PathBuf) {
        self.inner.write().unwrap().source = Some((provider, path));
    }

    /// How many messages the transcript has given so far.
    pub fn len(&self) -> u64 {
        self.inner.read().unwrap().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget everything: the transcript is read again from the start.
    pub fn clear(&self) {
        let mut i = self.inner.write().unwrap();
        let generation = i.generation + 1;
        let source = i.source.take();
        *i = Inner { source, generation, ..Inner::default() };
    }

    /// Drop the messages held in memory; the index stays, so they can be read again.
    pub fn evict(&self) {
        let mut i = self.inner.write().unwrap();
        i.resident = VecDeque::new(); // its memory too, not only its messages
        i.resident_bytes = 0;
    }

    /// How many messages are held in memory now.
    pub fn resident(&self) -> usize {
        self.inner.read().unwrap().resident.len()
    }

    /// Messages parsed from transcript bytes `offset..offset+len`, numbered from
    /// [`MessageStore::len`] on (their `seq`s must be that).
    pub fn append(&self, offset: u64, len: usize, messages: Vec<SeqMessage>) {
        let mut i = self.inner.write().unwrap();
        if messages.is_empty() {
            return;
        }
        debug_assert_eq!(messages[0].seq, i.total);
        let count = messages.len() as u32;
        let first_seq = i.total;
        i.chunks.push(Chunk { first_seq, count, offset, len: len as u32 });
        i.total += u64::from(count);
        // Trimmed as they come: a chunk of thousands of messages never makes the deque
        // (its capacity is kept) thousands long.
        for m in messages {
            let size = text_bytes(&m);
            i.resident_bytes += size;
            i.resident.push_back((size, m));
            while i.resident.len() > 1 && (i.resident.len() > RESIDENT_MESSAGES || i.resident_bytes > RESIDENT_BYTES) {
                let (gone, _) = i.resident.pop_front().expect("not empty");
                i.resident_bytes -= gone;
            }
        }
    }

    /// The messages with seqs in `range` (clipped to what exists): from memory when
    /// held, else read and parsed again from the transcript. Never fails: what cannot
    /// be read again (the transcript went away) is left out, and logged.
    pub async fn read(&self, range: Range<u64>) -> Vec<SeqMessage> {
        let mut out = Vec::new();
        let mut next = range.start;
        let mut generation = None;
        loop {
            let (older, chunks, source) = {
                let i = self.inner.read().unwrap();
                let end = range.end.min(i.total);
                if next >= end || generation.is_some_and(|g| g != i.generation) {
                    break;
                }
                generation = Some(i.generation);
                let held_from = i.total - i.resident.len() as u64;
                if next >= held_from {
                    let skip = (next - held_from) as usize;
                    out.extend(i.resident.iter().skip(skip).take((end - next) as usize).map(|(_, m)| m.clone()));
                    break;
                }
                // Older than what is held: the chunks that gave them, read again. (New
                // messages may push more out of memory meanwhile: the loop picks them up.)
                let older = next..end.min(held_from);
                let first = i.chunks.partition_point(|c| c.first_seq + u64::from(c.count) <= older.start);
                let chunks: Vec<Chunk> =
                    i.chunks[first..].iter().take_while(|c| c.first_seq < older.end).copied().collect();
                (older, chunks, i.source.clone())
            };
            let Some((provider, path)) = source else { break };
            for c in chunks {
                let messages = match read_at(&path, c.offset, c.len as usize) {
                    Ok(bytes) => parse_chunk(provider.as_ref(), &bytes, None).await.messages,
                    Err(e) => {
                        tracing::warn!(transcript = %path.display(), error = %e, "cannot read older messages again");
                        return out;
                    }
                };
                if messages.len() != c.count as usize {
                    tracing::warn!(transcript = %path.display(), offset = c.offset, "the transcript changed under its index; older messages left out");
                    return out;
                }
                for (k, m) in messages.into_iter().enumerate() {
                    let seq = c.first_seq + k as u64;
                    if older.contains(&seq) {
                        out.push(SeqMessage::new(seq, m));
                    }
                }
            }
            next = older.end;
        }
        out
    }
}

fn read_at(path: &std::path::Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut f = crate::store::fsutil::open_untrusted(path)?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "the transcript is gone"))?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0; len];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

/// Parse a chunk of complete lines; if the provider fails on the whole chunk, retry
/// line by line so only the line that breaks it is lost. `log`: the run and the
/// chunk's first line number, to log what was skipped (None when reading again what
/// was read and logged before, to show an older page).
pub(in crate::runs) async fn parse_chunk(
    provider: &dyn Provider,
    chunk: &[u8],
    log: Option<(&RunId, u64)>,
) -> ParseOutput {
    let diagnostics = |out: &ParseOutput, first_line: u64| {
        if let Some((run, base)) = log {
            for d in &out.diagnostics {
                tracing::warn!(run = %run, line = base + first_line + d.line as u64 + 1, message = %d.message, "skipped a transcript line");
            }
        }
    };
    match provider.parse_transcript(chunk.to_vec()).await {
        Ok(out) => {
            diagnostics(&out, 0);
            out
        }
        Err(e) => {
            if let Some((run, _)) = log {
                tracing::warn!(run = %run, error = %e, "parsing a transcript chunk failed; retrying line by line");
            }
            let mut all = ParseOutput::default();
            for (i, line) in chunk.split_inclusive(|b| *b == b'\n').enumerate() {
                match provider.parse_transcript(line.to_vec()).await {
                    Ok(out) => {
                        diagnostics(&out, i as u64);
                        all.messages.extend(out.messages);
                        if out.turn.is_some() {
                            all.turn = out.turn;
                        }
                        if out.session_id.is_some() {
                            all.session_id = out.session_id;
                        }
                    }
                    Err(e) => {
                        if let Some((run, base)) = log {
                            log_skipped_line(run, base + i as u64 + 1, &e);
                        }
                    }
                }
            }
            all
        }
    }
}

fn log_skipped_line(run: &RunId, line: u64, e: &CallError) {
    tracing::warn!(run = %run, line, error = %e, "skipped a transcript line the provider could not parse");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_select_the_tail_by_default_and_the_head_after_a_seq() {
        let p = |after, before, limit| Page { after, before, limit };
        assert_eq!(select(&p(None, None, None), 10), (0..10, false, false));
        assert_eq!(select(&p(None, None, Some(3)), 10), (7..10, true, false), "the newest page");
        assert_eq!(select(&p(None, Some(7), Some(3)), 10), (4..7, true, false), "older, scrolling up");
        assert_eq!(select(&p(None, Some(2), Some(3)), 10), (0..2, false, false), "the oldest page");
        assert_eq!(select(&p(Some(4), None, Some(3)), 10), (5..8, false, true), "forward from a seq");
        assert_eq!(select(&p(Some(4), None, None), 10), (5..10, false, false));
        assert_eq!(select(&p(Some(2), Some(6), Some(2)), 10), (4..6, true, false), "between: the newest of them");
        assert_eq!(select(&p(Some(9), None, Some(3)), 10), (10..10, false, false), "nothing newer");
        assert_eq!(select(&p(Some(u64::MAX), None, None), 10), (10..10, false, false));
        assert_eq!(select(&p(None, Some(0), None), 10), (0..0, false, false));
        assert_eq!(select(&p(Some(5), Some(3), None), 10), (6..6, false, false), "an empty window");
        assert_eq!(select(&p(None, None, Some(3)), 0), (0..0, false, false));
    }
}
