//! One run's usage, counted once per model response: the pure part of [`super`].
//!
//! A provider returns every usage record its agent wrote (an agent may repeat a
//! response's usage on each of the response's lines, and a transcript read again after
//! a restart gives every record again). The ledger keys records by response id and
//! keeps the last one per id, so totals are the sum over responses, never over lines.
//! What changed is returned as [`Entry`]s for the run's append-only log; folding a
//! log back ([`Ledger::replay`]) gives the same ledger.

use crate::agents::model::{ApiError, ContextUse, LimitWindow, Tokens, UsageReport};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

/// The model a response is counted under when neither it nor the run named one.
pub const UNKNOWN_MODEL: &str = "unknown";

/// How many API errors a run keeps (the newest).
const ERRORS_KEPT: usize = 20;

/// A line of a run's log: a response, or how far into the transcript it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LogLine {
    Entry(Entry),
    ReadTo { read_to: u64 },
}

/// One response as the run's log keeps it (one JSON line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The response id.
    pub id: String,
    pub model: String,
    /// When it was answered (Unix seconds): the transcript's timestamp, else when lab read it.
    pub t: i64,
    #[serde(flatten)]
    pub tokens: Tokens,
}

/// One response's counted usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub model: String,
    pub t: i64,
    pub tokens: Tokens,
}

/// A run's usage: one record per response, and what its newest lines said.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    responses: HashMap<String, Counted>,
    /// The sum over `responses` (kept as they change).
    total: Tokens,
    /// The model the agent named last, for responses that name none.
    model: Option<String>,
    pub context: Option<ContextUse>,
    /// The account's windows as the run's newest line on them said, and when lab read it.
    pub windows: Vec<LimitWindow>,
    windows_seen: i64,
    /// The newest API errors, oldest first.
    pub errors: Vec<ApiError>,
    /// How far into its transcript (bytes) usage was read and logged: a transcript read
    /// again after a restart is not asked about again up to there.
    pub read_to: u64,
}

impl Ledger {
    /// A ledger from its log's lines, in the order they were written.
    pub fn replay(lines: impl IntoIterator<Item = LogLine>) -> Ledger {
        let mut l = Ledger::default();
        for line in lines {
            match line {
                LogLine::Entry(e) => l.count(e.id, Counted { model: e.model, t: e.t, tokens: e.tokens }),
                LogLine::ReadTo { read_to } => l.read_to = read_to,
            }
        }
        l
    }

    /// Take in what a transcript chunk said. Returns the responses that are new or
    /// changed (to append to the log); the same record again changes nothing.
    pub fn take(&mut self, report: UsageReport, now: i64) -> Vec<Entry> {
        let mut changed = Vec::new();
        if let Some(m) = report.model {
            self.model = Some(m);
        }
        for r in report.responses {
            let model = r.model.or_else(|| self.model.clone()).unwrap_or_else(|| UNKNOWN_MODEL.to_string());
            let t = unix_seconds(&r.timestamp).unwrap_or(now);
            // A response with no id is keyed by what it says (the same line read again
            // is the same response).
            let id = if r.response_id.is_empty() {
                format!("{model}@{t}:{}:{}", r.tokens.input, r.tokens.output)
            } else {
                r.response_id
            };
            let c = Counted { model, t, tokens: r.tokens };
            if self.responses.get(&id) == Some(&c) {
                continue;
            }
            changed.push(Entry { id: id.clone(), model: c.model.clone(), t: c.t, tokens: c.tokens });
            self.count(id, c);
        }
        if report.context.is_some() {
            self.context = report.context;
        }
        if !report.windows.is_empty() {
            self.windows = report.windows;
            self.windows_seen = now;
        }
        self.errors.extend(report.errors);
        let over = self.errors.len().saturating_sub(ERRORS_KEPT);
        self.errors.drain(..over);
        changed
    }

    fn count(&mut self, id: String, c: Counted) {
        if let Some(old) = self.responses.get(&id) {
            self.total = self.total.minus(&old.tokens);
        }
        self.total = self.total.plus(&c.tokens);
        self.responses.insert(id, c);
    }

    /// The account's windows and when they were reported (None: never).
    pub fn windows_at(&self) -> Option<(i64, &Vec<LimitWindow>)> {
        (!self.windows.is_empty()).then_some((self.windows_seen, &self.windows))
    }

    pub fn total(&self) -> Tokens {
        self.total
    }

    /// How many responses were counted.
    pub fn responses(&self) -> usize {
        self.responses.len()
    }

    /// Every counted response (in no order).
    pub fn counted(&self) -> impl Iterator<Item = &Counted> {
        self.responses.values()
    }

    pub fn by_model(&self) -> BTreeMap<String, Tokens> {
        let mut m: BTreeMap<String, Tokens> = BTreeMap::new();
        for c in self.responses.values() {
            let e = m.entry(c.model.clone()).or_default();
            *e = e.plus(&c.tokens);
        }
        m
    }

