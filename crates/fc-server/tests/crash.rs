//! Durability you can `kill -9`: the real `fc-server` binary with a data directory, writers on
//! several connections, SIGKILL at a random moment, restart, and every acknowledged write must
//! be there with its exact value — and no key may hold a value that was never written (a key
//! whose last write was in flight at the kill holds its last acknowledged value or the in-flight
//! one). Cycles alternate `appendfsync always` and `everysec` and take snapshots (`BGSAVE`)
//! mid-run, so recovery goes through images and log tails. `FC_CRASH_CYCLES` sets the number
//! of cycles (`cargo xtask crash --cycles N` runs it long).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Binary, spawn_binary};

use redis::Commands;

/// What a writer knows about one key: the value last acknowledged, and one in flight.
#[derive(Debug, Clone, Default)]
struct Known {
    acked: Option<String>,
    in_flight: Option<String>,
}

type Ledger = Arc<Mutex<HashMap<String, Known>>>;

fn spawn(dir: &std::path::Path, fsync: &str) -> Binary {
    let dir = dir.display().to_string();
    spawn_binary([
        "--bind",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--shards",
        "8",
        "--data-dir",
        &dir,
        "--appendfsync",
        fsync,
        "--save",
        "",
        "--wal-segment-bytes",
        "65536",
    ])
}

fn connect(addr: &str) -> redis::Connection {
    common::connect_retrying(addr)
}

/// The database writer `id` writes in (0, 1 or 2: databases other than 0 are logged and
/// recovered too).
fn db_of_writer(id: usize) -> usize {
    id % 3
}

/// The database of a ledger key (`counter:<id>` or `k:<id>:<n>`).
fn db_of_key(key: &str) -> usize {
    db_of_writer(key.split(':').nth(1).unwrap().parse().unwrap())
}

