//! Databases (`SELECT 0..databases`): each database's keys are invisible to the others in
//! every command that reads the keyspace, blocking pops, `WATCH` and keyspace notifications
//! are per database, and keys of every database survive a restart from the log and from a
//! snapshot. (Reply bytes against a real Redis: `tests/catalog.rs`'s `DATABASES`.)

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Raw, client, start, two_workers};
use fc_server::ServerConfig;
use redis::Commands;

fn in_db(server: &fc_server::ServerHandle, db: u32) -> redis::Connection {
    let mut con = client(server);
    let _: () = redis::cmd("SELECT").arg(db).query(&mut con).unwrap();
    con
}

fn scan_all(con: &mut redis::Connection, pattern: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(100)
            .query(con)
            .unwrap();
        found.extend(keys);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

#[test]
fn keyspace_reads_see_their_own_database_only() {
    let server = two_workers();
    let (mut zero, mut nine) = (in_db(&server, 0), in_db(&server, 9));
    let _: () = redis::cmd("FLUSHALL").query(&mut zero).unwrap();
    for i in 0..500 {
        let _: () = zero.set(format!("z:{i}"), i).unwrap();
    }
    for i in 0..7 {
        let _: () = nine.set(format!("n:{i}"), i).unwrap();
    }
    // The same name in two databases: two keys.
    let _: () = zero.set("shared", "zero").unwrap();
    let _: () = nine.set("shared", "nine").unwrap();
    assert_eq!(zero.get::<_, String>("shared").unwrap(), "zero");
    assert_eq!(nine.get::<_, String>("shared").unwrap(), "nine");

    let dbsize = |con: &mut redis::Connection| -> i64 { redis::cmd("DBSIZE").query(con).unwrap() };
    // Containers name their key as argument 2: rewritten too.
    let line: String = redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg("n:1")
        .query(&mut nine)
        .unwrap();
    assert!(line.contains("encoding:int"), "{line}");
    let missing: redis::RedisResult<String> = redis::cmd("DEBUG")
        .arg("OBJECT")
        .arg("n:1")
        .query(&mut zero);
    assert!(missing.is_err());
    let usage: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("n:1")
        .query(&mut nine)
        .unwrap();
    assert!(usage.is_some_and(|n| n > 0));
    // Found by the subcommands' key specs (`OBJECT ENCODING key`, `XINFO STREAM key`).
    let object = |con: &mut redis::Connection| -> Option<String> {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg("n:1")
            .query(con)
            .unwrap()
    };
    assert_eq!(object(&mut nine).as_deref(), Some("int"));
    assert_eq!(object(&mut zero), None);
    let _: String = redis::cmd("XADD")
        .arg("n:s")
        .arg("1-1")
        .arg("f")
        .arg("v")
        .query(&mut nine)
        .unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("n:s")
        .arg("g")
        .arg("0")
        .query(&mut nine)
        .unwrap();
    let groups: redis::Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg("n:s")
        .query(&mut nine)
        .unwrap();
    assert!(
        matches!(groups, redis::Value::Array(ref g) if g.len() == 1),
        "{groups:?}"
    );
    let absent: redis::RedisResult<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg("n:s")
        .query(&mut zero);
    assert!(absent.is_err());
    let _: i64 = redis::cmd("DEL").arg("n:s").query(&mut nine).unwrap();
    assert_eq!((dbsize(&mut zero), dbsize(&mut nine)), (501, 8));
    let keys: Vec<String> = nine.keys("*").unwrap();
    let keys: BTreeSet<String> = keys.into_iter().collect();
    let want: BTreeSet<String> = (0..7)
        .map(|i| format!("n:{i}"))
        .chain(["shared".to_string()])
        .collect();
    assert_eq!(keys, want);
    assert_eq!(scan_all(&mut nine, "*"), want);
    assert_eq!(scan_all(&mut zero, "n:*"), BTreeSet::new());
    assert_eq!(scan_all(&mut zero, "*").len(), 501);
    // RANDOMKEY finds one of 8 keys among 509, every time.
    for _ in 0..50 {
        let key: String = redis::cmd("RANDOMKEY").query(&mut nine).unwrap();
        assert!(want.contains(&key), "{key}");
    }
    let mut empty = in_db(&server, 4);
    let none: Option<String> = redis::cmd("RANDOMKEY").query(&mut empty).unwrap();
    assert_eq!(none, None);

    // INFO keyspace: one line per database with keys.
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut zero).unwrap();
    let lines: Vec<&str> = info.lines().filter(|l| l.starts_with("db")).collect();
    assert_eq!(
        lines,
        [
            "db0:keys=501,expires=0,avg_ttl=0",
            "db9:keys=8,expires=0,avg_ttl=0"
        ]
    );
    let _: () = nine.expire("shared", 100).unwrap();
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut zero).unwrap();
    assert!(info.contains("db9:keys=8,expires=1,"), "{info}");

    // FLUSHDB empties its own database only.
    let _: () = redis::cmd("FLUSHDB").query(&mut nine).unwrap();
    assert_eq!((dbsize(&mut zero), dbsize(&mut nine)), (501, 0));
    let _: () = nine.set("back", 1).unwrap();
    let _: () = redis::cmd("FLUSHDB").query(&mut zero).unwrap();
    assert_eq!((dbsize(&mut zero), dbsize(&mut nine)), (0, 1));
    let _: () = redis::cmd("FLUSHALL").query(&mut zero).unwrap();
    assert_eq!(dbsize(&mut nine), 0);
    server.shutdown();
}

