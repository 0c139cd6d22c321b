//! Role-based access control (Envoy's RBAC, `envoy.config.rbac.v3`): policies of permissions (what is asked) and principals (who asks), and the verdict of an `ALLOW`, `DENY` or `LOG` set of them over one request or connection. Pure: the caller says what the request is ([`RbacInput`]).

use std::net::{IpAddr, SocketAddr};

use crate::config::HeaderMatcher;
use crate::filter_chain::CidrRange;
use crate::matcher::HeaderMatchKind;

/// What the policies' action does with a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RbacAction {
    /// Allowed when a policy matches, denied otherwise.
    Allow,
    /// Denied when a policy matches, allowed otherwise.
    Deny,
    /// Always allowed; a match is only noted.
    Log,
}

/// A set of policies, by name (Envoy's order: sorted by name, the first
/// that matches is named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rbac {
    pub action: RbacAction,
    pub policies: Vec<(String, RbacPolicy)>,
}

/// A policy matches when one of its permissions and one of its
/// principals do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacPolicy {
    pub permissions: Vec<Permission>,
    pub principals: Vec<Principal>,
}

/// What is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    And(Vec<Permission>),
    Or(Vec<Permission>),
    Any,
    Header(HeaderMatcher),
    /// `url_path`: the path without its query.
    UrlPath(HeaderMatchKind),
    DestinationIp(CidrRange),
    DestinationPort(u16),
    /// `[start, end)`.
    DestinationPortRange(i32, i32),
    Not(Box<Permission>),
    /// The TLS server name the client asked for.
    RequestedServerName(HeaderMatchKind),
}

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    And(Vec<Principal>),
    Or(Vec<Principal>),
    Any,
    /// A client certificate was presented and verified; with a matcher,
    /// one of its URI SANs, else DNS SANs, else its subject matches.
    Authenticated(Option<HeaderMatchKind>),
    /// `source_ip` / `direct_remote_ip`: the connection's peer.
    DirectRemoteIp(CidrRange),
    /// `remote_ip`: the client's address as the connection manager takes
    /// it.
    RemoteIp(CidrRange),
    Header(HeaderMatcher),
    UrlPath(HeaderMatchKind),
    Not(Box<Principal>),
}

/// Who a verified client certificate names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    pub uri_sans: Vec<String>,
    pub dns_sans: Vec<String>,
    /// The subject, as RFC 4514 writes it.
    pub subject: String,
}

/// What the policies read of a request (or, for the network filter, a
/// connection: no header, no path).
pub trait RbacInput {
    /// Every value of a field (lowercase name; pseudo-headers too), in
    /// order; none when absent.
    fn header(&self, name: &str) -> Vec<&str>;
    /// The path without its query.
    fn path(&self) -> Option<&str>;
    fn local(&self) -> SocketAddr;
    fn direct_remote(&self) -> SocketAddr;
    fn remote(&self) -> IpAddr;
    fn sni(&self) -> Option<&str>;
    fn peer(&self) -> Option<&PeerIdentity>;
}

/// A verdict: allowed or not, and the policy that matched (if one did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'a> {
    pub allowed: bool,
    pub policy: Option<&'a str>,
}

impl Rbac {
    pub fn evaluate<'a>(&'a self, input: &dyn RbacInput) -> Verdict<'a> {
        let policy = self
            .policies
            .iter()
            .find(|(_, p)| p.matches(input))
            .map(|(name, _)| name.as_str());
        let allowed = match self.action {
            RbacAction::Allow => policy.is_some(),
            RbacAction::Deny => policy.is_none(),
            RbacAction::Log => true,
        };
        Verdict { allowed, policy }
    }
}

impl RbacPolicy {
    fn matches(&self, input: &dyn RbacInput) -> bool {
        self.permissions.iter().any(|p| p.matches(input))
            && self.principals.iter().any(|p| p.matches(input))
    }
}

/// Whether a field matches: any of its values, one at a time (Envoy 1.40
/// matches repeated fields value by value, not joined).
fn header_matches(m: &HeaderMatcher, input: &dyn RbacInput) -> bool {
    let name = match m.name.as_str() {
        "host" => ":authority",
        n => n,
    };
    let values = input.header(name);
    if values.is_empty() {
        return crate::route::header_value_matches(m, None);
    }
    values
        .iter()
        .any(|v| crate::route::header_value_matches(m, Some(v)))
}

impl Permission {
    fn matches(&self, input: &dyn RbacInput) -> bool {
        match self {
            Self::And(all) => all.iter().all(|p| p.matches(input)),
            Self::Or(any) => any.iter().any(|p| p.matches(input)),
            Self::Any => true,
            Self::Header(m) => header_matches(m, input),
            Self::UrlPath(m) => input.path().is_some_and(|p| m.matches(p)),
            Self::DestinationIp(c) => c.contains(input.local().ip()),
            Self::DestinationPort(port) => input.local().port() == *port,
            Self::DestinationPortRange(start, end) => {
                let port = i32::from(input.local().port());
                *start <= port && port < *end
            }
            Self::Not(p) => !p.matches(input),
            Self::RequestedServerName(m) => m.matches(input.sni().unwrap_or("")),
        }
    }
}

