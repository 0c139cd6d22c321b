//! [`ClientConn`]: its state, the receive loop (the server's SETTINGS first, then frames) and the connection-level frames.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::config::{ClientConfig, DEFAULT_WINDOW};
use super::output::Output;
use super::shared::{apply_local_initial, apply_peer_initial, conn_err};
use super::streams::StreamMap;
use super::{ClientEvent, ConnError};
use crate::frame::{
    self, decode_frame, encode_goaway, encode_ping, encode_settings, encode_settings_ack,
    encode_window_update, Frame, Settings, CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE,
};
use crate::header_block::{Assembled, HeaderBlockAssembler};
use crate::hpack::{Decoder, Encoder, DEFAULT_TABLE_SIZE};
use crate::message::HeaderList;
use crate::window::{RecvWindow, Window};
use crate::{ErrorCode, FrameError};

/// Header lists kept for reuse, as on the server side.
const LIST_POOL: usize = 2;
/// Event queue slots kept once it is empty.
const EVENTS_KEEP: usize = 16;
/// The stream limit assumed until the server's SETTINGS arrive: the RFC's
/// initial value is "unlimited", but a server that announces a limit would
/// refuse the streams above it that crossed its SETTINGS; 100 is the least
/// RFC 9113 §6.5.2 recommends servers allow, and what h2 assumes. A first
/// SETTINGS without the parameter lifts it (the RFC's "no limit").
pub(super) const INITIAL_STREAM_LIMIT: u32 = 100;
/// The largest stream id (§5.1.1).
pub(super) const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// One client connection's protocol state. See the [module](super) docs.
#[derive(Debug)]
pub struct ClientConn {
    pub(super) cfg: ClientConfig,
    /// The server's first SETTINGS came (§3.4: it must be its first frame).
    got_settings: bool,
    /// Set once the connection failed; `recv` keeps returning it.
    pub(super) dead: Option<ConnError>,
    pub(super) streams: StreamMap,
    /// The id the next request gets; past [`MAX_STREAM_ID`]: none left.
    pub(super) next_id: u32,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS.
    pub(super) peer_max_streams: u32,
    /// A GOAWAY was received or sent: no new streams.
    pub(super) going_away: bool,
    pub(super) decoder: Decoder,
    pub(super) encoder: Encoder,
    pub(super) assembler: HeaderBlockAssembler,
    pub(super) conn_recv: RecvWindow,
    pub(super) conn_send: Window,
    pub(super) local_initial: u32,
    pub(super) peer_initial: u32,
    pub(super) peer_max_frame: u32,
    settings_acked: bool,
    pub(super) events: VecDeque<ClientEvent>,
    pub(super) lists: Vec<HeaderList>,
    pub(super) out: Output,
}

impl ClientConn {
    /// A connection with the client preface, our SETTINGS (push disabled)
    /// and the connection window's WINDOW_UPDATE queued: §3.4 has the
    /// client speak first, and requests may follow at once.
    pub fn new(cfg: ClientConfig) -> Self {
        let cfg = cfg.clamped();
        let mut out = Output::default();
        out.buf.extend_from_slice(CLIENT_PREFACE);
        let differs = |v: u32, default: u32| (v != default).then_some(v);
        let ours = Settings {
            header_table_size: differs(cfg.header_table_size, DEFAULT_TABLE_SIZE as u32),
            enable_push: Some(false),
            // §6.5.2: the limit on pushed streams, moot with push off;
            // 0 is announced anyway so that no server tries.
            max_concurrent_streams: Some(cfg.max_concurrent_streams),
            initial_window_size: differs(cfg.initial_stream_window, DEFAULT_WINDOW),
            max_frame_size: differs(cfg.max_frame_size, DEFAULT_MAX_FRAME_SIZE),
            max_header_list_size: Some(cfg.max_header_list_size),
            ..Settings::default()
        };
        encode_settings(&mut out.buf, &ours);
        if cfg.connection_window > DEFAULT_WINDOW {
            encode_window_update(&mut out.buf, 0, cfg.connection_window - DEFAULT_WINDOW);
        }
        Self {
            got_settings: false,
            dead: None,
            streams: StreamMap::new(),
            next_id: 1,
            peer_max_streams: INITIAL_STREAM_LIMIT,
            going_away: false,
            decoder: Decoder::new(DEFAULT_TABLE_SIZE),
            encoder: Encoder::new(),
            assembler: HeaderBlockAssembler::new(cfg.max_header_block(), cfg.max_continuations),
            conn_recv: RecvWindow::new(cfg.connection_window),
            conn_send: Window::new(DEFAULT_WINDOW),
            local_initial: DEFAULT_WINDOW,
            peer_initial: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            settings_acked: false,
            events: VecDeque::new(),
            lists: Vec::new(),
            out,
            cfg,
        }
    }

