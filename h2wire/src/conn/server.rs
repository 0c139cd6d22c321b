//! [`ServerConn`]: its state, our opening SETTINGS, the events and output the driver polls, connection errors.

use std::collections::VecDeque;

use bytes::BytesMut;

use super::config::ServerConfig;
use super::dispatch::{ConnResult, Dispatch};
use super::errors::ConnError;
use super::events::Event;
use super::limits::{outbound_flood, Flood, Inbound, InboundCounts, ServerCounts};
use super::output::Output;
use super::shared::{pop_event, ConnCore};
use super::streams::{ResetRing, StreamMap};
use crate::frame::encode_goaway;
use crate::message::HeaderList;
use crate::ErrorCode;

/// Where the receive side is in the connection's opening (§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Preface,
    /// The preface arrived; the next frame must be SETTINGS.
    FirstSettings,
    Frames,
}

/// One server connection's protocol state. See the [module](super) docs.
#[derive(Debug)]
pub struct ServerConn {
    pub(super) cfg: ServerConfig,
    pub(super) phase: Phase,
    /// Set once the connection failed; `recv` keeps returning it.
    pub(super) dead: Option<ConnError>,
    pub(super) streams: StreamMap,
    pub(super) recently_reset: ResetRing,
    /// The highest stream id the client opened (or tried to).
    pub(super) highest: u32,
    /// The last stream of the GOAWAY we sent: later streams are ignored.
    pub(super) goaway_last: Option<u32>,
    pub(super) core: ConnCore,
    pub(super) events: VecDeque<Event>,
    /// What the inbound flood limits count.
    pub(super) inbound: InboundCounts,
    /// The flood limit that ended the connection.
    pub(super) flood: Option<Flood>,
    /// Refusals and drops for the application to count.
    pub(super) counts: ServerCounts,
}

impl ServerConn {
    /// A connection that has sent nothing yet: our SETTINGS (and the
    /// connection window's WINDOW_UPDATE) are queued at once, since §3.4
    /// lets a server send them without waiting for the client's preface.
    pub fn new(cfg: ServerConfig) -> Self {
        let cfg = cfg.clamped();
        let out = if cfg.flood.outbound() {
            Output::counted()
        } else {
            Output::default()
        };
        let core = ConnCore::new(
            out,
            &cfg.settings(),
            cfg.connection_window,
            cfg.max_header_block(),
            cfg.max_continuations,
        );
        Self {
            phase: Phase::Preface,
            dead: None,
            streams: StreamMap::new(),
            recently_reset: ResetRing::default(),
            highest: 0,
            goaway_last: None,
            core,
            events: VecDeque::new(),
            inbound: InboundCounts::default(),
            flood: None,
            counts: ServerCounts::default(),
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
        pop_event(&mut self.events)
    }

    /// Gives a header list from an event back for the next request.
    pub fn recycle(&mut self, list: HeaderList) {
        self.core.recycle(list);
    }

    /// The next chunk to write to the socket, in order; `None` when
    /// nothing is pending. DATA payloads come as chunks of their own, the
    /// very `Bytes` given to `send_data`, for a vectored write.
    pub fn poll_output(&mut self) -> Option<bytes::Bytes> {
        self.core.out.poll()
    }

    pub fn has_output(&self) -> bool {
        self.core.out.has_output()
    }

    /// Streams open or half-closed: what counts against
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held by the connection's state (estimates for the maps).
    pub fn memory_bytes(&self) -> usize {
        self.streams.memory_bytes()
            + self.core.memory_bytes()
            + self.events.capacity() * std::mem::size_of::<Event>()
    }

    /// Gives back spare capacity that the connection otherwise keeps for
    /// its next burst (the output buffer, the stream map and the event
    /// queue beyond their smallest): for the driver to call when the
    /// connection goes quiet. Header lists are pooled per thread, not per
    /// connection ([`HeaderList::pooled`](crate::message::HeaderList::pooled)).
    pub fn shrink(&mut self) {
        self.core.shrink();
        self.streams.shrink();
        self.events.shrink_to_fit();
    }

    pub(super) fn take_list(&mut self) -> HeaderList {
        self.core.take_list()
    }

    /// Queues GOAWAY for a connection error and remembers the error.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) -> ConnError {
        let last = self
            .goaway_last
            .map_or(self.highest, |l| l.min(self.highest));
        encode_goaway(&mut self.core.out.buf, last, code, reason.as_bytes());
        let e = ConnError { code, reason };
        self.dead = Some(e.clone());
        e
    }
}

/// The flood limits (`conn/limits.rs`) as the connection applies them.
impl ServerConn {
    /// Counts a received frame against the inbound flood limits; past one
    /// the connection ends with ENHANCE_YOUR_CALM.
    pub(super) fn track(&mut self, what: Inbound) -> ConnResult {
        let sent = self.core.data_frames_sent;
        match self.inbound.count(what, &self.cfg.flood, sent) {
            None => Ok(()),
            Some(flood) => {
                self.flood = Some(flood);
                Err((ErrorCode::ENHANCE_YOUR_CALM, flood.reason()))
            }
        }
    }

    /// Which flood limit ended the connection, if one did.
    pub fn flood(&self) -> Option<Flood> {
        self.flood
    }

    /// Checks the outbound flood limits, after the driver took everything
    /// [`poll_output`](Self::poll_output) had: `unwritten` is how many of
    /// the bytes handed out so far the driver still holds (not yet
    /// written to the socket). A frame counts until all of its chunk is
    /// written. `Err`: the connection is over; close the socket without
    /// writing what is left (the peer is not reading it). Without outbound
    /// limits configured this does nothing.
    pub fn check_outbound(&mut self, unwritten: usize) -> Result<(), Flood> {
        let Some(ledger) = &mut self.core.out.ledger else {
            return Ok(());
        };
        ledger.written(unwritten);
        if let Some(f) = self.flood.filter(|f| f.is_outbound()) {
            return Err(f);
        }
        let Some(flood) = outbound_flood(&self.cfg.flood, ledger.frames(), ledger.control) else {
            return Ok(());
        };
        self.flood = Some(flood);
        self.dead = Some(ConnError {
            code: ErrorCode::ENHANCE_YOUR_CALM,
            reason: flood.reason(),
        });
        Err(flood)
    }

    /// Frames handed out or queued and not yet reported written, and the
    /// control frames among them; `None` without outbound limits.
    pub fn outbound_frames(&self) -> Option<(u32, u32)> {
        self.core
            .out
            .ledger
            .as_ref()
            .map(|l| (l.frames(), l.control))
    }

    /// What the connection refused or dropped by itself since the last
    /// call (see [`ServerCounts`]).
    pub fn take_counts(&mut self) -> ServerCounts {
        std::mem::take(&mut self.counts)
    }
}
