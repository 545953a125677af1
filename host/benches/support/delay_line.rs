//! A delay line for TCP on loopback: what a link with a one-way delay does to a stream.
//! Every byte read on one side is written to the other `delay` after it was read, in
//! both directions, each direction on its own thread. (The machine's kernel has no
//! `netem` qdisc, so the delay is made here.) For benches only: it serves until the
//! process ends.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Listen on 127.0.0.1 and forward each connection to `to`, `delay` each way: the
/// address to connect to instead.
pub fn start(to: std::net::SocketAddr, delay: Duration) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let Ok(up) = TcpStream::connect(to) else { continue };
            for s in [&conn, &up] {
                let _ = s.set_nodelay(true);
            }
            pump(conn.try_clone().unwrap(), up.try_clone().unwrap(), delay);
            pump(up, conn, delay);
        }
    });
    addr
}

/// Copy `from` to `to`, each chunk `delay` after it was read.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        loop {
            let next = match queue.pop_front() {
                Some(x) => x,
                None => match rx.recv() {
                    Ok(x) => x,
                    Err(_) => break,
                },
            };
            let now = Instant::now();
            if next.0 > now {
                std::thread::sleep(next.0 - now);
            }
            if to.write_all(&next.1).is_err() {
                break;
            }
            queue.extend(rx.try_iter());
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
