//! The good bootstrap that the bootstrap tests edit, and loading it: shared
//! by `bootstrap.rs` and `bootstrap_listener.rs`.
#![allow(dead_code)] // each test file uses some of these

use xds::bootstrap::{self, Format};

pub const GOOD: &str = include_str!("../data/bootstrap.yaml");
/// Where the good config's connection manager sits: errors inside it start
/// with this path.
pub const HCM: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";

pub fn load(yaml: &str) -> Result<engine::Bootstrap, String> {
    bootstrap::from_str(yaml, Format::Yaml).map_err(|e| e.to_string())
}

/// The good config with `from` (which must occur exactly once) replaced.
pub fn edit(from: &str, to: &str) -> String {
    assert_eq!(
        GOOD.matches(from).count(),
        1,
        "{from:?} must occur once in the good config"
    );
    GOOD.replace(from, to)
}

/// The error the good config with `from` replaced by `to` is refused with.
pub fn bad(from: &str, to: &str) -> String {
    match load(&edit(from, to)) {
        Ok(_) => panic!("config with {to:?} was accepted"),
        Err(e) => e,
    }
}

/// A self-signed certificate for `names` and its key, PEM.
pub fn pem_pair(names: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("params")
            .self_signed(&key)
            .expect("cert");
    (cert.pem(), key.serialize_pem())
}
