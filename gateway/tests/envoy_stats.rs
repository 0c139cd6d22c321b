//! `/stats/prometheus` as Envoy writes it: the cluster, connection-manager, listener and server series under Envoy's names and tag-extracted labels, counted as Envoy counts them (final answers by code, retried ones apart, the gateway's own 503s charged to their cluster, latency histograms with Envoy's buckets), and its `filter` and `usedonly` queries.

mod support;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

fn answer(path: &str) -> H1Answer {
    match path {
        "/ok" => H1Answer::ok("ok"),
        _ => H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nfail"),
    }
}

/// The page's series: `name{labels}` → value.
fn series(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn envoys_series_count_what_envoy_counts() {
    let be = H1Backend::start(|r| answer(&r.target));
    // Nothing listens there.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { path: /ok }
                route: { cluster: backend }
              - match: { path: /fail }
                route: { cluster: backend }
              - match: { path: /dead }
                route: { cluster: dead }
              - match: { path: /retry }
                route: { cluster: backend, retry_policy: { retry_on: 5xx, num_retries: 1 } }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h1_cluster("backend", be.addr()),
        support::yaml::h1_cluster("dead", dead)
    );
    let bootstrap = support::yaml::filters_bootstrap("", "", routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr: SocketAddr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    for (path, n, status) in [
        ("/ok", 3, 200),
        ("/fail", 2, 503),
        ("/dead", 1, 503),
        ("/retry", 1, 503),
        ("/nothing", 1, 404),
    ] {
        for _ in 0..n {
            assert_eq!(
                h1_get(addr, "example.com", path, "").status,
                status,
                "{path}"
            );
        }
    }
    let (status, text) = admin_get(admin, "/stats/prometheus");
    assert_eq!(status, 200);
    assert!(!text.contains("# HELP"), "Envoy writes no HELP lines");
    let s = series(&text);
    let at = |k: &str| *s.get(k).unwrap_or_else(|| panic!("no {k} in:\n{text}"));
    let listener = format!("127.0.0.1_{}", addr.port());
    for (k, v) in [
        ("envoy_cluster_upstream_rq{envoy_response_code=\"200\",envoy_cluster_name=\"backend\"}", 3.0),
        // The final answers: /fail twice, /retry's last.
        ("envoy_cluster_upstream_rq{envoy_response_code=\"503\",envoy_cluster_name=\"backend\"}", 3.0),
        ("envoy_cluster_upstream_rq_xx{envoy_response_code_class=\"5\",envoy_cluster_name=\"backend\"}", 3.0),
        ("envoy_cluster_upstream_rq_completed{envoy_cluster_name=\"backend\"}", 6.0),
        // Attempts: one more for the retry.
        ("envoy_cluster_upstream_rq_total{envoy_cluster_name=\"backend\"}", 7.0),
        ("envoy_cluster_retry_upstream_rq{envoy_response_code=\"503\",envoy_cluster_name=\"backend\"}", 1.0),
        ("envoy_cluster_upstream_rq_retry{envoy_cluster_name=\"backend\"}", 1.0),
        ("envoy_cluster_upstream_rq_retry_limit_exceeded{envoy_cluster_name=\"backend\"}", 1.0),
        // The gateway's own 503 for a refused connection is the cluster's.
        ("envoy_cluster_upstream_rq{envoy_response_code=\"503\",envoy_cluster_name=\"dead\"}", 1.0),
        ("envoy_cluster_upstream_cx_connect_fail{envoy_cluster_name=\"dead\"}", 1.0),
        ("envoy_cluster_upstream_cx_total{envoy_cluster_name=\"dead\"}", 1.0),
        // A refused connect is a connection the remote ended, as Envoy's.
        ("envoy_cluster_upstream_cx_destroy{envoy_cluster_name=\"dead\"}", 1.0),
        ("envoy_cluster_upstream_cx_destroy_remote{envoy_cluster_name=\"dead\"}", 1.0),
        ("envoy_cluster_upstream_cx_destroy_with_active_rq{envoy_cluster_name=\"dead\"}", 0.0),
        ("envoy_cluster_upstream_rq_time_count{envoy_cluster_name=\"backend\"}", 6.0),
        ("envoy_cluster_upstream_rq_time_count{envoy_cluster_name=\"dead\"}", 0.0),
        ("envoy_cluster_membership_total{envoy_cluster_name=\"backend\"}", 1.0),
        ("envoy_cluster_membership_healthy{envoy_cluster_name=\"backend\"}", 1.0),
        ("envoy_http_downstream_rq_total{envoy_http_conn_manager_prefix=\"ingress\"}", 8.0),
        ("envoy_http_downstream_rq_completed{envoy_http_conn_manager_prefix=\"ingress\"}", 8.0),
        ("envoy_http_downstream_rq_xx{envoy_response_code_class=\"2\",envoy_http_conn_manager_prefix=\"ingress\"}", 3.0),
        ("envoy_http_downstream_rq_xx{envoy_response_code_class=\"4\",envoy_http_conn_manager_prefix=\"ingress\"}", 1.0),
        ("envoy_http_downstream_rq_xx{envoy_response_code_class=\"5\",envoy_http_conn_manager_prefix=\"ingress\"}", 4.0),
        ("envoy_http_downstream_rq_xx{envoy_response_code_class=\"1\",envoy_http_conn_manager_prefix=\"ingress\"}", 0.0),
        ("envoy_http_no_route{envoy_http_conn_manager_prefix=\"ingress\"}", 1.0),
        ("envoy_http_downstream_rq_active{envoy_http_conn_manager_prefix=\"ingress\"}", 0.0),
        ("envoy_http_downstream_rq_time_count{envoy_http_conn_manager_prefix=\"ingress\"}", 8.0),
        ("envoy_server_live{}", 1.0),
        ("envoy_server_concurrency{}", 1.0),
        // No certificate anywhere: Envoy's "never".
        ("envoy_server_days_until_first_cert_expiring{}", 4294967295.0),
    ] {
        assert_eq!(at(k), v, "{k}");
    }
    // No detector, no outlier series (Envoy makes them with the detector).
    assert!(!text.contains("envoy_cluster_outlier_detection"), "{text}");
    // One connection per request (the client closes each).
    let cx = format!("envoy_listener_downstream_cx_total{{envoy_listener_address=\"{listener}\"}}");
    assert_eq!(at(&cx), 8.0);
    // Per data shard (Envoy's workers; one here), the worker's label first.
    let l = format!("envoy_listener_address=\"{listener}\"");
    for (k, v) in [
        (format!("envoy_listener_worker_downstream_cx_total{{envoy_worker_id=\"0\",{l}}}"), 8.0),
        // (The last connection may still be closing: as many as in all.)
        (
            format!("envoy_listener_worker_downstream_cx_active{{envoy_worker_id=\"0\",{l}}}"),
            at(&format!("envoy_listener_downstream_cx_active{{{l}}}")),
        ),
        (format!("envoy_listener_no_filter_chain_match{{{l}}}"), 0.0),
        // The listener's own copy of its connection manager's answers.
        (format!("envoy_listener_http_downstream_rq_xx{{envoy_response_code_class=\"2\",envoy_http_conn_manager_prefix=\"ingress\",{l}}}"), 3.0),
        (format!("envoy_listener_http_downstream_rq_xx{{envoy_response_code_class=\"5\",envoy_http_conn_manager_prefix=\"ingress\",{l}}}"), 4.0),
        (format!("envoy_listener_http_downstream_rq_completed{{envoy_http_conn_manager_prefix=\"ingress\",{l}}}"), 8.0),
    ] {
        assert_eq!(at(&k), v, "{k}");
    }
    let buckets: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("envoy_http_downstream_rq_time_bucket{"))
        .collect();
    assert_eq!(buckets.len(), 20);
    assert!(buckets[0].contains(",le=\"0.5\"}"));
    assert!(buckets[19].ends_with(",le=\"+Inf\"} 8"));
    // Counters, then gauges, then histograms, as Envoy's page.
    let types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.rsplit(' ').next().unwrap_or(""))
        .collect();
    let mut sorted = types.clone();
    sorted.sort_by_key(|t| {
        ["counter", "gauge", "histogram"]
            .iter()
            .position(|x| x == t)
    });
    assert_eq!(types, sorted);
}

