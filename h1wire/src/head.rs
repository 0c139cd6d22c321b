//! Request heads: the request line and header section (RFC 9112 §3, §5),
//! and what they say about the body's framing and the connection (§6, §9).

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::error::Error;

/// Bounds on a request head; `Limits::default()` is Envoy's defaults
/// (`max_request_headers_kb: 60`, `max_headers_count: 100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Request line and header section together, CRLFs included.
    pub max_head_bytes: usize,
    /// Header fields (and, in a chunked body, trailer fields).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_head_bytes: 60 * 1024,
            max_headers: 100,
        }
    }
}

/// The protocol version of a request (HTTP/1.0 or HTTP/1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the request's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No `Content-Length` or `Transfer-Encoding`: no body.
    None,
    Length(u64),
    Chunked,
}

/// A parsed request head. Field names and values are slices of `raw`, the
/// head's bytes as received (names keep their case; values are trimmed of
/// surrounding whitespace).
#[derive(Debug, Clone)]
pub struct RequestHead {
    raw: Bytes,
    method: Range<u32>,
    target: Range<u32>,
    fields: Vec<(Range<u32>, Range<u32>)>,
    pub version: Version,
    pub framing: BodyFraming,
    /// `Host`'s value (HTTP/1.1 requires exactly one), for `:authority`.
    host: Option<Range<u32>>,
    /// The connection may carry another request after this one: HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Expect: 100-continue` (HTTP/1.1): the client waits for a 100 (or
    /// the final answer) before it sends the body.
    pub expect_continue: bool,
    /// An `Upgrade` field listed in `Connection` (WebSocket and the like).
    pub upgrade: bool,
}

impl RequestHead {
    pub fn method(&self) -> &[u8] {
        self.slice(&self.method)
    }

    pub fn target(&self) -> &[u8] {
        self.slice(&self.target)
    }

    pub fn host(&self) -> Option<&[u8]> {
        self.host.as_ref().map(|r| self.slice(r))
    }

    /// The header fields in the order received, `Host` among them.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|(n, v)| (self.slice(n), self.slice(v)))
    }

    /// The head's size on the wire.
    pub fn wire_len(&self) -> usize {
        self.raw.len()
    }

    fn slice(&self, r: &Range<u32>) -> &[u8] {
        &self.raw[r.start as usize..r.end as usize]
    }
}

/// Field slots parsed on the stack; more than this (a raised
/// `max_headers`) takes a heap buffer.
const STACK_FIELDS: usize = 128;

/// Parses the request head at the start of `buf`. `Ok(None)`: incomplete,
/// read more. On success the head is split off `buf`, which then starts
/// with the body or the next request. Empty lines before the request line
/// (RFC 9112 §2.2: a client may send CRLF after a body) are skipped by
/// httparse and count toward `max_head_bytes`.
pub fn parse_request_head(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<RequestHead>, Error> {
    let slots = limits.max_headers;
    let parsed = if slots <= STACK_FIELDS {
        let mut fields = [httparse::EMPTY_HEADER; STACK_FIELDS];
        parse_with(buf, limits, &mut fields[..slots])?
    } else {
        let mut fields = vec![httparse::EMPTY_HEADER; slots];
        parse_with(buf, limits, &mut fields)?
    };
    let Some((len, mut head)) = parsed else {
        return Ok(None);
    };
    head.raw = buf.split_to(len).freeze();
    Ok(Some(head))
}

fn parse_with<'b>(
    buf: &'b BytesMut,
    limits: &Limits,
    fields: &mut [httparse::Header<'b>],
) -> Result<Option<(usize, RequestHead)>, Error> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let mut req = httparse::Request::new(fields);
    let len = match req.parse(window) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() < limits.max_head_bytes => return Ok(None),
        Ok(httparse::Status::Partial) => {
            return Err(Error::HeadTooLarge {
                limit: limits.max_head_bytes,
            })
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Error::TooManyHeaders {
                limit: limits.max_headers,
            })
        }
        Err(httparse::Error::Version) => return Err(Error::UnsupportedVersion),
        Err(httparse::Error::HeaderName) => return Err(Error::Malformed("invalid header name")),
        Err(httparse::Error::HeaderValue) => return Err(Error::Malformed("invalid header value")),
        Err(httparse::Error::Token) => return Err(Error::Malformed("invalid request line")),
        Err(_) => return Err(Error::Malformed("invalid line")),
    };
    let base = buf.as_ptr() as usize;
    let range = |s: &[u8]| {
        let start = (s.as_ptr() as usize - base) as u32;
        start..start + s.len() as u32
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Error::Malformed("incomplete request line"));
    };
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let mut head = RequestHead {
        raw: Bytes::new(),
        method: range(method.as_bytes()),
        target: range(target.as_bytes()),
        fields: Vec::with_capacity(req.headers.len()),
        version,
        framing: BodyFraming::None,
        host: None,
        keep_alive: version == Version::Http11,
        expect_continue: false,
        upgrade: false,
    };
    let mut framing = Framing::default();
    let mut close = false;
    let mut keep_alive_token = false;
    let mut upgrade_token = false;
    let mut upgrade_field = false;
    for f in req.headers.iter() {
        let value = trim(f.value);
        let name = f.name.as_bytes();
        head.fields.push((range(name), range(value)));
        if name.eq_ignore_ascii_case(b"content-length") {
            // One field, one value: a list or a repeated field is refused
            // even when its values agree (RFC 9112 §6.3 allows either), as
            // Envoy 1.40 answers `5, 5` and two `5`s (400 and a close).
            // Forwarded, the list would reach an HTTP/2 upstream as an
            // invalid field, and a request smuggling test as a disagreement.
            if framing.length.is_some() || value.contains(&b',') {
                return Err(Error::BadFraming("more than one Content-Length value"));
            }
            framing.content_length(value)?;
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            framing.transfer_encoding(value)?;
        } else if name.eq_ignore_ascii_case(b"host") {
            if head.host.is_some() {
                return Err(Error::Malformed("more than one Host"));
            }
            head.host = Some(range(value));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in list(value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
                upgrade_token |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            head.expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade_field = true;
        }
    }
    if version == Version::Http11 && head.host.is_none() {
        return Err(Error::Malformed("HTTP/1.1 request without Host"));
    }
    head.framing = framing.resolve(version)?;
    head.keep_alive = !close && (version == Version::Http11 || keep_alive_token);
    head.expect_continue &= version == Version::Http11;
    head.upgrade = upgrade_field && upgrade_token;
    Ok(Some((len, head)))
}