    /// The responses summed per `bucket` seconds, oldest first, per model (to price).
    pub fn series(&self, bucket: i64) -> Vec<(i64, BTreeMap<String, Tokens>)> {
        let mut s: BTreeMap<i64, BTreeMap<String, Tokens>> = BTreeMap::new();
        for c in self.responses.values() {
            let e = s.entry(c.t - c.t.rem_euclid(bucket)).or_default().entry(c.model.clone()).or_default();
            *e = e.plus(&c.tokens);
        }
        s.into_iter().collect()
    }
}

/// Seconds since the epoch of an RFC 3339 time (None: empty or not one).
pub fn unix_seconds(t: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339_weak(t.trim_end_matches('Z')).ok()?;
    at.duration_since(UNIX_EPOCH).ok().and_then(|d| i64::try_from(d.as_secs()).ok())
}

/// Now, in Unix seconds.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::ResponseUsage;

    fn tokens(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Tokens {
        Tokens { input, output, cache_read, cache_write }
    }

    fn response(id: &str, model: Option<&str>, t: Tokens) -> ResponseUsage {
        ResponseUsage {
            response_id: id.into(),
            model: model.map(str::to_string),
            tokens: t,
            timestamp: "2026-12-05T01:00:30Z".into(),
        }
    }

    fn report(responses: Vec<ResponseUsage>) -> UsageReport {
        UsageReport { responses, ..UsageReport::default() }
    }

    #[test]
    fn a_response_repeated_on_each_of_its_lines_is_counted_once() {
        let mut l = Ledger::default();
        let u = tokens(10, 5, 100, 20);
        let first = l.take(report(vec![response("a", Some("m"), u), response("a", Some("m"), u)]), 0);
        assert_eq!(first.len(), 1);
        // The next chunk repeats it again, then a second response.
        let next = l.take(report(vec![response("a", Some("m"), u), response("b", Some("m"), tokens(1, 1, 0, 0))]), 0);
        assert_eq!(next.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(l.total(), tokens(11, 6, 100, 20));
        assert_eq!(l.responses(), 2);
    }

    #[test]
    fn a_response_whose_numbers_grow_is_counted_at_its_last_numbers() {
        let mut l = Ledger::default();
        l.take(report(vec![response("a", Some("m"), tokens(10, 1, 0, 0))]), 0);
        let changed = l.take(report(vec![response("a", Some("m"), tokens(10, 90, 0, 0))]), 0);
        assert_eq!(changed.len(), 1);
        assert_eq!(l.total(), tokens(10, 90, 0, 0));
        // The log, replayed, gives the same ledger.
        let log = [
            r#"{"id":"a","model":"m","t":1,"input":10,"output":1,"cache_read":0,"cache_write":0}"#,
            r#"{"read_to":4096}"#,
            r#"{"id":"a","model":"m","t":1,"input":10,"output":90,"cache_read":0,"cache_write":0}"#,
        ];
        let l = Ledger::replay(log.iter().map(|l| serde_json::from_str::<LogLine>(l).unwrap()));
        assert_eq!((l.total(), l.read_to), (tokens(10, 90, 0, 0), 4096));
    }

    #[test]
    fn a_response_without_a_model_takes_the_last_one_named() {
        let mut l = Ledger::default();
        l.take(report(vec![response("a", None, tokens(1, 0, 0, 0))]), 0);
        l.take(UsageReport { model: Some("gpt-x".into()), ..report(vec![response("b", None, tokens(2, 0, 0, 0))]) }, 0);
        let by = l.by_model();
        assert_eq!(by[UNKNOWN_MODEL], tokens(1, 0, 0, 0));
        assert_eq!(by["gpt-x"], tokens(2, 0, 0, 0));
    }

    #[test]
    fn the_series_sums_responses_per_bucket_from_their_timestamps() {
        let mut l = Ledger::default();
        let mut r = response("a", Some("m"), tokens(1, 0, 0, 0));
        r.timestamp = "2026-12-05T01:00:59.900Z".into();
        let mut s = response("b", Some("m"), tokens(2, 0, 0, 0));
        s.timestamp = "2026-12-05T01:01:00Z".into();
        l.take(report(vec![r, s, response("c", Some("n"), tokens(4, 0, 0, 0))]), 0);
        let series = l.series(60);
        let minute = unix_seconds("2026-12-05T01:00:00Z").unwrap();
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].0, minute);
        assert_eq!(series[0].1["m"], tokens(1, 0, 0, 0));
        assert_eq!(series[0].1["n"], tokens(4, 0, 0, 0));
        assert_eq!(series[1].0, minute + 60);
    }

    #[test]
    fn errors_are_kept_newest_last_and_bounded() {
        let mut l = Ledger::default();
        for i in 0..30 {
            let e = ApiError { text: format!("e{i}"), timestamp: String::new() };
            l.take(UsageReport { errors: vec![e], ..UsageReport::default() }, 0);
        }
        assert_eq!(l.errors.len(), ERRORS_KEPT);
        assert_eq!(l.errors.last().unwrap().text, "e29");
    }
}
