//! Helpers and the `reject_set!` macro shared by the per-resource
//! validators: the files of this folder import them from here.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::error::{Error, Path, Result};
use crate::pb;

/// Whether a proto field holds a non-default value (so an unimplemented
/// field can be rejected only when actually used).
pub(crate) trait IsSet {
    fn is_set(&self) -> bool;
}

impl<T> IsSet for Option<T> {
    fn is_set(&self) -> bool {
        self.is_some()
    }
}
impl<T> IsSet for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}
impl<K, V> IsSet for HashMap<K, V> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}
impl IsSet for String {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}
impl IsSet for bool {
    fn is_set(&self) -> bool {
        *self
    }
}
impl IsSet for i32 {
    fn is_set(&self) -> bool {
        *self != 0
    }
}
impl IsSet for u32 {
    fn is_set(&self) -> bool {
        *self != 0
    }
}

/// `reject_set!(path, msg, field, ...)`: `PATH.field: not supported` for the
/// first listed field of `msg` that is set.
macro_rules! reject_set {
    ($path:expr, $msg:expr, $($field:ident),+ $(,)?) => {
        $(
            if $crate::validate::common::IsSet::is_set(&$msg.$field) {
                return Err($crate::error::Error::unsupported($path.field(stringify!($field))));
            }
        )+
    };
}
pub(crate) use reject_set;

/// A `google.protobuf.Duration` as a std `Duration` (negative is invalid).
pub(crate) fn duration(d: &prost_types::Duration, path: &Path) -> Result<Duration> {
    Duration::try_from(*d).map_err(|_| Error::invalid(path.clone(), "must not be negative"))
}

/// A `google.protobuf.Duration` held to the limits of its own definition
/// (seconds within ±315,576,000,000; nanos within ±999,999,999 and of the
/// same sign as seconds), as gRFC A50 asks, and not negative. Unlike
/// [`duration`], nanos out of range are an error rather than carried over.
pub(crate) fn strict_duration(d: &prost_types::Duration, path: &Path) -> Result<Duration> {
    const MAX_SECONDS: i64 = 315_576_000_000;
    let valid = (-MAX_SECONDS..=MAX_SECONDS).contains(&d.seconds)
        && (-999_999_999..=999_999_999).contains(&d.nanos)
        && !(d.seconds > 0 && d.nanos < 0 || d.seconds < 0 && d.nanos > 0);
    if !valid {
        return Err(Error::invalid(
            path.clone(),
            format!(
                "{{seconds: {}, nanos: {}}} is not a valid google.protobuf.Duration",
                d.seconds, d.nanos
            ),
        ));
    }
    if d.seconds < 0 || d.nanos < 0 {
        return Err(Error::invalid(path.clone(), "must not be negative"));
    }
    Ok(Duration::new(d.seconds as u64, d.nanos as u32))
}

/// Whether `s` is an RFC 7230 token (a header name, or an RFC 6265 cookie
/// name).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An optional timeout where 0 means "disabled", defaulting to `default`.
pub(crate) fn timeout_or(
    d: Option<&prost_types::Duration>,
    default: Duration,
    path: &Path,
) -> Result<Option<Duration>> {
    match d {
        None => Ok(Some(default)),
        Some(d) => {
            let d = duration(d, path)?;
            Ok((!d.is_zero()).then_some(d))
        }
    }
}

/// A `UInt32Value` in `range`, or `default` when unset.
pub(crate) fn u32_in(
    v: Option<u32>,
    range: std::ops::RangeInclusive<u32>,
    default: u32,
    path: &Path,
) -> Result<u32> {
    match v {
        None => Ok(default),
        Some(v) if range.contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(
            path.clone(),
            format!("{v} is out of range {}..={}", range.start(), range.end()),
        )),
    }
}

/// `Address` → `SocketAddr`: only `socket_address` with an IP literal and a
/// numeric `port_value` (we do no DNS resolution). Port 0 (pick any) only
/// makes sense for a listener.
pub(crate) fn socket_address(
    addr: Option<&pb::envoy::config::core::v3::Address>,
    path: &Path,
    allow_port_zero: bool,
) -> Result<SocketAddr> {
    socket_address_at(addr, &|| path.clone(), allow_port_zero)
}

