use std::time::Duration;

use super::*;

const PARENT: u64 = 0xd9c0_9c60_e6db_dd3e;
const TRACE: u128 = 0x362f_1ecb_ea48_ebf5_9a56_3916_d297_b31f;

fn spans(propagation: Propagation, custom: Vec<(Box<str>, AttrValue)>) -> (UpstreamSpans, Instant) {
    let base = Instant::now();
    let parent = TraceContext::root(TRACE, PARENT, true);
    (
        UpstreamSpans::new(propagation, true, parent, custom, 1_000_000_000, base),
        base,
    )
}

fn host() -> SocketAddr {
    "127.0.0.1:45569".parse().unwrap()
}

fn tag<'a>(r: &'a SpanRecord, key: &str) -> Option<&'a str> {
    match r.attr(key) {
        Some(AttrValue::Str(s)) => Some(s),
        _ => None,
    }
}

/// Envoy 1.40 with `spawn_upstream_span`: each attempt's span id is the
/// parent the host sees, and its span is a client child of the request's.
#[test]
fn each_attempt_is_a_child_span_whose_id_goes_upstream() {
    let (mut t, base) = spans(Propagation::W3c, Vec::new());
    let mut edits = HeaderEdits::default();
    t.begin(1, "backend", host(), "HTTP/1.1", 0x741a, base, &mut edits);
    let sent = edits.get(b"traceparent", None).map(<[u8]>::to_vec);
    assert_eq!(
        sent.as_deref(),
        Some(&b"00-362f1ecbea48ebf59a563916d297b31f-000000000000741a-01"[..])
    );
    t.answered(1, 503);
    // Retried on its head, its body still to come: a cancel.
    t.end(1, base + Duration::from_millis(2));
    t.begin(
        1,
        "backend",
        host(),
        "HTTP/1.1",
        0x412d,
        base + Duration::from_millis(5),
        &mut edits,
    );
    let sent = edits.get(b"traceparent", None).map(<[u8]>::to_vec);
    assert_eq!(
        sent.as_deref(),
        Some(&b"00-362f1ecbea48ebf59a563916d297b31f-000000000000412d-01"[..])
    );
    t.answered(1, 200);
    t.completed(1);
    let done = t.take(base + Duration::from_millis(9));
    assert_eq!(done.len(), 2);
    let (first, second) = (&done[0], &done[1]);
    for (r, id) in [(first, 0x741a), (second, 0x412d)] {
        assert_eq!(r.span_id, id);
        assert_eq!(r.parent_span_id, Some(PARENT));
        assert_eq!(r.trace_id, TRACE);
        assert_eq!(r.kind, SpanKind::Client);
        assert_eq!(&*r.name, "router backend egress");
        assert_eq!(tag(r, "upstream_address"), Some("127.0.0.1:45569"));
        assert_eq!(tag(r, "node_id"), None);
    }
    assert_eq!(first.start_unix_nanos, 1_000_000_000);
    assert_eq!(first.duration_nanos, 2_000_000);
    assert_eq!(tag(first, "retry.count"), None);
    assert_eq!(tag(first, "canceled"), Some("true"));
    assert_eq!(tag(first, "http.status_code"), Some("503"));
    assert!(first.error);
    assert_eq!(second.start_unix_nanos, 1_005_000_000);
    assert_eq!(tag(second, "retry.count"), Some("1"));
    assert_eq!(tag(second, "canceled"), None);
    assert_eq!(tag(second, "http.status_code"), Some("200"));
    assert_eq!(tag(second, "response_flags"), Some("-"));
    assert!(!second.error);
}

/// A connect failure is a reset with its reason, not a cancel; a
/// per-try timeout a cancel flagged `UT`.
#[test]
fn failures_and_timeouts_are_tagged_as_envoy_tags_them() {
    let (mut t, base) = spans(Propagation::W3c, Vec::new());
    let mut edits = HeaderEdits::default();
    t.begin(1, "backend", host(), "-", 7, base, &mut edits);
    t.failed(1, AttemptFailure::ConnectFailure);
    t.end(1, base);
    t.begin(1, "backend", host(), "HTTP/2", 8, base, &mut edits);
    t.timed_out(1, false);
    t.end(1, base);
    t.begin(1, "backend", host(), "HTTP/2", 9, base, &mut edits);
    t.failed(1, AttemptFailure::RemoteReset);
    let done = t.take(base);
    let refused = &done[0];
    assert_eq!(
        tag(refused, "error.reason"),
        Some("remote connection failure")
    );
    assert_eq!(tag(refused, "response_flags"), Some("UF"));
    assert_eq!(tag(refused, "http.protocol"), Some("-"));
    assert_eq!(tag(refused, "http.status_code"), Some("0"));
    assert_eq!(tag(refused, "canceled"), None);
    let timed_out = &done[1];
    assert_eq!(tag(timed_out, "canceled"), Some("true"));
    assert_eq!(tag(timed_out, "response_flags"), Some("UT"));
    assert_eq!(tag(timed_out, "error"), Some("true"));
    assert_eq!(tag(timed_out, "error.reason"), None);
    let reset = &done[2];
    assert_eq!(tag(reset, "error.reason"), Some("remote reset"));
    assert_eq!(tag(reset, "response_flags"), Some("UR"));
    assert_eq!(tag(reset, "http.protocol"), Some("HTTP/2"));
}

/// Hedged attempts are in flight together, each under its own key; the
/// custom tags end every attempt's span; B3 names the request's span as
/// the parent.
#[test]
fn hedged_attempts_end_apart_and_carry_the_custom_tags() {
    let custom = vec![("team".into(), AttrValue::from("edge"))];
    let (mut t, base) = spans(Propagation::B3, custom);
    let mut edits = HeaderEdits::default();
    t.begin(1, "backend", host(), "HTTP/1.1", 0xa, base, &mut edits);
    t.timed_out(1, false);
    t.begin(
        0x8000_0001,
        "backend",
        host(),
        "HTTP/1.1",
        0xb,
        base,
        &mut edits,
    );
    assert_eq!(
        edits.get(b"x-b3-spanid", None),
        Some(&b"000000000000000b"[..])
    );
    assert_eq!(
        edits.get(b"x-b3-parentspanid", None),
        Some(&b"d9c09c60e6dbdd3e"[..])
    );
    t.answered(0x8000_0001, 200);
    // The winner's head: the loser is left.
    t.end(1, base + Duration::from_millis(300));
    t.completed(0x8000_0001);
    let done = t.take(base + Duration::from_millis(301));
    assert_eq!(done[0].span_id, 0xa);
    assert_eq!(tag(&done[0], "canceled"), Some("true"));
    assert_eq!(tag(&done[0], "response_flags"), Some("UT"));
    assert_eq!(tag(&done[1], "retry.count"), Some("1"));
    assert_eq!(tag(&done[1], "http.status_code"), Some("200"));
    for r in &done {
        assert_eq!(tag(r, "team"), Some("edge"));
        assert_eq!(r.attributes.last().map(|(k, _)| &**k), Some("team"));
    }
}

/// A stream's attempts are bounded: past the bound they go untraced.
#[test]
fn the_spans_of_a_stream_are_bounded() {
    let (mut t, base) = spans(Propagation::W3c, Vec::new());
    let mut edits = HeaderEdits::default();
    for nth in 1..=40u32 {
        t.begin(
            1,
            "backend",
            host(),
            "HTTP/1.1",
            u64::from(nth),
            base,
            &mut edits,
        );
    }
    assert_eq!(t.take(base).len(), MAX_SPANS);
}
