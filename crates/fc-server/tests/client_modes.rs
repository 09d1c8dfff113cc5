//! The connection modes of `CLIENT`: `TRACKING` (client-side caching's invalidations, in
//! RESP3 pushes and RESP2 redirections, across workers, transactions, expiry and flushes),
//! `CACHING`, `GETREDIR`, `TRACKINGINFO`, `REPLY`, `PAUSE`/`UNPAUSE`, `NO-EVICT`/`NO-TOUCH`,
//! and `CLIENT KILL`'s filters. Exact bytes were recorded from redis-server 7.0.15.

mod common;

use std::time::{Duration, Instant};

use common::{Raw, client, info_field, two_workers};

/// `>2 invalidate [key]`.
fn push(key: &str) -> Vec<u8> {
    format!(
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n${}\r\n{key}\r\n",
        key.len()
    )
    .into_bytes()
}

fn resp3(addr: std::net::SocketAddr) -> Raw {
    let mut c = Raw::open(addr);
    c.send(&["HELLO", "3"]);
    let mut hello = [0u8; 1];
    // The map's first byte, then the rest of HELLO's reply up to `modules` (empty array).
    std::io::Read::read_exact(&mut c.0, &mut hello).unwrap();
    assert_eq!(&hello, b"%");
    let mut seen = Vec::new();
    while !seen.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        let mut b = [0u8; 1];
        std::io::Read::read_exact(&mut c.0, &mut b).unwrap();
        seen.push(b[0]);
    }
    c
}

/// Reads one line (an integer reply's, say) without its line end.
fn line(c: &mut Raw) -> String {
    let mut got = Vec::new();
    while !got.ends_with(b"\r\n") {
        let mut b = [0u8; 1];
        std::io::Read::read_exact(&mut c.0, &mut b).unwrap();
        got.push(b[0]);
    }
    String::from_utf8_lossy(&got[..got.len() - 2]).into_owned()
}

/// Keys that land on both workers (16 names: both of two workers own some).
fn keys() -> Vec<String> {
    (0..16).map(|i| format!("key:{i}")).collect()
}

#[test]
fn tracking_invalidates_each_read_key_once_across_workers() {
    let server = two_workers();
    let mut reader = resp3(server.addr());
    let mut writer = client(&server);
    let keys = keys();
    for k in &keys {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("v")
            .query(&mut writer)
            .unwrap();
    }
    reader.send(&["CLIENT", "TRACKING", "on"]);
    reader.expect(b"+OK\r\n");
    for k in &keys {
        reader.send(&["GET", k]);
        reader.expect(b"$1\r\nv\r\n");
    }
    assert_eq!(info_field(&mut writer, "clients", "tracking_clients"), 1);
    assert_eq!(info_field(&mut writer, "stats", "tracking_total_keys"), 16);
    // A write by another client, on either worker: one invalidation each.
    for k in &keys {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("w")
            .query(&mut writer)
            .unwrap();
        reader.expect(&push(k));
    }
    // Not read again: the next change sends nothing.
    let _: () = redis::cmd("SET")
        .arg(&keys[0])
        .arg("x")
        .query(&mut writer)
        .unwrap();
    assert!(reader.silent_for(200));
    assert_eq!(info_field(&mut writer, "stats", "tracking_total_keys"), 0);
    // Read again through MGET (keys on both workers), changed inside MULTI/EXEC.
    reader.send(&["MGET", &keys[1], &keys[2]]);
    reader.expect(b"*2\r\n$1\r\nw\r\n$1\r\nw\r\n");
    let _: () = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg(&keys[1])
        .cmd("SET")
        .arg(&keys[2])
        .arg("z")
        .query(&mut writer)
        .unwrap();
    reader.expect(&push(&keys[1]));
    reader.expect(&push(&keys[2]));
    // Expiry (active: the key is never read again) invalidates too.
    reader.send(&["GET", &keys[3]]);
    reader.expect(b"$1\r\nw\r\n");
    let _: () = redis::cmd("PEXPIRE")
        .arg(&keys[3])
        .arg(50)
        .query(&mut writer)
        .unwrap();
    reader.expect(&push(&keys[3]));
    // The reader's own write: its invalidation comes after its reply.
    reader.send(&["GET", &keys[4]]);
    reader.expect(b"$1\r\nw\r\n");
    reader.send(&["SET", &keys[4], "mine"]);
    reader.expect(b"+OK\r\n");
    reader.expect(&push(&keys[4]));
    // FLUSHALL: one null invalidation, and nothing is remembered any more.
    reader.send(&["GET", &keys[5]]);
    reader.expect(b"$1\r\nw\r\n");
    let _: () = redis::cmd("FLUSHALL").query(&mut writer).unwrap();
    reader.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert!(reader.silent_for(200));
    assert_eq!(info_field(&mut writer, "stats", "tracking_total_items"), 0);
    reader.send(&["CLIENT", "TRACKING", "off"]);
    reader.expect(b"+OK\r\n");
    assert_eq!(info_field(&mut writer, "clients", "tracking_clients"), 0);
    server.shutdown();
}

