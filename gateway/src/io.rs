//! Glue between glommio sockets and h2 (which speaks tokio's I/O traits).

use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

/// A client transport (TCP, or TLS over it) seen through tokio's I/O
/// traits, for h2: the ADS stream to a control plane. No Nagle: h2 frames
/// are small and latency-bound.
pub fn h2_transport(t: shards::wire::tls::Transport) -> Compat<shards::wire::tls::Transport> {
    let _ = t.tcp().set_nodelay(true);
    t.compat()
}
