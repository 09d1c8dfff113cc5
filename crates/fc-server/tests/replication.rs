//! Native replication between fast-cache servers: a replica that starts from snapshots and
//! follows every data type until `DEBUG DIGEST` agrees, `WAIT`, `ROLE` and `INFO
//! replication`, `READONLY`, a cut link that resumes from the backlog, one the backlog left
//! behind that catches up from snapshots, promotion with `REPLICAOF NO ONE`, and what bad
//! tokens, bad frames and watermarks from the future get (the link closed, counted, the
//! primary serving on), and when batches leave (`flush_on_idle`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{client, info_field, start};
use fc_server::{ReplicationConfig, ServerConfig, ServerHandle};
use redis::{Commands, Value};

fn config(replication: ReplicationConfig) -> ServerConfig {
    ServerConfig {
        shards: 8,
        threads: 2,
        replication,
        ..ServerConfig::default()
    }
}

fn replica_of(primary: &ServerHandle, tweak: impl FnOnce(&mut ReplicationConfig)) -> ServerHandle {
    let mut replication = ReplicationConfig {
        replica_of: Some(primary.addr().to_string()),
        ..ReplicationConfig::default()
    };
    tweak(&mut replication);
    start(config(replication))
}

fn info_text(con: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .to_string()
}

/// Waits (up to 20 s) until `check` holds.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn digest(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

/// Waits until the replica acknowledged everything and both digests agree.
fn converged(p: &mut redis::Connection, r: &mut redis::Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(p).unwrap();
    if acked != 1 {
        let a: String = redis::cmd("INFO").arg("replication").query(p).unwrap();
        let b: String = redis::cmd("INFO").arg("replication").query(r).unwrap();
        panic!("not acknowledged:\n{a}\n{b}");
    }
    // Acknowledged means handed to the replica's workers: their queues run in order.
    eventually("equal digests", || digest(p) == digest(r));
}

/// Writes of every type, across shards and databases, transactions included.
fn mixed_writes(con: &mut redis::Connection, round: usize) {
    let r = round;
    let _: () = con.set(format!("s{r}"), "value").unwrap();
    let _: () = con.set_ex(format!("ttl{r}"), "v", 1000).unwrap();
    let _: i64 = con.incr("counter", 3).unwrap();
    let _: f64 = redis::cmd("INCRBYFLOAT")
        .arg("float")
        .arg("1.5")
        .query(con)
        .unwrap();
    let _: i64 = con.append(format!("s{r}"), "+more").unwrap();
    let _: i64 = con.rpush("list", &["a", "b", "c", "d"]).unwrap();
    let _: Option<String> = con.lpop("list", None).unwrap();
    let _: () = redis::cmd("LSET")
        .arg("list")
        .arg(0)
        .arg("B")
        .query(con)
        .unwrap();
    let _: i64 = redis::cmd("LINSERT")
        .arg("list")
        .arg("BEFORE")
        .arg("B")
        .arg("x")
        .query(con)
        .unwrap();
    let _: () = con.ltrim("list", 0, 50).unwrap();
    let _: i64 = con.hset(format!("h{}", r % 3), "field", r).unwrap();
    let _: i64 = con.hincr("hash", "n", 2).unwrap();
    let _: i64 = con
        .sadd("set", &[format!("m{r}"), format!("n{r}")])
        .unwrap();
    let _: Option<String> = con.spop("set").unwrap();
    let _: i64 = con.zadd("zset", format!("z{r}"), r as f64).unwrap();
    let _: f64 = con.zincr("zset", "z0", 0.5).unwrap();
    let _: String = redis::cmd("XADD")
        .arg("stream")
        .arg("*")
        .arg("round")
        .arg(r)
        .query(con)
        .unwrap();
    let _: i64 = con.expire(format!("s{r}"), 5000).unwrap();
    let _: i64 = con.persist(format!("s{r}")).unwrap();
    let _: () = redis::cmd("MSET")
        .arg(format!("a{r}"))
        .arg(1)
        .arg(format!("b{r}"))
        .arg(2)
        .arg(format!("c{r}"))
        .arg(3)
        .query(con)
        .unwrap();
    let _: () = redis::cmd("RENAME")
        .arg(format!("a{r}"))
        .arg(format!("renamed{r}"))
        .query(con)
        .unwrap();
    let _: i64 = con.del(format!("b{r}")).unwrap();
    let _: Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg(format!("tx-a{r}"))
        .arg(r)
        .cmd("SET")
        .arg(format!("tx-b{r}"))
        .arg(r)
        .cmd("LPUSH")
        .arg("tx-list")
        .arg(r)
        // A shard's own group (LMOVE's pop and push) inside the transaction.
        .cmd("LMOVE")
        .arg("tx-list")
        .arg("tx-list")
        .arg("LEFT")
        .arg("RIGHT")
        .query(con)
        .unwrap();
    let _: Option<String> = redis::cmd("LMOVE")
        .arg("list")
        .arg("list")
        .arg("RIGHT")
        .arg("LEFT")
        .query(con)
        .unwrap();
    let _: i64 = redis::cmd("SMOVE")
        .arg("set")
        .arg("set")
        .arg(format!("n{r}"))
        .query(con)
        .unwrap();
    let _: i64 = redis::cmd("ZUNIONSTORE")
        .arg("zset")
        .arg(1)
        .arg("zset")
        .query(con)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(con).unwrap();
    let _: () = con.set(format!("db3-{r}"), r).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(con).unwrap();
}

