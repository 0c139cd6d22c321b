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

/// Two sockets of one new group on loopback, joined as shards 0 and 1.
fn joined_pair(steering: &Steering) -> (SocketAddr, TcpListener, TcpListener) {
    let a = reuseport_listener(0);
    let addr = a.local_addr().expect("addr");
    let b = reuseport_listener(addr.port());
    steering.join(addr, 0, a.as_raw_fd()).expect("join");
    steering.join(addr, 1, b.as_raw_fd()).expect("join");
    (addr, a, b)
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
fn a_shard_that_left_is_not_picked_the_others_take_its_share() {
    let Some(steering) = steering(2) else { return };
    let (addr, a, b) = joined_pair(&steering);
    // Shard 0 is about to close its socket: though its score is the
    // lowest, everything goes to shard 1, counted there.
    steering.leave(addr, 0, a.as_raw_fd());
    let _c = connect(addr, 20);
    let (a_fd, listeners) = (a.as_raw_fd(), [a, b]);
    assert_eq!(backlogs(&listeners), vec![0, 20]);
    assert_eq!(steering.scores(), vec![(0, 0), (0, 20)]);
    // Leaving with another socket, or twice, changes nothing.
    steering.leave(addr, 1, 12345);
    steering.leave(addr, 0, a_fd);
    let _d = connect(addr, 2);
    assert_eq!(steering.scores(), vec![(0, 0), (0, 22)]);
}

/// A hot restart: the next process's sockets are copies of ours, and a
/// socket is in one socket map at a time.
#[test]
fn a_hot_restart_hands_the_sockets_over_and_back() {
    let (Some(old), Some(new)) = (steering(2), steering(2)) else {
        return;
    };
    let a = reuseport_listener(0);
    let addr = a.local_addr().expect("addr");
    let b = reuseport_listener(addr.port());
    let (a2, b2) = (a.try_clone().expect("dup"), b.try_clone().expect("dup"));
    old.join(addr, 0, a.as_raw_fd()).expect("join");
    old.join(addr, 1, b.as_raw_fd()).expect("join");
    // The old process hands its copies over and lets go in its maps; the
    // new one joins and steers (its own counts).
    old.release_all();
    new.join(addr, 0, a2.as_raw_fd()).expect("join");
    new.join(addr, 1, b2.as_raw_fd()).expect("join");
    let _c = connect(addr, 4);
    assert_eq!(new.scores(), vec![(0, 2), (0, 2)]);
    assert_eq!(old.scores(), vec![(0, 0), (0, 0)]);
    // Had the new process joined before the old let go, its sockets would
    // wait, and join on a retry.
    let later = steering(2).expect("steering");
    later
        .join(addr, 0, a2.as_raw_fd())
        .expect("join waits, no error");
    let _d = connect(addr, 2);
    assert_eq!(
        later.scores(),
        vec![(0, 0), (0, 0)],
        "none joined: the hash picks"
    );
    new.release_all();
    later.retry_waiting(0);
    let _e = connect(addr, 2);
    assert_eq!(later.scores(), vec![(0, 2), (0, 0)]);
    // That process leaves without taking over: the old one takes its
    // sockets back once the other's maps let go of them (its program
    // replaced, its maps freed, shortly after).
    later.release_all();
    drop((new, later));
    old.reclaim_all();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        old.retry_waiting(0);
        old.retry_waiting(1);
        let _f = connect(addr, 2);
        if old.scores() == vec![(0, 1), (0, 1)] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", old.scores());
        old.release_all();
        old.reclaim_all();
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop((a, b, a2, b2));
}

#[test]
fn pending_picks_are_taken_away_on_accept() {
    let Some(steering) = steering(2) else { return };
    let (addr, _a, _b) = joined_pair(&steering);
    let _c = connect(addr, 6);
    assert_eq!(steering.scores(), vec![(0, 3), (0, 3)]);
    let load = steering.shard_load(0).expect("slot");
    load.accepted();
    assert_eq!(steering.scores()[0], (1, 2));
    // Nothing pending: an accept does not take the count below zero.
    load.accepted();
    load.accepted();
    load.accepted();
    assert_eq!(steering.scores()[0], (4, 0));
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

#[test]
fn lost_picks_are_forgotten_a_second_after_an_accept_and_an_idle_shard_stays_asleep() {
    let Some(steering) = steering(2) else { return };
    let (addr, _a, _b) = joined_pair(&steering);
    // Four picks each that no shard accepts (lost, as far as it knows).
    let _c = connect(addr, 8);
    let load = steering.shard_load(0).expect("slot");
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(1 << 20)
        .make()
        .expect("executor");
    let seen = ex.run(async move {
        glommio::spawn_local(forget_pending(load.clone())).detach();
        // Nothing accepted: the task sleeps, the picks stay.
        glommio::timer::sleep(std::time::Duration::from_millis(1300)).await;
        let idle = steering.scores()[0];
        load.accepted();
        let after_accept = steering.scores()[0];
        glommio::timer::sleep(std::time::Duration::from_millis(1300)).await;
        (idle, after_accept, steering.scores())
    });
    assert_eq!(seen, ((0, 4), (1, 3), vec![(1, 0), (0, 4)]));
}

/// A previous process that died without letting go: its program, still
/// on the group, holds its socket map, which holds our sockets. Ours
/// replaces it, its maps are freed, and our sockets join on a retry.
#[test]
fn sockets_held_by_a_dead_process_map_join_once_it_is_freed() {
    let (Some(dead), Some(ours)) = (steering(1), steering(1)) else {
        return;
    };
    let a = reuseport_listener(0);
    let addr = a.local_addr().expect("addr");
    dead.join(addr, 0, a.as_raw_fd()).expect("join");
    drop(dead);
    ours.join(addr, 0, a.as_raw_fd())
        .expect("join waits, no error");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        ours.retry_waiting(0);
        let _c = connect(addr, 1);
        if ours.scores()[0].1 > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never joined");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