#[test]
fn filter_and_usedonly_narrow_the_page_as_envoys_do() {
    let be = H1Backend::start(|r| answer(&r.target));
    let (_gw, addr, admin) = support::one_backend_gateway(be.addr());
    assert_eq!(h1_get(addr, "example.com", "/ok", "").status, 200);
    let (_, text) = admin_get(
        admin,
        "/stats/prometheus?filter=cluster%5C.backend%5C.upstream_rq&usedonly",
    );
    let names: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(!names.is_empty());
    for l in &names {
        assert!(l.starts_with("envoy_cluster_upstream_rq"), "{l}");
        // A used histogram's low buckets may be 0.
        assert!(
            l.contains("_bucket{") || !l.ends_with(" 0"),
            "usedonly: {l}"
        );
    }
    assert!(names
        .iter()
        .any(|l| l.starts_with("envoy_cluster_upstream_rq_total{")));
    let (status, body) = admin_get(admin, "/stats/prometheus?filter=(");
    assert_eq!(status, 400, "{body}");
    // Today's page stays.
    let (_, old) = admin_get(admin, "/stats");
    assert!(old.contains("gateway_downstream_cx_total"));
}

#[test]
fn envoys_json_and_text_forms_of_stats_carry_the_same_series() {
    let be = H1Backend::start(|r| answer(&r.target));
    let (_gw, addr, admin) = support::one_backend_gateway(be.addr());
    for _ in 0..4 {
        assert_eq!(h1_get(addr, "example.com", "/ok", "").status, 200);
    }
    let (status, body) = admin_get(admin, "/stats?format=json&filter=%5Ecluster%5C.backend%5C.");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let stats = v["stats"].as_array().expect("stats");
    let value = |name: &str| {
        stats
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["value"].clone())
    };
    assert_eq!(value("cluster.backend.upstream_rq_200"), Some(4.into()));
    assert_eq!(
        value("cluster.backend.upstream_rq_completed"),
        Some(4.into())
    );
    assert!(stats.iter().all(|s| s.get("histograms").is_some()
        || s["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("cluster.backend."))));
    let hist = &stats.last().expect("histograms")["histograms"];
    assert_eq!(
        hist["supported_quantiles"].as_array().map(Vec::len),
        Some(10)
    );
    let rq_time = hist["computed_quantiles"]
        .as_array()
        .and_then(|q| {
            q.iter()
                .find(|h| h["name"] == "cluster.backend.upstream_rq_time")
        })
        .expect("upstream_rq_time");
    let p100 = rq_time["values"][9]["cumulative"]
        .as_f64()
        .expect("a value");
    assert!(p100 > 0.0 && p100 < 10_000.0, "{p100} ms");
    // Envoy's text form, with the same filter.
    let (status, text) = admin_get(admin, "/stats?filter=cluster%5C.backend%5C.upstream_rq_");
    assert_eq!(status, 200);
    assert!(
        text.lines()
            .any(|l| l == "cluster.backend.upstream_rq_200: 4"),
        "{text}"
    );
    assert!(text
        .lines()
        .any(|l| l.starts_with("cluster.backend.upstream_rq_time: P0(")));
    let (status, _) = admin_get(admin, "/stats?format=yaml");
    assert_eq!(status, 400);
}

/// The Grafana dashboard in docs/ reads series the page has, under the
/// labels it groups by; the page parses as Prometheus text.
#[test]
fn the_grafana_dashboard_reads_series_the_page_exports() {
    let be = H1Backend::start(|r| answer(&r.target));
    // With outlier detection, whose series the dashboard reads too.
    let cluster = format!(
        "{}    outlier_detection: {{}}\n",
        support::yaml::h1_cluster("backend", be.addr())
    );
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        "",
        &support::yaml::one_route("backend", ""),
        &cluster,
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());
    assert_eq!(h1_get(addr, "example.com", "/ok", "").status, 200);
    let (_, text) = admin_get(admin, "/stats/prometheus");
    // This parser takes no empty `{}` (valid text, and Envoy's form for
    // a series without labels): it reads those without braces.
    let lines = text.lines().map(|l| Ok(l.replacen("{} ", " ", 1)));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
    let parsed: usize = scrape
        .samples
        .iter()
        .map(|s| match &s.value {
            // Its buckets (`_sum` and `_count` come as samples of their own).
            prometheus_parse::Value::Histogram(b) => b.len(),
            _ => 1,
        })
        .sum();
    assert_eq!(parsed, samples, "every line parsed");
    // Each family's label names, as the parser read them.
    let mut labels: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for s in &scrape.samples {
        let names = labels.entry(s.metric.clone()).or_default();
        names.extend(s.labels.keys().cloned());
        if let prometheus_parse::Value::Histogram(buckets) = &s.value {
            assert_eq!(buckets.len(), 20, "{}", s.metric);
            labels
                .entry(format!("{}_bucket", s.metric))
                .or_default()
                .extend(s.labels.keys().cloned().chain(["le".to_owned()]));
        }
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../docs/grafana/gateway-dashboard.json"))
            .expect("dashboard JSON");
    let metric = regex::Regex::new(r"envoy_[a-z0-9_]+").unwrap();
    let grouped = regex::Regex::new(r"by \(([^)]*)\)").unwrap();
    let matched = regex::Regex::new(r"(envoy_[a-z0-9_]+)\{([^}]*)\}").unwrap();
    let matchers = regex::Regex::new(r"\{[^}]*\}").unwrap();
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            // The metrics: what is left without the groupings and matchers.
            let bare = grouped.replace_all(expr, "");
            let bare = matchers.replace_all(&bare, "");
            for m in metric.find_iter(&bare) {
                let name = m.as_str();
                let have = labels
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} (in {expr:?}) is not on the page"));
                for g in grouped.captures_iter(expr) {
                    for label in g[1].split(',').map(str::trim) {
                        assert!(have.contains(label), "{name} has no label {label}: {expr}");
                    }
                }
                checked += 1;
            }
            // A matcher's label is its metric's.
            for c in matched.captures_iter(expr) {
                let have = &labels[&c[1]];
                for m in c[2].split(',') {
                    let label = m.split('=').next().unwrap_or("").trim();
                    assert!(
                        have.contains(label),
                        "{} has no label {label}: {expr}",
                        &c[1]
                    );
                }
            }
        }
    }
    assert!(checked >= 15, "{checked}");
}

