//! One active health check of one host: HTTP/1.1, HTTP/2 (`codec_client_type:
//! HTTP2`), TCP payloads or `grpc.health.v1.Health/Check`, each bounded by
//! the check's timeout, over a connection kept between checks when
//! `reuse_connection` allows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use engine::active_health::Outcome;
use engine::tls::UpstreamTls;
use engine::{AddedHeader, Checker, HealthCheck, HttpCheck, TcpCheck};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::timer::Timer;
use shards::wire::tls::Transport;

use super::h2check::{Answer, Ask, H2Conn};

/// Most bytes of a response head read before the answer counts as wrong.
const MAX_HEAD: usize = 16 * 1024;
/// Most body bytes read (and thrown away beyond `response_buffer_size`)
/// before the connection is closed rather than drained.
const MAX_BODY: usize = 1 << 20;

/// What a host's checks need to know besides the check itself.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where checks connect (`health_check_config` may move it).
    pub address: SocketAddr,
    /// Host / `:authority`: the endpoint's `health_check_config.hostname`,
    /// else the check's `host` (`authority`), else the cluster name.
    pub authority: String,
    pub connect_timeout: Duration,
    /// The cluster's TLS (with the check's `tls_options.alpn_protocols`):
    /// checks go over the transport socket the cluster's traffic uses, as
    /// in Envoy.
    pub tls: Option<Arc<UpstreamTls>>,
    /// The cluster's PROXY header (a check has no client: v2 LOCAL, v1
    /// its own addresses, as Envoy's).
    pub proxy_protocol: Option<engine::UpstreamProxyProtocol>,
    /// The request's header fields (HTTP: after removals and additions;
    /// gRPC: its metadata) and gRPC's request message, made once per
    /// host rather than per check.
    pub fields: Vec<(String, String)>,
    pub grpc_body: Option<bytes::Bytes>,
    /// An HTTP/1.1 check's whole request head (empty otherwise), made
    /// once per host too.
    pub http1_head: String,
}

