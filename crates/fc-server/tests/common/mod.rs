//! Helpers shared by the server's integration tests: an in-process server on an ephemeral
//! port, a redis-rs client, and raw-socket exchanges.

#![allow(dead_code, reason = "each test binary uses a subset")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use fc_server::{Server, ServerConfig, ServerHandle};

pub(crate) fn start(config: ServerConfig) -> ServerHandle {
    Server::start(ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..config
    })
    .expect("server starts")
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

/// Sends raw bytes on a new connection and reads what arrives within a short time.
pub(crate) fn raw(server: &ServerHandle, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.write_all(request).unwrap();
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
