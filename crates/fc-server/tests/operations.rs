//! What operators and client libraries rely on beyond the data commands: the handshakes of
//! common clients byte for byte, RESP3, many connections, `CLIENT LIST/KILL`, `WATCH`,
//! `MSETNX` across workers, `CONFIG SET`, the idle timeout, output limits, and stopping
//! (`SHUTDOWN`, SIGTERM) with a config file — the last ones through the real binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod common;

use common::{
    client, on_a_free_port, raw, read_all, spawn_binary, start, try_spawn_binary, two_workers,
};
use fc_server::ServerConfig;
use redis::{Commands, Value};

/// A RESP command as a client library encodes it.
fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// The HELLO reply with the connection id masked (`:ID`).
fn mask_id(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    match text.find("$2\r\nid\r\n:") {
        Some(at) => {
            let start = at + "$2\r\nid\r\n:".len();
            let end = start + text[start..].find("\r\n").unwrap();
            format!("{}ID{}", &text[..start], &text[end..])
        }
        None => text,
    }
}

fn hello_reply(proto: u8) -> String {
    let map = if proto == 3 { "%7" } else { "*14" };
    format!(
        "{map}\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n$5\r\nproto\r\n:{proto}\r\n$2\r\nid\r\n:ID\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
    )
}

#[test]
fn handshakes_of_common_clients_byte_for_byte() {
    let server = start(ServerConfig {
        shards: 4,
        threads: 1,
        requirepass: Some("pw".into()),
        ..ServerConfig::default()
    });
    let setinfo = |lib: &str, ver: &str| {
        [
            cmd(&["CLIENT", "SETINFO", "LIB-NAME", lib]),
            cmd(&["CLIENT", "SETINFO", "LIB-VER", ver]),
        ]
        .concat()
    };
    // (client, what it sends on connect, exactly what it must get back)
    let table: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "redis-cli -a pw (RESP2)",
            cmd(&["AUTH", "pw"]),
            "+OK\r\n".into(),
        ),
        (
            "redis-cli -3 -a pw",
            cmd(&["HELLO", "3", "AUTH", "default", "pw"]),
            hello_reply(3),
        ),
        (
            "redis-py 5 (AUTH, then CLIENT SETINFO pipelined)",
            [
                cmd(&["AUTH", "pw"]),
                setinfo("redis-py", "5.0.1"),
                cmd(&["PING"]),
            ]
            .concat(),
            "+OK\r\n+OK\r\n+OK\r\n+PONG\r\n".into(),
        ),
        (
            "go-redis v9 (HELLO 3 AUTH + SETINFO in one pipeline)",
            [
                cmd(&["HELLO", "3", "AUTH", "default", "pw"]),
                setinfo("go-redis(,go1.22.1)", "9.5.1"),
            ]
            .concat(),
            format!("{}+OK\r\n+OK\r\n", hello_reply(3)),
        ),
        (
            "Jedis 5 (AUTH, SETINFO, SELECT 0)",
            [
                cmd(&["AUTH", "default", "pw"]),
                setinfo("jedis", "5.1.0"),
                cmd(&["SELECT", "0"]),
            ]
            .concat(),
            "+OK\r\n+OK\r\n+OK\r\n+OK\r\n".into(),
        ),
        (
            "ioredis 5 (AUTH, CLIENT SETNAME, then the INFO ready check)",
            [
                cmd(&["AUTH", "pw"]),
                cmd(&["CLIENT", "SETNAME", "app"]),
                cmd(&["CLIENT", "GETNAME"]),
            ]
            .concat(),
            "+OK\r\n+OK\r\n$3\r\napp\r\n".into(),
        ),
        (
            "redis-rs (HELLO 3 AUTH then SETINFO)",
            [
                cmd(&["HELLO", "3", "AUTH", "default", "pw"]),
                setinfo("redis-rs", "0.32.0"),
            ]
            .concat(),
            format!("{}+OK\r\n+OK\r\n", hello_reply(3)),
        ),
        (
            "any client before AUTH",
            cmd(&["CLIENT", "SETINFO", "LIB-NAME", "x"]),
            "-NOAUTH Authentication required.\r\n".into(),
        ),
        (
            "HELLO 2 AUTH (RESP2 reply: a flat array)",
            cmd(&["HELLO", "2", "AUTH", "default", "pw"]),
            hello_reply(2),
        ),
        (
            "go-redis fallback: HELLO with an unsupported protocol",
            cmd(&["HELLO", "4"]),
            "-NOPROTO unsupported protocol version\r\n".into(),
        ),
    ];
    for (who, request, expected) in &table {
        let reply = mask_id(&raw(&server, request));
        assert_eq!(&reply, expected, "{who}");
    }
    // ioredis's ready check: INFO must say loading:0.
    let info = raw(&server, &[cmd(&["AUTH", "pw"]), cmd(&["INFO"])].concat());
    let info = String::from_utf8_lossy(&info);
    assert!(info.starts_with("+OK\r\n$"), "{info}");
    assert!(info.contains("\r\nloading:0\r\n"), "{info}");
    // CLIENT LIST shows the library a client named.
    let list = raw(
        &server,
        &[
            cmd(&["AUTH", "pw"]),
            setinfo("redis-py", "5.0.1"),
            cmd(&["CLIENT", "LIST"]),
        ]
        .concat(),
    );
    let list = String::from_utf8_lossy(&list);
    assert!(list.contains("lib-name=redis-py lib-ver=5.0.1"), "{list}");
    server.shutdown();
}

