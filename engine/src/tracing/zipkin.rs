//! Zipkin API v2 JSON (`POST /api/v2/spans`) for a batch of spans, written by hand.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use super::hex;
use super::span::{tags, AttrValue, SpanKind, SpanRecord};

/// The gateway as Zipkin's `localEndpoint`.
#[derive(Debug, Clone, Copy)]
pub struct LocalEndpoint<'a> {
    /// Envoy uses the node's service cluster (`--service-cluster`).
    pub service_name: &'a str,
    pub address: Option<IpAddr>,
    pub port: Option<u16>,
}

/// Appends `s` as JSON string contents (without the quotes). Control
/// characters are escaped (short forms where JSON has them), as are U+2028
/// and U+2029 so the output is also safe inside JavaScript; everything else,
/// non-ASCII included, is copied as UTF-8, which JSON allows.
pub fn escape_json_into(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let short = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if c < ' ' || c == '\u{2028}' || c == '\u{2029}' => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if short.is_empty() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push_str(short);
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    escape_json_into(out, s);
    out.push('"');
}

fn push_hex64(out: &mut String, x: u64) {
    let mut buf = [0u8; 16];
    hex::write_u64(&mut buf, x);
    out.push('"');
    out.push_str(hex::as_str(&buf));
    out.push('"');
}

fn push_ip(out: &mut String, ip: IpAddr) {
    // Zipkin wants the address text without brackets, in its own field.
    let _ = match ip {
        IpAddr::V4(v4) => write!(out, "\"ipv4\":\"{v4}\""),
        IpAddr::V6(v6) => write!(out, "\"ipv6\":\"{v6}\""),
    };
}

fn push_local_endpoint(out: &mut String, ep: &LocalEndpoint<'_>) {
    out.push_str("\"localEndpoint\":{\"serviceName\":");
    push_string(out, ep.service_name);
    if let Some(ip) = ep.address {
        out.push(',');
        push_ip(out, ip);
    }
    if let Some(port) = ep.port.filter(|&p| p != 0) {
        let _ = write!(out, ",\"port\":{port}");
    }
    out.push('}');
}

fn push_remote_endpoint(out: &mut String, addr: SocketAddr) {
    out.push_str(",\"remoteEndpoint\":{");
    push_ip(out, addr.ip());
    if addr.port() != 0 {
        let _ = write!(out, ",\"port\":{}", addr.port());
    }
    out.push('}');
}

/// Zipkin tags are string to string.
fn push_tags(out: &mut String, span: &SpanRecord) {
    let add_error = span.error && span.attr(tags::ERROR).is_none();
    if span.attributes.is_empty() && !add_error {
        return;
    }
    out.push_str(",\"tags\":{");
    let mut first = true;
    for (key, value) in &span.attributes {
        if !first {
            out.push(',');
        }
        first = false;
        push_string(out, key);
        out.push(':');
        match value {
            AttrValue::Str(s) => push_string(out, s),
            AttrValue::Int(i) => {
                let _ = write!(out, "\"{i}\"");
            }
            AttrValue::Bool(b) => {
                let _ = write!(out, "\"{b}\"");
            }
        }
    }
    if add_error {
        if !first {
            out.push(',');
        }
        out.push_str("\"error\":\"true\"");
    }
    out.push('}');
}

fn push_span(
    out: &mut String,
    span: &SpanRecord,
    local: &LocalEndpoint<'_>,
    trace_id_128bit: bool,
) {
    out.push_str("{\"traceId\":\"");
    let mut buf = [0u8; 32];
    hex::write_u128(&mut buf, span.trace_id);
    let wide = trace_id_128bit || span.trace_id > u128::from(u64::MAX);
    out.push_str(hex::as_str(if wide { &buf } else { &buf[16..] }));
    out.push_str("\",\"id\":");
    push_hex64(out, span.span_id);
    if let Some(parent) = span.parent_span_id {
        out.push_str(",\"parentId\":");
        push_hex64(out, parent);
    }
    out.push_str(",\"name\":");
    push_string(out, &span.name);
    out.push_str(match span.kind {
        SpanKind::Server => ",\"kind\":\"SERVER\"",
        SpanKind::Client => ",\"kind\":\"CLIENT\"",
    });
    // Microseconds, truncated as Envoy's duration_cast does; Zipkin wants at
    // least 1 (it documents rounding shorter durations up).
    let duration = (span.duration_nanos / 1_000).max(1);
    let _ = write!(
        out,
        ",\"timestamp\":{},\"duration\":{duration},",
        span.start_unix_nanos / 1_000
    );
    push_local_endpoint(out, local);
    if let Some(addr) = span.remote_address {
        push_remote_endpoint(out, addr);
    }
    push_tags(out, span);
    if span.shared {
        out.push_str(",\"shared\":true");
    }
    out.push('}');
}

/// The JSON array body. `trace_id_128bit` is the provider's setting; an id
/// that needs more than 64 bits is always written with 32 digits.
pub fn encode_json_v2(
    spans: &[SpanRecord],
    local: &LocalEndpoint<'_>,
    trace_id_128bit: bool,
) -> String {
    let mut out = String::with_capacity(64 + spans.len() * 512);
    out.push('[');
    for (i, span) in spans.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_span(&mut out, span, local, trace_id_128bit);
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests;
