//! The application's commands on a client connection: requests, their body and trailers, resets, window releases, GOAWAY.

use bytes::Bytes;

use super::client::{ClientConn, MAX_STREAM_ID};
use super::errors::SendError;
use super::shared::{send_capacity, sendable};
use super::streams::Stream;
use crate::frame::{
    begin_headers, encode_goaway, encode_rst_stream, encode_window_update, finish_headers,
};
use crate::stream_state::StreamState;
use crate::window::{RecvWindow, Window};
use crate::ErrorCode;

impl ClientConn {
    /// Opens a stream with a request head: `:method`, `:scheme`,
    /// `:authority` (left out when empty), `:path`, then `fields` as
    /// `(name, value, never_index)`. Names must be lowercase and
    /// connection-specific fields removed: the caller's job. Returns the
    /// stream id. Refused (nothing queued) at the server's stream limit,
    /// after a GOAWAY either way, and once stream ids run out: the caller
    /// queues the request or uses another connection.
    ///
    /// The limit counts streams still in our map; one we reset may still
    /// count at the server until our RST_STREAM reaches it, in which case
    /// the server answers REFUSED_STREAM, which is safe to retry.
    pub fn send_request<'a>(
        &mut self,
        method: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
        end_stream: bool,
    ) -> Result<u32, SendError> {
        self.open_check()?;
        let stream = self.open_stream(end_stream, method == b"HEAD");
        let buf = &mut self.core.out.buf;
        let mark = begin_headers(buf);
        self.core.encoder.begin_block(buf);
        self.core
            .encoder
            .encode_field(b":method", method, false, buf);
        self.core
            .encoder
            .encode_field(b":scheme", scheme, false, buf);
        if !authority.is_empty() {
            self.core
                .encoder
                .encode_field(b":authority", authority, false, buf);
        }
        self.core.encoder.encode_field(b":path", path, false, buf);
        for (name, value, never_index) in fields {
            self.core
                .encoder
                .encode_field(name, value, never_index, buf);
        }
        finish_headers(buf, mark, stream, end_stream, self.core.peer_max_frame);
        Ok(stream)
    }

    /// Opens a CONNECT stream (RFC 9113 §8.5): `:method CONNECT` and
    /// `:authority` alone, then `fields`; its DATA are the tunnel's bytes
    /// once a 2xx answers it. With `extended` (`protocol`, `scheme`,
    /// `path`: RFC 8441's extended CONNECT, e.g. WebSocket), refused while
    /// the server's SETTINGS say it does not take one; sent when they have
    /// not come yet (a new connection's first streams go before them).
    pub fn send_connect<'a>(
        &mut self,
        authority: &[u8],
        extended: Option<(&[u8], &[u8], &[u8])>,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
    ) -> Result<u32, SendError> {
        if extended.is_some() && self.peer_extended_connect == Some(false) {
            return Err(SendError::NoExtendedConnect);
        }
        self.open_check()?;
        let stream = self.open_stream(false, false);
        let buf = &mut self.core.out.buf;
        let mark = begin_headers(buf);
        let enc = &mut self.core.encoder;
        enc.begin_block(buf);
        enc.encode_field(b":method", b"CONNECT", false, buf);
        if let Some((_, scheme, _)) = extended {
            enc.encode_field(b":scheme", scheme, false, buf);
        }
        enc.encode_field(b":authority", authority, false, buf);
        if let Some((protocol, _, path)) = extended {
            enc.encode_field(b":path", path, false, buf);
            enc.encode_field(b":protocol", protocol, false, buf);
        }
        for (name, value, never_index) in fields {
            enc.encode_field(name, value, never_index, buf);
        }
        finish_headers(buf, mark, stream, false, self.core.peer_max_frame);
        Ok(stream)
    }

    /// A new stream whose HEADERS go now (`end_stream`: with END_STREAM;
    /// `head_request`: a HEAD's, whose response has no body): its id.
    fn open_stream(&mut self, end_stream: bool, head_request: bool) -> u32 {
        let stream = self.next_id;
        self.next_id += 2;
        let mut state = StreamState::Idle;
        state.send_headers(end_stream);
        self.streams.insert(
            stream,
            Stream {
                state,
                send: Window::new(self.core.peer_initial),
                recv: RecvWindow::new(self.core.local_initial),
                content_left: None,
                head_done: false,
                head_request,
            },
        );
        stream
    }

    /// Why no stream can be opened now, if none can.
    pub(super) fn open_check(&self) -> Result<(), SendError> {
        if self.going_away || self.dead.is_some() {
            Err(SendError::GoingAway)
        } else if self.next_id > MAX_STREAM_ID {
            Err(SendError::IdsExhausted)
        } else if self.streams.len() >= self.peer_max_streams as usize {
            Err(SendError::TooManyStreams)
        } else {
            Ok(())
        }
    }

    /// Sends as much of `data` as the windows and the server's
    /// MAX_FRAME_SIZE allow, split off the front of `data` without copying,
    /// and returns how many bytes went. 0 (with `data` not empty) means:
    /// wait for [`ClientEvent::WindowOpen`](super::ClientEvent). END_STREAM
    /// goes out only with the last of `data`.
    pub fn send_data(
        &mut self,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> Result<usize, SendError> {
        let st = sendable(self.streams.get_mut(stream))?;
        let sent = self.core.send_data_frames(st, stream, data, end_stream);
        self.streams.remove_if_closed(stream);
        Ok(sent)
    }

    /// Ends the request with a trailer section.
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        let st = sendable(self.streams.get_mut(stream))?;
        st.state.send_data(true);
        self.core.encode_trailers(stream, fields);
        self.streams.remove_if_closed(stream);
        Ok(())
    }

    /// What `send_data` could send on `stream` right now.
    pub fn send_capacity(&self, stream: u32) -> usize {
        send_capacity(&self.streams, self.core.conn_send, stream)
    }

    /// Resets the stream (the application gave up on it). No event
    /// follows; frames the server had in flight are dropped. False if the
    /// stream had already ended (nothing was sent).
    pub fn reset(&mut self, stream: u32, code: ErrorCode) -> bool {
        let Some(mut st) = self.streams.remove(stream) else {
            return false;
        };
        st.state.send_reset();
        encode_rst_stream(&mut self.core.out.buf, stream, code);
        true
    }

    /// The application is done with `n` bytes of DATA received on
    /// `stream`. Call it for every byte received, also after the stream
    /// ended or was reset, or the connection window shrinks for good.
    pub fn release(&mut self, stream: u32, n: u32) {
        self.core.release(&mut self.streams, stream, n);
    }

    /// Lets the server have `n` more bytes of `stream`'s response in flight
    /// than the initial window (the application has room for them): the
    /// stream's window grows by `n` at once, with a WINDOW_UPDATE. Why not
    /// just announce a large initial window: every stream would get it,
    /// also those whose client never reads; growing only streams that flow
    /// bounds what unread responses hold. False (nothing sent) if the
    /// stream is gone or its response has ended.
    pub fn grant(&mut self, stream: u32, n: u32) -> bool {
        let Some(st) = self.streams.get_mut(stream) else {
            return false;
        };
        if !st.state.can_recv() {
            return false;
        }
        if let Some(inc) = st.recv.grow_target(n) {
            encode_window_update(&mut self.core.out.buf, stream, inc);
        }
        true
    }

    /// Sends GOAWAY: we open no more streams, and those open go on to
    /// their end. Its last stream is 0, since a client accepts none.
    pub fn go_away(&mut self, code: ErrorCode) {
        self.going_away = true;
        encode_goaway(&mut self.core.out.buf, 0, code, &[]);
    }
}
