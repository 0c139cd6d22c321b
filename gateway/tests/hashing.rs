//! Consistent hashing (`RING_HASH`, `MAGLEV`) with route `hash_policy`: a
//! key goes to one host whatever the connection or shard, keys spread, a
//! cookie policy with a `ttl` makes the cookie it hashes.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use support::*;

fn bootstrap(backends: &[SocketAddr], lb: &str, hash_policy: &str) -> engine::Bootstrap {
    let endpoints = backends
        .iter()
        .map(|b| yaml::endpoint(&b.ip().to_string(), b.port(), ""))
        .collect::<Vec<_>>()
        .join(", ");
    yaml::web_bootstrap(
        &format!(", hash_policy: {hash_policy}"),
        &format!(
            "    lb_policy: {lb}\n{}    load_assignment: {{ cluster_name: web, endpoints: [{{ lb_endpoints: [{endpoints}] }}] }}\n",
            yaml::h2_options("")
        ),
    )
}

/// The backend that answered `GET /` with `headers`, on a new connection.
fn who(addr: SocketAddr, headers: Vec<(&'static str, String)>) -> (String, Option<String>) {
    client(move || async move {
        let c = connect(addr).await;
        let h: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let r = get(&c, "/", &h).await.expect("reply");
        assert_eq!(r.status, 200);
        (
            String::from_utf8_lossy(&r.body).into_owned(),
            r.header("set-cookie").map(str::to_owned),
        )
    })
}

#[test]
fn a_header_key_sticks_to_one_host_on_every_shard_and_keys_spread() {
    let backends: Vec<_> = ["b1", "b2", "b3"].into_iter().map(backend).collect();
    let addrs: Vec<_> = backends.iter().map(|b| b.addr()).collect();
    for lb in ["RING_HASH", "MAGLEV"] {
        let gw = start(
            bootstrap(&addrs, lb, "[{ header: { header_name: x-user } }]"),
            2,
        );
        let addr = gw.listener("ingress").unwrap();
        let mut seen = BTreeSet::new();
        for user in 0..12 {
            let key = format!("user-{user}");
            // New connections land on either shard; the answer is the same.
            let first = who(addr, vec![("x-user", key.clone())]).0;
            for _ in 0..3 {
                assert_eq!(
                    who(addr, vec![("x-user", key.clone())]).0,
                    first,
                    "{lb} {key}"
                );
            }
            seen.insert(first);
        }
        assert!(seen.len() >= 2, "{lb}: 12 keys all on {seen:?}");
        let admin = gw.admin_addr.unwrap();
        let policy = lb.to_ascii_lowercase();
        assert!(
            metric(
                admin,
                &format!("gateway_lb_picks_total{{policy=\"{policy}\"}}")
            ) >= 48.0
        );
        gw.shutdown();
    }
}

#[test]
fn a_cookie_policy_with_a_ttl_sets_the_cookie_it_hashed() {
    let backends: Vec<_> = ["b1", "b2", "b3"].into_iter().map(backend).collect();
    let addrs: Vec<_> = backends.iter().map(|b| b.addr()).collect();
    let gw = start(
        bootstrap(
            &addrs,
            "RING_HASH",
            "[{ cookie: { name: route, ttl: 3600s, path: / } }]",
        ),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    let (first, set) = who(addr, vec![]);
    let set = set.expect("a set-cookie");
    assert!(
        set.starts_with("route=\"") && set.ends_with("\"; Max-Age=3600; Path=/; HttpOnly"),
        "{set}"
    );
    let pair = set.split(';').next().unwrap().to_owned();
    // Sent back (from new connections), it keeps the host and makes no
    // new cookie.
    for _ in 0..4 {
        let (again, set) = who(addr, vec![("cookie", pair.clone())]);
        assert_eq!((again.as_str(), set), (first.as_str(), None));
    }
    gw.shutdown();
}
