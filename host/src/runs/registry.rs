//! The run registry: one record per run in an embedded database (redb) under lab's
//! home, so runs survive a restart of `lab serve`.

use crate::paths::RunId;
use anyhow::{Context as _, Result};
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::path::Path;

const RUNS: TableDefinition<&str, &[u8]> = TableDefinition::new("runs");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Active,
    Ended,
    /// The launch failed; `error` says why.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub provider: String,
    pub workdir: String,
    pub prompt: String,
    pub permission_mode: Option<String>,
    pub status: Status,
    pub created_at: String,
    pub ended_at: Option<String>,
    pub tmux_target: String,
    pub tmux_socket: String,
    pub session_id: Option<String>,
    pub transcript_path: Option<String>,
    pub dialog_hooker: bool,
    pub error: Option<String>,
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        RunId::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("invalid run id {s:?}")))
    }
}

pub struct Registry {
    db: Database,
}

impl Registry {
    pub fn open(path: &Path) -> Result<Registry> {
        let db = Database::create(path).with_context(|| {
            format!("opening the run registry {} (is another `lab serve` using this home?)", path.display())
        })?;
        let tx = db.begin_write()?;
        tx.open_table(RUNS)?;
        tx.commit()?;
        Ok(Registry { db })
    }

    pub fn put(&self, rec: &RunRecord) -> Result<()> {
        let bytes = serde_json::to_vec(rec)?;
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(RUNS)?;
            t.insert(rec.id.as_str(), bytes.as_slice())?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn get(&self, id: &RunId) -> Result<Option<RunRecord>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        match t.get(id.as_str())? {
            Some(v) => Ok(Some(serde_json::from_slice(v.value())?)),
            None => Ok(None),
        }
    }

    /// Every run, oldest first. A damaged record is skipped with a warning.
    pub fn list(&self) -> Result<Vec<RunRecord>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        let mut out = Vec::new();
        for entry in t.iter()? {
            let (k, v) = entry?;
            match serde_json::from_slice::<RunRecord>(v.value()) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(run = k.value(), error = %e, "skipping a damaged run record"),
            }
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, at: &str) -> RunRecord {
        RunRecord {
            id: RunId::parse(id).unwrap(),
            provider: "p".into(),
            workdir: "/w".into(),
            prompt: "hi".into(),
            permission_mode: None,
            status: Status::Active,
            created_at: at.into(),
            ended_at: None,
            tmux_target: format!("lab-{id}"),
            tmux_socket: "/s".into(),
            session_id: None,
            transcript_path: None,
            dialog_hooker: true,
            error: None,
        }
    }

    #[test]
    fn records_survive_reopening() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("registry.redb");
        {
            let r = Registry::open(&path).unwrap();
            r.put(&rec("b", "2026-01-02T00:00:00Z")).unwrap();
            r.put(&rec("a", "2026-01-01T00:00:00Z")).unwrap();
            let mut b = rec("b", "2026-01-02T00:00:00Z");
            b.status = Status::Ended;
            r.put(&b).unwrap();
        }
        let r = Registry::open(&path).unwrap();
        let all = r.list().unwrap();
        assert_eq!(all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(r.get(&RunId::parse("b").unwrap()).unwrap().unwrap().status, Status::Ended);
        assert!(r.get(&RunId::parse("zz").unwrap()).unwrap().is_none());
    }
}