#[test]
fn a_replica_starts_from_snapshots_and_follows_every_type() {
    let primary = start(config(ReplicationConfig::default()));
    let mut p = client(&primary);
    // Data before the replica exists: it arrives as snapshots.
    for round in 0..20 {
        mixed_writes(&mut p, round);
    }
    let replica = replica_of(&primary, |_| {});
    let mut r = client(&replica);
    eventually("the link", || {
        info_text(&mut r, "master_link_status") == "up"
    });
    converged(&mut p, &mut r);
    assert!(info_field(&mut p, "replication", "repl_shard_snapshots_sent") > 0);
    // Then it follows live changes.
    for round in 20..60 {
        mixed_writes(&mut p, round);
    }
    let _: () = redis::cmd("FLUSHDB")
        .query(&mut p)
        .map(|_: Value| ())
        .unwrap();
    for round in 60..70 {
        mixed_writes(&mut p, round);
    }
    converged(&mut p, &mut r);
    let len: i64 = r.llen("list").unwrap();
    assert_eq!(len, p.llen::<_, i64>("list").unwrap());
    let db3: Option<String> = {
        let _: () = redis::cmd("SELECT").arg(3).query(&mut r).unwrap();
        r.get("db3-65").unwrap()
    };
    assert_eq!(db3.as_deref(), Some("65"));
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 1);
}

#[test]
fn readers_blocked_on_a_replica_are_served_when_their_primary_writes() {
    // Keys over every shard, so over both of the replica's workers: the one its link runs
    // on (which applies what it reads in place) and the other (handed its batches).
    let primary = start(config(ReplicationConfig::default()));
    let mut p = client(&primary);
    let replica = replica_of(&primary, |_| {});
    let mut r = client(&replica);
    eventually("the link", || {
        info_text(&mut r, "master_link_status") == "up"
    });
    let keys: Vec<String> = (0..16).map(|i| format!("stream{i}")).collect();
    let readers: Vec<_> = keys
        .iter()
        .map(|key| {
            let (key, mut con) = (key.clone(), client(&replica));
            std::thread::spawn(move || {
                let got: Value = redis::cmd("XREAD")
                    .arg("BLOCK")
                    .arg(10_000)
                    .arg("STREAMS")
                    .arg(&key)
                    .arg("$")
                    .query(&mut con)
                    .unwrap();
                got
            })
        })
        .collect();
    // Every reader is blocked before the writes.
    eventually("16 blocked readers", || {
        info_field(&mut r, "clients", "blocked_clients") == 16
    });
    let started = Instant::now();
    for key in &keys {
        let _: String = redis::cmd("XADD")
            .arg(key)
            .arg("*")
            .arg("f")
            .arg("v")
            .query(&mut p)
            .unwrap();
    }
    for (reader, key) in readers.into_iter().zip(&keys) {
        let got = reader.join().unwrap();
        assert!(
            format!("{got:?}").contains(key.as_str()),
            "{key}: the reader got {got:?}"
        );
    }
    // Served by the writes, not by the 10 s timeout.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_configured_as_a_replica_is_one_from_its_first_command() {
    // A primary address that never answers: the link never comes up. The listener is held
    // (never accepting) so no other test's server can take its port, which once brought
    // this link up against another test's primary.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = silent.local_addr().unwrap();
    for _ in 0..5 {
        let replica = start(config(ReplicationConfig {
            replica_of: Some(nowhere.to_string()),
            ..ReplicationConfig::default()
        }));
        let mut r = client(&replica);
        // The very first command already sees a replica (it once raced the replication
        // thread's start and answered as a primary).
        let role: Vec<Value> = redis::cmd("ROLE").query(&mut r).unwrap();
        assert_eq!(role[0], Value::BulkString(b"slave".to_vec()), "{role:?}");
        assert_eq!(info_text(&mut r, "master_link_status"), "down");
        let refused = r.set::<_, _, ()>("k", "v").unwrap_err();
        assert_eq!(refused.code(), Some("READONLY"));
    }
}

