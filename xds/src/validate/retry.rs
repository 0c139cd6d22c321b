//! `retry_policy` on a route or virtual host → the engine's [`RetryPolicy`], with Envoy's defaults and ranges.

use engine::{RetryOn, RetryPolicy, DEFAULT_RETRY_BASE_INTERVAL};
use prost::Name;

use super::common::{duration, reject_set};
use crate::decode::any_type_name;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as pb;
use crate::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;

/// The name Envoy registers the previous-hosts predicate under.
const PREVIOUS_HOSTS: &str = "envoy.retry_host_predicates.previous_hosts";

/// Conditions Envoy has that the gateway does not act on.
const UNSUPPORTED_CONDITIONS: [&str; 3] = [
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "unavailable-with-backoff",
];

/// Most picks per retry (`host_selection_retry_max_attempts`).
const MAX_HOST_SELECTION_ATTEMPTS: i64 = 1000;

pub(super) fn retry_policy(p: &pb::RetryPolicy, path: &Path) -> Result<RetryPolicy> {
    reject_set!(
        path,
        p,
        retry_priority,
        retry_options_predicates,
        rate_limited_retry_back_off,
    );
    let matchers = |list: &[pb::HeaderMatcher], field: &str| {
        list.iter()
            .enumerate()
            .map(|(i, h)| super::route_match::any_header_matcher(h, &path.field(field).index(i)))
            .collect::<Result<Vec<_>>>()
    };
    let retriable_headers = matchers(&p.retriable_headers, "retriable_headers")?;
    let retriable_request_headers =
        matchers(&p.retriable_request_headers, "retriable_request_headers")?;
    let opath = path.field("retry_on");
    let mut retry_on = RetryOn::default();
    for token in p
        .retry_on
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        match RetryOn::by_name(token) {
            Some(c) => retry_on |= c,
            None if UNSUPPORTED_CONDITIONS.contains(&token) => {
                return Err(Error::unsupported_value(opath, format!("{token:?}")))
            }
            None => {
                return Err(Error::invalid(
                    opath,
                    format!("unknown retry condition {token:?}"),
                ))
            }
        }
    }
    let mut retriable_status_codes = Vec::with_capacity(p.retriable_status_codes.len());
    for (i, &code) in p.retriable_status_codes.iter().enumerate() {
        if !(100..=599).contains(&code) {
            return Err(Error::invalid(
                path.field("retriable_status_codes").index(i),
                format!("{code} is not an HTTP status"),
            ));
        }
        retriable_status_codes.push(code as u16);
    }
    let (base_interval, max_interval) = match &p.retry_back_off {
        None => (
            DEFAULT_RETRY_BASE_INTERVAL,
            DEFAULT_RETRY_BASE_INTERVAL * 10,
        ),
        Some(b) => {
            let bpath = path.field("retry_back_off");
            let Some(base) = &b.base_interval else {
                return Err(Error::invalid(bpath.field("base_interval"), "required"));
            };
            let base = duration(base, &bpath.field("base_interval"))?;
            if base.is_zero() {
                return Err(Error::invalid(
                    bpath.field("base_interval"),
                    "must be greater than 0",
                ));
            }
            let max = match &b.max_interval {
                Some(m) => duration(m, &bpath.field("max_interval"))?,
                None => base * 10,
            };
            if max < base {
                return Err(Error::invalid(
                    bpath.field("max_interval"),
                    "must be at least base_interval",
                ));
            }
            (base, max)
        }
    };
    let mut previous_hosts = false;
    for (i, h) in p.retry_host_predicate.iter().enumerate() {
        let hpath = path.field("retry_host_predicate").index(i);
        let typed = match &h.config_type {
            Some(pb::retry_policy::retry_host_predicate::ConfigType::TypedConfig(any)) => {
                Some(any_type_name(any, &hpath.field("typed_config"))?)
            }
            None => None,
        };
        let is_previous = match typed {
            Some(t) => t == PreviousHostsPredicate::full_name(),
            None => h.name == PREVIOUS_HOSTS,
        };
        if !is_previous {
            return Err(Error::unsupported_msg(
                hpath,
                format!(
                    "retry host predicate {:?} is not supported (only {PREVIOUS_HOSTS})",
                    h.name
                ),
            ));
        }
        previous_hosts = true;
    }
    let attempts = p.host_selection_retry_max_attempts;
    if attempts > MAX_HOST_SELECTION_ATTEMPTS {
        return Err(Error::invalid(
            path.field("host_selection_retry_max_attempts"),
            format!("{attempts} is over {MAX_HOST_SELECTION_ATTEMPTS}"),
        ));
    }
    Ok(RetryPolicy {
        retry_on,
        num_retries: p.num_retries.unwrap_or(1),
        // 0 (or unset): none, as in Envoy.
        per_try_timeout: match &p.per_try_timeout {
            Some(d) => Some(duration(d, &path.field("per_try_timeout"))?).filter(|d| !d.is_zero()),
            None => None,
        },
        retriable_status_codes,
        retriable_headers,
        retriable_request_headers,
        // 0 (or unset): none.
        per_try_idle_timeout: match &p.per_try_idle_timeout {
            Some(d) => {
                Some(duration(d, &path.field("per_try_idle_timeout"))?).filter(|d| !d.is_zero())
            }
            None => None,
        },
        base_interval,
        max_interval,
        previous_hosts,
        host_selection_max_attempts: attempts.max(1) as u32,
    })
}

/// `hedge_policy` on a route or virtual host: whether a per-try timeout
/// sends another attempt beside the one in flight
/// (`hedge_on_per_try_timeout`). `initial_requests` and
/// `additional_request_chance` are not implemented by Envoy either (its
/// docs hide them): only their no-op values (1, 0) are accepted, as a
/// config that asks for more requests would not get them.
pub(super) fn hedge_policy(h: &pb::HedgePolicy, path: &Path) -> Result<bool> {
    match h.initial_requests {
        Some(0) => {
            return Err(Error::invalid(
                path.field("initial_requests"),
                "must be at least 1",
            ))
        }
        Some(n) if n > 1 => return Err(Error::unsupported(path.field("initial_requests"))),
        _ => {}
    }
    if let Some(chance) = &h.additional_request_chance {
        let at = path.field("additional_request_chance");
        if super::common::fractional_percent(chance, &at)?.numerator > 0 {
            return Err(Error::unsupported(at));
        }
    }
    Ok(h.hedge_on_per_try_timeout)
}
