//! The system's resolver settings: `/etc/resolv.conf` (servers, search list, `ndots`) and `/etc/hosts`, read as glibc and c-ares read them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What `/etc/resolv.conf` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvConf {
    /// `nameserver` lines, at most three (as glibc takes them); the local
    /// server when there is none.
    pub servers: Vec<SocketAddr>,
    /// `search` (or `domain`): the suffixes tried for a short name.
    pub search: Vec<String>,
    /// `options ndots:n`: a name with fewer dots is tried with the search
    /// suffixes first (default 1).
    pub ndots: usize,
}

/// At most this many `nameserver` lines count (glibc's MAXNS).
const MAX_SERVERS: usize = 3;

impl ResolvConf {
    /// Reads `text`, a `resolv.conf`; what it does not understand is
    /// skipped, as resolvers do.
    pub fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf {
            servers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
        };
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A scope (`fe80::1%eth0`) is left out: not routable
                    // from a loopback test and rare on servers.
                    let ip = words.next().and_then(|w| w.split('%').next()?.parse().ok());
                    if let Some(ip) = ip {
                        if conf.servers.len() < MAX_SERVERS {
                            conf.servers.push(SocketAddr::new(ip, 53));
                        }
                    }
                }
                Some("search") => conf.search = words.map(str::to_owned).collect(),
                Some("domain") => {
                    conf.search = words.next().map(str::to_owned).into_iter().collect()
                }
                Some("options") => {
                    for o in words {
                        if let Some(n) = o.strip_prefix("ndots:").and_then(|n| n.parse().ok()) {
                            conf.ndots = usize::min(n, 15);
                        }
                    }
                }
                _ => {}
            }
        }
        if conf.servers.is_empty() {
            conf.servers
                .push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53));
        }
        conf
    }

    /// `/etc/resolv.conf`, or the defaults when it cannot be read.
    pub fn system() -> ResolvConf {
        ResolvConf::parse(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default())
    }

    /// The names asked for `name`, in order: as given when it ends with a
    /// dot; else with each search suffix first when it has fewer than
    /// `ndots` dots, and after the name itself otherwise.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(absolute) = name.strip_suffix('.') {
            return vec![absolute.to_owned()];
        }
        let suffixed = self
            .search
            .iter()
            .map(|s| format!("{name}.{}", s.trim_end_matches('.')));
        if name.matches('.').count() >= self.ndots {
            std::iter::once(name.to_owned()).chain(suffixed).collect()
        } else {
            suffixed.chain(std::iter::once(name.to_owned())).collect()
        }
    }
}

/// `name`'s addresses in `hosts` (an `/etc/hosts`), in the file's order.
pub fn hosts_lookup(hosts: &str, name: &str) -> Vec<IpAddr> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let mut out = Vec::new();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
            continue;
        };
        if words.any(|w| w.eq_ignore_ascii_case(name)) && !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

/// `/etc/hosts`, or nothing when it cannot be read.
pub fn system_hosts() -> String {
    std::fs::read_to_string("/etc/hosts").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_servers_search_and_ndots() {
        let c = ResolvConf::parse(
            "# comment\nnameserver 10.0.0.2\nnameserver fe80::1%eth0 ; scoped\n\
             nameserver 10.0.0.3\nnameserver 10.0.0.4\nnameserver bogus\n\
             domain ignored.example\nsearch ns.svc.cluster.local svc.cluster.local\n\
             options edns0 ndots:5 timeout:2\n",
        );
        let servers: Vec<String> = c.servers.iter().map(|s| s.to_string()).collect();
        assert_eq!(servers, ["10.0.0.2:53", "[fe80::1]:53", "10.0.0.3:53"]);
        assert_eq!(c.search, ["ns.svc.cluster.local", "svc.cluster.local"]);
        assert_eq!(c.ndots, 5);
    }

    #[test]
    fn an_empty_resolv_conf_asks_the_local_server() {
        let c = ResolvConf::parse("");
        assert_eq!(c.servers, [SocketAddr::from(([127, 0, 0, 1], 53))]);
        assert!(c.search.is_empty());
        assert_eq!(c.ndots, 1);
        assert_eq!(c.candidates("backend"), ["backend"]);
    }

    #[test]
    fn short_names_are_tried_with_the_search_list_first() {
        let c = ResolvConf::parse("search a.example b.example.\noptions ndots:2");
        assert_eq!(
            c.candidates("web"),
            ["web.a.example", "web.b.example", "web"]
        );
        assert_eq!(
            c.candidates("web.ns.svc"),
            ["web.ns.svc", "web.ns.svc.a.example", "web.ns.svc.b.example"]
        );
        assert_eq!(c.candidates("web."), ["web"], "absolute");
    }

    #[test]
    fn hosts_entries_by_name_or_alias_in_file_order() {
        let hosts = "127.0.0.1\tlocalhost\n::1 localhost ip6-localhost # v6\n\
                     # 10.0.0.1 commented\n10.0.0.2 web Web.Example\nbad line\n\
                     127.0.0.1 localhost\n";
        assert_eq!(
            hosts_lookup(hosts, "LOCALHOST."),
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(hosts_lookup(hosts, "web.example").len(), 1);
        assert!(hosts_lookup(hosts, "commented").is_empty());
    }
}