#[test]
fn resp2_clients_redirect_to_a_subscribed_connection() {
    let server = two_workers();
    let mut target = Raw::open(server.addr());
    let mut reader = Raw::open(server.addr());
    let mut writer = client(&server);
    target.send(&["CLIENT", "ID"]);
    let id = line(&mut target)[1..].to_string();
    reader.send(&["CLIENT", "ID"]);
    let reader_id = line(&mut reader)[1..].to_string();
    target.send(&["SUBSCRIBE", "__redis__:invalidate"]);
    target.expect(b"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n");
    reader.send(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]);
    reader.expect(b"+OK\r\n");
    reader.send(&["CLIENT", "GETREDIR"]);
    reader.expect(format!(":{id}\r\n").as_bytes());
    for k in keys().iter().take(4) {
        reader.send(&["GET", k]);
        reader.expect(b"$-1\r\n");
        let _: () = redis::cmd("SET").arg(k).arg(1).query(&mut writer).unwrap();
        target.expect(
            format!(
                "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n${}\r\n{k}\r\n",
                k.len()
            )
            .as_bytes(),
        );
    }
    // Without a redirection a RESP2 client gets nothing (it has no push messages).
    let line: String = redis::cmd("CLIENT").arg("LIST").query(&mut writer).unwrap();
    let mine = line
        .lines()
        .find(|l| l.starts_with(&format!("id={reader_id} ")))
        .unwrap();
    assert!(
        mine.contains(" flags=t ") && mine.contains(&format!(" redir={id} ")),
        "{mine}"
    );
    // The target leaves: the redirection is broken.
    drop(target);
    std::thread::sleep(Duration::from_millis(100));
    reader.send(&["GET", "key:0"]);
    reader.expect(b"$1\r\n1\r\n");
    let _: () = redis::cmd("SET")
        .arg("key:0")
        .arg(2)
        .query(&mut writer)
        .unwrap();
    reader.send(&["CLIENT", "TRACKINGINFO"]);
    reader.expect(
        format!("*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{id}\r\n$8\r\nprefixes\r\n*0\r\n").as_bytes(),
    );
    server.shutdown();
}

