//! Three fc-servers behind twemproxy (Debian's `nutcracker`, installed when missing), one pool
//! for the memcached protocol and one for RESP: 10,000 keys written through each pool are each
//! found on exactly one server, and read back through the proxy.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, on_a_free_port, start};
use fc_server::{ServerConfig, ServerHandle};

fn nutcracker() -> String {
    let path = "/usr/sbin/nutcracker";
    if !std::path::Path::new(path).exists() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "nutcracker"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    assert!(
        std::path::Path::new(path).exists(),
        "this test runs twemproxy: install it (apt-get install nutcracker)"
    );
    path.into()
}

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `request` and reads until `done` says the replies are whole.
fn exchange(addr: SocketAddr, request: &[u8], done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while !done(&got) {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

const KEYS: usize = 10_000;

#[test]
fn keys_through_twemproxy_land_on_exactly_one_server() {
    let binary = nutcracker();
    let servers: Vec<ServerHandle> = (0..3)
        .map(|_| {
            start(ServerConfig {
                shards: 4,
                threads: 1,
                memcached_bind: Some("127.0.0.1:0".parse().unwrap()),
                ..ServerConfig::default()
            })
        })
        .collect();
    let list = |addr: fn(&ServerHandle) -> SocketAddr| {
        servers
            .iter()
            .map(|s| format!("    - {}:1\n", addr(s)))
            .collect::<String>()
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nutcracker.yml");
    // nutcracker is told its ports; another test's server may take one between the probe and
    // its bind, and then nutcracker exits: it must still run once both ports answer.
    let (_proxy, mc, redis) = on_a_free_port(|mc_port| {
        let redis_port = free_port();
        let config = format!(
            "memcache_pool:\n  listen: 127.0.0.1:{mc_port}\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 2000\n  servers:\n{}\nredis_pool:\n  listen: 127.0.0.1:{redis_port}\n  redis: true\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 2000\n  servers:\n{}",
            list(|s| s.memcached_addr().unwrap()),
            list(ServerHandle::addr),
        );
        std::fs::write(&file, config).unwrap();
        let mut proxy = Proxy(
            Command::new(&binary)
                .arg("-c")
                .arg(&file)
                .args(["-s", &free_port().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let (mc, redis): (SocketAddr, SocketAddr) = (
            format!("127.0.0.1:{mc_port}").parse().unwrap(),
            format!("127.0.0.1:{redis_port}").parse().unwrap(),
        );
        for _ in 0..100 {
            if TcpStream::connect(mc).is_ok() && TcpStream::connect(redis).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // A failed bind ends nutcracker at once: alive a moment after both ports answered,
        // it holds them.
        std::thread::sleep(Duration::from_millis(200));
        match proxy.0.try_wait().unwrap() {
            None => Ok((proxy, mc, redis)),
            Some(status) => Err(format!("nutcracker exited ({status})")),
        }
    });
    // Writes through the proxy, pipelined.
    let mut sets = Vec::new();
    let mut rsets = Vec::new();
    for i in 0..KEYS {
        sets.extend_from_slice(
            format!("set mc:{i} 0 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
        rsets.extend_from_slice(&resp(&["SET", &format!("rs:{i}"), &i.to_string()]));
    }
    let stored = exchange(mc, &sets, |got| count(got, b"\r\n") >= KEYS);
    assert_eq!(count(&stored, b"STORED\r\n"), KEYS);
    let ok = exchange(redis, &rsets, |got| count(got, b"\r\n") >= KEYS);
    assert_eq!(count(&ok, b"+OK\r\n"), KEYS);
    // Each key on exactly one server, and every server holds some.
    let mut per_server = Vec::new();
    for server in &servers {
        let mut exists = Vec::new();
        for i in 0..KEYS {
            exists.extend_from_slice(&resp(&["EXISTS", &format!("mc:{i}")]));
            exists.extend_from_slice(&resp(&["EXISTS", &format!("rs:{i}")]));
        }
        let got = exchange(server.addr(), &exists, |got| {
            count(got, b"\r\n") >= 2 * KEYS
        });
        let lines: Vec<&[u8]> = got.split(|&b| b == b'\n').take(2 * KEYS).collect();
        per_server.push(
            lines
                .iter()
                .map(|l| l.starts_with(b":1"))
                .collect::<Vec<bool>>(),
        );
    }
    for k in 0..2 * KEYS {
        let holders = per_server.iter().filter(|s| s[k]).count();
        assert_eq!(holders, 1, "key #{k} is on {holders} servers");
    }
    for (n, s) in per_server.iter().enumerate() {
        let held = s.iter().filter(|&&b| b).count();
        assert!(held > KEYS / 5, "server {n} holds only {held} keys");
    }
    // And reads through the proxy find them.
    let gets: Vec<u8> = (0..100)
        .flat_map(|i| format!("get mc:{i}\r\n").into_bytes())
        .collect();
    let values = exchange(mc, &gets, |got| count(got, b"END\r\n") >= 100);
    assert_eq!(count(&values, b"VALUE mc:"), 100);
    let rgets: Vec<u8> = (0..100)
        .flat_map(|i| resp(&["GET", &format!("rs:{i}")]))
        .collect();
    let rvalues = exchange(redis, &rgets, |got| count(got, b"\r\n") >= 200);
    assert_eq!(count(&rvalues, b"$"), 100);
    for server in servers {
        server.shutdown();
    }
}
