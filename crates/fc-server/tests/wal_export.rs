//! The WAL TCP export: authenticated subscribers get each log's segment header and then the
//! same `FCW2` frames the segments get, decoded here with fc-wal; wrong tokens and one
//! subscriber too many are refused; a subscriber that stops reading loses frames from the
//! export only (counted, seen as a sequence jump) while every write is kept; with
//! `backpressure_on_full` nothing is lost; `connect` mode reaches a collector.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::{client, info_field, start};
use fc_server::{PersistenceConfig, ServerConfig, ServerHandle, TcpExportConfig};
use fc_wal::{FrameRead, Record, SEGMENT_HEADER_LEN, SegmentHeader, decode_frame};
use redis::Commands;

fn server(dir: &std::path::Path, export: TcpExportConfig) -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        persistence: PersistenceConfig {
            data_dir: Some(dir.to_path_buf()),
            save: Vec::new(),
            tcp_export: Some(export),
            ..PersistenceConfig::default()
        },
        ..ServerConfig::default()
    })
}

fn listen(capacity: usize, backpressure: bool) -> TcpExportConfig {
    TcpExportConfig {
        listen: true,
        addr: "127.0.0.1:0".parse().unwrap(),
        auth_token: Some("s3cret".into()),
        channel_capacity: capacity,
        max_subscribers: 2,
        backpressure_on_full: backpressure,
    }
}

/// A subscriber: authenticated, its segment headers read.
struct Tail {
    reader: BufReader<TcpStream>,
    /// Per log, the next sequence expected.
    expected: Vec<u64>,
    logs: usize,
    buf: Vec<u8>,
    /// Sequences found missing (gaps), in all.
    missing: u64,
}

fn hello(addr: SocketAddr, token: &str) -> (BufReader<TcpStream>, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(format!("AUTH {token}\r\n").as_bytes())
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    (reader, line)
}

impl Tail {
    fn open(reader: BufReader<TcpStream>) -> Self {
        let mut tail = Self {
            reader,
            expected: Vec::new(),
            logs: 0,
            buf: Vec::new(),
            missing: 0,
        };
        let mut header = [0u8; SEGMENT_HEADER_LEN];
        tail.reader.read_exact(&mut header).unwrap();
        let first = SegmentHeader::decode(&header).expect("a segment header");
        tail.logs = first.logs.max(1) as usize;
        tail.expected.push(first.first_seq);
        for _ in 1..tail.logs {
            tail.reader.read_exact(&mut header).unwrap();
            tail.expected
                .push(SegmentHeader::decode(&header).unwrap().first_seq);
        }
        tail
    }

    /// Reads until `want` mutations were decoded (or the stream goes quiet); returns them.
    fn mutations(&mut self, want: usize) -> Vec<Record> {
        let mut out = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        while out.len() < want {
            let Ok(n) = self.reader.read(&mut chunk) else {
                break;
            };
            if n == 0 {
                break;
            }
            self.buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            while let FrameRead::Frame {
                seq,
                payload,
                batch,
                len,
                ..
            } = decode_frame(&self.buf[at..])
            {
                assert!(batch, "the server writes batch frames");
                let records = Record::decode_batch(payload, true).unwrap();
                let log = usize::from(records[0].0.unwrap()) % self.logs;
                assert!(seq >= self.expected[log], "log {log} went back");
                self.missing += seq - self.expected[log];
                self.expected[log] = seq + records.len() as u64;
                out.extend(records.into_iter().map(|(_, r)| r));
                at += len;
            }
            self.buf.drain(..at);
        }
        out
    }
}

#[test]
fn subscribers_get_the_logs_frames_and_bad_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), listen(1024, false));
    let addr = server.wal_export_addr().unwrap();
    let mut con = client(&server);
    let (_, refused) = hello(addr, "wrong");
    assert_eq!(refused, "-ERR invalid token\r\n");
    let (reader, ok) = hello(addr, "s3cret");
    assert_eq!(ok, "+OK\r\n");
    let mut tail = Tail::open(reader);
    assert_eq!(tail.logs, 2, "one log per worker");
    let _: () = con.set("greeting", "hello").unwrap();
    let _: i64 = con.rpush("list", &["a", "b"]).unwrap();
    let _: i64 = con.del("greeting").unwrap();
    let got = tail.mutations(3);
    assert_eq!(
        got[0],
        Record::Set {
            key: b"greeting".to_vec(),
            value: b"hello".to_vec(),
            expire_at_ms: None
        }
    );
    assert!(matches!(&got[1], Record::ListPush { key, .. } if key == b"list"));
    assert_eq!(
        got[2],
        Record::Delete {
            key: b"greeting".to_vec()
        }
    );
    assert_eq!(tail.missing, 0);
    // A second subscriber fits; a third is one too many.
    let (second, ok) = hello(addr, "s3cret");
    assert_eq!(ok, "+OK\r\n");
    let _second = Tail::open(second);
    let (_, third) = hello(addr, "s3cret");
    assert_eq!(third, "-ERR max subscribers reached\r\n");
    assert_eq!(info_field(&mut con, "persistence", "wal_export_refused"), 2);
    assert!(info_field(&mut con, "persistence", "wal_export_frames_sent") >= 3);
}

