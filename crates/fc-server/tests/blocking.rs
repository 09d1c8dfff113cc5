//! Blocking pops: clients blocked on keys are served first-come first-served by pushes from
//! any connection, worker or transaction; timeouts, `MULTI`, `CLIENT UNBLOCK`; and blocked
//! clients that go away (in every way) leave nothing behind. Reply bytes were checked
//! against redis-server 7.0.15 (the exact shapes are asserted here).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::{Raw, client, encode, spawn_binary, start};
use fc_server::{ServerConfig, ServerHandle};

fn info_field(con: &mut redis::Connection, field: &str) -> i64 {
    common::info_field(con, "clients", field)
}

/// Waits until `INFO clients` shows `n` blocked clients.
fn wait_blocked(con: &mut redis::Connection, n: i64) {
    wait_field(con, "blocked_clients", n);
}

/// Waits until `INFO`'s `field` reads `n` (30 s at most).
fn wait_field(con: &mut redis::Connection, field: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(con, field) != n {
        assert!(
            Instant::now() < deadline,
            "{field} never reached {n}: {}",
            info_field(con, field)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn server() -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        ..ServerConfig::default()
    })
}

#[test]
fn served_in_arrival_order_by_pushes_from_any_worker() {
    let server = server();
    let mut con = client(&server);
    // Clients on both workers (connections are dealt round-robin), blocked in turn.
    let mut waiting = Vec::new();
    for i in 0..4 {
        let mut c = Raw::open(server.addr());
        c.send(&["BLPOP", "nothing", "q", "0"]);
        wait_blocked(&mut con, i + 1);
        waiting.push(c);
    }
    assert!(waiting[0].silent_for(50));
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert_eq!(list.matches("flags=b").count(), 4);
    let _: i64 = redis::cmd("RPUSH")
        .arg("q")
        .arg(&["a", "b", "c"])
        .query(&mut con)
        .unwrap();
    for (c, v) in waiting.iter_mut().zip(["a", "b", "c"]) {
        c.expect(format!("*2\r\n$1\r\nq\r\n$1\r\n{v}\r\n").as_bytes());
    }
    // The fourth is still waiting: three elements served three clients, and none is left.
    assert!(waiting[3].silent_for(100));
    let len: i64 = redis::cmd("LLEN").arg("q").query(&mut con).unwrap();
    assert_eq!(len, 0);
    // A push inside EXEC wakes it (after the transaction), with what EXEC left.
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("q")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("q")
        .arg("y")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("LPOP").arg("q").query(&mut con).unwrap();
    let _: Vec<redis::Value> = redis::cmd("EXEC").query(&mut con).unwrap();
    waiting[3].expect(b"*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
    wait_blocked(&mut con, 0);
    assert_eq!(info_field(&mut con, "total_blocking_keys"), 0);
}

#[test]
fn sorted_sets_mpop_and_move_chains() {
    let server = server();
    let mut con = client(&server);
    let mut z = Raw::open(server.addr());
    z.send(&["BZPOPMAX", "z", "0"]);
    let mut zm = Raw::open(server.addr());
    wait_blocked(&mut con, 1);
    zm.send(&["BZMPOP", "0", "1", "z", "MIN", "COUNT", "5"]);
    let mut lm = Raw::open(server.addr());
    wait_blocked(&mut con, 2);
    lm.send(&["BLMPOP", "0", "2", "l1", "l2", "RIGHT", "COUNT", "2"]);
    // A move whose destination another client waits on: the push it makes serves that one.
    let mut mv = Raw::open(server.addr());
    wait_blocked(&mut con, 3);
    mv.send(&["BLMOVE", "{t}src", "{t}dst", "LEFT", "RIGHT", "0"]);
    let mut dst = Raw::open(server.addr());
    wait_blocked(&mut con, 4);
    dst.send(&["BRPOP", "{t}dst", "0"]);
    wait_blocked(&mut con, 5);

    let _: i64 = redis::cmd("ZADD")
        .arg(&["z", "1", "a", "2.5", "b", "3", "c"])
        .query(&mut con)
        .unwrap();
    z.expect(b"*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n");
    zm.expect(b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n");
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["l2", "x", "y", "z"])
        .query(&mut con)
        .unwrap();
    lm.expect(b"*2\r\n$2\r\nl2\r\n*2\r\n$1\r\nz\r\n$1\r\ny\r\n");
    let _: i64 = redis::cmd("LPUSH")
        .arg(&["{t}src", "job"])
        .query(&mut con)
        .unwrap();
    mv.expect(b"$3\r\njob\r\n");
    dst.expect(b"*2\r\n$6\r\n{t}dst\r\n$3\r\njob\r\n");
    wait_blocked(&mut con, 0);
    // A key that turns into another type keeps its client blocked; a list at the key again
    // (by RENAME here) serves it.
    let mut w = Raw::open(server.addr());
    w.send(&["BLPOP", "{r}k", "0"]);
    wait_blocked(&mut con, 1);
    let _: () = redis::cmd("SET")
        .arg("{r}k")
        .arg("s")
        .query(&mut con)
        .unwrap();
    assert!(w.silent_for(100));
    let _: () = redis::cmd("DEL").arg("{r}k").query(&mut con).unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["{r}other", "moved"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("RENAME")
        .arg("{r}other")
        .arg("{r}k")
        .query(&mut con)
        .unwrap();
    w.expect(b"*2\r\n$4\r\n{r}k\r\n$5\r\nmoved\r\n");
}

#[test]
fn timeouts_multi_and_client_unblock() {
    let server = server();
    let mut con = client(&server);
    // A timeout answers a null array (RESP2 and RESP3), after at least the time asked.
    let mut c = Raw::open(server.addr());
    let started = Instant::now();
    c.send(&["BLPOP", "a", "b", "0.15"]);
    c.expect(b"*-1\r\n");
    assert!(started.elapsed() >= Duration::from_millis(150));
    c.send(&["HELLO", "3"]);
    let mut hello = Vec::new();
    while !hello.ends_with(b"*0\r\n") {
        let mut b = [0u8; 1];
        c.0.read_exact(&mut b).unwrap();
        hello.push(b[0]);
    }
    c.send(&["BLMOVE", "a", "b", "LEFT", "LEFT", "0.01"]);
    c.expect(b"_\r\n");
    // Inside MULTI they are their non-blocking forms.
    let mut m = Raw::open(server.addr());
    m.send(&["MULTI"]);
    m.send(&["BLPOP", "a", "0"]);
    m.send(&["BRPOPLPUSH", "a", "b", "0"]);
    m.send(&["BZPOPMIN", "a", "0"]);
    m.send(&["EXEC"]);
    m.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n*-1\r\n$-1\r\n*-1\r\n");
    // CLIENT UNBLOCK: TIMEOUT answers as a timeout, ERROR with Redis's error.
    let mut b = Raw::open(server.addr());
    b.send(&["CLIENT", "ID"]);
    let mut id = [0u8; 32];
    let n = b.0.read(&mut id).unwrap();
    let id = String::from_utf8_lossy(&id[1..n - 2]).to_string();
    b.send(&["BZPOPMIN", "z", "0"]);
    wait_blocked(&mut con, 1);
    let one: i64 = redis::cmd("CLIENT")
        .arg(&["UNBLOCK", &id, "ERROR"])
        .query(&mut con)
        .unwrap();
    assert_eq!(one, 1);
    b.expect(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    b.send(&["BLPOP", "z", "0"]);
    wait_blocked(&mut con, 1);
    let one: i64 = redis::cmd("CLIENT")
        .arg(&["UNBLOCK", &id])
        .query(&mut con)
        .unwrap();
    assert_eq!(one, 1);
    b.expect(b"*-1\r\n");
    let zero: i64 = redis::cmd("CLIENT")
        .arg(&["UNBLOCK", &id])
        .query(&mut con)
        .unwrap();
    assert_eq!(zero, 0);
    // Commands pipelined behind a blocking one wait for it, then run in order.
    let mut p = Raw::open(server.addr());
    p.0.write_all(&[encode(&["BLPOP", "p", "0"]), encode(&["GET", "after"])].concat())
        .unwrap();
    wait_blocked(&mut con, 1);
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut con)
        .unwrap();
    let _: i64 = redis::cmd("LPUSH")
        .arg(&["p", "v"])
        .query(&mut con)
        .unwrap();
    p.expect(b"*2\r\n$1\r\np\r\n$1\r\nv\r\n$1\r\n1\r\n");
}

#[test]
fn blocked_clients_that_go_away_leave_nothing() {
    let server = server();
    let mut con = client(&server);
    let mut gone = Vec::new();
    for i in 0..6 {
        let mut c = Raw::open(server.addr());
        c.send(&["BLPOP", &format!("k{i}"), "shared", "0"]);
        gone.push(c);
    }
    wait_blocked(&mut con, 6);
    assert_eq!(info_field(&mut con, "total_blocking_keys"), 7);
    // Closed sockets, a reset, and CLIENT KILL.
    drop(gone.pop());
    let c = gone.pop().unwrap();
    c.0.shutdown(std::net::Shutdown::Both).unwrap();
    wait_blocked(&mut con, 4);
    // A closed client stops being blocked before its connection is gone: CLIENT KILL counts
    // only the four left once it is.
    wait_field(&mut con, "connected_clients", 5);
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "SKIPME", "yes"])
        .query(&mut con)
        .unwrap();
    assert_eq!(killed, 4);
    wait_blocked(&mut con, 0);
    assert_eq!(info_field(&mut con, "total_blocking_keys"), 0);
    // Nothing is served to a client that is gone: the element stays.
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["shared", "kept"])
        .query(&mut con)
        .unwrap();
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg(&["shared", "0", "-1"])
        .query(&mut con)
        .unwrap();
    assert_eq!(left, ["kept"]);
}

