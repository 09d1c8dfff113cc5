//! Tails a fast-cache server's WAL TCP export (`[persistence.tcp_export]`, `mode = "listen"`):
//! authenticates, reads each log's segment header, then decodes every `FCW2` frame with
//! fc-wal's decoder and prints its mutations, and any gap (frames the export dropped because
//! this reader fell behind, with `backpressure_on_full = false`) as a jump in a log's
//! sequence numbers.
//!
//! ```sh
//! cargo run -p fast-cache --example wal-tail -- 127.0.0.1:7630 replace-me [--count N]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use fast_cache::wal::{FrameRead, Record, SEGMENT_HEADER_LEN, SegmentHeader, decode_frame};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args.first().map_or("127.0.0.1:7630", String::as_str);
    let token = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map_or("", String::as_str);
    let limit: Option<u64> = args
        .iter()
        .position(|a| a == "--count")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(format!("AUTH {token}\r\n").as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.trim_end() != "+OK" {
        return Err(format!("refused: {}", line.trim_end()).into());
    }
    // One segment header per log: its next frame's sequence number.
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    reader.read_exact(&mut header)?;
    let first = SegmentHeader::decode(&header).ok_or("not a segment header")?;
    let logs = first.logs.max(1) as usize;
    let mut expected = vec![first.first_seq];
    for _ in 1..logs {
        reader.read_exact(&mut header)?;
        let h = SegmentHeader::decode(&header).ok_or("not a segment header")?;
        expected.push(h.first_seq);
    }
    println!(
        "tailing {addr}: {logs} logs of a {}-shard store, next sequences {expected:?}",
        first.shard_count
    );
    let shared = first.logs > 0;
    let (mut buf, mut seen) = (Vec::new(), 0u64);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = reader.read(&mut chunk)?;
        if n == 0 {
            println!("the server closed the export");
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        loop {
            let (seq, payload, batch, shard, len) = match decode_frame(&buf[at..]) {
                FrameRead::Frame {
                    seq,
                    payload,
                    batch,
                    shard,
                    len,
                } => (seq, payload, batch, shard, len),
                FrameRead::Incomplete => break,
                FrameRead::Bad(reason) => return Err(format!("bad frame: {reason}").into()),
            };
            let records: Vec<(Option<u16>, Record)> = if batch {
                Record::decode_batch(payload, shared)?
            } else {
                vec![(shard, Record::decode(payload)?)]
            };
            // A shared log's frames name their shards; shard s writes to log s % logs.
            let log = records
                .first()
                .and_then(|(s, _)| *s)
                .map_or(0, |s| usize::from(s) % logs);
            if seq > expected[log] {
                println!(
                    "-- gap in log {log}: sequences {}..{} were dropped by the export",
                    expected[log],
                    seq - 1
                );
            }
            expected[log] = seq + records.len() as u64;
            for (i, (shard, record)) in records.iter().enumerate() {
                println!(
                    "log {log} seq {} shard {}: {}",
                    seq + i as u64,
                    shard.map_or(-1, i32::from),
                    describe(record)
                );
            }
            seen += records.len() as u64;
            at += len;
            if limit.is_some_and(|l| seen >= l) {
                return Ok(());
            }
        }
        buf.drain(..at);
    }
}

fn describe(record: &Record) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match record {
        Record::Set { key, value, .. } => format!("SET {} ({} bytes)", text(key), value.len()),
        Record::Delete { key } => format!("DEL {}", text(key)),
        Record::Expired { key } => format!("EXPIRED {}", text(key)),
        Record::Evicted { key } => format!("EVICTED {}", text(key)),
        Record::Expire { key, expire_at_ms } => format!("EXPIRE {} at {expire_at_ms}", text(key)),
        Record::TxBegin { id } => format!("BEGIN {id}"),
        Record::TxEnd { id } => format!("END {id}"),
        Record::ReplMark { primary, seq } => format!("REPLICA AT {} {seq}", text(primary)),
        other => format!("{other:?}"),
    }
}
