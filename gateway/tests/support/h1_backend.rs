//! A scripted HTTP/1.1 backend for tests, cleartext or TLS: a thread per connection reads requests with `h1wire` and writes the exact bytes a handler returns, so a test controls framing, `Connection: close` and malformed answers byte for byte.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use h1wire::{BodyDecoder, BodyEvent, Limits};

/// A request as the backend received it.
#[derive(Debug, Clone)]
pub struct H1Request {
    pub method: String,
    pub target: String,
    /// Field names as received.
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The raw trailer section of a chunked body.
    pub trailers: Option<String>,
    /// Which connection it came on (0, 1, … in accept order) and its place
    /// on it (0, 1, …).
    pub conn: u64,
    pub nth: u64,
    /// The server name the client sent (TLS).
    pub sni: Option<String>,
}

impl H1Request {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What to answer: the bytes, then whether to close.
pub struct H1Answer {
    pub bytes: Vec<u8>,
    pub close: bool,
}

impl H1Answer {
    /// `200` with a `content-length` body, keeping the connection.
    pub fn ok(body: &str) -> Self {
        Self::raw(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))
    }

    pub fn raw(bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            bytes: bytes.into(),
            close: false,
        }
    }

    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }
}

type Handler = dyn Fn(&H1Request) -> H1Answer + Send + Sync;

pub struct H1Backend {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub requests: Arc<Mutex<Vec<H1Request>>>,
    pub conns: Arc<AtomicU64>,
}

impl H1Backend {
    /// A cleartext backend answering with `handler`.
    pub fn start(handler: impl Fn(&H1Request) -> H1Answer + Send + Sync + 'static) -> Self {
        Self::start_with(None, handler)
    }

    /// `tls`: serve TLS with this config (its ALPN included).
    pub fn start_with(
        tls: Option<Arc<rustls::ServerConfig>>,
        handler: impl Fn(&H1Request) -> H1Answer + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let conns = Arc::new(AtomicU64::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        {
            let (stop, requests, conns) = (stop.clone(), requests.clone(), conns.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((tcp, _)) => {
                            let id = conns.fetch_add(1, Ordering::Relaxed);
                            let (handler, requests, tls) =
                                (handler.clone(), requests.clone(), tls.clone());
                            std::thread::spawn(move || {
                                let _ = tcp.set_nonblocking(false);
                                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                                serve(tcp, id, tls, &*handler, &requests);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }
        Self {
            addr,
            stop,
            requests,
            conns,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn requests(&self) -> Vec<H1Request> {
        self.requests.lock().expect("lock").clone()
    }

    pub fn connections(&self) -> u64 {
        self.conns.load(Ordering::Relaxed)
    }
}

impl Drop for H1Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    tcp: TcpStream,
    id: u64,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: &Handler,
    requests: &Mutex<Vec<H1Request>>,
) {
    match tls {
        None => exchanges(tcp, id, None, handler, requests),
        Some(cfg) => {
            let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                return;
            };
            let mut s = rustls::StreamOwned::new(conn, tcp);
            while s.conn.is_handshaking() {
                if s.conn.complete_io(&mut s.sock).is_err() {
                    return;
                }
            }
            let sni = s.conn.server_name().map(str::to_string);
            exchanges(s, id, sni, handler, requests);
        }
    }
}

fn exchanges(
    mut io: impl Read + Write,
    id: u64,
    sni: Option<String>,
    handler: &Handler,
    requests: &Mutex<Vec<H1Request>>,
) {
    let mut buf = BytesMut::new();
    let mut nth = 0;
    loop {
        let head = loop {
            match h1wire::parse_request_head(&mut buf, &Limits::default()) {
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(_) => return,
            }
            if !fill(&mut io, &mut buf) {
                return;
            }
        };
        let mut body = Vec::new();
        let mut trailers = None;
        let mut dec = BodyDecoder::new(head.framing);
        loop {
            match dec.decode(&mut buf, &Limits::default()) {
                Ok(Some(BodyEvent::Data(d))) => body.extend_from_slice(&d),
                Ok(Some(BodyEvent::Trailers(t))) => {
                    trailers = Some(String::from_utf8_lossy(&t).into_owned())
                }
                Ok(Some(BodyEvent::End)) => break,
                Ok(None) => {
                    if !fill(&mut io, &mut buf) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let req = H1Request {
            method: text(head.method()),
            target: text(head.target()),
            fields: head.fields().map(|(n, v)| (text(n), text(v))).collect(),
            body,
            trailers,
            conn: id,
            nth,
            sni: sni.clone(),
        };
        nth += 1;
        // Recorded as it came: a test sees a request its handler still
        // holds.
        requests.lock().expect("lock").push(req.clone());
        let answer = handler(&req);
        if io
            .write_all(&answer.bytes)
            .and_then(|_| io.flush())
            .is_err()
            || answer.close
        {
            return;
        }
    }
}

fn fill(io: &mut impl Read, buf: &mut BytesMut) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    match io.read(&mut chunk) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}
