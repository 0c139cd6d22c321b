//! Route matching: virtual host by `:authority`, then the first matching route.
//!
//! Virtual-host selection follows Envoy's precedence: exact domain, then the
//! longest `*suffix`, then the longest `prefix*`, then `*`. Within a virtual
//! host, routes are tried in order and the first match wins.

use crate::config::{
    DomainMatcher, HeaderMatchKind, HeaderMatcher, PathMatch, QueryParamMatch, QueryParamMatcher,
    Route, RouteConfig, RouteMatch, VirtualHost,
};

/// What a route matcher may look at. Implemented by the shard over the h2
/// request; `header` returns the first value of a (lowercase) name.
pub trait RequestView {
    fn authority(&self) -> &str;
    /// `:path` including the query string.
    fn path(&self) -> &str;
    fn method(&self) -> &str;
    fn header(&self, name: &str) -> Option<&str>;
}

/// Selects the virtual host for `authority` (matched case-insensitively).
pub fn select_virtual_host<'a>(rc: &'a RouteConfig, authority: &str) -> Option<&'a VirtualHost> {
    // Lowercase without allocating for the common already-lowercase case.
    let lowered;
    let host = if authority.bytes().any(|b| b.is_ascii_uppercase()) {
        lowered = authority.to_ascii_lowercase();
        lowered.as_str()
    } else {
        authority
    };

    let mut best_suffix: Option<(&VirtualHost, usize)> = None;
    let mut best_prefix: Option<(&VirtualHost, usize)> = None;
    let mut any: Option<&VirtualHost> = None;
    for vh in &rc.virtual_hosts {
        for d in &vh.domains {
            match d {
                DomainMatcher::Exact(e) if e == host => return Some(vh),
                DomainMatcher::Exact(_) => {}
                // Envoy requires the wildcard to match at least one character;
                // the longest suffix (then prefix) wins.
                DomainMatcher::Suffix(s)
                    if host.len() > s.len()
                        && host.ends_with(s.as_str())
                        && best_suffix.is_none_or(|(_, l)| s.len() > l) =>
                {
                    best_suffix = Some((vh, s.len()));
                }
                DomainMatcher::Prefix(p)
                    if host.len() > p.len()
                        && host.starts_with(p.as_str())
                        && best_prefix.is_none_or(|(_, l)| p.len() > l) =>
                {
                    best_prefix = Some((vh, p.len()));
                }
                DomainMatcher::Any if any.is_none() => any = Some(vh),
                _ => {}
            }
        }
    }
    best_suffix.or(best_prefix).map(|(vh, _)| vh).or(any)
}

/// Returns the first route of `vh` that matches the request. `random` is
/// the request's random value, which `runtime_fraction` matches read.
pub fn select_route<'a, R: RequestView + ?Sized>(
    vh: &'a VirtualHost,
    req: &R,
    random: u64,
) -> Option<&'a Route> {
    vh.routes
        .iter()
        .find(|r| route_matches(&r.matcher, req, random))
}

/// Virtual host then route, in one call.
pub fn route_request<'a, R: RequestView + ?Sized>(
    rc: &'a RouteConfig,
    req: &R,
    random: u64,
) -> Option<&'a Route> {
    route_request_in(rc, req, random).map(|(_, r)| r)
}

/// Like [`route_request`], also returning the virtual host (whose
/// per-filter config the route's overrides).
pub fn route_request_in<'a, R: RequestView + ?Sized>(
    rc: &'a RouteConfig,
    req: &R,
    random: u64,
) -> Option<(&'a VirtualHost, &'a Route)> {
    let vh = select_virtual_host(rc, req.authority())?;
    select_route(vh, req, random).map(|r| (vh, r))
}

/// Where a route is in its table: its virtual host's position and its
/// own. A stream keeps this rather than a reference, so that it can find
/// its route again in the snapshot it holds (response-side filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteAt {
    pub vhost: u32,
    pub route: u32,
}

impl RouteAt {
    /// The route at this position of `rc`.
    pub fn get(self, rc: &RouteConfig) -> Option<(&VirtualHost, &Route)> {
        let vh = rc.virtual_hosts.get(self.vhost as usize)?;
        vh.routes.get(self.route as usize).map(|r| (vh, r))
    }
}

