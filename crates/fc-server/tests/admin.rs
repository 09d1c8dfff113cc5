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
