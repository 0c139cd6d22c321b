//! The life of one stream (RFC 9113 §5.1) as the frames on it move it, and
//! which received frames are errors in which state. Server push is never
//! enabled by the gateway, so the reserved states do not exist here.

use crate::error::{ErrorCode, FrameError};

/// Where a stream is in its life. `Closed` remembers how it closed, because
/// that decides what late frames mean (§5.1, "closed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    Idle,
    Open,
    /// We sent END_STREAM; the peer may still send.
    HalfClosedLocal,
    /// The peer sent END_STREAM; we may still send.
    HalfClosedRemote,
    Closed(ClosedBy),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosedBy {
    /// Both sides sent END_STREAM.
    EndStream,
    /// We sent RST_STREAM: frames the peer sent before seeing it are still
    /// in flight and are ignored, not errors.
    LocalReset,
    /// The peer sent RST_STREAM.
    RemoteReset,
}

/// What to do with a received DATA or HEADERS frame that the state allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// Deliver it.
    Deliver,
    /// Drop it (the stream was reset by us). DATA still counts against the
    /// connection's flow-control window, which the caller must give back.
    Ignore,
}

impl StreamState {
    /// The peer sent HEADERS. On an idle stream they open it (the caller
    /// checks the stream id is new and of the peer's parity); on an open one
    /// they are trailers or, for responses, the final headers after 1xx.
    pub fn recv_headers(&mut self, stream: u32, end_stream: bool) -> Result<Accept, FrameError> {
        *self = match *self {
            Self::Idle if end_stream => Self::HalfClosedRemote,
            Self::Idle => Self::Open,
            Self::Open if end_stream => Self::HalfClosedRemote,
            Self::Open => Self::Open,
            Self::HalfClosedLocal if end_stream => Self::Closed(ClosedBy::EndStream),
            Self::HalfClosedLocal => Self::HalfClosedLocal,
            other => return other.late_frame(stream),
        };
        Ok(Accept::Deliver)
    }

    /// The peer sent DATA.
    pub fn recv_data(&mut self, stream: u32, end_stream: bool) -> Result<Accept, FrameError> {
        *self = match *self {
            Self::Idle => {
                return Err(FrameError::conn(
                    ErrorCode::PROTOCOL_ERROR,
                    "DATA on an idle stream",
                ))
            }
            Self::Open if end_stream => Self::HalfClosedRemote,
            Self::Open => Self::Open,
            Self::HalfClosedLocal if end_stream => Self::Closed(ClosedBy::EndStream),
            Self::HalfClosedLocal => Self::HalfClosedLocal,
            other => return other.late_frame(stream),
        };
        Ok(Accept::Deliver)
    }

    /// The peer sent RST_STREAM. On an idle stream that is a connection
    /// PROTOCOL_ERROR (§6.4).
    pub fn recv_reset(&mut self) -> Result<(), FrameError> {
        match *self {
            Self::Idle => Err(FrameError::conn(
                ErrorCode::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
            )),
            // Already closed: a reset crossing ours or our END_STREAM.
            Self::Closed(_) => Ok(()),
            _ => {
                *self = Self::Closed(ClosedBy::RemoteReset);
                Ok(())
            }
        }
    }

    /// We send HEADERS (opening the stream, as a client, or answering).
    pub fn send_headers(&mut self, end_stream: bool) {
        *self = match *self {
            Self::Idle if end_stream => Self::HalfClosedLocal,
            Self::Idle => Self::Open,
            s => s.after_send(end_stream),
        };
    }

    /// We send DATA (or trailers) with this END_STREAM flag.
    pub fn send_data(&mut self, end_stream: bool) {
        *self = self.after_send(end_stream);
    }

    /// We send RST_STREAM.
    pub fn send_reset(&mut self) {
        if !matches!(self, Self::Closed(_)) {
            *self = Self::Closed(ClosedBy::LocalReset);
        }
    }

    /// We may still send on it.
    pub fn can_send(self) -> bool {
        matches!(self, Self::Open | Self::HalfClosedRemote)
    }

    /// The peer may still send on it.
    pub fn can_recv(self) -> bool {
        matches!(self, Self::Open | Self::HalfClosedLocal)
    }

    pub fn is_closed(self) -> bool {
        matches!(self, Self::Closed(_))
    }

