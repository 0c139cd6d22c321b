//! The CSRF filter (Envoy's `envoy.filters.http.csrf`): a state-changing request (POST, PUT, DELETE, PATCH) whose source origin (`Origin`, else `Referer`) is missing, or neither its destination (`host`) nor one of the policy's additional origins, is refused with 403.

use engine::CsrfPolicy;

use super::{FilterCx, HttpFilter, Reply, RequestFlow, RequestHead};

/// The methods that change state, the ones checked.
fn changes_state(method: &[u8]) -> bool {
    matches!(method, b"POST" | b"PUT" | b"DELETE" | b"PATCH")
}

/// `host[:port]` of an absolute URL (`scheme://[user@]host[:port]/…`),
/// the port as written; a value that is no such URL (Envoy's parser
/// refuses it: no scheme, no host, a fragment) is taken as it is.
pub(crate) fn host_and_port(value: &[u8]) -> &[u8] {
    let Some(at) = value.windows(3).position(|w| w == b"://") else {
        return value;
    };
    if value.contains(&b'#') {
        return value;
    }
    let rest = &value[at + 3..];
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?'))
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    match host.is_empty() {
        true => value,
        false => host,
    }
}

/// What the check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    /// No `Origin` nor `Referer`.
    Missing,
    Invalid,
}

fn verdict(policy: &CsrfPolicy, head: &RequestHead<'_>) -> Verdict {
    let source = match head.get(b"origin").filter(|o| !o.is_empty()) {
        // An opaque origin (`null`, RFC 6454) says nothing of the source.
        Some(b"null") => return Verdict::Missing,
        Some(o) => host_and_port(o),
        // Envoy drops a `referer` with a fragment before filters run.
        None => match head
            .get(b"referer")
            .filter(|r| !r.is_empty() && !r.contains(&b'#'))
        {
            Some(r) => host_and_port(r),
            None => return Verdict::Missing,
        },
    };
    let target = head
        .get(b":authority")
        .or_else(|| head.get(b"host"))
        .map(host_and_port)
        .unwrap_or_default();
    if source == target {
        return Verdict::Valid;
    }
    let Ok(source) = std::str::from_utf8(source) else {
        return Verdict::Invalid;
    };
    match policy.additional_origins.iter().any(|m| m.matches(source)) {
        true => Verdict::Valid,
        false => Verdict::Invalid,
    }
}

impl HttpFilter for CsrfPolicy {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let policy = match cx.route.and_then(|r| r.per_filter.csrf.as_ref()) {
            Some(per_route) => match per_route.config() {
                Some(p) => &**p,
                None => return RequestFlow::Continue,
            },
            None => self,
        };
        let enforced = policy.filter_enabled.includes(cx.shard.random_u64());
        let shadow = policy
            .shadow_enabled
            .is_some_and(|f| f.includes(cx.shard.random_u64()));
        if !enforced && !shadow {
            return RequestFlow::Continue;
        }
        if !head.get(b":method").is_some_and(changes_state) {
            return RequestFlow::Continue;
        }
        let verdict = verdict(policy, head);
        // Gateway-wide (`/stats`), and its connection manager's (Envoy's
        // `http.<stat_prefix>.csrf.*`).
        let stats = cx.counters::<crate::stats::CsrfStats>();
        match verdict {
            Verdict::Valid => stats.inc(|s| &s.request_valid),
            Verdict::Missing => stats.inc(|s| &s.missing_source_origin),
            Verdict::Invalid => stats.inc(|s| &s.request_invalid),
        }
        if verdict == Verdict::Valid {
            return RequestFlow::Continue;
        }
        if !enforced {
            return RequestFlow::Continue;
        }
        RequestFlow::Reply(Reply::new(403, "Invalid origin", ""))
    }
}
