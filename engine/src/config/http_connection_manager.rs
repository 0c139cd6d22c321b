//! `envoy.filters.network.http_connection_manager`: the downstream HTTP
//! settings of a listener, its route table and its HTTP filters.

use std::sync::Arc;
use std::time::Duration;

use super::access_log::AccessLog;
use super::http_filter::{HttpFilter, HttpFilterConfig};
use super::route::RouteConfig;
use super::session::StatefulSession;

/// Envoy's edge guidance for `http2_protocol_options.max_concurrent_streams`.
pub const DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Envoy's default `max_request_headers_kb` (60 KiB).
pub const DEFAULT_MAX_HEADER_LIST_SIZE: u32 = 60 * 1024;
/// Envoy's default `common_http_protocol_options.max_headers_count`.
pub const DEFAULT_MAX_HEADERS_COUNT: u32 = 100;

/// `envoy.filters.network.http_connection_manager`, the parts we implement.
#[derive(Debug, Clone)]
pub struct HttpConnectionManager {
    pub stat_prefix: String,
    /// `codec_type`: which protocols the listener speaks downstream.
    pub codec_type: CodecType,
    /// `http_protocol_options`: HTTP/1.1 downstream settings.
    pub http1: Http1Options,
    /// `access_log`: where each finished request is logged, and how.
    pub access_log: Vec<AccessLog>,
    /// The route table: inline, or the last one RDS delivered for `rds`.
    pub route_config: Arc<RouteConfig>,
    /// `rds`: the route table comes from RDS under this name (until it
    /// arrives `route_config` is an empty table of that name).
    pub rds: Option<Rds>,
    /// `http2_protocol_options.max_concurrent_streams` (per downstream connection).
    pub max_concurrent_streams: u32,
    /// `max_request_headers_kb` in bytes.
    pub max_header_list_size: u32,
    /// `common_http_protocol_options.max_headers_count` (Envoy default 100):
    /// a request (or trailer section) with more fields, pseudo-headers and
    /// each `cookie` crumb included, is reset.
    pub max_headers_count: u32,
    /// `common_http_protocol_options.headers_with_underscores_action`.
    pub headers_with_underscores_action: HeadersWithUnderscoresAction,
    /// The flood limits of `http2_protocol_options`.
    pub http2_flood: Http2FloodLimits,
    /// `http2_protocol_options.initial_stream_window_size`.
    pub initial_stream_window_size: u32,
    /// `http2_protocol_options.initial_connection_window_size`.
    pub initial_connection_window_size: u32,
    /// `local_reply_config`: how the gateway's own replies are rewritten
    /// and formatted (`None`: as they are).
    pub local_reply: Option<std::sync::Arc<super::LocalReplyConfig>>,
    /// `http2_protocol_options.allow_connect`: HTTP/2 clients are told
    /// (SETTINGS_ENABLE_CONNECT_PROTOCOL) they may open extended CONNECT
    /// streams (RFC 8441): WebSocket over HTTP/2, routed as the HTTP/1.1
    /// upgrade it stands for.
    pub allow_connect: bool,
    /// `common_http_protocol_options.idle_timeout` (Envoy default 1 h; `None` disables).
    pub idle_timeout: Option<Duration>,
    /// `stream_idle_timeout` (Envoy default 5 min; `None` disables).
    pub stream_idle_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_stream_duration`: a stream's whole
    /// life, whatever it does (unset or 0: `None`, no limit).
    pub max_stream_duration: Option<Duration>,
    /// `request_headers_timeout` (Envoy default: none): an HTTP/1.1 head
    /// must be complete this long after its first byte, else 408 and the
    /// connection closes.
    pub request_headers_timeout: Option<Duration>,
    /// `delayed_close_timeout` (Envoy default 1 s; 0: none): after a reply
    /// that closes the connection, how long it still reads and drops what
    /// the client sends, so the reply is not lost to a TCP reset.
    pub delayed_close_timeout: Duration,
    /// `request_timeout` (Envoy default: none): the whole request must
    /// be in (its last byte taken) this long after its head, unless the
    /// response started; else 408.
    pub request_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_connection_duration`: at it the
    /// connection drains (GOAWAY, then `drain_timeout`), so that clients
    /// reconnect and spread over the gateways behind an ECMP group (unset
    /// or 0: `None`, no limit).
    pub max_connection_duration: Option<Duration>,
    /// `common_http_protocol_options.max_requests_per_connection`: the
    /// connection drains once it has taken this many requests (unset or 0:
    /// `None`, no limit; approximate for HTTP/2, as in Envoy: streams the
    /// client opened before the GOAWAY reached it are still served).
    pub max_requests_per_connection: Option<u32>,
    /// `drain_timeout` for GOAWAY on reload/shutdown (Envoy default 5 s).
    pub drain_timeout: Duration,
    /// Who the client is and what it may tell us: `use_remote_address`,
    /// `xff_num_trusted_hops`, `internal_address_config` (see
    /// [`crate::forwarding`]).
    pub trust: ClientTrust,
    /// `generate_request_id`, `preserve_external_request_id`,
    /// `always_set_request_id_in_response`.
    pub request_id: RequestIdPolicy,
    /// `add_user_agent`: requests get `x-envoy-downstream-service-cluster`
    /// (the node's cluster), `x-envoy-downstream-service-node` (its id,
    /// when it has one), and the node's cluster as `user-agent` when they
    /// have none.
    pub add_user_agent: bool,
    /// `via`: appended to the `via` of requests and responses.
    pub via: Option<String>,
    /// `server_name` and `server_header_transformation`.
    pub server_header: ServerHeader,
    /// `normalize_path`, `merge_slashes`, `path_with_escaped_slashes_action`.
    pub path_normalization: crate::path::PathNormalization,
    /// `strip_matching_host_port` / `strip_any_host_port`.
    pub strip_host_port: StripHostPort,
    /// `strip_trailing_host_dot`: `example.com.` routes and goes upstream
    /// as `example.com`.
    pub strip_trailing_host_dot: bool,
    /// `append_x_forwarded_port`: requests go with `x-forwarded-port`, the
    /// port the client connected to.
    pub append_x_forwarded_port: bool,
    /// The router's Envoy headers (not `suppress_envoy_headers`): requests
    /// go upstream with `x-envoy-expected-rq-timeout-ms`.
    pub envoy_headers: bool,
    /// `http_filters` in their order, the router last; virtual hosts and
    /// routes may disable or replace a filter's config
    /// (`typed_per_filter_config`, [`Route::per_filter`]).
    ///
    /// [`Route::per_filter`]: super::route::Route::per_filter
    pub http_filters: Vec<HttpFilter>,
    /// `upgrade_configs`: the upgrades (WebSocket) its routes forward
    /// unless a route says otherwise.
    pub upgrades: Vec<super::upgrade::UpgradeConfig>,
}

