//! A cluster's upstream protocol, connection reuse and TLS as an Envoy config sets them: what each form means and each refusal's exact path.

use engine::{Cluster, UpstreamProtocol};
use xds::bootstrap::{self, Format};

const OPTS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
const AT: &str = "static_resources.clusters[0]";

/// A bootstrap with one cluster `c` whose extra fields are `extra` (YAML
/// at the cluster's indentation).
fn load(extra: &str) -> Result<std::sync::Arc<Cluster>, String> {
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n{extra}    load_assignment:\n      cluster_name: c\n      endpoints:\n      - lb_endpoints:\n        - endpoint:\n            address:\n              socket_address: {{ address: 127.0.0.1, port_value: 8080 }}\n"
    );
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| b.clusters.into_iter().next().expect("one cluster"))
        .map_err(|e| e.to_string())
}

fn ok(extra: &str) -> std::sync::Arc<Cluster> {
    load(extra).unwrap_or_else(|e| panic!("{extra:?} refused: {e}"))
}

fn bad(extra: &str) -> String {
    match load(extra) {
        Ok(_) => panic!("{extra:?} was accepted"),
        Err(e) => e,
    }
}

fn typed(body: &str) -> String {
    format!(
        "    typed_extension_protocol_options:\n      {OPTS}:\n        \"@type\": type.googleapis.com/{OPTS}\n{body}"
    )
}

/// A self-signed certificate in a PEM file of its own (named by `tag`),
/// with its key in the same file; removed when dropped.
fn ca_file(tag: &str) -> PemFile {
    let made = rcgen::generate_simple_self_signed(vec!["backend.internal".into()]).expect("cert");
    let path =
        std::env::temp_dir().join(format!("gw-upstream-tls-{}-{tag}.pem", std::process::id()));
    let pem = format!("{}{}", made.cert.pem(), made.key_pair.serialize_pem());
    std::fs::write(&path, pem).expect("write");
    PemFile(path)
}

/// A test's PEM file; its `Display` is the path.
struct PemFile(std::path::PathBuf);

impl std::fmt::Display for PemFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.display().fmt(f)
    }
}

impl Drop for PemFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn tls(ctx: &str) -> String {
    format!(
        "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n{ctx}"
    )
}

#[test]
fn a_cluster_without_protocol_options_speaks_http1_as_in_envoy() {
    let c = ok("");
    assert_eq!(c.upstream.protocol, UpstreamProtocol::Http1);
    assert!(c.upstream.tls.is_none());
    assert_eq!(c.upstream.max_requests_per_connection, None);
    assert!(!c.upstream.http1_trailers);
}

#[test]
fn explicit_and_deprecated_forms_choose_the_protocol() {
    let h1 = ok(&typed(
        "        explicit_http_config:\n          http_protocol_options: { enable_trailers: true }\n",
    ));
    assert_eq!(h1.upstream.protocol, UpstreamProtocol::Http1);
    assert!(h1.upstream.http1_trailers);
    let h2 = ok(&typed(
        "        explicit_http_config:\n          http2_protocol_options: { max_concurrent_streams: 7 }\n",
    ));
    assert_eq!(h2.upstream.protocol, UpstreamProtocol::Http2);
    assert_eq!(h2.http2.max_concurrent_streams, 7);
    assert_eq!(
        ok("    http2_protocol_options: {}\n").upstream.protocol,
        UpstreamProtocol::Http2
    );
    let old_h1 = ok("    http_protocol_options: { enable_trailers: true }\n");
    assert_eq!(old_h1.upstream.protocol, UpstreamProtocol::Http1);
    assert!(old_h1.upstream.http1_trailers);
    assert_eq!(
        bad("    http_protocol_options: {}\n    http2_protocol_options: {}\n"),
        format!("{AT}.http_protocol_options: cannot be combined with http2_protocol_options")
    );
    assert_eq!(
        bad(&format!(
            "    http2_protocol_options: {{}}\n{}",
            typed("        explicit_http_config:\n          http2_protocol_options: {}\n")
        )),
        format!(
            "{AT}.http2_protocol_options: cannot be combined with \
             typed_extension_protocol_options[\"{OPTS}\"]"
        )
    );
}

#[test]
fn fields_that_serve_clients_are_refused_on_an_upstream_by_name() {
    assert_eq!(
        bad(&typed(
            "        explicit_http_config:\n          http_protocol_options: { accept_http_10: true }\n"
        )),
        format!(
            "{AT}.typed_extension_protocol_options[\"{OPTS}\"].explicit_http_config.\
             http_protocol_options.accept_http_10: not supported"
        )
    );
    assert_eq!(
        bad(&typed(
            "        common_http_protocol_options: { max_connection_duration: 5s }\n        explicit_http_config:\n          http2_protocol_options: {}\n"
        )),
        format!(
            "{AT}.typed_extension_protocol_options[\"{OPTS}\"].common_http_protocol_options.\
             max_connection_duration: not supported"
        )
    );
    assert_eq!(
        bad("    protocol_selection: USE_DOWNSTREAM_PROTOCOL\n"),
        format!("{AT}.protocol_selection: USE_DOWNSTREAM_PROTOCOL is not supported")
    );
}

