//! A bootstrap's listener beyond its routes: the connection manager's
//! `x-forwarded-for` handling and limits, downstream TLS on its filter
//! chain, and access logs; each refusal with its exact message.

mod support;

use std::time::Duration;

use support::{bad, edit, load, pem_pair, HCM};

#[test]
fn forwarded_for_follows_use_remote_address() {
    let hcm = |yaml: &str| {
        load(yaml).unwrap().listeners[0].filter_chains[0]
            .http
            .clone()
    };
    let base = edit("codec_type: HTTP2\n", "codec_type: HTTP2\n");
    assert!(
        !hcm(&base).trust.appends_forwarded_for(),
        "Envoy's default: XFF untouched"
    );
    assert!(
        !hcm(&base).trust.overwrites_forwarded_proto(),
        "set only when absent"
    );
    assert!(hcm(&base).envoy_headers);
    let suppressed = edit(
        "\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n",
        "\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n              suppress_envoy_headers: true\n",
    );
    assert!(!hcm(&suppressed).envoy_headers);
    let on = edit(
        "          codec_type: HTTP2\n",
        "          codec_type: HTTP2\n          use_remote_address: true\n          generate_request_id: false\n",
    );
    assert!(hcm(&on).trust.appends_forwarded_for());
    assert!(hcm(&on).trust.overwrites_forwarded_proto());
    let skip = edit(
        "          codec_type: HTTP2\n",
        "          codec_type: HTTP2\n          use_remote_address: true\n          skip_xff_append: true\n",
    );
    assert!(!hcm(&skip).trust.appends_forwarded_for());
}

/// The connection manager's header settings: Envoy's defaults, each
/// field taken, and the refusals naming their field.
#[test]
fn header_settings_take_envoy_defaults_and_fields() {
    use engine::path::EscapedSlashes;
    use engine::{InternalAddresses, ServerHeaderTransformation, StripHostPort};
    let hcm = |extra: &str| {
        let yaml = edit(
            "          codec_type: HTTP2\n",
            &format!("          codec_type: HTTP2\n{extra}"),
        );
        load(&yaml).map(|b| b.listeners[0].filter_chains[0].http.clone())
    };
    let base = hcm("").unwrap();
    assert!(base.request_id.generate, "Envoy generates x-request-id");
    assert!(!base.request_id.preserve_external && !base.request_id.in_response);
    assert_eq!(base.server_header.name, "envoy");
    assert_eq!(
        base.server_header.transformation,
        ServerHeaderTransformation::Overwrite
    );
    assert_eq!(base.via, None);
    assert_eq!(base.trust.internal, InternalAddresses::None);
    assert!(!base.path_normalization.is_active());
    assert_eq!(base.strip_host_port, StripHostPort::None);

    let all = hcm(concat!(
        "          use_remote_address: true\n",
        "          xff_num_trusted_hops: 2\n",
        "          internal_address_config: { cidr_ranges: [ { address_prefix: 10.0.0.0, prefix_len: 8 } ] }\n",
        "          generate_request_id: false\n",
        "          preserve_external_request_id: true\n",
        "          always_set_request_id_in_response: true\n",
        "          via: edge-1\n",
        "          server_name: edge\n",
        "          server_header_transformation: APPEND_IF_ABSENT\n",
        "          normalize_path: true\n",
        "          merge_slashes: true\n",
        "          path_with_escaped_slashes_action: UNESCAPE_AND_REDIRECT\n",
        "          strip_any_host_port: true\n",
    ))
    .unwrap();
    assert!(all.trust.use_remote_address && all.trust.xff_num_trusted_hops == 2);
    assert!(all.trust.internal.contains("10.1.2.3".parse().unwrap()));
    assert!(!all.trust.internal.contains("127.0.0.1".parse().unwrap()));
    assert!(
        !all.trust.overwrites_forwarded_proto(),
        "a trusted hop sets it"
    );
    assert!(!all.request_id.generate && all.request_id.preserve_external);
    assert!(all.request_id.in_response);
    assert_eq!(all.via.as_deref(), Some("edge-1"));
    assert_eq!(all.server_header.name, "edge");
    assert_eq!(
        all.server_header.transformation,
        ServerHeaderTransformation::AppendIfAbsent
    );
    assert!(all.path_normalization.normalize && all.path_normalization.merge_slashes);
    assert_eq!(
        all.path_normalization.escaped_slashes,
        EscapedSlashes::Redirect
    );
    assert_eq!(all.strip_host_port, StripHostPort::Any);
    let legacy = hcm("          internal_address_config: {}\n").unwrap();
    assert_eq!(legacy.trust.internal, InternalAddresses::Legacy);
    let xff = hcm(concat!(
        "          original_ip_detection_extensions:\n",
        "          - name: envoy.extensions.http.original_ip_detection.xff\n",
        "            typed_config:\n",
        "              \"@type\": type.googleapis.com/envoy.extensions.http.original_ip_detection.xff.v3.XffConfig\n",
        "              xff_num_trusted_hops: 1\n",
    ))
    .unwrap();
    assert_eq!(xff.trust.xff_num_trusted_hops, 1);
    assert!(!xff.trust.use_remote_address);

    for (extra, want) in [
        (
            "          strip_matching_host_port: true\n          strip_any_host_port: true\n",
            "strip_matching_host_port: may not be combined with strip_any_host_port",
        ),
        (
            "          via: \"a\\nb\"\n",
            "via: \"a\\nb\" is not a valid header value",
        ),
        (
            "          use_remote_address: true\n          original_ip_detection_extensions: [ { name: x, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.http.original_ip_detection.xff.v3.XffConfig } } ]\n",
            "original_ip_detection_extensions: may not be combined with use_remote_address",
        ),
        (
            "          internal_address_config: { cidr_ranges: [ { address_prefix: nope } ] }\n",
            "internal_address_config.cidr_ranges[0].address_prefix: malformed IP address",
        ),
        (
            "          request_id_extension: {}\n",
            "request_id_extension",
        ),
    ] {
        let err = hcm(extra).expect_err(extra).to_string();
        assert!(err.contains(want), "{err}\nwanted {want:?}");
    }
}