impl HttpConnectionManager {
    /// The stateful session filter's listener-level config, if the
    /// manager has the filter.
    pub fn stateful_session(&self) -> Option<&StatefulSession> {
        self.http_filters.iter().find_map(|f| match &f.config {
            HttpFilterConfig::StatefulSession(s) => Some(s),
            _ => None,
        })
    }
}

/// `rds` of an HTTP connection manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rds {
    pub route_config_name: String,
    /// `config_source.initial_fetch_timeout`.
    pub initial_fetch_timeout: Option<Duration>,
}

/// `codec_type`: the downstream protocol of a connection manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CodecType {
    /// HTTP/2 when the connection starts with its preface, else HTTP/1.1
    /// (Envoy's default).
    #[default]
    Auto,
    Http1,
    Http2,
}

/// `http_protocol_options` of a connection manager: how HTTP/1.x
/// requests are taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http1Options {
    /// `accept_http_10`: serve HTTP/1.0 (Envoy's default: answer 426).
    pub accept_http_10: bool,
    /// `default_host_for_http_10`: the authority of an HTTP/1.0 request
    /// without `Host`.
    pub default_host_for_http_10: Option<String>,
    /// `allow_absolute_url` (default true): take `GET http://host/path`
    /// (a client using us as its HTTP proxy); else such requests get 400.
    pub allow_absolute_url: bool,
    /// `enable_trailers` (default false): forward trailers to and from
    /// HTTP/1.1 clients; else they are dropped, as Envoy does.
    pub enable_trailers: bool,
}

impl Default for Http1Options {
    fn default() -> Self {
        Self {
            accept_http_10: false,
            default_host_for_http_10: None,
            allow_absolute_url: true,
            enable_trailers: false,
        }
    }
}

/// `common_http_protocol_options.headers_with_underscores_action`: what
/// to do with request header fields whose name holds an underscore.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HeadersWithUnderscoresAction {
    /// Pass them on (Envoy's default).
    #[default]
    Allow,
    /// Reset the stream (HTTP/2: RST_STREAM, as Envoy).
    RejectRequest,
    /// Drop the field, keep the request.
    DropHeader,
}

impl HeadersWithUnderscoresAction {
    /// Envoy's enum name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allow => "ALLOW",
            Self::RejectRequest => "REJECT_REQUEST",
            Self::DropHeader => "DROP_HEADER",
        }
    }
}

