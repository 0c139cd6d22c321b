//! One lookup of one name, on the control shard: an IP address is itself, then `/etc/hosts`, then DNS over UDP (TCP when an answer is truncated, or always with `use_tcp_for_dns_lookups`), as c-ares does it for Envoy.
//!
//! Each try asks every server in turn, giving each `query_timeout`;
//! `query_tries` rounds at most. A server that fails (no answer in time,
//! SERVFAIL, REFUSED, a malformed answer, a refused connection) hands the
//! question to the next. NXDOMAIN or an answer without addresses moves on
//! to the next name of the search list; when none has an address the
//! lookup succeeds with none, as Envoy's c-ares resolver reports it.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use dnswire::{Answer, DnsError, Rcode, RecordType};
use engine::{Dns, DnsFamily};
use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::schedule::Resolution;
use super::system::{self, ResolvConf};

/// The largest answer read over UDP: we send no EDNS, so servers keep to
/// 512 bytes; some send more, which costs nothing to accept.
const UDP_BUFFER: usize = 4096;

/// Looks `host` up as `dns` says, with query ids drawn from `seed`.
pub async fn resolve(host: &str, dns: &Dns, seed: u64) -> Result<Resolution, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Resolution {
            addrs: by_family(dns.family, vec![ip]),
            ttl: None,
        });
    }
    let listed = by_family(
        dns.family,
        system::hosts_lookup(&system::system_hosts(), host),
    );
    if !listed.is_empty() {
        return Ok(Resolution {
            addrs: listed,
            ttl: None,
        });
    }
    let conf = ResolvConf::system();
    let mut asker = Asker {
        servers: if dns.resolvers.is_empty() {
            conf.servers.clone()
        } else {
            dns.resolvers.clone()
        },
        timeout: dns.query_timeout,
        tries: dns.query_tries.max(1),
        tcp: dns.tcp,
        rng: seed | 1,
    };
    for name in conf.candidates(host) {
        if let Some(found) = asker.lookup(&name, dns.family).await? {
            return Ok(found);
        }
    }
    Ok(Resolution {
        addrs: Vec::new(),
        ttl: None,
    })
}

/// The record types asked for a family, and whether every one is asked
/// (`ALL`) or the first with addresses wins.
fn plan(family: DnsFamily) -> (&'static [RecordType], bool) {
    use RecordType::{Aaaa, A};
    match family {
        DnsFamily::Auto => (&[Aaaa, A], false),
        DnsFamily::V4Preferred => (&[A, Aaaa], false),
        DnsFamily::V4Only => (&[A], false),
        DnsFamily::V6Only => (&[Aaaa], false),
        DnsFamily::All => (&[Aaaa, A], true),
    }
}

/// The addresses of a family's choosing among `addrs` (from `/etc/hosts`
/// or a literal), following the same plan as DNS answers.
fn by_family(family: DnsFamily, addrs: Vec<IpAddr>) -> Vec<IpAddr> {
    let (types, all) = plan(family);
    let mut out = Vec::new();
    for t in types {
        let of_type = addrs.iter().filter(|a| {
            matches!(
                (t, a),
                (RecordType::A, IpAddr::V4(_)) | (RecordType::Aaaa, IpAddr::V6(_))
            )
        });
        out.extend(of_type);
        if !all && !out.is_empty() {
            break;
        }
    }
    out
}

/// The servers asked, and how.
struct Asker {
    servers: Vec<SocketAddr>,
    timeout: Duration,
    tries: u32,
    tcp: bool,
    rng: u64,
}

impl Asker {
    fn next_id(&mut self) -> u16 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 24) as u16
    }

    /// `name`'s addresses of `family`; `None` when it has none (NXDOMAIN,
    /// or no record of the types asked).
    async fn lookup(
        &mut self,
        name: &str,
        family: DnsFamily,
    ) -> Result<Option<Resolution>, String> {
        let (types, all) = plan(family);
        let mut addrs = Vec::new();
        let mut ttl: Option<u32> = None;
        for &rtype in types {
            let answer = self.ask(name, rtype).await?;
            if answer.rcode == Rcode::NxDomain {
                return Ok(None); // the name has no records of any type
            }
            for (ip, t) in answer.addrs {
                addrs.push(ip);
                ttl = Some(ttl.map_or(t, |m| m.min(t)));
            }
            if !all && !addrs.is_empty() {
                break;
            }
        }
        Ok((!addrs.is_empty()).then(|| Resolution {
            addrs,
            ttl: ttl.map(|t| Duration::from_secs(t.into())),
        }))
    }

    /// One question, answered with NOERROR or NXDOMAIN by some server.
    async fn ask(&mut self, name: &str, rtype: RecordType) -> Result<Answer, String> {
        let mut last = String::from("no DNS server to ask");
        for _ in 0..self.tries {
            for server in self.servers.clone() {
                let id = self.next_id();
                let query = dnswire::query(id, name, rtype).map_err(|e| e.to_string())?;
                let q = Question {
                    id,
                    name,
                    rtype,
                    query: &query,
                };
                let answered = if self.tcp {
                    q.over_tcp(server, self.timeout).await
                } else {
                    match q.over_udp(server, self.timeout).await {
                        Ok(a) if a.truncated => q.over_tcp(server, self.timeout).await,
                        other => other,
                    }
                };
                match answered {
                    Ok(a) if matches!(a.rcode, Rcode::NoError | Rcode::NxDomain) => return Ok(a),
                    Ok(a) => last = format!("{server}: {name} {rtype:?}: {:?}", a.rcode),
                    Err(e) => last = format!("{server}: {name} {rtype:?}: {e}"),
                }
            }
        }
        Err(last)
    }
}

