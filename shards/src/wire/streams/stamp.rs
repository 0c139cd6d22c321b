//! The connection manager's own edits, Envoy's `mutateRequestHeaders` and `mutateResponseHeaders`: before routing, a request's path and host normalized, the client it comes from, its `x-request-id` and `via`; on every response head, local replies included, `server`, `via` and `x-request-id`.
//!
//! A request's own fields are rewritten in its head, so the route
//! matchers, the filters, the formatters and the access log all see what
//! goes upstream. A head is rebuilt only when a field it already has
//! changes; a field it lacks is appended (no copy).

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use engine::forwarding::{self, Client};
use engine::headers::{append_forwarded_for, port_colon, uuid_v4};
use engine::path::{self, Normalized};
use engine::{HttpConnectionManager, ServerHeaderTransformation, StripHostPort};
use h2wire::message::HeaderList;

use crate::http_filter::{HeaderEdits, Reply};
use crate::stats::DownstreamStats;

/// `x-request-id`.
pub(super) const REQUEST_ID: &[u8] = b"x-request-id";

/// Who a request's client is, for what goes upstream with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ClientClass {
    /// An internal client: `x-envoy-internal: true`, its `x-envoy-*`
    /// fields kept (the router's own consumed).
    Internal,
    /// Neither internal nor at the edge: Envoy's internal fields removed.
    #[default]
    External,
    /// An external client of a `use_remote_address` listener: also the
    /// edge-only fields removed, and `x-envoy-external-address` ours.
    Edge,
}

impl ClientClass {
    fn of(c: &Client) -> Self {
        match (c.internal, c.edge) {
            (true, _) => Self::Internal,
            (false, true) => Self::Edge,
            (false, false) => Self::External,
        }
    }
}

/// What the request side settled.
pub(super) struct Stamped {
    pub client: Client,
    pub class: ClientClass,
    /// The `x-forwarded-for` we send, when we append the peer.
    pub forwarded_for: Option<Box<[u8]>>,
}

/// The request side, before routing: `Err` is the reply a path
/// normalization makes (307 to the normalized path, or 400).
pub(super) fn request(
    hcm: &HttpConnectionManager,
    head: &mut HeaderList,
    (peer, local_port): (SocketAddr, u16),
    (grpc, id_bits): (bool, impl FnOnce() -> u128),
    stats: &DownstreamStats,
) -> Result<Stamped, Box<Reply>> {
    let refuse = || {
        stats.rq_failed_path_normalization.inc();
        Err(Box::new(Reply::new(400, "", "")))
    };
    let raw = head.get(b":path").unwrap_or(b"/");
    // Envoy 1.40 refuses a fragment in the path, whatever its settings.
    if raw.contains(&b'#') {
        return refuse();
    }
    if hcm.path_normalization.is_active() {
        // Not UTF-8: no canonical form (Envoy's canonicalizer fails too).
        let Ok(path) = std::str::from_utf8(raw) else {
            return refuse();
        };
        match path::normalize(&hcm.path_normalization, path) {
            Normalized::Unchanged => {}
            Normalized::Rewritten(p) => set_field(head, b":path", p.as_bytes()),
            // A gRPC client follows no redirect: Envoy refuses it instead.
            Normalized::Redirect(_) if grpc => return refuse(),
            Normalized::Redirect(p) => {
                stats.rq_redirected_with_normalized_path.inc();
                let mut reply = Reply::new(307, "", "");
                reply.fields.set_checked(b"location", p.as_bytes());
                return Err(Box::new(reply));
            }
            Normalized::Reject => return refuse(),
        }
    }
    if hcm.strip_host_port != StripHostPort::None || hcm.strip_trailing_host_dot {
        for name in [&b":authority"[..], b"host"] {
            let Some(a) = head.get(name) else { continue };
            let mut a = Cow::Borrowed(a);
            if let Some(host) = without_port(&a, hcm.strip_host_port, local_port) {
                a = Cow::Owned(host.to_vec());
            }
            if hcm.strip_trailing_host_dot {
                if let Some(host) = without_trailing_dot(&a) {
                    a = Cow::Owned(host);
                }
            }
            if let Cow::Owned(a) = a {
                set_field(head, name, &a);
            }
        }
    }
    // One pass over the head for what the rest reads.
    let (mut xff_fields, mut has_id) = (0u32, false);
    let mut xff = None;
    for (n, v, _) in head.iter() {
        if n == b"x-forwarded-for" {
            xff_fields += 1;
            xff = xff.or(Some(v));
        }
        has_id |= n == REQUEST_ID;
    }
    let xff = match xff_fields {
        0 | 1 => xff.map(|v| Cow::Borrowed(std::str::from_utf8(v).unwrap_or(""))),
        _ => joined(head, b"x-forwarded-for"),
    };
    let client = forwarding::client(&hcm.trust, peer, xff.as_deref());
    // What goes upstream as `x-forwarded-for`, made from the one read.
    let forwarded_for = hcm.trust.appends_forwarded_for().then(|| {
        append_forwarded_for(xff.as_deref(), peer.ip().to_canonical())
            .into_bytes()
            .into_boxed_slice()
    });
    drop(xff);
    let class = ClientClass::of(&client);
    if hcm.append_x_forwarded_port {
        // As `x-forwarded-proto`: the edge's own, else the client's kept.
        let theirs = head.get(b"x-forwarded-port").is_some();
        if !theirs || hcm.trust.overwrites_forwarded_proto() {
            set_field(head, b"x-forwarded-port", local_port.to_string().as_bytes());
        }
    }
    let ids = &hcm.request_id;
    if ids.generate {
        let force = class == ClientClass::Edge && !ids.preserve_external;
        if force || !has_id {
            set_field(head, REQUEST_ID, &uuid_v4(id_bits()));
        }
    }
    if let Some(via) = &hcm.via {
        let value = match joined(head, b"via") {
            Some(v) => format!("{v}, {via}"),
            None => via.clone(),
        };
        set_field(head, b"via", value.as_bytes());
    }
    Ok(Stamped {
        client,
        class,
        forwarded_for,
    })
}

