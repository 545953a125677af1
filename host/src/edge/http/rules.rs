//! Answer rules over the API: `GET/POST /rules`, `PUT/DELETE /rules/{id}`, and `POST
//! /rules/test` (which rule would answer a prompt with these facts). Each change is an
//! action the audit layer logs (`rule.add`, `rule.change`, `rule.remove`); the rules
//! themselves are [`crate::rules`]'.

use super::{ApiError, ApiResult, AppState};
use crate::rules::book::BookError;
use crate::rules::evaluate::{evaluate, Facts};
use crate::rules::from_card::{allow_always, CardError, Scope};
use crate::rules::rule::Rule;
use crate::rules::Rules;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) fn router() -> Router<AppState> {
    rule_set().route("/runs/{id}/dialog/rule", post(from_card)).route("/runs/{id}/rules", put(run_rules))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRules {
    on: bool,
}

/// `PUT /runs/{id}/rules` `{"on": bool}` → `200` the run: whether answer rules answer
/// its prompts (off: every prompt waits for the operator, as without rules).
async fn run_rules(
    State(runs): State<Arc<crate::runs::Runs>>,
    Path(id): Path<String>,
    body: Result<Json<RunRules>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(req) = body?;
    let run = runs.get(&id)?;
    runs.set_answer_rules(&run, req.on)?;
    Ok(Json(runs.body_of(&run)).into_response())
}

/// The rule set's own routes: on the API, and on the control socket for `lab rules`.
pub(super) fn rule_set() -> Router<AppState> {
    Router::new()
        .route("/rules", get(list).post(add))
        .route("/rules/test", post(test))
        .route("/rules/{id}", put(replace).delete(remove).get(one))
}

type RulesState = State<Arc<Rules>>;

/// A rule as the API shows it: the rule, and how many prompts it answered today.
fn shown(rules: &Rules, r: &Rule) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    v["shared"] = json!(r.shared);
    v["answered_today"] = json!(rules.answered_today(&r.id));
    v
}

impl From<BookError> for ApiError {
    fn from(e: BookError) -> Self {
        let message = e.to_string();
        match e {
            BookError::Bad(_) => ApiError::bad_request(message),
            BookError::NotFound => ApiError { status: StatusCode::NOT_FOUND, code: "not_found", message },
            BookError::Shared => ApiError { status: StatusCode::CONFLICT, code: "read_only", message },
            BookError::Io(_) => ApiError::internal(message),
        }
    }
}

async fn list(State(rules): RulesState) -> Response {
    let all: Vec<Value> = rules.book.rules().iter().map(|r| shown(&rules, r)).collect();
    Json(all).into_response()
}

async fn one(State(rules): RulesState, Path(id): Path<String>) -> ApiResult<Response> {
    let r = rules.book.get(&id).ok_or(BookError::NotFound)?;
    Ok(Json(shown(&rules, &r)).into_response())
}

/// `POST /rules` `Rule` (its `id` is lab's to give) → `201` the rule as kept.
async fn add(State(rules): RulesState, body: Result<Json<Rule>, JsonRejection>) -> ApiResult<Response> {
    let Json(rule) = body?;
    if rule.shared {
        return Err(ApiError::bad_request("shared rules are lab.toml's: write it there"));
    }
    let kept = rules.book.add(rule)?;
    Ok((StatusCode::CREATED, Json(shown(&rules, &kept))).into_response())
}

/// `PUT /rules/{id}` `Rule` → `200` the rule as kept; lab.toml's: `409 read_only`.
async fn replace(
    State(rules): RulesState,
    Path(id): Path<String>,
    body: Result<Json<Rule>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(rule) = body?;
    if !rule.id.is_empty() && rule.id != id {
        return Err(ApiError::bad_request(format!("the body's id {:?} is not the path's {id:?}", rule.id)));
    }
    let (_, kept) = rules.book.replace(&id, rule)?;
    Ok(Json(shown(&rules, &kept)).into_response())
}

/// `DELETE /rules/{id}` → `204`.
async fn remove(State(rules): RulesState, Path(id): Path<String>) -> ApiResult<Response> {
    rules.book.remove(&id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FromCard {
    tool_id: String,
    scope: Scope,
}

/// `POST /runs/{id}/dialog/rule` `{"tool_id", "scope": "repository"|"machine"|
/// "everywhere"}` → `201 {"rule": Rule, "answer": AnswerProgress}`: the narrowest allow
/// rule for the run's permission prompt, kept, and the prompt answered by it.
async fn from_card(
    State(runs): State<Arc<crate::runs::Runs>>,
    State(rules): RulesState,
    Path(id): Path<String>,
    body: Result<Json<FromCard>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(req) = body?;
    let run = runs.get(&id)?;
    match allow_always(&runs, &rules, &run, &req.tool_id, req.scope).await {
        Ok((rule, answer)) => {
            Ok((StatusCode::CREATED, Json(json!({"rule": shown(&rules, &rule), "answer": answer}))).into_response())
        }
        Err(CardError::Run(e)) => Err(e.into()),
        Err(CardError::Book(e)) => Err(e.into()),
        Err(CardError::Unfit(message)) => {
            Err(ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, code: "not_supported", message })
        }
    }
}

/// A prompt's facts, as `POST /rules/test` takes them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFacts {
    provider: String,
    #[serde(default = "permission")]
    kind: String,
    tool: String,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    host: Option<String>,
}

fn permission() -> String {
    "permission".into()
}

/// `POST /rules/test` facts → `{"action": "allow"|"deny"|"ask", "rule": Rule|null,
/// "would": Rule|null}`: what the rules say now of a prompt with these facts.
async fn test(State(rules): RulesState, body: Result<Json<TestFacts>, JsonRejection>) -> ApiResult<Response> {
    let Json(t) = body?;
    let set = rules.book.rules();
    let f = Facts::asked(&t.provider, &t.kind, &t.tool, t.subject.as_deref(), t.workdir.as_deref(), t.host.as_deref());
    let v = evaluate(&set, &f);
    let action = v.rule.map_or("ask", |r| r.action.name());
    Ok(Json(json!({
        "action": action,
        "rule": v.rule.map(|r| shown(&rules, r)),
        "would": v.would.map(|r| shown(&rules, r)),
    }))
    .into_response())
}
