//! Which of a listener's filter chains a connection gets: `FilterChainMatch` as Envoy selects it (gRFC A36's normalisation), precomputed into a table of hash lookups.
//!
//! Envoy's order, one level per field, most specific first within each:
//!
//! 1. `destination_port`: the exact port; chains without one only when no
//!    chain names this port.
//! 2. `prefix_ranges` (the address the client connected to): the longest
//!    prefix; chains without ranges only when none contains the address.
//! 3. `server_names` (SNI): the exact name, then `*.` wildcards from the
//!    longest suffix (`*.b.example.com` before `*.example.com`; a wildcard
//!    covers any number of labels but not the bare domain), then chains
//!    without names.
//! 4. `transport_protocol` (`tls` or `raw_buffer`): exact, then unset.
//! 5. `application_protocols` (ALPN): the client's protocols in the
//!    client's order, the first that a chain names; then unset.
//! 6. `direct_source_prefix_ranges`, 7. `source_type` (a local client
//!    takes `SAME_IP_OR_LOOPBACK` chains, a remote one `EXTERNAL` chains,
//!    when there are any; else `ANY`), 8. `source_prefix_ranges`,
//!    9. `source_ports`.
//!
//! There is no backtracking, as in Envoy: each level commits to its most
//! specific branch, and when that branch has no match further down the
//! connection gets the default chain (or is closed), even if a less
//! specific branch would have matched. Building the table expands each
//! chain's repeated fields into every combination (A36's "disjunctive
//! normal form"); two chains reaching the same leaf overlap, which is a
//! configuration error naming both.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ahash::AHashMap;

/// A CIDR range, normalised as A36 says: the host bits masked off, an IPv4
/// length above 32 taken as 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CidrRange {
    addr: IpAddr,
    len: u8,
}

impl CidrRange {
    /// `None` when `len` is above 128 (Envoy's bound for either family).
    pub fn new(addr: IpAddr, len: u32) -> Option<Self> {
        if len > 128 {
            return None;
        }
        let len = match addr {
            IpAddr::V4(_) => len.min(32) as u8,
            IpAddr::V6(_) => len as u8,
        };
        Some(Self {
            addr: mask(addr, len),
            len,
        })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.len) == self.addr
    }
}

impl std::fmt::Display for CidrRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

/// `FilterChainMatch.source_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum SourceType {
    #[default]
    Any,
    /// The client's address is the listener's own address, or loopback.
    SameIpOrLoopback,
    External,
}

/// One chain's `filter_chain_match`, validated (the xDS layer refuses
/// ports of 0, partial wildcards and lengths above 128) and normalised:
/// names lowercased, ranges masked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterChainMatch {
    pub destination_port: Option<u16>,
    pub prefix_ranges: Vec<CidrRange>,
    /// Exact names, or `*.suffix` wildcards; lowercase.
    pub server_names: Vec<String>,
    /// `""` (any), `raw_buffer`, `tls`, or another name no connection has.
    pub transport_protocol: String,
    pub application_protocols: Vec<String>,
    pub direct_source_prefix_ranges: Vec<CidrRange>,
    pub source_type: SourceType,
    pub source_prefix_ranges: Vec<CidrRange>,
    pub source_ports: Vec<u16>,
}

impl FilterChainMatch {
    /// Whether matching it needs what `tls_inspector` reads from a
    /// ClientHello: without the inspector such a chain never matches (as
    /// in Envoy, which takes the configuration all the same).
    pub fn needs_inspector(&self) -> bool {
        !self.server_names.is_empty()
            || !self.application_protocols.is_empty()
            || !matches!(self.transport_protocol.as_str(), "" | "raw_buffer")
    }
}

/// What selection knows of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    /// The address the client connected to (the socket's local address,
    /// or a PROXY header's destination).
    pub local: SocketAddr,
    /// The client's address (a PROXY header's source, if any).
    pub peer: SocketAddr,
    /// The address the connection came from: the client, or the proxy
    /// that sent a PROXY header (`direct_source_prefix_ranges`).
    pub direct_peer: SocketAddr,
    /// SNI, lowercase; `None` without one (or without `tls_inspector`).
    pub server_name: Option<&'a str>,
    /// `tls` when `tls_inspector` found a ClientHello, else `raw_buffer`.
    pub transport_protocol: &'a str,
    /// The client's ALPN list, in its order.
    pub application_protocols: &'a [&'a [u8]],
}

/// Two chains that a connection could match equally: `later` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    pub earlier: usize,
    pub later: usize,
}

