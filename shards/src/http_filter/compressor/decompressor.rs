//! The decompressor filter (Envoy's `envoy.filters.http.decompressor`): a request or response body whose first `content-encoding` coding is this filter's library is decoded as it streams, with the inflate ratio bounding what a small body may become. A body that does not decode ends early (the status stays), as in Envoy.

use bytes::Bytes;
use engine::Decompressor;

use crate::http_filter::{FilterCx, Flow, HttpFilter, RequestFlow, RequestHead, ResponseHead};
use crate::stats::filters::Both;
use crate::stats::{Counter, DecompressorStats};

/// One of a decompressor's counters.
type CounterOf = fn(&DecompressorStats) -> &Counter;

/// One direction's decoder, and whether it gave up.
struct Decoding {
    decoder: compression::Decoder,
    failed: bool,
}

#[derive(Default)]
struct Streams {
    /// A HEAD request, a CONNECT or an upgrade: no body to decode (or a
    /// tunnel).
    no_body: bool,
    request: Option<Decoding>,
    response: Option<Decoding>,
}

/// The first coding of a `content-encoding` value, and the rest.
fn first_coding(v: &[u8]) -> (&[u8], Option<&[u8]>) {
    match v.iter().position(|&b| b == b',') {
        Some(at) => (v[..at].trim_ascii(), Some(v[at + 1..].trim_ascii())),
        None => (v.trim_ascii(), None),
    }
}

/// Whether `cache-control` says `no-transform`.
fn no_transform(v: Option<&[u8]>) -> bool {
    v.is_some_and(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    })
}

/// Whether a head with these fields is decoded here, and the
/// `content-encoding` it keeps (`None`: none).
fn takes<'v>(
    d: &Decompressor,
    encoding: Option<&'v [u8]>,
    cache_control: Option<&[u8]>,
    ignore_no_transform: bool,
) -> Option<Option<&'v [u8]>> {
    let (first, rest) = first_coding(encoding?);
    if !first.eq_ignore_ascii_case(d.library.coding.token().as_bytes()) {
        return None;
    }
    if !ignore_no_transform && no_transform(cache_control) {
        return None;
    }
    Some(rest)
}

fn start(d: &Decompressor) -> Option<Decoding> {
    let decoder = compression::Decoder::new(&d.library).ok()?;
    Some(Decoding {
        decoder,
        failed: false,
    })
}

/// Whether a head whose fields `get` reads is decoded here: its decoder,
/// and the `content-encoding` it leaves (`None`: the field goes). Nothing
/// is copied for a head that is not.
fn begin<'h>(
    d: &Decompressor,
    get: impl Fn(&[u8]) -> Option<&'h [u8]>,
    ignore_no_transform: bool,
) -> Option<(Decoding, Option<Vec<u8>>)> {
    let rest = takes(
        d,
        get(b"content-encoding"),
        get(b"cache-control"),
        ignore_no_transform,
    )?;
    let rest = rest.map(<[u8]>::to_vec);
    Some((start(d)?, rest))
}

