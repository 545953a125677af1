//! A live view of one pane through tmux control mode (`tmux -C attach-session`): tmux
//! sends what the program writes (`%output`) as it happens, so nothing polls the pane,
//! and keys go up as `send-keys -H` (hex bytes: no text of the operator's is ever read
//! by tmux's command parser) on the same client's standard input.
//!
//! The client attaches without a size (`refresh-client -C` is never sent), so tmux does
//! not size the window after it; the pane is resized only when the operator asks
//! (`resize-window`).
//!
//! The line protocol is read by pure functions ([`parse_line`], [`unescape`],
//! [`snapshot`], [`keys_commands`]); [`watch`] is the process around them.

use crate::machines::terminal::{PaneEvent, PaneWatch, TerminalError};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

/// The most bytes one `send-keys -H` line carries (a paste of any size is several).
pub const KEYS_PER_COMMAND: usize = 512;

/// The first word of the line lab's info command prints (module docs): the pane's id,
/// size and cursor.
const INFO_TAG: &str = "lab-pane";
const INFO_FORMAT: &str = "lab-pane #{pane_id} #{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{cursor_flag}";

/// One line of control mode, as lab uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlLine {
    /// `%output %<pane> <escaped bytes>`.
    Output { pane: String, bytes: Vec<u8> },
    /// `%begin …`: a command's output follows, up to [`ControlLine::End`].
    Begin,
    /// `%end …` or `%error …` (`error: true`).
    End { error: bool },
    /// A window's layout changed (a resize among them).
    Layout,
    /// The client is detached or the server went (`%exit`).
    Exit,
    /// Anything else: a line of a command's output, or a notification lab ignores.
    Text(String),
}

/// Read one line of control mode.
pub fn parse_line(line: &str) -> ControlLine {
    if let Some(rest) = line.strip_prefix("%output ") {
        let (pane, data) = rest.split_once(' ').unwrap_or((rest, ""));
        return ControlLine::Output { pane: pane.to_string(), bytes: unescape(data) };
    }
    let word = line.split(' ').next().unwrap_or("");
    match word {
        "%begin" => ControlLine::Begin,
        "%end" => ControlLine::End { error: false },
        "%error" => ControlLine::End { error: true },
        "%layout-change" => ControlLine::Layout,
        "%exit" => ControlLine::Exit,
        _ => ControlLine::Text(line.to_string()),
    }
}

/// The control protocol read with its state: between a `%begin` and the `%end` or
/// `%error` that carries the same time, number and flags, every line is the command's
/// output (a captured screen holds whatever the agent drew: `%exit`, `%end 1 2 0`, …),
/// never protocol; outside a block, a line is read by [`parse_line`]. `%output`'s data
/// is one line with its newlines escaped, so it never frames anything either.
#[derive(Debug, Default)]
pub struct Framer {
    /// The open block's `<time> <number> <flags>`.
    open: Option<String>,
}

impl Framer {
    /// Read the next line.
    pub fn read(&mut self, line: &str) -> ControlLine {
        if let Some(tag) = &self.open {
            let closes = |word: &str| line.strip_prefix(word).is_some_and(|rest| rest == tag);
            let end = if closes("%end ") {
                ControlLine::End { error: false }
            } else if closes("%error ") {
                ControlLine::End { error: true }
            } else {
                return ControlLine::Text(line.to_string());
            };
            self.open = None;
            return end;
        }
        let read = parse_line(line);
        if read == ControlLine::Begin {
            self.open = Some(line.strip_prefix("%begin ").unwrap_or("").to_string());
        }
        read
    }
}

