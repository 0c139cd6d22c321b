//! The receive loop and frame dispatch both sides share, as a trait whose small hooks say what differs by role.

use bytes::{Bytes, BytesMut};

use super::limits::Inbound;
use super::shared::{check_data, conn_err, ConnCore, DataVerdict};
use super::streams::StreamMap;
use crate::frame::{self, decode_frame, encode_ping, encode_rst_stream, Frame, Settings};
use crate::header_block::Assembled;
use crate::{ErrorCode, FrameError};

/// A connection error as code and reason, before GOAWAY goes out.
pub(super) type ConnResult = Result<(), (ErrorCode, &'static str)>;

/// What [`ServerConn`](super::ServerConn) and [`ClientConn`](super::ClientConn)
/// do alike with received frames. The required methods are the role's
/// hooks: its state, its opening (§3.4), and the frames whose meaning
/// depends on which side reads them.
pub(super) trait Dispatch {
    /// Why a PUSH_PROMISE ends the connection on this side.
    const PUSH_PROMISE: &'static str;
    /// Why DATA on a stream that [`never_opened`](Self::never_opened) ends
    /// the connection.
    const DATA_UNOPENED: &'static str;
    /// DATA may only follow the final head the peer sent (a response body,
    /// §8.1); a request's body follows its only head anyway.
    const DATA_AFTER_HEAD: bool;

    fn max_frame_size(&self) -> u32;
    /// The state the shared code works on, as two borrows at once.
    fn parts(&mut self) -> (&mut ConnCore, &mut StreamMap);

    fn core(&mut self) -> &mut ConnCore {
        self.parts().0
    }

    fn streams(&mut self) -> &mut StreamMap {
        self.parts().1
    }

    /// Whether the peer's first SETTINGS came: a bad frame before it ends
    /// the connection, whatever kind of error it is.
    fn opened(&self) -> bool;
    /// What comes before the frames (the server's client preface):
    /// `Ok(false)` while it is incomplete.
    fn recv_opening(&mut self, _buf: &mut BytesMut) -> Result<bool, (ErrorCode, &'static str)> {
        Ok(true)
    }
    /// §3.4: the peer's first frame must be SETTINGS.
    fn check_first(&mut self, frame: &Frame) -> ConnResult;
    /// Whether `stream` is one the peer cannot have opened or been given
    /// yet: frames on it are connection errors (§5.1).
    fn never_opened(&self, stream: u32) -> bool;

    fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), FrameError>;
    fn on_settings(&mut self, s: &Settings) -> Result<(), FrameError>;
    /// The peer now uses our SETTINGS: apply what we held back until then.
    fn on_settings_ack(&mut self);
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode);
    /// We sent RST_STREAM on `stream`, on a stream error.
    fn reset_sent(&mut self, _stream: u32) {}
    /// Whether DATA on `stream`, known but no longer open, is ignored
    /// rather than answered with RST_STREAM(STREAM_CLOSED) (§5.1,
    /// "closed"). A client ignores it always: a server's DATA crossing our
    /// CANCEL is routine, and a reset per late frame would only add to the
    /// resets a backend counts against us.
    fn late_data_ignored(&self, _stream: u32) -> bool {
        true
    }
    /// Queues the event that the peer reset `stream`.
    fn reset_event(&mut self, stream: u32, code: ErrorCode);
    /// Queues the event that we reset `stream`, which broke a stream rule
    /// (`code` is what we sent).
    fn broken_event(&mut self, stream: u32, code: ErrorCode) {
        self.reset_event(stream, code);
    }
    /// Queues the event that `stream` (0: the connection) may send more.
    fn window_event(&mut self, stream: u32);
    /// Queues received body bytes (or only END_STREAM) for the application.
    fn data_event(&mut self, stream: u32, data: Bytes, end_stream: bool);
    /// Counts a received frame against the role's flood limits; an error
    /// ends the connection.
    fn track_inbound(&mut self, _what: Inbound) -> ConnResult {
        Ok(())
    }

    /// Consumes the frames in `buf` (after the opening), leaving a partial
    /// one, and queues events.
    fn recv_frames(&mut self, buf: &mut BytesMut) -> ConnResult {
        if !self.recv_opening(buf)? {
            return Ok(());
        }
        loop {
            let kind = buf.get(3).copied();
            let frame = match decode_frame(buf, self.max_frame_size()) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.on_frame_error(e, kind)?;
                    continue;
                }
            };
            self.check_first(&frame)?;
            if let Some(what) = Inbound::of(&frame) {
                self.track_inbound(what)?;
            }
            if !matches!(frame, Frame::Continuation { .. }) {
                self.core().assembler.check_interleave().map_err(conn_err)?;
            }
            self.on_frame(frame).map_err(conn_err)?;
        }
    }

    /// A frame that failed its own checks (it has been consumed).
    fn on_frame_error(&mut self, e: FrameError, kind: Option<u8>) -> ConnResult {
        if !self.opened() {
            return Err(conn_err(e));
        }
        self.core().assembler.check_interleave().map_err(conn_err)?;
        match e {
            // A HEADERS frame's block was lost with it, and the HPACK
            // tables with it: the connection cannot go on.
            FrameError::Stream { .. } if kind == Some(frame::kind::HEADERS) => Err((
                ErrorCode::PROTOCOL_ERROR,
                "invalid HEADERS frame (header block lost)",
            )),
            // §5.3.1: a PRIORITY frame making its (usually idle) stream
            // depend on itself is a stream error; RST_STREAM goes out even
            // on an idle stream, as the error names that stream.
            FrameError::Stream { stream, code, .. } if kind == Some(frame::kind::PRIORITY) => {
                self.track_inbound(Inbound::Priority)?;
                encode_rst_stream(&mut self.core().out.buf, stream, code);
                self.reset_sent(stream);
                if self.streams().remove(stream).is_some() {
                    self.reset_event(stream, code);
                }
                Ok(())
            }
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
                    .core()
                    .assembler
                    .headers(stream, end_stream, end_headers, fragment);
                self.on_assembled(r.map_err(|e| e.to_frame_error())?)
            }
            Frame::Continuation {
                stream,
                end_headers,
                fragment,
            } => {
                let r = self
                    .core()
                    .assembler
                    .continuation(stream, end_headers, fragment);
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
                reason: Self::PUSH_PROMISE,
            }),
            Frame::Ping { ack, payload } => {
                if !ack {
                    encode_ping(&mut self.core().out.buf, true, payload);
                }
                Ok(())
            }
            Frame::GoAway {
                last_stream, code, ..
            } => {
                self.on_goaway(last_stream, code);
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

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        payload: Bytes,
        flow_len: u32,
    ) -> Result<(), FrameError> {
        if self.core().conn_recv.receive(flow_len).is_err() {
            return Err(FrameError::Connection {
                code: ErrorCode::FLOW_CONTROL_ERROR,
                reason: "DATA beyond the connection window",
            });
        }
        let never_opened = self.never_opened(stream);
        let Some(st) = self.streams().get_mut(stream) else {
            if never_opened {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: Self::DATA_UNOPENED,
                });
            }
            // A stream that ended or was reset: nobody will read it.
            self.core().release_conn(flow_len);
            // DATA crossing our RST_STREAM is ignored; otherwise the peer
            // sends on a stream it closed itself (END_STREAM or its own
            // RST_STREAM): a stream error (§5.1, "closed").
            if !self.late_data_ignored(stream) {
                encode_rst_stream(&mut self.core().out.buf, stream, ErrorCode::STREAM_CLOSED);
                self.reset_sent(stream);
            }
            return Ok(());
        };
        let len = payload.len();
        let verdict = if Self::DATA_AFTER_HEAD && !st.head_done {
            DataVerdict::Reset(ErrorCode::PROTOCOL_ERROR)
        } else {
            check_data(st, stream, end_stream, flow_len, len)?
        };
        match verdict {
            DataVerdict::Deliver => {}
            DataVerdict::Drop => {
                self.core().release_conn(flow_len);
                return Ok(());
            }
            DataVerdict::Reset(code) => {
                self.core().release_conn(flow_len);
                self.stream_error(stream, code);
                return Ok(());
            }
        }
        // Padding is nobody's to read: give it back now.
        let pad = flow_len - len as u32;
        if pad > 0 {
            let (core, streams) = self.parts();
            core.release(streams, stream, pad);
        }
        if len > 0 || end_stream {
            self.data_event(stream, payload, end_stream);
        }
        self.streams().remove_if_closed(stream);
        Ok(())
    }

    /// A stream broke a stream-level rule: reset it, forget it, and tell
    /// the application if it knew the stream.
    fn stream_error(&mut self, stream: u32, code: ErrorCode) {
        // An idle stream (or, on a client, an even one) has nothing to
        // reset, and RST_STREAM on it would be the peer's connection error
        // (§6.4).
        if self.never_opened(stream) {
            return;
        }
        encode_rst_stream(&mut self.core().out.buf, stream, code);
        self.reset_sent(stream);
        if self.streams().remove(stream).is_some() {
            self.broken_event(stream, code);
        }
    }

    fn on_reset(&mut self, stream: u32, code: ErrorCode) -> Result<(), FrameError> {
        let never_opened = self.never_opened(stream);
        let Some(st) = self.streams().get_mut(stream) else {
            if never_opened {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "RST_STREAM on an idle stream",
                });
            }
            return Ok(());
        };
        st.state.recv_reset()?;
        self.streams().remove(stream);
        self.reset_event(stream, code);
        Ok(())
    }

    fn on_window_update(&mut self, stream: u32, inc: u32) -> Result<(), FrameError> {
        if stream == 0 {
            self.core()
                .conn_send
                .grow(inc)
                .map_err(|e| e.to_frame_error(0))?;
            self.window_event(0);
            return Ok(());
        }
        let never_opened = self.never_opened(stream);
        let Some(st) = self.streams().get_mut(stream) else {
            if never_opened {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "WINDOW_UPDATE on an idle stream",
                });
            }
            // Closed or reset since: the peer had not heard yet.
            return Ok(());
        };
        if st.send.grow(inc).is_err() {
            self.stream_error(stream, ErrorCode::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if st.state.can_send() {
            self.window_event(stream);
        }
        Ok(())
    }
}