/// Keyed level: an exact key first, else the branch without a key.
#[derive(Debug)]
struct KeyLevel<K, N> {
    exact: AHashMap<K, N>,
    any: Option<N>,
}

impl<K, N> Default for KeyLevel<K, N> {
    fn default() -> Self {
        Self {
            exact: AHashMap::default(),
            any: None,
        }
    }
}

impl<K: std::hash::Hash + Eq, N: Default> KeyLevel<K, N> {
    fn entry(&mut self, key: Option<K>) -> &mut N {
        match key {
            Some(k) => self.exact.entry(k).or_default(),
            None => self.any.get_or_insert_with(N::default),
        }
    }
}

impl<K: std::hash::Hash + Eq, N> KeyLevel<K, N> {
    fn get<Q>(&self, key: Option<&Q>) -> Option<&N>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        key.and_then(|k| self.exact.get(k)).or(self.any.as_ref())
    }
}

/// Address level: the longest prefix that contains the address, else the
/// branch without ranges. One hash map per prefix length, longest first.
#[derive(Debug)]
struct IpLevel<N> {
    by_len: Vec<(u8, bool, AHashMap<IpAddr, N>)>,
    any: Option<N>,
}

impl<N> Default for IpLevel<N> {
    fn default() -> Self {
        Self {
            by_len: Vec::new(),
            any: None,
        }
    }
}

impl<N: Default> IpLevel<N> {
    fn entry(&mut self, range: Option<CidrRange>) -> &mut N {
        let Some(r) = range else {
            return self.any.get_or_insert_with(N::default);
        };
        let v4 = r.addr.is_ipv4();
        let i = match self
            .by_len
            .iter()
            .position(|(len, is_v4, _)| *len == r.len && *is_v4 == v4)
        {
            Some(i) => i,
            None => {
                self.by_len.push((r.len, v4, AHashMap::default()));
                self.by_len.sort_by_key(|l| std::cmp::Reverse(l.0));
                self.by_len
                    .iter()
                    .position(|(len, is_v4, _)| *len == r.len && *is_v4 == v4)
                    .unwrap_or_default()
            }
        };
        self.by_len[i].2.entry(r.addr).or_default()
    }
}

impl<N> IpLevel<N> {
    /// `ip` is canonical already ([`ChainTable::find`] made it so).
    fn get(&self, ip: IpAddr) -> Option<&N> {
        let v4 = ip.is_ipv4();
        self.by_len
            .iter()
            .filter(|(_, is_v4, _)| *is_v4 == v4)
            .find_map(|(len, _, m)| m.get(&mask(ip, *len)))
            .or(self.any.as_ref())
    }
}

/// An IPv4 client on a dual-stack socket shows as `::ffff:a.b.c.d`; it
/// matches IPv4 ranges, as in Envoy.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Server-name level: exact, then wildcard suffixes longest first, then
/// the branch without names.
#[derive(Debug)]
struct NameLevel<N> {
    exact: AHashMap<String, N>,
    /// `*.example.com` stored as `.example.com`.
    wildcard: AHashMap<String, N>,
    any: Option<N>,
}

impl<N> Default for NameLevel<N> {
    fn default() -> Self {
        Self {
            exact: AHashMap::default(),
            wildcard: AHashMap::default(),
            any: None,
        }
    }
}

impl<N: Default> NameLevel<N> {
    fn entry(&mut self, name: Option<&str>) -> &mut N {
        match name {
            None => self.any.get_or_insert_with(N::default),
            Some(n) => match n.strip_prefix('*') {
                Some(suffix) => self.wildcard.entry(suffix.to_owned()).or_default(),
                None => self.exact.entry(n.to_owned()).or_default(),
            },
        }
    }
}

impl<N> NameLevel<N> {
    fn get(&self, name: Option<&str>) -> Option<&N> {
        if let Some(name) = name {
            if let Some(n) = self.exact.get(name) {
                return Some(n);
            }
            // `a.b.example.com`: `.b.example.com`, then `.example.com`,
            // then `.com`; never the whole name.
            let mut rest = name;
            while let Some(dot) = rest.get(1..).and_then(|r| r.find('.')) {
                rest = &rest[dot + 1..];
                if let Some(n) = self.wildcard.get(rest) {
                    return Some(n);
                }
            }
        }
        self.any.as_ref()
    }
}

/// Source-type level: `[ANY, SAME_IP_OR_LOOPBACK, EXTERNAL]`.
#[derive(Debug)]
struct TypeLevel<N>([Option<N>; 3]);

