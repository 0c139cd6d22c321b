//! [`ServerConn`]: its state, the receive loop (preface, then frames) and the connection-level frames.

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};

use super::config::{ServerConfig, DEFAULT_WINDOW};
use super::output::Output;
use super::shared::{apply_local_initial, apply_peer_initial, conn_err};
use super::streams::{ResetRing, StreamMap};
use super::{ConnError, Event};
use crate::frame::{
    self, decode_frame, encode_goaway, encode_ping, encode_settings, encode_settings_ack,
    encode_window_update, Frame, Settings, CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE,
};
use crate::header_block::{Assembled, HeaderBlockAssembler};
use crate::hpack::{Decoder, Encoder, DEFAULT_TABLE_SIZE};
use crate::message::HeaderList;
use crate::window::{RecvWindow, Window};
use crate::{ErrorCode, FrameError};

/// Header lists kept for reuse: enough for a burst of requests without
/// pinning much memory on an idle connection.
const LIST_POOL: usize = 2;
/// Event queue slots kept once it is empty.
const EVENTS_KEEP: usize = 16;

/// Where the receive side is in the connection's opening (§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preface,
    /// The preface arrived; the next frame must be SETTINGS.
    FirstSettings,
    Frames,
}

/// One server connection's protocol state. See the [module](super) docs.
#[derive(Debug)]
pub struct ServerConn {
    pub(super) cfg: ServerConfig,
    phase: Phase,
    /// Set once the connection failed; `recv` keeps returning it.
    dead: Option<ConnError>,
    pub(super) streams: StreamMap,
    pub(super) recently_reset: ResetRing,
    /// The highest stream id the client opened (or tried to).
    pub(super) highest: u32,
    /// The last stream of the GOAWAY we sent: later streams are ignored.
    pub(super) goaway_last: Option<u32>,
    pub(super) decoder: Decoder,
    pub(super) encoder: Encoder,
    pub(super) assembler: HeaderBlockAssembler,
    /// Our receive window for the whole connection.
    pub(super) conn_recv: RecvWindow,
    /// The peer's window for what we send on the connection.
    pub(super) conn_send: Window,
    /// SETTINGS_INITIAL_WINDOW_SIZE in force on each side: ours applies
    /// once the peer acknowledged it.
    pub(super) local_initial: u32,
    pub(super) peer_initial: u32,
    pub(super) peer_max_frame: u32,
    /// Our SETTINGS were acknowledged.
    settings_acked: bool,
    pub(super) events: VecDeque<Event>,
    pub(super) lists: Vec<HeaderList>,
    pub(super) out: Output,
}