/// [`socket_address`] with the path built only for an error: EDS
/// validates every endpoint of 10,000-host clusters this way, where
/// formatting paths that are never read was most of the work.
pub(crate) fn socket_address_at(
    addr: Option<&pb::envoy::config::core::v3::Address>,
    path: &dyn Fn() -> Path,
    allow_port_zero: bool,
) -> Result<SocketAddr> {
    use pb::envoy::config::core::v3::{address, socket_address};
    let Some(addr) = addr else {
        return Err(Error::invalid(path(), "required"));
    };
    let sa = match &addr.address {
        Some(address::Address::SocketAddress(sa)) => sa,
        Some(address::Address::Pipe(_)) => return Err(Error::unsupported(path().field("pipe"))),
        Some(address::Address::EnvoyInternalAddress(_)) => {
            return Err(Error::unsupported(path().field("envoy_internal_address")))
        }
        None => return Err(Error::invalid(path().field("socket_address"), "required")),
    };
    let path = || path().field("socket_address");
    if sa.protocol != socket_address::Protocol::Tcp as i32 {
        return Err(Error::unsupported_msg(
            path().field("protocol"),
            "only TCP is supported",
        ));
    }
    reject_set!(path(), sa, resolver_name, ipv4_compat);
    let ip: IpAddr = sa.address.parse().map_err(|_| {
        Error::invalid(
            path().field("address"),
            format!(
                "{:?} is not an IP address (DNS names are not supported)",
                sa.address
            ),
        )
    })?;
    let port = match &sa.port_specifier {
        Some(socket_address::PortSpecifier::PortValue(p)) => *p,
        Some(socket_address::PortSpecifier::NamedPort(_)) => {
            return Err(Error::unsupported(path().field("named_port")))
        }
        None => return Err(Error::invalid(path().field("port_value"), "required")),
    };
    let port = u16::try_from(port)
        .ok()
        .filter(|p| allow_port_zero || *p != 0)
        .ok_or_else(|| {
            Error::invalid(
                path().field("port_value"),
                format!("{port} is not a valid port"),
            )
        })?;
    Ok(SocketAddr::new(ip, port))
}

/// An owner's `metadata` (at `owner()`'s `metadata`): data for filters,
/// loggers and control planes (Istio's and Envoy Gateway's names of
/// what they made), accepted and kept out of the data path, since nothing
/// the gateway runs reads it (Envoy's core acts on none of it either;
/// subset load balancing, which would, is refused on its own).
/// `typed_filter_metadata` is refused: its types are not known here.
pub(crate) fn metadata(
    m: Option<&crate::pb::envoy::config::core::v3::Metadata>,
    owner: impl FnOnce() -> Path,
) -> Result<()> {
    match m {
        Some(m) if !m.typed_filter_metadata.is_empty() => Err(Error::unsupported(
            owner().field("metadata").field("typed_filter_metadata"),
        )),
        _ => Ok(()),
    }
}

/// A `RuntimeFractionalPercent`: its `default_value` (required). The
/// `runtime_key` is kept out: no runtime layer we accept can set it, so
/// the default is what applies, as in an Envoy without that key.
pub(crate) fn runtime_fraction(
    f: &pb::envoy::config::core::v3::RuntimeFractionalPercent,
    path: &Path,
) -> Result<engine::Fraction> {
    let value = f
        .default_value
        .as_ref()
        .ok_or_else(|| Error::invalid(path.field("default_value"), "required"))?;
    fractional_percent(value, &path.field("default_value"))
}

/// A `RuntimeFeatureFlag`'s default (its key is never set: no runtime);
/// `default` when the flag is unset.
pub(crate) fn feature_flag(
    f: Option<&pb::envoy::config::core::v3::RuntimeFeatureFlag>,
    default: bool,
    path: &Path,
) -> Result<bool> {
    let Some(f) = f else {
        return Ok(default);
    };
    f.default_value
        .ok_or_else(|| Error::invalid(path.field("default_value"), "required"))
}

/// A `FractionalPercent` (at `path`).
pub(crate) fn fractional_percent(
    f: &pb::envoy::r#type::v3::FractionalPercent,
    path: &Path,
) -> Result<engine::Fraction> {
    use crate::pb::envoy::r#type::v3::fractional_percent::DenominatorType as D;
    let denominator = match D::try_from(f.denominator) {
        Ok(D::Hundred) => 100,
        Ok(D::TenThousand) => 10_000,
        Ok(D::Million) => 1_000_000,
        Err(_) => {
            return Err(Error::invalid(
                path.field("denominator"),
                format!("unknown value {}", f.denominator),
            ))
        }
    };
    Ok(engine::Fraction {
        numerator: f.numerator,
        denominator,
    })
}
