//! What a connection advertises and enforces, server side and client side.

use crate::frame::{Settings, DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE, MAX_WINDOW};
use crate::hpack::DEFAULT_TABLE_SIZE;

/// The default window of RFC 9113 §6.9.2, for streams and the connection.
pub(crate) const DEFAULT_WINDOW: u32 = 65_535;

/// Limits and windows of one server connection. Values outside what the
/// protocol allows are clamped when the connection starts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: requests past it get
    /// RST_STREAM(REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much request body each stream may
    /// have in flight before the application releases some.
    pub initial_stream_window: u32,
    /// The connection's receive window, announced by a WINDOW_UPDATE right
    /// after our SETTINGS (the protocol starts it at 65 535).
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: larger requests get a 431.
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the peer's encoder may use this much of
    /// our memory for its dynamic table.
    pub header_table_size: u32,
    /// CONTINUATION frames allowed in one header block: past it the
    /// connection ends with ENHANCE_YOUR_CALM (CONTINUATION floods).
    pub max_continuations: usize,
    /// Header fields a request (or its trailers) may have, pseudo-header
    /// fields and each `cookie` crumb included, as Envoy counts them: past
    /// it the stream is reset with INTERNAL_ERROR, as Envoy does, and
    /// counted ([`super::ServerCounts::header_overflow`]). `None`: no
    /// limit.
    pub max_headers_count: Option<u32>,
    /// Request (and trailer) fields whose name holds an underscore.
    pub headers_with_underscores: UnderscoreAction,
    /// Envoy's HTTP/2 flood limits; each is off while `None`.
    pub flood: FloodLimits,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441): announced, clients may
    /// open extended CONNECT streams (`:protocol`, WebSocket over HTTP/2);
    /// without it a `:protocol` is malformed.
    pub enable_connect_protocol: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 100,
            initial_stream_window: DEFAULT_WINDOW,
            connection_window: 1 << 20,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 60 << 10,
            header_table_size: 4096,
            max_continuations: 32,
            max_headers_count: None,
            headers_with_underscores: UnderscoreAction::Allow,
            flood: FloodLimits::default(),
            enable_connect_protocol: false,
        }
    }
}

/// What a server does with request header fields whose name holds an
/// underscore (Envoy's `headers_with_underscores_action`), counted in
/// [`ServerCounts`].
///
/// [`ServerCounts`]: super::ServerCounts
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnderscoreAction {
    /// Keep them.
    #[default]
    Allow,
    /// Reset the stream with INTERNAL_ERROR (Envoy's HTTP/2 answer).
    Reject,
    /// Leave the field out of the request.
    Drop,
}

/// Envoy's HTTP/2 flood limits (`http2_protocol_options`), server side.
/// A connection past one of them ends and [`ServerConn::flood`] says
/// which; `None` turns a limit off (the default, for every one).
///
/// [`ServerConn::flood`]: super::ServerConn::flood
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FloodLimits {
    /// Frames queued and not yet written to the socket. Needs the driver
    /// to report what it wrote ([`ServerConn::check_outbound`]).
    ///
    /// [`ServerConn::check_outbound`]: super::ServerConn::check_outbound
    pub max_outbound_frames: Option<u32>,
    /// Of those, the control frames: PING and SETTINGS acknowledgements
    /// and RST_STREAM (Envoy's set).
    pub max_outbound_control_frames: Option<u32>,
    /// HEADERS, CONTINUATION and DATA frames in a row with no payload and
    /// no END_STREAM.
    pub max_consecutive_inbound_frames_with_empty_payload: Option<u32>,
    /// PRIORITY frames over the connection's life may be this times
    /// (1 + streams the client opened).
    pub max_inbound_priority_frames_per_stream: Option<u32>,
    /// WINDOW_UPDATE frames over the connection's life may be
    /// `5 + 2 * (streams opened + this * DATA frames sent)`.
    pub max_inbound_window_update_frames_per_data_frame_sent: Option<u32>,
}

impl FloodLimits {
    /// Envoy's defaults: 10000, 1000, 1, 100, 10.
    pub const ENVOY: Self = Self {
        max_outbound_frames: Some(10_000),
        max_outbound_control_frames: Some(1_000),
        max_consecutive_inbound_frames_with_empty_payload: Some(1),
        max_inbound_priority_frames_per_stream: Some(100),
        max_inbound_window_update_frames_per_data_frame_sent: Some(10),
    };