#[test]
fn a_replica_refuses_writes_and_both_sides_report_their_roles() {
    let primary = start(config(ReplicationConfig::default()));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    eventually("the link", || {
        info_text(&mut r, "master_link_status") == "up"
    });
    let refused = r.set::<_, _, ()>("k", "v").unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"));
    assert_eq!(
        refused.detail(),
        Some("You can't write against a read only replica.")
    );
    // In a transaction the write is refused when queued, and EXEC aborts.
    let mut raw = common::Raw::open(replica.addr());
    raw.send(&["MULTI"]);
    raw.expect(b"+OK\r\n");
    raw.send(&["SET", "k", "v"]);
    raw.expect(b"-READONLY You can't write against a read only replica.\r\n");
    raw.send(&["EXEC"]);
    raw.expect(b"-EXECABORT Transaction discarded because of previous errors.\r\n");
    // A script's write too.
    let script: redis::RedisResult<Value> = redis::cmd("EVAL")
        .arg("return redis.call('set', KEYS[1], 'v')")
        .arg(1)
        .arg("k")
        .query(&mut r);
    let err = script.unwrap_err().to_string();
    assert!(
        err.contains("You can't write against a read only replica."),
        "a script cannot write on a replica: {err}"
    );
    let _: () = p.set("k", "v").unwrap();
    let waited: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(waited, 1);
    let value: Option<String> = r.get("k").unwrap();
    assert_eq!(value.as_deref(), Some("v"));
    // WAIT for more replicas than there are times out with the count there is.
    let waited: i64 = redis::cmd("WAIT").arg(2).arg(100).query(&mut p).unwrap();
    assert_eq!(waited, 1);
    let wait_on_replica: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(10).query(&mut r);
    assert!(wait_on_replica.is_err());
    // ROLE: ["master", offset, [[ip, port, offset]]] and ["slave", host, port, state, offset].
    let role: Vec<Value> = redis::cmd("ROLE").query(&mut p).unwrap();
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    let Value::Array(replicas) = &role[2] else {
        panic!("{role:?}")
    };
    assert_eq!(replicas.len(), 1);
    let role: Vec<Value> = redis::cmd("ROLE").query(&mut r).unwrap();
    assert_eq!(role[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[2], Value::Int(i64::from(primary.addr().port())));
    assert_eq!(role[3], Value::BulkString(b"connected".to_vec()));
    assert_eq!(info_text(&mut p, "role"), "master");
    assert_eq!(info_field(&mut p, "replication", "connected_slaves"), 1);
    let slave0 = info_text(&mut p, "slave0");
    assert!(slave0.contains("state=online"), "{slave0}");
    assert!(
        slave0.contains(&format!("port={}", replica.addr().port())),
        "{slave0}"
    );
    assert_eq!(info_text(&mut r, "role"), "slave");
    assert_eq!(
        info_field(&mut r, "replication", "master_sync_in_progress"),
        0
    );
    assert_eq!(
        info_field(&mut r, "replication", "slave_repl_offset"),
        info_field(&mut p, "replication", "master_repl_offset")
    );
    // REPLICAOF to the same primary is a no-op, as Redis says.
    let again: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.addr().port())
        .query(&mut r)
        .unwrap();
    assert_eq!(again, "OK Already connected to specified master");
    // As redis-server 7.0.15 answers both.
    for port in ["nope", "70000"] {
        let bad: redis::RedisResult<String> = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(port)
            .query(&mut r);
        assert_eq!(bad.unwrap_err().detail(), Some("Invalid master port"));
    }
}

