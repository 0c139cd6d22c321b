//! Consistent hashing as Envoy builds it, so that a fleet mixing this
//! gateway and Envoy sends a key to the same host: `RING_HASH` (ketama: a
//! sorted ring of XXH64 hashes of `"<address>_<i>"`, each host's share of
//! entries by weight) and `MAGLEV` (a prime-sized table filled by each
//! host's permutation, `offset = XXH64(addr) % M`,
//! `skip = XXH64(addr, 1) % (M - 1) + 1`). Both are built over a cluster's
//! candidates (the healthy hosts, or all in panic) and picked in O(log n)
//! and O(1).

use std::sync::Arc;

use crate::config::{LbPolicy, Maglev, RingHash};
use crate::snapshot::Host;

use super::xxhash::xxh64;

/// Each host's weight over the sum, with the smallest and largest
/// (Envoy's `normalizeHostWeights`, locality weight 1).
fn normalize(weights: &[u32]) -> (Vec<f64>, f64, f64) {
    let sum: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    let mut min = 1.0f64;
    let mut max = 0.0f64;
    let norm = weights
        .iter()
        .map(|w| {
            let n = f64::from(*w) * 1.0 / sum as f64;
            min = min.min(n);
            max = max.max(n);
            n
        })
        .collect();
    (norm, min, max)
}

/// A ketama ring: `(hash, candidate)` sorted by hash.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    entries: Vec<(u64, u32)>,
}

impl Ring {
    /// The ring of `hosts` (`(hash key, weight)`, in the candidates'
    /// order; the key is the address as `ip:port`, `[ip6]:port`).
    pub fn build(hosts: &[(String, u32)], cfg: &RingHash) -> Ring {
        if hosts.is_empty() {
            return Ring::default();
        }
        let weights: Vec<u32> = hosts.iter().map(|(_, w)| *w).collect();
        let (norm, min_w, _) = normalize(&weights);
        let min_ring = cfg.minimum_ring_size as f64;
        let scale = ((min_w * min_ring).ceil() / min_w).min(cfg.maximum_ring_size as f64);
        let mut entries = Vec::with_capacity(scale.ceil() as usize);
        let mut key = String::new();
        let (mut current, mut target) = (0.0f64, 0.0f64);
        for (slot, ((host, _), w)) in hosts.iter().zip(&norm).enumerate() {
            target += scale * w;
            let mut i = 0u64;
            while current < target {
                key.clear();
                key.push_str(host);
                key.push('_');
                key.push_str(&i.to_string());
                entries.push((xxh64(key.as_bytes(), 0), slot as u32));
                i += 1;
                current += 1.0;
            }
        }
        // Stable: equal hashes keep the candidates' order, as Envoy's
        // vector sort usually does for so rare a case.
        entries.sort_by_key(|e| e.0);
        Ring { entries }
    }