/// The bytes of `%output`'s data: tmux writes every byte below 32 and the backslash
/// as `\ooo` (three octal digits); anything else is itself. A malformed escape is kept
/// as it is.
pub fn unescape(data: &str) -> Vec<u8> {
    let b = data.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            out.push((v & 0xff) as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The pane as lab's info line tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub pane: String,
    pub cols: u16,
    pub rows: u16,
    pub cursor: (u16, u16),
    pub cursor_visible: bool,
}

/// Read lab's info line (`lab-pane %3 200 50 4 7 1`).
pub fn parse_info(line: &str) -> Option<PaneInfo> {
    let mut w = line.split(' ');
    if w.next()? != INFO_TAG {
        return None;
    }
    let pane = w.next()?.to_string();
    if !pane.starts_with('%') {
        return None;
    }
    let mut n = || w.next().and_then(|s| s.parse::<u16>().ok());
    let (cols, rows, x, y, flag) = (n()?, n()?, n()?, n()?, n()?);
    Some(PaneInfo { pane, cols, rows, cursor: (x, y), cursor_visible: flag == 1 })
}

/// What a fresh terminal of the pane's size draws to show the screen as it is now:
/// clear, the captured lines (`capture-pane -e`: with their colours) one per row, and
/// the cursor where the pane has it. Never more lines than rows (nothing scrolls).
pub fn snapshot(lines: &[String], info: &PaneInfo) -> Vec<u8> {
    let mut out = b"\x1b[0m\x1b[H\x1b[2J".to_vec();
    for (i, line) in lines.iter().take(info.rows as usize).enumerate() {
        if i > 0 {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\x1b[0m");
    }
    out.extend_from_slice(format!("\x1b[{};{}H", info.cursor.1 + 1, info.cursor.0 + 1).as_bytes());
    out.extend_from_slice(if info.cursor_visible { b"\x1b[?25h" } else { b"\x1b[?25l" });
    out
}

/// The control-mode lines that type `bytes` into `pane`, byte for byte.
pub fn keys_commands(pane: &str, bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(KEYS_PER_COMMAND) {
        out.push_str("send-keys -t ");
        out.push_str(pane);
        out.push_str(" -H");
        for b in chunk {
            out.push_str(&format!(" {b:02x}"));
        }
        out.push('\n');
    }
    out
}

/// What the reader does with the next command block's lines.
enum Awaiting {
    /// Nothing of lab's yet: look for the info line in each block.
    Info,
    /// The block after the info: the capture.
    Capture(PaneInfo),
    /// Streaming; blocks are answers to keys and resizes.
    Live,
}

/// A control client watching one pane: keys and resizes go in on its standard input;
/// dropping it ends the client.
struct ControlWatch {
    child: Child,
    stdin: ChildStdin,
    pane: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    session: String,
}

impl PaneWatch for ControlWatch {
    fn keys(&mut self, bytes: &[u8]) -> Result<(), TerminalError> {
        let pane = self.pane.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(pane) = pane else {
            return Err(TerminalError { action: "send-keys".into(), message: "the pane is not shown yet".into() });
        };
        self.stdin
            .write_all(keys_commands(&pane, bytes).as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| TerminalError { action: "send-keys".into(), message: e.to_string() })
    }

    fn resize(&mut self, cols: u16, rows: u16) -> Result<(), TerminalError> {
        let (cols, rows) = (cols.clamp(20, 500), rows.clamp(5, 200));
        // The session's name was checked by whoever made it (a lab name): `=` matches it
        // exactly.
        let line = format!(
            "resize-window -t ={}: -x {cols} -y {rows}\ndisplay -p -t ={}: \"{INFO_FORMAT}\"\n",
            self.session, self.session
        );
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| TerminalError { action: "resize-window".into(), message: e.to_string() })
    }
}

impl Drop for ControlWatch {
    fn drop(&mut self) {
        // Closing stdin detaches a control client; kill it too, in case it hangs.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a session name is one lab can put in a control-mode command line as it is.
fn plain_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 200 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Watch session `session`'s pane on `socket`: [`PaneEvent`]s go to `events` (its
/// size, a drawing of the screen as it is, then what the program writes, and its end)
/// from a thread of its own until the returned watch is dropped or nobody listens.
pub fn watch(
    program: &Path,
    socket: &Path,
    session: &str,
    events: tokio::sync::mpsc::Sender<PaneEvent>,
) -> Result<Box<dyn PaneWatch>, TerminalError> {
    let err = |message: String| TerminalError { action: "tmux -C attach".into(), message };
    if !plain_name(session) {
        return Err(err(format!("{session:?} is not a session name lab made")));
    }
    let mut child = Command::new(program)
        .arg("-S")
        .arg(socket)
        .args(["-C", "attach-session", "-t", &format!("={session}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err(format!("cannot run tmux: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let first = format!("display -p -t ={session}: \"{INFO_FORMAT}\"\ncapture-pane -p -e -t ={session}:\n");
    stdin.write_all(first.as_bytes()).map_err(|e| err(format!("cannot talk to tmux: {e}")))?;
    stdin.flush().map_err(|e| err(format!("cannot talk to tmux: {e}")))?;
    let pane = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = pane.clone();
    std::thread::Builder::new()
        .name("lab-pane-watch".into())
        .spawn(move || read_client(BufReader::new(stdout), &seen, &events))
        .map_err(|e| err(format!("cannot start a thread: {e}")))?;
    Ok(Box::new(ControlWatch { child, stdin, pane, session: session.to_string() }))
}

/// The reader: control lines in, events out, until the client or the listener goes.
fn read_client(
    mut out: impl BufRead,
    pane: &std::sync::Mutex<Option<String>>,
    events: &tokio::sync::mpsc::Sender<PaneEvent>,
) {
    let mut awaiting = Awaiting::Info;
    let mut framer = Framer::default();
    let mut block: Option<Vec<String>> = None;
    let mut line = Vec::new();
    let ended = loop {
        line.clear();
        match out.read_until(b'\n', &mut line) {
            Ok(0) => break "the terminal closed".to_string(),
            Ok(_) => {}
            Err(e) => break format!("reading the terminal failed: {e}"),
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        let text = String::from_utf8_lossy(&line);
        let send = |e: PaneEvent| events.blocking_send(e).is_ok();
        let read = framer.read(&text);
        let exit = read == ControlLine::Exit;
        let ok = match read {
            ControlLine::Begin => {
                block = Some(Vec::new());
                true
            }
            ControlLine::End { error } => {
                let lines = block.take().unwrap_or_default();
                match std::mem::replace(&mut awaiting, Awaiting::Live) {
                    Awaiting::Info => match lines.iter().find_map(|l| parse_info(l)) {
                        Some(info) if !error => {
                            *pane.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.pane.clone());
                            awaiting = Awaiting::Capture(info);
                            true
                        }
                        _ => {
                            awaiting = Awaiting::Info;
                            true
                        }
                    },
                    Awaiting::Capture(info) => {
                        send(PaneEvent::Size { cols: info.cols, rows: info.rows })
                            && send(PaneEvent::Output(snapshot(&lines, &info)))
                    }
                    Awaiting::Live => match lines.iter().find_map(|l| parse_info(l)) {
                        // A resize's answer: the new size (the program redraws itself).
                        Some(info) => send(PaneEvent::Size { cols: info.cols, rows: info.rows }),
                        None => true,
                    },
                }
            }
            ControlLine::Text(t) => {
                if let Some(b) = block.as_mut() {
                    b.push(t);
                }
                true
            }
            ControlLine::Output { pane: p, bytes } => {
                let ours = matches!(awaiting, Awaiting::Live)
                    && pane.lock().unwrap_or_else(|e| e.into_inner()).as_deref() == Some(p.as_str());
                !ours || send(PaneEvent::Output(bytes))
            }
            ControlLine::Layout | ControlLine::Exit => true,
        };
        if !ok {
            return; // nobody listens
        }
        if exit {
            break "the session ended".to_string();
        }
    };
    let _ = events.blocking_send(PaneEvent::Ended(ended));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_are_read() {
        assert_eq!(
            parse_line("%output %3 ab\\015\\012\\134x"),
            ControlLine::Output { pane: "%3".into(), bytes: b"ab\r\n\\x".to_vec() }
        );
        assert_eq!(parse_line("%output %3 "), ControlLine::Output { pane: "%3".into(), bytes: vec![] });
        assert_eq!(parse_line("%begin 1 2 1"), ControlLine::Begin);
        assert_eq!(parse_line("%end 1 2 1"), ControlLine::End { error: false });
        assert_eq!(parse_line("%error 1 2 1"), ControlLine::End { error: true });
        assert_eq!(parse_line("%layout-change @0 a,80x20,0,0,0"), ControlLine::Layout);
        assert_eq!(parse_line("%exit"), ControlLine::Exit);
        assert_eq!(parse_line("hello"), ControlLine::Text("hello".into()));
        // UTF-8 above 127 comes as itself; a broken escape stays as it is.
        assert_eq!(unescape("é\\9\\01"), "é\\9\\01".as_bytes());
        assert_eq!(unescape("\\033[1m"), b"\x1b[1m");
    }

    #[test]
    fn inside_a_block_only_its_own_end_closes_it_and_every_other_line_is_output() {
        let mut f = Framer::default();
        let mut read = |l: &str| f.read(l);
        assert_eq!(read("%begin 1700000000 12 1"), ControlLine::Begin);
        for screen in ["%exit", "%end 1 2 0", "%begin 1 2 0", "%error 1700000000 12 0", "%output %1 x", "%end"] {
            assert_eq!(read(screen), ControlLine::Text(screen.into()), "{screen}");
        }
        assert_eq!(read("%end 1700000000 12 1"), ControlLine::End { error: false });
        // Outside a block: protocol.
        assert_eq!(read("%output %1 x"), ControlLine::Output { pane: "%1".into(), bytes: b"x".to_vec() });
        assert_eq!(read("%begin 1700000001 13 1"), ControlLine::Begin);
        assert_eq!(read("%error 1700000001 13 1"), ControlLine::End { error: true });
        assert_eq!(read("%exit"), ControlLine::Exit);
    }

    #[test]
    fn the_info_line_is_read_and_anything_else_is_not() {
        let info = parse_info("lab-pane %12 200 50 4 7 1").unwrap();
        assert_eq!(info, PaneInfo { pane: "%12".into(), cols: 200, rows: 50, cursor: (4, 7), cursor_visible: true });
        for bad in ["lab-pane 12 200 50 4 7 1", "lab-pane %1 200 50 4", "other %1 1 1 1 1 1", "lab-pane %1 x 5 1 1 1"] {
            assert_eq!(parse_info(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_snapshot_draws_each_line_on_its_row_and_puts_the_cursor_back() {
        let info = PaneInfo { pane: "%1".into(), cols: 10, rows: 2, cursor: (3, 1), cursor_visible: false };
        let lines = ["one".to_string(), "\x1b[31mtwo".to_string(), "three (past the last row)".to_string()];
        let s = String::from_utf8(snapshot(&lines, &info)).unwrap();
        assert_eq!(s, "\x1b[0m\x1b[H\x1b[2Jone\x1b[0m\r\n\x1b[31mtwo\x1b[0m\x1b[2;4H\x1b[?25l");
    }

    #[test]
    fn keys_are_hex_bytes_in_bounded_commands() {
        assert_eq!(keys_commands("%4", b"a;\r\x1b"), "send-keys -t %4 -H 61 3b 0d 1b\n");
        let many = vec![b'x'; KEYS_PER_COMMAND + 1];
        let cmds = keys_commands("%4", &many);
        assert_eq!(cmds.lines().count(), 2);
        assert!(cmds.lines().all(|l| l.split(' ').count() <= KEYS_PER_COMMAND + 4));
        assert!(!plain_name("a;b") && !plain_name("") && plain_name("lab-r-1_x"));
    }
}