/// One query on the wire.
struct Question<'a> {
    id: u16,
    name: &'a str,
    rtype: RecordType,
    query: &'a [u8],
}

impl Question<'_> {
    fn parse(&self, msg: &[u8]) -> Result<Answer, DnsError> {
        dnswire::parse_response(msg, self.id, self.name, self.rtype)
    }

    /// Asks `server` over UDP from a fresh socket (a random source port,
    /// with the random id, against spoofed answers); datagrams that answer
    /// something else are dropped.
    async fn over_udp(&self, server: SocketAddr, timeout: Duration) -> Result<Answer, String> {
        let deadline = Instant::now() + timeout;
        let local: SocketAddr = if server.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = glommio::net::UdpSocket::bind(local).map_err(|e| e.to_string())?;
        within(deadline, socket.connect(server))
            .await?
            .map_err(|e| e.to_string())?;
        within(deadline, socket.send(self.query))
            .await?
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; UDP_BUFFER];
        loop {
            let n = within(deadline, socket.recv(&mut buf))
                .await?
                .map_err(|e| e.to_string())?;
            match self.parse(&buf[..n]) {
                Ok(a) => return Ok(a),
                Err(DnsError::Mismatch | DnsError::NotResponse) => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Asks `server` over TCP (RFC 1035 §4.2.2: each message after its
    /// length in two bytes).
    async fn over_tcp(&self, server: SocketAddr, timeout: Duration) -> Result<Answer, String> {
        let deadline = Instant::now() + timeout;
        let mut stream = within(deadline, glommio::net::TcpStream::connect(server))
            .await?
            .map_err(|e| e.to_string())?;
        let len = u16::try_from(self.query.len()).map_err(|_| "query too long".to_string())?;
        let mut msg = Vec::with_capacity(self.query.len() + 2);
        msg.extend_from_slice(&len.to_be_bytes());
        msg.extend_from_slice(self.query);
        within(deadline, stream.write_all(&msg))
            .await?
            .map_err(|e| e.to_string())?;
        let mut len = [0u8; 2];
        within(deadline, stream.read_exact(&mut len))
            .await?
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; u16::from_be_bytes(len).into()];
        within(deadline, stream.read_exact(&mut buf))
            .await?
            .map_err(|e| e.to_string())?;
        self.parse(&buf).map_err(|e| e.to_string())
    }
}

/// `f`'s output, or an error once `deadline` passes.
async fn within<T>(deadline: Instant, f: impl Future<Output = T>) -> Result<T, String> {
    let expired = async {
        glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
        Err("no answer in time".to_string())
    };
    futures_lite::future::or(async { Ok(f.await) }, expired).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn families_choose_among_listed_addresses() {
        let both = ips(&["10.0.0.1", "::1", "10.0.0.2"]);
        assert_eq!(by_family(DnsFamily::Auto, both.clone()), ips(&["::1"]));
        assert_eq!(
            by_family(DnsFamily::V4Preferred, both.clone()),
            ips(&["10.0.0.1", "10.0.0.2"])
        );
        assert_eq!(by_family(DnsFamily::V6Only, both.clone()), ips(&["::1"]));
        assert_eq!(
            by_family(DnsFamily::All, both.clone()),
            ips(&["::1", "10.0.0.1", "10.0.0.2"])
        );
        let v4 = ips(&["10.0.0.1"]);
        assert_eq!(
            by_family(DnsFamily::Auto, v4.clone()),
            v4,
            "AUTO falls back to IPv4"
        );
        assert!(by_family(DnsFamily::V6Only, v4).is_empty());
    }
}