/// A storm of scrapes of a large page is served from the admin's own
/// thread: requests and a config push go on meanwhile, every scrape is
/// answered whole, and a hostile cluster name stays inside its label.
#[test]
fn a_scrape_storm_leaves_requests_and_pushes_alone() {
    let be = H1Backend::start(|r| answer(&r.target));
    let mut clusters = support::yaml::h1_cluster("backend", be.addr());
    for i in 0..300 {
        let host: SocketAddr = format!("127.1.{}.{}:80", i / 250, i % 250 + 1)
            .parse()
            .unwrap();
        clusters.push_str(&support::yaml::h1_cluster(&format!("c{i}"), host));
    }
    // Quotes, a newline and markup in a name (YAML's escapes).
    clusters.push_str(&support::yaml::h1_cluster(
        "\"we\\\"ird\\n<b>x</b>\"",
        be.addr(),
    ));
    let routes = support::yaml::one_route("backend", "");
    let yaml = support::yaml::filters_yaml("", "", &routes, &clusters);
    let boot = || xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap");
    let gw = start(boot(), 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    // Past the pages served at once, a scrape is answered 503 (and
    // counted): each scraper tries again until it has its page. Bounded
    // by time, not tries: 100 scrapers of a debug build's large page on
    // two busy cores can each wait longer than 1,000 tries of 5 ms (CI saw
    // one refused that long); an admin that stopped answering still fails.
    let storm: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(move || {
                let mut busy = 0u64;
                let give_up = std::time::Instant::now() + std::time::Duration::from_secs(90);
                loop {
                    let (status, page) = admin_get(admin, "/stats/prometheus");
                    if status == 503 && std::time::Instant::now() < give_up {
                        busy += 1;
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        continue;
                    }
                    let last = "envoy_cluster_membership_total{envoy_cluster_name=\"c299\"} 1";
                    return (status, page.len(), page.contains(last), busy);
                }
            })
        })
        .collect();
    for _ in 0..20 {
        assert_eq!(h1_get(addr, "example.com", "/ok", "").status, 200);
    }
    gw.reload(boot()).expect("a push during the storm");
    let mut refused = 0;
    for t in storm {
        let (status, len, whole, busy) = t.join().expect("scraper");
        assert_eq!(status, 200);
        assert!(whole, "a page of {len} bytes without its last cluster");
        refused += busy;
    }
    assert_eq!(
        metric(admin, "gateway_admin_requests_refused_total"),
        refused as f64
    );
    let (_, page) = admin_get(admin, "/stats/prometheus?filter=upstream_rq_total");
    let line = page
        .lines()
        .find(|l| l.contains("we"))
        .expect("the odd cluster's line");
    assert_eq!(
        line,
        r#"envoy_cluster_upstream_rq_total{envoy_cluster_name="we\"ird\n<b>x</b>"} 0"#
    );
}

