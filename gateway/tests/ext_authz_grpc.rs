//! The external authorisation filter with a gRPC service (`envoy.service.auth.v3.Authorization/Check` over an HTTP/2 cluster): the `CheckRequest` and the call's own fields, the `CheckResponse` read as Envoy 1.40 reads it (OK with header changes, denials with or without a response, failed calls and garbage as errors), the failure modes and a change the gateway refuses. Expected answers are Envoy 1.40's to the same configs and requests (recorded side by side, 2026-11-28).

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use shards::http_filter::ext_authz::proto::{
    BoolValue, CheckRequest, CheckResponse, DeniedHttpResponse, HeaderValue, HeaderValueOption,
    HttpStatus, OkHttpResponse, RpcStatus,
};
use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::*;

/// How the service answers a check.
enum Answer {
    Check(Box<CheckResponse>),
    /// A trailers-only answer with this `grpc-status`.
    Status(u32),
    /// A message that is no `CheckResponse`.
    Garbage,
    /// Nothing, for longer than the check may take.
    Hang,
}

/// What the service saw: each call's fields and its request.
type Seen = Arc<Mutex<Vec<(Vec<(String, String)>, CheckRequest)>>>;

fn authz(answer: impl Fn(&CheckRequest) -> Answer + Send + Sync + 'static) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let answer = Arc::new(answer);
    let addr = {
        let seen = Arc::clone(&seen);
        support::h2c_server::h2c_server(move |_, mut conn| {
            let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
            async move {
                while let Some(Ok((req, respond))) = conn.accept().await {
                    let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
                    glommio::spawn_local(serve(req, respond, seen, answer)).detach();
                }
            }
        })
    };
    (addr, seen)
}

async fn serve(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    seen: Seen,
    answer: Arc<dyn Fn(&CheckRequest) -> Answer + Send + Sync>,
) {
    let (parts, mut body) = req.into_parts();
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let mut fields = vec![
        (":path".to_owned(), parts.uri.path().to_owned()),
        (
            ":authority".to_owned(),
            parts
                .uri
                .authority()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        ),
    ];
    fields.extend(
        parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned())),
    );
    let check = CheckRequest::decode(&buf[5..]).expect("a CheckRequest");
    let what = answer(&check);
    seen.lock().unwrap().push((fields, check));
    let grpc = |status: u32| {
        http::Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .header("grpc-status", status.to_string())
            .body(())
            .unwrap()
    };
    let message = match what {
        Answer::Hang => {
            glommio::timer::sleep(Duration::from_secs(2)).await;
            return;
        }
        Answer::Status(code) => {
            let _ = respond.send_response(grpc(code), true);
            return;
        }
        Answer::Check(resp) => resp.encode_to_vec(),
        Answer::Garbage => vec![0xff, 0xff, 0xff],
    };
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    let mut framed = vec![0];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let _ = stream.send_data(Bytes::from(framed), false);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

fn gateway(
    authz: SocketAddr,
    backend: SocketAddr,
    filter_fields: &str,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let filters = format!(
        r#"          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              grpc_service: {{ envoy_grpc: {{ cluster_name: authz }}, timeout: 0.25s }}
              transport_api_version: V3
{filter_fields}"#
    );
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: /ext }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.ext_authz:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute
                    check_settings: { context_extensions: { tenant: blue, zone: a } }
              - match: { prefix: / }
                route: { cluster: backend }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h2_cluster("authz", authz),
        support::yaml::h1_cluster("backend", backend)
    );
    let bootstrap =
        support::yaml::filters_bootstrap("", &filters, routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

/// The path of the request a check asks about.
fn path_of(check: &CheckRequest) -> String {
    check
        .attributes
        .as_ref()
        .and_then(|a| a.request.as_ref())
        .and_then(|r| r.http.as_ref())
        .map(|h| h.path.clone())
        .unwrap_or_default()
}

fn counter(admin: SocketAddr, outcome: &str) -> f64 {
    metric(
        admin,
        &format!("gateway_ext_authz_total{{outcome=\"{outcome}\"}}"),
    )
}

fn option(key: &str, value: &str, append: Option<bool>) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.into(),
            value: value.into(),
            raw_value: Vec::new(),
        }),
        append: append.map(|value| BoolValue { value }),
    }
}

fn status(code: i32) -> Option<RpcStatus> {
    Some(RpcStatus {
        code,
        message: String::new(),
    })
}

fn ok(ok: OkHttpResponse) -> Answer {
    Answer::Check(Box::new(CheckResponse {
        status: status(0),
        ok_response: Some(ok),
        ..Default::default()
    }))
}

fn all<'a>(r: &'a H1Request, name: &str) -> Vec<&'a str> {
    r.fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

