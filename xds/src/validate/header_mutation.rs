//! `HeaderValueOption` lists and header-name removal lists → the engine's [`HeaderMutation`]: names the gateway owns refused, values parsed once as substitution formats.

use engine::access_log::LogFormat;
use engine::headers::is_hop_by_hop;
use engine::{AppendAction, HeaderMutation, HeaderToAdd, HeaderValue};

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;

/// One `HeaderValueOption`, checked: its lowercase name, its value as
/// written, its action (`append` folded in), `keep_empty_value`.
pub(super) struct HeaderOption<'a> {
    pub name: String,
    pub value: &'a str,
    pub action: AppendAction,
    pub keep_empty: bool,
}

/// No control characters but tab (what may go on a header line).
pub(super) fn header_value_ok(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Checks `o` (at `path`): a header name that is a token, a value that
/// may go on a header line, one of `append` and `append_action`.
pub(super) fn header_option<'a>(
    o: &'a core::HeaderValueOption,
    path: &Path,
) -> Result<HeaderOption<'a>> {
    use core::header_value_option::HeaderAppendAction as A;
    let Some(h) = &o.header else {
        return Err(Error::invalid(path.field("header"), "required"));
    };
    let hpath = path.field("header");
    reject_set!(hpath, h, raw_value);
    let is_pseudo = h.key.starts_with(':');
    if !is_pseudo && !super::common::is_token(&h.key) {
        return Err(Error::invalid(
            hpath.field("key"),
            format!("{:?} is not a header name", h.key),
        ));
    }
    if !header_value_ok(&h.value) {
        return Err(Error::invalid(
            hpath.field("value"),
            "not a valid header value (control characters)",
        ));
    }
    let action = match (o.append, A::try_from(o.append_action)) {
        (Some(_), Ok(a)) if a != A::AppendIfExistsOrAdd => {
            return Err(Error::invalid(
                path.field("append"),
                "append and append_action cannot both be set",
            ))
        }
        (Some(true), _) | (None, Ok(A::AppendIfExistsOrAdd)) => AppendAction::AppendIfExistsOrAdd,
        (Some(false), _) | (None, Ok(A::OverwriteIfExistsOrAdd)) => {
            AppendAction::OverwriteIfExistsOrAdd
        }
        (None, Ok(A::AddIfAbsent)) => AppendAction::AddIfAbsent,
        (None, Ok(A::OverwriteIfExists)) => AppendAction::OverwriteIfExists,
        (None, Err(_)) => {
            return Err(Error::invalid(
                path.field("append_action"),
                format!("unknown value {}", o.append_action),
            ))
        }
    };
    Ok(HeaderOption {
        name: h.key.to_ascii_lowercase(),
        value: &h.value,
        action,
        keep_empty: o.keep_empty_value,
    })
}

/// Names a route's header lists may not touch: pseudo-headers and `host`
/// (Envoy refuses them too), and what the codecs own (`te`, the
/// hop-by-hop fields).
fn owned_by_the_gateway(name: &str) -> bool {
    name.starts_with(':') || name == "host" || name == "te" || is_hop_by_hop(name.as_bytes())
}

const OWNED: &str =
    ":-prefixed, host, te and hop-by-hop headers may not be modified (the gateway sets them)";

/// A level's `*_headers_to_add` (at `add_path`) and `*_headers_to_remove`
/// (at `remove_path`).
pub(super) fn header_mutation(
    add: &[core::HeaderValueOption],
    add_path: &Path,
    remove: &[String],
    remove_path: &Path,
) -> Result<HeaderMutation> {
    let mut out = HeaderMutation::default();
    for (i, name) in remove.iter().enumerate() {
        let rpath = remove_path.index(i);
        let lower = name.to_ascii_lowercase();
        if !lower.starts_with(':') && !super::common::is_token(&lower) {
            return Err(Error::invalid(
                rpath,
                format!("{name:?} is not a header name"),
            ));
        }
        if owned_by_the_gateway(&lower) {
            return Err(Error::invalid(rpath, format!("{name:?}: {OWNED}")));
        }
        out.remove.push(lower.into_bytes().into_boxed_slice());
    }
    for (i, o) in add.iter().enumerate() {
        let opath = add_path.index(i);
        let h = header_option(o, &opath)?;
        if owned_by_the_gateway(&h.name) {
            return Err(Error::invalid(
                opath.field("header").field("key"),
                format!("{:?}: {OWNED}", h.name),
            ));
        }
        let value = if h.value.contains('%') {
            let format = LogFormat::text(h.value)
                .map_err(|e| Error::invalid(opath.field("header").field("value"), e.to_string()))?;
            match format.literal() {
                // `100%%` and the like: no operator, bytes known now.
                Some(text) => HeaderValue::Literal(text.as_bytes().into()),
                None => HeaderValue::Format(Box::new(format)),
            }
        } else {
            HeaderValue::Literal(h.value.as_bytes().into())
        };
        out.add.push(HeaderToAdd {
            name: h.name.into_bytes().into_boxed_slice(),
            value,
            action: h.action,
            keep_empty: h.keep_empty,
        });
    }
    Ok(out)
}
