//! Session mode (`--sessions N`): per-session cookie jars and backend
//! affinity tracking.
//!
//! Each worker thread owns a [`SessionPool`] with its share of the sessions
//! ([`share`]). A request is sent on behalf of one idle session, taken
//! round-robin (a FIFO of idle sessions: the least recently used goes
//! first), and a session has at most one request in flight. The session's
//! cookies go out in a `cookie` header; every response's `set-cookie`
//! headers update its jar and the backend header (`x-backend` by default)
//! is compared with the backend the session saw last.
//!
//! Responses come from an untrusted server, so parsing is plain string work
//! with hard bounds ([`MAX_COOKIES`], [`MAX_COOKIE_NAME`],
//! [`MAX_COOKIE_VALUE`], [`MAX_BACKEND_LEN`]) and anything malformed is
//! ignored.

use std::collections::VecDeque;

use http::header::{HeaderName, HeaderValue, SET_COOKIE};
use http::HeaderMap;

use crate::stats::SessionStats;

/// Cookies kept per session; further new names are ignored (existing ones
/// are still updated or deleted).
pub const MAX_COOKIES: usize = 16;
/// Longest cookie name kept (bytes).
pub const MAX_COOKIE_NAME: usize = 256;
/// Longest cookie value kept (bytes, quotes included).
pub const MAX_COOKIE_VALUE: usize = 4096;
/// Backend names are compared on at most this many leading bytes.
pub const MAX_BACKEND_LEN: usize = 256;

/// Sessions thread `thread` of `threads` owns out of `total`: an even split,
/// the first `total % threads` threads taking one more.
pub fn share(total: usize, threads: usize, thread: usize) -> usize {
    total / threads + usize::from(thread < total % threads)
}

/// One parsed `set-cookie` header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetCookie<'a> {
    pub name: &'a str,
    /// Verbatim, surrounding double quotes included.
    pub value: &'a str,
    /// `Max-Age` of zero or less: the cookie is to be removed.
    pub delete: bool,
}

/// RFC 9110 `tchar`: what a cookie name may consist of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Printable ASCII and inner spaces (browsers accept those); no control
/// characters and no non-ASCII, so the `cookie` header we build from the
/// jar is always a valid header value.
fn is_value_byte(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b';'
}

fn trim_ws(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Whether a `Max-Age` value expires the cookie at once (`0`, `-5`...).
/// A value that is not an optional `-` and digits is invalid and ignored.
fn max_age_expires(v: &str) -> Option<bool> {
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, v),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(neg || digits.bytes().all(|b| b == b'0'))
}

/// Parses one `set-cookie` value: `name=value` up to the first `;`, then
/// attributes, of which only `Max-Age` is looked at (the last valid one
/// wins). `Path`, `Domain`, `Expires`, `Secure`... are ignored: every
/// cookie goes with every request of its session. Returns `None` for
/// malformed input (no `=`, empty or non-token name, control characters or
/// non-ASCII, over-long name or value).
pub fn parse_set_cookie(raw: &[u8]) -> Option<SetCookie<'_>> {
    let s = std::str::from_utf8(raw).ok()?;
    let mut parts = s.split(';');
    let (name, value) = parts.next()?.split_once('=')?;
    let (name, value) = (trim_ws(name), trim_ws(value));
    if name.is_empty() || name.len() > MAX_COOKIE_NAME || !name.bytes().all(is_tchar) {
        return None;
    }
    if value.len() > MAX_COOKIE_VALUE || !value.bytes().all(is_value_byte) {
        return None;
    }
    let mut delete = false;
    for attr in parts {
        let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
        if trim_ws(k).eq_ignore_ascii_case("max-age") {
            if let Some(expires) = max_age_expires(trim_ws(v)) {
                delete = expires;
            }
        }
    }
    Some(SetCookie {
        name,
        value,
        delete,
    })
}

/// One session's cookies, in the order they were first set, and the
/// `cookie` request header built from them (rebuilt only when they change).
#[derive(Debug, Clone, Default)]
pub struct CookieJar {
    cookies: Vec<(Box<str>, Box<str>)>,
    header: Option<HeaderValue>,
    dirty: bool,
}

