//! `request_mirror_policies`: where copies of a route's requests go (shadowing), fire and forget, and how a copy's host reads.

use super::Fraction;

/// One `RequestMirrorPolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPolicy {
    pub cluster: MirrorCluster,
    /// `runtime_fraction`: the share of requests copied (its
    /// `default_value`); `None`: every request.
    pub fraction: Option<Fraction>,
    /// `host_rewrite_literal`: the copy's host, instead of the request's.
    pub host_rewrite: Option<String>,
    /// Not `disable_shadow_host_suffix_append`: `-shadow` is appended to
    /// the copy's host (before its port), so the mirror's logs tell
    /// copies apart.
    pub host_suffix: bool,
}

/// The cluster a copy goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorCluster {
    /// `cluster`.
    Named(String),
    /// `cluster_header`: the cluster the request's field of that
    /// (lowercase) name names; absent or unknown, no copy.
    Header(String),
}

impl MirrorPolicy {
    /// The host a copy of a request for `host` carries: the literal
    /// rewrite, else the host with `-shadow` before its port (an IPv6
    /// literal's brackets kept whole), unless the suffix is disabled.
    pub fn shadow_host(&self, host: &[u8]) -> Vec<u8> {
        if let Some(literal) = &self.host_rewrite {
            return literal.as_bytes().to_vec();
        }
        if !self.host_suffix {
            return host.to_vec();
        }
        let name_end = match host.iter().rposition(|&b| b == b':') {
            Some(colon) if !host[colon..].contains(&b']') => colon,
            _ => host.len(),
        };
        let mut out = Vec::with_capacity(host.len() + SHADOW_SUFFIX.len());
        out.extend_from_slice(&host[..name_end]);
        out.extend_from_slice(SHADOW_SUFFIX);
        out.extend_from_slice(&host[name_end..]);
        out
    }
}

/// What a copy's host gets appended (Envoy's shadow suffix).
pub const SHADOW_SUFFIX: &[u8] = b"-shadow";

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(host_rewrite: Option<&str>, host_suffix: bool) -> MirrorPolicy {
        MirrorPolicy {
            cluster: MirrorCluster::Named("m".into()),
            fraction: None,
            host_rewrite: host_rewrite.map(str::to_owned),
            host_suffix,
        }
    }

    #[test]
    fn the_suffix_goes_before_the_port() {
        let p = policy(None, true);
        let host = |h: &str| String::from_utf8(p.shadow_host(h.as_bytes())).unwrap();
        assert_eq!(host("example.com"), "example.com-shadow");
        assert_eq!(host("example.com:8080"), "example.com-shadow:8080");
        assert_eq!(host("127.0.0.1:1234"), "127.0.0.1-shadow:1234");
        assert_eq!(host("[::1]:80"), "[::1]-shadow:80");
        assert_eq!(host("[::1]"), "[::1]-shadow");
    }

    #[test]
    fn a_literal_or_a_disabled_suffix_keeps_the_suffix_off() {
        assert_eq!(
            policy(Some("m.example"), true).shadow_host(b"a:1"),
            b"m.example"
        );
        assert_eq!(policy(None, false).shadow_host(b"a:1"), b"a:1");
    }
}
