//! Taking an instance out as Envoy's admin does: `POST /healthcheck/fail` (503 from `/ready`, `drain_type: DEFAULT` listeners drain, `MODIFY_ONLY` ones do not) and `/healthcheck/ok`; `POST /drain_listeners` with and without `graceful`; a listener whose address is taken is "not serving" and bound once it frees.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use support::tls_client::http1_get;
use support::{yaml, *};

fn listener_yaml(name: &str, port: u16, drain_type: &str) -> String {
    format!(
        "  - name: {name}\n    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}\n    \
         drain_type: {drain_type}\n    filter_chains:\n    - name: main\n{}",
        yaml::hcm("echo")
    )
}

fn cluster_yaml(backend: SocketAddr) -> String {
    format!("  clusters:\n{}", yaml::h2_cluster("echo", backend))
}

/// A gateway with listeners `def` (drain_type DEFAULT) and `mod`
/// (MODIFY_ONLY).
fn two_listeners(backend: SocketAddr) -> gateway::GatewayHandle {
    let yaml = format!(
        "admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}\nstatic_resources:\n  listeners:\n{}{}{}",
        listener_yaml("def", 0, "DEFAULT"),
        listener_yaml("mod", 0, "MODIFY_ONLY"),
        cluster_yaml(backend),
    );
    start(
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap"),
        1,
    )
}

/// A kept-alive HTTP/1.1 connection that has been served once.
fn served(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (status, head, _) = http1_get(&mut s);
    assert_eq!(status, 200);
    assert!(!head.to_lowercase().contains("connection: close"), "{head}");
    s
}

/// Whether the server closed `s` (read gives end of file in time).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0))
}

#[test]
fn healthcheck_fail_fails_ready_and_drains_default_listeners_only() {
    let b = backend("b");
    let gw = two_listeners(b.addr());
    let admin = gw.admin_addr.expect("admin");
    let (def, modify) = (gw.listener("def").unwrap(), gw.listener("mod").unwrap());
    let (mut on_def, mut on_mod) = (served(def), served(modify));

    assert_eq!(
        admin_get(admin, "/healthcheck/fail"),
        (405, "Method GET not allowed, POST required.\n".to_string())
    );
    assert_eq!(admin_get(admin, "/ready").0, 200);
    assert_eq!(
        admin_post(admin, "/healthcheck/fail"),
        (200, "OK\n".to_string())
    );
    assert_eq!(admin_get(admin, "/ready"), (503, "DRAINING\n".to_string()));
    assert_eq!(metric(admin, "gateway_server_live"), 0.0);
    // The DEFAULT listener's idle connection closes; MODIFY_ONLY's serves.
    assert!(closed(&mut on_def));
    let (status, head, _) = http1_get(&mut on_mod);
    assert_eq!(status, 200);
    assert!(!head.to_lowercase().contains("connection: close"));
    // A new client of the DEFAULT listener is answered, and told to go.
    let mut fresh = TcpStream::connect(def).unwrap();
    fresh
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (status, head, _) = http1_get(&mut fresh);
    assert_eq!(status, 200);
    assert!(head.to_lowercase().contains("connection: close"), "{head}");

    assert_eq!(
        admin_post(admin, "/healthcheck/ok"),
        (200, "OK\n".to_string())
    );
    assert_eq!(admin_get(admin, "/ready").0, 200);
    assert_eq!(metric(admin, "gateway_server_live"), 1.0);
    let mut again = served(def);
    let (status, head, _) = http1_get(&mut again);
    assert_eq!(status, 200);
    assert!(!head.to_lowercase().contains("connection: close"), "{head}");
}