#[test]
fn resp3_replies_after_hello_3() {
    let server = two_workers();
    let mut c = client(&server);
    let _: () = redis::cmd("HSET")
        .arg(&["h", "f", "v"])
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SADD").arg(&["s", "m"]).query(&mut c).unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&["z", "1.5", "m"])
        .query(&mut c)
        .unwrap();
    let request = [
        cmd(&["HELLO", "3"]),
        cmd(&["HGETALL", "h"]),
        cmd(&["SMEMBERS", "s"]),
        cmd(&["ZSCORE", "z", "m"]),
        cmd(&["GET", "missing"]),
        cmd(&["EXISTS", "h"]),
        cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(&["CONFIG", "GET", "maxclients"]),
    ]
    .concat();
    let reply = mask_id(&raw(&server, &request));
    let expected = format!(
        "{}%1\r\n$1\r\nf\r\n$1\r\nv\r\n~1\r\n$1\r\nm\r\n,1.5\r\n_\r\n:1\r\n*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n",
        hello_reply(3)
    );
    assert_eq!(reply, expected);
    // redis-rs speaking RESP3 decodes the same replies into maps and sets.
    let mut c3 = redis::Client::open(format!("redis://{}/?protocol=resp3", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let map: Value = redis::cmd("HGETALL").arg("h").query(&mut c3).unwrap();
    assert!(matches!(map, Value::Map(ref m) if m.len() == 1), "{map:?}");
    let set: Value = redis::cmd("SMEMBERS").arg("s").query(&mut c3).unwrap();
    assert!(matches!(set, Value::Set(ref s) if s.len() == 1), "{set:?}");
    let score: f64 = redis::cmd("ZSCORE")
        .arg(&["z", "m"])
        .query(&mut c3)
        .unwrap();
    assert!((score - 1.5).abs() < f64::EPSILON);
    server.shutdown();
}

#[test]
fn two_hundred_concurrent_connections() {
    let server = two_workers();
    let mut conns: Vec<redis::Connection> = (0..200).map(|_| client(&server)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let _: () = c.set(format!("c{i}"), i).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate().rev() {
        let v: usize = c.get(format!("c{i}")).unwrap();
        assert_eq!(v, i);
    }
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut conns[0])
        .unwrap();
    assert!(info.contains("connected_clients:200\r\n"), "{info}");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut conns[0])
        .unwrap();
    assert_eq!(list.lines().count(), 200);
    drop(conns);
    server.shutdown();
}

fn client_id(c: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(c).unwrap()
}

#[test]
fn client_list_info_and_kill() {
    let server = two_workers();
    let mut a = client(&server);
    let mut b = client(&server);
    let _: () = redis::cmd("CLIENT")
        .arg(&["SETNAME", "worker-b"])
        .query(&mut b)
        .unwrap();
    let b_id = client_id(&mut b);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut a).unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    let b_line = list
        .lines()
        .find(|l| l.starts_with(&format!("id={b_id} ")))
        .unwrap();
    assert!(b_line.contains(" name=worker-b "), "{b_line}");
    let only_b: String = redis::cmd("CLIENT")
        .arg(&["LIST", "ID", &b_id.to_string()])
        .query(&mut a)
        .unwrap();
    assert_eq!(only_b.lines().count(), 1);
    let me: String = redis::cmd("CLIENT").arg("INFO").query(&mut b).unwrap();
    assert!(me.starts_with(&format!("id={b_id} ")) && me.contains("cmd=client|info"));
    // New form: the count killed; the killed client's next command finds the socket closed.
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "ID", &b_id.to_string()])
        .query(&mut a)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(redis::cmd("PING").query::<String>(&mut b).is_err());
    let none: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "ID", "999999"])
        .query(&mut a)
        .unwrap();
    assert_eq!(none, 0);
    // Old form, by address.
    let mut s = TcpStream::connect(server.addr()).unwrap();
    let addr = s.local_addr().unwrap().to_string();
    s.write_all(&cmd(&["PING"])).unwrap();
    let mut pong = [0u8; 7];
    s.read_exact(&mut pong).unwrap();
    let ok: String = redis::cmd("CLIENT")
        .arg(&["KILL", &addr])
        .query(&mut a)
        .unwrap();
    assert_eq!(ok, "OK");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert_eq!(s.read(&mut pong).unwrap(), 0, "killed socket is closed");
    let err = redis::cmd("CLIENT")
        .arg(&["KILL", "1.2.3.4:5"])
        .query::<Value>(&mut a)
        .unwrap_err();
    assert!(err.to_string().contains("No such client"), "{err}");
    // The killer is unharmed, and the registry forgot the dead.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut a).unwrap();
    assert_eq!(list.lines().count(), 1, "{list}");
    server.shutdown();
}