#[test]
fn idle_timeout_defaults_to_an_hour_and_zero_turns_it_off() {
    use std::time::Duration;
    assert_eq!(
        ok("").upstream.idle_timeout,
        Some(Duration::from_secs(3600))
    );
    let h2 = "        explicit_http_config:\n          http2_protocol_options: {}\n";
    let with = |t: &str| {
        ok(&typed(&format!(
            "        common_http_protocol_options: {{ idle_timeout: {t} }}\n{h2}"
        )))
        .upstream
        .idle_timeout
    };
    assert_eq!(with("2.5s"), Some(Duration::from_millis(2500)));
    assert_eq!(with("0s"), None);
    assert_eq!(
        ok("    common_http_protocol_options: { idle_timeout: 30s }\n")
            .upstream
            .idle_timeout,
        Some(Duration::from_secs(30))
    );
}

#[test]
fn max_requests_per_connection_comes_from_either_place_but_not_both() {
    let c = ok(&typed(
        "        common_http_protocol_options: { max_requests_per_connection: 3 }\n        explicit_http_config:\n          http_protocol_options: {}\n",
    ));
    assert_eq!(c.upstream.max_requests_per_connection, Some(3));
    assert_eq!(
        ok("    max_requests_per_connection: 5\n")
            .upstream
            .max_requests_per_connection,
        Some(5)
    );
    // Envoy: 0 is no limit.
    assert_eq!(
        ok("    max_requests_per_connection: 0\n")
            .upstream
            .max_requests_per_connection,
        None
    );
    assert_eq!(
        bad("    max_requests_per_connection: 5\n    common_http_protocol_options: { max_requests_per_connection: 3 }\n"),
        format!(
            "{AT}.max_requests_per_connection: cannot be combined with \
             common_http_protocol_options.max_requests_per_connection"
        )
    );
}

#[test]
fn auto_config_needs_tls_and_offers_both_protocols_by_alpn() {
    let auto = typed("        auto_config: {}\n");
    assert_eq!(
        bad(&auto),
        format!(
            "{AT}.transport_socket: auto_config chooses the protocol by ALPN, which needs a \
             TLS transport socket"
        )
    );
    let c = ok(&format!("{auto}{}", tls("        sni: backend.internal\n")));
    assert_eq!(c.upstream.protocol, UpstreamProtocol::Auto);
    let t = c.upstream.tls.as_ref().expect("tls");
    assert_eq!(t.alpn, ["h2", "http/1.1"]);
    assert_eq!(t.sni.as_deref(), Some("backend.internal"));
    assert!(!t.verifies);
}

#[test]
fn alpn_defaults_to_the_cluster_s_protocol_unless_set() {
    let h1 = ok(&tls(""));
    assert_eq!(h1.upstream.tls.as_ref().expect("tls").alpn, ["http/1.1"]);
    let h2 = ok(&format!("    http2_protocol_options: {{}}\n{}", tls("")));
    assert_eq!(h2.upstream.tls.as_ref().expect("tls").alpn, ["h2"]);
    let set = ok(&tls(
        "        common_tls_context:\n          alpn_protocols: [custom]\n",
    ));
    assert_eq!(set.upstream.tls.as_ref().expect("tls").alpn, ["custom"]);
}

#[test]
fn trusted_ca_turns_verification_on() {
    let ca = ca_file("trusted");
    let c = ok(&tls(&format!(
        "        common_tls_context:\n          validation_context:\n            trusted_ca: {{ filename: {ca} }}\n"
    )));
    assert!(c.upstream.tls.as_ref().expect("tls").verifies);
}

