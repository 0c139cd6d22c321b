//! The compressor filter (Envoy's `envoy.filters.http.compressor`, with gzip, brotli and zstd): a response the client accepts in this filter's coding, of a type it compresses and long enough, goes out encoded as it streams, chunk by chunk; optionally the request body too. The rules and the order of the checks are Envoy 1.40's (`docs/configuration.md`, "Compression").
//!
//! The chain's compressors negotiate `accept-encoding` as one: each knows
//! the others ([`engine::ChainMember`]) and decides alone, the same way,
//! which coding the response gets ([`negotiate`]). Memory per stream is
//! the codec's window and one output chunk; a response is never held
//! whole.

pub mod decompressor;
pub mod negotiate;

use bytes::Bytes;
use engine::{Coding, Compressor, CompressorOverrides, EncoderParams, PerRoute};

use super::{FilterCx, Flow, HttpFilter, RequestFlow, RequestHead, ResponseHead, Trailers};
use crate::stats::filters::Both;
use crate::stats::{CompressorStats, Counter};

/// One of a compressor's counters.
type CounterOf = fn(&CompressorStats) -> &Counter;
use negotiate::{Candidate, Decision};

/// What the filter keeps per stream: what the response will be judged
/// by (the request's head may be gone by then, once its body went
/// upstream), and the encoders at work.
#[derive(Default)]
struct Streams {
    /// The request's `accept-encoding` values, joined (`None`: none).
    accept: Option<Vec<u8>>,
    /// A HEAD request, a CONNECT or an upgrade: the response has no body
    /// to compress (or is a tunnel).
    no_body: bool,
    request: Option<compression::Encoder>,
    response: Option<compression::Encoder>,
}

/// The route's override, if it has one (`None`: disabled for the route).
fn per_route<'a>(cx: &FilterCx<'a>) -> Option<Option<&'a CompressorOverrides>> {
    match cx.route.and_then(|r| r.per_filter.compressor.as_ref()) {
        Some(PerRoute::Disabled) => None,
        Some(PerRoute::Override(o)) => Some(Some(&**o)),
        None => Some(None),
    }
}

/// Whether a response of `content_type` (`None`: no field) is of a type
/// in `types` (lowercase): its media type (before `;`, trimmed, ASCII case
/// ignored) is one of them, compared in place. An empty value is of none.
fn type_allowed(types: &[String], content_type: Option<&[u8]>) -> bool {
    match content_type {
        None => true,
        Some(v) => {
            let end = v.iter().position(|&b| b == b';').unwrap_or(v.len());
            let t = v[..end].trim_ascii();
            !t.is_empty() && types.iter().any(|x| x.as_bytes().eq_ignore_ascii_case(t))
        }
    }
}

/// Whether a comma list field holds `token` (ASCII case ignored).
fn has_token<'a>(mut values: impl Iterator<Item = &'a [u8]>, token: &[u8]) -> bool {
    values.any(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
    })
}

/// `vary` with `Accept-Encoding` in it: appended unless a value already
/// holds the exact token (Envoy's rule, case-sensitive).
fn add_vary(head: &mut ResponseHead<'_>) {
    let current: Vec<&[u8]> = match head.get(b"vary") {
        // A value set by an earlier filter, or the upstream's lines.
        Some(_) if head.list.is_none_or(|l| l.get(b"vary").is_none()) => {
            head.get(b"vary").into_iter().collect()
        }
        _ => head.get_all(b"vary").collect(),
    };
    if current.is_empty() {
        let _ = head.set(b"vary", b"Accept-Encoding");
        return;
    }
    if current.iter().any(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii() == b"Accept-Encoding")
    }) {
        return;
    }
    let mut joined = current.join(&b","[..]);
    joined.extend_from_slice(b", Accept-Encoding");
    let _ = head.set(b"vary", &joined);
}

/// The encoder parameters for this route (its override's, else the
/// filter's).
fn params<'a>(c: &'a Compressor, over: Option<&'a CompressorOverrides>) -> &'a EncoderParams {
    over.and_then(|o| o.library.as_ref()).unwrap_or(&c.library)
}

