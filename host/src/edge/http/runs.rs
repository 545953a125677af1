//! Runs: list and start them, one run's view and messages (a page, or the live event
//! stream), the operator's message, an answer to its dialog, and stop (its terminal:
//! [`super::terminal`]). The decisions are `runs`'.

use super::{auth, ApiError, ApiResult, AppState};
use crate::agents::model::Answer;
use crate::runs::live::message_store::{Page, MAX_PAGE};
use crate::runs::run_list::Cursor;
use crate::runs::{CreateRun, Runs};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::Stream;
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list_runs).post(create_run))
        .route("/runs/events", get(list_events))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/messages", get(get_messages).post(post_message))
        .route("/runs/{id}/events", get(events))
        .route("/runs/{id}/dialog/answer", post(answer))
        .route("/runs/{id}/stop", post(stop))
}

/// How many runs one piece of `GET /runs`'s answer holds.
const LIST_PAGE: usize = 256;

/// `GET /runs`: one JSON array, sent a page of runs at a time, so a history of
/// thousands of runs never sits in memory as one document.
async fn list_runs(
    State(runs): State<Arc<Runs>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some((limit, before)) = q.page()? {
        let (page, next) = runs.page(limit, before.as_ref());
        if page.len() > LIST_PAGE {
            crate::runs::give_back_freed_memory();
        }
        return Ok(Json(json!({ "runs": page, "next": next.map(|c| c.encode()) })).into_response());
    }
    let listing = runs.listing();
    let long = listing.len() > LIST_PAGE;
    let pieces = json_array_pieces(listing, LIST_PAGE, move |page| runs.bodies_of(page))
        // What a long list took to make goes back to the system once it is sent.
        .chain(std::iter::once_with(move || {
            if long {
                crate::runs::give_back_freed_memory();
            }
            Vec::new()
        }))
        .map(|piece| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(piece)));
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(futures_util::stream::iter(pieces)),
    )
        .into_response())
}

/// The most runs one page of the list holds (`?limit=`).
const MAX_LIST_LIMIT: usize = 1000;

/// How many runs the first event of `GET /runs/events` holds (beside every live one).
const FRONT_PAGE: usize = 50;

/// `GET /runs?limit=N&before=CURSOR`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<String>,
    before: Option<String>,
}

impl ListQuery {
    /// None: the whole list (no `limit`). A bad value is a 400 naming it.
    fn page(&self) -> Result<Option<(usize, Option<Cursor>)>, ApiError> {
        let before = match self.before.as_deref() {
            None | Some("") => None,
            Some(s) => Some(
                Cursor::decode(s)
                    .ok_or_else(|| ApiError::bad_request("before must be a cursor from an earlier page's `next`"))?,
            ),
        };
        let limit = match self.limit.as_deref() {
            None | Some("") if before.is_some() => {
                return Err(ApiError::bad_request("before needs limit: the size of the page"))
            }
            None | Some("") => return Ok(None),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_LIST_LIMIT).contains(&n) => n,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "limit must be a whole number from 1 to {MAX_LIST_LIMIT}"
                    )))
                }
            },
        };
        Ok(Some((limit, before)))
    }
}

