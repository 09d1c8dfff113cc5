//! Streams moved between a live redis-server and fc-server with `DUMP`/`RESTORE`, both ways:
//! the same history (explicit ids: nodes cut by count and by bytes, deleted entries, trims,
//! groups with pending entries and consumers) gives the same payload on both servers (byte for
//! byte; where the clock marks the payload, delivery and seen times, with those zeroed), a
//! payload restored on the other server dumps back to the same bytes, appending after a move
//! cuts nodes as Redis does, and damaged payloads get Redis's errors.
//!
//! Needs `redis-server` (7.0): installed with Debian's `apt-get` when missing (as `cargo xtask
//! diff-redis` does); the test fails when it cannot be had.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fc_snapshot::rdb::{Limits, Value, crc64, dump, restore};
use redis::{Connection, Value as R};

/// A redis-server child on a free port, killed when dropped.
struct RedisServer {
    child: Child,
    port: u16,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs Debian's redis-server when none is on the PATH.
fn install_redis_server() {
    let found = || {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if found() {
        return;
    }
    for args in [
        &["install", "-y", "-q", "redis-server"][..],
        &["update", "-q"],
        &["install", "-y", "-q", "redis-server"],
    ] {
        let _ = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if found() {
            return;
        }
    }
    panic!("redis-server is not installed and apt-get could not install it");
}

fn redis_server() -> RedisServer {
    install_redis_server();
    // A free port is only free until someone else binds it: another test's server may take
    // it before redis-server does (redis-server then exits, and the port answers for the
    // other server). So the server that answers must be ours (its `process_id`), else try
    // another port.
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if server
                .child
                .try_wait()
                .expect("redis-server's status")
                .is_some()
            {
                break; // it could not bind: another port
            }
            if serves_from(port, server.child.id()) {
                return server;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("redis-server found no free port in five tries");
}

/// Whether the Redis on `port` is process `pid`.
fn serves_from(port: u16, pid: u32) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return false;
    };
    let Ok(mut con) = client.get_connection() else {
        return false;
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut con)
        .unwrap_or_default();
    info.lines()
        .any(|line| line.trim() == format!("process_id:{pid}"))
}

fn connect(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("client")
        .get_connection()
        .expect("connection")
}

fn call(con: &mut Connection, args: &[&[u8]]) -> R {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<R>(con) {
        Ok(v) => v,
        Err(e) => R::SimpleString(format!("-{e}")),
    }
}

fn dump_of(con: &mut Connection, key: &str) -> Vec<u8> {
    match call(con, &[b"DUMP", key.as_bytes()]) {
        R::BulkString(b) => b,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

fn restore_reply(con: &mut Connection, key: &str, payload: &[u8]) -> String {
    match call(
        con,
        &[b"RESTORE", key.as_bytes(), b"0", payload, b"REPLACE"],
    ) {
        R::Okay => "OK".to_owned(),
        R::SimpleString(s) => s,
        other => format!("{other:?}"),
    }
}

/// The payload with delivery and seen times zeroed.
fn timeless(payload: &[u8]) -> Vec<u8> {
    let Ok(Value::Stream(mut s)) = restore(payload, Limits::default()) else {
        panic!("not a stream payload");
    };
    for g in &mut s.groups {
        g.pel.iter_mut().for_each(|p| p.delivery_ms = 0);
        for c in &mut g.consumers {
            c.seen_ms = 0;
            c.active_ms = None;
        }
    }
    dump(&Value::Stream(s))
}

/// (key, commands, whether the clock marks the payload).
type History = (&'static str, Vec<Vec<Vec<u8>>>, bool);

fn histories() -> Vec<History> {
    let v = |words: &[&str]| {
        words
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    let mut count = vec![v(&["XGROUP", "CREATE", "by_count", "g", "$", "MKSTREAM"])];
    for i in 0..260 {
        count.push(v(&[
            "XADD",
            "by_count",
            &format!("{}-0", 1000 + i),
            "t",
            &(i % 9).to_string(),
            "h",
            "ok",
        ]));
    }
    count.push(v(&["XDEL", "by_count", "1000-0", "1150-0", "1151-0"]));
    out.push(("by_count", count, false));
    let mut bytes = Vec::new();
    for i in 0..45u32 {
        let value = "x".repeat(200 + (i as usize * 37) % 250);
        bytes.push(v(&[
            "XADD",
            "by_bytes",
            &format!("{}-{}", 7 + i / 3, i % 3),
            "payload",
            &value,
            "n",
            &i.to_string(),
        ]));
    }
    bytes.push(v(&["XTRIM", "by_bytes", "MAXLEN", "30"]));
    out.push(("by_bytes", bytes, false));
    let mut trims = Vec::new();
    for i in 0..400 {
        let f = if i % 7 == 0 { "other" } else { "k" };
        trims.push(v(&[
            "XADD",
            "trims",
            &format!("{}-0", i + 1),
            f,
            &format!("v{i}"),
        ]));
    }
    trims.push(v(&["XTRIM", "trims", "MAXLEN", "~", "250"]));
    trims.push(v(&["XTRIM", "trims", "MINID", "250"]));
    trims.push(v(&[
        "XSETID",
        "trims",
        "500-0",
        "ENTRIESADDED",
        "1000",
        "MAXDELETEDID",
        "300-0",
    ]));
    out.push(("trims", trims, false));
    let mut pel = Vec::new();
    for i in 0..30 {
        pel.push(v(&[
            "XADD",
            "pel",
            &format!("{}-0", 10 + i),
            "job",
            &format!("task-{i}"),
        ]));
    }
    pel.extend([
        v(&["XGROUP", "CREATE", "pel", "workers", "0"]),
        v(&[
            "XGROUP",
            "CREATE",
            "pel",
            "audit",
            "20-0",
            "ENTRIESREAD",
            "10",
        ]),
        v(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "alice",
            "COUNT",
            "8",
            "STREAMS",
            "pel",
            ">",
        ]),
        v(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "bob",
            "COUNT",
            "5",
            "STREAMS",
            "pel",
            ">",
        ]),
        v(&[
            "XREADGROUP",
            "GROUP",
            "audit",
            "carol",
            "STREAMS",
            "pel",
            ">",
        ]),
        v(&["XACK", "pel", "workers", "11-0", "12-0"]),
        v(&[
            "XCLAIM",
            "pel",
            "workers",
            "bob",
            "0",
            "10-0",
            "13-0",
            "TIME",
            "1700000000123",
            "RETRYCOUNT",
            "5",
        ]),
        v(&["XDEL", "pel", "14-0", "30-0"]),
        v(&["XGROUP", "CREATECONSUMER", "pel", "audit", "idle"]),
    ]);
    out.push(("pel", pel, true));
    out
}

#[test]
fn streams_move_both_ways_between_redis_and_fc() {
    let redis = redis_server();
    let server = common::two_workers();
    let mut fc = common::client(&server);
    let mut rd = connect(redis.port);
    for (key, cmds, clocked) in histories() {
        for cmd in &cmds {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let a = call(&mut fc, &args);
            let b = call(&mut rd, &args);
            if !clocked {
                assert_eq!(a, b, "{key}: {:?}", String::from_utf8_lossy(&cmd.concat()));
            }
        }
        let ours = dump_of(&mut fc, key);
        let theirs = dump_of(&mut rd, key);
        if clocked {
            assert_eq!(
                timeless(&ours),
                timeless(&theirs),
                "{key}: same history, same payload"
            );
        } else {
            assert_eq!(ours, theirs, "{key}: same history, same payload");
        }

        // Redis to fc-server: the copy dumps to Redis's bytes, and reads the same.
        let copy = format!("{key}:from-redis");
        assert_eq!(restore_reply(&mut fc, &copy, &theirs), "OK");
        assert_eq!(
            dump_of(&mut fc, &copy),
            theirs,
            "{key}: Redis's payload back"
        );
        for probe in [
            &["XRANGE", "@", "-", "+"][..],
            &["XLEN", "@"],
            &["XINFO", "GROUPS", "@"],
        ] {
            let with = |k: &str| -> Vec<Vec<u8>> {
                probe
                    .iter()
                    .map(|p| if *p == "@" { k } else { p }.as_bytes().to_vec())
                    .collect()
            };
            let (a, b) = (with(&copy), with(key));
            let a: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
            let b: Vec<&[u8]> = b.iter().map(Vec::as_slice).collect();
            assert_eq!(call(&mut fc, &a), call(&mut rd, &b), "{key}: {probe:?}");
        }
        // fc-server to Redis: Redis reads fc-server's payload and writes the same bytes.
        let copy = format!("{key}:from-fc");
        assert_eq!(restore_reply(&mut rd, &copy, &ours), "OK");
        assert_eq!(
            dump_of(&mut rd, &copy),
            ours,
            "{key}: fc-server's payload back"
        );

        // Appending after the move cuts nodes where Redis does.
        let copy = format!("{key}:grown");
        assert_eq!(restore_reply(&mut fc, &copy, &theirs), "OK");
        assert_eq!(restore_reply(&mut rd, &copy, &theirs), "OK");
        for i in 0..150u32 {
            let owned: [Vec<u8>; 7] = [
                b"XADD".to_vec(),
                copy.clone().into_bytes(),
                format!("{}-{i}", 1u64 << 40).into_bytes(),
                b"more".to_vec(),
                vec![b'm'; (i as usize * 13) % 97],
                b"n".to_vec(),
                i.to_string().into_bytes(),
            ];
            let args: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            assert_eq!(call(&mut fc, &args), call(&mut rd, &args));
        }
        assert_eq!(
            dump_of(&mut fc, &copy),
            dump_of(&mut rd, &copy),
            "{key}: grown after the move"
        );
    }
}

#[test]
fn damaged_stream_payloads_get_redis_errors() {
    let redis = redis_server();
    let server = common::two_workers();
    let mut fc = common::client(&server);
    let mut rd = connect(redis.port);
    for con in [&mut fc, &mut rd] {
        call(con, &[b"XADD", b"s", b"1-1", b"a", b"1"]);
        call(con, &[b"XADD", b"s", b"1-2", b"a", b"2", b"b", b"3"]);
        call(con, &[b"XGROUP", b"CREATE", b"s", b"g", b"0"]);
        call(
            con,
            &[
                b"XREADGROUP",
                b"GROUP",
                b"g",
                b"alice",
                b"COUNT",
                b"1",
                b"STREAMS",
                b"s",
                b">",
            ],
        );
    }
    let good = dump_of(&mut rd, "s");
    let with_crc = |mut p: Vec<u8>| {
        let n = p.len();
        let crc = crc64(0, &p[..n - 8]);
        p[n - 8..].copy_from_slice(&crc.to_le_bytes());
        p
    };
    // A flipped byte without its checksum; a length beyond the entries; a cut payload.
    let mut flipped = good.clone();
    flipped[5] ^= 1;
    let body = good.len() - 10;
    let edited = |edit: &dyn Fn(&mut fc_snapshot::rdb::StreamValue)| {
        let Ok(Value::Stream(mut s)) = restore(&good, Limits::default()) else {
            panic!("a stream payload");
        };
        edit(&mut s);
        dump(&Value::Stream(s))
    };
    let stray = edited(&|s| {
        s.groups[0].consumers[0]
            .pending
            .push(fc_snapshot::rdb::StreamId::new(9, 9));
    });
    let mut cut = good[..body - 3].to_vec();
    cut.extend_from_slice(&good[body..]);
    let cases: [(&str, Vec<u8>); 3] = [
        ("checksum", flipped),
        ("consumer's id missing from the group PEL", stray),
        ("cut", with_crc(cut)),
    ];
    for (what, payload) in cases {
        let a = restore_reply(&mut fc, "t", &payload);
        let b = restore_reply(&mut rd, "t", &payload);
        assert_eq!(a, b, "{what}");
        assert!(
            a.contains("DUMP payload version or checksum are wrong")
                || a.contains("Bad data format"),
            "{what}: {a}"
        );
    }
    assert_eq!(call(&mut fc, &[b"EXISTS", b"t"]), R::Int(0));
    // Stricter than Redis (docs/REDIS-COMPAT.md): a length other than the live entries'.
    let longer = edited(&|s| s.length += 1);
    assert!(restore_reply(&mut fc, "t", &longer).contains("Bad data format"));
    assert_eq!(restore_reply(&mut rd, "t", &longer), "OK");
}