impl HttpFilter for Decompressor {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let stats = cx.counters::<DecompressorStats>();
        let token = self.library.coding.token().as_bytes();
        let method = head.get(b":method").unwrap_or_default();
        let tunnel = method == b"CONNECT" || head.get(b"upgrade").is_some();
        if tunnel || method == b"HEAD" {
            cx.set_state(Streams {
                no_body: true,
                ..Streams::default()
            });
        }
        if tunnel {
            return RequestFlow::Continue;
        }
        if self.response.enabled && self.advertise_accept_encoding {
            // The upstream may answer in this coding: it is decoded here.
            // Several fields are one list (Envoy joins them).
            let has = |v: &[u8]| v.split(|&b| b == b',').any(|t| t.trim_ascii() == token);
            match head.get(b"accept-encoding") {
                None => {
                    let _ = head.set(b"accept-encoding", token);
                }
                Some(_) if head.get_all(b"accept-encoding").any(has) => {}
                Some(_) => {
                    let mut v = head
                        .get_all(b"accept-encoding")
                        .collect::<Vec<_>>()
                        .join(&b","[..]);
                    v.push(b',');
                    v.extend_from_slice(token);
                    let _ = head.set(b"accept-encoding", &v);
                }
            }
        }
        if !self.request.enabled || head.end_stream() {
            return RequestFlow::Continue;
        }
        let Some((decoding, rest)) = begin(self, |n| head.get(n), self.request.ignore_no_transform)
        else {
            stats.inc(|s| &s.request_not_decompressed);
            return RequestFlow::Continue;
        };
        let _ = head.remove(b"content-length");
        let _ = match rest {
            Some(r) => head.set(b"content-encoding", &r),
            None => head.remove(b"content-encoding"),
        };
        stats.inc(|s| &s.request_decompressed);
        cx.set_state(Streams {
            request: Some(decoding),
            ..Streams::default()
        });
        RequestFlow::Continue
    }

    fn on_request_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let stats = cx.counters::<DecompressorStats>();
        if let Some(d) = cx.state::<Streams>().and_then(|s| s.request.as_mut()) {
            let bytes: (CounterOf, CounterOf) = (
                |s| &s.request_total_compressed_bytes,
                |s| &s.request_total_uncompressed_bytes,
            );
            decode(d, data, end, (stats, bytes));
        }
        Flow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        let stats = cx.counters::<DecompressorStats>();
        let no_body = cx.state::<Streams>().is_some_and(|s| s.no_body);
        if !self.response.enabled
            || head.end_stream()
            || head.is_local()
            || no_body
            || matches!(head.status(), 101 | 204 | 304)
        {
            return Flow::Continue;
        }
        let Some((decoding, rest)) =
            begin(self, |n| head.get(n), self.response.ignore_no_transform)
        else {
            stats.inc(|s| &s.response_not_decompressed);
            return Flow::Continue;
        };
        let _ = head.remove(b"content-length");
        let _ = match rest {
            Some(r) => head.set(b"content-encoding", &r),
            None => head.remove(b"content-encoding"),
        };
        stats.inc(|s| &s.response_decompressed);
        match cx.state::<Streams>() {
            Some(s) => s.response = Some(decoding),
            None => cx.set_state(Streams {
                response: Some(decoding),
                ..Streams::default()
            }),
        }
        Flow::Continue
    }

    fn on_response_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let stats = cx.counters::<DecompressorStats>();
        if let Some(d) = cx.state::<Streams>().and_then(|s| s.response.as_mut()) {
            let bytes: (CounterOf, CounterOf) = (
                |s| &s.response_total_compressed_bytes,
                |s| &s.response_total_uncompressed_bytes,
            );
            decode(d, data, end, (stats, bytes));
        }
        Flow::Continue
    }
}

/// Decodes one chunk in place. After an error (not the coding, past the
/// ratio) the rest of the body is dropped: what decoded so far is what
/// the other side gets, and the stream ends as it would have.
fn decode(
    d: &mut Decoding,
    data: &mut Bytes,
    end: bool,
    (stats, (compressed, uncompressed)): (Both<'_, DecompressorStats>, (CounterOf, CounterOf)),
) {
    if d.failed {
        *data = Bytes::new();
        return;
    }
    stats.add(compressed, data.len() as u64);
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(64 * 1024));
    let result = d.decoder.write(data, &mut out);
    stats.add(uncompressed, out.len() as u64);
    match result {
        Ok(()) => {
            // A stream that ends early keeps what it had (Envoy counts
            // nothing for it).
            let _ = end;
        }
        Err(compression::DecodeError::RatioExceeded(..)) => {
            d.failed = true;
            stats.inc(|s| &s.ratio_exceeded);
        }
        Err(_) => {
            d.failed = true;
            stats.inc(|s| &s.decode_errors);
        }
    }
    *data = Bytes::from(out);
}
