//! `request_mirror_policies` (route table, virtual host, route) → `engine::MirrorPolicy`: the cluster each copy goes to, its share and its host.

use std::collections::HashSet;

use engine::{MirrorCluster, MirrorPolicy};

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3::route_action::RequestMirrorPolicy as Pb;

/// One level's list. `known_clusters`: when `Some`, a named cluster must be
/// in it (Envoy's `validate_clusters`).
pub(crate) fn mirror_policies(
    list: &[Pb],
    path: &Path,
    known_clusters: Option<&HashSet<String>>,
) -> Result<Vec<MirrorPolicy>> {
    list.iter()
        .enumerate()
        .map(|(i, p)| mirror_policy(p, &path.index(i), known_clusters))
        .collect()
}

fn mirror_policy(
    p: &Pb,
    path: &Path,
    known_clusters: Option<&HashSet<String>>,
) -> Result<MirrorPolicy> {
    reject_set!(path, p, request_headers_mutations);
    let cluster = match (p.cluster.is_empty(), p.cluster_header.is_empty()) {
        (false, false) => {
            return Err(Error::invalid(
                path.field("cluster_header"),
                "only one of cluster and cluster_header may be set",
            ))
        }
        (true, true) => {
            return Err(Error::invalid(
                path.field("cluster"),
                "one of cluster or cluster_header is required",
            ))
        }
        (false, true) => {
            if known_clusters.is_some_and(|known| !known.contains(&p.cluster)) {
                return Err(Error::invalid(
                    path.field("cluster"),
                    format!("unknown cluster {:?}", p.cluster),
                ));
            }
            MirrorCluster::Named(p.cluster.clone())
        }
        (true, false) => {
            // Envoy's check (a non-strict header name): only NUL, CR and
            // LF are refused; a name no request can carry copies nothing.
            let name = p.cluster_header.to_ascii_lowercase();
            if name.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n')) {
                return Err(Error::invalid(
                    path.field("cluster_header"),
                    format!("{:?} is not a request field name", p.cluster_header),
                ));
            }
            MirrorCluster::Header(name)
        }
    };
    let fraction = match &p.runtime_fraction {
        Some(f) => Some(super::common::runtime_fraction(
            f,
            &path.field("runtime_fraction"),
        )?),
        None => None,
    };
    let host_rewrite = (!p.host_rewrite_literal.is_empty()).then(|| p.host_rewrite_literal.clone());
    if let Some(h) = &host_rewrite {
        if h.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(Error::invalid(
                path.field("host_rewrite_literal"),
                format!("{h:?} is not a host"),
            ));
        }
    }
    // `trace_sampled` is taken and has nothing to say: there is no tracing
    // whose sampling a copy could inherit or override.
    Ok(MirrorPolicy {
        cluster,
        fraction,
        host_rewrite,
        host_suffix: !p.disable_shadow_host_suffix_append,
    })
}