/// Like [`route_request_in`], also returning where the route is.
pub fn route_request_at<'a, R: RequestView + ?Sized>(
    rc: &'a RouteConfig,
    req: &R,
    random: u64,
) -> Option<(RouteAt, &'a Route)> {
    let vh = select_virtual_host(rc, req.authority())?;
    let (route, r) = vh
        .routes
        .iter()
        .enumerate()
        .find(|(_, r)| route_matches(&r.matcher, req, random))?;
    let at = RouteAt {
        vhost: position_of(&rc.virtual_hosts, vh) as u32,
        route: route as u32,
    };
    Some((at, r))
}

/// The position of `item`, an element of `items`, found from its address
/// (no scan).
fn position_of<T>(items: &[T], item: &T) -> usize {
    let size = std::mem::size_of::<T>().max(1);
    let at = (item as *const T as usize - items.as_ptr() as usize) / size;
    debug_assert!(items.get(at).is_some_and(|i| std::ptr::eq(i, item)));
    at
}

fn route_matches<R: RequestView + ?Sized>(m: &RouteMatch, req: &R, random: u64) -> bool {
    let full = req.path();
    // Path matchers ignore the query string, as Envoy does.
    let path = full.split_once('?').map_or(full, |(p, _)| p);
    let starts = |p: &str| match m.case_sensitive {
        true => path.starts_with(p),
        false => path
            .get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p)),
    };
    let connect = req.method() == "CONNECT";
    let path_ok = match &m.path {
        PathMatch::Connect => connect,
        _ if connect => false,
        PathMatch::Prefix(p) => starts(p),
        PathMatch::SeparatedPrefix(p) => {
            starts(p) && matches!(path.as_bytes().get(p.len()), None | Some(b'/'))
        }
        PathMatch::Path(p) if m.case_sensitive => path == p,
        PathMatch::Path(p) => path.eq_ignore_ascii_case(p),
        PathMatch::Regex(re) => re.is_match(path),
    };
    path_ok
        && m.headers.iter().all(|h| header_matches(h, req))
        && m.query.iter().all(|q| query_matches(q, full))
        && (!m.grpc || req.header("content-type").is_some_and(grpc_route_content_type))
        // Last: it is the only one that is not a property of the request.
        && m.fraction.is_none_or(|f| f.includes(random))
}

/// Whether a `grpc` route match takes this `content-type`: exactly
/// `application/grpc` or `application/grpc+…`, case-sensitive, as Envoy
/// 1.40 matches (`application/grpc;…` does not, though the codecs treat
/// it as gRPC).
fn grpc_route_content_type(v: &str) -> bool {
    v == "application/grpc" || v.starts_with("application/grpc+")
}

/// The first value of query parameter `name` in `path` (after its `?`,
/// a fragment left off): `a=1` gives "1", a bare `a` gives "", as Envoy
/// parses it; nothing is percent-decoded. Route matchers and hash
/// policies read parameters through this one function.
pub fn query_value<'a>(path: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = path.iter().position(|&b| b == b'?')?;
    let query = &path[q + 1..];
    let query = match query.iter().position(|&b| b == b'#') {
        Some(f) => &query[..f],
        None => query,
    };
    query.split(|&b| b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(e) => (&pair[..e], &pair[e + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        (k == name).then_some(v)
    })
}

fn query_matches(q: &QueryParamMatcher, path: &str) -> bool {
    // Split at ASCII bytes, the value is as much UTF-8 as the path.
    let value = query_value(path.as_bytes(), q.name.as_bytes())
        .map(|v| std::str::from_utf8(v).unwrap_or_default());
    match &q.kind {
        QueryParamMatch::Present(want) => value.is_some() == *want,
        QueryParamMatch::Value(kind) => value.is_some_and(|v| kind.matches(v)),
    }
}

