//! A connection's transport: the TCP socket, or TLS over it (rustls through `futures-rustls`); the TLS handshakes (a client's, bounded and counted; a backend's, within the connect timeout), and the protocol ALPN chose.
//!
//! The handshake runs in the connection's own task, after accept: a slow
//! or silent client holds its own task and socket only, never the accept
//! loop or another client. Past the handshake the connection's task reads
//! and writes plaintext through [`Transport`] exactly as over TCP.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use engine::tls::{DownstreamTls, UpstreamTls};
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use glommio::timer::Timer;

use super::codec::Proto;
use crate::signal::Subscription;
use crate::stats::tls::{TlsFailure, TlsStats};
use crate::stats::DownstreamStats;

/// What a connection reads and writes through: a downstream one, or an
/// upstream one (`TlsClient`; the control shard's health checks use these
/// too).
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<futures_rustls::server::TlsStream<TcpStream>>),
    TlsClient(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    /// The TCP socket under it (for socket options).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(t) => t,
            Transport::Tls(t) => t.get_ref().0,
            Transport::TlsClient(t) => t.get_ref().0,
        }
    }

    /// Who the client's certificate names, when it presented one (the
    /// chain asked for it and it verified).
    pub fn peer_identity(&self) -> Option<std::sync::Arc<engine::rbac::PeerIdentity>> {
        match self {
            Transport::Tls(t) => {
                let cert = t.get_ref().1.peer_certificates()?.first()?;
                engine::tls::peer_identity(cert.as_ref()).map(std::sync::Arc::new)
            }
            Transport::Plain(_) | Transport::TlsClient(_) => None,
        }
    }

    /// The server name (SNI) a TLS client asked for.
    pub fn server_name(&self) -> Option<&str> {
        match self {
            Transport::Tls(t) => t.get_ref().1.server_name(),
            Transport::Plain(_) | Transport::TlsClient(_) => None,
        }
    }

    /// Stops sending: a TLS `close_notify`, written, then the socket's
    /// write side shut (HTTP/1.1's lingering close reads on after it).
    pub async fn close_write(&mut self) -> io::Result<()> {
        futures_lite::AsyncWriteExt::close(self).await
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(t) => Pin::new(t).poll_read(cx, buf),
            Transport::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
            Transport::TlsClient(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(t) => Pin::new(t).poll_write(cx, buf),
            Transport::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
            Transport::TlsClient(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(t) => Pin::new(t).poll_flush(cx),
            Transport::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            Transport::TlsClient(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(t) => Pin::new(t).poll_close(cx),
            Transport::Tls(t) => Pin::new(t.as_mut()).poll_close(cx),
            Transport::TlsClient(t) => Pin::new(t.as_mut()).poll_close(cx),
        }
    }
}

/// The protocol ALPN agreed on, if it names one we serve.
fn alpn_proto(alpn: Option<&[u8]>) -> Option<Proto> {
    match alpn? {
        b"h2" => Some(Proto::H2),
        b"http/1.1" | b"http/1.0" => Some(Proto::H1),
        _ => None,
    }
}

/// What `tls_inspector` found at the start of a connection.
pub(crate) enum Inspected {
    /// Not TLS, or no byte within the timeout with
    /// `continue_on_listener_filters_timeout`.
    Plain(TcpStream),
    /// A ClientHello, peeked: its bytes are still in the socket, for the
    /// chain's own handshake or for a `tcp_proxy` to pass on.
    Tls {
        tcp: TcpStream,
        /// The SNI, lowercase.
        sni: Option<String>,
        /// The ALPN list, in the client's order.
        alpn: Vec<Vec<u8>>,
    },
}

impl Inspected {
    /// The ClientHello's SNI and ALPN list; none for a plaintext client.
    pub fn hello(&self) -> (Option<&str>, &[Vec<u8>]) {
        match self {
            Inspected::Plain(_) => (None, &[]),
            Inspected::Tls { sni, alpn, .. } => (sni.as_deref(), alpn),
        }
    }

    /// The socket, nothing of it read.
    pub fn into_tcp(self) -> TcpStream {
        match self {
            Inspected::Plain(tcp) | Inspected::Tls { tcp, .. } => tcp,
        }
    }
}

/// How a wait of a connection's opening ended.
pub(super) enum Waited<T> {
    Done(T),
    /// The listener drains or the shard stops.
    Gone,
    TimedOut,
}

/// Waits for `fut` within `timer` (none: for ever), unless `drain` or
/// `shutdown` fires first.
pub(super) async fn within_timer<T>(
    fut: impl Future<Output = T>,
    timer: &mut Option<Pin<Box<Timer>>>,
    drain: &Subscription,
    shutdown: &Subscription,
) -> Waited<T> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Waited::Done(v));
        }
        if drain.poll_fired(cx).is_ready() || shutdown.poll_fired(cx).is_ready() {
            return Poll::Ready(Waited::Gone);
        }
        if let Some(t) = timer.as_mut() {
            if t.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Waited::TimedOut);
            }
        }
        Poll::Pending
    })
    .await
}

