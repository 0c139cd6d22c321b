//! A DNS cluster (`type: STRICT_DNS | LOGICAL_DNS`): the names and ports its `load_assignment` lists, how often they are looked up (`dns_refresh_rate`, `dns_failure_refresh_rate`, `respect_dns_ttl`), which addresses are taken (`dns_lookup_family`) and through which servers (`typed_dns_resolver_config`, `dns_resolvers`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use engine::{Dns, DnsFamily, DnsKind, DnsTarget};
use prost::Name;

use super::common::{duration, reject_set, socket_address, u32_in};
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;
use crate::pb::envoy::config::core::v3::{address, socket_address as sa, Address};
use crate::pb::envoy::config::endpoint::v3 as ep;
use crate::pb::envoy::extensions::network::dns_resolver::cares::v3::CaresDnsResolverConfig;
use crate::pb::envoy::extensions::network::dns_resolver::getaddrinfo::v3::GetAddrInfoDnsResolverConfig;

/// Envoy's c-ares defaults: a server gets 5 s per try, 4 tries.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
const QUERY_TRIES: u32 = 4;

/// Whether `host` is a name DNS can be asked for: labels of 1 to 63
/// letters, digits, `-` or `_`, 253 characters at most, an optional
/// trailing dot.
fn is_host_name(host: &str) -> bool {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    !trimmed.is_empty()
        && trimmed.len() <= 253
        && trimmed.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// The cluster's DNS discovery.
pub(super) fn dns(c: &pb::Cluster, kind: DnsKind, path: &Path) -> Result<Dns> {
    reject_set!(path, c, dns_resolution_config);
    if c.dns_jitter
        .as_ref()
        .is_some_and(|j| j.seconds != 0 || j.nanos != 0)
    {
        return Err(Error::unsupported_msg(
            path.field("dns_jitter"),
            "only 0 is supported",
        ));
    }
    let refresh_rate = match &c.dns_refresh_rate {
        None => engine::DEFAULT_DNS_REFRESH_RATE,
        Some(d) => at_least_a_millisecond(d, &path.field("dns_refresh_rate"))?,
    };
    let failure_refresh = match &c.dns_failure_refresh_rate {
        None => None,
        Some(r) => Some(refresh_backoff(r, &path.field("dns_failure_refresh_rate"))?),
    };
    let family = family(c.dns_lookup_family, &path.field("dns_lookup_family"))?;
    let targets = match &c.load_assignment {
        Some(la) => targets(la, kind, &path.field("load_assignment"))?,
        None => {
            return Err(Error::invalid(
                path.field("load_assignment"),
                "required with a DNS type (the names to look up)",
            ))
        }
    };
    let mut dns = Dns {
        kind,
        targets,
        refresh_rate,
        failure_refresh,
        respect_ttl: c.respect_dns_ttl,
        family,
        resolvers: Vec::new(),
        query_timeout: QUERY_TIMEOUT,
        query_tries: QUERY_TRIES,
        tcp: c.use_tcp_for_dns_lookups,
    };
    resolvers(c, &mut dns, path)?;
    Ok(dns)
}

fn at_least_a_millisecond(d: &prost_types::Duration, path: &Path) -> Result<Duration> {
    let d = duration(d, path)?;
    if d <= Duration::from_millis(1) {
        return Err(Error::invalid(path.clone(), "must be more than 1ms"));
    }
    Ok(d)
}

/// `dns_failure_refresh_rate`: `base_interval` required, `max_interval`
/// ten times it when unset and never below it (Envoy's rules).
fn refresh_backoff(r: &pb::cluster::RefreshRate, path: &Path) -> Result<(Duration, Duration)> {
    let base = match &r.base_interval {
        Some(b) => at_least_a_millisecond(b, &path.field("base_interval"))?,
        None => return Err(Error::invalid(path.field("base_interval"), "required")),
    };
    let max = match &r.max_interval {
        Some(m) => at_least_a_millisecond(m, &path.field("max_interval"))?,
        None => base * 10,
    };
    if max < base {
        return Err(Error::invalid(
            path.field("max_interval"),
            "must not be below base_interval",
        ));
    }
    Ok((base, max))
}

fn family(value: i32, path: &Path) -> Result<DnsFamily> {
    use pb::cluster::DnsLookupFamily as F;
    Ok(match F::try_from(value) {
        Ok(F::Auto) => DnsFamily::Auto,
        Ok(F::V4Only) => DnsFamily::V4Only,
        Ok(F::V6Only) => DnsFamily::V6Only,
        Ok(F::V4Preferred) => DnsFamily::V4Preferred,
        Ok(F::All) => DnsFamily::All,
        Err(_) => {
            return Err(Error::invalid(
                path.clone(),
                format!("unknown value {value}"),
            ))
        }
    })
}

/// The names and ports to look up: every endpoint of a `STRICT_DNS`
/// cluster, the one endpoint of a `LOGICAL_DNS` cluster.
fn targets(la: &ep::ClusterLoadAssignment, kind: DnsKind, path: &Path) -> Result<Vec<DnsTarget>> {
    // `policy` is the cluster validator's (`assignment_policy`).
    reject_set!(path, la, named_endpoints);
    let mut out = Vec::new();
    for (i, lle) in la.endpoints.iter().enumerate() {
        let lpath = path.field("endpoints").index(i);
        reject_set!(lpath, lle, proximity, lb_config);
        super::common::metadata(lle.metadata.as_ref(), || lpath.clone())?;
        for (j, lbe) in lle.lb_endpoints.iter().enumerate() {
            let placement = engine::Placement {
                priority: lle.priority,
                locality: i as u32,
                locality_weight: lle.load_balancing_weight.unwrap_or(0),
            };
            out.push(target(
                lbe,
                placement,
                &lpath.field("lb_endpoints").index(j),
            )?);
        }
    }
    if kind == DnsKind::Logical && out.len() != 1 {
        return Err(Error::invalid(
            path.field("endpoints"),
            "LOGICAL_DNS needs exactly one endpoint",
        ));
    }
    if out.is_empty() {
        return Err(Error::invalid(
            path.field("endpoints"),
            "at least one endpoint (a name to look up) is required",
        ));
    }
    Ok(out)
}

fn target(lbe: &ep::LbEndpoint, placement: engine::Placement, path: &Path) -> Result<DnsTarget> {
    use ep::lb_endpoint::HostIdentifier;
    super::common::metadata(lbe.metadata.as_ref(), || path.clone())?;
    let endpoint = match &lbe.host_identifier {
        Some(HostIdentifier::Endpoint(e)) => e,
        Some(HostIdentifier::EndpointName(_)) => {
            return Err(Error::unsupported(path.field("endpoint_name")))
        }
        None => return Err(Error::invalid(path.field("endpoint"), "required")),
    };
    let epath = path.field("endpoint");
    reject_set!(epath, endpoint, additional_addresses);
    let check =
        super::health_check::endpoint_check(endpoint.health_check_config.as_ref(), &|| {
            epath.field("health_check_config")
        })?;
    let (host, port) = host_and_port(endpoint.address.as_ref(), &epath.field("address"))?;
    let (health, weight) = super::cluster::status_and_weight(lbe, &|| path.clone())?;
    Ok(DnsTarget {
        host,
        port,
        weight,
        health,
        hostname: endpoint.hostname.clone(),
        check,
        placement,
    })
}

/// A socket address whose address is a host name (or an IP address, which
/// resolves to itself) and whose port is set.
fn host_and_port(addr: Option<&Address>, path: &Path) -> Result<(String, u16)> {
    let Some(Address {
        address: Some(address::Address::SocketAddress(s)),
    }) = addr
    else {
        // The usual errors for anything but a socket address.
        return socket_address(addr, path, false).map(|a| (a.ip().to_string(), a.port()));
    };
    let spath = path.field("socket_address");
    if s.protocol != sa::Protocol::Tcp as i32 {
        return Err(Error::unsupported_msg(
            spath.field("protocol"),
            "only TCP is supported",
        ));
    }
    reject_set!(spath, s, resolver_name, ipv4_compat);
    if s.address.parse::<IpAddr>().is_err() && !is_host_name(&s.address) {
        return Err(Error::invalid(
            spath.field("address"),
            format!("{:?} is neither a host name nor an IP address", s.address),
        ));
    }
    let port = match &s.port_specifier {
        Some(sa::PortSpecifier::PortValue(p)) => *p,
        Some(sa::PortSpecifier::NamedPort(_)) => {
            return Err(Error::unsupported(spath.field("named_port")))
        }
        None => return Err(Error::invalid(spath.field("port_value"), "required")),
    };
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            Error::invalid(
                spath.field("port_value"),
                format!("{port} is not a valid port"),
            )
        })?;
    Ok((s.address.to_ascii_lowercase(), port))
}

