//! The client against an in-process fc-server: every call, pipelines, direct shard ports with
//! no cross-worker hop, authentication, typed errors, timeouts and reconnection.

use std::time::Duration;

use fc_client::{Client, ClientConfig, Error, SetOptions, Value};
use fc_server::{Server, ServerConfig, ServerHandle};

fn server(config: ServerConfig) -> ServerHandle {
    Server::start(ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        shards: 8,
        threads: 2,
        ..config
    })
    .expect("server starts")
}

fn hops(info: &Value) -> i64 {
    let Value::Verbatim { text, .. } = info else {
        panic!("{info:?}")
    };
    String::from_utf8_lossy(text)
        .lines()
        .find_map(|l| l.strip_prefix("cross_worker_hops:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn every_call_reaches_the_server() {
    let server = server(ServerConfig::default());
    let client = Client::connect(ClientConfig::new(server.addr()).pool_size(3))
        .await
        .unwrap();
    client.set("k", "v").await.unwrap();
    assert_eq!(client.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(client.get("missing").await.unwrap(), None);
    assert!(
        !client
            .set_with("k", "w", SetOptions::new().nx())
            .await
            .unwrap()
    );
    assert!(
        client
            .set_with(
                "t",
                "w",
                SetOptions::new().nx().ttl(Duration::from_secs(100))
            )
            .await
            .unwrap()
    );
    let ttl = client.ttl("t").await.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(90), "{ttl:?}");
    assert!(client.persist("t").await.unwrap());
    assert_eq!(client.ttl("t").await.unwrap(), None);
    assert!(client.expire("t", Duration::from_secs(50)).await.unwrap());
    assert_eq!(client.incr_by("n", 40).await.unwrap(), 40);
    assert_eq!(client.incr_by("n", 2).await.unwrap(), 42);
    assert_eq!(client.append("s", "ab").await.unwrap(), 2);
    assert_eq!(
        client.get_del("s").await.unwrap().as_deref(),
        Some(&b"ab"[..])
    );
    client.mset(&[("a", "1"), ("b", "2")]).await.unwrap();
    let packed = client.mget(&["a", "nope", "b"]).await.unwrap();
    assert_eq!(
        packed.iter().collect::<Vec<_>>(),
        [Some(&b"1"[..]), None, Some(b"2")]
    );
    assert_eq!(client.exists(&["a", "b", "nope"]).await.unwrap(), 2);
    assert_eq!(client.del(&["a", "b"]).await.unwrap(), 2);
    // Any command, typed; an error reply is Error::Server with Redis's text.
    assert_eq!(
        client.command(&["SADD", "set", "m"]).await.unwrap(),
        Value::Int(1)
    );
    let err = client.get("set").await.unwrap_err();
    assert!(
        matches!(&err, Error::Server(t) if t.starts_with("WRONGTYPE")),
        "{err}"
    );
    let err = client.incr_by("k", 1).await.unwrap_err();
    assert!(
        matches!(&err, Error::Server(t) if t.contains("not an integer")),
        "{err}"
    );
    // Many tasks share the pool's connections at once.
    let mut tasks = Vec::new();
    for t in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200 {
                let key = format!("task{t}:{i}");
                client.set(&key, &key).await.unwrap();
                assert_eq!(
                    client.get(&key).await.unwrap().as_deref(),
                    Some(key.as_bytes())
                );
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    server.shutdown();
}

#[tokio::test]
async fn pipelines_go_in_one_write_and_come_back_in_order() {
    let server = server(ServerConfig::default());
    let client = Client::connect(ClientConfig::new(server.addr()))
        .await
        .unwrap();
    let mut pipe = client.pipeline();
    for i in 0..500 {
        pipe.set(format!("p{i}"), format!("{i}"));
        pipe.get(format!("p{i}"));
    }
    pipe.command(&["HSET", "p0", "f", "v"]);
    pipe.del("p1");
    assert_eq!(pipe.len(), 1002);
    let replies = pipe.run(&client).await.unwrap();
    assert!(pipe.is_empty());
    for i in 0..500 {
        assert_eq!(replies[2 * i], Value::Status("OK".into()));
        assert_eq!(replies[2 * i + 1], Value::Bulk(format!("{i}").into()));
    }
    // An error reply stays in its place.
    assert!(replies[1000].as_error().unwrap().starts_with(b"WRONGTYPE"));
    assert_eq!(replies[1001], Value::Int(1));
    server.shutdown();
}

#[tokio::test]
async fn direct_ports_make_no_cross_worker_hop() {
    let server = server(ServerConfig {
        direct_shard_ports: Some(None),
        ..ServerConfig::default()
    });
    let direct = server.direct_addrs().to_vec();
    // Ephemeral direct ports are not consecutive; with a base port they would be. Route by
    // hand through a client per shard for this check, and through the config's base below.
    let fanout = Client::connect(ClientConfig::new(server.addr()))
        .await
        .unwrap();
    let before = hops(&fanout.command(&["INFO", "stats"]).await.unwrap());
    let router = fc_route::ShardRouter::new(8, fc_route::EmbeddedRouteMode::Namespaced);
    for (shard, addr) in direct.iter().enumerate() {
        let mut config = ClientConfig::new(*addr);
        config.direct = None;
        let one = Client::connect(config).await.unwrap();
        for i in 0..2000 {
            let key = format!("key:{i}");
            if router.shard_of(&router.route_key(key.as_bytes())) == shard {
                one.set(&key, "v").await.unwrap();
                assert!(one.get(&key).await.unwrap().is_some());
            }
        }
    }
    assert_eq!(
        hops(&fanout.command(&["INFO", "stats"]).await.unwrap()),
        before
    );
    server.shutdown();
}

#[tokio::test]
async fn the_client_routes_to_consecutive_direct_ports() {
    // A base port free for 8 consecutive ports: bind, note, release.
    let base = loop {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        if port < 60_000
            && (1..=8).all(|i| std::net::TcpListener::bind(("127.0.0.1", port + i)).is_ok())
        {
            break port + 1;
        }
    };
    let server = server(ServerConfig {
        direct_shard_ports: Some(Some(base)),
        ..ServerConfig::default()
    });
    let config = ClientConfig::new(server.addr())
        .direct_ports(format!("127.0.0.1:{base}").parse().unwrap(), 8);
    let client = Client::connect(config).await.unwrap();
    let before = hops(&client.command(&["INFO", "stats"]).await.unwrap());
    for i in 0..500 {
        let key = format!("user:{i}");
        client.set(&key, "x").await.unwrap();
        assert_eq!(client.get(&key).await.unwrap().as_deref(), Some(&b"x"[..]));
    }
    // A session's keys (one hash tag) are one shard: MGET goes there, packed.
    let keys: Vec<String> = (0..16)
        .map(|i| format!("{{session:7}}:layer:{i}"))
        .collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "chunk")).collect();
    client.mset(&pairs).await.unwrap();
    let packed = client.mget(&keys).await.unwrap();
    assert_eq!(packed.len(), 16);
    assert_eq!(packed.data.len(), 16 * 5);
    assert_eq!(
        hops(&client.command(&["INFO", "stats"]).await.unwrap()),
        before
    );
    server.shutdown();
}

#[tokio::test]
async fn authentication_and_typed_failures() {
    let server = server(ServerConfig {
        requirepass: Some("pw".into()),
        ..ServerConfig::default()
    });
    let anonymous = Client::connect(ClientConfig::new(server.addr()))
        .await
        .unwrap();
    let err = anonymous.get("k").await.unwrap_err();
    assert!(
        matches!(&err, Error::Server(t) if t.starts_with("NOAUTH")),
        "{err}"
    );
    let wrong = Client::connect(ClientConfig::new(server.addr()).auth(None, "nope")).await;
    assert!(matches!(&wrong, Err(Error::Server(t)) if t.starts_with("WRONGPASS")));
    let client = Client::connect(ClientConfig::new(server.addr()).auth(None, "pw"))
        .await
        .unwrap();
    client.set("k", "v").await.unwrap();
    // Killed from outside: the call in flight fails, a later one reconnects (and
    // authenticates again).
    let Value::Int(id) = client.command(&["CLIENT", "ID"]).await.unwrap() else {
        panic!()
    };
    let admin = Client::connect(ClientConfig::new(server.addr()).auth(None, "pw"))
        .await
        .unwrap();
    admin
        .command(&["CLIENT", "KILL", "ID", &id.to_string()])
        .await
        .unwrap();
    let mut served = None;
    for _ in 0..5 {
        match client.get("k").await {
            Ok(v) => {
                served = v;
                break;
            }
            Err(Error::Closed | Error::Io(_)) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(served.as_deref(), Some(&b"v"[..]));
    server.shutdown();
    // A server that never answers: the call times out.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config =
        ClientConfig::new(silent.local_addr().unwrap()).timeout(Duration::from_millis(200));
    let client = Client::connect(config).await.unwrap();
    assert!(matches!(client.get("k").await, Err(Error::Timeout)));
}

#[test]
fn the_blocking_client_needs_no_runtime() {
    let server = server(ServerConfig::default());
    let client = fc_client::blocking::Client::connect(ClientConfig::new(server.addr())).unwrap();
    client.set("k", "v").unwrap();
    assert_eq!(client.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(client.incr_by("n", 5).unwrap(), 5);
    client.mset(&[("a", "1")]).unwrap();
    assert_eq!(client.mget(&["a", "b"]).unwrap().get(0), Some(&b"1"[..]));
    let mut pipe = client.pipeline();
    pipe.get("k").get("a");
    assert_eq!(
        client.run(&mut pipe).unwrap(),
        [Value::Bulk("v".into()), Value::Bulk("1".into())]
    );
    assert_eq!(client.command(&["DBSIZE"]).unwrap(), Value::Int(3));
    server.shutdown();
}
