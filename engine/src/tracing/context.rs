//! Trace context propagation: W3C `traceparent`/`tracestate` and Zipkin B3 (multi and single header).

use super::hex;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
pub const B3: &str = "b3";
pub const X_B3_TRACE_ID: &str = "x-b3-traceid";
pub const X_B3_SPAN_ID: &str = "x-b3-spanid";
pub const X_B3_PARENT_SPAN_ID: &str = "x-b3-parentspanid";
pub const X_B3_SAMPLED: &str = "x-b3-sampled";
pub const X_B3_FLAGS: &str = "x-b3-flags";

/// `tracestate` longer than this is dropped rather than truncated: cutting
/// list members safely needs a full parse, and 512 is the length the spec
/// asks every vendor to carry.
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The identity of one span plus what travels with it across hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: u128,
    pub span_id: u64,
    pub parent_span_id: Option<u64>,
    /// `None`: the sender deferred the decision (B3 without a sampling state).
    pub sampled: Option<bool>,
    /// B3 debug (`x-b3-flags: 1` or `d`); implies sampled.
    pub debug: bool,
    /// W3C `tracestate`, carried opaquely.
    pub tracestate: Option<Box<str>>,
}

impl TraceContext {
    /// A new trace: the caller draws the ids (non-zero) from its own RNG.
    pub fn root(trace_id: u128, span_id: u64, sampled: bool) -> Self {
        Self {
            trace_id,
            span_id,
            parent_span_id: None,
            sampled: Some(sampled),
            debug: false,
            tracestate: None,
        }
    }

    /// The context of a new span whose parent is `self` (the extracted remote
    /// span), with the decision the gateway made for it.
    pub fn child(&self, span_id: u64, sampled: bool) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id,
            parent_span_id: Some(self.span_id),
            sampled: Some(sampled),
            debug: self.debug,
            tracestate: self.tracestate.clone(),
        }
    }
}

impl TraceContext {
    /// Zipkin's shared span (`shared_span_context`, on by default): the
    /// ingress span reuses the remote client span's ids, B3 style, and the
    /// record is marked `shared`.
    pub fn shared(&self, sampled: bool) -> Self {
        Self {
            sampled: Some(sampled),
            ..self.clone()
        }
    }
}

/// What a request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted {
    /// No propagation header: the gateway starts a root span.
    None,
    /// A sampling decision without ids (`b3: 0`, a lone `x-b3-sampled`):
    /// the root span is new but the decision is the sender's.
    Sampling { sampled: bool, debug: bool },
    /// A remote parent span.
    Parent(TraceContext),
}

impl Extracted {
    /// The sender's sampling decision, which both providers honour.
    pub fn sampled(&self) -> Option<bool> {
        match self {
            Extracted::None => None,
            Extracted::Sampling { sampled, .. } => Some(*sampled),
            Extracted::Parent(ctx) => ctx.sampled,
        }
    }

    pub fn parent(&self) -> Option<&TraceContext> {
        match self {
            Extracted::Parent(ctx) => Some(ctx),
            _ => None,
        }
    }
}

