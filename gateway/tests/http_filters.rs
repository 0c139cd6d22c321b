//! The HTTP filter interface (`shards::http_filter`) end to end: filters a
//! program embeds run in a listener's `http_filters` before the router, on
//! real gateway shards in front of a real h2 demo backend. The first test
//! is the worked example of docs/architecture.md ("HTTP filters").

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::{Bootstrap, HttpFilter as FilterConfig};
use shards::http_filter::{
    FilterCx, Flow, HttpFilter, Native, Reply, RequestFlow, RequestHead, ResponseHead,
    StreamSummary,
};
use support::*;

// The worked example: a filter that adds a response header. It implements
// one hook; every other hook's default continues.
struct AddHeader {
    name: &'static str,
    value: &'static str,
}

impl HttpFilter for AddHeader {
    fn on_response_headers(&self, _cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        head.append(self.name.as_bytes(), self.value.as_bytes());
        Flow::Continue
    }
}

/// A gateway in front of one demo backend whose listener runs `filters`
/// (in this order) before the router.
fn gateway_with(
    filters: Vec<FilterConfig>,
) -> (
    gateway::GatewayHandle,
    std::net::SocketAddr,
    demo_backend::BackendHandle,
) {
    let b = backend("b");
    // `/nowhere` names a cluster that does not exist: the gateway's own
    // 503 ("cluster not found"), a local reply.
    let routes = vec![
        prefix_route("/nowhere", "gone", None),
        prefix_route("/", "c", None),
    ];
    let mut l = (*listener(routes)).clone();
    let chain = &mut l.filter_chains[0].http.http_filters;
    for (i, f) in filters.into_iter().enumerate() {
        chain.insert(i, f);
    }
    let boot: Bootstrap = bootstrap(Arc::new(l), vec![cluster("c", &[b.addr()])]);
    let gw = start(boot, 1);
    let addr = gw.listener("ingress").expect("listener bound");
    (gw, addr, b)
}

fn native(name: &str, filter: impl HttpFilter + 'static) -> FilterConfig {
    FilterConfig {
        name: name.into(),
        config: Native::config(filter),
    }
}

#[test]
fn a_filter_adds_a_response_header_to_upstream_and_local_replies() {
    let (gw, addr, _b) = gateway_with(vec![native(
        "add-header",
        AddHeader {
            name: "x-served-by",
            value: "gateway",
        },
    )]);
    let (ok, missing) = client(move || async move {
        let c = connect(addr).await;
        let ok = get(&c, "/", &[]).await.expect("reply");
        let missing = get(&c, "/nowhere", &[]).await.expect("reply");
        (ok, missing)
    });
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("x-backend"), Some("b"));
    assert_eq!(ok.header("x-served-by"), Some("gateway"));
    assert_eq!(missing.status, 503);
    assert_eq!(missing.body, Bytes::from_static(b"cluster not found"));
    assert_eq!(missing.header("x-served-by"), Some("gateway"));
    gw.shutdown();
}

/// Answers `x-deny: yes` requests itself, with 403, before the router.
struct Deny;

impl HttpFilter for Deny {
    fn on_request_headers(
        &self,
        _cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
    ) -> RequestFlow {
        if head.get(b"x-deny") == Some(b"yes") {
            let mut reply = Reply::new(403, "denied by filter\n", "UAEX");
            reply.fields.append(b"x-why", b"x-deny");
            return RequestFlow::Reply(reply);
        }
        RequestFlow::Continue
    }
}

#[test]
fn a_filter_answers_locally_and_the_response_filters_see_its_reply() {
    // Deny first; AddHeader's response hook still runs on Deny's reply.
    let (gw, addr, _b) = gateway_with(vec![
        native("deny", Deny),
        native(
            "add-header",
            AddHeader {
                name: "x-served-by",
                value: "gateway",
            },
        ),
    ]);
    let (denied, passed) = client(move || async move {
        let c = connect(addr).await;
        let denied = get(&c, "/", &[("x-deny", "yes")]).await.expect("reply");
        let passed = get(&c, "/", &[("x-deny", "no")]).await.expect("reply");
        (denied, passed)
    });
    assert_eq!(denied.status, 403);
    assert_eq!(denied.body, Bytes::from_static(b"denied by filter\n"));
    assert_eq!(denied.header("x-why"), Some("x-deny"));
    assert_eq!(denied.header("x-served-by"), Some("gateway"));
    assert_eq!(
        denied.header("x-backend"),
        None,
        "never reached the backend"
    );
    assert_eq!(passed.status, 200);
    assert_eq!(passed.header("x-backend"), Some("b"));
    gw.shutdown();
}

/// Holds every request for `delay` (as a filter waiting on a network call
/// would), then lets it go on.
struct Delay {
    delay: Duration,
}