#[test]
fn a_cut_link_resumes_from_the_backlog() {
    let primary = start(config(ReplicationConfig::default()));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    for round in 0..10 {
        mixed_writes(&mut p, round);
    }
    converged(&mut p, &mut r);
    // The backlog's memory, the same in both sections.
    let held = info_field(&mut p, "replication", "repl_backlog_histlen");
    assert!(held > 0);
    assert_eq!(
        info_field(&mut p, "memory", "mem_replication_backlog"),
        held
    );
    let snapshots = info_field(&mut p, "replication", "repl_shard_snapshots_sent");
    for cut in 0..5 {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("master")
            .query(&mut r)
            .unwrap();
        assert_eq!(killed, 1, "cut {cut}");
        for round in 0..5 {
            mixed_writes(&mut p, 100 + cut * 10 + round);
        }
        eventually("the link again", || {
            info_text(&mut r, "master_link_status") == "up"
        });
        converged(&mut p, &mut r);
    }
    // No shard needed a snapshot again, and the replica never started over.
    assert_eq!(
        info_field(&mut p, "replication", "repl_shard_snapshots_sent"),
        snapshots
    );
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 1);
    // Cutting from the primary's side works the same way.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 1);
    mixed_writes(&mut p, 999);
    eventually("the link again", || {
        info_field(&mut p, "replication", "connected_slaves") == 1
    });
    converged(&mut p, &mut r);
}

#[test]
fn a_replica_the_backlog_left_behind_catches_up_from_snapshots() {
    // 16 KiB of backlog over 8 shards: a few dozen writes per shard.
    let primary = start(config(ReplicationConfig {
        backlog_bytes: 16 << 10,
        ..ReplicationConfig::default()
    }));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    let _: () = p.set("first", 1).unwrap();
    converged(&mut p, &mut r);
    let before = info_field(&mut p, "replication", "repl_shard_snapshots_sent");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query(&mut r)
        .unwrap();
    // Far more than the backlog holds, while the replica is away (it waits 100 ms).
    let mut pipe = redis::pipe();
    for i in 0..4000 {
        pipe.cmd("SET")
            .arg(format!("bulk{i}"))
            .arg("x".repeat(64))
            .ignore();
    }
    let _: () = pipe.query(&mut p).unwrap();
    eventually("the link again", || {
        info_text(&mut r, "master_link_status") == "up"
    });
    converged(&mut p, &mut r);
    assert!(
        info_field(&mut p, "replication", "repl_shard_snapshots_sent") > before,
        "shards whose backlog moved on were sent as snapshots"
    );
    assert_eq!(r.get::<_, String>("bulk3999").unwrap(), "x".repeat(64));
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 1);
}

/// A raw replica link: the frames it reads, checked shard by shard for gaps.
struct RawReplica {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Per shard, the next sequence it needs (`None`: before its first snapshot ended).
    next: Vec<Option<u64>>,
    snapshots: usize,
    /// `AckRequest`s read (a `WAIT` on the primary asks).
    ack_requests: usize,
}

impl RawReplica {
    fn connect(primary: &ServerHandle, shards: usize) -> Self {
        let mut stream = TcpStream::connect(primary.repl_addr().unwrap()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let hello = fc_repl::Hello {
            token: Vec::new(),
            replica_id: "raw".into(),
            port: 1,
            primary_id: String::new(),
            watermarks: vec![0; shards],
        };
        let mut wire = Vec::new();
        hello.frame().encode(fc_repl::Compression::None, &mut wire);
        stream.write_all(&wire).unwrap();
        Self {
            stream,
            buf: Vec::new(),
            next: vec![None; shards],
            snapshots: 0,
            ack_requests: 0,
        }
    }

    /// Reads frames until `done` holds, checking that no shard's sequence skips.
    fn read_until(&mut self, mut done: impl FnMut(&Self) -> bool) {
        let decoder = fc_repl::FrameDecoder::default();
        let mut chunk = vec![0u8; 256 << 10];
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(Instant::now() < deadline, "still waiting: {:?}", self.next);
            let n = self.stream.read(&mut chunk).expect("the link stays up");
            assert!(n > 0, "the primary closed the link");
            self.buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            while let Some((frame, used)) = decoder.decode_slice(&self.buf[at..]).unwrap() {
                at += used;
                let shard = frame.shard as usize;
                match frame.kind {
                    fc_repl::Kind::Welcome => {
                        let welcome = fc_repl::Welcome::decode(&frame).unwrap();
                        for (shard, (plan, _)) in welcome.shards.iter().enumerate() {
                            if *plan == fc_repl::Plan::Backlog {
                                self.next[shard] = Some(1);
                            }
                        }
                    }
                    fc_repl::Kind::Batch => {
                        let next = self.next[shard].expect("a batch after the shard's snapshot");
                        let last = frame.first_seq + u64::from(frame.records) - 1;
                        assert!(
                            frame.first_seq <= next,
                            "shard {shard}: a gap ({} after {})",
                            frame.first_seq,
                            next - 1
                        );
                        self.next[shard] = Some(next.max(last + 1));
                    }
                    fc_repl::Kind::SnapshotEnd => {
                        self.snapshots += 1;
                        self.next[shard] = Some(frame.first_seq + 1);
                    }
                    fc_repl::Kind::AckRequest => self.ack_requests += 1,
                    _ => {}
                }
            }
            self.buf.drain(..at);
        }
    }