/// A propagation header was present but malformed. Envoy then records no
/// span at all for the request (a null span) rather than a broken trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    #[error("traceparent: {0}")]
    Traceparent(&'static str),
    #[error("b3: {0}")]
    B3Single(&'static str),
    #[error("{0}: invalid value")]
    B3Multi(&'static str),
}

/// Which headers a provider reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// OpenTelemetry provider: `traceparent` + `tracestate`.
    W3c,
    /// Zipkin provider: B3 in, B3 multi-header out.
    B3,
    /// Zipkin with `trace_context_option: USE_B3_WITH_W3C_PROPAGATION`:
    /// W3C is read only when no B3 header is present; both are written.
    B3WithW3c,
}

/// Reads the propagation headers for `propagation`. `get` looks up a
/// lowercase header name and returns its (first) value.
pub fn extract<'a>(
    propagation: Propagation,
    get: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Extracted, ContextError> {
    match propagation {
        Propagation::W3c => extract_w3c(&get),
        Propagation::B3 => extract_b3(&get),
        Propagation::B3WithW3c => match extract_b3(&get)? {
            Extracted::None => extract_w3c(&get),
            found => Ok(found),
        },
    }
}

/// Writes the headers for the span `ctx` (the gateway's own span, whose id
/// the next hop sees as its parent). `trace_id_128bit` only affects B3.
pub fn inject(
    propagation: Propagation,
    ctx: &TraceContext,
    trace_id_128bit: bool,
    mut set: impl FnMut(&'static str, &str),
) {
    match propagation {
        Propagation::W3c => inject_w3c(ctx, &mut set),
        Propagation::B3 => inject_b3(ctx, trace_id_128bit, &mut set),
        Propagation::B3WithW3c => {
            inject_b3(ctx, trace_id_128bit, &mut set);
            inject_w3c(ctx, &mut set);
        }
    }
}

/// Header values reach us already trimmed by the HTTP codecs, but the W3C
/// test suite sends optional whitespace around the value.
fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// W3C: `traceparent`, and `tracestate` only alongside a valid one.
pub fn extract_w3c<'a>(get: impl Fn(&str) -> Option<&'a [u8]>) -> Result<Extracted, ContextError> {
    let Some(value) = get(TRACEPARENT) else {
        return Ok(Extracted::None);
    };
    let mut ctx = parse_traceparent(value)?;
    ctx.tracestate = get(TRACESTATE).and_then(parse_tracestate);
    Ok(Extracted::Parent(ctx))
}

/// Parses `version-traceid-parentid-flags` as the W3C Trace Context spec
/// (Level 1, §3.2 and "Versioning of traceparent") says: lowercase hex only,
/// version `ff` and all-zero ids invalid, version `00` exactly 55 bytes, a
/// higher version may be longer if the flags are followed by a `-`.
pub fn parse_traceparent(value: &[u8]) -> Result<TraceContext, ContextError> {
    let err = ContextError::Traceparent;
    let v = trim_ows(value);
    if v.len() < 55 {
        return Err(err("too short"));
    }
    let version = hex::lower_u64(&v[0..2]).ok_or(err("bad version"))?;
    if version == 0xff {
        return Err(err("version ff is invalid"));
    }
    if version == 0 && v.len() != 55 {
        return Err(err("version 00 must be 55 bytes"));
    }
    if v.len() > 55 && v[55] != b'-' {
        return Err(err("flags not followed by '-'"));
    }
    if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return Err(err("misplaced '-'"));
    }
    let trace_id = hex::lower_u128(&v[3..35]).ok_or(err("bad trace-id"))?;
    let span_id = hex::lower_u64(&v[36..52]).ok_or(err("bad parent-id"))?;
    let flags = hex::lower_u64(&v[53..55]).ok_or(err("bad trace-flags"))?;
    if trace_id == 0 {
        return Err(err("all-zero trace-id"));
    }
    if span_id == 0 {
        return Err(err("all-zero parent-id"));
    }
    Ok(TraceContext {
        trace_id,
        span_id,
        parent_span_id: None,
        sampled: Some(flags & 1 == 1),
        debug: false,
        tracestate: None,
    })
}

/// Carries `tracestate` opaquely when it looks sane: printable ASCII, at most
/// 512 bytes and 32 members each with a `key=`; otherwise it is dropped,
/// which the spec allows.
pub fn parse_tracestate(value: &[u8]) -> Option<Box<str>> {
    let v = trim_ows(value);
    if v.is_empty() || v.len() > MAX_TRACESTATE_LEN {
        return None;
    }
    if !v.iter().all(|&b| (0x20..=0x7e).contains(&b) || b == b'\t') {
        return None;
    }
    let mut members = 0;
    for member in v.split(|&b| b == b',') {
        let member = trim_ows(member);
        if member.is_empty() {
            continue; // empty list members are allowed and ignored
        }
        members += 1;
        match member.iter().position(|&b| b == b'=') {
            Some(eq) if eq > 0 && eq + 1 < member.len() => {}
            _ => return None,
        }
    }
    if members == 0 || members > 32 {
        return None;
    }
    std::str::from_utf8(v).ok().map(Box::from)
}

