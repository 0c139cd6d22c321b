//! The fault injection filter (`envoy.filters.http.fault`, `HTTPFault`, as the filter's config and per route) → `engine::Fault`.

use std::sync::Arc;

use engine::{AbortKind, DelayKind, Fault, FaultAbort, FaultDelay, Fraction};

use super::common::{fractional_percent, reject_set, strict_duration};
use super::route_match::header_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::extensions::filters::common::fault::v3 as common;
use crate::pb::envoy::extensions::filters::http::fault::v3 as pb;

/// A fault's `percentage` (unset: none of the requests, as in Envoy).
fn percentage(
    p: Option<&crate::pb::envoy::r#type::v3::FractionalPercent>,
    path: &Path,
) -> Result<Fraction> {
    match p {
        Some(p) => fractional_percent(p, path),
        None => Ok(Fraction {
            numerator: 0,
            denominator: 100,
        }),
    }
}

/// `HTTPFault` (at `path`). The runtime key names are accepted and
/// unused: no runtime layer we take can set them, so the config's values
/// apply, as in an Envoy without those keys.
pub(super) fn fault(f: &pb::HttpFault, path: &Path) -> Result<Fault> {
    reject_set!(path, f, response_rate_limit, filter_metadata);
    let delay = match &f.delay {
        Some(d) => Some(delay(d, &path.field("delay"))?),
        None => None,
    };
    let abort = match &f.abort {
        Some(a) => Some(abort(a, &path.field("abort"))?),
        None => None,
    };
    let hpath = path.field("headers");
    Ok(Fault {
        delay,
        abort,
        upstream_cluster: Some(f.upstream_cluster.clone()).filter(|c| !c.is_empty()),
        headers: f
            .headers
            .iter()
            .enumerate()
            .map(|(i, h)| header_matcher(h, &hpath.index(i)))
            .collect::<Result<Vec<_>>>()?,
        downstream_nodes: f.downstream_nodes.clone(),
        max_active_faults: f.max_active_faults,
        active: Arc::default(),
    })
}

fn delay(d: &common::FaultDelay, path: &Path) -> Result<FaultDelay> {
    use common::fault_delay::FaultDelaySecifier as S;
    let kind = match &d.fault_delay_secifier {
        Some(S::FixedDelay(t)) => {
            let fpath = path.field("fixed_delay");
            let t = strict_duration(t, &fpath)?;
            if t.is_zero() {
                return Err(Error::invalid(fpath, "must be greater than 0s"));
            }
            DelayKind::Fixed(t)
        }
        Some(S::HeaderDelay(_)) => DelayKind::Header,
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of fixed_delay and header_delay is required",
            ))
        }
    };
    Ok(FaultDelay {
        kind,
        percentage: percentage(d.percentage.as_ref(), &path.field("percentage"))?,
    })
}

fn abort(a: &pb::FaultAbort, path: &Path) -> Result<FaultAbort> {
    use pb::fault_abort::ErrorType as E;
    let kind = match &a.error_type {
        Some(E::HttpStatus(s @ 200..=599)) => AbortKind::Http(*s as u16),
        Some(E::HttpStatus(s)) => {
            return Err(Error::invalid(
                path.field("http_status"),
                format!("{s} is not a status in 200..=599"),
            ))
        }
        Some(E::GrpcStatus(s)) => AbortKind::Grpc(*s),
        Some(E::HeaderAbort(_)) => AbortKind::Header,
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of http_status, grpc_status and header_abort is required",
            ))
        }
    };
    Ok(FaultAbort {
        kind,
        percentage: percentage(a.percentage.as_ref(), &path.field("percentage"))?,
    })
}
