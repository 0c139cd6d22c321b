//! The rules of RFC 9113 §8 a header list can break, each a stream error.

use std::fmt;

use crate::{ErrorCode, FrameError};

/// The rule a header list breaks. Each is a malformed message: a stream
/// error of type PROTOCOL_ERROR (§8.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// A field name with an uppercase letter (§8.2.1).
    UppercaseName,
    /// A field name that is empty or has a byte outside RFC 9110's token
    /// characters (a colon included), the pseudo-header's leading colon
    /// aside (§8.2.1).
    InvalidName,
    /// A field value holding NUL, CR or LF (§8.2.1).
    InvalidValue,
    /// A field value starting or ending with SP or HTAB (§8.2.1).
    ValueWhitespace,
    /// A pseudo-header field after a regular field (§8.3).
    PseudoAfterRegular,
    /// A pseudo-header field no RFC defines (§8.3).
    UnknownPseudo,
    /// The same pseudo-header field twice (§8.3).
    DuplicatePseudo,
    /// `:status` in a request (§8.3).
    ResponsePseudoInRequest,
    /// `:method`, `:scheme`, `:authority`, `:path` or `:protocol` in a
    /// response (§8.3).
    RequestPseudoInResponse,
    /// Any pseudo-header field in trailers (§8.1, §8.3).
    PseudoInTrailers,
    /// connection, proxy-connection, keep-alive, transfer-encoding or
    /// upgrade (§8.2.2).
    ConnectionSpecific,
    /// `te` with a value other than "trailers" (§8.2.2).
    TeNotTrailers,
    /// No `:method` (§8.3.1).
    MissingMethod,
    /// A `:method` that is not a token (§8.3.1, RFC 9110 §9.1).
    InvalidMethod,
    /// No `:scheme` on a request other than a plain CONNECT (§8.3.1).
    MissingScheme,
    /// A `:scheme` that is not a URI scheme (§8.3.1, RFC 3986 §3.1).
    InvalidScheme,
    /// No `:path` on a request other than a plain CONNECT (§8.3.1).
    MissingPath,
    /// An empty `:path` (§8.3.1).
    EmptyPath,
    /// A `:path` with a control character, space or DEL, or, for http and
    /// https, one that neither starts with '/' nor is the '*' of an OPTIONS
    /// request (§8.3.1).
    InvalidPath,
    /// An `:authority` that is empty, has a byte URI authorities cannot
    /// hold, or carries userinfo where http, https or CONNECT forbid it
    /// (§8.3.1, §8.5).
    InvalidAuthority,
    /// A plain CONNECT without `:authority` (§8.5).
    ConnectWithoutAuthority,
    /// A plain CONNECT with `:scheme` or `:path` (§8.5).
    ConnectWithSchemeOrPath,
    /// `:protocol` on a method other than CONNECT (RFC 8441 §4).
    ProtocolWithoutConnect,
    /// More than one `host` field (RFC 9110 §7.2).
    DuplicateHost,
    /// A `host` field that is empty, has a byte URI authorities cannot
    /// hold, or carries userinfo (RFC 9110 §7.2).
    InvalidHost,
    /// `host` and `:authority` name different origins (§8.3.1).
    HostMismatch,
    /// No `:status` in a response (§8.3.2).
    MissingStatus,
    /// A `:status` that is not three digits from 100 to 599 (§8.3.2,
    /// RFC 9110 §15).
    InvalidStatus,
    /// A content-length that is not a decimal number (RFC 9110 §8.6).
    InvalidContentLength,
    /// Several content-length fields that disagree (RFC 9110 §8.6).
    ConflictingContentLength,
}

impl Malformed {
    /// The code for RST_STREAM: always PROTOCOL_ERROR (§8.1.1).
    pub fn code(self) -> ErrorCode {
        ErrorCode::PROTOCOL_ERROR
    }

    /// The stream error to send for this on `stream`.
    pub fn to_frame_error(self, stream: u32) -> FrameError {
        FrameError::stream(stream, self.code(), self.reason())
    }

    /// What is wrong, in words, for logs and RST_STREAM diagnostics.
    pub fn reason(self) -> &'static str {
        match self {
            Self::UppercaseName => "uppercase letter in a field name",
            Self::InvalidName => "invalid character in a field name",
            Self::InvalidValue => "NUL, CR or LF in a field value",
            Self::ValueWhitespace => "field value starts or ends with whitespace",
            Self::PseudoAfterRegular => "pseudo-header field after a regular field",
            Self::UnknownPseudo => "unknown pseudo-header field",
            Self::DuplicatePseudo => "repeated pseudo-header field",
            Self::ResponsePseudoInRequest => "response pseudo-header field in a request",
            Self::RequestPseudoInResponse => "request pseudo-header field in a response",
            Self::PseudoInTrailers => "pseudo-header field in trailers",
            Self::ConnectionSpecific => "connection-specific header field",
            Self::TeNotTrailers => "te header field other than \"trailers\"",
            Self::MissingMethod => "request without :method",
            Self::InvalidMethod => "invalid :method",
            Self::MissingScheme => "request without :scheme",
            Self::InvalidScheme => "invalid :scheme",
            Self::MissingPath => "request without :path",
            Self::EmptyPath => "empty :path",
            Self::InvalidPath => "invalid :path",
            Self::InvalidAuthority => "invalid :authority",
            Self::ConnectWithoutAuthority => "CONNECT without :authority",
            Self::ConnectWithSchemeOrPath => "CONNECT with :scheme or :path",
            Self::ProtocolWithoutConnect => ":protocol on a method other than CONNECT",
            Self::DuplicateHost => "more than one host header field",
            Self::InvalidHost => "invalid host header field",
            Self::HostMismatch => "host header field differs from :authority",
            Self::MissingStatus => "response without :status",
            Self::InvalidStatus => "invalid :status",
            Self::InvalidContentLength => "invalid content-length",
            Self::ConflictingContentLength => "conflicting content-length values",
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed message: {}", self.reason())
    }
}

impl std::error::Error for Malformed {}
