//! Observability as Redis offers it: `INFO commandstats`/`errorstats`/`latencystats`,
//! `CONFIG RESETSTAT`, `SLOWLOG`, `LATENCY`, `MONITOR` and `DEBUG SLEEP`. Every expected
//! reply below (counts, error texts, entries, lines) is what redis-server 7.0.15 answered to
//! the same requests; times, durations, ports and latencies, which differ run to run, are
//! compared by shape.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{encode, start, two_workers};
use fc_server::{ServerConfig, ServerHandle};

/// A connection that reads whole replies.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(server: &ServerHandle) -> Self {
        let s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Self { s, buf: Vec::new() }
    }

    fn send(&mut self, args: &[&str]) {
        self.s.write_all(&encode(args)).unwrap();
    }

    /// Sends a command and returns its whole reply.
    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.reply()
    }

    /// The reply as text (lossy), for the text replies.
    fn text(&mut self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cmd(args)).into_owned()
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(n) if n > 0 => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            _ => false,
        }
    }

    /// The next whole reply.
    fn reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = complete(&self.buf, 0) {
                return self.buf.drain(..n).collect();
            }
            assert!(self.fill(), "connection closed: {:?}", self.buf);
        }
    }

    /// The next reply if one arrives within `ms`.
    fn reply_within(&mut self, ms: u64) -> Option<Vec<u8>> {
        self.s
            .set_read_timeout(Some(Duration::from_millis(ms)))
            .unwrap();
        let reply = loop {
            if let Some(n) = complete(&self.buf, 0) {
                break Some(self.buf.drain(..n).collect());
            }
            if !self.fill() {
                break None;
            }
        };
        self.s
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        reply
    }
}

