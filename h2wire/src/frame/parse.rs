//! One received frame's payload checked against §6 and turned into a [`Frame`].

use bytes::{Buf, Bytes};

use super::consts::{flags, kind, R_BIT};
use super::head::FrameHeader;
use super::rules::{bad_size, on_connection, on_stream};
use super::settings::{self, Settings};
use crate::{ErrorCode, FrameError};

/// A stream dependency (§5.3, deprecated by RFC 9113 but still parsed: a
/// peer may send it, and depending on itself is still an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    /// As on the wire: the weight minus one (0..=255 for 1..=256).
    pub weight: u8,
}

impl Priority {
    fn parse(b: &[u8; 5]) -> Self {
        let [d0, d1, d2, d3, weight] = *b;
        let dep = u32::from_be_bytes([d0, d1, d2, d3]);
        Self {
            dependency: dep & !R_BIT,
            exclusive: dep & R_BIT != 0,
            weight,
        }
    }
}

/// A received frame, its padding stripped. Byte fields are slices of the
/// payload handed to [`Frame::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream: u32,
        end_stream: bool,
        payload: Bytes,
        /// The whole frame payload, pad length and padding included: what
        /// flow control counts (§6.9), which `payload.len()` would not.
        flow_len: u32,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        fragment: Bytes,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: ErrorCode,
    },
    Settings(Settings),
    SettingsAck,
    PushPromise {
        stream: u32,
        promised: u32,
        end_headers: bool,
        fragment: Bytes,
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: ErrorCode,
        debug: Bytes,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        fragment: Bytes,
    },
    /// An extension frame type: §5.5 says to ignore it. It is returned
    /// rather than skipped so the connection layer can still check that it
    /// does not land inside a header block (§6.10).
    Unknown {
        kind: u8,
        stream: u32,
    },
}

impl Frame {
    /// Parses the payload of a frame whose header is `head`; `payload` must
    /// be exactly `head.len` bytes. Unknown flags are ignored (§4.1).
    pub fn parse(head: FrameHeader, payload: Bytes) -> Result<Frame, FrameError> {
        debug_assert_eq!(head.len as usize, payload.len());
        match head.kind {
            kind::DATA => parse_data(head, payload),
            kind::HEADERS => parse_headers(head, payload),
            kind::PRIORITY => parse_priority(head, &payload),
            kind::RST_STREAM => parse_rst_stream(head, &payload),
            kind::SETTINGS => Ok(match settings::parse(head, &payload)? {
                Some(s) => Frame::Settings(s),
                None => Frame::SettingsAck,
            }),
            kind::PUSH_PROMISE => parse_push_promise(head, payload),
            kind::PING => parse_ping(head, &payload),
            kind::GOAWAY => parse_goaway(head, payload),
            kind::WINDOW_UPDATE => parse_window_update(head, &payload),
            kind::CONTINUATION => {
                on_stream(head, "CONTINUATION on stream 0")?;
                Ok(Frame::Continuation {
                    stream: head.stream,
                    end_headers: has(head, flags::END_HEADERS),
                    fragment: payload,
                })
            }
            kind => Ok(Frame::Unknown {
                kind,
                stream: head.stream,
            }),
        }
    }
}

fn parse_data(head: FrameHeader, mut payload: Bytes) -> Result<Frame, FrameError> {
    on_stream(head, "DATA on stream 0")?;
    let pad = take_pad_len(head, &mut payload)?;
    strip_padding(&mut payload, pad)?;
    Ok(Frame::Data {
        stream: head.stream,
        end_stream: has(head, flags::END_STREAM),
        payload,
        flow_len: head.len,
    })
}

fn parse_headers(head: FrameHeader, mut payload: Bytes) -> Result<Frame, FrameError> {
    on_stream(head, "HEADERS on stream 0")?;
    let pad = take_pad_len(head, &mut payload)?;
    let priority = if has(head, flags::PRIORITY) {
        let Some(raw) = payload.first_chunk::<5>() else {
            return Err(bad_size("HEADERS too short for its priority"));
        };
        let priority = Priority::parse(raw);
        payload.advance(5);
        Some(priority)
    } else {
        None
    };
    // Padding may only eat into the fragment, not the priority (§6.2).
    strip_padding(&mut payload, pad)?;
    if let Some(p) = priority {
        check_dependency(head, p)?;
    }
    Ok(Frame::Headers {
        stream: head.stream,
        end_stream: has(head, flags::END_STREAM),
        end_headers: has(head, flags::END_HEADERS),
        priority,
        fragment: payload,
    })
}

