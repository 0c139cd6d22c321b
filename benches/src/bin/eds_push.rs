//! `eds_push [--shards N] [--pushes K] [--hosts H] [--small-clusters S] [--warmup W] [--scrapers C]`:
//! end-to-end timing of large EDS updates through the real gateway.
//!
//! Starts testsupport's in-process ADS server and the gateway in-process
//! (`shards::start`, N data shards, default 2) with an ADS bootstrap, serves
//! CDS (cluster `echo`, EDS, with H = 10,000 endpoints, plus S = 99 small EDS
//! clusters of 20 endpoints), LDS (listener `ingress`) and RDS (`/` → `echo`),
//! then pushes K (default 20) successive EDS versions, each differing from
//! the previous one in 5 of `echo`'s endpoints, waiting for each ACK.
//!
//! Per push it reports:
//! * **push**: the gateway's own `gateway_config_push_last_seconds` from the
//!   admin `/stats` page: from receipt of the xDS response at the control
//!   shard (decode, validation, compose, snapshot build, send) to the last
//!   data shard's ack of the new snapshot;
//! * **ACK round trip**: from `AdsServer::set` to the ACK being recorded by
//!   the server, i.e. the above plus the server noticing the change (it
//!   polls every 5 ms), encoding and sending the response, the gateway's
//!   gRPC decode, and the ACK's way back.
//!
//! The EDS response carries every subscribed CLA (testsupport's server
//! resends the whole state of the world of the type), so H + 20·S endpoints
//! are decoded and validated per push. W (default 2) warm-up pushes come
//! first and are not counted.
//!
//! With C scrapers (default 0), C threads fetch `/stats` and
//! `/stats/prometheus` back to back for the whole run: what a scrape
//! storm does to the pushes (the admin renders on its own thread).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use testsupport::resources::*;
use testsupport::{type_url, AdsServer, RecordedRequest};

const WAIT: Duration = Duration::from_secs(30);
/// Endpoints of `echo` that differ between consecutive versions.
const CHANGED: usize = 5;
const SMALL_HOSTS: usize = 20;

