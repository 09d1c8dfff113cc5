//! Administration commands: `CONFIG REWRITE` (a round trip through the TOML file), `DEBUG`'s
//! subcommands, and clients killed in every state leaving the server's counts at their idle
//! values.

mod common;

use common::{Raw, client, info_field, start};
use fc_server::ServerConfig;
use fc_server::config::FastCacheConfig;

#[test]
fn config_rewrite_round_trips_through_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fast-cache.toml");
    let original = "# the operator's notes\n[server]\nbind = \"127.0.0.1:0\"\n# clients at most\nmaxclients = 500 # keep low\ntimeout = 0\n\n[storage]\nshards = 8\n";
    std::fs::write(&path, original).unwrap();
    let load = || {
        let mut config = FastCacheConfig::load_from_path(&path)
            .unwrap()
            .server_config()
            .unwrap();
        config.config_file = Some(path.clone());
        config.threads = 2;
        start(config)
    };
    let server = load();
    let mut con = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(77)
        .arg("slowlog-max-len")
        .arg(9)
        .arg("hz")
        .arg(20)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut con).unwrap();
    drop(con);
    server.shutdown();
    let text = std::fs::read_to_string(&path).unwrap();
    // Comments and untouched keys survive; changed keys change in place; changed keys the
    // file lacked are added; defaults it lacked are not.
    for kept in [
        "# the operator's notes",
        "# clients at most",
        "# keep low",
        "shards = 8",
    ] {
        assert!(text.contains(kept), "{kept} in {text}");
    }
    assert!(text.contains("maxclients = 77"), "{text}");
    assert!(text.contains("slowlog_max_len = 9"), "{text}");
    assert!(text.contains("hz = 20"), "{text}");
    assert!(!text.contains("latency_monitor_threshold"), "{text}");
    let server = load();
    let mut con = client(&server);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .arg("hz")
        .arg("slowlog-max-len")
        .arg("timeout")
        .query(&mut con)
        .unwrap();
    let mut pairs: Vec<(String, String)> = got
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [
            ("hz".to_string(), "20".to_string()),
            ("maxclients".to_string(), "77".to_string()),
            ("slowlog-max-len".to_string(), "9".to_string()),
            ("timeout".to_string(), "0".to_string()),
        ]
    );
    server.shutdown();
    // Without a file: Redis's error.
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        ..ServerConfig::default()
    });
    let mut c = Raw::open(server.addr());
    c.send(&["CONFIG", "REWRITE"]);
    c.expect(b"-ERR The server is running without a config file\r\n");
    let mut con = client(&server);
    assert_eq!(info_field(&mut con, "clients", "connected_clients"), 2);
    server.shutdown();
}

