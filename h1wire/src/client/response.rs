//! Responses: heads (status line and fields, RFC 9112 §4, §5, and what they say about the body's framing and the connection, §6.3, §9.3), and body pieces as events.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::body::{BodyDecoder, BodyEvent};
use crate::encode::ResponseFraming;
use crate::error::Error;
use crate::head::{list, trim, Framing};
use crate::head::{Limits, Version};

/// What the connection received, in order.
#[derive(Debug)]
pub enum ClientEvent {
    /// A response head. `informational`: a 1xx other than 101 (which is an
    /// error), the final head still to come. `end_stream`: no body follows
    /// (an answer to HEAD, 204, 304, `Content-Length: 0`).
    Response {
        head: ResponseHead,
        informational: bool,
        end_stream: bool,
    },
    /// Response body bytes, zero-copy out of the caller's buffer
    /// (`end_stream`: the last of them; the data may then be empty). Hand
    /// their count to
    /// [`ClientConn::release`](crate::client::ClientConn::release) once
    /// consumed.
    Data { data: Bytes, end_stream: bool },
    /// The trailer section of a chunked response (raw field lines; see
    /// [`crate::trailer_fields`]); it ends the response.
    Trailers { raw: Bytes },
}

/// A parsed response head. Field names and values are slices of the head's
/// bytes as received (names keep their case; values are trimmed of
/// surrounding whitespace).
#[derive(Debug, Clone)]
pub struct ResponseHead {
    raw: Bytes,
    reason: Range<u32>,
    fields: Vec<(Range<u32>, Range<u32>)>,
    pub version: Version,
    pub status: u16,
    /// How the body is delimited: [`ResponseFraming::NoBody`] for 1xx,
    /// 204, 304 and answers to HEAD whatever the fields say;
    /// [`ResponseFraming::UntilClose`] when neither a final `chunked` nor
    /// a `Content-Length` frames it.
    pub framing: ResponseFraming,
    /// The connection may carry another exchange after this one: HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `Connection: keep-alive`,
    /// and a framing nobody could have read differently (not both
    /// `Transfer-Encoding` and `Content-Length`, no `Transfer-Encoding` in
    /// HTTP/1.0, not until the close).
    pub keep_alive: bool,
}

impl ResponseHead {
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reason phrase (empty when missing or not plain text).
    pub fn reason(&self) -> &[u8] {
        self.slice(&self.reason)
    }

