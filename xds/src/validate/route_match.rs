//! A route's `match` → `engine::RouteMatch`: the path matcher, header and query-parameter matchers, `grpc` and `runtime_fraction`.

use engine::{
    HeaderMatchKind, HeaderMatcher, PathMatch, QueryParamMatch, QueryParamMatcher, RouteMatch,
};
use regex::Regex;

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as pb;
use crate::pb::envoy::r#type::matcher::v3 as matcher;

pub(super) fn route_match(m: &pb::RouteMatch, path: &Path) -> Result<RouteMatch> {
    use pb::route_match::PathSpecifier as P;
    reject_set!(path, m, tls_context, dynamic_metadata);
    let path_match = match &m.path_specifier {
        Some(P::Prefix(p)) => PathMatch::Prefix(p.clone()),
        Some(P::Path(p)) => PathMatch::Path(p.clone()),
        Some(P::PathSeparatedPrefix(p)) => {
            // Envoy's pattern `^[^?#]+[^?#/]$`.
            let bad = p.len() < 2 || p.contains(['?', '#']) || p.ends_with('/');
            if bad {
                return Err(Error::invalid(
                    path.field("path_separated_prefix"),
                    format!("{p:?}: at least 2 characters, without ? or #, not ending in /"),
                ));
            }
            PathMatch::SeparatedPrefix(p.clone())
        }
        Some(P::SafeRegex(r)) => {
            PathMatch::Regex(regex(r, &path.field("safe_regex"), "^(?:", ")$")?)
        }
        Some(P::ConnectMatcher(_)) => PathMatch::Connect,
        Some(P::PathMatchPolicy(_)) => {
            return Err(Error::unsupported(path.field("path_match_policy")))
        }
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of prefix, path or safe_regex is required",
            ))
        }
    };
    let headers = m
        .headers
        .iter()
        .enumerate()
        .map(|(i, h)| header_matcher(h, &path.field("headers").index(i)))
        .collect::<Result<_>>()?;
    let query = m
        .query_parameters
        .iter()
        .enumerate()
        .map(|(i, q)| query_matcher(q, &path.field("query_parameters").index(i)))
        .collect::<Result<_>>()?;
    let fraction = match &m.runtime_fraction {
        Some(f) => Some(super::common::runtime_fraction(
            f,
            &path.field("runtime_fraction"),
        )?),
        None => None,
    };
    Ok(RouteMatch {
        path: path_match,
        case_sensitive: m.case_sensitive.unwrap_or(true),
        headers,
        query,
        grpc: m.grpc.is_some(),
        fraction,
    })
}

fn query_matcher(q: &pb::QueryParameterMatcher, path: &Path) -> Result<QueryParamMatcher> {
    use pb::query_parameter_matcher::QueryParameterMatchSpecifier as S;
    if q.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    let kind = match &q.query_parameter_match_specifier {
        Some(S::StringMatch(sm)) => {
            QueryParamMatch::Value(string_matcher(sm, &path.field("string_match"))?)
        }
        Some(S::PresentMatch(p)) => QueryParamMatch::Present(*p),
        // Envoy: a name alone matches on presence.
        None => QueryParamMatch::Present(true),
    };
    Ok(QueryParamMatcher {
        name: q.name.clone(),
        kind,
    })
}

/// Compiles `RegexMatcher.regex` wrapped in `open`/`close` (anchors, flags).
pub(super) fn regex(
    r: &matcher::RegexMatcher,
    path: &Path,
    open: &str,
    close: &str,
) -> Result<Regex> {
    // `google_re2` (and its deprecated max_program_size) only picks Envoy's
    // engine; the regex crate accepts the same RE2 syntax.
    let rpath = path.field("regex");
    if r.regex.is_empty() {
        return Err(Error::invalid(rpath, "required"));
    }
    compile(&format!("{open}{}{close}", r.regex), &r.regex, &rpath)
}

fn compile(pattern: &str, shown: &str, path: &Path) -> Result<Regex> {
    Regex::new(pattern).map_err(|e| {
        // regex's Display is a multi-line diagram; the last line says why.
        let e = e.to_string();
        let why = e
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("error: ");
        Error::invalid(path.clone(), format!("invalid regex {shown:?}: {why}"))
    })
}

