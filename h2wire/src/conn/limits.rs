//! Envoy's HTTP/2 abuse limits on a server connection: the flood limits (frames queued out, PRIORITY, WINDOW_UPDATE and empty frames in) and what the connection counts for the application.

use super::dispatch::ConnResult;
use super::server::ServerConn;
use super::ConnError;
use crate::frame::Frame;
use crate::ErrorCode;

/// Which flood limit ended a connection ([`ServerConn::flood`]); the
/// names are Envoy's `http2.*` counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// `outbound_flood`: more than `max_outbound_frames` frames not written.
    OutboundFrames,
    /// `outbound_control_flood`: more than `max_outbound_control_frames`
    /// control frames not written.
    OutboundControlFrames,
    /// `inbound_empty_frames_flood`.
    InboundEmptyFrames,
    /// `inbound_priority_frames_flood`.
    InboundPriorityFrames,
    /// `inbound_window_update_frames_flood`.
    InboundWindowUpdateFrames,
}

impl Flood {
    /// The GOAWAY debug text (inbound floods) or the error's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::OutboundFrames => "too many frames in the outbound queue",
            Self::OutboundControlFrames => "too many control frames in the outbound queue",
            Self::InboundEmptyFrames => "too many consecutive frames with an empty payload",
            Self::InboundPriorityFrames => "too many PRIORITY frames",
            Self::InboundWindowUpdateFrames => "too many WINDOW_UPDATE frames",
        }
    }

    /// An outbound flood: the peer reads nothing, so nothing more is worth
    /// writing (the driver closes without flushing, as Envoy does).
    pub fn is_outbound(self) -> bool {
        matches!(self, Self::OutboundFrames | Self::OutboundControlFrames)
    }
}

/// Requests the connection refused or trimmed on its own, without an
/// event for the application, since the last
/// [`ServerConn::take_counts`]. Named after Envoy's `http2.*` counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ServerCounts {
    /// `header_overflow`: header sections over `max_header_list_size`
    /// (answered 431) or `max_headers_count` (reset).
    pub header_overflow: u32,
    /// `requests_rejected_with_underscores_in_headers`.
    pub rejected_with_underscores: u32,
    /// `dropped_headers_with_underscores`: fields, not requests.
    pub dropped_headers_with_underscores: u32,
}

impl ServerCounts {
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// A received frame, as the inbound flood limits see it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Inbound {
    /// HEADERS, CONTINUATION or DATA; `empty`: no payload and no
    /// END_STREAM.
    Payload {
        empty: bool,
    },
    Priority,
    WindowUpdate,
}

impl Inbound {
    pub fn of(frame: &Frame) -> Option<Self> {
        Some(match frame {
            Frame::Data {
                payload,
                end_stream,
                ..
            } => Self::Payload {
                empty: payload.is_empty() && !end_stream,
            },
            Frame::Headers {
                fragment,
                end_stream,
                ..
            } => Self::Payload {
                empty: fragment.is_empty() && !end_stream,
            },
            Frame::Continuation { fragment, .. } => Self::Payload {
                empty: fragment.is_empty(),
            },
            Frame::Priority { .. } => Self::Priority,
            Frame::WindowUpdate { .. } => Self::WindowUpdate,
            _ => return None,
        })
    }
}

/// What the inbound limits count over a connection's life.
#[derive(Debug, Default)]
pub(super) struct InboundCounts {
    /// Streams the client opened (HEADERS on a new stream id, refused or
    /// not).
    pub opened: u64,
    priority: u64,
    window_updates: u64,
    consecutive_empty: u32,
}

impl ServerConn {
    /// Counts a received frame against the inbound flood limits (Envoy's
    /// `ProtocolConstraints::checkInboundFrameLimits`).
    pub(super) fn track(&mut self, what: Inbound) -> ConnResult {
        let lim = &self.cfg.flood;
        let c = &mut self.inbound;
        let flood = match what {
            Inbound::Payload { empty } => {
                let Some(max) = lim.max_consecutive_inbound_frames_with_empty_payload else {
                    return Ok(());
                };
                if !empty {
                    c.consecutive_empty = 0;
                    return Ok(());
                }
                c.consecutive_empty = c.consecutive_empty.saturating_add(1);
                if c.consecutive_empty <= max {
                    return Ok(());
                }
                Flood::InboundEmptyFrames
            }
            Inbound::Priority => {
                let Some(max) = lim.max_inbound_priority_frames_per_stream else {
                    return Ok(());
                };
                c.priority += 1;
                if c.priority <= u64::from(max).saturating_mul(1 + c.opened) {
                    return Ok(());
                }
                Flood::InboundPriorityFrames
            }
            Inbound::WindowUpdate => {
                let Some(max) = lim.max_inbound_window_update_frames_per_data_frame_sent else {
                    return Ok(());
                };
                c.window_updates += 1;
                let per_data = u64::from(max).saturating_mul(self.core.data_frames_sent);
                let allowed = c.opened.saturating_add(per_data).saturating_mul(2);
                if c.window_updates <= allowed.saturating_add(5) {
                    return Ok(());
                }
                Flood::InboundWindowUpdateFrames
            }
        };
        self.flood = Some(flood);
        Err((ErrorCode::ENHANCE_YOUR_CALM, flood.reason()))
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
        let lim = &self.cfg.flood;
        let flood = if lim.max_outbound_frames.is_some_and(|m| ledger.frames > m) {
            Flood::OutboundFrames
        } else if lim
            .max_outbound_control_frames
            .is_some_and(|m| ledger.control > m)
        {
            Flood::OutboundControlFrames
        } else {
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
        self.core.out.ledger.as_ref().map(|l| (l.frames, l.control))
    }

    /// What the connection refused or dropped by itself since the last
    /// call (see [`ServerCounts`]).
    pub fn take_counts(&mut self) -> ServerCounts {
        std::mem::take(&mut self.counts)
    }
}
