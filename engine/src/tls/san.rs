//! `match_typed_subject_alt_names`: which peer certificates a validation context takes beyond a good chain, by their subject alternative names, as Envoy matches them.
//!
//! A certificate passes when any matcher matches any of its names of the
//! matcher's type (Envoy's rule); with no matchers every good chain
//! passes. A DNS matcher's `exact` value is compared as a DNS name: a
//! certificate for `*.example.com` matches `api.example.com` (one label),
//! as Envoy's `dnsNameMatch` does.

use std::net::IpAddr;

use rustls::pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;

use crate::matcher::HeaderMatchKind;

/// The kind of name a matcher looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SanType {
    Dns,
    Uri,
    Email,
    IpAddress,
}

/// One `SubjectAltNameMatcher`; `matcher` is a string matcher (exact,
/// prefix, suffix, contains, regex).
#[derive(Debug, Clone)]
pub struct SanMatcher {
    pub san_type: SanType,
    pub matcher: HeaderMatchKind,
}

/// Whether `cert` (DER) has a name one of `matchers` takes; true when there
/// are no matchers. A certificate that cannot be parsed has no names.
pub fn accepts(matchers: &[SanMatcher], cert: &CertificateDer<'_>) -> bool {
    if matchers.is_empty() {
        return true;
    }
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return false;
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return false;
    };
    san.value
        .general_names
        .iter()
        .any(|name| matchers.iter().any(|m| m.takes(name)))
}

impl SanMatcher {
    fn takes(&self, name: &GeneralName<'_>) -> bool {
        match (self.san_type, name) {
            (SanType::Dns, GeneralName::DNSName(n)) => match &self.matcher {
                HeaderMatchKind::Exact(want) => dns_name_match(want, n),
                m => m.matches(n),
            },
            (SanType::Uri, GeneralName::URI(u)) => self.matcher.matches(u),
            (SanType::Email, GeneralName::RFC822Name(e)) => self.matcher.matches(e),
            (SanType::IpAddress, GeneralName::IPAddress(raw)) => {
                ip_text(raw).is_some_and(|ip| self.matcher.matches(&ip))
            }
            _ => false,
        }
    }
}

/// `name` (a certificate's DNS name, maybe `*.` wildcarded) matches the
/// wanted host, case-insensitively; a wildcard stands for one whole label.
fn dns_name_match(want: &str, name: &str) -> bool {
    if want.eq_ignore_ascii_case(name) {
        return true;
    }
    let Some(suffix) = name.strip_prefix("*.") else {
        return false;
    };
    want.split_once('.')
        .is_some_and(|(label, rest)| !label.is_empty() && rest.eq_ignore_ascii_case(suffix))
}

/// An IP address SAN (4 or 16 bytes) as text.
fn ip_text(raw: &[u8]) -> Option<String> {
    let ip: IpAddr = match raw.len() {
        4 => <[u8; 4]>::try_from(raw).ok()?.into(),
        16 => <[u8; 16]>::try_from(raw).ok()?.into(),
        _ => return None,
    };
    Some(ip.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(sans: Vec<rcgen::SanType>) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = sans;
        params.self_signed(&key).expect("cert").der().clone()
    }

    fn m(san_type: SanType, matcher: HeaderMatchKind) -> SanMatcher {
        SanMatcher { san_type, matcher }
    }

    #[test]
    fn any_matcher_on_any_name_of_its_type() {
        let c = cert(vec![
            rcgen::SanType::DnsName("*.example.com".try_into().unwrap()),
            rcgen::SanType::URI("spiffe://cluster.local/ns/a/sa/web".try_into().unwrap()),
            rcgen::SanType::IpAddress("10.0.0.7".parse().unwrap()),
            rcgen::SanType::Rfc822Name("ops@example.com".try_into().unwrap()),
        ]);
        let exact = |s: &str| HeaderMatchKind::Exact(s.into());
        assert!(accepts(&[], &c));
        assert!(accepts(&[m(SanType::Dns, exact("api.example.com"))], &c));
        assert!(!accepts(&[m(SanType::Dns, exact("a.b.example.com"))], &c));
        assert!(!accepts(&[m(SanType::Dns, exact("example.com"))], &c));
        assert!(accepts(
            &[m(
                SanType::Uri,
                HeaderMatchKind::Prefix("spiffe://cluster.local/ns/a/".into())
            )],
            &c
        ));
        assert!(!accepts(
            &[m(SanType::Uri, exact("spiffe://cluster.local/ns/b/sa/web"))],
            &c
        ));
        assert!(accepts(&[m(SanType::IpAddress, exact("10.0.0.7"))], &c));
        assert!(accepts(&[m(SanType::Email, exact("ops@example.com"))], &c));
        // The type must agree: a DNS matcher never looks at the URI.
        assert!(!accepts(
            &[m(SanType::Dns, HeaderMatchKind::Contains("spiffe".into()))],
            &c
        ));
        // Any of several.
        assert!(accepts(
            &[
                m(SanType::Uri, exact("spiffe://nope")),
                m(SanType::IpAddress, exact("10.0.0.7")),
            ],
            &c
        ));
    }

    #[test]
    fn a_certificate_without_names_or_unparsable_is_refused_by_any_matcher() {
        let none = cert(vec![]);
        let any = [m(SanType::Dns, HeaderMatchKind::Prefix(String::new()))];
        assert!(!accepts(&any, &none));
        assert!(!accepts(&any, &CertificateDer::from(vec![1, 2, 3])));
    }
}

/// Who a client certificate (DER) names: its URI and DNS SANs and its
/// subject; `None` for one that cannot be parsed.
pub fn peer_identity(cert: &[u8]) -> Option<crate::rbac::PeerIdentity> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let mut id = crate::rbac::PeerIdentity {
        subject: parsed.subject().to_string(),
        ..Default::default()
    };
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::URI(u) => id.uri_sans.push((*u).to_owned()),
                GeneralName::DNSName(d) => id.dns_sans.push((*d).to_owned()),
                _ => {}
            }
        }
    }
    Some(id)
}

#[cfg(test)]
mod identity_tests {
    #[test]
    fn a_client_certificate_names_its_sans_and_subject() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["client.example".to_string()]).unwrap();
        params.subject_alt_names.push(rcgen::SanType::URI(
            "spiffe://cluster.local/ns/web/sa/frontend"
                .try_into()
                .unwrap(),
        ));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "frontend");
        let cert = params.self_signed(&key).unwrap();
        let id = super::peer_identity(cert.der()).unwrap();
        assert_eq!(id.uri_sans, ["spiffe://cluster.local/ns/web/sa/frontend"]);
        assert_eq!(id.dns_sans, ["client.example"]);
        assert_eq!(id.subject, "CN=frontend");
        assert!(super::peer_identity(b"not a certificate").is_none());
    }
}
