//! `local_reply_config`: mappers (status, header, response-flag and combined filters; first match wins) and body formats (text and JSON, the mapper's over the config's) on the gateway's own replies, never on a backend's; the access log sees the mapped status; gRPC replies carry the formatted body as `grpc-message`. Expected values recorded from Envoy 1.40 on the same bootstraps and requests (2026-11-28).

mod support;

use std::net::{SocketAddr, TcpListener};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::{h1_get, Response};
use support::*;

/// Routes as in the Envoy runs: `/ok` a direct response, `/missing` a
/// cluster whose host refuses connections (503 UF), `/up500` a backend
/// answering 500; anything else has no route (404 NR).
fn routes() -> &'static str {
    r#"            virtual_hosts:
            - name: vh
              domains: ["*"]
              routes:
              - { match: { path: /ok }, direct_response: { status: 200, body: { inline_string: fine } } }
              - { match: { path: /missing }, route: { cluster: dead } }
              - { match: { path: /up500 }, route: { cluster: backend } }
              - { match: { path: /hang }, route: { cluster: hang, timeout: 0.3s } }
"#
}

struct World {
    _gw: gateway::GatewayHandle,
    addr: SocketAddr,
    _backend: H1Backend,
    /// Takes connections into its backlog and never answers.
    _hang: TcpListener,
}

fn world(local_reply_config: &str, extra_fields: &str) -> World {
    let backend = H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\nbackend error",
        )
    });
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cluster = |name: &str, a: SocketAddr| {
        format!(
            "  - name: {name}\n    type: STATIC\n    connect_timeout: 0.25s\n    load_assignment:\n      cluster_name: {name}\n      endpoints:\n      - lb_endpoints: [{}]\n",
            yaml::endpoint(&a.ip().to_string(), a.port(), "")
        )
    };
    let hang = TcpListener::bind("127.0.0.1:0").unwrap();
    let clusters = cluster("dead", dead)
        + &cluster("backend", backend.addr())
        + &cluster("hang", hang.local_addr().unwrap());
    let fields = format!("{local_reply_config}\n{extra_fields}");
    let b = yaml::hcm_bootstrap(&fields, routes(), &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    World {
        _gw: gw,
        addr,
        _backend: backend,
        _hang: hang,
    }
}

fn get(w: &World, path: &str, extra: &str) -> Response {
    h1_get(w.addr, "example", path, extra)
}

fn body(r: &Response) -> &str {
    std::str::from_utf8(&r.body).unwrap()
}

const UF_BODY: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure";

#[test]
fn a_mapper_rewrites_status_headers_and_body_of_the_replies_its_filter_takes() {
    let w = world(
        r#"          local_reply_config:
            mappers:
            - filter: { status_code_filter: { comparison: { op: EQ, value: { default_value: 503, runtime_key: key_b } } } }
              status_code: 504
              headers_to_add: [{ header: { key: foo, value: bar }, append_action: OVERWRITE_IF_EXISTS_OR_ADD }]
              body: { inline_string: "mapped body" }"#,
        "",
    );
    let missing = get(&w, "/missing", "");
    assert_eq!((missing.status, body(&missing)), (504, "mapped body"));
    assert_eq!(missing.header("foo"), Some("bar"));
    assert_eq!(missing.header("content-type"), Some("text/plain"));
    // Not taken: as without the config.
    let nope = get(&w, "/nope", "");
    assert_eq!((nope.status, body(&nope)), (404, ""));
    assert_eq!(nope.header("foo"), None);
    let ok = get(&w, "/ok", "");
    assert_eq!((ok.status, body(&ok)), (200, "fine"));
    // A backend's answer is never a local reply.
    let up = get(&w, "/up500", "");
    assert_eq!((up.status, body(&up)), (500, "backend error"));
}

#[test]
fn a_text_body_format_shapes_every_local_reply_and_direct_responses() {
    let w = world(
        r#"          local_reply_config:
            body_format: { text_format: "%LOCAL_REPLY_BODY% %RESPONSE_CODE% %RESPONSE_FLAGS% %REQ(:PATH)%\n" }"#,
        "",
    );
    let nope = get(&w, "/nope", "");
    assert_eq!((nope.status, body(&nope)), (404, " 404 NR /nope\n"));
    assert_eq!(nope.header("content-type"), Some("text/plain"));
    let missing = get(&w, "/missing", "");
    assert_eq!(
        (missing.status, body(&missing)),
        (503, &*format!("{UF_BODY} 503 UF /missing\n"))
    );
    let ok = get(&w, "/ok", "");
    assert_eq!((ok.status, body(&ok)), (200, "fine 200 - /ok\n"));
    let up = get(&w, "/up500", "");
    assert_eq!((up.status, body(&up)), (500, "backend error"));
}

