//! Connection steering: each new connection goes to the data shard with the fewest connections, chosen in the kernel by a SO_REUSEPORT eBPF program, without a lock and without moving a connection between shards.
//!
//! Why: SO_REUSEPORT alone hashes each connection's addresses and ports to
//! a shard. With many short connections that evens out; with a few dozen
//! long-lived HTTP/2 clients (gRPC channels, browsers) it leaves one shard
//! with far more of them than another, and a shard cannot hand a
//! connection to a less busy one (thread-per-core: a connection stays
//! where it was accepted). So the choice is made before any shard sees
//! the connection, when its SYN arrives.
//!
//! How: one array map holds a score per shard (open connections, which
//! each shard writes into its own slot through a shared mapping, plus
//! connections picked for it and not accepted yet, which the program
//! counts); each listening address has its own socket map (shard → that
//! shard's socket) and its own program, attached to the address's
//! SO_REUSEPORT group ([`bpf`]). The registry of listening sockets
//! ([`crate::wire::sockets`]) tells this module when a shard starts or
//! stops listening; nothing here runs per request.
//!
//! Where the kernel refuses (no CAP_BPF, an old kernel), steering is off
//! and the kernel's hash decides, as before; the reason is logged once.
//! Envoy's nearest setting is a listener's
//! `connection_balance_config.exact_balance`, which balances with a lock
//! and hands accepted sockets between workers.

mod bpf;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// How new connections are spread over the data shards
/// (`--connection-steering`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SteeringMode {
    /// The shard with the fewest open and pending connections
    /// (this module), where the kernel allows it.
    #[default]
    LeastConnections,
    /// The kernel's SO_REUSEPORT hash of addresses and ports.
    KernelHash,
}

impl std::str::FromStr for SteeringMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "least-connections" => Ok(Self::LeastConnections),
            "kernel-hash" => Ok(Self::KernelHash),
            _ => Err(format!(
                "unknown connection steering {s:?} (least-connections or kernel-hash)"
            )),
        }
    }
}

/// One listening address's group: its socket map, its program, and which
/// socket each shard put in the map.
struct Group {
    socks: bpf::SockArray,
    program: bpf::Program,
    members: Vec<Option<RawFd>>,
}

/// The process's steering state (see the module's comment).
pub struct Steering {
    load: bpf::LoadMap,
    shards: usize,
    /// Taken only when a listener starts or stops.
    groups: Mutex<HashMap<SocketAddr, Group>>,
}

impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steering")
            .field("shards", &self.shards)
            .field("scores", &self.scores())
            .finish_non_exhaustive()
    }
}

impl Steering {
    /// Steering over `shards` data shards, or why the kernel refuses it.
    pub fn new(shards: usize) -> io::Result<Arc<Self>> {
        let load = bpf::LoadMap::new(shards)?;
        let steering = Self {
            load,
            shards,
            groups: Mutex::new(HashMap::new()),
        };
        // Loading one program now finds a refusal (no CAP_BPF, a kernel
        // without these maps or helpers) at start, not at the first
        // listener.
        let socks = bpf::SockArray::new(shards)?;
        bpf::Program::load(shards, &steering.load, &socks)?;
        Ok(Arc::new(steering))
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Group>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shard `shard` listens on `socket` for `addr`: new connections to
    /// `addr` may be steered to it. A shard listening on two sockets for
    /// one address (a hot restart from more shards) is steered to the
    /// first; the kernel's backlog of the other is still accepted from.
    pub fn join(&self, addr: SocketAddr, shard: usize, socket: RawFd) -> io::Result<()> {
        if shard >= self.shards {
            return Ok(());
        }
        let mut groups = self.groups();
        let group = match groups.entry(addr) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let socks = bpf::SockArray::new(self.shards)?;
                let program = bpf::Program::load(self.shards, &self.load, &socks)?;
                e.insert(Group {
                    socks,
                    program,
                    members: vec![None; self.shards],
                })
            }
        };
        if group.members[shard].is_some() {
            return Ok(());
        }
        group.socks.set(shard, socket)?;
        group.members[shard] = Some(socket);
        // Each time, not once per group: a group whose sockets all closed
        // is gone in the kernel, and the next socket at the address starts
        // a new one. Replacing the program with itself costs nothing.
        group.program.attach(socket)
    }

    /// Shard `shard` is about to close `socket` for `addr`: no new
    /// connection is steered to it. Call before closing the socket.
    pub fn leave(&self, addr: SocketAddr, shard: usize, socket: RawFd) {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(&addr) else {
            return;
        };
        if group.members.get(shard).copied().flatten() != Some(socket) {
            return;
        }
        group.socks.clear(shard);
        group.members[shard] = None;
        if group.members.iter().all(Option::is_none) {
            groups.remove(&addr);
        }
    }

    /// Shard `shard`'s handle on its own score.
    pub fn shard_load(self: &Arc<Self>, shard: usize) -> Option<ShardLoad> {
        (shard < self.shards).then(|| ShardLoad {
            steering: Arc::clone(self),
            shard,
        })
    }

    /// Every shard's (open, pending) connections as the program sees them.
    pub fn scores(&self) -> Vec<(u64, u64)> {
        (0..self.shards)
            .map(|s| {
                (
                    self.load.slot(s, bpf::OPEN).load(Relaxed),
                    self.load.slot(s, bpf::PICKED).load(Relaxed),
                )
            })
            .collect()
    }
}

/// One data shard's slot in the load map: it counts its connections
/// there, opened and closed, on its own thread only.
#[derive(Clone)]
pub struct ShardLoad {
    steering: Arc<Steering>,
    shard: usize,
}

impl ShardLoad {
    /// A connection was accepted: one more open, one fewer pending.
    pub fn accepted(&self) {
        let load = &self.steering.load;
        // Only this shard writes its open count: no locked add needed.
        let open = load.slot(self.shard, bpf::OPEN);
        open.store(open.load(Relaxed) + 1, Relaxed);
        // The program adds to `pending` from any CPU; take one away unless
        // none is left (a connection the kernel's hash picked, while a
        // shard's socket was missing from the group's map).
        let _ = load
            .slot(self.shard, bpf::PICKED)
            .fetch_update(Relaxed, Relaxed, |p| p.checked_sub(1));
    }

    /// A connection accepted by [`Self::accepted`] closed.
    pub fn closed(&self) {
        let open = self.steering.load.slot(self.shard, bpf::OPEN);
        open.store(open.load(Relaxed).saturating_sub(1), Relaxed);
    }

    /// Forgets pending picks. Called every second: a SYN the program
    /// picked that never became a connection (a backlog overflow, a SYN
    /// flood) must not count against its shard forever; a real one still
    /// pending is counted again when accepted, as open.
    pub fn forget_pending(&self) {
        self.steering
            .load
            .slot(self.shard, bpf::PICKED)
            .store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests;
