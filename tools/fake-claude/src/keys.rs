//! Terminal input: raw mode on the pane's tty and a tolerant key decoder.
//!
//! Bytes arrive the way tmux `send-keys` writes them into a pane: `Enter` is `\r`,
//! `BSpace` is `0x7f`, `Escape` is a lone `0x1b`, arrows are `ESC [ A` (or `ESC O A` in
//! application-cursor mode), `send-keys -l` text is its UTF-8 bytes. Nothing here panics
//! on odd input: anything not understood decodes to [`Key::Unknown`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a lone ESC waits for a following `[`/`O` before it counts as the Esc key.
const ESC_WAIT: Duration = Duration::from_millis(50);

/// How long a bracketed paste may stall before it counts as ended.
const PASTE_WAIT: Duration = Duration::from_secs(5);

/// Asks the terminal for bracketed paste (as Claude Code does at start).
pub const BRACKETED_PASTE_ON: &str = "\x1b[?2004h";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Left,
    Right,
    Enter,
    /// A line feed (`\n`, C-j): a newline inside text, never a submit.
    Newline,
    Esc,
    Backspace,
    Tab,
    BackTab,
    CtrlC,
    CtrlU,
    Char(char),
    /// A bracketed paste (`ESC [200~ … ESC [201~`, sent by `tmux paste-buffer -p` once
    /// the program asked for it): its text exactly as it arrived, never keys.
    Paste(String),
    Unknown,
    /// Standard input is closed.
    Eof,
}

/// Puts a tty into raw-ish mode (no echo, no line buffering, no signals, CR not mapped to
/// NL) and restores it when dropped. Output post-processing stays on so `\n` still works.
pub struct RawMode {
    fd: i32,
    saved: Option<libc::termios>,
}

