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
        tls.state().unwrap().names,
        vec![vec!["a.example".to_string(), "*.b.example".to_string()]]
    );
    assert_eq!(tls.alpn, ["h2", "http/1.1"]);
    assert_eq!(
        tls.state().unwrap().config.alpn_protocols,
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
        tls.state().unwrap().names,
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
    assert_eq!(
        tls.state().unwrap().names,
        vec![vec!["cn.example".to_string()]]
    );
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
        .unwrap()
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

/// A context whose "files" are `next` (`None`: unreadable), naming the
/// ADS secrets `secrets` (their encoded bodies are the names of its
/// certificate).
fn sourced(
    next: &Arc<std::sync::Mutex<Option<Vec<&'static str>>>>,
    secrets: &[&str],
) -> DownstreamTls {
    let files = Arc::clone(next);
    let refs: Vec<SecretRef> = secrets
        .iter()
        .map(|n| SecretRef {
            name: n.to_string(),
            source: SecretSource::Ads,
        })
        .collect();
    let names = refs.clone();
    let rebuild: Rebuild<DownstreamTlsSpec> = Arc::new(move |view| {
        let mut dns: Vec<&str> = files
            .lock()
            .unwrap()
            .clone()
            .ok_or(RebuildError::Invalid("cannot read cert.pem".into()))?;
        for r in &names {
            let s = view.get(r).ok_or(RebuildError::Waiting(r.clone()))?;
            dns.push(if s.encoded == b"b" {
                "b.example"
            } else {
                "a.example"
            });
        }
        Ok(Rebuilt {
            spec: spec(vec![cert(&dns, P256)]),
            files: vec!["cert.pem".into()],
        })
    });
    DownstreamTls::from_source(
        TlsSource::new(refs, rebuild),
        vec!["h2".into()],
        TlsVersion::V1_2,
        TlsVersion::V1_3,
    )
}

fn secret(body: &[u8]) -> Arc<SdsSecret> {
    Arc::new(SdsSecret {
        version: "1".into(),
        encoded: body.to_vec(),
    })
}

#[test]
fn a_forced_reload_swaps_in_what_the_sources_hold_now_and_keeps_the_old_on_error() {
    let next = Arc::new(std::sync::Mutex::new(Some(vec!["old.example"])));
    let tls = sourced(&next, &[]);
    assert!(!tls.is_ready(), "pending until first read");
    assert_eq!(tls.resolve(&SecretView::empty(), false), Ok(true));
    let before = tls.state().unwrap();
    assert_eq!(tls.files(), [PathBuf::from("cert.pem")]);
    assert_eq!(
        tls.resolve(&SecretView::empty(), false),
        Ok(false),
        "nothing it names changed: not read again"
    );
    *next.lock().unwrap() = None;
    assert_eq!(
        tls.resolve(&SecretView::empty(), true),
        Err(RebuildError::Invalid("cannot read cert.pem".into()))
    );
    assert!(
        Arc::ptr_eq(&before, &tls.state().unwrap()),
        "a failed reload keeps the old"
    );
    *next.lock().unwrap() = Some(vec!["new.example"]);
    assert_eq!(tls.resolve(&SecretView::empty(), true), Ok(true));
    assert_eq!(
        tls.state().unwrap().names,
        vec![vec!["new.example".to_string()]]
    );
    assert_eq!(
        before.names,
        vec![vec!["old.example".to_string()]],
        "held states stay as they were"
    );
}

#[test]
fn a_context_naming_secrets_waits_for_them_and_is_read_again_only_when_one_changes() {
    let next = Arc::new(std::sync::Mutex::new(Some(vec![])));
    let tls = sourced(&next, &["cert"]);
    let statics = SecretMap::new();
    let mut ads = SecretMap::new();
    let waiting = tls.resolve(
        &SecretView {
            statics: &statics,
            ads: &ads,
        },
        false,
    );
    assert!(matches!(waiting, Err(RebuildError::Waiting(r)) if r.name == "cert"));
    assert!(!tls.is_ready());
    ads.insert("cert".into(), secret(b"a"));
    fn view<'a>(statics: &'a SecretMap, ads: &'a SecretMap) -> SecretView<'a> {
        SecretView { statics, ads }
    }
    assert_eq!(tls.resolve(&view(&statics, &ads), false), Ok(true));
    assert_eq!(
        tls.state().unwrap().names,
        vec![vec!["a.example".to_string()]]
    );
    assert_eq!(
        tls.resolve(&view(&statics, &ads), false),
        Ok(false),
        "same secret"
    );
    // The same bytes in a new `Arc` are a new secret (the client keeps
    // the `Arc` of one that did not change).
    ads.insert("cert".into(), secret(b"b"));
    let Step::Install(install) = tls.step(&view(&statics, &ads), false) else {
        panic!("a changed secret is read again");
    };
    assert_eq!(
        tls.state().unwrap().names,
        vec![vec!["a.example".to_string()]],
        "prepared, not yet installed"
    );
    install();
    assert_eq!(
        tls.state().unwrap().names,
        vec![vec!["b.example".to_string()]]
    );
    ads.clear();
    assert!(
        matches!(
            tls.resolve(&view(&statics, &ads), false),
            Err(RebuildError::Waiting(_))
        ),
        "a secret gone is waited for again"
    );
    assert!(tls.is_ready(), "and the last state keeps serving");
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
        tls.state().unwrap().expiry,
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
