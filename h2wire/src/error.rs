//! HTTP/2 error codes (RFC 9113 §7) and how a malformed frame fails.

use std::fmt;

/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY. Unknown codes
/// are kept as is: the RFC says they must not trigger special behaviour.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: Self = Self(0x0);
    pub const PROTOCOL_ERROR: Self = Self(0x1);
    pub const INTERNAL_ERROR: Self = Self(0x2);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const SETTINGS_TIMEOUT: Self = Self(0x4);
    pub const STREAM_CLOSED: Self = Self(0x5);
    pub const FRAME_SIZE_ERROR: Self = Self(0x6);
    pub const REFUSED_STREAM: Self = Self(0x7);
    pub const CANCEL: Self = Self(0x8);
    pub const COMPRESSION_ERROR: Self = Self(0x9);
    pub const CONNECT_ERROR: Self = Self(0xa);
    pub const ENHANCE_YOUR_CALM: Self = Self(0xb);
    pub const INADEQUATE_SECURITY: Self = Self(0xc);
    pub const HTTP_1_1_REQUIRED: Self = Self(0xd);

    /// The RFC's name for the code, if it has one.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => return None,
        })
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "ErrorCode({:#x})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a received frame cannot be accepted, and how far the damage goes
/// (RFC 9113 §5.4): a stream error resets one stream, a connection error
/// ends the connection with GOAWAY.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Send GOAWAY with this code and close the connection.
    #[error("connection error {code}: {reason}")]
    Connection {
        code: ErrorCode,
        reason: &'static str,
    },
    /// Send RST_STREAM on `stream` with this code; the connection lives on.
    #[error("stream {stream} error {code}: {reason}")]
    Stream {
        stream: u32,
        code: ErrorCode,
        reason: &'static str,
    },
}

impl FrameError {
    pub(crate) fn conn(code: ErrorCode, reason: &'static str) -> Self {
        Self::Connection { code, reason }
    }

    pub(crate) fn stream(stream: u32, code: ErrorCode, reason: &'static str) -> Self {
        Self::Stream {
            stream,
            code,
            reason,
        }
    }

    /// The error code to send.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Connection { code, .. } | Self::Stream { code, .. } => *code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_print_by_name_and_unknown_ones_by_number() {
        assert_eq!(
            ErrorCode::ENHANCE_YOUR_CALM.to_string(),
            "ENHANCE_YOUR_CALM"
        );
        assert_eq!(ErrorCode(0x42).to_string(), "ErrorCode(0x42)");
        let e = FrameError::stream(3, ErrorCode::FLOW_CONTROL_ERROR, "zero increment");
        assert_eq!(e.code(), ErrorCode::FLOW_CONTROL_ERROR);
        assert_eq!(
            e.to_string(),
            "stream 3 error FLOW_CONTROL_ERROR: zero increment"
        );
    }
}