/// The values of every `name` field, joined with commas as Envoy joins
/// repeated fields (`None`: no such field).
pub(super) fn joined<'a>(head: &'a HeaderList, name: &'a [u8]) -> Option<Cow<'a, str>> {
    let mut values = head
        .get_all(name)
        .map(|v| std::str::from_utf8(v).unwrap_or(""));
    let first = values.next()?;
    match values.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut all = format!("{first},{second}");
            for v in values {
                all.push(',');
                all.push_str(v);
            }
            Some(Cow::Owned(all))
        }
    }
}

/// Makes `name` one field of `value`: appended if the head has none, else
/// in the place of the first (and the others dropped).
pub(super) fn set_field(head: &mut HeaderList, name: &[u8], value: &[u8]) {
    if head.get(name).is_none() {
        return head.push(name, value, false);
    }
    let mut new = HeaderList::pooled();
    let mut done = false;
    for (n, v, never) in head.iter() {
        match (n == name, done) {
            (false, _) => new.push(n, v, never),
            (true, false) => {
                new.push(n, value, never);
                done = true;
            }
            (true, true) => {}
        }
    }
    std::mem::replace(head, new).recycle();
}

/// `authority` without its port, if `strip` takes it off (`Matching`:
/// only `local_port`). An IPv6 literal keeps its brackets.
fn without_port(authority: &[u8], strip: StripHostPort, local_port: u16) -> Option<&[u8]> {
    let colon = port_colon(authority)?;
    let (host, port) = (&authority[..colon], &authority[colon + 1..]);
    let port: u16 = std::str::from_utf8(port).ok()?.parse().ok()?;
    match strip {
        StripHostPort::Any => Some(host),
        StripHostPort::Matching if port == local_port => Some(host),
        _ => None,
    }
}

/// `authority` without the dot that ends its host (`example.com.:80` →
/// `example.com:80`), if it has one.
fn without_trailing_dot(authority: &[u8]) -> Option<Vec<u8>> {
    let host_end = port_colon(authority).unwrap_or(authority.len());
    (host_end > 1 && authority[host_end - 1] == b'.').then(|| {
        let mut out = authority[..host_end - 1].to_vec();
        out.extend_from_slice(&authority[host_end..]);
        out
    })
}

