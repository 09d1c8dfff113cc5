//! `cargo xtask diff-redis`: differential testing of fc-server against a real redis-server.
//!
//! Both servers are started on loopback (Debian's `redis-server` is installed when missing),
//! sent the same seeded random sequence of commands from every family the generator knows
//! ([`gen`]: valid and invalid arguments, keys of the wrong type, RESP2 and RESP3 connections,
//! runs inside `MULTI`/`EXEC`), and their replies are compared byte for byte after the
//! normalizations `docs/REDIS-COMPAT.md` documents (and only those):
//!
//! - replies whose order Redis leaves unspecified (set members, hash fields, `KEYS`) are sorted;
//! - doubles are compared by value: fc-server prints the shortest round-trip form (Redis 7.2's
//!   `fpconv_dtoa`) where Debian's Redis 7.0 prints `%.17g`;
//! - the times `PTTL`, `EXPIRETIME` and `PEXPIRETIME` report are compared as present (positive)
//!   or not: the two servers set an expiry at different milliseconds.
//!
//! A mismatch prints the seed, the command's index, the command and both replies; the task fails
//! when any reply differs. Replay one sequence with `--seed`.

mod commands;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::server_bench::{build_fc_server, free_port, which};

#[derive(clap::Args)]
pub(crate) struct DiffRedisArgs {
    /// Commands per seed.
    #[arg(long, default_value_t = 20_000)]
    commands: usize,
    /// First seed; `--seeds` consecutive seeds run, each on flushed servers.
    #[arg(long)]
    seed: Option<u64>,
    /// How many seeds to run.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Families to draw from (default: all). See `--list-families`.
    #[arg(long, value_delimiter = ',')]
    families: Vec<String>,
    /// Print the families and exit.
    #[arg(long)]
    list_families: bool,
    /// Stop after this many mismatches.
    #[arg(long, default_value_t = 20)]
    max_mismatches: usize,
    /// Print every command and both replies.
    #[arg(long)]
    verbose: bool,
    /// A short run (CI): 3,000 commands.
    #[arg(long)]
    quick: bool,
    /// After each command, also compare this key's TYPE and whether it has a TTL (finding the
    /// command that made a later mismatch), and print its contents on both at the end.
    #[arg(long)]
    watch: Option<String>,
    /// fc-server worker threads (keys then span workers: cross-worker composition is compared).
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

/// A started server, stopped on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(mut cmd: Command, port: u16, name: &str) -> anyhow::Result<Server> {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let mut pong = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut pong).is_ok()
                && &pong == b"+PONG\r\n"
            {
                return Ok(server);
            }
        }
        if Instant::now() > deadline {
            bail!("{name} did not answer PING on port {port}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Installs Debian's redis-server when it is missing (as `.ci/run` does).
fn ensure_redis() -> anyhow::Result<()> {
    if which("redis-server") {
        return Ok(());
    }
    eprintln!("diff-redis: installing Debian's redis-server");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "redis-server"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .status();
        if !install() {
            bail!("redis-server is not installed and apt-get could not install it");
        }
    }
    Ok(())
}

pub(crate) fn diff_redis(args: &DiffRedisArgs) -> anyhow::Result<()> {
    if args.list_families {
        for f in commands::FAMILIES {
            println!("{f}");
        }
        return Ok(());
    }
    for f in &args.families {
        if !commands::FAMILIES.contains(&f.as_str()) {
            bail!("unknown family {f:?} (see --list-families)");
        }
    }
    ensure_redis()?;
    let root = crate::bench::report::workspace_root()?;
    let fc_bin: PathBuf = build_fc_server(&root, "diff-redis")?;
    let fc_port = free_port()?;
    let mut fc = Command::new(&fc_bin);
    fc.args(["--bind", &format!("127.0.0.1:{fc_port}")])
        .args(["--threads", &args.threads.to_string()])
        .args(["--save", ""]);
    let fc = start(fc, fc_port, "fc-server")?;
    let redis_port = free_port()?;
    let mut redis = Command::new("redis-server");
    redis
        .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--protected-mode", "no"]);
    let redis = start(redis, redis_port, "redis-server")?;

    let commands = if args.quick { 3_000 } else { args.commands };
    let first = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let families: Vec<&str> = if args.families.is_empty() {
        commands::FAMILIES.to_vec()
    } else {
        args.families.iter().map(String::as_str).collect()
    };
    let mut compared = 0usize;
    let mut mismatches = 0usize;
    for seed in first..first + args.seeds {
        eprintln!("diff-redis: seed {seed}, {commands} commands");
        let run = run_seed(seed, commands, &families, &fc, &redis, args)?;
        compared += run.0;
        mismatches += run.1;
        if mismatches >= args.max_mismatches {
            break;
        }
    }
    println!(
        "diff-redis: {compared} replies compared, {mismatches} mismatches (seeds {first}..{})",
        first + args.seeds
    );
    if mismatches > 0 {
        bail!("{mismatches} replies differ from redis-server");
    }
    Ok(())
}

/// One connection to each server, in the same protocol.
struct Pair {
    fc: Conn,
    redis: Conn,
    resp3: bool,
}

fn run_seed(
    seed: u64,
    commands: usize,
    families: &[&str],
    fc: &Server,
    redis: &Server,
    args: &DiffRedisArgs,
) -> anyhow::Result<(usize, usize)> {
    let mut pairs = Vec::new();
    for resp3 in [false, true] {
        let mut pair = Pair {
            fc: Conn::open(fc.port)?,
            redis: Conn::open(redis.port)?,
            resp3,
        };
        for conn in [&mut pair.fc, &mut pair.redis] {
            conn.call(&[b"FLUSHALL".to_vec()])?;
            if resp3 {
                conn.call(&[b"HELLO".to_vec(), b"3".to_vec()])?;
            }
        }
        pairs.push(pair);
    }
    let mut g = commands::Gen::new(seed, families);
    let mut compared = 0;
    let mut mismatches = 0;
    let mut i = 0;
    let mut diverged = false;
    let mut known = 0usize;
    while i < commands {
        let pair = &mut pairs[usize::from(g.chance(50))];
        // Now and then a transaction of a few commands (compared as their QUEUED and EXEC).
        let batch: Vec<commands::Cmd> = if g.chance(6) {
            let n = 1 + g.below(5) as usize;
            let mut batch = vec![commands::Cmd::plain(vec![b"MULTI".to_vec()])];
            batch.extend((0..n).map(|_| g.command()));
            batch.push(commands::Cmd::plain(vec![b"EXEC".to_vec()]));
            batch
        } else {
            vec![g.command()]
        };
        let in_multi = batch.len() > 1;
        for cmd in &batch {
            i += 1;
            let a = pair.fc.call(&cmd.args)?;
            let b = pair.redis.call(&cmd.args)?;
            compared += 1;
            let norm = if in_multi && cmd.args[0] == b"EXEC" {
                // EXEC's elements are each queued command's reply.
                let specs: Vec<_> = batch[1..batch.len() - 1].iter().map(|c| c.norm).collect();
                (normalize_exec(&a, &specs), normalize_exec(&b, &specs))
            } else {
                (normalize(&a, cmd.norm), normalize(&b, cmd.norm))
            };
            if args.verbose {
                println!(
                    "{i} [{}] {}\n  fc:    {}\n  redis: {}",
                    if pair.resp3 { "resp3" } else { "resp2" },
                    show_args(&cmd.args),
                    show(&a.raw),
                    show(&b.raw)
                );
            }
            if norm.0 != norm.1
                // Compared after the normalizations (an EXEC's unordered replies beside a
                // known difference).
                && let Some(why) = known_difference(&cmd.args, &norm.0, &norm.1)
            {
                known += 1;
                if args.verbose {
                    println!("  known difference: {why}");
                }
            } else if norm.0 != norm.1 {
                mismatches += 1;
                println!(
                    "MISMATCH seed {seed} #{i} [{}]{} {}\n  fc-server:    {}\n  redis-server: {}",
                    if pair.resp3 { "resp3" } else { "resp2" },
                    if in_multi { " (in MULTI)" } else { "" },
                    show_args(&cmd.args),
                    show(&a.raw),
                    show(&b.raw)
                );
                if mismatches >= args.max_mismatches {
                    return Ok((compared, mismatches));
                }
                diverged = true;
            }
        }
        if let Some(key) = &args.watch
            && !diverged
        {
            let state = |c: &mut Conn| -> anyhow::Result<Vec<u8>> {
                let t = c.call(&[b"TYPE".to_vec(), key.as_bytes().to_vec()])?.raw;
                let ttl = c.call(&[b"PTTL".to_vec(), key.as_bytes().to_vec()])?;
                Ok([t, normalize(&ttl, commands::MILLIS_NORM)].concat())
            };
            let (a, b) = (state(&mut pair.fc)?, state(&mut pair.redis)?);
            if a != b {
                println!(
                    "WATCH {key} after #{i} {}: fc-server {}, redis-server {}",
                    batch.last().map(|c| show_args(&c.args)).unwrap_or_default(),
                    show(&a),
                    show(&b)
                );
            }
        }
        // The keyspace's size after each command (or transaction): a write that went astray
        // shows at the command that made it, not at a later read.
        if !diverged {
            let size = |c: &mut Conn| c.call(&[b"DBSIZE".to_vec()]).map(|n| n.raw);
            let (a, b) = (size(&mut pair.fc)?, size(&mut pair.redis)?);
            if a != b {
                mismatches += 1;
                diverged = true;
                let last = batch.last().map(|c| show_args(&c.args)).unwrap_or_default();
                println!(
                    "MISMATCH seed {seed} #{i} keyspace size after {last}{}: fc-server {}, redis-server {}",
                    if in_multi { " (a transaction)" } else { "" },
                    show(&a),
                    show(&b)
                );
                if mismatches >= args.max_mismatches {
                    return Ok((compared, mismatches));
                }
            }
        }
        // After a mismatch the two keyspaces may differ: start both again from empty, so later
        // mismatches are new ones and not the same one seen again.
        if diverged {
            diverged = false;
            for p in &mut pairs {
                for conn in [&mut p.fc, &mut p.redis] {
                    if conn.in_multi_hint() {
                        let _ = conn.call(&[b"DISCARD".to_vec()]);
                    }
                }
            }
            pairs[0].fc.call(&[b"FLUSHALL".to_vec()])?;
            pairs[0].redis.call(&[b"FLUSHALL".to_vec()])?;
            continue;
        }
        // A mismatch inside a transaction can leave one side in MULTI: end both.
        if in_multi {
            for conn in [&mut pair.fc, &mut pair.redis] {
                if conn.in_multi_hint() {
                    let _ = conn.call(&[b"DISCARD".to_vec()]);
                }
            }
        }
    }
    if known > 0 {
        println!(
            "diff-redis: seed {seed}: {known} replies differ as docs/REDIS-COMPAT.md documents"
        );
    }
    if let Some(key) = &args.watch {
        let (a, b) = (
            content(&mut pairs[0].fc, key.as_bytes())?,
            content(&mut pairs[0].redis, key.as_bytes())?,
        );
        println!(
            "WATCH {key} at the end: fc-server {}, redis-server {}",
            show(&a),
            show(&b)
        );
    }
    let (moved, bad) = migrate_check(&mut pairs[0])?;
    println!("diff-redis: seed {seed}: {moved} keys moved by DUMP/RESTORE both ways, {bad} differ");
    Ok((compared + moved, mismatches + bad))
}

/// Moves every key the sequence left with `DUMP`/`RESTORE`, redis-server to fc-server and
/// back, and compares the contents (sorted where order has no meaning): the payloads each
/// writes must read back on the other. A stream's payload carries its whole state (nodes,
/// deleted entries, counters, groups, delivery and seen times), so fc-server's `DUMP` of the
/// restored copy must equal redis-server's `DUMP` of the key byte for byte.
fn migrate_check(pair: &mut Pair) -> anyhow::Result<(usize, usize)> {
    let keys = pair.redis.call(&[b"KEYS".to_vec(), b"*".to_vec()])?;
    let (mut moved, mut bad) = (0, 0);
    for key in keys.items.iter().filter_map(|k| k.data.clone()) {
        let copy = [b"migrated:".as_slice(), &key].concat();
        let want = content(&mut pair.redis, &key)?;
        let stream = want.starts_with(b"+stream\r\n");
        let from_redis = pair.redis.call(&[b"DUMP".to_vec(), key.clone()])?;
        let Some(payload) = from_redis.data else {
            continue;
        };
        let restore = |payload: Vec<u8>| {
            vec![
                b"RESTORE".to_vec(),
                copy.clone(),
                b"0".to_vec(),
                payload,
                b"REPLACE".to_vec(),
            ]
        };
        let r = pair.fc.call(&restore(payload.clone()))?;
        let got = content(&mut pair.fc, &copy)?;
        moved += 1;
        if r.raw != b"+OK\r\n" || got != want {
            bad += 1;
            println!(
                "MISMATCH DUMP of {} on redis-server, RESTORE on fc-server: {} then {}, expected {}",
                show(&key),
                show(&r.raw),
                show(&got),
                show(&want)
            );
        }
        if stream {
            // The same history on both servers: the same payload but for the clock's marks
            // (delivery and seen times), which are zeroed on both sides.
            let own = pair.fc.call(&[b"DUMP".to_vec(), key.clone()])?;
            let ours = own.data.as_deref().and_then(timeless_stream);
            if ours.is_none() || ours != timeless_stream(&payload) {
                bad += 1;
                println!(
                    "MISMATCH DUMP of stream {} (times zeroed): fc-server {}, redis-server {}",
                    show(&key),
                    show(&own.raw),
                    show(&payload)
                );
            }
        }
        let from_fc = pair.fc.call(&[b"DUMP".to_vec(), copy.clone()])?;
        if stream && from_fc.data.as_deref() != Some(&payload[..]) {
            bad += 1;
            println!(
                "MISMATCH DUMP of stream {} on redis-server, RESTORE and DUMP on fc-server: {}, expected {}",
                show(&key),
                show(&from_fc.raw),
                show(&payload)
            );
        }
        let r = pair
            .redis
            .call(&restore(from_fc.data.unwrap_or_default()))?;
        let back = content(&mut pair.redis, &copy)?;
        if r.raw != b"+OK\r\n" || back != want {
            bad += 1;
            println!(
                "MISMATCH DUMP of {} on fc-server, RESTORE on redis-server: {} then {}, expected {}",
                show(&key),
                show(&r.raw),
                show(&back),
                show(&want)
            );
        }
        pair.fc.call(&[b"DEL".to_vec(), copy.clone()])?;
        pair.redis.call(&[b"DEL".to_vec(), copy])?;
    }
    Ok((moved, bad))
}

/// A stream's `DUMP` payload with its delivery and seen times zeroed (`None`: not a stream
/// payload this codec reads).
fn timeless_stream(payload: &[u8]) -> Option<Vec<u8>> {
    use fc_snapshot::rdb::{Limits, Value, dump, restore};
    let Ok(Value::Stream(mut s)) = restore(payload, Limits::default()) else {
        return None;
    };
    for g in &mut s.groups {
        for p in &mut g.pel {
            p.delivery_ms = 0;
        }
        for c in &mut g.consumers {
            c.seen_ms = 0;
            c.active_ms = None;
        }
    }
    Some(dump(&Value::Stream(s)))
}

/// A key's type and value, with set members and hash fields sorted.
fn content(conn: &mut Conn, key: &[u8]) -> anyhow::Result<Vec<u8>> {
    let kind = conn.call(&[b"TYPE".to_vec(), key.to_vec()])?;
    let (args, norm): (&[&[u8]], Norm) = match &kind.raw[..] {
        b"+string\r\n" => (&[b"GET"], Norm::default()),
        b"+list\r\n" => (&[b"LRANGE", b"0", b"-1"], Norm::default()),
        b"+set\r\n" => (
            &[b"SMEMBERS"],
            Norm {
                unordered: true,
                ..Norm::default()
            },
        ),
        b"+hash\r\n" => (
            &[b"HGETALL"],
            Norm {
                pairs: true,
                ..Norm::default()
            },
        ),
        b"+zset\r\n" => (
            &[b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
            Norm {
                doubles: true,
                ..Norm::default()
            },
        ),
        b"+stream\r\n" => (&[b"XRANGE", b"-", b"+"], Norm::default()),
        _ => return Ok(kind.raw),
    };
    let mut call = vec![args[0].to_vec(), key.to_vec()];
    call.extend(args[1..].iter().map(|a| a.to_vec()));
    let reply = conn.call(&call)?;
    Ok([kind.raw, normalize(&reply, norm)].concat())
}

/// A difference docs/REDIS-COMPAT.md documents (fc-server follows Redis 7.2 where the 7.0
/// reference differs): its reason, or `None`.
fn known_difference(args: &[Vec<u8>], fc: &[u8], redis: &[u8]) -> Option<&'static str> {
    let name = args.first()?.to_ascii_lowercase();
    let has = |word: &[u8]| args.iter().any(|a| a.eq_ignore_ascii_case(word));
    if name == b"lpos"
        && has(b"-9223372036854775808")
        && fc.starts_with(b"-ERR value is out of range, value must between")
    {
        return Some("LPOS RANK LONG_MIN is an error since Redis 7.2 (redis#12167)");
    }
    // Redis 7.2 names the command and its id symbol (also inside an EXEC's replies).
    if fc != redis && as_redis_70_unbalanced(fc) == redis {
        return Some(
            "Redis 7.2 names the command and its id symbol in the unbalanced-streams error",
        );
    }
    None
}

/// `fc` with Redis 7.2's unbalanced-streams errors written as Redis 7.0 writes them.
fn as_redis_70_unbalanced(fc: &[u8]) -> Vec<u8> {
    const OLD: &[u8] = b"-ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
    let mut out = fc.to_vec();
    for new in [
        &b"-ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."[..],
        b"-ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
    ] {
        while let Some(at) = out.windows(new.len()).position(|w| w == new) {
            out.splice(at..at + new.len(), OLD.iter().copied());
        }
    }
    out
}

fn show_args(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

fn show(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
        if s.len() > 600 {
            s.push_str("...");
            break;
        }
    }
    s
}

/// A connection speaking RESP, reading whole replies.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Whether the last reply was `+QUEUED`/`+OK` to MULTI (a transaction may be open).
    last_queued: bool,
}

