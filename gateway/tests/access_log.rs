//! Access logs from the data path: a line per request over both protocols, with the request and response fields, flags and bytes a format names; files reopened on request (SIGUSR1 / logrotate).

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use engine::access_log::LogFormat;
use engine::{AccessLog, LogSink};
use support::*;

const FORMAT: &str = "%PROTOCOL% %REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %RESP(X-BACKEND)% %UPSTREAM_CLUSTER% %REQ(X-TAG?USER-AGENT)%\n";

fn lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    wait_until(Duration::from_secs(5), "the log lines", || {
        got = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        got.len() >= n
    });
    got
}

fn h1(addr: SocketAddr, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn each_request_gets_a_line_and_files_reopen() {
    let dir = std::env::temp_dir().join(format!("gw-access-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/known", "c", None)])).clone();
    l.filter_chains[0].http.access_log = vec![AccessLog {
        filter: None,
        sink: LogSink::File(path.clone()),
        format: Arc::new(LogFormat::text(FORMAT).unwrap()),
    }];
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[b.addr()])]), 1);
    let addr = gw.listener("ingress").expect("listener");

    let resp = h1(
        addr,
        "POST /known/echo HTTP/1.1\r\nHost: a\r\nX-Tag: t1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    h1(
        addr,
        "GET /nowhere HTTP/1.1\r\nHost: a\r\nUser-Agent: ua/1\r\nConnection: close\r\n\r\n",
    );
    let replies = get_n(addr, "/known", 1);
    assert_eq!(replies[0].0, 200);
    let got = lines(&path, 3);
    assert_eq!(got[0], "HTTP/1.1 POST /known/echo 200 - 5 5 b1 c t1");
    assert_eq!(got[1], "HTTP/1.1 GET /nowhere 404 NR 0 0 - - ua/1");
    assert_eq!(got[2], "HTTP/2 GET /known 200 - 0 14 b1 c -");

    // logrotate: the file is moved away, then the gateway told.
    std::fs::rename(&path, dir.join("access.log.1")).unwrap();
    gw.reopen_logs();
    assert_eq!(get_n(addr, "/known", 1)[0].0, 200);
    let got = lines(&path, 1);
    assert_eq!(got, ["HTTP/2 GET /known 200 - 0 14 b1 c -"]);
    assert_eq!(
        lines(&dir.join("access.log.1"), 3).len(),
        3,
        "the old file kept its lines"
    );
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn failures_carry_their_response_flags() {
    let dir = std::env::temp_dir().join(format!("gw-access-uf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    // A port nobody listens on: connecting fails.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.access_log = vec![AccessLog {
        filter: None,
        sink: LogSink::File(path.clone()),
        format: Arc::new(
            LogFormat::json(&[
                ("code".into(), "%RESPONSE_CODE%".into()),
                ("flags".into(), "%RESPONSE_FLAGS%".into()),
                ("upstream".into(), "%UPSTREAM_HOST%".into()),
            ])
            .unwrap(),
        ),
    }];
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[dead])]), 1);
    let addr = gw.listener("ingress").expect("listener");
    let resp = h1(
        addr,
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    let got = lines(&path, 1);
    assert_eq!(
        got[0],
        format!("{{\"code\":503,\"flags\":\"UF\",\"upstream\":\"{dead}\"}}")
    );
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// An `access_log` entry (YAML flow mapping) writing `%REQ(:PATH)%
/// %RESPONSE_CODE%` lines to `path`, with `filter` (empty: none).
fn file_log(path: &std::path::Path, filter: &str) -> String {
    let filter = match filter {
        "" => String::new(),
        f => format!(", filter: {f}"),
    };
    format!(
        r#"{{ name: envoy.access_loggers.file{filter}, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%REQ(:PATH)% %RESPONSE_CODE%\n" }} }} }} }}"#,
        path.display()
    )
}

#[test]
fn each_access_log_s_filter_picks_its_requests() {
    let dir = std::env::temp_dir().join(format!("gw-access-filter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (all, errors, debug, tcp_like) = (
        dir.join("all.log"),
        dir.join("errors.log"),
        dir.join("debug.log"),
        dir.join("none.log"),
    );
    let logs = [
        file_log(&all, ""),
        file_log(
            &errors,
            "{ status_code_filter: { comparison: { op: GE, value: { default_value: 400, runtime_key: errors } } } }",
        ),
        file_log(
            &debug,
            "{ and_filter: { filters: [ { header_filter: { header: { name: x-debug, present_match: true } } }, { not_health_check_filter: {} } ] } }",
        ),
        // Nothing is traced: a traceable filter takes no request.
        file_log(&tcp_like, "{ traceable_filter: {} }"),
    ];
    let hcm = format!("          access_log: [{}]", logs.join(", "));
    let b = support::h1_backend::H1Backend::start(|_| support::h1_backend::H1Answer::ok("b1"));
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/known" }
                route: { cluster: c }
"#;
    let clusters = yaml::h1_cluster("c", b.addr());
    let bs = yaml::hcm_bootstrap(&hcm, routes, &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    for request in [
        "GET /known/a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "GET /nowhere HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "GET /known/b HTTP/1.1\r\nHost: a\r\nX-Debug: 1\r\nConnection: close\r\n\r\n",
    ] {
        h1(addr, request);
    }
    assert_eq!(
        lines(&all, 3),
        ["/known/a 200", "/nowhere 404", "/known/b 200"]
    );
    assert_eq!(lines(&errors, 1), ["/nowhere 404"]);
    assert_eq!(lines(&debug, 1), ["/known/b 200"]);
    // The lines above went after the filtered ones would have: none came.
    let skipped = std::fs::read_to_string(&tcp_like).unwrap_or_default();
    assert_eq!(skipped, "");
    assert_eq!(lines(&errors, 1).len(), 1);
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_access_log_filter_with_an_unknown_field_is_refused_by_name() {
    let log = file_log(
        std::path::Path::new("/tmp/never.log"),
        "{ status_code_filter: { comparison: { op: GE } } }",
    );
    let hcm = format!("          access_log: [{log}]");
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: []
"#;
    let err = match yaml::hcm_bootstrap(&hcm, routes, "") {
        Ok(_) => panic!("a comparison without a value accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("access_log[0].filter.status_code_filter"),
        "{err}"
    );
}

#[test]
fn a_retried_request_s_body_counts_once_in_bytes_received() {
    let dir = std::env::temp_dir().join(format!("gw-access-retry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let log = format!(
        r#"{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%RESPONSE_CODE% %BYTES_RECEIVED%\n" }} }} }} }}"#,
        path.display()
    );
    let hcm = format!("          access_log: [{log}]");
    // The first attempt fails, the retry (the body sent again) answers.
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b = support::h1_backend::H1Backend::start(move |_| {
        match n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => support::h1_backend::H1Answer::raw("HTTP/1.1 503 X\r\ncontent-length: 0\r\n\r\n"),
            _ => support::h1_backend::H1Answer::ok("ok"),
        }
    });
    let routes = yaml::one_route("c", ", retry_policy: { retry_on: 5xx, num_retries: 1 }");
    let clusters = yaml::h1_cluster("c", b.addr());
    let bs = yaml::hcm_bootstrap(&hcm, &routes, &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let resp = h1(
        addr,
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert_eq!(b.requests().len(), 2);
    assert_eq!(lines(&path, 1), ["200 5"]);
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_http1_codec_s_refusals_are_logged_as_envoy_logs_them() {
    let dir = std::env::temp_dir().join(format!("gw-access-codec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let log = format!(
        r#"{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_SENT%\n" }} }} }} }}"#,
        path.display()
    );
    let hcm = format!("          access_log: [{log}]");
    let routes = yaml::one_route("c", "");
    let b = support::h1_backend::H1Backend::start(|_| support::h1_backend::H1Answer::ok("b1"));
    let bs = yaml::hcm_bootstrap(&hcm, &routes, &yaml::h1_cluster("c", b.addr()))
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let resp = h1(addr, "GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n");
    assert!(resp.starts_with("HTTP/1.1 400 "), "{resp}");
    // No request fields; `DPE`, the body's bytes (`Bad Request`).
    assert_eq!(lines(&path, 1), ["- 400 DPE 11"]);
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_grpc_local_reply_s_status_is_what_grpc_status_filters_see() {
    let dir = std::env::temp_dir().join(format!("gw-access-grpc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (unimplemented, ok) = (dir.join("unimplemented.log"), dir.join("ok.log"));
    let logs = [
        file_log(
            &unimplemented,
            "{ grpc_status_filter: { statuses: [UNIMPLEMENTED] } }",
        ),
        file_log(&ok, "{ grpc_status_filter: { statuses: [OK] } }"),
    ];
    let hcm = format!("          access_log: [{}]", logs.join(", "));
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/known" }
                direct_response: { status: 200 }
"#;
    let bs =
        yaml::hcm_bootstrap(&hcm, routes, "").unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    // No route: a trailers-only reply, `grpc-status: 12` (its 404's).
    let resp = h1(
        addr,
        "POST /svc/Method HTTP/1.1\r\nHost: a\r\ncontent-type: application/grpc\r\ncontent-length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(
        resp.to_ascii_lowercase().contains("grpc-status: 12"),
        "{resp}"
    );
    assert_eq!(lines(&unimplemented, 1), ["/svc/Method 200"]);
    assert_eq!(std::fs::read_to_string(&ok).unwrap_or_default(), "");
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}
