//! The control shard's side of one EDS update: a 10,000-endpoint
//! `ClusterLoadAssignment` arriving over ADS, through
//! `XdsClient::on_response` (protobuf decode, validation, store, ACK),
//! `XdsClient::compose` and `Snapshot::build`, as shards/src/control.rs does
//! between receiving the response and sending the snapshot to the shards.
//!
//! The client holds a CDS response of 100 EDS clusters: `big` (10,000
//! endpoints) and 99 small ones (20 endpoints each). Each iteration applies
//! the other of two versions of `big`'s endpoints that differ in 5
//! addresses, so every iteration is a real change (5 hosts leave, 5 join).
//!
//! Groups, so the split is visible:
//! * `eds_update_10k/pb_decode`: `ClusterLoadAssignment::decode` alone;
//! * `eds_update_10k/decode_validate`: `xds::client::decode` (decode +
//!   validation into `engine::Endpoint`s);
//! * `eds_update_10k/on_response`: the above plus storing and the ACK;
//! * `eds_update_10k/full`: `on_response` + `compose` + `Snapshot::build`;
//! * `eds_update_10k/full_all_100_clas`: the same when the response carries
//!   every subscribed CLA (a SotW server that resends the 99 unchanged
//!   ones too, as testsupport's `AdsServer` does);
//! * `eds_update_10k/wire_decode_response`: decoding the `DiscoveryResponse`
//!   from its gRPC message bytes, done by the ADS stream task before
//!   `on_response` (outside the gateway's own push timing).

use std::collections::HashSet;
use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engine::{HostRegistry, Snapshot};
use prost::Message;
use testsupport::resources;
use xds::client::{decode, ResourceType, XdsClient};
use xds::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xds::pb::envoy::service::discovery::v3::DiscoveryResponse;

const BIG_HOSTS: usize = 10_000;
const SMALL_CLUSTERS: usize = 99;
const SMALL_HOSTS: usize = 20;
/// Endpoints that differ between the two versions of `big`.
const CHANGED: usize = 5;

/// An EDS cluster, packed as the `Any` of a response.
fn eds_cluster(name: &str) -> prost_types::Any {
    resources::eds_cluster(name).1
}

/// A CLA of `addrs`, in one locality, packed as the `Any` of a response.
fn cla(name: &str, addrs: impl Iterator<Item = SocketAddr>) -> prost_types::Any {
    resources::cla(name, &addrs.collect::<Vec<_>>()).1
}

/// Endpoint `i` of cluster `c` (distinct across clusters and endpoints).
fn addr(c: usize, i: usize) -> SocketAddr {
    SocketAddr::from((
        Ipv4Addr::new(10, c as u8, (i >> 8) as u8, i as u8),
        8000 + (i >> 16) as u16,
    ))
}

/// `big`'s endpoints at `variant` 0 or 1: variant 1 replaces `CHANGED`
/// endpoints spread over the list with addresses outside 10.0.0.0/8.
fn big_cla(variant: usize) -> prost_types::Any {
    let step = BIG_HOSTS / CHANGED;
    cla(
        "big",
        (0..BIG_HOSTS).map(move |i| {
            if variant == 1 && i % step == 0 {
                SocketAddr::from((Ipv4Addr::new(11, 0, 0, (i / step) as u8), 9000))
            } else {
                addr(0, i)
            }
        }),
    )
}

fn small_name(c: usize) -> String {
    format!("small-{c}")
}

fn response(
    kind: ResourceType,
    version: u64,
    resources: Vec<prost_types::Any>,
) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version.to_string(),
        resources,
        type_url: kind.type_url().into(),
        nonce: format!("n{version}"),
        ..Default::default()
    }
}

/// The control shard's state after the initial CDS and EDS responses.
struct Control {
    client: XdsClient,
    registry: HostRegistry,
    current: Snapshot,
    version: u64,
}

impl Control {
    fn new(boot: &engine::Bootstrap, first_eds: Vec<prost_types::Any>) -> Self {
        let now = Instant::now();
        let mut client = XdsClient::new(boot, now);
        client.on_stream_open();
        let clusters = std::iter::once(eds_cluster("big"))
            .chain((1..=SMALL_CLUSTERS).map(|c| eds_cluster(&small_name(c))))
            .collect();
        let out = client.on_response(response(ResourceType::Cluster, 1, clusters), now);
        assert!(out.rejected.is_none(), "{:?}", out.rejected);
        let out = client.on_response(response(ResourceType::Endpoint, 1, first_eds), now);
        assert!(out.rejected.is_none(), "{:?}", out.rejected);
        let mut registry = HostRegistry::new();
        let current = Snapshot::build(1, &client.compose(), None, &mut registry);
        let c = current.cluster("big").expect("big is warm");
        assert_eq!(c.hosts.len(), BIG_HOSTS);
        assert_eq!(current.clusters.len(), 1 + 1 + SMALL_CLUSTERS);
        Self {
            client,
            registry,
            current,
            version: 1,
        }
    }

