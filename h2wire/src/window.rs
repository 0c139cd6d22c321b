//! Flow-control windows (RFC 9113 §6.9): the arithmetic both directions share
//! and the receive-side policy that decides when a WINDOW_UPDATE is worth
//! sending.

use crate::error::{ErrorCode, FrameError};
use crate::frame::MAX_WINDOW;

/// A flow-control window. Signed because a SETTINGS_INITIAL_WINDOW_SIZE
/// decrease applies to open streams at once and may leave them below zero
/// (§6.9.2): the sender then waits for WINDOW_UPDATEs to bring it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(i64);

/// The peer sent more DATA than the window allowed: a FLOW_CONTROL_ERROR
/// (§6.9.1) on the stream or the connection whose window it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowExceeded;

/// A window would exceed 2^31−1: a FLOW_CONTROL_ERROR (§6.9.1), on the
/// stream or the connection whose window it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowOverflow;

impl Window {
    pub fn new(initial: u32) -> Self {
        Self(i64::from(initial.min(MAX_WINDOW)))
    }

    /// What may be sent (or received) now; zero while the window is negative.
    pub fn available(self) -> u32 {
        // Never above MAX_WINDOW, so the cast is exact.
        self.0.clamp(0, i64::from(MAX_WINDOW)) as u32
    }

    /// The signed value, for tests and diagnostics.
    pub fn value(self) -> i64 {
        self.0
    }

    /// `n` bytes sent or received. Returns false, changing nothing, when `n`
    /// is more than the window allows: on the receive side the peer broke
    /// flow control (FLOW_CONTROL_ERROR); on the send side it is our bug.
    #[must_use]
    pub fn consume(&mut self, n: u32) -> bool {
        if i64::from(n) > self.0 {
            return false;
        }
        self.0 -= i64::from(n);
        true
    }

    /// A WINDOW_UPDATE of `increment` (§6.9.1).
    pub fn grow(&mut self, increment: u32) -> Result<(), WindowOverflow> {
        let next = self.0 + i64::from(increment);
        if next > i64::from(MAX_WINDOW) {
            return Err(WindowOverflow);
        }
        self.0 = next;
        Ok(())
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE changed from `old` to `new`: every open
    /// stream's window moves by the difference (§6.9.2). The connection
    /// window is not affected by this setting.
    pub fn apply_initial_size_change(&mut self, old: u32, new: u32) -> Result<(), WindowOverflow> {
        let next = self.0 + i64::from(new) - i64::from(old);
        if next > i64::from(MAX_WINDOW) {
            return Err(WindowOverflow);
        }
        self.0 = next;
        Ok(())
    }
}

impl WindowOverflow {
    /// The error to send: on a stream it resets that stream, on stream 0 the
    /// connection goes (§6.9.1).
    pub fn to_frame_error(self, stream: u32) -> FrameError {
        if stream == 0 {
            FrameError::conn(
                ErrorCode::FLOW_CONTROL_ERROR,
                "connection window above 2^31-1",
            )
        } else {
            FrameError::stream(
                stream,
                ErrorCode::FLOW_CONTROL_ERROR,
                "stream window above 2^31-1",
            )
        }
    }
}

/// The receive side of one window (a stream's or the connection's): what the
/// peer may still send, and what our reader has consumed but not yet given
/// back.
///
/// Why not give bytes back as soon as they are read: one WINDOW_UPDATE per
/// DATA frame doubles the frames on the wire. Why not wait for the window to
/// empty: the sender would stall for a round trip. Half the target is the
/// usual middle (h2 and nghttp2 do the same).
#[derive(Debug, Clone, Copy)]
pub struct RecvWindow {
    window: Window,
    /// The window we want the peer to have when all is given back.
    target: u32,
    /// Consumed by our reader, not yet announced.
    released: u32,
}

impl RecvWindow {
    pub fn new(target: u32) -> Self {
        Self {
            window: Window::new(target),
            target: target.min(MAX_WINDOW),
            released: 0,
        }
    }

    /// A DATA frame of `flow_len` bytes (padding included) arrived. An error
    /// means the peer sent more than we allowed.
    pub fn receive(&mut self, flow_len: u32) -> Result<(), WindowExceeded> {
        if self.window.consume(flow_len) {
            Ok(())
        } else {
            Err(WindowExceeded)
        }
    }

    /// Our reader is done with `n` received bytes (padding counts as done on
    /// arrival). Returns the WINDOW_UPDATE increment to send now, if one is
    /// due.
    pub fn release(&mut self, n: u32) -> Option<u32> {
        self.released = self.released.saturating_add(n);
        if self.released < self.target / 2 || self.released == 0 {
            return None;
        }
        let inc = self.released;
        // Cannot overflow: released bytes were consumed from this window.
        let _ = self.window.grow(inc);
        self.released = 0;
        Some(inc)
    }

    /// Our SETTINGS_INITIAL_WINDOW_SIZE changed (stream windows only): the
    /// peer applies the difference when it acknowledges, and so do we. The
    /// target moves by the same difference, so a window grown with
    /// [`grow_target`](Self::grow_target) keeps its extra.
    pub fn apply_initial_size_change(&mut self, old: u32, new: u32) -> Result<(), WindowOverflow> {
        self.window.apply_initial_size_change(old, new)?;
        let target = i64::from(self.target) + i64::from(new) - i64::from(old);
        self.target = target.clamp(0, i64::from(MAX_WINDOW)) as u32;
        Ok(())
    }

