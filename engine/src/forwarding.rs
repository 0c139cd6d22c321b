//! Who a request comes from, as Envoy's connection manager decides it: the client address (the peer, or a trusted `x-forwarded-for` entry), and whether the request is internal or an edge request.
//!
//! Envoy's rules (`ConnectionManagerUtility::mutateRequestHeaders`,
//! checked side by side with Envoy 1.40):
//!
//! - With `use_remote_address`, the peer is the client, unless
//!   `xff_num_trusted_hops` is N > 0: then the client is the Nth entry
//!   from the right of the `x-forwarded-for` the request arrived with
//!   (before we append). A request is internal only if it arrived with no
//!   `x-forwarded-for` at all and its client address is internal.
//! - Without it, the client is the (N + 1)th entry from the right; a
//!   request is internal only if that is the list's one entry (N = 0) and
//!   it is internal. No `x-forwarded-for`: the peer, and never internal.
//! - An edge request is an external one on a `use_remote_address`
//!   listener: Envoy's internal `x-envoy-*` headers are removed from it,
//!   and its `x-request-id` is replaced.

use std::net::{IpAddr, SocketAddr};

use crate::config::{ClientTrust, InternalAddresses};

/// What the connection manager settled on for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The client's address: the peer's, or a trusted `x-forwarded-for`
    /// entry with port 0 (`%DOWNSTREAM_REMOTE_ADDRESS%`).
    pub remote: SocketAddr,
    /// The request comes from inside: it keeps the `x-envoy-*` headers
    /// that steer the router, and goes on with `x-envoy-internal: true`.
    pub internal: bool,
    /// An external request on a `use_remote_address` listener.
    pub edge: bool,
}

/// The client of a request from `peer` whose `x-forwarded-for` fields,
/// joined with commas, are `xff` (`None` when it has none).
pub fn client(trust: &ClientTrust, peer: SocketAddr, xff: Option<&str>) -> Client {
    // An IPv4 client of a dual-stack listener is an IPv4 client.
    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    let hops = trust.xff_num_trusted_hops;
    // The address a request's internal status is judged by, if any.
    let (from_xff, judged) = if trust.use_remote_address {
        let found = match hops {
            0 => None,
            n => xff.and_then(|x| from_right(x, n - 1).0),
        };
        // Internal only if it came with no x-forwarded-for at all.
        (found, xff.is_none().then(|| found.unwrap_or(peer.ip())))
    } else {
        match xff {
            // Only a list of one address, and never the peer: an entry
            // that is not an address makes the request external.
            Some(x) => {
                let (found, single) = from_right(x, hops);
                (found, found.filter(|_| single))
            }
            None => (None, None),
        }
    };
    let internal = judged.is_some_and(|ip| trust.internal.contains(ip));
    Client {
        remote: from_xff.map_or(peer, |ip| SocketAddr::new(ip, 0)),
        internal,
        edge: !internal && trust.use_remote_address,
    }
}

/// The address `skip` entries from the right end of an `x-forwarded-for`
/// list, if it is one, and whether it is the list's only entry (Envoy's
/// `getLastAddressFromXFF`).
fn from_right(xff: &str, skip: u32) -> (Option<IpAddr>, bool) {
    let mut rest = xff;
    for _ in 0..skip {
        match rest.rfind(',') {
            Some(i) => rest = &rest[..i],
            None => return (None, false),
        }
    }
    let (entry, single) = match rest.rfind(',') {
        Some(i) => (&rest[i + 1..], false),
        None => (rest, skip == 0),
    };
    let ip = entry
        .trim()
        .parse::<IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical());
    (ip, single)
}

