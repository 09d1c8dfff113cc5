//! Pub/Sub: reply shapes and subscribed-mode rules (bytes as redis-server 7.0.15 sends them),
//! publishers and subscribers on every worker, RESP3 pushes, a slow subscriber cut off at
//! its output limit, and subscriptions freed however a client goes away.

mod common;

use std::time::{Duration, Instant};

use common::{Raw, client, info_field, start};
use fc_server::{ServerConfig, ServerHandle};

fn server() -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        ..ServerConfig::default()
    })
}

fn publish(con: &mut redis::Connection, channel: &str, message: &str) -> i64 {
    redis::cmd("PUBLISH")
        .arg(channel)
        .arg(message)
        .query(con)
        .unwrap()
}

#[test]
fn subscribed_mode_replies_as_redis() {
    let server = server();
    let mut c = Raw::open(server.addr());
    for cmd in [
        &["SUBSCRIBE", "a", "b"][..],
        &["PING"],
        &["PING", "x"],
        &["GET", "k"],
        &["PSUBSCRIBE", "h*"],
        &["UNSUBSCRIBE", "a"],
        &["UNSUBSCRIBE", "b"],
        &["PUNSUBSCRIBE"],
        &["UNSUBSCRIBE"],
        &["GET", "k"],
    ] {
        c.send(cmd);
    }
    c.expect(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nh*\r\n:3\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nh*\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n$-1\r\n");
    // RESP3: confirmations are pushes, and every command runs.
    let mut r3 = Raw::open(server.addr());
    r3.send(&["HELLO", "3"]);
    r3.send(&["SUBSCRIBE", "a"]);
    r3.send(&["PING"]);
    r3.send(&["GET", "k"]);
    r3.send(&["UNSUBSCRIBE", "a", "zz"]);
    let mut hello = Vec::new();
    while !hello.ends_with(b"*0\r\n") {
        let mut b = [0u8; 1];
        std::io::Read::read_exact(&mut r3.0, &mut b).unwrap();
        hello.push(b[0]);
    }
    r3.expect(b">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+PONG\r\n_\r\n>3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n>3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:0\r\n");
    // Shard channels count apart; MULTI may subscribe; RESET leaves everything.
    let mut s = Raw::open(server.addr());
    s.send(&["SSUBSCRIBE", "a", "b"]);
    s.send(&["SUBSCRIBE", "c"]);
    s.send(&["SUNSUBSCRIBE", "b"]);
    s.send(&["RESET"]);
    s.send(&["GET", "k"]);
    s.send(&["MULTI"]);
    s.send(&["SUBSCRIBE", "m"]);
    s.send(&["EXEC"]);
    s.expect(b"*3\r\n$10\r\nssubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:2\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n*3\r\n$12\r\nsunsubscribe\r\n$1\r\nb\r\n:1\r\n+RESET\r\n$-1\r\n+OK\r\n+QUEUED\r\n*1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nm\r\n:1\r\n");
    let mut con = client(&server);
    let numsub: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg(&["NUMSUB", "a", "c", "m"])
        .query(&mut con)
        .unwrap();
    assert_eq!(
        numsub,
        [
            redis::Value::BulkString(b"a".to_vec()),
            redis::Value::Int(0),
            redis::Value::BulkString(b"c".to_vec()),
            redis::Value::Int(0),
            redis::Value::BulkString(b"m".to_vec()),
            redis::Value::Int(1),
        ]
    );
}

#[test]
fn publishers_reach_subscribers_on_every_worker() {
    let server = server();
    let mut con = client(&server);
    // Connections are dealt to the two workers in turn: subscribers on both.
    let mut subs: Vec<Raw> = (0..6).map(|_| Raw::open(server.addr())).collect();
    for (i, s) in subs.iter_mut().enumerate() {
        if i % 3 == 2 {
            s.send(&["PSUBSCRIBE", "news.*"]);
            s.expect(b"*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n");
        } else {
            s.send(&["SUBSCRIBE", "news.sport"]);
            s.expect(b"*3\r\n$9\r\nsubscribe\r\n$10\r\nnews.sport\r\n:1\r\n");
        }
    }
    // From two publishers (one per worker).
    let mut other = client(&server);
    assert_eq!(publish(&mut con, "news.sport", "goal"), 6);
    assert_eq!(publish(&mut other, "news.weather", "rain"), 2);
    assert_eq!(publish(&mut con, "elsewhere", "x"), 0);
    for (i, s) in subs.iter_mut().enumerate() {
        if i % 3 == 2 {
            s.expect(b"*4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$10\r\nnews.sport\r\n$4\r\ngoal\r\n*4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$12\r\nnews.weather\r\n$4\r\nrain\r\n");
        } else {
            s.expect(b"*3\r\n$7\r\nmessage\r\n$10\r\nnews.sport\r\n$4\r\ngoal\r\n");
        }
        assert!(s.silent_for(30));
    }
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg(&["CHANNELS", "news.*"])
        .query(&mut con)
        .unwrap();
    assert_eq!(channels, ["news.sport"]);
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut con).unwrap();
    assert_eq!(numpat, 1);
    assert_eq!(info_field(&mut con, "stats", "pubsub_channels"), 1);
    // Messages keep their order per publisher, across workers.
    for i in 0..200 {
        publish(&mut other, "news.sport", &i.to_string());
    }
    let mut expected = Vec::new();
    for i in 0..200 {
        let v = i.to_string();
        expected.extend_from_slice(
            format!(
                "*3\r\n$7\r\nmessage\r\n$10\r\nnews.sport\r\n${}\r\n{v}\r\n",
                v.len()
            )
            .as_bytes(),
        );
    }
    subs[0].expect(&expected);
    subs[4].expect(&expected);
    // The client list shows subscriptions.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert_eq!(list.matches("flags=P").count(), 6, "{list}");
    assert_eq!(list.matches("sub=1 psub=0").count(), 4, "{list}");
}

