//! `engine::route::route_request` on a realistic route table: 50 virtual
//! hosts (exact, `*suffix` and `prefix*` domains, no catch-all) of 20 routes
//! each (prefix, path and regex matchers, some with header matchers).
//!
//! Requests are real `http::request::Parts` read through a `RequestView`
//! adapter (the data path reads its `h2wire` header list through one of
//! its own, `HeadView` in shards/src/wire/stream.rs).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use engine::route::{route_request, RequestView};
use engine::{
    ClusterTarget, DomainMatcher, ForwardAction, HeaderMatchKind, HeaderMatcher, PathMatch, Route,
    RouteAction, RouteConfig, RouteMatch, VirtualHost,
};
use http::request::Parts;
use regex::Regex;

const VHOSTS: usize = 50;
const ROUTES: usize = 20;

/// A `RequestView` over `http` request parts.
struct PartsView<'a>(&'a Parts);

impl RequestView for PartsView<'_> {
    fn authority(&self) -> &str {
        self.0
            .uri
            .authority()
            .map(http::uri::Authority::as_str)
            .or_else(|| self.0.headers.get("host").and_then(|v| v.to_str().ok()))
            .unwrap_or("")
    }
    fn path(&self) -> &str {
        self.0
            .uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str)
    }
    fn method(&self) -> &str {
        self.0.method.as_str()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.0.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

fn hm(name: &str, kind: HeaderMatchKind) -> HeaderMatcher {
    HeaderMatcher {
        name: name.into(),
        kind,
        invert: false,
    }
}

/// Route `r` of virtual host `v`. The mix repeats every 5 routes:
/// prefix, exact path, regex, prefix + header matchers, case-insensitive
/// prefix with a method matcher. None is a catch-all, so a path outside the
/// table matches nothing after all 20 routes were tried.
fn route(v: usize, r: usize) -> Route {
    let (path, case_sensitive, headers) = match r % 5 {
        0 => (
            PathMatch::Prefix(format!("/api/v{r}/svc{v}/")),
            true,
            vec![],
        ),
        1 => (PathMatch::Path(format!("/svc{v}/status/{r}")), true, vec![]),
        2 => (
            PathMatch::Regex(
                Regex::new(&format!("^(?:/users/[0-9]+/r{r}/orders/[0-9a-f]{{8}})$")).unwrap(),
            ),
            true,
            vec![],
        ),
        3 => (
            PathMatch::Prefix(format!("/canary/{r}/")),
            true,
            vec![
                hm("x-env", HeaderMatchKind::Exact("canary".into())),
                hm("x-client-version", HeaderMatchKind::Prefix("2.".into())),
            ],
        ),
        _ => (
            PathMatch::Prefix(format!("/Upload/{r}/")),
            false,
            vec![
                hm(":method", HeaderMatchKind::Exact("POST".into())),
                hm(
                    "content-type",
                    HeaderMatchKind::Regex(Regex::new("^(?:application/(json|grpc).*)$").unwrap()),
                ),
            ],
        ),
    };
    Route {
        name: format!("vh{v}-r{r}"),
        matcher: RouteMatch {
            case_sensitive,
            headers,
            ..RouteMatch::new(path)
        },
        action: RouteAction::Forward(ForwardAction {
            target: ClusterTarget::Cluster(format!("cluster-{v}-{}", r % 4)),
            timeout: Some(Duration::from_secs(15)),
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

fn route_config() -> RouteConfig {
    let virtual_hosts = (0..VHOSTS)
        .map(|v| VirtualHost {
            name: format!("vh{v}"),
            domains: vec![
                DomainMatcher::Exact(format!("svc{v}.example.com")),
                DomainMatcher::Exact(format!("svc{v}.example.com:443")),
                DomainMatcher::Suffix(format!(".svc{v}.example.net")),
                DomainMatcher::Prefix(format!("svc{v}.internal.")),
            ],
            routes: (0..ROUTES).map(|r| route(v, r)).collect(),
            per_filter: Default::default(),
        })
        .collect();
    RouteConfig {
        name: "bench".into(),
        virtual_hosts,
    }
}

fn request(method: &str, authority: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("http://{authority}{path}"))
        .header("user-agent", "bench/1.0")
        .header("accept", "*/*")
        .header("accept-encoding", "gzip, br")
        .header("x-request-id", "0b6f8c3e-2f7b-4e0e-9a53-4c1d5c7e2a10");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn bench(c: &mut Criterion) {
    let rc = route_config();
    let last = VHOSTS - 1;
    // (case, request, expected route name or None)
    let cases: Vec<(&str, Parts, Option<String>)> = vec![
        (
            "early_vhost_first_route",
            request("GET", "svc0.example.com", "/api/v0/svc0/items?page=2", &[]),
            Some("vh0-r0".into()),
        ),
        (
            "late_vhost_last_route",
            request(
                "POST",
                &format!("svc{last}.example.com"),
                "/upload/19/blob",
                &[("content-type", "application/json")],
            ),
            Some(format!("vh{last}-r19")),
        ),
        (
            "suffix_vhost_regex_route",
            request(
                "GET",
                "eu.svc25.example.net",
                "/users/12345/r12/orders/deadbeef",
                &[],
            ),
            Some("vh25-r12".into()),
        ),
        (
            "prefix_vhost_header_route",
            request(
                "GET",
                "svc30.internal.corp",
                "/canary/13/x",
                &[("x-env", "canary"), ("x-client-version", "2.7.1")],
            ),
            Some("vh30-r13".into()),
        ),
        (
            "uppercase_authority",
            request("GET", "SVC40.Example.COM", "/svc40/status/11", &[]),
            Some("vh40-r11".into()),
        ),
        (
            "no_match_route",
            request(
                "GET",
                &format!("svc{last}.example.com"),
                "/nothing/here",
                &[],
            ),
            None,
        ),
        (
            "no_match_vhost",
            request("GET", "unknown.example.org", "/api/v0/svc0/", &[]),
            None,
        ),
    ];

    let mut g = c.benchmark_group("route_match");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50);
    for (name, parts, want) in &cases {
        let view = PartsView(parts);
        let got = route_request(&rc, &view, 0).map(|r| r.name.clone());
        assert_eq!(&got, want, "case {name}: wrong route");
        g.bench_function(*name, |b| {
            b.iter(|| route_request(black_box(&rc), black_box(&view), 0).is_some())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
