//! `gemini-standin [--port N | --addr 127.0.0.1:N]`: serves the stand-in (no turns: every
//! turn gets the fallback reply) and prints `listening on 127.0.0.1:PORT`. Point Gemini
//! CLI at it with `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut addr = "127.0.0.1:0".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--addr", Some(v)) => addr = v,
            ("--port", Some(v)) => addr = format!("127.0.0.1:{v}"),
            _ => {
                eprintln!("usage: gemini-standin [--port N | --addr 127.0.0.1:N]");
                return ExitCode::from(2);
            }
        }
    }
    match gemini_standin::Standin::start_on(addr.as_str(), gemini_standin::Script::new()) {
        Ok(s) => {
            println!("listening on {}", s.addr());
            let _ = std::io::stdout().flush();
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            eprintln!("gemini-standin: cannot listen on {addr}: {e}");
            ExitCode::from(1)
        }
    }
}
