//! A stream's upstream side: its stream on the host's pool (opened from the kept head, rewritten on the way), left when it is refused, fails or ends, and what arrives for it after that.

use std::rc::Rc;

use engine::headers::{is_hop_by_hop, keep_te};
use h2wire::conn::ClientEvent;
use h2wire::message::HeaderList;

use super::stamp::{self, ClientClass};
use super::{touch, Streams};
use crate::http_filter::{AttemptFailure, HeaderEdits};
use crate::local_reply::LocalReply;
use crate::wire::body::queued;
use crate::wire::dstream::DStream;
use crate::wire::pool::{Acquire, Pool, PoolRef, UpRef};
use crate::wire::upcodec::UpCodec;

/// The fields the gateway itself may set on a request going upstream: a
/// client's are dropped where ours go.
#[derive(Clone, Copy)]
struct Ours {
    xfh: bool,
    xff: bool,
    xfp: bool,
    attempt_count: bool,
    /// Which of the client's `x-envoy-*` fields stay (`stamp.rs`).
    class: ClientClass,
}

/// Whether a request field goes upstream as it is: not a pseudo-header
/// (rebuilt), `host` (it is `:authority`), hop-by-hop, a `te` other than
/// `trailers`, one of [`Ours`] that we set, or one of Envoy's internal
/// fields the client may not send.
fn forwarded(name: &[u8], value: &[u8], ours: Ours) -> bool {
    if name.first() == Some(&b':') || name == b"host" {
        return false;
    }
    if name == b"te" {
        return keep_te(value);
    }
    if (ours.xff && name == b"x-forwarded-for")
        || (ours.xfh && name == b"x-forwarded-host")
        || (ours.xfp && name == b"x-forwarded-proto")
        || (ours.attempt_count && name == ATTEMPT_COUNT)
    {
        return false;
    }
    !is_hop_by_hop(name) && stamp::client_field_kept(name, ours.class)
}

/// The router's header telling the upstream how long we wait for it.
const EXPECTED_TIMEOUT: &[u8] = b"x-envoy-expected-rq-timeout-ms";

/// Which attempt this is (`include_request_attempt_count`), and on the
/// response how many there were (`include_attempt_count_in_response`).
pub(super) const ATTEMPT_COUNT: &[u8] = b"x-envoy-attempt-count";

/// `n` in decimal, in `buf`.
pub(super) fn decimal(mut n: u128, buf: &mut [u8; 40]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Where a request head is written: a pooled connection's codec, an
/// upgrade's own connection, or a mirror's copy.
pub(super) trait HeadSink {
    /// What writing gives: the upstream stream id, or the copy.
    type Out;

    /// Writes the head; `None` if it could not be taken.
    fn send<'a>(
        self,
        method: &'a [u8],
        authority: &'a [u8],
        path: &'a [u8],
        fields: impl Iterator<Item = (&'a [u8], &'a [u8], bool)>,
        bodyless: bool,
    ) -> Option<Self::Out>;
}

/// A connection of a host's pool, and the scheme its requests say.
struct Pooled<'c> {
    conn: &'c mut UpCodec,
    scheme: &'static [u8],
    /// An HTTP/2 client's stream that is a tunnel: what opens it.
    tunnel: Option<Tunnel<'c>>,
}

/// How an HTTP/2 client's tunnel opens on the host's connection.
enum Tunnel<'c> {
    /// An extended CONNECT's upgrade (`upgrade: <token>`), with the
    /// `sec-websocket-key` the gateway adds.
    Upgrade(&'c [u8], Option<[u8; 24]>),
    /// A CONNECT sent on.
    Connect,
    /// A CONNECT its route terminates: no request, the bytes alone.
    Raw,
}

impl HeadSink for Pooled<'_> {
    type Out = u32;

    fn send<'a>(
        self,
        method: &'a [u8],
        authority: &'a [u8],
        path: &'a [u8],
        fields: impl Iterator<Item = (&'a [u8], &'a [u8], bool)>,
        bodyless: bool,
    ) -> Option<u32> {
        match self.tunnel {
            Some(Tunnel::Connect) => self.conn.send_connect(authority, fields, true),
            Some(Tunnel::Raw) => self.conn.open_raw(),
            Some(Tunnel::Upgrade(upgrade, key)) => {
                // The key lives here: the fields are taken at its lifetime.
                // An HTTP/2 host gets the extended CONNECT as it came, keyless.
                let key = key
                    .as_ref()
                    .filter(|_| !self.conn.is_h2())
                    .map(|k| (&b"sec-websocket-key"[..], &k[..], false));
                let fields = fields
                    .map(|(n, v, never)| -> (&[u8], &[u8], bool) { (n, v, never) })
                    .chain(key);
                self.conn.send_upgrade_stream(
                    (method, self.scheme),
                    authority,
                    path,
                    fields,
                    upgrade,
                )
            }
            None => self
                .conn
                .send_request(method, self.scheme, authority, path, fields, bodyless),
        }
        .ok()
    }
}