    /// Whether the outbound limits need frames counted.
    pub(crate) fn outbound(&self) -> bool {
        self.max_outbound_frames.is_some() || self.max_outbound_control_frames.is_some()
    }
}

impl ServerConfig {
    /// The same with every value within its legal range.
    pub(crate) fn clamped(mut self) -> Self {
        clamp_common(
            &mut self.initial_stream_window,
            &mut self.connection_window,
            &mut self.max_frame_size,
        );
        self
    }

    /// The largest compressed header block we assemble. Twice the list
    /// limit: blocks a little over it still decode (keeping HPACK in step)
    /// and get a 431; past that, decoding costs more than a 431 is worth
    /// and the connection ends.
    pub(crate) fn max_header_block(&self) -> usize {
        max_header_block(self.max_header_list_size)
    }

    /// The SETTINGS we announce.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            enable_connect_protocol: self.enable_connect_protocol.then_some(true),
            ..announced(
                self.max_concurrent_streams,
                self.initial_stream_window,
                self.max_frame_size,
                self.max_header_list_size,
                self.header_table_size,
            )
        }
    }
}

/// Limits and windows of one client connection (to one backend). Values
/// outside what the protocol allows are clamped when the connection starts.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: how many streams the server may
    /// push. Push is always disabled (SETTINGS_ENABLE_PUSH = 0), which makes
    /// 0, the default, the natural value; it is announced as is.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much response body each stream may
    /// have in flight before the application releases some.
    pub initial_stream_window: u32,
    /// The connection's receive window, announced by a WINDOW_UPDATE right
    /// after our SETTINGS.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: larger response heads or trailers
    /// reset their stream ([`ClientEvent::TooLarge`](super::ClientEvent)).
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: what the server's encoder may use of our
    /// memory.
    pub header_table_size: u32,
    /// CONTINUATION frames allowed in one header block, past which the
    /// connection ends with ENHANCE_YOUR_CALM.
    pub max_continuations: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 0,
            initial_stream_window: DEFAULT_WINDOW,
            connection_window: 1 << 20,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 60 << 10,
            header_table_size: 4096,
            max_continuations: 32,
        }
    }
}

impl ClientConfig {
    /// The same with every value within its legal range.
    pub(crate) fn clamped(mut self) -> Self {
        clamp_common(
            &mut self.initial_stream_window,
            &mut self.connection_window,
            &mut self.max_frame_size,
        );
        self
    }

    /// The largest compressed header block we assemble: as for the server,
    /// twice the list limit, so blocks a little over it still decode.
    pub(crate) fn max_header_block(&self) -> usize {
        max_header_block(self.max_header_list_size)
    }

    /// The SETTINGS we announce: push disabled.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            enable_push: Some(false),
            // §6.5.2: the limit on pushed streams, moot with push off;
            // 0 is announced anyway so that no server tries.
            ..announced(
                self.max_concurrent_streams,
                self.initial_stream_window,
                self.max_frame_size,
                self.max_header_list_size,
                self.header_table_size,
            )
        }
    }
}

fn max_header_block(max_header_list_size: u32) -> usize {
    (max_header_list_size as usize).saturating_mul(2)
}

/// The SETTINGS both sides announce: the limits always, the other values
/// only where they differ from the protocol's defaults.
fn announced(
    max_concurrent_streams: u32,
    initial_stream_window: u32,
    max_frame_size: u32,
    max_header_list_size: u32,
    header_table_size: u32,
) -> Settings {
    let differs = |v: u32, default: u32| (v != default).then_some(v);
    Settings {
        header_table_size: differs(header_table_size, DEFAULT_TABLE_SIZE as u32),
        max_concurrent_streams: Some(max_concurrent_streams),
        initial_window_size: differs(initial_stream_window, DEFAULT_WINDOW),
        max_frame_size: differs(max_frame_size, DEFAULT_MAX_FRAME_SIZE),
        max_header_list_size: Some(max_header_list_size),
        ..Settings::default()
    }
}

/// Clamps the values both sides share into their legal ranges.
fn clamp_common(stream_window: &mut u32, conn_window: &mut u32, max_frame: &mut u32) {
    *stream_window = (*stream_window).min(MAX_WINDOW);
    // The connection window can only grow from its initial 65 535.
    *conn_window = (*conn_window).clamp(DEFAULT_WINDOW, MAX_WINDOW);
    *max_frame = (*max_frame).clamp(DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE);
}
