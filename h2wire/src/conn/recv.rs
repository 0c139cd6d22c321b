//! Frames as a server reads them: its [`Dispatch`] hooks (the preface, new requests and trailers, DATA and its flow control, SETTINGS).

use bytes::{Buf, Bytes, BytesMut};

use super::config::UnderscoreAction;
use super::dispatch::{ConnResult, Dispatch};
use super::events::Event;
use super::limits::Inbound;
use super::server::{Phase, ServerConn};
use super::shared::{decode_with, ConnCore};
use super::streams::{Stream, StreamMap};
use crate::frame::{encode_rst_stream, encode_settings_ack, Frame, Settings, CLIENT_PREFACE};
use crate::message::{check_request, check_trailers, HeaderList};
use crate::stream_state::{Accept, StreamState};
use crate::window::RecvWindow;
use crate::{ErrorCode, FrameError};

/// What a decoded block amounted to.
enum Decoded {
    Fine(HeaderList),
    /// Over SETTINGS_MAX_HEADER_LIST_SIZE; the tables are still in step.
    TooLarge,
    /// Over `max_headers_count`.
    TooMany,
    /// A field name with an underscore, under `UnderscoreAction::Reject`.
    Underscore,
}

impl Dispatch for ServerConn {
    const PUSH_PROMISE: &'static str = "PUSH_PROMISE from a client";
    const DATA_UNOPENED: &'static str = "DATA on an idle stream";
    const DATA_AFTER_HEAD: bool = false;

    fn max_frame_size(&self) -> u32 {
        self.cfg.max_frame_size
    }

    fn parts(&mut self) -> (&mut ConnCore, &mut StreamMap) {
        (&mut self.core, &mut self.streams)
    }

    fn opened(&self) -> bool {
        self.phase == Phase::Frames
    }

    /// The client preface; fails on the first wrong byte rather than wait
    /// for 24: an HTTP/1 client may send less and wait for an answer.
    fn recv_opening(&mut self, buf: &mut BytesMut) -> Result<bool, (ErrorCode, &'static str)> {
        if self.phase != Phase::Preface {
            return Ok(true);
        }
        let n = buf.len().min(CLIENT_PREFACE.len());
        if buf[..n] != CLIENT_PREFACE[..n] {
            return Err((ErrorCode::PROTOCOL_ERROR, "invalid client preface"));
        }
        if n < CLIENT_PREFACE.len() {
            return Ok(false);
        }
        buf.advance(n);
        self.phase = Phase::FirstSettings;
        Ok(true)
    }

    fn check_first(&mut self, frame: &Frame) -> ConnResult {
        if self.phase == Phase::FirstSettings {
            if !matches!(frame, Frame::Settings(_)) {
                return Err((ErrorCode::PROTOCOL_ERROR, "first frame is not SETTINGS"));
            }
            self.phase = Phase::Frames;
        }
        Ok(())
    }

    /// Client streams are odd; one above the highest seen is idle.
    fn never_opened(&self, stream: u32) -> bool {
        stream > self.highest
    }

    /// A complete header block on `stream`: a new request or trailers.
    fn on_header_block(
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
        self.inbound.opened += 1;
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
                self.counts.header_overflow += 1;
                self.answer_431(stream, end_stream);
                return Ok(());
            }
            refused => {
                self.refuse(stream, refused);
                return Ok(());
            }
        };
        let content_length = match check_request(&head) {
            // `:protocol` is malformed unless we announced
            // SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3).
            Ok(h) if h.protocol.is_none() || self.cfg.enable_connect_protocol => h.content_length,
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
                send: crate::window::Window::new(self.core.peer_initial),
                recv: RecvWindow::new(self.core.local_initial),
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

    fn on_settings(&mut self, s: &Settings) -> Result<(), FrameError> {
        let events = &mut self.events;
        self.core
            .apply_peer_settings(s, &mut self.streams, |stream| {
                events.push_back(Event::WindowOpen { stream });
            })?;
        encode_settings_ack(&mut self.core.out.buf);
        Ok(())
    }

    fn on_settings_ack(&mut self) {
        let (table, window) = (self.cfg.header_table_size, self.cfg.initial_stream_window);
        self.core.on_settings_ack(&mut self.streams, table, window);
    }

    /// Late HEADERS on it are then told apart from a reused stream id.
    fn reset_sent(&mut self, stream: u32) {
        self.recently_reset.push(stream);
    }

    /// Only DATA crossing our own RST_STREAM: a client sending on a
    /// stream it ended itself is told STREAM_CLOSED.
    fn late_data_ignored(&self, stream: u32) -> bool {
        self.recently_reset.contains(stream)
    }

    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode) {
        self.events.push_back(Event::GoAway { last_stream, code });
    }

    fn reset_event(&mut self, stream: u32, code: ErrorCode) {
        self.events.push_back(Event::Reset { stream, code });
    }

    fn window_event(&mut self, stream: u32) {
        self.events.push_back(Event::WindowOpen { stream });
    }

    fn data_event(&mut self, stream: u32, data: Bytes, end_stream: bool) {
        self.events.push_back(Event::Data {
            stream,
            data,
            end_stream,
        });
    }

    fn track_inbound(&mut self, what: Inbound) -> ConnResult {
        self.track(what)
    }
}