/// What `Content-Length` and `Transfer-Encoding` fields said, before they
/// are checked against each other.
#[derive(Default)]
pub(crate) struct Framing {
    pub(crate) length: Option<u64>,
    pub(crate) codings: u32,
    pub(crate) chunked_last: bool,
    pub(crate) other_coding: bool,
    pub(crate) chunked_twice: bool,
}

impl Framing {
    /// A `Content-Length` field: a list of equal decimal values at most
    /// (RFC 9112 §6.3 item 5), equal to any earlier one.
    pub(crate) fn content_length(&mut self, value: &[u8]) -> Result<(), Error> {
        let mut any = false;
        for v in value.split(|&b| b == b',').map(trim) {
            let n = decimal(v).ok_or(Error::BadFraming("invalid Content-Length"))?;
            if self.length.is_some_and(|l| l != n) {
                return Err(Error::BadFraming("conflicting Content-Length values"));
            }
            self.length = Some(n);
            any = true;
        }
        if !any {
            return Err(Error::BadFraming("invalid Content-Length"));
        }
        Ok(())
    }

    /// A `Transfer-Encoding` field: codings in order, across fields.
    pub(crate) fn transfer_encoding(&mut self, value: &[u8]) -> Result<(), Error> {
        for coding in value.split(|&b| b == b',').map(trim) {
            if coding.is_empty() {
                continue;
            }
            self.codings += 1;
            // Parameters (`;q=...`) belong to codings we do not take anyway.
            let chunked = coding.eq_ignore_ascii_case(b"chunked");
            self.chunked_twice |= chunked && self.chunked_last;
            self.other_coding |= !chunked;
            self.chunked_last = chunked;
        }
        Ok(())
    }

