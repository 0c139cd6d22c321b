//! The process's listening sockets by address: those its shards and admin listen on (what a hot restart hands to the next process) and those the previous process handed over (taken instead of binding anew, so that no connection is refused while two processes run).
//!
//! One registry per process, shared by the data shards, the admin server
//! and the hot-restart server, behind one lock that is taken only when a
//! listener starts or stops, never per connection. A socket's file
//! descriptor is registered while its owner listens on it and removed
//! *before* the owner closes it, both under the lock; copies for the next
//! process are made under the same lock, so a copy is never made of a
//! descriptor number that was closed and reused meanwhile.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};

use crate::steering::{ShardLoad, Steering};

/// Who listens on a socket: a data shard (by index) or the admin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    Shard(usize),
    Admin,
}

#[derive(Debug, Default)]
struct Inner {
    /// Handed over by the previous process and not taken yet, by address,
    /// in the order it listed them (a slot is `None` once taken).
    inherited: HashMap<SocketAddr, Vec<Option<OwnedFd>>>,
    /// Listened on now: by address, each owner's descriptor.
    open: HashMap<SocketAddr, Vec<(Owner, RawFd)>>,
}

/// The registry (see the module's comment).
#[derive(Debug, Default)]
pub struct ListenSockets {
    inner: Mutex<Inner>,
    /// Set once the shard count is known, where the kernel allows it: the
    /// shards' sockets join and leave their steering groups as they are
    /// registered.
    steering: OnceLock<Arc<Steering>>,
}

impl ListenSockets {
    /// A registry holding what the previous process handed over (empty on
    /// a first start).
    pub fn new(inherited: Vec<(SocketAddr, OwnedFd)>) -> Self {
        let mut map: HashMap<SocketAddr, Vec<Option<OwnedFd>>> = HashMap::new();
        for (addr, fd) in inherited {
            map.entry(addr).or_default().push(Some(fd));
        }
        Self {
            inner: Mutex::new(Inner {
                inherited: map,
                open: HashMap::new(),
            }),
            steering: OnceLock::new(),
        }
    }

    /// Steers new connections to the shards' sockets from now on (set
    /// before any shard listens; a second call is ignored).
    pub fn steer(&self, steering: Arc<Steering>) {
        let _ = self.steering.set(steering);
    }

    /// Steering and the shard's index, when `owner` is a shard and
    /// steering is on.
    fn steered(&self, owner: Owner) -> Option<(&Steering, usize)> {
        match owner {
            Owner::Shard(i) => Some((self.steering.get()?, i)),
            Owner::Admin => None,
        }
    }

