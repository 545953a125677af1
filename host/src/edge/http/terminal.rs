//! A run's terminal: its screen once (`GET /runs/{id}/terminal`), live over a WebSocket
//! (`GET /runs/{id}/terminal/stream`: the pane's bytes down, keys up only from the
//! device that has taken control), and taking or releasing control (`POST
//! /runs/{id}/terminal/control {"take": bool}`). The stream is the terminal seam's
//! [`crate::machines::terminal::Terminal::watch`]: nothing polls the pane.

use super::{auth, ApiError, ApiResult, AppState};
use crate::edge::audit::{self, Actor, Audit};
use crate::machines::terminal::{PaneEvent, PaneWatch};
use crate::runs::answer::terminal_control::Holder;
use crate::runs::{Run, Runs};
use axum::extract::rejection::JsonRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs/{id}/terminal", get(screen))
        .route("/runs/{id}/terminal/stream", get(stream))
        .route("/runs/{id}/terminal/control", post(control))
}

/// The most live terminal views open at once (each is a terminal client lab runs).
pub const MAX_STREAMS: usize = 64;
/// The most bytes of keys one message from the browser carries.
pub const MAX_KEYS: usize = 16 * 1024;

static OPEN_STREAMS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_STREAMS`] views, held by whatever holds this: the handler, then
/// the upgrade's callback, then the view. Given back when that ends, whichever way
/// (the view closed, or the upgrade never completing and its callback dropped unrun).
struct Slot(());

impl Slot {
    fn take() -> Option<Slot> {
        OPEN_STREAMS
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < MAX_STREAMS).then_some(n + 1))
            .ok()
            .map(|_| Slot(()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        OPEN_STREAMS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `GET /runs/{id}/terminal`: `{"attach", "screen", "state"}` (the screen's text now).
async fn screen(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let rec = run.record();
    let term = run.terminal();
    // How to attach is the terminal's to say (a terminal on another host says otherwise).
    let attach = crate::util::shell::join(term.attach_command(&rec.tmux_target));
    let target = rec.tmux_target.clone();
    let screen = tokio::task::spawn_blocking(move || term.capture(&target)).await.ok().and_then(Result::ok);
    Ok(Json(json!({"attach": attach, "screen": screen.unwrap_or_default(), "state": run.snapshot().derived.state}))
        .into_response())
}

/// Who a caller is, as a terminal's holder.
fn holder_of(access: &auth::Access, caller: &auth::Caller) -> Holder {
    let (device_id, device_name) = match access.actor(caller) {
        Actor::Device { device_id, device_name } => (device_id, device_name),
        Actor::Other(s) => (s.clone(), s),
    };
    Holder { device_id, device_name, since: crate::util::time::now_rfc3339() }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlBody {
    take: bool,
}

/// `POST /runs/{id}/terminal/control {"take": true|false}` → `{"terminal_control":
/// holder|null}`: take control (from whoever had it) or let go of it.
async fn control(
    State(runs): State<Arc<Runs>>,
    State(access): State<Arc<auth::Access>>,
    Path(id): Path<String>,
    caller: Option<Extension<auth::Caller>>,
    body: Result<Json<ControlBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    let Some(Extension(caller)) = caller else { return Err(ApiError::internal("a request without a caller")) };
    let me = holder_of(&access, &caller);
    if body.take {
        let before = runs.take_terminal(&run, me.clone()).await?;
        let taken_from = before.filter(|b| b.device_id != me.device_id);
        Ok(Json(json!({"terminal_control": me, "taken_from": taken_from})).into_response())
    } else {
        runs.release_terminal(&run, &me.device_id).await;
        Ok(Json(json!({"terminal_control": run.snapshot().keyboard})).into_response())
    }
}

/// `GET /runs/{id}/terminal/stream` (WebSocket). Down: `{"type": "size", "cols",
/// "rows"}`, the pane's bytes as binary messages (first a drawing of the screen as it
/// is), `{"type": "control", "holder", "you"}` whenever control changes hands, and
/// `{"type": "ended", "reason"}` last. Up: `{"keys": "…"}` and `{"resize": [cols,
/// rows]}`, taken only from the device that has control (else `{"type": "refused",
/// "reason"}`).
async fn stream(
    State(runs): State<Arc<Runs>>,
    State(access): State<Arc<auth::Access>>,
    State(log): State<Arc<Audit>>,
    Path(id): Path<String>,
    caller: Option<Extension<auth::Caller>>,
    standing: Option<Extension<auth::Standing>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let ws = ws.map_err(|e| ApiError::bad_request(format!("not a WebSocket request: {}", e.body_text())))?;
    if !runs.has_terminal(&run) {
        return Err(crate::runs::RunError::NotSupported(
            "this run has no terminal (its agent speaks a protocol)".into(),
        )
        .into());
    }
    let (Some(Extension(caller)), Some(Extension(standing))) = (caller, standing) else {
        return Err(ApiError::internal("a stream without a caller"));
    };
    let Some(slot) = Slot::take() else {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "too_many_streams",
            message: format!("{MAX_STREAMS} terminal views are open already: close one"),
        });
    };
    let me = holder_of(&access, &caller);
    let actor = access.actor(&caller);
    Ok(ws.max_message_size(64 * 1024).on_upgrade(move |socket| async move {
        let _slot = slot;
        let open = Open { runs, run, me, actor, log };
        open.serve(socket, standing).await;
    }))
}

/// What one open stream works with.
struct Open {
    runs: Arc<Runs>,
    run: Arc<Run>,
    me: Holder,
    actor: Actor,
    log: Arc<Audit>,
}