/// Header names that are HTTP/2 pseudo-headers we can match on.
const PSEUDO_HEADERS: [&str; 4] = [":authority", ":path", ":method", ":scheme"];

pub(super) fn header_matcher(h: &pb::HeaderMatcher, path: &Path) -> Result<HeaderMatcher> {
    let name = h.name.to_ascii_lowercase();
    if name.starts_with(':') && !PSEUDO_HEADERS.contains(&name.as_str()) {
        return Err(Error::unsupported_value(
            path.field("name"),
            format!("matching on {name:?}"),
        ));
    }
    any_header_matcher(h, path)
}

/// A `HeaderMatcher` on any field, pseudo-headers included (a retry
/// policy's, which match `:status` and `:method`).
pub(super) fn any_header_matcher(h: &pb::HeaderMatcher, path: &Path) -> Result<HeaderMatcher> {
    use pb::header_matcher::HeaderMatchSpecifier as S;
    reject_set!(path, h, treat_missing_header_as_empty);
    let name = h.name.to_ascii_lowercase();
    if name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    let kind = match &h.header_match_specifier {
        Some(S::ExactMatch(s)) => HeaderMatchKind::Exact(s.clone()),
        Some(S::PrefixMatch(s)) => HeaderMatchKind::Prefix(s.clone()),
        Some(S::SuffixMatch(s)) => HeaderMatchKind::Suffix(s.clone()),
        Some(S::ContainsMatch(s)) => HeaderMatchKind::Contains(s.clone()),
        Some(S::SafeRegexMatch(r)) => {
            HeaderMatchKind::Regex(regex(r, &path.field("safe_regex_match"), "^(?:", ")$")?)
        }
        Some(S::RangeMatch(r)) => HeaderMatchKind::Range {
            start: r.start,
            end: r.end,
        },
        Some(S::PresentMatch(p)) => HeaderMatchKind::Present(*p),
        Some(S::StringMatch(sm)) => string_matcher(sm, &path.field("string_match"))?,
        // Envoy: a matcher with only a name matches on presence.
        None => HeaderMatchKind::Present(true),
    };
    Ok(HeaderMatcher {
        name,
        kind,
        invert: h.invert_match,
    })
}

/// `StringMatcher` → header match; `ignore_case` becomes a `(?i)` regex
/// since the engine's literal matchers are case-sensitive.
pub(super) fn string_matcher(sm: &matcher::StringMatcher, path: &Path) -> Result<HeaderMatchKind> {
    use matcher::string_matcher::MatchPattern as M;
    let nonempty = |s: &str, field: &str| {
        if s.is_empty() {
            Err(Error::invalid(path.field(field), "must not be empty"))
        } else {
            Ok(s.to_owned())
        }
    };
    let (literal, field, open, close) = match &sm.match_pattern {
        // Envoy: ignore_case has no effect on safe_regex.
        Some(M::SafeRegex(r)) => {
            return Ok(HeaderMatchKind::Regex(regex(
                r,
                &path.field("safe_regex"),
                "^(?:",
                ")$",
            )?))
        }
        Some(M::Custom(_)) => return Err(Error::unsupported(path.field("custom"))),
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of exact, prefix, suffix, safe_regex or contains is required",
            ))
        }
        Some(M::Exact(s)) => (s.clone(), "exact", "^(?:", ")$"),
        Some(M::Prefix(s)) => (nonempty(s, "prefix")?, "prefix", "^(?:", ")"),
        Some(M::Suffix(s)) => (nonempty(s, "suffix")?, "suffix", "(?:", ")$"),
        Some(M::Contains(s)) => (nonempty(s, "contains")?, "contains", "(?:", ")"),
    };
    if sm.ignore_case {
        let pattern = format!("(?i){open}{}{close}", regex::escape(&literal));
        return Ok(HeaderMatchKind::Regex(compile(
            &pattern,
            &literal,
            &path.field(field),
        )?));
    }
    Ok(match field {
        "exact" => HeaderMatchKind::Exact(literal),
        "prefix" => HeaderMatchKind::Prefix(literal),
        "suffix" => HeaderMatchKind::Suffix(literal),
        _ => HeaderMatchKind::Contains(literal),
    })
}