    /// The candidate owning `h`: the first entry at or past it, wrapping.
    #[inline]
    pub fn pick(&self, h: u64) -> Option<u32> {
        let at = self.entries.partition_point(|e| e.0 < h);
        self.entries
            .get(at)
            .or_else(|| self.entries.first())
            .map(|e| e.1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A cluster's consistent-hash lookup over a list of candidates (slots
/// into that list).
#[derive(Debug)]
pub enum HashTable {
    Ring(Ring),
    Maglev(MaglevTable),
}

impl HashTable {
    /// The table of `policy` over `candidates` (indexes into `hosts`),
    /// keyed by address as Envoy's `hashKey`: the same candidates give the
    /// same table on every shard, every gateway and Envoy. `None` for the
    /// other policies.
    pub fn build(policy: LbPolicy, hosts: &[Host], candidates: &[u32]) -> Option<HashTable> {
        let keys: Vec<(String, u32)> = candidates
            .iter()
            .map(|i| {
                let h = &hosts[*i as usize];
                (h.address.to_string(), h.weight)
            })
            .collect();
        match policy {
            LbPolicy::RingHash(cfg) => Some(HashTable::Ring(Ring::build(&keys, &cfg))),
            LbPolicy::Maglev(cfg) => Some(HashTable::Maglev(MaglevTable::build(&keys, &cfg))),
            _ => None,
        }
    }

    #[inline]
    pub fn pick(&self, h: u64) -> Option<u32> {
        match self {
            HashTable::Ring(r) => r.pick(h),
            HashTable::Maglev(m) => m.pick(h),
        }
    }
}

/// A table the control shard built with the snapshot, for one priority's
/// healthy hosts with nothing ejected (the usual state): data shards whose
/// candidates are the same take it instead of building their own.
#[derive(Debug)]
pub struct PrebuiltTable {
    pub priority: u32,
    /// Indexes into the snapshot's hosts, as a shard derives them.
    pub candidates: Vec<u32>,
    pub table: Arc<HashTable>,
}

/// A Maglev lookup table of candidates.
#[derive(Debug, Clone, Default)]
pub struct MaglevTable {
    table: Vec<u32>,
}

impl MaglevTable {
    /// The table of `hosts` (as [`Ring::build`]) in `cfg.table_size` slots.
    pub fn build(hosts: &[(String, u32)], cfg: &Maglev) -> MaglevTable {
        if hosts.is_empty() {
            return MaglevTable::default();
        }
        let m = cfg.table_size;
        let weights: Vec<u32> = hosts.iter().map(|(_, w)| *w).collect();
        let (norm, _, max_w) = normalize(&weights);
        struct Entry {
            offset: u64,
            skip: u64,
            weight: f64,
            target: f64,
            next: u64,
        }
        // Envoy fills the table in the order of the hosts' keys.
        let mut order: Vec<usize> = (0..hosts.len()).collect();
        order.sort_by(|a, b| hosts[*a].0.cmp(&hosts[*b].0));
        let mut entries: Vec<(u32, Entry)> = order
            .into_iter()
            .map(|i| (i as u32, &hosts[i].0, norm[i]))
            .map(|(slot, key, w)| {
                (
                    slot,
                    Entry {
                        offset: xxh64(key.as_bytes(), 0) % m,
                        skip: xxh64(key.as_bytes(), 1) % (m - 1) + 1,
                        weight: w,
                        target: 0.0,
                        next: 0,
                    },
                )
            })
            .collect();
        const EMPTY: u32 = u32::MAX;
        let mut table = vec![EMPTY; m as usize];
        let mut filled = 0u64;
        let mut iteration = 1u64;
        while filled < m {
            for (slot, e) in entries.iter_mut() {
                if filled >= m {
                    break;
                }
                // A host of the largest weight takes a slot every round, one
                // of a third of it every third round.
                if iteration as f64 * e.weight < e.target {
                    continue;
                }
                e.target += max_w;
                let mut c = (e.offset + e.skip * e.next) % m;
                while table[c as usize] != EMPTY {
                    e.next += 1;
                    c = (e.offset + e.skip * e.next) % m;
                }
                table[c as usize] = *slot;
                e.next += 1;
                filled += 1;
            }
            iteration += 1;
        }
        MaglevTable { table }
    }

    #[inline]
    pub fn pick(&self, h: u64) -> Option<u32> {
        if self.table.is_empty() {
            return None;
        }
        Some(self.table[(h % self.table.len() as u64) as usize])
    }
}

#[cfg(test)]
mod tests {
    //! Against Envoy 1.40 itself: which of five hosts (127.0.0.1:39001 to
    //! 39005; digits 1 to 5 below) Envoy chose for keys `k0` to `k199` sent
    //! in a header hashed by `hash_policy`, for each cluster shape.
    use super::*;
    use crate::lb::hash_policy::header_hash;

    const RING: &str = "24242544224451321412421521534245515235221144434421453451513235543133342144344152523442112142525111335431124242554425422225412154114213145552533431321324254335424351442552423522242544511355351413332233";
    const MAGLEV: &str = "52212353151455224424154233233232244213432323514535154213131323222342245424145342555342521331542425131331532424555222253331224515411345435525545214131112313115542243413143424345551255422232221545451543";
    const RING_W: &str = "24242544223452321422421322334245542332221244432223323434213333343133332124344132523432132223335133331234432222554432423223412153314223145232333434333324234335221351442552323522242234321355353413332233";
    const MAGLEV_W: &str = "22232353152455222423152233233232234213232323334535154213332323222332235424145332555342221333542335231332532224553222253331224312411335433233332214133112313315342233413133324325551255222232221533351543";
    const RING4: &str = "21542544224451221422421521541245515225221144424421422451214255544145542144144152525442152445525112215441124242554412422245112154514214145552552451121224254515424151445552415512242544524155554412512254";
    const MAGLEV4: &str = "52212454151455224424154222242222244215412521514555154214111425222542245424145142555542521251542425151511522424555222254411224515411245425525545214121112511115542245415144424245551255422242221545451542";

    fn hosts(ports: &[u16], weights: &[u32]) -> Vec<(String, u32)> {
        ports
            .iter()
            .zip(weights)
            .map(|(p, w)| (format!("127.0.0.1:{p}"), *w))
            .collect()
    }

    /// The digit of the host each key goes to.
    fn layout(pick: impl Fn(u64) -> Option<u32>, ports: &[u16]) -> String {
        (0..200)
            .map(|i| {
                let h = header_hash(&[format!("k{i}").as_bytes()]);
                let port = ports[pick(h).unwrap() as usize];
                char::from(b'0' + (port - 39000) as u8)
            })
            .collect()
    }

    const ALL: [u16; 5] = [39001, 39002, 39003, 39004, 39005];
    const FOUR: [u16; 4] = [39001, 39002, 39004, 39005];

    #[test]
    fn ring_hash_places_keys_as_envoy_does() {
        let cfg = RingHash::default();
        for (ports, weights, want) in [
            (&ALL[..], &[1, 1, 1, 1, 1][..], RING),
            (&ALL[..], &[1, 2, 3, 1, 1][..], RING_W),
            (&FOUR[..], &[1, 1, 1, 1][..], RING4),
        ] {
            let ring = Ring::build(&hosts(ports, weights), &cfg);
            assert_eq!(layout(|h| ring.pick(h), ports), want, "{weights:?}");
        }
        assert_eq!(Ring::build(&hosts(&ALL, &[1; 5]), &cfg).len(), 1025);
    }

    #[test]
    fn maglev_places_keys_as_envoy_does() {
        let cfg = Maglev::default();
        for (ports, weights, want) in [
            (&ALL[..], &[1, 1, 1, 1, 1][..], MAGLEV),
            (&ALL[..], &[1, 2, 3, 1, 1][..], MAGLEV_W),
            (&FOUR[..], &[1, 1, 1, 1][..], MAGLEV4),
        ] {
            let table = MaglevTable::build(&hosts(ports, weights), &cfg);
            assert_eq!(layout(|h| table.pick(h), ports), want, "{weights:?}");
        }
    }

    #[test]
    fn a_host_leaving_moves_only_its_keys_under_maglev() {
        let moved = MAGLEV
            .chars()
            .zip(MAGLEV4.chars())
            .filter(|(a, b)| a != b && *a != '3')
            .count();
        assert_eq!(moved, 0);
    }
}
