//! Tests of the server connection against a small client made of our own frame encoders and HPACK.

mod client_errors;
mod client_flow;
mod client_peer;
mod client_requests;
mod errors;
mod flow;
mod handshake;
mod limits;
mod memory;
mod requests;

use bytes::{Bytes, BytesMut};

use super::{ConnError, Event, ServerConfig, ServerConn};
use crate::frame::{
    begin_headers, decode_frame, encode_data, encode_settings, encode_settings_ack, finish_headers,
    Frame, FrameHeader, Settings, CLIENT_PREFACE, MAX_MAX_FRAME_SIZE,
};
use crate::hpack::{Decoder, Encoder};
use crate::message::HeaderList;
use crate::ErrorCode;

/// A frame the server wrote, header blocks joined and decoded.
#[derive(Debug, PartialEq)]
enum Got {
    Headers {
        stream: u32,
        end_stream: bool,
        fields: Vec<(String, String)>,
    },
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    Other(Frame),
}

/// The client side of one connection, and the server under test.
struct Peer {
    conn: ServerConn,
    enc: Encoder,
    dec: Decoder,
    /// What the client wrote and the server has not read yet.
    wire: BytesMut,
    /// What the server wrote and the client has not parsed yet.
    inbox: BytesMut,
    block: OpenBlock,
}

impl Peer {
    fn new(cfg: ServerConfig) -> Self {
        Self {
            conn: ServerConn::new(cfg),
            enc: Encoder::new(),
            dec: Decoder::new(4096),
            wire: BytesMut::new(),
            inbox: BytesMut::new(),
            block: None,
        }
    }

    /// Preface, SETTINGS both ways and their ACKs done; output and events
    /// drained.
    fn connected(cfg: ServerConfig) -> Self {
        Self::with_settings(cfg, &Settings::default())
    }

    fn with_settings(cfg: ServerConfig, s: &Settings) -> Self {
        let mut p = Self::new(cfg);
        p.wire.extend_from_slice(CLIENT_PREFACE);
        encode_settings(&mut p.wire, s);
        encode_settings_ack(&mut p.wire);
        p.flush().expect("handshake");
        p.read();
        assert!(p.events().is_empty());
        p
    }

    fn flush(&mut self) -> Result<(), ConnError> {
        self.conn.recv(&mut self.wire)
    }

    fn settings(&mut self, s: &Settings) {
        encode_settings(&mut self.wire, s);
    }

    /// A header block split into frames of at most `max` bytes.
    fn headers_split(&mut self, stream: u32, fields: &[(&str, &str)], end: bool, max: u32) {
        encode_block(&mut self.wire, &mut self.enc, stream, fields, end, max);
    }

    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end: bool) {
        self.headers_split(stream, fields, end, 16_384);
    }

    fn get(&mut self, stream: u32) {
        self.headers(stream, &request("GET", "/"), true);
    }

    fn data(&mut self, stream: u32, payload: &[u8], end: bool) {
        encode_data(&mut self.wire, stream, payload, end);
    }

    fn raw(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        encode_raw(&mut self.wire, kind, flags, stream, payload);
    }

    /// Every frame the server wrote since the last call.
    fn read(&mut self) -> Vec<Got> {
        while let Some(chunk) = self.conn.poll_output() {
            self.inbox.extend_from_slice(&chunk);
        }
        assert!(!self.conn.has_output());
        parse_frames(&mut self.inbox, &mut self.dec, &mut self.block)
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.conn.poll_event()).collect()
    }
}