/// The connection manager's response settings, taken once per
/// connection (they are the listener's: a change makes a new chain).
#[derive(Debug, Default)]
pub(crate) struct ResponseStamp {
    /// `server`, and whether it replaces the upstream's.
    server: Option<(Box<[u8]>, bool)>,
    via: Option<Box<str>>,
    /// `always_set_request_id_in_response`.
    pub request_id: bool,
}

impl ResponseStamp {
    pub fn of(hcm: &HttpConnectionManager) -> Self {
        let s = &hcm.server_header;
        let server = match s.transformation {
            ServerHeaderTransformation::Overwrite => Some((s.name.as_bytes().into(), true)),
            ServerHeaderTransformation::AppendIfAbsent => Some((s.name.as_bytes().into(), false)),
            ServerHeaderTransformation::PassThrough => None,
        };
        Self {
            server,
            via: hcm.via.as_deref().map(Box::from),
            request_id: hcm.request_id.in_response,
        }
    }

    /// Edits a response head (`original`: the upstream's, `None` for a
    /// local reply), after the filters, as Envoy does last.
    pub fn response(
        &self,
        original: Option<&HeaderList>,
        edits: &mut HeaderEdits,
        request_id: Option<&[u8]>,
    ) {
        let theirs = |name: &[u8]| original.and_then(|h| h.get(name));
        if let Some((name, overwrite)) = &self.server {
            if *overwrite || edits.get(b"server", theirs(b"server")).is_none() {
                edits.set_checked(b"server", name);
            }
        }
        if let Some(via) = &self.via {
            // Every `via` the response has (the upstream's unless removed,
            // then those added), joined as Envoy joins repeated fields.
            let kept = original
                .filter(|_| !edits.removes(b"via"))
                .into_iter()
                .flat_map(|h| h.get_all(b"via"));
            let added = edits.added().filter(|(n, _)| *n == b"via").map(|(_, v)| v);
            let mut value = Vec::new();
            for v in kept.chain(added) {
                value.extend_from_slice(v);
                value.push(b',');
            }
            if value.pop().is_some() {
                value.push(b',');
                value.push(b' ');
            }
            value.extend_from_slice(via.as_bytes());
            edits.set_checked(b"via", &value);
        }
        if let Some(id) = request_id.filter(|_| self.request_id) {
            edits.set_checked(REQUEST_ID, id);
        }
    }
}

/// Envoy's headers the router reads and removes, whatever the client.
const ROUTER_CONSUMED: [&[u8]; 11] = [
    b"x-envoy-retry-on",
    b"x-envoy-retry-grpc-on",
    b"x-envoy-max-retries",
    b"x-envoy-retriable-status-codes",
    b"x-envoy-retriable-header-names",
    b"x-envoy-upstream-rq-timeout-ms",
    b"x-envoy-upstream-rq-per-try-timeout-ms",
    b"x-envoy-upstream-rq-timeout-alt-response",
    b"x-envoy-hedge-on-per-try-timeout",
    b"x-envoy-upstream-alt-stat-name",
    b"x-envoy-expected-rq-timeout-ms",
];

/// Removed from requests that are not internal (Envoy's
/// `cleanInternalHeaders`).
const NOT_INTERNAL: [&[u8]; 3] = [
    b"x-envoy-force-trace",
    b"x-envoy-ip-tags",
    b"x-envoy-original-url",
];

/// Removed from edge requests only.
const EDGE_ONLY: [&[u8]; 4] = [
    b"x-envoy-decorator-operation",
    b"x-envoy-downstream-service-cluster",
    b"x-envoy-downstream-service-node",
    b"x-envoy-original-path",
];

/// `x-envoy-internal`: ours, never a client's.
pub(super) const INTERNAL: &[u8] = b"x-envoy-internal";
/// `x-envoy-external-address`: ours at the edge.
pub(super) const EXTERNAL_ADDRESS: &[u8] = b"x-envoy-external-address";