    /// Whether every shard's sequence reached `seqs`.
    fn reached(&self, seqs: &[u64]) -> bool {
        self.next
            .iter()
            .zip(seqs)
            .all(|(next, &seq)| next.is_some_and(|n| n > seq))
    }
}

fn shard_seqs(con: &mut redis::Connection) -> Vec<u64> {
    info_text(con, "repl_shard_seqs")
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn a_replica_that_stops_reading_gets_the_shards_it_lost_resent_on_the_same_link() {
    // 256 KiB of backlog over 8 shards, and a replica that reads nothing for a while.
    let primary = start(config(ReplicationConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        backlog_bytes: 256 << 10,
        ..ReplicationConfig::default()
    }));
    let mut p = client(&primary);
    let _: () = p.set("first", 1).unwrap();
    let mut raw = RawReplica::connect(&primary, 8);
    raw.read_until(|r| r.next.iter().all(Option::is_some));
    let synced = raw.snapshots;
    assert!(synced >= 1, "the shard holding `first` came as a snapshot");
    // Caught up, the link is the pump's to write. The replica stops reading while 24 MiB
    // are written: far more than the sockets and the backlog hold.
    let value = "v".repeat(1024);
    for round in 0..24 {
        let mut pipe = redis::pipe();
        for i in 0..1024 {
            pipe.cmd("SET")
                .arg(format!("k{round}:{i}"))
                .arg(&value)
                .ignore();
        }
        let _: () = pipe.query(&mut p).unwrap();
    }
    let seqs = shard_seqs(&mut p);
    // Reading again, it gets everything it was sent, then the shards the backlog lost, on
    // the same connection, with no sequence skipped.
    raw.read_until(|r| r.reached(&seqs));
    assert!(raw.snapshots > synced, "no shard was resent");
    assert_eq!(info_field(&mut p, "replication", "connected_slaves"), 1);
    // And it keeps following.
    let _: () = p.set("after", 1).unwrap();
    let seqs = shard_seqs(&mut p);
    raw.read_until(|r| r.reached(&seqs));
    // A `WAIT` asks it to acknowledge (it never does: the answer is 0).
    let asked = raw.ack_requests;
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(50).query(&mut p).unwrap();
    assert_eq!(acked, 0);
    raw.read_until(|r| r.ack_requests > asked);
}

#[test]
fn replicaof_no_one_promotes_the_replica() {
    let primary = start(config(ReplicationConfig::default()));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    let _: () = p.set("kept", "yes").unwrap();
    converged(&mut p, &mut r);
    let ok: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    assert_eq!(ok, "OK");
    // Its data stays; it takes writes; the old primary's writes no longer reach it.
    assert_eq!(r.get::<_, String>("kept").unwrap(), "yes");
    let _: () = r.set("mine", "1").unwrap();
    let _: () = p.set("after", "1").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(r.get::<_, Option<String>>("after").unwrap(), None);
    assert_eq!(info_text(&mut r, "role"), "master");
    eventually("the old primary sees no replica", || {
        info_field(&mut p, "replication", "connected_slaves") == 0
    });
    // And it can serve a replica of its own (a chain).
    let second = replica_of(&replica, |_| {});
    let mut s = client(&second);
    converged(&mut r, &mut s);
    assert_eq!(s.get::<_, String>("mine").unwrap(), "1");
}

