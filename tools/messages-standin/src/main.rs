//! `messages-standin [--script <file.json> | --demo] [--addr 127.0.0.1:0]`
//!
//! Serves the scripted Messages API stand-in on a loopback address (`--demo`: the
//! built-in demo conversation of lab's dialog cards, `messages_standin::demo`), prints
//! `listening on 127.0.0.1:PORT` on stdout, and serves until killed. Recorded requests are
//! available at `GET /_standin/requests`, emitted tool uses at `GET /_standin/tool_uses`.

use messages_standin::{Script, Standin};
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "usage: messages-standin [--script <file.json> | --demo] [--addr 127.0.0.1:0]";

fn main() -> ExitCode {
    let mut script_path: Option<String> = None;
    let mut demo = false;
    let mut addr = "127.0.0.1:0".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script_path = args.next(),
            "--demo" => demo = true,
            "--addr" => match args.next() {
                Some(v) => addr = v,
                None => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                if let Some(v) = other.strip_prefix("--script=") {
                    script_path = Some(v.to_string());
                } else if let Some(v) = other.strip_prefix("--addr=") {
                    addr = v.to_string();
                } else {
                    eprintln!("messages-standin: unknown argument {other:?}\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    let script = match &script_path {
        Some(_) if demo => {
            eprintln!("messages-standin: --script and --demo exclude each other\n{USAGE}");
            return ExitCode::from(2);
        }
        None if demo => Script::demo(),
        Some(p) => match Script::from_file(p) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("messages-standin: cannot load script {p}: {e}");
                return ExitCode::from(2);
            }
        },
        None => Script::new(),
    };
    let standin = match Standin::start_on(addr.as_str(), script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("messages-standin: cannot listen on {addr}: {e}");
            return ExitCode::from(1);
        }
    };
    println!("listening on {}", standin.addr());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