    fn resolve(self, version: Version) -> Result<BodyFraming, Error> {
        if self.codings == 0 {
            return Ok(self.length.map_or(BodyFraming::None, BodyFraming::Length));
        }
        if version == Version::Http10 {
            return Err(Error::BadFraming(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        if self.length.is_some() {
            return Err(Error::BadFraming(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        if !self.chunked_last || self.chunked_twice {
            return Err(Error::BadFraming(
                "Transfer-Encoding must end in one chunked",
            ));
        }
        if self.other_coding {
            return Err(Error::UnsupportedTransferCoding);
        }
        Ok(BodyFraming::Chunked)
    }
}

/// 1 to 19 ASCII digits (so no overflow), nothing else.
pub(crate) fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The elements of a comma-separated list, trimmed, empty ones skipped.
pub(crate) fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(trim).filter(|t| !t.is_empty())
}

pub(crate) fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Option<RequestHead>, Error> {
        parse_request_head(&mut BytesMut::from(bytes), &Limits::default())
    }

    fn head(bytes: &[u8]) -> RequestHead {
        parse(bytes).expect("valid").expect("complete")
    }

    #[test]
    fn a_simple_get() {
        let h = head(b"GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
        assert_eq!(h.method(), b"GET");
        assert_eq!(h.target(), b"/a?b=c");
        assert_eq!(h.host(), Some(&b"example.com"[..]));
        assert_eq!(h.version, Version::Http11);
        assert_eq!(h.framing, BodyFraming::None);
        assert!(h.keep_alive);
        let fields: Vec<_> = h.fields().collect();
        assert_eq!(
            fields,
            [(&b"Host"[..], &b"example.com"[..]), (b"Accept", b"*/*")]
        );
    }

    #[test]
    fn incomplete_heads_ask_for_more_and_leave_the_buffer() {
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n"[..]);
        assert!(parse_request_head(&mut buf, &Limits::default())
            .unwrap()
            .is_none());
        assert_eq!(buf.len(), 25);
        buf.extend_from_slice(b"\r\nbody");
        let h = parse_request_head(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(h.wire_len(), 27);
        assert_eq!(&buf[..], b"body");
    }

    #[test]
    fn pipelined_requests_come_out_one_at_a_time() {
        let mut buf = BytesMut::from(
            &b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        );
        let l = Limits::default();
        assert_eq!(
            parse_request_head(&mut buf, &l).unwrap().unwrap().target(),
            b"/1"
        );
        assert_eq!(
            parse_request_head(&mut buf, &l).unwrap().unwrap().target(),
            b"/2"
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn leading_empty_lines_are_bounded_and_strict() {
        // Found by the h1_request fuzz target: empty lines before a request
        // count toward the head's limit however they arrive, and a CR that
        // is not part of a CRLF is an error, not an empty line.
        let small = Limits {
            max_head_bytes: 64,
            max_headers: 8,
        };
        let mut crlfs = BytesMut::from(&b"\r\n".repeat(40)[..]);
        assert_eq!(
            parse_request_head(&mut crlfs, &small).unwrap_err().status(),
            431
        );
        let stray_cr = parse(b"\r\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(stray_cr.unwrap_err().status(), 400);
    }

    #[test]
    fn leading_empty_lines_are_skipped() {
        assert_eq!(
            head(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").target(),
            b"/"
        );
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection() {
        assert!(!head(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!head(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!head(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
    }

    #[test]
    fn host_is_required_once_in_http_1_1_only() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n")
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(head(b"GET / HTTP/1.0\r\n\r\n").host(), None);
    }

    #[test]
    fn content_length_frames_the_body() {
        assert_eq!(
            head(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n").framing,
            BodyFraming::Length(42)
        );
        // Repeated, even equal, is refused as Envoy refuses it.
        for req in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        ] {
            let err = parse(req).unwrap_err();
            assert_eq!(err, Error::BadFraming("more than one Content-Length value"));
            assert_eq!(err.status(), 400);
        }
    }

    #[test]
    fn smuggling_shapes_are_refused_with_400() {
        for req in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            // obs-fold (RFC 9112 §5.2: reject or replace; a proxy rejects).
            b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
            // Whitespace between a field name and the colon (§5.1).
            b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
            // Control characters in a value.
            b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n",
        ] {
            let err = parse(req).expect_err(std::str::from_utf8(req).unwrap());
            assert_eq!(err.status(), 400, "{err} for {:?}", std::str::from_utf8(req));
        }
    }

    #[test]
    fn chunked_must_be_the_only_coding_we_take() {
        assert_eq!(
            head(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n").framing,
            BodyFraming::Chunked
        );
        let err = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .unwrap_err();
        assert_eq!(err, Error::UnsupportedTransferCoding);
        assert_eq!(err.status(), 501);
    }

    #[test]
    fn limits_answer_431() {
        let small = Limits {
            max_head_bytes: 64,
            max_headers: 2,
        };
        let mut big = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: "[..]);
        big.extend_from_slice(&[b'x'; 64]);
        assert_eq!(
            parse_request_head(&mut big, &small).unwrap_err().status(),
            431
        );
        let mut many = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n"[..]);
        assert_eq!(
            parse_request_head(&mut many, &small).unwrap_err().status(),
            431
        );
        let raised = Limits {
            max_head_bytes: 1 << 20,
            max_headers: 200,
        };
        let mut text = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 0..150 {
            text.push_str(&format!("X-{i}: v\r\n"));
        }
        text.push_str("\r\n");
        let h = parse_request_head(&mut BytesMut::from(text.as_bytes()), &raised)
            .unwrap()
            .unwrap();
        assert_eq!(h.fields().count(), 151);
    }

    #[test]
    fn other_versions_answer_505() {
        assert_eq!(parse(b"GET / HTTP/2.0\r\n\r\n").unwrap_err().status(), 505);
    }

    #[test]
    fn expect_and_upgrade_are_recognised() {
        let h =
            head(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n");
        assert!(h.expect_continue);
        assert!(!head(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
        assert!(
            head(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
                .upgrade
        );
        assert!(!head(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n").upgrade);
    }
}