#[test]
fn buffer_limit_and_max_stream_duration() {
    let b = load(&edit(
        "            idle_timeout: 0s\n",
        "            idle_timeout: 0s\n            max_stream_duration: 90s\n",
    ));
    let b = b.unwrap();
    assert_eq!(
        b.listeners[0].filter_chains[0].http.max_stream_duration,
        Some(Duration::from_secs(90))
    );
    assert_eq!(b.listeners[0].per_connection_buffer_limit_bytes, 1 << 20);
    let b = load(&edit(
        "  - name: ingress\n",
        "  - name: ingress\n    per_connection_buffer_limit_bytes: 32768\n",
    ))
    .unwrap();
    assert_eq!(b.listeners[0].per_connection_buffer_limit_bytes, 32768);
    assert_eq!(
        b.listeners[0].filter_chains[0].http.max_stream_duration,
        None
    );
    assert_eq!(
        b.listeners[0].filter_chains[0].http.request_headers_timeout,
        None
    );
    let b = load(&edit(
        "          stream_idle_timeout: 60s\n",
        "          stream_idle_timeout: 60s\n          request_headers_timeout: 2.5s\n",
    ))
    .unwrap();
    assert_eq!(
        b.listeners[0].filter_chains[0].http.request_headers_timeout,
        Some(Duration::from_millis(2500))
    );
    assert_eq!(
        bad(
            "  - name: ingress\n",
            "  - name: ingress\n    per_connection_buffer_limit_bytes: 0\n"
        ),
        "static_resources.listeners[0].per_connection_buffer_limit_bytes: must be at least 1"
    );
}

/// The good config with a TLS transport socket on its filter chain, `ctx`
/// being the `DownstreamTlsContext`'s YAML body (indented 10 spaces).
fn with_tls(ctx: &str) -> String {
    edit(
        "    filter_chains:\n    - filters:\n",
        &format!(
            "    filter_chains:\n    - transport_socket:\n        name: envoy.transport_sockets.tls\n        typed_config:\n          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext\n{ctx}      filters:\n"
        ),
    )
}

fn block(pem: &str, indent: usize) -> String {
    pem.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(indent)))
        .collect()
}

