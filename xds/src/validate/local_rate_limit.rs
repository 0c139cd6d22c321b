//! The local rate limit filter (`envoy.filters.http.local_ratelimit`, `LocalRateLimit`, as the filter's config and per route) and the routes' and virtual hosts' `rate_limits` → `engine::LocalRateLimit`, `engine::RateLimitPolicy`.

use engine::rate_limit::{BucketShape, SharedBucket};
use engine::{
    DynamicBuckets, Fraction, LocalDescriptor, LocalRateLimit, RateLimitAction, RateLimitPolicy,
    VhRateLimits,
};

use super::common::{reject_set, runtime_fraction, strict_duration};
use super::header_mutation::header_mutation;
use super::route_match::header_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as route;
use crate::pb::envoy::extensions::common::ratelimit::v3 as common;
use crate::pb::envoy::extensions::filters::http::local_ratelimit::v3 as pb;
use crate::pb::envoy::r#type::v3::TokenBucket;

/// A `TokenBucket` (at `path`): `max_tokens` > 0, `tokens_per_fill` > 0
/// (default 1), `fill_interval` > 0 (required), as Envoy's rules.
fn shape(b: Option<&TokenBucket>, path: &Path) -> Result<BucketShape> {
    let Some(b) = b else {
        return Err(Error::invalid(path.clone(), "required"));
    };
    if b.max_tokens == 0 {
        return Err(Error::invalid(
            path.field("max_tokens"),
            "must be greater than 0",
        ));
    }
    let tokens_per_fill = b.tokens_per_fill.unwrap_or(1);
    if tokens_per_fill == 0 {
        return Err(Error::invalid(
            path.field("tokens_per_fill"),
            "must be greater than 0",
        ));
    }
    let fpath = path.field("fill_interval");
    let Some(fill) = &b.fill_interval else {
        return Err(Error::invalid(fpath, "required"));
    };
    let fill_interval = strict_duration(fill, &fpath)?;
    if fill_interval.is_zero() {
        return Err(Error::invalid(fpath, "must be greater than 0s"));
    }
    Ok(BucketShape {
        max_tokens: b.max_tokens,
        tokens_per_fill,
        fill_interval,
    })
}

/// A `RuntimeFractionalPercent` that means none when unset (Envoy's
/// `filter_enabled` / `filter_enforced`).
fn fraction_or_none(
    f: Option<&crate::pb::envoy::config::core::v3::RuntimeFractionalPercent>,
    path: &Path,
) -> Result<Fraction> {
    match f {
        Some(f) => runtime_fraction(f, path),
        None => Ok(Fraction {
            numerator: 0,
            denominator: 100,
        }),
    }
}