    /// What control.rs does for one response: `on_response`, then
    /// `compose` + `Snapshot::build` when it changed something. Returns the
    /// replaced snapshot so that it is dropped outside the timing (as the
    /// gateway's push timing also ends before the old one is released).
    fn update(&mut self, resp: DiscoveryResponse) -> Snapshot {
        let out = self.client.on_response(resp, Instant::now());
        debug_assert!(out.rejected.is_none() && out.changed);
        self.version += 1;
        let composed = self.client.compose();
        let next = Snapshot::build(
            self.version,
            &composed,
            Some(&self.current),
            &mut self.registry,
        );
        std::mem::replace(&mut self.current, next)
    }
}

fn bench(c: &mut Criterion) {
    // The ADS server address is never dialled: only the protocol state runs.
    let yaml = resources::ads_bootstrap_yaml(SocketAddr::from(([127, 0, 0, 1], 18000)));
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).unwrap();
    let big = [big_cla(0), big_cla(1)];
    let smalls: Vec<prost_types::Any> = (1..=SMALL_CLUSTERS)
        .map(|c| cla(&small_name(c), (0..SMALL_HOSTS).map(move |i| addr(c, i))))
        .collect();
    let with_smalls = |v: usize| {
        let mut all = vec![big[v].clone()];
        all.extend(smalls.iter().cloned());
        all
    };
    let known: HashSet<String> = std::iter::once("xds".to_string())
        .chain(std::iter::once("big".to_string()))
        .chain((1..=SMALL_CLUSTERS).map(small_name))
        .collect();
    eprintln!(
        "10,000-endpoint CLA: {} bytes encoded; all 100 CLAs: {} bytes",
        big[0].value.len(),
        with_smalls(0).iter().map(|a| a.value.len()).sum::<usize>()
    );

    let mut g = c.benchmark_group("eds_update_10k");
    g.sample_size(20);

    let mut n = 0usize;
    g.bench_function("pb_decode", |b| {
        b.iter(|| {
            n += 1;
            ClusterLoadAssignment::decode(black_box(big[n % 2].value.as_slice())).unwrap()
        })
    });

    let resources = [vec![big[0].clone()], vec![big[1].clone()]];
    g.bench_function("decode_validate", |b| {
        b.iter(|| {
            n += 1;
            decode(ResourceType::Endpoint, black_box(&resources[n % 2]), &known).unwrap()
        })
    });

    let wire: [Vec<u8>; 2] = [0, 1].map(|v| {
        response(ResourceType::Endpoint, 2 + v as u64, vec![big[v].clone()]).encode_to_vec()
    });
    g.bench_function("wire_decode_response", |b| {
        b.iter(|| {
            n += 1;
            DiscoveryResponse::decode(black_box(wire[n % 2].as_slice())).unwrap()
        })
    });

    // on_response alone: decode, validate, store, ACK.
    let mut ctl = Control::new(&boot, with_smalls(0));
    g.bench_function("on_response", |b| {
        b.iter_batched(
            || {
                n += 1;
                response(ResourceType::Endpoint, n as u64, vec![big[n % 2].clone()])
            },
            |resp| ctl.client.on_response(resp, Instant::now()),
            BatchSize::PerIteration,
        )
    });

    // The whole control-shard step, the response carrying `big` only.
    let mut ctl = Control::new(&boot, with_smalls(0));
    g.bench_function("full", |b| {
        b.iter_batched(
            || {
                n += 1;
                response(ResourceType::Endpoint, n as u64, vec![big[n % 2].clone()])
            },
            |resp| ctl.update(resp),
            BatchSize::PerIteration,
        )
    });
    // Sanity: the last update really changed `big` and kept the others.
    let before = ctl.current.cluster("big").unwrap().hosts[0].address;
    let prev = ctl.update(response(
        ResourceType::Endpoint,
        u64::MAX,
        vec![big[(n + 1) % 2].clone()],
    ));
    assert_ne!(before, ctl.current.cluster("big").unwrap().hosts[0].address);
    assert!(std::sync::Arc::ptr_eq(
        &prev.clusters["small-1"],
        &ctl.current.clusters["small-1"]
    ));

    // The same when every subscribed CLA is resent.
    let all = [with_smalls(0), with_smalls(1)];
    let mut ctl = Control::new(&boot, with_smalls(0));
    g.bench_function("full_all_100_clas", |b| {
        b.iter_batched(
            || {
                n += 1;
                response(ResourceType::Endpoint, n as u64, all[n % 2].clone())
            },
            |resp| ctl.update(resp),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