#[test]
fn bad_tokens_bad_frames_and_future_watermarks_are_refused() {
    let primary = start(config(ReplicationConfig {
        auth_token: Some("s3cret".into()),
        bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ReplicationConfig::default()
    }));
    let mut p = client(&primary);
    let _: () = p.set("k", "v").unwrap();
    // A wrong token: the replica's link stays down and says why.
    let replica = replica_of(&primary, |r| r.auth_token = Some("wrong".into()));
    let mut r = client(&replica);
    eventually("the refusal", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("authentication failed")
    });
    assert_eq!(info_text(&mut r, "master_link_status"), "down");
    assert!(info_field(&mut p, "replication", "repl_links_refused") >= 1);
    // The right token, on the replication port.
    let good = start(config(ReplicationConfig {
        replica_of: Some(primary.repl_addr().unwrap().to_string()),
        auth_token: Some("s3cret".into()),
        ..ReplicationConfig::default()
    }));
    let mut g = client(&good);
    converged(&mut p, &mut g);
    // Garbage, a bad CRC, and a hello from the future: each link closed, counted.
    let refused = info_field(&mut p, "replication", "repl_links_refused");
    let closed = |bytes: &[u8]| {
        let mut s = TcpStream::connect(primary.repl_addr().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(bytes).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    };
    closed(b"GET k\r\n");
    let mut hello = fc_repl::Hello {
        token: b"s3cret".to_vec(),
        replica_id: "probe".into(),
        port: 1,
        primary_id: info_text(&mut p, "master_replid"),
        watermarks: vec![u64::MAX / 2; 8],
    };
    let mut wire = Vec::new();
    hello.frame().encode(fc_repl::Compression::None, &mut wire);
    let mut bad_crc = wire.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    closed(&bad_crc);
    closed(&wire);
    hello.watermarks = vec![0; 3];
    let mut wrong_shards = Vec::new();
    hello
        .frame()
        .encode(fc_repl::Compression::None, &mut wrong_shards);
    closed(&wrong_shards);
    assert_eq!(
        info_field(&mut p, "replication", "repl_links_refused"),
        refused + 4
    );
    // The primary serves on, its data untouched, its good replica still in sync.
    let _: () = p.set("after", "ok").unwrap();
    converged(&mut p, &mut g);
    assert_eq!(g.get::<_, String>("after").unwrap(), "ok");
}

#[test]
fn the_specifications_replication_section_loads() {
    let toml = r#"
        [replication]
        enabled = true
        role = "primary"
        bind_addr = "127.0.0.1:7631"
        auth_token = "replace-me"
        compression = "none"
        zstd_level = 3
        send_policy = "batch"
        batch_max_records = 64
        batch_max_bytes = 262144
        batch_max_delay_us = 250
        backlog_bytes = 67108864
        snapshot_chunk_bytes = 1048576
    "#;
    let file = fc_server::config::FastCacheConfig::from_toml_str(toml).unwrap();
    let server = file.server_config().unwrap();
    let r = &server.replication;
    assert!(r.enabled);
    assert_eq!(r.bind, Some("127.0.0.1:7631".parse().unwrap()));
    assert_eq!(r.auth_token.as_deref(), Some("replace-me"));
    assert_eq!(r.batch, Some((64, 262_144, 250)));
    assert_eq!(r.backlog_bytes, 64 << 20);
    assert_eq!(r.snapshot_chunk_bytes, 1 << 20);
    assert!(
        r.flush_on_idle,
        "batches leave when their worker runs out of work by default"
    );
    let off =
        fc_server::config::FastCacheConfig::from_toml_str("[replication]\nflush_on_idle = false\n")
            .unwrap()
            .server_config()
            .unwrap();
    assert!(!off.replication.flush_on_idle);
    let bad = fc_server::config::FastCacheConfig::from_toml_str(
        "[replication]\nrole = \"replica\"\nsend_policy = \"sometimes\"\ncompression = \"lz4\"\n",
    )
    .unwrap()
    .server_config()
    .unwrap_err()
    .to_string();
    for field in [
        "replication.primary_addr",
        "replication.send_policy",
        "replication.compression",
    ] {
        assert!(bad.contains(field), "{field} in {bad}");
    }
}

#[test]
fn zstd_and_immediate_batches_replicate_the_same() {
    let primary = start(config(ReplicationConfig {
        zstd_level: Some(3),
        batch: None,
        ..ReplicationConfig::default()
    }));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    for round in 0..30 {
        mixed_writes(&mut p, round);
    }
    let big = "compressible ".repeat(10_000);
    let _: () = p.set("big", &big).unwrap();
    converged(&mut p, &mut r);
    assert_eq!(r.get::<_, String>("big").unwrap(), big);
    assert!(
        (info_field(&mut p, "replication", "repl_sent_bytes") as usize) < big.len(),
        "zstd shrank the big value's frame"
    );
}

