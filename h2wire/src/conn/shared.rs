//! What the server and client sides do alike: header block decoding, DATA in and out under flow control, window bookkeeping.

use std::collections::VecDeque;

use bytes::Bytes;

use super::config::DEFAULT_WINDOW;
use super::errors::SendError;
use super::output::Output;
use super::streams::{Stream, StreamMap};
use crate::frame::{
    begin_headers, encode_settings, encode_window_update, finish_headers, Settings,
    DEFAULT_MAX_FRAME_SIZE,
};
use crate::header_block::HeaderBlockAssembler;
use crate::hpack::{DecodeError, Decoder, Encoder, Field, DEFAULT_TABLE_SIZE};
use crate::message::HeaderList;
use crate::stream_state::Accept;
use crate::window::{RecvWindow, Window};
use crate::{ErrorCode, FrameError};

/// Event queue slots kept once it is empty, until `shrink`: a read can
/// bring an event or two for each of a few dozen streams, and freeing the
/// queue after each such batch meant allocating it again on the next.
const EVENTS_KEEP: usize = 64;

/// The state both sides keep alike: HPACK both ways, header block
/// assembly, the connection's windows, the SETTINGS in force and the
/// output. Header lists come from the thread's pool
/// ([`HeaderList::pooled`]), shared by the shard's connections. Streams
/// and events stay with each side.
#[derive(Debug)]
pub(super) struct ConnCore {
    pub decoder: Decoder,
    pub encoder: Encoder,
    pub assembler: HeaderBlockAssembler,
    /// Our receive window for the whole connection.
    pub conn_recv: RecvWindow,
    /// The peer's window for what we send on the connection.
    pub conn_send: Window,
    /// SETTINGS_INITIAL_WINDOW_SIZE in force on each side: ours applies
    /// once the peer acknowledged it.
    pub local_initial: u32,
    pub peer_initial: u32,
    pub peer_max_frame: u32,
    /// Our SETTINGS were acknowledged.
    pub settings_acked: bool,
    pub out: Output,
    /// DATA frames sent so far (the WINDOW_UPDATE flood limit grows with
    /// them).
    pub data_frames_sent: u64,
}

impl ConnCore {
    /// Queues our SETTINGS `ours` after what `out` holds, and the
    /// WINDOW_UPDATE that takes the connection window to
    /// `connection_window`.
    pub fn new(
        mut out: Output,
        ours: &Settings,
        connection_window: u32,
        max_block: usize,
        max_continuations: usize,
    ) -> Self {
        encode_settings(&mut out.buf, ours);
        if connection_window > DEFAULT_WINDOW {
            encode_window_update(&mut out.buf, 0, connection_window - DEFAULT_WINDOW);
        }
        Self {
            // The peer's encoder starts at the protocol default; ours
            // applies once acknowledged.
            decoder: Decoder::new(DEFAULT_TABLE_SIZE),
            encoder: Encoder::new(),
            assembler: HeaderBlockAssembler::new(max_block, max_continuations),
            conn_recv: RecvWindow::new(connection_window),
            conn_send: Window::new(DEFAULT_WINDOW),
            local_initial: DEFAULT_WINDOW,
            peer_initial: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            settings_acked: false,
            out,
            data_frames_sent: 0,
        }
    }

    pub fn take_list(&mut self) -> HeaderList {
        HeaderList::pooled()
    }

    pub fn recycle(&mut self, list: HeaderList) {
        list.recycle();
    }

    /// Heap bytes held here (streams and events are the sides' to count).
    pub fn memory_bytes(&self) -> usize {
        self.decoder.memory_bytes()
            + self.encoder.memory_bytes()
            + self.assembler.memory_bytes()
            + self.out.memory_bytes()
    }

    /// Gives back the output buffer's spare room.
    pub fn shrink(&mut self) {
        self.out.shrink();
    }