#[test]
fn marked_names_in_database_zero_stay_plain_keys() {
    let server = two_workers();
    let mut zero = in_db(&server, 0);
    let mut one = in_db(&server, 1);
    // A database-0 key that looks like the stored form of a database-1 key.
    let tricky = b"\xFF1:x".to_vec();
    let _: () = zero.set(&tricky, "zero").unwrap();
    assert_eq!(one.get::<_, Option<String>>("x").unwrap(), None);
    let keys: Vec<Vec<u8>> = zero.keys("*").unwrap();
    assert_eq!(keys, std::slice::from_ref(&tricky));
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut one).unwrap();
    assert_eq!(dbsize, 0);
    assert_eq!(zero.get::<_, String>(&tricky).unwrap(), "zero");
    server.shutdown();
}

#[test]
fn blocking_pops_watch_and_notifications_are_per_database() {
    let server = two_workers();
    let addr = server.addr();
    let (mut zero, mut nine) = (in_db(&server, 0), in_db(&server, 9));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KEA")
        .query(&mut zero)
        .unwrap();

    // A subscriber sees database 9's events on @9 channels.
    let mut sub = Raw::open(addr);
    sub.send(&["PSUBSCRIBE", "__key*@9__:*"]);
    sub.expect(b"*3\r\n$10\r\npsubscribe\r\n$12\r\n__key*@9__:*\r\n:1\r\n");
    let _: () = zero.set("k", "zero").unwrap();
    assert!(sub.silent_for(200), "a database-0 write reached @9");
    let _: () = nine.set("k", "nine").unwrap();
    sub.expect(
        b"*4\r\n$8\r\npmessage\r\n$12\r\n__key*@9__:*\r\n$16\r\n__keyspace@9__:k\r\n$3\r\nset\r\n",
    );
    sub.expect(
        b"*4\r\n$8\r\npmessage\r\n$12\r\n__key*@9__:*\r\n$18\r\n__keyevent@9__:set\r\n$1\r\nk\r\n",
    );
    // MOVE notifies move_from in the source database and move_to in the target's.
    let _: () = redis::cmd("DEL").arg("k").query(&mut nine).unwrap();
    sub.expect(
        b"*4\r\n$8\r\npmessage\r\n$12\r\n__key*@9__:*\r\n$16\r\n__keyspace@9__:k\r\n$3\r\ndel\r\n",
    );
    sub.expect(
        b"*4\r\n$8\r\npmessage\r\n$12\r\n__key*@9__:*\r\n$18\r\n__keyevent@9__:del\r\n$1\r\nk\r\n",
    );
    let moved: i64 = redis::cmd("MOVE").arg("k").arg(9).query(&mut zero).unwrap();
    assert_eq!(moved, 1);
    sub.expect(b"*4\r\n$8\r\npmessage\r\n$12\r\n__key*@9__:*\r\n$16\r\n__keyspace@9__:k\r\n$7\r\nmove_to\r\n");

    // BLPOP in database 9: a push to database 0's list of that name does not wake it.
    let mut waiter = Raw::open(addr);
    waiter.send(&["SELECT", "9"]);
    waiter.expect(b"+OK\r\n");
    waiter.send(&["BLPOP", "queue", "5"]);
    std::thread::sleep(Duration::from_millis(100));
    let _: () = zero.rpush("queue", "for-zero").unwrap();
    assert!(waiter.silent_for(200), "woken by database 0");
    let _: () = nine.rpush("queue", "for-nine").unwrap();
    waiter.expect(b"*2\r\n$5\r\nqueue\r\n$8\r\nfor-nine\r\n");
    assert_eq!(zero.llen::<_, i64>("queue").unwrap(), 1);
    // SWAPDB serves a client blocked on a key the swap fills, as Redis does.
    waiter.send(&["SELECT", "1"]);
    waiter.expect(b"+OK\r\n");
    waiter.send(&["BLPOP", "swapped", "5"]);
    std::thread::sleep(Duration::from_millis(100));
    let _: () = in_db(&server, 2).rpush("swapped", "from-two").unwrap();
    assert!(waiter.silent_for(200), "woken by database 2");
    let _: () = redis::cmd("SWAPDB").arg(1).arg(2).query(&mut zero).unwrap();
    waiter.expect(b"*2\r\n$7\r\nswapped\r\n$8\r\nfrom-two\r\n");

    // WATCH in database 9: a write of the same name in database 0 leaves it clean.
    let mut watcher = in_db(&server, 9);
    let _: () = redis::cmd("WATCH").arg("w").query(&mut watcher).unwrap();
    let _: () = zero.set("w", 1).unwrap();
    let ok: Option<Vec<String>> = redis::pipe()
        .atomic()
        .set("w", "mine")
        .query(&mut watcher)
        .unwrap();
    assert!(ok.is_some(), "EXEC aborted by another database's write");
    let _: () = redis::cmd("WATCH").arg("w").query(&mut watcher).unwrap();
    let _: () = nine.set("w", 2).unwrap();
    let aborted: Option<Vec<String>> = redis::pipe()
        .atomic()
        .set("w", "mine")
        .query(&mut watcher)
        .unwrap();
    assert!(aborted.is_none(), "EXEC ran after its watched key changed");

    // CLIENT LIST names the database; SORT BY/GET patterns read the sorted key's database.
    let list: String = redis::cmd("CLIENT").arg("INFO").query(&mut nine).unwrap();
    assert!(list.contains(" db=9 "), "{list}");
    let _: () = nine.rpush("{s}ids", &[2, 1]).unwrap();
    let _: () = nine.set("{s}w_1", 20).unwrap();
    let _: () = nine.set("{s}w_2", 10).unwrap();
    let _: () = nine.set("{s}v_1", "one").unwrap();
    let _: () = zero.set("{s}v_2", "zero's").unwrap();
    let sorted: Vec<Option<String>> = redis::cmd("SORT")
        .arg("{s}ids")
        .arg("BY")
        .arg("{s}w_*")
        .arg("GET")
        .arg("{s}v_*")
        .query(&mut nine)
        .unwrap();
    assert_eq!(sorted, [None, Some("one".to_string())]);
    server.shutdown();
}

