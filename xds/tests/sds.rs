//! SDS in a bootstrap: listeners' certificates, validation contexts and
//! ticket keys from `static_resources.secrets`, from an SDS file, or over
//! ADS (pending until they come); each refusal naming the secret.

mod support;

use engine::tls::{DownstreamTls, RebuildError, Reloadable, SecretView};
use support::{edit, pem_pair, GOOD};

/// A `tls_certificate` secret, as JSON (YAML's flow style takes it).
fn cert_secret(name: &str, dns: &str) -> String {
    let (cert, key) = pem_pair(&[dns]);
    format!(
        r#"{{"name": "{name}", "tls_certificate": {{"certificate_chain": {{"inline_string": {}}}, "private_key": {{"inline_string": {}}}}}}}"#,
        serde_json::to_string(&cert).unwrap(),
        serde_json::to_string(&key).unwrap()
    )
}

/// The good bootstrap with `secrets`, `dynamic` resources, and a TLS
/// listener whose `DownstreamTlsContext` is `ctx` (JSON).
fn bootstrap(secrets: &[String], ctx: &str, dynamic: &str) -> String {
    let chain = format!(
        "    filter_chains:\n    - transport_socket:\n        name: envoy.transport_sockets.tls\n        typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, {ctx}}}\n      filters:\n"
    );
    let yaml = edit("    filter_chains:\n    - filters:\n", &chain);
    let yaml = yaml.replacen(
        "static_resources:\n",
        &format!("static_resources:\n  secrets: [{}]\n", secrets.join(", ")),
        1,
    );
    assert_ne!(yaml, GOOD);
    format!("{yaml}{dynamic}")
}

fn load(yaml: &str) -> Result<engine::Bootstrap, String> {
    support::load(yaml)
}

fn tls(b: &engine::Bootstrap) -> &DownstreamTls {
    b.listeners[0].filter_chains[0].tls.as_deref().expect("tls")
}

fn names(t: &DownstreamTls) -> Vec<Vec<String>> {
    t.state().expect("ready").names.clone()
}

const ADS: &str = "dynamic_resources:\n  ads_config:\n    api_type: GRPC\n    transport_api_version: V3\n    grpc_services: [{envoy_grpc: {cluster_name: users}}]\n";

#[test]
fn static_secrets_serve_certificates_validation_and_ticket_keys() {
    let (ca, _) = pem_pair(&["ca.example"]);
    let validation = format!(
        r#"{{"name": "ca", "validation_context": {{"trusted_ca": {{"inline_string": {}}}}}}}"#,
        serde_json::to_string(&ca).unwrap()
    );
    let key = "A".repeat(80);
    let tickets = format!(
        r#"{{"name": "tickets", "session_ticket_keys": {{"keys": [{{"inline_string": "{key}"}}]}}}}"#
    );
    let yaml = bootstrap(
        &[
            cert_secret("server", "a.example"),
            cert_secret("other", "b.example"),
            validation,
            tickets,
        ],
        r#"require_client_certificate: true, common_tls_context: {tls_certificate_sds_secret_configs: [{name: server}, {name: other}], validation_context_sds_secret_config: {name: ca}}, session_ticket_keys_sds_secret_config: {name: tickets}"#,
        "",
    );
    let b = load(&yaml).unwrap();
    let t = tls(&b);
    assert_eq!(
        names(t),
        [vec!["a.example".to_string()], vec!["b.example".to_string()]]
    );
    assert_eq!(t.secrets().len(), 4);
    assert_eq!(b.secrets.len(), 4);
}

#[test]
fn combined_validation_merges_the_secret_into_the_default() {
    let (ca, _) = pem_pair(&["ca.example"]);
    let validation = format!(
        r#"{{"name": "ca", "validation_context": {{"trusted_ca": {{"inline_string": {}}}}}}}"#,
        serde_json::to_string(&ca).unwrap()
    );
    let ctx = |default: &str| {
        format!(
            r#"require_client_certificate: true, common_tls_context: {{tls_certificate_sds_secret_configs: [{{name: server}}], combined_validation_context: {{default_validation_context: {default}, validation_context_sds_secret_config: {{name: ca}}}}}}"#
        )
    };
    let secrets = [cert_secret("server", "a.example"), validation];
    let good = bootstrap(
        &secrets,
        &ctx(
            r#"{match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: client.example}}]}"#,
        ),
        "",
    );
    assert!(tls(&load(&good).unwrap()).is_ready());
    // What the default asks for and we refuse is refused after the merge.
    let bad = bootstrap(&secrets, &ctx("{max_verify_depth: 3}"), "");
    let e = load(&bad).unwrap_err();
    assert!(
        e.contains("combined_validation_context.max_verify_depth: not supported"),
        "{e}"
    );
}