impl<N> Default for TypeLevel<N> {
    fn default() -> Self {
        Self([None, None, None])
    }
}

impl<N: Default> TypeLevel<N> {
    fn entry(&mut self, t: SourceType) -> &mut N {
        self.0[t as usize].get_or_insert_with(N::default)
    }
}

impl<N> TypeLevel<N> {
    fn get(&self, local: bool) -> Option<&N> {
        let specific = if local {
            SourceType::SameIpOrLoopback
        } else {
            SourceType::External
        };
        self.0[specific as usize]
            .as_ref()
            .or(self.0[SourceType::Any as usize].as_ref())
    }
}

type SourcePorts = KeyLevel<u16, Option<usize>>;
type SourceIps = IpLevel<SourcePorts>;
type SourceTypes = TypeLevel<SourceIps>;
type DirectSources = IpLevel<SourceTypes>;
type Alpns = KeyLevel<String, DirectSources>;
type Transports = KeyLevel<String, Alpns>;
type ServerNames = NameLevel<Transports>;
type DestinationIps = IpLevel<ServerNames>;

/// The selection table of one listener's `filter_chains` (the default
/// chain is the caller's, for when [`ChainTable::find`] has none).
#[derive(Debug, Default)]
pub struct ChainTable {
    root: KeyLevel<u16, DestinationIps>,
    /// Some chain needs `tls_inspector` to ever match.
    inspects: bool,
    /// Some chain matches on the address the client connected to
    /// (`destination_port`, `prefix_ranges`, `source_type`).
    local: bool,
}

/// Each value of a repeated field, or a single "unset" when it is empty.
fn each<T: Clone>(v: &[T]) -> Vec<Option<T>> {
    if v.is_empty() {
        vec![None]
    } else {
        v.iter().cloned().map(Some).collect()
    }
}

impl ChainTable {
    /// Builds the table of `chains` (in configuration order); the first
    /// pair that overlaps is refused.
    pub fn build(chains: &[&FilterChainMatch]) -> Result<Self, Overlap> {
        let mut t = ChainTable::default();
        for (i, m) in chains.iter().enumerate() {
            t.inspects |= m.needs_inspector();
            t.local |= m.destination_port.is_some()
                || !m.prefix_ranges.is_empty()
                || m.source_type != SourceType::Any;
            let tp = (!m.transport_protocol.is_empty()).then(|| m.transport_protocol.clone());
            for dst in each(&m.prefix_ranges) {
                for sni in each(&m.server_names) {
                    for alpn in each(&m.application_protocols) {
                        for direct in each(&m.direct_source_prefix_ranges) {
                            for src in each(&m.source_prefix_ranges) {
                                for sport in each(&m.source_ports) {
                                    let leaf = t
                                        .root
                                        .entry(m.destination_port)
                                        .entry(dst)
                                        .entry(sni.as_deref())
                                        .entry(tp.clone())
                                        .entry(alpn.clone())
                                        .entry(direct)
                                        .entry(m.source_type)
                                        .entry(src)
                                        .entry(sport);
                                    if let Some(earlier) = *leaf {
                                        return Err(Overlap { earlier, later: i });
                                    }
                                    *leaf = Some(i);
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(t)
    }

    /// Whether some chain can only match what `tls_inspector` reads.
    pub fn needs_inspector(&self) -> bool {
        self.inspects
    }

    /// Whether [`Connection::local`] matters: without it the caller may
    /// spare itself the socket's local address.
    pub fn needs_local_address(&self) -> bool {
        self.local
    }

    /// The index of the chain `c` gets, if any.
    pub fn find(&self, c: &Connection<'_>) -> Option<usize> {
        let local_ip = canonical(c.local.ip());
        let peer_ip = canonical(c.peer.ip());
        let names = self
            .root
            .get(Some(&c.local.port()))?
            .get(local_ip)?
            .get(c.server_name)?;
        let alpns = names.get(Some(c.transport_protocol))?;
        let directs = match c
            .application_protocols
            .iter()
            .filter_map(|p| std::str::from_utf8(p).ok())
            .find_map(|p| alpns.exact.get(p))
        {
            Some(d) => d,
            None => alpns.any.as_ref()?,
        };
        let local = peer_ip.is_loopback() || peer_ip == local_ip;
        let ports = directs
            .get(canonical(c.direct_peer.ip()))?
            .get(local)?
            .get(peer_ip)?;
        *ports.get(Some(&c.peer.port()))?
    }
}

#[cfg(test)]
mod tests;