#[test]
fn a_slow_subscriber_is_cut_off_at_its_limit() {
    let server = server();
    let mut con = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "client-output-buffer-limit", "pubsub 1mb 0 0"])
        .query(&mut con)
        .unwrap();
    let limit: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "client-output-buffer-limit"])
        .query(&mut con)
        .unwrap();
    assert!(limit[1].ends_with("pubsub 1048576 0 0"), "{limit:?}");
    // A subscriber that never reads, and one that does.
    let mut slow = Raw::open(server.addr());
    slow.send(&["SUBSCRIBE", "firehose"]);
    // Its confirmation first: the subscription is in place before anything is published.
    slow.expect(b"*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n");
    let mut fast = redis::Client::open(format!("redis://{}/", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut fast_sub = fast.as_pubsub();
    fast_sub.subscribe("firehose").unwrap();
    fast_sub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let payload = "x".repeat(64 * 1024);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    // 64 KiB at a time until only the reader still receives (the socket buffers take some
    // megabytes first; the queue past them is what the limit bounds).
    loop {
        let n = publish(&mut con, "firehose", &payload);
        sent += 1;
        let msg = fast_sub.get_message().unwrap();
        assert_eq!(msg.get_payload_bytes().len(), payload.len());
        if n == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never cut off after {sent} messages"
        );
    }
    assert!(sent > 16, "cut off after only {sent} messages");
    // The ended connection leaves the client list once its task has wound down.
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
        if list.lines().count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{list}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let numsub: (String, i64) = redis::cmd("PUBSUB")
        .arg(&["NUMSUB", "firehose"])
        .query(&mut con)
        .unwrap();
    assert_eq!(numsub.1, 1);
}

#[test]
fn subscriptions_are_freed_however_a_client_goes() {
    let server = server();
    let mut con = client(&server);
    let mut gone = Vec::new();
    for i in 0..6 {
        let mut c = Raw::open(server.addr());
        c.send(&["SUBSCRIBE", &format!("c{i}"), "shared"]);
        c.send(&["PSUBSCRIBE", &format!("p{i}*")]);
        c.send(&["SSUBSCRIBE", &format!("s{i}")]);
        c.expect(format!("*3\r\n$9\r\nsubscribe\r\n$2\r\nc{i}\r\n:1\r\n").as_bytes());
        gone.push(c);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "stats", "pubsubshard_channels") < 6 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(info_field(&mut con, "stats", "pubsub_channels"), 7);
    assert_eq!(info_field(&mut con, "stats", "pubsub_patterns"), 6);
    drop(gone.pop());
    let c = gone.pop().unwrap();
    c.0.shutdown(std::net::Shutdown::Both).unwrap();
    let mut reset = gone.pop().unwrap();
    reset.send(&["RESET"]);
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "SKIPME", "yes"])
        .query(&mut con)
        .unwrap();
    assert!(killed >= 4, "{killed}");
    drop(reset);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut con, "stats", "pubsub_channels") > 0
        || info_field(&mut con, "stats", "pubsub_patterns") > 0
        || info_field(&mut con, "stats", "pubsubshard_channels") > 0
    {
        assert!(Instant::now() < deadline, "subscriptions left behind");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(publish(&mut con, "shared", "anyone?"), 0);
}