    /// Shard `shard`'s slot for counting its connections, when steering.
    pub fn shard_load(&self, shard: usize) -> Option<ShardLoad> {
        self.steering.get()?.shard_load(shard)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the previous process handed over a socket for `addr`
    /// (then binding there is no conflict with it).
    pub fn inherits(&self, addr: SocketAddr) -> bool {
        self.lock().inherited.contains_key(&addr)
    }

    /// The handed-over sockets for `addr` that `owner` serves: shard `i`
    /// of `n` takes those at positions `i`, `i + n`, … of the previous
    /// process's list, so that with as many shards as before each takes
    /// one, with fewer some take two (every socket's backlog is still
    /// accepted from), and with more the extra shards take none (and bind
    /// a new socket into the same SO_REUSEPORT group). The admin takes
    /// them all.
    pub fn take(&self, addr: SocketAddr, owner: Owner, n: usize) -> Vec<OwnedFd> {
        let mut inner = self.lock();
        let Some(slots) = inner.inherited.get_mut(&addr) else {
            return Vec::new();
        };
        let taken = slots
            .iter_mut()
            .enumerate()
            .filter(|(pos, _)| match owner {
                Owner::Shard(i) => pos % n.max(1) == i,
                Owner::Admin => true,
            })
            .filter_map(|(_, slot)| slot.take())
            .collect();
        if slots.iter().all(Option::is_none) {
            inner.inherited.remove(&addr);
        }
        taken
    }

    /// `owner` listens on `fd` for `addr`.
    pub fn opened(&self, addr: SocketAddr, owner: Owner, fd: RawFd) {
        let mut inner = self.lock();
        inner.open.entry(addr).or_default().push((owner, fd));
        if let Some((s, i)) = self.steered(owner) {
            if let Err(e) = s.join(addr, i, fd) {
                // The kernel's hash still spreads this address's
                // connections; only the steering is lost.
                tracing::warn!(shard = i, %addr, "connection steering off for this socket: {e}");
            }
        }
    }

    /// `owner` is about to close `fd`: call before closing it.
    pub fn closing(&self, addr: SocketAddr, owner: Owner, fd: RawFd) {
        let mut inner = self.lock();
        if let Some((s, i)) = self.steered(owner) {
            s.leave(addr, i, fd);
        }
        if let Some(list) = inner.open.get_mut(&addr) {
            list.retain(|&(o, f)| (o, f) != (owner, fd));
            if list.is_empty() {
                inner.open.remove(&addr);
            }
        }
    }

    /// Copies of every socket listened on now, by address, the shards'
    /// in shard order, for the next process, which steers them from now
    /// on (until [`Self::reclaim_steering`]).
    pub fn duplicate(&self) -> io::Result<Vec<(SocketAddr, OwnedFd)>> {
        let inner = self.lock();
        if let Some(s) = self.steering.get() {
            s.release_all();
        }
        let mut out = Vec::new();
        for (addr, list) in &inner.open {
            let mut list = list.clone();
            list.sort_by_key(|(o, _)| match o {
                Owner::Shard(i) => *i,
                Owner::Admin => usize::MAX,
            });
            for (_, fd) in list {
                // SAFETY: registered descriptors are open until `closing`,
                // which waits for this lock.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                out.push((*addr, fd.as_fd().try_clone_to_owned()?));
            }
        }
        Ok(out)
    }

    /// The next process left without taking over: steer this process's
    /// sockets again.
    pub fn reclaim_steering(&self) {
        if let Some(s) = self.steering.get() {
            s.reclaim_all();
        }
    }

    /// Closes the handed-over sockets nobody took (their addresses left
    /// the configuration); their addresses.
    pub fn release_untaken(&self) -> Vec<SocketAddr> {
        let mut inner = self.lock();
        let gone: Vec<SocketAddr> = inner.inherited.keys().copied().collect();
        inner.inherited.clear();
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn sock() -> OwnedFd {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        OwnedFd::from(l)
    }

    #[test]
    fn shards_split_the_handed_over_sockets_by_position() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let fds: Vec<OwnedFd> = (0..3).map(|_| sock()).collect();
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let r = ListenSockets::new(fds.into_iter().map(|f| (a, f)).collect());
        assert!(r.inherits(a));
        // Two shards now, three before: shard 0 takes the 1st and 3rd.
        let zero: Vec<RawFd> = r
            .take(a, Owner::Shard(0), 2)
            .iter()
            .map(|f| f.as_raw_fd())
            .collect();
        assert_eq!(zero, [raw[0], raw[2]]);
        assert!(r.inherits(a));
        let one = r.take(a, Owner::Shard(1), 2);
        assert_eq!(one.len(), 1);
        assert!(!r.inherits(a), "all taken");
        assert!(r.take(a, Owner::Shard(0), 2).is_empty());
    }

    #[test]
    fn copies_are_of_what_is_open_now() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let r = ListenSockets::default();
        let (s0, s1) = (sock(), sock());
        r.opened(a, Owner::Shard(1), s1.as_raw_fd());
        r.opened(a, Owner::Shard(0), s0.as_raw_fd());
        let copies = r.duplicate().expect("dup");
        assert_eq!(copies.len(), 2);
        // In shard order, each a new descriptor of the same socket.
        let port = |f: &OwnedFd| {
            let l = std::net::TcpListener::from(f.try_clone().expect("clone"));
            l.local_addr().expect("addr")
        };
        assert_eq!(port(&copies[0].1), port(&s0));
        assert_eq!(port(&copies[1].1), port(&s1));
        assert_ne!(copies[0].1.as_raw_fd(), s0.as_raw_fd());
        r.closing(a, Owner::Shard(0), s0.as_raw_fd());
        assert_eq!(r.duplicate().expect("dup").len(), 1);
        r.closing(a, Owner::Shard(1), s1.as_raw_fd());
        assert!(r.duplicate().expect("dup").is_empty());
    }
}
