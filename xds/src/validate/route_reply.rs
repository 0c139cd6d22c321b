//! A route's `redirect` and `direct_response` actions → the engine's [`Redirect`] and [`DirectResponse`], with Envoy's ranges.

use bytes::Bytes;
use engine::{DirectResponse, Redirect, RedirectPath};

use super::tls::data_source;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as pb;
use crate::pb::envoy::r#type::matcher::v3 as matcher;

/// Envoy's default `max_direct_response_body_size_bytes`.
pub const DEFAULT_MAX_DIRECT_RESPONSE_BODY: u32 = 4096;

/// A value that may go into a header (Envoy's `HTTP_HEADER_VALUE` rule,
/// not strict): no NUL, CR or LF.
fn header_value(s: &str, path: &Path) -> Result<()> {
    if s.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(Error::invalid(
            path.clone(),
            format!("{s:?} has a NUL, CR or LF"),
        ));
    }
    Ok(())
}

/// `redirect`. `port_redirect` must be a port (Envoy emits any `u32`).
pub(super) fn redirect(r: &pb::RedirectAction, path: &Path) -> Result<Redirect> {
    use pb::redirect_action::{
        PathRewriteSpecifier as P, RedirectResponseCode as Code, SchemeRewriteSpecifier as S,
    };
    let scheme = match &r.scheme_rewrite_specifier {
        Some(S::HttpsRedirect(true)) => Some("https".to_owned()),
        Some(S::HttpsRedirect(false)) | None => None,
        Some(S::SchemeRedirect(s)) if s.is_empty() => None,
        Some(S::SchemeRedirect(s)) => {
            // As written (Envoy does not check it either), short of what
            // cannot go into a header.
            header_value(s, &path.field("scheme_redirect"))?;
            Some(s.clone())
        }
    };
    header_value(&r.host_redirect, &path.field("host_redirect"))?;
    let host = (!r.host_redirect.is_empty()).then(|| r.host_redirect.clone());
    let port = match r.port_redirect {
        0 => None,
        p => Some(u16::try_from(p).map_err(|_| {
            Error::invalid(path.field("port_redirect"), format!("{p} is not a port"))
        })?),
    };
    let new_path = match &r.path_rewrite_specifier {
        None => RedirectPath::Keep,
        Some(P::PathRedirect(p)) => {
            header_value(p, &path.field("path_redirect"))?;
            if p.is_empty() {
                RedirectPath::Keep
            } else {
                RedirectPath::Path {
                    path: p.clone(),
                    has_query: p.contains('?'),
                }
            }
        }
        Some(P::PrefixRewrite(p)) => {
            // With a `path` or `safe_regex` match it replaces the whole
            // path (Envoy's, unlike a forwarding route's prefix_rewrite).
            header_value(p, &path.field("prefix_rewrite"))?;
            RedirectPath::Prefix(p.clone())
        }
        Some(P::RegexRewrite(rr)) => {
            let (pattern, substitution) = regex_rewrite(rr, &path.field("regex_rewrite"))?;
            RedirectPath::Regex {
                pattern,
                substitution,
            }
        }
    };
    let status = match Code::try_from(r.response_code) {
        Ok(Code::MovedPermanently) => 301,
        Ok(Code::Found) => 302,
        Ok(Code::SeeOther) => 303,
        Ok(Code::TemporaryRedirect) => 307,
        Ok(Code::PermanentRedirect) => 308,
        Err(_) => {
            return Err(Error::invalid(
                path.field("response_code"),
                format!("{} is not a RedirectResponseCode", r.response_code),
            ))
        }
    };
    Ok(Redirect {
        scheme,
        host,
        port,
        path: new_path,
        strip_query: r.strip_query,
        status,
    })
}

/// `regex_rewrite` (`RegexMatchAndSubstitute`): the pattern, unanchored,
/// and the substitution in the regex crate's syntax (RE2's `\1` becomes
/// `${1}`, a literal `$` becomes `$$`).
pub(super) fn regex_rewrite(
    rr: &matcher::RegexMatchAndSubstitute,
    path: &Path,
) -> Result<(regex::Regex, String)> {
    let Some(pattern) = &rr.pattern else {
        return Err(Error::invalid(path.field("pattern"), "required"));
    };
    let regex = super::route_match::regex(pattern, &path.field("pattern"), "(?:", ")")?;
    let spath = path.field("substitution");
    header_value(&rr.substitution, &spath)?;
    let substitution = substitution(&rr.substitution, regex.captures_len(), &spath)?;
    Ok((regex, substitution))
}

/// RE2's rewrite string (`\0`…`\9`, `\\`) in the regex crate's syntax;
/// a group the pattern lacks is an error, as in RE2.
fn substitution(s: &str, groups: usize, path: &Path) -> Result<String> {
    let mut out = String::with_capacity(s.len() + 4);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some(d @ '0'..='9') => {
                    let n = d as usize - '0' as usize;
                    if n >= groups {
                        return Err(Error::invalid(
                            path.clone(),
                            format!("\\{n} names a group the pattern does not have"),
                        ));
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                _ => {
                    return Err(Error::invalid(
                        path.clone(),
                        "a backslash must be followed by a digit or a backslash",
                    ))
                }
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `direct_response`, its body at most `max_body` bytes
/// (`max_direct_response_body_size_bytes`).
pub(super) fn direct_response(
    d: &pb::DirectResponseAction,
    path: &Path,
    max_body: u32,
) -> Result<DirectResponse> {
    if !(200..600).contains(&d.status) {
        return Err(Error::invalid(
            path.field("status"),
            format!("{} is not in [200, 600)", d.status),
        ));
    }
    let body = match &d.body {
        None => None,
        Some(b) => {
            let bpath = path.field("body");
            let bytes = data_source(Some(b), &bpath)?;
            if bytes.len() > max_body as usize {
                return Err(Error::invalid(
                    bpath,
                    format!(
                        "{} bytes, over max_direct_response_body_size_bytes ({max_body})",
                        bytes.len()
                    ),
                ));
            }
            Some(Bytes::from(bytes))
        }
    };
    // RFC 9110 §15.3.5, §15.4.5: a 204 or 304 has no content. Envoy writes
    // the body anyway (an HTTP/2 client then sees a protocol error); we
    // send none.
    let body = body.filter(|b| !b.is_empty() && !matches!(d.status, 204 | 304));
    Ok(DirectResponse {
        status: d.status as u16,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re2_substitutions_become_the_regex_crates() {
        let p = Path::root();
        assert_eq!(substitution(r"/s/\2/\1", 3, &p).unwrap(), "/s/${2}/${1}");
        assert_eq!(substitution(r"a\\b$c", 1, &p).unwrap(), r"a\b$$c");
        assert!(substitution(r"\3", 3, &p).is_err());
        assert!(substitution(r"\x", 1, &p).is_err());
    }
}