impl ServerConn {
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
                self.counts.header_overflow += 1;
                self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
                return Ok(());
            }
            refused => {
                self.refuse(stream, refused);
                return Ok(());
            }
        };
        let Some(st) = self.streams.get_mut(stream) else {
            return Ok(());
        };
        // The state first: HEADERS after the request ended (half-closed
        // remote) is STREAM_CLOSED whatever the block holds (§5.1).
        let accept = st.state.recv_headers(stream, end_stream);
        // Trailers end the request (§8.1); HEADERS without END_STREAM here
        // would be a second head, which requests do not have.
        let ok = end_stream
            && check_trailers(&fields).is_ok()
            && matches!(st.content_left, None | Some(0));
        if !ok && accept.is_ok() {
            self.recycle(fields);
            self.stream_error(stream, ErrorCode::PROTOCOL_ERROR);
            return Ok(());
        }
        match accept {
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

    /// Decodes a header block, applying `max_headers_count` and the
    /// underscore action as Envoy does: field by field, a dropped field
    /// not counted, the first field over a limit deciding. Each `cookie`
    /// crumb counts as a field (Envoy 1.40 resets a request whose crumbs
    /// take it past the limit).
    fn decode(&mut self, block: &[u8]) -> Result<Decoded, FrameError> {
        let mut list = self.take_list();
        let max = self.cfg.max_header_list_size as usize;
        let max_count = self
            .cfg
            .max_headers_count
            .map_or(usize::MAX, |n| n as usize);
        let action = self.cfg.headers_with_underscores;
        let (mut count, mut dropped, mut refused) = (0usize, 0u32, None);
        let decoded = decode_with(&mut self.core.decoder, block, max, |f| {
            if refused.is_some() {
                return;
            }
            if action != UnderscoreAction::Allow && f.name.contains(&b'_') {
                if action == UnderscoreAction::Drop {
                    dropped += 1;
                } else {
                    refused = Some(Decoded::Underscore);
                }
                return;
            }
            count += 1;
            if count > max_count {
                refused = Some(Decoded::TooMany);
                return;
            }
            list.push(f.name, f.value, f.never_index);
        });
        self.counts.dropped_headers_with_underscores += dropped;
        let verdict = match (decoded, refused) {
            (Ok(true), None) => return Ok(Decoded::Fine(list)),
            (Ok(true), Some(refused)) => Ok(refused),
            (Ok(false), _) => Ok(Decoded::TooLarge),
            (Err(e), _) => Err(e),
        };
        self.recycle(list);
        verdict
    }

    fn recycle_decoded(&mut self, d: Decoded) {
        if let Decoded::Fine(list) = d {
            self.recycle(list);
        }
    }

    /// A header section over `max_headers_count`, or with an underscore
    /// under `UnderscoreAction::Reject`: Envoy resets the stream with
    /// INTERNAL_ERROR (its codec fails the header callback), and counts it.
    fn refuse(&mut self, stream: u32, why: Decoded) {
        match why {
            Decoded::Underscore => self.counts.rejected_with_underscores += 1,
            _ => self.counts.header_overflow += 1,
        }
        self.recycle_decoded(why);
        self.stream_error(stream, ErrorCode::INTERNAL_ERROR);
    }

    /// Answers a request whose header list is over our limit with 431
    /// (RFC 6585 §5) without bothering the application.
    fn answer_431(&mut self, stream: u32, end_stream: bool) {
        let buf = &mut self.core.out.buf;
        let mark = crate::frame::begin_headers(buf);
        self.core.encoder.begin_block(buf);
        self.core
            .encoder
            .encode_field(b":status", b"431", false, buf);
        crate::frame::finish_headers(buf, mark, stream, true, self.core.peer_max_frame);
        if !end_stream {
            // §8.1: the response is complete, so stop the request body
            // without calling it an error.
            encode_rst_stream(&mut self.core.out.buf, stream, ErrorCode::NO_ERROR);
            self.recently_reset.push(stream);
        }
    }
}
