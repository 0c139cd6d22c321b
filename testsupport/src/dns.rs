//! A DNS server on loopback for tests of DNS clusters: answers over UDP and TCP from a table the test changes while it runs, and counts the questions.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dnswire::server::{question, response, Rr};

/// How a name is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// These addresses with this TTL: the asked type's (an A question gets
    /// the IPv4 ones); none of the type is NODATA.
    Addrs(Vec<IpAddr>, u32),
    /// An alias: a CNAME to the name, then its addresses as that name is
    /// answered.
    Alias(String),
    /// Over UDP the TC bit and no records; over TCP, these addresses.
    TruncatedUdp(Vec<IpAddr>, u32),
    ServFail,
    /// No answer at all (a server that is down or lost the packet).
    Silent,
}

/// What the server was asked, by name and protocol.
#[derive(Debug, Clone, Default)]
struct Log {
    udp: HashMap<String, usize>,
    tcp: HashMap<String, usize>,
}

struct Shared {
    zone: Mutex<HashMap<String, Zone>>,
    log: Mutex<Log>,
    stop: AtomicBool,
}

/// A DNS server on 127.0.0.1, UDP and TCP on the same port; names not in
/// its table are NXDOMAIN. Stops when dropped.
pub struct DnsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl DnsServer {
    pub fn start() -> DnsServer {
        // UDP on a free port, then TCP on the same one (tried again in the
        // rare case another test holds it for TCP).
        let (udp, tcp) = loop {
            let udp = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
            if let Ok(tcp) = TcpListener::bind(udp.local_addr().expect("UDP address")) {
                break (udp, tcp);
            }
        };
        let addr = udp.local_addr().expect("UDP address");
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        tcp.set_nonblocking(true).expect("non-blocking");
        let shared = Arc::new(Shared {
            zone: Mutex::new(HashMap::new()),
            log: Mutex::new(Log::default()),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let udp_thread = std::thread::spawn(move || serve_udp(udp, &s));
        let s = Arc::clone(&shared);
        let tcp_thread = std::thread::spawn(move || serve_tcp(tcp, &s));
        DnsServer {
            addr,
            shared,
            threads: vec![udp_thread, tcp_thread],
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers `name` (lowercase, no trailing dot) so from now on.
    pub fn set(&self, name: &str, zone: Zone) {
        self.shared
            .zone
            .lock()
            .expect("zone")
            .insert(name.to_owned(), zone);
    }

    /// Makes `name` NXDOMAIN again.
    pub fn remove(&self, name: &str) {
        self.shared.zone.lock().expect("zone").remove(name);
    }

    /// Questions for `name` so far over UDP, and over TCP.
    pub fn asked(&self, name: &str) -> (usize, usize) {
        let log = self.shared.log.lock().expect("log");
        (
            log.udp.get(name).copied().unwrap_or(0),
            log.tcp.get(name).copied().unwrap_or(0),
        )
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The answer to query `q`, `None` for silence.
fn answer(shared: &Shared, q: &[u8], tcp: bool) -> Option<Vec<u8>> {
    let (_, name, qtype) = question(q).ok()?;
    {
        let mut log = shared.log.lock().expect("log");
        let counts = if tcp { &mut log.tcp } else { &mut log.udp };
        *counts.entry(name.clone()).or_default() += 1;
    }
    let zone = shared.zone.lock().expect("zone").clone();
    let mut records = Vec::new();
    let mut owner = name.clone();
    let mut truncated = false;
    // Follows aliases a few steps (a test's chain is short).
    for _ in 0..8 {
        match zone.get(&owner) {
            None if owner == name => return Some(response(q, 3, false, &[])),
            None => break,
            Some(Zone::ServFail) => return Some(response(q, 2, false, &[])),
            Some(Zone::Silent) => return None,
            Some(Zone::Alias(target)) => {
                records.push((owner.clone(), Rr::Cname(target.clone(), 60)));
                owner = target.clone();
            }
            Some(Zone::TruncatedUdp(_, _)) if !tcp => {
                truncated = true;
                records.clear();
                break;
            }
            Some(Zone::Addrs(addrs, ttl)) | Some(Zone::TruncatedUdp(addrs, ttl)) => {
                for a in addrs {
                    if (qtype == 1 && a.is_ipv4()) || (qtype == 28 && a.is_ipv6()) {
                        records.push((owner.clone(), Rr::Addr(*a, *ttl)));
                    }
                }
                break;
            }
        }
    }
    Some(response(q, 0, truncated, &records))
}

fn serve_udp(socket: UdpSocket, shared: &Shared) {
    let mut buf = [0u8; 512];
    while !shared.stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = socket.recv_from(&mut buf) else {
            continue; // the read timeout: look at `stop` again
        };
        if let Some(reply) = answer(shared, &buf[..n], false) {
            let _ = socket.send_to(&reply, from);
        }
    }
}

fn serve_tcp(listener: TcpListener, shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = serve_tcp_conn(stream, shared);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn serve_tcp_conn(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut q = vec![0u8; u16::from_be_bytes(len).into()];
    stream.read_exact(&mut q)?;
    if let Some(reply) = answer(shared, &q, true) {
        stream.write_all(&(reply.len() as u16).to_be_bytes())?;
        stream.write_all(&reply)?;
    }
    Ok(())
}
