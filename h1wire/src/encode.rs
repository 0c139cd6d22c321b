//! Writing messages: responses (the server side) and requests (the client
//! side), heads and the body's framing chosen from what is known about it
//! (RFC 9112 §3, §4, §6, §7).

use bytes::{BufMut, BytesMut};

use crate::error::SendError;
use crate::head::decimal;
use crate::head::Version;

/// How a response's body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// 1xx, 204, 304 and answers to HEAD: no body, whatever the fields say.
    NoBody,
    Length(u64),
    /// HTTP/1.1 with a length not known in advance.
    Chunked,
    /// HTTP/1.0 with a length not known in advance: the body ends when the
    /// connection closes.
    UntilClose,
}

impl ResponseFraming {
    /// The framing for a response with this status to a request with this
    /// method and version, given the body's length if known.
    pub fn choose(version: Version, head_request: bool, status: u16, length: Option<u64>) -> Self {
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            return ResponseFraming::NoBody;
        }
        match (length, version) {
            (Some(n), _) => ResponseFraming::Length(n),
            (None, Version::Http11) => ResponseFraming::Chunked,
            (None, Version::Http10) => ResponseFraming::UntilClose,
        }
    }

    /// Whether the connection can carry another request after this
    /// response: not when the body ends with the connection.
    pub fn allows_keep_alive(self) -> bool {
        self != ResponseFraming::UntilClose
    }
}

/// Header fields that describe one hop's connection or framing: never
/// copied from the upstream response (RFC 9110 §7.6.1), the encoder writes
/// its own.
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    const HOP: [&[u8]; 8] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"content-length",
        b"upgrade",
        b"te",
        b"trailer",
    ];
    HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Writes a response head: status line, `fields` (hop-by-hop ones
/// skipped), then the framing's own fields and `Connection: close` when
/// the connection will not be kept. Field names and values must already be
/// valid (they come from a checked HTTP/2 response).
pub fn response_head<'a>(
    out: &mut BytesMut,
    version: Version,
    status: u16,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    framing: ResponseFraming,
    keep_alive: bool,
) {
    status_line(out, version, status);
    self::fields(out, fields);
    framing_fields(out, version, framing, keep_alive);
}

/// The status line.
pub fn status_line(out: &mut BytesMut, version: Version, status: u16) {
    out.put_slice(match version {
        Version::Http10 => b"HTTP/1.0 ",
        Version::Http11 => b"HTTP/1.1 ",
    });
    put_decimal(out, u64::from(status));
    out.put_u8(b' ');
    out.put_slice(reason(status).as_bytes());
    out.put_slice(b"\r\n");
}

/// Writes `fields`, hop-by-hop ones skipped, and returns the value of the
/// `content-length` among them when it is a valid one (the framing is the
/// encoder's to write).
pub fn fields<'a>(
    out: &mut BytesMut,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Option<u64> {
    let mut length = None;
    for (name, value) in fields {
        if is_hop_by_hop(name) {
            if name.eq_ignore_ascii_case(b"content-length") {
                length = crate::head::decimal(value);
            }
            continue;
        }
        out.put_slice(name);
        out.put_slice(b": ");
        out.put_slice(value);
        out.put_slice(b"\r\n");
    }
    length
}

/// A `content-length` field.
pub fn content_length(out: &mut BytesMut, n: u64) {
    out.put_slice(b"content-length: ");
    put_decimal(out, n);
    out.put_slice(b"\r\n");
}

/// The framing's own fields, the `connection` field the version and
/// `keep_alive` call for, and the empty line ending the head.
pub fn framing_fields(
    out: &mut BytesMut,
    version: Version,
    framing: ResponseFraming,
    keep_alive: bool,
) {
    match framing {
        ResponseFraming::Length(n) => content_length(out, n),
        ResponseFraming::Chunked => out.put_slice(b"transfer-encoding: chunked\r\n"),
        ResponseFraming::NoBody | ResponseFraming::UntilClose => {}
    }
    let keep = keep_alive && framing.allows_keep_alive();
    match (keep, version) {
        (false, _) => out.put_slice(b"connection: close\r\n"),
        (true, Version::Http10) => out.put_slice(b"connection: keep-alive\r\n"),
        (true, Version::Http11) => {}
    }
    out.put_slice(b"\r\n");
}