/// The length of the whole RESP value at `at`, if it is all there.
fn complete(buf: &[u8], at: usize) -> Option<usize> {
    let rel = buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[at + 1..at + rel]).ok()?;
    let mut next = at + rel + 2;
    match buf[at] {
        b'$' | b'=' | b'!' => {
            let n: i64 = line.parse().ok()?;
            if n >= 0 {
                next += n as usize + 2;
                if buf.len() < next {
                    return None;
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = line.parse().ok()?;
            let n = if matches!(buf[at], b'%' | b'|') {
                2 * n
            } else {
                n
            };
            for _ in 0..n.max(0) {
                next += complete(buf, next)?;
            }
        }
        _ => {}
    }
    Some(next - at)
}

/// A parsed reply (enough for these tests).
#[derive(Debug, Clone, PartialEq)]
enum V {
    Int(i64),
    Str(Vec<u8>),
    Err(String),
    Arr(Vec<V>),
    Nil,
}

fn parse(buf: &[u8]) -> V {
    fn one(buf: &[u8], at: &mut usize) -> V {
        let end = *at + buf[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let line = &buf[*at + 1..end];
        let kind = buf[*at];
        *at = end + 2;
        let num = || std::str::from_utf8(line).unwrap().parse::<i64>().unwrap();
        match kind {
            b':' => V::Int(num()),
            b'+' => V::Str(line.to_vec()),
            b'-' => V::Err(String::from_utf8_lossy(line).into_owned()),
            b'$' | b'=' => {
                let n = num();
                if n < 0 {
                    return V::Nil;
                }
                let s = buf[*at..*at + n as usize].to_vec();
                *at += n as usize + 2;
                V::Str(s)
            }
            b'_' => V::Nil,
            b'*' | b'%' | b'~' => {
                let n = num();
                if n < 0 {
                    return V::Nil;
                }
                let n = if kind == b'%' { 2 * n } else { n };
                V::Arr((0..n).map(|_| one(buf, at)).collect())
            }
            other => panic!("unexpected {}", other as char),
        }
    }
    one(buf, &mut 0)
}

fn int(v: &V) -> i64 {
    match v {
        V::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn items(v: &V) -> &[V] {
    match v {
        V::Arr(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn bytes(v: &V) -> &[u8] {
    match v {
        V::Str(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

/// The text of an `INFO` reply (a bulk string).
fn info(c: &mut Conn, sections: &[&str]) -> String {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    String::from_utf8(bytes(&parse(&c.cmd(&args))).to_vec()).unwrap()
}

/// `INFO commandstats` as name → (calls, rejected_calls, failed_calls), with every line's
/// format checked.
fn commandstats(c: &mut Conn) -> BTreeMap<String, (u64, u64, u64)> {
    let text = info(c, &["commandstats"]);
    assert!(text.starts_with("# Commandstats\r\n"), "{text}");
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1) {
        let (name, fields) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
            .unwrap_or_else(|| panic!("{line}"));
        let fields: Vec<(&str, &str)> = fields
            .split(',')
            .map(|f| f.split_once('=').unwrap())
            .collect();
        let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "calls",
                "usec",
                "usec_per_call",
                "rejected_calls",
                "failed_calls"
            ],
            "{line}"
        );
        let per_call = fields[2].1;
        assert!(
            per_call.split_once('.').is_some_and(|(_, d)| d.len() == 2),
            "{line}"
        );
        let n = |i: usize| fields[i].1.parse::<u64>().unwrap();
        out.insert(name.to_string(), (n(0), n(3), n(4)));
    }
    out
}

/// An integer field of `INFO stats`.
fn stat(c: &mut Conn, field: &str) -> u64 {
    info(c, &["stats"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field}"))
        .parse()
        .unwrap()
}

#[test]
fn commandstats_errorstats_and_resetstat_count_as_redis_does() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    // (command, reply redis-server 7.0.15 gave).
    let steps: &[(&[&str], &[u8])] = &[
        (&["CONFIG", "RESETSTAT"], b"+OK\r\n"),
        (&["SET", "k", "v"], b"+OK\r\n"),
        (&["GET", "k"], b"$1\r\nv\r\n"),
        (
            &["NOSUCH", "a"],
            b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n",
        ),
        (
            &["GET"],
            b"-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["INCR", "k"],
            b"-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["LPUSH", "k", "x"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (&["MULTI"], b"+OK\r\n"),
        (&["SET", "a", "1"], b"+QUEUED\r\n"),
        (&["INCR", "k"], b"+QUEUED\r\n"),
        (
            &["EXEC"],
            b"*2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n",
        ),
        (&["MULTI"], b"+OK\r\n"),
        (
            &["NOSUCH"],
            b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
        ),
        (
            &["EXEC"],
            b"-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
        (&["MULTI"], b"+OK\r\n"),
        (
            &["GET"],
            b"-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["EXEC"],
            b"-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
        (&["EXEC"], b"-ERR EXEC without MULTI\r\n"),
        (
            &["CONFIG", "GET"],
            b"-ERR wrong number of arguments for 'config|get' command\r\n",
        ),
        (
            &["CONFIG", "FOO"],
            b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n",
        ),
        (
            &["CONFIG", "HELP", "x"],
            b"-ERR wrong number of arguments for 'config|help' command\r\n",
        ),
        (&["CONFIG", "GET", "hz"], b"*2\r\n$2\r\nhz\r\n$2\r\n10\r\n"),
        (
            &["CLIENT", "SETNAME", "a b"],
            b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
        ),
        (&["CLIENT", "KILL", "1.1.1.1:1"], b"-ERR No such client\r\n"),
        (
            &["SLOWLOG", "GET", "x"],
            b"-ERR count should be greater than or equal to -1\r\n",
        ),
        (
            &["OBJECT", "FOO", "x"],
            b"-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n",
        ),
        (&["OBJECT", "ENCODING", "nokey"], b"$-1\r\n"),
        (&["CONFIG", "SET", "a", "b", "c"], b"-ERR syntax error\r\n"),
        (
            &["COMMAND", "GETKEYS", "ping"],
            b"-ERR wrong number of arguments for 'command|getkeys' command\r\n",
        ),
        (
            &["LATENCY", "LATEST", "x"],
            b"-ERR wrong number of arguments for 'latency|latest' command\r\n",
        ),
        (
            &["DEBUG", "FOO"],
            b"-ERR unknown subcommand or wrong number of arguments for 'FOO'. Try DEBUG HELP.\r\n",
        ),
        (
            &["DEBUG", "SLEEP"],
            b"-ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP.\r\n",
        ),
        (&["PING"], b"+PONG\r\n"),
    ];
    for (args, expected) in steps {
        assert_eq!(
            String::from_utf8_lossy(&c.cmd(args)),
            String::from_utf8_lossy(expected),
            "{args:?}"
        );
    }
    let expected: BTreeMap<String, (u64, u64, u64)> = [
        ("config|set", (1, 0, 1)),
        ("config|resetstat", (1, 0, 0)),
        ("config|get", (1, 1, 0)),
        ("config|help", (0, 1, 0)),
        ("multi", (3, 0, 0)),
        ("client|setname", (1, 0, 1)),
        ("client|kill", (1, 0, 1)),
        ("object|encoding", (1, 0, 0)),
        ("debug", (2, 0, 2)),
        ("ping", (1, 0, 0)),
        ("lpush", (1, 0, 1)),
        ("get", (1, 2, 0)),
        ("set", (2, 0, 0)),
        ("incr", (2, 0, 2)),
        ("command|getkeys", (0, 1, 0)),
        ("slowlog|get", (1, 0, 1)),
        ("latency|latest", (0, 1, 0)),
        ("exec", (4, 0, 3)),
    ]
    .into_iter()
    .map(|(name, v)| (name.to_string(), v))
    .collect();
    assert_eq!(commandstats(&mut c), expected);
    // Redis's bytes exactly (the codes in order, no blank line after the last section).
    assert_eq!(
        String::from_utf8_lossy(&c.cmd(&["INFO", "errorstats"])),
        "$96\r\n# Errorstats\r\nerrorstat_ERR:count=19\r\nerrorstat_EXECABORT:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n\r\n"
    );
    // The calls above and the two INFOs just run, as in Redis.
    assert_eq!(stat(&mut c, "total_commands_processed"), 25);
    assert_eq!(stat(&mut c, "total_error_replies"), 22);
    assert!(stat(&mut c, "keyspace_hits") > 0);

    // RESETSTAT starts everything over; it counts itself, as in Redis.
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    let after = commandstats(&mut c);
    assert_eq!(
        after.into_iter().collect::<Vec<_>>(),
        [("config|resetstat".to_string(), (1, 0, 0))]
    );
    assert_eq!(
        c.cmd(&["INFO", "errorstats"]),
        b"$14\r\n# Errorstats\r\n\r\n"
    );
    for field in [
        "total_error_replies",
        "keyspace_hits",
        "keyspace_misses",
        "total_connections_received",
    ] {
        assert_eq!(stat(&mut c, field), 0, "{field}");
    }
    // RESETSTAT, INFO commandstats, INFO errorstats and the four INFO stats just above.
    assert_eq!(stat(&mut c, "total_commands_processed"), 7);
    server.shutdown();
}

#[test]
fn info_sections_are_chosen_and_separated_as_redis_does() {
    let server = start(ServerConfig::default());
    let mut c = Conn::open(&server);
    let heads = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# "))
            .map(String::from)
            .collect()
    };
    let default = info(&mut c, &[]);
    assert!(!default.contains("# Commandstats") && !default.contains("# Latencystats"));
    assert!(default.contains("# Errorstats\r\n"));
    let all = info(&mut c, &["all"]);
    let order = heads(&all);
    let at = |name: &str| order.iter().position(|h| h == name).unwrap();
    assert!(at("Replication") < at("Commandstats"));
    assert!(at("Commandstats") < at("Errorstats"));
    assert!(at("Errorstats") < at("Latencystats"));
    assert!(at("Latencystats") < at("Cluster"));
    assert_eq!(heads(&info(&mut c, &["everything"])), order);
    // Several sections: Redis's order whatever the request's, one blank line between them,
    // none after the last.
    let two = info(&mut c, &["ERRORSTATS", "server"]);
    assert_eq!(heads(&two), ["Server", "Errorstats"]);
    assert_eq!(two.matches("\r\n\r\n").count(), 1);
    assert!(two.ends_with("# Errorstats\r\n"), "{two:?}");
    assert_eq!(
        heads(&info(&mut c, &["default", "commandstats"])).len(),
        heads(&default).len() + 1
    );
    server.shutdown();
}

#[test]
fn slowlog_keeps_what_redis_keeps() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    let help = c.cmd(&["SLOWLOG", "HELP"]);
    assert_eq!(
        String::from_utf8_lossy(&help),
        "*12\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET [<count>]\r\n+    Return top <count> entries from the slowlog (default: 10, -1 mean all).\r\n+    Entries are made of:\r\n+    id, timestamp, time in microseconds, arguments array, client IP and port,\r\n+    client name\r\n+LEN\r\n+    Return the length of the slowlog.\r\n+RESET\r\n+    Reset the slowlog.\r\n+HELP\r\n+    Prints this help.\r\n"
    );
    for (args, expected) in [
        (&["SLOWLOG", "GET"][..], &b"*0\r\n"[..]),
        (&["SLOWLOG", "LEN"], b":0\r\n"),
        (
            &["SLOWLOG", "GET", "-2"],
            b"-ERR count should be greater than or equal to -1\r\n",
        ),
        (
            &["slowlog", "get", "1", "2"],
            b"-ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG HELP.\r\n",
        ),
        (
            &["SLOWLOG", "LEN", "1"],
            b"-ERR wrong number of arguments for 'slowlog|len' command\r\n",
        ),
        (
            &["SLOWLOG"],
            b"-ERR wrong number of arguments for 'slowlog' command\r\n",
        ),
        (
            &["SLOWLOG", "foo"],
            b"-ERR unknown subcommand 'foo'. Try SLOWLOG HELP.\r\n",
        ),
        (
            &["CONFIG", "GET", "slowlog-log-slower-than"],
            b"*2\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n",
        ),
        (
            &["CONFIG", "GET", "slowlog-max-len"],
            b"*2\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n",
        ),
        (
            &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
            b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument must be between -1 and 9223372036854775807 inclusive\r\n",
        ),
        (
            &["CONFIG", "SET", "slowlog-max-len", "-1"],
            b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 9223372036854775807 inclusive\r\n",
        ),
        (
            &["CONFIG", "SET", "slowlog-max-len", "1k"],
            b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument couldn't be parsed into an integer\r\n",
        ),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&c.cmd(args)),
            String::from_utf8_lossy(expected),
            "{args:?}"
        );
    }

    // Everything at threshold 0: the CONFIG SET itself first (it applies to itself).
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        b"+OK\r\n"
    );
    c.cmd(&["CLIENT", "SETNAME", "myname"]);
    let long = "x".repeat(200);
    c.cmd(&["SET", "k", &long]);
    let numbers: Vec<String> = (0..42).map(|i| i.to_string()).collect();
    let push = |n: usize| -> Vec<&str> {
        ["RPUSH", "l"]
            .into_iter()
            .chain(numbers[..n].iter().map(String::as_str))
            .collect()
    };
    for n in [40, 32, 31] {
        c.cmd(&push(n));
    }
    c.cmd(&["AUTH", "pw"]);
    c.cmd(&["AUTH", "a", "b", "c"]);
    c.cmd(&["HELLO", "3", "AUTH", "default", "pw"]);
    c.cmd(&["HELLO", "x", "AUTH", "default", "pw"]);
    c.cmd(&["CONFIG", "SET", "requirepass", "", "hz", "10"]);
    c.cmd(&["NOSUCH"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["GET"]);
    let entries = parse(&c.cmd(&["SLOWLOG", "GET", "-1"]));
    let addr = {
        let me = String::from_utf8(bytes(&parse(&c.cmd(&["CLIENT", "INFO"]))).to_vec()).unwrap();
        me.split_whitespace()
            .find_map(|f| f.strip_prefix("addr="))
            .unwrap()
            .to_string()
    };
    let cut = format!("{}... (72 more bytes)", "x".repeat(128));
    let rpush = |more: usize| -> Vec<String> {
        ["RPUSH", "l"]
            .iter()
            .map(|s| s.to_string())
            .chain(numbers[..29].iter().cloned())
            .chain(std::iter::once(format!("... ({more} more arguments)")))
            .collect()
    };
    // Newest first; unknown commands, arity errors and EXEC itself are not logged.
    let expected: Vec<(Vec<String>, &str)> = vec![
        (vec!["GET".into(), "k".into()], "myname"),
        (vec!["MULTI".into()], "myname"),
        (
            ["CONFIG", "SET", "requirepass", "(redacted)", "hz", "10"]
                .map(String::from)
                .to_vec(),
            "myname",
        ),
        (
            ["HELLO", "x", "AUTH", "default", "pw"]
                .map(String::from)
                .to_vec(),
            "myname",
        ),
        (
            ["HELLO", "3", "AUTH", "(redacted)", "(redacted)"]
                .map(String::from)
                .to_vec(),
            "myname",
        ),
        (["AUTH", "a", "b", "c"].map(String::from).to_vec(), "myname"),
        (["AUTH", "(redacted)"].map(String::from).to_vec(), "myname"),
        (rpush(2), "myname"),
        (rpush(3), "myname"),
        (rpush(11), "myname"),
        (vec!["SET".into(), "k".into(), cut], "myname"),
        (
            ["CLIENT", "SETNAME", "myname"].map(String::from).to_vec(),
            "myname",
        ),
        (
            ["CONFIG", "SET", "slowlog-log-slower-than", "0"]
                .map(String::from)
                .to_vec(),
            "",
        ),
    ];
    let entries = items(&entries);
    assert_eq!(entries.len(), expected.len());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for (i, (entry, (args, name))) in entries.iter().zip(&expected).enumerate() {
        let f = items(entry);
        assert_eq!(f.len(), 6);
        assert_eq!(int(&f[0]), (expected.len() - 1 - i) as i64, "ids count up");
        assert!((now - int(&f[1])).abs() < 60);
        assert!(int(&f[2]) >= 0);
        let got: Vec<String> = items(&f[3])
            .iter()
            .map(|a| String::from_utf8(bytes(a).to_vec()).unwrap())
            .collect();
        assert_eq!(&got, args);
        assert_eq!(bytes(&f[4]), addr.as_bytes());
        assert_eq!(bytes(&f[5]), name.as_bytes());
    }
    // The GET -1 itself was logged after it ran, and the CLIENT INFO after it.
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":15\r\n");
    assert_eq!(items(&parse(&c.cmd(&["SLOWLOG", "GET"]))).len(), 10);
    assert_eq!(items(&parse(&c.cmd(&["SLOWLOG", "GET", "2"]))).len(), 2);
    // A shorter log keeps the newest entries.
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-max-len", "2"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":2\r\n");
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":0\r\n");
    // A command another worker runs is timed and logged the same.
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let mut other = Conn::open(&server);
    other.cmd(&["SET", "elsewhere", "1"]);
    let log = parse(&c.cmd(&["SLOWLOG", "GET", "-1"]));
    assert!(items(&log).iter().any(|e| {
        items(&items(e)[3])
            .first()
            .is_some_and(|a| bytes(a) == b"SET")
    }));
    server.shutdown();
}

#[test]
fn the_latency_monitor_records_slow_commands() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    let disabled = "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n";
    assert_eq!(
        c.cmd(&["LATENCY", "DOCTOR"]),
        format!("${}\r\n{disabled}\r\n", disabled.len()).as_bytes()
    );
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), b"*0\r\n");
    assert_eq!(c.cmd(&["LATENCY", "HISTORY", "command"]), b"*0\r\n");
    assert_eq!(
        c.cmd(&["LATENCY", "GRAPH", "command"]),
        b"-ERR No samples available for event 'command'\r\n"
    );
    assert_eq!(
        c.cmd(&["LATENCY", "foo"]),
        b"-ERR unknown subcommand 'foo'. Try LATENCY HELP.\r\n"
    );
    assert_eq!(
        items(&parse(&c.cmd(&["LATENCY", "HELP"]))).len(),
        17,
        "Redis's 17 lines"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "-1"]),
        &b"-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') - argument must be between 0 and 9223372036854775807 inclusive\r\n"[..]
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "10"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.05"]), b"+OK\r\n");
    let latest = parse(&c.cmd(&["LATENCY", "LATEST"]));
    let events = items(&latest);
    assert_eq!(events.len(), 1);
    let e = items(&events[0]);
    assert_eq!(bytes(&e[0]), b"command");
    let (time, ms, max) = (int(&e[1]), int(&e[2]), int(&e[3]));
    assert!((50..200).contains(&ms) && max == ms, "{ms} {max}");
    let history = parse(&c.cmd(&["LATENCY", "HISTORY", "command"]));
    assert_eq!(
        history,
        V::Arr(vec![V::Arr(vec![V::Int(time), V::Int(ms)])])
    );
    // Event names are matched exactly by HISTORY and GRAPH, in any case by RESET.
    assert_eq!(c.cmd(&["LATENCY", "HISTORY", "COMMAND"]), b"*0\r\n");
    let graph = String::from_utf8(bytes(&parse(&c.cmd(&["LATENCY", "GRAPH", "command"]))).to_vec())
        .unwrap();
    let ago = graph.lines().last().unwrap().to_string();
    assert_eq!(
        graph,
        format!(
            "command - high {ms} ms, low {ms} ms (all time high {ms} ms)\n{}\n \n \n \n_\n \n{}\n{ago}\n",
            "-".repeat(80),
            graph.lines().nth(7).unwrap()
        )
    );
    let doctor = String::from_utf8(bytes(&parse(&c.cmd(&["LATENCY", "DOCTOR"]))).to_vec()).unwrap();
    // The period is the seconds since the sample (at least 1).
    let period = doctor
        .split_once("period ")
        .and_then(|(_, rest)| rest.split_once(" sec"))
        .map(|(p, _)| p.to_string())
        .unwrap();
    assert!(period.ends_with(".00") && period != "0.00", "{period}");
    assert_eq!(
        doctor,
        format!(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n1. command: 1 latency spikes (average {ms}ms, mean deviation 0ms, period {period} sec). Worst all time event {ms}ms.\n\nI have a few advices for you:\n\n- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n"
        )
    );
    // The slow log gets the sleep too (at its 10 ms default).
    let log = parse(&c.cmd(&["SLOWLOG", "GET", "1"]));
    assert_eq!(
        items(&items(&log)[0])[3],
        V::Arr(vec![
            V::Str(b"DEBUG".to_vec()),
            V::Str(b"SLEEP".to_vec()),
            V::Str(b"0.05".to_vec())
        ])
    );
    assert_eq!(
        c.cmd(&["LATENCY", "RESET", "COMMAND", "nosuch", "command"]),
        b":1\r\n"
    );
    let quiet = "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n";
    assert_eq!(
        c.cmd(&["LATENCY", "DOCTOR"]),
        format!("${}\r\n{quiet}\r\n", quiet.len()).as_bytes()
    );
    // DEBUG SLEEP blocks its worker only: another worker's client is served meanwhile.
    let mut sleeper = Conn::open(&server);
    let mut other = Conn::open(&server);
    sleeper.send(&["DEBUG", "SLEEP", "1"]);
    std::thread::sleep(Duration::from_millis(50));
    let asked = Instant::now();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    assert!(asked.elapsed() < Duration::from_millis(700));
    assert_eq!(sleeper.reply(), b"+OK\r\n");
    server.shutdown();
}

