//! What runs cost: tokens per model response as each run's provider read them from its
//! transcript (WIT `usage`), priced, kept per run in an append-only log under lab's
//! home (`usage/<run>.jsonl`, 0600) so totals survive restarts without a transcript
//! being read again. [`UsageBook`] owns every run's [`Ledger`]; the views the API
//! serves (`GET /runs/{id}/usage`, `GET /usage`) are made here.

pub mod ledger;
pub mod prices;
mod views;

use crate::agents::model::{ApiError, ContextUse, LimitWindow, Tokens, UsageReport};
use crate::store::fsutil;
use crate::store::paths::RunId;
pub use ledger::Ledger;
use ledger::{LogLine, UNKNOWN_MODEL};
pub use prices::{Price, Prices};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

/// A log larger than this is not read (a run's log grows by ~120 bytes a response).
const LOG_CAP: usize = 64 << 20;

/// Every run's usage, loaded from its log when first needed.
pub struct UsageBook {
    dir: PathBuf,
    prices: Prices,
    ledgers: Mutex<Ledgers>,
}

#[derive(Default)]
struct Ledgers {
    by_run: HashMap<RunId, Ledger>,
    /// Every log in the folder has been read.
    all_loaded: bool,
}

/// Token figures as the API writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// None: a model in it has no price.
    pub cost_usd: Option<f64>,
}

impl Figures {
    fn of(by_model: &BTreeMap<String, Tokens>, prices: &Prices) -> Figures {
        let t = by_model.values().fold(Tokens::default(), |a, b| a.plus(b));
        Figures {
            input_tokens: t.input,
            output_tokens: t.output,
            cache_read_tokens: t.cache_read,
            cache_write_tokens: t.cache_write,
            cost_usd: prices.cost(by_model).map(round_cents),
        }
    }
}

/// Costs to a ten-thousandth of a dollar (no float noise in the JSON).
fn round_cents(usd: f64) -> f64 {
    (usd * 10_000.0).round() / 10_000.0
}

/// `GET /runs/{id}/usage`.
#[derive(Debug, Serialize)]
pub struct RunUsage {
    #[serde(flatten)]
    pub total: Figures,
    pub responses: usize,
    pub by_model: BTreeMap<String, Figures>,
    pub context: Option<ContextUse>,
    pub series: Vec<Point>,
    pub windows: Vec<LimitWindow>,
    pub errors: Vec<ApiError>,
    /// The date of the price table.
    pub prices_as_of: String,
}

/// One point of a series: the figures of the responses in the minute from `t`.
#[derive(Debug, Serialize)]
pub struct Point {
    pub t: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// How `GET /usage` groups its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Day,
    Run,
    Provider,
    Model,
}

impl Group {
    pub fn parse(s: &str) -> Option<Group> {
        Some(match s {
            "day" => Group::Day,
            "run" => Group::Run,
            "provider" => Group::Provider,
            "model" => Group::Model,
            _ => return None,
        })
    }
}

/// A row of `GET /usage`.
#[derive(Debug, Serialize)]
pub struct Row {
    pub key: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// The account windows the newest run that reported them says (per provider).
#[derive(Debug, Serialize)]
pub struct Windows {
    pub provider: String,
    pub run_id: RunId,
    pub windows: Vec<LimitWindow>,
}

impl UsageBook {
    /// The book over `dir` (created private if missing).
    pub fn open(dir: PathBuf, prices: Prices) -> anyhow::Result<UsageBook> {
        fsutil::private_dir(&dir)
            .map_err(|e| anyhow::anyhow!("making the usage folder {} private: {e}", dir.display()))?;
        Ok(UsageBook { dir, prices, ledgers: Mutex::new(Ledgers::default()) })
    }

    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    fn log(&self, run: &RunId) -> PathBuf {
        self.dir.join(format!("{run}.jsonl"))
    }