#[test]
fn the_check_request_carries_the_requests_attributes() {
    let (authz, seen) = authz(|_| ok(OkHttpResponse::default()));
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (gw, addr, admin) = gateway(authz, be.addr(), "");
    let r = h1_get(
        addr,
        "example.com",
        "/ext/bar?x=1&y=2",
        "Authorization: Bearer abc\r\nX-Custom: c1\r\nx-custom: c2\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    let (fields, check) = seen.lock().unwrap().pop().expect("a check");
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(
        field(":path"),
        Some("/envoy.service.auth.v3.Authorization/Check")
    );
    assert_eq!(field(":authority"), Some("authz"));
    assert_eq!(field("content-type"), Some("application/grpc"));
    assert_eq!(field("te"), Some("trailers"));
    assert_eq!(field("grpc-timeout"), Some("250m"));
    assert_eq!(field("x-envoy-internal"), Some("true"));
    let a = check.attributes.expect("attributes");
    let http = a
        .request
        .as_ref()
        .and_then(|r| r.http.clone())
        .expect("http");
    assert_eq!(http.method, "GET");
    assert_eq!(http.path, "/ext/bar?x=1&y=2");
    assert_eq!(http.host, "example.com");
    assert_eq!(
        (http.scheme.as_str(), http.protocol.as_str()),
        ("http", "HTTP/1.1")
    );
    assert!(http.id.parse::<u64>().is_ok(), "{}", http.id);
    // Every field, pseudo-headers too; repeated ones joined.
    assert_eq!(http.headers.get(":method").map(String::as_str), Some("GET"));
    assert_eq!(
        http.headers.get(":authority").map(String::as_str),
        Some("example.com")
    );
    assert_eq!(
        http.headers.get("authorization").map(String::as_str),
        Some("Bearer abc")
    );
    assert_eq!(
        http.headers.get("x-custom").map(String::as_str),
        Some("c1,c2")
    );
    assert_eq!(
        a.context_extensions.get("tenant").map(String::as_str),
        Some("blue")
    );
    let source = a
        .source
        .and_then(|p| p.address)
        .and_then(|a| a.socket_address)
        .unwrap();
    assert_eq!(source.address, "127.0.0.1");
    let dest = a
        .destination
        .and_then(|p| p.address)
        .and_then(|a| a.socket_address)
        .unwrap();
    assert_eq!(dest.port_value, addr.port() as u32);
    assert!(a
        .request
        .and_then(|r| r.time)
        .is_some_and(|t| t.seconds > 0));
    assert_eq!(counter(admin, "ok"), 1.0);
    drop(gw);
}

#[test]
fn an_ok_answer_changes_the_request_and_the_response() {
    let (authz, _seen) = authz(|_| {
        ok(OkHttpResponse {
            headers: vec![
                option("x-new", "set", None),
                option("x-auth", "authz", Some(false)),
                option("x-app", "authz-append", Some(true)),
                option("X-Upper", "u", None),
            ],
            headers_to_remove: vec!["x-remove-me".into(), "host".into()],
            response_headers_to_add: vec![
                option("x-up", "added", None),
                option("x-over", "replaced", Some(false)),
            ],
            ..Default::default()
        })
    });
    let be = H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 200 OK\r\nx-up: upstream\r\nx-over: upstream\r\ncontent-length: 2\r\n\r\nok",
        )
    });
    let (_gw, addr, _admin) = gateway(authz, be.addr(), "");
    let r = h1_get(
        addr,
        "example.com",
        "/",
        "X-Auth: client\r\nX-App: client-app\r\nX-Remove-Me: 1\r\n",
    );
    assert_eq!(r.status, 200);
    let up = be.requests().pop().expect("the request");
    assert_eq!(all(&up, "x-new"), ["set"]);
    assert_eq!(all(&up, "x-auth"), ["authz"]);
    assert_eq!(all(&up, "x-upper"), ["u"]);
    assert!(all(&up, "x-remove-me").is_empty());
    assert_eq!(up.field("host"), Some("example.com"));
    // Envoy joins it to the client's with a comma; the gateway adds a
    // line (the same field to HTTP).
    assert_eq!(all(&up, "x-app").join(","), "client-app,authz-append");
    let lines = |name: &str| -> Vec<&str> {
        r.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(lines("x-up"), ["upstream", "added"]);
    assert_eq!(lines("x-over"), ["replaced"]);
}

