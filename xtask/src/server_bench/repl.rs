//! `cargo xtask bench-repl`: what native replication costs a primary and how fast a replica
//! follows and catches up, published to `bench-matrix/<run>/repl.csv` and `summary.md`.
//!
//! Rows:
//! - `throughput`: 64 B `SET`s (the xtask load, pipelines 1 and 16) on a primary with 0, 1
//!   and 2 replicas; operations per second, the primary's CPU (cores), operations per primary
//!   core-second, replication bytes per write, the first replica's CPU per write (all its
//!   threads, over every write of the row); the ratio to 0 replicas in the same run.
//! - `compression`: the same with one replica at pipeline 16, `compression = "none"` and
//!   `"zstd"`: bytes sent per write and the primary's CPU.
//! - `lag`: a probe `SET`s a key on the primary and times until the replica serves it, 2,000
//!   times, at 50% load: `SET`s at pipeline 1 released at a steady rate (every 100 µs, to
//!   whichever connection is free), together half of what the primary took alone at
//!   pipeline 1 in the same run, or `--lag-rate` (its `ratio`: the rate reached ÷ the rate
//!   asked; batches the load fell too far behind for are skipped and counted). Also the lag
//!   counted from the primary's reply to the probe's `SET` (`ack_p50_us`, `ack_p99_us`),
//!   which leaves out the `SET`'s own wait behind the load on the primary
//!   (`probe_set_p99_us`).
//! - `lag-closed`: the same under a closed loop of half the connections (each sends its
//!   next `SET` once the last is answered: the load core is saturated).
//! - Both lag rows again for `redis-server --replicaof` (a primary and a replica on the
//!   same cores, the same load and probe: `server` = `redis`), unless `--redis false`.
//! - `catchup-snapshot`: a replica started empty against a primary holding `--catchup-keys`
//!   64 B keys, until its link is up with every key; the same for `redis-server --replicaof`
//!   (diskless sync, `repl-diskless-sync-delay 0`) in the same run.
//! - `catchup-backlog`: a replica stopped (SIGSTOP) and cut off while the primary takes
//!   `--catchup-keys` writes, then resumed (SIGCONT): until the primary's `WAIT 1` counts it
//!   (from the backlog: no shard snapshot is sent, checked).
//!
//! On a 2-core machine the replicas share a core with the load (`--replica-cores`): the
//! throughput ratio then includes that contention; the primary's own CPU per write is the
//! cleaner figure.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::{
    Load, Mix, Sample, ServerBenchArgs, build_fc_server, free_port, pin_self, preload, run_dir,
    run_load,
};
use crate::bench::report;

