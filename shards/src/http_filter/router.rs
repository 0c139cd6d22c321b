//! The router (`envoy.filters.http.router`), the last filter: the route's cluster (a weighted pick, or the one a session names) and its host (the override host if it may serve, else the cluster's policy, skipping ejected hosts); each refusal a local reply. The phases then open the upstream stream on that host's pool.

use bytes::Bytes;
use engine::lb::hash_policy::{request_hash, HashInput, NewCookie};
use engine::redirect::{self, redirect_location, RedirectRequest};
use engine::route::RequestView;
use engine::{DirectResponse, Redirect, RouteAction, RouteMatch};
use h2wire::message::HeaderList;

use super::header_mutation::{self, FormatInput, Head};
use super::{FilterCx, Flow, HttpFilter, Pick, Reply, RequestFlow, RequestHead, ResponseHead};
use crate::local_reply::LocalReply;

/// The router filter: no config of its own that we run.
#[derive(Debug, Clone, Copy)]
pub struct Router;

impl HttpFilter for Router {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let shard = cx.shard;
        let Some(route) = cx.route else {
            shard.stats.downstream.rq_no_route.inc();
            return RequestFlow::Reply(Reply::from(LocalReply::NoRoute));
        };
        let action = match &route.action {
            RouteAction::Forward(action) => action,
            RouteAction::Redirect(r) => {
                shard.stats.downstream.rq_redirect.inc();
                return RequestFlow::Reply(redirect_reply(r, &route.matcher, head.list, cx));
            }
            RouteAction::DirectResponse(d) => {
                shard.stats.downstream.rq_direct_response.inc();
                return RequestFlow::Reply(direct_reply(d, &route.matcher, head.list, cx));
            }
        };
        let session = cx.override_host.as_ref();
        // A `cluster_header` field absent, empty or not UTF-8 names none.
        let list = head.list;
        let field = |name: &str| std::str::from_utf8(list.get(name.as_bytes())?).ok();
        let cluster_name = shard.choose_cluster(action, session, cx.snapshot, field);
        let Some(cluster) = cx.snapshot.cluster(cluster_name) else {
            shard.stats.rq_unknown_cluster.inc();
            let status = action.cluster_not_found_status;
            return RequestFlow::Reply(Reply::new(status, "", LocalReply::UnknownCluster.flag()));
        };
        let in_flight = cx.in_flight;
        let mut new_cookie = None;
        let hash = || {
            let input = HashView {
                head: head.list,
                peer: cx.conn.peer,
            };
            // Formatted only if a cookie is made.
            let (peer, local) = (cx.conn.peer, cx.conn.local);
            let conn_key = || format!("{peer}{local}");
            let (hash, cookie) = request_hash(&action.hash_policy, &input, conn_key);
            new_cookie = cookie;
            hash
        };
        let chosen = shard.choose_host(cluster, session, in_flight, hash);
        if let Some(cookie) = new_cookie {
            // Set on the response (see `on_response_headers`).
            cx.set_state(cookie);
        }
        match chosen {
            Ok(host) => {
                let host_stats = shard.stats.hosts.host(host.id);
                host_stats.rq_total.inc();
                host_stats.rq_active.inc();
                cx.pick = Some(Pick { cluster, host });
                if !route.headers.request.is_empty() {
                    // Envoy's formatters see no upstream host yet here.
                    let input = FormatInput {
                        peer: cx.conn.peer,
                        upstream: None,
                        protocol: cx.conn.protocol,
                        status: None,
                        sni: cx.conn.sni,
                    };
                    let refused = header_mutation::apply(
                        &route.headers.request,
                        Head::Request(head.list),
                        head.edits,
                        &input,
                    );
                    shard
                        .stats
                        .downstream
                        .header_values_refused
                        .add(refused.into());
                }
                RequestFlow::Continue
            }
            Err(reply) => RequestFlow::Reply(Reply::from(reply)),
        }
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        if let Some(cookie) = cx.state::<NewCookie>() {
            let _ = head.append(b"set-cookie", cookie.set_cookie.as_bytes());
        }
        Flow::Continue
    }
}

