//! How a cluster's connections are made: protocol, TLS, reuse and HTTP/2
//! settings.

/// Which protocol a cluster's connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// `explicit_http_config.http_protocol_options`, or no protocol
    /// options at all (Envoy's default).
    Http1,
    /// `explicit_http_config.http2_protocol_options` (or the deprecated
    /// `http2_protocol_options` field).
    Http2,
    /// `auto_config`: HTTP/2 when the server's ALPN says `h2`, else
    /// HTTP/1.1; only over TLS.
    Auto,
}

impl UpstreamProtocol {
    /// The name shown in `/config_dump`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP1",
            Self::Http2 => "HTTP2",
            Self::Auto => "AUTO",
        }
    }
}

/// How a cluster reaches its hosts beyond the address: protocol, TLS,
/// connection reuse.
///
/// `Default` is HTTP/2 over cleartext, what hand-built test clusters
/// speak; a cluster from xDS with no protocol options is HTTP/1.1, as in
/// Envoy.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    pub protocol: UpstreamProtocol,
    /// `transport_socket` with an `UpstreamTlsContext`.
    pub tls: Option<std::sync::Arc<crate::tls::UpstreamTls>>,
    /// `envoy.transport_sockets.upstream_proxy_protocol` around it: each
    /// connection opens with a PROXY header naming the downstream client.
    pub proxy_protocol: Option<UpstreamProxyProtocol>,
    /// `common_http_protocol_options.max_requests_per_connection` (or the
    /// cluster's deprecated field): requests one connection carries before
    /// it is closed and replaced; `None`: no limit.
    pub max_requests_per_connection: Option<u32>,
    /// HTTP/1.1 `enable_trailers`: request trailers go out (in a chunked
    /// body) and response trailers come back; Envoy drops both without it.
    pub http1_trailers: bool,
    /// `common_http_protocol_options.idle_timeout`: a connection with no
    /// stream for this long is closed (Envoy's default 1 h; `0s`: `None`,
    /// never).
    pub idle_timeout: Option<std::time::Duration>,
}

/// Envoy's default for an upstream connection's `idle_timeout`.
pub const UPSTREAM_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl PartialEq for UpstreamOptions {
    /// Whether connections made under either would be the same: TLS
    /// contexts compare by what they were built from.
    fn eq(&self, other: &Self) -> bool {
        self.protocol == other.protocol
            && self.max_requests_per_connection == other.max_requests_per_connection
            && self.http1_trailers == other.http1_trailers
            && self.idle_timeout == other.idle_timeout
            && self.proxy_protocol == other.proxy_protocol
            && match (&self.tls, &other.tls) {
                (None, None) => true,
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
    }
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            protocol: UpstreamProtocol::Http2,
            tls: None,
            max_requests_per_connection: None,
            http1_trailers: false,
            idle_timeout: Some(UPSTREAM_IDLE_TIMEOUT),
            proxy_protocol: None,
        }
    }
}

/// `ProxyProtocolUpstreamTransport`: the PROXY header a cluster's
/// connections open with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamProxyProtocol {
    /// `config.version`: v2 (binary) or v1 (text).
    pub v2: bool,
    /// `config.pass_through_tlvs`: the downstream header's TLVs passed on
    /// (those the listener's filter kept).
    pub pass_through: crate::TlvSelection,
    /// `config.added_tlvs` (v2): `(type, value)`, sent first.
    pub added_tlvs: Vec<(u8, Vec<u8>)>,
}

/// `HttpProtocolOptions.explicit_http_config.http2_protocol_options`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamHttp2 {
    /// Our own cap on streams per upstream connection; the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS can lower it further.
    pub max_concurrent_streams: u32,
    pub initial_stream_window_size: u32,
    pub initial_connection_window_size: u32,
}

impl Default for UpstreamHttp2 {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 1024,
            initial_stream_window_size: 256 * 1024,
            // Envoy's default. A connection carries at most
            // `connection window / stream window` streams (1024 here), so
            // streams whose readers stall never starve the others; the
            // window costs memory only for data actually in flight.
            initial_connection_window_size: 256 * 1024 * 1024,
        }
    }
}
