//! An HTTP/1.1 health endpoint for active health check tests: keep-alive,
//! answering what the test says, keeping the request heads it got.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a [`HealthServer`] answers.
#[derive(Clone)]
pub enum Answer {
    Status(u16, Vec<(&'static str, &'static str)>),
    /// Reads the request and never answers.
    Hang,
    /// Answers 200 after this long.
    Slow(Duration),
    /// 200 as a keep-alive answer, then closes the connection (as a
    /// server's idle timeout would before the next check).
    CloseAfter,
}

/// An HTTP/1.1 health endpoint on loopback (keep-alive), answering what
/// the test says and keeping the request heads it got.
pub struct HealthServer {
    pub addr: SocketAddr,
    answer: Arc<Mutex<Answer>>,
    pub heads: Arc<Mutex<Vec<String>>>,
}

impl HealthServer {
    pub fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let answer = Arc::new(Mutex::new(Answer::Status(200, vec![])));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (a, h) = (Arc::clone(&answer), Arc::clone(&heads));
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let (a, h) = (Arc::clone(&a), Arc::clone(&h));
                std::thread::spawn(move || serve(conn, &a, &h));
            }
        });
        Self {
            addr,
            answer,
            heads,
        }
    }

    pub fn set(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    pub fn checks(&self) -> usize {
        self.heads.lock().unwrap().len()
    }
}

fn serve(mut conn: TcpStream, answer: &Mutex<Answer>, heads: &Mutex<Vec<String>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        heads
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&buf[..end]).into_owned());
        buf.drain(..end);
        let answer = answer.lock().unwrap().clone();
        match answer {
            Answer::Hang => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            Answer::Slow(wait) => {
                std::thread::sleep(wait);
                if conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .is_err()
                {
                    return;
                }
            }
            Answer::CloseAfter => {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                return;
            }
            Answer::Status(status, headers) => {
                let mut resp = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n");
                for (n, v) in headers {
                    resp.push_str(&format!("{n}: {v}\r\n"));
                }
                resp.push_str("\r\nok");
                if conn.write_all(resp.as_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}
