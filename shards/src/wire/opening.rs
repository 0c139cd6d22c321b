//! A new downstream connection's opening, before its codec runs: the listener filters (`proxy_protocol` reads the PROXY header, `tls_inspector` peeks at the ClientHello), the listener's table picks a filter chain (none: closed unanswered), then the chain's TLS handshake and the protocol (ALPN, `codec_type`, or the first bytes), or the chain's `tcp_proxy`.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use engine::filter_chain::Connection;
use engine::{HeadersWithUnderscoresAction, HttpConnectionManager, Listener, TcpProxy};
use futures_lite::AsyncRead;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use h2wire::conn::{FloodLimits, ServerConfig, ServerConn, UnderscoreAction};

use super::codec::{self, DownCodec, Proto};
use super::lifecycle::HANDSHAKE_TIMEOUT;
use super::readbuf::IDLE_READ_SIZE;
use smallvec::SmallVec;

use super::proxy_header::{self, Refused};
use super::tls::{self, within_timer, Inspected, Transport, Waited};
use super::ReadBuf;

/// What a connection's chain serves.
// Made once per connection and taken apart at once: no need to box.
#[allow(clippy::large_enum_variant)]
pub(super) enum Serving {
    /// HTTP, through this codec.
    Http(DownCodec),
    /// Its bytes, to a cluster (`tcp_proxy`).
    Tcp(Arc<TcpProxy>),
}

/// Who a connection is between, once its listener filters ran.
#[derive(Debug, Clone)]
pub(crate) struct Addresses {
    /// The client: a PROXY header's source, else the socket's peer.
    pub peer: SocketAddr,
    /// The socket's peer (the proxy that sent a PROXY header, if any).
    pub direct_peer: SocketAddr,
    /// The address the client connected to: a PROXY header's
    /// destination, else the socket's local address (the listener's
    /// address when nothing asked the socket for it).
    pub local: SocketAddr,
    /// The PROXY header's TLVs that `pass_through_tlvs` keeps.
    pub tlvs: Vec<proxywire::Tlv>,
}

/// How a connection opened.
pub(super) struct Opened {
    pub tcp: Transport,
    pub serving: Serving,
    /// The SNI `tls_inspector` read (a passthrough connection has no
    /// other).
    pub sni: Option<Box<str>>,
    /// The position of the filter chain serving it, in the listener's
    /// `chains()` order.
    pub chain: usize,
    /// Its addresses (the port the client connected to serves
    /// `strip_matching_host_port`).
    pub addresses: Addresses,
}

