//! The data path end to end: real gateway shards on port 0 in front of real
//! h2 demo backends, driven by an h2 client.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use support::*;

#[test]
fn get_round_robins_across_backends() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (gw, addr) = gateway_for(&[b1.addr(), b2.addr()], 1);
    let names = client(move || async move {
        let c = connect(addr).await;
        let mut names = Vec::new();
        for _ in 0..4 {
            let r = get(&c, "/hello", &[]).await.unwrap();
            assert_eq!(r.status, StatusCode::OK);
            names.push(r.header("x-backend").unwrap().to_string());
        }
        names
    });
    // Round robin starts at a random host (as Envoy, so shards and
    // gateways do not all hit the same one first), then alternates.
    assert!(
        names == ["b1", "b2", "b1", "b2"] || names == ["b2", "b1", "b2", "b1"],
        "{names:?}"
    );
    gw.shutdown();
}

#[test]
fn large_bodies_stream_both_ways_with_trailers() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    client(move || async move {
        let c = connect(addr).await;
        // 12 MiB up, echoed back, with trailers both ways.
        let body: Bytes = (0..12 * 1024 * 1024)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into();
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", HeaderValue::from_static("abc"));
        let r = request(&c, "POST", "/echo", &[], Some(body.clone()), Some(trailers))
            .await
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), body.len());
        assert!(r.body == body, "echoed body differs");
        let t = r.trailers.expect("trailers forwarded");
        assert_eq!(t.get("x-checksum").unwrap(), "abc");

        // 16 MiB down.
        let r = get(&c, "/big", &[("x-response-size", "16777216")])
            .await
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), 16 * 1024 * 1024);
    });
    gw.shutdown();
}

#[test]
fn thousand_concurrent_streams_over_ten_connections() {
    let b = backend("b");
    // Envoy's default max_requests (1024) is shared out between the two
    // shards (512 each) and the kernel may give one shard six of the ten
    // connections: this test is about carrying the streams, so the cluster
    // allows them all on either shard.
    let mut c = (*cluster("c", &[b.addr()])).clone();
    c.circuit_breakers.default.max_requests = 2000;
    let gw = start(
        bootstrap(
            listener(vec![prefix_route("/", "c", None)]),
            vec![Arc::new(c)],
        ),
        2,
    );
    let addr = gw.listener("ingress").expect("listener bound");
    let ok = client(move || async move {
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let c = connect(addr).await;
            for _ in 0..100 {
                let c = c.clone();
                tasks.push(glommio::spawn_local(async move {
                    // The delay keeps all 1,000 streams open at once.
                    get(&c, "/", &[("x-delay-ms", "300")])
                        .await
                        .map(|r| r.status)
                }));
            }
        }
        let mut ok = 0;
        for t in tasks {
            if let Ok(StatusCode::OK) = t.await {
                ok += 1;
            }
        }
        ok
    });
    assert_eq!(ok, 1000);
    gw.shutdown();
}

#[test]
fn error_mapping_http_and_grpc() {
    let b = backend("b");
    let dead = {
        // A port with nothing listening.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let routes = vec![
        prefix_route("/dead", "dead", None),
        prefix_route("/slow", "c", Some(Duration::from_millis(300))),
        prefix_route("/missing", "no-such-cluster", None),
        prefix_route("/", "c", None),
    ];
    let mut routes = routes;
    // Only "/x..." paths are routed by the catch-all; "/nothing" is not.
    routes.last_mut().unwrap().matcher.path = engine::PathMatch::Prefix("/x".into());
    let gw = start(
        bootstrap(
            listener(routes),
            vec![cluster("c", &[b.addr()]), cluster("dead", &[dead])],
        ),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    client(move || async move {
        let c = connect(addr).await;
        let grpc = [("content-type", "application/grpc"), ("te", "trailers")];

        let r = get(&c, "/dead", &[]).await.unwrap();
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        let r = get(&c, "/dead", &grpc).await.unwrap();
        assert_eq!((r.status, r.grpc_status()), (StatusCode::OK, Some("14")));
        assert!(r.body.is_empty() && r.trailers.is_none(), "trailers-only");

        let t0 = Instant::now();
        let r = get(&c, "/slow", &[("x-delay-ms", "3000")]).await.unwrap();
        assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT);
        assert!(t0.elapsed() < Duration::from_secs(2));
        // With a body, the route timeout starts once the body is sent.
        let t0 = Instant::now();
        let body = Bytes::from(vec![b'x'; 1024]);
        let r = request(
            &c,
            "POST",
            "/slow",
            &[("x-delay-ms", "3000")],
            Some(body),
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT);
        assert!(
            t0.elapsed() < Duration::from_millis(900),
            "late: {:?}",
            t0.elapsed()
        );
        let r = get(&c, "/slow", &[("x-delay-ms", "3000"), grpc[0], grpc[1]])
            .await
            .unwrap();
        assert_eq!((r.status, r.grpc_status()), (StatusCode::OK, Some("14")));

        // A reset before the answer's head: 503, as Envoy 1.40 answers it
        // (502 is for a malformed answer).
        let r = get(&c, "/xreset", &[("x-reset", "1")]).await.unwrap();
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            &r.body[..],
            b"upstream connect error or disconnect/reset before headers. reset reason: remote reset"
        );

        let r = get(&c, "/nothing", &[]).await.unwrap();
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = get(&c, "/missing", &[]).await.unwrap();
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);

        // gRPC statuses from the backend pass through untouched.
        let r = request(
            &c,
            "POST",
            "/xgrpc",
            &[grpc[0], grpc[1], ("x-grpc-status", "7")],
            Some(Bytes::from_static(b"\0\0\0\0\x02hi")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.grpc_status(), Some("7"));
        assert_eq!(&r.body[..], b"\0\0\0\0\x02hi");
    });
    let (status, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    assert_eq!(status, 200);
    assert!(stats.contains("gateway_downstream_rq_timeout 3"), "{stats}");
    assert!(
        stats.contains("gateway_upstream_rq_unknown_cluster 1"),
        "{stats}"
    );
    gw.shutdown();
}

