//! The checks that the parsers of several frame types share: which stream a
//! frame may arrive on, and the size error.

use super::head::FrameHeader;
use crate::{ErrorCode, FrameError};

/// A frame that belongs to a stream (DATA, HEADERS, …): on stream 0 it is a
/// connection PROTOCOL_ERROR (§6).
pub(super) fn on_stream(head: FrameHeader, reason: &'static str) -> Result<(), FrameError> {
    match head.stream {
        0 => Err(FrameError::conn(ErrorCode::PROTOCOL_ERROR, reason)),
        _ => Ok(()),
    }
}

/// A frame that belongs to the connection (SETTINGS, PING, GOAWAY): on
/// any other stream it is a connection PROTOCOL_ERROR (§6).
pub(super) fn on_connection(head: FrameHeader, reason: &'static str) -> Result<(), FrameError> {
    match head.stream {
        0 => Ok(()),
        _ => Err(FrameError::conn(ErrorCode::PROTOCOL_ERROR, reason)),
    }
}

/// A payload too short for its mandatory fields, or of the wrong fixed
/// size: a connection FRAME_SIZE_ERROR (§4.2).
pub(super) fn bad_size(reason: &'static str) -> FrameError {
    FrameError::conn(ErrorCode::FRAME_SIZE_ERROR, reason)
}
