//! Building downstream TLS: errors by name, and which certificate a ClientHello gets.

use super::*;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

fn cert(names: &[&str], alg: &'static rcgen::SignatureAlgorithm) -> CertificateSpec {
    let key = rcgen::KeyPair::generate_for(alg).expect("key");
    let params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("params");
    let c = params.self_signed(&key).expect("cert");
    CertificateSpec {
        chain: vec![c.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

fn spec(certificates: Vec<CertificateSpec>) -> DownstreamTlsSpec {
    DownstreamTlsSpec::new(certificates, vec![b"h2".to_vec(), b"http/1.1".to_vec()])
}

const P256: &rcgen::SignatureAlgorithm = &rcgen::PKCS_ECDSA_P256_SHA256;
const ED25519: &rcgen::SignatureAlgorithm = &rcgen::PKCS_ED25519;

#[test]
fn a_context_builds_with_its_names_and_alpn() {
    let tls = DownstreamTls::build(spec(vec![cert(&["a.example", "*.b.example"], P256)])).unwrap();
    assert_eq!(
        tls.state().names,
        vec![vec!["a.example".to_string(), "*.b.example".to_string()]]
    );
    assert_eq!(tls.alpn, ["h2", "http/1.1"]);
    assert_eq!(
        tls.state().config.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );
}

#[test]
fn what_rustls_cannot_do_is_named() {
    assert_eq!(
        DownstreamTls::build(spec(vec![])).unwrap_err(),
        TlsError::NoCertificate
    );
    let mut s = spec(vec![cert(&["a"], P256)]);
    s.cipher_suites = vec!["ECDHE-RSA-AES128-GCM-SHA256".into(), "AES128-SHA".into()];
    assert_eq!(
        DownstreamTls::build(s).unwrap_err(),
        TlsError::CipherSuite("AES128-SHA".into())
    );
    let mut s = spec(vec![cert(&["a"], P256)]);
    s.ecdh_curves = vec!["P-521".into()];
    assert_eq!(
        DownstreamTls::build(s).unwrap_err(),
        TlsError::Curve("P-521".into())
    );
    let mut s = spec(vec![cert(&["a"], P256)]);
    s.min_version = TlsVersion::V1_3;
    s.max_version = TlsVersion::V1_2;
    assert_eq!(DownstreamTls::build(s).unwrap_err(), TlsError::Versions);
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let mut a = cert(&["a"], P256);
    a.key = cert(&["b"], P256).key;
    let err = DownstreamTls::build(spec(vec![a])).unwrap_err();
    assert!(
        matches!(&err, TlsError::Certificate { index: 0, reason } if reason.contains("does not match")),
        "{err}"
    );
}

/// An X.509 v1 certificate (no extensions, so no SAN) for
/// `v1.example.com` and its key, made by `openssl x509 -req` as Envoy's
/// examples make theirs.
fn v1_cert() -> CertificateSpec {
    use rustls::pki_types::pem::PemObject;
    let chain = CertificateDer::pem_slice_iter(include_bytes!("testdata/v1-cert.pem"))
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("testdata/v1-key.pem")).expect("key");
    CertificateSpec { chain, key }
}

#[test]
fn an_x509_v1_certificate_is_served_under_its_common_name() {
    let tls = DownstreamTls::build(spec(vec![v1_cert(), cert(&["other.example"], P256)]))
        .expect("v1 certificates build, as OpenSSL serves them");
    assert_eq!(
        tls.state().names,
        vec![
            vec!["v1.example.com".to_string()],
            vec!["other.example".to_string()]
        ]
    );
    // Its key is still checked against the certificate.
    let mut wrong = v1_cert();
    wrong.key = cert(&["b"], P256).key;
    let err = DownstreamTls::build(spec(vec![wrong])).unwrap_err();
    assert!(
        matches!(&err, TlsError::Certificate { index: 0, reason } if reason.contains("does not match")),
        "{err}"
    );
}

#[test]
fn a_certificate_without_a_san_answers_for_its_common_name() {
    let key = rcgen::KeyPair::generate_for(P256).expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "cn.example");
    let c = params.self_signed(&key).expect("cert");
    let spec_cn = CertificateSpec {
        chain: vec![c.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    };
    let tls = DownstreamTls::build(spec(vec![spec_cn])).unwrap();
    assert_eq!(tls.state().names, vec![vec!["cn.example".to_string()]]);
}

#[test]
fn tls12_suites_are_kept_in_the_given_order_after_tls13_s() {
    let mut s = spec(vec![cert(&["a"], P256)]);
    s.cipher_suites = vec![
        "ECDHE-ECDSA-CHACHA20-POLY1305".into(),
        "ECDHE-ECDSA-AES128-GCM-SHA256".into(),
    ];
    let tls = DownstreamTls::build(s).unwrap();
    let suites: Vec<String> = tls
        .state()
        .config
        .crypto_provider()
        .cipher_suites
        .iter()
        .filter(|s| s.tls13().is_none())
        .map(|s| format!("{:?}", s.suite()))
        .collect();
    assert_eq!(
        suites,
        [
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        ]
    );
}

fn resolver(
    certs: Vec<CertificateSpec>,
    require_sni: bool,
) -> (SniResolver, Vec<Arc<CertifiedKey>>) {
    let provider = rustls::crypto::ring::default_provider();
    let keys: Vec<(Arc<CertifiedKey>, Vec<String>)> = certs
        .into_iter()
        .map(|c| {
            let names = webpki::EndEntityCert::try_from(&c.chain[0])
                .unwrap()
                .valid_dns_names()
                .map(str::to_string)
                .collect();
            let k = provider.key_provider.load_private_key(c.key).unwrap();
            (Arc::new(CertifiedKey::new(c.chain, k)), names)
        })
        .collect();
    let handles = keys.iter().map(|(k, _)| Arc::clone(k)).collect();
    (
        SniResolver {
            certs: keys,
            require_sni,
        },
        handles,
    )
}

#[test]
fn sni_picks_exact_then_wildcard_then_the_default() {
    let (r, k) = resolver(
        vec![
            cert(&["default.example"], P256),
            cert(&["*.b.example"], P256),
            cert(&["x.b.example"], P256),
        ],
        false,
    );
    let ecdsa = [SignatureScheme::ECDSA_NISTP256_SHA256];
    let got = |sni| r.pick(sni, &ecdsa).unwrap();
    assert!(
        Arc::ptr_eq(&got(Some("x.b.example")), &k[2]),
        "exact wins over wildcard"
    );
    assert!(
        Arc::ptr_eq(&got(Some("Y.B.example")), &k[1]),
        "wildcard, case-insensitive"
    );
    assert!(
        Arc::ptr_eq(&got(Some("z.y.b.example")), &k[0]),
        "a wildcard covers one label"
    );
    assert!(
        Arc::ptr_eq(&got(Some("other.example")), &k[0]),
        "no match: the first"
    );
    assert!(Arc::ptr_eq(&got(None), &k[0]), "no SNI: the first");
}

#[test]
fn the_key_type_follows_what_the_client_can_verify() {
    let (r, k) = resolver(
        vec![cert(&["a.example"], P256), cert(&["a.example"], ED25519)],
        false,
    );
    let pick = |schemes: &[SignatureScheme]| r.pick(Some("a.example"), schemes).unwrap();
    assert!(Arc::ptr_eq(&pick(&[SignatureScheme::ED25519]), &k[1]));
    assert!(Arc::ptr_eq(
        &pick(&[SignatureScheme::ECDSA_NISTP256_SHA256]),
        &k[0]
    ));
    assert!(
        Arc::ptr_eq(
            &pick(&[
                SignatureScheme::ED25519,
                SignatureScheme::ECDSA_NISTP256_SHA256
            ]),
            &k[0]
        ),
        "both: configuration order"
    );
}

#[test]
fn require_sni_refuses_a_hello_without_it() {
    let (r, _) = resolver(vec![cert(&["a.example"], P256)], true);
    assert!(r
        .pick(None, &[SignatureScheme::ECDSA_NISTP256_SHA256])
        .is_none());
    assert!(r
        .pick(Some("a.example"), &[SignatureScheme::ECDSA_NISTP256_SHA256])
        .is_some());
}

#[test]
fn a_reload_swaps_in_what_the_sources_hold_now_and_keeps_the_old_on_error() {
    use std::sync::Mutex;
    // The "files": what the next rebuild will read.
    let next: Arc<Mutex<Option<Vec<&'static str>>>> = Arc::new(Mutex::new(None));
    let source = Arc::clone(&next);
    let rebuild: RebuildTls = Arc::new(move || match source.lock().unwrap().clone() {
        Some(names) => Ok(spec(vec![cert(&names, P256)])),
        None => Err("cannot read cert.pem".into()),
    });
    let tls = DownstreamTls::build(spec(vec![cert(&["old.example"], P256)]))
        .unwrap()
        .with_source(vec!["cert.pem".into()], rebuild);
    let before = tls.state();
    assert_eq!(tls.reload(), Err("cannot read cert.pem".into()));
    assert!(
        Arc::ptr_eq(&before, &tls.state()),
        "a failed reload keeps the old"
    );
    *next.lock().unwrap() = Some(vec!["new.example"]);
    tls.reload().unwrap();
    assert_eq!(tls.state().names, vec![vec!["new.example".to_string()]]);
    assert_eq!(
        before.names,
        vec![vec!["old.example".to_string()]],
        "held states stay as they were"
    );
}

#[test]
fn a_context_knows_when_its_first_certificate_expires() {
    let dated = |year: i32| {
        let key = rcgen::KeyPair::generate_for(P256).expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["a.example".to_string()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let c = params.self_signed(&key).expect("cert");
        CertificateSpec {
            chain: vec![c.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    };
    // 2031-01-01 and 2041-01-01: the earlier one counts.
    let tls = DownstreamTls::build(spec(vec![dated(2041), dated(2031)])).unwrap();
    assert_eq!(
        tls.state().expiry,
        Expiry {
            cert: Some(1_924_992_000),
            ca: None
        }
    );
    assert_eq!(
        not_after(&rustls::pki_types::CertificateDer::from(vec![1, 2, 3])),
        None
    );
}
