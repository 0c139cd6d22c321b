//! The set of outlier-ejected hosts, as pushed by the control shard to every
//! data shard: a bitset indexed by [`HostId`], so a pick or an override-host
//! lookup tests membership in O(1) without hashing.

use crate::host::HostId;

/// Hosts currently ejected by outlier detection, at one `epoch`.
///
/// The control shard builds a new set (with a higher epoch) whenever an
/// ejection or un-ejection happens; data shards compare epochs to know when
/// their derived per-cluster host lists are stale.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EjectedSet {
    /// Bumped by every change; 0 is the empty set every shard starts with.
    pub epoch: u64,
    bits: Vec<u64>,
    len: usize,
}

impl EjectedSet {
    /// A set at `epoch` holding `ids`.
    pub fn new(epoch: u64, ids: impl IntoIterator<Item = HostId>) -> Self {
        let mut set = Self {
            epoch,
            bits: Vec::new(),
            len: 0,
        };
        for id in ids {
            set.insert(id);
        }
        set
    }

    pub fn insert(&mut self, id: HostId) {
        let (word, bit) = (id.index() / 64, id.index() % 64);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        if self.bits[word] & (1 << bit) == 0 {
            self.bits[word] |= 1 << bit;
            self.len += 1;
        }
    }

    #[inline]
    pub fn contains(&self, id: HostId) -> bool {
        let (word, bit) = (id.index() / 64, id.index() % 64);
        self.bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = HostId> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| HostId((w * 64 + b) as u32))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_and_iteration() {
        let set = EjectedSet::new(3, [HostId(1), HostId(200), HostId(1)]);
        assert_eq!(set.epoch, 3);
        assert_eq!(set.len(), 2);
        assert!(set.contains(HostId(1)) && set.contains(HostId(200)));
        assert!(!set.contains(HostId(2)) && !set.contains(HostId(100_000)));
        assert_eq!(set.iter().collect::<Vec<_>>(), [HostId(1), HostId(200)]);
        assert!(EjectedSet::default().is_empty());
    }
}
