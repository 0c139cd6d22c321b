//! Glue between glommio sockets and h2 (which speaks tokio's I/O traits).

use std::net::SocketAddr;
use std::time::Duration;

use glommio::net::TcpStream;
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

/// A glommio TCP stream seen through tokio's `AsyncRead`/`AsyncWrite`.
pub type H2Io = Compat<TcpStream>;

/// Prepares an accepted or connected stream for h2: no Nagle (h2 frames are
/// small and latency-bound), then the compat adapter.
pub fn h2_io(stream: TcpStream) -> H2Io {
    let _ = stream.set_nodelay(true);
    stream.compat()
}

/// Connects with a deadline (`Cluster.connect_timeout`).
pub async fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(addr, timeout)
        .await
        .map_err(std::io::Error::from)
}