/// An interim `100 Continue`, for a request that expects it once the
/// gateway decides to read its body.
pub fn continue_100(out: &mut BytesMut) {
    out.put_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
}

/// One chunk of a chunked body (nothing for empty data: a zero-size chunk
/// would end the body).
pub fn chunk(out: &mut BytesMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    chunk_head(out, data.len());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// How a request's body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFraming {
    /// No body (or `content-length: 0`).
    None,
    Length(u64),
    Chunked,
}

/// Fields a request head never copies from the caller: those the encoder
/// writes itself (`host`, framing) and those of one hop (RFC 9110 §7.6.1).
/// `content-length` is not among them: the caller's frames the body.
pub fn skipped_in_request(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"host")
        || (is_hop_by_hop(name) && !name.eq_ignore_ascii_case(b"content-length"))
}

/// Writes a request head: `METHOD target HTTP/1.1`, `host` first (left
/// out when empty), then `fields` (names in lowercase, names and values
/// already checked) less [those skipped](skipped_in_request). A
/// `content-length` among them frames the body; otherwise a body goes
/// chunked, and `end_stream` means none (announced with
/// `content-length: 0` for POST, PUT and PATCH, whose servers may
/// otherwise answer 411). On an error `out` holds a partial head: the
/// caller truncates it.
pub fn request_head<'a>(
    out: &mut BytesMut,
    method: &[u8],
    target: &[u8],
    host: &[u8],
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    end_stream: bool,
) -> Result<RequestFraming, SendError> {
    request_line(out, method, target);
    if !host.is_empty() {
        out.put_slice(b"host: ");
        out.put_slice(host);
        out.put_slice(b"\r\n");
    }
    let mut length = None;
    for (name, value) in fields {
        if skipped_in_request(name) {
            continue;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = decimal(value).ok_or(SendError::InvalidContentLength)?;
            match length {
                None => length = Some(n),
                Some(l) if l == n => continue,
                Some(_) => return Err(SendError::InvalidContentLength),
            }
        }
        out.put_slice(name);
        out.put_slice(b": ");
        out.put_slice(value);
        out.put_slice(b"\r\n");
    }
    let framing = match (end_stream, length) {
        (true, Some(0)) => RequestFraming::None,
        (true, Some(_)) => return Err(SendError::LengthMismatch),
        (true, None) => {
            if matches!(method, b"POST" | b"PUT" | b"PATCH") {
                content_length(out, 0);
            }
            RequestFraming::None
        }
        (false, Some(n)) => RequestFraming::Length(n),
        (false, None) => {
            out.put_slice(b"transfer-encoding: chunked\r\n");
            RequestFraming::Chunked
        }
    };
    out.put_slice(b"\r\n");
    Ok(framing)
}

/// A chunk's size line, for data written after it as a buffer of its own
/// (then `\r\n`); `len` must not be 0, which would end the body.
pub fn chunk_head(out: &mut BytesMut, len: usize) {
    put_hex(out, len as u64);
    out.put_slice(b"\r\n");
}

/// A request line, `METHOD target HTTP/1.1` (method and target already
/// checked: they come from an HTTP/2 request).
pub fn request_line(out: &mut BytesMut, method: &[u8], target: &[u8]) {
    out.put_slice(method);
    out.put_u8(b' ');
    out.put_slice(target);
    out.put_slice(b" HTTP/1.1\r\n");
}

/// The end of a chunked body, with trailer fields if any.
pub fn last_chunk<'a>(
    out: &mut BytesMut,
    trailers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.put_slice(b"0\r\n");
    for (name, value) in trailers {
        out.put_slice(name);
        out.put_slice(b": ");
        out.put_slice(value);
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
}

fn put_decimal(out: &mut BytesMut, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
}

