//! A listener's `filter_chains` and `default_filter_chain` → engine filter chains and their selection table, with Envoy's refusals (overlapping matches name both chains; partial wildcards; unimplemented fields).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use engine::filter_chain::{ChainTable, CidrRange, FilterChainMatch, SourceType};
use engine::{FilterChain, ListenerFilters};
use prost::Name;

use super::common::reject_set;
use super::http_connection_manager::http_connection_manager;
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::listener::v3 as pb;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use crate::pb::envoy::extensions::filters::network::rbac::v3::Rbac as NetworkRbac;
use crate::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;

/// Envoy's name for the TLS inspector listener filter.
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";

/// What a listener's chains became.
pub(super) struct Chains {
    pub filter_chains: Vec<FilterChain>,
    pub default_filter_chain: Option<FilterChain>,
    pub table: ChainTable,
    pub listener_filters: ListenerFilters,
}

/// Validates the chains of listener `l` (at `path`).
pub(super) fn chains(
    l: &pb::Listener,
    path: &Path,
    known_clusters: &HashSet<String>,
) -> Result<Chains> {
    if l.filter_chains.is_empty() && l.default_filter_chain.is_none() {
        return Err(Error::invalid(
            path.field("filter_chains"),
            "no filter chains specified (and no default_filter_chain)",
        ));
    }
    let listener_filters = super::listener_filters::listener_filters(l, path)?;
    let cpath = path.field("filter_chains");
    let filter_chains = l
        .filter_chains
        .iter()
        .enumerate()
        .map(|(i, fc)| filter_chain(fc, &cpath.index(i), known_clusters, false))
        .collect::<Result<Vec<_>>>()?;
    let default_filter_chain = l
        .default_filter_chain
        .as_ref()
        .map(|fc| {
            filter_chain(
                fc,
                &path.field("default_filter_chain"),
                known_clusters,
                true,
            )
        })
        .transpose()?;
    let matches: Vec<_> = filter_chains
        .iter()
        .map(|c| &c.filter_chain_match)
        .collect();
    let table = ChainTable::build(&matches).map_err(|o| {
        let name = |i: usize| match filter_chains[i].name.as_str() {
            "" => format!("filter_chains[{i}]"),
            n => format!("filter_chains[{i}] ({n:?})"),
        };
        let message = if o.earlier == o.later {
            "lists the same match twice (after normalisation: lowercase names, masked ranges)"
                .to_owned()
        } else {
            format!(
                "overlaps {}: a connection could match both (multiple filter chains with the same matching rules)",
                name(o.earlier)
            )
        };
        Error::invalid(cpath.index(o.later).field("filter_chain_match"), message)
    })?;
    if !listener_filters.tls_inspector && table.needs_inspector() {
        tracing::warn!(
            listener = %l.name,
            "filter chains match server_names, application_protocols or transport_protocol \
             but the listener has no {TLS_INSPECTOR}: they never match (as in Envoy)"
        );
    }
    Ok(Chains {
        filter_chains,
        default_filter_chain,
        table,
        listener_filters,
    })
}