fn header_matches<R: RequestView + ?Sized>(h: &HeaderMatcher, req: &R) -> bool {
    let value = match h.name.as_str() {
        ":authority" | "host" => Some(req.authority()),
        ":path" => Some(req.path()),
        ":method" => Some(req.method()),
        name => req.header(name),
    };
    header_value_matches(h, value)
}

/// Whether `h` matches a field whose (first) value is `value` (`None`:
/// absent), as Envoy's header matchers decide.
pub fn header_value_matches(h: &HeaderMatcher, value: Option<&str>) -> bool {
    let matched = match (&h.kind, value) {
        (HeaderMatchKind::Present(want), v) => v.is_some() == *want,
        (_, None) => false,
        (kind, Some(v)) => kind.matches(v),
    };
    // Envoy: an absent header never matches, even when inverted (except
    // present_match, whose inversion is handled like any other result).
    if value.is_none() && !matches!(h.kind, HeaderMatchKind::Present(_)) {
        return false;
    }
    matched != h.invert
}

/// Applies a `prefix_rewrite` (`new_prefix`) to `path` (query included)
/// for a route matched by `matcher`: the matched prefix is replaced, or,
/// for a `path` or `safe_regex` match, the whole path (its query kept).
/// Plain concatenation, as Envoy: `/old` → `/` makes `/old/x` into `//x`.
pub fn rewrite_path(matcher: &RouteMatch, new_prefix: &str, path: &str) -> String {
    let rest = match &matcher.path {
        PathMatch::Prefix(p) | PathMatch::SeparatedPrefix(p) => path.get(p.len()..).unwrap_or(""),
        PathMatch::Path(_) | PathMatch::Regex(_) | PathMatch::Connect => {
            path.find('?').map_or("", |i| &path[i..])
        }
    };
    let mut out = String::with_capacity(new_prefix.len() + rest.len());
    out.push_str(new_prefix);
    out.push_str(rest);
    out
}