fn parse_priority(head: FrameHeader, payload: &[u8]) -> Result<Frame, FrameError> {
    on_stream(head, "PRIORITY on stream 0")?;
    // A stream error, unlike the other fixed sizes: PRIORITY changes no
    // connection state, so the connection survives a malformed one (§6.3).
    let raw: &[u8; 5] = payload.try_into().map_err(|_| {
        FrameError::stream(
            head.stream,
            ErrorCode::FRAME_SIZE_ERROR,
            "PRIORITY length is not 5",
        )
    })?;
    let priority = Priority::parse(raw);
    check_dependency(head, priority)?;
    Ok(Frame::Priority {
        stream: head.stream,
        priority,
    })
}

fn parse_rst_stream(head: FrameHeader, payload: &[u8]) -> Result<Frame, FrameError> {
    on_stream(head, "RST_STREAM on stream 0")?;
    let raw: &[u8; 4] = payload
        .try_into()
        .map_err(|_| bad_size("RST_STREAM length is not 4"))?;
    Ok(Frame::RstStream {
        stream: head.stream,
        code: ErrorCode(u32::from_be_bytes(*raw)),
    })
}

fn parse_push_promise(head: FrameHeader, mut payload: Bytes) -> Result<Frame, FrameError> {
    on_stream(head, "PUSH_PROMISE on stream 0")?;
    let pad = take_pad_len(head, &mut payload)?;
    let Some(raw) = payload.first_chunk::<4>() else {
        return Err(bad_size("PUSH_PROMISE too short for the promised stream"));
    };
    let promised = u32::from_be_bytes(*raw) & !R_BIT;
    payload.advance(4);
    strip_padding(&mut payload, pad)?;
    Ok(Frame::PushPromise {
        stream: head.stream,
        promised,
        end_headers: has(head, flags::END_HEADERS),
        fragment: payload,
    })
}

fn parse_ping(head: FrameHeader, payload: &[u8]) -> Result<Frame, FrameError> {
    on_connection(head, "PING on a stream")?;
    let payload: [u8; 8] = payload
        .try_into()
        .map_err(|_| bad_size("PING length is not 8"))?;
    Ok(Frame::Ping {
        ack: has(head, flags::ACK),
        payload,
    })
}

fn parse_goaway(head: FrameHeader, mut payload: Bytes) -> Result<Frame, FrameError> {
    on_connection(head, "GOAWAY on a stream")?;
    let Some(raw) = payload.first_chunk::<8>() else {
        return Err(bad_size("GOAWAY shorter than 8"));
    };
    let [l0, l1, l2, l3, c0, c1, c2, c3] = *raw;
    payload.advance(8);
    Ok(Frame::GoAway {
        last_stream: u32::from_be_bytes([l0, l1, l2, l3]) & !R_BIT,
        code: ErrorCode(u32::from_be_bytes([c0, c1, c2, c3])),
        debug: payload,
    })
}

fn parse_window_update(head: FrameHeader, payload: &[u8]) -> Result<Frame, FrameError> {
    let raw: &[u8; 4] = payload
        .try_into()
        .map_err(|_| bad_size("WINDOW_UPDATE length is not 4"))?;
    let increment = u32::from_be_bytes(*raw) & !R_BIT;
    if increment == 0 {
        let reason = "WINDOW_UPDATE with a zero increment";
        return Err(if head.stream == 0 {
            FrameError::conn(ErrorCode::PROTOCOL_ERROR, reason)
        } else {
            FrameError::stream(head.stream, ErrorCode::PROTOCOL_ERROR, reason)
        });
    }
    Ok(Frame::WindowUpdate {
        stream: head.stream,
        increment,
    })
}

fn has(head: FrameHeader, flag: u8) -> bool {
    head.flags & flag != 0
}

/// Removes the pad length byte of a PADDED frame and returns its value
/// (0 when the frame is not padded).
fn take_pad_len(head: FrameHeader, payload: &mut Bytes) -> Result<usize, FrameError> {
    if !has(head, flags::PADDED) {
        return Ok(0);
    }
    let Some(&pad) = payload.first() else {
        return Err(bad_size("PADDED frame without a pad length"));
    };
    payload.advance(1);
    Ok(usize::from(pad))
}

/// Drops `pad` trailing bytes. Padding may take everything after the fixed
/// fields (an empty body is legal) but no more (§6.1, §6.2, §6.6).
fn strip_padding(payload: &mut Bytes, pad: usize) -> Result<(), FrameError> {
    let Some(body) = payload.len().checked_sub(pad) else {
        return Err(FrameError::conn(
            ErrorCode::PROTOCOL_ERROR,
            "padding longer than the payload",
        ));
    };
    payload.truncate(body);
    Ok(())
}

/// §5.3.1: a stream cannot depend on itself; only that stream is at fault.
fn check_dependency(head: FrameHeader, p: Priority) -> Result<(), FrameError> {
    if p.dependency == head.stream {
        return Err(FrameError::stream(
            head.stream,
            ErrorCode::PROTOCOL_ERROR,
            "stream depends on itself",
        ));
    }
    Ok(())
}
