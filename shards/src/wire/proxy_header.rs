//! `envoy.filters.listener.proxy_protocol` on a new connection: reads the PROXY header (v1 or v2) that opens it, bounded by the listener filters' timer, and hands back the addresses it states and the TLVs it keeps.
//!
//! Only the header's own bytes are consumed: what follows (a ClientHello
//! for `tls_inspector`, the HTTP preface) stays in the socket. The start
//! is peeked until it tells a header from other bytes; a v2 header is then
//! read by its length field, a v1 line up to its CRLF (peeked first, as
//! its length is not stated). A client that sends its header a byte at a
//! time holds its own task only, until the timer ends it.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use engine::ProxyProtocol;
use futures_lite::AsyncReadExt;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use proxywire::{Detect, Parsed, Tlv, Version};

use super::tls::{within_timer, Waited};
use crate::signal::Subscription;
use crate::stats::proxy_proto::ProxyProtoStats;
use crate::stats::Counter;

/// What a PROXY header said of a connection.
#[derive(Debug, Default)]
pub(crate) struct Proxied {
    /// The client and the address it connected to, when the header states
    /// them (not for LOCAL, UNKNOWN or AF_UNIX headers).
    pub addresses: Option<(SocketAddr, SocketAddr)>,
    /// The TLVs `pass_through_tlvs` keeps, for an upstream PROXY header.
    pub tlvs: Vec<Tlv>,
}

/// Why a connection was not let through.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Closed: no header, a disallowed version, a malformed header, the
    /// client left or the listener drains (each counted where it applies).
    Closed,
    /// The timer ran out first (counted by the caller, which decides on
    /// `continue_on_listener_filters_timeout`).
    TimedOut,
}

/// Reads the connection's PROXY header under `cfg`. `Ok(None)`: there was
/// none and `allow_requests_without_proxy_protocol` lets it go on as it
/// is. Counted as Envoy counts: in the `stat_prefix`'s block, and a
/// missing or malformed header also in `cx_error`
/// (`downstream_cx_proxy_proto_error`); a timeout in neither.
pub(crate) async fn read(
    tcp: &mut TcpStream,
    cfg: &ProxyProtocol,
    timer: &mut Option<Pin<Box<Timer>>>,
    drain: &Subscription,
    shutdown: &Subscription,
    (stats, cx_error): (&ProxyProtoStats, &Counter),
) -> Result<Option<Proxied>, Refused> {
    let version = match waited(within_timer(detect(tcp), timer, drain, shutdown).await)? {
        Detect::V1 => Version::V1,
        Detect::V2 => Version::V2,
        // The connection closed before its first bytes told anything.
        Detect::NeedMore => return Err(Refused::Closed),
        Detect::NotProxy if cfg.allow_without => {
            stats.not_found_allowed.inc();
            return Ok(None);
        }
        Detect::NotProxy => {
            stats.not_found_disallowed.inc();
            cx_error.inc();
            return Err(Refused::Closed);
        }
    };
    let counters = stats.version(version);
    let header = match waited(within_timer(take(tcp, version), timer, drain, shutdown).await)? {
        Ok(h) => h,
        Err(Taken::Gone) => return Err(Refused::Closed),
        Err(Taken::Malformed(e)) => {
            tracing::debug!("PROXY header refused: {e}");
            // Envoy counts a v1 line with no CRLF in reach as no header.
            match e.version() {
                Some(_) => counters.error.inc(),
                None => stats.not_found_disallowed.inc(),
            }
            cx_error.inc();
            return Err(Refused::Closed);
        }
    };
    // A well-formed header of a disallowed version: Envoy counts it found,
    // and disallowed, but not as an error.
    counters.found.inc();
    let allowed = match version {
        Version::V1 => cfg.allow_v1,
        Version::V2 => cfg.allow_v2,
    };
    if !allowed {
        counters.disallowed.inc();
        return Err(Refused::Closed);
    }
    Ok(Some(Proxied {
        addresses: header.addresses,
        tlvs: header
            .tlvs
            .into_iter()
            .filter(|t| cfg.pass_through.includes(t.kind))
            .collect(),
    }))
}

fn waited<T>(w: Waited<T>) -> Result<T, Refused> {
    match w {
        Waited::Done(v) => Ok(v),
        Waited::Gone => Err(Refused::Closed),
        Waited::TimedOut => Err(Refused::TimedOut),
    }
}

/// Peeks until the first bytes tell a v1 or v2 header from anything else;
/// `NeedMore` only when the connection closed (or failed) first.
async fn detect(tcp: &TcpStream) -> Detect {
    let mut buf = [0u8; proxywire::V2_SIGNATURE.len()];
    let mut seen = 0;
    let mut pause = Duration::from_millis(1);
    loop {
        let n = match tcp.peek(&mut buf).await {
            Ok(0) | Err(_) => return Detect::NeedMore,
            Ok(n) => n,
        };
        match proxywire::detect(&buf[..n]) {
            Detect::NeedMore => {}
            told => return told,
        }
        // A peek returns at once while bytes wait unread: pause before the
        // next unless this one found more.
        pause = backoff(n > seen, pause).await;
        seen = n;
    }
}

/// Sleeps before the next peek when it found nothing new (1 ms, doubling
/// to 16 ms: the rest of a split header is usually a segment away).
async fn backoff(fresh: bool, pause: Duration) -> Duration {
    if fresh {
        return Duration::from_millis(1);
    }
    glommio::timer::sleep(pause).await;
    (pause * 2).min(Duration::from_millis(16))
}

/// How reading a header failed.
enum Taken {
    Gone,
    Malformed(proxywire::Error),
}

/// Consumes exactly the header's bytes and parses them.
async fn take(tcp: &mut TcpStream, version: Version) -> Result<proxywire::Header, Taken> {
    let buf = match version {
        Version::V2 => {
            let mut fixed = vec![0u8; proxywire::V2_HEADER_LEN];
            tcp.read_exact(&mut fixed).await.map_err(|_| Taken::Gone)?;
            let len = proxywire::header_len(&fixed)
                .map_err(Taken::Malformed)?
                .unwrap_or(proxywire::V2_HEADER_LEN);
            fixed.resize(len, 0);
            tcp.read_exact(&mut fixed[proxywire::V2_HEADER_LEN..])
                .await
                .map_err(|_| Taken::Gone)?;
            fixed
        }
        Version::V1 => {
            let len = v1_len(tcp).await?;
            let mut line = vec![0u8; len];
            tcp.read_exact(&mut line).await.map_err(|_| Taken::Gone)?;
            line
        }
    };
    match proxywire::parse(&buf).map_err(Taken::Malformed)? {
        Parsed::Complete { header, consumed } if consumed == buf.len() => Ok(header),
        // Read by its own stated length: it cannot be shorter or longer.
        _ => Err(Taken::Malformed(proxywire::Error::NotProxy)),
    }
}

/// Peeks until a v1 line's CRLF is in sight (at most 107 bytes): its
/// length, CRLF included.
async fn v1_len(tcp: &TcpStream) -> Result<usize, Taken> {
    let mut buf = [0u8; proxywire::V1_MAX_LEN];
    let mut seen = 0;
    let mut pause = Duration::from_millis(1);
    loop {
        let n = match tcp.peek(&mut buf).await {
            Ok(0) | Err(_) => return Err(Taken::Gone),
            Ok(n) => n,
        };
        if let Some(len) = proxywire::header_len(&buf[..n]).map_err(Taken::Malformed)? {
            return Ok(len);
        }
        pause = backoff(n > seen, pause).await;
        seen = n;
    }
}