    /// What both sides do with the peer's SETTINGS; `opened` hears of each
    /// stream that can send more now. The SETTINGS ACK is the caller's.
    pub fn apply_peer_settings(
        &mut self,
        s: &Settings,
        streams: &mut StreamMap,
        opened: impl FnMut(u32),
    ) -> Result<(), FrameError> {
        if let Some(n) = s.header_table_size {
            self.encoder.set_max_table_size(n as usize);
        }
        if let Some(n) = s.max_frame_size {
            self.peer_max_frame = n;
        }
        if let Some(new) = s.initial_window_size {
            let old = std::mem::replace(&mut self.peer_initial, new);
            apply_peer_initial(streams, old, new, opened)?;
        }
        Ok(())
    }

    /// The peer now uses our SETTINGS (`table_size` and `initial_window`
    /// are what they announced): apply what we held back until then.
    pub fn on_settings_ack(
        &mut self,
        streams: &mut StreamMap,
        table_size: u32,
        initial_window: u32,
    ) {
        if std::mem::replace(&mut self.settings_acked, true) {
            return;
        }
        self.decoder.set_max_table_size(table_size as usize);
        let (old, new) = (self.local_initial, initial_window);
        self.local_initial = new;
        apply_local_initial(streams, old, new);
    }

    /// Gives `n` received bytes on `stream` back to the windows.
    pub fn release(&mut self, streams: &mut StreamMap, stream: u32, n: u32) {
        if n == 0 {
            return;
        }
        self.release_conn(n);
        release_stream(streams, &mut self.out, stream, n);
    }

    /// Gives `n` bytes back to the connection window, with a WINDOW_UPDATE
    /// when one is due.
    pub fn release_conn(&mut self, n: u32) {
        if let Some(inc) = self.conn_recv.release(n) {
            encode_window_update(&mut self.out.buf, 0, inc);
        }
    }

    /// Sends as much of `data` on `stream` as the windows and the peer's
    /// MAX_FRAME_SIZE allow, split off its front without copying; END_STREAM
    /// goes only with the last of it. Returns the bytes sent.
    pub fn send_data_frames(
        &mut self,
        st: &mut Stream,
        stream: u32,
        data: &mut Bytes,
        end_stream: bool,
    ) -> usize {
        let mut sent = 0;
        loop {
            let room = st.send.available().min(self.conn_send.available());
            let n = (room.min(self.peer_max_frame) as usize).min(data.len());
            // An empty frame only to carry END_STREAM.
            if n == 0 && !(data.is_empty() && end_stream) {
                break;
            }
            let chunk = data.split_to(n);
            // Cannot fail: `n` is within both windows.
            let _ = st.send.consume(n as u32);
            let _ = self.conn_send.consume(n as u32);
            let last = end_stream && data.is_empty();
            self.out.data(stream, chunk, last);
            self.data_frames_sent += 1;
            sent += n;
            if last {
                st.state.send_data(true);
                break;
            }
        }
        sent
    }

    /// Queues a trailer section that ends `stream`.
    pub fn encode_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        let buf = &mut self.out.buf;
        let mark = begin_headers(buf);
        self.encoder.begin_block(buf);
        for (name, value) in fields {
            self.encoder.encode_field(name, value, false, buf);
        }
        finish_headers(buf, mark, stream, true, self.peer_max_frame);
    }
}

/// The next event, giving back the queue's memory after a burst.
pub(super) fn pop_event<E>(events: &mut VecDeque<E>) -> Option<E> {
    let e = events.pop_front();
    if e.is_none() && events.capacity() > EVENTS_KEEP {
        *events = VecDeque::new();
    }
    e
}

/// Decodes `block` into `list` (which must be empty). `Ok(false)`: the list
/// is over `max` bytes and `list` holds garbage, but the HPACK table is in
/// step with the peer's; an error means it is not and the connection ends.
pub(super) fn decode_block(
    decoder: &mut Decoder,
    list: &mut HeaderList,
    block: &[u8],
    max: usize,
) -> Result<bool, FrameError> {
    decode_with(decoder, block, max, |f| {
        list.push(f.name, f.value, f.never_index)
    })
}