impl ServerConn {
    /// A connection that has sent nothing yet: our SETTINGS (and the
    /// connection window's WINDOW_UPDATE) are queued at once, since §3.4
    /// lets a server send them without waiting for the client's preface.
    pub fn new(cfg: ServerConfig) -> Self {
        let cfg = cfg.clamped();
        let mut out = Output::default();
        let differs = |v: u32, default: u32| (v != default).then_some(v);
        let ours = Settings {
            header_table_size: differs(cfg.header_table_size, DEFAULT_TABLE_SIZE as u32),
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
            phase: Phase::Preface,
            dead: None,
            streams: StreamMap::new(),
            recently_reset: ResetRing::default(),
            highest: 0,
            goaway_last: None,
            // The peer's encoder starts at the protocol default; ours
            // applies once acknowledged.
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

    /// Consumes what it can from `buf` (the client preface first, then
    /// frames), leaving a partial frame in it, and queues events. After an
    /// error the driver writes out the output (it ends with GOAWAY) and
    /// closes the connection.
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), ConnError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        match self.recv_frames(buf) {
            Ok(()) => Ok(()),
            Err((code, reason)) => Err(self.fail(code, reason)),
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        if e.is_none() && self.events.capacity() > EVENTS_KEEP {
            self.events = VecDeque::new();
        }
        e
    }

    /// Gives a header list from an event back for the next request.
    pub fn recycle(&mut self, mut list: HeaderList) {
        if self.lists.len() < LIST_POOL {
            list.clear();
            self.lists.push(list);
        }
    }

    /// The next chunk to write to the socket, in order; `None` when
    /// nothing is pending. DATA payloads come as chunks of their own, the
    /// very `Bytes` given to `send_data`, for a vectored write.
    pub fn poll_output(&mut self) -> Option<bytes::Bytes> {
        self.out.poll()
    }

    pub fn has_output(&self) -> bool {
        self.out.has_output()
    }

    /// Streams open or half-closed: what counts against
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held by the connection's state (estimates for the maps).
    pub fn memory_bytes(&self) -> usize {
        self.streams.memory_bytes()
            + self.decoder.memory_bytes()
            + self.encoder.memory_bytes()
            + self.assembler.memory_bytes()
            + self.out.memory_bytes()
            + self.events.capacity() * std::mem::size_of::<Event>()
            + self.lists.capacity() * std::mem::size_of::<HeaderList>()
            + self
                .lists
                .iter()
                .map(HeaderList::memory_bytes)
                .sum::<usize>()
    }

    /// Gives back spare capacity (the output buffer, pooled header lists)
    /// that the connection otherwise keeps for its next burst: for the
    /// driver to call when the connection goes quiet.
    pub fn shrink(&mut self) {
        self.out.shrink();
        self.lists = Vec::new();
        self.events.shrink_to_fit();
    }

    pub(super) fn take_list(&mut self) -> HeaderList {
        self.lists.pop().unwrap_or_else(HeaderList::for_block)
    }

    /// Queues GOAWAY for a connection error and remembers the error.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) -> ConnError {
        let last = self
            .goaway_last
            .map_or(self.highest, |l| l.min(self.highest));
        encode_goaway(&mut self.out.buf, last, code, reason.as_bytes());
        let e = ConnError { code, reason };
        self.dead = Some(e.clone());
        e
    }

    fn recv_frames(&mut self, buf: &mut BytesMut) -> Result<(), (ErrorCode, &'static str)> {
        if self.phase == Phase::Preface {
            let n = buf.len().min(CLIENT_PREFACE.len());
            // Fail on the first wrong byte rather than wait for 24: an
            // HTTP/1 client may send less and wait for an answer.
            if buf[..n] != CLIENT_PREFACE[..n] {
                return Err((ErrorCode::PROTOCOL_ERROR, "invalid client preface"));
            }
            if n < CLIENT_PREFACE.len() {
                return Ok(());
            }
            buf.advance(n);
            self.phase = Phase::FirstSettings;
        }
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
            if self.phase == Phase::FirstSettings {
                if !matches!(frame, Frame::Settings(_)) {
                    return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
                }
                self.phase = Phase::Frames;
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
        if self.phase != Phase::Frames {
            return Err(conn_err(e));
        }
        self.assembler.check_interleave().map_err(conn_err)?;
        match e {
            // A HEADERS frame's block was lost with it, and the HPACK
            // tables with it: the connection cannot go on.
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

    /// One well-formed frame. Stream errors are handled inside; what comes
    /// out is a connection error.
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
            // Deprecated (§5.3.2); a proxy has no use for it.
            Frame::Priority { .. } | Frame::Unknown { .. } => Ok(()),
            Frame::RstStream { stream, code } => self.on_reset(stream, code),
            Frame::Settings(s) => self.on_settings(&s),
            Frame::SettingsAck => {
                self.on_settings_ack();
                Ok(())
            }
            Frame::PushPromise { .. } => Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "PUSH_PROMISE from a client",
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
                self.events.push_back(Event::GoAway { last_stream, code });
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
                events.push_back(Event::WindowOpen { stream });
            })?;
        }
        encode_settings_ack(&mut self.out.buf);
        Ok(())
    }

    /// The peer now uses our SETTINGS: apply what we held back until then.
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

    /// A stream broke a stream-level rule: reset it, forget it, and tell
    /// the application if it knew the stream.
    pub(super) fn stream_error(&mut self, stream: u32, code: ErrorCode) {
        // An idle stream has nothing to reset, and RST_STREAM on it would
        // be the peer's connection error (§6.4).
        if stream > self.highest {
            return;
        }
        frame::encode_rst_stream(&mut self.out.buf, stream, code);
        self.recently_reset.push(stream);
        if self.streams.remove(stream).is_some() {
            self.events.push_back(Event::Reset { stream, code });
        }
    }
}
