//! A WebSocket backend for the upgrade tests (HTTP/1.1 and HTTP/2 clients).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::raw::read_head;

/// A WebSocket backend (no framing of its own: bytes are bytes): each
/// request head is kept; a request without `Upgrade` is answered 200
/// `ok`, `/refuse…` 400 with a body, any other path 101 then `HELLO`,
/// then every byte read echoed, and `BYE` at the client's end.
pub struct WsBackend {
    pub addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl WsBackend {
    pub fn start() -> Self {
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
                    if !head
                        .to_ascii_lowercase()
                        .contains("\r\nupgrade: websocket\r\n")
                    {
                        let _ = s.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                        return;
                    }
                    if head.starts_with("GET /refuse") {
                        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\nX-Backend: b1\r\n\r\nnope");
                        std::thread::sleep(Duration::from_secs(1));
                        return;
                    }
                    let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\nX-Backend: b1\r\n\r\nHELLO");
                    let _ = s.write_all(&rest);
                    let mut buf = [0u8; 16384];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    let _ = s.write_all(b"BYE");
                });
            }
        });
        Self { addr, heads }
    }

    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}
