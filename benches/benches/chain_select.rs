//! `engine::filter_chain::ChainTable::find`: choosing a connection's filter chain among 1, 10, 100 and 1000 chains (one per SNI name, one in ten also by source range), against a linear scan of the same matches, to show selection is a table lookup, flat in the number of chains.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::filter_chain::{ChainTable, CidrRange, Connection, FilterChainMatch};

/// `n` chains: `host{i}.example` by SNI, every tenth also by a /24 source.
fn chains(n: usize) -> Vec<FilterChainMatch> {
    (0..n)
        .map(|i| FilterChainMatch {
            server_names: vec![format!("host{i}.example")],
            transport_protocol: "tls".into(),
            source_prefix_ranges: if i % 10 == 5 {
                vec![CidrRange::new(
                    format!("10.{}.{}.0", i / 256 % 256, i % 256)
                        .parse()
                        .unwrap(),
                    24,
                )
                .unwrap()]
            } else {
                Vec::new()
            },
            ..Default::default()
        })
        .collect()
}

/// What a scan over the chains would check for an exact SNI (the cost a
/// table avoids): the first chain naming it.
fn scan(chains: &[FilterChainMatch], sni: &str) -> Option<usize> {
    chains
        .iter()
        .position(|m| m.server_names.iter().any(|n| n == sni))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("chain_select");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50)
        .throughput(Throughput::Elements(1));
    for n in [1usize, 10, 100, 1000] {
        let matches = chains(n);
        let refs: Vec<&FilterChainMatch> = matches.iter().collect();
        let table = ChainTable::build(&refs).expect("no overlap");
        // The last chain's name: the worst case for a scan.
        let sni = format!("host{}.example", n - 1);
        let alpn: [&[u8]; 2] = [b"h2", b"http/1.1"];
        let conn = Connection {
            local: "10.0.0.1:443".parse().unwrap(),
            peer: "192.0.2.7:40000".parse().unwrap(),
            direct_peer: "192.0.2.7:40000".parse().unwrap(),
            server_name: Some(&sni),
            transport_protocol: "tls",
            application_protocols: &alpn,
        };
        assert_eq!(table.find(&conn), Some(n - 1));
        g.bench_with_input(BenchmarkId::new("table", n), &conn, |b, conn| {
            b.iter(|| table.find(black_box(conn)))
        });
        g.bench_with_input(BenchmarkId::new("scan", n), &sni, |b, sni| {
            b.iter(|| scan(black_box(&matches), black_box(sni)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
