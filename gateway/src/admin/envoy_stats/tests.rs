use super::*;

#[test]
fn names_are_envoys_with_every_other_character_an_underscore() {
    assert_eq!(
        metric_name("cluster.upstream_rq_xx"),
        "envoy_cluster_upstream_rq_xx"
    );
    assert_eq!(
        metric_name("cluster.outlier_detection.ejections_active"),
        "envoy_cluster_outlier_detection_ejections_active"
    );
}

#[test]
fn a_family_is_written_as_envoy_writes_it() {
    let mut f = Family::new(Kind::Counter, "cluster.upstream_rq");
    f.push(
        "cluster.back\"end.upstream_rq_503".into(),
        vec![
            ("envoy_response_code", "503".into()),
            ("envoy_cluster_name", "back\"end\n".into()),
        ],
        5,
    );
    let mut out = String::new();
    write_family(&mut out, &f);
    assert_eq!(
        out,
        "# TYPE envoy_cluster_upstream_rq counter\n\
         envoy_cluster_upstream_rq{envoy_response_code=\"503\",envoy_cluster_name=\"back\\\"end\\n\"} 5\n"
    );
    let mut g = Family::new(Kind::Gauge, "server.live");
    g.push("server.live".into(), Vec::new(), 1);
    let mut out = String::new();
    write_family(&mut out, &g);
    assert_eq!(
        out,
        "# TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n"
    );
}

#[test]
fn a_histogram_has_envoys_buckets_in_milliseconds_with_le_last() {
    let mut m = Merged::new();
    // 300 µs, 3 ms, 3 s.
    for us in [300u64, 3_000, 3_000_000] {
        m.add(engine::stats::histogram::bucket_of(us), 1);
    }
    m.add_sum(3_003_300);
    let mut f = Family::new(Kind::Histogram, "cluster.upstream_rq_time");
    f.push_histogram(
        "cluster.b.upstream_rq_time".into(),
        vec![("envoy_cluster_name", "b".into())],
        m,
    );
    let mut out = String::new();
    write_family(&mut out, &f);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "# TYPE envoy_cluster_upstream_rq_time histogram");
    assert_eq!(
        lines[1],
        "envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"b\",le=\"0.5\"} 1"
    );
    assert_eq!(
        lines[3],
        "envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"b\",le=\"5\"} 2"
    );
    assert!(lines.contains(
        &"envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"b\",le=\"5000\"} 3"
    ));
    assert_eq!(
        lines[20],
        "envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=\"b\",le=\"+Inf\"} 3"
    );
    assert_eq!(
        lines[21],
        "envoy_cluster_upstream_rq_time_sum{envoy_cluster_name=\"b\"} 3003.3"
    );
    assert_eq!(
        lines[22],
        "envoy_cluster_upstream_rq_time_count{envoy_cluster_name=\"b\"} 3"
    );
}

#[test]
fn the_query_takes_envoys_filter_and_usedonly() {
    let q = Query::parse("filter=cluster%5C.b%5C.&usedonly").unwrap();
    let series = |stat: &str, v: u64| Series {
        stat: stat.into(),
        labels: Vec::new(),
        value: Value::Int(v),
    };
    assert!(q.takes(&series("cluster.b.upstream_rq_total", 1)));
    assert!(!q.takes(&series("cluster.b.upstream_rq_total", 0)));
    assert!(!q.takes(&series("cluster.bb.upstream_rq_total", 1)));
    assert!(Query::parse("filter=(").is_err());
    assert!(Query::parse("").unwrap().takes(&series("x", 0)));
}
