//! The memcached rows of `bench-server --memcached`: fc-server's memcached port against
//! Debian's `memcached -t 1` pinned to the same cores, the same closed-loop load speaking
//! memcached's text protocol: `get` and `set` pipelined, and `get` of many keys at once
//! (multiget).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A memcached process for the run.
pub(crate) struct Memcached {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `memcached -t 1` on the server cores (with 4 GiB of memory, so nothing is evicted).
pub(crate) fn start(server_cores: &[usize]) -> anyhow::Result<Memcached> {
    let port = super::free_port()?;
    let before = crate::bench::driver::allowed_cpus();
    super::pin_self(server_cores);
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let mut cmd = Command::new("memcached");
    cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"])
        .args([
            "-t",
            &server_cores.len().to_string(),
            "-m",
            "4096",
            "-c",
            "4096",
        ]);
    if root {
        cmd.args(["-u", "root"]);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting memcached");
    super::pin_self(&before);
    let process = Memcached {
        child: child?,
        addr: format!("127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&process.addr).is_err() {
        if Instant::now() > deadline {
            bail!("memcached did not start on {}", process.addr);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(process)
}

/// Sets keys `0..keys` to `value`-byte values through the memcached protocol.
pub(crate) fn preload(addr: &str, keys: u64, value: usize) -> anyhow::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    let data = vec![b'x'; value];
    let mut batch = Vec::new();
    let mut key = 0;
    while key < keys {
        batch.clear();
        let end = (key + 256).min(keys);
        for n in key..end {
            batch.extend_from_slice(
                format!("set {} 0 0 {value} noreply\r\n", super::key(n)).as_bytes(),
            );
            batch.extend_from_slice(&data);
            batch.extend_from_slice(b"\r\n");
        }
        s.write_all(&batch)?;
        key = end;
    }
    s.write_all(b"mn\r\n")?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 64];
    while !got.ends_with(b"MN\r\n") {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            bail!("memcached preload: closed");
        }
        got.extend_from_slice(&chunk[..n]);
    }
    if got != b"MN\r\n" {
        bail!("memcached preload: {}", String::from_utf8_lossy(&got));
    }
    Ok(())
}

/// A batch of `pipeline` memcached commands (`multiget`: one `get` of `pipeline` keys) with
/// 12-digit key numbers rewritten before each send (as the RESP templates).
pub(crate) fn template(
    set: impl Fn(u64) -> bool,
    value: &[u8],
    pipeline: usize,
    multiget: bool,
    state: &mut u64,
) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut digits = Vec::new();
    if multiget {
        bytes.extend_from_slice(b"get");
        for _ in 0..pipeline {
            bytes.extend_from_slice(b" key:");
            digits.push(bytes.len());
            bytes.extend_from_slice(b"000000000000");
        }
        bytes.extend_from_slice(b"\r\n");
        return (bytes, digits);
    }
    for _ in 0..pipeline {
        if set(super::xorshift(state)) {
            bytes.extend_from_slice(b"set key:");
            digits.push(bytes.len());
            bytes.extend_from_slice(format!("000000000000 0 0 {}\r\n", value.len()).as_bytes());
            bytes.extend_from_slice(value);
            bytes.extend_from_slice(b"\r\n");
        } else {
            bytes.extend_from_slice(b"get key:");
            digits.push(bytes.len());
            bytes.extend_from_slice(b"000000000000\r\n");
        }
    }
    (bytes, digits)
}

/// The complete replies at the start of `buf` (a `get`'s values up to its `END`, a `set`'s
/// `STORED`): their count and the bytes they take; anything else fails with its text.
pub(crate) fn count_replies(buf: &[u8]) -> anyhow::Result<(usize, usize)> {
    let (mut at, mut count) = (0, 0);
    let mut pending = at;
    while let Some(nl) = memchr::memchr(b'\n', &buf[at..]) {
        let line = &buf[at..at + nl + 1];
        let next = at + nl + 1;
        if line.starts_with(b"VALUE ") {
            let len: usize = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.split(' ').nth(3))
                .and_then(|n| n.trim().parse().ok())
                .context("a VALUE line without a length")?;
            if next + len + 2 > buf.len() {
                break;
            }
            at = next + len + 2;
            continue;
        }
        if line == b"END\r\n" || line == b"STORED\r\n" {
            count += 1;
            at = next;
            pending = at;
            continue;
        }
        bail!(
            "unexpected memcached reply {:?}",
            String::from_utf8_lossy(line)
        );
    }
    Ok((count, pending))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_counted_whole() {
        let buf = b"VALUE key:1 0 3\r\nabc\r\nEND\r\nSTORED\r\nEND\r\nVALUE k 0 5\r\nab";
        assert_eq!(count_replies(buf).unwrap(), (3, 40));
        assert!(count_replies(b"SERVER_ERROR out of memory\r\n").is_err());
        let mut state = 9u64;
        let (bytes, digits) = template(|_| false, b"v", 4, true, &mut state);
        assert_eq!(digits.len(), 4);
        assert!(bytes.starts_with(b"get key:000000000000 key:"));
    }
}
