//! Frames on streams: header blocks (new requests and trailers), DATA and its flow control, RST_STREAM, WINDOW_UPDATE.

use bytes::Bytes;

use super::server::ServerConn;
use super::shared::{check_data, decode_block, release_conn, DataVerdict};
use super::streams::Stream;
use super::Event;
use crate::frame::encode_rst_stream;
use crate::message::{check_request, check_trailers, HeaderList};
use crate::stream_state::{Accept, StreamState};
use crate::window::RecvWindow;
use crate::{ErrorCode, FrameError};

/// What a decoded block amounted to.
enum Decoded {
    Fine(HeaderList),
    /// Over SETTINGS_MAX_HEADER_LIST_SIZE; the tables are still in step.
    TooLarge,
}

impl ServerConn {
    /// A complete header block on `stream`: a new request or trailers.
    pub(super) fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), FrameError> {
        if self.streams.contains(stream) {
            return self.on_trailers(stream, end_stream, block);
        }
        let new = stream % 2 == 1 && stream > self.highest;
        if !new && !self.recently_reset.contains(stream) {
            return Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "HEADERS with an even or reused stream id",
            });
        }
        // Always decoded, even when the stream is then dropped: the peer's
        // encoder already updated its table for this block.
        let decoded = self.decode(block)?;
        if !new {
            // Trailers crossing our reset of the stream.
            self.recycle_decoded(decoded);
            return Ok(());
        }
        self.highest = stream;
        if self.goaway_last.is_some_and(|last| stream > last) {
            // §6.8: the client learns from our GOAWAY it was not processed.
            self.recycle_decoded(decoded);
            return Ok(());
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.recycle_decoded(decoded);
            self.stream_error(stream, ErrorCode::REFUSED_STREAM);
            return Ok(());
        }
        let head = match decoded {
            Decoded::Fine(head) => head,
            Decoded::TooLarge => {
                self.answer_431(stream, end_stream);
                return Ok(());
            }
        };
        let content_length = match check_request(&head) {
            // We never send SETTINGS_ENABLE_CONNECT_PROTOCOL, so
            // `:protocol` is malformed here (RFC 8441 §3).
            Ok(h) if h.protocol.is_none() => h.content_length,
            _ => {
                self.recycle(head);
                self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
                return Ok(());
            }
        };
        if end_stream && content_length.is_some_and(|n| n != 0) {
            self.recycle(head);
            self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
            return Ok(());
        }
        let mut state = StreamState::Idle;
        state.recv_headers(stream, end_stream)?;
        self.streams.insert(
            stream,
            Stream {
                state,
                send: crate::window::Window::new(self.peer_initial),
                recv: RecvWindow::new(self.local_initial),
                content_left: content_length,
                head_done: false,
                head_request: false,
            },
        );
        self.events.push_back(Event::Request {
            stream,
            head,
            end_stream,
        });
        Ok(())
    }

    /// A second header block on an open stream: the request's trailers.
    fn on_trailers(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), FrameError> {
        let fields = match self.decode(block)? {
            Decoded::Fine(fields) => fields,
            Decoded::TooLarge => {
                self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
                return Ok(());
            }
        };
        let Some(st) = self.streams.get_mut(stream) else {
            return Ok(());
        };
        // Trailers end the request (§8.1); HEADERS without END_STREAM here
        // would be a second head, which requests do not have.
        let ok = end_stream
            && check_trailers(&fields).is_ok()
            && matches!(st.content_left, None | Some(0));
        if !ok {
            self.recycle(fields);
            self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
            return Ok(());
        }
        match st.state.recv_headers(stream, end_stream) {
            Ok(Accept::Deliver) => {}
            Ok(Accept::Ignore) => {
                self.recycle(fields);
                return Ok(());
            }
            Err(FrameError::Stream { code, .. }) => {
                self.recycle(fields);
                self.stream_error(stream, code);
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.events.push_back(Event::Trailers { stream, fields });
        self.streams.remove_if_closed(stream);
        Ok(())
    }

    fn decode(&mut self, block: &[u8]) -> Result<Decoded, FrameError> {
        let mut list = self.take_list();
        let max = self.cfg.max_header_list_size as usize;
        match decode_block(&mut self.decoder, &mut list, block, max) {
            Ok(true) => Ok(Decoded::Fine(list)),
            Ok(false) => {
                self.recycle(list);
                Ok(Decoded::TooLarge)
            }
            Err(e) => {
                self.recycle(list);
                Err(e)
            }
        }
    }

    fn recycle_decoded(&mut self, d: Decoded) {
        if let Decoded::Fine(list) = d {
            self.recycle(list);
        }
    }

    /// Answers a request whose header list is over our limit with 431
    /// (RFC 6585 §5) without bothering the application.
    fn answer_431(&mut self, stream: u32, end_stream: bool) {
        let buf = &mut self.out.buf;
        let mark = crate::frame::begin_headers(buf);
        self.encoder.begin_block(buf);
        self.encoder.encode_field(b":status", b"431", false, buf);
        crate::frame::finish_headers(buf, mark, stream, true, self.peer_max_frame);
        if !end_stream {
            // §8.1: the response is complete, so stop the request body
            // without calling it an error.
            encode_rst_stream(&mut self.out.buf, stream, ErrorCode::NO_ERROR);
            self.recently_reset.push(stream);
        }
    }

    pub(super) fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        payload: Bytes,
        flow_len: u32,
    ) -> Result<(), FrameError> {
        if self.conn_recv.receive(flow_len).is_err() {
            return Err(FrameError::Connection {
                code: ErrorCode::FLOW_CONTROL_ERROR,
                reason: "DATA beyond the connection window",
            });
        }
        let Some(st) = self.streams.get_mut(stream) else {
            if stream > self.highest {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "DATA on an idle stream",
                });
            }
            // A stream we reset or that ended: nobody will read it.
            self.release_conn(flow_len);
            return Ok(());
        };
        let len = payload.len();
        match check_data(st, stream, end_stream, flow_len, len)? {
            DataVerdict::Deliver => {}
            DataVerdict::Drop => {
                self.release_conn(flow_len);
                return Ok(());
            }
            DataVerdict::Reset(code) => {
                self.release_conn(flow_len);
                self.stream_error(stream, code);
                return Ok(());
            }
        }
        // Padding is nobody's to read: give it back now.
        let pad = flow_len - len as u32;
        if pad > 0 {
            self.release(stream, pad);
        }
        if len > 0 || end_stream {
            self.events.push_back(Event::Data {
                stream,
                data: payload,
                end_stream,
            });
        }
        self.streams.remove_if_closed(stream);
        Ok(())
    }

    /// Gives `n` bytes back to the connection window, with a WINDOW_UPDATE
    /// when one is due.
    pub(super) fn release_conn(&mut self, n: u32) {
        release_conn(&mut self.conn_recv, &mut self.out, n);
    }

    pub(super) fn on_reset(&mut self, stream: u32, code: ErrorCode) -> Result<(), FrameError> {
        let Some(st) = self.streams.get_mut(stream) else {
            if stream > self.highest {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "RST_STREAM on an idle stream",
                });
            }
            return Ok(());
        };
        st.state.recv_reset()?;
        self.streams.remove(stream);
        self.events.push_back(Event::Reset { stream, code });
        Ok(())
    }

    pub(super) fn on_window_update(&mut self, stream: u32, inc: u32) -> Result<(), FrameError> {
        if stream == 0 {
            self.conn_send.grow(inc).map_err(|e| e.to_frame_error(0))?;
            self.events.push_back(Event::WindowOpen { stream: 0 });
            return Ok(());
        }
        let Some(st) = self.streams.get_mut(stream) else {
            // Closed or reset since: the peer had not heard yet.
            return Ok(());
        };
        if st.send.grow(inc).is_err() {
            self.stream_error(stream, ErrorCode::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if st.state.can_send() {
            self.events.push_back(Event::WindowOpen { stream });
        }
        Ok(())
    }
}
