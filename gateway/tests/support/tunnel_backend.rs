//! Tunnel backends for the upgrade and CONNECT tests: each request head is kept, then a scripted answer: a refusal, or a switch followed by an echo.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::raw::read_head;

/// What a [`TunnelBackend`] does with a request head.
pub enum Answer {
    /// These bytes, then the connection closes after `linger`.
    Close(&'static [u8], Duration),
    /// These bytes (a 101 or a 2xx, and any bytes of its own), then the
    /// bytes that followed the head and every byte read after, echoed;
    /// `BYE` at the client's end.
    Tunnel(&'static [u8]),
}

/// A backend answering each request head by `answer`, keeping the heads.
pub struct TunnelBackend {
    pub addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl TunnelBackend {
    pub fn start(answer: fn(&str) -> Answer) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heads);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || {
                    let (head, rest) = read_head(&mut s);
                    kept.lock().unwrap().push(head.clone());
                    let switch = match answer(&head) {
                        Answer::Close(bytes, linger) => {
                            let _ = s.write_all(bytes);
                            std::thread::sleep(linger);
                            return;
                        }
                        Answer::Tunnel(bytes) => bytes,
                    };
                    let _ = s.write_all(switch);
                    let _ = s.write_all(&rest);
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        if s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    let _ = s.write_all(b"BYE");
                });
            }
        });
        Self { addr, heads }
    }

    /// A WebSocket backend (no framing of its own: bytes are bytes): a
    /// request without `Upgrade` is answered 200 `ok`, `/refuse…` 400 with
    /// a body, any other path 101 then `HELLO`, then the echo.
    pub fn websocket() -> Self {
        Self::start(|head| {
            if !head
                .to_ascii_lowercase()
                .contains("\r\nupgrade: websocket\r\n")
            {
                return Answer::Close(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    Duration::ZERO,
                );
            }
            if head.starts_with("GET /refuse") {
                return Answer::Close(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\nX-Backend: b1\r\n\r\nnope",
                    Duration::from_secs(1),
                );
            }
            Answer::Tunnel(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\nX-Backend: b1\r\n\r\nHELLO")
        })
    }

    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}
