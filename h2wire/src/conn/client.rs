//! [`ClientConn`]: its state, our opening preface and SETTINGS, the events and output the driver polls, connection errors.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::config::ClientConfig;
use super::dispatch::Dispatch;
use super::errors::ConnError;
use super::events::ClientEvent;
use super::output::Output;
use super::shared::{pop_event, ConnCore};
use super::streams::StreamMap;
use crate::frame::{encode_goaway, CLIENT_PREFACE};
use crate::message::HeaderList;
use crate::ErrorCode;

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
    pub(super) got_settings: bool,
    /// Set once the connection failed; `recv` keeps returning it.
    pub(super) dead: Option<ConnError>,
    pub(super) streams: StreamMap,
    /// The id the next request gets; past [`MAX_STREAM_ID`]: none left.
    pub(super) next_id: u32,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS.
    pub(super) peer_max_streams: u32,
    /// The server's SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441), once its
    /// SETTINGS came.
    pub(super) peer_extended_connect: Option<bool>,
    /// A GOAWAY was received or sent: no new streams.
    pub(super) going_away: bool,
    pub(super) core: ConnCore,
    pub(super) events: VecDeque<ClientEvent>,
}

impl ClientConn {
    /// A connection with the client preface, our SETTINGS (push disabled)
    /// and the connection window's WINDOW_UPDATE queued: §3.4 has the
    /// client speak first, and requests may follow at once.
    pub fn new(cfg: ClientConfig) -> Self {
        let cfg = cfg.clamped();
        let mut out = Output::default();
        out.buf.extend_from_slice(CLIENT_PREFACE);
        let core = ConnCore::new(
            out,
            &cfg.settings(),
            cfg.connection_window,
            cfg.max_header_block(),
            cfg.max_continuations,
        );
        Self {
            got_settings: false,
            dead: None,
            streams: StreamMap::new(),
            next_id: 1,
            peer_max_streams: INITIAL_STREAM_LIMIT,
            peer_extended_connect: None,
            going_away: false,
            core,
            events: VecDeque::new(),
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
        pop_event(&mut self.events)
    }

    /// Gives a header list from an event back for the next response.
    pub fn recycle(&mut self, list: HeaderList) {
        self.core.recycle(list);
    }

    /// The next chunk to write, in order; DATA payloads come as the very
    /// `Bytes` given to `send_data`.
    pub fn poll_output(&mut self) -> Option<Bytes> {
        self.core.out.poll()
    }

    pub fn has_output(&self) -> bool {
        self.core.out.has_output()
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
            + self.core.memory_bytes()
            + self.events.capacity() * std::mem::size_of::<ClientEvent>()
    }

    /// Gives back spare capacity kept for the next burst: for the driver to
    /// call when the connection goes quiet.
    pub fn shrink(&mut self) {
        self.core.shrink();
        self.streams.shrink();
        self.events.shrink_to_fit();
    }

    pub(super) fn take_list(&mut self) -> HeaderList {
        self.core.take_list()
    }

    /// The highest stream id we opened (0: none yet).
    pub(super) fn highest(&self) -> u32 {
        self.next_id.saturating_sub(2)
    }

    /// Queues GOAWAY for a connection error and remembers the error. The
    /// last stream is 0: we accept no streams from the server.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) -> ConnError {
        encode_goaway(&mut self.core.out.buf, 0, code, reason.as_bytes());
        self.going_away = true;
        let e = ConnError { code, reason };
        self.dead = Some(e.clone());
        e
    }
}
