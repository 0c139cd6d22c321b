//! The RBAC filters: the HTTP filter's ALLOW and DENY policies over paths, fields and addresses, shadow rules, a route's own rules and a route that turns the filter off, and the network filter closing connections its policies deny (after `delay_deny`). Expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-28: 403 `RBAC: access denied`, no response flag; the same requests allowed and denied, the same counts).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

const RULES: &str = r#"          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                action: ALLOW
                policies:
                  public:
                    permissions: [ { url_path: { path: { prefix: /public } } } ]
                    principals: [ { any: true } ]
                  ops:
                    permissions:
                    - and_rules:
                        rules:
                        - header: { name: ":method", string_match: { exact: GET } }
                        - not_rule: { url_path: { path: { prefix: /admin/secret } } }
                    principals:
                    - and_ids:
                        ids:
                        - header: { name: x-role, string_match: { exact: ops } }
                        - direct_remote_ip: { address_prefix: 127.0.0.0, prefix_len: 8 }
              shadow_rules:
                action: DENY
                policies:
                  no-curl:
                    permissions: [ { any: true } ]
                    principals: [ { header: { name: user-agent, string_match: { prefix: curl } } } ]"#;

const ROUTES: &str = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: /open }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.rbac: { "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, disabled: true }
              - match: { prefix: /deny-local }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.rbac:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute
                    rbac:
                      rules:
                        action: DENY
                        policies:
                          local:
                            permissions: [ { any: true } ]
                            principals: [ { remote_ip: { address_prefix: 127.0.0.1, prefix_len: 32 } } ]
              - match: { prefix: / }
                route: { cluster: backend }"#;

fn gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        RULES,
        ROUTES,
        &support::yaml::h1_cluster("backend", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

#[test]
fn policies_allow_and_deny_as_envoy() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, addr, admin) = gateway(be.addr());
    let status = |path: &str, extra: &str| h1_get(addr, "x", path, extra).status;
    assert_eq!(status("/public/x", ""), 200);
    let denied = h1_get(addr, "x", "/private", "");
    assert_eq!(
        (denied.status, &denied.body[..]),
        (403, &b"RBAC: access denied"[..])
    );
    assert_eq!(status("/private", "x-role: ops\r\n"), 200);
    assert_eq!(status("/admin/secret/x", "x-role: ops\r\n"), 403);
    assert_eq!(status("/private", "x-role: dev\r\n"), 403);
    // A repeated field matches value by value (Envoy 1.40's): `ops` on
    // its second line matches.
    assert_eq!(status("/private", "x-role: dev\r\nx-role: ops\r\n"), 200);
    // A route that disables the filter; a route with rules of its own.
    assert_eq!(status("/open/x", ""), 200);
    assert_eq!(status("/deny-local", "x-role: ops\r\n"), 403);
    // The backend saw none of the denied requests.
    assert!(be
        .requests()
        .iter()
        .all(|r| r.target != "/admin/secret/x" && r.target != "/deny-local"));

    // Shadow rules count what they would have done.
    assert_eq!(status("/public/y", "user-agent: curl/8\r\n"), 200);
    let (_, stats) = admin_get(admin, "/stats");
    for line in [
        "gateway_rbac_total{outcome=\"allowed\"} 4\n",
        "gateway_rbac_total{outcome=\"denied\"} 4\n",
        "gateway_rbac_total{outcome=\"shadow_denied\"} 1\n",
    ] {
        assert!(stats.contains(line), "{line}: {stats}");
    }
    // Envoy's, for this connection manager.
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    for (series, v) in [("allowed", 4.0), ("denied", 4.0), ("shadow_denied", 1.0)] {
        let series = format!("envoy_http_rbac_{series}{hcm}");
        assert_eq!(envoy_metric(admin, &series), v, "{series}");
    }
}

/// The shadow rules' counters go under `shadow_rules_stat_prefix`, as
/// Envoy names and labels them; the rules' stay unprefixed.
#[test]
fn a_rules_stat_prefix_names_its_counters() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let rules = RULES.replace(
        "v3.RBAC\n",
        "v3.RBAC\n              shadow_rules_stat_prefix: myshadow_\n",
    );
    let clusters = support::yaml::h1_cluster("backend", be.addr());
    let bootstrap =
        support::yaml::filters_bootstrap("", &rules, ROUTES, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());
    let got = h1_get(addr, "x", "/public/a", "user-agent: curl/8\r\n");
    assert_eq!(got.status, 200);
    let hcm = "envoy_http_conn_manager_prefix=\"ingress\"";
    let shadow =
        format!("envoy_http_rbac_shadow_denied{{envoy_rbac_http_prefix=\"myshadow_\",{hcm}}}");
    assert_eq!(envoy_metric(admin, &shadow), 1.0);
    assert_eq!(
        envoy_metric(admin, &format!("envoy_http_rbac_allowed{{{hcm}}}")),
        1.0
    );
    let (_, text) = admin_get(admin, "/stats?filter=rbac");
    assert!(
        text.contains("http.ingress.rbac.myshadow_.shadow_denied: 1"),
        "{text}"
    );
}

#[test]
fn the_network_filter_closes_connections_it_denies() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let network = |action: &str, delay: &str| {
        format!(
            r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.rbac
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC
          stat_prefix: tcp_rbac
          {delay}
          rules:
            action: {action}
            policies:
              loopback:
                permissions: [ {{ destination_port_range: {{ start: 1, end: 65536 }} }} ]
                principals: [ {{ direct_remote_ip: {{ address_prefix: 127.0.0.0, prefix_len: 8 }} }} ]
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          http_filters: [ {{ name: envoy.filters.http.router }} ]
          route_config:
            virtual_hosts: [ {{ name: all, domains: ["*"], routes: [ {{ match: {{ prefix: / }}, route: {{ cluster: backend }} }} ] }} ]
  clusters:
{}"#,
            support::yaml::h1_cluster("backend", be.addr())
        )
    };
    let load = |yaml: String| {
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap")
    };
    let gw = start(load(network("ALLOW", "")), 1);
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(h1_get(addr, "x", "/", "").status, 200);
    drop(gw);

    let gw = start(load(network("DENY", "delay_deny: 0.3s")), 1);
    let addr = gw.listener("ingress").unwrap();
    let admin = gw.admin_addr.unwrap();
    let t = Instant::now();
    let (mut s, mut r) = open(addr);
    use std::io::Write;
    let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed(&mut r), "a denied connection is closed unanswered");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_network_rbac_total{outcome=\"denied\"} 1\n"),
        "{stats}"
    );
}

#[test]
fn bad_rules_are_refused_by_name() {
    let bad = |rules: &str| {
        support::yaml::filters_bootstrap(
            "",
            &format!(
                r#"          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules: {rules}"#
            ),
            &support::yaml::one_route("s", ""),
            &support::yaml::h1_cluster("s", "127.0.0.1:1".parse().unwrap()),
        )
        .expect_err("refused")
        .to_string()
    };
    let e = bad("{ policies: { p: { permissions: [ { any: true } ] } } }");
    assert!(
        e.contains("policies[\"p\"].principals: at least one is required"),
        "{e}"
    );
    let e = bad(
        "{ policies: { p: { permissions: [ { metadata: {} } ], principals: [ { any: true } ] } } }",
    );
    assert!(e.contains("permissions[0].metadata: not supported"), "{e}");
    let e = bad("{ policies: { p: { permissions: [ { any: true } ], principals: [ { remote_ip: { address_prefix: nope } } ] } } }");
    assert!(e.contains("malformed IP address"), "{e}");
}