#[test]
fn static_secret_refusals_name_the_secret() {
    let ctx = r#"common_tls_context: {tls_certificate_sds_secret_configs: [{name: server}]}"#;
    let e = load(&bootstrap(&[], ctx, "")).unwrap_err();
    assert!(
        e.contains("static secret \"server\" is not in static_resources.secrets"),
        "{e}"
    );
    let ca = r#"{"name": "server", "validation_context": {"trusted_ca": {"inline_string": "x"}}}"#;
    let e = load(&bootstrap(&[ca.to_string()], ctx, "")).unwrap_err();
    assert!(
        e.contains("holds validation_context; a tls_certificate is needed here"),
        "{e}"
    );
    let bad_pem = r#"{"name": "server", "tls_certificate": {"certificate_chain": {"inline_string": "x"}, "private_key": {"inline_string": "y"}}}"#;
    let e = load(&bootstrap(&[bad_pem.to_string()], ctx, "")).unwrap_err();
    assert!(
        e.contains("secrets[server].tls_certificate.certificate_chain"),
        "{e}"
    );
    let twice = [
        cert_secret("server", "a.example"),
        cert_secret("server", "b.example"),
    ];
    let e = load(&bootstrap(&twice, ctx, "")).unwrap_err();
    assert!(e.contains("duplicate secret name \"server\""), "{e}");
    let generic = r#"{"name": "server", "generic_secret": {}}"#;
    let e = load(&bootstrap(&[generic.to_string()], ctx, "")).unwrap_err();
    assert!(
        e.contains("static_resources.secrets[0].generic_secret: not supported"),
        "{e}"
    );
    let unnamed = r#"{"tls_certificate": {}}"#;
    let e = load(&bootstrap(&[unnamed.to_string()], ctx, "")).unwrap_err();
    assert!(
        e.contains("static_resources.secrets[0].name: required"),
        "{e}"
    );
    let no_name =
        r#"common_tls_context: {tls_certificate_sds_secret_configs: [{sds_config: {ads: {}}}]}"#;
    let e = load(&bootstrap(&[], no_name, ADS)).unwrap_err();
    assert!(
        e.contains("tls_certificate_sds_secret_configs[0].name: required"),
        "{e}"
    );
}

#[test]
fn ads_secrets_leave_the_context_pending_and_need_ads() {
    let ctx = r#"common_tls_context: {tls_certificate_sds_secret_configs: [{name: server, sds_config: {ads: {}}}]}"#;
    let e = load(&bootstrap(&[], ctx, "")).unwrap_err();
    assert!(
        e.contains("sds_config `ads` needs dynamic_resources.ads_config"),
        "{e}"
    );
    let b = load(&bootstrap(&[], ctx, ADS)).unwrap();
    let t = tls(&b);
    assert!(!t.is_ready(), "waits for its secret");
    assert_eq!(t.secrets()[0].name, "server");
    let e = load(&bootstrap(
        &[],
        r#"common_tls_context: {tls_certificate_sds_secret_configs: [{name: server, sds_config: {api_config_source: {api_type: GRPC}}}]}"#,
        ADS,
    ))
    .unwrap_err();
    assert!(e.contains("sds_config.api_config_source"), "{e}");
}

