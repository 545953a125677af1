//! The runner protocol's frames as lines: what carries them over a byte stream (an ssh
//! session's stdio, the runner daemon's Unix socket) instead of a WebSocket. A frame is
//! one JSON text (`serde_json` never writes a raw newline) and a `\n`; a line over
//! [`MAX_FRAME`] bytes ends the link instead of growing a
//! buffer without bound.

use super::protocol::MAX_FRAME;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The next line of `r` (without its `\n`); `None` at the end of the stream (a last
/// line without its `\n` is a cut, not a frame: dropped). `buf` is the caller's, kept
/// between calls so a line read in parts is not lost when a `select!` drops the read.
pub async fn read_frame<R: AsyncBufRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<String>> {
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(None);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if buf.len() > MAX_FRAME + 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line of over {MAX_FRAME} bytes is not a frame"),
            ));
        }
        if done {
            buf.pop();
            let line = std::mem::take(buf);
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "a frame that is not UTF-8"));
        }
    }
}

/// Write one frame and its `\n`, and flush.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &str) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(frame.len() + 1);
    line.extend_from_slice(frame.as_bytes());
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_in_parts_whole_and_too_long() {
        let (mut a, b) = tokio::io::duplex(64);
        let mut r = tokio::io::BufReader::with_capacity(8, b);
        let mut buf = Vec::new();
        tokio::spawn(async move {
            write_frame(&mut a, r#"{"type":"ping"}"#).await.unwrap();
            a.write_all(b"{\"a\":").await.unwrap();
            a.write_all(b"1}\n").await.unwrap();
            a.write_all(b"cut").await.unwrap();
        });
        assert_eq!(read_frame(&mut r, &mut buf).await.unwrap().as_deref(), Some(r#"{"type":"ping"}"#));
        assert_eq!(read_frame(&mut r, &mut buf).await.unwrap().as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(read_frame(&mut r, &mut buf).await.unwrap(), None, "a line without its end is a cut");

        let (mut a, b) = tokio::io::duplex(1 << 16);
        let mut r = tokio::io::BufReader::new(b);
        tokio::spawn(async move {
            let _ = a.write_all(&vec![b'x'; MAX_FRAME + 10]).await;
        });
        let e = read_frame(&mut r, &mut Vec::new()).await.unwrap_err();
        assert!(e.to_string().contains("not a frame"), "{e}");
    }
}