/// The most of a connection's first bytes `tls_inspector` looks at for a
/// whole ClientHello (Envoy's default `max_client_hello_size`).
const MAX_CLIENT_HELLO: usize = 64 * 1024;

/// `tls_inspector`: peeks at the first bytes (reading none of them) and,
/// for a TLS handshake record, at the whole ClientHello, all within the
/// listener's `listener_filters_timeout`. `None`: the connection is over
/// (the client left, its ClientHello was malformed or too large, or the
/// timeout passed; counted).
///
/// As in Envoy, bytes that are not a TLS handshake leave the connection
/// plaintext (`raw_buffer`), and past the timeout with
/// `continue_on_listener_filters_timeout` the connection goes on as
/// plaintext with what it sent still unread.
pub(crate) async fn inspect(
    tcp: TcpStream,
    continue_on_timeout: bool,
    timer: &mut Option<Pin<Box<Timer>>>,
    drain: &Subscription,
    shutdown: &Subscription,
    (stats, listener_stats): (&DownstreamStats, &crate::stats::envoy::ListenerStats),
) -> Option<Inspected> {
    let mut first = [0u8; 1];
    match within_timer(tcp.peek(&mut first), timer, drain, shutdown).await {
        Waited::Done(Ok(1..)) => {}
        Waited::Done(_) | Waited::Gone => return None,
        Waited::TimedOut => {
            stats.cx_listener_filters_timeout.inc();
            listener_stats.downstream_pre_cx_timeout.inc();
            return continue_on_timeout.then_some(Inspected::Plain(tcp));
        }
    }
    // 22: a TLS handshake record.
    if first[0] != 22 {
        return Some(Inspected::Plain(tcp));
    }
    match within_timer(peek_hello(&tcp), timer, drain, shutdown).await {
        Waited::Done(Ok((sni, alpn))) => Some(Inspected::Tls { tcp, sni, alpn }),
        Waited::Done(Err(e)) => {
            if e.kind() == io::ErrorKind::InvalidData {
                stats.tls_handshake_error.inc();
            } else {
                stats.tls_handshake_abandoned.inc();
            }
            tracing::debug!("ClientHello not read: {e}");
            None
        }
        Waited::Gone => None,
        Waited::TimedOut => {
            stats.cx_listener_filters_timeout.inc();
            listener_stats.downstream_pre_cx_timeout.inc();
            continue_on_timeout.then_some(Inspected::Plain(tcp))
        }
    }
}

/// Peeks at the socket until its first bytes hold a whole ClientHello:
/// its SNI (lowercase) and ALPN list. Only bytes not seen before are
/// parsed; a peek that finds nothing new waits a little (up to 16 ms)
/// before the next, as the rest of a split hello is usually a segment
/// away.
async fn peek_hello(tcp: &TcpStream) -> io::Result<(Option<String>, Vec<Vec<u8>>)> {
    let mut buf = vec![0u8; 2048];
    let mut seen = 0;
    let mut acceptor = rustls::server::Acceptor::default();
    let mut pause = Duration::from_millis(1);
    loop {
        let n = tcp.peek(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if n > seen {
            let mut fresh = &buf[seen..n];
            seen = n;
            while !fresh.is_empty() {
                if acceptor.read_tls(&mut fresh)? == 0 {
                    break;
                }
                match acceptor.accept() {
                    Ok(Some(accepted)) => {
                        let hello = accepted.client_hello();
                        let sni = hello.server_name().map(str::to_ascii_lowercase);
                        let alpn = hello
                            .alpn()
                            .map(|list| list.map(<[u8]>::to_vec).collect())
                            .unwrap_or_default();
                        return Ok((sni, alpn));
                    }
                    Ok(None) => {}
                    Err((e, _)) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                }
            }
            pause = Duration::from_millis(1);
        } else {
            glommio::timer::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(16));
        }
        if n == buf.len() {
            if buf.len() >= MAX_CLIENT_HELLO {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "ClientHello larger than 64 KiB",
                ));
            }
            buf.resize(buf.len() * 2, 0);
        }
    }
}