fn put_hex(out: &mut BytesMut, n: u64) {
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
}

/// The reason phrase sent with a status: informational only (clients must
/// ignore it, RFC 9112 §4), empty for codes not listed.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        417 => "Expectation Failed",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{BodyDecoder, BodyEvent};
    use crate::head::{parse_request_head, BodyFraming, Limits};

    fn text(b: &BytesMut) -> &str {
        std::str::from_utf8(b).unwrap()
    }

    #[test]
    fn heads_skip_hop_by_hop_fields_and_write_their_own_framing() {
        let mut out = BytesMut::new();
        let fields = [
            (&b"content-type"[..], &b"text/plain"[..]),
            (b"connection", b"keep-alive"),
            (b"transfer-encoding", b"chunked"),
            (b"content-length", b"999"),
        ];
        response_head(
            &mut out,
            Version::Http11,
            200,
            fields,
            ResponseFraming::Length(5),
            true,
        );
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n"
        );

        out.clear();
        response_head(
            &mut out,
            Version::Http11,
            599,
            [],
            ResponseFraming::Chunked,
            false,
        );
        assert_eq!(
            text(&out),
            "HTTP/1.1 599 \r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );

        out.clear();
        response_head(
            &mut out,
            Version::Http10,
            200,
            [],
            ResponseFraming::Length(0),
            true,
        );
        assert_eq!(
            text(&out),
            "HTTP/1.0 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn framing_follows_status_method_and_version() {
        use ResponseFraming::*;
        assert_eq!(
            ResponseFraming::choose(Version::Http11, true, 200, Some(5)),
            NoBody
        );
        assert_eq!(
            ResponseFraming::choose(Version::Http11, false, 204, None),
            NoBody
        );
        assert_eq!(
            ResponseFraming::choose(Version::Http11, false, 304, Some(9)),
            NoBody
        );
        assert_eq!(
            ResponseFraming::choose(Version::Http11, false, 200, None),
            Chunked
        );
        assert_eq!(
            ResponseFraming::choose(Version::Http10, false, 200, None),
            UntilClose
        );
        assert!(!UntilClose.allows_keep_alive());
        let mut out = BytesMut::new();
        response_head(&mut out, Version::Http10, 200, [], UntilClose, true);
        assert!(text(&out).ends_with("connection: close\r\n\r\n"));
    }

    #[test]
    fn chunks_written_here_decode_back() {
        let mut wire = BytesMut::new();
        chunk(&mut wire, b"hello, ");
        chunk(&mut wire, b"");
        chunk(&mut wire, &[b'x'; 300]);
        last_chunk(&mut wire, [(&b"grpc-status"[..], &b"0"[..])]);
        let mut dec = BodyDecoder::new(BodyFraming::Chunked);
        let (mut body, mut trailers) = (Vec::new(), Vec::new());
        loop {
            match dec.decode(&mut wire, &Limits::default()).unwrap() {
                Some(BodyEvent::Data(d)) => body.extend_from_slice(&d),
                Some(BodyEvent::Trailers(t)) => trailers.extend_from_slice(&t),
                Some(BodyEvent::End) => break,
                None => panic!("incomplete"),
            }
        }
        assert_eq!(body.len(), 307);
        assert!(body.starts_with(b"hello, x"));
        assert_eq!(trailers, b"grpc-status: 0\r\n");
    }

    #[test]
    fn a_request_written_as_a_client_would_parses_back() {
        let mut wire = BytesMut::from(
            &b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        );
        chunk(&mut wire, b"abc");
        last_chunk(&mut wire, []);
        let head = parse_request_head(&mut wire, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, BodyFraming::Chunked);
        let mut dec = BodyDecoder::new(head.framing);
        assert_eq!(
            dec.decode(&mut wire, &Limits::default()).unwrap(),
            Some(BodyEvent::Data(bytes::Bytes::from_static(b"abc")))
        );
        assert_eq!(
            dec.decode(&mut wire, &Limits::default()).unwrap(),
            Some(BodyEvent::End)
        );
        assert!(wire.is_empty());
    }
}