impl HttpFilter for Delay {
    fn on_request_headers(
        &self,
        cx: &mut FilterCx<'_>,
        _head: &mut RequestHead<'_>,
    ) -> RequestFlow {
        let resume = cx.pause();
        let delay = self.delay;
        glommio::spawn_local(async move {
            glommio::timer::sleep(delay).await;
            resume.resume();
        })
        .detach();
        RequestFlow::Pause
    }
}

#[test]
fn a_paused_stream_resumes_with_its_body_intact() {
    let delay = Duration::from_millis(200);
    let (gw, addr, _b) = gateway_with(vec![native("delay", Delay { delay })]);
    let body = Bytes::from(vec![b'x'; 300_000]);
    let sent = body.clone();
    let (took, echoed, other) = client(move || async move {
        let c = connect(addr).await;
        let started = Instant::now();
        // The body is sent while the stream is paused: it waits under
        // the stream's window and goes upstream once it resumes.
        let echoed = request(&c, "POST", "/", &[], Some(sent), None)
            .await
            .expect("reply");
        let took = started.elapsed();
        let other = get(&c, "/", &[]).await.expect("reply");
        (took, echoed, other)
    });
    assert!(took >= delay, "answered after the pause ({took:?})");
    assert_eq!(echoed.status, 200);
    assert_eq!(echoed.body, body, "the body went upstream whole");
    assert_eq!(other.status, 200);
    gw.shutdown();
}

/// Changes bodies as they stream: request chunks lose their second half
/// (the backend echoes what it got), response chunks are upper-cased.
struct Reshape;

impl HttpFilter for Reshape {
    fn on_request_body(&self, _cx: &mut FilterCx<'_>, data: &mut Bytes, _end: bool) -> Flow {
        let keep = data.len().div_ceil(2);
        data.truncate(keep);
        Flow::Continue
    }

    fn on_response_body(&self, _cx: &mut FilterCx<'_>, data: &mut Bytes, _end: bool) -> Flow {
        *data = Bytes::from(data.to_ascii_uppercase());
        Flow::Continue
    }
}

#[test]
fn body_filters_change_chunks_and_flow_control_counts_what_came() {
    let (gw, addr, _b) = gateway_with(vec![native("reshape", Reshape)]);
    // Far more than the windows on both sides: if flow control released
    // only what was forwarded (half), the client's window would shut and
    // the upload stall.
    let body = Bytes::from(vec![b'a'; 4 << 20]);
    let sent = body.clone();
    let echoed = client(move || async move {
        let c = connect(addr).await;
        let upload = async { Some(request(&c, "POST", "/", &[], Some(sent), None).await) };
        let stalled = async {
            glommio::timer::sleep(Duration::from_secs(20)).await;
            None
        };
        futures_lite::future::or(upload, stalled)
            .await
            .expect("the upload does not stall")
            .expect("reply")
    });
    assert_eq!(echoed.status, 200);
    assert!(
        echoed.body.len() >= body.len() / 2 && echoed.body.len() < body.len(),
        "each chunk halved: {} of {}",
        echoed.body.len(),
        body.len()
    );
    assert!(echoed.body.iter().all(|&c| c == b'A'), "upper-cased");
    gw.shutdown();
}

/// Counts the streams it saw end, and their statuses.
#[derive(Default)]
struct CountLog {
    ended: Arc<AtomicU64>,
    statuses: Arc<AtomicU64>,
}

impl HttpFilter for CountLog {
    fn on_log(&self, _cx: &FilterCx<'_>, summary: &StreamSummary) {
        self.ended.fetch_add(1, Ordering::Relaxed);
        if let Some(s) = summary.status {
            self.statuses.fetch_add(u64::from(s), Ordering::Relaxed);
        }
    }
}

#[test]
fn every_stream_is_logged_once_and_response_filters_run_in_reverse() {
    let log = CountLog::default();
    let (ended, statuses) = (Arc::clone(&log.ended), Arc::clone(&log.statuses));
    let (gw, addr, _b) = gateway_with(vec![
        native("log", log),
        native(
            "first",
            AddHeader {
                name: "x-order",
                value: "first",
            },
        ),
        native(
            "second",
            AddHeader {
                name: "x-order",
                value: "second",
            },
        ),
    ]);
    let replies = client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for status in ["200", "404", "200"] {
            out.push(get(&c, "/", &[("x-status", status)]).await.expect("reply"));
        }
        out
    });
    let order: Vec<&str> = replies[0]
        .headers
        .get_all("x-order")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(order, ["second", "first"], "the way out is in reverse");
    wait_until(Duration::from_secs(5), "three streams logged", || {
        ended.load(Ordering::Relaxed) == 3
    });
    assert_eq!(statuses.load(Ordering::Relaxed), 200 + 404 + 200);
    gw.shutdown();
}