/// Runs the TLS handshake of `start` with the chain's `tls` within
/// `within`, unless the listener drains first. The transport and the
/// protocol ALPN chose, or `None` (counted: failed, timed out; a drain is
/// not counted).
pub(crate) async fn handshake(
    start: Inspected,
    tls: &Arc<DownstreamTls>,
    within: Duration,
    drain: &Subscription,
    shutdown: &Subscription,
    (stats, ssl): (&DownstreamStats, &TlsStats),
) -> Option<(Transport, Option<Proto>)> {
    let Some(state) = tls.state() else {
        // Its SDS secrets have not come: the control shard serves no such
        // listener, so this is a race with nothing to offer.
        stats.tls_handshake_error.inc();
        return None;
    };
    let config = Arc::clone(&state.config);
    // A ClientHello the inspector peeked at is still in the socket.
    let accept = futures_rustls::TlsAcceptor::from(config).accept(start.into_tcp());
    let mut timer = Some(Box::pin(Timer::new(within)));
    let done = match within_timer(accept, &mut timer, drain, shutdown).await {
        Waited::Done(r) => r,
        Waited::Gone => return None,
        Waited::TimedOut => {
            stats.tls_handshake_timeout.inc();
            return None;
        }
    };
    match done {
        Ok(stream) => {
            let conn = &stream.get_ref().1;
            stats.tls_handshake.inc();
            if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                stats.tls_session_reused.inc();
            }
            ssl.handshake_done(conn);
            let proto = alpn_proto(conn.alpn_protocol());
            Some((Transport::Tls(Box::new(stream)), proto))
        }
        // rustls's refusals (bad records, no common version or suite, a
        // client certificate that does not verify) come as InvalidData;
        // anything else is the socket: the client went away mid-way (an
        // `openssl s_time` client closes before our session tickets are
        // written), which is not a failed handshake of ours.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            stats.tls_handshake_error.inc();
            if let Some(why) = TlsFailure::of(&e) {
                ssl.failed(why);
            }
            tracing::debug!("TLS handshake failed: {e}");
            None
        }
        Err(e) => {
            stats.tls_handshake_abandoned.inc();
            tracing::debug!("TLS handshake abandoned: {e}");
            None
        }
    }
}

/// What an upstream connection sends before anything else: a cluster's
/// PROXY protocol header (`envoy.transport_sockets.upstream_proxy_protocol`).
#[derive(Debug, Clone, Copy)]
pub enum Preface<'a> {
    None,
    /// The header naming a downstream client, encoded.
    Header(&'a [u8]),
    /// No client behind the connection (a health check, a mirror, an
    /// authorization call): v2's LOCAL, or v1 with the connection's own
    /// addresses, as Envoy sends.
    Own {
        v2: bool,
    },
}

/// A header when there is one (a cluster with a PROXY header names the
/// client), else nothing.
impl<'a> From<Option<&'a [u8]>> for Preface<'a> {
    fn from(header: Option<&'a [u8]>) -> Self {
        header.map_or(Preface::None, Preface::Header)
    }
}

impl<'a> Preface<'a> {
    /// For a cluster: its header, or none.
    pub fn of(proxy: Option<&engine::UpstreamProxyProtocol>, header: Option<&'a [u8]>) -> Self {
        match (proxy, header) {
            (None, _) => Preface::None,
            (Some(_), Some(h)) => Preface::Header(h),
            (Some(p), None) => Preface::Own { v2: p.v2 },
        }
    }
}