#[derive(clap::Args, Debug)]
pub(crate) struct ReplBenchArgs {
    /// Seconds measured per sample.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Samples per throughput row (the median is published).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Keys a replica catches up on.
    #[arg(long, default_value_t = 1_000_000)]
    catchup_keys: u64,
    /// Load connections.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// CPUs of the primary (its worker count).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    server_cores: Vec<usize>,
    /// CPUs of the load.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    load_cores: Vec<usize>,
    /// CPUs of the replicas.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    replica_cores: Vec<usize>,
    /// The `lag` row's paced load in SET/s (default: half of what the primary takes alone at
    /// pipeline 1, measured in the same run).
    #[arg(long)]
    lag_rate: Option<f64>,
    /// Run the throughput and lag rows against `redis-server` and `redis-server --replicaof`
    /// too (the same cores, load and probe); `--redis false` leaves them out.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    redis: bool,
    /// A short run (1 s samples, 1 round, 100k catch-up keys).
    #[arg(long)]
    quick: bool,
    /// Rows to run: any of `throughput`, `compression`, `lag`, `catchup` (default: all).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "throughput,compression,lag,catchup"
    )]
    rows: Vec<String>,
    /// Output directory (default `bench-matrix/<run>`).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A server process, killed when dropped.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) addr: String,
    /// A directory of its own, removed with it.
    dir: Option<PathBuf>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn wait_for_ping(addr: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while query(addr, &["PING"])
        .map(|r| r != b"+PONG\r\n")
        .unwrap_or(true)
    {
        if Instant::now() > deadline {
            bail!("no PONG from {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Starts `program` pinned to `cores`, listening on a free port (`port_args` places it).
fn spawn(
    program: &Path,
    cores: &[usize],
    port_args: impl FnOnce(u16) -> Vec<String>,
    args: &[String],
) -> anyhow::Result<Proc> {
    let port = free_port()?;
    let before = crate::bench::driver::allowed_cpus();
    pin_self(cores);
    let child = Command::new(program)
        .args(port_args(port))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", program.display()));
    pin_self(&before);
    let proc = Proc {
        child: child?,
        addr: format!("127.0.0.1:{port}"),
        dir: None,
    };
    wait_for_ping(&proc.addr)?;
    Ok(proc)
}

pub(super) fn fc(bin: &Path, cores: &[usize], args: &[String]) -> anyhow::Result<Proc> {
    let threads = cores.len().to_string();
    spawn(
        bin,
        cores,
        |port| {
            vec![
                "--bind".into(),
                format!("127.0.0.1:{port}"),
                "--threads".into(),
                threads,
                "--save".into(),
                String::new(),
            ]
        },
        args,
    )
}

/// A redis-server in a directory of its own (removed when it stops): a replica's full sync
/// writes `dump.rdb` there, which a later server started in the same directory would load.
fn redis_server(cores: &[usize], args: &[&str]) -> anyhow::Result<Proc> {
    let dir = std::env::temp_dir().join(format!(
        "fc-bench-repl-redis-{}-{}",
        std::process::id(),
        free_port()?
    ));
    std::fs::create_dir_all(&dir)?;
    let mut args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    args.extend(["--dir".to_string(), dir.display().to_string()]);
    let mut proc = spawn(
        Path::new("redis-server"),
        cores,
        |port| {
            vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--save".into(),
                String::new(),
                "--appendonly".into(),
                "no".into(),
                "--protected-mode".into(),
                "no".into(),
            ]
        },
        &args,
    );
    match &mut proc {
        Ok(proc) => proc.dir = Some(dir),
        Err(_) => {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    proc
}

/// A `redis-server --replicaof` of `primary` on the replica cores (it starts empty and syncs).
fn redis_replica_of(args: &ReplBenchArgs, primary: &Proc) -> anyhow::Result<Proc> {
    let (host, port) = primary.addr.split_once(':').context("address")?;
    redis_server(&args.replica_cores, &["--replicaof", host, port])
}

/// One command on a new connection; its whole reply (simple, error, integer or bulk).
fn query(addr: &str, parts: &[&str]) -> anyhow::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut request = format!("*{}\r\n", parts.len());
    for p in parts {
        let _ = write!(request, "${}\r\n{p}\r\n", p.len());
    }
    s.write_all(request.as_bytes())?;
    let mut reader = BufReader::new(s);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if line.first() == Some(&b'$') {
        let len: i64 = std::str::from_utf8(&line[1..line.len() - 2])?.parse()?;
        if len >= 0 {
            let mut body = vec![0u8; len as usize + 2];
            std::io::Read::read_exact(&mut reader, &mut body)?;
            line.extend_from_slice(&body);
        }
    }
    Ok(line)
}

/// A field of `INFO replication` (or `INFO keyspace`'s db0 keys with `field = "keys"`).
fn info(addr: &str, section: &str, field: &str) -> anyhow::Result<String> {
    let text = String::from_utf8(query(addr, &["INFO", section])?)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string())
}

fn dbsize(addr: &str) -> anyhow::Result<u64> {
    let reply = query(addr, &["DBSIZE"])?;
    Ok(std::str::from_utf8(&reply[1..reply.len() - 2])?.parse()?)
}

fn wait_link(replica: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while info(replica, "replication", "master_link_status")? != "up" {
        if Instant::now() > deadline {
            bail!("{replica} never linked to its primary");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Waits until `replica`'s link has reached the primary's offset `writes` (`slave_repl_offset`:
/// writes for fast-cache, bytes for Redis), then a moment for its workers to apply what they
/// were handed.
fn wait_applied(replica: &str, writes: f64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let offset: f64 = info(replica, "replication", "slave_repl_offset")?
            .parse()
            .unwrap_or(0.0);
        if offset >= writes {
            break;
        }
        if Instant::now() > deadline {
            bail!("{replica} took {offset} of {writes} writes in 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

fn load_args(args: &ReplBenchArgs, connections: usize) -> ServerBenchArgs {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        inner: ServerBenchArgs,
    }
    let mut load = <Wrap as clap::Parser>::parse_from(["bench-repl"]).inner;
    load.duration = args.duration;
    load.warmup = if args.quick { 0.5 } else { 1.0 };
    load.connections = connections;
    load.keys = 100_000;
    load.server_cores.clone_from(&args.server_cores);
    load.load_cores.clone_from(&args.load_cores);
    load
}

/// One CSV row.
#[derive(Default)]
struct Row {
    row: &'static str,
    server: &'static str,
    replicas: usize,
    pipeline: usize,
    compression: &'static str,
    ops: f64,
    cpu: f64,
    bytes_per_op: f64,
    replica_ns_per_op: f64,
    ratio: f64,
    p50_us: f64,
    p99_us: f64,
    /// The lag counted from the primary's reply to the probe's `SET` (not from its sending).
    ack_p50_us: f64,
    ack_p99_us: f64,
    /// The probe's `SET` on the primary, sent to answered.
    set_p99_us: f64,
    seconds: f64,
    keys: u64,
}

/// A primary with `replicas` replicas (linked), `extra` flags on the primary.
fn cluster(
    bin: &Path,
    args: &ReplBenchArgs,
    replicas: usize,
    extra: &[String],
) -> anyhow::Result<(Proc, Vec<Proc>)> {
    let primary = fc(bin, &args.server_cores, extra)?;
    let mut followers = Vec::new();
    for _ in 0..replicas {
        let r = fc(
            bin,
            &args.replica_cores,
            &["--replicaof".into(), primary.addr.clone()],
        )?;
        wait_link(&r.addr)?;
        followers.push(r);
    }
    Ok((primary, followers))
}

fn throughput(
    bin: &Path,
    args: &ReplBenchArgs,
    replicas: usize,
    pipeline: usize,
    compression: &'static str,
) -> anyhow::Result<Row> {
    let extra = vec![
        "--replication-compression".to_string(),
        compression.to_string(),
    ];
    let (primary, followers) = cluster(bin, args, replicas, &extra)?;
    let mut row = throughput_of("fc-server", &primary, &followers, args, pipeline)?;
    if compression != "none" && replicas > 0 {
        row.row = "compression";
    }
    row.compression = compression;
    Ok(row)
}

/// The `throughput` row for `redis-server` with `replicas` `redis-server --replicaof` on the
/// same cores as fast-cache's, under the same load.
fn redis_throughput(args: &ReplBenchArgs, replicas: usize, pipeline: usize) -> anyhow::Result<Row> {
    let primary = redis_server(&args.server_cores, &[])?;
    let mut followers = Vec::new();
    for _ in 0..replicas {
        let replica = redis_replica_of(args, &primary)?;
        wait_link(&replica.addr)?;
        followers.push(replica);
    }
    throughput_of("redis", &primary, &followers, args, pipeline)
}

/// Replicated writes so far: fast-cache's replication offset counts writes; Redis's counts
/// the bytes of its replication stream, so its `SET` calls are counted instead.
fn writes_so_far(server: &str, primary: &str) -> anyhow::Result<f64> {
    if server == "redis" {
        let text = String::from_utf8(query(primary, &["INFO", "commandstats"])?)?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0))
    } else {
        Ok(info(primary, "replication", "master_repl_offset")?
            .parse()
            .unwrap_or(0.0))
    }
}

/// Bytes sent to replicas so far: fast-cache counts them (`repl_sent_bytes`); for Redis, its
/// replication stream's offset times its replicas.
fn repl_bytes_so_far(server: &str, primary: &str, replicas: usize) -> anyhow::Result<f64> {
    let (field, times) = if server == "redis" {
        ("master_repl_offset", replicas as f64)
    } else {
        ("repl_sent_bytes", 1.0)
    };
    Ok(info(primary, "replication", field)?
        .parse::<f64>()
        .unwrap_or(0.0)
        * times)
}

fn throughput_of(
    server: &'static str,
    primary: &Proc,
    followers: &[Proc],
    args: &ReplBenchArgs,
    pipeline: usize,
) -> anyhow::Result<Row> {
    let replicas = followers.len();
    let pid = primary.child.id();
    let replica_cpu0 = followers.first().map(|r| super::cpu_seconds(r.child.id()));
    let load = load_args(args, args.connections);
    let mut samples = Vec::new();
    let sent0 = repl_bytes_so_far(server, &primary.addr, replicas)?;
    let writes0 = writes_so_far(server, &primary.addr)?;
    for _ in 0..args.rounds.max(1) {
        samples.push(run_load(
            (&primary.addr, pid),
            &load,
            Mix::Set,
            64,
            pipeline,
            Load::Resp,
        )?);
    }
    let sent1 = repl_bytes_so_far(server, &primary.addr, replicas)?;
    // Writes over the whole run (warm-ups included).
    let writes = writes_so_far(server, &primary.addr)? - writes0;
    // The first replica's CPU over those writes, once it has applied them (both servers'
    // replicas report the primary's offset they reached in the primary's own unit).
    let replica_ns_per_op = match (followers.first(), replica_cpu0) {
        (Some(replica), Some(cpu0)) if writes > 0.0 => {
            let offset: f64 = info(&primary.addr, "replication", "master_repl_offset")?
                .parse()
                .unwrap_or(0.0);
            wait_applied(&replica.addr, offset)?;
            (super::cpu_seconds(replica.child.id()) - cpu0) * 1e9 / writes
        }
        _ => 0.0,
    };
    let s = Sample::median(&samples);
    Ok(Row {
        row: "throughput",
        server,
        replicas,
        pipeline,
        compression: "none",
        ops: s.ops,
        cpu: s.cpu,
        bytes_per_op: if writes > 0.0 && replicas > 0 {
            (sent1 - sent0) / writes / replicas as f64
        } else {
            0.0
        },
        replica_ns_per_op,
        ..Row::default()
    })
}

/// Replica lag under a load of `rate` SET/s paced over all the connections (`None`: half the
/// connections in a closed loop, each sending its next `SET` once the last is answered).
fn lag(bin: &Path, args: &ReplBenchArgs, rate: Option<f64>) -> anyhow::Result<Row> {
    let (primary, replicas) = cluster(bin, args, 1, &[])?;
    lag_of("fc-server", &primary, &replicas[0], args, rate)
}

/// The `lag` row for `redis-server --replicaof` on the same cores, the same load and the
/// same probe (Redis's replication stream is fed from its one thread: each write is queued
/// to the replica's output buffer as it is applied and written before the thread waits
/// again).
fn redis_lag(args: &ReplBenchArgs, rate: Option<f64>) -> anyhow::Result<Row> {
    let primary = redis_server(&args.server_cores, &[])?;
    let replica = redis_replica_of(args, &primary)?;
    wait_link(&replica.addr)?;
    lag_of("redis", &primary, &replica, args, rate)
}

fn lag_of(
    server: &'static str,
    primary: &Proc,
    replica: &Proc,
    args: &ReplBenchArgs,
    rate: Option<f64>,
) -> anyhow::Result<Row> {
    let pid = primary.child.id();
    let half = match rate {
        Some(rate) => {
            let mut paced = load_args(args, args.connections.max(1));
            paced.rate = Some(rate);
            paced
        }
        None => load_args(args, (args.connections / 2).max(1)),
    };
    let addr = primary.addr.clone();
    let background =
        std::thread::spawn(move || run_load((&addr, pid), &half, Mix::Set, 64, 1, Load::Resp));
    std::thread::sleep(Duration::from_millis(if args.quick { 500 } else { 1000 }));
    // The probe is a client: on the load's cores, not wherever the scheduler puts it (a
    // `perf sched` trace had it on the primary's core).
    let before = crate::bench::driver::allowed_cpus();
    pin_self(&args.load_cores);
    let probed = probe_lag(
        &primary.addr,
        &replica.addr,
        if args.quick { 300 } else { 2000 },
    );
    pin_self(&before);
    let probes = probed?;
    let load = background
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    let pct = |of: fn(&Probe) -> f64, q: f64| {
        let mut v: Vec<f64> = probes.iter().map(of).collect();
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
    };
    let (lag, from_ack, set) = (
        |p: &Probe| p.served_us,
        |p: &Probe| p.served_us - p.acked_us,
        |p: &Probe| p.acked_us,
    );
    if let Some(rate) = rate
        && load.ops < 0.9 * rate
    {
        eprintln!(
            "bench-repl: the paced load reached {:.0} of {rate:.0} SET/s ({:.0}%)",
            load.ops,
            100.0 * load.ops / rate
        );
    }
    Ok(Row {
        row: if rate.is_some() { "lag" } else { "lag-closed" },
        // For the paced row: the load reached ÷ the rate asked.
        ratio: rate.map_or(0.0, |rate| load.ops / rate),
        server,
        replicas: 1,
        pipeline: 1,
        compression: "none",
        ops: load.ops,
        cpu: load.cpu,
        p50_us: pct(lag, 0.5),
        p99_us: pct(lag, 0.99),
        ack_p50_us: pct(from_ack, 0.5),
        ack_p99_us: pct(from_ack, 0.99),
        set_p99_us: pct(set, 0.99),
        ..Row::default()
    })
}

/// One probe's times, in microseconds from its `SET` sent.
struct Probe {
    /// The primary answered the `SET`.
    acked_us: f64,
    /// The replica answered the `EXISTS` that found the key.
    served_us: f64,
}

/// `probes` times: a `SET` on the primary, then `EXISTS` on the replica until it answers 1.
/// The lag is the time from the `SET` sent to that answer; it includes the `SET`'s own wait
/// on the primary, so each probe also keeps when the primary answered (the lag from there
/// leaves out the wait before the write was applied, and any delay of the probe's own thread
/// in reading that reply).
fn probe_lag(primary: &str, replica: &str, probes: usize) -> anyhow::Result<Vec<Probe>> {
    let mut p = BufReader::new(TcpStream::connect(primary)?);
    let mut r = BufReader::new(TcpStream::connect(replica)?);
    let mut lags = Vec::new();
    let mut line = Vec::new();
    for i in 0..probes {
        let key = format!("lag:{i}");
        let set = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\n1\r\n", key.len());
        let get = format!("*2\r\n$6\r\nEXISTS\r\n${}\r\n{key}\r\n", key.len());
        let t0 = Instant::now();
        p.get_mut().write_all(set.as_bytes())?;
        line.clear();
        p.read_until(b'\n', &mut line)?;
        let acked_us = t0.elapsed().as_secs_f64() * 1e6;
        loop {
            r.get_mut().write_all(get.as_bytes())?;
            line.clear();
            r.read_until(b'\n', &mut line)?;
            if line == b":1\r\n" {
                break;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("the replica never served {key}");
            }
        }
        lags.push(Probe {
            acked_us,
            served_us: t0.elapsed().as_secs_f64() * 1e6,
        });
    }
    Ok(lags)
}

fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    while !done() {
        if t0.elapsed() > limit {
            bail!("{what}: not done in {limit:?}");
        }

        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn catchup_snapshot(bin: &Path, args: &ReplBenchArgs, keys: u64) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    // fast-cache.
    let primary = fc(bin, &args.server_cores, &[])?;
    preload(&primary.addr, keys, 64, None)?;
    let t0 = Instant::now();
    let replica = fc(
        bin,
        &args.replica_cores,
        &["--replicaof".into(), primary.addr.clone()],
    )?;
    until(
        "fast-cache snapshot catch-up",
        Duration::from_secs(120),
        || {
            info(&replica.addr, "replication", "master_link_status").is_ok_and(|s| s == "up")
                && dbsize(&replica.addr).is_ok_and(|n| n == keys)
        },
    )?;
    let seconds = t0.elapsed().as_secs_f64();
    rows.push(Row {
        row: "catchup-snapshot",
        server: "fc-server",
        replicas: 1,
        compression: "none",
        seconds,
        keys,
        ..Row::default()
    });
    drop((replica, primary));
    // Redis: the same keys, a replica started empty with --replicaof.
    let primary = redis_server(
        &args.server_cores,
        &[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ],
    )?;
    preload(&primary.addr, keys, 64, None)?;
    let t0 = Instant::now();
    let replica = redis_replica_of(args, &primary)?;
    until("redis full sync", Duration::from_secs(120), || {
        info(&replica.addr, "replication", "master_link_status").is_ok_and(|s| s == "up")
            && dbsize(&replica.addr).is_ok_and(|n| n == keys)
    })?;
    let redis_seconds = t0.elapsed().as_secs_f64();
    rows.push(Row {
        row: "catchup-snapshot",
        server: "redis",
        replicas: 1,
        compression: "none",
        seconds: redis_seconds,
        ratio: redis_seconds / seconds,
        keys,
        ..Row::default()
    });
    Ok(rows)
}

fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()?
        .success();
    if !ok {
        bail!("kill {sig} {pid} failed");
    }
    Ok(())
}

fn catchup_backlog(bin: &Path, args: &ReplBenchArgs, keys: u64) -> anyhow::Result<Row> {
    let dir = std::env::temp_dir().join(format!("fc-bench-repl-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("primary.toml");
    // Room for every write the replica misses (about 90 bytes a 64 B SET).
    std::fs::write(
        &config,
        format!(
            "[replication]\nenabled = true\nbacklog_bytes = {}\n",
            (keys * 256).max(64 << 20)
        ),
    )?;
    let (primary, replicas) = cluster(
        bin,
        args,
        1,
        &["--config".into(), config.display().to_string()],
    )?;
    let replica = &replicas[0];
    let snapshots0 = info(&primary.addr, "replication", "repl_shard_snapshots_sent")?;
    signal(replica.child.id(), "-STOP")?;
    let cut = query(&primary.addr, &["CLIENT", "KILL", "TYPE", "replica"]);
    preload(&primary.addr, keys, 64, None)?;
    let t0 = Instant::now();
    signal(replica.child.id(), "-CONT")?;
    cut?;
    until("backlog catch-up", Duration::from_secs(120), || {
        query(&primary.addr, &["WAIT", "1", "50"]).is_ok_and(|r| r == b":1\r\n")
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    let snapshots1 = info(&primary.addr, "replication", "repl_shard_snapshots_sent")?;
    if snapshots0 != snapshots1 {
        bail!("the backlog catch-up sent snapshots ({snapshots0} → {snapshots1})");
    }
    if dbsize(&replica.addr)? != keys {
        bail!("the replica does not hold the {keys} keys");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Row {
        row: "catchup-backlog",
        server: "fc-server",
        replicas: 1,
        compression: "none",
        seconds,
        keys,
        ..Row::default()
    })
}

pub(crate) fn bench_repl(mut args: ReplBenchArgs) -> anyhow::Result<()> {
    if args.quick {
        args.duration = 1.0;
        args.rounds = 1;
        args.catchup_keys = args.catchup_keys.min(100_000);
    }
    let (root, run_id, out) = run_dir(args.out.as_deref())?;
    let bin = build_fc_server(&root, "bench-repl")?;
    let mut rows: Vec<Row> = Vec::new();
    let wanted = |row: &str| args.rows.iter().any(|r| r == row);
    for known in &args.rows {
        if !["throughput", "compression", "lag", "catchup"].contains(&known.as_str()) {
            bail!("--rows: unknown row {known:?} (throughput, compression, lag, catchup)");
        }
    }
    for pipeline in [1, 16].into_iter().filter(|_| wanted("throughput")) {
        let mut base = 0.0;
        for replicas in 0..=2 {
            eprintln!("bench-repl: SET 64 B, pipeline {pipeline}, {replicas} replicas");
            let mut row = throughput(&bin, &args, replicas, pipeline, "none")?;
            if replicas == 0 {
                base = row.ops;
            }
            row.ratio = row.ops / base;
            rows.push(row);
        }
        // Redis with its replicas on the same cores: its own cost of replication, beside
        // fast-cache's.
        for replicas in (0..=2).filter(|_| args.redis) {
            eprintln!(
                "bench-repl: redis-server, SET 64 B, pipeline {pipeline}, {replicas} replicas"
            );
            let mut row = redis_throughput(&args, replicas, pipeline)?;
            if replicas == 0 {
                base = row.ops;
            }
            row.ratio = row.ops / base;
            rows.push(row);
        }
    }
    // Each section's rows are written as soon as they are measured: a run stopped by a
    // time limit (the device kit's) keeps what it had.
    write(&out, &run_id, &args, &rows)?;
    if wanted("compression") {
        eprintln!("bench-repl: zstd, pipeline 16, 1 replica");
        let mut zstd = throughput(&bin, &args, 1, 16, "zstd")?;
        let base = rows
            .iter()
            .find(|r| r.server == "fc-server" && r.replicas == 1 && r.pipeline == 16)
            .map_or(0.0, |r| r.ops);
        zstd.ratio = if base > 0.0 { zstd.ops / base } else { 0.0 };
        rows.push(zstd);
        write(&out, &run_id, &args, &rows)?;
    }
    if wanted("lag") {
        // 50% load: half of what the primary takes alone at pipeline 1, measured in this run
        // (unless `--lag-rate` names the rate).
        let rate = match args.lag_rate {
            Some(rate) if rate.is_finite() && rate > 0.0 => rate,
            Some(rate) => bail!("--lag-rate {rate}: a positive number of SET/s"),
            None => {
                let alone = match rows
                    .iter()
                    .find(|r| r.server == "fc-server" && r.replicas == 0 && r.pipeline == 1)
                {
                    Some(row) => row.ops,
                    None => {
                        eprintln!(
                            "bench-repl: SET 64 B, pipeline 1, no replica (for the lag's load)"
                        );
                        throughput(&bin, &args, 0, 1, "none")?.ops
                    }
                };
                if alone.is_nan() || alone <= 0.0 {
                    bail!(
                        "the primary alone took {alone} SET/s at pipeline 1: no rate to pace the lag's load at"
                    );
                }
                alone / 2.0
            }
        };
        eprintln!("bench-repl: lag at {rate:.0} SET/s, paced");
        rows.push(lag(&bin, &args, Some(rate))?);
        if args.redis {
            eprintln!("bench-repl: redis-server's lag at {rate:.0} SET/s, paced");
            rows.push(redis_lag(&args, Some(rate))?);
        }
        eprintln!("bench-repl: lag under a closed-loop load");
        rows.push(lag(&bin, &args, None)?);
        if args.redis {
            eprintln!("bench-repl: redis-server's lag under a closed-loop load");
            rows.push(redis_lag(&args, None)?);
        }
        write(&out, &run_id, &args, &rows)?;
    }
    if wanted("catchup") {
        eprintln!(
            "bench-repl: catch-up from snapshots ({} keys)",
            args.catchup_keys
        );
        rows.extend(catchup_snapshot(&bin, &args, args.catchup_keys)?);
        eprintln!(
            "bench-repl: catch-up from the backlog ({} keys)",
            args.catchup_keys
        );
        rows.push(catchup_backlog(&bin, &args, args.catchup_keys)?);
    }
    write(&out, &run_id, &args, &rows)?;
    eprintln!("bench-repl: wrote {}", out.join("repl.csv").display());
    Ok(())
}

fn write(out: &Path, run_id: &str, args: &ReplBenchArgs, rows: &[Row]) -> anyhow::Result<()> {
    let mut csv = String::from(
        "row,server,replicas,pipeline,compression,ops_per_sec,primary_cpu_cores,ops_per_primary_core,repl_bytes_per_write,ratio,p50_us,p99_us,seconds,keys,replica_cpu_ns_per_write,ack_p50_us,ack_p99_us,probe_set_p99_us\n",
    );
    for r in rows {
        let per_core = if r.cpu > 0.0 { r.ops / r.cpu } else { 0.0 };
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{:.0},{:.3},{:.0},{:.1},{:.3},{:.1},{:.1},{:.3},{},{:.0},{:.1},{:.1},{:.1}",
            r.row,
            r.server,
            r.replicas,
            r.pipeline,
            r.compression,
            r.ops,
            r.cpu,
            per_core,
            r.bytes_per_op,
            r.ratio,
            r.p50_us,
            r.p99_us,
            r.seconds,
            r.keys,
            r.replica_ns_per_op,
            r.ack_p50_us,
            r.ack_p99_us,
            r.set_p99_us
        );
    }
    std::fs::write(out.join("repl.csv"), csv)?;
    let mut md = format!(
        "# bench-repl {run_id}\n\nPrimary on CPUs {:?}, load on {:?}, replicas on {:?}; {} connections; {} s samples, median of {}.\n\n",
        args.server_cores,
        args.load_cores,
        args.replica_cores,
        args.connections,
        args.duration,
        args.rounds.max(1)
    );
    md.push_str("| row | server | replicas | pipeline | compression | SET/s | primary CPU | SET per primary core-s | repl bytes/write | replica CPU ns/write | vs 0 replicas |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows
        .iter()
        .filter(|r| r.row == "throughput" || r.row == "compression")
    {
        let per_core = if r.cpu > 0.0 { r.ops / r.cpu } else { 0.0 };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.0} | {:.1} | {:.0} | {:.2}x |",
            r.row,
            r.server,
            r.replicas,
            r.pipeline,
            r.compression,
            r.ops,
            r.cpu,
            per_core,
            r.bytes_per_op,
            r.replica_ns_per_op,
            r.ratio
        );
    }
    let lags: Vec<&Row> = rows.iter().filter(|r| r.row.starts_with("lag")).collect();
    if !lags.is_empty() {
        let _ = writeln!(
            md,
            "\nLag: a probe `SET`s a key on the primary and times until the replica serves it. \
             `lag`: {} SET/s asked ({}), paced over {} connections at pipeline 1. \
             `lag-closed`: a closed loop of {} connections at pipeline 1. \
             \"From the reply\": counted from the primary's answer to the probe's `SET`.\n",
            lags.iter()
                .find(|r| r.row == "lag")
                .map_or(0.0, |r| if r.ratio > 0.0 { r.ops / r.ratio } else { 0.0 })
                .round(),
            if args.lag_rate.is_some() {
                "`--lag-rate`"
            } else {
                "50% load"
            },
            args.connections.max(1),
            (args.connections / 2).max(1),
        );
        md.push_str(
            "| row | server | SET/s reached | p50 µs | p99 µs | from the reply p50 | from the reply p99 | probe SET p99 | p99: redis ÷ fast-cache |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &lags {
            let versus = lags
                .iter()
                .find(|f| f.row == r.row && f.server == "fc-server")
                .filter(|f| r.server == "redis" && f.p99_us > 0.0)
                .map_or(String::new(), |f| format!("{:.2}x", r.p99_us / f.p99_us));
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {versus} |",
                r.row,
                r.server,
                r.ops,
                r.p50_us,
                r.p99_us,
                r.ack_p50_us,
                r.ack_p99_us,
                r.set_p99_us
            );
        }
    }
    let catchups: Vec<&Row> = rows
        .iter()
        .filter(|r| r.row.starts_with("catchup"))
        .collect();
    if !catchups.is_empty() {
        md.push_str(
            "\n| catch-up | server | keys | seconds | redis ÷ fast-cache |\n|---|---|---|---|---|\n",
        );
    }
    for r in catchups {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.3} | {} |",
            r.row,
            r.server,
            r.keys,
            r.seconds,
            if r.ratio > 0.0 {
                format!("{:.2}x", r.ratio)
            } else {
                String::new()
            }
        );
    }
    std::fs::write(out.join("summary.md"), md)?;
    report::write_meta(out, run_id, &report::command_line(), 0)?;
    Ok(())
}
