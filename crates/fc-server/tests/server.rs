//! The server through real clients: redis-rs for the command families, pipelines, concurrency
//! and AUTH; raw sockets for exact reply bytes, malformed input and maxclients.

use std::net::TcpStream;
use std::time::Duration;

mod common;

use common::{client, raw, start, two_workers};
use fc_server::ServerConfig;
use redis::{Commands, Value};

fn err_text(r: redis::RedisResult<Value>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

#[test]
fn strings_and_keys_across_workers() {
    let server = two_workers();
    let mut c = client(&server);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    for i in 0..100 {
        let _: () = c.set(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let values: Vec<Option<String>> = c.mget(&keys).unwrap();
    assert!(
        values
            .iter()
            .enumerate()
            .all(|(i, v)| v.as_deref() == Some(format!("v{i}").as_str()))
    );
    let n: i64 = redis::cmd("EXISTS")
        .arg(&keys)
        .arg("nope")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 100);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 100);
    let gone: i64 = c.del(&keys[..10]).unwrap();
    assert_eq!(gone, 10);
    // SET options.
    let r: Option<String> = redis::cmd("SET")
        .arg("lock")
        .arg("a")
        .arg("NX")
        .arg("PX")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    let r: Option<String> = redis::cmd("SET")
        .arg("lock")
        .arg("b")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None);
    let old: Option<String> = redis::cmd("SET")
        .arg("lock")
        .arg("c")
        .arg("GET")
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(old.as_deref(), Some("a"));
    let pttl: i64 = c.pttl("lock").unwrap();
    assert!(pttl > 4000 && pttl <= 5000, "{pttl}");
    let ttl: i64 = c.ttl("k50").unwrap();
    assert_eq!(ttl, -1);
    let ttl: i64 = c.ttl("missing").unwrap();
    assert_eq!(ttl, -2);
    let set: i64 = redis::cmd("EXPIRE")
        .arg("k50")
        .arg(100)
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(set, 1);
    let set: i64 = redis::cmd("EXPIRE")
        .arg("k50")
        .arg(200)
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(set, 0);
    // Counters and their errors.
    assert_eq!(c.incr::<_, _, i64>("n", 5).unwrap(), 5);
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("10.5")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "10.5");
    let e = err_text(redis::cmd("INCR").arg("k50").query(&mut c));
    assert!(e.contains("value is not an integer or out of range"), "{e}");
    let t: String = redis::cmd("TYPE").arg("k50").query(&mut c).unwrap();
    assert_eq!(t, "string");
    let _: () = redis::cmd("RENAME")
        .arg("{r}a")
        .arg("{r}b")
        .query(&mut c)
        .unwrap_or(());
    let e = err_text(redis::cmd("RENAME").arg("nosuch").arg("x").query(&mut c));
    assert!(e.contains("no such key"), "{e}");
    let ok: String = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 0);
    server.shutdown();
}

#[test]
fn data_types_and_wrongtype() {
    let server = two_workers();
    let mut c = client(&server);
    let _: i64 = c
        .hset_multiple::<_, _, _, ()>("h", &[("a", "1"), ("b", "2")])
        .map(|()| 0)
        .unwrap();
    let all: std::collections::HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(c.hincr::<_, _, _, i64>("h", "a", 10).unwrap(), 11);
    let _: i64 = c.rpush("l", &["a", "b", "c"]).unwrap();
    let l: Vec<String> = c.lrange("l", 0, -1).unwrap();
    assert_eq!(l, ["a", "b", "c"]);
    let popped: Option<String> = c.lpop("l", None).unwrap();
    assert_eq!(popped.as_deref(), Some("a"));
    let _: i64 = c.sadd("s", &["x", "y"]).unwrap();
    let mut members: Vec<String> = c.smembers("s").unwrap();
    members.sort();
    assert_eq!(members, ["x", "y"]);
    let _: i64 = c
        .zadd_multiple("z", &[(1.5, "one"), (3.0, "three")])
        .unwrap();
    let z: Vec<(String, f64)> = c.zrange_withscores("z", 0, -1).unwrap();
    assert_eq!(z, [("one".to_string(), 1.5), ("three".to_string(), 3.0)]);
    let s: Option<f64> = c.zscore("z", "three").unwrap();
    assert_eq!(s, Some(3.0));
    let e = err_text(redis::cmd("GET").arg("h").query(&mut c));
    assert!(e.contains("WRONGTYPE"), "{e}");
    let e = err_text(redis::cmd("LPUSH").arg("s").arg("x").query(&mut c));
    assert!(e.contains("WRONGTYPE"), "{e}");
    server.shutdown();
}

