//! File sources (`path_config_source`): read at start, re-read when
//! replaced, rejected versions keep the previous config serving.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::*;

const WAIT: Duration = Duration::from_secs(10);

/// A scratch directory unique to this test process and name.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gw-xds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces a file the way Envoy documents for file sources: write a new
/// file, then rename it over the old one.
fn replace_file(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn cds_file(version: &str, backend: SocketAddr) -> String {
    format!(
        r#"
version_info: "{version}"
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: echo
  type: STATIC
  connect_timeout: 0.5s
  load_assignment:
    cluster_name: echo
    endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: {}, port_value: {} }} }} }} }}] }}]
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {{ http2_protocol_options: {{}} }}
"#,
        backend.ip(),
        backend.port()
    )
}

const LDS_FILE: &str = r#"
version_info: "1"
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: ingress
  address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: ingress
        route_config:
          name: local
          virtual_hosts: [{ name: all, domains: ["*"], routes: [{ match: { prefix: / }, route: { cluster: echo } }] }]
        http_filters:
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
"#;

#[test]
fn file_sources_are_read_at_start_and_reread_on_change() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let dir = scratch("files");
    let (cds, lds) = (dir.join("cds.yaml"), dir.join("lds.yaml"));
    std::fs::write(&cds, cds_file("1", b1.addr())).unwrap();
    std::fs::write(&lds, LDS_FILE).unwrap();
    let yaml = format!(
        r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
dynamic_resources:
  cds_config: {{ path_config_source: {{ path: {} }} }}
  lds_config: {{ path_config_source: {{ path: {} }} }}
"#,
        cds.display(),
        lds.display()
    );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).unwrap();
    let gw = start(boot, 2);
    let admin = gw.admin_addr.unwrap();
    assert_eq!(admin_get(admin, "/ready").0, 200);
    let addr = gw
        .listener("ingress")
        .expect("listener from the LDS file at start");
    assert_eq!(get_n(addr, "/", 1), [(200, "b1".to_string())]);

    replace_file(&cds, &cds_file("2", b2.addr()));
    let deadline = Instant::now() + WAIT;
    while get_n(addr, "/", 1)[0].1 != "b2" {
        assert!(Instant::now() < deadline, "CDS file change not applied");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A broken file is rejected and changes nothing.
    replace_file(&cds, "version_info: \"3\"\nresources: [{ \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: echo, lb_policy: CLUSTER_PROVIDED }]\n");
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, dump) = admin_get(admin, "/config_dump");
        if dump.contains("clusters[echo].lb_policy: CLUSTER_PROVIDED is not supported") {
            break;
        }
        assert!(Instant::now() < deadline, "rejection not reported: {dump}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get_n(addr, "/", 1), [(200, "b2".to_string())]);
    gw.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_file_source_fails_the_start_naming_the_field() {
    let dir = scratch("badfile");
    let cds = dir.join("cds.yaml");
    std::fs::write(&cds, "resources: [{ \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: x, bogus: 1 }]\n").unwrap();
    let yaml = format!(
        "dynamic_resources: {{ cds_config: {{ path: {} }} }}\n",
        cds.display()
    );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).unwrap();
    let err = gateway::start(
        boot,
        gateway::Options {
            shards: Some(1),
            cpus: None,
            ..Default::default()
        },
    )
    .err()
    .expect("start fails")
    .to_string();
    assert!(err.contains("resources[0].bogus"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