/// Writes the request head of `s` on connection `slot` of `pool`, with
/// the route's rewrites and the filters' edits: the upstream stream id, or
/// `None` if the connection could not take it.
fn send_request(s: &DStream, pool: &mut Pool, slot: usize, random: u128) -> Option<u32> {
    // A copy: the pool is borrowed again to send (only with
    // `auto_host_rewrite`).
    let auto = s.auto_host.then(|| pool.hostname.clone()).flatten();
    let scheme = pool.scheme();
    let conn = pool.conn_at(slot)?;
    let tunnel = s
        .upgrade
        .then(|| {
            let head = s.head.as_ref()?;
            if head.get(b":method") == Some(b"CONNECT") {
                return Some(match s.terminate {
                    true => Tunnel::Raw,
                    false => Tunnel::Connect,
                });
            }
            let token = head.get(b"upgrade")?;
            // RFC 8441's WebSocket has no key, which RFC 6455 servers
            // refuse (400): one is made for the HTTP/1.1 hop (Envoy
            // forwards none). Its answer's accept goes back unchecked, as
            // the client expects none.
            let keyless = token.eq_ignore_ascii_case(b"websocket")
                && head.get(b"sec-websocket-key").is_none();
            Some(Tunnel::Upgrade(
                token,
                keyless.then(|| websocket_key(random)),
            ))
        })
        .flatten();
    let sink = Pooled {
        conn,
        scheme,
        tunnel,
    };
    write_request(s, auto.as_deref(), sink)
}

/// Writes the request head of `s` into `sink`, with the route's rewrites
/// (`auto`: the host's name, for `auto_host_rewrite`), the filters'
/// edits and the connection manager's fields.
pub(super) fn write_request<S: HeadSink>(
    s: &DStream,
    auto: Option<&str>,
    sink: S,
) -> Option<S::Out> {
    let head = s.head.as_ref()?;
    let get = |n: &[u8]| head.get(n).unwrap_or(b"");
    let original = head.get(b":authority").or_else(|| head.get(b"host"));
    let rewritten = s.authority.as_deref().or(auto.map(str::as_bytes));
    let authority = rewritten.or(original).unwrap_or(b"");
    // Envoy: only a host actually rewritten; appended after a comma.
    let forwarded_host = rewritten.filter(|_| s.forwarded_host).map(|_| {
        let mut v = Vec::new();
        for earlier in head.get_all(b"x-forwarded-host") {
            v.extend_from_slice(earlier);
            v.push(b',');
        }
        v.extend_from_slice(original.unwrap_or(b""));
        v
    });
    let path = s.path.as_deref().unwrap_or_else(|| get(b":path"));
    let none = HeaderEdits::default();
    let edits = s.edits.as_deref().unwrap_or(&none);
    // A filter that edits `x-forwarded-for` says what goes: the gateway's
    // own value then stays out.
    let xff = s
        .xff
        .as_deref()
        .filter(|_| !edits.touches(b"x-forwarded-for"));
    // A filter that sets one of these wins; one that appends adds to ours.
    let xfp = s.xfp.filter(|_| !edits.removes(b"x-forwarded-proto"));
    let mut digits = [0u8; 40];
    let expected_timeout = s
        .expected_timeout()
        .map(|t| t.as_millis())
        // Under a millisecond reads as none, as Envoy truncates it.
        .filter(|ms| *ms > 0 && s.envoy_headers && !edits.removes(EXPECTED_TIMEOUT))
        .map(|ms| decimal(ms, &mut digits));
    let mut count_digits = [0u8; 40];
    let attempt_count = s
        .count_attempts
        .0
        .then(|| decimal(s.attempt().into(), &mut count_digits));
    let ours = Ours {
        xfh: forwarded_host.is_some(),
        xff: xff.is_some(),
        xfp: xfp.is_some(),
        attempt_count: attempt_count.is_some(),
        class: s.class,
    };
    let internal = (s.class == ClientClass::Internal).then_some(&b"true"[..]);
    let mut ip = [0u8; 48];
    let external = s.external.map(|a| stamp::external_address(a, &mut ip));
    // Ours go after the client's, in Envoy's order. Cookies go out never
    // indexed: they differ per client, and one upstream connection
    // carries many clients (RFC 7541 §7.1.3).
    let fields = head
        .iter()
        .filter(|(n, v, _)| forwarded(n, v, ours) && !edits.removes(n))
        .map(|(n, v, never)| (n, v, never || n == b"cookie"))
        .chain(xff.map(|v| (&b"x-forwarded-for"[..], v, false)))
        .chain(
            forwarded_host
                .as_deref()
                .map(|v| (&b"x-forwarded-host"[..], v, false)),
        )
        .chain(xfp.map(|v| (&b"x-forwarded-proto"[..], v, false)))
        .chain(expected_timeout.map(|v| (EXPECTED_TIMEOUT, v, false)))
        .chain(attempt_count.map(|v| (ATTEMPT_COUNT, v, false)))
        .chain(internal.map(|v| (stamp::INTERNAL, v, false)))
        .chain(external.map(|v| (stamp::EXTERNAL_ADDRESS, v, false)))
        .chain(edits.added().map(|(n, v)| (n, v, n == b"cookie")));
    sink.send(get(b":method"), authority, path, fields, s.bodyless)
}