impl Conn {
    fn open(port: u16) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            last_queued: false,
        })
    }

    fn call(&mut self, args: &[Vec<u8>]) -> anyhow::Result<Node> {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&buf)?;
        let node = Node::read(&mut self.reader, 0)?;
        self.last_queued = node.raw == b"+QUEUED\r\n" || node.raw == b"+OK\r\n";
        Ok(node)
    }

    fn in_multi_hint(&self) -> bool {
        self.last_queued
    }
}

/// One reply: its raw bytes, and its parts for normalizing.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    /// The type byte (`+`, `$`, `*`, `%`, ...).
    kind: u8,
    /// The header line without its CRLF (for scalars, the whole reply's text).
    line: Vec<u8>,
    /// A bulk's payload.
    data: Option<Vec<u8>>,
    /// Aggregate elements (a map's keys and values alternate).
    items: Vec<Node>,
    raw: Vec<u8>,
}

impl Node {
    fn read(r: &mut BufReader<TcpStream>, depth: usize) -> anyhow::Result<Self> {
        if depth > 64 {
            bail!("reply nested too deep");
        }
        let mut line = Vec::new();
        r.read_until(b'\n', &mut line)?;
        if line.len() < 3 || !line.ends_with(b"\r\n") {
            bail!("connection closed or bad reply line {:?}", show(&line));
        }
        let mut raw = line.clone();
        line.truncate(line.len() - 2);
        let kind = line[0];
        let body = std::str::from_utf8(&line[1..]).unwrap_or("");
        let mut node = Node {
            kind,
            line: line.clone(),
            data: None,
            items: Vec::new(),
            raw: Vec::new(),
        };
        match kind {
            b'$' | b'=' | b'!' => {
                let len: i64 = body.parse().context("bulk length")?;
                if len >= 0 {
                    let len = usize::try_from(len)?;
                    if len > 64 << 20 {
                        bail!("bulk of {len} bytes");
                    }
                    let mut data = vec![0; len + 2];
                    r.read_exact(&mut data)?;
                    raw.extend_from_slice(&data);
                    data.truncate(len);
                    node.data = Some(data);
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n: i64 = body.parse().context("aggregate length")?;
                let n = if matches!(kind, b'%' | b'|') {
                    n * 2
                } else {
                    n
                };
                for _ in 0..n.max(0) {
                    let item = Self::read(r, depth + 1)?;
                    raw.extend_from_slice(&item.raw);
                    node.items.push(item);
                }
                if kind == b'|' {
                    // An attribute precedes the reply it describes.
                    let next = Self::read(r, depth + 1)?;
                    raw.extend_from_slice(&next.raw);
                    node.items.push(next);
                }
            }
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            _ => bail!("unknown reply type {:?}", show(&raw)),
        }
        node.raw = raw;
        Ok(node)
    }

    /// The bytes compared: the reply re-encoded from its (normalized) parts.
    fn encode(&self, out: &mut Vec<u8>) {
        match self.kind {
            b'$' | b'=' | b'!' => match &self.data {
                Some(d) => {
                    out.extend_from_slice(
                        format!("{}{}\r\n", self.kind as char, d.len()).as_bytes(),
                    );
                    out.extend_from_slice(d);
                    out.extend_from_slice(b"\r\n");
                }
                None => out.extend_from_slice(&self.raw),
            },
            b'*' | b'~' | b'>' | b'%' | b'|' if !self.items.is_empty() => {
                out.extend_from_slice(&self.line);
                out.extend_from_slice(b"\r\n");
                for item in &self.items {
                    item.encode(out);
                }
            }
            _ => {
                out.extend_from_slice(&self.line);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// How a command's reply is normalized before comparing (each documented in
/// `docs/REDIS-COMPAT.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Norm {
    /// Order carries no meaning: sort the aggregate's elements (a map's pairs), one level.
    pub(crate) unordered: bool,
    /// As `unordered`, but elements are pairs of a flat RESP2 array (HGETALL).
    pub(crate) pairs: bool,
    /// Doubles compared by value (bulk strings and RESP3 doubles, at any depth).
    pub(crate) doubles: bool,
    /// A time compared only as positive or not (`PTTL`, `EXPIRETIME`, `PEXPIRETIME`).
    pub(crate) millis: bool,
}

fn normalize(node: &Node, norm: Norm) -> Vec<u8> {
    let mut node = node.clone();
    apply(&mut node, norm);
    let mut out = Vec::new();
    node.encode(&mut out);
    out
}

fn normalize_exec(node: &Node, specs: &[Norm]) -> Vec<u8> {
    let mut node = node.clone();
    if matches!(node.kind, b'*') && node.items.len() == specs.len() {
        for (item, norm) in node.items.iter_mut().zip(specs) {
            apply(item, *norm);
        }
    }
    let mut out = Vec::new();
    node.encode(&mut out);
    out
}

fn apply(node: &mut Node, norm: Norm) {
    if norm.doubles {
        doubles(node);
    }
    if norm.millis
        && node.kind == b':'
        && std::str::from_utf8(&node.line[1..])
            .unwrap_or("")
            .parse::<i64>()
            .is_ok_and(|t| t > 0)
    {
        node.line = b":<positive>".to_vec();
    }
    if norm.unordered || norm.pairs {
        let key = |n: &Node| {
            let mut v = Vec::new();
            n.encode(&mut v);
            v
        };
        let step = if norm.pairs || matches!(node.kind, b'%') {
            2
        } else {
            1
        };
        let mut chunks: Vec<Vec<Node>> = node.items.chunks(step).map(<[Node]>::to_vec).collect();
        chunks.sort_by_key(|c| c.iter().flat_map(key).collect::<Vec<u8>>());
        node.items = chunks.into_iter().flatten().collect();
    }
}

/// Rewrites every double-looking bulk string and RESP3 double as its shortest round-trip form.
fn doubles(node: &mut Node) {
    for item in &mut node.items {
        doubles(item);
    }
    let canon = |text: &[u8]| -> Option<Vec<u8>> {
        let s = std::str::from_utf8(text).ok()?;
        if s.is_empty()
            || s.bytes()
                .any(|b| b.is_ascii_alphabetic() && !b"einfINF".contains(&b))
        {
            return None;
        }
        let v: f64 = s.parse().ok()?;
        Some(if v.is_infinite() {
            if v > 0.0 {
                b"inf".to_vec()
            } else {
                b"-inf".to_vec()
            }
        } else {
            format!("{v:?}").into_bytes()
        })
    };
    match node.kind {
        b'$' => {
            if let Some(c) = node.data.as_deref().and_then(canon) {
                node.data = Some(c);
            }
        }
        b',' => {
            if let Some(c) = canon(&node.line[1..]) {
                node.line = [b",".as_slice(), &c].concat();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Node {
        let mut raw = format!("${}\r\n{s}\r\n", s.len()).into_bytes();
        raw.shrink_to_fit();
        Node {
            kind: b'$',
            line: format!("${}", s.len()).into_bytes(),
            data: Some(s.as_bytes().to_vec()),
            items: Vec::new(),
            raw,
        }
    }

    fn array(items: Vec<Node>) -> Node {
        Node {
            kind: b'*',
            line: format!("*{}", items.len()).into_bytes(),
            data: None,
            raw: Vec::new(),
            items,
        }
    }

    #[test]
    fn doubles_compare_by_value_and_only_when_asked() {
        // Redis 7.0's %.17g and the shortest form of one double compare equal; another
        // double does not.
        let a = bulk("2.2000000000000002");
        let b = bulk("2.2");
        let c = bulk("2.2000000000000006");
        let d = Norm {
            doubles: true,
            ..Norm::default()
        };
        assert_eq!(normalize(&a, d), normalize(&b, d));
        assert_ne!(normalize(&a, d), normalize(&c, d));
        assert_eq!(normalize(&bulk("1e+21"), d), normalize(&bulk("1e21"), d));
        assert_ne!(normalize(&bulk("abc"), d), normalize(&bulk("abd"), d));
        assert_ne!(
            normalize(&bulk("1.5"), Norm::default()),
            normalize(&bulk("1.50"), Norm::default())
        );
    }

    #[test]
    fn unordered_sorts_elements_and_pairs_keep_together() {
        let u = Norm {
            unordered: true,
            ..Norm::default()
        };
        assert_eq!(
            normalize(&array(vec![bulk("b"), bulk("a")]), u),
            normalize(&array(vec![bulk("a"), bulk("b")]), u)
        );
        let p = Norm {
            pairs: true,
            ..Norm::default()
        };
        assert_eq!(
            normalize(
                &array(vec![bulk("f2"), bulk("1"), bulk("f1"), bulk("2")]),
                p
            ),
            normalize(
                &array(vec![bulk("f1"), bulk("2"), bulk("f2"), bulk("1")]),
                p
            )
        );
        assert_ne!(
            normalize(
                &array(vec![bulk("f2"), bulk("2"), bulk("f1"), bulk("1")]),
                p
            ),
            normalize(
                &array(vec![bulk("f1"), bulk("2"), bulk("f2"), bulk("1")]),
                p
            )
        );
    }
}