#[test]
fn exact_error_replies() {
    let server = two_workers();
    assert_eq!(
        raw(&server, b"*2\r\n$6\r\nfoobar\r\n$3\r\nbaz\r\n"),
        b"-ERR unknown command 'foobar', with args beginning with: 'baz' \r\n"
    );
    assert_eq!(
        raw(&server, b"*1\r\n$3\r\nGET\r\n"),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(raw(&server, b"PING\r\n"), b"+PONG\r\n");
    assert_eq!(
        raw(&server, b"*2\r\n$6\r\nSELECT\r\n$2\r\n16\r\n"),
        b"-ERR DB index is out of range\r\n"
    );
    let hello = raw(&server, b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    assert!(
        hello.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{:?}",
        String::from_utf8_lossy(&hello)
    );
    assert_eq!(
        raw(&server, b"*2\r\n$5\r\nHELLO\r\n$1\r\n4\r\n"),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    server.shutdown();
}

/// INCRBYFLOAT/HINCRBYFLOAT reply bytes as redis-server 7.0.15 (x86-64) sent them for the same
/// pipeline: `long double` sums (`0.1 + 0.1 + 0.1` is `0.3`, `2^63 - 1` stays exact), the type
/// checked before the increment is read (INCRBYFLOAT) or after (HINCRBYFLOAT), `strtold`'s
/// syntax (hexadecimal, a range error), `-0` written `0`.
#[test]
fn float_increments_byte_for_byte() {
    let server = two_workers();
    let commands: &[&[&str]] = &[
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "f", "0.1"],
        &["SET", "big", "9223372036854775807"],
        &["INCRBYFLOAT", "big", "0"],
        &["HINCRBYFLOAT", "h", "f", "0.1"],
        &["HINCRBYFLOAT", "h", "f", "0.2"],
        &["RPUSH", "lst", "x"],
        &["INCRBYFLOAT", "lst", "abc"],
        &["HINCRBYFLOAT", "lst", "f", "inf"],
        &["HINCRBYFLOAT", "lst", "f", "abc"],
        &["INCRBYFLOAT", "f", "1e5000"],
        &["INCRBYFLOAT", "f", "0x1p-2"],
        &["INCRBYFLOAT", "f", "inf"],
        &["INCRBYFLOAT", "f", "-0.55"],
        &["INCRBYFLOAT", "f", "-1e-30"],
    ];
    let mut request = Vec::new();
    for args in commands {
        request.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            request.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    let want: &[u8] = b"$3\r\n0.1\r\n$3\r\n0.2\r\n$3\r\n0.3\r\n+OK\r\n\
        $19\r\n9223372036854775807\r\n$3\r\n0.1\r\n$3\r\n0.3\r\n:1\r\n\
        -WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
        -ERR value is NaN or Infinity\r\n-ERR value is not a valid float\r\n\
        -ERR value is not a valid float\r\n$4\r\n0.55\r\n\
        -ERR increment would produce NaN or Infinity\r\n$1\r\n0\r\n$1\r\n0\r\n";
    let got = raw(&server, &request);
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    server.shutdown();
}

#[test]
fn malformed_input_closes_only_that_client() {
    let server = two_workers();
    let mut healthy = client(&server);
    let _: () = healthy.set("k", "v").unwrap();
    for (request, reply) in [
        (
            &b"*1\r\n$x\r\n"[..],
            &b"-ERR Protocol error: invalid bulk length\r\n"[..],
        ),
        (
            b"*x\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n+GET\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
        ),
    ] {
        // The reply, then the connection closes (the read loop ends).
        assert_eq!(raw(&server, request), reply);
    }
    let v: String = healthy.get("k").unwrap();
    assert_eq!(v, "v");
    server.shutdown();
}

#[test]
fn pipelines_and_concurrent_clients() {
    let server = two_workers();
    let mut c = client(&server);
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.set(format!("p{i}"), i).ignore();
    }
    for i in 0..10_000 {
        pipe.get(format!("p{i}"));
    }
    let values: Vec<i64> = pipe.query(&mut c).unwrap();
    assert_eq!(values.len(), 10_000);
    assert!(values.iter().enumerate().all(|(i, &v)| v == i as i64));
    let addr = server.addr();
    let threads: Vec<_> = (0..50)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                for i in 0..200 {
                    let key = format!("t{t}:{i}");
                    let _: () = c.set(&key, i).unwrap();
                    let v: i64 = c.get(&key).unwrap();
                    assert_eq!(v, i);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 10_000 + 50 * 200);
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    assert!(info.contains("redis_version:7.2.0"));
    assert!(info.contains("db0:keys=20000,expires=0"), "{info}");
    assert!(info.contains("keyspace_hits:"));
    server.shutdown();
}

/// A pipeline written at once is read in a few large reads, not in small pieces, after the
/// first requests were parsed off the connection's buffer too (a buffer that forgot its
/// capacity once split read 64 bytes at a time: a pipeline of 16 `EVALSHA`s took 20 reads).
#[test]
fn a_written_pipeline_is_read_in_few_reads() {
    use std::io::{Read, Write};
    let server = start(ServerConfig {
        shards: 4,
        threads: 1,
        ..ServerConfig::default()
    });
    let mut c = client(&server);
    let reads = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("total_reads_processed:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("total_reads_processed")
    };
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // 32 commands of about 200 bytes each, written in one call: under 7 KiB. `EVALSHA`:
    // its arguments outlive the parse for a while, so the buffer cannot take its memory back
    // at once and has to grow anew.
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return ARGV[1]")
        .query(&mut c)
        .unwrap();
    let value = "v".repeat(120);
    let one = format!(
        "*4\r\n$7\r\nEVALSHA\r\n$40\r\n{sha}\r\n$1\r\n0\r\n${}\r\n{value}\r\n",
        value.len()
    );
    let reply = format!("${}\r\n{value}\r\n", value.len());
    for round in 0..3 {
        let before = reads(&mut c);
        s.write_all(one.repeat(32).as_bytes()).unwrap();
        let mut got = vec![0u8; reply.len() * 32];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, reply.repeat(32).as_bytes());
        // The INFO call itself is one read of `c`.
        let taken = reads(&mut c) - before - 1;
        assert!(taken <= 4, "round {round}: the pipeline took {taken} reads");
    }
    server.shutdown();
}

/// The server parses up to a window of pipelined commands ahead (to prefetch their keys):
/// commands still run in order, nothing after a `QUIT` or a protocol error runs, and a
/// command after `AUTH` or `RESET` is parsed under the limits that hold once they ran.
#[test]
fn pipelined_windows_keep_order_and_boundaries() {
    let server = start(ServerConfig {
        shards: 4,
        threads: 1,
        requirepass: Some("secret".into()),
        ..ServerConfig::default()
    });
    let auth = &b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n"[..];
    let with_auth = |rest: &[u8]| [auth, rest].concat();
    // 100 SETs then GETs of the same keys in one write: every reply, in order.
    let mut request = auth.to_vec();
    let mut expected = b"+OK\r\n".to_vec();
    for i in 0..100 {
        request.extend_from_slice(format!("SET w{i} {i}\r\n").as_bytes());
        expected.extend_from_slice(b"+OK\r\n");
    }
    for i in 0..100 {
        request.extend_from_slice(format!("GET w{i}\r\n").as_bytes());
        let v = i.to_string();
        expected.extend_from_slice(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
    }
    assert_eq!(raw(&server, &request), expected);
    // Commands before a protocol error run; the error ends the client.
    assert_eq!(
        raw(
            &server,
            &with_auth(b"SET a 1\r\nSET b 2\r\n*1\r\n$x\r\nSET c 3\r\n")
        ),
        b"+OK\r\n+OK\r\n+OK\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    // Nothing after QUIT runs.
    assert_eq!(
        raw(
            &server,
            &with_auth(b"SET q 1\r\nQUIT\r\nSET q 2\r\nSET c 3\r\n")
        ),
        b"+OK\r\n+OK\r\n+OK\r\n"
    );
    // An argument over the unauthenticated limit (16 KiB) right after AUTH is accepted...
    let big = "x".repeat(20_000);
    let set_big = format!(
        "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n{big}\r\n",
        big.len()
    );
    assert_eq!(
        raw(&server, &with_auth(set_big.as_bytes())),
        b"+OK\r\n+OK\r\n"
    );
    // ...and refused right after RESET, which ends the authentication.
    assert_eq!(
        raw(
            &server,
            &with_auth(&[&b"RESET\r\n"[..], set_big.as_bytes()].concat())
        ),
        &b"+OK\r\n+RESET\r\n-ERR Protocol error: unauthenticated bulk length\r\n"[..]
    );
    let mut c = redis::Client::open(format!("redis://:secret@{}/", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let got: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["a", "b", "c", "q", "w99"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        got,
        [
            Some("1".into()),
            Some("2".into()),
            None,
            Some("1".into()),
            Some("99".into())
        ]
    );
    let len: usize = redis::cmd("STRLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(len, big.len());
    server.shutdown();
}

#[test]
fn requirepass_and_maxclients() {
    let server = start(ServerConfig {
        shards: 4,
        threads: 1,
        requirepass: Some("secret".into()),
        maxclients: 2,
        ..ServerConfig::default()
    });
    assert_eq!(
        raw(&server, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        raw(&server, b"*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n"),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        raw(
            &server,
            b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*1\r\n$4\r\nPING\r\n"
        ),
        b"+OK\r\n+PONG\r\n"
    );
    let mut a = redis::Client::open(format!("redis://:secret@{}/", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = a.set("k", "v").unwrap();
    let _b = TcpStream::connect(server.addr()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        raw(&server, b"PING\r\n"),
        b"-ERR max number of clients reached\r\n"
    );
    server.shutdown();
}

#[test]
fn scan_family_and_multi_key_type_commands() {
    let server = two_workers();
    let mut c = client(&server);
    for i in 0..500 {
        let _: () = c.set(format!("key:{i}"), i).unwrap();
    }
    let _: i64 = c.sadd("aset", "m").unwrap();
    // SCAN covers every key exactly as the keyspace holds them, across both workers.
    let mut cursor = 0u64;
    let mut seen = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("key:*")
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        seen.extend(keys);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 500, "exactly once");
    assert_eq!(
        seen.iter().collect::<std::collections::BTreeSet<_>>().len(),
        500
    );
    let (_, sets): (u64, Vec<String>) = {
        let mut all = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("TYPE")
                .arg("set")
                .query(&mut c)
                .unwrap();
            all.extend(keys);
            if next == 0 {
                break (0, all);
            }
            cursor = next;
        }
    };
    assert_eq!(sets, ["aset"]);
    let e = err_text(redis::cmd("SCAN").arg("x").query(&mut c));
    assert!(e.contains("invalid cursor"), "{e}");
    // HSCAN / SSCAN / ZSCAN.
    for i in 0..100 {
        let _: i64 = c.hset("h", format!("f{i}"), i).unwrap();
        let _: i64 = c.sadd("s", format!("m{i}")).unwrap();
        let _: i64 = c.zadd("z", format!("m{i}"), i).unwrap();
    }
    let fields: std::collections::HashMap<String, String> = c.hscan("h").unwrap().collect();
    assert_eq!(fields.len(), 100);
    let members: Vec<String> = c.sscan("s").unwrap().collect();
    assert_eq!(members.len(), 100);
    let zs: Vec<(String, f64)> = c.zscan("z").unwrap().collect();
    assert_eq!(zs.len(), 100);
    // Lists, sets and sorted sets on two keys of one shard (hash tags).
    let _: i64 = c.rpush("{q}src", &["a", "b", "c", "b"]).unwrap();
    let pos: Option<i64> = redis::cmd("LPOS")
        .arg("{q}src")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(pos, Some(1));
    let all: Vec<i64> = redis::cmd("LPOS")
        .arg("{q}src")
        .arg("b")
        .arg("COUNT")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(all, [1, 3]);
    let moved: String = redis::cmd("LMOVE")
        .arg("{q}src")
        .arg("{q}dst")
        .arg("LEFT")
        .arg("RIGHT")
        .query(&mut c)
        .unwrap();
    assert_eq!(moved, "a");
    let _: i64 = c.sadd("{s}1", &["a", "b", "c"]).unwrap();
    let _: i64 = c.sadd("{s}2", &["b", "c", "d"]).unwrap();
    let mut inter: Vec<String> = c.sinter(&["{s}1", "{s}2"]).unwrap();
    inter.sort();
    assert_eq!(inter, ["b", "c"]);
    let n: i64 = c.sunionstore("{s}u", &["{s}1", "{s}2"]).unwrap();
    assert_eq!(n, 4);
    let _: i64 = c
        .zadd_multiple("lex", &[(0, "a"), (0, "b"), (0, "c"), (0, "d")])
        .unwrap();
    let r: Vec<String> = c.zrangebylex("lex", "[b", "(d").unwrap();
    assert_eq!(r, ["b", "c"]);
    let popped: Vec<(String, f64)> = redis::cmd("ZPOPMIN").arg("z").arg(2).query(&mut c).unwrap();
    assert_eq!(popped, [("m0".to_string(), 0.0), ("m1".to_string(), 1.0)]);
    let rev: Vec<String> = c.zrevrange("z", 0, 1).unwrap();
    assert_eq!(rev, ["m99", "m98"]);
    let key: Option<String> = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
    assert!(key.is_some());
    server.shutdown();
}

#[test]
fn debug_digest_agrees_on_contents() {
    let a = two_workers();
    let b = start(ServerConfig {
        shards: 16,
        threads: 1,
        ..ServerConfig::default()
    });
    let empty: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut client(&a))
        .unwrap();
    for server in [&a, &b] {
        let mut c = client(server);
        for i in 0..200 {
            let _: () = c.set(format!("k{i}"), i).unwrap();
            let _: i64 = c.hset("h", format!("f{i}"), i).unwrap();
        }
    }
    let da: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut client(&a))
        .unwrap();
    let db: String = redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(&mut client(&b))
        .unwrap();
    assert_eq!(da, db);
    assert_ne!(da, empty);
    assert_eq!(da.len(), 16);
    a.shutdown();
    b.shutdown();
}

#[test]
fn multi_exec_is_atomic_across_workers() {
    let server = two_workers();
    let mut c = client(&server);
    // Two keys on different workers.
    let (a, b) = (
        "a",
        (0..100)
            .map(|i| format!("b{i}"))
            .find(|k| {
                let router = fc_shard::ShardRouter::new(8, fc_shard::EmbeddedRouteMode::FullKey);
                router.shard_of(&router.route_key(k.as_bytes())) % 2
                    != router.shard_of(&router.route_key(b"a")) % 2
            })
            .unwrap(),
    );
    let _: () = c.set(a, 0).unwrap();
    let _: () = c.set(&b, 0).unwrap();
    let (ra, rb): (i64, i64) = redis::pipe()
        .atomic()
        .incr(a, 1)
        .incr(&b, 1)
        .query(&mut c)
        .unwrap();
    assert_eq!((ra, rb), (1, 1));
    // Queue-time errors abort the transaction; EXEC/DISCARD without MULTI are errors.
    assert_eq!(
        raw(&server, b"MULTI\r\nFOO\r\nINCR a\r\nEXEC\r\n"),
        b"+OK\r\n-ERR unknown command 'FOO', with args beginning with: \r\n+QUEUED\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(raw(&server, b"EXEC\r\n"), b"-ERR EXEC without MULTI\r\n");
    assert_eq!(
        raw(&server, b"MULTI\r\nINCR a\r\nDISCARD\r\nGET a\r\n"),
        b"+OK\r\n+QUEUED\r\n+OK\r\n$1\r\n1\r\n"
    );
    // Isolation: writers move a and b together; readers must never see them apart.
    let addr = server.addr();
    let mut threads = Vec::new();
    for t in 0..6 {
        let b = b.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://{addr}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            for _ in 0..150 {
                if t < 4 {
                    let _: (i64, i64) = redis::pipe()
                        .atomic()
                        .incr("a", 1)
                        .incr(&b, 1)
                        .query(&mut c)
                        .unwrap();
                } else {
                    let (x, y): (i64, i64) = redis::pipe()
                        .atomic()
                        .get("a")
                        .get(&b)
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(x, y, "a transaction saw half of another");
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let (x, y): (i64, i64) = redis::pipe().get("a").get(&b).query(&mut c).unwrap();
    assert_eq!((x, y), (601, 601));
    server.shutdown();
}

/// Two workers over 8 shards, persisting to `dir` with `appendfsync always` and no save
/// rules; the rest of the persistence settings from `rest`.
fn always_two_workers(dir: &std::path::Path, rest: fc_server::PersistenceConfig) -> ServerConfig {
    ServerConfig {
        shards: 8,
        threads: 2,
        persistence: fc_server::PersistenceConfig {
            data_dir: Some(dir.to_path_buf()),
            appendfsync: fc_wal::FsyncPolicy::Always,
            save: Vec::new(),
            ..rest
        },
        ..ServerConfig::default()
    }
}

#[test]
fn persistence_save_bgsave_lastsave_info_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || always_two_workers(dir.path(), fc_server::PersistenceConfig::default());
    let server = start(config());
    let mut con = client(&server);
    for i in 0..100 {
        let _: () = con.set(format!("k{i}"), i).unwrap();
    }
    let _: () = con.hset("h", "f", "v").unwrap();
    let before: i64 = redis::cmd("LASTSAVE").query(&mut con).unwrap();
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    assert!(info.contains("aof_enabled:1"), "{info}");
    assert!(info.contains("rdb_changes_since_last_save:101"), "{info}");
    assert!(info.contains("appendfsync:always"), "{info}");
    let ok: String = redis::cmd("SAVE").query(&mut con).unwrap();
    assert_eq!(ok, "OK");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    assert!(info.contains("\r\nrdb_saves:1\r\n"), "{info}");
    let after: i64 = redis::cmd("LASTSAVE").query(&mut con).unwrap();
    assert!(after >= before);
    // Writes after the image come back from the log.
    let _: () = con.set("late", "yes").unwrap();
    let _: () = con.del("k0").unwrap();
    let started: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(started, "Background saving started");
    let _: () = con.set("later", "too").unwrap();
    // SAVE inside MULTI is refused like Redis.
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let e = err_text(redis::cmd("SAVE").query(&mut con));
    assert!(e.contains("not allowed inside a transaction"), "{e}");
    let _: () = redis::cmd("DISCARD").query(&mut con).unwrap();
    drop(con);
    server.shutdown();

    let server = start(config());
    let mut con = client(&server);
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 102);
    let v: Option<String> = con.get("k0").unwrap();
    assert_eq!(v, None);
    let v: String = con.get("k99").unwrap();
    assert_eq!(v, "99");
    let v: String = con.hget("h", "f").unwrap();
    assert_eq!(v, "v");
    let v: String = con.get("later").unwrap();
    assert_eq!(v, "too");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    assert!(info.contains("loaded_keys_from_snapshot:"), "{info}");
    drop(con);
    server.shutdown();

    // Without a data directory, SAVE says how to get one.
    let server = two_workers();
    let mut con = client(&server);
    let e = err_text(redis::cmd("SAVE").query(&mut con));
    assert!(e.contains("--data-dir"), "{e}");
    server.shutdown();
}

#[test]
fn always_commits_one_log_per_worker_for_many_connections() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(always_two_workers(
        dir.path(),
        fc_server::PersistenceConfig::default(),
    ));
    // Four connections, each pipelining writes whose keys land on both workers.
    let writers: Vec<_> = (0..4)
        .map(|c| {
            let addr = server.addr();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                for round in 0..25 {
                    let mut pipe = redis::pipe();
                    for i in 0..16 {
                        pipe.set(format!("c{c}:r{round}:k{i}"), i).ignore();
                    }
                    let _: () = pipe.query(&mut con).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut con = client(&server);
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} in {info}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(field("wal_mutations"), 1600);
    // Frames are batches: at most one per write to the log, so far fewer than mutations.
    let frames = field("wal_frames");
    assert!(
        (1..=200).contains(&frames),
        "{frames} frames for 100 batches"
    );
    // Every batch was acknowledged after a commit of both workers' logs, each commit
    // covering whatever all connections had sent: at most 2 fsyncs per batch, never one per
    // write; and every commit came from a worker's own committer.
    let fsyncs = field("wal_fsyncs");
    assert!(
        (2..=200).contains(&fsyncs),
        "{fsyncs} fsyncs for 100 batches"
    );
    // A waiter runs a commit itself only after waiting 50 ms for one (`COMMIT_FALLBACK`):
    // none on a quiet machine, a few when a VM stalls the committer or its fsync that long
    // (5 seen once in CI, on monoio); a committer that did not run would make one per batch.
    let fallbacks = field("wal_commit_fallbacks");
    assert!(fallbacks <= 10, "{fallbacks} fallback commits: {info}");
    let mut logs: Vec<String> = std::fs::read_dir(dir.path().join("wal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    logs.sort();
    assert_eq!(logs, ["log-0000", "log-0001"]);
    drop(con);
    server.shutdown();
}

#[test]
fn a_failing_disk_never_acknowledges_and_refuses_writes_with_misconf() {
    let dir = tempfile::tempdir().unwrap();
    // Every fdatasync from the second on fails with EIO.
    let syncs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&syncs);
    let faults = fc_wal::Faults::new(move |op, _| {
        (op == fc_wal::FileOp::Sync && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1)
            .then(|| fc_wal::Fault::os(5))
    });
    let server = start(always_two_workers(
        dir.path(),
        fc_server::PersistenceConfig {
            faults,
            ..fc_server::PersistenceConfig::default()
        },
    ));
    let mut con = client(&server);
    let _: () = con.set("first", "durable").unwrap();
    // This write's commit fails: its reply is never sent; the connection is closed.
    let lost: redis::RedisResult<()> = con.set("second", "not durable");
    assert!(lost.is_err(), "{lost:?}");
    assert!(syncs.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    // Every later write is refused with Redis's MISCONF; reads go on.
    let mut con = client(&server);
    let e = err_text(redis::cmd("SET").arg("third").arg("x").query(&mut con));
    assert!(
        e.contains("MISCONF") && e.contains("Input/output error"),
        "{e}"
    );
    let v: String = con.get("first").unwrap();
    assert_eq!(v, "durable");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut con)
        .unwrap();
    assert!(info.contains("aof_last_write_status:err"), "{info}");
    drop(con);
    server.shutdown();
    // What was acknowledged is on disk.
    let server = start(ServerConfig {
        shards: 8,
        threads: 2,
        persistence: fc_server::PersistenceConfig {
            data_dir: Some(dir.path().to_path_buf()),
            save: Vec::new(),
            ..fc_server::PersistenceConfig::default()
        },
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let v: String = con.get("first").unwrap();
    assert_eq!(v, "durable");
    let n: Option<String> = con.get("third").unwrap();
    assert_eq!(n, None);
    drop(con);
    server.shutdown();
}

/// FLUSHALL, MSET and DEL over both workers are transactions of the log: the log holds one
/// group per changed worker for each, and a restart finds exactly what they left.
#[test]
fn writes_over_both_workers_are_transactions_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = start(always_two_workers(
            dir.path(),
            fc_server::PersistenceConfig::default(),
        ));
        let mut con = client(&server);
        let pairs: Vec<(String, String)> =
            (0..40).map(|i| (format!("k{i}"), i.to_string())).collect();
        let _: () = con.mset(&pairs).unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        let _: () = con.mset(&pairs[..10]).unwrap();
        let deleted: i64 = redis::cmd("DEL")
            .arg(&["k0", "k1", "k2", "k3"])
            .query(&mut con)
            .unwrap();
        assert_eq!(deleted, 4);
        drop(con);
        server.shutdown();
    }
    let config = fc_wal::WalConfig::new(dir.path())
        .with_layout_on_disk()
        .unwrap();
    assert_eq!(config.logs, 2, "one log per worker");
    let store = fc_shard::EmbeddedStore::new(8);
    let report = fc_wal::recover(&config, &store, fc_wal::RecoveryMode::Strict).unwrap();
    assert!(report.last_txn_id > 0, "transaction markers in the log");
    assert_eq!(report.torn_transactions, 0);
    let mut keys: Vec<Vec<u8>> = store.key_snapshot();
    keys.sort();
    let want: Vec<Vec<u8>> = (4..10).map(|i| format!("k{i}").into_bytes()).collect();
    assert_eq!(keys, want);
}