#[test]
fn a_json_body_format_has_sorted_keys_a_numeric_status_and_its_content_type() {
    let w = world(
        r#"          local_reply_config:
            body_format:
              json_format: { status: "%RESPONSE_CODE%", message: "%LOCAL_REPLY_BODY%", path: "%REQ(:PATH)%" }"#,
        "",
    );
    let nope = get(&w, "/nope", "");
    assert_eq!(
        (nope.status, body(&nope)),
        (
            404,
            "{\"message\":\"\",\"path\":\"/nope\",\"status\":404}\n"
        )
    );
    assert_eq!(nope.header("content-type"), Some("application/json"));
    let w = world(
        r#"          local_reply_config:
            body_format:
              json_format: { status: "%RESPONSE_CODE%", message: "%LOCAL_REPLY_BODY%", path: "%REQ(:PATH)%" }
              content_type: "application/problem+json""#,
        "",
    );
    let missing = get(&w, "/missing", "");
    assert_eq!(
        body(&missing),
        format!("{{\"message\":\"{UF_BODY}\",\"path\":\"/missing\",\"status\":503}}\n")
    );
    assert_eq!(
        missing.header("content-type"),
        Some("application/problem+json")
    );
}

#[test]
fn the_first_matching_mapper_wins_with_its_own_format_over_the_global_one() {
    let w = world(
        r#"          local_reply_config:
            mappers:
            - filter: { header_filter: { header: { name: x-test, string_match: { exact: "yes" } } } }
              status_code: 418
              body_format_override: { text_format: "override %LOCAL_REPLY_BODY%" }
            - filter:
                or_filter:
                  filters:
                  - status_code_filter: { comparison: { op: GE, value: { default_value: 500, runtime_key: k } } }
                  - response_flag_filter: { flags: ["NR"] }
              status_code: 599
              body: { inline_string: "or matched" }
            body_format: { text_format: "global %LOCAL_REPLY_BODY%" }"#,
        "",
    );
    let tagged = get(&w, "/nope", "x-test: yes\r\n");
    assert_eq!((tagged.status, body(&tagged)), (418, "override "));
    let ok = get(&w, "/ok", "x-test: yes\r\n");
    assert_eq!((ok.status, body(&ok)), (418, "override fine"));
    let nope = get(&w, "/nope", "x-test: no\r\n");
    assert_eq!((nope.status, body(&nope)), (599, "global or matched"));
    let missing = get(&w, "/missing", "");
    assert_eq!((missing.status, body(&missing)), (599, "global or matched"));
    let ok = get(&w, "/ok", "");
    assert_eq!((ok.status, body(&ok)), (200, "global fine"));
    let up = get(&w, "/up500", "");
    assert_eq!((up.status, body(&up)), (500, "backend error"));
}

#[test]
fn a_reply_after_the_body_went_upstream_still_reads_the_request() {
    let w = world(
        r#"          local_reply_config:
            mappers:
            - filter: { header_filter: { header: { name: x-test, string_match: { exact: "yes" } } } }
              status_code: 418
            body_format: { text_format: "%RESPONSE_CODE% %RESPONSE_FLAGS% %REQ(X-TEST)%" }"#,
        "",
    );
    // The body goes to a host that never answers: the route's timeout.
    let r = support::h1_client::h1_post(w.addr, "example", "/hang", "x-test: yes\r\n", b"hello");
    assert_eq!((r.status, body(&r)), (418, "418 UT yes"));
}