/// Two keys owned by different workers (shards 8, threads 2: owner = shard % 2).
fn keys_on_both_workers(c: &mut redis::Connection) -> (String, String) {
    let _ = c;
    let router = fc_shard::ShardRouter::new(8, fc_shard::EmbeddedRouteMode::FullKey);
    let owner = |k: &str| router.shard_of(&router.route_key(k.as_bytes())) % 2;
    let a = (0..)
        .map(|i| format!("w{i}"))
        .find(|k| owner(k) == 0)
        .unwrap();
    let b = (0..)
        .map(|i| format!("w{i}"))
        .find(|k| owner(k) == 1)
        .unwrap();
    (a, b)
}

#[test]
fn watch_makes_exec_fail_after_any_change() {
    let server = two_workers();
    let mut c = client(&server);
    let mut other = client(&server);
    let (a, b) = keys_on_both_workers(&mut c);
    let exec = |c: &mut redis::Connection, key: &str| -> Value {
        let _: () = redis::cmd("MULTI").query(c).unwrap();
        let _: () = redis::cmd("SET").arg(&[key, "mine"]).query(c).unwrap();
        redis::cmd("EXEC").query(c).unwrap()
    };
    // Unchanged: EXEC runs.
    let _: () = redis::cmd("WATCH").arg(&[&a, &b]).query(&mut c).unwrap();
    assert!(matches!(exec(&mut c, &a), Value::Array(ref v) if v.len() == 1));
    // Another client writes a watched key on the other worker: EXEC aborts (nil).
    let _: () = redis::cmd("WATCH").arg(&[&a, &b]).query(&mut c).unwrap();
    let _: () = other.set(&b, "theirs").unwrap();
    assert_eq!(exec(&mut c, &a), Value::Nil);
    let v: String = c.get(&a).unwrap();
    assert_eq!(v, "mine", "the aborted transaction wrote nothing new");
    // Writing the same value still counts as a change (as in Redis).
    let _: () = redis::cmd("WATCH").arg(&b).query(&mut c).unwrap();
    let _: () = other.set(&b, "theirs").unwrap();
    assert_eq!(exec(&mut c, &a), Value::Nil);
    // Expiry after WATCH is a change; so is FLUSHALL.
    let _: () = redis::cmd("SET")
        .arg(&[&b, "short", "PX", "50"])
        .query(&mut other)
        .unwrap();
    let _: () = redis::cmd("WATCH").arg(&b).query(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(exec(&mut c, &a), Value::Nil);
    let _: () = redis::cmd("WATCH").arg(&a).query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut other).unwrap();
    assert_eq!(exec(&mut c, &a), Value::Nil);
    // UNWATCH forgets; EXEC unwatches too (the next transaction is free).
    let _: () = redis::cmd("WATCH").arg(&a).query(&mut c).unwrap();
    let _: () = redis::cmd("UNWATCH").query(&mut c).unwrap();
    let _: () = other.set(&a, "x").unwrap();
    assert!(matches!(exec(&mut c, &a), Value::Array(_)));
    // WATCH inside MULTI is an error (and the transaction still runs: Redis does not flag it).
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    let err = redis::cmd("WATCH")
        .arg(&a)
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("WATCH inside MULTI is not allowed")
    );
    let _: () = redis::cmd("DISCARD").query(&mut c).unwrap();
    server.shutdown();
}

