//! Frames on a client's streams: response heads (1xx and final), trailers, DATA and its flow control, RST_STREAM, WINDOW_UPDATE, GOAWAY.

use bytes::Bytes;

use super::client::ClientConn;
use super::shared::{check_data, decode_block, release_conn, DataVerdict};
use super::ClientEvent;
use crate::frame::encode_rst_stream;
use crate::message::{check_response, check_trailers, HeaderList};
use crate::stream_state::Accept;
use crate::{ErrorCode, FrameError};

impl ClientConn {
    /// A complete header block on `stream`: a response head or trailers.
    pub(super) fn on_header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), FrameError> {
        if !self.streams.contains(stream) && self.never_opened(stream) {
            return Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "HEADERS on a stream the client did not open",
            });
        }
        // Always decoded, even for a stream that is then dropped: the
        // server's encoder already updated its table for this block.
        let mut list = self.take_list();
        let max = self.cfg.max_header_list_size as usize;
        let fits = match decode_block(&mut self.decoder, &mut list, block, max) {
            Ok(fits) => fits,
            Err(e) => {
                self.recycle(list);
                return Err(e);
            }
        };
        let Some(st) = self.streams.get_mut(stream) else {
            // A stream we opened and have forgotten since (we reset it, a
            // GOAWAY refused it, or it ended): the server had not heard.
            // Which of those it was is gone with the stream, and ending the
            // connection for a late frame would take every request with it.
            self.recycle(list);
            return Ok(());
        };
        if !fits {
            self.recycle(list);
            encode_rst_stream(&mut self.out.buf, stream, ErrorCode::CANCEL);
            self.streams.remove(stream);
            self.events.push_back(ClientEvent::TooLarge { stream });
            return Ok(());
        }
        match st.state.recv_headers(stream, end_stream) {
            Ok(Accept::Deliver) => {}
            Ok(Accept::Ignore) => {
                self.recycle(list);
                return Ok(());
            }
            Err(FrameError::Stream { code, .. }) => {
                self.recycle(list);
                self.stream_error(stream, code);
                return Ok(());
            }
            Err(e) => {
                self.recycle(list);
                return Err(e);
            }
        }
        if st.head_done {
            self.on_trailers(stream, end_stream, list);
        } else {
            self.on_response(stream, end_stream, list);
        }
        Ok(())
    }

    /// A response head, 1xx or final; the stream's state already moved.
    fn on_response(&mut self, stream: u32, end_stream: bool, head: HeaderList) {
        let Some(st) = self.streams.get_mut(stream) else {
            return self.recycle(head);
        };
        let verdict = check_response(&head).ok().and_then(|h| {
            let informational = h.is_informational();
            // §8.6: 101 has no place in HTTP/2; §8.1: a 1xx never ends the
            // stream, a final response follows it.
            if h.status == 101 || (informational && end_stream) {
                return None;
            }
            // HEAD, 204 and 304 responses have no body, whatever their
            // content-length says (RFC 9110 §6.4.1).
            let left = if st.head_request || h.status == 204 || h.status == 304 {
                Some(0)
            } else {
                h.content_length
            };
            if !informational && end_stream && left.is_some_and(|n| n != 0) {
                return None;
            }
            Some((informational, left))
        });
        let Some((informational, content_left)) = verdict else {
            self.recycle(head);
            self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
            return;
        };
        if !informational {
            st.head_done = true;
            st.content_left = content_left;
        }
        self.events.push_back(ClientEvent::Response {
            stream,
            head,
            informational,
            end_stream,
        });
        self.streams.remove_if_closed(stream);
    }

    /// A header block after the final head: the trailers, which must end
    /// the response (§8.1) and the body content-length announced.
    fn on_trailers(&mut self, stream: u32, end_stream: bool, fields: HeaderList) {
        let Some(st) = self.streams.get_mut(stream) else {
            return self.recycle(fields);
        };
        let ok = end_stream
            && check_trailers(&fields).is_ok()
            && matches!(st.content_left, None | Some(0));
        if !ok {
            self.recycle(fields);
            self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
            return;
        }
        self.events
            .push_back(ClientEvent::Trailers { stream, fields });
        self.streams.remove_if_closed(stream);
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
        let never_opened = self.never_opened(stream);
        let Some(st) = self.streams.get_mut(stream) else {
            if never_opened {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "DATA on a stream the client did not open",
                });
            }
            // A stream we reset or that ended: nobody will read it.
            release_conn(&mut self.conn_recv, &mut self.out, flow_len);
            return Ok(());
        };
        let len = payload.len();
        let verdict = if st.head_done {
            check_data(st, stream, end_stream, flow_len, len)?
        } else {
            // §8.1: a response body comes after the final head only.
            DataVerdict::Reset(ErrorCode::PROTOCOL_ERROR)
        };
        match verdict {
            DataVerdict::Deliver => {}
            DataVerdict::Drop => {
                release_conn(&mut self.conn_recv, &mut self.out, flow_len);
                return Ok(());
            }
            DataVerdict::Reset(code) => {
                release_conn(&mut self.conn_recv, &mut self.out, flow_len);
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
            self.events.push_back(ClientEvent::Data {
                stream,
                data: payload,
                end_stream,
            });
        }
        self.streams.remove_if_closed(stream);
        Ok(())
    }

    pub(super) fn on_reset(&mut self, stream: u32, code: ErrorCode) -> Result<(), FrameError> {
        let never_opened = self.never_opened(stream);
        let Some(st) = self.streams.get_mut(stream) else {
            if never_opened {
                return Err(FrameError::Connection {
                    code: ErrorCode::PROTOCOL_ERROR,
                    reason: "RST_STREAM on an idle stream",
                });
            }
            return Ok(());
        };
        st.state.recv_reset()?;
        self.streams.remove(stream);
        self.events.push_back(ClientEvent::Reset { stream, code });
        Ok(())
    }

    pub(super) fn on_window_update(&mut self, stream: u32, inc: u32) -> Result<(), FrameError> {
        if stream == 0 {
            self.conn_send.grow(inc).map_err(|e| e.to_frame_error(0))?;
            self.events.push_back(ClientEvent::WindowOpen { stream: 0 });
            return Ok(());
        }
        let Some(st) = self.streams.get_mut(stream) else {
            // Closed or reset since: the server had not heard yet.
            return Ok(());
        };
        if st.send.grow(inc).is_err() {
            self.stream_error(stream, ErrorCode::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if st.state.can_send() {
            self.events.push_back(ClientEvent::WindowOpen { stream });
        }
        Ok(())
    }

    /// §6.8: streams above `last_stream` were not processed; they end here
    /// with REFUSED_STREAM so that the application retries them elsewhere.
    /// The others go on to their end.
    pub(super) fn on_goaway(&mut self, last_stream: u32, code: ErrorCode) {
        self.going_away = true;
        // A rare event: a list of the ids is fine here.
        let mut refused: Vec<u32> = self
            .streams
            .iter_mut()
            .map(|(id, _)| id)
            .filter(|&id| id > last_stream)
            .collect();
        refused.sort_unstable();
        for stream in refused {
            self.streams.remove(stream);
            self.events.push_back(ClientEvent::Reset {
                stream,
                code: ErrorCode::REFUSED_STREAM,
            });
        }
        self.events
            .push_back(ClientEvent::GoAway { last_stream, code });
    }

    /// A stream broke a stream-level rule: reset it, forget it, and tell
    /// the application.
    pub(super) fn stream_error(&mut self, stream: u32, code: ErrorCode) {
        // Idle or not ours: nothing to reset (§6.4).
        if self.never_opened(stream) {
            return;
        }
        encode_rst_stream(&mut self.out.buf, stream, code);
        if self.streams.remove(stream).is_some() {
            self.events.push_back(ClientEvent::Reset { stream, code });
        }
    }
}