    /// Consumes the frames in `buf`, leaving a partial one, and queues
    /// events. After an error the driver writes out the output (it ends
    /// with GOAWAY) and closes the connection.
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), ConnError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        match self.recv_frames(buf) {
            Ok(()) => Ok(()),
            Err((code, reason)) => Err(self.fail(code, reason)),
        }
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        let e = self.events.pop_front();
        if e.is_none() && self.events.capacity() > EVENTS_KEEP {
            self.events = VecDeque::new();
        }
        e
    }

    /// Gives a header list from an event back for the next response.
    pub fn recycle(&mut self, mut list: HeaderList) {
        if self.lists.len() < LIST_POOL {
            list.clear();
            self.lists.push(list);
        }
    }

    /// The next chunk to write, in order; DATA payloads come as the very
    /// `Bytes` given to `send_data`.
    pub fn poll_output(&mut self) -> Option<Bytes> {
        self.out.poll()
    }

    pub fn has_output(&self) -> bool {
        self.out.has_output()
    }

    /// Streams open or half-closed: what counts against the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether [`send_request`](Self::send_request) would open a stream:
    /// under the server's limit, no GOAWAY, stream ids left.
    pub fn can_open_stream(&self) -> bool {
        self.open_check().is_ok()
    }

    /// Heap bytes held by the connection's state (estimates for the maps).
    pub fn memory_bytes(&self) -> usize {
        self.streams.memory_bytes()
            + self.decoder.memory_bytes()
            + self.encoder.memory_bytes()
            + self.assembler.memory_bytes()
            + self.out.memory_bytes()
            + self.events.capacity() * std::mem::size_of::<ClientEvent>()
            + self.lists.capacity() * std::mem::size_of::<HeaderList>()
            + self
                .lists
                .iter()
                .map(HeaderList::memory_bytes)
                .sum::<usize>()
    }

    /// Gives back spare capacity kept for the next burst: for the driver to
    /// call when the connection goes quiet.
    pub fn shrink(&mut self) {
        self.out.shrink();
        self.lists = Vec::new();
        self.events.shrink_to_fit();
    }

    pub(super) fn take_list(&mut self) -> HeaderList {
        self.lists.pop().unwrap_or_else(HeaderList::for_block)
    }

    /// The highest stream id we opened (0: none yet).
    pub(super) fn highest(&self) -> u32 {
        self.next_id.saturating_sub(2)
    }

    /// Whether `stream` is one the server may not use: even (push is off)
    /// or not opened by us yet. Frames on it are connection errors (§5.1).
    pub(super) fn never_opened(&self, stream: u32) -> bool {
        stream & 1 == 0 || stream > self.highest()
    }

    /// Queues GOAWAY for a connection error and remembers the error. The
    /// last stream is 0: we accept no streams from the server.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) -> ConnError {
        encode_goaway(&mut self.out.buf, 0, code, reason.as_bytes());
        self.going_away = true;
        let e = ConnError { code, reason };
        self.dead = Some(e.clone());
        e
    }

    fn recv_frames(&mut self, buf: &mut BytesMut) -> Result<(), (ErrorCode, &'static str)> {
        loop {
            let kind = buf.get(3).copied();
            let frame = match decode_frame(buf, self.cfg.max_frame_size) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.on_frame_error(e, kind)?;
                    continue;
                }
            };
            if !self.got_settings && !matches!(frame, Frame::Settings(_)) {
                return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
            }
            if !matches!(frame, Frame::Continuation { .. }) {
                self.assembler.check_interleave().map_err(conn_err)?;
            }
            self.on_frame(frame).map_err(conn_err)?;
        }
    }

    /// A frame that failed its own checks (it has been consumed).
    fn on_frame_error(
        &mut self,
        e: FrameError,
        kind: Option<u8>,
    ) -> Result<(), (ErrorCode, &'static str)> {
        if !self.got_settings {
            return Err(conn_err(e));
        }
        self.assembler.check_interleave().map_err(conn_err)?;
        match e {
            // The block is lost, and HPACK's step with it.
            FrameError::Stream { .. } if kind == Some(frame::kind::HEADERS) => Err((
                ErrorCode::PROTOCOL_ERROR,
                "invalid HEADERS frame (header block lost)",
            )),
            FrameError::Stream { stream, code, .. } => {
                self.stream_error(stream, code);
                Ok(())
            }
            e => Err(conn_err(e)),
        }
    }

    fn on_frame(&mut self, frame: Frame) -> Result<(), FrameError> {
        match frame {
            Frame::Data {
                stream,
                end_stream,
                payload,
                flow_len,
            } => self.on_data(stream, end_stream, payload, flow_len),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                fragment,
                ..
            } => {
                let r = self
                    .assembler
                    .headers(stream, end_stream, end_headers, fragment);
                self.on_assembled(r.map_err(|e| e.to_frame_error())?)
            }
            Frame::Continuation {
                stream,
                end_headers,
                fragment,
            } => {
                let r = self.assembler.continuation(stream, end_headers, fragment);
                self.on_assembled(r.map_err(|e| e.to_frame_error())?)
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => Ok(()),
            Frame::RstStream { stream, code } => self.on_reset(stream, code),
            Frame::Settings(s) => self.on_settings(&s),
            Frame::SettingsAck => {
                self.on_settings_ack();
                Ok(())
            }
            // §8.4: we sent ENABLE_PUSH = 0, so a push is a protocol error.
            Frame::PushPromise { .. } => Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "PUSH_PROMISE with push disabled",
            }),
            Frame::Ping { ack, payload } => {
                if !ack {
                    encode_ping(&mut self.out.buf, true, payload);
                }
                Ok(())
            }
            Frame::GoAway {
                last_stream, code, ..
            } => {
                self.on_goaway(last_stream, code);
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
        }
    }

    fn on_assembled(&mut self, a: Assembled) -> Result<(), FrameError> {
        match a {
            Assembled::Partial => Ok(()),
            Assembled::Complete {
                stream,
                end_stream,
                block,
            } => self.on_header_block(stream, end_stream, &block),
        }
    }

    fn on_settings(&mut self, s: &Settings) -> Result<(), FrameError> {
        // §6.5.2: "A client MUST treat the receipt of a SETTINGS_ENABLE_PUSH
        // setting with a value of 1 as a connection error"; 0 is fine.
        if s.enable_push == Some(true) {
            return Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "ENABLE_PUSH = 1 from a server",
            });
        }
        if let Some(n) = s.header_table_size {
            self.encoder.set_max_table_size(n as usize);
        }
        if let Some(n) = s.max_frame_size {
            self.peer_max_frame = n;
        }
        if let Some(new) = s.initial_window_size {
            let old = std::mem::replace(&mut self.peer_initial, new);
            let events = &mut self.events;
            apply_peer_initial(&mut self.streams, old, new, |stream| {
                events.push_back(ClientEvent::WindowOpen { stream });
            })?;
        }
        let first = !std::mem::replace(&mut self.got_settings, true);
        // The assumed limit holds until the first SETTINGS; without the
        // parameter there, the RFC's initial value applies: no limit.
        let limit = match s.max_concurrent_streams {
            Some(n) => Some(n),
            None if first => Some(u32::MAX),
            None => None,
        };
        if let Some(max) = limit {
            if std::mem::replace(&mut self.peer_max_streams, max) != max {
                self.events.push_back(ClientEvent::StreamLimit { max });
            }
        }
        encode_settings_ack(&mut self.out.buf);
        Ok(())
    }

    /// The server now uses our SETTINGS: apply what we held back until then.
    fn on_settings_ack(&mut self) {
        if std::mem::replace(&mut self.settings_acked, true) {
            return;
        }
        self.decoder
            .set_max_table_size(self.cfg.header_table_size as usize);
        let (old, new) = (self.local_initial, self.cfg.initial_stream_window);
        self.local_initial = new;
        apply_local_initial(&mut self.streams, old, new);
    }
}