#[test]
fn what_upstream_tls_cannot_do_is_refused_by_name() {
    const CTX: &str = "transport_socket.typed_config";
    assert_eq!(
        bad(&tls("        auto_host_sni: true\n")),
        format!("{AT}.{CTX}.auto_host_sni: not supported")
    );
    assert_eq!(
        bad(&tls(
            "        common_tls_context:\n          key_log: { path: /tmp/keys }\n"
        )),
        format!("{AT}.{CTX}.common_tls_context.key_log: not supported")
    );
    assert_eq!(
        bad(&tls(
            "        common_tls_context:\n          tls_params: { tls_minimum_protocol_version: TLSv1_0 }\n"
        )),
        format!(
            "{AT}.{CTX}.common_tls_context.tls_params.tls_minimum_protocol_version: \
             TLSv1_0 is not supported: TLS 1.2 and 1.3 only (rustls)"
        )
    );
    assert_eq!(
        bad(&tls(
            "        common_tls_context:\n          validation_context:\n            trusted_ca: { filename: /nonexistent/ca.pem }\n"
        ))
        .split(": cannot read")
        .next()
        .expect("message"),
        format!("{AT}.{CTX}.common_tls_context.validation_context.trusted_ca.filename")
    );
    let ca = ca_file("two");
    let two = format!(
        "        common_tls_context:\n          tls_certificates:\n          - {{ certificate_chain: {{ filename: {ca} }}, private_key: {{ filename: {ca} }} }}\n          - {{ certificate_chain: {{ filename: {ca} }}, private_key: {{ filename: {ca} }} }}\n"
    );
    assert_eq!(
        bad(&tls(&two)),
        format!(
            "{AT}.{CTX}.common_tls_context.tls_certificates: an upstream context takes at most \
             one certificate (inline or from SDS)"
        )
    );
    assert_eq!(
        bad("    transport_socket:\n      name: envoy.transport_sockets.raw_buffer\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext\n"),
        format!(
            "{AT}.transport_socket.typed_config: transport socket \
             \"envoy.transport_sockets.raw_buffer\" is not supported; only \
             envoy.transport_sockets.tls (type.googleapis.com/envoy.extensions.\
             transport_sockets.tls.v3.UpstreamTlsContext) is"
        )
    );
}

#[test]
fn subject_alt_name_matchers_are_taken_and_other_names_refused() {
    let ca = ca_file("san");
    let vc = |matchers: &str| {
        tls(&format!(
            "        common_tls_context:\n          validation_context:\n            trusted_ca: {{ filename: {ca} }}\n            match_typed_subject_alt_names:\n{matchers}"
        ))
    };
    ok(&vc("            - { san_type: URI, matcher: { prefix: \"spiffe://cluster.local/\" } }\n            - { san_type: DNS, matcher: { exact: api.example, ignore_case: true } }\n"));
    const VC: &str =
        "transport_socket.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names";
    assert_eq!(
        bad(&vc(
            "            - { san_type: OTHER_NAME, matcher: { exact: x }, oid: \"1.2.3\" }\n"
        )),
        format!("{AT}.{VC}[0].san_type: OTHER_NAME is not supported")
    );
    assert_eq!(
        bad(&vc("            - { matcher: { exact: x } }\n")),
        format!("{AT}.{VC}[0].san_type: one of DNS, URI, EMAIL or IP_ADDRESS is required")
    );
    assert_eq!(
        bad(&vc("            - { san_type: DNS }\n")),
        format!("{AT}.{VC}[0].matcher: required")
    );
}

/// `envoy.transport_sockets.upstream_proxy_protocol` around `inner` (flow
/// style) with `config` fields.
fn proxied(config: &str, inner: &str) -> String {
    format!(
        "    transport_socket:\n      name: envoy.transport_sockets.upstream_proxy_protocol\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport\n        config: {{ {config} }}\n{inner}"
    )
}

#[test]
fn the_upstream_proxy_protocol_socket_wraps_plaintext_or_tls() {
    let raw = "        transport_socket: { name: envoy.transport_sockets.raw_buffer }\n";
    let c = ok(&proxied(
        "version: V2, added_tlvs: [ { type: 0xE1, value: YQ== } ]",
        raw,
    ));
    let p = c.upstream.proxy_protocol.as_ref().expect("proxy protocol");
    assert!(p.v2);
    assert_eq!(p.added_tlvs, [(0xE1, b"a".to_vec())]);
    assert!(c.upstream.tls.is_none());
    let ca = ca_file("proxied");
    let inner = format!(
        "        transport_socket:\n          name: envoy.transport_sockets.tls\n          typed_config:\n            \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n            common_tls_context: {{ validation_context: {{ trusted_ca: {{ filename: {ca} }} }} }}\n"
    );
    let c = ok(&proxied("version: V1", &inner));
    assert!(!c.upstream.proxy_protocol.as_ref().expect("pp").v2);
    assert!(c.upstream.tls.is_some(), "TLS under the header");
    let at = format!("{AT}.transport_socket.typed_config");
    assert_eq!(
        bad(&proxied("version: V1", "")),
        format!("{at}.transport_socket: required (the socket under the PROXY header: raw_buffer or tls)")
    );
    assert_eq!(
        bad(&proxied("version: V1, added_tlvs: [ { type: 1, value: YQ== } ]", raw)),
        format!("{at}.config: TLVs (added_tlvs, pass_through_tlvs) need version V2: a v1 header has none")
    );
    assert_eq!(
        bad(&format!(
            "{}        tlv_as_pool_key: true\n",
            proxied("version: V2", raw)
        )),
        format!("{at}.tlv_as_pool_key: not supported")
    );
    assert_eq!(
        bad(&proxied(
            "version: V2, added_tlvs: [ { type: 300, value: YQ== } ]",
            raw
        )),
        format!("{at}.config.added_tlvs[0].type: 300 is not a TLV type (0-255)")
    );
}