#[test]
fn latency_histograms_and_latencystats_have_redis_shapes() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "a", "b"]);
    c.cmd(&["CONFIG", "GET", "hz"]);
    // Named commands in the order asked (a container's own histogram, then its
    // subcommands'), unknown names skipped; RESP2 maps are flat arrays.
    let reply = parse(&c.cmd(&[
        "LATENCY",
        "HISTOGRAM",
        "set",
        "config",
        "nosuch",
        "config|get",
    ]));
    let flat = items(&reply);
    let names: Vec<&[u8]> = flat.iter().step_by(2).map(bytes).collect();
    assert_eq!(
        names,
        [
            &b"set"[..],
            b"config|get",
            b"config|resetstat",
            b"config|get"
        ]
    );
    for detail in flat.iter().skip(1).step_by(2) {
        let d = items(detail);
        assert_eq!(bytes(&d[0]), b"calls");
        assert_eq!(int(&d[1]), 1);
        assert_eq!(bytes(&d[2]), b"histogram_usec");
        let buckets = items(&d[3]);
        assert_eq!(buckets.len(), 2, "one power-of-two bucket: {buckets:?}");
        // Redis's reporting levels: 1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, ... (the
        // largest value sharing a counter with 1024 ns << k, in microseconds).
        let micros = int(&buckets[0]);
        let levels: Vec<i64> = (0..24)
            .map(|k| ((1024i64 << k) + (1 << (3 + k)) - 1) / 1000)
            .collect();
        assert_eq!(&levels[..7], [1, 2, 4, 8, 16, 33, 66]);
        assert!(levels.contains(&micros), "{micros}");
        assert_eq!(int(&buckets[1]), 1);
    }
    // RESP3: maps.
    c.cmd(&["HELLO", "3"]);
    let reply = String::from_utf8_lossy(&c.cmd(&["LATENCY", "HISTOGRAM", "set"])).into_owned();
    let shape = reply
        .split_once("histogram_usec\r\n%1\r\n:")
        .map(|(head, tail)| {
            (
                head.to_string(),
                tail.split_once("\r\n").unwrap().1.to_string(),
            )
        });
    assert_eq!(
        shape,
        Some((
            "%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:1\r\n$14\r\n".to_string(),
            ":1\r\n".to_string()
        )),
        "{reply}"
    );
    c.cmd(&["HELLO", "2"]);
    let line_shape = |text: &str, keys: &[&str]| {
        for line in text.lines().skip(1) {
            let (name, values) = line
                .strip_prefix("latency_percentiles_usec_")
                .and_then(|l| l.split_once(':'))
                .unwrap();
            assert!(!name.is_empty());
            let got: Vec<&str> = if values.is_empty() {
                Vec::new()
            } else {
                values
                    .split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        assert!(v.split_once('.').is_some_and(|(_, d)| d.len() == 3), "{v}");
                        k
                    })
                    .collect()
            };
            assert_eq!(got, keys, "{line}");
        }
    };
    let stats = info(&mut c, &["latencystats"]);
    assert!(stats.starts_with("# Latencystats\r\nlatency_percentiles_usec_"));
    line_shape(&stats, &["p50", "p99", "p99.9"]);
    c.cmd(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "99.90 0 50.5 100",
    ]);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        b"*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$15\r\n99.9 0 50.5 100\r\n"
    );
    line_shape(
        &info(&mut c, &["latencystats"]),
        &["p99.9", "p0", "p50.5", "p100"],
    );
    c.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    line_shape(&info(&mut c, &["latencystats"]), &[]);
    for (value, why) in [
        (
            "50 101",
            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
        ),
        (
            "abc",
            "Invalid latency-tracking-info-percentiles parameters",
        ),
    ] {
        assert_eq!(
            c.text(&["CONFIG", "SET", "latency-tracking-info-percentiles", value]),
            format!(
                "-ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - {why}\r\n"
            )
        );
    }
    // latency-tracking no: no section lines, no new samples; the histograms stay.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-tracking", "maybe"]),
        &b"-ERR CONFIG SET failed (possibly related to argument 'latency-tracking') - argument must be 'yes' or 'no'\r\n"[..]
    );
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    assert_eq!(info(&mut c, &["latencystats"]), "# Latencystats\r\n");
    c.cmd(&["SET", "a", "c"]);
    let set = parse(&c.cmd(&["LATENCY", "HISTOGRAM", "set"]));
    assert_eq!(int(&items(&items(&set)[1])[1]), 1);
    assert_eq!(commandstats(&mut c)["set"], (2, 0, 0));
    server.shutdown();
}

