//! The `location` of a route's `redirect`, composed from the request as Envoy composes it: scheme, host, port, path, query, each kept or replaced.
//!
//! The rules that are not obvious from the field names (checked against
//! Envoy 1.40 side by side, see `gateway/tests/route_replies.rs`):
//! - the scheme kept is the request's `x-forwarded-proto` (the one the
//!   connection manager set, or the client's it kept), not `:scheme`;
//! - the request's port is dropped when `port_redirect` is set, or when the
//!   scheme changes and the port is the default of the request's
//!   `x-forwarded-proto` (`:80` for http, `:443` for https), so
//!   `http://a:80/` becomes `https://a/` but `http://a:8080/` keeps its port;
//! - a `path_redirect` with a `?` replaces the query and is never stripped;
//!   without one the request's query follows it (unless `strip_query`);
//! - `host_redirect` is used as written (a port in it included), and
//!   `port_redirect` is always appended, even the scheme's default;
//! - `prefix_rewrite` replaces the matched prefix (or the whole path for a
//!   `path` or `safe_regex` match), `regex_rewrite` every match in the path without its query; the
//!   query then follows unless stripped;
//! - a path that does not start with `/` gets one.

use crate::config::{Redirect, RedirectPath, RouteMatch};
use crate::route::{regex_rewrite_path, rewrite_path};

/// What a redirect reads of the request.
#[derive(Debug, Clone, Copy)]
pub struct RedirectRequest<'a> {
    /// `:authority` or `host`, port included.
    pub authority: &'a str,
    /// `:path`, query included.
    pub path: &'a str,
    /// The `x-forwarded-proto` the request carries past the connection
    /// manager (its own when it sets one): the request's scheme.
    pub forwarded_proto: &'a str,
}

/// A redirect that changes nothing: what a 3xx `direct_response` points
/// its `location` at (the request's own URL, as Envoy does).
pub const SELF: Redirect = Redirect {
    scheme: None,
    host: None,
    port: None,
    path: RedirectPath::Keep,
    strip_query: false,
    status: 301,
};

/// The `location` for `request` under `redirect`, on a route matched by
/// `matcher` (which `prefix_rewrite` replaces).
pub fn redirect_location(
    redirect: &Redirect,
    matcher: &RouteMatch,
    request: &RedirectRequest<'_>,
) -> String {
    let scheme = redirect
        .scheme
        .as_deref()
        .unwrap_or(request.forwarded_proto);
    let mut out =
        String::with_capacity(scheme.len() + request.authority.len() + request.path.len() + 16);
    out.push_str(scheme);
    out.push_str("://");
    match &redirect.host {
        Some(host) => out.push_str(host),
        None => out.push_str(request_host(request, scheme, redirect.port.is_some())),
    }
    if let Some(port) = redirect.port {
        out.push(':');
        out.push_str(&port.to_string());
    }
    let (path, fixed_query) = new_path(redirect, matcher, request.path);
    let at = out.len();
    out.push_str(&path);
    if !out[at..].starts_with('/') {
        out.insert(at, '/');
    }
    if redirect.strip_query && !fixed_query {
        if let Some(q) = out[at..].find('?') {
            out.truncate(at + q);
        }
    }
    out
}

/// The path (with its query) before the leading-slash and strip rules,
/// and whether its query is `path_redirect`'s own (never stripped).
fn new_path<'a>(
    redirect: &'a Redirect,
    matcher: &RouteMatch,
    path: &'a str,
) -> (std::borrow::Cow<'a, str>, bool) {
    use std::borrow::Cow;
    let query = path.find('?').map_or("", |i| &path[i..]);
    match &redirect.path {
        RedirectPath::Keep => (Cow::Borrowed(path), false),
        RedirectPath::Path {
            path: new,
            has_query: true,
        } => (Cow::Borrowed(new.as_str()), true),
        RedirectPath::Path { path: new, .. } => (Cow::Owned(format!("{new}{query}")), false),
        RedirectPath::Prefix(new) => (Cow::Owned(rewrite_path(matcher, new, path)), false),
        RedirectPath::Regex {
            pattern,
            substitution,
        } => (
            Cow::Owned(regex_rewrite_path(pattern, substitution, path)),
            false,
        ),
    }
}

/// The request's host for the new URL: its port dropped when a new port
/// replaces it, or when the scheme changes and the port is the default
/// of the request's forwarded proto (Envoy's `processRequestHost`).
fn request_host<'a>(request: &RedirectRequest<'a>, new_scheme: &str, new_port: bool) -> &'a str {
    let host = request.authority;
    let Some(at) = crate::headers::port_colon(host.as_bytes()) else {
        return host;
    };
    let port = &host[at..];
    let proto = request.forwarded_proto;
    let default_port = (proto == "https" && port == ":443") || (proto == "http" && port == ":80");
    if new_port || (new_scheme != proto && default_port) {
        &host[..at]
    } else {
        host
    }
}

#[cfg(test)]
mod tests;