#[test]
fn admin_endpoints() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 2);
    client(move || async move {
        let c = connect(addr).await;
        for _ in 0..5 {
            assert_eq!(get(&c, "/", &[]).await.unwrap().status, StatusCode::OK);
        }
    });
    let admin = gw.admin_addr.unwrap();
    assert_eq!(admin_get(admin, "/ready"), (200, "LIVE\n".to_string()));
    let (status, info) = admin_get(admin, "/server_info");
    let info: serde_json::Value = serde_json::from_str(&info).expect("server_info is JSON");
    assert_eq!(status, 200);
    assert_eq!(info["state"], "LIVE");
    assert_eq!(info["command_line_options"]["concurrency"], 2);
    assert!(info["version"].as_str().unwrap().starts_with("gateway/"));
    assert!(info["uptime_current_epoch"]
        .as_str()
        .unwrap()
        .ends_with('s'));
    let (_, stats) = admin_get(admin, "/stats");
    assert!(stats.contains("gateway_downstream_rq_total 5"), "{stats}");
    assert!(stats.contains("gateway_downstream_cx_total 1"), "{stats}");
    let host = format!("cluster=\"c\",host=\"{}\"", b.addr());
    assert!(
        stats.contains(&format!("gateway_upstream_rq_total{{{host}}} 5")),
        "{stats}"
    );
    assert!(
        stats.contains(&format!(
            "gateway_upstream_rq_xx{{{host},response_code_class=\"2xx\"}} 5"
        )),
        "{stats}"
    );
    let (_, clusters) = admin_get(admin, "/clusters");
    assert!(
        clusters.contains(&format!("c::{}::health_flags::healthy", b.addr())),
        "{clusters}"
    );
    assert!(
        clusters.contains(&format!("c::{}::rq_total::5", b.addr())),
        "{clusters}"
    );
    let (_, dump) = admin_get(admin, "/config_dump");
    let v: serde_json::Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(v["static_resources"]["clusters"][0]["name"], "c");
    assert_eq!(admin_get(admin, "/nope").0, 404);
    gw.shutdown();
}

#[test]
fn stream_idle_timeout_answers_408_before_headers() {
    let b = backend("b");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.stream_idle_timeout = Some(Duration::from_millis(300));
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    client(move || async move {
        let c = connect(addr).await;
        let t0 = Instant::now();
        let r = get(&c, "/", &[("x-delay-ms", "3000")]).await.unwrap();
        assert_eq!(r.status, StatusCode::REQUEST_TIMEOUT);
        assert!(t0.elapsed() < Duration::from_secs(2));
        // Activity keeps a stream alive past the idle timeout: a 16 MiB
        // download takes several windows' worth of round trips.
        let r = get(&c, "/", &[("x-response-size", "16777216")])
            .await
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body.len(), 16 << 20);
    });
    let (_, stats) = admin_get(gw.admin_addr.unwrap(), "/stats");
    assert!(
        stats.contains("gateway_downstream_rq_idle_timeout 1"),
        "{stats}"
    );
    gw.shutdown();
}

#[test]
fn max_stream_duration_answers_408_then_resets_a_started_response() {
    let b = backend("b");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.max_stream_duration = Some(Duration::from_millis(400));
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    client(move || async move {
        let c = connect(addr).await;
        // No response head yet: Envoy's 408 and body.
        let t0 = Instant::now();
        let r = get(&c, "/", &[("x-delay-ms", "3000")]).await.unwrap();
        assert_eq!(r.status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(&r.body[..], b"downstream duration timeout");
        assert!(t0.elapsed() < Duration::from_secs(2));
        // An echo whose response started but whose request never ends:
        // still busy (bytes move), yet reset once its time is up.
        let req = http::Request::builder()
            .method("POST")
            .uri("http://test.local/echo")
            .body(())
            .unwrap();
        let mut sender = c.clone().ready().await.unwrap();
        let (resp, mut send) = sender.send_request(req, false).unwrap();
        send.send_data(Bytes::from_static(b"tick"), false).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let mut body = resp.into_body();
        let t0 = Instant::now();
        let mut ended = None;
        while t0.elapsed() < Duration::from_secs(3) {
            let _ = send.send_data(Bytes::from_static(b"tick"), false);
            match body.data().await {
                Some(Ok(chunk)) => {
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                other => {
                    ended = Some(other.map(|r| r.is_err()));
                    break;
                }
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(ended, Some(Some(true)), "reset, not ended or still going");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    });
    let admin = gw.admin_addr.unwrap();
    assert_eq!(
        metric(admin, "gateway_downstream_rq_max_duration_reached"),
        2.0
    );
    gw.shutdown();
}

#[test]
fn head_gets_the_head_of_a_get_without_a_body_through_the_gateway() {
    let b = backend("b");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    client(move || async move {
        let c = connect(addr).await;
        let get_reply = get(&c, "/", &[]).await.unwrap();
        let head = request(&c, "HEAD", "/", &[], None, None).await.unwrap();
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        assert_eq!(
            head.header("content-length"),
            Some(get_reply.body.len().to_string().as_str())
        );
        let sized = [("x-response-size", "5000")];
        let head = request(&c, "HEAD", "/", &sized, None, None).await.unwrap();
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        assert_eq!(head.header("content-length"), Some("5000"));
    });
    gw.shutdown();
}
