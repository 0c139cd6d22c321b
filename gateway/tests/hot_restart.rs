//! Hot restart of the `gateway` binary (`--restart-epoch`, `--base-id`): under steady load (new connections and kept-alive HTTP/2 ones), each new epoch takes the listening and admin sockets of the running one, which drains and exits 0; no request fails and no connection is refused across two upgrades, one of which changes the listener addresses. A next epoch without a parent fails unless told to start afresh, and a parent whose successor failed to start keeps serving.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::process::*;
use support::*;

/// A base id of this test process's own, so that parallel test runs (and
/// the other tests here) never share a hot restart channel.
fn base_id(n: u32) -> String {
    (std::process::id() % 100_000 * 10 + n).to_string()
}

/// The bootstrap: admin and listener `ingress` on the given ports (0:
/// any), and `extra` listener YAML, in front of `backend`.
fn bootstrap(backend: SocketAddr, admin: u16, ingress: u16, extra: &str) -> String {
    format!(
        r#"admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }} }}
static_resources:
  listeners:
{}{extra}  clusters:
{}"#,
        listener("ingress", ingress),
        yaml::h2_cluster("app", backend)
    )
}

fn listener(name: &str, port: u16) -> String {
    format!(
        "  - name: {name}\n    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}\n    filter_chains:\n    - {}",
        yaml::hcm("app").trim_start()
    )
}

/// One HTTP/1.1 GET on a new connection: whether it got a 200.
fn get_new_connection(addr: SocketAddr) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    s.read_to_end(&mut got).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&got);
    match text.starts_with("HTTP/1.1 200") {
        true => Ok(()),
        false => Err(format!("answer: {:?}", text.lines().next())),
    }
}

/// Clients sending until stopped: each thread opens a new connection per
/// request; every failure is kept.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let threads = (0..threads)
            .map(|_| {
                let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match get_new_connection(addr) {
                            Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                failures.lock().unwrap().push(e);
                                0
                            }
                        };
                    }
                })
            })
            .collect();
        Self {
            stop,
            ok,
            failures,
            threads,
        }
    }

    fn served(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stops the clients: what they got, and their failures.
    fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let failures = self.failures.lock().unwrap().clone();
        (self.ok.load(Ordering::Relaxed), failures)
    }
}

fn start_epoch(config: &Path, epoch: u32, base: &str) -> Gateway {
    let epoch = epoch.to_string();
    Gateway::start_with(
        config,
        &[
            "--restart-epoch",
            &epoch,
            "--base-id",
            base,
            "--drain-time-s",
            "1",
            "--parent-shutdown-time-s",
            "10",
        ],
    )
}

/// Waits (bounded) until `requests` more have been served.
fn wait_served(load: &Load, requests: u64) {
    let want = load.served() + requests;
    wait_until(PATIENCE, "requests served", || load.served() >= want);
}

