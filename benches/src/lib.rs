//! Shared fixtures for the benchmarks in benches/benches, and the accept
//! loop of the measuring servers in src/bin (the benchmarks themselves and
//! the e2e scripts live outside this library).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use engine::{
    Cluster, ClusterSnapshot, Endpoint, HealthStatus, HostRegistry, LbPolicy, UpstreamHttp2,
};

/// A healthy cluster of `n` hosts under `policy`; with `weighted`, weights
/// 1..=7 so the weighted pick paths run.
pub fn pick_cluster(n: usize, policy: LbPolicy, weighted: bool) -> ClusterSnapshot {
    let endpoints = (0..n)
        .map(|i| Endpoint {
            address: SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 8080)),
            weight: if weighted { 1 + (i % 7) as u32 } else { 1 },
            health: HealthStatus::Healthy,
        })
        .collect();
    let c = Cluster {
        name: format!("c{n}"),
        connect_timeout: Duration::from_secs(1),
        lb_policy: policy,
        endpoints,
        eds: None,
        http2: UpstreamHttp2::default(),
        outlier_detection: None,
        common_lb: Default::default(),
    };
    let snap = ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new());
    assert_eq!(snap.weighted, weighted);
    snap
}

/// Runs an accept loop on one glommio executor (pinned to `cpu` if given):
/// binds `listen`, prints `listening on ADDR` (scripts wait for it), and
/// spawns `serve(stream)` per connection. Returns only if the executor
/// cannot start. The measuring servers `wire_backend` and `wire_proxy`
/// share it.
pub fn serve_on_one_core<F, Fut>(
    name: &'static str,
    listen: SocketAddr,
    cpu: Option<usize>,
    serve: F,
) -> std::process::ExitCode
where
    F: Fn(glommio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let placement = cpu.map_or(glommio::Placement::Unbound, glommio::Placement::Fixed);
    let result = glommio::LocalExecutorBuilder::new(placement)
        .name(name)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let listener = match glommio::net::TcpListener::bind(listen) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("{name}: cannot listen on {listen}: {e}");
                    std::process::exit(1);
                }
            };
            println!("listening on {}", listener.local_addr().unwrap_or(listen));
            loop {
                match listener.accept().await {
                    Ok(s) => {
                        glommio::spawn_local(serve(s)).detach();
                    }
                    Err(e) => eprintln!("{name}: accept: {e}"),
                }
            }
        })
        .and_then(|h| h.join());
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A receive buffer that a socket reads into at its tail, and that the
/// HTTP/2 codec consumes from its head (frames are split off it).
///
/// glommio reads into an initialised `&mut [u8]`, so the tail must be
/// initialised before each read; zeroing a whole read's room every time
/// was 5 % of `wire_proxy`'s profile. The bytes past `len` that a short
/// read left untouched stay initialised in the allocation, so this
/// remembers how many there are and zeroes only when it must.
#[derive(Default)]
pub struct ReadBuf {
    pub buf: bytes::BytesMut,
    /// Where the last [`room`](Self::room) began.
    room_start: usize,
    /// Bytes right after `buf.len()` known to be initialised.
    spare_init: usize,
}

impl ReadBuf {
    /// Room for a read of `len` bytes at the tail, initialised.
    pub fn room(&mut self, len: usize) -> &mut [u8] {
        let start = self.buf.len();
        self.room_start = start;
        if self.spare_init >= len && self.buf.capacity() - start >= len {
            // SAFETY: the `len` bytes after `start` lie within the
            // capacity (checked), were initialised by an earlier `resize`
            // and only truncated away since: the codec only splits bytes
            // off the head, and any reallocation resets `spare_init`.
            unsafe { self.buf.set_len(start + len) };
        } else {
            let cap = self.buf.capacity();
            self.buf.resize(start + len, 0);
            if self.buf.capacity() != cap {
                // Moved or grown: only what `resize` wrote is known.
                self.spare_init = 0;
            }
        }
        &mut self.buf[start..]
    }

    /// After a read into [`room`](Self::room): its first `n` bytes are
    /// data, the rest is spare again.
    pub fn filled(&mut self, n: usize) {
        let data_end = self.room_start + n;
        self.spare_init = self.buf.len() - data_end;
        self.buf.truncate(data_end);
    }
}