/// Applies a `regex_rewrite` to `path`: every match of `pattern` in the
/// path without its query replaced by `substitution` (regex crate
/// syntax), the query kept after it, as Envoy does.
pub fn regex_rewrite_path(pattern: &regex::Regex, substitution: &str, path: &str) -> String {
    let (bare, query) = path.split_at(path.find('?').unwrap_or(path.len()));
    let mut out = pattern.replace_all(bare, substitution).into_owned();
    out.push_str(query);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClusterTarget, ForwardAction, RouteAction};
    use regex::Regex;

    struct Req<'a> {
        authority: &'a str,
        path: &'a str,
        method: &'a str,
        headers: Vec<(&'a str, &'a str)>,
    }

    impl RequestView for Req<'_> {
        fn authority(&self) -> &str {
            self.authority
        }
        fn path(&self) -> &str {
            self.path
        }
        fn method(&self) -> &str {
            self.method
        }
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
        }
    }

    fn req<'a>(authority: &'a str, path: &'a str) -> Req<'a> {
        Req {
            authority,
            path,
            method: "GET",
            headers: vec![],
        }
    }

    fn route(name: &str, path: PathMatch, headers: Vec<HeaderMatcher>) -> Route {
        Route {
            name: name.into(),
            matcher: RouteMatch {
                headers,
                ..RouteMatch::new(path)
            },
            action: RouteAction::Forward(ForwardAction {
                target: ClusterTarget::Cluster(name.into()),
                timeout: None,
                prefix_rewrite: None,
                regex_rewrite: None,
                host_rewrite: None,
                append_x_forwarded_host: false,
                cluster_not_found_status: 503,
                hash_policy: Vec::new(),
                retry_policy: None,
                hedge_on_per_try_timeout: false,
                attempt_count: (false, false),
                upgrades: Vec::new(),
                mirrors: Vec::new(),
                per_request_buffer_limit: None,
                max_grpc_timeout: None,
                grpc_timeout_offset: None,
            }),
            headers: Default::default(),
            decorator: None,
            per_filter: Default::default(),
        }
    }

    fn vh(name: &str, domains: Vec<DomainMatcher>) -> VirtualHost {
        VirtualHost {
            name: name.into(),
            domains,
            routes: vec![route(name, PathMatch::Prefix("/".into()), vec![])],
            per_filter: Default::default(),
        }
    }

    fn rc() -> RouteConfig {
        use DomainMatcher::*;
        RouteConfig {
            name: "rc".into(),
            virtual_hosts: vec![
                vh("any", vec![Any]),
                vh("prefix", vec![Prefix("api.".into())]),
                vh("suffix", vec![Suffix(".example.com".into())]),
                vh("longsuffix", vec![Suffix(".b.example.com".into())]),
                vh("exact", vec![Exact("a.example.com".into())]),
            ],
        }
    }

    #[test]
    fn a_route_is_found_again_at_its_position() {
        let mut rc = rc();
        rc.virtual_hosts[2]
            .routes
            .insert(0, route("api", PathMatch::Prefix("/api".into()), vec![]));
        let req = |authority, path| Req {
            authority,
            path,
            method: "GET",
            headers: vec![],
        };
        for (authority, path, vhost, route, name) in [
            ("x.example.com", "/api/v1", 2, 0, "api"),
            ("x.example.com", "/", 2, 1, "suffix"),
            ("a.example.com", "/", 4, 0, "exact"),
            ("other", "/", 0, 0, "any"),
        ] {
            let (at, r) = route_request_at(&rc, &req(authority, path), 0).expect("routed");
            assert_eq!((at.vhost, at.route, r.name.as_str()), (vhost, route, name));
            let (vh, again) = at.get(&rc).expect("there");
            assert!(std::ptr::eq(again, r));
            assert_eq!(
                vh.routes.len(),
                rc.virtual_hosts[vhost as usize].routes.len()
            );
        }
        let gone = RouteAt { vhost: 9, route: 0 };
        assert!(gone.get(&rc).is_none());
    }

    #[test]
    fn virtual_host_precedence_is_exact_suffix_prefix_any() {
        let rc = rc();
        let pick = |a: &str| select_virtual_host(&rc, a).map(|v| v.name.as_str());
        assert_eq!(pick("a.example.com"), Some("exact"));
        assert_eq!(pick("A.Example.COM"), Some("exact"));
        assert_eq!(pick("x.example.com"), Some("suffix"));
        assert_eq!(pick("x.b.example.com"), Some("longsuffix"));
        assert_eq!(
            pick("api.example.com"),
            Some("suffix"),
            "suffix beats prefix"
        );
        assert_eq!(pick("api.foo"), Some("prefix"));
        assert_eq!(pick("other"), Some("any"));
        assert_eq!(pick(".example.com"), Some("any"), "wildcard needs one char");
    }

    #[test]
    fn no_virtual_host_without_catch_all() {
        let rc = RouteConfig {
            name: "rc".into(),
            virtual_hosts: vec![vh("exact", vec![DomainMatcher::Exact("a".into())])],
        };
        assert!(route_request(&rc, &req("b", "/"), 0).is_none());
    }

    #[test]
    fn connect_requests_match_connect_matchers_only() {
        let connect = Req {
            method: "CONNECT",
            // What a view of a head without `:path` reads.
            ..req("db:5432", "/")
        };
        let c = route("c", PathMatch::Connect, vec![]);
        assert!(route_matches(&c.matcher, &connect, 0));
        assert!(!route_matches(&c.matcher, &req("h", "/"), 0));
        for other in [
            PathMatch::Prefix("/".into()),
            PathMatch::Regex(Regex::new("^(?:.*)$").unwrap()),
        ] {
            let r = route("r", other, vec![]);
            assert!(!route_matches(&r.matcher, &connect, 0));
        }
    }

    #[test]
    fn path_matchers_ignore_query_and_respect_case() {
        let mut r = route("p", PathMatch::Path("/exact".into()), vec![]);
        assert!(route_matches(&r.matcher, &req("h", "/exact?x=1"), 0));
        assert!(!route_matches(&r.matcher, &req("h", "/EXACT"), 0));
        r.matcher.case_sensitive = false;
        assert!(route_matches(&r.matcher, &req("h", "/EXACT"), 0));

        let p = route("p", PathMatch::Prefix("/api".into()), vec![]);
        assert!(route_matches(&p.matcher, &req("h", "/api/v1"), 0));
        assert!(!route_matches(&p.matcher, &req("h", "/ap"), 0));

        let re = route(
            "r",
            PathMatch::Regex(Regex::new("^(?:/v[0-9]+/.*)$").unwrap()),
            vec![],
        );
        assert!(route_matches(&re.matcher, &req("h", "/v2/x?q"), 0));
        assert!(!route_matches(&re.matcher, &req("h", "/x/v2/x"), 0));
    }

    #[test]
    fn header_matchers() {
        let hm = |kind, invert| HeaderMatcher {
            name: "x-env".into(),
            kind,
            invert,
        };
        let mut r = req("h", "/");
        r.headers.push(("x-env", "canary-7"));
        let check = |kind, invert| {
            let rt = route("x", PathMatch::Prefix("/".into()), vec![hm(kind, invert)]);
            route_matches(&rt.matcher, &r, 0)
        };
        assert!(check(HeaderMatchKind::Exact("canary-7".into()), false));
        assert!(!check(HeaderMatchKind::Exact("canary".into()), false));
        assert!(check(HeaderMatchKind::Exact("canary".into()), true));
        assert!(check(HeaderMatchKind::Prefix("can".into()), false));
        assert!(check(HeaderMatchKind::Suffix("-7".into()), false));
        assert!(check(HeaderMatchKind::Contains("ary".into()), false));
        assert!(check(
            HeaderMatchKind::Regex(Regex::new("^canary-[0-9]$").unwrap()),
            false
        ));
        assert!(check(HeaderMatchKind::Present(true), false));
        assert!(!check(HeaderMatchKind::Range { start: 0, end: 10 }, false));

        let absent = req("h", "/");
        let rt = route(
            "x",
            PathMatch::Prefix("/".into()),
            vec![hm(HeaderMatchKind::Exact("a".into()), true)],
        );
        assert!(
            !route_matches(&rt.matcher, &absent, 0),
            "absent header never matches"
        );
        let rt = route(
            "x",
            PathMatch::Prefix("/".into()),
            vec![hm(HeaderMatchKind::Present(false), false)],
        );
        assert!(route_matches(&rt.matcher, &absent, 0));

        let m = HeaderMatcher {
            name: ":method".into(),
            kind: HeaderMatchKind::Exact("POST".into()),
            invert: false,
        };
        let rt = route("x", PathMatch::Prefix("/".into()), vec![m]);
        assert!(!route_matches(&rt.matcher, &absent, 0));
    }

    #[test]
    fn range_match_is_half_open() {
        let mut r = req("h", "/");
        r.headers.push(("x-n", "10"));
        let rt = |start, end| {
            route(
                "x",
                PathMatch::Prefix("/".into()),
                vec![HeaderMatcher {
                    name: "x-n".into(),
                    kind: HeaderMatchKind::Range { start, end },
                    invert: false,
                }],
            )
        };
        assert!(route_matches(&rt(10, 11).matcher, &r, 0));
        assert!(!route_matches(&rt(0, 10).matcher, &r, 0));
    }

    #[test]
    fn regex_rewrite_replaces_in_the_path_and_keeps_the_query() {
        let re = Regex::new("^/service/([^/]+)(/.*)$").unwrap();
        assert_eq!(
            regex_rewrite_path(&re, "${2}/instance/${1}", "/service/foo/v1/api?x=1"),
            "/v1/api/instance/foo?x=1"
        );
        // No match: the path as it was.
        assert_eq!(regex_rewrite_path(&re, "/x", "/other?q"), "/other?q");
        let all = Regex::new("one").unwrap();
        assert_eq!(
            regex_rewrite_path(&all, "two", "/xxx/one/one?one"),
            "/xxx/two/two?one"
        );
    }

    #[test]
    fn prefix_rewrite_keeps_the_rest() {
        let r = route("x", PathMatch::Prefix("/old/".into()), vec![]);
        assert_eq!(
            rewrite_path(&r.matcher, "/new/", "/old/a?b=c"),
            "/new/a?b=c"
        );
        assert_eq!(rewrite_path(&r.matcher, "/", "/old/"), "/");
        let p = route("x", PathMatch::Path("/a".into()), vec![]);
        assert_eq!(rewrite_path(&p.matcher, "/b", "/a?q"), "/b?q");
    }

    #[test]
    fn path_separated_prefix_needs_the_end_or_a_slash_after_it() {
        let mut r = route("s", PathMatch::SeparatedPrefix("/api".into()), vec![]);
        for (path, want) in [
            ("/api", true),
            ("/api/", true),
            ("/api/v1", true),
            ("/api?x=1", true),
            ("/apix", false),
            ("/API/v1", false),
            ("/ap", false),
        ] {
            assert_eq!(
                route_matches(&r.matcher, &req("h", path), 0),
                want,
                "{path}"
            );
        }
        r.matcher.case_sensitive = false;
        assert!(route_matches(&r.matcher, &req("h", "/API/v1"), 0));
    }

    #[test]
    fn query_values_are_the_first_as_written() {
        for (query, name, want) in [
            ("a=1", "a", Some("1")),
            ("a=1&a=2", "a", Some("1")),
            ("b=1&a=2", "a", Some("2")),
            ("A=1", "a", None),
            ("a=%31", "a", Some("%31")),
            ("a", "a", Some("")),
            ("a=", "a", Some("")),
            ("a=1=2", "a", Some("1=2")),
            ("x=1#a=2", "a", None),
            ("a=1#frag", "a", Some("1")),
            ("&&a=3", "a", Some("3")),
            ("", "a", None),
        ] {
            assert_eq!(query_value(b"/p", b"a"), None);
            let path = format!("/p?{query}");
            let got = query_value(path.as_bytes(), name.as_bytes());
            assert_eq!(got, want.map(str::as_bytes), "{query:?} {name}");
        }
    }

    #[test]
    fn query_parameter_grpc_and_fraction_matchers() {
        let mut r = route("q", PathMatch::Prefix("/".into()), vec![]);
        r.matcher.query = vec![
            QueryParamMatcher {
                name: "v".into(),
                kind: QueryParamMatch::Value(HeaderMatchKind::Exact("1".into())),
            },
            QueryParamMatcher {
                name: "debug".into(),
                kind: QueryParamMatch::Present(false),
            },
        ];
        let hit = |m: &RouteMatch, path: &str| route_matches(m, &req("h", path), 0);
        assert!(hit(&r.matcher, "/x?v=1"));
        assert!(hit(&r.matcher, "/x?w=0&v=1"));
        assert!(!hit(&r.matcher, "/x?v=2&v=1"), "the first value counts");
        assert!(!hit(&r.matcher, "/x?v=1&debug"), "both must match");
        assert!(!hit(&r.matcher, "/x"));

        let mut g = route("g", PathMatch::Prefix("/".into()), vec![]);
        g.matcher.grpc = true;
        let with_type = |ct: &'static str| {
            let mut q = req("h", "/svc/M");
            q.headers.push(("content-type", ct));
            route_matches(&g.matcher, &q, 0)
        };
        assert!(with_type("application/grpc"));
        assert!(with_type("application/grpc+proto"));
        // Envoy 1.40, side by side: case-sensitive, no parameters.
        assert!(!with_type("application/grpc;charset=utf-8"));
        assert!(!with_type("Application/GRPC"));
        assert!(!with_type("application/grpcfoo"));
        assert!(!with_type("application/grpc-web"));
        assert!(!with_type("application/json"));
        assert!(!route_matches(&g.matcher, &req("h", "/svc/M"), 0));

        let mut f = route("f", PathMatch::Prefix("/".into()), vec![]);
        f.matcher.fraction = Some(crate::config::Fraction {
            numerator: 25,
            denominator: 100,
        });
        let taken = (0..1000u64)
            .filter(|n| route_matches(&f.matcher, &req("h", "/"), *n))
            .count();
        assert_eq!(taken, 250, "random % 100 < 25");
        assert!(route_matches(&f.matcher, &req("h", "/"), 124));
        assert!(!route_matches(&f.matcher, &req("h", "/"), 125));
    }
}
