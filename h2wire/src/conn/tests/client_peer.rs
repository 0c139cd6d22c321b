//! A scripted server, made of our own frame encoders and HPACK, for the client connection's tests.

use bytes::{Bytes, BytesMut};

use super::{encode_block, encode_raw, parse_frames, Got, OpenBlock};
use crate::conn::{ClientConfig, ClientConn, ClientEvent, ConnError};
use crate::frame::{
    encode_data, encode_settings, encode_settings_ack, kind, Frame, Settings, CLIENT_PREFACE,
};
use crate::hpack::{Decoder, Encoder};
use crate::message::HeaderList;
use crate::ErrorCode;

/// The server side of one connection, and the client under test.
pub(super) struct Server {
    pub conn: ClientConn,
    enc: Encoder,
    dec: Decoder,
    /// What the server wrote and the client has not read yet.
    pub wire: BytesMut,
    /// What the client wrote and the server has not parsed yet.
    inbox: BytesMut,
    preface_seen: bool,
    block: OpenBlock,
}

impl Server {
    pub fn new(cfg: ClientConfig) -> Self {
        Self {
            conn: ClientConn::new(cfg),
            enc: Encoder::new(),
            dec: Decoder::new(4096),
            wire: BytesMut::new(),
            inbox: BytesMut::new(),
            preface_seen: false,
            block: None,
        }
    }

    /// Preface, SETTINGS both ways and their ACKs done (the server's
    /// SETTINGS being `s`); output and events drained.
    pub fn connected(cfg: ClientConfig, s: &Settings) -> Self {
        let mut p = Self::new(cfg);
        p.read();
        encode_settings(&mut p.wire, s);
        encode_settings_ack(&mut p.wire);
        p.flush().expect("handshake");
        assert_eq!(p.read(), [Got::Other(Frame::SettingsAck)]);
        p.events();
        p
    }

    /// Connected to a server announcing nothing but a stream limit of 100.
    pub fn plain() -> Self {
        Self::connected(
            ClientConfig::default(),
            &Settings {
                max_concurrent_streams: Some(100),
                ..Settings::default()
            },
        )
    }

    pub fn flush(&mut self) -> Result<(), ConnError> {
        self.conn.recv(&mut self.wire)
    }

    pub fn settings(&mut self, s: &Settings) {
        encode_settings(&mut self.wire, s);
    }

    pub fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end: bool) {
        self.headers_split(stream, fields, end, 16_384);
    }

    /// A header block split into frames of at most `max` bytes.
    pub fn headers_split(&mut self, stream: u32, fields: &[(&str, &str)], end: bool, max: u32) {
        encode_block(&mut self.wire, &mut self.enc, stream, fields, end, max);
    }

    pub fn data(&mut self, stream: u32, payload: &[u8], end: bool) {
        encode_data(&mut self.wire, stream, payload, end);
    }

    pub fn raw(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        encode_raw(&mut self.wire, kind, flags, stream, payload);
    }

    pub fn rst(&mut self, stream: u32, code: ErrorCode) {
        self.raw(kind::RST_STREAM, 0, stream, &code.0.to_be_bytes());
    }

    pub fn goaway(&mut self, last: u32, code: ErrorCode) {
        let mut p = last.to_be_bytes().to_vec();
        p.extend_from_slice(&code.0.to_be_bytes());
        self.raw(kind::GOAWAY, 0, 0, &p);
    }

    pub fn window_update(&mut self, stream: u32, inc: u32) {
        self.raw(kind::WINDOW_UPDATE, 0, stream, &inc.to_be_bytes());
    }

    pub fn ping(&mut self) {
        self.raw(kind::PING, 0, 0, b"12345678");
    }

    /// A GET with END_STREAM; its stream id.
    pub fn get(&mut self, path: &str) -> u32 {
        self.request("GET", path, true)
    }

    pub fn request(&mut self, method: &str, path: &str, end: bool) -> u32 {
        let accept: (&[u8], &[u8], bool) = (b"accept", b"*/*", false);
        self.conn
            .send_request(
                method.as_bytes(),
                b"https",
                b"example.com",
                path.as_bytes(),
                [accept],
                end,
            )
            .expect("stream opens")
    }

    /// Every frame the client wrote since the last call, the preface
    /// checked and stripped the first time.
    pub fn read(&mut self) -> Vec<Got> {
        while let Some(chunk) = self.conn.poll_output() {
            self.inbox.extend_from_slice(&chunk);
        }
        assert!(!self.conn.has_output());
        if !self.preface_seen {
            assert!(self.inbox.starts_with(CLIENT_PREFACE), "no client preface");
            let _ = self.inbox.split_to(CLIENT_PREFACE.len());
            self.preface_seen = true;
        }
        parse_frames(&mut self.inbox, &mut self.dec, &mut self.block)
    }

    pub fn events(&mut self) -> Vec<ClientEvent> {
        std::iter::from_fn(|| self.conn.poll_event()).collect()
    }
}

pub(super) fn status(code: &str) -> Vec<(&str, &str)> {
    vec![(":status", code)]
}

#[track_caller]
pub(super) fn expect_response(e: Option<ClientEvent>) -> (u32, HeaderList, bool, bool) {
    match e {
        Some(ClientEvent::Response {
            stream,
            head,
            informational,
            end_stream,
        }) => (stream, head, informational, end_stream),
        other => panic!("expected a response, got {other:?}"),
    }
}

#[track_caller]
pub(super) fn expect_reset(e: Option<ClientEvent>, stream: u32, code: ErrorCode) {
    match e {
        Some(ClientEvent::Reset { stream: s, code: c }) if s == stream && c == code => {}
        other => panic!("expected reset of {stream} with {code}, got {other:?}"),
    }
}

/// The stream was reset by us: the server broke a stream rule.
#[track_caller]
pub(super) fn expect_broken(e: Option<ClientEvent>, stream: u32, code: ErrorCode) {
    match e {
        Some(ClientEvent::Broken { stream: s, code: c }) if s == stream && c == code => {}
        other => panic!("expected {stream} broken with {code}, got {other:?}"),
    }
}

#[track_caller]
pub(super) fn expect_data(e: Option<ClientEvent>, stream: u32, len: usize, end: bool) -> Bytes {
    match e {
        Some(ClientEvent::Data {
            stream: s,
            data,
            end_stream,
        }) if s == stream && data.len() == len && end_stream == end => data,
        other => panic!("expected {len} bytes of DATA on {stream} (end {end}), got {other:?}"),
    }
}