    /// Take in what a run's transcript chunk, ending `end` bytes into the file, said;
    /// new or changed responses are appended to its log, with how far it was read. An
    /// unwritable log is logged, the totals in memory stay.
    pub fn take(&self, run: &RunId, end: u64, report: UsageReport) {
        let mut l = self.ledgers.lock().unwrap();
        let ledger = self.ledger(&mut l, run);
        let changed = ledger.take(report, ledger::now());
        if changed.is_empty() {
            return;
        }
        ledger.read_to = ledger.read_to.max(end);
        let lines = changed.into_iter().map(LogLine::Entry).chain([LogLine::ReadTo { read_to: ledger.read_to }]);
        self.append(run, lines);
    }

    /// How far into the run's transcript usage was read (a chunk that ends before there
    /// was counted already).
    pub fn read_to(&self, run: &RunId) -> u64 {
        let mut l = self.ledgers.lock().unwrap();
        self.ledger(&mut l, run).read_to
    }

    /// The run's transcript was replaced: it is read from its start again (its
    /// responses are still counted once each).
    pub fn restarted(&self, run: &RunId) {
        let mut l = self.ledgers.lock().unwrap();
        self.ledger(&mut l, run).read_to = 0;
        self.append(run, [LogLine::ReadTo { read_to: 0 }]);
    }

    fn append(&self, run: &RunId, lines: impl IntoIterator<Item = LogLine>) {
        let mut text = Vec::new();
        for line in lines {
            serde_json::to_writer(&mut text, &line).expect("a log line serialises");
            text.push(b'\n');
        }
        if let Err(e) = fsutil::private_file(&self.log(run)).and_then(|mut f| f.write_all(&text)) {
            tracing::warn!(run = %run, error = %e, "the run's usage log could not be written");
        }
    }

    /// The run's ledger, read from its log when not in memory yet.
    fn ledger<'a>(&self, l: &'a mut Ledgers, run: &RunId) -> &'a mut Ledger {
        l.by_run.entry(run.clone()).or_insert_with(|| self.read_log(run))
    }

    fn read_log(&self, run: &RunId) -> Ledger {
        let path = self.log(run);
        let bytes = match fsutil::read_untrusted(&path, LOG_CAP) {
            Ok(Some(b)) => b,
            Ok(None) => return Ledger::default(),
            Err(e) => {
                tracing::warn!(run = %run, error = %e, "the run's usage log could not be read");
                return Ledger::default();
            }
        };
        // A torn last line (lab stopped mid-write) or a damaged one is skipped.
        let lines = bytes.split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice::<LogLine>(l).ok());
        Ledger::replay(lines)
    }

    /// `GET /runs/{id}/usage`.
    pub fn run_usage(&self, run: &RunId) -> RunUsage {
        let mut l = self.ledgers.lock().unwrap();
        let ledger = self.ledger(&mut l, run);
        let by_model = ledger.by_model();
        RunUsage {
            total: Figures::of(&by_model, &self.prices),
            responses: ledger.responses(),
            by_model: by_model
                .iter()
                .map(|(m, t)| (m.clone(), Figures::of(&BTreeMap::from([(m.clone(), *t)]), &self.prices)))
                .collect(),
            context: ledger.context,
            series: ledger
                .series(60)
                .into_iter()
                .map(|(t, by)| Point { t: rfc3339(t), figures: Figures::of(&by, &self.prices) })
                .collect(),
            windows: ledger.windows.clone(),
            errors: ledger.errors.clone(),
            prices_as_of: self.prices.as_of.clone(),
        }
    }

    /// Every log read in (once per `lab serve`).
    fn load_all(&self, l: &mut Ledgers) {
        if l.all_loaded {
            return;
        }
        l.all_loaded = true;
        let Ok(dir) = std::fs::read_dir(&self.dir) else { return };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(run) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")).and_then(RunId::parse) else {
                continue;
            };
            if let std::collections::hash_map::Entry::Vacant(e) = l.by_run.entry(run) {
                let ledger = self.read_log(e.key());
                e.insert(ledger);
            }
        }
    }

    /// `GET /usage`: the responses answered in `[from, to)` (Unix seconds), grouped.
    /// `provider_of` names each run's provider (None: a run lab no longer knows).
    pub fn rows(&self, from: i64, to: i64, group: Group, provider_of: impl Fn(&RunId) -> Option<String>) -> Vec<Row> {
        let mut l = self.ledgers.lock().unwrap();
        self.load_all(&mut l);
        let mut groups: BTreeMap<String, BTreeMap<String, Tokens>> = BTreeMap::new();
        for (run, ledger) in &l.by_run {
            let provider = std::cell::OnceCell::new();
            for c in ledger.counted().filter(|c| c.t >= from && c.t < to) {
                let key = match group {
                    Group::Day => rfc3339(c.t)[..10].to_string(),
                    Group::Run => run.to_string(),
                    Group::Provider => {
                        provider.get_or_init(|| provider_of(run).unwrap_or_else(|| UNKNOWN_MODEL.into())).clone()
                    }
                    Group::Model => c.model.clone(),
                };
                let e = groups.entry(key).or_default().entry(c.model.clone()).or_default();
                *e = e.plus(&c.tokens);
            }
        }
        groups.into_iter().map(|(key, by)| Row { key, figures: Figures::of(&by, &self.prices) }).collect()
    }

    /// The newest account windows each provider's runs reported (for every page's header).
    pub fn windows(&self, provider_of: impl Fn(&RunId) -> Option<String>) -> Vec<Windows> {
        let l = self.ledgers.lock().unwrap();
        let mut newest: BTreeMap<String, (i64, &RunId, &Vec<LimitWindow>)> = BTreeMap::new();
        for (run, ledger) in &l.by_run {
            let Some((at, windows)) = ledger.windows_at() else { continue };
            let Some(provider) = provider_of(run) else { continue };
            if newest.get(&provider).is_none_or(|(t, ..)| *t < at) {
                newest.insert(provider, (at, run, windows));
            }
        }
        newest
            .into_iter()
            .map(|(provider, (_, run, w))| Windows { provider, run_id: run.clone(), windows: w.clone() })
            .collect()
    }
}