/// One chain: its match (ignored on the default chain, as in Envoy), its
/// transport socket and its one network filter: an HTTP connection
/// manager or a TCP proxy.
fn filter_chain(
    fc: &pb::FilterChain,
    path: &Path,
    known_clusters: &HashSet<String>,
    default: bool,
) -> Result<FilterChain> {
    reject_set!(path, fc, use_proxy_proto, transport_socket_connect_timeout);
    super::common::metadata(fc.metadata.as_ref(), || path.clone())?;
    let filter_chain_match = match (&fc.filter_chain_match, default) {
        (Some(m), false) => chain_match(m, &path.field("filter_chain_match"))?,
        _ => FilterChainMatch::default(),
    };
    let tls = fc
        .transport_socket
        .as_ref()
        .map(|ts| super::tls::transport_socket(ts, &path.field("transport_socket")))
        .transpose()?;
    // An RBAC network filter may come first; then the terminal filter.
    let (rbac, terminal) = match fc.filters.len() {
        2 => (
            Some(network_rbac_filter(
                &fc.filters[0],
                &path.field("filters").index(0),
            )?),
            1,
        ),
        1 => (None, 0),
        n => {
            return Err(Error::invalid(
                path.field("filters"),
                format!(
                    "one filter ({} or {}), after an optional {}, is supported; got {n}",
                    hcm::HttpConnectionManager::NAME,
                    TcpProxy::NAME,
                    NetworkRbac::NAME,
                ),
            ))
        }
    };
    let filter = &fc.filters[terminal];
    let fpath = path.field("filters").index(terminal);
    let any = match &filter.config_type {
        Some(pb::filter::ConfigType::TypedConfig(any)) => any,
        Some(pb::filter::ConfigType::ConfigDiscovery(_)) => {
            return Err(Error::unsupported(fpath.field("config_discovery")))
        }
        None => return Err(Error::invalid(fpath.field("typed_config"), "required")),
    };
    let tpath = fpath.field("typed_config");
    let type_name = any_type_name(any, &tpath)?;
    let (http, tcp_proxy) = if type_name == hcm::HttpConnectionManager::full_name() {
        let (config, cpath) = unpack::<hcm::HttpConnectionManager>(any, &tpath)?;
        let http = http_connection_manager(&config, &cpath, known_clusters)?;
        (http, None)
    } else if type_name == TcpProxy::full_name() {
        let (config, cpath) = unpack::<TcpProxy>(any, &tpath)?;
        let proxy = super::tcp_proxy::tcp_proxy(&config, &cpath)?;
        (
            unused_manager(&proxy.stat_prefix, &cpath)?,
            Some(Arc::new(proxy)),
        )
    } else {
        return Err(Error::unsupported_msg(
            tpath.clone(),
            format!(
                "network filter {:?} ({}) is not supported; only {} and {} are",
                filter.name,
                any_type_url(any, &tpath)?,
                hcm::HttpConnectionManager::type_url(),
                TcpProxy::type_url()
            ),
        ));
    };
    Ok(FilterChain {
        name: fc.name.clone(),
        filter_chain_match,
        // A digest of the chain's resource: the same chain pushed again
        // has the same id, however its maps were encoded (RDS routes are
        // not part of it: they come separately).
        id: crate::digest::digest(fc),
        tls,
        http,
        tcp_proxy,
        rbac,
    })
}

/// The first of two network filters: it must be an RBAC filter.
fn network_rbac_filter(filter: &pb::Filter, path: &Path) -> Result<Arc<engine::NetworkRbac>> {
    let any = match &filter.config_type {
        Some(pb::filter::ConfigType::TypedConfig(any)) => any,
        Some(pb::filter::ConfigType::ConfigDiscovery(_)) => {
            return Err(Error::unsupported(path.field("config_discovery")))
        }
        None => return Err(Error::invalid(path.field("typed_config"), "required")),
    };
    let tpath = path.field("typed_config");
    if any_type_name(any, &tpath)? != NetworkRbac::full_name() {
        return Err(Error::unsupported_msg(
            tpath.clone(),
            format!(
                "network filter {:?} ({}) is not supported ahead of the terminal filter; only {} is",
                filter.name,
                any_type_url(any, &tpath)?,
                NetworkRbac::type_url()
            ),
        ));
    }
    let (r, rpath) = unpack::<NetworkRbac>(any, &tpath)?;
    Ok(Arc::new(super::rbac::network_rbac(&r, &rpath)?))
}