#[test]
fn every_database_survives_a_restart_from_the_log_and_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let config = || ServerConfig {
        shards: 8,
        threads: 2,
        persistence: fc_server::PersistenceConfig {
            data_dir: Some(dir.path().to_path_buf()),
            appendfsync: fc_wal::FsyncPolicy::Always,
            save: Vec::new(),
            ..fc_server::PersistenceConfig::default()
        },
        ..ServerConfig::default()
    };
    let keyspace = |con: &mut redis::Connection| -> Vec<String> {
        let info: String = redis::cmd("INFO").arg("keyspace").query(con).unwrap();
        info.lines()
            .filter(|l| l.starts_with("db"))
            .map(String::from)
            .collect()
    };
    let server = start(config());
    for db in [0, 3, 15] {
        let mut con = in_db(&server, db);
        for i in 0..50 {
            let _: () = con.set(format!("k{i}"), format!("{db}-{i}")).unwrap();
        }
        let _: () = con.hset("h", "db", db).unwrap();
    }
    let _: () = redis::cmd("SWAPDB")
        .arg(3)
        .arg(4)
        .query(&mut client(&server))
        .unwrap();
    let before = keyspace(&mut client(&server));
    assert_eq!(
        before,
        [
            "db0:keys=51,expires=0,avg_ttl=0",
            "db4:keys=51,expires=0,avg_ttl=0",
            "db15:keys=51,expires=0,avg_ttl=0"
        ]
    );
    server.shutdown();

    // From the log alone.
    let server = start(config());
    let mut con = client(&server);
    assert_eq!(keyspace(&mut con), before);
    let mut four = in_db(&server, 4);
    assert_eq!(four.get::<_, String>("k7").unwrap(), "3-7");
    assert_eq!(four.hget::<_, _, i64>("h", "db").unwrap(), 3);
    // Then from a snapshot (and the log after it).
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: () = four.set("after", "snapshot").unwrap();
    server.shutdown();
    let server = start(config());
    let mut four = in_db(&server, 4);
    assert_eq!(four.get::<_, String>("after").unwrap(), "snapshot");
    assert_eq!(four.get::<_, String>("k9").unwrap(), "3-9");
    let mut fifteen = in_db(&server, 15);
    assert_eq!(fifteen.get::<_, String>("k9").unwrap(), "15-9");
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut in_db(&server, 3)).unwrap();
    assert_eq!(dbsize, 0);
    server.shutdown();
}

#[test]
fn tracking_invalidations_name_keys_without_their_database() {
    let server = two_workers();
    let mut reader = Raw::open(server.addr());
    reader.send(&["HELLO", "3"]);
    reader
        .0
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let hello = common::read_all(&mut reader.0);
    assert!(hello.starts_with(b"%7\r\n"));
    reader
        .0
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    reader.send(&["SELECT", "9"]);
    reader.expect(b"+OK\r\n");
    reader.send(&["CLIENT", "TRACKING", "ON"]);
    reader.expect(b"+OK\r\n");
    reader.send(&["GET", "k"]);
    reader.expect(b"_\r\n");
    // The same name in database 0 is another key: nothing to invalidate.
    let _: () = in_db(&server, 0).set("k", "zero").unwrap();
    assert!(reader.silent_for(200), "invalidated by database 0");
    let _: () = in_db(&server, 9).set("k", "nine").unwrap();
    reader.expect(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
    server.shutdown();
}