fn coding_on(c: &Compressor, over: Option<&CompressorOverrides>) -> Coding {
    params(c, over).coding()
}

/// The chain's candidates for a response of `content_type`: the
/// first compressor of each coding, of a type it compresses.
fn candidates(
    c: &Compressor,
    content_type: Option<&[u8]>,
    over: Option<&CompressorOverrides>,
) -> smallvec::SmallVec<[Candidate; 3]> {
    let mut out: smallvec::SmallVec<[Candidate; 3]> = smallvec::SmallVec::new();
    for m in &c.chain {
        // A route's library replaces this filter's coding (the
        // others' are theirs).
        let coding = match m.coding == c.library.coding() {
            true => coding_on(c, over),
            false => m.coding,
        };
        if !type_allowed(&m.content_types, content_type) || out.iter().any(|c| c.coding == coding) {
            continue;
        }
        out.push(Candidate {
            coding,
            choose_first: m.choose_first,
        });
    }
    out
}

/// What the request's `accept-encoding` decides, counted.
fn negotiate(
    c: &Compressor,
    accept: Option<&[u8]>,
    content_type: Option<&[u8]>,
    over: Option<&CompressorOverrides>,
    stats: Both<'_, CompressorStats>,
) -> Decision {
    let decision = negotiate::decide(
        accept.map(std::iter::once),
        &candidates(c, content_type, over),
    );
    let mine = coding_on(c, over);
    match decision {
        Decision::NoHeader => stats.inc(|s| &s.no_accept_header),
        Decision::NotValid => stats.inc(|s| &s.header_not_valid),
        Decision::Identity => stats.inc(|s| &s.header_identity),
        Decision::Wildcard(_) => stats.inc(|s| &s.header_wildcard),
        Decision::Named(c) if c == mine => stats.inc(|s| &s.header_compressor_used),
        Decision::Named(_) => stats.inc(|s| &s.header_compressor_overshadowed),
    }
    decision
}

/// Why a response is not compressed, for `x-envoy-compression-status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    ContentLengthTooSmall,
    ContentTypeNotAllowed,
    EtagNotAllowed,
    StatusCodeNotAllowed,
}

impl HttpFilter for Compressor {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let Some(over) = per_route(cx) else {
            return RequestFlow::Continue;
        };
        // What the response is judged by, kept now: several fields are
        // read as one list, as Envoy joins them.
        let accept = head.get(b"accept-encoding").map(|_| {
            let values: Vec<&[u8]> = head.get_all(b"accept-encoding").collect();
            values.join(&b","[..])
        });
        let method = head.get(b":method").unwrap_or_default();
        let no_body = method == b"HEAD" || method == b"CONNECT" || head.get(b"upgrade").is_some();
        cx.set_state(Streams {
            accept,
            no_body,
            request: None,
            response: None,
        });
        let stats = cx.counters::<CompressorStats>();
        let remove = over
            .and_then(|o| o.remove_accept_encoding_header)
            .unwrap_or(self.response.remove_accept_encoding_header);
        let response_on = self.response.common.enabled || over.is_some_and(|o| o.response_enabled);
        if remove && response_on {
            let _ = head.remove(b"accept-encoding");
        }
        let Some(req) = &self.request else {
            stats.inc(|s| &s.request_not_compressed);
            return RequestFlow::Continue;
        };
        let long_enough = match head
            .get(b"content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
        {
            Some(n) => n >= u64::from(req.min_content_length),
            None => true,
        };
        if !long_enough {
            stats.inc(|s| &s.request_content_length_too_small);
        }
        let compress = long_enough
            && !no_body
            && !head.end_stream()
            && head.get(b"content-encoding").is_none()
            && type_allowed(&req.content_types, head.get(b"content-type"));
        if !compress {
            stats.inc(|s| &s.request_not_compressed);
            return RequestFlow::Continue;
        }
        let Ok(encoder) = compression::Encoder::new(params(self, over)) else {
            stats.inc(|s| &s.request_not_compressed);
            return RequestFlow::Continue;
        };
        let _ = head.remove(b"content-length");
        let _ = head.set(b"content-encoding", encoder.coding().token().as_bytes());
        stats.inc(|s| &s.request_compressed);
        if let Some(s) = cx.state::<Streams>() {
            s.request = Some(encoder);
        }
        RequestFlow::Continue
    }

