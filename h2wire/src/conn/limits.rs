//! Envoy's HTTP/2 abuse limits on a server connection: the flood limits (frames queued out, PRIORITY, WINDOW_UPDATE and empty frames in) and what the connection counts for the application.

use super::config::FloodLimits;
use crate::frame::Frame;

/// Which flood limit ended a connection ([`ServerConn::flood`](super::ServerConn::flood)); the
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
/// [`ServerConn::take_counts`](super::ServerConn::take_counts). Named after Envoy's `http2.*` counters.
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

impl InboundCounts {
    /// Counts a received frame against the inbound flood limits (Envoy's
    /// `ProtocolConstraints::checkInboundFrameLimits`): the limit it
    /// passed, if it did. `data_frames_sent`: DATA frames the connection
    /// sent so far (the WINDOW_UPDATE allowance grows with them).
    pub fn count(
        &mut self,
        what: Inbound,
        lim: &FloodLimits,
        data_frames_sent: u64,
    ) -> Option<Flood> {
        let c = self;
        let flood = match what {
            Inbound::Payload { empty } => {
                let max = lim.max_consecutive_inbound_frames_with_empty_payload?;
                if !empty {
                    c.consecutive_empty = 0;
                    return None;
                }
                c.consecutive_empty = c.consecutive_empty.saturating_add(1);
                if c.consecutive_empty <= max {
                    return None;
                }
                Flood::InboundEmptyFrames
            }
            Inbound::Priority => {
                let max = lim.max_inbound_priority_frames_per_stream?;
                c.priority += 1;
                if c.priority <= u64::from(max).saturating_mul(1 + c.opened) {
                    return None;
                }
                Flood::InboundPriorityFrames
            }
            Inbound::WindowUpdate => {
                let max = lim.max_inbound_window_update_frames_per_data_frame_sent?;
                c.window_updates += 1;
                let per_data = u64::from(max).saturating_mul(data_frames_sent);
                let allowed = c.opened.saturating_add(per_data).saturating_mul(2);
                if c.window_updates <= allowed.saturating_add(5) {
                    return None;
                }
                Flood::InboundWindowUpdateFrames
            }
        };
        Some(flood)
    }
}

/// The outbound limit `frames` unwritten frames, `control` of them control
/// frames, pass, if any.
pub(super) fn outbound_flood(lim: &FloodLimits, frames: u32, control: u32) -> Option<Flood> {
    if lim.max_outbound_frames.is_some_and(|m| frames > m) {
        Some(Flood::OutboundFrames)
    } else if lim.max_outbound_control_frames.is_some_and(|m| control > m) {
        Some(Flood::OutboundControlFrames)
    } else {
        None
    }
}
