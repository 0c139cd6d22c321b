//! Stable host identities across config versions.
//!
//! A [`HostId`] is a dense index: data shards keep per-host state (round-robin
//! position, in-flight counts, connection pools, outlier buckets) in plain
//! vectors indexed by it. The control shard's [`HostRegistry`] hands out ids
//! so that a host (cluster, address) that survives an update keeps its id and
//! its shard-local state carries over untouched.

use std::net::SocketAddr;

use ahash::AHashMap;

/// Dense, stable index of one (cluster, address) host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(pub u32);

impl HostId {
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Owned by the control shard; assigns ids when snapshots are built.
///
/// Ids of removed hosts are recycled only after one further build, so a data
/// shard always sees an id's old owner leave before a new owner arrives, and
/// can tell the two apart by address (it resets state whose address changed).
#[derive(Debug, Default)]
pub struct HostRegistry {
    ids: AHashMap<(String, SocketAddr), HostId>,
    /// Ids freed by the previous build; reusable from the next one.
    cooling: Vec<HostId>,
    free: Vec<HostId>,
    next: u32,
    /// Ids seen during the build in progress.
    live: AHashMap<(String, SocketAddr), HostId>,
}

impl HostRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a build: every host of the new config must be `assign`ed, then
    /// `finish` releases the ids of hosts that were not.
    pub fn begin(&mut self) {
        self.live.clear();
    }

    pub fn assign(&mut self, cluster: &str, addr: SocketAddr) -> HostId {
        let key = (cluster.to_owned(), addr);
        if let Some(id) = self.live.get(&key) {
            return *id;
        }
        let id = match self.ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.free.pop().unwrap_or_else(|| {
                    let id = HostId(self.next);
                    self.next += 1;
                    id
                });
                self.ids.insert(key.clone(), id);
                id
            }
        };
        self.live.insert(key, id);
        id
    }

    pub fn finish(&mut self) {
        self.free.append(&mut self.cooling);
        let live = &self.live;
        let mut removed = Vec::new();
        self.ids.retain(|k, id| {
            let keep = live.contains_key(k);
            if !keep {
                removed.push(*id);
            }
            keep
        });
        self.cooling = removed;
    }

    /// One past the largest id ever handed out: the length shard-local
    /// per-host vectors need.
    pub fn capacity(&self) -> usize {
        self.next as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    #[test]
    fn survivors_keep_ids_and_removed_ids_cool_down_one_build() {
        let mut r = HostRegistry::new();
        r.begin();
        let x = r.assign("c", a(1));
        let y = r.assign("c", a(2));
        r.finish();
        assert_ne!(x, y);

        r.begin();
        assert_eq!(r.assign("c", a(1)), x);
        r.finish(); // a(2) removed: its id cools down

        r.begin();
        assert_eq!(r.assign("c", a(1)), x);
        let z = r.assign("c", a(3));
        assert_ne!(z, y, "freed id must not be reused in the very next build");
        r.finish();

        r.begin();
        r.assign("c", a(1));
        r.assign("c", a(3));
        let w = r.assign("c", a(4));
        assert_eq!(w, y, "id reused after cooling down");
        r.finish();
        assert_eq!(r.capacity(), 3);
    }

    #[test]
    fn same_address_in_two_clusters_are_two_hosts() {
        let mut r = HostRegistry::new();
        r.begin();
        assert_ne!(r.assign("a", a(1)), r.assign("b", a(1)));
    }
}