#[test]
fn broadcast_noloop_and_optin() {
    let server = two_workers();
    let mut reader = resp3(server.addr());
    let mut writer = client(&server);
    reader.send(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "NOLOOP",
    ]);
    reader.expect(b"+OK\r\n");
    reader.send(&["CLIENT", "TRACKINGINFO"]);
    reader.expect(b"%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\nbcast\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*1\r\n$5\r\nuser:\r\n");
    assert_eq!(
        info_field(&mut writer, "stats", "tracking_total_prefixes"),
        1
    );
    // Any key under the prefix, read or not, on either worker; others are not sent.
    for i in 0..8 {
        let key = format!("user:{i}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .query(&mut writer)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(format!("other:{i}"))
            .arg(1)
            .query(&mut writer)
            .unwrap();
        reader.expect(&push(&key));
    }
    // NOLOOP: its own writes (on either worker) send it nothing.
    for i in 0..8 {
        reader.send(&["SET", &format!("user:{i}"), "2"]);
        reader.expect(b"+OK\r\n");
    }
    assert!(reader.silent_for(200));
    reader.send(&["CLIENT", "TRACKING", "on", "PREFIX", "a"]);
    reader.expect(b"-ERR PREFIX option requires BCAST mode to be enabled\r\n");
    reader.send(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:1"]);
    reader.expect(b"-ERR Prefix 'user:1' overlaps with an existing prefix 'user:'. Prefixes for a single client must not overlap.\r\n");
    reader.send(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    reader.expect(b"-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n");
    reader.send(&["CLIENT", "TRACKING", "off"]);
    reader.expect(b"+OK\r\n");
    assert_eq!(
        info_field(&mut writer, "stats", "tracking_total_prefixes"),
        0
    );
    // OPTIN: only the command after CLIENT CACHING yes is remembered.
    reader.send(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    reader.expect(b"+OK\r\n");
    reader.send(&["GET", "user:0"]);
    reader.expect(b"$1\r\n2\r\n");
    reader.send(&["CLIENT", "CACHING", "yes"]);
    reader.expect(b"+OK\r\n");
    reader.send(&["GET", "user:1"]);
    reader.expect(b"$1\r\n2\r\n");
    reader.send(&["GET", "user:2"]);
    reader.expect(b"$1\r\n2\r\n");
    for k in ["user:0", "user:1", "user:2"] {
        let _: () = redis::cmd("SET").arg(k).arg(3).query(&mut writer).unwrap();
    }
    reader.expect(&push("user:1"));
    assert!(reader.silent_for(200));
    reader.send(&["CLIENT", "CACHING", "no"]);
    reader.expect(
        b"-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n",
    );
    reader.send(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    reader.expect(b"-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n");
    reader.send(&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]);
    reader.expect(b"-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n");
    reader.send(&["CLIENT", "TRACKING", "on", "REDIRECT", "999"]);
    reader.expect(b"-ERR The client ID you want redirect to does not exist\r\n");
    reader.send(&["CLIENT", "TRACKING", "maybe"]);
    reader.expect(b"-ERR syntax error\r\n");
    server.shutdown();
}

#[test]
fn the_tracking_table_is_bounded() {
    let server = two_workers();
    let mut reader = resp3(server.addr());
    let mut writer = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("tracking-table-max-keys")
        .arg(3)
        .query(&mut writer)
        .unwrap();
    reader.send(&["CLIENT", "TRACKING", "on"]);
    reader.expect(b"+OK\r\n");
    let mut pushes = 0;
    for k in keys() {
        reader.send(&["GET", &k]);
        // Forgotten keys are invalidated (pushes) before the reply.
        let mut got = Vec::new();
        while !got.ends_with(b"_\r\n") {
            let mut b = [0u8; 1];
            std::io::Read::read_exact(&mut reader.0, &mut b).unwrap();
            got.push(b[0]);
        }
        pushes += got.windows(10).filter(|w| w == b"invalidate").count();
    }
    let kept = info_field(&mut writer, "stats", "tracking_total_keys");
    assert!(kept <= 3 + 1, "{kept} keys remembered");
    assert!(pushes >= 16 - 4, "{pushes} forgotten keys invalidated");
    let value: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tracking-table-max-keys")
        .query(&mut writer)
        .unwrap();
    assert_eq!(value, ["tracking-table-max-keys", "3"]);
    server.shutdown();
}

#[test]
fn reply_off_skip_and_on() {
    let server = two_workers();
    let mut c = Raw::open(server.addr());
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["SET", "a", "1"]);
    c.send(&["GET", "a"]);
    c.send(&["CLIENT", "REPLY", "ON"]);
    c.expect(b"+OK\r\n");
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["GET", "a"]);
    c.send(&["INCR", "a"]);
    c.expect(b":2\r\n");
    c.send(&["CLIENT", "REPLY", "maybe"]);
    c.expect(b"-ERR syntax error\r\n");
    c.send(&["CLIENT", "REPLY", "on", "x"]);
    c.expect(b"-ERR wrong number of arguments for 'client|reply' command\r\n");
    assert!(c.silent_for(100));
    server.shutdown();
}

#[test]
fn pause_holds_writes_or_everything_until_it_ends() {
    let server = two_workers();
    let mut admin = client(&server);
    let mut w = Raw::open(server.addr());
    let mut r = Raw::open(server.addr());
    let _: () = redis::cmd("SET").arg("k").arg(1).query(&mut admin).unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(100_000)
        .arg("WRITE")
        .query(&mut admin)
        .unwrap();
    w.send(&["INCR", "k"]);
    w.send(&["GET", "k"]);
    r.send(&["GET", "k"]);
    r.expect(b"$1\r\n1\r\n");
    // PUBLISH may replicate: it waits too.
    r.send(&["PUBLISH", "ch", "x"]);
    assert!(w.silent_for(200));
    assert!(r.silent_for(10));
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), 2);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    assert_eq!(list.matches("flags=b ").count(), 2, "{list}");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    w.expect(b":2\r\n$1\r\n2\r\n");
    r.expect(b":0\r\n");
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), 0);
    // ALL, with a timeout: everything waits until it ends, without an UNPAUSE.
    let started = Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .query(&mut admin)
        .unwrap();
    r.send(&["GET", "k"]);
    r.expect(b"$1\r\n2\r\n");
    assert!(started.elapsed() >= Duration::from_millis(250));
    let err = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10)
        .arg("SOME")
        .query::<()>(&mut admin)
        .unwrap_err();
    assert_eq!(err.detail(), Some("CLIENT PAUSE mode must be WRITE or ALL"));
    let err = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(-1)
        .query::<()>(&mut admin)
        .unwrap_err();
    assert_eq!(err.detail(), Some("timeout is negative"));
    server.shutdown();
}

