//! A raw HTTP/1.1 client over a plain socket: write bytes as they are, read one response as framed.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response as read off the wire.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub fn open(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

pub fn line(r: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    r.read_line(&mut l).expect("read a line");
    l.trim_end_matches(['\r', '\n']).to_string()
}

/// Reads one response: status line, fields, then the body as framed
/// (content-length, chunked, or until close; none for HEAD / 1xx / 204 / 304).
pub fn read_response(r: &mut BufReader<TcpStream>, head_request: bool) -> Response {
    let status_line = line(r);
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line, got {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let l = line(r);
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').expect("a field");
        headers.push((n.to_string(), v.trim().to_string()));
    }
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if head_request || status < 200 || status == 204 || status == 304 {
        return resp;
    }
    if let Some(n) = resp.header("content-length") {
        let mut body = vec![0; n.parse().expect("a length")];
        r.read_exact(&mut body).expect("the body");
        resp.body = body;
    } else if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            let size = usize::from_str_radix(&line(r), 16).expect("a chunk size");
            if size == 0 {
                while !line(r).is_empty() {}
                break;
            }
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).expect("a chunk");
            resp.body.extend_from_slice(&chunk[..size]);
        }
    } else {
        r.read_to_end(&mut resp.body).expect("a body until close");
    }
    resp
}

/// Whether the server closed the connection (EOF within the timeout).
pub fn closed(r: &mut BufReader<TcpStream>) -> bool {
    let mut b = [0u8; 1];
    matches!(r.read(&mut b), Ok(0))
}

/// One `GET` on a connection of its own: `extra` is more header lines,
/// each ending in CRLF.
pub fn h1_get(addr: SocketAddr, host: &str, path: &str, extra: &str) -> Response {
    use std::io::Write;
    let (mut s, mut r) = open(addr);
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut r, false)
}

/// A POST of `body` (with `Content-Length`) and its response.
pub fn h1_post(addr: SocketAddr, host: &str, path: &str, extra: &str, body: &[u8]) -> Response {
    use std::io::Write;
    let (mut s, mut r) = open(addr);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut r, false)
}
