//! The stateful session HTTP filter (`envoy.filters.http.stateful_session`,
//! gRFC A55) and its session states, into `engine::StatefulSession`.

use std::time::Duration;

use engine::{
    SessionCookie, SessionHeader, SessionState, StatefulSession, StatefulSessionPerRoute,
};
use prost::Name;

use super::common::{is_token, reject_set, strict_duration};
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::filters::http::stateful_session::v3 as pb;
use crate::pb::envoy::extensions::http::stateful_session::cookie::v3::CookieBasedSessionState;
use crate::pb::envoy::extensions::http::stateful_session::header::v3::HeaderBasedSessionState;
use crate::pb::envoy::r#type::http::v3::Cookie;

/// The extension names Envoy looks session states up by.
const COOKIE_EXTENSION: &str = "envoy.http.stateful_session.cookie";
const HEADER_EXTENSION: &str = "envoy.http.stateful_session.header";

/// Validates a `StatefulSession` filter config (at `path`).
///
/// `session_state` may be absent (the filter then does nothing, as in
/// Envoy); when present its `name` must be the extension Envoy registers for
/// its `typed_config`: `envoy.http.stateful_session.cookie` for
/// `CookieBasedSessionState`, `envoy.http.stateful_session.header` for
/// `HeaderBasedSessionState`. Other session states and `stat_prefix` are
/// not supported. `status_on_strict_destination_not_found` is 0 (503) or an
/// HTTP status in `200..=599`.
pub fn stateful_session(s: &pb::StatefulSession, path: &Path) -> Result<StatefulSession> {
    reject_set!(path, s, stat_prefix);
    let session_state = match &s.session_state {
        Some(t) => Some(session_state(t, &path.field("session_state"))?),
        None => None,
    };
    let strict_not_found_status = match s.status_on_strict_destination_not_found {
        0 => 503,
        n @ 200..=599 => n as u16,
        n => {
            return Err(Error::invalid(
                path.field("status_on_strict_destination_not_found"),
                format!("{n} is not an HTTP status in 200..=599"),
            ))
        }
    };
    Ok(StatefulSession {
        session_state,
        strict: s.strict,
        strict_not_found_status,
    })
}

/// Validates a `StatefulSessionPerRoute` (at `path`): `disabled: true` or a
/// `stateful_session` (see [`stateful_session`]).
pub fn stateful_session_per_route(
    r: &pb::StatefulSessionPerRoute,
    path: &Path,
) -> Result<StatefulSessionPerRoute> {
    use pb::stateful_session_per_route::Override;
    match &r.r#override {
        Some(Override::Disabled(true)) => Ok(StatefulSessionPerRoute::Disabled),
        Some(Override::Disabled(false)) => {
            Err(Error::invalid(path.field("disabled"), "must be true"))
        }
        Some(Override::StatefulSession(s)) => Ok(StatefulSessionPerRoute::Override(
            stateful_session(s, &path.field("stateful_session"))?,
        )),
        None => Err(Error::invalid(
            path.clone(),
            "one of disabled and stateful_session is required",
        )),
    }
}

/// `session_state` (a `TypedExtensionConfig`).
fn session_state(t: &core::TypedExtensionConfig, path: &Path) -> Result<SessionState> {
    if t.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    let tpath = path.field("typed_config");
    let Some(any) = &t.typed_config else {
        return Err(Error::invalid(tpath, "required"));
    };
    let type_name = any_type_name(any, &tpath)?;
    let (extension, state) = if type_name == CookieBasedSessionState::full_name() {
        let (c, cpath) = unpack::<CookieBasedSessionState>(any, &tpath)?;
        let cookie = cookie(c.cookie.as_ref(), &cpath.field("cookie"))?;
        (COOKIE_EXTENSION, SessionState::Cookie(cookie))
    } else if type_name == HeaderBasedSessionState::full_name() {
        let (h, hpath) = unpack::<HeaderBasedSessionState>(any, &tpath)?;
        let name = header_name(&h.name, &hpath.field("name"))?;
        (
            HEADER_EXTENSION,
            SessionState::Header(SessionHeader { name }),
        )
    } else {
        return Err(Error::unsupported_msg(
            tpath.clone(),
            format!(
                "session state {} is not supported; only {} and {} are",
                any_type_url(any, &tpath)?,
                CookieBasedSessionState::type_url(),
                HeaderBasedSessionState::type_url(),
            ),
        ));
    };
    // Envoy finds the session state's factory by this name.
    if t.name != extension {
        return Err(Error::invalid(
            path.field("name"),
            format!(
                "{:?} does not name this typed_config's extension; use {extension:?}",
                t.name
            ),
        ));
    }
    Ok(state)
}

/// `CookieBasedSessionState.cookie` (gRFC A55: `name` required, `ttl` not
/// negative, `path` optional). The name and path go into `set-cookie`, so
/// the name must be a token and the path an RFC 6265 path starting with `/`.
fn cookie(c: Option<&Cookie>, path: &Path) -> Result<SessionCookie> {
    let Some(c) = c else {
        return Err(Error::invalid(path.clone(), "required"));
    };
    reject_set!(path, c, attributes);
    let npath = path.field("name");
    if c.name.is_empty() {
        return Err(Error::invalid(npath, "required"));
    }
    if !is_token(&c.name) {
        return Err(Error::invalid(
            npath,
            format!(
                "{:?} is not a valid cookie name (an RFC 7230 token)",
                c.name
            ),
        ));
    }
    let ttl = match &c.ttl {
        Some(d) => strict_duration(d, &path.field("ttl"))?,
        None => Duration::ZERO,
    };
    let cookie_path = if c.path.is_empty() {
        None
    } else {
        let ppath = path.field("path");
        if !c.path.starts_with('/') {
            return Err(Error::invalid(ppath, "must start with \"/\""));
        }
        if !c
            .path
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b';')
        {
            return Err(Error::invalid(
                ppath,
                "must be printable ASCII without \";\"",
            ));
        }
        Some(c.path.clone())
    };
    Ok(SessionCookie {
        name: c.name.clone(),
        ttl,
        path: cookie_path,
    })
}

/// `HeaderBasedSessionState.name`: a header name, lowercased.
fn header_name(name: &str, path: &Path) -> Result<String> {
    if name.is_empty() {
        return Err(Error::invalid(path.clone(), "required"));
    }
    if !is_token(name) {
        return Err(Error::invalid(
            path.clone(),
            format!("{name:?} is not a valid HTTP header name"),
        ));
    }
    Ok(name.to_ascii_lowercase())
}
