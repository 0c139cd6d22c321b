//! What the server and client sides do alike: header block decoding, DATA in and out under flow control, window bookkeeping.

use bytes::Bytes;

use super::output::Output;
use super::streams::{Stream, StreamMap};
use super::SendError;
use crate::frame::encode_window_update;
use crate::hpack::{DecodeError, Decoder};
use crate::message::HeaderList;
use crate::stream_state::Accept;
use crate::window::{RecvWindow, Window};
use crate::{ErrorCode, FrameError};

/// Decodes `block` into `list` (which must be empty). `Ok(false)`: the list
/// is over `max` bytes and `list` holds garbage, but the HPACK table is in
/// step with the peer's; an error means it is not and the connection ends.
pub(super) fn decode_block(
    decoder: &mut Decoder,
    list: &mut HeaderList,
    block: &[u8],
    max: usize,
) -> Result<bool, FrameError> {
    match decoder.decode(block, max, |f| list.push(f.name, f.value, f.never_index)) {
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

/// Sends as much of `data` on `stream` as the windows and the peer's
/// MAX_FRAME_SIZE allow, split off its front without copying; END_STREAM
/// goes only with the last of it. Returns the bytes sent.
pub(super) fn send_data_frames(
    st: &mut Stream,
    conn_send: &mut Window,
    out: &mut Output,
    max_frame: u32,
    stream: u32,
    data: &mut Bytes,
    end_stream: bool,
) -> usize {
    let mut sent = 0;
    loop {
        let room = st.send.available().min(conn_send.available());
        let n = (room.min(max_frame) as usize).min(data.len());
        // An empty frame only to carry END_STREAM.
        if n == 0 && !(data.is_empty() && end_stream) {
            break;
        }
        let chunk = data.split_to(n);
        // Cannot fail: `n` is within both windows.
        let _ = st.send.consume(n as u32);
        let _ = conn_send.consume(n as u32);
        let last = end_stream && data.is_empty();
        out.data(stream, chunk, last);
        sent += n;
        if last {
            st.state.send_data(true);
            break;
        }
    }
    sent
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

/// Gives `n` bytes back to the connection window, with a WINDOW_UPDATE
/// when one is due.
pub(super) fn release_conn(conn_recv: &mut RecvWindow, out: &mut Output, n: u32) {
    if let Some(inc) = conn_recv.release(n) {
        encode_window_update(&mut out.buf, 0, inc);
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