struct Args {
    shards: usize,
    pushes: usize,
    hosts: usize,
    small_clusters: usize,
    warmup: usize,
    scrapers: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        shards: 2,
        pushes: 20,
        hosts: 10_000,
        small_clusters: 99,
        warmup: 2,
        scrapers: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "--shards" => &mut a.shards,
            "--pushes" => &mut a.pushes,
            "--hosts" => &mut a.hosts,
            "--small-clusters" => &mut a.small_clusters,
            "--warmup" => &mut a.warmup,
            "--scrapers" => &mut a.scrapers,
            "-h" | "--help" => {
                return Err("usage: eds_push [--shards N] [--pushes K] [--hosts H] \
                     [--small-clusters S] [--warmup W] [--scrapers C]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        };
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        *slot = v.parse().map_err(|e| format!("{flag} {v:?}: {e}"))?;
    }
    if a.shards == 0 || a.pushes == 0 || a.hosts < CHANGED || a.hosts > 1 << 24 {
        return Err("need --shards ≥ 1, --pushes ≥ 1, 5 ≤ --hosts ≤ 2^24".into());
    }
    Ok(a)
}

fn ads_bootstrap(ads: SocketAddr) -> engine::Bootstrap {
    xds::bootstrap::from_str(&ads_bootstrap_yaml(ads), xds::bootstrap::Format::Yaml)
        .expect("bootstrap")
}

/// Endpoint `i` of cluster number `c` (`echo` is 0): distinct everywhere.
fn addr(c: usize, i: usize) -> SocketAddr {
    SocketAddr::from((
        Ipv4Addr::new(10, (c % 250) as u8, (i >> 8) as u8, i as u8),
        8000 + (i >> 16) as u16 + (c / 250) as u16 * 300,
    ))
}

fn small_name(c: usize) -> String {
    format!("small-{c}")
}

/// Every CLA at EDS version `k`: `echo`'s endpoints with `CHANGED` of them
/// (at positions that move with `k`) replaced by addresses outside
/// 10.0.0.0/8, so consecutive versions differ in 2·CHANGED hosts at most.
fn clas(a: &Args, k: usize) -> Vec<(String, prost_types::Any)> {
    let step = a.hosts / CHANGED;
    let off = (k * 13) % step;
    let big = cla(
        "echo",
        &(0..a.hosts)
            .map(|i| {
                if k > 0 && i % step == off && i / step < CHANGED {
                    SocketAddr::from((
                        Ipv4Addr::new(11, (k >> 8) as u8, k as u8, (i / step) as u8),
                        9000,
                    ))
                } else {
                    addr(0, i)
                }
            })
            .collect::<Vec<_>>(),
    );
    std::iter::once(big)
        .chain((1..=a.small_clusters).map(|c| {
            let addrs: Vec<SocketAddr> = (0..SMALL_HOSTS).map(|i| addr(c, i)).collect();
            cla(&small_name(c), &addrs)
        }))
        .collect()
}

// --- gateway side ---

/// `GET path` on the HTTP/1.1 admin server; the body.
fn admin_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

#[derive(Debug, Default, Clone, Copy)]
struct PushStats {
    count: Option<f64>,
    last: Option<f64>,
    max: Option<f64>,
    total: Option<f64>,
}

fn push_stats(admin: SocketAddr) -> PushStats {
    let body = admin_get(admin, "/stats").unwrap_or_default();
    let get = |name: &str| {
        body.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .find_map(|v| v.trim().parse::<f64>().ok())
    };
    PushStats {
        count: get("gateway_config_pushes_total"),
        last: get("gateway_config_push_last_seconds"),
        max: get("gateway_config_push_max_seconds"),
        total: get("gateway_config_push_seconds_total"),
    }
}

/// Waits for the gateway's ACK of `version` of `type_url`; spins on the
/// recorded requests (every 100 µs) rather than `AdsServer::wait_for`'s
/// 5 ms poll, so the round trip is not quantised.
fn wait_ack(server: &AdsServer, type_url: &str, version: &str) -> Result<(), String> {
    let deadline = Instant::now() + WAIT;
    let acked = |r: &RecordedRequest| {
        r.type_url == type_url
            && r.version_info == version
            && r.error_detail.is_none()
            && !r.response_nonce.is_empty()
    };
    loop {
        let reqs = server.requests();
        // Every version pushed here is valid: any NACK is a failure.
        if let Some(nack) = reqs.iter().find(|r| r.error_detail.is_some()) {
            return Err(format!("NACK: {nack:?}"));
        }
        if reqs.iter().rev().any(acked) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("no ACK of {type_url} {version} within {WAIT:?}"));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn ms(s: f64) -> String {
    format!("{:.2}", s * 1e3)
}

/// min / median / p90 / max of seconds, in ms.
fn summary(label: &str, xs: &[f64]) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pct = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{label:<22} min {:>7}  median {:>7}  p90 {:>7}  max {:>7}  ms  (n = {})",
        ms(v[0]),
        ms(pct(0.5)),
        ms(pct(0.9)),
        ms(v[v.len() - 1]),
        v.len()
    );
}