/// CPU time (user + system) of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) from field 3 on.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// 10,000 blocked clients cost memory, not CPU: no polling. The server runs as its own
/// process (each side needs 10,000 sockets); its CPU time over an idle second stays far
/// below what any per-client polling would take, and every client is then served.
#[test]
fn ten_thousand_blocked_clients_cost_no_cpu() {
    const CLIENTS: usize = 10_000;
    // Port 0: the address comes from what the server reports, so no other test's server can
    // take it between a probe and the bind.
    let mut server = spawn_binary([
        "--bind",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--maxclients",
        "20000",
    ]);
    let pid = server.child.id();
    let addr = server.addr.clone();
    let mut con = redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let rss_before = rss_kib(pid);
    let mut clients = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let mut c = Raw::open(&addr);
        c.send(&["BLPOP", &format!("queue:{}", i % 100), "0"]);
        clients.push(c);
    }
    wait_blocked(&mut con, CLIENTS as i64);
    let rss_blocked = rss_kib(pid);
    // The quietest of up to five seconds: a second in which the VM itself stalls or the
    // allocator returns memory is not the server polling (polling would cost every second).
    let mut idle = Duration::MAX;
    for _ in 0..5 {
        let before = cpu_time(pid);
        std::thread::sleep(Duration::from_secs(1));
        idle = idle.min(cpu_time(pid) - before);
        if idle < Duration::from_millis(200) {
            break;
        }
    }
    eprintln!(
        "10,000 blocked clients: idle CPU {:?} over 1 s; RSS +{} KiB ({} bytes per client)",
        idle,
        rss_blocked - rss_before,
        (rss_blocked - rss_before) * 1024 / CLIENTS as u64
    );
    // Polling 10,000 clients even 10 times a second would cost far more than this.
    assert!(idle < Duration::from_millis(200), "idle CPU {idle:?}");
    for q in 0..100 {
        let values: Vec<String> = (0..CLIENTS / 100).map(|i| format!("{q}-{i}")).collect();
        let _: i64 = redis::cmd("RPUSH")
            .arg(format!("queue:{q}"))
            .arg(&values)
            .query(&mut con)
            .unwrap();
    }
    // Clients sent their commands one after another but over two workers, so two of them
    // may register in either order: each queue's clients together got its values, once each.
    let mut got: Vec<Vec<String>> = vec![Vec::new(); 100];
    for (i, c) in clients.iter_mut().enumerate() {
        let key = format!("queue:{}", i % 100);
        let head = format!("*2\r\n${}\r\n{key}\r\n$", key.len());
        let mut buf = vec![0u8; head.len()];
        c.0.read_exact(&mut buf).unwrap();
        assert_eq!(String::from_utf8_lossy(&buf), head);
        let mut rest = BufReader::new(&c.0);
        let mut len = String::new();
        rest.read_line(&mut len).unwrap();
        let mut value = String::new();
        rest.read_line(&mut value).unwrap();
        got[i % 100].push(value.trim_end().to_string());
    }
    for (q, mut values) in got.into_iter().enumerate() {
        values.sort();
        let mut expected: Vec<String> = (0..CLIENTS / 100).map(|i| format!("{q}-{i}")).collect();
        expected.sort();
        assert_eq!(values, expected);
    }
    wait_blocked(&mut con, 0);
    let _ = server.child.kill();
    let _ = server.child.wait();
}