#[test]
fn two_upgrades_under_load_fail_no_request() {
    let backend = backend("app");
    let dir = temp_dir("hot-restart");
    let config = dir.join("gateway.yaml");
    write_config(&config, &bootstrap(backend.addr(), 0, 0, ""));
    let base = base_id(1);
    let mut zero = start_epoch(&config, 0, &base);
    let (addr, admin) = (zero.listener, zero.admin);
    // A kept-alive HTTP/2 connection opened on epoch 0: told to go by
    // its drain (GOAWAY), the client opens a new one (to the next epoch),
    // as HTTP/2 clients do, and sends what GOAWAY refused there.
    let kept = std::thread::spawn(move || {
        client(move || async move {
            let mut c = connect(addr).await;
            let (mut statuses, mut reconnects) = (Vec::new(), 0);
            for _ in 0..100 {
                let status = match get(&c, "/", &[]).await {
                    Ok(r) => r.status.as_u16(),
                    Err(e) if e.is_go_away() || e.is_io() || e.is_remote() => {
                        reconnects += 1;
                        c = connect(addr).await;
                        get(&c, "/", &[]).await.map_or(0, |r| r.status.as_u16())
                    }
                    Err(_) => 0,
                };
                statuses.push(status);
                glommio::timer::sleep(Duration::from_millis(30)).await;
            }
            (statuses, reconnects)
        })
    });
    let load = Load::start(addr, 4);
    wait_served(&load, 50);

    // Epoch 1: same addresses.
    write_config(
        &config,
        &bootstrap(backend.addr(), admin.port(), addr.port(), ""),
    );
    let mut one = start_epoch(&config, 1, &base);
    assert_eq!((one.listener, one.admin), (addr, admin));
    one.child.wait_stderr("took over from process", 1);
    let status = zero.child.wait(PATIENCE);
    assert_eq!(status.code(), Some(0), "epoch 0: {}", zero.child.stderr());
    assert!(
        zero.child.stderr().contains("draining"),
        "{}",
        zero.child.stderr()
    );
    wait_served(&load, 50);
    // The admin socket came along: the same address answers.
    assert_eq!(admin_get(admin, "/ready").0, 200);

    // Epoch 2: one more listener on a new port.
    write_config(
        &config,
        &bootstrap(
            backend.addr(),
            admin.port(),
            addr.port(),
            &listener("extra", 0),
        ),
    );
    let mut two = start_epoch(&config, 2, &base);
    two.child.wait_stderr("took over from process", 1);
    assert_eq!(one.child.wait(PATIENCE).code(), Some(0));
    wait_served(&load, 50);
    let extra = two
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("listener extra on "))
        .and_then(|a| a.trim().parse::<SocketAddr>().ok())
        .expect("extra listener");
    get_new_connection(extra).expect("the new listener serves");

    let (served, failures) = load.stop();
    assert!(
        failures.is_empty(),
        "{} failed of {}: {:?}",
        failures.len(),
        served + failures.len() as u64,
        &failures[..failures.len().min(5)]
    );
    let (statuses, reconnects) = kept.join().expect("kept-alive client");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(
        reconnects >= 1,
        "the drain told the kept-alive client to go"
    );
    two.child.signal(libc::SIGTERM);
    assert_eq!(two.child.wait(PATIENCE).code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_next_epoch_needs_a_parent_and_a_failed_one_leaves_it_serving() {
    let backend = backend("app");
    let dir = temp_dir("hot-restart-parent");
    let config = dir.join("gateway.yaml");
    write_config(&config, &bootstrap(backend.addr(), 0, 0, ""));
    let base = base_id(2);
    // No epoch 0 runs under this base id.
    let mut orphan = Child::spawn(&[
        "--config",
        config.to_str().unwrap(),
        "--restart-epoch",
        "1",
        "--base-id",
        &base,
    ]);
    assert_eq!(orphan.wait(PATIENCE).code(), Some(1));
    assert!(
        orphan.stderr().contains("no running gateway answers"),
        "{}",
        orphan.stderr()
    );
    // Told to, it starts afresh.
    let fresh = Gateway::start_with(
        &config,
        &[
            "--restart-epoch",
            "1",
            "--base-id",
            &base,
            "--skip-hot-restart-on-no-parent",
        ],
    );
    drop(fresh);

    let zero = start_epoch(&config, 0, &base);
    // A second epoch 0 under the same base id is refused: it could never
    // be upgraded.
    let mut twin = Child::spawn(&[
        "--config",
        config.to_str().unwrap(),
        "--restart-epoch",
        "0",
        "--base-id",
        &base,
    ]);
    assert_eq!(twin.wait(PATIENCE).code(), Some(1));
    assert!(twin.stderr().contains("--base-id"), "{}", twin.stderr());
    // A successor whose configuration is invalid fails before it asks
    // for anything: the parent serves on.
    let bad = dir.join("bad.yaml");
    write_config(&bad, "static_resources: { listeners: [ { name: x } ] }\n");
    let mut failed = Child::spawn(&[
        "--config",
        bad.to_str().unwrap(),
        "--restart-epoch",
        "1",
        "--base-id",
        &base,
    ]);
    assert_eq!(failed.wait(PATIENCE).code(), Some(2));
    // One whose listener cannot start takes the sockets, then fails: the
    // parent was not told to drain, and serves on.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr");
    write_config(
        &bad,
        &bootstrap(
            backend.addr(),
            zero.admin.port(),
            zero.listener.port(),
            &listener("busy", busy.port()),
        ),
    );
    let mut failed = Child::spawn(&[
        "--config",
        bad.to_str().unwrap(),
        "--restart-epoch",
        "1",
        "--base-id",
        &base,
    ]);
    assert_ne!(failed.wait(PATIENCE).code(), Some(0));
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..20 {
        get_new_connection(zero.listener).expect("epoch 0 still serves");
    }
    assert!(
        !zero.child.stderr().contains("draining"),
        "{}",
        zero.child.stderr()
    );
    let started = Instant::now();
    zero.child.signal(libc::SIGTERM);
    let mut zero = zero;
    assert_eq!(zero.child.wait(PATIENCE).code(), Some(0));
    assert!(started.elapsed() < PATIENCE);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gateway-restarter` as a service manager runs it: SIGHUP starts the
/// next epoch (told by `RESTART_EPOCH`), which takes over; a next epoch
/// that fails leaves the running one serving; SIGTERM stops all.
#[test]
fn the_restarter_upgrades_on_sighup_and_survives_a_failed_epoch() {
    let backend = backend("app");
    let dir = temp_dir("hot-restart-restarter");
    let config = dir.join("gateway.yaml");
    write_config(&config, &bootstrap(backend.addr(), 0, 0, ""));
    let base = base_id(3);
    let restarter = Child::spawn_program(
        env!("CARGO_BIN_EXE_gateway-restarter"),
        &[
            GATEWAY,
            "--config",
            config.to_str().unwrap(),
            "--shards",
            "1",
            "--base-id",
            &base,
            "--drain-time-s",
            "1",
        ],
    );
    let (addr, admin) = wait_banner(&restarter);
    write_config(
        &config,
        &bootstrap(backend.addr(), admin.port(), addr.port(), ""),
    );
    let load = Load::start(addr, 2);
    wait_served(&load, 20);
    restarter.signal(libc::SIGHUP);
    restarter.wait_stderr("took over from process", 1);
    wait_served(&load, 20);
    // A bootstrap that cannot load: epoch 2 fails, epoch 1 serves on.
    write_config(
        &config,
        "static_resources: { listeners: [ { name: x } ] }\n",
    );
    restarter.signal(libc::SIGHUP);
    restarter.wait_stderr("the previous epoch keeps serving", 1);
    wait_served(&load, 20);
    let (served, failures) = load.stop();
    assert!(
        failures.is_empty(),
        "{} of {served}: {failures:?}",
        failures.len()
    );
    restarter.signal(libc::SIGTERM);
    let mut restarter = restarter;
    assert_eq!(
        restarter.wait(PATIENCE).code(),
        Some(0),
        "{}",
        restarter.stderr()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The listener and admin addresses a starting gateway prints.
fn wait_banner(c: &Child) -> (SocketAddr, SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    let (mut listener, mut admin) = (None, None);
    while listener.is_none() || admin.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = c
            .stdout
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no banner ({e}); stderr:\n{}", c.stderr()));
        if let Some(a) = line.strip_prefix("listener ingress on ") {
            listener = a.trim().parse().ok();
        }
        if let Some(a) = line.strip_prefix("admin on http://") {
            admin = a.trim().trim_end_matches('/').parse().ok();
        }
    }
    (listener.expect("listener"), admin.expect("admin"))
}