/// [`decode_block`] with each field handed to `sink`.
pub(super) fn decode_with(
    decoder: &mut Decoder,
    block: &[u8],
    max: usize,
    sink: impl FnMut(Field<'_>),
) -> Result<bool, FrameError> {
    match decoder.decode(block, max, sink) {
        Ok(()) => Ok(true),
        Err(DecodeError::HeaderListTooLarge) => Ok(false),
        Err(e) => Err(FrameError::Connection {
            code: e.code(),
            reason: "header block does not decode",
        }),
    }
}

/// What to do with a DATA frame on a stream we know.
pub(super) enum DataVerdict {
    Deliver,
    /// The stream was reset by us: drop it, release the connection window.
    Drop,
    /// It breaks a stream rule: reset the stream with this code.
    Reset(ErrorCode),
}

/// The stream-level checks of a DATA frame of `len` payload bytes
/// (`flow_len` with padding): state, stream window, content-length. The
/// connection window was charged already.
pub(super) fn check_data(
    st: &mut Stream,
    stream: u32,
    end_stream: bool,
    flow_len: u32,
    len: usize,
) -> Result<DataVerdict, FrameError> {
    match st.state.recv_data(stream, end_stream) {
        Ok(Accept::Deliver) => {}
        Ok(Accept::Ignore) => return Ok(DataVerdict::Drop),
        Err(FrameError::Stream { code, .. }) => return Ok(DataVerdict::Reset(code)),
        Err(e) => return Err(e),
    }
    if st.recv.receive(flow_len).is_err() {
        return Ok(DataVerdict::Reset(ErrorCode::FLOW_CONTROL_ERROR));
    }
    if let Some(left) = &mut st.content_left {
        // §8.1.1: more or less body than content-length said.
        match left.checked_sub(len as u64) {
            Some(l) if !(end_stream && l != 0) => *left = l,
            _ => return Ok(DataVerdict::Reset(ErrorCode::PROTOCOL_ERROR)),
        }
    }
    Ok(DataVerdict::Deliver)
}

/// What a stream offers for sending right now.
pub(super) fn send_capacity(streams: &StreamMap, conn_send: Window, stream: u32) -> usize {
    match streams.get(stream) {
        Some(st) if st.state.can_send() => st.send.available().min(conn_send.available()) as usize,
        _ => 0,
    }
}

/// The peer changed SETTINGS_INITIAL_WINDOW_SIZE: every stream's send
/// window moves by the difference; `opened` hears of each stream that can
/// send more now.
pub(super) fn apply_peer_initial(
    streams: &mut StreamMap,
    old: u32,
    new: u32,
    mut opened: impl FnMut(u32),
) -> Result<(), FrameError> {
    for (id, st) in streams.iter_mut() {
        // §6.9.2: an overflow here is a connection error.
        st.send
            .apply_initial_size_change(old, new)
            .map_err(|e| e.to_frame_error(0))?;
        if new > old && st.state.can_send() && st.send.available() > 0 {
            opened(id);
        }
    }
    Ok(())
}

/// The peer acknowledged our SETTINGS_INITIAL_WINDOW_SIZE.
pub(super) fn apply_local_initial(streams: &mut StreamMap, old: u32, new: u32) {
    for (_, st) in streams.iter_mut() {
        // Cannot overflow: `new` is at most 2^31-1 and the window never
        // exceeds its target.
        let _ = st.recv.apply_initial_size_change(old, new);
    }
}

/// Gives `n` bytes back to the stream's window, if the peer may still
/// send on it.
pub(super) fn release_stream(streams: &mut StreamMap, out: &mut Output, stream: u32, n: u32) {
    if let Some(st) = streams.get_mut(stream) {
        // Once the peer ended the stream its window no longer matters.
        if st.state.can_recv() {
            if let Some(inc) = st.recv.release(n) {
                encode_window_update(&mut out.buf, stream, inc);
            }
        }
    }
}

/// The stream, if we may still send on it.
pub(super) fn sendable(st: Option<&mut Stream>) -> Result<&mut Stream, SendError> {
    match st {
        None => Err(SendError::UnknownStream),
        Some(st) if !st.state.can_send() => Err(SendError::Ended),
        Some(st) => Ok(st),
    }
}

/// A frame error that ends the connection, as code and reason.
pub(super) fn conn_err(e: FrameError) -> (ErrorCode, &'static str) {
    match e {
        FrameError::Connection { code, reason } => (code, reason),
        // Callers turn stream errors into resets before this; one getting
        // here would be a bug, and ending the connection is the safe side.
        FrameError::Stream { code, reason, .. } => (code, reason),
    }
}