impl RawMode {
    pub fn enable(fd: i32) -> RawMode {
        // SAFETY: termios is plain data; tcgetattr fills it or fails (not a tty).
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) != 0 {
                return RawMode { fd, saved: None };
            }
            let saved = t;
            t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            t.c_iflag &= !(libc::ICRNL | libc::INLCR | libc::IGNCR | libc::IXON | libc::ISTRIP);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
                return RawMode { fd, saved: None };
            }
            RawMode { fd, saved: Some(saved) }
        }
    }

    pub fn is_raw(&self) -> bool {
        self.saved.is_some()
    }

    pub fn restore(&mut self) {
        if let Some(t) = self.saved.take() {
            // SAFETY: restoring attributes previously read from the same fd.
            unsafe {
                libc::tcsetattr(self.fd, libc::TCSANOW, &t);
            }
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Where the decoder gets its bytes: a file descriptor (the tty), or a fixed buffer in tests.
pub struct Input {
    fd: Option<i32>,
    buf: VecDeque<u8>,
    eof: bool,
}

impl Input {
    pub fn from_fd(fd: i32) -> Input {
        Input { fd: Some(fd), buf: VecDeque::new(), eof: false }
    }

    #[cfg(test)]
    pub fn from_bytes(bytes: &[u8]) -> Input {
        Input { fd: None, buf: bytes.iter().copied().collect(), eof: true }
    }

    /// Waits up to `timeout` (None = forever) for more bytes. Returns true if some arrived.
    fn fill(&mut self, timeout: Option<Duration>) -> bool {
        let fd = match self.fd {
            Some(fd) if !self.eof => fd,
            _ => return false,
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let ms: i32 = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    left.as_millis().min(i32::MAX as u128) as i32
                }
            };
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                self.eof = true;
                return false;
            }
            if r == 0 {
                return false;
            }
            let mut tmp = [0u8; 1024];
            // SAFETY: reading into a local buffer of the given length.
            let n = unsafe { libc::read(fd, tmp.as_mut_ptr() as *mut libc::c_void, tmp.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted || e.kind() == std::io::ErrorKind::WouldBlock {
                    continue;
                }
                self.eof = true;
                return false;
            }
            if n == 0 {
                self.eof = true;
                return false;
            }
            self.buf.extend(&tmp[..n as usize]);
            return true;
        }
    }

    /// The next byte, waiting at most `wait` for it (used inside escape / UTF-8 sequences).
    fn byte_within(&mut self, wait: Duration) -> Option<u8> {
        if self.buf.is_empty() {
            self.fill(Some(wait));
        }
        self.buf.pop_front()
    }

    fn peek_within(&mut self, wait: Duration) -> Option<u8> {
        if self.buf.is_empty() {
            self.fill(Some(wait));
        }
        self.buf.front().copied()
    }

    /// The next key, or None if `deadline` passes first. [`Key::Eof`] once input is closed.
    pub fn next_key(&mut self, deadline: Option<Instant>) -> Option<Key> {
        while self.buf.is_empty() {
            if self.eof || self.fd.is_none() {
                return Some(Key::Eof);
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    Some(d - now)
                }
            };
            self.fill(timeout);
        }
        let b = self.buf.pop_front()?;
        Some(self.decode(b))
    }

    fn decode(&mut self, b: u8) -> Key {
        match b {
            0x1b => self.decode_escape(),
            b'\r' => Key::Enter,
            b'\n' => Key::Newline,
            0x7f | 0x08 => Key::Backspace,
            b'\t' => Key::Tab,
            0x03 => Key::CtrlC,
            0x15 => Key::CtrlU,
            0x00..=0x1f => Key::Unknown,
            0x20..=0x7e => Key::Char(b as char),
            _ => self.decode_utf8(b),
        }
    }

    fn decode_escape(&mut self) -> Key {
        match self.peek_within(ESC_WAIT) {
            Some(b'[') => {
                self.buf.pop_front();
                // CSI: parameter/intermediate bytes, then a final byte in 0x40..=0x7e.
                let mut params = Vec::new();
                loop {
                    let Some(c) = self.byte_within(ESC_WAIT) else { return Key::Unknown };
                    if (0x40..=0x7e).contains(&c) {
                        return match (c, params.as_slice()) {
                            (b'A', _) => Key::Up,
                            (b'B', _) => Key::Down,
                            (b'C', _) => Key::Right,
                            (b'D', _) => Key::Left,
                            (b'Z', _) => Key::BackTab,
                            (b'~', b"3") => Key::Backspace, // Delete: treat like backspace
                            (b'~', b"200") => self.read_paste(),
                            _ => Key::Unknown, // includes a stray paste end marker
                        };
                    }
                    if !(0x20..=0x3f).contains(&c) || params.len() > 32 {
                        return Key::Unknown;
                    }
                    params.push(c);
                }
            }
            Some(b'O') => {
                self.buf.pop_front();
                match self.byte_within(ESC_WAIT) {
                    Some(b'A') => Key::Up,
                    Some(b'B') => Key::Down,
                    Some(b'C') => Key::Right,
                    Some(b'D') => Key::Left,
                    Some(b'M') => Key::Enter,
                    _ => Key::Unknown,
                }
            }
            // A lone ESC, or ESC followed by something else (left in the buffer).
            _ => Key::Esc,
        }
    }

    /// The text of a bracketed paste, up to its end marker `ESC [201~`.
    fn read_paste(&mut self) -> Key {
        const END: &[u8] = b"\x1b[201~";
        let mut bytes = Vec::new();
        while let Some(b) = self.byte_within(PASTE_WAIT) {
            bytes.push(b);
            if bytes.ends_with(END) {
                bytes.truncate(bytes.len() - END.len());
                break;
            }
        }
        Key::Paste(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn decode_utf8(&mut self, lead: u8) -> Key {
        let len = match lead {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return Key::Unknown,
        };
        let mut bytes = vec![lead];
        while bytes.len() < len {
            match self.peek_within(ESC_WAIT) {
                Some(c) if (0x80..=0xbf).contains(&c) => {
                    self.buf.pop_front();
                    bytes.push(c);
                }
                _ => return Key::Unknown,
            }
        }
        match std::str::from_utf8(&bytes).ok().and_then(|s| s.chars().next()) {
            Some(ch) => Key::Char(ch),
            None => Key::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<Key> {
        let mut i = Input::from_bytes(bytes);
        let mut out = Vec::new();
        loop {
            match i.next_key(None) {
                Some(Key::Eof) | None => return out,
                Some(k) => out.push(k),
            }
        }
    }

    #[test]
    fn decodes_tmux_key_bytes() {
        assert_eq!(
            keys(b"\x1b[A\x1b[B\x1bOA\x1bOB\r\x7f\x1b"),
            vec![Key::Up, Key::Down, Key::Up, Key::Down, Key::Enter, Key::Backspace, Key::Esc]
        );
        assert_eq!(keys("é;\"".as_bytes()), vec![Key::Char('é'), Key::Char(';'), Key::Char('"')]);
        assert_eq!(keys(b"\x1bx"), vec![Key::Esc, Key::Char('x')]);
    }

    #[test]
    fn a_bracketed_paste_is_one_text_key() {
        assert_eq!(
            keys(b"a\x1b[200~x\ty\nz\r\x7f\x15\x03\xc3\xa9\x1b[201~\r"),
            vec![Key::Char('a'), Key::Paste("x\ty\nz\r\x7f\x15\x03é".into()), Key::Enter]
        );
        assert_eq!(keys(b"\x1b[200~unterminated"), vec![Key::Paste("unterminated".into())]);
    }

    #[test]
    fn odd_bytes_never_panic() {
        let ks = keys(b"\xff\xc3\x1b[\x1b[99;99;99\x80\xe2\x82\x00\x1b[200~a\x1b[201~");
        assert!(ks.contains(&Key::Paste("a".into())), "{ks:?}");
        let all: Vec<u8> = (0u8..=255).collect();
        let _ = keys(&all);
    }
}