impl CookieJar {
    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// The stored value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| &**v)
    }

    /// Applies one parsed `set-cookie`; returns whether the jar changed.
    pub fn set(&mut self, c: SetCookie<'_>) -> bool {
        let pos = self.cookies.iter().position(|(n, _)| &**n == c.name);
        let changed = match pos {
            Some(i) if c.delete => {
                self.cookies.remove(i);
                true
            }
            Some(i) if &*self.cookies[i].1 == c.value => false,
            Some(i) => {
                self.cookies[i].1 = c.value.into();
                true
            }
            None if c.delete || self.cookies.len() >= MAX_COOKIES => false,
            None => {
                self.cookies.push((c.name.into(), c.value.into()));
                true
            }
        };
        self.dirty |= changed;
        changed
    }

    /// Applies every `set-cookie` header of a response, skipping malformed
    /// ones; returns whether the jar changed.
    pub fn update(&mut self, headers: &HeaderMap) -> bool {
        let mut changed = false;
        for v in headers.get_all(SET_COOKIE) {
            if let Some(c) = parse_set_cookie(v.as_bytes()) {
                changed |= self.set(c);
            }
        }
        changed
    }

    /// The `cookie` header to send (`a=b; c=d`), `None` while empty.
    pub fn header(&mut self) -> Option<HeaderValue> {
        if self.dirty {
            self.dirty = false;
            self.header = if self.cookies.is_empty() {
                None
            } else {
                let mut s = String::with_capacity(
                    self.cookies
                        .iter()
                        .map(|(n, v)| n.len() + v.len() + 3)
                        .sum(),
                );
                for (n, v) in &self.cookies {
                    if !s.is_empty() {
                        s.push_str("; ");
                    }
                    s.push_str(n);
                    s.push('=');
                    s.push_str(v);
                }
                // Names are tokens and values printable ASCII: always valid.
                HeaderValue::from_str(&s).ok()
            };
        }
        self.header.clone()
    }
}

/// Which backend a session is on, and how often that changed.
#[derive(Debug, Clone, Default)]
pub struct Affinity {
    backend: Option<Box<[u8]>>,
    /// Changes of backend counted so far.
    pub breaks: u64,
}

impl Affinity {
    /// The backend the session is on (truncated to [`MAX_BACKEND_LEN`]).
    pub fn backend(&self) -> Option<&[u8]> {
        self.backend.as_deref()
    }

    /// Records a response from `backend`. The first one is remembered; a
    /// different one is a break (counted when `count`, i.e. in the measured
    /// window) and becomes the remembered backend. Returns whether it broke.
    pub fn observe(&mut self, backend: &[u8], count: bool) -> bool {
        let key = &backend[..backend.len().min(MAX_BACKEND_LEN)];
        match &self.backend {
            Some(b) if **b == *key => false,
            prev => {
                let broke = prev.is_some();
                self.backend = Some(key.into());
                if broke && count {
                    self.breaks += 1;
                }
                broke
            }
        }
    }
}

/// One virtual session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub jar: CookieJar,
    pub affinity: Affinity,
}

/// A worker thread's sessions and the queue of the idle ones.
#[derive(Debug)]
pub struct SessionPool {
    sessions: Vec<Session>,
    idle: VecDeque<usize>,
    backend_header: HeaderName,
    /// Measured responses without the backend header.
    no_header: u64,
}