#[test]
fn flags_and_kill_filters() {
    let server = two_workers();
    let mut admin = client(&server);
    let mut other = client(&server);
    let mut sub = Raw::open(server.addr());
    sub.send(&["SUBSCRIBE", "ch"]);
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    let _: () = redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("on")
        .query(&mut other)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("NO-TOUCH")
        .arg("on")
        .query(&mut other)
        .unwrap();
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut other).unwrap();
    assert!(info.contains(" flags=eT "), "{info}");
    let err = redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("maybe")
        .query::<()>(&mut other)
        .unwrap_err();
    assert_eq!(err.detail(), Some("syntax error"));
    let pubsub: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    assert_eq!(pubsub.lines().count(), 1);
    assert!(pubsub.contains("flags=P "));
    let err = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("x")
        .query::<()>(&mut admin)
        .unwrap_err();
    assert_eq!(err.detail(), Some("Unknown client type 'x'"));
    let err = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("bob")
        .query::<()>(&mut admin)
        .unwrap_err();
    assert_eq!(err.detail(), Some("No such user 'bob'"));
    let none: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("MAXAGE")
        .arg(1000)
        .query(&mut admin)
        .unwrap();
    assert_eq!(none, 0);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("default")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1, "the other normal client, not the caller");
    // MONITOR shows as O.
    let mut mon = Raw::open(server.addr());
    mon.send(&["MONITOR"]);
    mon.expect(b"+OK\r\n");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    assert!(list.contains("flags=O "), "{list}");
    server.shutdown();
}
