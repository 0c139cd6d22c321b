//! Steering on real sockets: a SO_REUSEPORT group on loopback, connections made to it, and which socket's backlog each landed in.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

use super::*;

/// A listening socket in the SO_REUSEPORT group of `port` on loopback (a
/// new port when 0), non-blocking.
fn reuseport_listener(port: u16) -> TcpListener {
    // SAFETY: plain socket calls on a descriptor made here; failures are
    // asserted.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert!(fd >= 0);
        let one: libc::c_int = 1;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let one_ptr = (&one as *const libc::c_int).cast();
        assert_eq!(
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, one_ptr, len),
            0
        );
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = port.to_be();
        sin.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let sa = (&sin as *const libc::sockaddr_in).cast();
        let salen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, sa, salen),
            0,
            "{}",
            io::Error::last_os_error()
        );
        assert_eq!(libc::listen(fd, 1024), 0);
        TcpListener::from_raw_fd(fd)
    }
}

/// How many connections wait in each listener's backlog (accepted now).
fn backlogs(listeners: &[TcpListener]) -> Vec<usize> {
    listeners
        .iter()
        .map(|l| std::iter::from_fn(|| l.accept().ok()).count())
        .collect()
}

fn connect(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect()
}

/// Steering needs CAP_BPF; without it the test says so and checks that
/// the refusal is an error, not a panic.
fn steering(shards: usize) -> Option<Arc<Steering>> {
    match Steering::new(shards) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("steering refused here, not tested: {e}");
            None
        }
    }
}

#[test]
fn a_burst_is_spread_evenly_and_a_loaded_shard_is_avoided() {
    let Some(steering) = steering(4) else { return };
    let first = reuseport_listener(0);
    let addr = first.local_addr().expect("addr");
    let mut listeners = vec![first];
    listeners.extend((1..4).map(|_| reuseport_listener(addr.port())));
    // Shards join in another order than the sockets joined the group:
    // the socket map, not the group's order, says which is whose.
    let shard_of_listener = [2, 0, 3, 1];
    for (l, &shard) in listeners.iter().zip(&shard_of_listener) {
        steering.join(addr, shard, l.as_raw_fd()).expect("join");
    }
    // 40 connections before any is accepted: the program's own count of
    // what it picked spreads them, 10 each (the kernel's hash would not).
    let _burst = connect(addr, 40);
    assert_eq!(backlogs(&listeners), vec![10; 4]);
    let loads: Vec<ShardLoad> = (0..4)
        .map(|s| steering.shard_load(s).expect("slot"))
        .collect();
    for l in &loads {
        for _ in 0..10 {
            l.accepted();
        }
    }
    assert_eq!(steering.scores(), vec![(10, 0); 4]);
    // Shard 3 holds 8 more; shard 0 lost 4 of its 10.
    for _ in 0..8 {
        loads[3].accepted();
    }
    for _ in 0..4 {
        loads[0].closed();
    }
    // 13 new connections: scores 6, 10, 10, 18 → shard 0 first, until it
    // is level, then 0, 1 and 2 in turn; shard 3 gets none.
    let _more = connect(addr, 13);
    let by_shard = {
        let got = backlogs(&listeners);
        let mut v = [0; 4];
        for (n, &s) in got.iter().zip(&shard_of_listener) {
            v[s] = *n;
        }
        v
    };
    assert_eq!(by_shard, [7, 3, 3, 0], "scores {:?}", steering.scores());
}

#[test]
fn a_shard_that_left_is_not_picked_and_its_share_falls_to_the_kernel_hash() {
    let Some(steering) = steering(2) else { return };
    let a = reuseport_listener(0);
    let addr = a.local_addr().expect("addr");
    let b = reuseport_listener(addr.port());
    steering.join(addr, 0, a.as_raw_fd()).expect("join");
    steering.join(addr, 1, b.as_raw_fd()).expect("join");
    // Shard 0 is about to close its socket: everything goes to shard 1's
    // (picks for shard 0 find no socket and are left to the hash, which
    // may choose either; shard 1's score grows only with its own picks).
    steering.leave(addr, 0, a.as_raw_fd());
    let _c = connect(addr, 20);
    let got = backlogs(&[a, b]);
    assert_eq!(got.iter().sum::<usize>(), 20);
    // With shard 0 at 0 and never counted, every pick is shard 0, which
    // has no socket: the hash decides all 20, and none is counted.
    assert_eq!(steering.scores(), vec![(0, 0), (0, 0)]);
    // Leaving twice, or with another socket, changes nothing.
    steering.leave(addr, 0, 12345);
    steering.leave(addr, 0, 12345);
}

#[test]
fn pending_picks_are_taken_away_on_accept_and_forgotten() {
    let Some(steering) = steering(2) else { return };
    let a = reuseport_listener(0);
    let addr = a.local_addr().expect("addr");
    let b = reuseport_listener(addr.port());
    steering.join(addr, 0, a.as_raw_fd()).expect("join");
    steering.join(addr, 1, b.as_raw_fd()).expect("join");
    let _c = connect(addr, 6);
    assert_eq!(steering.scores(), vec![(0, 3), (0, 3)]);
    let load = steering.shard_load(0).expect("slot");
    load.accepted();
    assert_eq!(steering.scores()[0], (1, 2));
    load.forget_pending();
    assert_eq!(steering.scores()[0], (1, 0));
    // Nothing pending: an accept does not take the count below zero.
    load.accepted();
    assert_eq!(steering.scores()[0], (2, 0));
    assert!(steering.shard_load(2).is_none());
}

#[test]
fn modes_parse_by_name() {
    assert_eq!(
        "least-connections".parse(),
        Ok(SteeringMode::LeastConnections)
    );
    assert_eq!("kernel-hash".parse(), Ok(SteeringMode::KernelHash));
    assert!("round-robin".parse::<SteeringMode>().is_err());
}
