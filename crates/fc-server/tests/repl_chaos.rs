//! Replication under chaos: the real `fc-server` binary as a primary (with a data directory)
//! and a replica, writers changing every data type without pause, and at random moments the
//! link cut (`CLIENT KILL TYPE master`), the replica (with a data directory too) killed with
//! SIGKILL and restarted, resuming from the watermarks its log ended on, the replica's
//! shards imaged (`BGSAVE`), or the primary killed with SIGKILL and restarted on its port
//! from its data. Once the writes
//! stop, the replica must catch up and `DEBUG DIGEST` must agree on both sides.
//! `FC_REPL_CHAOS_CYCLES` sets the number of events (`cargo xtask repl-chaos --cycles N` runs
//! it long; CI runs a short one). A failed run keeps both data directories and names them.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Binary, connect_retrying, spawn_binary};

fn spawn(args: &[String]) -> Binary {
    let base = ["--threads", "2", "--shards", "8", "--save", ""].map(String::from);
    spawn_binary(base.iter().chain(args))
}

fn kill9(server: Binary) {
    // SIGKILL: `Child::kill` sends it on Unix.
    drop(server);
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One random write of any type over a small keyspace (each name keeps one type).
fn one_write(con: &mut redis::Connection, rng: &mut Rng) -> redis::RedisResult<()> {
    let n = rng.below(40);
    let cmd = match rng.below(16) {
        0 => redis::cmd("SET")
            .arg(format!("s{n}"))
            .arg(rng.next())
            .clone(),
        1 => redis::cmd("INCRBY")
            .arg(format!("c{n}"))
            .arg(rng.below(100))
            .clone(),
        2 => redis::cmd("APPEND").arg(format!("s{n}")).arg("x").clone(),
        3 => redis::cmd("RPUSH")
            .arg(format!("l{n}"))
            .arg(rng.next())
            .arg(n)
            .clone(),
        4 => redis::cmd("LPOP").arg(format!("l{n}")).clone(),
        5 => redis::cmd("LMOVE")
            .arg(format!("l{n}"))
            .arg(format!("l{}", rng.below(40)))
            .arg("LEFT")
            .arg("RIGHT")
            .clone(),
        6 => redis::cmd("HSET")
            .arg(format!("h{n}"))
            .arg(format!("f{}", rng.below(8)))
            .arg(rng.next())
            .clone(),
        7 => redis::cmd("HINCRBY")
            .arg(format!("h{n}"))
            .arg("n")
            .arg(1)
            .clone(),
        8 => redis::cmd("SADD")
            .arg(format!("t{n}"))
            .arg(rng.below(50))
            .clone(),
        9 => redis::cmd("SPOP").arg(format!("t{n}")).clone(),
        10 => redis::cmd("ZADD")
            .arg(format!("z{n}"))
            .arg(rng.below(1000))
            .arg(format!("m{}", rng.below(30)))
            .clone(),
        11 => redis::cmd("ZINCRBY")
            .arg(format!("z{n}"))
            .arg(1.5)
            .arg("m1")
            .clone(),
        12 => redis::cmd("XADD")
            .arg(format!("x{n}"))
            .arg("MAXLEN")
            .arg(50)
            .arg("*")
            .arg("v")
            .arg(rng.next())
            .clone(),
        13 => redis::cmd("EXPIRE")
            .arg(format!("s{n}"))
            .arg(100_000)
            .clone(),
        14 => redis::cmd("DEL")
            .arg(format!("s{n}"))
            .arg(format!("l{n}"))
            .clone(),
        _ => {
            // A transaction over several workers.
            return redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(format!("s{n}"))
                .arg(rng.next())
                .ignore()
                .cmd("INCR")
                .arg(format!("c{}", rng.below(40)))
                .ignore()
                .cmd("RPUSH")
                .arg(format!("l{}", rng.below(40)))
                .arg("tx")
                .ignore()
                .query(con);
        }
    };
    cmd.query::<redis::Value>(con).map(|_| ())
}

/// Writes until `stop`, reconnecting whenever the primary goes away.
fn writer(addr: String, seed: u64, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Acquire) {
        let Ok(client) = redis::Client::open(format!("redis://{addr}/")) else {
            return;
        };
        let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
        while !stop.load(Ordering::Acquire) {
            match one_write(&mut con, &mut rng) {
                Ok(()) => {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                // A type error is an answer; a broken connection is not.
                Err(e) if e.kind() == redis::ErrorKind::TypeError || e.code().is_some() => {}
                Err(_) => break,
            }
        }
    }
}

fn info(con: &mut redis::Connection) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query(con)
        .unwrap_or_default()
}

