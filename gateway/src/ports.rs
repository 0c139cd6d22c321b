//! Listener ports the control shard holds: port-0 listeners keep the port first chosen for them across reloads, and an address someone else listens on is refused before any shard binds it (A36's not-serving listeners).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use engine::{Bootstrap, Listener};

/// A listener left out of the snapshot because its address cannot be
/// bound (A36's "not serving"): retried until it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotServing {
    pub name: String,
    pub address: SocketAddr,
    pub error: String,
}

impl NotServing {
    fn new(l: &Listener, error: String) -> Self {
        Self {
            name: l.name.clone(),
            address: l.address,
            error,
        }
    }
}

/// Keeps port-0 listeners on the port first chosen for them, across reloads,
/// by holding a bound (not listening) SO_REUSEPORT socket on that port: the
/// data shards then all join the same port.
pub(crate) struct PortReservations {
    /// Listener name → (configured address, bound address, reservation).
    by_name: BTreeMap<String, (SocketAddr, SocketAddr, Rc<socket2::Socket>)>,
    /// The process's listening sockets: an address the previous process
    /// handed over (hot restart) is ours, not a stale instance's.
    sockets: Arc<shards::wire::sockets::ListenSockets>,
}

impl PortReservations {
    pub(crate) fn new(sockets: Arc<shards::wire::sockets::ListenSockets>) -> Self {
        Self {
            by_name: BTreeMap::new(),
            sockets,
        }
    }

    /// Resolves port-0 listeners and checks that every listener the shards
    /// do not serve yet can be bound, so a reload that would fail to bind is
    /// rejected before any shard changes. Nothing changes on error.
    ///
    /// `lenient` (xDS updates): a listener that cannot be bound is left out
    /// and reported, and the rest of the update goes ahead, as Envoy does.
    pub(crate) fn resolve(
        &mut self,
        boot: &Bootstrap,
        serving: &[Arc<Listener>],
        lenient: bool,
    ) -> Result<(Bootstrap, Vec<NotServing>), String> {
        let mut out = boot.clone();
        let mut next = BTreeMap::new();
        let mut failed = Vec::new();
        let mut resolved_listeners = Vec::with_capacity(out.listeners.len());
        for l in std::mem::take(&mut out.listeners) {
            let bind_err =
                |e: std::io::Error| format!("listener {}: bind {}: {e}", l.name, l.address);
            if l.address.port() != 0 {
                let served = serving
                    .iter()
                    .any(|s| s.name == l.name && s.address == l.address);
                if !served && !self.sockets.inherits(l.address) {
                    if let Err(e) = probe_exclusive(l.address) {
                        if !lenient {
                            return Err(bind_err(e));
                        }
                        failed.push(NotServing::new(&l, bind_err(e)));
                        continue;
                    }
                }
                resolved_listeners.push(l);
                continue;
            }
            let entry = match self.by_name.get(&l.name) {
                Some(e) if e.0 == l.address => e.clone(),
                _ => match reserve(l.address) {
                    Ok((sock, bound)) => (l.address, bound, Rc::new(sock)),
                    Err(e) if lenient => {
                        failed.push(NotServing::new(&l, bind_err(e)));
                        continue;
                    }
                    Err(e) => return Err(bind_err(e)),
                },
            };
            let mut resolved: Listener = (*l).clone();
            resolved.address = entry.1;
            next.insert(l.name.clone(), entry);
            resolved_listeners.push(Arc::new(resolved));
        }
        out.listeners = resolved_listeners;
        self.by_name = next;
        Ok((out, failed))
    }
}

/// Binds `addr` without SO_REUSEPORT and lets go: fails if anyone listens
/// there — in particular a stale gateway, which SO_REUSEPORT would otherwise
/// let us share traffic with silently.
pub(crate) fn probe_exclusive(addr: SocketAddr) -> std::io::Result<()> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?; // TIME_WAIT leftovers are no conflict
    sock.bind(&addr.into()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            std::io::Error::new(e.kind(), format!("{e} (is another gateway still running?)"))
        } else {
            e
        }
    })
}

fn reserve(addr: SocketAddr) -> std::io::Result<(socket2::Socket, SocketAddr)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_port(true)?;
    sock.set_reuse_address(true)?; // as the shards' listeners (glommio PATCH(reuse-addr))
    sock.bind(&addr.into())?;
    let bound = sock
        .local_addr()?
        .as_socket()
        .ok_or_else(|| std::io::Error::other("not an inet socket"))?;
    Ok((sock, bound))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    /// A listener that closed a connection first leaves it in TIME_WAIT
    /// on the listener's port: a restarted gateway must still bind there
    /// (glommio's PATCH(reuse-addr)), and still refuse a port someone
    /// listens on.
    #[test]
    fn a_port_left_in_time_wait_binds_again() {
        let addr = glommio::LocalExecutorBuilder::default()
            .io_memory(1 << 20)
            .spawn(|| async {
                let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                let addr = listener.local_addr().expect("addr");
                let client = std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).expect("connect");
                    // Wait for the server's close, then close too.
                    let _ = c.read(&mut [0u8; 1]);
                });
                let conn = listener.accept().await.expect("accept");
                conn.shutdown(std::net::Shutdown::Both).await.ok();
                drop(conn);
                client.join().expect("client");
                assert!(
                    super::probe_exclusive(addr).is_err(),
                    "a port in LISTEN state is refused"
                );
                drop(listener);
                addr
            })
            .expect("executor")
            .join()
            .expect("join");
        let waiting = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let port = format!(":{:04X} ", addr.port());
        assert!(
            waiting.lines().any(|l| l
                .split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&port[..port.len() - 1]))
                && l.split_whitespace().nth(3) == Some("06")),
            "the server's side is in TIME_WAIT (06)"
        );
        super::probe_exclusive(addr).expect("binds over TIME_WAIT");
    }
}