/// The flood limits of a listener's `http2_protocol_options`, with
/// Envoy's defaults. Each ends the connection when passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2FloodLimits {
    /// `max_outbound_frames` (10000): frames queued and not yet written to
    /// the socket.
    pub max_outbound_frames: u32,
    /// `max_outbound_control_frames` (1000): of those, PING and SETTINGS
    /// acknowledgements and RST_STREAM.
    pub max_outbound_control_frames: u32,
    /// `max_consecutive_inbound_frames_with_empty_payload` (1): HEADERS,
    /// CONTINUATION and DATA frames in a row without payload or END_STREAM.
    pub max_consecutive_inbound_frames_with_empty_payload: u32,
    /// `max_inbound_priority_frames_per_stream` (100): PRIORITY frames
    /// over the connection's life may be this times (1 + streams opened).
    pub max_inbound_priority_frames_per_stream: u32,
    /// `max_inbound_window_update_frames_per_data_frame_sent` (10):
    /// WINDOW_UPDATE frames may be `5 + 2 * (streams opened + this * DATA
    /// frames sent)`.
    pub max_inbound_window_update_frames_per_data_frame_sent: u32,
}

impl Default for Http2FloodLimits {
    fn default() -> Self {
        Self {
            max_outbound_frames: 10_000,
            max_outbound_control_frames: 1_000,
            max_consecutive_inbound_frames_with_empty_payload: 1,
            max_inbound_priority_frames_per_stream: 100,
            max_inbound_window_update_frames_per_data_frame_sent: 10,
        }
    }
}

/// The connection manager's view of its clients: Envoy's
/// `use_remote_address`, `skip_xff_append`, `xff_num_trusted_hops` and
/// `internal_address_config`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTrust {
    /// The connection's peer is the client (an edge); else the client is
    /// read from `x-forwarded-for`.
    pub use_remote_address: bool,
    /// With `use_remote_address`, the peer is not appended to
    /// `x-forwarded-for`.
    pub skip_xff_append: bool,
    /// Proxies in front of us whose `x-forwarded-for` entries we trust.
    pub xff_num_trusted_hops: u32,
    /// Which client addresses make a request internal.
    pub internal: InternalAddresses,
}

impl ClientTrust {
    /// Whether the peer is appended to `x-forwarded-for`.
    pub fn appends_forwarded_for(&self) -> bool {
        self.use_remote_address && !self.skip_xff_append
    }

    /// Whether a client's `x-forwarded-proto` is replaced by the
    /// connection's scheme (else it is set only when absent): an edge that
    /// trusts no proxy in front of it, as Envoy.
    pub fn overwrites_forwarded_proto(&self) -> bool {
        self.use_remote_address && self.xff_num_trusted_hops == 0
    }
}

/// `internal_address_config`: the client addresses whose requests are
/// internal (they keep the `x-envoy-*` headers that steer the router).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InternalAddresses {
    /// Unset: no address is internal (Envoy 1.40's default).
    #[default]
    None,
    /// Set without `cidr_ranges`: Envoy's legacy list (RFC 1918,
    /// `127.0.0.1`, `::1`, `fd00::/8`).
    Legacy,
    /// `cidr_ranges`.
    Ranges(Vec<crate::filter_chain::CidrRange>),
}

/// `x-request-id` handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestIdPolicy {
    /// `generate_request_id` (default true): a request without one gets a
    /// UUID v4; an edge request's is replaced unless `preserve_external`.
    pub generate: bool,
    /// `preserve_external_request_id`.
    pub preserve_external: bool,
    /// `always_set_request_id_in_response`.
    pub in_response: bool,
}

impl Default for RequestIdPolicy {
    fn default() -> Self {
        Self {
            generate: true,
            preserve_external: false,
            in_response: false,
        }
    }
}

/// `server_name` and `server_header_transformation`: the `server` field
/// of responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHeader {
    /// `server_name` (default `envoy`, Envoy's).
    pub name: String,
    pub transformation: ServerHeaderTransformation,
}

impl Default for ServerHeader {
    fn default() -> Self {
        Self {
            name: DEFAULT_SERVER_NAME.into(),
            transformation: ServerHeaderTransformation::Overwrite,
        }
    }
}

/// Envoy's default `server_name`.
pub const DEFAULT_SERVER_NAME: &str = "envoy";

/// `server_header_transformation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ServerHeaderTransformation {
    /// Every response says `server: <server_name>` (Envoy's default).
    #[default]
    Overwrite,
    /// Only a response without a `server` gets ours.
    AppendIfAbsent,
    /// The upstream's, or none.
    PassThrough,
}

/// `strip_matching_host_port` / `strip_any_host_port`: the port taken off
/// the `host` before routing and forwarding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StripHostPort {
    #[default]
    None,
    /// Only the listener's own port.
    Matching,
    /// Any port.
    Any,
}