#[test]
fn drain_listeners_stops_accepting_at_once() {
    let b = backend("b");
    let gw = two_listeners(b.addr());
    let admin = gw.admin_addr.expect("admin");
    let def = gw.listener("def").unwrap();
    let mut idle = served(def);
    assert_eq!(admin_post(admin, "/drain_listeners?inboundonly").0, 400);
    assert_eq!(
        admin_post(admin, "/drain_listeners"),
        (200, "OK\n".to_string())
    );
    assert!(closed(&mut idle));
    wait_until(Duration::from_secs(2), "listener closed", || {
        TcpStream::connect(def).is_err()
    });
    let (_, listeners) = admin_get(admin, "/listeners");
    assert!(
        listeners.contains("draining (drain_listeners)"),
        "{listeners}"
    );
}

#[test]
fn graceful_drain_listeners_accepts_for_the_drain_time_then_stops() {
    let b = backend("b");
    let gw = two_listeners(b.addr());
    let admin = gw.admin_addr.expect("admin");
    let def = gw.listener("def").unwrap();
    let mut idle = served(def);
    let began = Instant::now();
    assert_eq!(admin_post(admin, "/drain_listeners?graceful").0, 200);
    assert!(closed(&mut idle));
    // New clients are still served while the drain time (5 s in tests)
    // runs, and told to go…
    let mut still = TcpStream::connect(def).unwrap();
    still
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (status, head, _) = http1_get(&mut still);
    assert_eq!(status, 200);
    assert!(head.to_lowercase().contains("connection: close"), "{head}");
    // …and refused after it.
    wait_until(
        Duration::from_secs(8),
        "listener closed after the drain time",
        || TcpStream::connect(def).is_err(),
    );
    assert!(began.elapsed() >= support::DRAIN.time - Duration::from_millis(100));
}

/// A36's "not serving": an LDS update naming a taken address leaves that
/// listener out (the others serve), shows it, and binds it once it frees.
#[test]
fn a_listener_whose_address_is_taken_is_not_serving_until_it_frees() {
    let b = backend("b");
    let dir = std::env::temp_dir().join(format!("gw-serving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lds = dir.join("lds.yaml");
    let lds_file = |listeners: &[String]| {
        let mut out = String::from("version_info: \"v\"\nresources:\n");
        for l in listeners {
            let l = l.replacen(
                "  - name:",
                "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n    name:",
                1,
            );
            out.push_str(
                &l.replace("\n    ", "\n  ")
                    .replacen("    name:", "  name:", 1),
            );
        }
        out
    };
    std::fs::write(&lds, lds_file(&[listener_yaml("one", 0, "DEFAULT")])).unwrap();
    let yaml = format!(
        "admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}\ndynamic_resources:\n  lds_config: {{ path_config_source: {{ path: {} }} }}\nstatic_resources:\n{}",
        lds.display(),
        cluster_yaml(b.addr())
    );
    let gw = start(
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap"),
        1,
    );
    let admin = gw.admin_addr.expect("admin");
    // A port someone else holds (no SO_REUSEPORT: nobody may share it).
    let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let tmp = dir.join("lds.tmp");
    std::fs::write(
        &tmp,
        lds_file(&[
            listener_yaml("one", 0, "DEFAULT"),
            listener_yaml("two", taken, "DEFAULT"),
        ]),
    )
    .unwrap();
    std::fs::rename(&tmp, &lds).unwrap();
    let two = "gateway_listener_serving{listener=\"two\"}";
    wait_until(Duration::from_secs(5), "two not serving", || {
        admin_get(admin, "/stats").1.contains(&format!("{two} 0"))
    });
    let (_, listeners) = admin_get(admin, "/listeners");
    assert!(
        listeners.contains("not serving") && listeners.contains("Address already in use"),
        "{listeners}"
    );
    // The other listener serves meanwhile.
    assert_eq!(http1_get(&mut served(gw.listener("one").unwrap())).0, 200);
    drop(squatter);
    wait_until(
        Duration::from_secs(12),
        "two bound once its port freed",
        || metric(admin, two) == 1.0,
    );
    let mut s = TcpStream::connect(("127.0.0.1", taken)).expect("serving");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(http1_get(&mut s).0, 200);
    let _ = std::fs::remove_dir_all(&dir);
}
