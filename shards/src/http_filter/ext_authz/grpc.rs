//! The gRPC service's check (`envoy.service.auth.v3.Authorization/Check`): the request's attributes as a `CheckRequest`, and the `CheckResponse` read as Envoy 1.40 reads it (status OK allows, any other denies; a call that fails or answers garbage is an error).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use engine::{CheckSettings, ExtAuthz, GrpcAuthz};
use prost::Message;

use super::proto::{self, CheckRequest, CheckResponse, DeniedHttpResponse, HeaderValueOption};
use super::{matches_any, CheckBody, ResponseField, Verdict, MAX_ANSWER_BYTES};
use crate::http_filter::call::{grpc_frame, CallAnswer, CallField, CallOutcome, CallRequest};
use crate::http_filter::{FilterCx, HeaderEdits, Reply, RequestHead};

const CHECK_PATH: &[u8] = b"/envoy.service.auth.v3.Authorization/Check";

/// The check for the request whose head is `head`.
pub(super) fn request(
    config: &ExtAuthz,
    g: &GrpcAuthz,
    cx: &FilterCx<'_>,
    head: &RequestHead<'_>,
    body: CheckBody,
    settings: Option<&CheckSettings>,
) -> CallRequest {
    let message = CheckRequest {
        attributes: Some(attributes(config, cx, head, body, settings)),
    };
    let framed = grpc_frame(&message.encode_to_vec());
    let authority = match g.authority.is_empty() {
        true => g.cluster.as_bytes(),
        false => g.authority.as_bytes(),
    };
    let ms = g.timeout.as_millis();
    let mut fields: Vec<CallField> = vec![
        (b"content-type"[..].into(), b"application/grpc"[..].into()),
        (b"te"[..].into(), b"trailers"[..].into()),
        (
            b"grpc-timeout"[..].into(),
            format!("{ms}m").into_bytes().into(),
        ),
    ];
    if !g.skip_envoy_headers {
        fields.push((b"x-envoy-internal"[..].into(), b"true"[..].into()));
        fields.push((
            b"x-envoy-expected-rq-timeout-ms"[..].into(),
            ms.to_string().into_bytes().into(),
        ));
    }
    CallRequest {
        cluster: g.cluster.as_str().into(),
        method: b"POST"[..].into(),
        authority: authority.into(),
        path: CHECK_PATH.into(),
        fields,
        body: framed,
        timeout: g.timeout,
        max_answer_bytes: MAX_ANSWER_BYTES,
    }
}

fn address(a: std::net::SocketAddr) -> Option<proto::Address> {
    Some(proto::Address {
        socket_address: Some(proto::SocketAddress {
            address: a.ip().to_string(),
            port_value: a.port() as u32,
        }),
    })
}

fn attributes(
    config: &ExtAuthz,
    cx: &FilterCx<'_>,
    head: &RequestHead<'_>,
    body: CheckBody,
    settings: Option<&CheckSettings>,
) -> proto::AttributeContext {
    let text =
        |name: &[u8]| String::from_utf8_lossy(head.get(name).unwrap_or_default()).into_owned();
    let mut http = proto::HttpRequest {
        // Envoy's is a number of its own, not the x-request-id.
        id: cx.shard.random_u64().to_string(),
        method: text(b":method"),
        path: text(b":path"),
        host: text(b":authority"),
        scheme: match head.get(b":scheme") {
            Some(s) => String::from_utf8_lossy(s).into_owned(),
            None => String::from_utf8_lossy(cx.conn.scheme).into_owned(),
        },
        protocol: cx.conn.protocol.to_owned(),
        ..Default::default()
    };
    let mut raw = Vec::new();
    let edited = head.edits.apply(head.list.iter().map(|(n, v, _)| (n, v)));
    for (name, value) in edited {
        let sent = config
            .allowed_headers
            .as_ref()
            .is_none_or(|l| matches_any(l, name))
            && !matches_any(&config.disallowed_headers, name);
        if sent {
            raw.push((name, value));
        }
    }
    let partial: Option<&[u8]> =
        body.present
            .then_some(if body.partial { b"true" } else { b"false" });
    raw.extend(partial.map(|p| (&b"x-envoy-auth-partial-body"[..], p)));
    if config.encode_raw_headers {
        let headers = raw
            .iter()
            .map(|(n, v)| proto::HeaderValue {
                key: String::from_utf8_lossy(n).into_owned(),
                raw_value: v.to_vec(),
                ..Default::default()
            })
            .collect();
        http.header_map = Some(proto::HeaderMap { headers });
    } else {
        for (name, value) in raw {
            let value = String::from_utf8_lossy(value);
            http.headers
                .entry(String::from_utf8_lossy(name).into_owned())
                .and_modify(|v| {
                    v.push(',');
                    v.push_str(&value);
                })
                .or_insert_with(|| value.into_owned());
        }
    }
    if body.present {
        http.size = body.data.len() as i64;
        match body.pack_as_bytes {
            true => http.raw_body = body.data.to_vec(),
            // A string field: Envoy puts the bytes in as they are; a
            // body that is not UTF-8 goes with replacement characters.
            false => http.body = String::from_utf8_lossy(&body.data).into_owned(),
        }
    }
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let principal = cx
        .conn
        .peer_identity
        .map(|p| {
            p.uri_sans
                .first()
                .cloned()
                .unwrap_or_else(|| p.subject.clone())
        })
        .unwrap_or_default();
    proto::AttributeContext {
        source: Some(proto::Peer {
            address: address(cx.conn.peer),
            principal,
        }),
        destination: Some(proto::Peer {
            address: address(cx.conn.local),
            principal: String::new(),
        }),
        request: Some(proto::Request {
            time: Some(proto::Timestamp {
                seconds: since.as_secs() as i64,
                nanos: since.subsec_nanos() as i32,
            }),
            http: Some(http),
        }),
        context_extensions: settings
            .map(|s| s.context_extensions.iter().cloned().collect())
            .unwrap_or_default(),
        metadata_context: Some(proto::Metadata {}),
        route_metadata_context: Some(proto::Metadata {}),
        tls_session: match (config.include_tls_session, cx.conn.sni) {
            (true, Some(sni)) => Some(proto::TlsSession {
                sni: sni.to_owned(),
            }),
            _ => None,
        },
    }
}

