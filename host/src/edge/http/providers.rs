//! `GET /providers`: what serves new runs, what each live run uses, what was refused.

use crate::runs::Runs;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

/// `GET /providers`: every provider serving new runs — its source, version and build
/// (`digest`), the runs live on each build (`runs`), and the files refused that would
/// have replaced it (`refused`) — then those removed while lab serves whose runs go on
/// (`"state": "removed"`), then refused files no provider came from
/// (`"state": "refused"`, the reason in `error`).
pub(super) async fn providers(State(runs): State<Arc<Runs>>) -> impl IntoResponse {
    use crate::agents::components::Source;
    let set = runs.providers();
    let mut in_use = runs.builds_in_use();
    let mut runs_of = |name: &str| -> Vec<Value> {
        let live = in_use.remove(name).unwrap_or_default();
        live.into_iter()
            .map(|(id, b)| json!({"id": id, "version": b.version, "digest": b.digest, "source": b.source}))
            .collect()
    };
    let refused_of = |source: &Source| -> Vec<Value> {
        let of = set.failed.iter().filter(|f| &f.source == source);
        of.map(|f| json!({"source": f.source.to_string(), "error": f.error})).collect()
    };
    let mut list: Vec<Value> = Vec::new();
    for (f, _) in &set.loaded {
        let agent_version = runs.agent_version(&f.info.name, &f.info.default_program);
        list.push(json!({
            "name": f.info.name,
            "state": "serving",
            "display_name": f.info.display_name,
            "version": f.info.version,
            "source": f.source.to_string(),
            "digest": f.digest,
            "agent_version": agent_version,
            "description": f.info.description,
            "permission_modes": f.info.permission_modes,
            "dialog_hooker": f.dialog_hooker,
            "screen_reader": f.capabilities.screen_reader,
            "wit": f.capabilities.version.package(),
            "transport": "tmux",
            "abilities": {
                "prompts": f.prompt_kinds,
                "resume": f.capabilities.abilities.resume,
                "fork": f.capabilities.abilities.fork,
                "usage": f.capabilities.reads_usage(),
                "sandbox": f.capabilities.says_sandbox_needs(),
            },
            "runs": runs_of(&f.info.name),
            "refused": refused_of(&f.source),
        }));
    }
    for (name, a, modes, forks) in runs.acp_agents() {
        let c = a.component.as_ref();
        list.push(json!({
            "name": name,
            "state": "serving",
            "display_name": a.display_name(&name),
            "version": c.map(|c| c.info.version.clone()),
            "source": c.map_or_else(|| "lab.toml".to_string(), |c| c.source.to_string()),
            "digest": c.map(|c| c.digest.clone()),
            "agent_version": null,
            "description": a.description(),
            "permission_modes": modes,
            "dialog_hooker": true,
            "screen_reader": false,
            "wit": c.map(|c| c.capabilities.version.package()),
            "transport": "acp",
            // What lab does for every ACP agent: the protocol's prompts, resume by
            // `session/load` (where the agent offers it), usage where its responses say
            // it, a jail here (its workdir, a home of its own, `[sandbox] allow`'s hosts);
            // fork where the agent said it forks sessions (known once it ran).
            "abilities": {
                "prompts": ["permission", "question"],
                "resume": true,
                "fork": forks,
                "usage": true,
                "sandbox": true,
            },
            "runs": [],
            "refused": c.map(|c| refused_of(&c.source)).unwrap_or_default(),
        }));
    }
    for (name, r) in runs.removed_providers() {
        list.push(json!({
            "name": name,
            "state": "removed",
            "version": r.build.version,
            "source": r.build.source,
            "digest": r.build.digest,
            "removed_at": r.at,
            "dialog_hooker": false,
            "transport": "tmux",
            "runs": runs_of(&name),
            "refused": [],
        }));
    }
    let served: Vec<&Source> = set.facts().map(|f| &f.source).collect();
    for f in set.failed.iter().filter(|f| !served.contains(&&f.source)) {
        let name = match &f.source {
            Source::Bundled(n) => n.to_string(),
            Source::File(p) => p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        };
        list.push(json!({
            "name": name,
            "state": "refused",
            "version": null,
            "source": f.source.to_string(),
            "error": f.error,
            "dialog_hooker": false,
            "transport": null,
        }));
    }
    Json(list)
}