#[test]
fn downstream_tls_from_files_and_inline() {
    let dir = std::env::temp_dir().join(format!("gw-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_a, key_a) = pem_pair(&["a.example"]);
    let (cert_b, key_b) = pem_pair(&["*.b.example"]);
    std::fs::write(dir.join("a.pem"), &cert_a).unwrap();
    std::fs::write(dir.join("a.key"), &key_a).unwrap();
    let ctx = format!(
        "          common_tls_context:\n            alpn_protocols: [h2, http/1.1]\n            tls_params:\n              tls_minimum_protocol_version: TLSv1_2\n              cipher_suites: [\"[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]\", ECDHE-RSA-AES128-GCM-SHA256]\n              ecdh_curves: [X25519, P-256]\n            tls_certificates:\n            - certificate_chain: {{filename: {}}}\n              private_key: {{filename: {}}}\n            - certificate_chain:\n                inline_string: |\n{}              private_key:\n                inline_string: |\n{}",
        dir.join("a.pem").display(),
        dir.join("a.key").display(),
        block(&cert_b, 18),
        block(&key_b, 18),
    );
    let boot = load(&with_tls(&ctx)).expect("valid");
    let tls = boot.listeners[0].filter_chains[0]
        .tls
        .as_ref()
        .expect("tls");
    assert_eq!(
        tls.state().expect("built").names,
        vec![
            vec!["a.example".to_string()],
            vec!["*.b.example".to_string()]
        ]
    );
    assert_eq!(
        engine::tls::Reloadable::files(tls.as_ref()),
        [dir.join("a.pem"), dir.join("a.key")]
    );
    assert_eq!(tls.alpn, ["h2", "http/1.1"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn session_ticket_keys_are_80_bytes_each() {
    let (cert, key) = pem_pair(&["a.example"]);
    let certs = format!(
        "          common_tls_context:\n            tls_certificates:\n            - certificate_chain:\n                inline_string: |\n{}              private_key:\n                inline_string: |\n{}",
        block(&cert, 18),
        block(&key, 18)
    );
    let keys = |k: &str| {
        load(&with_tls(&format!(
            "          session_ticket_keys:\n            keys:\n            - inline_string: \"{}\"\n            - inline_string: \"{k}\"\n{certs}",
            "a".repeat(80)
        )))
    };
    assert!(keys(&"b".repeat(80)).is_ok());
    let tls_path = "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config";
    assert_eq!(
        keys("short").unwrap_err(),
        format!(
            "{tls_path}.session_ticket_keys.keys[1]: 5 bytes; a key is 80 bytes (Envoy's format)"
        )
    );
}

#[test]
fn downstream_tls_refusals_name_their_field() {
    let (cert, key) = pem_pair(&["a.example"]);
    let certs = format!(
        "            tls_certificates:\n            - certificate_chain:\n                inline_string: |\n{}              private_key:\n                inline_string: |\n{}",
        block(&cert, 18),
        block(&key, 18)
    );
    let common = "          common_tls_context:\n";
    let ctx_err = |ctx: &str| match load(&with_tls(ctx)) {
        Ok(_) => panic!("accepted: {ctx}"),
        Err(e) => e,
    };
    let tls_path = "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config";
    assert_eq!(
        ctx_err(&format!("{common}            tls_params: {{tls_minimum_protocol_version: TLSv1_0}}\n{certs}")),
        format!("{tls_path}.common_tls_context.tls_params.tls_minimum_protocol_version: TLSv1_0 is not supported: TLS 1.2 and 1.3 only (rustls)")
    );
    assert_eq!(
        ctx_err(&format!("{common}            tls_params: {{cipher_suites: [AES128-SHA]}}\n{certs}")),
        format!("{tls_path}.common_tls_context.tls_params.cipher_suites: cipher suite \"AES128-SHA\" is not supported (rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305 for TLS 1.2; TLS 1.3 suites are not configurable, as in Envoy)")
    );
    assert_eq!(
        ctx_err(&format!(
            "{common}            key_log: {{path: /tmp/keys}}\n{certs}"
        )),
        format!("{tls_path}.common_tls_context.key_log: not supported")
    );
    assert_eq!(
        ctx_err(&format!("          require_client_certificate: true\n{common}{certs}")),
        format!("{tls_path}.require_client_certificate: needs common_tls_context.validation_context.trusted_ca")
    );
    let ca = block(&cert, 18);
    assert_eq!(
        ctx_err(&format!("{common}            validation_context:\n              trusted_ca:\n                inline_string: |\n{ca}              match_typed_subject_alt_names: [{{san_type: OTHER_NAME, matcher: {{exact: a}}}}]\n{certs}")),
        format!("{tls_path}.common_tls_context.validation_context.match_typed_subject_alt_names[0].san_type: OTHER_NAME is not supported")
    );
    let with_sans = load(&with_tls(&format!(
        "          require_client_certificate: true\n{common}            validation_context:\n              trusted_ca:\n                inline_string: |\n{ca}              match_typed_subject_alt_names: [{{san_type: URI, matcher: {{exact: spiffe://a}}}}]\n{certs}"
    )));
    assert!(with_sans.is_ok(), "{with_sans:?}");
    let ok = load(&with_tls(&format!(
        "          require_client_certificate: true\n{common}            validation_context:\n              trusted_ca:\n                inline_string: |\n{ca}{certs}"
    )));
    assert!(ok.is_ok(), "{ok:?}");
    assert_eq!(
        ctx_err(&format!("{common}            tls_certificates:\n            - certificate_chain: {{filename: /nonexistent/cert.pem}}\n              private_key: {{inline_string: x}}\n")),
        format!("{tls_path}.common_tls_context.tls_certificates[0].certificate_chain.filename: cannot read \"/nonexistent/cert.pem\": No such file or directory (os error 2)")
    );
    let (_, other_key) = pem_pair(&["b"]);
    let mismatched = format!(
        "{common}            tls_certificates:\n            - certificate_chain:\n                inline_string: |\n{}              private_key:\n                inline_string: |\n{}",
        block(&cert, 18),
        block(&other_key, 18)
    );
    let e = ctx_err(&mismatched);
    assert!(
        e.starts_with(&format!("{tls_path}.common_tls_context.tls_certificates[0]: certificate 0: the private key does not match")),
        "{e}"
    );
    assert_eq!(
        ctx_err(&format!("{common}            alpn_protocols: [h2]\n")),
        format!(
            "{tls_path}.common_tls_context.tls_certificates: at least one certificate is required (inline, or tls_certificate_sds_secret_configs)"
        )
    );
}

#[test]
fn access_logs_are_taken_and_unknown_operators_named() {
    let with = |logs: &str| {
        edit(
            "codec_type: HTTP2\n",
            &format!("codec_type: HTTP2\n          access_log:\n{logs}"),
        )
    };
    let boot = load(&with(concat!(
        "          - name: envoy.access_loggers.stdout\n",
        "            typed_config:\n",
        "              \"@type\": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog\n",
        "              log_format:\n",
        "                json_format: {status: \"%RESPONSE_CODE%\", path: \"%REQ(:PATH)%\"}\n",
        "          - name: envoy.access_loggers.file\n",
        "            typed_config:\n",
        "              \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n",
        "              path: /tmp/gw-access.log\n",
        "              log_format:\n",
        "                text_format_source: {inline_string: \"%PROTOCOL% %UPSTREAM_HOST%\\n\"}\n",
    )))
    .expect("valid");
    let logs = &boot.listeners[0].filter_chains[0].http.access_log;
    assert_eq!(logs.len(), 2);
    assert_eq!(logs[0].sink, engine::LogSink::Stdout);
    assert_eq!(logs[0].format.req_fields(), [":path"]);
    assert_eq!(
        logs[1].sink,
        engine::LogSink::File("/tmp/gw-access.log".into())
    );
    let err = bad(
        "codec_type: HTTP2\n",
        concat!(
            "codec_type: HTTP2\n          access_log:\n",
            "          - name: envoy.access_loggers.stderr\n",
            "            typed_config:\n",
            "              \"@type\": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog\n",
            "              log_format: {text_format: \"%UPSTREAM_REQUEST_ATTEMPT_COUNT%\\n\"}\n",
        ),
    );
    assert_eq!(
        err,
        format!("{HCM}.access_log[0].typed_config.log_format.text_format: unknown command operator %UPSTREAM_REQUEST_ATTEMPT_COUNT%")
    );
}

/// A static listener without a name gets one, as Envoy names it (Envoy
/// draws a UUID; ours has a UUID's shape, and a reload of the same file
/// gives the same name); `traffic_direction` is accepted (Envoy uses it for
/// stats and tracing only).
#[test]
fn an_unnamed_listener_is_named_and_traffic_direction_is_accepted() {
    let unnamed = edit("  - name: ingress\n    address:\n", "  - address:\n");
    let unnamed = unnamed.replace(
        "    filter_chains:\n",
        "    traffic_direction: INBOUND\n    filter_chains:\n",
    );
    let first = load(&unnamed).unwrap();
    let name = &first.listeners[0].name;
    assert_eq!(name.len(), 36, "{name}");
    assert_eq!(
        name.chars().filter(|&c| c == '-').count(),
        4,
        "a UUID's shape: {name}"
    );
    assert_eq!(&load(&unnamed).unwrap().listeners[0].name, name, "stable");
    // A second unnamed listener on another address is named apart.
    let start = unnamed.find("  - address:").unwrap();
    let end = unnamed.find("\n  clusters:").unwrap() + 1;
    let other = unnamed[start..end].replace("port_value: 10000", "port_value: 10001");
    let two = format!("{}{other}{}", &unnamed[..end], &unnamed[end..]);
    let two = load(&two).unwrap();
    assert_ne!(two.listeners[0].name, two.listeners[1].name);
}

/// `upgrade_configs` on the connection manager and on a route: taken
/// with their `enabled`, and what is not implemented refused by path.
#[test]
fn upgrade_configs_of_manager_and_route() {
    let yaml = edit(
        "          codec_type: HTTP2\n",
        "          codec_type: HTTP2\n          upgrade_configs: [{ upgrade_type: websocket }, { upgrade_type: spdy/3, enabled: false }]\n",
    );
    let b = load(&yaml).unwrap();
    let hcm = &b.listeners[0].filter_chains[0].http;
    let types: Vec<(&str, bool)> = hcm
        .upgrades
        .iter()
        .map(|u| (u.upgrade_type.as_str(), u.enabled))
        .collect();
    assert_eq!(types, [("websocket", true), ("spdy/3", false)]);
    let yaml = edit(
        "                  prefix_rewrite: /v2/users/\n",
        "                  prefix_rewrite: /v2/users/\n                  upgrade_configs: [{ upgrade_type: WebSocket, enabled: false }]\n",
    );
    let b = load(&yaml).unwrap();
    let route = &b.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[0]
        .routes[0];
    let action = route.action.forward().unwrap();
    assert_eq!(action.upgrades[0].upgrade_type, "WebSocket");
    assert!(!action.upgrades[0].enabled);

    let manager = |list: &str| {
        bad(
            "          codec_type: HTTP2\n",
            &format!("          codec_type: HTTP2\n          upgrade_configs: {list}\n"),
        )
    };
    assert_eq!(
        manager("[{ upgrade_type: websocket }, { upgrade_type: WebSocket }]"),
        format!("{HCM}.upgrade_configs[1].upgrade_type: \"WebSocket\" is configured twice")
    );
    assert_eq!(
        manager("[{ upgrade_type: \"\" }]"),
        format!("{HCM}.upgrade_configs[0].upgrade_type: required")
    );
    assert_eq!(
        manager("[{ upgrade_type: websocket, filters: [{ name: f }] }]"),
        format!("{HCM}.upgrade_configs[0].filters: not supported")
    );
    let route_upgrades = |list: &str| {
        bad(
            "                  prefix_rewrite: /v2/users/\n",
            &format!("                  prefix_rewrite: /v2/users/\n                  upgrade_configs: {list}\n"),
        )
    };
    let e = route_upgrades("[{ upgrade_type: CONNECT, connect_config: { allow_post: true } }]");
    assert!(
        e.ends_with(".route.upgrade_configs[0].connect_config.allow_post: not supported"),
        "{e}"
    );
    let e = route_upgrades("[{ upgrade_type: websocket, connect_config: {} }]");
    assert!(
        e.ends_with(".route.upgrade_configs[0].connect_config: only for upgrade_type CONNECT"),
        "{e}"
    );
    // CONNECT: a connect_matcher route that terminates it, or sends it on.
    let connect = |route: &str| {
        load(&edit(
            "              - match: { path: /healthz, case_sensitive: false }\n",
            &format!("              - match: {{ connect_matcher: {{}} }}\n                route: {route}\n              - match: {{ path: /healthz, case_sensitive: false }}\n"),
        ))
    };
    let b = connect(
        "{ cluster: canary, upgrade_configs: [{ upgrade_type: CONNECT, connect_config: {} }] }",
    )
    .unwrap();
    let r = &b.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[1]
        .routes[0];
    assert!(matches!(r.matcher.path, engine::PathMatch::Connect));
    assert!(engine::terminates_connect(
        &r.action.forward().unwrap().upgrades
    ));
    // Without `connect_config` the CONNECT goes on to the host.
    let b = connect("{ cluster: canary, upgrade_configs: [{ upgrade_type: CONNECT }] }").unwrap();
    let r = &b.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[1]
        .routes[0];
    assert!(!engine::terminates_connect(
        &r.action.forward().unwrap().upgrades
    ));
}