/// What a redirect reads of `head`: its scheme is the
/// `x-forwarded-proto` it goes on with (the gateway's, else the client's).
fn redirect_request<'a>(head: &'a HeaderList, cx: &FilterCx<'_>) -> RedirectRequest<'a> {
    RedirectRequest {
        authority: text(head.get(b":authority").or_else(|| head.get(b"host"))).unwrap_or(""),
        path: text(head.get(b":path")).unwrap_or("/"),
        forwarded_proto: match cx.conn.forwarded_proto {
            Some(set) => std::str::from_utf8(set).unwrap_or("http"),
            None => text(head.get(b"x-forwarded-proto")).unwrap_or("http"),
        },
    }
}

/// A reply of `status` with a `location` (a redirect's, or a 3xx direct
/// response's), no body (Envoy's).
fn located_reply(status: u16, location: &str) -> Reply {
    let mut reply = Reply::new(status, "", "");
    if reply.fields.set(b"location", location.as_bytes()).is_err() {
        // Only from a request whose own parts carry control characters
        // (the config's are checked at load): refused, not reflected.
        return Reply::from(LocalReply::BadRequest);
    }
    reply
}

/// A route's `redirect`: its status and `location`, no body.
fn redirect_reply(
    redirect: &Redirect,
    matcher: &RouteMatch,
    head: &HeaderList,
    cx: &FilterCx<'_>,
) -> Reply {
    let location = redirect_location(redirect, matcher, &redirect_request(head, cx));
    located_reply(redirect.status, &location)
}

/// A route's `direct_response`: its status and body, shared with the
/// snapshot (no copy). A 3xx points at the request's own URL, as Envoy's.
fn direct_reply(
    d: &DirectResponse,
    matcher: &RouteMatch,
    head: &HeaderList,
    cx: &FilterCx<'_>,
) -> Reply {
    let mut reply = if (300..400).contains(&d.status) {
        let location = redirect_location(&redirect::SELF, matcher, &redirect_request(head, cx));
        located_reply(d.status, &location)
    } else {
        Reply::new(d.status, "", "")
    };
    if let Some(body) = &d.body {
        reply.body = Bytes::clone(body);
    }
    reply
}

/// What a route's `hash_policy` reads of a request.
struct HashView<'a> {
    head: &'a HeaderList,
    peer: std::net::SocketAddr,
}

impl HashInput for HashView<'_> {
    fn header_values(&self, name: &str) -> Vec<&[u8]> {
        // HTTP/1.1's `host` arrives as `:authority`.
        let names: &[&[u8]] = match name {
            "host" | ":authority" => &[b":authority", b"host"],
            n => &[n.as_bytes()],
        };
        self.head
            .iter()
            .filter(|(n, _, _)| names.contains(n))
            .map(|(_, v, _)| v)
            .collect()
    }
    fn cookie(&self, name: &str) -> Option<&[u8]> {
        engine::session::find_cookie(self.head.get_all(b"cookie"), name)
    }
    fn path(&self) -> &[u8] {
        self.head.get(b":path").unwrap_or(b"/")
    }
    fn peer(&self) -> std::net::SocketAddr {
        self.peer
    }
}

/// Lets the engine's route matcher read a request head without copying it.
pub(crate) struct HeadView<'a>(pub &'a HeaderList);

/// A field's value as text, if it is UTF-8.
pub(crate) fn text(v: Option<&[u8]>) -> Option<&str> {
    v.and_then(|v| std::str::from_utf8(v).ok())
}

impl RequestView for HeadView<'_> {
    fn authority(&self) -> &str {
        text(self.0.get(b":authority").or_else(|| self.0.get(b"host"))).unwrap_or("")
    }
    fn path(&self) -> &str {
        text(self.0.get(b":path")).unwrap_or("/")
    }
    fn method(&self) -> &str {
        text(self.0.get(b":method")).unwrap_or("")
    }
    fn header(&self, name: &str) -> Option<&str> {
        text(self.0.get(name.as_bytes()))
    }
}
