//! The connection manager's header settings → the engine's: who the client is (`use_remote_address`, `xff_num_trusted_hops`, `internal_address_config`, the XFF original-IP extension), `x-request-id`, `via`, `server`, path normalization and host port stripping.

use engine::path::{EscapedSlashes, PathNormalization};
use engine::{
    ClientTrust, InternalAddresses, RequestIdPolicy, ServerHeader, ServerHeaderTransformation,
    StripHostPort,
};
use prost::Name;

use crate::decode::unpack;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use crate::pb::envoy::extensions::http::original_ip_detection::xff::v3::XffConfig;

/// `use_remote_address`, `skip_xff_append`, `xff_num_trusted_hops` (or
/// the XFF original-IP extension's) and `internal_address_config`.
pub(super) fn client_trust(m: &hcm::HttpConnectionManager, path: &Path) -> Result<ClientTrust> {
    let use_remote_address = m.use_remote_address.unwrap_or(false);
    let mut hops = m.xff_num_trusted_hops;
    let mut skip_xff_append = m.skip_xff_append;
    let epath = path.field("original_ip_detection_extensions");
    if let Some(ext) = m.original_ip_detection_extensions.first() {
        // Envoy: the extensions take the place of `use_remote_address`
        // and `xff_num_trusted_hops`.
        if use_remote_address || hops != 0 {
            return Err(Error::invalid(
                epath,
                "may not be combined with use_remote_address or xff_num_trusted_hops",
            ));
        }
        if m.original_ip_detection_extensions.len() > 1 {
            return Err(Error::unsupported_msg(
                epath,
                "only one extension is supported",
            ));
        }
        let at = epath.index(0).field("typed_config");
        let any = ext
            .typed_config
            .as_ref()
            .ok_or_else(|| Error::invalid(at.clone(), "required"))?;
        if crate::decode::any_type_name(any, &at)? != XffConfig::full_name() {
            return Err(Error::unsupported_msg(
                at,
                "only envoy.extensions.http.original_ip_detection.xff.v3.XffConfig is supported",
            ));
        }
        let (xff, xpath): (XffConfig, Path) = unpack(any, &at)?;
        super::common::reject_set!(xpath, xff, xff_trusted_cidrs);
        hops = xff.xff_num_trusted_hops;
        skip_xff_append |= xff.skip_xff_append.unwrap_or(false);
    }
    let internal = match &m.internal_address_config {
        None => InternalAddresses::None,
        Some(c) if c.cidr_ranges.is_empty() => InternalAddresses::Legacy,
        Some(c) => InternalAddresses::Ranges(super::filter_chain::ranges(
            &c.cidr_ranges,
            &path.field("internal_address_config").field("cidr_ranges"),
        )?),
    };
    Ok(ClientTrust {
        use_remote_address,
        skip_xff_append,
        xff_num_trusted_hops: hops,
        internal,
    })
}

/// `generate_request_id` (default true), `preserve_external_request_id`,
/// `always_set_request_id_in_response`.
pub(super) fn request_id(m: &hcm::HttpConnectionManager, path: &Path) -> Result<RequestIdPolicy> {
    if let Some(ext) = &m.request_id_extension {
        // Envoy's UUID extension is what it does by default; its two
        // fields steer how Envoy keeps a sampling decision in the id,
        // which the gateway keeps in the trace context instead: taken,
        // nothing to change (checked on Envoy 1.40: ids stay UUID v4
        // whatever they say when there is no tracing).
        let epath = path.field("request_id_extension").field("typed_config");
        let Some(any) = &ext.typed_config else {
            return Err(Error::invalid(epath, "required"));
        };
        let name = crate::decode::any_type_name(any, &epath)?;
        if name != UUID_REQUEST_ID {
            return Err(Error::unsupported_msg(
                epath,
                format!("request ID extension {name:?} is not supported (only {UUID_REQUEST_ID})"),
            ));
        }
    }
    Ok(RequestIdPolicy {
        generate: m.generate_request_id.unwrap_or(true),
        preserve_external: m.preserve_external_request_id,
        in_response: m.always_set_request_id_in_response,
    })
}