/// Any frame, as is: for frames our encoders would not write.
fn encode_raw(wire: &mut BytesMut, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    FrameHeader {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode(wire);
    wire.extend_from_slice(payload);
}

/// Header block being joined: stream, END_STREAM, bytes so far.
type OpenBlock = Option<(u32, bool, Vec<u8>)>;

/// Every whole frame in `inbox`, header blocks joined and decoded; the
/// frames must end on a frame boundary.
fn parse_frames(inbox: &mut BytesMut, dec: &mut Decoder, block: &mut OpenBlock) -> Vec<Got> {
    let mut got = Vec::new();
    while let Some(f) = decode_frame(inbox, MAX_MAX_FRAME_SIZE).expect("peer frame") {
        match f {
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                fragment,
                ..
            } => {
                assert!(block.is_none(), "interleaved header blocks");
                *block = Some((stream, end_stream, fragment.to_vec()));
                if end_headers {
                    got.push(decode_block(dec, block));
                }
            }
            Frame::Continuation {
                stream,
                end_headers,
                fragment,
            } => {
                let b = block.as_mut().expect("CONTINUATION without HEADERS");
                assert_eq!(b.0, stream);
                b.2.extend_from_slice(&fragment);
                if end_headers {
                    got.push(decode_block(dec, block));
                }
            }
            Frame::Data {
                stream,
                end_stream,
                payload,
                ..
            } => got.push(Got::Data {
                stream,
                data: payload,
                end_stream,
            }),
            f => got.push(Got::Other(f)),
        }
    }
    assert!(inbox.is_empty(), "partial frame from the peer");
    got
}

fn decode_block(dec: &mut Decoder, block: &mut OpenBlock) -> Got {
    let (stream, end_stream, block) = block.take().expect("a block");
    let mut fields = Vec::new();
    dec.decode(&block, usize::MAX, |f| {
        fields.push((lossy(f.name), lossy(f.value)));
    })
    .expect("peer header block decodes");
    Got::Headers {
        stream,
        end_stream,
        fields,
    }
}

/// Writes a header block on `stream` into `wire`, split into frames of at
/// most `max` bytes.
fn encode_block(
    wire: &mut BytesMut,
    enc: &mut Encoder,
    stream: u32,
    fields: &[(&str, &str)],
    end: bool,
    max: u32,
) {
    let mark = begin_headers(wire);
    enc.begin_block(wire);
    for (n, v) in fields {
        enc.encode_field(n.as_bytes(), v.as_bytes(), false, wire);
    }
    finish_headers(wire, mark, stream, end, max);
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn request<'a>(method: &'a str, path: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (":method", method),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", path),
    ]
}

fn fields(list: &HeaderList) -> Vec<(String, String)> {
    list.iter().map(|(n, v, _)| (lossy(n), lossy(v))).collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn rst(stream: u32, code: ErrorCode) -> Got {
    Got::Other(Frame::RstStream { stream, code })
}

fn window_update(stream: u32, increment: u32) -> Got {
    Got::Other(Frame::WindowUpdate { stream, increment })
}

/// The GOAWAY's last stream and code, if `got` ends with one.
fn goaway(got: &[Got]) -> Option<(u32, ErrorCode)> {
    match got.last() {
        Some(Got::Other(Frame::GoAway {
            last_stream, code, ..
        })) => Some((*last_stream, *code)),
        _ => None,
    }
}

#[track_caller]
fn assert_conn_error(r: Result<(), ConnError>, code: ErrorCode) {
    match r {
        Err(e) if e.code == code => {}
        other => panic!("expected connection error {code}, got {other:?}"),
    }
}

#[track_caller]
fn expect_request(e: Option<Event>) -> (u32, HeaderList, bool) {
    match e {
        Some(Event::Request {
            stream,
            head,
            end_stream,
        }) => (stream, head, end_stream),
        other => panic!("expected a request, got {other:?}"),
    }
}

#[track_caller]
fn expect_reset(e: Option<Event>, stream: u32, code: ErrorCode) {
    match e {
        Some(Event::Reset { stream: s, code: c }) if s == stream && c == code => {}
        other => panic!("expected reset of {stream} with {code}, got {other:?}"),
    }
}

#[track_caller]
fn expect_data(e: Option<Event>, stream: u32, len: usize, end: bool) -> Bytes {
    match e {
        Some(Event::Data {
            stream: s,
            data,
            end_stream,
        }) if s == stream && data.len() == len && end_stream == end => data,
        other => panic!("expected {len} bytes of DATA on {stream} (end {end}), got {other:?}"),
    }
}
