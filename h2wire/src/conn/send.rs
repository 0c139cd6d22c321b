//! The application's commands: response heads, body and trailers, resets, window releases, GOAWAY.

use bytes::Bytes;

use super::errors::SendError;
use super::server::ServerConn;
use super::shared::{send_capacity, sendable};
use crate::frame::{begin_headers, encode_goaway, encode_rst_stream, finish_headers};
use crate::ErrorCode;

impl ServerConn {
    /// Sends the response head: `:status` then `fields` (names in
    /// lowercase, connection-specific fields left out: both are the
    /// caller's job). A 1xx status may come before the final one.
    pub fn send_headers<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), SendError> {
        let informational = status < 200;
        if !(100..=999).contains(&status) || (informational && end_stream) {
            return Err(SendError::BadStatus);
        }
        let st = sendable(self.streams.get_mut(stream))?;
        if st.head_done {
            return Err(SendError::HeadersSent);
        }
        st.head_done = !informational;
        st.state.send_headers(end_stream);
        let digits = [
            b'0' + (status / 100) as u8,
            b'0' + (status / 10 % 10) as u8,
            b'0' + (status % 10) as u8,
        ];
        let buf = &mut self.core.out.buf;
        let mark = begin_headers(buf);
        self.core.encoder.begin_block(buf);
        self.core
            .encoder
            .encode_field(b":status", &digits, false, buf);
        for (name, value) in fields {
            self.core.encoder.encode_field(name, value, false, buf);
        }
        finish_headers(buf, mark, stream, end_stream, self.core.peer_max_frame);
        self.streams.remove_if_closed(stream);
        Ok(())
    }

    /// Sends as much of `data` as the stream's and the connection's windows
    /// and the peer's MAX_FRAME_SIZE allow, split off the front of `data`
    /// without copying, and returns how many bytes went. 0 (with `data` not
    /// empty) means: wait for [`Event::WindowOpen`](super::Event). END_STREAM
    /// goes out only with the last of `data`.
    pub fn send_data(
        &mut self,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> Result<usize, SendError> {
        let st = sendable(self.streams.get_mut(stream))?;
        if !st.head_done {
            return Err(SendError::NoHeaders);
        }
        let sent = self.core.send_data_frames(st, stream, data, end_stream);
        self.streams.remove_if_closed(stream);
        Ok(sent)
    }

    /// Ends the response with a trailer section.
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        let st = sendable(self.streams.get_mut(stream))?;
        if !st.head_done {
            return Err(SendError::NoHeaders);
        }
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
    /// follows; frames the peer had in flight are dropped.
    pub fn reset(&mut self, stream: u32, code: ErrorCode) {
        if let Some(mut st) = self.streams.remove(stream) {
            st.state.send_reset();
            encode_rst_stream(&mut self.core.out.buf, stream, code);
            self.recently_reset.push(stream);
        }
    }

    /// The application is done with `n` bytes of DATA received on
    /// `stream`: they go back to the windows, and WINDOW_UPDATEs go out
    /// when half a window's worth has come back. Call it for every byte
    /// received, also after the stream ended or was reset.
    pub fn release(&mut self, stream: u32, n: u32) {
        self.core.release(&mut self.streams, stream, n);
    }

    /// The first GOAWAY of a graceful shutdown (RFC 9113 §6.8): last
    /// stream id 2^31−1, NO_ERROR. The client opens no new streams, and
    /// those already on their way are still taken; a later
    /// [`go_away`](Self::go_away) names the last stream processed.
    pub fn shutdown_notice(&mut self) {
        encode_goaway(
            &mut self.core.out.buf,
            (1 << 31) - 1,
            ErrorCode::NO_ERROR,
            &[],
        );
    }

    /// Sends GOAWAY naming the last stream we processed: streams the client
    /// opens after it are ignored (§6.8), those up to it go on. Once the
    /// open streams are done the driver may close the connection. May be
    /// called again (e.g. with an error code); the last stream never grows.
    pub fn go_away(&mut self, code: ErrorCode) {
        let last = self
            .goaway_last
            .map_or(self.highest, |l| l.min(self.highest));
        self.goaway_last = Some(last);
        encode_goaway(&mut self.core.out.buf, last, code, &[]);
    }
}
