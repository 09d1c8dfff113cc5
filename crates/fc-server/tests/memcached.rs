//! The memcached port against Debian's `memcached` (installed when missing): the same seeded
//! random command sequences sent to both, replies compared byte for byte after one
//! normalization (CAS values, which each server draws its own way: each side's own are used
//! for `cas` commands and both print as `CAS`), plus raw-socket checks of what a differential
//! run cannot see (the shared keyspace with RESP, flags surviving an append, a RESP write
//! giving the item a new CAS).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{client, start};
use fc_server::ServerConfig;
use redis::Commands;

/// `memcached`'s path, installing Debian's package when it is missing.
fn memcached() -> String {
    let found = |p: &str| std::path::Path::new(p).exists();
    for path in ["/usr/bin/memcached", "/usr/local/bin/memcached"] {
        if found(path) {
            return path.into();
        }
    }
    let _ = Command::new("apt-get")
        .args(["install", "-y", "-q", "memcached"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        found("/usr/bin/memcached"),
        "these tests compare with memcached: install it (apt-get install memcached)"
    );
    "/usr/bin/memcached".into()
}

struct Memcached(Child, SocketAddr);

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_memcached() -> Memcached {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    // A free port is free only until someone binds it: another test's server (they bind
    // port 0 meanwhile) may take it first, memcached then exits, and the port answers for
    // that server. So the server answering must be this memcached (`stats`' pid), else try
    // another port.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(memcached());
        cmd.args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-t",
            "1",
        ]);
        if root {
            cmd.args(["-u", "root"]);
        }
        let mut child = Memcached(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
            format!("127.0.0.1:{port}").parse().unwrap(),
        );
        for _ in 0..100 {
            if child.0.try_wait().unwrap().is_some() {
                break; // it could not bind: another port
            }
            if serves_from(child.1, child.0.id()) {
                return child;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("memcached did not start");
}

/// Whether the memcached at `addr` is process `pid`.
fn serves_from(addr: SocketAddr, pid: u32) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"stats\r\n").is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(b"END\r\n") {
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => got.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
    String::from_utf8_lossy(&got)
        .lines()
        .any(|line| line.trim() == format!("STAT pid {pid}"))
}

struct Conn(TcpStream);

impl Conn {
    fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_nodelay(true).unwrap();
        Self(s)
    }

    /// Sends `request` and a meta no-op, and returns everything before the no-op's `MN`: all
    /// the request's replies, however many (none for `noreply`).
    fn exchange(&mut self, request: &[u8]) -> Vec<u8> {
        self.0.write_all(&[request, b"mn\r\n"].concat()).unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 65536];
        while !got.ends_with(b"MN\r\n") {
            let n = self.0.read(&mut chunk).unwrap();
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(request));
            got.extend_from_slice(&chunk[..n]);
        }
        got.truncate(got.len() - 4);
        got
    }
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

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }
}

/// The CAS values a server printed for each key (`gets` lines, meta `c` flags).
#[derive(Default)]
struct Seen(std::collections::HashMap<String, String>);

impl Seen {
    fn learn(&mut self, reply: &[u8], key_of_meta: Option<&str>) {
        let text = String::from_utf8_lossy(reply);
        for line in text.split("\r\n") {
            let words: Vec<&str> = line.split(' ').collect();
            if words.len() == 5 && words[0] == "VALUE" {
                self.0.insert(words[1].into(), words[4].into());
            }
            if let Some(key) = key_of_meta
                && (words[0] == "HD" || words[0] == "VA")
                && let Some(c) = words.iter().find_map(|w| w.strip_prefix('c'))
            {
                self.0.insert(key.into(), c.into());
            }
        }
    }

    fn cas(&self, key: &str) -> String {
        self.0.get(key).cloned().unwrap_or_else(|| "12345".into())
    }
}

