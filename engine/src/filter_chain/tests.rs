//! Selection and overlap cases from gRFC A36's text and from Envoy 1.40's observed choices.

use super::*;

fn cidr(s: &str) -> CidrRange {
    let (a, l) = s.split_once('/').expect("addr/len");
    CidrRange::new(a.parse().expect("addr"), l.parse().expect("len")).expect("range")
}

fn table(chains: &[FilterChainMatch]) -> ChainTable {
    ChainTable::build(&chains.iter().collect::<Vec<_>>()).expect("no overlap")
}

fn overlap(chains: &[FilterChainMatch]) -> Overlap {
    ChainTable::build(&chains.iter().collect::<Vec<_>>()).expect_err("overlap")
}

/// A connection from `peer` to `local`, without TLS.
fn conn<'a>(local: &str, peer: &str) -> Connection<'a> {
    Connection {
        local: local.parse().expect("local"),
        peer: peer.parse().expect("peer"),
        direct_peer: peer.parse().expect("peer"),
        server_name: None,
        transport_protocol: "raw_buffer",
        application_protocols: &[],
    }
}

fn tls<'a>(sni: Option<&'a str>, alpn: &'a [&'a [u8]]) -> Connection<'a> {
    Connection {
        server_name: sni,
        transport_protocol: "tls",
        application_protocols: alpn,
        ..conn("10.0.0.1:443", "192.0.2.7:40000")
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ranges_are_masked_and_ipv4_lengths_clamped() {
    assert_eq!(cidr("10.1.2.3/8"), cidr("10.0.0.0/8"));
    assert_eq!(cidr("10.1.2.3/33"), cidr("10.1.2.3/32"));
    assert_eq!(cidr("10.1.2.3/33").prefix_len(), 32);
    assert_eq!(
        cidr("2001:db8::1/32").addr(),
        "2001:db8::".parse::<IpAddr>().unwrap()
    );
    assert!(CidrRange::new("::1".parse().unwrap(), 129).is_none());
    assert!(cidr("0.0.0.0/0").contains("203.0.113.9".parse().unwrap()));
    assert!(!cidr("0.0.0.0/0").contains("::1".parse().unwrap()));
    assert_eq!(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
}

/// A36: a matcher with two destination and two source ranges is four
/// matchers; one of them equal to another chain's is a duplicate.
#[test]
fn repeated_fields_expand_and_a_shared_combination_is_an_overlap() {
    let four = FilterChainMatch {
        prefix_ranges: vec![cidr("192.168.0.0/24"), cidr("10.1.0.0/16")],
        source_prefix_ranges: vec![cidr("192.168.1.0/24"), cidr("10.2.0.0/16")],
        source_type: SourceType::External,
        ..Default::default()
    };
    let one_of_them = FilterChainMatch {
        prefix_ranges: vec![cidr("10.1.0.0/16")],
        source_prefix_ranges: vec![cidr("10.2.0.0/16")],
        source_type: SourceType::External,
        ..Default::default()
    };
    assert_eq!(
        overlap(&[four.clone(), one_of_them.clone()]),
        Overlap {
            earlier: 0,
            later: 1
        }
    );
    // Unmasked host bits and a /33 normalise to the same matcher.
    let unmasked = FilterChainMatch {
        prefix_ranges: vec![cidr("10.1.77.1/16")],
        source_prefix_ranges: vec![cidr("10.2.3.4/16")],
        ..one_of_them.clone()
    };
    assert_eq!(overlap(&[four.clone(), unmasked]).later, 1);
    // Another source type is another matcher.
    let any = FilterChainMatch {
        source_type: SourceType::Any,
        ..one_of_them
    };
    let t = table(&[four, any]);
    assert_eq!(
        t.find(&conn("10.1.0.5:80", "10.2.9.9:5555")),
        Some(0),
        "EXTERNAL is more specific than ANY for a remote client"
    );
}

#[test]
fn an_unset_field_is_not_the_same_as_its_widest_value() {
    // 0.0.0.0/0 still pins IPv4 (A36); Envoy takes the explicit one first.
    let t = table(&[
        FilterChainMatch::default(),
        FilterChainMatch {
            prefix_ranges: vec![cidr("0.0.0.0/0")],
            ..Default::default()
        },
    ]);
    assert_eq!(t.find(&conn("10.0.0.1:80", "10.0.0.2:1")), Some(1));
    assert_eq!(t.find(&conn("[::2]:80", "[::3]:1")), Some(0));
    // `raw_buffer` against unset, ANY against EXTERNAL, a wildcard against
    // a name it covers: all distinct.
    table(&[
        FilterChainMatch::default(),
        FilterChainMatch {
            transport_protocol: "raw_buffer".into(),
            ..Default::default()
        },
        FilterChainMatch {
            source_type: SourceType::External,
            ..Default::default()
        },
    ]);
    table(&[
        FilterChainMatch {
            server_names: names(&["*.x.com"]),
            ..Default::default()
        },
        FilterChainMatch {
            server_names: names(&["a.x.com"]),
            ..Default::default()
        },
    ]);
    // Two chains without matchers are the same.
    assert_eq!(
        overlap(&[FilterChainMatch::default(), FilterChainMatch::default()]),
        Overlap {
            earlier: 0,
            later: 1
        }
    );
}

#[test]
fn a_name_listed_twice_in_one_chain_is_an_overlap() {
    let twice = FilterChainMatch {
        server_names: names(&["x.com", "x.com"]),
        ..Default::default()
    };
    assert_eq!(
        overlap(&[twice]),
        Overlap {
            earlier: 0,
            later: 0
        }
    );
}

#[test]
fn the_exact_destination_port_wins_and_is_not_left_for_a_less_specific_chain() {
    let t = table(&[
        FilterChainMatch {
            destination_port: Some(443),
            source_prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
        FilterChainMatch::default(),
    ]);
    assert_eq!(t.find(&conn("127.0.0.1:443", "10.1.1.1:9")), Some(0));
    // Envoy (observed): the port-443 branch has no match for this client,
    // and the chain without a port is not tried.
    assert_eq!(t.find(&conn("127.0.0.1:443", "127.0.0.1:9")), None);
    assert_eq!(t.find(&conn("127.0.0.1:80", "127.0.0.1:9")), Some(1));
}

#[test]
fn the_longest_destination_prefix_wins_without_backtracking() {
    let t = table(&[
        FilterChainMatch {
            prefix_ranges: vec![cidr("127.0.0.2/32")],
            source_prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
        FilterChainMatch {
            prefix_ranges: vec![cidr("127.0.0.0/8")],
            ..Default::default()
        },
    ]);
    // Envoy (observed): to .2 from loopback the /32 branch fails deeper:
    // closed (or the default chain), not the /8 chain.
    assert_eq!(t.find(&conn("127.0.0.2:80", "127.0.0.1:9")), None);
    assert_eq!(t.find(&conn("127.0.0.3:80", "127.0.0.1:9")), Some(1));
    assert_eq!(t.find(&conn("10.9.9.9:80", "127.0.0.1:9")), None);
}

#[test]
fn server_names_exact_then_longest_wildcard_then_none() {
    let t = table(&[
        FilterChainMatch {
            server_names: names(&["*.x.com"]),
            ..Default::default()
        },
        FilterChainMatch {
            server_names: names(&["a.b.x.com"]),
            ..Default::default()
        },
        FilterChainMatch {
            server_names: names(&["*.b.x.com"]),
            ..Default::default()
        },
        FilterChainMatch::default(),
    ]);
    assert_eq!(t.find(&tls(Some("a.b.x.com"), &[])), Some(1));
    assert_eq!(t.find(&tls(Some("q.b.x.com"), &[])), Some(2));
    assert_eq!(
        t.find(&tls(Some("q.r.x.com"), &[])),
        Some(0),
        "any number of labels"
    );
    assert_eq!(
        t.find(&tls(Some("x.com"), &[])),
        Some(3),
        "not the bare domain"
    );
    assert_eq!(t.find(&tls(None, &[])), Some(3));
    assert!(t.needs_inspector());
}

#[test]
fn alpn_follows_the_client_s_order() {
    let alpn = |p: &str| FilterChainMatch {
        transport_protocol: "tls".into(),
        application_protocols: names(&[p]),
        ..Default::default()
    };
    let t = table(&[
        alpn("h2"),
        alpn("http/1.1"),
        FilterChainMatch {
            transport_protocol: "tls".into(),
            ..Default::default()
        },
    ]);
    assert_eq!(t.find(&tls(None, &[b"h2", b"http/1.1"])), Some(0));
    assert_eq!(t.find(&tls(None, &[b"http/1.1", b"h2"])), Some(1));
    assert_eq!(t.find(&tls(None, &[b"h3"])), Some(2));
    assert_eq!(t.find(&conn("10.0.0.1:80", "10.0.0.9:1")), None);
}

#[test]
fn transport_protocol_is_decided_before_alpn() {
    let t = table(&[
        FilterChainMatch {
            application_protocols: names(&["h2"]),
            ..Default::default()
        },
        FilterChainMatch {
            transport_protocol: "tls".into(),
            ..Default::default()
        },
    ]);
    // The `tls` branch is taken first; its chain names no ALPN.
    assert_eq!(t.find(&tls(None, &[b"h2"])), Some(1));
    // Plaintext clients send no ALPN: the h2 chain never matches them.
    assert_eq!(t.find(&conn("10.0.0.1:80", "10.0.0.9:1")), None);
}

#[test]
fn sni_is_decided_before_transport_and_alpn() {
    let t = table(&[
        FilterChainMatch {
            server_names: names(&["*.x.com"]),
            ..Default::default()
        },
        FilterChainMatch {
            transport_protocol: "tls".into(),
            application_protocols: names(&["h2"]),
            ..Default::default()
        },
    ]);
    assert_eq!(t.find(&tls(Some("q.x.com"), &[b"h2"])), Some(0));
    assert_eq!(t.find(&tls(Some("other.org"), &[b"h2"])), Some(1));
}

#[test]
fn source_type_local_or_external_before_any_without_fallback() {
    let t = table(&[
        FilterChainMatch {
            source_type: SourceType::SameIpOrLoopback,
            source_ports: vec![1234],
            ..Default::default()
        },
        FilterChainMatch::default(),
    ]);
    assert_eq!(t.find(&conn("127.0.0.1:80", "127.0.0.1:1234")), Some(0));
    // Envoy (observed): a loopback client on another port is closed.
    assert_eq!(t.find(&conn("127.0.0.1:80", "127.0.0.1:999")), None);
    // Same address as the listener's, not loopback: local too.
    assert_eq!(t.find(&conn("10.0.0.1:80", "10.0.0.1:1234")), Some(0));
    assert_eq!(t.find(&conn("10.0.0.1:80", "10.0.0.2:999")), Some(1));
    // A local-type chain beats an ANY chain with a /32 source.
    let t = table(&[
        FilterChainMatch {
            source_prefix_ranges: vec![cidr("127.0.0.1/32")],
            ..Default::default()
        },
        FilterChainMatch {
            source_type: SourceType::SameIpOrLoopback,
            ..Default::default()
        },
    ]);
    assert_eq!(t.find(&conn("127.0.0.1:80", "127.0.0.1:5")), Some(1));
}

#[test]
fn source_prefix_then_port_without_backtracking() {
    let t = table(&[
        FilterChainMatch {
            source_prefix_ranges: vec![cidr("10.0.0.1/32")],
            source_ports: vec![7],
            ..Default::default()
        },
        FilterChainMatch {
            source_prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
        FilterChainMatch {
            direct_source_prefix_ranges: vec![cidr("192.0.2.0/24")],
            ..Default::default()
        },
    ]);
    assert_eq!(t.find(&conn("10.9.9.9:80", "10.0.0.1:7")), Some(0));
    assert_eq!(t.find(&conn("10.9.9.9:80", "10.0.0.1:8")), None);
    assert_eq!(t.find(&conn("10.9.9.9:80", "10.0.0.2:8")), Some(1));
    assert_eq!(t.find(&conn("10.9.9.9:80", "192.0.2.5:8")), Some(2));
}

/// Behind a proxy that sends a PROXY header: `source_prefix_ranges` match
/// the header's source, `direct_source_prefix_ranges` the proxy itself.
#[test]
fn direct_source_is_the_proxy_and_source_the_proxied_client() {
    let t = table(&[
        FilterChainMatch {
            direct_source_prefix_ranges: vec![cidr("192.0.2.0/24")],
            source_prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
        FilterChainMatch {
            source_prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
    ]);
    let proxied = |direct: &str| Connection {
        direct_peer: direct.parse().expect("direct"),
        ..conn("10.9.9.9:80", "10.1.2.3:5000")
    };
    assert_eq!(t.find(&proxied("192.0.2.1:40000")), Some(0));
    assert_eq!(t.find(&proxied("198.51.100.1:40000")), Some(1));
    // The proxy's own address is not the source.
    assert_eq!(t.find(&conn("10.9.9.9:80", "192.0.2.1:5000")), None);
}

#[test]
fn ipv4_clients_of_a_dual_stack_socket_match_ipv4_ranges() {
    let t = table(&[FilterChainMatch {
        source_prefix_ranges: vec![cidr("192.0.2.0/24")],
        ..Default::default()
    }]);
    assert_eq!(
        t.find(&conn("[::ffff:10.0.0.1]:80", "[::ffff:192.0.2.5]:1")),
        Some(0)
    );
    assert_eq!(t.find(&conn("[::1]:80", "[2001:db8::1]:1")), None);
}

#[test]
fn chains_that_need_the_inspector_are_known() {
    assert!(!table(&[FilterChainMatch {
        transport_protocol: "raw_buffer".into(),
        source_ports: vec![1],
        ..Default::default()
    }])
    .needs_inspector());
    assert!(table(&[FilterChainMatch {
        transport_protocol: "tls".into(),
        ..Default::default()
    }])
    .needs_inspector());
}

#[test]
fn the_local_address_is_needed_only_when_a_chain_matches_on_it() {
    let sources = table(&[FilterChainMatch {
        source_prefix_ranges: vec![cidr("10.0.0.0/8")],
        source_ports: vec![5],
        ..Default::default()
    }]);
    assert!(!sources.needs_local_address());
    for m in [
        FilterChainMatch {
            destination_port: Some(443),
            ..Default::default()
        },
        FilterChainMatch {
            prefix_ranges: vec![cidr("10.0.0.0/8")],
            ..Default::default()
        },
        FilterChainMatch {
            source_type: SourceType::External,
            ..Default::default()
        },
    ] {
        assert!(table(&[m]).needs_local_address());
    }
}