/// Unix seconds as RFC 3339 UTC (`2026-12-05T01:00:00Z`).
pub fn rfc3339(t: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `GET /usage`.
#[derive(Debug, Serialize)]
pub struct UsageRows {
    pub rows: Vec<Row>,
    /// The account windows each provider's newest report says (for every page's header).
    pub windows: Vec<Windows>,
    /// The date of the price table.
    pub prices_as_of: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::ResponseUsage;

    fn report(id: &str, input: u64) -> UsageReport {
        UsageReport {
            responses: vec![ResponseUsage {
                response_id: id.into(),
                model: Some("stand-in-model".into()),
                tokens: Tokens { input, ..Tokens::default() },
                timestamp: "2026-12-05T01:00:00Z".into(),
            }],
            ..UsageReport::default()
        }
    }

    #[test]
    fn a_runs_log_keeps_its_totals_and_how_far_it_was_read_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunId::parse("r-1").unwrap();
        let prices = || Prices::new(&BTreeMap::new());
        {
            let book = UsageBook::open(dir.path().join("usage"), prices()).unwrap();
            book.take(&run, 100, report("a", 5));
            book.take(&run, 200, report("a", 5)); // the same again: nothing logged
            book.take(&run, 300, report("b", 7));
            assert_eq!(book.read_to(&run), 300);
        }
        let book = UsageBook::open(dir.path().join("usage"), prices()).unwrap();
        let u = book.run_usage(&run);
        assert_eq!((u.total.input_tokens, u.responses, u.total.cost_usd), (12, 2, None), "unpriced: no cost");
        assert_eq!(book.read_to(&run), 300);
        book.restarted(&run);
        assert_eq!(book.read_to(&run), 0);
        // Read again from the start: each response still once.
        book.take(&run, 100, report("a", 5));
        assert_eq!(book.run_usage(&run).total.input_tokens, 12);
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(dir.path().join("usage/r-1.jsonl")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let rows = book.rows(0, i64::MAX, Group::Model, |_| None);
        assert_eq!((rows.len(), rows[0].key.as_str(), rows[0].figures.input_tokens), (1, "stand-in-model", 12));
    }
}