#[test]
fn a_subscriber_that_stops_reading_loses_frames_from_the_export_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), listen(2, false));
    let addr = server.wal_export_addr().unwrap();
    let (reader, _) = hello(addr, "s3cret");
    let mut tail = Tail::open(reader);
    // It reads nothing while 24 MiB are written.
    let mut con = client(&server);
    let value = vec![b'x'; 64 << 10];
    let mut pipe = redis::pipe();
    for i in 0..384 {
        pipe.set(format!("big:{i}"), &value).ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    // Every write was kept.
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 384);
    let dropped = info_field(&mut con, "persistence", "wal_export_frames_dropped");
    assert!(dropped > 0, "a full queue dropped frames from the export");
    // What the subscriber gets shows the loss as a jump in a log's sequence numbers, once a
    // frame after the loss reaches it: it reads on while small writes follow (each may be
    // dropped too while its queue is still full), until one of them arrives.
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        loop {
            let batch = tail.mutations(1);
            if batch.is_empty() {
                return (got, tail.missing, false);
            }
            got += batch.len();
            if batch
                .iter()
                .any(|r| matches!(r, Record::Set { key, .. } if key.starts_with(b"after")))
            {
                return (got, tail.missing, true);
            }
        }
    });
    for i in 0..200 {
        let _: () = con.set(format!("after:{i}"), "1").unwrap();
        if reader.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (got, missing, after) = reader.join().unwrap();
    assert!(after, "a write after the loss reached the subscriber");
    assert!(got < 384 + 200);
    assert!(missing > 0, "the gap is visible");
    // The log on disk has everything: a restart loads every key.
    let keys_now: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    server.shutdown();
    let again = server_without_export(dir.path());
    let mut con = client(&again);
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, keys_now);
    assert!(keys > 384);
}

fn server_without_export(dir: &std::path::Path) -> ServerHandle {
    start(ServerConfig {
        shards: 8,
        threads: 2,
        persistence: PersistenceConfig {
            data_dir: Some(dir.to_path_buf()),
            save: Vec::new(),
            ..PersistenceConfig::default()
        },
        ..ServerConfig::default()
    })
}

#[test]
fn with_backpressure_a_slow_subscriber_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), listen(1, true));
    let addr = server.wal_export_addr().unwrap();
    let (reader, _) = hello(addr, "s3cret");
    let mut tail = Tail::open(reader);
    let reading = std::thread::spawn(move || {
        let got = tail.mutations(300);
        (got.len(), tail.missing)
    });
    let mut con = client(&server);
    let value = vec![b'y'; 16 << 10];
    for i in 0..300 {
        let _: () = con.set(format!("k:{i}"), &value).unwrap();
    }
    let (got, missing) = reading.join().unwrap();
    assert_eq!((got, missing), (300, 0));
    assert_eq!(
        info_field(&mut con, "persistence", "wal_export_frames_dropped"),
        0
    );
}

#[test]
fn connect_mode_streams_to_a_collector() {
    let collector = TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        dir.path(),
        TcpExportConfig {
            listen: false,
            addr: collector.local_addr().unwrap(),
            ..listen(64, false)
        },
    );
    let (stream, _) = collector.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "AUTH s3cret\r\n");
    let mut tail = Tail::open(reader);
    let mut con = client(&server);
    let _: () = con.set("collected", "1").unwrap();
    let got = tail.mutations(1);
    assert!(matches!(&got[0], Record::Set { key, .. } if key == b"collected"));
}

#[test]
fn the_specifications_export_section_loads_and_needs_a_data_dir() {
    let toml = r#"
        [persistence]
        data_dir = "/tmp/fc-data"
        [persistence.tcp_export]
        enabled = true
        mode = "listen"
        addr = "127.0.0.1:7630"
        auth_token = "replace-me"
        channel_capacity = 16384
        max_subscribers = 64
        backpressure_on_full = false
    "#;
    let config = fc_server::config::FastCacheConfig::from_toml_str(toml)
        .unwrap()
        .server_config()
        .unwrap();
    let export = config.persistence.tcp_export.unwrap();
    assert!(export.listen);
    assert_eq!(export.addr, "127.0.0.1:7630".parse().unwrap());
    assert_eq!(export.channel_capacity, 16_384);
    let bad = fc_server::config::FastCacheConfig::from_toml_str(
        "[persistence.tcp_export]\nenabled = true\nmode = \"broadcast\"\n",
    )
    .unwrap()
    .server_config()
    .unwrap_err()
    .to_string();
    for field in [
        "persistence.tcp_export.mode",
        "persistence.tcp_export.addr",
        "persistence.tcp_export.enabled",
    ] {
        assert!(bad.contains(field), "{field} in {bad}");
    }
}

/// With no subscriber the tap copies nothing; one that joins while writes flow starts exactly
/// where each log is: its first frame is the one its segment header names (no older frame,
/// none skipped), whichever moment it comes in.
#[test]
fn a_subscriber_joining_mid_stream_starts_where_the_logs_are() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), listen(4096, false));
    let addr = server.wal_export_addr().unwrap();
    let mut con = client(&server);
    for i in 0..500 {
        let _: () = con.set(format!("before{i}"), i).unwrap();
    }
    assert_eq!(
        info_field(&mut con, "persistence", "wal_export_frames_sent"),
        0
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, mut con) = (Arc::clone(&stop), client(&server));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _: () = con.set(format!("during{}", i % 1000), i).unwrap();
                i += 1;
            }
        })
    };
    // Several subscribers, one after another, each joining mid-stream.
    for round in 0..10 {
        std::thread::sleep(Duration::from_millis(30));
        let (reader, ok) = hello(addr, "s3cret");
        assert_eq!(ok, "+OK\r\n");
        let mut tail = Tail::open(reader);
        // Frames before the header's sequence would fail `Tail`'s "went back" check.
        let got = tail.mutations(200);
        assert!(got.len() >= 200, "round {round}: {} mutations", got.len());
        assert_eq!(tail.missing, 0, "round {round}: frames skipped");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}