    /// Lets the peer have up to `n` more bytes in flight from now on (the
    /// application has room for them). Returns the WINDOW_UPDATE increment
    /// to send now: the extra at once, with whatever release was pending,
    /// so the sender does not wait a batch for it. Clamped so that the
    /// window never passes 2^31−1.
    pub fn grow_target(&mut self, n: u32) -> Option<u32> {
        let room = i64::from(MAX_WINDOW) - self.window.value() - i64::from(self.released);
        let n = i64::from(n).clamp(0, room.max(0)) as u32;
        if n == 0 {
            return None;
        }
        self.target = self.target.saturating_add(n).min(MAX_WINDOW);
        let inc = self.released + n;
        // Cannot overflow: `n` was clamped to the room left.
        let _ = self.window.grow(inc);
        self.released = 0;
        Some(inc)
    }

    /// The window we want the peer to have when all is given back.
    pub fn target(&self) -> u32 {
        self.target
    }

    /// What the peer may still send.
    pub fn available(&self) -> u32 {
        self.window.available()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consume_and_grow_within_bounds() {
        let mut w = Window::new(65_535);
        assert!(w.consume(65_535));
        assert_eq!(w.available(), 0);
        assert!(!w.consume(1), "over the window changes nothing");
        assert_eq!(w.value(), 0);
        w.grow(10).unwrap();
        assert_eq!(w.available(), 10);
    }

    #[test]
    fn grow_past_max_is_an_overflow_and_changes_nothing() {
        let mut w = Window::new(MAX_WINDOW - 5);
        assert_eq!(w.grow(6), Err(WindowOverflow));
        assert_eq!(w.available(), MAX_WINDOW - 5);
        w.grow(5).unwrap();
        assert_eq!(w.available(), MAX_WINDOW);
    }

    #[test]
    fn initial_size_decrease_can_make_a_window_negative() {
        // §6.9.2: 60,000 of a 65,535 window sent, then the setting drops
        // to 16,384: the window is 16,384 - 60,000, below zero.
        let mut w = Window::new(65_535);
        assert!(w.consume(60_000));
        w.apply_initial_size_change(65_535, 16_384).unwrap();
        assert_eq!(w.value(), 16_384 - 60_000);
        assert_eq!(w.available(), 0);
        assert!(!w.consume(1));
        // Updates bring it back above zero before anything may be sent.
        w.grow(43_616).unwrap();
        assert_eq!(w.available(), 0);
        w.grow(100).unwrap();
        assert_eq!(w.available(), 100);
    }

    #[test]
    fn initial_size_increase_past_max_overflows() {
        let mut w = Window::new(MAX_WINDOW);
        assert_eq!(
            w.apply_initial_size_change(65_535, 65_536),
            Err(WindowOverflow)
        );
    }

    #[test]
    fn overflow_maps_to_stream_or_connection_error() {
        assert!(matches!(
            WindowOverflow.to_frame_error(0),
            FrameError::Connection {
                code: ErrorCode::FLOW_CONTROL_ERROR,
                ..
            }
        ));
        assert!(matches!(
            WindowOverflow.to_frame_error(7),
            FrameError::Stream {
                stream: 7,
                code: ErrorCode::FLOW_CONTROL_ERROR,
                ..
            }
        ));
    }

    #[test]
    fn recv_window_updates_at_half_the_target() {
        let mut r = RecvWindow::new(1000);
        r.receive(400).unwrap();
        assert_eq!(r.release(400), None, "below half: batch it");
        r.receive(200).unwrap();
        assert_eq!(r.available(), 400);
        assert_eq!(r.release(100), Some(500));
        assert_eq!(r.available(), 900);
        assert_eq!(r.release(0), None);
    }

    #[test]
    fn recv_window_rejects_data_beyond_it() {
        let mut r = RecvWindow::new(100);
        r.receive(100).unwrap();
        assert_eq!(r.receive(1), Err(WindowExceeded));
        // Nothing given back yet: still nothing may arrive.
        assert_eq!(r.available(), 0);
        assert_eq!(r.release(100), Some(100));
        r.receive(1).unwrap();
    }

    #[test]
    fn grown_target_is_announced_at_once_with_pending_releases() {
        let mut r = RecvWindow::new(1000);
        r.receive(300).unwrap();
        assert_eq!(r.release(300), None, "below half: batched");
        assert_eq!(r.grow_target(4000), Some(4300));
        assert_eq!(r.target(), 5000);
        assert_eq!(r.available(), 5000);
        // Batching now follows the larger target.
        r.receive(2000).unwrap();
        assert_eq!(r.release(2000), None);
        assert_eq!(r.release(500), Some(2500));
        assert_eq!(r.grow_target(0), None);
    }

    #[test]
    fn grown_target_never_takes_the_window_past_max() {
        let mut r = RecvWindow::new(MAX_WINDOW - 10);
        assert_eq!(r.grow_target(100), Some(10));
        assert_eq!(r.available(), MAX_WINDOW);
        assert_eq!(r.grow_target(1), None);
    }

    #[test]
    fn initial_size_change_keeps_a_grown_target_s_extra() {
        let mut r = RecvWindow::new(65_535);
        r.grow_target(1000).unwrap();
        r.apply_initial_size_change(65_535, 16_384).unwrap();
        assert_eq!(r.target(), 16_384 + 1000);
        assert_eq!(r.available(), 16_384 + 1000);
    }

    #[test]
    fn recv_window_follows_our_initial_size_change() {
        let mut r = RecvWindow::new(65_535);
        r.receive(1_000).unwrap();
        r.apply_initial_size_change(65_535, 1 << 20).unwrap();
        assert_eq!(r.available(), (1 << 20) - 1_000);
        // The new target sets the batching threshold.
        assert_eq!(r.release(1_000), None);
    }
}
