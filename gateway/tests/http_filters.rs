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
        // A name or value the gateway would refuse (a hop-by-hop field, a
        // CR or LF) is not added.
        let _ = head.append(self.name.as_bytes(), self.value.as_bytes());
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
    // 503 (no body, as Envoy 1.40), a local reply.
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
    assert!(missing.body.is_empty());
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
            reply
                .fields
                .append(b"x-why", b"x-deny")
                .expect("a valid field");
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
        // A local reply is logged with the status it went with.
        out.push(get(&c, "/nowhere", &[]).await.expect("reply"));
        out
    });
    let order: Vec<&str> = replies[0]
        .headers
        .get_all("x-order")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(order, ["second", "first"], "the way out is in reverse");
    assert_eq!(replies[3].status, 503);
    wait_until(Duration::from_secs(5), "four streams logged", || {
        ended.load(Ordering::Relaxed) == 4
    });
    assert_eq!(statuses.load(Ordering::Relaxed), 200 + 404 + 200 + 503);
    gw.shutdown();
}

/// Asks the backend for a status by adding `x-status` to the request
/// (the demo backend answers with it): request edits go upstream.
struct AskStatus(&'static str);

impl HttpFilter for AskStatus {
    fn on_request_headers(
        &self,
        _cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
    ) -> RequestFlow {
        head.set(b"x-status", self.0.as_bytes())
            .expect("a valid field");
        // The gateway's own fields are not a filter's to set.
        assert!(head.set(b"host", b"elsewhere").is_err());
        assert!(head.append(b":path", b"/elsewhere").is_err());
        RequestFlow::Continue
    }
}

/// Keeps each request's path as its per-stream state and answers it back
/// in `x-path`.
struct EchoPath;

impl HttpFilter for EchoPath {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let path = head.get(b":path").unwrap_or_default().to_vec();
        cx.set_state(path);
        RequestFlow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        if let Some(path) = cx.state::<Vec<u8>>() {
            let path = path.clone();
            let _ = head.set(b"x-path", &path);
        }
        Flow::Continue
    }
}

#[test]
fn request_edits_go_upstream_and_state_stays_with_its_stream() {
    let (gw, addr, _b) = gateway_with(vec![
        native("ask", AskStatus("201")),
        native("echo", EchoPath),
    ]);
    let replies = client(move || async move {
        let c = connect(addr).await;
        let paths = ["/a", "/b?x=1", "/c/d"];
        let all = paths.map(|p| {
            let c = c.clone();
            glommio::spawn_local(async move { get(&c, p, &[]).await.expect("reply") })
        });
        let mut out = Vec::new();
        for t in all {
            out.push(t.await);
        }
        out
    });
    for (reply, path) in replies.iter().zip(["/a", "/b?x=1", "/c/d"]) {
        assert_eq!(reply.status, 201, "the backend saw the filter's x-status");
        assert_eq!(
            reply.header("x-path"),
            Some(path),
            "each stream its own state"
        );
    }
    gw.shutdown();
}

/// Replaces a 503 from upstream with its own 502 before the head goes.
struct NoUpstream503;

impl HttpFilter for NoUpstream503 {
    fn on_response_headers(&self, _cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        if head.status() == 503 && !head.is_local() {
            return Flow::Reply(Reply::new(502, "refused by filter\n", "UMSDR"));
        }
        Flow::Continue
    }
}

#[test]
fn a_response_filter_answers_before_the_head_goes_out() {
    let (gw, addr, _b) = gateway_with(vec![native("no503", NoUpstream503)]);
    let (refused, ok) = client(move || async move {
        let c = connect(addr).await;
        let refused = get(&c, "/", &[("x-status", "503")]).await.expect("reply");
        let ok = get(&c, "/", &[]).await.expect("reply");
        (refused, ok)
    });
    assert_eq!(refused.status, 502);
    assert_eq!(refused.body, Bytes::from_static(b"refused by filter\n"));
    assert_eq!(
        refused.header("x-backend"),
        None,
        "none of the upstream's head"
    );
    assert_eq!(ok.status, 200);
    gw.shutdown();
}

/// Pauses every request, then denies those with `x-deny: yes` once its
/// "call" is done (an authorisation filter's shape).
struct DenyLater;

impl HttpFilter for DenyLater {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let deny = head.get(b"x-deny") == Some(b"yes");
        let resume = cx.pause();
        glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(20)).await;
            match deny {
                true => resume.reply(Reply::new(403, "denied after the call\n", "UAEX")),
                false => resume.resume(),
            }
        })
        .detach();
        RequestFlow::Pause
    }
}

/// Pauses without asking for the handle that resumes: a bug of the
/// filter's, which must not hang the stream.
struct ForgetfulPause;

impl HttpFilter for ForgetfulPause {
    fn on_request_headers(
        &self,
        _cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
    ) -> RequestFlow {
        match head.get(b"x-forget") {
            Some(_) => RequestFlow::Pause,
            None => RequestFlow::Continue,
        }
    }
}

#[test]
fn a_paused_filter_may_answer_when_it_resumes_and_a_pause_without_a_handle_fails() {
    let (gw, addr, _b) = gateway_with(vec![
        native("forget", ForgetfulPause),
        native("deny", DenyLater),
    ]);
    let (denied, passed, forgot) = client(move || async move {
        let c = connect(addr).await;
        let denied = get(&c, "/", &[("x-deny", "yes")]).await.expect("reply");
        let passed = get(&c, "/", &[]).await.expect("reply");
        let forgot = get(&c, "/", &[("x-forget", "1")]).await.expect("reply");
        (denied, passed, forgot)
    });
    assert_eq!(denied.status, 403);
    assert_eq!(denied.body, Bytes::from_static(b"denied after the call\n"));
    assert_eq!(passed.status, 200);
    assert_eq!(passed.header("x-backend"), Some("b"));
    assert_eq!(forgot.status, 500);
    gw.shutdown();
}

#[test]
fn a_body_held_by_a_pause_goes_through_every_filter_after_it_resumes() {
    // Reshape sits after the pausing filter: the chunks that came during
    // the pause reach it once the chain passed its head hook.
    let delay = Duration::from_millis(100);
    let (gw, addr, _b) = gateway_with(vec![
        native("delay", Delay { delay }),
        native("reshape", Reshape),
    ]);
    let body = Bytes::from(vec![b'a'; 200_000]);
    let echoed = client(move || async move {
        let c = connect(addr).await;
        request(&c, "POST", "/", &[], Some(body), None)
            .await
            .expect("reply")
    });
    assert_eq!(echoed.status, 200);
    assert!(
        echoed.body.len() < 200_000 && echoed.body.len() >= 100_000,
        "halved: {}",
        echoed.body.len()
    );
    assert!(echoed.body.iter().all(|&c| c == b'A'));
    gw.shutdown();
}