#[test]
fn any_other_status_denies_with_the_services_response_or_403() {
    let (authz, _seen) = authz(|check| {
        let path = path_of(check);
        let denied = match path.as_str() {
            "/shaped" => Some(DeniedHttpResponse {
                status: Some(HttpStatus { code: 401 }),
                headers: vec![
                    option("www-authenticate", "Bearer", None),
                    option("set-cookie", "a=1", Some(false)),
                    option("set-cookie", "b=2", None),
                    option("x-absent", "dropped", Some(true)),
                ],
                body: "{\"error\":\"no\"}".into(),
            }),
            "/body-only" => Some(DeniedHttpResponse {
                body: "go away".into(),
                ..Default::default()
            }),
            _ => None,
        };
        Answer::Check(Box::new(CheckResponse {
            status: status(if path == "/bare" { 16 } else { 7 }),
            denied_response: denied,
            ..Default::default()
        }))
    });
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(
        authz,
        be.addr(),
        "              status_on_error: { code: 503 }",
    );
    let shaped = h1_get(addr, "example.com", "/shaped", "");
    assert_eq!(shaped.status, 401);
    assert_eq!(shaped.body, b"{\"error\":\"no\"}");
    assert_eq!(shaped.header("www-authenticate"), Some("Bearer"));
    let cookies: Vec<_> = shaped
        .headers
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(shaped.header("x-absent"), None);
    // UNAUTHENTICATED without a response: 403 (not 401, not the
    // status_on_error), as Envoy.
    let bare = h1_get(addr, "example.com", "/bare", "");
    assert_eq!((bare.status, &bare.body[..]), (403, &b""[..]));
    let body_only = h1_get(addr, "example.com", "/body-only", "");
    assert_eq!(
        (body_only.status, &body_only.body[..]),
        (403, &b"go away"[..])
    );
    assert_eq!(body_only.header("content-type"), Some("text/plain"));
    assert!(be.requests().is_empty());
    assert_eq!(counter(admin, "denied"), 3.0);
    assert_eq!(counter(admin, "error"), 0.0);
}

#[test]
fn a_failed_call_or_garbage_is_an_error() {
    let (authz, _seen) = authz(|check| {
        let path = path_of(check);
        match path.as_str() {
            "/unavailable" => Answer::Status(14),
            // An aborted call's PERMISSION_DENIED is a failure, not a
            // denial.
            "/aborted" => Answer::Status(7),
            "/garbage" => Answer::Garbage,
            _ => Answer::Hang,
        }
    });
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(
        authz,
        be.addr(),
        "              status_on_error: { code: 503 }",
    );
    for path in ["/unavailable", "/aborted", "/garbage"] {
        let r = h1_get(addr, "example.com", path, "");
        assert_eq!((r.status, &r.body[..]), (503, &b""[..]), "{path}");
    }
    let started = Instant::now();
    let r = h1_get(addr, "example.com", "/hang", "");
    assert_eq!(r.status, 503);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(240) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert_eq!(counter(admin, "error"), 4.0);
    assert!(be.requests().is_empty());
}

#[test]
fn failure_mode_allow_and_an_error_response() {
    let (authz, _seen) = authz(|check| {
        let path = path_of(check);
        match path.as_str() {
            "/shaped-error" => Answer::Check(Box::new(CheckResponse {
                status: status(13),
                error_response: Some(DeniedHttpResponse {
                    headers: vec![option("x-error", "internal", None)],
                    body: "authz broke".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })),
            _ => Answer::Status(14),
        }
    });
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(
        authz,
        be.addr(),
        "              failure_mode_allow: true\n              failure_mode_allow_header_add: true",
    );
    let r = h1_get(addr, "example.com", "/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    let up = be.requests().pop().unwrap();
    assert_eq!(up.field("x-envoy-auth-failure-mode-allowed"), Some("true"));
    assert_eq!(counter(admin, "failure_mode_allowed"), 1.0);

    // Without failure_mode_allow, an error response is the reply, with
    // status_on_error (403) where it gives none.
    let (_gw2, addr2, admin2) = gateway(authz, be.addr(), "");
    let r = h1_get(addr2, "example.com", "/shaped-error", "");
    assert_eq!((r.status, &r.body[..]), (403, &b"authz broke"[..]));
    assert_eq!(r.header("x-error"), Some("internal"));
    assert_eq!(counter(admin2, "error"), 1.0);
}

#[test]
fn an_ok_answer_asking_what_the_gateway_does_not_do_is_refused() {
    let (authz, _seen) = authz(|check| {
        let path = path_of(check);
        let header = match path.as_str() {
            "/crlf" => option("x-bad", "a\r\nx-injected: 1", None),
            _ => option(":path", "/rewritten", None),
        };
        ok(OkHttpResponse {
            headers: vec![header],
            ..Default::default()
        })
    });
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(authz, be.addr(), "");
    for path in ["/crlf", "/path"] {
        let r = h1_get(addr, "example.com", path, "");
        assert_eq!(r.status, 500, "{path}");
    }
    assert!(be.requests().is_empty());
    assert_eq!(counter(admin, "invalid"), 2.0);
}