/// The connection manager a `tcp_proxy` chain carries: no routes, the
/// router alone; nothing serves HTTP through it.
fn unused_manager(stat_prefix: &str, path: &Path) -> Result<engine::HttpConnectionManager> {
    let m = hcm::HttpConnectionManager {
        stat_prefix: stat_prefix.to_owned(),
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(
            Default::default(),
        )),
        http_filters: vec![hcm::HttpFilter {
            name: "envoy.filters.http.router".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    http_connection_manager(&m, path, &HashSet::new())
}

/// `filter_chain_match`, validated and normalised.
fn chain_match(m: &pb::FilterChainMatch, path: &Path) -> Result<FilterChainMatch> {
    // Envoy: "contains unimplemented fields".
    reject_set!(path, m, address_suffix, suffix_len);
    let port = |v: u32, at: Path| {
        u16::try_from(v)
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| Error::invalid(at, format!("{v} is not a port (1 to 65535)")))
    };
    let destination_port = m
        .destination_port
        .map(|p| port(p, path.field("destination_port")))
        .transpose()?;
    let source_ports = m
        .source_ports
        .iter()
        .enumerate()
        .map(|(i, &p)| port(p, path.field("source_ports").index(i)))
        .collect::<Result<Vec<_>>>()?;
    let source_type = match pb::filter_chain_match::ConnectionSourceType::try_from(m.source_type) {
        Ok(pb::filter_chain_match::ConnectionSourceType::Any) => SourceType::Any,
        Ok(pb::filter_chain_match::ConnectionSourceType::SameIpOrLoopback) => {
            SourceType::SameIpOrLoopback
        }
        Ok(pb::filter_chain_match::ConnectionSourceType::External) => SourceType::External,
        Err(_) => {
            return Err(Error::invalid(
                path.field("source_type"),
                format!("unknown source type {}", m.source_type),
            ))
        }
    };
    let server_names = m
        .server_names
        .iter()
        .enumerate()
        .map(|(i, n)| server_name(n, &path.field("server_names").index(i)))
        .collect::<Result<Vec<_>>>()?;
    Ok(FilterChainMatch {
        destination_port,
        prefix_ranges: ranges(&m.prefix_ranges, &path.field("prefix_ranges"))?,
        server_names,
        transport_protocol: m.transport_protocol.clone(),
        application_protocols: m.application_protocols.clone(),
        direct_source_prefix_ranges: ranges(
            &m.direct_source_prefix_ranges,
            &path.field("direct_source_prefix_ranges"),
        )?,
        source_type,
        source_prefix_ranges: ranges(&m.source_prefix_ranges, &path.field("source_prefix_ranges"))?,
        source_ports,
    })
}

/// A server name, lowercase; a wildcard only as a whole first label
/// (`*.example.com`), as Envoy takes them.
fn server_name(n: &str, path: &Path) -> Result<String> {
    let lower = n.to_ascii_lowercase();
    if lower.is_empty() {
        return Err(Error::invalid(path.clone(), "empty server name"));
    }
    let rest = lower.strip_prefix("*.").unwrap_or(&lower);
    if rest.contains('*') || rest.is_empty() {
        return Err(Error::invalid(
            path.clone(),
            format!("{n:?}: partial wildcards are not supported in server_names (only a leading \"*.\")"),
        ));
    }
    Ok(lower)
}

/// CIDR ranges, masked; an IPv4 length above 32 taken as 32 (A36), one
/// above 128 refused.
pub(super) fn ranges(v: &[core::CidrRange], path: &Path) -> Result<Vec<CidrRange>> {
    v.iter()
        .enumerate()
        .map(|(i, r)| {
            let at = path.index(i);
            let ip: IpAddr = r.address_prefix.parse().map_err(|_| {
                Error::invalid(
                    at.field("address_prefix"),
                    format!("malformed IP address {:?}", r.address_prefix),
                )
            })?;
            let len = r.prefix_len.unwrap_or(0);
            CidrRange::new(ip, len).ok_or_else(|| {
                Error::invalid(at.field("prefix_len"), format!("{len} is above 128"))
            })
        })
        .collect()
}