/// `00-{trace-id}-{span-id}-{flags}`; only the sampled flag is written.
pub fn format_traceparent(ctx: &TraceContext) -> [u8; 55] {
    let mut out = [b'-'; 55];
    out[0..2].copy_from_slice(b"00");
    hex::write_u128(&mut out[3..35], ctx.trace_id);
    hex::write_u64(&mut out[36..52], ctx.span_id);
    let flags = if ctx.sampled == Some(true) || ctx.debug {
        b"01"
    } else {
        b"00"
    };
    out[53..55].copy_from_slice(flags);
    out
}

pub fn inject_w3c(ctx: &TraceContext, mut set: impl FnMut(&'static str, &str)) {
    let tp = format_traceparent(ctx);
    set(TRACEPARENT, hex::as_str(&tp));
    if let Some(ts) = &ctx.tracestate {
        set(TRACESTATE, ts);
    }
}

/// Zipkin's reading order, as Envoy's extractor: a `b3` single header wins
/// over the `x-b3-*` headers whenever it is present.
pub fn extract_b3<'a>(get: impl Fn(&str) -> Option<&'a [u8]>) -> Result<Extracted, ContextError> {
    match get(B3) {
        Some(v) => parse_b3_single(v),
        None => extract_b3_multi(get),
    }
}

/// B3 sampling state: `1`/`0`, `d` = debug (implies accept), plus the
/// legacy `true`/`false` some old tracers send in `x-b3-sampled`.
fn b3_sampling(v: &[u8]) -> Option<(bool, bool)> {
    match v {
        b"1" | b"true" => Some((true, false)),
        b"0" | b"false" => Some((false, false)),
        b"d" => Some((true, true)),
        _ => None,
    }
}

/// A B3 trace id is 16 or 32 hex digits; 16 is the low half.
fn b3_trace_id(v: &[u8]) -> Option<u128> {
    match v.len() {
        16 => hex::any_u64(v).map(u128::from),
        32 => hex::any_u128(v),
        _ => None,
    }
}

fn b3_span_id(v: &[u8]) -> Option<u64> {
    if v.len() == 16 {
        hex::any_u64(v)
    } else {
        None
    }
}

/// `x-b3-traceid`, `x-b3-spanid`, `x-b3-parentspanid`, `x-b3-sampled`,
/// `x-b3-flags`. Hex is accepted in either case as Envoy's parser does.
pub fn extract_b3_multi<'a>(
    get: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Extracted, ContextError> {
    let bad = ContextError::B3Multi;
    // Envoy treats any x-b3-sampled other than "1"/"true" as not sampled.
    let mut sampling =
        get(X_B3_SAMPLED).map(|v| b3_sampling(trim_ows(v)).unwrap_or((false, false)));
    if get(X_B3_FLAGS).map(trim_ows) == Some(b"1") {
        // Debug implies an accept decision (B3 spec).
        sampling = Some((true, true));
    }
    let (trace, span) = match (get(X_B3_TRACE_ID), get(X_B3_SPAN_ID)) {
        (Some(t), Some(s)) => (trim_ows(t), trim_ows(s)),
        // Half a context is no context (Envoy starts a root span), yet the
        // sender's sampling decision still stands.
        _ => {
            return Ok(match sampling {
                Some((sampled, debug)) => Extracted::Sampling { sampled, debug },
                None => Extracted::None,
            });
        }
    };
    let trace_id = b3_trace_id(trace)
        .filter(|&t| t != 0)
        .ok_or(bad(X_B3_TRACE_ID))?;
    let span_id = b3_span_id(span)
        .filter(|&s| s != 0)
        .ok_or(bad(X_B3_SPAN_ID))?;
    let parent_span_id = match get(X_B3_PARENT_SPAN_ID).map(trim_ows) {
        None | Some(b"") => None,
        Some(p) => Some(b3_span_id(p).ok_or(bad(X_B3_PARENT_SPAN_ID))?),
    };
    Ok(Extracted::Parent(TraceContext {
        trace_id,
        span_id,
        parent_span_id,
        sampled: sampling.map(|(s, _)| s),
        debug: sampling.is_some_and(|(_, d)| d),
        tracestate: None,
    }))
}