impl Principal {
    fn matches(&self, input: &dyn RbacInput) -> bool {
        match self {
            Self::And(all) => all.iter().all(|p| p.matches(input)),
            Self::Or(any) => any.iter().any(|p| p.matches(input)),
            Self::Any => true,
            Self::Authenticated(name) => match (input.peer(), name) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(peer), Some(m)) => {
                    if !peer.uri_sans.is_empty() {
                        peer.uri_sans.iter().any(|s| m.matches(s))
                    } else if !peer.dns_sans.is_empty() {
                        peer.dns_sans.iter().any(|s| m.matches(s))
                    } else {
                        m.matches(&peer.subject)
                    }
                }
            },
            Self::DirectRemoteIp(c) => c.contains(input.direct_remote().ip()),
            Self::RemoteIp(c) => c.contains(input.remote()),
            Self::Header(m) => header_matches(m, input),
            Self::UrlPath(m) => input.path().is_some_and(|p| m.matches(p)),
            Self::Not(p) => !p.matches(input),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Req {
        path: &'static str,
        headers: Vec<(&'static str, &'static str)>,
        peer: Option<PeerIdentity>,
        from: SocketAddr,
    }

    impl RbacInput for Req {
        fn header(&self, name: &str) -> Vec<&str> {
            self.headers
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .collect()
        }
        fn path(&self) -> Option<&str> {
            Some(self.path)
        }
        fn local(&self) -> SocketAddr {
            "10.0.0.1:443".parse().unwrap()
        }
        fn direct_remote(&self) -> SocketAddr {
            self.from
        }
        fn remote(&self) -> IpAddr {
            self.from.ip()
        }
        fn sni(&self) -> Option<&str> {
            Some("api.example.com")
        }
        fn peer(&self) -> Option<&PeerIdentity> {
            self.peer.as_ref()
        }
    }

    fn req(path: &'static str, from: &str) -> Req {
        Req {
            path,
            headers: vec![],
            peer: None,
            from: from.parse().unwrap(),
        }
    }

    fn cidr(s: &str) -> CidrRange {
        let (a, l) = s.split_once('/').unwrap();
        CidrRange::new(a.parse().unwrap(), l.parse().unwrap()).unwrap()
    }

    #[test]
    fn allow_deny_and_log() {
        let admin = RbacPolicy {
            permissions: vec![Permission::UrlPath(HeaderMatchKind::Prefix(
                "/admin".into(),
            ))],
            principals: vec![Principal::DirectRemoteIp(cidr("10.1.0.0/16"))],
        };
        let policies = vec![("admin".to_string(), admin)];
        let allow = Rbac {
            action: RbacAction::Allow,
            policies: policies.clone(),
        };
        let deny = Rbac {
            action: RbacAction::Deny,
            policies: policies.clone(),
        };
        let log = Rbac {
            action: RbacAction::Log,
            policies,
        };
        let inside = req("/admin/x", "10.1.2.3:5000");
        let outside = req("/admin/x", "192.0.2.1:5000");
        assert_eq!(
            allow.evaluate(&inside),
            Verdict {
                allowed: true,
                policy: Some("admin")
            }
        );
        assert_eq!(
            allow.evaluate(&outside),
            Verdict {
                allowed: false,
                policy: None
            }
        );
        assert_eq!(
            deny.evaluate(&inside),
            Verdict {
                allowed: false,
                policy: Some("admin")
            }
        );
        assert!(deny.evaluate(&outside).allowed);
        assert!(log.evaluate(&outside).allowed);
        assert_eq!(log.evaluate(&inside).policy, Some("admin"));
    }

    #[test]
    fn sets_nots_and_certificates() {
        let p = RbacPolicy {
            permissions: vec![Permission::And(vec![
                Permission::Header(HeaderMatcher {
                    name: ":method".into(),
                    kind: HeaderMatchKind::Exact("GET".into()),
                    invert: false,
                }),
                Permission::Not(Box::new(Permission::UrlPath(HeaderMatchKind::Prefix(
                    "/private".into(),
                )))),
                Permission::DestinationPortRange(400, 500),
                Permission::RequestedServerName(HeaderMatchKind::Suffix(".example.com".into())),
            ])],
            principals: vec![Principal::Or(vec![
                Principal::Authenticated(Some(HeaderMatchKind::Exact(
                    "spiffe://cluster.local/ns/web/sa/frontend".into(),
                ))),
                Principal::Header(HeaderMatcher {
                    name: "x-role".into(),
                    kind: HeaderMatchKind::Exact("admin".into()),
                    invert: false,
                }),
            ])],
        };
        let rbac = Rbac {
            action: RbacAction::Allow,
            policies: vec![("p".into(), p)],
        };
        let mut r = req("/public", "192.0.2.1:1");
        r.headers.push((":method", "GET"));
        assert!(!rbac.evaluate(&r).allowed);
        // Repeated fields are matched value by value, as Envoy 1.40 does:
        // `admin` on the second line matches; joined they would not.
        r.headers.push(("x-role", "ops"));
        r.headers.push(("x-role", "admin"));
        assert!(rbac.evaluate(&r).allowed);
        let mut m = req("/public", "192.0.2.1:1");
        m.headers.push((":method", "GET"));
        m.peer = Some(PeerIdentity {
            uri_sans: vec!["spiffe://cluster.local/ns/web/sa/frontend".into()],
            dns_sans: vec![],
            subject: "CN=frontend".into(),
        });
        assert!(rbac.evaluate(&m).allowed);
        m.path = "/private/x";
        assert!(!rbac.evaluate(&m).allowed);
    }
}
