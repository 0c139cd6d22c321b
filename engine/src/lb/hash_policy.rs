//! A request's hash for `RING_HASH` and `MAGLEV` clusters, from the route's
//! `hash_policy` as Envoy computes it (`Http::HashPolicyImpl`): each entry
//! that finds its input hashes it with XXH64; entries combine as
//! `rotl(hash, 1) ^ new`; a `terminal` entry that produced a hash ends the
//! list. No hash at all: the cluster picks as if at random.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{HashOn, HashPolicy};
use crate::route::query_value;

use super::xxhash::xxh64;

/// What the policies read of a request.
pub trait HashInput {
    /// Every value of header `name` (lower case), in order.
    fn header_values(&self, name: &str) -> Vec<&[u8]>;
    /// The value of cookie `name`, if sent.
    fn cookie(&self, name: &str) -> Option<&[u8]>;
    /// The request target (`:path`), query included.
    fn path(&self) -> &[u8];
    /// The client's address.
    fn peer(&self) -> SocketAddr;
}

/// A cookie the gateway made for a `cookie` policy with a `ttl`: its value
/// was hashed, and the response sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCookie {
    /// The whole `set-cookie` value.
    pub set_cookie: String,
}

/// The request's hash (`None`: no policy found its input) and the cookie
/// to set, if a policy made one. `conn_key` names the connection (client
/// and listener addresses): a generated cookie is the same for every
/// stream of a connection, as Envoy's. It is asked for only then.
pub fn request_hash(
    policies: &[HashPolicy],
    req: &impl HashInput,
    conn_key: impl FnOnce() -> String,
) -> (Option<u64>, Option<NewCookie>) {
    let mut conn_key = Some(conn_key);
    let mut hash: Option<u64> = None;
    let mut cookie = None;
    for p in policies {
        let new = match &p.kind {
            HashOn::Header(name) => {
                let mut values = req.header_values(name);
                // Order-independent, as Envoy sorts the values.
                values.sort_unstable();
                (!values.is_empty()).then(|| header_hash(&values))
            }
            HashOn::Cookie { name, ttl, path } => match req.cookie(name) {
                Some(v) if !unquote(v).is_empty() => Some(xxh64(unquote(v), 0)),
                _ => ttl.map(|ttl| {
                    let key = conn_key.take().map(|k| k()).unwrap_or_default();
                    let value = format!("{:016x}", xxh64(key.as_bytes(), 0));
                    cookie = Some(NewCookie {
                        set_cookie: set_cookie(name, &value, path.as_deref(), ttl),
                    });
                    xxh64(value.as_bytes(), 0)
                }),
            },
            HashOn::SourceIp => Some(xxh64(req.peer().ip().to_string().as_bytes(), 0)),
            HashOn::QueryParameter(name) => {
                query_value(req.path(), name.as_bytes()).map(|v| xxh64(v, 0))
            }
        };
        if let Some(new) = new {
            let old = hash.map_or(0, |h| h.rotate_left(1));
            hash = Some(old ^ new);
        }
        if p.terminal && hash.is_some() {
            break;
        }
    }
    (hash, cookie)
}

/// A cookie value without its surrounding double quotes (Envoy's
/// `parseCookieValue` strips them; the cookies it makes are quoted).
fn unquote(v: &[u8]) -> &[u8] {
    match v {
        [b'"', inner @ .., b'"'] => inner,
        _ => v,
    }
}

/// Envoy's hash of a header's values (sorted by the caller): each value's
/// XXH64 seeded with the hash so far, from 0.
pub fn header_hash(values: &[&[u8]]) -> u64 {
    values.iter().fold(0, |h, v| xxh64(v, h))
}