/// The `CheckResponse` in a whole gRPC answer, or `None` when the call
/// failed (an HTTP status other than 200, a `grpc-status` other than 0)
/// or its message is not one.
fn check_response(answer: &CallAnswer) -> Option<CheckResponse> {
    if answer.status != 200 {
        return None;
    }
    let status = answer
        .trailers
        .as_ref()
        .and_then(|t| t.get(b"grpc-status"))
        .or_else(|| answer.head.get(b"grpc-status"));
    if status != Some(b"0") {
        return None;
    }
    let body: &Bytes = &answer.body;
    // One uncompressed message, exactly.
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let message = rest.get(4..)?;
    if flag != 0 || message.len() != len {
        return None;
    }
    CheckResponse::decode(message).ok()
}

/// The service's answer, as Envoy 1.40 reads it (`status_on_error` for an
/// `error_response` without a status).
pub(super) fn verdict(config: &ExtAuthz, outcome: CallOutcome) -> Verdict {
    let Some(resp) = outcome.ok().as_ref().and_then(check_response) else {
        return Verdict::Error(None);
    };
    let code = resp.status.as_ref().map_or(0, |s| s.code);
    if code == 0 {
        return allow(resp.ok_response.unwrap_or_default());
    }
    if let Some(e) = &resp.error_response {
        return match reply(e, config.status_on_error) {
            Some(r) => Verdict::Error(Some(r)),
            None => Verdict::Invalid,
        };
    }
    match reply(&resp.denied_response.unwrap_or_default(), 403) {
        Some(r) => Verdict::Deny(r),
        None => Verdict::Invalid,
    }
}

/// An OK answer's changes; one the gateway cannot make (path, query or
/// host, a value no HTTP field may hold) makes it invalid.
fn allow(ok: proto::OkHttpResponse) -> Verdict {
    if !ok.query_parameters_to_set.is_empty() || !ok.query_parameters_to_remove.is_empty() {
        return Verdict::Invalid;
    }
    let mut upstream = HeaderEdits::default();
    for o in &ok.headers {
        let Some(h) = &o.header else { continue };
        let name = h.key.to_ascii_lowercase();
        // `append: true` adds a line (Envoy joins it to the field with a
        // comma, or drops it where the request has none); else replaces.
        let edit = match o.append.as_ref().is_some_and(|a| a.value) {
            true => upstream.append(name.as_bytes(), h.value()),
            false => upstream.set(name.as_bytes(), h.value()),
        };
        if edit.is_err() {
            return Verdict::Invalid;
        }
    }
    for name in &ok.headers_to_remove {
        let name = name.to_ascii_lowercase();
        // Envoy leaves `host` and pseudo-headers in place.
        if name == "host" || name.starts_with(':') {
            continue;
        }
        if upstream.remove(name.as_bytes()).is_err() {
            return Verdict::Invalid;
        }
    }
    let mut response = Vec::with_capacity(ok.response_headers_to_add.len());
    for o in &ok.response_headers_to_add {
        let Some(h) = &o.header else { continue };
        let name = h.key.to_ascii_lowercase();
        // Checked here, so the response hook's edit cannot fail.
        if HeaderEdits::default()
            .set(name.as_bytes(), h.value())
            .is_err()
        {
            return Verdict::Invalid;
        }
        response.push(ResponseField {
            name: name.into_bytes().into(),
            value: h.value().into(),
            append: o.append.as_ref().is_none_or(|a| a.value),
        });
    }
    Verdict::Allow { upstream, response }
}

/// A denial's (or error's) reply: its status (`default` when unset), its
/// fields (an `append: true` one has nothing to join: dropped, as in
/// Envoy) and body. `None`: a field no HTTP allows.
fn reply(d: &DeniedHttpResponse, default: u16) -> Option<Reply> {
    let status = match d.status.as_ref().map_or(0, |s| s.code) {
        c @ 100..=599 => c as u16,
        _ => default,
    };
    let mut reply = Reply::new(status, "", "UAEX");
    reply.body = Bytes::from(d.body.clone().into_bytes());
    for HeaderValueOption { header, append } in &d.headers {
        let Some(h) = header else { continue };
        if append.as_ref().is_some_and(|a| a.value) {
            continue;
        }
        reply
            .fields
            .append(h.key.to_ascii_lowercase().as_bytes(), h.value())
            .ok()?;
    }
    Some(reply)
}
