//! Raw TCP for the tunnel tests (`tcp_proxy`, WebSocket, CONNECT): an echo backend, and reads of a head, a count of bytes, or all to the end.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// A TCP backend: for each connection, `greeting` first, then every byte
/// it reads echoed back; at the client's end, `bye` and a close.
pub fn echo_backend(greeting: &'static str, bye: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let _ = s.write_all(greeting.as_bytes());
                let mut buf = [0u8; 16384];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                let _ = s.write_all(bye.as_bytes());
            });
        }
    });
    addr
}

/// Reads up to the end of a head: the head (text) and the bytes after it.
pub fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(at + 4);
            return (String::from_utf8_lossy(&got).into_owned(), rest);
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return (String::from_utf8_lossy(&got).into_owned(), Vec::new()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Exactly `n` bytes, as text.
pub fn read_n(s: &mut impl Read, n: usize) -> String {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

/// Everything until the peer closes (or the read times out), as text.
pub fn read_to_end(s: &mut impl Read) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}