/// Envoy's `makeSetCookieValue`: the value quoted, `Max-Age` unless the
/// ttl is 0 (a session cookie), `Path` if given, `HttpOnly`.
fn set_cookie(name: &str, value: &str, path: Option<&str>, ttl: Duration) -> String {
    let mut s = format!("{name}=\"{value}\"");
    if !ttl.is_zero() {
        s.push_str(&format!("; Max-Age={}", ttl.as_secs()));
    }
    if let Some(p) = path.filter(|p| !p.is_empty()) {
        s.push_str("; Path=");
        s.push_str(p);
    }
    s.push_str("; HttpOnly");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Req {
        headers: Vec<(&'static str, &'static str)>,
        path: &'static str,
    }

    impl HashInput for Req {
        fn header_values(&self, name: &str) -> Vec<&[u8]> {
            self.headers
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.as_bytes())
                .collect()
        }
        fn cookie(&self, name: &str) -> Option<&[u8]> {
            crate::session::find_cookie(self.header_values("cookie"), name)
        }
        fn path(&self) -> &[u8] {
            self.path.as_bytes()
        }
        fn peer(&self) -> SocketAddr {
            "10.1.2.3:5555".parse().unwrap()
        }
    }

    fn on(kind: HashOn, terminal: bool) -> HashPolicy {
        HashPolicy { kind, terminal }
    }

    fn req(headers: Vec<(&'static str, &'static str)>, path: &'static str) -> Req {
        Req { headers, path }
    }

    #[test]
    fn each_input_hashes_its_value() {
        let r = req(
            vec![("x-key", "abc"), ("cookie", "a=1; sid=abc")],
            "/p?x=1&user=abc&y",
        );
        let h = |kind| request_hash(&[on(kind, false)], &r, || "c".to_string()).0;
        let abc = Some(xxh64(b"abc", 0));
        assert_eq!(h(HashOn::Header("x-key".into())), abc);
        assert_eq!(
            h(HashOn::Cookie {
                name: "sid".into(),
                ttl: None,
                path: None
            }),
            abc
        );
        assert_eq!(h(HashOn::QueryParameter("user".into())), abc);
        assert_eq!(h(HashOn::QueryParameter("y".into())), Some(xxh64(b"", 0)));
        assert_eq!(h(HashOn::QueryParameter("z".into())), None);
        assert_eq!(h(HashOn::SourceIp), Some(xxh64(b"10.1.2.3", 0)));
        assert_eq!(h(HashOn::Header("absent".into())), None);
    }

    #[test]
    fn header_values_hash_in_sorted_order() {
        let a = req(vec![("x-k", "b"), ("x-k", "a")], "/");
        let b = req(vec![("x-k", "a"), ("x-k", "b")], "/");
        let p = [on(HashOn::Header("x-k".into()), false)];
        assert_eq!(
            request_hash(&p, &a, || "".to_string()).0,
            request_hash(&p, &b, || "".to_string()).0
        );
        let chained = xxh64(b"b", xxh64(b"a", 0));
        assert_eq!(request_hash(&p, &a, || "".to_string()).0, Some(chained));
    }

    #[test]
    fn entries_combine_by_rotation_and_terminal_stops() {
        let r = req(vec![("a", "1"), ("b", "2")], "/");
        let (ha, hb) = (xxh64(b"1", 0), xxh64(b"2", 0));
        let both = [
            on(HashOn::Header("a".into()), false),
            on(HashOn::Header("b".into()), false),
        ];
        assert_eq!(
            request_hash(&both, &r, || "".to_string()).0,
            Some(ha.rotate_left(1) ^ hb)
        );
        let stop = [
            on(HashOn::Header("missing".into()), true),
            on(HashOn::Header("a".into()), true),
            on(HashOn::Header("b".into()), false),
        ];
        assert_eq!(
            request_hash(&stop, &r, || "".to_string()).0,
            Some(ha),
            "terminal once hashed"
        );
    }

    #[test]
    fn a_cookie_policy_with_ttl_makes_the_cookie_it_hashes() {
        let p = [on(
            HashOn::Cookie {
                name: "route".into(),
                ttl: Some(Duration::from_secs(60)),
                path: Some("/".into()),
            },
            false,
        )];
        let (h, c) = request_hash(&p, &req(vec![], "/"), || {
            "10.1.2.3:5555127.0.0.1:80".to_string()
        });
        let value = format!("{:016x}", xxh64(b"10.1.2.3:5555127.0.0.1:80", 0));
        assert_eq!(h, Some(xxh64(value.as_bytes(), 0)));
        assert_eq!(
            c.unwrap().set_cookie,
            format!("route=\"{value}\"; Max-Age=60; Path=/; HttpOnly")
        );
        // Sent back, the cookie hashes the same and no new one is made.
        let back: &'static str = Box::leak(format!("route=\"{value}\"").into_boxed_str());
        let (h2, c2) = request_hash(&p, &req(vec![("cookie", back)], "/"), || {
            "other".to_string()
        });
        assert_eq!((h2, c2), (h, None));
    }
}
