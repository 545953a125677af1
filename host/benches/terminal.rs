//! The live terminal's benchmark (not a test): keystroke → echo through lab, and what
//! open terminal views cost while nothing changes on screen. Run with
//!
//!     cargo bench -p lab --bench terminal
//!     LAB_TERM_KEYS=500 LAB_TERM_VIEWS=20 cargo bench -p lab --bench terminal
//!
//! A `lab serve` with its own home and tmux server, one run of fake-claude waiting in
//! its composer (it draws each typed character). Then:
//! - keystroke → echo: a WebSocket client of `GET /runs/{id}/terminal/stream` (as the
//!   browser's) takes control and types one key at a time (`LAB_TERM_KEYS`, default
//!   300: letters, every 30th a run of backspaces), timing each from its send until
//!   the pane's output with it arrives; the same keys typed through the terminal seam
//!   itself (tmux control mode, no HTTP) are the baseline, and the ratio is lab's
//!   share;
//! - idle: CPU of lab serve and everything it runs (the views' tmux clients among it)
//!   and of the tmux server over `LAB_TERM_IDLE_SECS` (default 20) with no view open,
//!   then with `LAB_TERM_VIEWS` (default 10) open and nothing drawn, and the bytes the
//!   views received meanwhile.
//!
//! Everything is stopped and removed at the end.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::terminal::TermStream;
use common::*;
use lab::machines::terminal::{PaneEvent, Terminal};
use serde_json::json;
use std::time::{Duration, Instant};
use support::{cpu_split, env_num, env_secs, ms, pct, print_pct};

/// The goal (issue 58): keystroke → echo at most this, p50, for a run here.
const GOAL_P50_MS: f64 = 50.0;

/// The key for step `i`: letters, and every 30th step a backspace.
fn key(i: usize) -> (String, Option<char>) {
    if i % 30 == 29 {
        ("\x7f".into(), None)
    } else {
        let c = (b'a' + (i % 26) as u8) as char;
        (c.to_string(), Some(c))
    }
}

/// Time each key through lab's stream until its echo arrives: an async WebSocket
/// client (as a browser's: its frames read as they come, each time-stamped on arrival).
fn through_lab(lab: &Lab, id: &str, n: usize) -> Vec<f64> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let addr = lab.url.strip_prefix("http://").unwrap();
        let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
            format!("ws://{addr}/runs/{id}/terminal/stream").as_str(),
        )
        .unwrap();
        req.headers_mut().insert("authorization", format!("Bearer {}", lab.token.as_deref().unwrap()).parse().unwrap());
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let (ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
        let (mut up, mut down) = ws.split();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
        tokio::spawn(async move {
            while let Some(Ok(m)) = down.next().await {
                if let Message::Binary(b) = m {
                    if tx.send((Instant::now(), b.to_vec())).is_err() {
                        return;
                    }
                }
            }
        });
        let drain = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, Vec<u8>)>| while rx.try_recv().is_ok() {};
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drain(&mut rx);
            let (k, c) = key(i);
            let t = Instant::now();
            up.send(Message::Text(json!({"keys": k}).to_string().into())).await.unwrap();
            let at = loop {
                let (at, b) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("an echo").unwrap();
                if c.is_none_or(|c| b.contains(&(c as u8))) {
                    break at;
                }
            };
            out.push(ms(at - t));
        }
        let _ = up.send(Message::Close(None)).await;
        out
    })
}

/// The same through the terminal seam itself: a control-mode client, no HTTP.
fn through_seam(w: &World, target: &str, n: usize) -> Vec<f64> {
    let tmux = lab::machines::tmux::Tmux::new(w.home.join("tmux.sock"));
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let mut watch = tmux.watch(target, tx).expect("a watch of the pane");
    let next = |rx: &mut tokio::sync::mpsc::Receiver<PaneEvent>, until: Instant| loop {
        match rx.try_recv() {
            Ok(e) => return Some(e),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(_) => return None,
        }
    };
    // The first drawing.
    while let Some(e) = next(&mut rx, Instant::now() + Duration::from_millis(300)) {
        let _ = e;
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        while next(&mut rx, Instant::now() + Duration::from_millis(20)).is_some() {}
        let (k, c) = key(i);
        let t = Instant::now();
        watch.keys(k.as_bytes()).unwrap();
        loop {
            match next(&mut rx, t + Duration::from_secs(10)).expect("an echo") {
                PaneEvent::Output(b) if c.is_none_or(|c| b.contains(&(c as u8))) => break,
                _ => {}
            }
        }
        out.push(ms(t.elapsed()));
    }
    out
}

fn main() {
    let keys: usize = env_num("LAB_TERM_KEYS", 300);
    let views: usize = env_num("LAB_TERM_VIEWS", 10);
    let idle = env_secs("LAB_TERM_IDLE_SECS", 20);
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Type away."}, {"idle": {}}]}));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "go");
    let id = run["id"].as_str().unwrap().to_string();
    lab.wait_state(&id, "idle");

    let (st, b) = lab.post(&format!("/runs/{id}/terminal/control"), &json!({"take": true}));
    assert_eq!(st, 200, "{b}");
    let via_lab = through_lab(&lab, &id, keys);
    let target = run["tmux_target"].as_str().unwrap().to_string();
    let via_seam = through_seam(&w, &target, keys);
    let (l, b) = (pct(via_lab.clone()), pct(via_seam.clone()));
    println!("keystroke → echo, {keys} keys, one run here:");
    print_pct("  through lab (WebSocket, control held)", 40, via_lab);
    print_pct("  through the seam alone (tmux -C)", 40, via_seam);
    println!(
        "  lab / seam: p50 {:.2}x, p99 {:.2}x; goal p50 ≤ {GOAL_P50_MS} ms: {}",
        l.p50 / b.p50,
        l.p99 / b.p99,
        if l.p50 <= GOAL_P50_MS { "ok" } else { "OVER" }
    );
    lab.wait_view(&id, "control let go with its view", |v| v["terminal_control"].is_null());

    // Idle: nothing changes on the screen.
    std::thread::sleep(Duration::from_secs(2));
    let none = cpu_split(&lab, &w, idle);
    let mut open: Vec<TermStream> = (0..views)
        .map(|_| {
            let mut v = TermStream::open(&lab.url, lab.token.as_deref(), &id, &[]).unwrap();
            v.wait_screen(Duration::from_secs(30), "the first drawing", |t| t.contains("Type away."));
            v
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let before: usize = open
        .iter_mut()
        .map(|v| {
            v.pump(Duration::from_millis(50));
            v.screen.len()
        })
        .sum();
    let with = cpu_split(&lab, &w, idle);
    let after: usize = open
        .iter_mut()
        .map(|v| {
            v.pump(Duration::from_millis(50));
            v.screen.len()
        })
        .sum();
    println!(
        "idle, {:.0} s, nothing drawn: no view {:.3} % of a core (lab {:.3} + tmux {:.3}); \
         {views} views open {:.3} % (lab {:.3} + tmux {:.3}); bytes sent to the views meanwhile: {}",
        with.secs,
        none.total(),
        none.lab,
        none.tmux,
        with.total(),
        with.lab,
        with.tmux,
        after - before
    );
    for v in open {
        v.close();
    }
    lab.stop();
}