/// `GET /runs/events`: the run list as it changes. First `{"type": "snapshot", "runs":
/// [the newest page, then every run not ended beyond it], "next": CURSOR|null}`; then
/// `{"type": "added"|"changed", "run": <its list entry>}` for each run whose entry
/// changed (a run created since the stream opened is `added` the first time), nothing
/// while nothing changes. A stream that fell behind is sent a snapshot again.
async fn list_events(
    State(runs): State<Arc<Runs>>,
    standing: Option<axum::Extension<auth::Standing>>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let standing =
        standing.map(|axum::Extension(s)| s).ok_or_else(|| ApiError::internal("a stream without a caller"))?;
    // Subscribed before the snapshot is made: nothing that changes after is missed.
    let news = runs.list_news();
    let stop = runs.shutdown_signal();
    let follow = ListFollow { runs, news, stop, opened: crate::runs::now_rfc3339(), sent: Default::default() };
    let stream = futures_util::stream::unfold((follow, true), |(mut f, first)| async move {
        let events = if first { vec![f.snapshot()] } else { f.next().await? };
        Some((futures_util::stream::iter(events.into_iter().map(Ok)), (f, false)))
    })
    .flatten()
    .take_until(Box::pin(standing.ended()));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// One `GET /runs/events` stream's side.
struct ListFollow {
    runs: Arc<Runs>,
    news: tokio::sync::broadcast::Receiver<crate::store::paths::RunId>,
    stop: tokio::sync::watch::Receiver<bool>,
    /// When the stream opened: a run created after is `added`.
    opened: String,
    /// What was sent of each run (a hash of its entry): an entry sent as it is now is
    /// not sent again.
    sent: std::collections::HashMap<crate::store::paths::RunId, u64>,
}

impl ListFollow {
    fn snapshot(&mut self) -> Event {
        let (bodies, next) = self.runs.list_front(FRONT_PAGE);
        self.sent.clear();
        for b in &bodies {
            self.sent.insert(b.id.clone(), hash_of(b));
        }
        Event::default()
            .event("runs")
            .json_data(json!({"type": "snapshot", "runs": bodies, "next": next.map(|c| c.encode())}))
            .unwrap_or_else(|_| Event::default().comment("encode error"))
    }

    /// The events of the next news (those that came together, each run once); None
    /// when lab serve stops.
    async fn next(&mut self) -> Option<Vec<Event>> {
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        loop {
            let first = tokio::select! {
                got = self.news.recv() => got,
                _ = self.stop.wait_for(|s| *s) => return None,
            };
            let mut ids = match first {
                Ok(id) => vec![id],
                Err(RecvError::Lagged(_)) => return Some(vec![self.snapshot()]),
                Err(RecvError::Closed) => return None,
            };
            loop {
                match self.news.try_recv() {
                    Ok(id) => {
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                    Err(TryRecvError::Lagged(_)) => return Some(vec![self.snapshot()]),
                    Err(_) => break,
                }
            }
            let mut events = Vec::new();
            for id in ids {
                let Some(body) = self.runs.list_entry(&id) else { continue };
                let hash = hash_of(&body);
                let before = self.sent.insert(id, hash);
                if before == Some(hash) {
                    continue;
                }
                let kind = if before.is_none() && body.created_at >= self.opened { "added" } else { "changed" };
                events.push(
                    Event::default()
                        .event("runs")
                        .json_data(json!({"type": kind, "run": body}))
                        .unwrap_or_else(|_| Event::default().comment("encode error")),
                );
            }
            if !events.is_empty() {
                return Some(events);
            }
        }
    }
}

/// A run's list entry's hash (its JSON's).
fn hash_of(body: &crate::runs::RunBody) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(body).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// One JSON array of the bodies `bodies` makes of `items`, a page of `page` items at
/// a time (it may leave some out), in pieces made as they are taken: together they are
/// the array.
fn json_array_pieces<T, B: serde::Serialize>(
    items: Vec<T>,
    page: usize,
    bodies: impl Fn(&[T]) -> Vec<B>,
) -> impl Iterator<Item = Vec<u8>> {
    let page = page.max(1);
    let pages = items.len().div_ceil(page).max(1);
    let mut written = 0usize;
    (0..pages).map(move |i| {
        let part = &items[(i * page).min(items.len())..((i + 1) * page).min(items.len())];
        let mut out = Vec::new();
        if i == 0 {
            out.push(b'[');
        }
        for body in bodies(part) {
            if written > 0 {
                out.push(b',');
            }
            // Run bodies always serialise (strings, numbers and options of them).
            serde_json::to_writer(&mut out, &body).expect("a body serialises");
            written += 1;
        }
        if i + 1 == pages {
            out.push(b']');
        }
        out
    })
}

#[cfg(test)]
mod list_tests {
    /// The pieces add up to the array, whatever the count against the page size, and
    /// whatever the pages leave out (a whole page too).
    #[test]
    fn the_pieces_of_a_list_are_one_json_array() {
        let n_of = |i: &u32| serde_json::json!({"n": i});
        for n in [0, 1, 2, 3, 4, 7] {
            let items: Vec<u32> = (0..n).collect();
            let whole: Vec<u8> =
                super::json_array_pieces(items.clone(), 3, |part| part.iter().map(n_of).collect()).flatten().collect();
            let parsed: Vec<serde_json::Value> = serde_json::from_slice(&whole).unwrap();
            assert_eq!(parsed, items.iter().map(n_of).collect::<Vec<_>>(), "{n} items");
            // Only the items not in 3..6: the second page gives nothing.
            let kept = |i: &&u32| !(3..6).contains(*i);
            let whole: Vec<u8> =
                super::json_array_pieces(items.clone(), 3, |part| part.iter().filter(kept).map(n_of).collect())
                    .flatten()
                    .collect();
            let parsed: Vec<serde_json::Value> = serde_json::from_slice(&whole).unwrap();
            assert_eq!(parsed, items.iter().filter(kept).map(n_of).collect::<Vec<_>>(), "{n} items, some left out");
        }
        assert_eq!(super::json_array_pieces(vec![1, 2, 3, 4], 3, |p| p.to_vec()).count(), 2);
    }
}

async fn create_run(
    State(runs): State<Arc<Runs>>,
    body: Result<Json<CreateRun>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(req) = body?;
    let run = runs.create(req).await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

async fn get_run(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    Ok(Json(runs.body_of(&run)).into_response())
}

#[derive(Deserialize)]
struct PageQuery {
    after: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

impl PageQuery {
    /// `?after=SEQ&before=SEQ&limit=N`: each optional; a bad value is a 400 naming it.
    fn page(&self) -> Result<Page, ApiError> {
        let seq = |name: &str, v: &Option<String>| -> Result<Option<u64>, ApiError> {
            match v.as_deref() {
                None | Some("") => Ok(None),
                Some(s) => s
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| ApiError::bad_request(format!("{name} must be a message seq (a whole number)"))),
            }
        };
        let limit = match self.limit.as_deref() {
            None | Some("") => None,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => Some(n),
                _ => return Err(ApiError::bad_request(format!("limit must be a whole number from 1 to {MAX_PAGE}"))),
            },
        };
        Ok(Page { after: seq("after", &self.after)?, before: seq("before", &self.before)?, limit })
    }
}

/// `GET /runs/{id}/messages[?after=SEQ][&before=SEQ][&limit=N]`: the view with the
/// messages after `after` and before `before`; with `limit`, the newest N of them (the
/// first N when only `after` is given). `more_before` / `more_after` say what was left out.
async fn get_messages(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let page = q.page()?;
    runs.ensure_loaded(&run).await;
    Ok(Json(run.view(&page).await).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
}

async fn post_message(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<MessageBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    runs.send_message(&run, &body.text).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    tool_id: String,
    answers: Vec<Answer>,
}

async fn answer(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    if body.tool_id.is_empty() {
        return Err(ApiError::bad_request("tool_id is empty"));
    }
    if body.answers.is_empty() {
        return Err(ApiError::bad_request("answers is empty: give one answer per question"));
    }
    // 202 once the guard has accepted it: the keys are played in the background, and
    // the run's `answer` (view and GET /runs/{id}) tells how far they got.
    let progress = runs.answer(&run, &body.tool_id, body.answers).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"keys": progress.keys, "answer": progress}))).into_response())
}