/// A cluster's header for the downstream connection from `peer` to
/// `local` with `tlvs` (those its listener's filter kept): v1, or v2 with
/// the added TLVs first, then those `pass_through_tlvs` passes (Envoy's
/// order).
pub fn proxy_header(
    p: &engine::UpstreamProxyProtocol,
    (peer, local): (std::net::SocketAddr, std::net::SocketAddr),
    tlvs: &[proxywire::Tlv],
) -> Vec<u8> {
    let mut out = Vec::new();
    if !p.v2 {
        proxywire::encode_v1(Some((peer, local)), &mut out);
        return out;
    }
    let mut list: Vec<proxywire::Tlv> = p
        .added_tlvs
        .iter()
        .map(|(kind, value)| proxywire::Tlv {
            kind: *kind,
            value: value.clone(),
        })
        .collect();
    list.extend(
        tlvs.iter()
            .filter(|t| p.pass_through.includes(t.kind))
            .cloned(),
    );
    proxywire::encode_v2(
        proxywire::Command::Proxy,
        Some((peer, local)),
        &list,
        &mut out,
    );
    out
}

/// TCP within the connect timeout, then the PROXY header if the cluster
/// has one, then TLS within what is left of the timeout (Envoy counts a
/// TLS connection as connected once its handshake is done): the
/// transport and the protocol ALPN chose.
pub(crate) async fn connect_upstream(
    addr: std::net::SocketAddr,
    timeout: Duration,
    tls: Option<&UpstreamTls>,
    preface: Preface<'_>,
) -> io::Result<(Transport, Option<Proto>)> {
    use futures_lite::AsyncWriteExt;
    let started = std::time::Instant::now();
    let mut tcp = TcpStream::connect_timeout(addr, timeout)
        .await
        .map_err(io::Error::from)?;
    let _ = tcp.set_nodelay(true);
    let own;
    let header: &[u8] = match preface {
        Preface::None => &[],
        Preface::Header(h) => h,
        Preface::Own { v2 } => {
            let mut out = Vec::new();
            match v2 {
                true => proxywire::encode_v2(proxywire::Command::Local, None, &[], &mut out),
                false => {
                    let local = tcp.local_addr()?;
                    proxywire::encode_v1(Some((local, addr)), &mut out);
                }
            }
            own = out;
            &own
        }
    };
    if !header.is_empty() {
        tcp.write_all(header).await?;
    }
    match tls {
        None => Ok((Transport::Plain(tcp), None)),
        Some(t) => {
            let left = timeout.saturating_sub(started.elapsed());
            connect(tcp, t, addr, left).await
        }
    }
}

/// TCP to a backend within `timeout`, then `tls` within what is left of
/// it, as the pools connect, for a user that speaks what it was told
/// whatever ALPN chose (an active health check's codec is configured).
pub async fn connect_backend(
    addr: std::net::SocketAddr,
    timeout: Duration,
    tls: Option<&UpstreamTls>,
    preface: Preface<'_>,
) -> io::Result<Transport> {
    Ok(connect_upstream(addr, timeout, tls, preface).await?.0)
}

/// Opens TLS to a backend over `tcp` within `within`: the transport and
/// the protocol ALPN chose, if any. Errors are the handshake's (refused,
/// timed out, or the server went away).
async fn connect(
    tcp: TcpStream,
    tls: &UpstreamTls,
    addr: std::net::SocketAddr,
    within: Duration,
) -> io::Result<(Transport, Option<Proto>)> {
    let Some(config) = tls.client_config() else {
        // Its SDS secrets have not come: the cluster is not served yet,
        // so only a race gets here.
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "the cluster's TLS secrets have not come",
        ));
    };
    let connect = futures_rustls::TlsConnector::from(config).connect(tls.server_name(addr), tcp);
    let mut connect = std::pin::pin!(connect);
    let mut timer = std::pin::pin!(Timer::new(within));
    let stream = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = connect.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )));
        }
        Poll::Pending
    })
    .await?;
    let proto = alpn_proto(stream.get_ref().1.alpn_protocol());
    Ok((Transport::TlsClient(Box::new(stream)), proto))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_names_the_codec() {
        assert_eq!(alpn_proto(Some(b"h2")), Some(Proto::H2));
        assert_eq!(alpn_proto(Some(b"http/1.1")), Some(Proto::H1));
        assert_eq!(alpn_proto(Some(b"h3")), None);
        assert_eq!(alpn_proto(None), None);
    }
}
