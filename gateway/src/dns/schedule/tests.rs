//! The lookup schedule against Envoy's DNS cluster rules, on a clock the
//! tests move.

use super::*;
use engine::{DnsFamily, DnsTarget, HealthStatus};

const S: Duration = Duration::from_secs(1);

fn dns(kind: DnsKind, names: &[(&str, u16, u32)]) -> Arc<Dns> {
    Arc::new(Dns {
        kind,
        targets: names
            .iter()
            .map(|(host, port, weight)| DnsTarget {
                host: host.to_string(),
                port: *port,
                weight: *weight,
                health: HealthStatus::Unknown,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect(),
        refresh_rate: 5 * S,
        failure_refresh: None,
        respect_ttl: false,
        family: DnsFamily::Auto,
        resolvers: Vec::new(),
        query_timeout: 5 * S,
        query_tries: 4,
        tcp: false,
    })
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn found(addrs: &[&str], ttl: Option<u64>) -> Result<Resolution, String> {
    Ok(Resolution {
        addrs: addrs.iter().map(|a| ip(a)).collect(),
        ttl: ttl.map(Duration::from_secs),
    })
}

fn addrs(e: &[Endpoint]) -> Vec<String> {
    e.iter().map(|e| e.address.to_string()).collect()
}

/// A schedule following one cluster `c`, its lookups started at `now`.
fn started(d: &Arc<Dns>, now: Instant) -> (Schedule, Vec<Lookup>) {
    let mut s = Schedule::new(7);
    s.sync(&[("c".to_string(), Arc::clone(d))], now);
    let due = s.due(now);
    (s, due)
}

#[test]
fn a_cluster_has_hosts_once_every_name_was_looked_up() {
    let now = Instant::now();
    let d = dns(DnsKind::Strict, &[("a.test", 80, 2), ("b.test", 81, 1)]);
    let (mut s, due) = started(&d, now);
    assert_eq!(due.len(), 2, "every name is looked up at once");
    assert!(s.due(now).is_empty(), "nothing is started twice");
    assert_eq!(s.next_due(), None, "every lookup is in flight");
    assert_eq!(
        s.on_result(&due[0], found(&["10.0.0.1", "10.0.0.2"], None), now),
        None
    );
    let hosts = s
        .on_result(&due[1], found(&["10.0.0.3"], None), now)
        .unwrap();
    assert_eq!(addrs(&hosts), ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:81"]);
    assert_eq!(hosts[0].weight, 2, "an address takes its name's weight");
    assert_eq!(hosts[2].weight, 1);
    assert_eq!(s.counts()["c"].attempts, 2);
    assert_eq!(s.counts()["c"].successes, 2);
    assert_eq!(s.counts()["c"].hosts, 3);
}

#[test]
fn names_are_looked_up_again_at_the_refresh_rate_or_the_ttl() {
    let now = Instant::now();
    let d = dns(DnsKind::Strict, &[("a.test", 80, 1)]);
    let (mut s, due) = started(&d, now);
    s.on_result(&due[0], found(&["10.0.0.1"], Some(1)), now);
    assert_eq!(
        s.next_due(),
        Some(now + 5 * S),
        "the TTL is ignored by default"
    );
    assert!(s.due(now + 4 * S).is_empty());
    let again = s.due(now + 5 * S);
    assert_eq!(again.len(), 1);

    let mut ttl = (*d).clone();
    ttl.respect_ttl = true;
    let ttl = Arc::new(ttl);
    let (mut s, due) = started(&ttl, now);
    s.on_result(&due[0], found(&["10.0.0.1"], Some(2)), now);
    assert_eq!(s.next_due(), Some(now + 2 * S), "respect_dns_ttl: the TTL");
    let due = s.due(now + 2 * S);
    s.on_result(&due[0], found(&["10.0.0.1"], Some(0)), now + 2 * S);
    assert_eq!(
        s.next_due(),
        Some(now + 7 * S),
        "a TTL of 0 falls back to the refresh rate"
    );
}

#[test]
fn a_failure_keeps_the_hosts_and_a_first_failure_warms_the_cluster_empty() {
    let now = Instant::now();
    let d = dns(DnsKind::Strict, &[("a.test", 80, 1)]);
    let (mut s, due) = started(&d, now);
    let hosts = s.on_result(&due[0], Err("timed out".into()), now).unwrap();
    assert!(hosts.is_empty(), "warm, with no hosts");
    assert_eq!(
        s.next_due(),
        Some(now + 5 * S),
        "no failure rate: the refresh rate"
    );
    let due = s.due(now + 5 * S);
    let hosts = s.on_result(&due[0], found(&["10.0.0.1"], None), now + 5 * S);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.1:80"]);
    let due = s.due(now + 10 * S);
    let hosts = s.on_result(&due[0], Err("SERVFAIL".into()), now + 10 * S);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.1:80"], "kept");
    let c = &s.counts()["c"];
    assert_eq!((c.attempts, c.successes, c.failures), (3, 1, 2));
    assert_eq!(c.last_error.as_deref(), Some("SERVFAIL"));
}

#[test]
fn an_answer_without_addresses_empties_a_strict_name() {
    let now = Instant::now();
    let d = dns(DnsKind::Strict, &[("a.test", 80, 1), ("b.test", 80, 1)]);
    let (mut s, due) = started(&d, now);
    s.on_result(&due[0], found(&["10.0.0.1"], None), now);
    s.on_result(&due[1], found(&["10.0.0.2"], None), now);
    let due = s.due(now + 5 * S);
    let hosts = s.on_result(&due[0], found(&[], None), now + 5 * S).unwrap();
    assert_eq!(
        addrs(&hosts),
        ["10.0.0.2:80"],
        "NXDOMAIN: the name has no hosts"
    );
}

#[test]
fn failures_back_off_exponentially_with_jitter_and_a_success_resets() {
    let now = Instant::now();
    let mut d = (*dns(DnsKind::Strict, &[("a.test", 80, 1)])).clone();
    d.failure_refresh = Some((S, 4 * S));
    let d = Arc::new(d);
    let (mut s, mut due) = started(&d, now);
    let mut t = now;
    for ceiling in [1, 2, 4, 4, 4] {
        s.on_result(&due[0], Err("timed out".into()), t);
        let next = s.next_due().unwrap();
        let wait = next - t;
        assert!(
            wait >= Duration::from_millis(1) && wait < ceiling * S,
            "{wait:?} not below {ceiling}s"
        );
        t = next;
        due = s.due(t);
        assert_eq!(due.len(), 1);
    }
    s.on_result(&due[0], found(&["10.0.0.1"], None), t);
    assert_eq!(s.next_due(), Some(t + 5 * S), "a success: the refresh rate");
    let due = s.due(t + 5 * S);
    s.on_result(&due[0], Err("timed out".into()), t + 5 * S);
    assert!(
        s.next_due().unwrap() - (t + 5 * S) < S,
        "the backoff starts over"
    );
}

#[test]
fn a_logical_cluster_takes_the_first_address_and_keeps_it_through_empty_answers() {
    let now = Instant::now();
    let d = dns(DnsKind::Logical, &[("a.test", 443, 1)]);
    let (mut s, due) = started(&d, now);
    let hosts = s.on_result(&due[0], found(&["10.0.0.2", "10.0.0.1"], None), now);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.2:443"]);
    let due = s.due(now + 5 * S);
    let hosts = s.on_result(&due[0], found(&[], None), now + 5 * S);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.2:443"]);
}

#[test]
fn an_address_appears_once_even_under_two_names() {
    let now = Instant::now();
    let d = dns(DnsKind::Strict, &[("a.test", 80, 1), ("b.test", 80, 1)]);
    let (mut s, due) = started(&d, now);
    s.on_result(&due[0], found(&["10.0.0.1", "10.0.0.1"], None), now);
    let hosts = s.on_result(&due[1], found(&["10.0.0.1", "::1"], None), now);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.1:80", "[::1]:80"]);
}

#[test]
fn a_changed_config_starts_over_and_late_answers_to_the_old_one_are_dropped() {
    let now = Instant::now();
    let old = dns(DnsKind::Strict, &[("a.test", 80, 1)]);
    let (mut s, due) = started(&old, now);
    s.on_result(&due[0], found(&["10.0.0.1"], None), now);
    let late = s.due(now + 5 * S);

    let new = dns(DnsKind::Strict, &[("b.test", 80, 1)]);
    s.sync(&[("c".to_string(), Arc::clone(&new))], now + 6 * S);
    assert_eq!(
        s.on_result(&late[0], found(&["10.0.0.9"], None), now + 6 * S),
        None
    );
    let due = s.due(now + 6 * S);
    assert_eq!(due.len(), 1, "the new name is looked up at once");
    assert!(Arc::ptr_eq(&due[0].dns, &new));
    let hosts = s.on_result(&due[0], found(&["10.0.0.2"], None), now + 6 * S);
    assert_eq!(addrs(&hosts.unwrap()), ["10.0.0.2:80"]);

    // An equal config (a CDS update resending it) changes nothing.
    let equal = Arc::new((*new).clone());
    s.sync(&[("c".to_string(), equal)], now + 7 * S);
    assert!(s.due(now + 7 * S).is_empty());

    s.sync(&[], now + 8 * S);
    assert_eq!(s.next_due(), None);
    assert!(s.counts().is_empty(), "a cluster gone is forgotten");
}
