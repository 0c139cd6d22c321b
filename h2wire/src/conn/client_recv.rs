//! Frames as a client reads them: its [`Dispatch`] hooks (response heads, 1xx and final, trailers, DATA and its flow control, SETTINGS, GOAWAY).

use bytes::Bytes;

use super::client::ClientConn;
use super::dispatch::{ConnResult, Dispatch};
use super::events::ClientEvent;
use super::shared::{decode_block, ConnCore};
use super::streams::StreamMap;
use crate::frame::{encode_rst_stream, encode_settings_ack, Frame, Settings};
use crate::message::{check_response, check_trailers, HeaderList};
use crate::stream_state::Accept;
use crate::{ErrorCode, FrameError};

impl Dispatch for ClientConn {
    const PUSH_PROMISE: &'static str = "PUSH_PROMISE with push disabled";
    const DATA_UNOPENED: &'static str = "DATA on a stream the client did not open";
    const DATA_AFTER_HEAD: bool = true;

    fn max_frame_size(&self) -> u32 {
        self.cfg.max_frame_size
    }

    fn parts(&mut self) -> (&mut ConnCore, &mut StreamMap) {
        (&mut self.core, &mut self.streams)
    }

    fn opened(&self) -> bool {
        self.got_settings
    }

    /// `got_settings` is set by [`on_settings`](Dispatch::on_settings).
    fn check_first(&mut self, frame: &Frame) -> ConnResult {
        if !self.got_settings && !matches!(frame, Frame::Settings(_)) {
            return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
        }
        Ok(())
    }

    /// Whether `stream` is one the server may not use: even (push is off)
    /// or not opened by us yet. Frames on it are connection errors (§5.1).
    fn never_opened(&self, stream: u32) -> bool {
        stream & 1 == 0 || stream > self.highest()
    }

    /// A complete header block on `stream`: a response head or trailers.
    fn on_header_block(
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
        let fits = match decode_block(&mut self.core.decoder, &mut list, block, max) {
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
            encode_rst_stream(&mut self.core.out.buf, stream, ErrorCode::CANCEL);
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

    fn on_settings(&mut self, s: &Settings) -> Result<(), FrameError> {
        // §6.5.2: "A client MUST treat the receipt of a SETTINGS_ENABLE_PUSH
        // setting with a value of 1 as a connection error"; 0 is fine.
        if s.enable_push == Some(true) {
            return Err(FrameError::Connection {
                code: ErrorCode::PROTOCOL_ERROR,
                reason: "ENABLE_PUSH = 1 from a server",
            });
        }
        let events = &mut self.events;
        self.core
            .apply_peer_settings(s, &mut self.streams, |stream| {
                events.push_back(ClientEvent::WindowOpen { stream });
            })?;
        let first = !std::mem::replace(&mut self.got_settings, true);
        match s.enable_connect_protocol {
            Some(on) => self.peer_extended_connect = Some(on),
            None if first => self.peer_extended_connect = Some(false),
            None => {}
        }
        // The assumed limit holds until the first SETTINGS; without the
        // parameter there, the RFC's initial value applies: no limit.
        let limit = match s.max_concurrent_streams {
            Some(n) => Some(n),
            None if first => Some(u32::MAX),
            None => None,
        };
        if let Some(max) = limit {
            if std::mem::replace(&mut self.peer_max_streams, max) != max {
                self.events.push_back(ClientEvent::StreamLimit { max });
            }
        }
        encode_settings_ack(&mut self.core.out.buf);
        Ok(())
    }

    fn on_settings_ack(&mut self) {
        let (table, window) = (self.cfg.header_table_size, self.cfg.initial_stream_window);
        self.core.on_settings_ack(&mut self.streams, table, window);
    }

    /// §6.8: streams above `last_stream` were not processed; they end here
    /// with REFUSED_STREAM so that the application retries them elsewhere.
    /// The others go on to their end.
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode) {
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

    fn reset_event(&mut self, stream: u32, code: ErrorCode) {
        self.events.push_back(ClientEvent::Reset { stream, code });
    }

    fn broken_event(&mut self, stream: u32, code: ErrorCode) {
        self.events.push_back(ClientEvent::Broken { stream, code });
    }

    fn window_event(&mut self, stream: u32) {
        self.events.push_back(ClientEvent::WindowOpen { stream });
    }

    fn data_event(&mut self, stream: u32, data: Bytes, end_stream: bool) {
        self.events.push_back(ClientEvent::Data {
            stream,
            data,
            end_stream,
        });
    }
}

impl ClientConn {
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
}