impl SessionPool {
    /// `n` fresh sessions, all idle.
    pub fn new(n: usize, backend_header: HeaderName) -> SessionPool {
        SessionPool {
            sessions: vec![Session::default(); n],
            idle: (0..n).collect(),
            backend_header,
            no_header: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    pub fn session(&self, i: usize) -> &Session {
        &self.sessions[i]
    }

    /// The least recently used idle session, if any.
    pub fn take(&mut self) -> Option<usize> {
        self.idle.pop_front()
    }

    /// Returns session `i` (from [`take`](Self::take)) to the idle queue.
    pub fn give_back(&mut self, i: usize) {
        self.idle.push_back(i);
    }

    /// The `cookie` header session `i` sends.
    pub fn cookie_header(&mut self, i: usize) -> Option<HeaderValue> {
        self.sessions[i].jar.header()
    }

    /// Updates session `i` from a response's headers; `measured` when the
    /// request started in the measured window (only then are breaks and
    /// missing headers counted; cookies and the backend are always kept).
    pub fn on_response(&mut self, i: usize, headers: &HeaderMap, measured: bool) {
        let s = &mut self.sessions[i];
        s.jar.update(headers);
        match headers.get(&self.backend_header) {
            Some(b) => {
                s.affinity.observe(b.as_bytes(), measured);
            }
            None => self.no_header += u64::from(measured),
        }
    }

    /// Affinity figures of this pool's sessions.
    pub fn stats(&self) -> SessionStats {
        let mut st = SessionStats {
            sessions: self.sessions.len() as u64,
            no_header: self.no_header,
            ..SessionStats::default()
        };
        for s in &self.sessions {
            st.breaks += s.affinity.breaks;
            st.broken += u64::from(s.affinity.breaks > 0);
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(s: &str) -> Option<SetCookie<'_>> {
        parse_set_cookie(s.as_bytes())
    }

    fn headers(set_cookies: &[&str], backend: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        for c in set_cookies {
            h.append(SET_COOKIE, HeaderValue::from_str(c).unwrap());
        }
        if let Some(b) = backend {
            h.insert("x-backend", HeaderValue::from_str(b).unwrap());
        }
        h
    }

    #[test]
    fn parse_name_value_and_attributes() {
        let c = sc("SID=abc123; Path=/; HttpOnly; Secure; Domain=example.com").unwrap();
        assert_eq!((c.name, c.value, c.delete), ("SID", "abc123", false));
        // Whitespace around name and value is trimmed, `=` in the value kept.
        let c = sc("  tok = a=b==  ;Max-Age=60").unwrap();
        assert_eq!((c.name, c.value, c.delete), ("tok", "a=b==", false));
        // Quoted values are kept verbatim, quotes included.
        let c = sc("q=\"hello world\"; Expires=Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(c.value, "\"hello world\"");
        // Empty value is a value.
        assert_eq!(sc("e=").unwrap().value, "");
        assert_eq!(sc("e=;path=/").unwrap().value, "");
        // Max-Age <= 0 deletes; the last valid Max-Age wins; junk is ignored.
        assert!(sc("d=; Max-Age=0").unwrap().delete);
        assert!(sc("d=x; max-age=-1").unwrap().delete);
        assert!(sc("d=x; MAX-AGE = 000").unwrap().delete);
        assert!(!sc("d=x; Max-Age=0; Max-Age=10").unwrap().delete);
        assert!(sc("d=x; Max-Age=0; Max-Age=soon").unwrap().delete);
        assert!(!sc("d=x; Max-Age=").unwrap().delete);
        assert!(!sc("d=x; Max-Age=-").unwrap().delete);
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "",
            ";",
            "noequals",
            "noequals; a=b",
            "=value",
            " =value",
            "na me=v",
            "na,me=v",
            "n(x)=v",
            "n=a\tb",
            "n=a\u{7f}",
            "n=caf\u{e9}",
        ] {
            assert_eq!(sc(bad), None, "{bad:?}");
        }
        assert_eq!(parse_set_cookie(b"n=\xff\xfe"), None);
        assert_eq!(parse_set_cookie(b"n=a\x00b"), None);
        // Size bounds.
        let long_name = format!("{}=v", "n".repeat(MAX_COOKIE_NAME + 1));
        assert_eq!(sc(&long_name), None);
        let ok_name = format!("{}=v", "n".repeat(MAX_COOKIE_NAME));
        assert!(sc(&ok_name).is_some());
        let long_value = format!("n={}", "v".repeat(MAX_COOKIE_VALUE + 1));
        assert_eq!(sc(&long_value), None);
        let ok_value = format!("n={}; Path=/", "v".repeat(MAX_COOKIE_VALUE));
        assert_eq!(sc(&ok_value).unwrap().value.len(), MAX_COOKIE_VALUE);
    }

    #[test]
    fn jar_multiple_set_cookies_and_header() {
        let mut jar = CookieJar::default();
        assert_eq!(jar.header(), None);
        let changed = jar.update(&headers(
            &[
                "a=1; Path=/",
                "bogus",
                "b=\"two\"; HttpOnly",
                "c=3=3; Max-Age=100",
            ],
            None,
        ));
        assert!(changed);
        assert_eq!(jar.len(), 3);
        assert_eq!(jar.get("b"), Some("\"two\""));
        assert_eq!(jar.header().unwrap(), "a=1; b=\"two\"; c=3=3");

        // Same values again: no change, header reused.
        assert!(!jar.update(&headers(&["a=1", "c=3=3"], None)));
        // Update keeps the position, delete removes, unknown delete is a no-op.
        assert!(jar.update(&headers(&["a=9", "b=; Max-Age=0", "zz=; Max-Age=0"], None)));
        assert_eq!(jar.header().unwrap(), "a=9; c=3=3");
        assert!(jar.update(&headers(&["a=; max-age=0", "c=x; Max-Age=-1"], None)));
        assert!(jar.is_empty());
        assert_eq!(jar.header(), None);
        // No set-cookie at all.
        assert!(!jar.update(&HeaderMap::new()));
    }

    #[test]
    fn jar_is_bounded() {
        let mut jar = CookieJar::default();
        for i in 0..MAX_COOKIES + 5 {
            jar.update(&headers(&[&format!("c{i}=v{i}")], None));
        }
        assert_eq!(jar.len(), MAX_COOKIES);
        assert_eq!(jar.get(&format!("c{}", MAX_COOKIES)), None);
        // A full jar still updates and deletes known names...
        assert!(jar.update(&headers(&["c0=new"], None)));
        assert_eq!(jar.get("c0"), Some("new"));
        assert!(jar.update(&headers(&["c1=; Max-Age=0"], None)));
        // ...which makes room for a new one.
        assert!(jar.update(&headers(&["late=1"], None)));
        assert_eq!(jar.len(), MAX_COOKIES);
        // An over-long value does not replace a good one.
        let long = format!("c0={}", "x".repeat(MAX_COOKIE_VALUE + 1));
        assert!(!jar.update(&headers(&[&long], None)));
        assert_eq!(jar.get("c0"), Some("new"));
        let h = jar.header().unwrap();
        assert!(h.to_str().unwrap().starts_with("c0=new; c2=v2; "));
        assert!(h.to_str().unwrap().ends_with("; late=1"));
    }

    #[test]
    fn affinity_breaks() {
        let mut a = Affinity::default();
        assert!(!a.observe(b"b1", true));
        assert!(!a.observe(b"b1", true));
        assert!(a.observe(b"b2", true));
        assert_eq!(a.backend(), Some(&b"b2"[..]));
        assert!(!a.observe(b"b2", true));
        // Outside the measured window: followed, not counted.
        assert!(a.observe(b"b1", false));
        assert_eq!(a.breaks, 1);
        assert!(a.observe(b"b3", true));
        assert_eq!(a.breaks, 2);
        // Long names compare on their prefix.
        let long = vec![b'x'; MAX_BACKEND_LEN + 10];
        assert!(a.observe(&long, true));
        assert!(!a.observe(&long[..MAX_BACKEND_LEN + 1], true));
        assert_eq!(a.backend().unwrap().len(), MAX_BACKEND_LEN);
    }

    #[test]
    fn pool_round_robin_and_accounting() {
        let mut p = SessionPool::new(3, HeaderName::from_static("x-backend"));
        assert_eq!(p.len(), 3);
        let order: Vec<usize> = (0..6)
            .map(|_| {
                let i = p.take().unwrap();
                p.give_back(i);
                i
            })
            .collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
        // All busy: nothing to take.
        let taken: Vec<usize> = (0..3).map(|_| p.take().unwrap()).collect();
        assert_eq!(p.take(), None);
        for i in taken {
            p.give_back(i);
        }

        // Session 0: warm-up on b1, then b1, b2, b2 (one break).
        p.on_response(0, &headers(&["sid=0"], Some("b1")), false);
        p.on_response(0, &headers(&[], Some("b1")), true);
        p.on_response(0, &headers(&[], Some("b2")), true);
        p.on_response(0, &headers(&[], Some("b2")), true);
        assert_eq!(p.cookie_header(0).unwrap(), "sid=0");
        // Session 1: no header twice (one in warm-up, not counted), then b1.
        p.on_response(1, &headers(&[], None), false);
        p.on_response(1, &headers(&[], None), true);
        p.on_response(1, &headers(&[], Some("b1")), true);
        assert_eq!(p.cookie_header(1), None);
        // Session 2: b1, b2, b1 (two breaks).
        for b in ["b1", "b2", "b1"] {
            p.on_response(2, &headers(&[], Some(b)), true);
        }
        let st = p.stats();
        assert_eq!(
            st,
            SessionStats {
                sessions: 3,
                broken: 2,
                breaks: 3,
                no_header: 1,
            }
        );
        assert_eq!(p.session(2).affinity.breaks, 2);

        // Configurable header name.
        let mut q = SessionPool::new(1, HeaderName::from_static("x-upstream"));
        q.on_response(0, &headers(&[], Some("b1")), true);
        assert_eq!(q.stats().no_header, 1);
    }

    #[test]
    fn share_splits_evenly() {
        assert_eq!(
            (0..3).map(|t| share(10, 3, t)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..4).map(|t| share(8, 4, t)).sum::<usize>(), 8);
        assert_eq!(share(1, 1, 0), 1);
        for total in 1..50 {
            for threads in 1..=total.min(8) {
                let v: Vec<usize> = (0..threads).map(|t| share(total, threads, t)).collect();
                assert_eq!(v.iter().sum::<usize>(), total);
                assert!(v.iter().all(|&n| n >= 1));
            }
        }
    }
}