#[test]
fn optimistic_counters_with_watch_never_lose_an_increment() {
    let server = two_workers();
    let addr = server.addr();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                for _ in 0..50 {
                    // redis-rs's transaction helper: WATCH, read, MULTI/EXEC, retry on nil.
                    let _: () = redis::transaction(&mut c, &["counter"], |c, pipe| {
                        let n: i64 = c.get("counter").unwrap_or(0);
                        pipe.set("counter", n + 1).ignore().query(c)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = client(&server);
    let n: i64 = c.get("counter").unwrap();
    assert_eq!(n, 200, "a read-modify-write under WATCH was lost");
    server.shutdown();
}

#[test]
fn msetnx_is_atomic_across_workers() {
    let server = two_workers();
    let mut c = client(&server);
    let (a, b) = keys_on_both_workers(&mut c);
    let set: i64 = redis::cmd("MSETNX")
        .arg(&[&a, "1", &b, "2"])
        .query(&mut c)
        .unwrap();
    assert_eq!(set, 1);
    let both: Vec<String> = c.mget(&[&a, &b]).unwrap();
    assert_eq!(both, ["1", "2"]);
    let fresh = format!("{a}-fresh");
    let set: i64 = redis::cmd("MSETNX")
        .arg(&[&fresh, "x", &b, "y"])
        .query(&mut c)
        .unwrap();
    assert_eq!(set, 0, "one key exists: nothing is set");
    let none: Option<String> = c.get(&fresh).unwrap();
    assert_eq!(none, None);
    let kept: String = c.get(&b).unwrap();
    assert_eq!(kept, "2");
    // Inside a transaction too.
    let _: () = redis::cmd("DEL").arg(&[&a, &b]).query(&mut c).unwrap();
    let (r,): (i64,) = redis::pipe()
        .atomic()
        .cmd("MSETNX")
        .arg(&[&a, "3", &b, "4"])
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 1);
    let both: Vec<String> = c.mget(&[&a, &b]).unwrap();
    assert_eq!(both, ["3", "4"]);
    server.shutdown();
}

#[test]
fn config_set_changes_live_settings() {
    let server = start(ServerConfig {
        shards: 4,
        threads: 2,
        maxmemory: Some(64 << 20),
        maxmemory_policy: fc_shard::EvictionPolicy::Lru,
        ..ServerConfig::default()
    });
    let mut c = client(&server);
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let pairs: Vec<String> = redis::cmd("CONFIG").arg(&["GET", name]).query(c).unwrap();
        pairs[1].clone()
    };
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxclients", "500", "timeout", "30"])
        .query(&mut c)
        .unwrap();
    assert_eq!(get(&mut c, "maxclients"), "500");
    assert_eq!(get(&mut c, "timeout"), "30");
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 1mb 0 10"])
        .query(&mut c)
        .unwrap();
    assert!(get(&mut c, "client-output-buffer-limit").starts_with("normal 1048576 0 10 "));
    // maxmemory shrinks live, and LRU evicts down to it.
    for i in 0..2000 {
        let _: () = c.set(format!("m{i}"), "x".repeat(1000)).unwrap();
    }
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "512kb"])
        .query(&mut c)
        .unwrap();
    assert_eq!(get(&mut c, "maxmemory"), "524288");
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(info.contains("maxmemory:524288\r\n"), "{info}");
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(
        dbsize < 600,
        "evicted down to the new limit: {dbsize} keys left"
    );
    // Errors, with nothing applied when one pair of several is bad.
    let err = |c: &mut redis::Connection, args: &[&str]| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(args)
            .query::<Value>(c)
            .unwrap_err()
            .to_string()
    };
    let e = err(&mut c, &["maxclients", "7", "port", "1"]);
    assert!(e.contains("can't set immutable config"), "{e}");
    assert_eq!(get(&mut c, "maxclients"), "500");
    let e = err(&mut c, &["bogus", "1"]);
    assert!(
        e.contains("Unknown option or number of arguments for CONFIG SET - 'bogus'"),
        "{e}"
    );
    let e = err(&mut c, &["maxclients", "many"]);
    assert!(
        e.contains("argument couldn't be parsed into an integer"),
        "{e}"
    );
    // requirepass applies to new connections; this one stays authenticated.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "s3"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        raw(&server, &cmd(&["PING"])),
        b"-NOAUTH Authentication required.\r\n"
    );
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    server.shutdown();

    // A server started without a limit cannot take one live (eviction bookkeeping starts
    // with the first entry); it says so and changes nothing.
    let server = two_workers();
    let mut c = client(&server);
    let e = err(&mut c, &["maxmemory", "1mb"]);
    assert!(
        e.contains("possibly related to argument 'maxmemory'") && e.contains("built with one"),
        "{e}"
    );
    assert_eq!(get(&mut c, "maxmemory"), "0");
    server.shutdown();
}