impl InternalAddresses {
    /// Whether requests from `ip` are internal.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match self {
            Self::None => false,
            Self::Ranges(ranges) => ranges.iter().any(|r| r.contains(ip)),
            Self::Legacy => match ip {
                IpAddr::V4(v4) => {
                    let [a, b, ..] = v4.octets();
                    a == 10
                        || (a == 192 && b == 168)
                        || (a == 172 && (16..=31).contains(&b))
                        || v4 == std::net::Ipv4Addr::LOCALHOST
                }
                IpAddr::V6(v6) => v6.octets()[0] == 0xfd || v6.is_loopback(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter_chain::CidrRange;

    const PEER: &str = "127.0.0.1:35834";

    fn trust(ura: bool, hops: u32, internal: InternalAddresses) -> ClientTrust {
        ClientTrust {
            use_remote_address: ura,
            skip_xff_append: false,
            xff_num_trusted_hops: hops,
            internal,
        }
    }

    fn remote(t: &ClientTrust, xff: Option<&str>) -> String {
        client(t, PEER.parse().unwrap(), xff).remote.to_string()
    }

    /// Envoy 1.40's `%DOWNSTREAM_REMOTE_ADDRESS%` for the same settings
    /// and `x-forwarded-for` (recorded 2026-11-27).
    #[test]
    fn the_client_address_is_the_trusted_hop() {
        let none = InternalAddresses::None;
        for (ura, hops, xff, want) in [
            (true, 1, Some("1.1.1.1, 2.2.2.2"), "2.2.2.2:0"),
            (true, 1, Some("1.1.1.1"), "1.1.1.1:0"),
            (true, 1, None, PEER),
            (true, 0, Some("1.1.1.1, 2.2.2.2"), PEER),
            (false, 1, Some("1.1.1.1, 2.2.2.2"), "1.1.1.1:0"),
            // Not enough hops: the peer.
            (false, 1, Some("1.1.1.1"), PEER),
            (false, 0, Some("1.1.1.1, 2.2.2.2"), "2.2.2.2:0"),
            (false, 0, Some("1.1.1.1"), "1.1.1.1:0"),
            (false, 0, None, PEER),
            // Not an address: the peer.
            (false, 0, Some("1.1.1.1, unknown"), PEER),
            (false, 0, Some(" 2001:db8::1 "), "[2001:db8::1]:0"),
        ] {
            let t = trust(ura, hops, none.clone());
            assert_eq!(remote(&t, xff), want, "ura {ura} hops {hops} {xff:?}");
        }
    }

    #[test]
    fn internal_needs_one_internal_hop_and_edge_is_external_at_the_edge() {
        let lo = InternalAddresses::Ranges(vec![CidrRange::new([127, 0, 0, 0].into(), 8).unwrap()]);
        let peer: SocketAddr = PEER.parse().unwrap();
        let c = |t: &ClientTrust, xff| {
            let c = client(t, peer, xff);
            (c.internal, c.edge)
        };
        // Unset: nothing is internal, so every request at the edge is an edge request.
        assert_eq!(
            c(&trust(true, 0, InternalAddresses::None), None),
            (false, true)
        );
        // Loopback internal and no x-forwarded-for: internal.
        assert_eq!(c(&trust(true, 0, lo.clone()), None), (true, false));
        // Any x-forwarded-for at the edge: external.
        assert_eq!(
            c(&trust(true, 0, lo.clone()), Some("127.0.0.5")),
            (false, true)
        );
        // Not at the edge: the one entry decides; never an edge request.
        let inner = trust(false, 0, lo.clone());
        assert_eq!(c(&inner, Some("127.0.0.5")), (true, false));
        assert_eq!(c(&inner, Some("10.0.0.1, 127.0.0.5")), (false, false));
        assert_eq!(c(&inner, None), (false, false));
        // With a trusted hop the entry is never the only one.
        assert_eq!(
            c(&trust(false, 1, lo.clone()), Some("127.0.0.5, 127.0.0.6")),
            (false, false)
        );
        // An entry that is not an address never lets the peer decide.
        assert_eq!(c(&inner, Some("unknown")), (false, false));
        // IPv4 clients of a dual-stack listener are judged as IPv4.
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().unwrap();
        let at_edge = client(&trust(true, 0, lo), mapped, None);
        assert!(at_edge.internal);
        assert_eq!(at_edge.remote.to_string(), "127.0.0.1:5000");
    }

    #[test]
    fn the_legacy_internal_list_is_rfc1918_and_exact_loopback() {
        let l = InternalAddresses::Legacy;
        for (ip, want) in [
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("172.32.0.1", false),
            ("192.168.1.1", true),
            ("127.0.0.1", true),
            ("127.0.0.5", false),
            ("8.8.8.8", false),
            ("::1", true),
            ("fd00::1", true),
            ("fc00::1", false),
        ] {
            assert_eq!(l.contains(ip.parse().unwrap()), want, "{ip}");
        }
        assert!(!InternalAddresses::None.contains("10.0.0.1".parse().unwrap()));
    }
}