/// `b3: {traceid}-{spanid}[-{sampling}[-{parentspanid}]]` or a lone
/// sampling state `0`/`1`/`d`.
pub fn parse_b3_single(value: &[u8]) -> Result<Extracted, ContextError> {
    let err = ContextError::B3Single;
    let v = trim_ows(value);
    if v.len() == 1 {
        let (sampled, debug) = b3_sampling(v).ok_or(err("invalid sampling state"))?;
        return Ok(Extracted::Sampling { sampled, debug });
    }
    let mut fields = v.split(|&b| b == b'-');
    let trace = fields.next().unwrap_or_default();
    let span = fields.next().ok_or(err("missing span id"))?;
    let sampling = fields.next();
    let parent = fields.next();
    if fields.next().is_some() {
        return Err(err("too many fields"));
    }
    let trace_id = b3_trace_id(trace)
        .filter(|&t| t != 0)
        .ok_or(err("bad trace id"))?;
    let span_id = b3_span_id(span)
        .filter(|&s| s != 0)
        .ok_or(err("bad span id"))?;
    let sampling = match sampling {
        None => None,
        Some(s) => Some(
            b3_sampling(s)
                .filter(|_| s.len() == 1)
                .ok_or(err("bad sampling state"))?,
        ),
    };
    let parent_span_id = match parent {
        None => None,
        Some(p) => Some(b3_span_id(p).ok_or(err("bad parent span id"))?),
    };
    Ok(Extracted::Parent(TraceContext {
        trace_id,
        span_id,
        parent_span_id,
        sampled: sampling.map(|(s, _)| s),
        debug: sampling.is_some_and(|(_, d)| d),
        tracestate: None,
    }))
}

/// As Envoy's Zipkin span: `x-b3-traceid` (16 hex unless the id needs 128
/// bits or `trace_id_128bit` is on), `x-b3-spanid`, `x-b3-parentspanid` when
/// there is a parent, and `x-b3-sampled` always (`1`/`0`; debug counts as 1).
pub fn inject_b3(
    ctx: &TraceContext,
    trace_id_128bit: bool,
    mut set: impl FnMut(&'static str, &str),
) {
    let mut buf = [0u8; 32];
    if trace_id_128bit || ctx.trace_id > u128::from(u64::MAX) {
        hex::write_u128(&mut buf, ctx.trace_id);
        set(X_B3_TRACE_ID, hex::as_str(&buf));
    } else {
        hex::write_u64(&mut buf[..16], ctx.trace_id as u64);
        set(X_B3_TRACE_ID, hex::as_str(&buf[..16]));
    }
    hex::write_u64(&mut buf[..16], ctx.span_id);
    set(X_B3_SPAN_ID, hex::as_str(&buf[..16]));
    if let Some(parent) = ctx.parent_span_id {
        hex::write_u64(&mut buf[..16], parent);
        set(X_B3_PARENT_SPAN_ID, hex::as_str(&buf[..16]));
    }
    let sampled = ctx.sampled == Some(true) || ctx.debug;
    set(X_B3_SAMPLED, if sampled { "1" } else { "0" });
}

#[cfg(test)]
mod tests;