#[test]
fn debug_subcommands_answer_as_redis_does() {
    let server = common::two_workers();
    let mut c = Raw::open(server.addr());
    let mut con = client(&server);
    let _: () = redis::cmd("SET")
        .arg("n")
        .arg(12345)
        .query(&mut con)
        .unwrap();
    let line: String = redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg("n")
        .query(&mut con)
        .unwrap();
    let fields: Vec<&str> = line.split(' ').collect();
    assert!(
        fields[0] == "Value" && fields[1].starts_with("at:0x"),
        "{line}"
    );
    assert_eq!(&fields[2..4], ["refcount:1", "encoding:int"], "{line}");
    assert!(fields[4].starts_with("serializedlength:"), "{line}");
    assert!(
        fields[5].starts_with("lru:") && fields[6] == "lru_seconds_idle:0",
        "{line}"
    );
    let _: () = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .query(&mut con)
        .unwrap();
    let line: String = redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg("l")
        .query(&mut con)
        .unwrap();
    assert!(line.contains(" encoding:listpack "), "{line}");
    c.send(&["DEBUG", "OBJECT", "nokey"]);
    c.expect(b"-ERR no such key\r\n");
    c.send(&["DEBUG", "OBJECT"]);
    c.expect(
        b"-ERR unknown subcommand or wrong number of arguments for 'OBJECT'. Try DEBUG HELP.\r\n",
    );
    c.send(&["DEBUG", "nope", "x"]);
    c.expect(
        b"-ERR unknown subcommand or wrong number of arguments for 'nope'. Try DEBUG HELP.\r\n",
    );
    c.send(&["DEBUG", "ERROR", "bad thing"]);
    c.expect(b"-bad thing\r\n");
    c.send(&["DEBUG", "STRINGMATCH-TEST"]);
    c.expect(b"+Apparently Redis did not crash: test passed\r\n");
    c.send(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "x"]);
    c.expect(b"-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n");
    c.send(&["DEBUG", "CHANGE-REPL-ID"]);
    c.expect(b"+OK\r\n");
    // SET-ACTIVE-EXPIRE 0 stops active expiry: a key past its TTL stays counted until 1.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg(100)
        .query(&mut con)
        .unwrap();
    c.send(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.expect(b"+OK\r\n");
    let _: () = redis::cmd("SET")
        .arg("gone")
        .arg(1)
        .arg("PX")
        .arg(20)
        .query(&mut con)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(info_field(&mut con, "stats", "expired_keys"), 0);
    c.send(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    c.expect(b"+OK\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while info_field(&mut con, "stats", "expired_keys") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "active expiry restarted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.shutdown();
}

/// Polls `field` of INFO `section` until it is `want` (10 s at most).
fn wait_for(con: &mut redis::Connection, section: &str, field: &str, want: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = info_field(con, section, field);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{field} is {got}, not {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn clients_killed_in_every_state_leave_nothing_behind() {
    let server = common::two_workers();
    let mut admin = client(&server);
    let idle = [
        ("clients", "blocked_clients"),
        ("clients", "tracking_clients"),
        ("clients", "total_blocking_keys"),
        ("stats", "pubsub_channels"),
        ("stats", "pubsub_patterns"),
        ("stats", "tracking_total_keys"),
        ("stats", "tracking_total_items"),
        ("stats", "tracking_total_prefixes"),
        ("memory", "used_memory"),
    ];
    let before: Vec<i64> = idle
        .iter()
        .map(|(s, f)| info_field(&mut admin, s, f))
        .collect();
    let mut blocked = Raw::open(server.addr());
    blocked.send(&["BLPOP", "q1", "q2", "0"]);
    let mut subscribed = Raw::open(server.addr());
    subscribed.send(&["SUBSCRIBE", "c1", "c2"]);
    subscribed.send(&["PSUBSCRIBE", "p*"]);
    let mut multi = Raw::open(server.addr());
    multi.send(&["WATCH", "w"]);
    multi.expect(b"+OK\r\n");
    multi.send(&["MULTI"]);
    multi.expect(b"+OK\r\n");
    multi.send(&["SET", "a", "1"]);
    multi.expect(b"+QUEUED\r\n");
    let mut tracking = Raw::open(server.addr());
    tracking.send(&["CLIENT", "TRACKING", "on"]);
    tracking.expect(b"+OK\r\n");
    for k in ["k1", "k2", "k3"] {
        tracking.send(&["GET", k]);
        tracking.expect(b"$-1\r\n");
    }
    let mut bcast = Raw::open(server.addr());
    bcast.send(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x:"]);
    bcast.expect(b"+OK\r\n");
    let mut monitor = Raw::open(server.addr());
    monitor.send(&["MONITOR"]);
    monitor.expect(b"+OK\r\n");
    wait_for(&mut admin, "clients", "blocked_clients", 1);
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(100_000)
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    let mut paused = Raw::open(server.addr());
    paused.send(&["SET", "p", "1"]);
    wait_for(&mut admin, "clients", "blocked_clients", 2);
    assert_eq!(info_field(&mut admin, "clients", "connected_clients"), 8);
    assert_eq!(info_field(&mut admin, "clients", "total_blocking_keys"), 2);
    assert_eq!(info_field(&mut admin, "clients", "tracking_clients"), 2);
    assert_eq!(info_field(&mut admin, "stats", "pubsub_channels"), 2);
    assert_eq!(info_field(&mut admin, "stats", "pubsub_patterns"), 1);
    assert_eq!(info_field(&mut admin, "stats", "tracking_total_keys"), 3);
    assert_eq!(
        info_field(&mut admin, "stats", "tracking_total_prefixes"),
        1
    );
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    for flags in [
        "flags=b ",
        "flags=P ",
        "flags=x ",
        "flags=t ",
        "flags=tB ",
        "flags=O ",
    ] {
        assert!(list.contains(flags), "{flags} in {list}");
    }
    let normal: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    let pubsub: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    assert_eq!((normal, pubsub), (6, 1));
    // Killed while paused: gone before the pause ends.
    wait_for(&mut admin, "clients", "connected_clients", 1);
    let after: Vec<i64> = idle
        .iter()
        .map(|(s, f)| info_field(&mut admin, s, f))
        .collect();
    assert_eq!(after, before, "{idle:?}");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    // The paused write never ran.
    let p: Option<String> = redis::cmd("GET").arg("p").query(&mut admin).unwrap();
    assert_eq!(p, None);
    server.shutdown();
}