/// The reliable-queue pattern with keys on different shards (no hash tag): `BRPOPLPUSH
/// jobs processing` blocks, is served by a push, and the element lands in `processing`.
#[test]
fn moves_between_shards_block_and_serve() {
    let server = server();
    let mut con = client(&server);
    // Already there: the first try moves it.
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["jobs", "j1"])
        .query(&mut con)
        .unwrap();
    let mut worker = Raw::open(server.addr());
    worker.send(&["BRPOPLPUSH", "jobs", "processing", "0"]);
    worker.expect(b"$2\r\nj1\r\n");
    // Blocked, then served by a push from another connection.
    worker.send(&["BLMOVE", "jobs", "processing", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut con, 1);
    let _: i64 = redis::cmd("LPUSH")
        .arg(&["jobs", "j2"])
        .query(&mut con)
        .unwrap();
    worker.expect(b"$2\r\nj2\r\n");
    let processing: Vec<String> = redis::cmd("LRANGE")
        .arg(&["processing", "0", "-1"])
        .query(&mut con)
        .unwrap();
    assert_eq!(processing, ["j2", "j1"]);
    // A destination of another type: the element stays in the source, the client gets the
    // error.
    let _: () = redis::cmd("SET")
        .arg("str")
        .arg("v")
        .query(&mut con)
        .unwrap();
    worker.send(&["BLMOVE", "jobs", "str", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut con, 1);
    let _: i64 = redis::cmd("LPUSH")
        .arg(&["jobs", "j3"])
        .query(&mut con)
        .unwrap();
    worker.expect(b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    let jobs: Vec<String> = redis::cmd("LRANGE")
        .arg(&["jobs", "0", "-1"])
        .query(&mut con)
        .unwrap();
    assert_eq!(jobs, ["j3"]);
}

/// Clients blocked on one key for different types: a sorted set serves the sorted-set pop
/// even when a list pop waits in front of it.
#[test]
fn a_waiter_of_another_type_does_not_hold_up_the_queue() {
    let server = server();
    let mut con = client(&server);
    let mut list = Raw::open(server.addr());
    list.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut con, 1);
    let mut zset = Raw::open(server.addr());
    zset.send(&["BZPOPMIN", "k", "0"]);
    wait_blocked(&mut con, 2);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["k", "1", "a"])
        .query(&mut con)
        .unwrap();
    zset.expect(b"*3\r\n$1\r\nk\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert!(list.silent_for(50));
    let _: i64 = redis::cmd("RPUSH")
        .arg(&["k", "x"])
        .query(&mut con)
        .unwrap();
    list.expect(b"*2\r\n$1\r\nk\r\n$1\r\nx\r\n");
}
