//! The facade's `fast-cache-server` binary (the `server` feature): the specification's
//! `cargo run -p fast-cache --features server --bin fast-cache-server` serves clients and stops
//! on `SHUTDOWN`.
#![cfg(feature = "server")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Reads from `stream` until what was read contains `want`.
fn read_until(stream: &mut TcpStream, want: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(want) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed before {want:?}");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Waits for `child` to exit (at most 20 s).
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "fast-cache-server did not stop on SHUTDOWN"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fast_cache_server_serves_and_shuts_down() {
    let bin = env!("CARGO_BIN_EXE_fast-cache-server");
    let help = Command::new(bin).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: fast-cache-server"));

    // Port 0, and the address the server reports: a port probed free and handed over could
    // be taken by another test's server in between.
    let mut child = Command::new(bin)
        .args(["--bind", "127.0.0.1:0", "--threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr: String = rest.split(':').take(2).collect::<Vec<_>>().join(":");
                let _ = tx.send(addr);
            }
        }
    });
    let Ok(addr) = rx.recv_timeout(Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!("fast-cache-server did not report its address");
    };
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
        .unwrap();
    assert_eq!(read_until(&mut stream, "$1\r\nv\r\n"), "+OK\r\n$1\r\nv\r\n");
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        .unwrap();
    assert!(read_until(&mut stream, "lazyfreed_objects").contains("mem_allocator:mimalloc\r\n"));
    stream.write_all(b"*1\r\n$8\r\nSHUTDOWN\r\n").unwrap();
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status}");
}
