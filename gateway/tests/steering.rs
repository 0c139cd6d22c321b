//! Connection steering across data shards, through a whole gateway: each new connection goes to the shard with the fewest open (the SO_REUSEPORT program of `shards::steering`; it needs CAP_BPF, and where the kernel refuses it the test says so and stops).

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Each shard's open downstream connections, once they add up to `total`.
fn per_shard(gw: &gateway::GatewayHandle, total: u64) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open: Vec<u64> = gw
            .shard_stats
            .iter()
            .map(|s| s.downstream.cx_active.get())
            .collect();
        if open.iter().sum::<u64>() == total || Instant::now() > deadline {
            return open;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn new_connections_go_to_the_shard_with_the_fewest() {
    if let Err(e) = shards::steering::Steering::new(4) {
        eprintln!("connection steering refused here, not tested: {e}");
        return;
    }
    let backend = support::backend("b");
    let (gw, addr) = support::gateway_for(&[backend.addr()], 4);
    // A burst, faster than the shards accept: the program counts what it
    // picked, so the connections go round the shards in turn (the kernel's
    // hash would leave some with more than others).
    let mut conns: Vec<Option<TcpStream>> = (0..40)
        .map(|_| Some(TcpStream::connect(addr).expect("connect")))
        .collect();
    assert_eq!(per_shard(&gw, 40), vec![10; 4]);
    // Connections 0, 4 and 8 went to one shard, first in turn: closing
    // them leaves it with 7, and the next three go to it alone.
    for i in [0, 4, 8] {
        conns[i] = None;
    }
    let low = per_shard(&gw, 37);
    assert_eq!(low.iter().filter(|&&n| n == 7).count(), 1, "{low:?}");
    conns.extend((0..3).map(|_| Some(TcpStream::connect(addr).expect("connect"))));
    assert_eq!(per_shard(&gw, 40), vec![10; 4]);
    // A steered connection is served, not only counted.
    assert_eq!(support::get_n(addr, "/", 1), vec![(200, "b".to_string())]);
    drop(conns);
    gw.shutdown();
}
