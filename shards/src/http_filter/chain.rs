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

/// `on_request_headers` of the filters from `from` on.
pub fn request_headers(
    filters: &[FilterConfig],
    from: usize,
    cx: &mut FilterCx<'_>,
    head: &mut RequestHead<'_>,
) -> Reached {
    for (at, f) in filters.iter().enumerate().skip(from) {
        let Some(filter) = filter_of(&f.config) else {
            continue;
        };
        match filter.on_request_headers(cx, head) {
            RequestFlow::Continue => {}
            RequestFlow::Reply(r) => return Reached::Reply(r),
            RequestFlow::Pause => return Reached::Pause { at },
        }
    }
    Reached::Router
}

/// Runs `hook` on each filter in `order` until one answers.
fn run<'f>(
    filters: impl Iterator<Item = &'f FilterConfig>,
    mut hook: impl FnMut(&dyn HttpFilter) -> Flow,
) -> Option<Reply> {
    for f in filters {
        if let Some(filter) = filter_of(&f.config) {
            if let Flow::Reply(r) = hook(filter) {
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
    run(filters.iter(), |f| f.on_request_body(cx, data, end))
}

/// `on_request_trailers`, in order.
pub fn request_trailers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    trailers: &mut Trailers,
) -> Option<Reply> {
    run(filters.iter(), |f| f.on_request_trailers(cx, trailers))
}

/// `on_response_headers`, in reverse order.
pub fn response_headers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    head: &mut ResponseHead<'_>,
) -> Option<Reply> {
    run(filters.iter().rev(), |f| f.on_response_headers(cx, head))
}

/// `on_response_body`, in reverse order.
pub fn response_body(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    data: &mut Bytes,
    end: bool,
) -> Option<Reply> {
    run(filters.iter().rev(), |f| f.on_response_body(cx, data, end))
}

/// `on_response_trailers`, in reverse order.
pub fn response_trailers(
    filters: &[FilterConfig],
    cx: &mut FilterCx<'_>,
    trailers: &mut Trailers,
) -> Option<Reply> {
    run(filters.iter().rev(), |f| {
        f.on_response_trailers(cx, trailers)
    })
}

/// `on_log` of every filter, in order.
pub fn log(filters: &[FilterConfig], cx: &FilterCx<'_>, summary: &StreamSummary) {
    for f in filters {
        if let Some(filter) = filter_of(&f.config) {
            filter.on_log(cx, summary);
        }
    }
}
