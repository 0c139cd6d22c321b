//! An idle gateway does not wake up: once its last connection is gone, no thread of its (data shards, control shard, admin) runs until something comes in. A timer that polls (every 50 ms, every second) shows here as context switches.

mod support;

use std::time::Duration;

/// Context switches (voluntary and not) of this process's threads whose
/// name starts with one of `prefixes`, by thread.
fn switches(prefixes: &[&str]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let comm = comm.trim().to_string();
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.push((format!("{comm} ({:?})", t.file_name()), n));
    }
    out.sort();
    out
}

#[test]
fn an_idle_gateway_does_not_wake_up() {
    let backend = support::backend("b");
    let (gw, addr) = support::gateway_for(&[backend.addr()], 2);
    // Served once (connections opened and closed, the admin asked), then
    // left alone: what runs after a connection (the steering's pending
    // reset, a second later) has ended by the time the window opens.
    assert_eq!(support::get_n(addr, "/", 2).len(), 2);
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(support::admin_get(admin, "/ready").0, 200);
    std::thread::sleep(Duration::from_millis(2500));
    let threads = ["shard-", "control", "admin"];
    let before = switches(&threads);
    assert!(before.len() >= 4, "{before:?}");
    std::thread::sleep(Duration::from_secs(2));
    let after = switches(&threads);
    let woke: Vec<_> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| a.1 != b.1)
        .map(|(b, a)| format!("{}: {} switches", b.0, a.1 - b.1))
        .collect();
    assert!(woke.is_empty(), "idle threads woke: {woke:?}");
    gw.shutdown();
}
