//! Formats parsed as Envoy writes them, refused by name, and rendered.

use std::time::{Duration, UNIX_EPOCH};

use super::*;

fn record<'a>(req: &'a [Option<&'a [u8]>], resp: &'a [Option<&'a [u8]>]) -> LogRecord<'a> {
    LogRecord {
        start: Some(UNIX_EPOCH + Duration::from_millis(1_460_751_420_310)),
        duration: Some(Duration::from_millis(12)),
        protocol: "HTTP/1.1",
        status: Some(200),
        flags: "",
        bytes_received: 5,
        bytes_sent: 42,
        upstream_host: Some("10.0.0.1:8080".parse().unwrap()),
        upstream_cluster: Some("backend"),
        downstream: Some("192.0.2.7:51234".parse().unwrap()),
        downstream_direct: Some("10.9.9.9:40000".parse().unwrap()),
        sni: None,
        local_reply_body: None,
        req,
        resp,
    }
}

fn line(f: &LogFormat, r: &LogRecord<'_>) -> String {
    let mut out = Vec::new();
    f.render(r, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn envoy_s_default_format_renders_as_envoy_writes_it() {
    let f = LogFormat::text(DEFAULT_FORMAT).unwrap();
    assert_eq!(
        f.req_fields(),
        [
            ":method",
            "x-envoy-original-path",
            ":path",
            "x-forwarded-for",
            "user-agent",
            "x-request-id",
            ":authority"
        ]
    );
    assert_eq!(f.resp_fields(), ["x-envoy-upstream-service-time"]);
    let req: Vec<Option<&[u8]>> = vec![
        Some(b"GET"),
        None,
        Some(b"/a?b"),
        None,
        Some(b"curl/8"),
        None,
        Some(b"example.com"),
    ];
    assert_eq!(
        line(&f, &record(&req, &[None])),
        "[2016-04-15T20:17:00.310Z] \"GET /a?b HTTP/1.1\" 200 - 5 42 12 - \"-\" \"curl/8\" \"-\" \"example.com\" \"10.0.0.1:8080\"\n"
    );
}

#[test]
fn operators_with_lengths_alternatives_and_percent_signs() {
    let f = LogFormat::text(
        "%REQ(:PATH):3% %RESP(X-A?X-B)% 100%% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %UPSTREAM_CLUSTER% %REQUESTED_SERVER_NAME%\n",
    )
    .unwrap();
    let req: Vec<Option<&[u8]>> = vec![Some(b"/abcdef")];
    let resp: Vec<Option<&[u8]>> = vec![None, Some(b"b")];
    assert_eq!(
        line(&f, &record(&req, &resp)),
        "/ab b 100% 192.0.2.7 backend -\n"
    );
}

#[test]
fn unknown_operators_and_bad_arguments_are_named() {
    assert_eq!(
        LogFormat::text("%NOPE%"),
        Err(FormatError::UnknownOperator("NOPE".into()))
    );
    assert_eq!(
        LogFormat::text("%START_TIME(%s)%"),
        Err(FormatError::Argument(
            "START_TIME with a custom time format".into()
        ))
    );
    assert_eq!(
        LogFormat::text("%START_TIME(%Y)"),
        Err(FormatError::Unterminated(0))
    );
    assert_eq!(
        LogFormat::text("x %REQ%"),
        Err(FormatError::MissingArgument("REQ".into()))
    );
    assert_eq!(
        LogFormat::text("%DURATION(x)%"),
        Err(FormatError::Argument("DURATION".into()))
    );
}

#[test]
fn json_has_sorted_keys_numbers_and_nulls() {
    let f = LogFormat::json(&[
        ("status".into(), "%RESPONSE_CODE%".into()),
        ("path".into(), "%REQ(:PATH)%".into()),
        ("ua".into(), "%REQ(USER-AGENT)%".into()),
        ("msg".into(), "took %DURATION% ms \"ok\"".into()),
    ])
    .unwrap();
    let req: Vec<Option<&[u8]>> = vec![Some(b"/x"), None];
    assert_eq!(
        line(&f, &record(&req, &[])),
        "{\"msg\":\"took 12 ms \\\"ok\\\"\",\"path\":\"/x\",\"status\":200,\"ua\":null}\n"
    );
}

#[test]
fn the_direct_remote_address_is_the_peer() {
    let f = LogFormat::text(
        "%DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%",
    )
    .unwrap();
    assert_eq!(
        line(&f, &record(&[], &[])),
        "192.0.2.7:51234 10.9.9.9:40000 10.9.9.9"
    );
}