    fn after_send(self, end_stream: bool) -> Self {
        match self {
            Self::Open if end_stream => Self::HalfClosedLocal,
            Self::HalfClosedRemote if end_stream => Self::Closed(ClosedBy::EndStream),
            s => s,
        }
    }

    /// DATA or HEADERS where the peer had no right to send any more.
    fn late_frame(self, stream: u32) -> Result<Accept, FrameError> {
        match self {
            // Sent before the peer saw our reset.
            Self::Closed(ClosedBy::LocalReset) => Ok(Accept::Ignore),
            // §5.1: after the peer's END_STREAM, or after its reset, more
            // frames are a stream error of type STREAM_CLOSED.
            Self::HalfClosedRemote | Self::Closed(_) => Err(FrameError::stream(
                stream,
                ErrorCode::STREAM_CLOSED,
                "frame after the stream was closed by the peer",
            )),
            // Not reached: callers handle Idle, Open and HalfClosedLocal.
            _ => Err(FrameError::conn(
                ErrorCode::INTERNAL_ERROR,
                "stream state machine misuse",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_closed(r: Result<Accept, FrameError>) -> bool {
        matches!(
            r,
            Err(FrameError::Stream {
                code: ErrorCode::STREAM_CLOSED,
                ..
            })
        )
    }

    #[test]
    fn request_then_response_closes_the_stream() {
        // Server side of a POST: headers, data, END_STREAM; then answer.
        let mut s = StreamState::Idle;
        assert_eq!(s.recv_headers(1, false), Ok(Accept::Deliver));
        assert_eq!(s, StreamState::Open);
        assert_eq!(s.recv_data(1, true), Ok(Accept::Deliver));
        assert_eq!(s, StreamState::HalfClosedRemote);
        assert!(s.can_send() && !s.can_recv());
        s.send_headers(false);
        s.send_data(true);
        assert_eq!(s, StreamState::Closed(ClosedBy::EndStream));
    }

    #[test]
    fn client_side_with_trailers() {
        let mut s = StreamState::Idle;
        s.send_headers(true);
        assert_eq!(s, StreamState::HalfClosedLocal);
        assert_eq!(s.recv_headers(1, false), Ok(Accept::Deliver)); // response
        assert_eq!(s.recv_data(1, false), Ok(Accept::Deliver));
        assert_eq!(s.recv_headers(1, true), Ok(Accept::Deliver)); // trailers
        assert!(s.is_closed());
    }

    #[test]
    fn data_on_an_idle_stream_is_a_connection_error() {
        let mut s = StreamState::Idle;
        assert!(matches!(
            s.recv_data(3, false),
            Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                ..
            })
        ));
        assert!(s.recv_reset().is_err());
    }

    #[test]
    fn frames_after_the_peers_end_stream_are_stream_closed() {
        let mut s = StreamState::Idle;
        s.recv_headers(5, true).unwrap();
        assert!(stream_closed(s.recv_data(5, false)));
        assert!(stream_closed(s.recv_headers(5, true)));
        // The stream itself carries on: we can still answer.
        assert!(s.can_send());
    }

    #[test]
    fn frames_after_our_reset_are_ignored() {
        let mut s = StreamState::Idle;
        s.recv_headers(7, false).unwrap();
        s.send_reset();
        assert_eq!(s, StreamState::Closed(ClosedBy::LocalReset));
        assert_eq!(s.recv_data(7, false), Ok(Accept::Ignore));
        assert_eq!(s.recv_headers(7, true), Ok(Accept::Ignore));
        // A reset crossing ours is fine too.
        assert_eq!(s.recv_reset(), Ok(()));
        assert_eq!(s, StreamState::Closed(ClosedBy::LocalReset));
    }

    #[test]
    fn frames_after_the_peers_reset_are_stream_closed() {
        let mut s = StreamState::Idle;
        s.recv_headers(9, false).unwrap();
        s.recv_reset().unwrap();
        assert!(!s.can_send() && !s.can_recv());
        assert!(stream_closed(s.recv_data(9, false)));
    }

    #[test]
    fn sending_end_stream_from_open_half_closes_locally() {
        let mut s = StreamState::Idle;
        s.recv_headers(1, false).unwrap();
        s.send_headers(true);
        assert_eq!(s, StreamState::HalfClosedLocal);
        assert!(!s.can_send() && s.can_recv());
        s.recv_data(1, true).unwrap();
        assert_eq!(s, StreamState::Closed(ClosedBy::EndStream));
    }
}
