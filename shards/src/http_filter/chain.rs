//! Running a connection manager's filters for one hook: in order on the way in, in reverse on the way out, until one answers.

use bytes::Bytes;
use engine::{HttpFilter as FilterConfig, HttpFilterConfig};

use super::router::Router;
use super::{
    FilterCx, Flow, HttpFilter, Native, Reply, RequestFlow, RequestHead, ResponseHead,
    StreamSummary, Trailers,
};

/// The filter a config entry runs (a native entry that is not a
/// [`Native`] runs nothing).
pub fn filter_of(config: &HttpFilterConfig) -> Option<&dyn HttpFilter> {
    match config {
        HttpFilterConfig::StatefulSession(s) => Some(s),
        HttpFilterConfig::Cors => Some(&super::cors::Cors),
        HttpFilterConfig::Csrf(p) => Some(&**p),
        HttpFilterConfig::Compressor(c) => Some(&**c),
        HttpFilterConfig::Fault(f) => Some(&**f),
        HttpFilterConfig::HealthCheck(h) => Some(&**h),
        HttpFilterConfig::LocalRateLimit(l) => Some(&**l),
        HttpFilterConfig::Rbac(r) => Some(&**r),
        HttpFilterConfig::ExtAuthz(a) => Some(a),
        HttpFilterConfig::GrpcWeb => Some(&super::grpc_web::GrpcWeb),
        HttpFilterConfig::GrpcHttp1Bridge {
            upgrade_protobuf_to_grpc: false,
        } => Some(&super::grpc_bridge::GrpcHttp1Bridge { upgrade: false }),
        HttpFilterConfig::GrpcHttp1Bridge {
            upgrade_protobuf_to_grpc: true,
        } => Some(&super::grpc_bridge::GrpcHttp1Bridge { upgrade: true }),
        HttpFilterConfig::Tracing(t) => Some(t),
        HttpFilterConfig::Decompressor(d) => Some(&**d),
        HttpFilterConfig::Native(n) => n.0.downcast_ref::<Native>().map(|n| &*n.0),
        HttpFilterConfig::Router => Some(&Router),
    }
}

/// Where the request-headers hook left a stream.
#[derive(Debug)]
pub enum Reached {
    /// Every filter continued, the router last: the stream goes upstream.
    Router,
    /// Filter `at` answered.
    Reply(Reply),
    /// Filter `at` paused the stream: the chain goes on after it.
    Pause { at: usize },
}

/// The filters that run: up to the router, which is the last (a filter
/// after it never runs; xDS validation refuses such a list, and a program
/// that builds one itself gets this).
fn active(filters: &[FilterConfig]) -> &[FilterConfig] {
    match filters
        .iter()
        .position(|f| matches!(f.config, HttpFilterConfig::Router))
    {
        Some(router) => &filters[..=router],
        None => filters,
    }
}

/// `on_request_headers` of the filters from `from` on.
pub fn request_headers(
    filters: &[FilterConfig],
    from: usize,
    cx: &mut FilterCx<'_>,
    head: &mut RequestHead<'_>,
) -> Reached {
    for (at, f) in active(filters).iter().enumerate().skip(from) {
        let Some(filter) = filter_of(&f.config) else {
            continue;
        };
        cx.at = at;
        match filter.on_request_headers(cx, head) {
            RequestFlow::Continue => {}
            RequestFlow::Reply(r) => return Reached::Reply(r),
            RequestFlow::Pause => return Reached::Pause { at },
        }
    }
    Reached::Router
}

/// Filter `at`'s `on_request_body_gathered` (it paused for the body),
/// then, if it goes on, the request headers hooks after it.
pub fn request_body_gathered(
    filters: &[FilterConfig],
    at: usize,
    cx: &mut FilterCx<'_>,
    head: &mut RequestHead<'_>,
    body: Bytes,
    whole: bool,
) -> Reached {
    if let Some(filter) = active(filters).get(at).and_then(|f| filter_of(&f.config)) {
        cx.at = at;
        match filter.on_request_body_gathered(cx, head, body, whole) {
            RequestFlow::Continue => {}
            RequestFlow::Reply(r) => return Reached::Reply(r),
            RequestFlow::Pause => return Reached::Pause { at },
        }
    }
    request_headers(filters, at + 1, cx, head)
}

/// Runs `hook` on each filter, in order or in reverse, until one answers.
fn run(
    filters: &[FilterConfig],
    reverse: bool,
    cx: &mut FilterCx<'_>,
    mut hook: impl FnMut(&dyn HttpFilter, &mut FilterCx<'_>) -> Flow,
) -> Option<Reply> {
    let filters = active(filters);
    let mut positions = 0..filters.len();
    let mut next = || match reverse {
        true => positions.next_back(),
        false => positions.next(),
    };
    while let Some(at) = next() {
        if let Some(filter) = filter_of(&filters[at].config) {
            cx.at = at;
            if let Flow::Reply(r) = hook(filter, cx) {
                return Some(r);
            }
        }
    }
    None
}

/// `on_request_body`, in order.
pub fn request_body(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    data: &mut Bytes,
    end: bool,
) -> Option<Reply> {
    run(filters, false, cx, |f, cx| f.on_request_body(cx, data, end))
}

/// `on_request_trailers`, in order.
pub fn request_trailers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    trailers: &mut Trailers,
) -> Option<Reply> {
    run(filters, false, cx, |f, cx| {
        if let reply @ Flow::Reply(_) = pass_body_before_trailers(f, cx, false) {
            return reply;
        }
        f.on_request_trailers(cx, trailers)
    })
}

/// The body bytes earlier filters' trailers hooks sent ahead of the
/// trailers (a compressor's end, gRPC-Web's trailer frame) through this
/// filter's body hook, as any chunk (a compressor after gRPC-Web
/// compresses its trailer frame too).
fn pass_body_before_trailers(f: &dyn HttpFilter, cx: &mut FilterCx<'_>, response: bool) -> Flow {
    let Some(mut data) = cx.before_trailers.take() else {
        return Flow::Continue;
    };
    let flow = match response {
        true => f.on_response_body(cx, &mut data, false),
        false => f.on_request_body(cx, &mut data, false),
    };
    if !data.is_empty() {
        cx.before_trailers = Some(data);
    }
    flow
}

/// `on_response_headers`, in reverse order.
pub fn response_headers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    head: &mut ResponseHead<'_>,
) -> Option<Reply> {
    run(filters, true, cx, |f, cx| f.on_response_headers(cx, head))
}

/// `on_response_body`, in reverse order.
pub fn response_body(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    data: &mut Bytes,
    end: bool,
) -> Option<Reply> {
    run(filters, true, cx, |f, cx| f.on_response_body(cx, data, end))
}

/// `on_response_trailers`, in reverse order.
pub fn response_trailers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    trailers: &mut Trailers,
) -> Option<Reply> {
    run(filters, true, cx, |f, cx| {
        if let reply @ Flow::Reply(_) = pass_body_before_trailers(f, cx, true) {
            return reply;
        }
        f.on_response_trailers(cx, trailers)
    })
}

/// `on_log` of every filter, in order.
pub fn log(filters: &[FilterConfig], cx: &mut FilterCx<'_>, summary: &StreamSummary) {
    for (at, f) in active(filters).iter().enumerate() {
        if let Some(filter) = filter_of(&f.config) {
            cx.at = at;
            filter.on_log(cx, summary);
        }
    }
}