#[test]
fn file_secrets_are_read_checked_and_read_again() {
    let dir = std::env::temp_dir().join(format!("gw-sds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sds.json");
    let (cert, key) = pem_pair(&["file.example"]);
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.join("key.pem"), &key).unwrap();
    let by_files = |name: &str| {
        format!(
            r#"{{"resources": [{{"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "{name}", "tls_certificate": {{"certificate_chain": {{"filename": "{}"}}, "private_key": {{"filename": "{}"}}, "watched_directory": {{"path": "{}"}}}}}}]}}"#,
            dir.join("cert.pem").display(),
            dir.join("key.pem").display(),
            dir.display()
        )
    };
    std::fs::write(&file, by_files("server")).unwrap();
    let ctx = format!(
        r#"common_tls_context: {{tls_certificate_sds_secret_configs: [{{name: server, sds_config: {{path_config_source: {{path: "{}", watched_directory: {{path: "{}"}}}}}}}}]}}"#,
        file.display(),
        dir.display()
    );
    let b = load(&bootstrap(&[], &ctx, "")).unwrap();
    let t = tls(&b);
    assert_eq!(names(t), [vec!["file.example".to_string()]]);
    assert_eq!(
        t.files(),
        [file.clone(), dir.join("cert.pem"), dir.join("key.pem")],
        "the SDS file and the files its secret names are watched"
    );
    // Rotation: new files, read again when told (the watcher's job).
    let (cert, key) = pem_pair(&["rotated.example"]);
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    std::fs::write(dir.join("key.pem"), &key).unwrap();
    assert_eq!(t.resolve(&SecretView::empty(), true), Ok(true));
    assert_eq!(names(t), [vec!["rotated.example".to_string()]]);
    // A file naming another secret keeps the current one.
    std::fs::write(&file, by_files("other")).unwrap();
    let Err(RebuildError::Invalid(e)) = t.resolve(&SecretView::empty(), true) else {
        panic!("a wrong name is an error");
    };
    assert!(e.contains("holds secret \"other\", not \"server\""), "{e}");
    assert_eq!(names(t), [vec!["rotated.example".to_string()]]);
    // At load, the same is a config error.
    let e = load(&bootstrap(&[], &ctx, "")).unwrap_err();
    assert!(e.contains("holds secret \"other\""), "{e}");
    std::fs::write(&file, r#"{"resources": []}"#).unwrap();
    let e = load(&bootstrap(&[], &ctx, "")).unwrap_err();
    assert!(
        e.contains("holds 0 resources; exactly one secret is expected"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The good bootstrap whose cluster `users` has an `UpstreamTlsContext`
/// `ctx` (JSON), with `secrets` and `dynamic` resources.
fn cluster_bootstrap(secrets: &[String], ctx: &str, dynamic: &str) -> String {
    let yaml = edit(
        "  - name: users\n    connect_timeout: 0.25s\n",
        &format!(
            "  - name: users\n    connect_timeout: 0.25s\n    transport_socket: {{name: envoy.transport_sockets.tls, typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, {ctx}}}}}\n"
        ),
    );
    let yaml = yaml.replacen(
        "static_resources:\n",
        &format!("static_resources:\n  secrets: [{}]\n", secrets.join(", ")),
        1,
    );
    format!("{yaml}{dynamic}")
}

fn upstream(b: &engine::Bootstrap) -> &engine::tls::UpstreamTls {
    let users = b
        .clusters
        .iter()
        .find(|c| c.name == "users")
        .expect("users");
    users.upstream.tls.as_deref().expect("tls")
}

#[test]
fn upstream_client_certificates_and_validation_come_from_secrets() {
    let (ca, _) = pem_pair(&["backend.example"]);
    let validation = format!(
        r#"{{"name": "ca", "validation_context": {{"trusted_ca": {{"inline_string": {}}}}}}}"#,
        serde_json::to_string(&ca).unwrap()
    );
    let ctx = r#"sni: backend.example, common_tls_context: {tls_certificate_sds_secret_configs: [{name: client}], validation_context_sds_secret_config: {name: ca}}"#;
    let b = load(&cluster_bootstrap(
        &[cert_secret("client", "client.example"), validation.clone()],
        ctx,
        "",
    ))
    .unwrap();
    let t = upstream(&b);
    assert!(t.is_ready());
    assert!(
        t.verifies,
        "a validation context from SDS checks the server"
    );
    assert_eq!(t.secrets().len(), 2);
    assert!(t.client_config().is_some());

    // Two certificates, inline and from SDS, are one too many upstream.
    let (cert, key) = pem_pair(&["inline.example"]);
    let two = format!(
        r#"common_tls_context: {{tls_certificates: [{{certificate_chain: {{inline_string: {}}}, private_key: {{inline_string: {}}}}}], tls_certificate_sds_secret_configs: [{{name: client}}]}}"#,
        serde_json::to_string(&cert).unwrap(),
        serde_json::to_string(&key).unwrap()
    );
    let e = load(&cluster_bootstrap(
        &[cert_secret("client", "client.example")],
        &two,
        "",
    ))
    .unwrap_err();
    assert!(
        e.contains("takes at most one certificate (inline or from SDS)"),
        "{e}"
    );

    // Over ADS: pending (the cluster warms); not for the ADS cluster itself.
    let ads_ctx = r#"common_tls_context: {validation_context_sds_secret_config: {name: ca, sds_config: {ads: {}}}}"#;
    let over_canary = ADS.replace("cluster_name: users", "cluster_name: canary");
    let b = load(&cluster_bootstrap(&[], ads_ctx, &over_canary)).unwrap();
    assert!(!upstream(&b).is_ready());
    assert!(upstream(&b).verifies);
    let e = load(&cluster_bootstrap(&[], ads_ctx, ADS)).unwrap_err();
    assert!(
        e.contains("the ADS cluster's TLS cannot come over ADS"),
        "{e}"
    );
}