/// What goes up to the pane, in order, on a thread of its own (the watch blocks).
enum Up {
    Keys(Vec<u8>),
    Resize(u16, u16),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FromBrowser {
    keys: Option<String>,
    resize: Option<(u16, u16)>,
}

fn text(v: serde_json::Value) -> Message {
    Message::Text(v.to_string().into())
}

impl Open {
    async fn serve(self, mut socket: WebSocket, standing: auth::Standing) {
        // Who has control, first: a view whose client is gone already (a dropped
        // connection) ends here, before a terminal client is started for it.
        let mut view = self.run.subscribe();
        let mut holder = view.borrow_and_update().keyboard.clone();
        if socket.send(self.control_message(&holder)).await.is_err() {
            return;
        }
        let rec = self.run.record();
        let term = self.run.terminal();
        let (tx, mut pane) = tokio::sync::mpsc::channel(256);
        let target = rec.tmux_target.clone();
        let watch = tokio::task::spawn_blocking(move || term.watch(&target, tx)).await;
        let watch = match watch {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => return end(socket, &e.to_string()).await,
            Err(e) => return end(socket, &e.to_string()).await,
        };
        let up = typist(watch);
        let mut stop = self.runs.shutdown_signal();
        let ended = standing.ended();
        tokio::pin!(ended);
        let why = loop {
            tokio::select! {
                ev = pane.recv() => match ev {
                    Some(PaneEvent::Size { cols, rows }) => {
                        if socket.send(text(json!({"type": "size", "cols": cols, "rows": rows}))).await.is_err() {
                            break None;
                        }
                    }
                    Some(PaneEvent::Output(bytes)) => {
                        if socket.send(Message::Binary(bytes.into())).await.is_err() {
                            break None;
                        }
                    }
                    Some(PaneEvent::Ended(why)) => break Some(why),
                    None => break Some("the terminal closed".to_string()),
                },
                msg = socket.recv() => match msg {
                    Some(Ok(Message::Text(t))) => {
                        if let Err(reason) = self.take_message(&t, &up) {
                            if socket.send(text(json!({"type": "refused", "reason": reason}))).await.is_err() {
                                break None;
                            }
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        let _ = socket.send(text(json!({"type": "refused", "reason": "send keys as {\"keys\": …}"}))).await;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break None,
                },
                changed = view.changed() => {
                    if changed.is_err() {
                        break Some("the run is gone".to_string());
                    }
                    let now = view.borrow_and_update().keyboard.clone();
                    if now != holder {
                        holder = now;
                        if socket.send(self.control_message(&holder)).await.is_err() {
                            break None;
                        }
                    }
                }
                _ = &mut ended => break Some("your login ended".to_string()),
                _ = stop.changed() => break Some("lab is shutting down".to_string()),
            }
        };
        drop(up);
        // Control ends with the last view of the device that had it: a closed tab never
        // leaves a run locked.
        if self.run.snapshot().keyboard.as_ref().is_some_and(|h| h.device_id == self.me.device_id)
            && self.runs.release_terminal(&self.run, &self.me.device_id).await
        {
            let entry = audit::entry(
                self.actor.clone(),
                "terminal.release",
                Some(self.run.id.to_string()),
                json!({"why": "its terminal view closed"}),
                None,
            );
            let log = self.log.clone();
            let _ = tokio::task::spawn_blocking(move || log.append(&entry)).await;
        }
        if let Some(why) = why {
            end(socket, &why).await;
        }
    }

    fn control_message(&self, holder: &Option<Holder>) -> Message {
        let you = holder.as_ref().is_some_and(|h| h.device_id == self.me.device_id);
        text(json!({"type": "control", "holder": holder, "you": you}))
    }

    /// A message from the browser: keys or a resize, only from the device in control.
    fn take_message(&self, t: &str, up: &std::sync::mpsc::Sender<Up>) -> Result<(), String> {
        let msg: FromBrowser = serde_json::from_str(t).map_err(|e| format!("not a message lab knows: {e}"))?;
        let holds = self.run.snapshot().keyboard.as_ref().is_some_and(|h| h.device_id == self.me.device_id);
        if !holds {
            return Err("read-only: take control first".into());
        }
        if let Some(keys) = msg.keys {
            if keys.len() > MAX_KEYS {
                return Err(format!("at most {MAX_KEYS} bytes of keys at once"));
            }
            up.send(Up::Keys(keys.into_bytes())).map_err(|_| "the terminal is gone".to_string())?;
        }
        if let Some((cols, rows)) = msg.resize {
            up.send(Up::Resize(cols, rows)).map_err(|_| "the terminal is gone".to_string())?;
        }
        Ok(())
    }
}

/// The thread that types into the pane; it ends (and the watch with it) when the
/// sender is dropped.
fn typist(mut watch: Box<dyn PaneWatch>) -> std::sync::mpsc::Sender<Up> {
    let (tx, rx) = std::sync::mpsc::channel::<Up>();
    std::thread::spawn(move || {
        for up in rx {
            let done = match up {
                Up::Keys(b) => watch.keys(&b),
                Up::Resize(c, r) => watch.resize(c, r),
            };
            if let Err(e) = done {
                tracing::warn!(error = %e, "typing into a terminal view failed");
            }
        }
    });
    tx
}

async fn end(mut socket: WebSocket, why: &str) {
    let _ = socket.send(text(json!({"type": "ended", "reason": why}))).await;
    let _ = socket.send(Message::Close(None)).await;
}
