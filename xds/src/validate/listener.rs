//! `Listener` → `engine::Listener`: its address and limits; the chains are
//! in `filter_chain`, and the HTTP connection manager each chain serves in
//! `http_connection_manager`.

use std::collections::HashSet;
use std::sync::Arc;

use engine::Listener;

use super::common::{reject_set, socket_address};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::listener::v3 as pb;

/// Validates a listener. Its inline route config is checked against
/// `known_clusters` (see [`route_config`](super::route::route_config)).
pub fn listener(
    l: &pb::Listener,
    path: &Path,
    known_clusters: &HashSet<String>,
) -> Result<Listener> {
    reject_set!(
        path,
        l,
        use_original_dst,
        transparent,
        freebind,
        tcp_fast_open_queue_length,
        socket_options,
        udp_listener_config,
        api_listener,
        connection_balance_config,
        reuse_port,
        access_log,
        tcp_backlog_size,
        listener_specifier,
        enable_mptcp,
        ignore_global_conn_limit,
        filter_chain_matcher,
        additional_addresses,
    );
    super::common::metadata(l.metadata.as_ref(), || path.clone())?;
    // Defaults that match what we do are accepted when spelled out.
    if l.bind_to_port == Some(false) {
        return Err(Error::unsupported_value(
            path.field("bind_to_port"),
            "false",
        ));
    }
    if l.enable_reuse_port == Some(false) {
        return Err(Error::unsupported_value(
            path.field("enable_reuse_port"),
            "false",
        ));
    }
    if l.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    let address = socket_address(l.address.as_ref(), &path.field("address"), true)?;
    let chains = super::filter_chain::chains(l, path, known_clusters)?;
    Ok(Listener {
        name: l.name.clone(),
        address,
        per_connection_buffer_limit_bytes: buffer_limit(
            l.per_connection_buffer_limit_bytes,
            &path.field("per_connection_buffer_limit_bytes"),
        )?,
        filter_chains: chains.filter_chains,
        default_filter_chain: chains.default_filter_chain,
        chain_table: Arc::new(chains.table),
        listener_filters: chains.listener_filters,
        drain_type: match pb::listener::DrainType::try_from(l.drain_type) {
            Ok(pb::listener::DrainType::ModifyOnly) => engine::DrainType::ModifyOnly,
            Ok(pb::listener::DrainType::Default) => engine::DrainType::Default,
            Err(_) => {
                return Err(Error::invalid(
                    path.field("drain_type"),
                    format!("unknown drain type {}", l.drain_type),
                ))
            }
        },
    })
}

/// `per_connection_buffer_limit_bytes` (listener or cluster): Envoy's 1 MiB
/// when unset. 0 would stop every response at its first byte.
pub(crate) fn buffer_limit(v: Option<u32>, path: &Path) -> Result<u32> {
    match v {
        None => Ok(engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT),
        Some(0) => Err(Error::invalid(path.clone(), "must be at least 1")),
        Some(n) => Ok(n),
    }
}
