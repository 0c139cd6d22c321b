//! The HTTP service's check: the request's method, path (after `path_prefix`), host and chosen fields as a request of its own; its answer read as Envoy 1.40 reads it (200 allows, another status below 500 denies, a 5xx is an error).

use engine::headers::is_hop_by_hop;
use engine::{ExtAuthz, HttpAuthz};

use super::{matches_any, CheckBody, ResponseField, Verdict, MAX_ANSWER_BYTES};
use crate::http_filter::call::{CallField, CallOutcome, CallRequest};
use crate::http_filter::{HeaderEdits, Reply, RequestHead};

/// The check for the request whose head is `head`: the client's method
/// and path, its `host`, `authorization` and the fields `allowed_headers`
/// takes, joined by name (as Envoy joins them unless
/// `encode_raw_headers`), `headers_to_add` over them, and Envoy's marks.
pub(super) fn request(
    config: &ExtAuthz,
    h: &HttpAuthz,
    head: &RequestHead<'_>,
    body: CheckBody,
) -> CallRequest {
    let method = head.get(b":method").unwrap_or(b"GET");
    let mut path = Vec::with_capacity(h.path_prefix.len() + 64);
    path.extend_from_slice(h.path_prefix.as_bytes());
    path.extend_from_slice(head.get(b":path").unwrap_or(b"/"));
    let authority = head
        .get(b":authority")
        .or_else(|| head.get(b"host"))
        .unwrap_or(h.uri_authority.as_bytes());
    let mut fields: Vec<CallField> = Vec::new();
    let edited = head.edits.apply(head.list.iter().map(|(n, v, _)| (n, v)));
    for (name, value) in edited {
        // Only gRPC's `te` is a field a check may carry (another would
        // make an HTTP/2 service refuse the call).
        if !sent(config, name) || (name == b"te" && !engine::headers::keep_te(value)) {
            continue;
        }
        match fields.iter_mut().find(|(n, _)| **n == *name) {
            Some((_, joined)) if !config.encode_raw_headers => {
                let mut v = joined.to_vec();
                v.push(b',');
                v.extend_from_slice(value);
                *joined = v.into_boxed_slice();
            }
            _ => fields.push((name.into(), value.into())),
        }
    }
    for (name, value) in &h.headers_to_add {
        fields.retain(|(n, _)| **n != *name.as_bytes());
        fields.push((name.as_bytes().into(), value.as_bytes().into()));
    }
    if body.data.is_empty() {
        // Envoy's check says it has no body; one with a body gets its
        // length where it is sent.
        fields.push((Box::from(&b"content-length"[..]), Box::from(&b"0"[..])));
    }
    if body.present {
        let partial: &[u8] = if body.partial { b"true" } else { b"false" };
        fields.push((Box::from(&b"x-envoy-auth-partial-body"[..]), partial.into()));
    }
    fields.push((Box::from(&b"x-envoy-internal"[..]), Box::from(&b"true"[..])));
    let ms = h.timeout.as_millis().to_string();
    fields.push((
        Box::from(&b"x-envoy-expected-rq-timeout-ms"[..]),
        ms.into_bytes().into_boxed_slice(),
    ));
    CallRequest {
        cluster: h.cluster.as_str().into(),
        method: method.into(),
        authority: authority.into(),
        path: path.into_boxed_slice(),
        fields,
        body: body.data,
        timeout: h.timeout,
        max_answer_bytes: MAX_ANSWER_BYTES,
    }
}

/// Whether the request's field `name` goes to an HTTP service: its
/// `authorization` unless disallowed, and what `allowed_headers` takes;
/// never a pseudo-header, `host` (the check's own), the length (the
/// check's body is its own) or a hop-by-hop field.
fn sent(config: &ExtAuthz, name: &[u8]) -> bool {
    if name.first() == Some(&b':')
        || name == b"host"
        || name == b"content-length"
        || name == b"transfer-encoding"
        || (is_hop_by_hop(name) && name != b"te")
    {
        return false;
    }
    let allowed = name == b"authorization"
        || config
            .allowed_headers
            .as_ref()
            .is_some_and(|l| matches_any(l, name));
    allowed && !matches_any(&config.disallowed_headers, name)
}

/// An answer's fields that never go on: its framing and the fields the
/// gateway sets on what it sends.
fn own_field(name: &[u8]) -> bool {
    name.first() == Some(&b':')
        || matches!(
            name,
            b"content-length" | b"transfer-encoding" | b"server" | b"date"
        )
        || is_hop_by_hop(name)
}

/// The service's answer, as Envoy 1.40 reads it.
pub(super) fn verdict(config: &ExtAuthz, h: &HttpAuthz, outcome: CallOutcome) -> Verdict {
    let Ok(answer) = outcome else {
        return Verdict::Error(None);
    };
    let fields = || {
        answer
            .head
            .iter()
            .filter(|(n, _, _)| !own_field(n))
            .map(|(n, v, _)| (n, v))
    };
    match answer.status {
        200 => {
            let mut upstream = HeaderEdits::default();
            let mut set: Vec<&[u8]> = Vec::new();
            let mut response = Vec::new();
            for (name, value) in fields() {
                // A field the gateway's edits refuse (`host`, say) is not
                // passed on: the answer still allows.
                if matches_any(&h.allowed_upstream_headers, name) {
                    // The first line replaces the request's, the next add.
                    let _ = match set.contains(&name) {
                        true => upstream.append(name, value),
                        false => upstream.set(name, value),
                    };
                    set.push(name);
                }
                if matches_any(&h.allowed_upstream_headers_to_append, name) {
                    let _ = upstream.append(name, value);
                }
                if matches_any(&h.allowed_client_headers_on_success, name) {
                    response.push(ResponseField {
                        name: name.into(),
                        value: value.into(),
                        append: true,
                    });
                }
            }
            Verdict::Allow { upstream, response }
        }
        500..=599 => Verdict::Error(None),
        status => {
            let mut reply = Reply::new(status, "", "UAEX");
            let mut body = answer.body.clone();
            if config.max_denied_response_body_bytes > 0 {
                body.truncate(config.max_denied_response_body_bytes as usize);
            }
            reply.body = body;
            // Every field unless the config names some; then those, and
            // the ones a client needs to follow a denial.
            let all = h.allowed_client_headers.is_empty();
            for (name, value) in fields() {
                let keep = all
                    || matches!(name, b"www-authenticate" | b"location")
                    || matches_any(&h.allowed_client_headers, name);
                if keep {
                    let _ = reply.fields.append(name, value);
                }
            }
            Verdict::Deny(reply)
        }
    }
}
