//! The admin HTTP port (`telemetry` feature): `/metrics` scraped and read with a Prometheus
//! text-format parser (`prometheus-parse`), checked against what the test did and against
//! `INFO`; the probes; bad requests answered without harm to anyone else.

#![cfg(feature = "telemetry")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{client, info_field, start};
use fc_server::{ServerConfig, ServerHandle};
use prometheus_parse::{Sample, Scrape, Value};

fn with_admin(threads: usize, data_dir: Option<&std::path::Path>) -> ServerHandle {
    let mut config = ServerConfig {
        shards: 8,
        threads,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    config.persistence.data_dir = data_dir.map(std::path::Path::to_path_buf);
    config.persistence.save = Vec::new();
    start(config)
}

/// One HTTP exchange: the status line, the headers and the body.
fn http(addr: SocketAddr, request: &[u8]) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_lowercase(), body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn scrape(server: &ServerHandle) -> Vec<Sample> {
    let (status, headers, body) = get(server.admin_addr().unwrap(), "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );
    Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("the exposition parses")
        .samples
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    match &found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

/// The sum of every sample named `name`.
fn total(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.metric == name)
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{name}: {other:?}"),
        })
        .sum()
}

#[test]
fn metrics_agree_with_what_clients_did_and_with_info() {
    let dir = tempfile::tempdir().unwrap();
    let server = with_admin(2, Some(dir.path()));
    let mut con = client(&server);
    for i in 0..40 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .query(&mut con)
            .unwrap();
    }
    let _: () = redis::cmd("EXPIRE")
        .arg("k0")
        .arg(100)
        .query(&mut con)
        .unwrap();
    for i in 0..10 {
        let _: Option<String> = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut con)
            .unwrap();
    }
    let _: Option<String> = redis::cmd("GET").arg("missing").query(&mut con).unwrap();
    let err = redis::cmd("LPUSH")
        .arg("k1")
        .arg("x")
        .query::<i64>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("WRONGTYPE"));

    let samples = scrape(&server);
    assert_eq!(value(&samples, "redis_up", &[]), 1.0);
    assert_eq!(
        value(&samples, "redis_commands_total", &[("cmd", "set")]),
        40.0
    );
    assert_eq!(
        value(&samples, "redis_commands_total", &[("cmd", "get")]),
        11.0
    );
    assert_eq!(
        value(
            &samples,
            "redis_commands_failed_calls_total",
            &[("cmd", "lpush")]
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "redis_errors_total", &[("err", "WRONGTYPE")]),
        1.0
    );
    assert_eq!(value(&samples, "redis_db_keys", &[("db", "db0")]), 40.0);
    assert_eq!(
        value(&samples, "redis_db_keys_expiring", &[("db", "db0")]),
        1.0
    );
    assert_eq!(value(&samples, "redis_keyspace_hits_total", &[]), 10.0);
    assert_eq!(value(&samples, "redis_keyspace_misses_total", &[]), 1.0);
    assert!(value(&samples, "redis_connected_clients", &[]) >= 1.0);
    let info = value(
        &samples,
        "redis_instance_info",
        &[("redis_version", "7.2.0")],
    );
    assert_eq!(info, 1.0);
    // Per shard and per worker, summed, the totals.
    assert_eq!(total(&samples, "fast_cache_shard_keys"), 40.0);
    assert_eq!(total(&samples, "fast_cache_shard_hits_total"), 10.0);
    assert_eq!(total(&samples, "fast_cache_worker_shards"), 8.0);
    assert_eq!(value(&samples, "fast_cache_workers", &[]), 2.0);
    let processed = value(&samples, "redis_commands_processed_total", &[]);
    assert_eq!(
        total(&samples, "fast_cache_worker_commands_total"),
        processed
    );
    // The latency histogram holds every call, in buckets that only grow.
    let set: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.metric == "fast_cache_command_duration_seconds" && s.labels.get("cmd") == Some("set")
        })
        .collect();
    assert_eq!(set.len(), 1, "{set:?}");
    let Value::Histogram(buckets) = &set[0].value else {
        panic!("{set:?}");
    };
    assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));
    assert_eq!(buckets.last().unwrap().count, 40.0);
    // The log's counters and its sync histogram.
    assert!(value(&samples, "fast_cache_wal_mutations_total", &[]) >= 41.0);
    assert!(value(&samples, "fast_cache_wal_bytes_total", &[]) > 0.0);
    assert_eq!(value(&samples, "redis_aof_enabled", &[]), 1.0);
    // INFO says the same (read after the scrape: only INFO itself has run since).
    assert_eq!(
        info_field(&mut con, "stats", "keyspace_hits"),
        value(&samples, "redis_keyspace_hits_total", &[]) as i64
    );
    assert_eq!(
        info_field(&mut con, "memory", "used_memory"),
        value(&samples, "redis_memory_used_bytes", &[]) as i64
    );
    drop(con);
    server.shutdown();
}

#[test]
fn cross_worker_hops_count_clients_work_and_not_scrapes() {
    // One worker: nothing ever hops, whatever clients and scrapes do.
    let server = with_admin(1, None);
    let mut con = client(&server);
    let _: () = redis::cmd("MSET")
        .arg(&["a", "1", "b", "2", "c", "3"])
        .query(&mut con)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            total(
                &scrape(&server),
                "fast_cache_worker_cross_worker_hops_total"
            ),
            0.0
        );
    }
    drop(con);
    server.shutdown();

    // Two workers: scrapes (which ask every worker) add none; a multi-key write does.
    let server = with_admin(2, None);
    let hops =
        |server: &ServerHandle| total(&scrape(server), "fast_cache_worker_cross_worker_hops_total");
    let before = hops(&server);
    assert_eq!(hops(&server), before, "a scrape is not a client's hop");
    let mut con = client(&server);
    let pairs: Vec<String> = (0..32)
        .flat_map(|i| [format!("key{i}"), "v".into()])
        .collect();
    let _: () = redis::cmd("MSET").arg(&pairs).query(&mut con).unwrap();
    assert!(hops(&server) > before, "keys on both workers: hops");
    drop(con);
    server.shutdown();
}

#[test]
fn probes_answer_and_bad_requests_harm_no_one() {
    let server = with_admin(2, None);
    let admin = server.admin_addr().unwrap();
    let (status, _, body) = get(admin, "/health");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ok\n")
    );
    let (status, _, body) = get(admin, "/ready");
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "ready\n")
    );
    let (status, ..) = get(admin, "/nowhere");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, headers, _) = http(
        admin,
        b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(headers.contains("allow: get, head"), "{headers}");
    let (status, headers, body) = http(
        admin,
        b"HEAD /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("content-type: text/plain; version=0.0.4"));
    assert!(body.is_empty());
    // Garbage is answered 400 and closed; a client that sends half a request and stalls
    // holds only its own connection.
    let (status, ..) = http(admin, b"\x16\x03\x01garbage\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let mut stalled = TcpStream::connect(admin).unwrap();
    stalled.write_all(b"GET /metr").unwrap();
    let mut con = client(&server);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let samples = scrape(&server);
    assert_eq!(value(&samples, "redis_db_keys", &[("db", "db0")]), 1.0);
    drop(stalled);
    drop(con);
    server.shutdown();
}

#[test]
fn no_admin_port_unless_asked() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        ..ServerConfig::default()
    });
    assert_eq!(server.admin_addr(), None);
    server.shutdown();
}
