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
/// Work is proportional to what changed: a cluster reused unchanged is kept
/// in O(1) ([`keep_cluster`]), only rebuilt clusters walk their hosts
/// ([`assign_cluster`]).
///
/// Ids of removed hosts are recycled only after one further build, so a data
/// shard always sees an id's old owner leave before a new owner arrives.
///
/// [`keep_cluster`]: HostRegistry::keep_cluster
/// [`assign_cluster`]: HostRegistry::assign_cluster
#[derive(Debug, Default)]
pub struct HostRegistry {
    clusters: AHashMap<String, ClusterIds>,
    /// Build in progress (incremented by `begin`).
    build: u64,
    /// Ids removed by the build in progress.
    removed: Vec<HostId>,
    /// Ids freed by the previous build; reusable from the next one.
    cooling: Vec<HostId>,
    free: Vec<HostId>,
    next: u32,
}

#[derive(Debug, Default)]
struct ClusterIds {
    by_addr: AHashMap<SocketAddr, HostId>,
    /// The last build that kept or rebuilt this cluster.
    live_in: u64,
}

impl HostRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a build: every cluster of the new config must be kept or
    /// assigned, then `finish` releases the ids of the clusters that were not.
    pub fn begin(&mut self) {
        self.build += 1;
    }

    /// Keeps every host id of a cluster whose endpoints did not change.
    pub fn keep_cluster(&mut self, cluster: &str) {
        if let Some(c) = self.clusters.get_mut(cluster) {
            c.live_in = self.build;
        }
    }

    /// Ids for the hosts of a new or changed cluster, in `addrs` order
    /// (a repeated address gets the same id). Hosts that were already in the
    /// cluster keep their ids; the ids of hosts no longer listed are released.
    pub fn assign_cluster(
        &mut self,
        cluster: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Vec<HostId> {
        let mut old = self
            .clusters
            .remove(cluster)
            .map(|c| c.by_addr)
            .unwrap_or_default();
        let addrs = addrs.into_iter();
        let mut by_addr = AHashMap::with_capacity(addrs.size_hint().0);
        let mut ids = Vec::with_capacity(addrs.size_hint().0);
        for addr in addrs {
            let id = match by_addr.get(&addr) {
                Some(id) => *id,
                None => {
                    let id = old.remove(&addr).unwrap_or_else(|| self.fresh());
                    by_addr.insert(addr, id);
                    id
                }
            };
            ids.push(id);
        }
        self.removed.extend(old.into_values());
        self.clusters.insert(
            cluster.to_owned(),
            ClusterIds {
                by_addr,
                live_in: self.build,
            },
        );
        ids
    }

    fn fresh(&mut self) -> HostId {
        self.free.pop().unwrap_or_else(|| {
            let id = HostId(self.next);
            self.next += 1;
            id
        })
    }

    /// Ends a build: clusters neither kept nor assigned are removed.
    pub fn finish(&mut self) {
        let build = self.build;
        let removed = &mut self.removed;
        self.clusters.retain(|_, c| {
            let live = c.live_in == build;
            if !live {
                removed.extend(c.by_addr.values().copied());
            }
            live
        });
        self.free.append(&mut self.cooling);
        self.cooling = std::mem::take(&mut self.removed);
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
        let [x, y] = r.assign_cluster("c", [a(1), a(2)])[..] else {
            panic!()
        };
        r.finish();
        assert_ne!(x, y);

        r.begin();
        assert_eq!(r.assign_cluster("c", [a(1)]), [x]);
        r.finish(); // a(2) removed: its id cools down

        r.begin();
        let ids = r.assign_cluster("c", [a(1), a(3)]);
        assert_eq!(ids[0], x);
        assert_ne!(
            ids[1], y,
            "freed id must not be reused in the very next build"
        );
        r.finish();

        r.begin();
        let ids = r.assign_cluster("c", [a(1), a(3), a(4)]);
        assert_eq!(ids[2], y, "id reused after cooling down");
        r.finish();
        assert_eq!(r.capacity(), 3);
    }

    #[test]
    fn same_address_in_two_clusters_are_two_hosts() {
        let mut r = HostRegistry::new();
        r.begin();
        assert_ne!(r.assign_cluster("a", [a(1)]), r.assign_cluster("b", [a(1)]));
        assert_eq!(
            r.assign_cluster("d", [a(1), a(1)]).len(),
            2,
            "one id per entry"
        );
    }

    #[test]
    fn kept_clusters_keep_ids_and_dropped_clusters_release_them() {
        let mut r = HostRegistry::new();
        r.begin();
        let kept = r.assign_cluster("kept", [a(1), a(2)]);
        let gone = r.assign_cluster("gone", [a(3)]);
        r.finish();

        r.begin();
        r.keep_cluster("kept");
        r.finish(); // "gone" removed: its id cools down
        r.begin();
        r.keep_cluster("kept");
        assert_eq!(r.assign_cluster("kept2", [a(9)]), [HostId(3)]);
        r.finish();
        r.begin();
        r.keep_cluster("kept");
        r.keep_cluster("kept2");
        assert_eq!(
            r.assign_cluster("new", [a(5)]),
            gone,
            "recycled after cooling"
        );
        assert_eq!(r.assign_cluster("kept", [a(2), a(1)]), [kept[1], kept[0]]);
        r.finish();
    }
}