/// A new connection's opening: its listener filters (the PROXY header,
/// `tls_inspector`) within `listener_filters_timeout`,
/// the filter chain, the chain's TLS handshake, then the protocol (ALPN's,
/// the chain's `codec_type`, or told by the first bytes, which stay in
/// `rb` for the codec), the last two within the handshake timeout.
/// `None`: the connection is over (counted where it failed; no chain
/// matching it: closed without a byte, as Envoy and A36 close it).
#[allow(clippy::too_many_arguments)]
pub(super) async fn open(
    mut tcp: TcpStream,
    listener: &Listener,
    peer: SocketAddr,
    rb: &mut ReadBuf,
    drain_sub: &crate::signal::Subscription,
    shutdown_sub: &crate::signal::Subscription,
    (stats, listener_stats, envoy_stats): (
        &crate::stats::DownstreamStats,
        &crate::stats::envoy::ListenerStats,
        &crate::stats::envoy::EnvoyStats,
    ),
) -> Option<Opened> {
    let _ = tcp.set_nodelay(true);
    // A system call per connection, made only when some chain needs it.
    // A listener bound to port 0 (tests) knows its port only from here.
    let local = if listener.chain_table.needs_local_address() || listener.address.port() == 0 {
        tcp.local_addr().unwrap_or(listener.address)
    } else {
        listener.address
    };
    let mut addresses = Addresses {
        peer,
        direct_peer: peer,
        local,
        tlvs: Vec::new(),
    };
    let filters = &listener.listener_filters;
    // One timer for all the listener filters, as Envoy's.
    let mut timer = filters
        .timeout
        .filter(|_| filters.any())
        .map(|t| Box::pin(Timer::new(t)));
    let mut timed_out = false;
    if let Some(pp) = &filters.proxy_protocol {
        let block = envoy_stats.proxy_proto.get(&pp.stat_prefix);
        let counted = (&*block, &stats.cx_proxy_proto_error);
        let read = proxy_header::read(&mut tcp, pp, &mut timer, drain_sub, shutdown_sub, counted);
        match read.await {
            Ok(Some(proxied)) => {
                if let Some((source, destination)) = proxied.addresses {
                    addresses.peer = source;
                    addresses.local = destination;
                }
                addresses.tlvs = proxied.tlvs;
            }
            Ok(None) => {}
            Err(Refused::Closed) => return None,
            Err(Refused::TimedOut) => {
                stats.cx_listener_filters_timeout.inc();
                listener_stats.downstream_pre_cx_timeout.inc();
                if !filters.continue_on_timeout {
                    return None;
                }
                timed_out = true;
            }
        }
    }
    let inspected = match filters.tls_inspector && !timed_out {
        false => Inspected::Plain(tcp),
        true => {
            let go_on = filters.continue_on_timeout;
            let stats = (stats, listener_stats);
            tls::inspect(tcp, go_on, &mut timer, drain_sub, shutdown_sub, stats).await?
        }
    };
    let (peer, local) = (addresses.peer, addresses.local);
    let selected = {
        let (sni, alpn) = inspected.hello();
        let alpn: SmallVec<[&[u8]; 4]> = alpn.iter().map(Vec::as_slice).collect();
        let connection = Connection {
            local,
            peer,
            direct_peer: addresses.direct_peer,
            server_name: sni,
            transport_protocol: match inspected {
                Inspected::Plain(_) => "raw_buffer",
                Inspected::Tls { .. } => "tls",
            },
            application_protocols: &alpn,
        };
        listener.select(&connection)
    };
    let Some((position, chain)) = selected else {
        stats.cx_no_filter_chain_match.inc();
        listener_stats.no_filter_chain_match.inc();
        return None;
    };
    let sni: Option<Box<str>> = inspected.hello().0.map(Box::from);
    let hcm = &chain.http;
    let codec_type = hcm.codec_type;
    // The handshake (TLS, then the first bytes) must be over within this.
    let within = hcm
        .idle_timeout
        .map_or(HANDSHAKE_TIMEOUT, |t| t.min(HANDSHAKE_TIMEOUT));
    let (mut tcp, alpn) = match (&chain.tls, inspected) {
        (None, Inspected::Plain(tcp)) => (Transport::Plain(tcp), None),
        // TLS passed through: the backend gets the ClientHello, unread.
        (None, start @ Inspected::Tls { .. }) if chain.tcp_proxy.is_some() => {
            (Transport::Plain(start.into_tcp()), None)
        }
        (None, Inspected::Tls { .. }) => {
            // A TLS client given a plaintext HTTP chain: no HTTP codec
            // could make sense of its bytes.
            stats.cx_protocol_error.inc();
            return None;
        }
        (Some(tls), start) => {
            let stats = (stats, &listener_stats.ssl);
            tls::handshake(start, tls, within, drain_sub, shutdown_sub, stats).await?
        }
    };
    if let Some(proxy) = &chain.tcp_proxy {
        return Some(Opened {
            tcp,
            serving: Serving::Tcp(Arc::clone(proxy)),
            sni,
            chain: position,
            addresses,
        });
    }
    // Which protocol: what ALPN agreed (the client speaks it, whatever
    // codec_type says), else the listener's, else (AUTO) the first bytes
    // tell (the HTTP/2 preface or not).
    let chosen = alpn.or(codec::choose(codec_type, &[]));
    let proto = match chosen {
        Some(p) => Some(p),
        None => {
            let first = first_bytes(&mut tcp, rb, codec_type, within, drain_sub, shutdown_sub);
            match first.await {
                Ok(p) => Some(p),
                Err(Silent::TimedOut) => {
                    // Not a client of ours, or a slow one holding a
                    // connection: as an HTTP/2 client without its preface.
                    stats.cx_protocol_error.inc();
                    None
                }
                Err(Silent::Gone) => None,
            }
        }
    };
    let conn = match proto? {
        Proto::H2 => {
            stats.cx_http2_total.inc();
            DownCodec::H2(Box::new(ServerConn::new(server_config(hcm))))
        }
        Proto::H1 => {
            stats.cx_http1_total.inc();
            DownCodec::h1(hcm, listener.per_connection_buffer_limit_bytes)
        }
    };
    Some(Opened {
        tcp,
        serving: Serving::Http(conn),
        sni,
        chain: position,
        addresses,
    })
}