#[test]
fn idle_clients_are_closed_after_the_timeout() {
    let server = two_workers();
    let mut c = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "timeout", "3"])
        .query(&mut c)
        .unwrap();
    drop(c);
    // An active client (a command every 100 ms, for longer than the timeout) keeps its
    // connection meanwhile; the margins leave room for a VM that stalls for a second or two.
    let addr = server.addr();
    let active = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        for _ in 0..45 {
            std::thread::sleep(Duration::from_millis(100));
            let pong: String = redis::cmd("PING").query(&mut c).unwrap();
            assert_eq!(pong, "PONG");
        }
    });
    let began = Instant::now();
    let mut idle = TcpStream::connect(server.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(idle.read(&mut buf).unwrap(), 0, "the idle client is closed");
    let lasted = began.elapsed();
    assert!(
        lasted >= Duration::from_millis(2900),
        "closed after {lasted:?}"
    );
    active.join().unwrap();
    server.shutdown();
}

#[test]
fn a_client_that_never_reads_is_disconnected_at_its_output_limit() {
    let server = two_workers();
    let mut c = client(&server);
    let _: () = c.set("big", "x".repeat(1 << 20)).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 0 0 1"])
        .query(&mut c)
        .unwrap();
    // 64 MiB of replies asked for and never read: the socket buffers fill, the write stalls.
    let mut greedy = TcpStream::connect(server.addr()).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let gets = cmd(&["GET", "big"]).repeat(64);
    let _ = greedy.write_all(&gets);
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut gone = false;
    while Instant::now() < deadline {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        if list.lines().count() == 1 {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(gone, "the client that never reads is disconnected");
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    // A hard limit closes the client at once instead of sending a reply batch over it.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 100kb 0 0"])
        .query(&mut c)
        .unwrap();
    let reply = raw(&server, &cmd(&["GET", "big"]));
    assert!(reply.is_empty(), "closed without the 1 MiB reply");
    let small: Option<String> = c.get("nothing").unwrap();
    assert_eq!(small, None);
    server.shutdown();
}

// ----- the binary: config file, flags, SHUTDOWN, SIGTERM --------------------------------------

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "fc-server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn binary_config_file_flags_shutdown_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fast-cache.toml");
    let config = file.to_str().unwrap();
    // The flag wins over the file's password; the file's address and data dir are used.
    let (port, mut server) = on_a_free_port(|port| {
        std::fs::write(
            &file,
            format!(
                "[server]\nbind = \"127.0.0.1:{port}\"\nthreads = 2\nrequirepass = \"from-file\"\n[storage]\nshards = 8\n[persistence]\ndata_dir = \"{}\"\nsave = \"3600 1\"\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        try_spawn_binary(["--config", config, "--requirepass", "from-flag"]).map(|b| (port, b))
    });
    assert_eq!(server.addr, format!("127.0.0.1:{port}"));
    let url = |addr: &str, pw: &str| format!("redis://:{pw}@{addr}/");
    assert!(
        redis::Client::open(url(&server.addr, "from-file"))
            .unwrap()
            .get_connection()
            .is_err()
    );
    let mut c = redis::Client::open(url(&server.addr, "from-flag"))
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 0..100 {
        let _: () = c.set(format!("k{i}"), i).unwrap();
    }
    // SHUTDOWN saves (the save rules are set), answers nothing, and the process exits 0.
    let r = redis::cmd("SHUTDOWN").query::<Value>(&mut c);
    assert!(r.is_err(), "no reply: the connection closes ({r:?})");
    assert!(wait_exit(&mut server.child).success());
    let images = std::fs::read_dir(dir.path().join("data/snapshot"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(images > 0, "SHUTDOWN took a snapshot");

    // Restart: everything is back. SIGTERM stops it gracefully: a pipeline already sent gets
    // every reply before the connection closes.
    let mut server = spawn_binary(["--config", config, "--requirepass", "from-flag"]);
    let mut c = redis::Client::open(url(&server.addr, "from-flag"))
        .unwrap()
        .get_connection()
        .unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 100);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.write_all(&cmd(&["AUTH", "from-flag"])).unwrap();
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    let pipeline = cmd(&["INCR", "n"]).repeat(2000);
    s.write_all(&pipeline).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let replies = read_all(&mut s);
    let text = String::from_utf8_lossy(&replies);
    assert_eq!(
        text.lines().count(),
        2000,
        "every pipelined INCR got its reply"
    );
    assert!(text.ends_with(":2000\r\n"));
    assert!(wait_exit(&mut server.child).success());
    // A bad file is refused with every problem named.
    std::fs::write(&file, "[server]\nbind = \"x\"\nmaxclients = 0\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fc-server"))
        .args(["--config", config])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server.bind") && err.contains("server.maxclients"),
        "{err}"
    );
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let server = common::two_workers();
    let mut c = common::client(&server);
    for key in ["key1", "key2", "key3"] {
        let _: () = redis::cmd("PSETEX")
            .arg(key)
            .arg(100)
            .arg("v")
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("kept")
        .arg("v")
        .query(&mut c)
        .unwrap();
    // Nothing reads the keys again: only the background cycle can remove them. Polled,
    // bounded: the cycle runs 10 times a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "DBSIZE still {n} after 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:3\r\n"), "{info}");
    assert!(info.contains("expired_stale_perc:"), "{info}");
    assert!(
        info.contains("expired_time_cap_reached_count:0\r\n"),
        "{info}"
    );
    let hz: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hz")
        .query(&mut c)
        .unwrap();
    assert_eq!(hz, ["hz", "10"]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("1000")
        .query(&mut c)
        .unwrap();
    let hz: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hz")
        .query(&mut c)
        .unwrap();
    assert_eq!(hz, ["hz", "500"], "clamped as Redis does");
}

#[test]
fn adversarial_globs_answer_at_once_and_stall_nobody() {
    let server = common::start(fc_server::ServerConfig {
        shards: 4,
        threads: 1,
        ..fc_server::ServerConfig::default()
    });
    let mut c = common::client(&server);
    let mut other = common::client(&server);
    for i in 0..1000 {
        let _: () = redis::cmd("SET")
            .arg(format!("{}{i}", "a".repeat(200)))
            .arg("v")
            .query(&mut c)
            .unwrap();
    }
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let sixteen = format!("{}Q", "*".repeat(16));
    let found: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(&sixteen)
        .query(&mut c)
        .unwrap();
    assert!(found.is_empty());
    let thousands = format!("{}Q", "*".repeat(5000));
    let found: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(&thousands)
        .query(&mut c)
        .unwrap();
    assert!(found.is_empty());
    let alternating = format!("{}*b", "*a".repeat(2000));
    let keys: Vec<String> = redis::cmd("KEYS").arg(&alternating).query(&mut c).unwrap();
    assert!(keys.is_empty());
    let (_, keys): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg(&alternating)
        .arg("COUNT")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    assert!(keys.is_empty());
    let matching = format!("{}*9", "*a".repeat(100));
    let keys: Vec<String> = redis::cmd("KEYS").arg(&matching).query(&mut c).unwrap();
    assert_eq!(keys.len(), 100, "keys ending in 9");
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn protocol_limits_are_settable_and_apply_from_the_next_read() {
    let server = two_workers();
    let mut c = client(&server);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("proto-max-bulk-len")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["proto-max-bulk-len", "536870912"]);
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1000")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("argument must be between 1048576 and 9223372036854775807 inclusive"),
        "{err}"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1mb")
        .arg("client-query-buffer-limit")
        .arg("2mb")
        .query(&mut c)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("client-query-buffer-limit")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["client-query-buffer-limit", "2097152"]);
    // A bulk of 1 MiB + 1 is now refused with Redis's error, and only that client closes.
    let reply = raw(&server, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n");
    assert_eq!(reply, b"-ERR Protocol error: invalid bulk length\r\n");
    let at_limit = vec![b'v'; 1 << 20];
    let _: () = c.set("k", &at_limit).unwrap();
    let back: Vec<u8> = c.get("k").unwrap();
    assert_eq!(back.len(), 1 << 20);
}

#[test]
fn the_hard_output_limit_holds_while_a_large_reply_is_built() {
    let server = two_workers();
    let mut c = client(&server);
    let item = "x".repeat(100);
    for chunk in 0..20 {
        let items: Vec<String> = (0..5_000).map(|i| format!("{item}{chunk}-{i}")).collect();
        let _: () = redis::cmd("RPUSH")
            .arg("big")
            .arg(&items)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 1mb 0 0"])
        .query(&mut c)
        .unwrap();
    // About 11 MB of reply: the client is closed once its buffer passes 1 MiB, before the
    // reply is complete, so the buffer never holds it all.
    let mut victim = client(&server);
    let result: redis::RedisResult<Vec<String>> = redis::cmd("LRANGE")
        .arg("big")
        .arg(0)
        .arg(-1)
        .query(&mut victim);
    assert!(result.is_err(), "the reply was sent whole");
    let info: String = redis::cmd("INFO").arg("clients").query(&mut c).unwrap();
    let most: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("client_recent_max_output_buffer:"))
        .expect("the field")
        .trim()
        .parse()
        .unwrap();
    assert!(
        most <= (1 << 20) + (64 << 10),
        "a buffer of {most} bytes was built"
    );
    let len: i64 = redis::cmd("LLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(len, 100_000, "the data is untouched");
}

/// The same limit for every large reply: a hash, a set and `KEYS` over both workers (whose
/// parts are built on each worker and merged) each close the client past 1 MiB, and the data
/// stays. The collections are written into the reply as the store visits them, never copied
/// whole first (`command/table_tests.rs` checks the visit stops).
#[test]
fn every_large_reply_stops_at_the_hard_output_limit() {
    let server = two_workers();
    let mut c = client(&server);
    let item = "y".repeat(100);
    for chunk in 0..4 {
        let members: Vec<String> = (0..5_000).map(|i| format!("{item}{chunk}-{i}")).collect();
        let _: () = redis::cmd("SADD")
            .arg("bigset")
            .arg(&members)
            .query(&mut c)
            .unwrap();
        let mut hset = redis::cmd("HSET");
        hset.arg("bighash");
        for m in &members {
            hset.arg(m).arg(m);
        }
        let _: () = hset.query(&mut c).unwrap();
        let mut mset = redis::cmd("MSET");
        for m in &members {
            mset.arg(m).arg("v");
        }
        let _: () = mset.query(&mut c).unwrap();
    }
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 1mb 0 0"])
        .query(&mut c)
        .unwrap();
    for command in [
        vec!["HGETALL", "bighash"],
        vec!["HVALS", "bighash"],
        vec!["SMEMBERS", "bigset"],
        vec!["KEYS", "y*"],
    ] {
        let mut victim = client(&server);
        let result: redis::RedisResult<redis::Value> =
            redis::cmd(command[0]).arg(&command[1..]).query(&mut victim);
        assert!(result.is_err(), "{command:?}: the reply was sent whole");
    }
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 0 0 0"])
        .query(&mut c)
        .unwrap();
    let n: i64 = redis::cmd("HLEN").arg("bighash").query(&mut c).unwrap();
    assert_eq!(n, 20_000, "the data is untouched");
    let keys: Vec<String> = redis::cmd("KEYS").arg("y*").query(&mut c).unwrap();
    assert_eq!(keys.len(), 20_000, "without a limit, every key");
}

/// `ZRANGESTORE` and `ZRANGE ... BYLEX`, with the replies Debian's redis-server 7.0 gave for
/// the same commands (checked side by side when they were written).
#[test]
fn zrangestore_and_bylex_answer_as_redis() {
    let server = two_workers();
    let mut c = client(&server);
    let run = |c: &mut redis::Connection, line: &str| -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        match redis::cmd(words[0])
            .arg(&words[1..])
            .query::<redis::Value>(c)
        {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error: {}", e.detail().unwrap_or_default()),
        }
    };
    let _: () = redis::cmd("ZADD")
        .arg(&["{z}src", "1", "a", "2", "b", "3", "c", "4", "d"])
        .query(&mut c)
        .unwrap();
    let cases = [
        ("zrangestore {z}dst {z}src 0 -1", "int(4)"),
        (
            "zrangestore {z}dst {z}src 0 -1 withscores",
            "error: syntax error",
        ),
        (
            "zrangestore {z}dst {z}src 0 1 limit 0 1",
            "error: syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            "zrangestore {z}dst {z}src (1 +inf byscore limit 0 2",
            "int(2)",
        ),
        ("zrangestore {z}dst {z}src [c - bylex rev", "int(3)"),
        ("zrangestore {z}dst {z}nosrc 0 -1", "int(0)"),
        ("exists {z}dst", "int(0)"),
        (
            "zrange {z}src [a [b bylex withscores",
            "error: syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        ("zrange {z}src 1 3 byscore bylex", "error: syntax error"),
        (
            "zrange {z}src a b bylex",
            "error: min or max not valid string range item",
        ),
    ];
    for (line, want) in cases {
        let got = run(&mut c, line);
        assert!(got.contains(want), "{line}: {got}, expected {want}");
    }
    let _: () = redis::cmd("SET")
        .arg(&["{z}str", "x"])
        .query(&mut c)
        .unwrap();
    let got = run(&mut c, "zrangestore {z}dst {z}str 0 -1");
    assert!(got.contains("wrong kind of value"), "{got}");
    let stored: i64 = redis::cmd("ZRANGESTORE")
        .arg(&["{z}str", "{z}src", "0", "0"])
        .query(&mut c)
        .unwrap();
    assert_eq!(stored, 1);
    let kind: String = redis::cmd("TYPE").arg("{z}str").query(&mut c).unwrap();
    assert_eq!(
        kind, "zset",
        "the destination is replaced whatever its type"
    );
    let lex: Vec<String> = redis::cmd("ZRANGE")
        .arg(&["{z}src", "(a", "+", "BYLEX", "LIMIT", "1", "1"])
        .query(&mut c)
        .unwrap();
    assert_eq!(lex, ["c"]);
}

/// `SRANDMEMBER`/`HRANDFIELD` with a count of billions write their picks as they draw them:
/// past the output limit the client is closed, the server (which used to allocate for every
/// pick first, and abort) goes on; `i64::MIN` is refused with Redis's text.
#[test]
fn random_picks_of_billions_stop_at_the_output_limit() {
    let server = two_workers();
    let mut c = client(&server);
    let _: () = redis::cmd("SADD")
        .arg(&["s", "a", "b"])
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&["h", "f", "v", "g", "w"])
        .query(&mut c)
        .unwrap();
    let three: Vec<String> = redis::cmd("HRANDFIELD")
        .arg(&["h", "-3", "WITHVALUES"])
        .query(&mut c)
        .unwrap();
    assert_eq!(three.len(), 6, "field and value per pick");
    let picks: Vec<String> = redis::cmd("SRANDMEMBER")
        .arg(&["s", "-5"])
        .query(&mut c)
        .unwrap();
    assert_eq!(picks.len(), 5);
    let distinct: Vec<String> = redis::cmd("SRANDMEMBER")
        .arg(&["s", "9"])
        .query(&mut c)
        .unwrap();
    assert_eq!(distinct.len(), 2);
    let err = redis::cmd("HRANDFIELD")
        .arg(&["h", "-9223372036854775808"])
        .query::<redis::Value>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("value is out of range, value must between"),
        "{err}"
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "normal 1mb 0 0"])
        .query(&mut c)
        .unwrap();
    for command in [
        ["SRANDMEMBER", "s", "-9223372036854775807", ""],
        ["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"],
        ["HRANDFIELD", "h", "-4000000000", ""],
    ] {
        let mut victim = client(&server);
        let args: Vec<&str> = command[1..]
            .iter()
            .copied()
            .filter(|a| !a.is_empty())
            .collect();
        let result: redis::RedisResult<redis::Value> =
            redis::cmd(command[0]).arg(&args).query(&mut victim);
        assert!(result.is_err(), "{command:?}: answered whole");
    }
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG", "the server goes on");
}

/// The binary refuses a port already taken with an error line (and exits), which the test
/// helpers read as "try another port" (`on_a_free_port`) rather than serving someone else's
/// socket or waiting out a timeout.
#[test]
fn a_taken_port_is_an_error_and_another_port_is_tried() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let bind = format!("127.0.0.1:{port}");
    let Err(why) = try_spawn_binary(["--bind", bind.as_str(), "--threads", "1"]) else {
        panic!("fc-server started on a port that was taken");
    };
    assert!(why.contains("in use"), "{why}");
    let mut tries = 0;
    let server = on_a_free_port(|free| {
        tries += 1;
        let port = if tries == 1 { port } else { free };
        try_spawn_binary([
            "--bind",
            format!("127.0.0.1:{port}").as_str(),
            "--threads",
            "1",
        ])
    });
    assert_eq!(tries, 2);
    assert_ne!(server.addr, bind);
    drop(taken);
}

/// `disable-thp` (Redis's name and default): the server turns transparent huge pages off for
/// its process unless told not to, reports it in `CONFIG GET`, and refuses to change it live.
#[test]
fn transparent_huge_pages_are_off_unless_asked_for() {
    // What the kernel says of a process (`THP_enabled`, Linux 5.0 and later).
    let thp_enabled = |pid: &str| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .expect("the process's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim() == "1")
    };
    // The flag is inherited: a server told not to touch it has this process's (which an
    // in-process server of another test may have turned off).
    let ours = thp_enabled("self");
    for (flag, expect) in [(None, "yes"), (Some("false"), "no"), (Some("true"), "yes")] {
        let mut args = vec!["--bind", "127.0.0.1:0", "--threads", "1", "--save", ""];
        if let Some(v) = flag {
            args.extend(["--disable-thp", v]);
        }
        let server = spawn_binary(args);
        let mut c = redis::Client::open(format!("redis://{}", server.addr))
            .unwrap()
            .get_connection()
            .unwrap();
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg(&["GET", "disable-thp"])
            .query(&mut c)
            .unwrap();
        assert_eq!(got, ["disable-thp", expect], "--disable-thp {flag:?}");
        if let (Some(enabled), Some(ours)) = (thp_enabled(&server.child.id().to_string()), ours) {
            let want = if expect == "yes" { false } else { ours };
            assert_eq!(enabled, want, "--disable-thp {flag:?}");
        }
        let e = redis::cmd("CONFIG")
            .arg(&["SET", "disable-thp", "no"])
            .query::<Value>(&mut c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("can't set immutable config"), "{e}");
    }
}