/// Whether a client's field named `name` goes upstream for a request of
/// this class (Envoy's internal headers and `x-forwarded-client-cert`,
/// which Envoy's default `SANITIZE` removes, do not).
pub(super) fn client_field_kept(name: &[u8], class: ClientClass) -> bool {
    if name == b"x-forwarded-client-cert" {
        return false;
    }
    if !name.starts_with(b"x-envoy-") {
        return true;
    }
    let listed = |list: &[&[u8]]| list.contains(&name);
    !(name == INTERNAL
        || listed(&ROUTER_CONSUMED)
        || (class != ClientClass::Internal && listed(&NOT_INTERNAL))
        || (class == ClientClass::Edge && (name == EXTERNAL_ADDRESS || listed(&EDGE_ONLY))))
}

/// An internal request's `x-envoy-upstream-rq-timeout-ms` or
/// `x-envoy-upstream-rq-per-try-timeout-ms`: milliseconds, 0 for none.
pub(super) fn millis(head: &HeaderList, name: &[u8]) -> Option<Option<std::time::Duration>> {
    let ms: u64 = std::str::from_utf8(head.get(name)?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((ms > 0).then(|| std::time::Duration::from_millis(ms)))
}

/// The address written as `x-envoy-external-address` (no port).
pub(super) fn external_address(ip: IpAddr, buf: &mut [u8; 48]) -> &[u8] {
    use std::io::Write;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{ip}");
    let n = cursor.position() as usize;
    &buf[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_off_as_configured() {
        use StripHostPort::{Any, Matching};
        assert_eq!(
            without_port(b"example.com:8080", Matching, 8080),
            Some(&b"example.com"[..])
        );
        assert_eq!(without_port(b"example.com:99", Matching, 8080), None);
        assert_eq!(
            without_port(b"example.com:99", Any, 8080),
            Some(&b"example.com"[..])
        );
        assert_eq!(without_port(b"example.com", Any, 8080), None);
        assert_eq!(without_port(b"[::1]:443", Any, 0), Some(&b"[::1]"[..]));
        assert_eq!(without_port(b"::1", Any, 0), None);
        assert_eq!(without_port(b"h:x", Any, 0), None);
    }

    #[test]
    fn trailing_host_dots_come_off() {
        let strip =
            |a: &str| without_trailing_dot(a.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(strip("example.com."), Some("example.com".into()));
        assert_eq!(strip("example.com.:8080"), Some("example.com:8080".into()));
        assert_eq!(strip("example.com:8080"), None);
        assert_eq!(strip("example.com"), None);
        assert_eq!(strip("."), None);
        assert_eq!(strip("[::1]:80"), None);
    }

    #[test]
    fn set_field_replaces_in_place_or_appends() {
        let mut h = HeaderList::new();
        h.push(b":path", b"/a", false);
        h.push(b"via", b"1", false);
        h.push(b"x", b"y", false);
        h.push(b"via", b"2", false);
        set_field(&mut h, b"via", b"1,2, gw");
        set_field(&mut h, b"x-request-id", b"id");
        let got: Vec<_> = h.iter().map(|(n, v, _)| (n.to_vec(), v.to_vec())).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            (":path", "/a"),
            ("via", "1,2, gw"),
            ("x", "y"),
            ("x-request-id", "id"),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn envoy_internal_fields_stay_with_internal_clients() {
        use ClientClass::*;
        for (name, internal, external, edge) in [
            ("x-envoy-retry-on", false, false, false),
            ("x-envoy-upstream-rq-timeout-ms", false, false, false),
            ("x-envoy-internal", false, false, false),
            ("x-envoy-force-trace", true, false, false),
            ("x-envoy-decorator-operation", true, true, false),
            ("x-envoy-original-path", true, true, false),
            ("x-envoy-external-address", true, true, false),
            ("x-envoy-foo", true, true, true),
            ("x-forwarded-client-cert", false, false, false),
            ("x-request-id", true, true, true),
        ] {
            let n = name.as_bytes();
            assert_eq!(
                (
                    client_field_kept(n, Internal),
                    client_field_kept(n, External),
                    client_field_kept(n, Edge)
                ),
                (internal, external, edge),
                "{name}"
            );
        }
    }
}