/// Why a connection never told its protocol.
enum Silent {
    /// Not enough bytes within the handshake timeout.
    TimedOut,
    /// The client closed, or the listener drains.
    Gone,
}

/// Reads the first bytes of a connection under `codec_type` AUTO until
/// they tell HTTP/2 from HTTP/1.1, for at most `within`.
async fn first_bytes(
    tcp: &mut Transport,
    rb: &mut ReadBuf,
    codec_type: engine::CodecType,
    within: Duration,
    drain: &crate::signal::Subscription,
    shutdown: &crate::signal::Subscription,
) -> Result<Proto, Silent> {
    let mut timer = Some(Box::pin(Timer::new(within)));
    loop {
        if let Some(p) = codec::choose(codec_type, &rb.buf) {
            return Ok(p);
        }
        let room = rb.room(IDLE_READ_SIZE);
        let read = poll_fn(|cx| Pin::new(&mut *tcp).poll_read(cx, room));
        let silent = match within_timer(read, &mut timer, drain, shutdown).await {
            Waited::Done(Ok(n)) if n > 0 => {
                rb.filled(n);
                continue;
            }
            Waited::Done(_) | Waited::Gone => Silent::Gone,
            Waited::TimedOut => Silent::TimedOut,
        };
        rb.filled(0);
        return Err(silent);
    }
}

/// The codec limits of a downstream connection, from its listener's HTTP
/// connection manager.
fn server_config(hcm: &HttpConnectionManager) -> ServerConfig {
    let f = &hcm.http2_flood;
    ServerConfig {
        max_concurrent_streams: hcm.max_concurrent_streams,
        max_header_list_size: hcm.max_header_list_size,
        initial_stream_window: hcm.initial_stream_window_size,
        connection_window: hcm.initial_connection_window_size,
        max_headers_count: Some(hcm.max_headers_count),
        headers_with_underscores: match hcm.headers_with_underscores_action {
            HeadersWithUnderscoresAction::Allow => UnderscoreAction::Allow,
            HeadersWithUnderscoresAction::RejectRequest => UnderscoreAction::Reject,
            HeadersWithUnderscoresAction::DropHeader => UnderscoreAction::Drop,
        },
        flood: FloodLimits {
            max_outbound_frames: Some(f.max_outbound_frames),
            max_outbound_control_frames: Some(f.max_outbound_control_frames),
            max_consecutive_inbound_frames_with_empty_payload: Some(
                f.max_consecutive_inbound_frames_with_empty_payload,
            ),
            max_inbound_priority_frames_per_stream: Some(f.max_inbound_priority_frames_per_stream),
            max_inbound_window_update_frames_per_data_frame_sent: Some(
                f.max_inbound_window_update_frames_per_data_frame_sent,
            ),
        },
        enable_connect_protocol: hcm.allow_connect,
        ..ServerConfig::default()
    }
}