/// Envoy's request ID extension, the only one there is.
const UUID_REQUEST_ID: &str = "envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig";

/// A header value from the config: visible ASCII and spaces, no CR, LF
/// or NUL (Envoy's `HTTP_HEADER_VALUE` rule, which is laxer on bytes
/// above 127 than we are).
fn header_value(v: &str, path: &Path) -> Result<()> {
    if v.bytes()
        .all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
    {
        Ok(())
    } else {
        Err(Error::invalid(
            path.clone(),
            format!("{v:?} is not a valid header value"),
        ))
    }
}

/// `via`: unset or empty, none.
pub(super) fn via(m: &hcm::HttpConnectionManager, path: &Path) -> Result<Option<String>> {
    if m.via.is_empty() {
        return Ok(None);
    }
    header_value(&m.via, &path.field("via"))?;
    Ok(Some(m.via.clone()))
}

/// `server_name` (default `envoy`) and `server_header_transformation`.
pub(super) fn server_header(m: &hcm::HttpConnectionManager, path: &Path) -> Result<ServerHeader> {
    use hcm::http_connection_manager::ServerHeaderTransformation as T;
    let name = match m.server_name.as_str() {
        "" => engine::DEFAULT_SERVER_NAME.to_owned(),
        n => {
            header_value(n, &path.field("server_name"))?;
            n.to_owned()
        }
    };
    let transformation = match T::try_from(m.server_header_transformation) {
        Ok(T::Overwrite) => ServerHeaderTransformation::Overwrite,
        Ok(T::AppendIfAbsent) => ServerHeaderTransformation::AppendIfAbsent,
        Ok(T::PassThrough) => ServerHeaderTransformation::PassThrough,
        Err(_) => {
            return Err(Error::invalid(
                path.field("server_header_transformation"),
                format!("unknown value {}", m.server_header_transformation),
            ))
        }
    };
    Ok(ServerHeader {
        name,
        transformation,
    })
}

/// `normalize_path`, `merge_slashes`, `path_with_escaped_slashes_action`.
pub(super) fn path_normalization(
    m: &hcm::HttpConnectionManager,
    path: &Path,
) -> Result<PathNormalization> {
    use hcm::http_connection_manager::PathWithEscapedSlashesAction as A;
    let v = m.path_with_escaped_slashes_action;
    let escaped_slashes = match A::try_from(v) {
        Ok(A::ImplementationSpecificDefault | A::KeepUnchanged) => EscapedSlashes::Keep,
        Ok(A::RejectRequest) => EscapedSlashes::Reject,
        Ok(A::UnescapeAndRedirect) => EscapedSlashes::Redirect,
        Ok(A::UnescapeAndForward) => EscapedSlashes::Forward,
        Err(_) => {
            return Err(Error::invalid(
                path.field("path_with_escaped_slashes_action"),
                format!("unknown value {v}"),
            ))
        }
    };
    Ok(PathNormalization {
        normalize: m.normalize_path.unwrap_or(false),
        merge_slashes: m.merge_slashes,
        escaped_slashes,
    })
}

/// `strip_matching_host_port` or `strip_any_host_port` (Envoy refuses
/// both).
pub(super) fn strip_host_port(
    m: &hcm::HttpConnectionManager,
    path: &Path,
) -> Result<StripHostPort> {
    use hcm::http_connection_manager::StripPortMode;
    let any = matches!(
        m.strip_port_mode,
        Some(StripPortMode::StripAnyHostPort(true))
    );
    match (m.strip_matching_host_port, any) {
        (true, true) => Err(Error::invalid(
            path.field("strip_matching_host_port"),
            "may not be combined with strip_any_host_port",
        )),
        (true, false) => Ok(StripHostPort::Matching),
        (false, true) => Ok(StripHostPort::Any),
        (false, false) => Ok(StripHostPort::None),
    }
}