/// A `sec-websocket-key` (RFC 6455 §4.1): 16 random bytes in base64.
fn websocket_key(random: u128) -> [u8; 24] {
    let mut text = String::with_capacity(24);
    engine::base64::base64_encode(&random.to_be_bytes(), &mut text);
    let mut key = [0; 24];
    key.copy_from_slice(text.as_bytes());
    key
}

/// Methods RFC 9110 §9.2.2 calls idempotent: safe to send again when the
/// connection died before an answer.
pub(super) fn idempotent(method: Option<&[u8]>) -> bool {
    matches!(
        method,
        Some(b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE")
    )
}

/// Gives a header list back to the upstream connection it came from.
pub(super) fn recycle(from: Option<(PoolRef, UpRef)>, list: HeaderList) {
    let Some((pool, up)) = from else { return };
    let mut p = pool.borrow_mut();
    if let Some(conn) = p.conn(up) {
        conn.recycle(list);
    }
}

impl Streams {
    /// Opens the upstream stream from the kept head, or waits for room in
    /// the pool. `Err`: no connection can be had (the stream fails with
    /// that reply).
    pub(super) fn try_open(&mut self, stream: u32) -> Result<(), LocalReply> {
        let Some(pool) = self
            .table
            .get(&stream)
            .and_then(|s| s.target.as_ref())
            .map(|t| Rc::clone(&t.pool))
        else {
            return Ok(());
        };
        if self
            .table
            .get(&stream)
            .is_some_and(|s| s.attempts > 0 && !s.can_resend())
        {
            // Another attempt, but its body passed the retry buffer.
            return Err(LocalReply::RetryBufferExceeded);
        }
        let key = self.table.get(&stream).map_or(stream, |s| s.key(stream));
        let slot = match Pool::acquire(&pool, self.cx.inbox, key) {
            Acquire::Ready(slot) => slot,
            Acquire::Wait => {
                if let Some(s) = self.table.get_mut(&stream) {
                    s.waiting = true;
                    // The last attempt's timers do not run while it waits.
                    (s.try_ends, s.try_idle_at) = (None, None);
                }
                return Ok(());
            }
            Acquire::Failed => {
                self.span_refused(stream, &pool, AttemptFailure::ConnectFailure);
                return Err(LocalReply::ConnectFailure);
            }
            Acquire::Overflow => {
                self.span_refused(stream, &pool, AttemptFailure::Overflow);
                return Err(LocalReply::Overflow);
            }
        };
        let Some(s) = self.table.get_mut(&stream) else {
            return Ok(());
        };
        if s.attempts > 0 && super::replay::rewind(s) {
            // Another attempt: the body kept for it goes again whole.
            super::enqueue(&mut self.queued, s, stream);
        }
        s.attempts = s.attempts.saturating_add(1);
        if s.upstream_spans.is_some() && !s.upgrade {
            // Its span's context goes in the head written next (a tunnel
            // records its request span only).
            self.span_begin(stream, &pool, Some(slot));
        }
        let Some(s) = self.table.get_mut(&stream) else {
            return Ok(());
        };
        // The attempt's timers run from the request's end, as the route
        // timeout does (now, for one without a body; else when its end
        // goes upstream, `forward`).
        let whole = s.bodyless;
        s.try_ends = s.per_try.filter(|_| whole).map(|d| self.now + d);
        s.try_idle_at = s.try_idle.filter(|_| whole).map(|d| self.now + d);
        // Keyed, as request ids are: the shard's RNG (which picks hosts)
        // is not shown to backends.
        let random = match s.upgrade {
            true => self.cx.wire.shard.request_id_bits(),
            false => 0,
        };
        let Some(up_stream) = send_request(s, &mut pool.borrow_mut(), slot, random) else {
            if s.upgrade {
                // The host's connection cannot carry it (it speaks HTTP/2):
                // no failure of the host's (outlier detection, retries).
                let reply = crate::http_filter::Reply::from(LocalReply::ConnectFailure);
                self.fail_with(stream, reply, None);
                return Ok(());
            }
            let key = s.key(stream);
            if let Some(spans) = s.upstream_spans.as_deref_mut() {
                spans.failed(key, AttemptFailure::ConnectFailure);
            }
            return Err(LocalReply::ConnectFailure);
        };
        if s.upgrade && s.attempts == 1 {
            // Once per tunnel, however often it is resent.
            self.cx.wire.shard.stats.downstream.rq_upgrades_total.inc();
        }
        let up = pool.borrow_mut().route(slot, up_stream, self.cx.inbox, key);
        s.up = Some(up);
        self.touch(&pool, slot);
        Ok(())
    }

    /// A stream waiting for room in its pool: the pool has room now.
    pub(super) fn retry_open(&mut self, stream: u32) -> Result<(), LocalReply> {
        match self.table.get_mut(&stream) {
            Some(s) if s.waiting => {
                s.waiting = false;
                self.try_open(stream)
            }
            _ => Ok(()),
        }
    }

    /// Leaves the upstream stream (cancelling it if still open) and gives
    /// back what was held for it; the stream may open another.
    pub(super) fn detach_upstream(&mut self, stream: u32) {
        self.detach(stream, false);
    }

    /// [`Self::detach_upstream`]; `answered`: its response head came (a
    /// retried answer), so cancelling it is not an early reset.
    pub(super) fn detach(&mut self, stream: u32, answered: bool) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some(pool) = s.target.as_ref().map(|t| Rc::clone(&t.pool)) else {
            return;
        };
        let key = s.key(stream);
        if let Some(spans) = s.upstream_spans.as_deref_mut() {
            spans.end(key, self.now);
        }
        if s.waiting {
            pool.borrow_mut().cancel_wait(self.cx.inbox, key);
            s.waiting = false;
        }
        let Some(up) = s.up.take() else {
            return;
        };
        self.granted -= std::mem::take(&mut s.granted);
        let resp_held = queued(&s.resp);
        s.resp.clear();
        let mut p = pool.borrow_mut();
        p.cancel(up, s.resp_started || answered, resp_held);
        p.unroute(up);
        drop(p);
        touch(&mut self.touched, &pool, up.slot);
        self.graveyard.push((key, pool, up));
    }

    /// An event for an attempt already left (`key`: its stream and
    /// attempt bit): a body's window is released on the upstream
    /// connection, a header list dropped.
    pub(super) fn give_back(&mut self, key: u32, ev: ClientEvent) {
        let ClientEvent::Data { data, .. } = ev else {
            return;
        };
        let Some((_, pool, up)) = self.graveyard.iter().find(|(k, _, _)| *k == key) else {
            return;
        };
        let (pool, up) = (Rc::clone(pool), *up);
        if let Some(conn) = pool.borrow_mut().conn(up) {
            conn.release(up.stream, data.len() as u32);
        }
        self.touch(&pool, up.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::websocket_key;

    #[test]
    fn a_websocket_key_is_16_bytes_in_base64() {
        // RFC 6455 §1.3's sample nonce, "the sample nonce".
        let nonce = u128::from_be_bytes(*b"the sample nonce");
        assert_eq!(&websocket_key(nonce), b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(&websocket_key(0), b"AAAAAAAAAAAAAAAAAAAAAA==");
        assert_eq!(&websocket_key(u128::MAX), b"/////////////////////w==");
    }
}