/// Bytes are counted as Envoy counts them: every byte of the HTTP/1.1
/// exchange, head included, per connection manager (client side) and per
/// cluster (server side); a connection's end is told apart by who closed
/// it.
#[test]
fn bytes_and_connection_ends_are_counted_as_envoys() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<support::h1_backend::H1Request>>> = Arc::default();
    // The backend's exact bytes.
    let answer_len = H1Answer::ok("hello").bytes.len();
    let log = Arc::clone(&seen);
    let be = H1Backend::start(move |r| {
        log.lock().unwrap().push(r.clone());
        H1Answer::ok("hello")
    });
    let (_gw, addr, admin) = support::one_backend_gateway(be.addr());
    let prefix = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    let cluster = "{envoy_cluster_name=\"backend\"}";

    // One request on a connection the client then closes.
    let request = b"GET /bytes HTTP/1.1\r\nhost: example.com\r\n\r\n";
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"hello") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    drop(c);
    wait_until(
        std::time::Duration::from_secs(2),
        "the close counted",
        || envoy_metric(admin, &format!("envoy_http_downstream_cx_destroy{prefix}")) == 1.0,
    );
    let at = |series: String| envoy_metric(admin, &series);
    assert_eq!(
        at(format!("envoy_http_downstream_cx_rx_bytes_total{prefix}")),
        request.len() as f64
    );
    assert_eq!(
        at(format!("envoy_http_downstream_cx_tx_bytes_total{prefix}")),
        got.len() as f64
    );
    assert_eq!(
        at(format!("envoy_http_downstream_cx_destroy_remote{prefix}")),
        1.0
    );
    assert_eq!(
        at(format!("envoy_http_downstream_cx_destroy_local{prefix}")),
        0.0
    );
    // The request as the backend got it: its head, byte for byte.
    let r = seen.lock().unwrap()[0].clone();
    let mut forwarded = format!("{} {} HTTP/1.1\r\n", r.method, r.target);
    for (k, v) in &r.fields {
        forwarded.push_str(&format!("{k}: {v}\r\n"));
    }
    forwarded.push_str("\r\n");
    assert_eq!(
        at(format!("envoy_cluster_upstream_cx_tx_bytes_total{cluster}")),
        forwarded.len() as f64
    );
    assert_eq!(
        at(format!("envoy_cluster_upstream_cx_rx_bytes_total{cluster}")),
        answer_len as f64
    );
    // The pooled connection stays open.
    assert_eq!(
        at(format!("envoy_cluster_upstream_cx_destroy{cluster}")),
        0.0
    );

    // Bytes that are no request: the gateway answers 400 and closes.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(b"GARBAGE\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(
        out.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    wait_until(
        std::time::Duration::from_secs(2),
        "the close counted",
        || {
            envoy_metric(
                admin,
                &format!("envoy_http_downstream_cx_destroy_local{prefix}"),
            ) == 1.0
        },
    );
    assert_eq!(at(format!("envoy_http_downstream_cx_destroy{prefix}")), 2.0);
    assert_eq!(
        at(format!("envoy_http_downstream_cx_rx_bytes_total{prefix}")),
        (request.len() + 11) as f64
    );
}