impl Target {
    /// The request head of an HTTP/1.1 check of `hc` as `authority` with
    /// `fields`; empty for the other checks.
    pub fn http1_head(hc: &HealthCheck, authority: &str, fields: &[(String, String)]) -> String {
        let Checker::Http(h) = &hc.checker else {
            return String::new();
        };
        if h.http2 {
            return String::new();
        }
        let mut req = format!("{} {} HTTP/1.1\r\nhost: {authority}\r\n", h.method, h.path);
        for (n, v) in fields {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if !hc.reuse_connection {
            req.push_str("connection: close\r\n");
        }
        req.push_str("\r\n");
        req
    }

    /// What every check of `hc` sends besides the address and authority.
    pub fn request_parts(hc: &HealthCheck) -> (Vec<(String, String)>, Option<bytes::Bytes>) {
        match &hc.checker {
            Checker::Http(h) => (http_headers(h), None),
            Checker::Grpc(g) => {
                let mut md = vec![
                    ("content-type".to_owned(), "application/grpc".to_owned()),
                    ("te".to_owned(), "trailers".to_owned()),
                    ("user-agent".to_owned(), "Envoy/HC".to_owned()),
                    (
                        "grpc-timeout".to_owned(),
                        format!("{}m", hc.timeout.as_millis()),
                    ),
                ];
                add_headers(&mut md, &g.initial_metadata);
                let msg = HealthCheckRequest {
                    service: g.service_name.clone(),
                };
                (md, Some(crate::xds::grpc::encode(&msg)))
            }
            Checker::Tcp(_) => (Vec::new(), None),
        }
    }
}

/// A connection kept between checks.
pub enum Conn {
    Stream(Transport),
    H2(Box<H2Conn>),
}

/// Runs one check; `conn` is used when set and left set when the check
/// allows the next to reuse it. `timer` is reset to the check's timeout
/// (the host task's one timer: no allocation per check). The result
/// carries why it failed, for the log.
pub async fn check(
    hc: &HealthCheck,
    target: &Target,
    conn: &mut Option<Conn>,
    timer: &mut Timer,
) -> (Outcome, String) {
    let run = async {
        match &hc.checker {
            Checker::Http(h) if h.http2 => h2_check(Request::Http(h), target, conn).await,
            Checker::Http(h) => http1(hc, h, target, conn).await,
            Checker::Tcp(t) => tcp(hc, t, target, conn).await,
            Checker::Grpc(_) => h2_check(Request::Grpc, target, conn).await,
        }
    };
    timer.reset(hc.timeout);
    let timeout = async {
        timer.await;
        Err(format!("timed out after {:?}", hc.timeout))
    };
    match futures_lite::future::or(run, timeout).await {
        Ok((outcome, why)) => {
            if !matches!(outcome, Outcome::Passed { .. }) || !hc.reuse_connection {
                *conn = None;
            }
            (outcome, why)
        }
        Err(e) => {
            *conn = None;
            (Outcome::Network, e)
        }
    }
}

type Checked = Result<(Outcome, String), String>;

/// Reads what has arrived into `chunk`; 0 at the end of the stream.
async fn read_some(stream: &mut Transport, chunk: &mut [u8], what: &str) -> Result<usize, String> {
    stream.read(chunk).await.map_err(|e| format!("{what}: {e}"))
}

/// TCP, then the cluster's TLS, within the cluster's connect timeout.
async fn connect(target: &Target) -> Result<Transport, String> {
    shards::wire::tls::connect_backend(
        target.address,
        target.connect_timeout,
        target.tls.as_deref(),
        shards::wire::tls::Preface::of(target.proxy_protocol.as_ref(), None),
    )
    .await
    .map_err(|e| format!("connect {}: {e}", target.address))
}

/// Writes `bytes` and flushes them (TLS may hold records back until then).
async fn send(stream: &mut Transport, bytes: &[u8], what: &str) -> Result<(), String> {
    stream
        .write_all(bytes)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    stream.flush().await.map_err(|e| format!("{what}: {e}"))
}

async fn tcp(hc: &HealthCheck, t: &TcpCheck, target: &Target, conn: &mut Option<Conn>) -> Checked {
    if t.receive.is_empty() {
        // Connect-only (Envoy then writes nothing and closes).
        connect(target).await?;
        return Ok((Outcome::Passed { degraded: false }, String::new()));
    }
    let mut stream = match conn.take() {
        Some(Conn::Stream(s)) => s,
        _ => connect(target).await?,
    };
    if !t.send.is_empty() {
        send(&mut stream, &t.send, "send").await?;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !matches_in_order(&buf, &t.receive) {
        let n = read_some(&mut stream, &mut chunk, "receive").await?;
        if n == 0 {
            return Err("closed before the expected payload arrived".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_BODY {
            // A failure of the network kind, as a timeout would be.
            return Err("the expected payload did not arrive".into());
        }
    }
    if hc.reuse_connection {
        *conn = Some(Conn::Stream(stream));
    }
    Ok((Outcome::Passed { degraded: false }, String::new()))
}

/// Whether every block appears in `buf`, in order (Envoy's "fuzzy" match:
/// not necessarily contiguous).
pub fn matches_in_order(buf: &[u8], blocks: &[Vec<u8>]) -> bool {
    let mut rest = buf;
    for b in blocks {
        match find(rest, b) {
            Some(at) => rest = &rest[at + b.len()..],
            None => return false,
        }
    }
    true
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The request headers of an HTTP check, after removals and additions.
fn http_headers(h: &HttpCheck) -> Vec<(String, String)> {
    let mut headers = vec![("user-agent".to_owned(), "Envoy/HC".to_owned())];
    headers.retain(|(n, _)| !h.headers_to_remove.contains(n));
    add_headers(&mut headers, &h.headers_to_add);
    headers
}

fn add_headers(headers: &mut Vec<(String, String)>, added: &[AddedHeader]) {
    for a in added {
        if a.overwrite {
            headers.retain(|(n, _)| *n != a.name);
        }
        headers.push((a.name.clone(), a.value.clone()));
    }
}

/// Judges an HTTP answer as Envoy does: the status (an unexpected one
/// with `x-envoy-immediate-health-check-fail` fails at once even when
/// retriable; on an expected one the header is ignored), then `receive`.
fn judge_http(
    h: &HttpCheck,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> (Outcome, String) {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !h.is_expected(status) {
        if has("x-envoy-immediate-health-check-fail") {
            return (
                Outcome::ImmediateFail,
                format!("answered {status} with x-envoy-immediate-health-check-fail"),
            );
        }
        let outcome = if h.is_retriable(status) {
            Outcome::Retriable
        } else {
            Outcome::Active
        };
        return (outcome, format!("answered {status}"));
    }
    if !h.receive.is_empty() {
        let seen = &body[..body.len().min(h.response_buffer_size)];
        if !matches_in_order(seen, &h.receive) {
            return (
                Outcome::Active,
                "the body lacks the expected payload".into(),
            );
        }
    }
    (
        Outcome::Passed {
            degraded: has("x-envoy-degraded"),
        },
        String::new(),
    )
}

/// An HTTP/1.1 check; on a kept connection that fails (the server closed
/// it between checks), once more on a new one, as for HTTP/2.
async fn http1(
    hc: &HealthCheck,
    h: &HttpCheck,
    target: &Target,
    conn: &mut Option<Conn>,
) -> Checked {
    let reused = matches!(conn, Some(Conn::Stream(_)));
    match http1_once(hc, h, target, conn).await {
        Err(_) if reused => {
            *conn = None;
            http1_once(hc, h, target, conn).await
        }
        checked => checked,
    }
}

async fn http1_once(
    hc: &HealthCheck,
    h: &HttpCheck,
    target: &Target,
    conn: &mut Option<Conn>,
) -> Checked {
    let mut stream = match conn.take() {
        Some(Conn::Stream(s)) => s,
        _ => connect(target).await?,
    };
    send(&mut stream, target.http1_head.as_bytes(), "send").await?;
    let mut buf = Vec::with_capacity(1024);
    let (status, headers, head_len) = loop {
        let mut chunk = [0u8; 4096];
        let n = read_some(&mut stream, &mut chunk, "receive").await?;
        if n == 0 {
            return Err("closed before answering".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut slots);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let status = resp.code.unwrap_or(0);
                if (100..200).contains(&status) {
                    // An interim answer: the real one follows.
                    buf.drain(..len);
                    continue;
                }
                let headers = resp
                    .headers
                    .iter()
                    .map(|x| {
                        (
                            x.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(x.value).into_owned(),
                        )
                    })
                    .collect::<Vec<_>>();
                break (status, headers, len);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            Ok(httparse::Status::Partial) => {
                return Ok((Outcome::Active, "response head too large".into()))
            }
            Err(e) => return Ok((Outcome::Active, format!("unparseable response: {e}"))),
        }
    };
    buf.drain(..head_len);
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    let no_body = h.method == "HEAD" || status == 204 || status == 304;
    let keep = if h.receive.is_empty() {
        0
    } else {
        h.response_buffer_size
    };
    let (body, reusable) = if no_body {
        (Vec::new(), true)
    } else if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        read_chunked(&mut stream, buf, keep).await?
    } else if let Some(len) = get("content-length") {
        let len: usize = len
            .trim()
            .parse()
            .map_err(|_| format!("bad content-length {len:?}"))?;
        read_exact_body(&mut stream, buf, len, keep).await?
    } else {
        read_to_end(&mut stream, buf, keep).await?
    };
    let close = get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    if hc.reuse_connection && reusable && !close {
        *conn = Some(Conn::Stream(stream));
    }
    Ok(judge_http(h, status, &headers, &body))
}

/// Reads a body of `len` bytes, keeping the first `keep`; returns it and
/// whether the connection may carry another request.
async fn read_exact_body(
    stream: &mut Transport,
    mut have: Vec<u8>,
    len: usize,
    keep: usize,
) -> Result<(Vec<u8>, bool), String> {
    if len > MAX_BODY {
        have.truncate(keep);
        return Ok((have, false));
    }
    let mut chunk = [0u8; 4096];
    while have.len() < len {
        let n = read_some(stream, &mut chunk, "body").await?;
        if n == 0 {
            return Err("closed in the body".into());
        }
        have.extend_from_slice(&chunk[..n]);
    }
    let reusable = have.len() == len;
    have.truncate(keep.min(len));
    Ok((have, reusable))
}

async fn read_to_end(
    stream: &mut Transport,
    mut have: Vec<u8>,
    keep: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut chunk = [0u8; 4096];
    let mut total = have.len();
    loop {
        let n = read_some(stream, &mut chunk, "body").await?;
        if n == 0 || total > MAX_BODY {
            break;
        }
        total += n;
        if have.len() < keep {
            have.extend_from_slice(&chunk[..n]);
        }
    }
    have.truncate(keep);
    Ok((have, false))
}

/// Decodes a chunked body (extensions and trailers skipped).
async fn read_chunked(
    stream: &mut Transport,
    mut buf: Vec<u8>,
    keep: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut body = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut total = 0usize;
    let mut pos = 0usize;
    // States: reading a size line, or `Some(n)` bytes of data (+ CRLF).
    let mut want: Option<usize> = None;
    loop {
        match want {
            None => {
                if let Some(end) = find(&buf[pos..], b"\r\n") {
                    let line =
                        std::str::from_utf8(&buf[pos..pos + end]).map_err(|_| "bad chunk size")?;
                    let size =
                        usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                            .map_err(|_| format!("bad chunk size {line:?}"))?;
                    pos += end + 2;
                    if size == 0 {
                        // Trailers end with an empty line.
                        loop {
                            if let Some(end) = find(&buf[pos..], b"\r\n") {
                                pos += end + 2;
                                if end == 0 {
                                    return Ok((body, pos == buf.len()));
                                }
                                continue;
                            }
                            let n = read_some(stream, &mut chunk, "body").await?;
                            if n == 0 {
                                return Ok((body, false));
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                    total += size;
                    if total > MAX_BODY {
                        return Ok((body, false));
                    }
                    want = Some(size);
                    continue;
                }
            }
            Some(n) if buf.len() - pos >= n + 2 => {
                let room = keep.saturating_sub(body.len());
                body.extend_from_slice(&buf[pos..pos + n.min(room)]);
                pos += n + 2;
                want = None;
                continue;
            }
            Some(_) => {}
        }
        if pos > 0 {
            buf.drain(..pos);
            pos = 0;
        }
        let n = read_some(stream, &mut chunk, "body").await?;
        if n == 0 {
            return Err("closed in the body".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_HEAD + MAX_BODY {
            return Ok((body, false));
        }
    }
}

/// What goes over HTTP/2.
enum Request<'a> {
    Http(&'a HttpCheck),
    Grpc,
}

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse` (`status`: 1 is SERVING).
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

async fn h2_check(req: Request<'_>, target: &Target, conn: &mut Option<Conn>) -> Checked {
    let (mut h2, reused) = match conn.take() {
        Some(Conn::H2(c)) if c.reusable() => (c, true),
        _ => (Box::new(H2Conn::new(connect(target).await?)), false),
    };
    let ask = match req {
        Request::Http(h) => Ask {
            method: h.method.as_str(),
            authority: &target.authority,
            path: &h.path,
            fields: &target.fields,
            body: None,
            // The body matters only to `receive`.
            max_body: if h.receive.is_empty() {
                0
            } else {
                h.response_buffer_size
            },
        },
        Request::Grpc => Ask {
            method: "POST",
            authority: &target.authority,
            path: "/grpc.health.v1.Health/Check",
            fields: &target.fields,
            body: target.grpc_body.clone(),
            max_body: MAX_BODY,
        },
    };
    let answer = match h2.exchange(&ask).await {
        Ok(a) => a,
        // The kept connection ended between checks (the server's idle
        // timeout or connection age: a GOAWAY or a close nobody read):
        // once more on a new one, as Envoy reconnects without a failure.
        Err(_) if reused => {
            h2 = Box::new(H2Conn::new(connect(target).await?));
            h2.exchange(&ask).await?
        }
        Err(e) => return Err(e),
    };
    *conn = Some(Conn::H2(h2));
    match req {
        Request::Http(h) => Ok(judge_http(h, answer.status, &answer.headers, &answer.body)),
        Request::Grpc => Ok(judge_grpc(&answer)),
    }
}

/// SERVING in a complete, OK call passes; anything else is a wrong answer.
fn judge_grpc(answer: &Answer) -> (Outcome, String) {
    if answer.status != 200 {
        return (Outcome::Active, format!("answered HTTP {}", answer.status));
    }
    let field = |list: &[(String, String)]| {
        list.iter()
            .find(|(n, _)| n == "grpc-status")
            .map(|(_, v)| v.clone())
    };
    // A trailers-only answer carries it in the headers.
    let grpc_status = field(&answer.trailers).or_else(|| field(&answer.headers));
    if grpc_status.as_deref() != Some("0") {
        return (
            Outcome::Active,
            format!(
                "grpc-status {}",
                grpc_status.as_deref().unwrap_or("missing")
            ),
        );
    }
    let mut framer = crate::xds::grpc::Decoder::default();
    framer.push(&answer.body);
    let msg = match framer.next_message() {
        Ok(Some(m)) => m,
        _ => return (Outcome::Active, "no HealthCheckResponse".into()),
    };
    match <HealthCheckResponse as prost::Message>::decode(msg) {
        Ok(r) if r.status == 1 => (Outcome::Passed { degraded: false }, String::new()),
        Ok(r) => (Outcome::Active, format!("status {}", r.status)),
        Err(e) => (Outcome::Active, format!("bad HealthCheckResponse: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_blocks_match_in_order_not_contiguously() {
        let b = |s: &str| s.as_bytes().to_vec();
        assert!(matches_in_order(b"xxPONGyyOK", &[b("PONG"), b("OK")]));
        assert!(!matches_in_order(b"OKxxPONG", &[b("PONG"), b("OK")]));
        assert!(matches_in_order(b"anything", &[]));
        assert!(!matches_in_order(b"", &[b("a")]));
    }
}