async fn stop(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    runs.stop(&run).await?;
    Ok(Json(runs.body_of(&run)).into_response())
}

/// `GET /runs/{id}/events`: one `view` event per change; each carries only the
/// messages this connection has not been sent yet; `id` is the last seq sent, so a
/// reconnecting EventSource resumes with `Last-Event-ID`.
async fn events(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
    standing: Option<axum::Extension<auth::Standing>>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let run = runs.get(&id)?;
    // The stream ends when the credential that opened it does (a logout, a rotation).
    let standing =
        standing.map(|axum::Extension(s)| s).ok_or_else(|| ApiError::internal("a stream without a caller"))?;
    // `?after=SEQ` (a client that loaded the messages up to SEQ first) or a reconnecting
    // EventSource's `Last-Event-ID`, which wins. Any u64 is fine (a page saturates);
    // junk in the header is ignored.
    let after = q.page()?.after;
    let last: Option<u64> =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|s| s.parse().ok()).or(after);
    runs.ensure_loaded(&run).await;
    let rx = run.subscribe();
    let stop = runs.shutdown_signal();
    let stream = futures_util::stream::unfold(
        (run, rx, stop, last, true),
        |(run, mut rx, mut stop, mut last, first)| async move {
            if first {
                rx.borrow_and_update();
            } else {
                tokio::select! {
                    changed = rx.changed() => changed.ok()?,
                    _ = stop.wait_for(|s| *s) => return None,
                }
            }
            let body = run.view(&Page { after: last, ..Page::default() }).await;
            if let Some(m) = body.messages.last() {
                last = Some(m.seq);
            }
            let mut ev = Event::default()
                .event("view")
                .json_data(&body)
                .unwrap_or_else(|_| Event::default().comment("encode error"));
            if let Some(l) = last {
                ev = ev.id(l.to_string());
            }
            Some((Ok(ev), (run, rx, stop, last, false)))
        },
    )
    .take_until(Box::pin(standing.ended()));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