#[test]
fn replication_survives_cut_links_and_killed_servers() {
    let cycles: usize = std::env::var("FC_REPL_CHAOS_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("repl chaos: {cycles} events, seed {seed}");
    let mut rng = Rng(seed | 1);
    // The data directories outlive a failed run (a failure names them), so what the servers
    // wrote can be read afterwards; a passing run removes them.
    let dir = tempfile::tempdir().unwrap().keep();
    // The primary starts on port 0 and restarts on the port it was given: a port probed free
    // and handed to it could be taken by then.
    let primary_on = |bind: &str| -> Vec<String> {
        vec![
            "--bind".into(),
            bind.into(),
            "--data-dir".into(),
            dir.display().to_string(),
            "--appendfsync".into(),
            "everysec".into(),
        ]
    };
    let mut primary = spawn(&primary_on("127.0.0.1:0"));
    let primary_args = primary_on(&primary.addr);
    let port = primary.addr.rsplit(':').next().unwrap().to_string();
    // The replica has a data directory too: a killed replica restarts from its own data and
    // resumes from the watermarks its log ended on (docs/REPLICATION.md, "Restarts").
    let replica_dir = tempfile::tempdir().unwrap().keep();
    let replica_args: Vec<String> = vec![
        "--bind".into(),
        "127.0.0.1:0".into(),
        "--replicaof".into(),
        format!("127.0.0.1:{port}"),
        "--data-dir".into(),
        replica_dir.display().to_string(),
        "--appendfsync".into(),
        "everysec".into(),
    ];
    eprintln!(
        "repl chaos: primary data in {}, replica data in {}",
        dir.display(),
        replica_dir.display()
    );
    let mut replica = spawn(&replica_args);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let (addr, stop, done) = (primary.addr.clone(), Arc::clone(&stop), Arc::clone(&done));
            let seed = seed.wrapping_add(i * 7919);
            std::thread::spawn(move || writer(addr, seed, stop, done))
        })
        .collect();
    let mut events = [0usize; 4];
    let mut resumed = 0;
    for event in 0..cycles {
        std::thread::sleep(Duration::from_millis(150 + rng.below(500)));
        let what = rng.below(4) as usize;
        events[what] += 1;
        match what {
            0 => {
                let mut r = connect_retrying(&replica.addr);
                let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("master")
                    .query(&mut r);
            }
            1 => {
                kill9(replica);
                replica = spawn(&replica_args);
                // Whether it resumed (no full sync since its start), once its link is up.
                let mut r = connect_retrying(&replica.addr);
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    let text = info(&mut r);
                    if text.contains("master_link_status:up") {
                        resumed += usize::from(text.contains("repl_full_syncs:0"));
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            2 => {
                kill9(primary);
                primary = spawn(&primary_args);
            }
            _ => {
                // An image of every replica shard: its log trimmed, its watermarks rewritten.
                let mut r = connect_retrying(&replica.addr);
                let _: redis::RedisResult<String> = redis::cmd("BGSAVE").query(&mut r);
            }
        }
        eprintln!(
            "event {event}: {}; {} writes so far",
            [
                "cut link",
                "kill -9 replica",
                "kill -9 primary",
                "BGSAVE on the replica"
            ][what],
            done.load(Ordering::Relaxed)
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    for w in writers {
        w.join().unwrap();
    }
    // Writes have stopped: the replica must catch up and agree.
    let (mut p, mut r) = (
        connect_retrying(&primary.addr),
        connect_retrying(&replica.addr),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let acked: i64 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut p).unwrap();
        let pd: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut p).unwrap();
        let rd: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut r).unwrap();
        if acked == 1 && pd == rd {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence (seed {seed}; data kept in {} and {}):\nprimary {pd}\n{}\nreplica {rd}\n{}",
            dir.display(),
            replica_dir.display(),
            info(&mut p),
            info(&mut r)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let keys: i64 = redis::cmd("DBSIZE").query(&mut p).unwrap();
    assert!(keys > 0, "the writers wrote");
    assert!(done.load(Ordering::Relaxed) > 0);
    eprintln!(
        "repl chaos: converged after {} cut links, {} replica kills ({resumed} resumed from their watermarks), {} primary kills, {} replica BGSAVEs; {} writes, {keys} keys",
        events[0],
        events[1],
        events[2],
        events[3],
        done.load(Ordering::Relaxed)
    );
    drop((primary, replica));
    for d in [&dir, &replica_dir] {
        let _ = std::fs::remove_dir_all(d);
    }
}