/// Each CAS value printed becomes `CAS`.
fn normalize(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    text.split("\r\n")
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            if words.len() == 5 && words[0] == "VALUE" {
                return format!("{} {} {} {} CAS", words[0], words[1], words[2], words[3]);
            }
            if matches!(words[0], "HD" | "VA" | "EN" | "NF" | "NS" | "EX") {
                return words
                    .iter()
                    .map(|w| {
                        if w.starts_with('c') && w[1..].bytes().all(|b| b.is_ascii_digit()) {
                            "cCAS".to_string()
                        } else {
                            (*w).to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            line.to_string()
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

const KEYS: &[&str] = &["a", "b", "num", "k:1", "k:2", "long-key-name-0123456789"];

/// One random command, with `{cas}` where the server's own CAS value for the key goes.
fn command(rng: &mut Rng) -> (String, String) {
    let key = rng.pick(KEYS).to_string();
    let values = ["v", "hello", "12", "0", "18446744073709551615", "x y z", ""];
    let value = rng.pick(&values).to_string();
    let flags = rng.pick(&["0", "1", "42", "4294967295"]);
    let exptime = rng.pick(&["0", "0", "0", "3600", "-1", "9999999999"]);
    let noreply = if rng.below(8) == 0 { " noreply" } else { "" };
    let op = rng.below(24);
    let line = match op {
        0 | 1 => format!(
            "set {key} {flags} {exptime} {}{noreply}\r\n{value}\r\n",
            value.len()
        ),
        2 => format!(
            "add {key} {flags} {exptime} {}{noreply}\r\n{value}\r\n",
            value.len()
        ),
        3 => format!(
            "replace {key} {flags} {exptime} {}{noreply}\r\n{value}\r\n",
            value.len()
        ),
        4 => format!(
            "append {key} {flags} {exptime} {}{noreply}\r\n{value}\r\n",
            value.len()
        ),
        5 => format!(
            "prepend {key} {flags} {exptime} {}{noreply}\r\n{value}\r\n",
            value.len()
        ),
        6 => {
            let cas = if rng.below(4) == 0 { "1" } else { "{cas}" };
            format!(
                "cas {key} {flags} {exptime} {} {cas}{noreply}\r\n{value}\r\n",
                value.len()
            )
        }
        7 | 8 => format!("get {key}\r\n"),
        9 => format!("gets {key} {}\r\n", rng.pick(KEYS)),
        10 => format!("get {} {} {key}\r\n", rng.pick(KEYS), rng.pick(KEYS)),
        11 => format!("gat {exptime} {key}\r\n"),
        12 => format!(
            "incr {key} {}{noreply}\r\n",
            rng.pick(&["1", "5", "18446744073709551615"])
        ),
        13 => format!("decr {key} {}{noreply}\r\n", rng.pick(&["1", "7", "100"])),
        14 => format!("touch {key} {exptime}{noreply}\r\n"),
        15 => format!("delete {key}{noreply}\r\n"),
        16 => format!(
            "mg {key} {}\r\n",
            rng.pick(&["v", "v f", "s v", "k v O99", "q v", "f t", "c"])
        ),
        17 => format!(
            "ms {key} {} {}\r\n{value}\r\n",
            value.len(),
            rng.pick(&["", "F5", "T0", "MA", "ME", "MR", "MP", "q", "c", "F9 k"])
        ),
        18 => format!("md {key} {}\r\n", rng.pick(&["", "q", "k", "O7"])),
        19 => format!(
            "ma {key} {}\r\n",
            rng.pick(&["", "v", "D3 v", "MD v", "N0 J7 v", "q", "t v"])
        ),
        20 => rng
            .pick(&[
                "bogus\r\n",
                "get\r\n",
                "set x 1 2\r\n",
                "incr a b\r\n",
                "verbosity 1\r\n",
            ])
            .to_string(),
        21 => format!("set {key} notanumber 0 1\r\nx\r\n"),
        22 => format!("set {key} 0 0 1\r\nxyz\r\n"),
        _ => {
            if rng.below(10) == 0 {
                "flush_all\r\n".into()
            } else {
                format!("get {key}\r\n")
            }
        }
    };
    (line, key)
}

/// `incr`, `decr` or meta arithmetic (`ma`).
fn arithmetic(template: &str) -> bool {
    ["incr ", "decr ", "ma "]
        .iter()
        .any(|verb| template.starts_with(verb))
}

/// Whether `key` holds a number of 2^63 or more (read with the same `mg` on both servers).
/// memcached's arithmetic is not deterministic there: its `safe_strtoull` looks for a `-`
/// with `strchr`, which reads past the value's `\r\n` into whatever the slab holds next, so
/// it answers `CLIENT_ERROR cannot increment or decrement non-numeric value` when a key
/// with a `-` (`long-key-name-0123456789`) lies after it, and wraps at 2^64 when not. Those
/// commands are left out of the comparison; `arithmetic_at_the_top_of_u64_wraps_as_memcached_does`
/// checks fc-server's answers there.
fn at_or_over_2_63(theirs: &mut Conn, ours: &mut Conn, key: &str) -> bool {
    let request = format!("mg {key} v\r\n");
    let _ = ours.exchange(request.as_bytes());
    let reply = theirs.exchange(request.as_bytes());
    let text = String::from_utf8_lossy(&reply);
    let mut lines = text.split("\r\n");
    lines.next().is_some_and(|head| head.starts_with("VA "))
        && lines
            .next()
            .and_then(|value| value.trim_end_matches(' ').parse::<u64>().ok())
            .is_some_and(|n| n >= 1 << 63)
}

#[test]
fn arithmetic_at_the_top_of_u64_wraps_as_memcached_does() {
    // memcached 1.6.18's own answers to this sequence, from a fresh memcached (nothing with
    // a `-` after the value in its slab: see `at_or_over_2_63`).
    let server = start(ServerConfig {
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    });
    let mut conn = Conn::open(server.memcached_addr().unwrap());
    let max = "18446744073709551615";
    for (request, reply) in [
        (
            format!("set a 0 0 20\r\n{max}\r\n"),
            "STORED\r\n".to_string(),
        ),
        ("incr a 3\r\n".into(), "2\r\n".into()),
        (
            "get a\r\n".into(),
            "VALUE a 0 20\r\n2                   \r\nEND\r\n".into(),
        ),
        ("incr a 1\r\n".into(), "3\r\n".into()),
        (format!("set a 0 0 20\r\n{max}\r\n"), "STORED\r\n".into()),
        ("decr a 100\r\n".into(), "18446744073709551515\r\n".into()),
        ("set a 0 0 1\r\n0\r\n".into(), "STORED\r\n".into()),
        (format!("incr a {max}\r\n"), format!("{max}\r\n")),
        (
            "get a\r\n".into(),
            format!("VALUE a 0 20\r\n{max}\r\nEND\r\n"),
        ),
        ("ma a D2 v\r\n".into(), "VA 1\r\n1\r\n".into()),
        (format!("ma a MD D{max} v\r\n"), "VA 1\r\n0\r\n".into()),
        (
            "get a\r\n".into(),
            "VALUE a 0 20\r\n0                   \r\nEND\r\n".into(),
        ),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&conn.exchange(request.as_bytes())),
            reply,
            "after {request:?}"
        );
    }
    server.shutdown();
}

#[test]
fn replies_match_memcached_byte_for_byte() {
    let reference = start_memcached();
    let server = start(ServerConfig {
        shards: 8,
        threads: 2,
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    });
    let ours = server.memcached_addr().unwrap();
    let mut mismatches = Vec::new();
    let (mut total, mut skipped) = (0, 0);
    for seed in [1u64, 2, 3, 4] {
        let (mut theirs_conn, mut ours_conn) = (Conn::open(reference.1), Conn::open(ours));
        // A clean keyspace for each sequence.
        theirs_conn.exchange(b"flush_all\r\n");
        ours_conn.exchange(b"flush_all\r\n");
        let (mut seen_theirs, mut seen_ours) = (Seen::default(), Seen::default());
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut history: Vec<String> = Vec::new();
        let mut first = true;
        for _ in 0..600 {
            let (template, key) = command(&mut rng);
            if arithmetic(&template) && at_or_over_2_63(&mut theirs_conn, &mut ours_conn, &key) {
                skipped += 1;
                continue;
            }
            let meta = template.starts_with('m').then_some(key.as_str());
            let theirs_cmd = template.replace("{cas}", &seen_theirs.cas(&key));
            let ours_cmd = template.replace("{cas}", &seen_ours.cas(&key));
            let a = theirs_conn.exchange(theirs_cmd.as_bytes());
            let b = ours_conn.exchange(ours_cmd.as_bytes());
            seen_theirs.learn(&a, meta);
            seen_ours.learn(&b, meta);
            total += 1;
            if normalize(&a) != normalize(&b) {
                let before = if first {
                    format!(
                        "\n  after: {}",
                        history[history.len().saturating_sub(12)..].join(" | ")
                    )
                } else {
                    String::new()
                };
                first = false;
                mismatches.push(format!(
                    "seed {seed}: {template:?}\n  memcached: {:?}\n  fc-server: {:?}{before}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
            history.push(format!("{template:?} -> {:?}", String::from_utf8_lossy(&a)));
        }
    }
    server.shutdown();
    assert!(
        skipped < total / 10,
        "{skipped} of {total} commands skipped"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {total} replies differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(15)].join("\n")
    );
}

#[test]
fn the_keyspace_is_shared_with_resp() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 2,
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    });
    let mut mc = Conn::open(server.memcached_addr().unwrap());
    let mut resp = client(&server);
    assert_eq!(mc.exchange(b"set k 7 0 5\r\nhello\r\n"), b"STORED\r\n");
    let got: String = resp.get("k").unwrap();
    assert_eq!(got, "hello");
    // Flags survive an append; the CAS changes with every write, by any protocol.
    let first = mc.exchange(b"gets k\r\n");
    assert!(first.starts_with(b"VALUE k 7 5 "), "{first:?}");
    assert_eq!(mc.exchange(b"append k 0 0 1\r\n!\r\n"), b"STORED\r\n");
    let second = mc.exchange(b"gets k\r\n");
    assert!(second.starts_with(b"VALUE k 7 6 "), "{second:?}");
    assert_ne!(first[12..], second[12..]);
    let cas = String::from_utf8_lossy(&second)
        .split("\r\n")
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    // A RESP write makes the client's CAS stale, and drops the flags (a RESP string has none).
    let () = resp.set("k", "from resp").unwrap();
    let stale = format!("cas k 0 0 1 {cas}\r\nx\r\n");
    assert_eq!(mc.exchange(stale.as_bytes()), b"EXISTS\r\n");
    assert_eq!(
        mc.exchange(b"get k\r\n"),
        b"VALUE k 0 9\r\nfrom resp\r\nEND\r\n"
    );
    // Counters are shared too; a RESP INCR sees memcached's number.
    assert_eq!(mc.exchange(b"set n 0 0 2\r\n41\r\n"), b"STORED\r\n");
    let n: i64 = resp.incr("n", 1).unwrap();
    assert_eq!(n, 42);
    assert_eq!(mc.exchange(b"incr n 8\r\n"), b"50\r\n");
    // Expiry: relative seconds and absolute Unix times both become the key's TTL.
    assert_eq!(mc.exchange(b"set t 0 100 1\r\nx\r\n"), b"STORED\r\n");
    let ttl: i64 = resp.ttl("t").unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 5000;
    assert_eq!(
        mc.exchange(format!("touch t {at}\r\n").as_bytes()),
        b"TOUCHED\r\n"
    );
    let ttl: i64 = resp.ttl("t").unwrap();
    assert!((4990..=5000).contains(&ttl), "{ttl}");
    server.shutdown();
}

#[test]
fn limits_and_bad_input_are_refused_without_harm() {
    let server = start(ServerConfig {
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        memcached_item_max: 1024,
        ..ServerConfig::default()
    });
    let addr = server.memcached_addr().unwrap();
    let mut mc = Conn::open(addr);
    // Over the item limit: refused, its data swallowed, the connection goes on.
    let big = format!("set big 0 0 2000\r\n{}\r\nget big\r\n", "x".repeat(2000));
    assert_eq!(
        mc.exchange(big.as_bytes()),
        b"SERVER_ERROR object too large for cache\r\nEND\r\n"
    );
    let long_key = format!("get {}\r\n", "k".repeat(251));
    assert_eq!(
        mc.exchange(long_key.as_bytes()),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    // A line that never ends is cut off, and that connection only is closed.
    let mut endless = TcpStream::connect(addr).unwrap();
    endless
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    endless.write_all(&vec![b'a'; 70 * 1024]).unwrap();
    let mut reply = Vec::new();
    let _ = endless.read_to_end(&mut reply);
    assert_eq!(reply, b"CLIENT_ERROR line too long\r\n");
    assert_eq!(mc.exchange(b"set ok 0 0 1\r\n1\r\n"), b"STORED\r\n");
    // stats carries memcached's field names.
    let stats = String::from_utf8(mc.exchange(b"stats\r\n")).unwrap();
    for field in [
        "pid",
        "uptime",
        "curr_connections",
        "cmd_get",
        "cmd_set",
        "get_hits",
        "get_misses",
        "curr_items",
        "bytes",
        "evictions",
    ] {
        assert!(
            stats.contains(&format!("STAT {field} ")),
            "{field} in {stats}"
        );
    }
    assert!(stats.ends_with("END\r\n"));
    let settings = String::from_utf8(mc.exchange(b"stats settings\r\n")).unwrap();
    assert!(
        settings.contains("STAT item_size_max 1024\r\n"),
        "{settings}"
    );
    mc.0.write_all(b"quit\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = mc.0.read_to_end(&mut rest);
    assert!(rest.is_empty(), "quit closes without a reply");
    server.shutdown();
}

#[test]
fn memcached_clients_are_listed_killed_and_stopped_like_others() {
    let server = start(ServerConfig {
        memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    });
    let port = server.memcached_addr().unwrap().port();
    let mut mc = Conn::open(server.memcached_addr().unwrap());
    assert_eq!(mc.exchange(b"set k 0 0 1\r\nv\r\n"), b"STORED\r\n");
    let mut resp = client(&server);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut resp).unwrap();
    let line = list
        .lines()
        .find(|l| l.contains(&format!("laddr=127.0.0.1:{port}")))
        .unwrap_or_else(|| panic!("the memcached client in {list}"));
    let id: u64 = line
        .split(' ')
        .find_map(|f| f.strip_prefix("id="))
        .unwrap()
        .parse()
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut resp)
        .unwrap();
    assert_eq!(killed, 1);
    let mut rest = Vec::new();
    let _ = mc.0.read_to_end(&mut rest);
    assert!(rest.is_empty(), "killed: closed");
    // An open memcached connection does not hold the server's shutdown up.
    let mut open = Conn::open(server.memcached_addr().unwrap());
    assert_eq!(open.exchange(b"get k\r\n"), b"VALUE k 0 1\r\nv\r\nEND\r\n");
    let started = std::time::Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}