/// Writes until its connection fails: SETs over a key range, INCRs of a counter, RPUSHes
/// and the occasional BGSAVE, recording each key's acknowledged and in-flight values.
fn writer(addr: String, id: usize, cycle: usize, ledger: Ledger, seed: u64) {
    let db = db_of_writer(id);
    let Ok(client) = redis::Client::open(format!("redis://{addr}/{db}")) else {
        return;
    };
    let Ok(mut con) = client.get_connection() else {
        return;
    };
    let mut x = seed | 1;
    for i in 0u64.. {
        if i % 100 == 50 {
            let _: redis::RedisResult<String> = redis::cmd("BGSAVE").query(&mut con);
            continue;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (key, value, result): (String, String, redis::RedisResult<()>) = match x % 10 {
            0 => {
                let key = format!("counter:{id}");
                let next = {
                    let ledger = ledger.lock().unwrap();
                    ledger
                        .get(&key)
                        .and_then(|k| k.acked.clone())
                        .map_or(0, |v| v.parse::<i64>().unwrap())
                        + 1
                };
                ledger
                    .lock()
                    .unwrap()
                    .entry(key.clone())
                    .or_default()
                    .in_flight = Some(next.to_string());
                let r: redis::RedisResult<i64> = con.incr(&key, 1);
                let r = r.map(|got| {
                    assert_eq!(got, next, "{key}: INCR answered {got}, expected {next}")
                });
                (key, next.to_string(), r)
            }
            _ => {
                let key = format!("k:{id}:{}", (x >> 8) % 200);
                let value = format!("c{cycle}-w{id}-{i}-{}", "x".repeat((x % 64) as usize));
                ledger
                    .lock()
                    .unwrap()
                    .entry(key.clone())
                    .or_default()
                    .in_flight = Some(value.clone());
                let r: redis::RedisResult<()> = con.set(&key, &value);
                (key, value, r)
            }
        };
        let mut ledger = ledger.lock().unwrap();
        let known = ledger.get_mut(&key).unwrap();
        if result.is_err() {
            // The kill: what was in flight may or may not have landed.
            return;
        }
        known.acked = Some(value);
        known.in_flight = None;
    }
}

fn check(addr: &str, ledger: &Ledger, cycle: usize) -> usize {
    let mut cons: Vec<redis::Connection> = (0..3)
        .map(|db| {
            let mut con = connect(addr);
            let _: () = redis::cmd("SELECT").arg(db).query(&mut con).unwrap();
            con
        })
        .collect();
    let mut ledger = ledger.lock().unwrap();
    let mut checked = 0;
    for (key, known) in ledger.iter_mut() {
        let got: Option<String> = cons[db_of_key(key)].get(key).unwrap();
        // Recovered into its own database only.
        let elsewhere: bool = cons[(db_of_key(key) + 1) % 3].exists(key).unwrap();
        assert!(
            !elsewhere,
            "cycle {cycle}: {key} appeared in another database"
        );
        let ok = match (&got, &known.acked, &known.in_flight) {
            (Some(v), _, Some(f)) if v == f => true,
            (Some(v), Some(a), _) => v == a,
            (None, None, _) => true,
            _ => false,
        };
        assert!(
            ok,
            "cycle {cycle}: {key} holds {got:?}; acknowledged {:?}, in flight {:?}",
            known.acked, known.in_flight
        );
        // What is there now is the acknowledged state for the next cycle.
        known.acked = got;
        known.in_flight = None;
        checked += 1;
    }
    checked
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let cycles: usize = std::env::var("FC_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let ledger: Ledger = Arc::default();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut acked_total = 0;
    for cycle in 0..cycles {
        let fsync = if cycle % 2 == 0 { "always" } else { "everysec" };
        let mut server = spawn(dir.path(), fsync);
        if cycle > 0 {
            acked_total += check(&server.addr, &ledger, cycle);
        }
        let writers: Vec<_> = (0..4)
            .map(|id| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let (addr, ledger, s) = (server.addr.clone(), Arc::clone(&ledger), seed);
                std::thread::spawn(move || writer(addr, id, cycle, ledger, s))
            })
            .collect();
        // A random moment: 30..330 ms of writing.
        std::thread::sleep(Duration::from_millis(30 + (seed >> 33) % 300));
        server.child.kill().expect("SIGKILL");
        let _ = server.child.wait();
        for w in writers {
            w.join().expect("writer");
        }
    }
    let server = spawn(dir.path(), "always");
    acked_total += check(&server.addr, &ledger, cycles);
    drop(server);
    assert!(acked_total > 0);
    eprintln!("{cycles} kill -9 cycles; {acked_total} key checks");
}

/// What a transaction writer knows: the round last acknowledged and the one in flight.
#[derive(Debug, Clone, Copy, Default)]
struct Rounds {
    acked: Option<u64>,
    in_flight: Option<u64>,
}

/// Keys of group `group` (`tx:<group>:<j>`): spread over every worker.
fn group_keys(group: usize) -> Vec<String> {
    (0..TXN_KEYS).map(|j| format!("tx:{group}:{j}")).collect()
}

const TXN_KEYS: usize = 48;

/// Writes round after round of one group's keys until the connection fails: `MULTI`, a `SET`
/// of every key to `<round>-<padding>`, `EXEC` (even groups), or one `MSET` of them all (odd
/// groups); now and then a `BGSAVE`.
fn txn_writer(addr: String, group: usize, rounds: Arc<Mutex<Vec<Rounds>>>, first: u64) {
    let Ok(client) = redis::Client::open(format!("redis://{addr}/")) else {
        return;
    };
    let Ok(mut con) = client.get_connection() else {
        return;
    };
    let keys = group_keys(group);
    for round in first.. {
        if round % 50 == 25 {
            let _: redis::RedisResult<String> = redis::cmd("BGSAVE").query(&mut con);
        }
        let value = format!("{round}-{}", "p".repeat(256 + (round % 7) as usize * 100));
        rounds.lock().unwrap()[group].in_flight = Some(round);
        let result: redis::RedisResult<()> = if group.is_multiple_of(2) {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for key in &keys {
                pipe.set(key, &value).ignore();
            }
            pipe.query(&mut con)
        } else {
            let pairs: Vec<(&String, &String)> = keys.iter().map(|k| (k, &value)).collect();
            con.mset(&pairs)
        };
        let mut rounds = rounds.lock().unwrap();
        if result.is_err() {
            return;
        }
        rounds[group] = Rounds {
            acked: Some(round),
            in_flight: None,
        };
    }
}

/// Every group's keys hold one round (all-or-nothing), that round is the last acknowledged or
/// the one in flight; returns the rounds found, which become the acknowledged state.
fn check_groups(addr: &str, rounds: &mut [Rounds], cycle: usize) {
    let mut con = connect(addr);
    for (group, known) in rounds.iter_mut().enumerate() {
        let values: Vec<Option<String>> = con.mget(group_keys(group)).unwrap();
        let found: Vec<Option<u64>> = values
            .iter()
            .map(|v| {
                v.as_ref()
                    .map(|v| v.split('-').next().unwrap().parse().unwrap())
            })
            .collect();
        assert!(
            found.iter().all(|r| *r == found[0]),
            "cycle {cycle}: group {group}'s keys hold different rounds (a torn transaction): {found:?}"
        );
        let ok = found[0] == known.acked || (found[0].is_some() && found[0] == known.in_flight);
        assert!(
            ok,
            "cycle {cycle}: group {group} holds round {:?}; acknowledged {:?}, in flight {:?}",
            found[0], known.acked, known.in_flight
        );
        *known = Rounds {
            acked: found[0],
            in_flight: None,
        };
    }
}

/// Cross-worker `EXEC`s and `MSET`s of 48 keys each, killed with SIGKILL at random moments:
/// after every restart each transaction's keys are all-or-nothing (one round everywhere),
/// and no acknowledged round is lost. Cycles alternate `always` and `everysec`.
#[test]
fn cross_worker_transactions_are_all_or_nothing_after_sigkill() {
    let cycles: usize = std::env::var("FC_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let groups = 4;
    let rounds = Arc::new(Mutex::new(vec![Rounds::default(); groups]));
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for cycle in 0..cycles {
        let fsync = if cycle % 2 == 0 { "everysec" } else { "always" };
        let mut server = spawn(dir.path(), fsync);
        if cycle > 0 {
            check_groups(&server.addr, &mut rounds.lock().unwrap(), cycle);
        }
        let writers: Vec<_> = (0..groups)
            .map(|group| {
                let (addr, rounds) = (server.addr.clone(), Arc::clone(&rounds));
                let first = (cycle as u64 + 1) * 1_000_000;
                std::thread::spawn(move || txn_writer(addr, group, rounds, first))
            })
            .collect();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(40 + seed % 300));
        server.child.kill().expect("SIGKILL");
        let _ = server.child.wait();
        for w in writers {
            w.join().expect("writer");
        }
    }
    let server = spawn(dir.path(), "always");
    check_groups(&server.addr, &mut rounds.lock().unwrap(), cycles);
    drop(server);
    let acked = rounds
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.acked.is_some())
        .count();
    assert_eq!(acked, groups, "every group had a round acknowledged");
}
