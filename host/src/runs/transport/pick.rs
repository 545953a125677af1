//! Which transport reaches a run: decided once, when it is launched or found (a run
//! holds its own from then on). With the run's record, the only place that asks where a
//! run lives.

use super::{way_for, way_of, Transport, Way};
use crate::runs::api::CreateRun;
use crate::runs::launch::workspace::Workspace;
use crate::runs::registry::RunRecord;
use crate::runs::Runs;
use std::sync::Arc;

impl Runs {
    /// How the run `req` asks for is launched: on its `host`, as the ACP agent it
    /// names, or in lab's tmux here. With [`Runs::transport`], the only places that ask.
    pub(in crate::runs) fn transport_for(&self, req: &CreateRun) -> Arc<dyn Transport> {
        self.by_way(way_for(req, self.acp.agent(&req.provider).is_some()))
    }

    /// How `rec`'s run is reached: with [`Runs::transport_for`], the only places that
    /// ask (a run holds its own from then on: [`Run::transport`]; this is for records
    /// with no run in memory, at rest or still launching).
    pub(in crate::runs) fn transport(&self, rec: &RunRecord) -> Arc<dyn Transport> {
        self.by_way(way_of(rec, self.acp.dir()))
    }

    fn by_way(&self, way: Way) -> Arc<dyn Transport> {
        match way {
            Way::Here => self.here.clone(),
            Way::Remote => self.remote.clone(),
            Way::Acp => self.acp.clone(),
        }
    }

    /// Where `rec`'s run does its git work (worktrees, diffs, merges).
    pub(in crate::runs) fn workspace_of(&self, rec: &RunRecord) -> Workspace {
        self.transport(rec).workspace(self, rec)
    }
}