fn run(a: &Args) -> Result<(), String> {
    let server = AdsServer::start();
    let mut clusters = vec![eds_cluster("echo")];
    clusters.extend((1..=a.small_clusters).map(|c| eds_cluster(&small_name(c))));
    server.set(type_url::CLUSTER, "c1", clusters);
    server.set(type_url::ENDPOINT, "e0", clas(a, 0));
    server.set(
        type_url::LISTENER,
        "l1",
        vec![rds_listener("ingress", "routes")],
    );
    server.set(type_url::ROUTE, "r1", vec![routes("routes", "echo")]);

    let gw = gateway::start(
        ads_bootstrap(server.addr()),
        gateway::Options {
            shards: Some(a.shards),
            cpus: None,
            ..Default::default()
        },
    )
    .map_err(|e| format!("gateway: {e}"))?;
    let admin = gw.admin_addr.ok_or("no admin address")?;
    for (t, v) in [
        (type_url::CLUSTER, "c1"),
        (type_url::ENDPOINT, "e0"),
        (type_url::LISTENER, "l1"),
        (type_url::ROUTE, "r1"),
    ] {
        wait_ack(&server, t, v)?;
    }

    let total = a.warmup + a.pushes;
    // Built up front: only the push itself is timed.
    let versions: Vec<_> = (1..=total).map(|k| clas(a, k)).collect();
    let bytes: usize = versions[0].iter().map(|(_, r)| r.value.len()).sum();
    println!(
        "gateway: {} data shard(s); EDS response: echo {} endpoints + {} × {} endpoints, {} KiB of CLAs",
        a.shards,
        a.hosts,
        a.small_clusters,
        SMALL_HOSTS,
        bytes / 1024
    );
    let page = admin_get(admin, "/stats").map_err(|e| format!("admin /stats: {e}"))?;
    println!(
        "admin /stats page: {} KiB, {} lines",
        page.len() / 1024,
        page.lines().count()
    );
    let initial = push_stats(admin);
    if initial.last.is_none() {
        println!("note: /stats has no gateway_config_push_* metrics; only the ACK round trip is measured");
    }

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let storm: Vec<_> = (0..a.scrapers)
        .map(|i| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let paths = ["/stats", "/stats/prometheus"];
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if admin_get(admin, paths[(n as usize + i) % 2]).is_ok() {
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    let storm_started = Instant::now();
    let (mut push, mut rtt, mut scrape) = (Vec::new(), Vec::new(), Vec::new());
    for (k, resources) in (1..=total).zip(versions) {
        let version = format!("e{k}");
        // The /stats page itself is rendered on the control shard; its cost
        // (it lists every host) is reported too, and never overlaps a push.
        let t = Instant::now();
        let before = push_stats(admin);
        scrape.push(t.elapsed().as_secs_f64());
        let t0 = Instant::now();
        server.set(type_url::ENDPOINT, &version, resources);
        wait_ack(&server, type_url::ENDPOINT, &version)?;
        let ack = t0.elapsed().as_secs_f64();
        let after = push_stats(admin);
        let warm = k <= a.warmup;
        let pushes = match (before.count, after.count) {
            (Some(b), Some(a)) => Some(a - b),
            _ => None,
        };
        println!(
            "push {k:>3}{}: gateway {:>7} ms, ACK round trip {:>7} ms{}",
            if warm { " (warm-up)" } else { "" },
            after.last.map_or("n/a".into(), ms),
            ms(ack),
            match pushes {
                Some(n) if n != 1.0 => format!("  ({n} pushes in between!)"),
                _ => String::new(),
            }
        );
        if !warm {
            rtt.push(ack);
            if let Some(l) = after.last {
                push.push(l);
            }
        }
    }
    println!();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let scrapes: u64 = storm.into_iter().map(|t| t.join().unwrap_or(0)).sum();
    if a.scrapers > 0 {
        let secs = storm_started.elapsed().as_secs_f64();
        println!(
            "scrape storm: {} threads, {scrapes} pages in {secs:.1} s ({:.1} pages/s)",
            a.scrapers,
            scrapes as f64 / secs
        );
    }
    if !push.is_empty() {
        summary("gateway push", &push);
    }
    summary("ACK round trip", &rtt);
    summary("admin /stats fetch", &scrape);
    let end = push_stats(admin);
    if let (Some(n), Some(t), Some(m)) = (end.count, end.total, end.max) {
        println!(
            "gateway totals: {n} pushes (incl. initial config), {} ms in all, max {} ms",
            ms(t),
            ms(m)
        );
    }
    gw.shutdown();
    server.stop();
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eds_push: {e}");
            ExitCode::FAILURE
        }
    }
}