/// `LocalRateLimit` (at `path`).
pub(super) fn local_rate_limit(l: &pb::LocalRateLimit, path: &Path) -> Result<LocalRateLimit> {
    reject_set!(path, l, local_cluster_rate_limit);
    if l.stat_prefix.is_empty() {
        return Err(Error::invalid(path.field("stat_prefix"), "required"));
    }
    if l.stage > 10 {
        return Err(Error::invalid(
            path.field("stage"),
            format!("{} is out of range 0..=10", l.stage),
        ));
    }
    let status = match l.status.as_ref().map(|s| s.code) {
        None | Some(0) => 429,
        // Envoy: a status below 400 is not a refusal; 429 is sent.
        Some(c) if c < 400 => 429,
        Some(c) if c <= 599 => c as u16,
        Some(c) => {
            return Err(Error::invalid(
                path.field("status").field("code"),
                format!("unknown value {c}"),
            ))
        }
    };
    let bucket = match &l.token_bucket {
        Some(b) => Some(SharedBucket::new(shape(
            Some(b),
            &path.field("token_bucket"),
        )?)),
        None => None,
    };
    let max_dynamic = l.max_dynamic_descriptors.unwrap_or(20);
    if max_dynamic == 0 {
        return Err(Error::invalid(
            path.field("max_dynamic_descriptors"),
            "must be at least 1",
        ));
    }
    let dpath = path.field("descriptors");
    let descriptors = l
        .descriptors
        .iter()
        .enumerate()
        .map(|(i, d)| descriptor(d, &dpath.index(i), max_dynamic))
        .collect::<Result<Vec<_>>>()?;
    let for_limits = |list: &[crate::pb::envoy::config::core::v3::HeaderValueOption],
                      field: &str| {
        header_mutation(list, &path.field(field), &[], &path.field(field))
    };
    let vh_rate_limits = match common::VhRateLimitsOptions::try_from(l.vh_rate_limits) {
        Ok(common::VhRateLimitsOptions::Override) => VhRateLimits::Override,
        Ok(common::VhRateLimitsOptions::Include) => VhRateLimits::Include,
        Ok(common::VhRateLimitsOptions::Ignore) => VhRateLimits::Ignore,
        Err(_) => {
            return Err(Error::invalid(
                path.field("vh_rate_limits"),
                format!("unknown value {}", l.vh_rate_limits),
            ))
        }
    };
    let x_ratelimit_headers =
        match common::XRateLimitHeadersRfcVersion::try_from(l.enable_x_ratelimit_headers) {
            Ok(common::XRateLimitHeadersRfcVersion::Off) => false,
            Ok(common::XRateLimitHeadersRfcVersion::DraftVersion03) => true,
            Err(_) => {
                return Err(Error::invalid(
                    path.field("enable_x_ratelimit_headers"),
                    format!("unknown value {}", l.enable_x_ratelimit_headers),
                ))
            }
        };
    Ok(LocalRateLimit {
        stat_prefix: l.stat_prefix.clone(),
        status,
        bucket,
        enabled: fraction_or_none(l.filter_enabled.as_ref(), &path.field("filter_enabled"))?,
        enforced: fraction_or_none(l.filter_enforced.as_ref(), &path.field("filter_enforced"))?,
        request_headers_when_not_enforced: for_limits(
            &l.request_headers_to_add_when_not_enforced,
            "request_headers_to_add_when_not_enforced",
        )?,
        response_headers_to_add: for_limits(&l.response_headers_to_add, "response_headers_to_add")?,
        descriptors,
        stage: l.stage,
        per_connection: l.local_rate_limit_per_downstream_connection,
        x_ratelimit_headers,
        vh_rate_limits,
        always_consume_default: l.always_consume_default_token_bucket.unwrap_or(true),
        resource_exhausted: l.rate_limited_as_resource_exhausted,
        rate_limits: rate_limit_policies(&l.rate_limits, &path.field("rate_limits"))?,
        max_dynamic,
    })
}