    /// The header fields in the order received.
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

/// Parses the response head at the start of `buf`, an answer to a HEAD
/// request when `head_request`. `Ok(None)`: incomplete, read more. On
/// success the head is split off `buf`, which then starts with the body.
pub(crate) fn parse_response_head(
    buf: &mut BytesMut,
    limits: &Limits,
    head_request: bool,
) -> Result<Option<ResponseHead>, Error> {
    let slots = limits.max_headers;
    let parsed = if slots <= STACK_FIELDS {
        let mut fields = [httparse::EMPTY_HEADER; STACK_FIELDS];
        parse_with(buf, limits, head_request, &mut fields[..slots])?
    } else {
        let mut fields = vec![httparse::EMPTY_HEADER; slots];
        parse_with(buf, limits, head_request, &mut fields)?
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
    head_request: bool,
    fields: &mut [httparse::Header<'b>],
) -> Result<Option<(usize, ResponseHead)>, Error> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let mut resp = httparse::Response::new(fields);
    let len = match resp.parse(window) {
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
        Err(httparse::Error::Status) => return Err(Error::BadResponse("invalid status code")),
        Err(httparse::Error::HeaderName) => return Err(Error::BadResponse("invalid header name")),
        Err(httparse::Error::HeaderValue) => {
            return Err(Error::BadResponse("invalid header value"))
        }
        Err(_) => return Err(Error::BadResponse("invalid line")),
    };
    let (Some(minor), Some(status)) = (resp.version, resp.code) else {
        return Err(Error::BadResponse("incomplete status line"));
    };
    // What `http::StatusCode` takes: three digits, not starting with 0.
    if !(100..1000).contains(&status) {
        return Err(Error::BadResponse("invalid status code"));
    }
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    // Offsets into `buf`; httparse may give a static "" (a reason phrase
    // it did not take), which is no slice of `buf` and becomes empty.
    let base = buf.as_ptr() as usize;
    let range = |s: &[u8]| {
        let start = (s.as_ptr() as usize).wrapping_sub(base);
        if s.is_empty() || start >= len || start + s.len() > len {
            return 0..0;
        }
        start as u32..(start + s.len()) as u32
    };
    // RFC 9112 §6.3 items 1 and 2: these have no body whatever the fields
    // say, so their framing fields (a HEAD's or 304's length is that of
    // the body GET would have had) are not even checked.
    let bodyless = head_request || (100..200).contains(&status) || status == 204 || status == 304;
    let mut framing = Framing::default();
    let mut close = false;
    let mut keep_alive_token = false;
    let mut ranges = Vec::with_capacity(resp.headers.len());
    for f in resp.headers.iter() {
        let name = f.name.as_bytes();
        let value = trim(f.value);
        ranges.push((range(name), range(value)));
        if name.eq_ignore_ascii_case(b"connection") {
            for token in list(value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if !bodyless && name.eq_ignore_ascii_case(b"content-length") {
            // Invalid, or different values: item 5, unrecoverable.
            framing.content_length(value)?;
        } else if !bodyless && name.eq_ignore_ascii_case(b"transfer-encoding") {
            framing.transfer_encoding(value)?;
        }
    }
    let mut keep_alive = !close && (version == Version::Http11 || keep_alive_token);
    let framing = if bodyless {
        ResponseFraming::NoBody
    } else if framing.codings > 0 {
        if framing.chunked_twice {
            return Err(Error::BadFraming("chunked applied twice"));
        }
        // Item 3 lets Transfer-Encoding override Content-Length, but a
        // response with both may be an attempt at smuggling or splitting:
        // refused, as Envoy 1.40 refuses it (502). An HTTP/1.0 one cannot
        // have meant it (§6.1): its framing is taken once, then the
        // connection closes.
        if framing.length.is_some() {
            return Err(Error::BadFraming(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        if version == Version::Http10 {
            keep_alive = false;
        }
        // Item 4: no final chunked, the body runs to the close. Other
        // codings stay applied to the data (the fields say which).
        if framing.chunked_last {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::UntilClose
        }
    } else {
        // Items 6 and 8.
        framing
            .length
            .map_or(ResponseFraming::UntilClose, ResponseFraming::Length)
    };
    keep_alive &= framing.allows_keep_alive();
    Ok(Some((
        len,
        ResponseHead {
            raw: Bytes::new(),
            reason: resp.reason.map_or(0..0, |r| range(r.as_bytes())),
            fields: ranges,
            version,
            status,
            framing,
            keep_alive,
        },
    )))
}

/// Decodes body pieces from `buf` into `events`, giving out at most `room`
/// bytes; true once the body ended (its last event queued). A piece is
/// held back one turn so that a body ending right after it ends with it,
/// not with an empty piece of its own.
pub(super) fn decode_body(
    decoder: &mut BodyDecoder,
    buf: &mut BytesMut,
    limits: &Limits,
    mut room: usize,
    unreleased: &mut u64,
    events: &mut VecDeque<ClientEvent>,
) -> Result<bool, Error> {
    let mut held: Option<Bytes> = None;
    let mut trailers = false;
    let flush = |held: &mut Option<Bytes>, events: &mut VecDeque<ClientEvent>| {
        if let Some(data) = held.take() {
            events.push_back(ClientEvent::Data {
                data,
                end_stream: false,
            });
        }
    };
    loop {
        match decoder.decode_max(buf, limits, room) {
            Err(e) => {
                flush(&mut held, events);
                return Err(e);
            }
            Ok(None) => {
                flush(&mut held, events);
                return Ok(false);
            }
            Ok(Some(BodyEvent::Data(data))) => {
                flush(&mut held, events);
                room = room.saturating_sub(data.len());
                *unreleased += data.len() as u64;
                held = Some(data);
            }
            Ok(Some(BodyEvent::Trailers(raw))) => {
                // The decoder gives trailers once the section's empty line
                // is in `buf`: the end follows at once.
                flush(&mut held, events);
                events.push_back(ClientEvent::Trailers { raw });
                trailers = true;
            }
            Ok(Some(BodyEvent::End)) => {
                if !trailers {
                    events.push_back(ClientEvent::Data {
                        data: held.unwrap_or_default(),
                        end_stream: true,
                    });
                }
                return Ok(true);
            }
        }
    }
}
