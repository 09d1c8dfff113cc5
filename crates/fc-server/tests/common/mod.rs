//! Helpers shared by the server's integration tests: an in-process server on an ephemeral
//! port, a redis-rs client, and raw-socket exchanges.

#![allow(dead_code, reason = "each test binary uses a subset")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use fc_server::{Server, ServerConfig, ServerHandle};

/// Starts `config` on an ephemeral port. With `FAST_CACHE_USE_MONOIO=1` in the environment
/// (and `FAST_CACHE_MONOIO_SAFE_WRITER`), on the monoio runtime: the whole suite runs on it
/// with `cargo xtask test-monoio` (the fc-server binary the soak tests start reads the same
/// variables).
pub(crate) fn start(config: ServerConfig) -> ServerHandle {
    Server::start(ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        runtime: runtime_from_env(),
        ..config
    })
    .expect("server starts")
}

/// The runtime `FAST_CACHE_USE_MONOIO` and `FAST_CACHE_MONOIO_SAFE_WRITER` ask for.
pub(crate) fn runtime_from_env() -> fc_server::config::Runtime {
    use fc_server::config::{MonoioWriter, Runtime};
    let on = std::env::var("FAST_CACHE_USE_MONOIO")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
    if !on {
        return Runtime::Tokio;
    }
    Runtime::Monoio(
        match std::env::var("FAST_CACHE_MONOIO_SAFE_WRITER").as_deref() {
            Ok("split") => MonoioWriter::Split,
            Ok("writev") => MonoioWriter::Writev,
            Ok("inline") | Err(_) => MonoioWriter::Inline,
            Ok(other) => panic!("FAST_CACHE_MONOIO_SAFE_WRITER={other}: inline, split or writev"),
        },
    )
}

pub(crate) fn two_workers() -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        ..ServerConfig::default()
    })
}

pub(crate) fn client(server: &ServerHandle) -> redis::Connection {
    redis::Client::open(format!("redis://{}/", server.addr()))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Sends raw bytes on a new connection, half-closes it, and reads every reply until the server
/// closes it in turn (it answers what it read, then sees the end of input): the replies are
/// complete however long the machine stalls, not whatever came before a pause.
pub(crate) fn raw(server: &ServerHandle, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).unwrap();
    // A server that answers and closes at once (`maxclients`, a protocol error) may have
    // closed already: the half-close then fails, and the reply is still there to read.
    let _ = s.shutdown(std::net::Shutdown::Write);
    read_all(&mut s)
}

pub(crate) fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

pub(crate) fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// A connection that sends a command now and reads its reply later.
pub(crate) struct Raw(pub(crate) TcpStream);

impl Raw {
    pub(crate) fn open(addr: impl std::net::ToSocketAddrs) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Self(s)
    }

    pub(crate) fn send(&mut self, args: &[&str]) {
        self.0.write_all(&encode(args)).unwrap();
    }

    /// Reads exactly `expected.len()` bytes and compares them.
    pub(crate) fn expect(&mut self, expected: &[u8]) {
        let mut buf = vec![0u8; expected.len()];
        self.0.read_exact(&mut buf).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&buf),
            String::from_utf8_lossy(expected)
        );
    }

    /// Whether anything arrives within `ms`.
    pub(crate) fn silent_for(&mut self, ms: u64) -> bool {
        self.0
            .set_read_timeout(Some(Duration::from_millis(ms)))
            .unwrap();
        let mut b = [0u8; 1];
        let silent = self.0.read(&mut b).is_err();
        self.0
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        silent
    }
}

/// An integer field of an `INFO` section.
pub(crate) fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Reads one whole reply (RESP2 or RESP3) off `r`.
pub(crate) fn read_reply(r: &mut BufReader<TcpStream>, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).unwrap();
    out.extend_from_slice(&line);
    let body = std::str::from_utf8(&line[1..line.len() - 2]).unwrap();
    match line[0] {
        b'$' | b'=' | b'!' => {
            if let Ok(n) = usize::try_from(body.parse::<i64>().unwrap()) {
                let mut data = vec![0; n + 2];
                r.read_exact(&mut data).unwrap();
                out.extend_from_slice(&data);
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = body.parse::<i64>().unwrap().max(0) as usize;
            let n = if line[0] == b'%' { 2 * n } else { n };
            for _ in 0..n {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

/// Sends each `(command, reply)` case on one connection to `addr` (the command split on
/// spaces) and asserts the reply's exact bytes; a `HELLO` case switches the protocol and its
/// reply is read, not compared.
pub(crate) fn expect_replies<'a>(
    addr: std::net::SocketAddr,
    cases: impl IntoIterator<Item = &'a (&'a str, &'a [u8])>,
) {
    let stream = TcpStream::connect(addr).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    for (line, want) in cases {
        let args: Vec<&str> = line.split(' ').collect();
        w.write_all(&encode(&args)).unwrap();
        let mut got = Vec::new();
        read_reply(&mut r, &mut got);
        if args[0].eq_ignore_ascii_case("hello") {
            continue;
        }
        assert_eq!(
            got.escape_ascii().to_string(),
            want.escape_ascii().to_string(),
            "{line}"
        );
    }
}

/// The real `fc-server` binary, started with `args`, killed (SIGKILL) when dropped: the soak
/// tests kill it at random moments and restart it.
pub(crate) struct Binary {
    pub(crate) child: std::process::Child,
    /// The address it reported listening on.
    pub(crate) addr: String,
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with `args` and waits (up to 60 s) for the address it listens on.
pub(crate) fn spawn_binary<I, S>(args: I) -> Binary
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    try_spawn_binary(args).unwrap_or_else(|e| panic!("fc-server failed to start: {e}"))
}

/// [`spawn_binary`], returning why it did not start instead of panicking: the error line it
/// printed (a port in use, a bad configuration), or that it exited without one.
pub(crate) fn try_spawn_binary<I, S>(args: I) -> Result<Binary, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_fc-server"))
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("fc-server starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split(':').take(2).collect::<Vec<_>>().join(":");
                let _ = tx.send(Ok(addr));
            } else if line.contains("cannot load") || line.contains("Error") {
                let _ = tx.send(Err(line));
            }
        }
    });
    let failed = |child: &mut std::process::Child, why: String| {
        let _ = child.kill();
        let _ = child.wait();
        Err(why)
    };
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(addr)) => Ok(Binary { child, addr }),
        Ok(Err(line)) => failed(&mut child, line),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(format!("exited ({status}) without reporting an address"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            failed(&mut child, "did not report its address in 60 s".into())
        }
    }
}

/// A port nothing listened on a moment ago.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `start` with a free port, again with another one when it fails (up to five times):
/// for a process that must be told its port before it starts (a configuration file, a proxy),
/// since another test's server binding port 0 can take the port between the probe and the
/// process's bind. `start` must fail, not serve someone else's socket, when its port was
/// taken: a child that exited, or that reports another address.
pub(crate) fn on_a_free_port<T>(mut start: impl FnMut(u16) -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..5 {
        match start(free_port()) {
            Ok(started) => return started,
            Err(why) => last = why,
        }
    }
    panic!("five free ports in a row did not work; the last: {last}")
}

/// A connection to `addr`, retried for up to 20 s (a server just restarted), with a 20 s
/// read timeout.
pub(crate) fn connect_retrying(addr: &str) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.get_connection_with_timeout(Duration::from_secs(2)) {
            Ok(c) => {
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return c;
            }
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("cannot connect to {addr}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}