#[test]
fn the_access_log_sees_the_mapped_status_and_keeps_the_flag() {
    let dir = std::env::temp_dir().join(format!("gw-lrc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let _ = std::fs::remove_file(&log);
    let access_log = format!(
        r#"          access_log: [{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%RESPONSE_CODE% %RESPONSE_FLAGS%\n" }} }} }} }}]"#,
        log.display()
    );
    let w = world(
        r#"          local_reply_config:
            mappers:
            - filter: { status_code_filter: { comparison: { op: EQ, value: { default_value: 404, runtime_key: key_404 } } } }
              status_code: 200"#,
        &access_log,
    );
    let nope = get(&w, "/nope", "");
    assert_eq!((nope.status, body(&nope)), (200, ""));
    let text = wait_lines(&log, 1);
    assert_eq!(text, "200 NR\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn grpc_local_replies_carry_the_formatted_body_as_their_message() {
    let w = world(
        r#"          local_reply_config:
            body_format:
              json_format: { status: "%RESPONSE_CODE%", message: "%LOCAL_REPLY_BODY%", path: "%REQ(:PATH)%" }"#,
        "",
    );
    let addr = w.addr;
    let reply = client(move || async move {
        let c = connect(addr).await;
        support::request(
            &c,
            "POST",
            "/nope",
            &[("content-type", "application/grpc"), ("te", "trailers")],
            Some(bytes::Bytes::new()),
            None,
        )
        .await
        .unwrap()
    });
    assert_eq!(reply.status, 200);
    assert_eq!(reply.grpc_status(), Some("12"));
    // The format's content type is the message's: the reply stays gRPC.
    let types: Vec<_> = reply.headers.get_all("content-type").iter().collect();
    assert_eq!(types, ["application/grpc"]);
    // No trailing newline, as Envoy's.
    assert_eq!(
        reply.header("grpc-message"),
        Some("{\"message\":\"\",\"path\":\"/nope\",\"status\":404}")
    );
}

#[test]
fn bad_local_reply_configs_are_refused_naming_the_field() {
    let refused = |lrc: &str| {
        let fields = format!("          local_reply_config:\n{lrc}");
        let table = "            virtual_hosts: [{ name: vh, domains: [\"*\"], routes: [] }]\n";
        yaml::hcm_bootstrap(&fields, table, "")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let no_filter = refused("            mappers: [{ status_code: 504 }]");
    assert!(no_filter.contains("mappers[0].filter"), "{no_filter}");
    let bad_status = refused(
        "            mappers: [{ filter: { response_flag_filter: { flags: [NR] } }, status_code: 100 }]",
    );
    assert!(bad_status.contains("status_code"), "{bad_status}");
    let bad_flag =
        refused("            mappers: [{ filter: { response_flag_filter: { flags: [XX] } } }]");
    assert!(
        bad_flag.contains("\"XX\" is not a response flag"),
        "{bad_flag}"
    );
    let bad_op = refused(
        "            body_format: { text_format: \"%LOCAL_REPLY_BODY% %NOT_A_REAL_OPERATOR%\" }",
    );
    assert!(bad_op.contains("NOT_A_REAL_OPERATOR"), "{bad_op}");
    let metadata =
        refused("            mappers: [{ filter: { metadata_filter: {} }, status_code: 404 }]");
    assert!(metadata.contains("metadata_filter"), "{metadata}");
}

#[test]
fn a_reply_says_the_settled_client_and_its_age_without_an_access_log() {
    // One trusted hop: the client is the `x-forwarded-for` entry before
    // it (port 0, as Envoy writes it). No access log: the reply's age
    // still counts from the request's head (the route times out at 0.3 s).
    let w = world(
        r#"          local_reply_config:
            body_format: { text_format: "%DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT% %DURATION%" }"#,
        "          xff_num_trusted_hops: 1",
    );
    let hang = get(&w, "/hang", "x-forwarded-for: 9.9.9.9, 10.0.0.1\r\n");
    assert_eq!(hang.status, 504);
    let text = body(&hang);
    let parts: Vec<&str> = text.split(' ').collect();
    assert_eq!(parts[..2], ["9.9.9.9:0", "127.0.0.1"], "{text}");
    let ms: u64 = parts[2].parse().expect("a duration");
    assert!((250..2000).contains(&ms), "{text}");
}

#[test]
fn the_http1_codec_s_own_refusals_are_shaped_too() {
    // Envoy 1.40 runs its codec's errors through the config as well.
    let w = world(
        r#"          local_reply_config:
            mappers:
            - filter: { status_code_filter: { comparison: { op: EQ, value: { default_value: 400, runtime_key: k400 } } } }
              status_code: 418
              body: { inline_string: "mapped 400" }
            body_format: { text_format: "fmt %RESPONSE_CODE% %LOCAL_REPLY_BODY%\n" }"#,
        "",
    );
    let bad = get(&w, "/ok", "Bad Header: x\r\n");
    assert_eq!((bad.status, body(&bad)), (418, "fmt 418 mapped 400\n"));
    assert_eq!(bad.header("connection"), Some("close"));
    let big = format!("x-big: {}\r\n", "a".repeat(70 * 1024));
    let too_large = get(&w, "/ok", &big);
    assert_eq!(
        (too_large.status, body(&too_large)),
        (431, "fmt 431 Request Header Fields Too Large\n")
    );
    // As Envoy, the route's own direct response too.
    let ok = get(&w, "/ok", "");
    assert_eq!((ok.status, body(&ok)), (200, "fmt 200 fine\n"));
}