/// The servers to ask: `typed_dns_resolver_config` (c-ares, or
/// getaddrinfo: the system's), else the deprecated `dns_resolvers`, else
/// the system's.
fn resolvers(c: &pb::Cluster, dns: &mut Dns, path: &Path) -> Result<()> {
    let servers = |list: &[Address], lpath: &Path| -> Result<Vec<SocketAddr>> {
        list.iter()
            .enumerate()
            .map(|(i, a)| socket_address(Some(a), &lpath.index(i), false))
            .collect()
    };
    let Some(t) = &c.typed_dns_resolver_config else {
        dns.resolvers = servers(&c.dns_resolvers, &path.field("dns_resolvers"))?;
        return Ok(());
    };
    let tpath = path.field("typed_dns_resolver_config");
    if !c.dns_resolvers.is_empty() {
        return Err(Error::invalid(
            path.field("dns_resolvers"),
            "set typed_dns_resolver_config or dns_resolvers, not both",
        ));
    }
    let Some(any) = &t.typed_config else {
        return Err(Error::invalid(tpath.field("typed_config"), "required"));
    };
    let cpath = tpath.field("typed_config");
    let type_name = any_type_name(any, &cpath)?;
    if type_name == GetAddrInfoDnsResolverConfig::full_name() {
        // The system's resolver, which is what ours reads too.
        let (g, gpath) = unpack::<GetAddrInfoDnsResolverConfig>(any, &cpath)?;
        reject_set!(gpath, g, num_retries, num_resolver_threads);
        return Ok(());
    }
    if type_name != CaresDnsResolverConfig::full_name() {
        return Err(Error::unsupported_msg(
            cpath.clone(),
            format!(
                "DNS resolver {} is not supported (c-ares and getaddrinfo are)",
                any_type_url(any, &cpath)?
            ),
        ));
    }
    let (cares, capath) = unpack::<CaresDnsResolverConfig>(any, &cpath)?;
    reject_set!(
        capath,
        cares,
        use_resolvers_as_fallback,
        filter_unroutable_families,
        udp_max_queries,
        rotate_nameservers,
        edns0_max_payload_size,
        max_udp_channel_duration,
    );
    dns.resolvers = servers(&cares.resolvers, &capath.field("resolvers"))?;
    if let Some(o) = &cares.dns_resolver_options {
        let opath = capath.field("dns_resolver_options");
        reject_set!(opath, o, no_default_search_domain);
        dns.tcp |= o.use_tcp_for_dns_lookups;
    }
    if let Some(t) = cares.query_timeout_seconds {
        if t == 0 || t > 3600 {
            return Err(Error::invalid(
                capath.field("query_timeout_seconds"),
                "must be between 1 and 3600",
            ));
        }
        dns.query_timeout = Duration::from_secs(t);
    }
    if let Some(n) = cares.query_tries {
        dns.query_tries = u32_in(Some(n), 1..=16, QUERY_TRIES, &capath.field("query_tries"))?;
    }
    Ok(())
}