fn descriptor(
    d: &common::LocalRateLimitDescriptor,
    path: &Path,
    max_dynamic: u32,
) -> Result<LocalDescriptor> {
    if d.entries.is_empty() {
        return Err(Error::invalid(
            path.field("entries"),
            "at least one entry is required",
        ));
    }
    let epath = path.field("entries");
    let entries = d
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if e.key.is_empty() {
                return Err(Error::invalid(epath.index(i).field("key"), "required"));
            }
            Ok((
                e.key.clone(),
                Some(e.value.clone()).filter(|v| !v.is_empty()),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let shape = shape(d.token_bucket.as_ref(), &path.field("token_bucket"))?;
    let dynamic = entries
        .iter()
        .any(|(_, v)| v.is_none())
        .then(|| DynamicBuckets::new(shape, max_dynamic));
    Ok(LocalDescriptor {
        entries,
        shape,
        shadow: d.shadow_mode,
        bucket: SharedBucket::new(shape),
        dynamic,
    })
}

/// A list of `RateLimit` (a route's, a virtual host's, a filter's).
pub(super) fn rate_limit_policies(
    list: &[route::RateLimit],
    path: &Path,
) -> Result<Vec<RateLimitPolicy>> {
    list.iter()
        .enumerate()
        .map(|(i, r)| rate_limit_policy(r, &path.index(i)))
        .collect()
}

fn rate_limit_policy(r: &route::RateLimit, path: &Path) -> Result<RateLimitPolicy> {
    use route::rate_limit::action::ActionSpecifier as A;
    reject_set!(
        path,
        r,
        limit,
        hits_addend,
        x_ratelimit_option,
        apply_on_stream_done,
        disable_key
    );
    let stage = r.stage.unwrap_or(0);
    if stage > 10 {
        return Err(Error::invalid(
            path.field("stage"),
            format!("{stage} is out of range 0..=10"),
        ));
    }
    if r.actions.is_empty() {
        return Err(Error::invalid(
            path.field("actions"),
            "at least one action is required",
        ));
    }
    let apath = path.field("actions");
    let actions = r
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let p = apath.index(i);
            let nonempty = |s: &str, field: &str| {
                if s.is_empty() {
                    Err(Error::invalid(p.field(field), "required"))
                } else {
                    Ok(s.to_owned())
                }
            };
            Ok(match &a.action_specifier {
                Some(A::SourceCluster(_)) => RateLimitAction::SourceCluster,
                Some(A::DestinationCluster(_)) => RateLimitAction::DestinationCluster,
                Some(A::RequestHeaders(h)) => {
                    let hp = p.field("request_headers");
                    RateLimitAction::RequestHeaders {
                        header: nonempty(&h.header_name, "request_headers.header_name")?
                            .to_ascii_lowercase(),
                        key: nonempty(&h.descriptor_key, "request_headers.descriptor_key")?,
                        skip_if_absent: {
                            let _ = hp;
                            h.skip_if_absent
                        },
                    }
                }
                Some(A::QueryParameters(q)) => RateLimitAction::QueryParameters {
                    name: nonempty(
                        &q.query_parameter_name,
                        "query_parameters.query_parameter_name",
                    )?,
                    key: nonempty(&q.descriptor_key, "query_parameters.descriptor_key")?,
                    skip_if_absent: q.skip_if_absent,
                },
                Some(A::RemoteAddress(_)) => RateLimitAction::RemoteAddress,
                Some(A::MaskedRemoteAddress(m)) => {
                    let v4 = m.v4_prefix_mask_len.unwrap_or(32);
                    let v6 = m.v6_prefix_mask_len.unwrap_or(128);
                    if v4 > 32 || v6 > 128 {
                        return Err(Error::invalid(
                            p.field("masked_remote_address"),
                            "a prefix past the address",
                        ));
                    }
                    RateLimitAction::MaskedRemoteAddress {
                        v4: v4 as u8,
                        v6: v6 as u8,
                    }
                }
                Some(A::GenericKey(g)) => RateLimitAction::GenericKey {
                    key: Some(g.descriptor_key.clone())
                        .filter(|k| !k.is_empty())
                        .unwrap_or_else(|| "generic_key".into()),
                    value: nonempty(&g.descriptor_value, "generic_key.descriptor_value")?,
                },
                Some(A::HeaderValueMatch(h)) => {
                    let hp = p.field("header_value_match").field("headers");
                    if h.headers.is_empty() {
                        return Err(Error::invalid(hp, "at least one matcher is required"));
                    }
                    RateLimitAction::HeaderValueMatch {
                        key: Some(h.descriptor_key.clone())
                            .filter(|k| !k.is_empty())
                            .unwrap_or_else(|| "header_match".into()),
                        value: nonempty(
                            &h.descriptor_value,
                            "header_value_match.descriptor_value",
                        )?,
                        expect_match: h.expect_match.unwrap_or(true),
                        headers: h
                            .headers
                            .iter()
                            .enumerate()
                            .map(|(j, m)| header_matcher(m, &hp.index(j)))
                            .collect::<Result<Vec<_>>>()?,
                    }
                }
                Some(A::DynamicMetadata(_)) => {
                    return Err(Error::unsupported(p.field("dynamic_metadata")))
                }
                Some(A::Metadata(_)) => return Err(Error::unsupported(p.field("metadata"))),
                Some(A::Extension(_)) => return Err(Error::unsupported(p.field("extension"))),
                Some(A::QueryParameterValueMatch(_)) => {
                    return Err(Error::unsupported(p.field("query_parameter_value_match")))
                }
                None => return Err(Error::invalid(p, "an action is required")),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RateLimitPolicy { stage, actions })
}
