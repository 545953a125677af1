//! Security tests: the live terminal (docs/security.md "The live terminal"). Real `lab
//! serve`, real tmux, a shell-script agent: views are counted by what holds them, and
//! nothing on the agent's screen is read as tmux's protocol.

use crate::common::terminal::TermStream;
use crate::common::*;
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A world whose plainlog provider runs `script`, and its lab.
fn shell_agent(script: &str) -> (World, Lab) {
    let w = World::with_plainlog(lab::agents::components::fixtures::PLAINLOG, script);
    let lab = Lab::start(&w);
    (w, lab)
}

/// An agent that draws `screen` and stays; it prints `still here` once `<transcript>.go`
/// exists.
fn agent_drawing(screen: &str) -> String {
    format!(
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
printf '%s\n' '{{"role":"user","text":"hi"}}' >> "$t"
printf '{screen}'
for i in $(seq 1200); do [ -f "$t.go" ] && break; sleep 0.1; done
echo "still here"
sleep 600
"#
    )
}

/// The run's screen once it shows `text`.
fn drawn(lab: &Lab, id: &str, text: &str) -> String {
    wait_for(T, "the agent's screen", || {
        let (_, t) = lab.get(&format!("/runs/{id}/terminal"));
        t["screen"].as_str().filter(|s| s.contains(text)).map(str::to_string)
    })
}

/// Close `s` with a reset (no FIN; what is unsent is dropped).
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a setsockopt on a socket this test holds, with a value of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

/// How many handshakes row 4's test drops.
const DROPS: usize = 1000;

/// Row 4: a handshake whose upgrade never completes (its client stopped reading, then
/// went) holds a view's slot only while its connection lives: the slots come back,
/// and a view opens after every slot was held so.
#[test]
fn views_whose_upgrade_never_completes_give_their_slots_back() {
    let (w, lab) = shell_agent(&agent_drawing("ready\\n"));
    let id = lab.create_run(&w, "plainlog", "hi")["id"].as_str().unwrap().to_string();
    drawn(&lab, &id, "ready");
    let addr = lab.url.strip_prefix("http://").unwrap().to_string();
    let token = lab.token.clone().unwrap();
    let max = lab::edge::http::terminal::MAX_STREAMS;
    // The handshake as a browser sends it, from clients gone at once (a reset, as a
    // phone dropping off the network leaves it): some are taken, and lab's answer finds
    // nobody, so their connections are never handed over.
    let t = std::time::Instant::now();
    for _ in 0..DROPS {
        let mut s = TcpStream::connect(&addr).unwrap();
        let req = format!(
            "GET /runs/{id}/terminal/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        reset(s);
    }
    eprintln!("{DROPS} dropped handshakes in {} ms", t.elapsed().as_millis());
    let mut views = wait_for(T, "every view's slot back once the stuck handshakes are gone", || {
        // All at once, or none kept (a view given back is free again soon).
        (0..max).map(|_| TermStream::open(&lab.url, lab.token.as_deref(), &id, &[]).ok()).collect::<Option<Vec<_>>>()
    });
    views[0].wait_screen(T, "the agent's screen", |t| t.contains("ready"));
    lab.stop();
}

/// Row 5: an agent whose screen holds lines that read as tmux's control protocol
/// (`%exit`, `%end …`, `%begin`) ends no view: they are the screen's text, and the
/// view goes on showing what the agent writes next.
#[test]
fn protocol_words_on_the_agent_s_screen_end_no_view() {
    let (w, lab) = shell_agent(&agent_drawing("%%exit\\n%%end 1 2 0\\n%%begin 1 2 0\\n%%error 1 2 0\\nready\\n"));
    let id = lab.create_run(&w, "plainlog", "hi")["id"].as_str().unwrap().to_string();
    let screen = drawn(&lab, &id, "ready");
    assert!(screen.contains("%exit\n%end 1 2 0\n%begin"), "{screen}");
    let mut views: Vec<TermStream> =
        (0..2).map(|_| TermStream::open(&lab.url, lab.token.as_deref(), &id, &[]).unwrap()).collect();
    for v in &mut views {
        v.wait_screen(T, "the screen as it is, protocol words included", |t| {
            t.contains("%exit") && t.contains("%begin") && t.contains("ready")
        });
    }
    // What the agent writes next still reaches every view; none was ended.
    let transcript = wait_for(T, "the agent's transcript", || {
        std::fs::read_dir(w.agent_home.join(".plainlog"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_none_or(|x| x != "go"))
    });
    std::fs::write(format!("{}.go", transcript.display()), b"").unwrap();
    for v in &mut views {
        v.wait_screen(T, "what the agent wrote after", |t| t.contains("still here"));
        assert!(!v.said.iter().any(|m: &Value| m["type"] == "ended"), "{:?}", v.said);
        assert!(!v.closed);
    }
    lab.stop();
}