    fn on_request_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let stats = cx.counters::<CompressorStats>();
        let Some(enc) = cx.state::<Streams>().and_then(|s| s.request.as_mut()) else {
            return Flow::Continue;
        };
        encode(
            enc,
            data,
            end,
            (
                stats,
                |s| &s.request_total_uncompressed_bytes,
                |s| &s.request_total_compressed_bytes,
            ),
        );
        Flow::Continue
    }

    fn on_request_trailers(&self, cx: &mut FilterCx<'_>, _trailers: &mut Trailers) -> Flow {
        let stats = cx.counters::<CompressorStats>();
        if let Some(mut enc) = cx.state::<Streams>().and_then(|s| s.request.take()) {
            let mut last = Bytes::new();
            encode(
                &mut enc,
                &mut last,
                true,
                (
                    stats,
                    |s| &s.request_total_uncompressed_bytes,
                    |s| &s.request_total_compressed_bytes,
                ),
            );
            cx.send_before_trailers(last);
        }
        Flow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        // A route that disables the filter leaves the response as it is
        // (no `vary` either).
        let Some(over) = per_route(cx) else {
            return Flow::Continue;
        };
        if head.is_local() {
            // Local replies go out as made (their body is not streamed
            // through the filters).
            return Flow::Continue;
        }
        let (accept, no_body) = match cx.state::<Streams>() {
            Some(s) => (s.accept.take(), s.no_body),
            None => (None, false),
        };
        let stats = cx.counters::<CompressorStats>();
        let config = &self.response;
        let enabled = config.common.enabled || over.is_some_and(|o| o.response_enabled);
        if !enabled {
            stats.inc(|s| &s.not_compressed);
            return Flow::Continue;
        }
        let length = head
            .get(b"content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
        let long_enough = length.is_none_or(|n| n >= u64::from(config.common.min_content_length));
        let content_type = head.get(b"content-type").map(<[u8]>::to_vec);
        let etag = head.get(b"etag").map(<[u8]>::to_vec);
        let encoded = head.get(b"content-encoding").is_some()
            || has_token(head.get_all(b"cache-control"), b"no-transform")
            || head
                .get(b"cache-control")
                .is_some_and(|v| has_token(std::iter::once(v), b"no-transform"));
        let refusal = if !long_enough {
            Some(Refusal::ContentLengthTooSmall)
        } else if !type_allowed(&config.common.content_types, content_type.as_deref()) {
            Some(Refusal::ContentTypeNotAllowed)
        } else if config.disable_on_etag_header && etag.is_some() {
            Some(Refusal::EtagNotAllowed)
        } else if config.uncompressible_codes.contains(&head.status()) {
            Some(Refusal::StatusCodeNotAllowed)
        } else {
            None
        };
        if refusal == Some(Refusal::ContentLengthTooSmall) {
            stats.inc(|s| &s.content_length_too_small);
        }
        if refusal == Some(Refusal::EtagNotAllowed) {
            stats.inc(|s| &s.not_compressed_etag);
        }
        // 101 and CONNECT: a tunnel, not a body.
        let compressible = refusal.is_none() && !encoded && head.status() != 101;
        // HEAD, 204, 304: no body, whatever the framing says.
        let bodyless = head.end_stream() || no_body || matches!(head.status(), 204 | 304);
        let mine = coding_on(self, over);
        let status_line = |head: &mut ResponseHead<'_>, what: &str| {
            if config.status_header {
                let v = format!("{};{what}", mine.token());
                let _ = head.append(b"x-envoy-compression-status", v.as_bytes());
            }
        };
        if bodyless {
            if compressible && !matches!(head.status(), 101) {
                add_vary(head);
            }
            stats.inc(|s| &s.not_compressed);
            return Flow::Continue;
        }
        if encoded {
            stats.inc(|s| &s.not_compressed);
            return Flow::Continue;
        }
        if long_enough {
            // Counted before the remaining checks, as Envoy counts it.
            let decision = negotiate(
                self,
                accept.as_deref(),
                content_type.as_deref(),
                over,
                stats,
            );
            if let Some(r) = refusal {
                status_line(head, &format!("{r:?}"));
                stats.inc(|s| &s.not_compressed);
                return Flow::Continue;
            }
            add_vary(head);
            if decision.coding() != Some(mine) {
                stats.inc(|s| &s.not_compressed);
                return Flow::Continue;
            }
        } else {
            status_line(head, "ContentLengthTooSmall");
            stats.inc(|s| &s.not_compressed);
            return Flow::Continue;
        }
        let Ok(encoder) = compression::Encoder::new(params(self, over)) else {
            stats.inc(|s| &s.not_compressed);
            return Flow::Continue;
        };
        let original = head
            .get(b"content-length")
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let _ = head.remove(b"content-length");
        let _ = head.set(b"content-encoding", mine.token().as_bytes());
        if let Some(tag) = etag {
            if !(tag.starts_with(b"W/") || tag.starts_with(b"w/")) {
                // A strong validator no longer names these bytes.
                let _ = head.remove(b"etag");
            }
        }
        if config.status_header {
            let v = format!(
                "{};Compressed;OriginalLength={}",
                mine.token(),
                String::from_utf8_lossy(&original)
            );
            let _ = head.append(b"x-envoy-compression-status", v.as_bytes());
        }
        stats.inc(|s| &s.compressed);
        if let Some(s) = cx.state::<Streams>() {
            s.response = Some(encoder);
        }
        Flow::Continue
    }

    fn on_response_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let stats = cx.counters::<CompressorStats>();
        let Some(enc) = cx.state::<Streams>().and_then(|s| s.response.as_mut()) else {
            return Flow::Continue;
        };
        encode(
            enc,
            data,
            end,
            (
                stats,
                |s| &s.total_uncompressed_bytes,
                |s| &s.total_compressed_bytes,
            ),
        );
        Flow::Continue
    }

    fn on_response_trailers(&self, cx: &mut FilterCx<'_>, _trailers: &mut Trailers) -> Flow {
        let stats = cx.counters::<CompressorStats>();
        if let Some(mut enc) = cx.state::<Streams>().and_then(|s| s.response.take()) {
            let mut last = Bytes::new();
            encode(
                &mut enc,
                &mut last,
                true,
                (
                    stats,
                    |s| &s.total_uncompressed_bytes,
                    |s| &s.total_compressed_bytes,
                ),
            );
            cx.send_before_trailers(last);
        }
        Flow::Continue
    }
}

/// Encodes one chunk in place (`end`: the stream's last). gzip and brotli
/// flush each chunk, so a streamed body (events, a slow page) goes out as
/// it comes; zstd keeps its frame until the end (Envoy's behaviour).
fn encode(
    enc: &mut compression::Encoder,
    data: &mut Bytes,
    end: bool,
    (stats, plain, coded): (Both<'_, CompressorStats>, CounterOf, CounterOf),
) {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    let result = match end {
        true => enc.finish(data, &mut out),
        false => enc.write(data, &mut out).and_then(|()| match enc.coding() {
            Coding::Zstd => Ok(()),
            _ => enc.flush(&mut out),
        }),
    };
    stats.add(plain, data.len() as u64);
    if result.is_err() {
        // An encoder does not fail on valid parameters; if it did, what
        // it made so far is all the client gets.
        tracing::warn!("compressor failed mid-stream: {result:?}");
    }
    stats.add(coded, out.len() as u64);
    *data = Bytes::from(out);
}
