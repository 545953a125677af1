//! `responses-standin [--script <file.json>] [--port N | --addr 127.0.0.1:N] [--log <requests.jsonl>]`
//!
//! Serves the scripted Responses API stand-in on a loopback address (default
//! `127.0.0.1:0`, an ephemeral port), prints `listening on 127.0.0.1:PORT` on stdout and
//! serves until killed. Point codex at it with `base_url = "http://127.0.0.1:PORT/v1"`.
//! Every request is appended to `--log` as JSONL (and listed at `GET /_standin/requests`).

use responses_standin::{Script, Standin};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: responses-standin [--script <file.json>] [--port N | --addr 127.0.0.1:N] [--log <requests.jsonl>]";

fn main() -> ExitCode {
    let mut script_path: Option<String> = None;
    let mut addr = "127.0.0.1:0".to_string();
    let mut log: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        let Some(value) = inline.or_else(|| args.next()) else {
            eprintln!("responses-standin: {flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        match flag.as_str() {
            "--script" => script_path = Some(value),
            "--addr" => addr = value,
            "--port" => match value.parse::<u16>() {
                Ok(p) => addr = format!("127.0.0.1:{p}"),
                Err(_) => {
                    eprintln!("responses-standin: --port {value:?} is not a port number\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--log" => log = Some(PathBuf::from(value)),
            other => {
                eprintln!("responses-standin: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let script = match &script_path {
        Some(p) => match Script::from_file(p) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("responses-standin: cannot load script {p}: {e}");
                return ExitCode::from(2);
            }
        },
        None => Script::new(),
    };
    let standin = match Standin::start_on(addr.as_str(), script, log) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("responses-standin: cannot listen on {addr}: {e}");
            return ExitCode::from(1);
        }
    };
    println!("listening on {}", standin.addr());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