/// Sweeps run by the primary's workers: going idle (`repl_idle_flushes`), or once a read
/// they served left a write waiting a millisecond after the last sweep
/// (`repl_busy_flushes`).
fn worker_sweeps(con: &mut redis::Connection) -> i64 {
    info_field(con, "replication", "repl_idle_flushes")
        + info_field(con, "replication", "repl_busy_flushes")
}

#[test]
fn a_write_leaves_when_its_worker_goes_idle_not_at_the_next_tick() {
    // A 5 s batch delay: the pump, busy once it has sent a batch, naps up to 5 s between
    // sweeps; only its worker sweeping (as it goes idle, or once the read that wrote is
    // served, the last sweep being a millisecond old) sends the write sooner. On monoio the
    // workers have no park hook: their writes wait for the pump's clock (half a second
    // here), and no worker sweeps (docs/REPLICATION.md).
    let monoio = matches!(
        common::runtime_from_env(),
        fc_server::config::Runtime::Monoio(_)
    );
    let primary = start(config(ReplicationConfig {
        batch: Some((64, 256 << 10, if monoio { 500_000 } else { 5_000_000 })),
        ..ReplicationConfig::default()
    }));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    let mut woken = 0;
    for round in 0..5 {
        // The first write wakes an idle pump; once the replica serves it, the pump has sealed
        // a batch and naps.
        let first = format!("first:{round}");
        let _: () = p.set(&first, 1).unwrap();
        eventually("the first write on the replica", || {
            r.exists::<_, bool>(&first).unwrap()
        });
        // The pump has swept the first write and naps (it naps after a sweep that sent
        // something, and goes idle only after one that found nothing).
        std::thread::sleep(Duration::from_millis(20));
        let flushes = worker_sweeps(&mut p);
        let second = format!("second:{round}");
        let t0 = Instant::now();
        let _: () = p.set(&second, 2).unwrap();
        while !r.exists::<_, bool>(&second).unwrap() {
            assert!(
                t0.elapsed() < Duration::from_millis(2_500),
                "round {round}: the second write waited for the pump's 5 s tick"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        woken += u64::from(worker_sweeps(&mut p) > flushes);
    }
    if monoio {
        assert_eq!(worker_sweeps(&mut p), 0, "monoio workers do not sweep");
        return;
    }
    // A round may find the pump idle instead (a nudge from the first write's worker can
    // land during the sweep that took it: the pump sweeps again, finds nothing and idles),
    // and then the second write wakes it itself. Not every round.
    assert!(woken >= 1, "no idle worker woke the napping pump");
}

#[test]
fn with_flush_on_idle_off_batches_wait_for_the_pumps_clock() {
    let primary = start(config(ReplicationConfig {
        batch: Some((64, 256 << 10, 200_000)),
        flush_on_idle: false,
        ..ReplicationConfig::default()
    }));
    let replica = replica_of(&primary, |_| {});
    let (mut p, mut r) = (client(&primary), client(&replica));
    for round in 0..20 {
        let key = format!("k:{round}");
        let _: () = p.set(&key, round).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    converged(&mut p, &mut r);
    assert_eq!(r.get::<_, i64>("k:19").unwrap(), 19);
    assert_eq!(
        info_field(&mut p, "replication", "repl_idle_flushes"),
        0,
        "no worker swept"
    );
}

#[test]
fn a_replicas_memcached_port_refuses_writes_and_serves_reads() {
    let primary = start(config(ReplicationConfig::default()));
    let replica = start(ServerConfig {
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..config(ReplicationConfig {
            replica_of: Some(primary.addr().to_string()),
            ..ReplicationConfig::default()
        })
    });
    let (mut p, mut r) = (client(&primary), client(&replica));
    let _: () = p.set("mc", "from-primary").unwrap();
    converged(&mut p, &mut r);
    let mut mc = TcpStream::connect(replica.memcached_addr().unwrap()).unwrap();
    mc.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ask = |request: &[u8], expect: &[u8]| {
        mc.write_all(request).unwrap();
        let mut got = vec![0u8; expect.len()];
        mc.read_exact(&mut got).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expect)
        );
    };
    ask(
        b"set k 0 0 1\r\nv\r\n",
        b"SERVER_ERROR read only replica\r\n",
    );
    ask(b"delete mc\r\n", b"SERVER_ERROR read only replica\r\n");
    ask(b"ms k 1\r\nv\r\n", b"SERVER_ERROR read only replica\r\n");
    ask(b"get mc\r\n", b"VALUE mc 0 12\r\nfrom-primary\r\nEND\r\n");
}

#[test]
fn a_replica_without_its_primary_refuses_data_commands_when_told_not_to_serve_stale_data() {
    // A primary that is not there.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = gone.local_addr().unwrap();
    drop(gone);
    let replica = start(config(ReplicationConfig {
        replica_of: Some(addr.to_string()),
        serve_stale_data: false,
        ..ReplicationConfig::default()
    }));
    let mut r = client(&replica);
    let refused = r.get::<_, Option<String>>("k").unwrap_err();
    assert_eq!(refused.code(), Some("MASTERDOWN"));
    assert_eq!(
        refused.detail(),
        Some("Link with MASTER is down and replica-serve-stale-data is set to 'no'.")
    );
    // Commands flagged stale still run.
    assert_eq!(info_text(&mut r, "master_link_status"), "down");
    let served: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("replica-serve-stale-data")
        .query(&mut r)
        .unwrap();
    assert_eq!(served, ["replica-serve-stale-data", "no"]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("yes")
        .query(&mut r)
        .unwrap();
    assert_eq!(r.get::<_, Option<String>>("k").unwrap(), None);
    let bad: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("maybe")
        .query(&mut r);
    assert!(bad.is_err());
}

/// A replica with a data directory writes its watermarks into its own log after what it
/// applied (and again after each image of a shard): restarted, it resumes from them through
/// the primary's backlog, with no shard sent again, instead of syncing everything.
#[test]
fn a_restarted_replica_resumes_from_the_watermarks_in_its_data_directory() {
    let primary = start(config(ReplicationConfig::default()));
    let dir = tempfile::tempdir().unwrap();
    let replica_config = || ServerConfig {
        persistence: fc_server::PersistenceConfig {
            data_dir: Some(dir.path().to_path_buf()),
            save: Vec::new(),
            ..fc_server::PersistenceConfig::default()
        },
        ..config(ReplicationConfig {
            replica_of: Some(primary.addr().to_string()),
            ..ReplicationConfig::default()
        })
    };
    let replica = start(replica_config());
    let (mut p, mut r) = (client(&primary), client(&replica));
    for round in 0..4 {
        mixed_writes(&mut p, round);
    }
    converged(&mut p, &mut r);
    // An image of every shard: the log before it is trimmed, the watermarks written again.
    let _: () = redis::cmd("SAVE").query(&mut r).unwrap();
    for round in 4..8 {
        mixed_writes(&mut p, round);
    }
    converged(&mut p, &mut r);
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 1);
    replica.shutdown();

    // Written while the replica is away: the backlog holds them.
    for round in 8..12 {
        mixed_writes(&mut p, round);
    }
    let sent = info_field(&mut p, "replication", "repl_shard_snapshots_sent");
    let replica = start(replica_config());
    let mut r = client(&replica);
    eventually("the link again", || {
        info_text(&mut r, "master_link_status") == "up"
    });
    converged(&mut p, &mut r);
    assert_eq!(
        info_field(&mut p, "replication", "repl_shard_snapshots_sent"),
        sent,
        "no shard was sent again"
    );
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 0);
    assert_eq!(r.get::<_, String>("renamed11").unwrap(), "1");
    replica.shutdown();

    // Promoted, it writes on its own: its watermarks no longer describe its data, and a
    // restart as a replica of the same primary syncs from nothing again.
    let replica = start(replica_config());
    let mut r = client(&replica);
    converged(&mut p, &mut r);
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    for i in 0..64 {
        let _: () = r.set(format!("local{i}"), i).unwrap();
    }
    replica.shutdown();
    let replica = start(replica_config());
    let mut r = client(&replica);
    converged(&mut p, &mut r);
    let local: Option<String> = r.get("local0").unwrap();
    assert_eq!(
        local, None,
        "the promoted server's own writes are gone after a sync"
    );
    // Its 64 keys reach all 8 shards: no watermark is left to resume from.
    assert_eq!(info_field(&mut r, "replication", "repl_full_syncs"), 1);
}