/// A monitor line without its time and port: `(who, rest)`.
fn monitor_line(line: &[u8], who: &BTreeMap<String, &'static str>) -> (String, String) {
    let line = std::str::from_utf8(line).unwrap();
    let rest = line
        .strip_prefix('+')
        .and_then(|l| l.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("{line:?}"));
    let (time, rest) = rest.split_once(' ').unwrap();
    let (secs, micros) = time.split_once('.').unwrap();
    assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{line}");
    let (addr, args) = rest
        .strip_prefix("[0 ")
        .and_then(|r| r.split_once("] "))
        .unwrap();
    let name = who.get(addr).copied().unwrap_or("?").to_string();
    (name, args.to_string())
}

fn addr_of(c: &mut Conn) -> String {
    let me = String::from_utf8(bytes(&parse(&c.cmd(&["CLIENT", "INFO"]))).to_vec()).unwrap();
    me.split_whitespace()
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string()
}

#[test]
fn monitor_sees_every_worker_in_redis_format() {
    let server = two_workers();
    // Connections go to the workers in turn: the monitor on one, A on the other, B back on
    // the first.
    let mut m = Conn::open(&server);
    assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut a = Conn::open(&server);
    let mut b = Conn::open(&server);
    let mut who = BTreeMap::new();
    who.insert(addr_of(&mut a), "A");
    who.insert(addr_of(&mut b), "B");
    let script: &[(bool, &[&str])] = &[
        (true, &["set", "k", "v\x01\"\\\n\r\t\x07\x08 \u{e9}~"]),
        (false, &["get", "k"]),
        (true, &["auth", "x"]),
        (false, &["auth", "u", "p"]),
        (true, &["auth", "a", "b", "c"]),
        (false, &["hello", "3", "auth", "default", "pw"]),
        (
            true,
            &["hello", "2", "setname", "x", "auth", "default", "pw"],
        ),
        (false, &["hello", "2", "auth", "default"]),
        (true, &["hello", "4", "auth", "default", "pw"]),
        (
            false,
            &["hello", "2", "setname", "a b", "auth", "default", "pw"],
        ),
        (true, &["config", "get", "hz"]),
        (true, &["multi"]),
        (true, &["set", "a", "1"]),
        (true, &["get", "a"]),
        (true, &["exec"]),
        (false, &["nosuch"]),
        (false, &["get"]),
        (true, &["debug", "sleep", "0"]),
        (false, &["client", "id"]),
        (false, &["client", "list"]),
        (true, &["ping"]),
        (false, &["slowlog", "len"]),
        (true, &["info", "server"]),
        (false, &["set", "n", "12345"]),
        (true, &["incr", "n"]),
        (false, &["latency", "latest"]),
        (true, &["echo", "\x00\u{ff}"]),
        (false, &["config", "foo"]),
        (true, &["object", "encoding", "n"]),
        (false, &["publish", "ch", "x"]),
        (true, &["blpop", "nolist", "0.01"]),
        (false, &["mset", "x", "1", "y", "2"]),
        (true, &["del", "x", "y", "z"]),
        (false, &["lpush", "q", "1"]),
    ];
    for (on_a, args) in script {
        if *on_a {
            a.cmd(args);
        } else {
            b.cmd(args);
        }
    }
    // What redis-server 7.0.15 sent its monitor for the same script: admin commands,
    // unknown ones and refused ones are not shown; passwords are redacted where AUTH and
    // HELLO redact them; a transaction's commands when EXEC runs them, EXEC after them.
    let expected: &[(&str, &str)] = &[
        ("A", r#""CLIENT" "INFO""#),
        ("B", r#""CLIENT" "INFO""#),
        ("A", r#""set" "k" "v\x01\"\\\n\r\t\a\b \xc3\xa9~""#),
        ("B", r#""get" "k""#),
        ("A", r#""auth" "(redacted)""#),
        ("B", r#""auth" "(redacted)" "(redacted)""#),
        ("A", r#""auth" "a" "b" "c""#),
        ("B", r#""hello" "3" "auth" "(redacted)" "(redacted)""#),
        (
            "A",
            r#""hello" "2" "setname" "x" "auth" "(redacted)" "(redacted)""#,
        ),
        ("B", r#""hello" "2" "auth" "default""#),
        ("A", r#""hello" "4" "auth" "default" "pw""#),
        ("B", r#""hello" "2" "setname" "a b" "auth" "default" "pw""#),
        ("A", r#""multi""#),
        ("A", r#""set" "a" "1""#),
        ("A", r#""get" "a""#),
        ("A", r#""exec""#),
        ("B", r#""client" "id""#),
        ("A", r#""ping""#),
        ("A", r#""info" "server""#),
        ("B", r#""set" "n" "12345""#),
        ("A", r#""incr" "n""#),
        ("A", r#""echo" "\x00\xc3\xbf""#),
        ("A", r#""object" "encoding" "n""#),
        ("B", r#""publish" "ch" "x""#),
        ("A", r#""blpop" "nolist" "0.01""#),
        ("B", r#""mset" "x" "1" "y" "2""#),
        ("A", r#""del" "x" "y" "z""#),
        ("B", r#""lpush" "q" "1""#),
    ];
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let line = m.reply();
        got.push(monitor_line(&line, &who));
    }
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(w, l)| (w.to_string(), l.to_string()))
        .collect();
    assert_eq!(got, expected);
    assert!(m.reply_within(200).is_none(), "nothing more");

    // The monitor's own commands: its reply, then its line; keys are refused to it; a second
    // MONITOR gets no reply; RESET ends monitoring.
    assert_eq!(m.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(monitor_line(&m.reply(), &who).1, r#""PING""#);
    assert_eq!(
        m.cmd(&["GET", "k"]),
        b"-ERR Replica can't interact with the keyspace\r\n"
    );
    m.send(&["MONITOR"]);
    assert!(m.reply_within(200).is_none());
    assert_eq!(m.cmd(&["RESET"]), b"+RESET\r\n");
    a.cmd(&["PING"]);
    assert!(m.reply_within(200).is_none());
    // Not inside a transaction; a RESP3 monitor gets the same status lines.
    assert_eq!(b.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(b.cmd(&["MONITOR"]), b"+QUEUED\r\n");
    assert_eq!(
        b.cmd(&["EXEC"]),
        &b"*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"[..]
    );
    let mut m3 = Conn::open(&server);
    m3.cmd(&["HELLO", "3"]);
    assert_eq!(m3.cmd(&["MONITOR"]), b"+OK\r\n");
    a.cmd(&["GET", "z"]);
    assert_eq!(
        monitor_line(&m3.reply(), &who),
        ("A".into(), r#""GET" "z""#.into())
    );
    server.shutdown();
}

#[test]
fn a_monitor_that_never_reads_is_cut_off() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    // The pubsub class bounds what a monitor may leave unread.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 512kb 60"
        ]),
        b"+OK\r\n"
    );
    let mut slow = Conn::open(&server);
    assert_eq!(slow.cmd(&["MONITOR"]), b"+OK\r\n");
    let value = "v".repeat(64 * 1024);
    let mut writer = Conn::open(&server);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent = 0usize;
    loop {
        // Pipelined, 16 at a time.
        let mut batch = Vec::new();
        for i in 0..16 {
            batch.extend_from_slice(&encode(&["SET", &format!("k{i}"), &value]));
        }
        writer.s.write_all(&batch).unwrap();
        for _ in 0..16 {
            assert_eq!(writer.reply(), b"+OK\r\n");
        }
        sent += 16 * value.len();
        let clients =
            String::from_utf8(bytes(&parse(&c.cmd(&["CLIENT", "LIST"]))).to_vec()).unwrap();
        if clients.lines().count() == 2 {
            break;
        }
        assert!(
            sent < 256 << 20 && Instant::now() < deadline,
            "a monitor that never reads was not cut off after {sent} bytes"
        );
    }
    // Cut off once what it could not take (socket buffers aside) passed the limit: not
    // after hundreds of megabytes queued for it.
    assert!(sent < 64 << 20, "{sent} bytes before the cut");
    // Its socket ends after what the kernel buffered.
    slow.s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    assert!(slow.s.read_to_end(&mut sink).is_ok());
    // Other clients are unaffected.
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    server.shutdown();
}

/// Waits until `INFO clients` shows `n` blocked clients.
fn wait_blocked(c: &mut Conn, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !info(c, &["clients"]).contains(&format!("blocked_clients:{n}\r\n")) {
        assert!(Instant::now() < deadline, "never {n} blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_blocking_pop_is_counted_once_when_served() {
    let server = two_workers();
    let mut c = Conn::open(&server);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let mut m = Conn::open(&server);
    assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut a = Conn::open(&server);
    let id = int(&parse(&a.cmd(&["CLIENT", "ID"])));
    let who = BTreeMap::from([(addr_of(&mut a), "A")]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    // Monitors see it when it first runs (before it is served), as in Redis.
    a.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut c, 1);
    // (Between the INFOs of the wait, whose lines come first or after it.)
    let pop = ("A".to_string(), r#""BLPOP" "q" "0""#.to_string());
    let mut seen = Vec::new();
    while !seen.contains(&pop) {
        assert!(seen.len() < 100, "{seen:?}");
        seen.push(monitor_line(&m.reply(), &who));
    }
    c.cmd(&["LPUSH", "q", "x"]);
    assert_eq!(a.reply(), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    a.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(
        c.cmd(&["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]),
        b":1\r\n"
    );
    assert_eq!(
        a.reply(),
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    assert_eq!(a.cmd(&["BLPOP", "q", "0.01"]), b"*-1\r\n");
    // Redis's counts: three calls, one failed; and the UNBLOCK failed too (Redis counts the
    // error it caused another client).
    let stats = commandstats(&mut c);
    assert_eq!(stats["blpop"], (3, 0, 1));
    assert_eq!(stats["client|unblock"], (1, 0, 1));
    assert!(info(&mut c, &["errorstats"]).contains("errorstat_UNBLOCKED:count=1\r\n"));
    // One slow log entry per call.
    let log = parse(&c.cmd(&["SLOWLOG", "GET", "-1"]));
    let pops = items(&log)
        .iter()
        .filter(|e| bytes(&items(&items(e)[3])[0]) == b"BLPOP")
        .count();
    assert_eq!(pops, 3);
    server.shutdown();
}