#[test]
fn keyspace_notifications_name_events_as_redis() {
    let server = server();
    let mut con = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "KEA"])
        .query(&mut con)
        .unwrap();
    let flags: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "notify-keyspace-events"])
        .query(&mut con)
        .unwrap();
    assert_eq!(flags[1], "AKE");
    let bad: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Kq"])
        .query(&mut con);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    );
    let mut sub = Raw::open(server.addr());
    sub.send(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    sub.expect(b"*3\r\n$10\r\npsubscribe\r\n$16\r\n__keyspace@0__:*\r\n:1\r\n");
    // The sequence redis-server 7.0.15 was checked with (same events, same order).
    for cmd in [
        &["SET", "a", "2", "EX", "100"][..],
        &["INCR", "n"],
        &["PERSIST", "a"],
        &["LPUSH", "l", "x", "y"],
        &["RPOP", "l"],
        &["HINCRBY", "h", "f", "1"],
        &["ZADD", "z", "1", "m"],
        &["ZINCRBY", "z", "1", "m"],
        &["SPOP", "nothing"],
        &["DEL", "n"],
        &["SET", "t", "1", "PX", "30"],
    ] {
        let _: redis::Value = redis::cmd(cmd[0]).arg(&cmd[1..]).query(&mut con).unwrap();
    }
    let mut expected = Vec::new();
    for (key, event) in [
        ("a", "set"),
        ("a", "expire"),
        ("n", "incrby"),
        ("a", "persist"),
        ("l", "lpush"),
        ("l", "rpop"),
        ("h", "hincrby"),
        ("z", "zadd"),
        ("z", "zincr"),
        ("n", "del"),
        ("t", "set"),
        ("t", "expire"),
        // Active expiry, a moment later.
        ("t", "expired"),
    ] {
        let channel = format!("__keyspace@0__:{key}");
        expected.extend_from_slice(
            format!(
                "*4\r\n$8\r\npmessage\r\n$16\r\n__keyspace@0__:*\r\n${}\r\n{channel}\r\n${}\r\n{event}\r\n",
                channel.len(),
                event.len()
            )
            .as_bytes(),
        );
    }
    sub.expect(&expected);
    // Off again: nothing more is sent.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", ""])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET").arg("a").arg("3").query(&mut con).unwrap();
    assert!(sub.silent_for(100));
}

/// A subscriber's connection waits on its socket and on its message queue at once: a message
/// delivered while a request is half sent must not lose the bytes already read, nor those
/// arriving after. (On the monoio runtime the read stays in flight in the kernel meanwhile:
/// `cargo xtask test-monoio` runs this there.)
#[test]
fn messages_between_the_pieces_of_a_request_lose_no_byte() {
    let server = server();
    let mut publisher = client(&server);
    let mut sub = Raw::open(server.addr());
    sub.send(&["SUBSCRIBE", "news"]);
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    let request = b"*2\r\n$4\r\nPING\r\n$5\r\nhello\r\n";
    let mut expected = Vec::new();
    // The request in three pieces, a message published after each of the first two: every
    // message arrives whole and first, then the request's reply.
    for (n, piece) in [&request[..3], &request[3..17], &request[17..]]
        .into_iter()
        .enumerate()
    {
        std::io::Write::write_all(&mut sub.0, piece).unwrap();
        if n < 2 {
            let message = format!("m{n}");
            assert_eq!(publish(&mut publisher, "news", &message), 1);
            expected.extend_from_slice(
                format!("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\n{message}\r\n").as_bytes(),
            );
            // Delivered before the rest of the request is sent.
            sub.expect(&expected);
            expected.clear();
        }
    }
    sub.expect(b"*2\r\n$4\r\npong\r\n$5\r\nhello\r\n");
    // And the same with a larger request split across many messages.
    let big = "x".repeat(100_000);
    let request = format!("*2\r\n$4\r\nPING\r\n${}\r\n{big}\r\n", big.len());
    let pieces: Vec<&[u8]> = request.as_bytes().chunks(7_001).collect();
    let (last, pieces) = pieces.split_last().unwrap();
    for (n, piece) in pieces.iter().enumerate() {
        std::io::Write::write_all(&mut sub.0, piece).unwrap();
        let message = format!("b{:02}", n % 100);
        assert_eq!(publish(&mut publisher, "news", &message), 1);
        sub.expect(format!("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\n{message}\r\n").as_bytes());
    }
    std::io::Write::write_all(&mut sub.0, last).unwrap();
    sub.expect(format!("*2\r\n$4\r\npong\r\n${}\r\n{big}\r\n", big.len()).as_bytes());
}