/// `track_cluster_stats.per_endpoint_stats`: each host's series, labelled
/// with its cluster and `ip:port`, as Envoy writes them; the other
/// `track_cluster_stats` switches are refused by name.
#[test]
fn per_endpoint_stats_write_each_hosts_series() {
    let ok = H1Backend::start(|_| H1Answer::ok("ok"));
    let fail = H1Backend::start(|_| {
        H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
    });
    let cluster = |extra: &str| {
        format!(
            "  - name: backend\n    type: STATIC\n    connect_timeout: 1s\n{extra}    load_assignment:\n      cluster_name: backend\n      endpoints:\n      - lb_endpoints: [{}, {}]\n",
            support::yaml::endpoint("127.0.0.1", ok.addr().port(), ", hostname: ok.example"),
            support::yaml::endpoint("127.0.0.1", fail.addr().port(), ""),
        )
    };
    let routes = support::yaml::one_route("backend", "");
    let refused = support::yaml::filters_bootstrap(
        "",
        "",
        &routes,
        &cluster("    track_cluster_stats: { timeout_budgets: true }\n"),
    );
    let err = refused
        .map(|_| ())
        .expect_err("timeout_budgets refused")
        .to_string();
    assert!(err.contains("track_cluster_stats.timeout_budgets"), "{err}");
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        "",
        &routes,
        &cluster("    track_cluster_stats: { per_endpoint_stats: true }\n"),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());
    // Round robin: two requests each.
    let mut statuses: Vec<u16> = (0..4).map(|_| h1_get(addr, "x", "/", "").status).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 200, 503, 503]);
    // A host with a hostname is labelled with it too (Envoy's).
    let series = |host: SocketAddr, s: &str| {
        let name = match host == ok.addr() {
            true => ",envoy_endpoint_hostname=\"ok.example\"",
            false => "",
        };
        let k = format!(
            "envoy_cluster_endpoint_{s}{{envoy_cluster_name=\"backend\",envoy_endpoint_address=\"{host}\"{name}}}"
        );
        envoy_metric(admin, &k)
    };
    for (host, success, error) in [(ok.addr(), 2.0, 0.0), (fail.addr(), 0.0, 2.0)] {
        assert_eq!(series(host, "rq_total"), 2.0, "{host}");
        assert_eq!(series(host, "rq_success"), success, "{host}");
        assert_eq!(series(host, "rq_error"), error, "{host}");
        assert_eq!(series(host, "healthy"), 1.0, "{host}");
        assert!(series(host, "cx_total") >= 1.0, "{host}");
    }
    let (_, text) = admin_get(admin, "/stats?filter=endpoint");
    let dotted = format!(
        "cluster.backend.endpoint.127.0.0.1_{}.rq_total: 2",
        ok.addr().port()
    );
    assert!(text.contains(&dotted), "{text}");
}

/// Open connections by protocol, as Envoy's gauges: an HTTP/2 connection
/// is in `downstream_cx_http2_active` while it is open, and no more after.
#[test]
fn open_connections_are_counted_by_protocol() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, addr, admin) = support::one_backend_gateway(be.addr());
    let gauge = move |s: &str| {
        envoy_metric(
            admin,
            &format!(
                "envoy_http_downstream_cx_{s}_active{{envoy_http_conn_manager_prefix=\"ingress\"}}"
            ),
        )
    };
    let open = client(move || async move {
        let send = connect(addr).await;
        let req = http::Request::get("http://x/").body(()).unwrap();
        let (resp, _) = send.ready().await.unwrap().send_request(req, true).unwrap();
        assert_eq!(resp.await.expect("answer").status(), 200);
        // Read while the connection is still open.
        (gauge("http2"), gauge("http1"), gauge("ssl"))
    });
    assert_eq!(open, (1.0, 0.0, 0.0));
    wait_until(std::time::Duration::from_secs(2), "closed", || {
        gauge("http2") == 0.0
    });
}
