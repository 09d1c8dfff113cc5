//! `cargo xtask bench-server`: fc-server against redis-server, same settings, same pinning, same
//! load — writes `bench-matrix/<run-id>/server.csv`, `server-summary.md` and `meta.json`.
//!
//! Each server runs as its own process pinned to `--server-cores` (the xtask sets its own
//! affinity before spawning, and the child inherits it); the load runs on `--load-cores`. Two
//! loads drive each shape: this xtask's own closed-loop generator (`load: xtask`: a pinned
//! single-threaded tokio runtime, one task per connection, each writing a batch of `pipeline`
//! commands and reading every reply before the next batch; latency is the batch's round trip)
//! and, when installed, `redis-benchmark` (`load: redis-benchmark`, GET and SET only). Keys are
//! `key:NNNNNNNNNNNN` (16 bytes, uniform over `--keys`, preloaded), as `redis-benchmark -r`
//! names them. `--persistence` adds the durability rows: fc-server with `--data-dir` and Redis
//! with `appendonly yes`, each under `appendfsync everysec` and `always`.
//!
//! The scripting rows (`--scripts`, both by default; `--scripts none`: neither) are the same
//! closed loop at the same pipeline depths with `EVALSHA` in place of GET/SET (xtask load
//! only): `evalsha-get` runs `return redis.call('GET', KEYS[1])` over the preloaded keys;
//! `evalsha-rmw` runs a two-key read-modify-write (`INCRBY` one key, `SET` the other to the
//! result) on `{user:N}:counter` and `{user:N}:last`, whose hash tag puts both on one shard.
//! Each server gets the scripts with `SCRIPT LOAD` (its SHA1 checked) before they are measured,
//! and every reply of theirs must be an integer or a bulk string: an error reply fails the run.
//! Every row's replies are checked so (GET: bulk, SET: `+OK`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::pki_types::pem::PemObject;

use crate::bench::report;

mod memcached;
mod patterns;
pub(crate) mod repl;
pub(crate) mod runtime;

#[derive(clap::Args, Debug)]
pub(crate) struct ServerBenchArgs {
    /// Seconds measured per shape and server in each round.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Rounds per shape. Each round measures every server once, taking turns first (a slow
    /// phase of a shared or virtual machine then lands on both), and a row reports the median
    /// of its rounds' throughputs, latencies and CPU (each taken separately); every round's
    /// sample is kept in `server-rounds.csv`.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Value sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "64,4096")]
    values: Vec<usize>,
    /// Mixes: get, set, 80-20.
    #[arg(long, value_delimiter = ',', default_value = "get,set,80-20")]
    mixes: Vec<String>,
    /// Scripting rows, at every pipeline depth: evalsha-get (a one-line script GETting one
    /// preloaded key, at every value size), evalsha-rmw (INCRBY one key and SET a second of
    /// the same hash tag, at the first value size only: its values are counters); `none`: no
    /// scripting rows.
    #[arg(long, value_delimiter = ',', default_value = "evalsha-get,evalsha-rmw")]
    scripts: Vec<String>,
    /// Commands per batch.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    pipelines: Vec<usize>,
    /// Client connections.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Paced load: this many commands per second over all connections, the batches released
    /// at a steady rate (every 100 µs, to whichever connection is free: open loop, as
    /// traffic at a given load arrives) instead of each connection sending its next as soon
    /// as the last is answered. Set by `bench-repl`'s lag row, not a flag.
    #[arg(skip)]
    pub(crate) rate: Option<f64>,
    /// The CA the `xtask-tls` load trusts (the run's certificate, `--tls`).
    #[arg(skip)]
    tls_ca: Option<PathBuf>,
    /// Distinct keys (preloaded).
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Servers: fc-server, redis (skipped with a note when redis-server is not installed).
    #[arg(long, value_delimiter = ',', default_value = "fc-server,redis")]
    servers: Vec<String>,
    /// Durability: none (in memory), everysec, always.
    #[arg(long, value_delimiter = ',', default_value = "none")]
    fsync: Vec<String>,
    /// The durability rows: `--fsync none,everysec,always --mixes set --values 64
    /// --pipelines 1,16` unless given otherwise.
    #[arg(long)]
    persistence: bool,
    /// CPUs the server runs on (fc-server gets one worker thread per CPU).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    server_cores: Vec<usize>,
    /// CPUs the load runs on.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    load_cores: Vec<usize>,
    /// Skip redis-benchmark even when installed.
    #[arg(long)]
    no_redis_benchmark: bool,
    /// Also serve TLS (a certificate made for the run; no client certificates) and measure
    /// GET and SET over it: the xtask load through rustls (`load: xtask-tls`, beside the
    /// plaintext `xtask` rows) and `redis-benchmark --tls` when installed
    /// (`load: redis-benchmark-tls`, beside the same tool in plaintext).
    #[arg(long)]
    tls: bool,
    /// Also measure every xtask shape as an ACL user (`bench`: `~* &* +@all -flushall`,
    /// allowed all but one command, so each command is checked against its rules and its
    /// keys against `~*`) beside the default user (`load: xtask-acl`).
    #[arg(long)]
    acl: bool,
    /// Also measure fc-server over FCNP, its native protocol, for get, set and 80-20: the
    /// xtask load speaking FCNP frames (`load: xtask-fcnp`, the same closed loop as the RESP
    /// `xtask` rows) and FCNP's Rust client, fc-client, with its pipelines (`load: fc-client`).
    #[arg(long)]
    fcnp: bool,
    /// Also measure the memcached protocol for get and set: fc-server's memcached port against
    /// Debian's `memcached -t <server cores>` pinned to the same cores, the same closed loop
    /// speaking memcached's text protocol (`load: xtask-memcached`; get also as one `get` of
    /// `pipeline` keys, `xtask-memcached-multiget`). Skipped with a note without memcached.
    #[arg(long)]
    memcached: bool,
    /// A seconds-long smoke (CI): 64-byte values, pipelines 1 and 16, 10k keys, one 1 s round.
    #[arg(long)]
    quick: bool,
    /// Output directory (default `bench-matrix/<run-id>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Key sequence seed.
    #[arg(long, default_value_t = 0x5eed_cafe)]
    seed: u64,
    /// Every key on a TTL of this many seconds: preloaded and written with `SET ... EX`
    /// (what active expiry costs when every key has a TTL: compare with a run without).
    #[arg(long)]
    ttl_seconds: Option<u64>,
    /// Pub/sub fan-out rows: subscriber counts (`pubsub-N`: messages delivered per second;
    /// `0`: none).
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
    fanout: Vec<usize>,
    /// The blocking-queue row: consumers looping on `BRPOP` while one producer `LPUSH`es
    /// (`queue-C`: items consumed per second; 0: none).
    #[arg(long, default_value_t = 50)]
    queue_consumers: usize,
    /// The stream row: consumers of one consumer group looping on `XREADGROUP ... BLOCK 0
    /// NOACK` while one producer `XADD`s (`stream-C`: entries consumed per second; 0: none).
    #[arg(long, default_value_t = 50)]
    stream_consumers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    Get,
    Set,
    Mixed,
    /// `EVALSHA` of [`Script::Get`].
    EvalGet,
    /// `EVALSHA` of [`Script::Rmw`].
    EvalRmw,
}

impl Mix {
    fn parse(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "get" => Self::Get,
            "set" => Self::Set,
            "80-20" => Self::Mixed,
            other => bail!("unknown mix {other}: get, set, 80-20"),
        })
    }

    /// A `--scripts` entry; `None` for `none`.
    fn parse_script(name: &str) -> anyhow::Result<Option<Self>> {
        Ok(Some(match name {
            "evalsha-get" => Self::EvalGet,
            "evalsha-rmw" => Self::EvalRmw,
            "none" => return Ok(None),
            other => bail!("unknown script row {other}: evalsha-get, evalsha-rmw, none"),
        }))
    }

    fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Set => "set",
            Self::Mixed => "80-20",
            Self::EvalGet => "evalsha-get",
            Self::EvalRmw => "evalsha-rmw",
        }
    }

    /// Whether request `r` (a random number) is a SET.
    fn is_set(self, r: u64) -> bool {
        match self {
            Self::Get | Self::EvalGet | Self::EvalRmw => false,
            Self::Set => true,
            Self::Mixed => r.is_multiple_of(5),
        }
    }

    /// The RESP type bytes this mix's replies may start with; any other reply (an error above
    /// all) fails the run.
    fn reply_kinds(self) -> &'static [u8] {
        match self {
            Self::Get => b"$",
            Self::Set => b"+",
            Self::Mixed => b"$+",
            Self::EvalGet | Self::EvalRmw => b"$:",
        }
    }
}

/// The scripts `EVALSHA` runs, loaded into each server with `SCRIPT LOAD`.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// One key: `GET` it.
    Get,
    /// Two keys of one hash tag: `INCRBY` the first by `ARGV[1]`, `SET` the second to the sum.
    Rmw,
}

impl Script {
    const ALL: [Self; 2] = [Self::Get, Self::Rmw];

    fn body(self) -> &'static str {
        match self {
            Self::Get => "return redis.call('GET', KEYS[1])",
            Self::Rmw => {
                "local v = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], v) return v"
            }
        }
    }

    /// The SHA1 of [`Script::body`] (`printf %s "$body" | sha1sum`), which `SCRIPT LOAD` must
    /// answer and `EVALSHA` names.
    fn sha1(self) -> &'static str {
        match self {
            Self::Get => "d3c21d0c2b9ca22f82737626a27bcaf5d288f99f",
            Self::Rmw => "0c90eb559d6370a391acc7c997a165870cea55ae",
        }
    }
}

/// `SCRIPT LOAD`s every [`Script`] into the server at `addr`, failing unless each reply is the
/// script's SHA1.
fn load_scripts(addr: &str, server: &str) -> anyhow::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    for script in Script::ALL {
        let mut command = Vec::new();
        push_command(
            &mut command,
            &[b"SCRIPT", b"LOAD", script.body().as_bytes()],
        );
        s.write_all(&command)?;
        let expected = format!("$40\r\n{}\r\n", script.sha1());
        let mut reply = Vec::new();
        let mut chunk = [0u8; 512];
        while count_replies(&reply).0 == 0 {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                bail!("{server} closed the connection on SCRIPT LOAD");
            }
            reply.extend_from_slice(&chunk[..n]);
        }
        if reply != expected.as_bytes() {
            bail!(
                "{server}: SCRIPT LOAD {:?} answered {:?}, not its SHA1 {}",
                script.body(),
                String::from_utf8_lossy(&reply),
                script.sha1()
            );
        }
    }
    Ok(())
}

struct Row {
    server: String,
    value: usize,
    mix: &'static str,
    pipeline: usize,
    ops: f64,
    p50: f64,
    p99: f64,
    cpu: f64,
    load: &'static str,
    fsync: String,
}

pub(crate) fn bench_server(mut args: ServerBenchArgs) -> anyhow::Result<()> {
    if args.persistence {
        args.fsync = vec!["none".into(), "everysec".into(), "always".into()];
        if args.mixes == ["get", "set", "80-20"] {
            args.mixes = vec!["set".into()];
        }
        if args.values == [64, 4096] {
            args.values = vec![64];
        }
        if args.pipelines == [1, 16, 64] {
            args.pipelines = vec![1, 16];
        }
        if args.scripts == ["evalsha-get", "evalsha-rmw"] {
            args.scripts = vec!["evalsha-rmw".into()];
        }
    }
    if args.quick {
        args.duration = 1.0;
        args.warmup = 0.2;
        args.values = vec![64];
        args.pipelines = vec![1, 16];
        args.keys = 10_000;
        args.rounds = 1;
        args.fanout.retain(|&n| n <= 100);
        args.queue_consumers = args.queue_consumers.min(8);
        args.stream_consumers = args.stream_consumers.min(8);
    }
    args.rounds = args.rounds.max(1);
    let mixes: Vec<Mix> = args
        .mixes
        .iter()
        .map(|m| Mix::parse(m))
        .collect::<anyhow::Result<_>>()?;
    let mut scripts = Vec::new();
    for name in &args.scripts {
        if let Some(mix) = Mix::parse_script(name)?
            && !scripts.contains(&mix)
        {
            scripts.push(mix);
        }
    }
    let (root, run_id, out) = run_dir(args.out.as_deref())?;
    // Only built when measured (`--servers redis` runs without it).
    let fc_binary = if args.servers.iter().any(|s| s == "fc-server") {
        Some(build_fc_server(&root, "bench-server")?)
    } else {
        None
    };
    let have_redis = which("redis-server");
    let have_memcached = which("memcached") || std::path::Path::new("/usr/bin/memcached").exists();
    if args.memcached && !have_memcached {
        eprintln!("bench-server: memcached is not installed; the --memcached rows are skipped");
    }
    let none = String::from("none");
    let have_benchmark = which("redis-benchmark") && !args.no_redis_benchmark;
    let servers: Vec<&str> = args
        .servers
        .iter()
        .map(String::as_str)
        .filter(|&server| {
            let skip = server == "redis" && !have_redis;
            if skip {
                eprintln!("bench-server: redis-server is not installed; its rows are skipped");
            }
            !skip
        })
        .collect();
    let certs = args.tls.then(|| Certs::make(&out)).transpose()?;
    args.tls_ca = certs.as_ref().map(|c| c.cert.clone());
    let mut rows = Vec::new();
    let mut rounds = Vec::new();
    let per_value = (mixes.len() + scripts.len()) * args.pipelines.len() * args.rounds;
    let progress = crate::progress::bar((per_value * args.values.len()) as u64, "bench-server");
    for (nth_value, &value) in args.values.iter().enumerate() {
        // Every server, at every durability setting, runs (pinned to the same cores)
        // while the value size's shapes are measured; only the one under load uses CPU.
        let mut running = Vec::new();
        for fsync in &args.fsync {
            for &server in &servers {
                let data = tempfile_dir(&out, server, fsync)?;
                let process = start_server(
                    server,
                    fsync,
                    fc_binary.as_deref(),
                    &data,
                    &args,
                    certs.as_ref(),
                )?;
                preload(&process.addr, args.keys, value, args.ttl_seconds)?;
                if !scripts.is_empty() {
                    load_scripts(&process.addr, server)?;
                }
                if args.acl {
                    exchange(
                        &process.addr,
                        &[
                            b"ACL",
                            b"SETUSER",
                            b"bench",
                            b"on",
                            b">bench",
                            b"~*",
                            b"&*",
                            b"+@all",
                            b"-flushall",
                        ],
                        b"+OK\r\n",
                    )
                    .with_context(|| format!("creating the ACL user on {server}"))?;
                }
                running.push((server, fsync, process, data));
            }
        }
        // Debian's memcached beside them (`--memcached`), preloaded with the same keys.
        let reference = if args.memcached && have_memcached {
            let process = memcached::start(&args.server_cores)?;
            memcached::preload(&process.addr, args.keys, value)?;
            Some(process)
        } else {
            None
        };
        let fc_memcached = running
            .iter()
            .find(|(server, fsync, ..)| *server == "fc-server" && fsync.as_str() == "none")
            .and_then(|(_, _, p, _)| Some((p.memcached_addr.clone()?, p.child.id())));
        // The read-modify-write script's values are counters, whatever the value size: its
        // rows run at the first value size only.
        let value_mixes = scripts
            .iter()
            .filter(|&&mix| mix != Mix::EvalRmw || nth_value == 0);
        for &mix in mixes.iter().chain(value_mixes) {
            for &pipeline in &args.pipelines {
                type Key<'a> = (&'a str, &'a String, &'static str);
                let mut samples: BTreeMap<Key<'_>, Vec<Sample>> = BTreeMap::new();
                for round in 0..args.rounds {
                    progress.inc(1);
                    for turn in 0..running.len() {
                        let (server, fsync, process, _) = &running[(round + turn) % running.len()];
                        let label = format!(
                            "{server} fsync={fsync} {value}B {} P{pipeline} round {}",
                            mix.name(),
                            round + 1
                        );
                        // One xtask load against `addr`, logged and kept under its name.
                        let mut measure = |addr: &str, load: Load| -> anyhow::Result<f64> {
                            let sample = run_load(
                                (addr, process.child.id()),
                                &args,
                                mix,
                                value,
                                pipeline,
                                load,
                            )
                            .with_context(|| format!("bench-server: {} {label}", load.name()))?;
                            progress.suspend(|| eprintln!(
                                "bench-server: {} {label}: {:.0} ops/s, p50 {:.0} us, p99 {:.0} us, server CPU {:.2}",
                                load.name(), sample.ops, sample.p50, sample.p99, sample.cpu
                            ));
                            let ops = sample.ops;
                            samples
                                .entry((server, fsync, load.name()))
                                .or_default()
                                .push(sample);
                            Ok(ops)
                        };
                        if args.acl {
                            measure(&process.addr, Load::RespAcl)?;
                        }
                        if args.fcnp
                            && *server == "fc-server"
                            && matches!(mix, Mix::Get | Mix::Set | Mix::Mixed)
                        {
                            for load in [Load::Fcnp, Load::Client, Load::ClientShared] {
                                measure(&process.addr, load)?;
                            }
                        }
                        let requests = (measure(&process.addr, Load::Resp)? * args.duration) as u64;
                        if let (Some(tls_addr), Mix::Get | Mix::Set) = (&process.tls_addr, mix) {
                            measure(tls_addr, Load::RespTls)?;
                        }
                        if have_benchmark && matches!(mix, Mix::Get | Mix::Set) {
                            let pid = process.child.id();
                            let plain = Some((process.addr.as_str(), None, "redis-benchmark"));
                            let tls =
                                process
                                    .tls_addr
                                    .as_deref()
                                    .zip(certs.as_ref())
                                    .map(|(addr, c)| {
                                        (addr, Some(c.cert.as_path()), "redis-benchmark-tls")
                                    });
                            for (addr, ca, load) in plain.into_iter().chain(tls) {
                                match redis_benchmark(
                                    addr, pid, &args, mix, value, pipeline, requests, ca,
                                ) {
                                    Ok(s) => {
                                        progress.suspend(|| eprintln!(
                                            "bench-server: {load} {label}: {:.0} ops/s, server CPU {:.2}",
                                            s.ops, s.cpu
                                        ));
                                        samples.entry((server, fsync, load)).or_default().push(s);
                                    }
                                    Err(e) => progress
                                        .suspend(|| eprintln!("bench-server: {load} {label}: {e}")),
                                }
                            }
                        }
                    }
                }
                // The memcached rows: fc-server's memcached port and memcached, taking turns.
                if let (Some(reference), Some((fc_addr, fc_pid)), Mix::Get | Mix::Set) =
                    (&reference, &fc_memcached, mix)
                {
                    let loads: &[Load] = if mix == Mix::Get {
                        &[Load::Memcached, Load::MemcachedMulti]
                    } else {
                        &[Load::Memcached]
                    };
                    for round in 0..args.rounds {
                        let targets = [
                            ("fc-server", fc_addr.as_str(), *fc_pid),
                            ("memcached", reference.addr.as_str(), reference.child.id()),
                        ];
                        for turn in 0..2 {
                            let (server, addr, pid) = targets[(round + turn) % 2];
                            for &load in loads {
                                let sample =
                                    run_load((addr, pid), &args, mix, value, pipeline, load)
                                        .with_context(|| {
                                            format!("bench-server: {} on {server}", load.name())
                                        })?;
                                progress.suspend(|| eprintln!(
                                    "bench-server: {} {server} {value}B {} P{pipeline} round {}: {:.0} ops/s, server CPU {:.2}",
                                    load.name(), mix.name(), round + 1, sample.ops, sample.cpu
                                ));
                                samples
                                    .entry((server, &none, load.name()))
                                    .or_default()
                                    .push(sample);
                            }
                        }
                    }
                }
                for ((server, fsync, load), samples) in samples {
                    let row = |s: &Sample| Row {
                        server: server.to_string(),
                        value,
                        mix: mix.name(),
                        pipeline,
                        ops: s.ops,
                        p50: s.p50,
                        p99: s.p99,
                        cpu: s.cpu,
                        load,
                        fsync: fsync.clone(),
                    };
                    rounds.extend(samples.iter().map(row));
                    rows.push(row(&Sample::median(&samples)));
                }
            }
        }
        for (_, _, process, data) in running {
            process.stop();
            let _ = std::fs::remove_dir_all(&data);
        }
    }
    let mut shapes: Vec<patterns::Pattern> = args
        .fanout
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| patterns::Pattern::Fanout(n))
        .collect();
    if args.queue_consumers > 0 {
        shapes.push(patterns::Pattern::Queue(args.queue_consumers));
    }
    if args.stream_consumers > 0 {
        shapes.push(patterns::Pattern::Stream(args.stream_consumers));
    }
    if !shapes.is_empty() {
        // In memory, each server started once; the servers take turns first as above.
        let mut running = Vec::new();
        for &server in &servers {
            let data = tempfile_dir(&out, server, "none")?;
            running.push((
                server,
                start_server(server, "none", fc_binary.as_deref(), &data, &args, None)?,
                data,
            ));
        }
        for &shape in &shapes {
            let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
            for round in 0..args.rounds {
                for turn in 0..running.len() {
                    let (server, process, _) = &running[(round + turn) % running.len()];
                    let sample = patterns::run(
                        process,
                        shape,
                        Duration::from_secs_f64(args.warmup),
                        Duration::from_secs_f64(args.duration),
                        &args.load_cores,
                    )?;
                    progress.suspend(|| eprintln!(
                        "bench-server: {server} {} round {}: {:.0} ops/s, p50 {:.0} us, p99 {:.0} us, server CPU {:.2}",
                        shape.name(),
                        round + 1,
                        sample.ops,
                        sample.p50,
                        sample.p99,
                        sample.cpu
                    ));
                    samples.entry(server).or_default().push(sample);
                }
            }
            // Row names live for the run (a few strings).
            let mix: &'static str = Box::leak(shape.name().into_boxed_str());
            for (server, samples) in samples {
                let row = |s: &Sample| Row {
                    server: server.to_string(),
                    value: 64,
                    mix,
                    pipeline: patterns::BATCH,
                    ops: s.ops,
                    p50: s.p50,
                    p99: s.p99,
                    cpu: s.cpu,
                    load: "xtask",
                    fsync: "none".into(),
                };
                rounds.extend(samples.iter().map(row));
                rows.push(row(&Sample::median(&samples)));
            }
        }
        for (_, process, data) in running {
            process.stop();
            let _ = std::fs::remove_dir_all(&data);
        }
    }
    progress.finish_and_clear();
    write_csv(&out.join("server.csv"), &run_id, &args, &rows)?;
    write_csv(&out.join("server-rounds.csv"), &run_id, &args, &rounds)?;
    write_summary(&out.join("server-summary.md"), &run_id, &args, &rows)?;
    crate::charts::draw_and_link(&out, &out.join("server-summary.md"))?;
    report::write_meta(&out, &run_id, &report::command_line(), args.seed)?;
    eprintln!("bench-server: wrote {}", out.join("server.csv").display());
    Ok(())
}

pub(crate) fn which(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn tempfile_dir(out: &Path, server: &str, fsync: &str) -> anyhow::Result<PathBuf> {
    let dir = out.join(format!("data-{server}-{fsync}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

pub(crate) fn pin_self(cpus: &[usize]) {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("bench-server: could not pin to CPUs {cpus:?}: {e}");
    }
}

struct ServerProcess {
    child: Child,
    addr: String,
    /// The TLS port's address (`--tls`).
    tls_addr: Option<String>,
    /// fc-server's memcached port (`--memcached`).
    memcached_addr: Option<String>,
}

/// A run's certificate for the TLS rows: a self-signed one for 127.0.0.1 (its own CA).
struct Certs {
    cert: PathBuf,
    key: PathBuf,
}

impl Certs {
    fn make(dir: &Path) -> anyhow::Result<Self> {
        let made =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])?;
        let (cert, key) = (dir.join("tls-cert.pem"), dir.join("tls-key.pem"));
        std::fs::write(&cert, made.cert.pem())?;
        std::fs::write(&key, made.signing_key.serialize_pem())?;
        Ok(Self { cert, key })
    }
}

impl ServerProcess {
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // `drop` kills it.
    }
}

/// A run that fails (an error reply, a server that stops answering) leaves no server behind.
impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts `server` pinned to the server cores (the child inherits this thread's affinity).
fn start_server(
    server: &str,
    fsync: &str,
    fc_binary: Option<&Path>,
    data: &Path,
    args: &ServerBenchArgs,
    certs: Option<&Certs>,
) -> anyhow::Result<ServerProcess> {
    let port = free_port()?;
    let tls_port = certs.map(|_| free_port()).transpose()?;
    let memcached_port = (args.memcached && server == "fc-server")
        .then(free_port)
        .transpose()?;
    let before = crate::bench::driver::allowed_cpus();
    pin_self(&args.server_cores);
    let mut cmd = if server == "fc-server" {
        let mut cmd = Command::new(fc_binary.context("fc-server was not built")?);
        cmd.args(["--bind", &format!("127.0.0.1:{port}")])
            .args(["--threads", &args.server_cores.len().to_string()])
            .args(["--save", ""]);
        if fsync != "none" {
            cmd.arg("--data-dir")
                .arg(data)
                .args(["--appendfsync", fsync]);
        }
        if let Some(mport) = memcached_port {
            cmd.args(["--memcached-bind", &format!("127.0.0.1:{mport}")]);
        }
        if let (Some(certs), Some(tls_port)) = (certs, tls_port) {
            cmd.args(["--tls-port", &format!("127.0.0.1:{tls_port}")])
                .arg("--tls-cert-file")
                .arg(&certs.cert)
                .arg("--tls-key-file")
                .arg(&certs.key)
                .args(["--tls-auth-clients", "no"]);
        }
        cmd
    } else {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--protected-mode", "no", "--daemonize", "no"])
            .args(["--io-threads", &args.server_cores.len().to_string()]);
        if fsync == "none" {
            cmd.args(["--appendonly", "no"]);
        } else {
            cmd.args(["--appendonly", "yes", "--appendfsync", fsync])
                .arg("--dir")
                .arg(data);
        }
        if let (Some(certs), Some(tls_port)) = (certs, tls_port) {
            cmd.args(["--tls-port", &tls_port.to_string()])
                .arg("--tls-cert-file")
                .arg(&certs.cert)
                .arg("--tls-key-file")
                .arg(&certs.key)
                .arg("--tls-ca-cert-file")
                .arg(&certs.cert)
                .args(["--tls-auth-clients", "no"]);
        }
        cmd
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {server}"));
    pin_self(&before);
    let child = child?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = TcpStream::connect(&addr) {
            let mut pong = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut pong).is_ok()
                && &pong == b"+PONG\r\n"
            {
                break;
            }
        }
        if Instant::now() > deadline {
            bail!("{server} did not answer PING on {addr}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(ServerProcess {
        child,
        addr,
        tls_addr: tls_port.map(|p| format!("127.0.0.1:{p}")),
        memcached_addr: memcached_port.map(|p| format!("127.0.0.1:{p}")),
    })
}

/// Sends one command on a new connection and checks its reply is `expected`.
fn exchange(addr: &str, parts: &[&[u8]], expected: &[u8]) -> anyhow::Result<()> {
    let mut request = Vec::new();
    push_command(&mut request, parts);
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(&request)?;
    let mut reply = vec![0u8; expected.len()];
    s.read_exact(&mut reply)?;
    if reply != expected {
        bail!("answered {}", String::from_utf8_lossy(&reply));
    }
    Ok(())
}

pub(crate) fn key(n: u64) -> String {
    format!("key:{n:012}")
}

pub(crate) fn push_command(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    let _ = write!(VecWriter(buf), "*{}\r\n", parts.len());
    for p in parts {
        let _ = write!(VecWriter(buf), "${}\r\n", p.len());
        buf.extend_from_slice(p);
        buf.extend_from_slice(b"\r\n");
    }
}

struct VecWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for VecWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Sets every key once (pipelines of 256), so GETs hit; with `ttl_seconds`, each on that TTL.
fn preload(addr: &str, keys: u64, value: usize, ttl_seconds: Option<u64>) -> anyhow::Result<()> {
    let ttl = ttl_seconds.map(|t| t.to_string());
    let extra: Vec<&[u8]> = match &ttl {
        Some(t) => vec![b"EX", t.as_bytes()],
        None => Vec::new(),
    };
    set_keys_with(addr, 0..keys, &mut vec![b'x'; value], 256, &extra, |_| {})
}

/// `SET`s keys `keys` on one connection in pipelines of `batch`, each value `value` after
/// `refill` has rewritten it.
pub(crate) fn set_keys(
    addr: &str,
    keys: std::ops::Range<u64>,
    value: &mut [u8],
    batch: u64,
    refill: impl FnMut(&mut [u8]),
) -> anyhow::Result<()> {
    set_keys_with(addr, keys, value, batch, &[], refill)
}

/// [`set_keys`] with `extra` arguments after each value (`EX <seconds>`).
fn set_keys_with(
    addr: &str,
    keys: std::ops::Range<u64>,
    value: &mut [u8],
    batch: u64,
    extra: &[&[u8]],
    mut refill: impl FnMut(&mut [u8]),
) -> anyhow::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    let mut buf = Vec::new();
    let mut scratch = vec![0u8; 64 << 10];
    let mut pending = Vec::new();
    let mut next = keys.start;
    while next < keys.end {
        buf.clear();
        let end = (next + batch.max(1)).min(keys.end);
        for n in next..end {
            refill(value);
            let key = key(n);
            let mut command: Vec<&[u8]> = vec![b"SET", key.as_bytes(), value];
            command.extend_from_slice(extra);
            push_command(&mut buf, &command);
        }
        s.write_all(&buf)?;
        let mut replies = 0;
        while replies < (end - next) as usize {
            let n = s.read(&mut scratch)?;
            if n == 0 {
                bail!("the server closed the connection while loading");
            }
            pending.extend_from_slice(&scratch[..n]);
            let (count, used) = count_replies(&pending);
            replies += count;
            pending.drain(..used);
        }
        next = end;
    }
    Ok(())
}

/// The output directory of a run (`--out`, or `bench-matrix/<run-id>`), created, with the
/// workspace root and the run id.
pub(crate) fn run_dir(out: Option<&Path>) -> anyhow::Result<(PathBuf, String, PathBuf)> {
    let root = report::workspace_root()?;
    let run_id = report::utc_run_id();
    let out = out.map_or_else(
        || root.join("bench-matrix").join(&run_id),
        Path::to_path_buf,
    );
    std::fs::create_dir_all(&out)?;
    Ok((root, run_id, out))
}

/// Builds the release fc-server binary and returns its path.
/// `FC_SERVER_BIN`, when set, names a prebuilt binary to run instead (A/B comparisons of two
/// builds with the same load).
pub(crate) fn build_fc_server(root: &Path, task: &str) -> anyhow::Result<PathBuf> {
    build_fc_server_with(root, task, &[])
}

/// [`build_fc_server`] with these fc-server features too. `FAST_CACHE_USE_MONOIO=1` in the
/// environment adds `monoio` (the servers a task starts inherit the variable, so they run
/// on monoio: `FAST_CACHE_USE_MONOIO=1 cargo xtask diff-redis`).
pub(crate) fn build_fc_server_with(
    root: &Path,
    task: &str,
    extra: &[&str],
) -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("FC_SERVER_BIN") {
        eprintln!("{task}: using FC_SERVER_BIN={}", bin.to_string_lossy());
        return Ok(PathBuf::from(bin));
    }
    let mut features: Vec<&str> = extra.to_vec();
    // With xtask's `unsafe` feature, the server's reviewed `unsafe` paths too (SAFETY.md).
    if cfg!(feature = "unsafe") {
        features.push("unsafe");
    }
    let monoio = std::env::var("FAST_CACHE_USE_MONOIO")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
    if monoio && !features.contains(&"monoio") {
        features.push("monoio");
    }
    let features = features.join(",");
    eprintln!(
        "{task}: building fc-server (release{}{features})",
        if features.is_empty() {
            ""
        } else {
            ", features "
        }
    );
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "-p", "fc-server"])
        .args(
            (!features.is_empty())
                .then(|| ["--features".to_string(), features.clone()])
                .into_iter()
                .flatten(),
        )
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building fc-server failed");
    }
    Ok(root.join("target/release/fc-server"))
}

/// Complete replies at the start of `buf`, and the bytes they take.
fn count_replies(buf: &[u8]) -> (usize, usize) {
    let Ok(counted) = scan_replies(buf, |_| Ok::<(), std::convert::Infallible>(()));
    counted
}

/// [`count_replies`] of a load whose replies are single RESP elements starting with one of
/// `kinds`: any other reply (an error reply above all) fails with its text.
fn count_replies_of(buf: &[u8], kinds: &[u8]) -> anyhow::Result<(usize, usize)> {
    scan_replies(buf, |line| {
        if line.first().is_some_and(|b| kinds.contains(b)) {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "unexpected reply {:?} (expected one starting with {:?})",
                String::from_utf8_lossy(line),
                String::from_utf8_lossy(kinds)
            ))
        }
    })
}

/// The complete FCNP responses at the start of `buf` (a GET's bulk or nil, a SET's status):
/// their count and the bytes they take; an error value fails with its text.
fn count_fcnp_replies(buf: &[u8]) -> anyhow::Result<(usize, usize)> {
    let (mut at, mut count) = (0, 0);
    while let Some(head) = buf.get(at..at + fc_fcnp::RESPONSE_HEADER_LEN) {
        let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
        let end = at + fc_fcnp::RESPONSE_HEADER_LEN + len;
        if end > buf.len() {
            break;
        }
        let body = &buf[at + fc_fcnp::RESPONSE_HEADER_LEN..end];
        match body.first() {
            Some(&(fc_fcnp::tag::BULK | fc_fcnp::tag::NIL | fc_fcnp::tag::STATUS)) => {}
            _ => bail!(
                "unexpected FCNP reply {:?}",
                String::from_utf8_lossy(body.get(5..).unwrap_or(body))
            ),
        }
        at = end;
        count += 1;
    }
    Ok((count, at))
}

/// One fc-client task's closed loop: a `GET`/`SET` at pipeline 1, a [`Pipeline`] of
/// `pipeline` requests above (what a user of the client writes), until `end`; on a client of
/// its own, or on `shared` (every task's requests multiplexed on one connection).
///
/// [`Pipeline`]: fc_client::Pipeline
#[expect(clippy::too_many_arguments, reason = "one load shape, spelled out")]
async fn client_load(
    addr: &str,
    shared: Option<fc_client::Client>,
    mix: Mix,
    value: &[u8],
    pipeline: usize,
    keys: u64,
    seed: u64,
    measure_from: Instant,
    end: Instant,
) -> anyhow::Result<(u64, Vec<u32>)> {
    let client = match shared {
        Some(client) => client,
        None => {
            let addr = addr.parse().context("the server's address")?;
            fc_client::Client::connect(fc_client::ClientConfig::new(addr)).await?
        }
    };
    let mut state = seed | 1;
    let (mut ops, mut latencies) = (0u64, Vec::new());
    let mut key = || {
        let r = xorshift(&mut state);
        let n = ((u128::from(r >> 11) * u128::from(keys)) >> 53) as u64;
        (crate::server_bench::key(n), mix.is_set(r))
    };
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if pipeline == 1 {
            let (k, set) = key();
            if set {
                client.set(&k, value).await?;
            } else {
                client.get(&k).await?;
            }
        } else {
            let mut pipe = client.pipeline();
            for _ in 0..pipeline {
                let (k, set) = key();
                if set {
                    pipe.set(&k, value);
                } else {
                    pipe.get(&k);
                }
            }
            for reply in pipe.run(&client).await? {
                if let Some(text) = reply.as_error() {
                    bail!("error reply {}", String::from_utf8_lossy(text));
                }
            }
        }
        let done = Instant::now();
        if now >= measure_from && done <= end {
            ops += pipeline as u64;
            latencies.push(
                done.duration_since(now)
                    .as_micros()
                    .min(u128::from(u32::MAX)) as u32,
            );
        }
    }
    Ok((ops, latencies))
}

/// Walks the complete RESP elements at the start of `buf`, calling `check` with each one's
/// first line; returns their count and the bytes they take, or `check`'s first error.
fn scan_replies<E>(
    buf: &[u8],
    mut check: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(usize, usize), E> {
    let mut at = 0;
    let mut count = 0;
    while at < buf.len() {
        let Some(line_end) = memchr_crlf(&buf[at..]) else {
            break;
        };
        let line = &buf[at..at + line_end];
        check(line)?;
        let next = at + line_end + 2;
        match line.first() {
            Some(b'$') => {
                let len: i64 = std::str::from_utf8(&line[1..])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(-1);
                if len < 0 {
                    at = next;
                } else {
                    let end = next + len as usize + 2;
                    if end > buf.len() {
                        break;
                    }
                    at = end;
                }
            }
            _ => at = next,
        }
        count += 1;
    }
    Ok((count, at))
}

fn memchr_crlf(buf: &[u8]) -> Option<usize> {
    let at = memchr::memchr(b'\n', buf)?;
    (at > 0 && buf[at - 1] == b'\r').then(|| at - 1)
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    ops: f64,
    p50: f64,
    p99: f64,
    /// The server process's CPU use in the window, in cores (1.0 = one core busy throughout).
    cpu: f64,
}

impl Sample {
    /// Each field's median over `samples` (at least one), taken separately.
    fn median(samples: &[Sample]) -> Sample {
        let of = |field: fn(&Sample) -> f64| {
            let mut values: Vec<f64> = samples.iter().map(field).collect();
            values.sort_by(f64::total_cmp);
            let mid = values.len() / 2;
            if values.len().is_multiple_of(2) {
                (values[mid - 1] + values[mid]) / 2.0
            } else {
                values[mid]
            }
        };
        Sample {
            ops: of(|s| s.ops),
            p50: of(|s| s.p50),
            p99: of(|s| s.p99),
            cpu: of(|s| s.cpu),
        }
    }
}

/// User + system CPU seconds `pid` has used.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The xtask load: `connections` tasks on a runtime pinned to the load cores.
/// What the xtask load speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// RESP, as the default user.
    Resp,
    /// RESP, as the ACL user `bench` (`--acl`).
    RespAcl,
    /// RESP over the server's TLS port, through rustls (`--tls`).
    RespTls,
    /// FCNP frames, the same closed loop (`--fcnp`).
    Fcnp,
    /// FCNP through fc-client, a client per connection (`--fcnp`).
    Client,
    /// FCNP through one fc-client shared by every load task, on one multiplexed connection:
    /// the tasks' requests in flight together leave in one write (`--fcnp`).
    ClientShared,
    /// memcached's text protocol, `pipeline` commands per batch (`--memcached`).
    Memcached,
    /// memcached's text protocol, one `get` of `pipeline` keys per batch (`--memcached`).
    MemcachedMulti,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Self::Resp => "xtask",
            Self::RespAcl => "xtask-acl",
            Self::RespTls => "xtask-tls",
            Self::Fcnp => "xtask-fcnp",
            Self::Client => "fc-client",
            Self::ClientShared => "fc-client-shared",
            Self::Memcached => "xtask-memcached",
            Self::MemcachedMulti => "xtask-memcached-multiget",
        }
    }
}

fn run_load(
    (addr, pid): (&str, u32),
    args: &ServerBenchArgs,
    mix: Mix,
    value: usize,
    pipeline: usize,
    load: Load,
) -> anyhow::Result<Sample> {
    let addr = addr.to_string();
    let start = Instant::now();
    let (connections, keys, seed) = (args.connections, args.keys, args.seed);
    let ttl = args.ttl_seconds;
    let warmup = Duration::from_secs_f64(args.warmup);
    let duration = Duration::from_secs_f64(args.duration);
    let load_cores = args.load_cores.clone();
    // A paced load's batches, released at a steady rate over all the connections.
    let pacer = args.rate.filter(|r| *r > 0.0).map(|r| {
        Pacer::start(
            r / pipeline as f64,
            connections,
            start + warmup + duration,
            &args.load_cores,
        )
    });
    let permits = pacer.as_ref().map(|p| Arc::clone(&p.permits));
    let tls = (load == Load::RespTls)
        .then(|| tls_connector(args.tls_ca.as_deref()))
        .transpose()?;
    let handle = std::thread::spawn(move || -> anyhow::Result<Sample> {
        pin_self(&load_cores);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let measure_from = start + warmup;
            let end = measure_from + duration;
            let value = vec![b'v'; value];
            let mut tasks = Vec::new();
            let shared = if load == Load::ClientShared {
                let addr = addr.parse().context("the server's address")?;
                Some(fc_client::Client::connect(fc_client::ClientConfig::new(addr)).await?)
            } else {
                None
            };
            for c in 0..connections {
                let addr = addr.clone();
                let value = value.clone();
                let shared = shared.clone();
                let pace = permits.clone();
                let tls = tls.clone();
                tasks.push(tokio::task::spawn(async move {
                    let seed = seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    if matches!(load, Load::Client | Load::ClientShared) {
                        return client_load(
                            &addr,
                            shared,
                            mix,
                            &value,
                            pipeline,
                            keys,
                            seed,
                            measure_from,
                            end,
                        )
                        .await;
                    }
                    let shape = Shape {
                        load,
                        mix,
                        value: &value,
                        pipeline,
                        keys,
                        ttl,
                        seed,
                        window: (measure_from, end),
                        pace,
                    };
                    let stream = tokio::net::TcpStream::connect(&addr).await?;
                    stream.set_nodelay(true)?;
                    match tls {
                        Some(tls) => {
                            let name = ServerName::try_from("localhost")?;
                            connection_load(tls.connect(name, stream).await?, shape).await
                        }
                        None => connection_load(stream, shape).await,
                    }
                }));
            }
            let mut ops = 0u64;
            let mut latencies = Vec::new();
            for task in tasks {
                let (n, mut lat) = task.await??;
                ops += n;
                latencies.append(&mut lat);
            }
            latencies.sort_unstable();
            let pct = |p: f64| {
                latencies
                    .get(
                        ((latencies.len() as f64 * p) as usize)
                            .min(latencies.len().saturating_sub(1)),
                    )
                    .map_or(0.0, |&v| f64::from(v))
            };
            Ok(Sample {
                ops: ops as f64 / duration.as_secs_f64(),
                p50: pct(0.50),
                p99: pct(0.99),
                cpu: 0.0,
            })
        })
    });
    std::thread::sleep((start + warmup).saturating_duration_since(Instant::now()));
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep((start + warmup + duration).saturating_duration_since(Instant::now()));
    let (cpu1, t1) = (cpu_seconds(pid), Instant::now());
    let mut sample = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    if let Some(pacer) = pacer {
        let skipped = pacer.stop();
        if skipped > 0 {
            eprintln!(
                "bench: the paced load fell behind its schedule: {skipped} of its batches were skipped"
            );
        }
    }
    sample.cpu = (cpu1 - cpu0) / t1.duration_since(t0).as_secs_f64();
    Ok(sample)
}

/// How often the pacer releases the batches due (tokio's timer wakes on whole milliseconds:
/// pacing each connection on it sent a millisecond's batches of every connection at once,
/// 65 `SET`s in one burst at the lag row's rate on this project's 2-core machine).
const PACE_TICK: Duration = Duration::from_micros(100);

/// A paced (open-loop) load's clock: a thread on the load's cores that releases the batches
/// due every [`PACE_TICK`] as permits, which the connections take in turn (the semaphore is
/// fair: the connection waiting longest sends next). Batches due while every connection is
/// busy wait as permits, up to 8 per connection; beyond that (a stalled server) the oldest
/// are skipped rather than sent in one burst later.
struct Pacer {
    permits: Arc<tokio::sync::Semaphore>,
    /// Returns how many batches were skipped (due while `8 × connections` already waited).
    thread: std::thread::JoinHandle<u64>,
}

impl Pacer {
    /// Releases `per_second` batches a second until `end`, then closes the permits.
    fn start(per_second: f64, connections: usize, end: Instant, cores: &[usize]) -> Self {
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let released = Arc::clone(&permits);
        let cores = cores.to_vec();
        let most = connections.max(1) * 8;
        let thread = std::thread::spawn(move || {
            pin_self(&cores);
            let start = Instant::now();
            let (mut due_before, mut skipped) = (0u64, 0u64);
            while Instant::now() < end {
                std::thread::sleep(PACE_TICK);
                let due = (start.elapsed().as_secs_f64() * per_second) as u64;
                let new = (due - due_before) as usize;
                due_before = due;
                let room = most.saturating_sub(released.available_permits());
                released.add_permits(new.min(room));
                skipped += new.saturating_sub(room) as u64;
            }
            released.close();
            skipped
        });
        Self { permits, thread }
    }

    /// Stops releasing batches; returns how many were skipped because the load fell behind.
    fn stop(self) -> u64 {
        self.permits.close();
        self.thread.join().unwrap_or(0)
    }
}

/// A batch of `pipeline` commands whose keys are rewritten in place before each send (12
/// digits at each recorded offset), as redis-benchmark does with `__rand_int__`: sending costs
/// the load no formatting.
struct Template {
    bytes: Vec<u8>,
    key_digits: Vec<usize>,
    /// Offsets in `key_digits` per command, all given the same number (`evalsha-rmw`'s two
    /// keys of one hash tag).
    keys_per_command: usize,
}

impl Template {
    fn new(mix: Mix, value: &[u8], pipeline: usize, ttl: Option<u64>, state: &mut u64) -> Self {
        let mut bytes = Vec::with_capacity(pipeline * (value.len() + 96));
        let mut key_digits = Vec::with_capacity(pipeline * 2);
        match mix {
            Mix::EvalGet => {
                for _ in 0..pipeline {
                    bytes.extend_from_slice(b"*4\r\n$7\r\nEVALSHA\r\n");
                    push_bulk(&mut bytes, Script::Get.sha1().as_bytes());
                    bytes.extend_from_slice(b"$1\r\n1\r\n$16\r\nkey:");
                    key_digits.push(bytes.len());
                    bytes.extend_from_slice(b"000000000000\r\n");
                }
                return Self {
                    bytes,
                    key_digits,
                    keys_per_command: 1,
                };
            }
            Mix::EvalRmw => {
                for _ in 0..pipeline {
                    bytes.extend_from_slice(b"*6\r\n$7\r\nEVALSHA\r\n");
                    push_bulk(&mut bytes, Script::Rmw.sha1().as_bytes());
                    bytes.extend_from_slice(b"$1\r\n2\r\n$27\r\n{user:");
                    key_digits.push(bytes.len());
                    bytes.extend_from_slice(b"000000000000}:counter\r\n$24\r\n{user:");
                    key_digits.push(bytes.len());
                    bytes.extend_from_slice(b"000000000000}:last\r\n$1\r\n1\r\n");
                }
                return Self {
                    bytes,
                    key_digits,
                    keys_per_command: 2,
                };
            }
            Mix::Get | Mix::Set | Mix::Mixed => {}
        }
        for _ in 0..pipeline {
            let set = mix.is_set(xorshift(state));
            let head: &[u8] = if set && ttl.is_some() {
                b"*5\r\n$3\r\nSET\r\n$16\r\nkey:"
            } else if set {
                b"*3\r\n$3\r\nSET\r\n$16\r\nkey:"
            } else {
                b"*2\r\n$3\r\nGET\r\n$16\r\nkey:"
            };
            bytes.extend_from_slice(head);
            key_digits.push(bytes.len());
            bytes.extend_from_slice(b"000000000000\r\n");
            if set {
                push_bulk(&mut bytes, value);
                if let Some(ttl) = ttl {
                    push_bulk(&mut bytes, b"EX");
                    push_bulk(&mut bytes, ttl.to_string().as_bytes());
                }
            }
        }
        Self {
            bytes,
            key_digits,
            keys_per_command: 1,
        }
    }

    /// The same batch as FCNP frames (GET and SET opcodes, the TTL as its extension).
    fn fcnp(mix: Mix, value: &[u8], pipeline: usize, ttl: Option<u64>, state: &mut u64) -> Self {
        use fc_fcnp::{Opcode, RequestHeader, encode_request};
        let mut frames = bytes::BytesMut::with_capacity(pipeline * (value.len() + 64));
        let mut key_digits = Vec::with_capacity(pipeline);
        let key = b"key:000000000000";
        for i in 0..pipeline {
            let set = mix.is_set(xorshift(state));
            let start = frames.len();
            if set {
                let mut header = RequestHeader::new(Opcode::Set, i as u32);
                if let Some(ttl) = ttl {
                    header = header.with_ttl_ms(ttl * 1000);
                }
                encode_request(&mut frames, &header, &[&key[..], value]);
            } else {
                encode_request(
                    &mut frames,
                    &RequestHeader::new(Opcode::Get, i as u32),
                    &[key],
                );
            }
            // The key's digits: after the header, the TTL, the key's length and `key:`.
            let ext = if set && ttl.is_some() { 8 } else { 0 };
            key_digits.push(start + fc_fcnp::REQUEST_HEADER_LEN + ext + 4 + 4);
        }
        Self {
            bytes: frames.to_vec(),
            key_digits,
            keys_per_command: 1,
        }
    }

    fn randomize(&mut self, keys: u64, state: &mut u64) {
        for command in self.key_digits.chunks(self.keys_per_command) {
            let r = xorshift(state);
            let n = ((u128::from(r >> 11) * u128::from(keys)) >> 53) as u64;
            for &at in command {
                let mut n = n;
                for d in self.bytes[at..at + 12].iter_mut().rev() {
                    *d = b'0' + (n % 10) as u8;
                    n /= 10;
                }
            }
        }
    }
}

fn push_bulk(buf: &mut Vec<u8>, bytes: &[u8]) {
    let _ = write!(VecWriter(buf), "${}\r\n", bytes.len());
    buf.extend_from_slice(bytes);
    buf.extend_from_slice(b"\r\n");
}

/// A connection's load: what it sends and when it stops.
struct Shape<'a> {
    load: Load,
    mix: Mix,
    value: &'a [u8],
    pipeline: usize,
    keys: u64,
    ttl: Option<u64>,
    seed: u64,
    /// `[measure_from, end)`.
    window: (Instant, Instant),
    pace: Option<Arc<tokio::sync::Semaphore>>,
}

/// A TLS client trusting `ca` (the run's self-signed certificate), for `xtask-tls`.
fn tls_connector(ca: Option<&Path>) -> anyhow::Result<TlsConnector> {
    let ca = ca.context("the xtask-tls load without the run's certificate")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))?
    {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// One connection's closed loop (over plaintext or TLS): a batch out, every reply in, repeat
/// until `end`. Counts the operations whose batch finished inside `[measure_from, end)`.
async fn connection_load<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    shape: Shape<'_>,
) -> anyhow::Result<(u64, Vec<u32>)> {
    let Shape {
        load,
        mix,
        value,
        pipeline,
        keys,
        ttl,
        seed,
        window: (measure_from, end),
        pace,
    } = shape;
    if load == Load::RespAcl {
        let mut auth = Vec::new();
        push_command(&mut auth, &[b"AUTH", b"bench", b"bench"]);
        stream.write_all(&auth).await?;
        let mut ok = [0u8; 5];
        stream.read_exact(&mut ok).await?;
        if &ok != b"+OK\r\n" {
            bail!("AUTH as the ACL user: {}", String::from_utf8_lossy(&ok));
        }
    }
    let mut state = seed | 1;
    let mut templates: Vec<Template> = (0..8)
        .map(|_| match load {
            Load::Fcnp => Template::fcnp(mix, value, pipeline, ttl, &mut state),
            Load::Memcached | Load::MemcachedMulti => {
                let (bytes, key_digits) = memcached::template(
                    |r| mix.is_set(r),
                    value,
                    pipeline,
                    load == Load::MemcachedMulti,
                    &mut state,
                );
                Template {
                    bytes,
                    key_digits,
                    keys_per_command: 1,
                }
            }
            _ => Template::new(mix, value, pipeline, ttl, &mut state),
        })
        .collect();
    // Replies per batch: one `END` for a multiget, one reply per command otherwise.
    let expected = if load == Load::MemcachedMulti {
        1
    } else {
        pipeline
    };
    let kinds = mix.reply_kinds();
    let mut rbuf = Vec::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut ops = 0u64;
    let mut latencies = Vec::new();
    let mut round = 0usize;
    loop {
        if let Some(permits) = &pace {
            // The pacer closes the semaphore at the end of the run.
            match permits.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => break,
            }
        }
        let now = Instant::now();
        if now >= end {
            break;
        }
        let template = &mut templates[round % 8];
        round += 1;
        template.randomize(keys, &mut state);
        stream.write_all(&template.bytes).await?;
        let mut replies = 0;
        while replies < expected {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                bail!("the server closed the connection");
            }
            let count_of = |buf: &[u8]| match load {
                Load::Fcnp => count_fcnp_replies(buf),
                Load::Memcached | Load::MemcachedMulti => memcached::count_replies(buf),
                _ => count_replies_of(buf, kinds),
            };
            let (count, used) = if rbuf.is_empty() {
                let (count, used) = count_of(&chunk[..n])?;
                rbuf.extend_from_slice(&chunk[used..n]);
                (count, 0)
            } else {
                rbuf.extend_from_slice(&chunk[..n]);
                count_of(&rbuf)?
            };
            replies += count;
            rbuf.drain(..used);
        }
        let done = Instant::now();
        if now >= measure_from && done <= end {
            ops += pipeline as u64;
            latencies.push(
                done.duration_since(now)
                    .as_micros()
                    .min(u128::from(u32::MAX)) as u32,
            );
        }
    }
    Ok((ops, latencies))
}

/// `redis-benchmark` pinned to the load cores, one test (GET or SET); over TLS with `tls`
/// (the CA file to trust).
#[expect(clippy::too_many_arguments, reason = "one benchmark's every setting")]
fn redis_benchmark(
    addr: &str,
    pid: u32,
    args: &ServerBenchArgs,
    mix: Mix,
    value: usize,
    pipeline: usize,
    requests: u64,
    tls: Option<&Path>,
) -> anyhow::Result<Sample> {
    let (host, port) = addr.split_once(':').context("address")?;
    let before = crate::bench::driver::allowed_cpus();
    pin_self(&args.load_cores);
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    let mut command = Command::new("redis-benchmark");
    if let Some(ca) = tls {
        command.arg("--tls").arg("--cacert").arg(ca);
    }
    // One thread per load core (redis-benchmark is single-threaded by default, which caps the
    // load at one core whatever `--load-cores` gives it).
    if args.load_cores.len() > 1 {
        command.args(["--threads", &args.load_cores.len().to_string()]);
    }
    let output = command
        .args(["-h", host, "-p", port, "--csv", "-q"])
        .args(["-c", &args.connections.to_string()])
        .args(["-n", &requests.max(10_000).to_string()])
        .args(["-P", &pipeline.to_string()])
        .args(["-d", &value.to_string()])
        .args(["-r", &args.keys.to_string()])
        .args(["-t", mix.name()])
        .output();
    let cpu = (cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64();
    pin_self(&before);
    let output = output?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    let line = text
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with(&format!("\"{}\"", mix.name()))
        })
        .with_context(|| format!("no {} row in redis-benchmark's output: {text}", mix.name()))?;
    let fields: Vec<f64> = line
        .split(',')
        .skip(1)
        .map(|f| f.trim_matches('"').parse().unwrap_or(0.0))
        .collect();
    if fields.len() < 6 {
        bail!("unexpected redis-benchmark line: {line}");
    }
    Ok(Sample {
        ops: fields[0],
        p50: fields[3] * 1000.0,
        p99: fields[5] * 1000.0,
        cpu,
    })
}

const HEADER: &str = "run_id,server,server_cores,value_bytes,mix,pipeline,connections,ops_per_sec,p50_us,p99_us,load,persistence,server_cpu,ops_per_server_cpu_sec";

fn write_csv(
    path: &Path,
    run_id: &str,
    args: &ServerBenchArgs,
    rows: &[Row],
) -> anyhow::Result<()> {
    let mut text = String::from(HEADER);
    text.push('\n');
    for r in rows {
        let _ = writeln!(
            text,
            "{run_id},{},{},{},{},{},{},{:.0},{:.0},{:.0},{},{},{:.2},{:.0}",
            r.server,
            args.server_cores.len(),
            r.value,
            r.mix,
            r.pipeline,
            args.connections,
            r.ops,
            r.p50,
            r.p99,
            r.load,
            r.fsync,
            r.cpu,
            r.ops / r.cpu.max(0.01)
        );
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn write_summary(
    path: &Path,
    run_id: &str,
    args: &ServerBenchArgs,
    rows: &[Row],
) -> anyhow::Result<()> {
    type Shape = (&'static str, String, usize, &'static str, usize);
    let mut table: BTreeMap<Shape, BTreeMap<String, &Row>> = BTreeMap::new();
    for r in rows {
        table
            .entry((r.load, r.fsync.clone(), r.value, r.mix, r.pipeline))
            .or_default()
            .insert(r.server.clone(), r);
    }
    let mut text = format!(
        "# bench-server {run_id}\n\n`{}`\n\nServer on CPUs {:?} (fc-server: {} worker thread(s); Redis: io-threads {}), load on CPUs {:?}, {} connections, {} keys preloaded. Same load, same run: {} round(s) of {} s per shape, the servers taking turns first; each cell is the median of its rounds (all rounds: `server-rounds.csv`).\n\n- **ops/s ratio** = fc-server ÷ Redis throughput. On a machine where the load has only as many cores as the server, the load generator can be the limit (then both servers show the same rate and the server CPU column is below 1.0).\n- **per-CPU ratio** = fc-server ÷ Redis in operations per server CPU-second (throughput ÷ the server's measured CPU use): the per-core efficiency, meaningful whichever side is the limit.\n- **fc ÷ in memory** = fc-server with this persistence ÷ fc-server in memory, same shape (with `--fsync none` among the settings).\n- Latency: per batch round trip (xtask load) or per request (redis-benchmark), µs.\n- Application patterns (value 64, pipeline = the batch of 16): **pubsub-N** = N subscribers on one channel, ops/s = messages delivered per second (the publisher's next batch waits for every delivery of the last); **queue-C** = C consumers looping on `BRPOP` while one producer `LPUSH`es, ops/s = items consumed per second; **stream-C** = C consumers of one consumer group looping on `XREADGROUP GROUP g cN COUNT 1 BLOCK 0 NOACK STREAMS s >` while one producer `XADD`s (`MAXLEN ~ 100000`), ops/s = entries consumed per second (see `xtask/src/server_bench/patterns.rs`).\n- Scripting (the xtask load, each command an `EVALSHA` of a script loaded with `SCRIPT LOAD`): **evalsha-get** = `return redis.call('GET', KEYS[1])` over the preloaded keys; **evalsha-rmw** = `local v = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], v) return v` on `{{user:N}}:counter` and `{{user:N}}:last` (one hash tag, one shard; N over the same keyspace), run at the first value size only.\n\n| load | persistence | value | mix | pipeline | fc-server ops/s | Redis ops/s | ops/s ratio | fc CPU | Redis CPU | per-CPU ratio | fc ÷ in memory | fc p50 / p99 | Redis p50 / p99 |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        report::command_line(),
        args.server_cores,
        args.server_cores.len(),
        args.server_cores.len(),
        args.load_cores,
        args.connections,
        args.keys,
        args.rounds,
        args.duration
    );
    for ((load, fsync, value, mix, pipeline), servers) in &table {
        let fc = servers.get("fc-server");
        let redis = servers.get("redis");
        let ops = |r: Option<&&Row>| r.map_or("-".to_string(), |r| format!("{:.0}", r.ops));
        let cpu = |r: Option<&&Row>| r.map_or("-".to_string(), |r| format!("{:.2}", r.cpu));
        let lat = |r: Option<&&Row>| {
            r.map_or("-".to_string(), |r| format!("{:.0} / {:.0}", r.p50, r.p99))
        };
        let (ratio, per_cpu) = match (fc, redis) {
            (Some(f), Some(r)) if r.ops > 0.0 => (
                format!("{:.2}x", f.ops / r.ops),
                format!(
                    "{:.2}x",
                    (f.ops / f.cpu.max(0.01)) / (r.ops / r.cpu.max(0.01))
                ),
            ),
            _ => ("-".into(), "-".into()),
        };
        let in_memory = table
            .get(&(*load, "none".to_string(), *value, *mix, *pipeline))
            .and_then(|servers| servers.get("fc-server"));
        let of_memory = match (fc, in_memory) {
            (Some(f), Some(m)) if fsync != "none" && m.ops > 0.0 => {
                format!("{:.2}x", f.ops / m.ops)
            }
            _ => "-".into(),
        };
        let _ = writeln!(
            text,
            "| {load} | {fsync} | {value} | {mix} | {pipeline} | {} | {} | {ratio} | {} | {} | {per_cpu} | {of_memory} | {} | {} |",
            ops(fc),
            ops(redis),
            cpu(fc),
            cpu(redis),
            lat(fc),
            lat(redis)
        );
    }
    fcnp_table(&mut text, &table);
    tls_table(&mut text, &table);
    memcached_table(&mut text, &table);
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

type SummaryTable<'a> =
    BTreeMap<(&'static str, String, usize, &'static str, usize), BTreeMap<String, &'a Row>>;

/// TLS against plaintext, shape by shape (`--tls`): each server's TLS port under the same
/// load as its plaintext port, and the servers against each other over TLS.
fn tls_table(text: &mut String, table: &SummaryTable<'_>) {
    let mut lines = Vec::new();
    for ((load, fsync, value, mix, pipeline), servers) in table {
        let plain = match *load {
            "xtask-tls" => "xtask",
            "redis-benchmark-tls" => "redis-benchmark",
            _ => continue,
        };
        let Some(plain) = table.get(&(plain, fsync.clone(), *value, *mix, *pipeline)) else {
            continue;
        };
        let per_cpu = |r: &Row| r.ops / r.cpu.max(0.01);
        let side = |server: &str| match (servers.get(server), plain.get(server)) {
            (Some(tls), Some(clear)) => format!(
                "{:.0} | {:.0} | {:.2}x | {:.2}x | {:.2}",
                tls.ops,
                clear.ops,
                tls.ops / clear.ops.max(1.0),
                per_cpu(tls) / per_cpu(clear).max(1.0),
                tls.cpu
            ),
            _ => "- | - | - | - | -".into(),
        };
        let against = match (servers.get("fc-server"), servers.get("redis")) {
            (Some(fc), Some(redis)) => format!(
                "{:.2}x | {:.2}x",
                fc.ops / redis.ops.max(1.0),
                per_cpu(fc) / per_cpu(redis).max(1.0)
            ),
            _ => "- | -".into(),
        };
        lines.push(format!(
            "| {load} | {fsync} | {value} | {mix} | {pipeline} | {} | {} | {against} |",
            side("fc-server"),
            side("redis")
        ));
    }
    push_table(
        text,
        "\n## TLS against plaintext\n\nEach server's TLS port (rustls for fc-server, OpenSSL for Redis; a certificate made for the run, no client certificates) under the same load as its plaintext port: `xtask-tls` is the xtask load through rustls (TLS 1.3), `redis-benchmark-tls` is `redis-benchmark --tls` (OpenSSL). **÷ plain** = TLS ÷ plaintext throughput; **per CPU** = the same in operations per server CPU-second (the server's own cost of TLS, whichever side is the limit); **fc ÷ Redis** = fc-server ÷ Redis, both over TLS.\n\n| load | persistence | value | mix | pipeline | fc TLS ops/s | fc plain ops/s | fc ÷ plain | fc per CPU | fc CPU (TLS) | Redis TLS ops/s | Redis plain ops/s | Redis ÷ plain | Redis per CPU | Redis CPU (TLS) | fc ÷ Redis (TLS) | fc ÷ Redis per CPU (TLS) |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        &lines,
    );
}

/// Appends a summary section (its heading and table head in `head`) with its `lines`, or
/// nothing when there are none.
fn push_table(text: &mut String, head: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    text.push_str(head);
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
}

/// fc-server's memcached port against memcached, shape by shape (`--memcached`).
fn memcached_table(text: &mut String, table: &SummaryTable<'_>) {
    let mut lines = Vec::new();
    for ((load, _, value, mix, pipeline), servers) in table {
        if !load.starts_with("xtask-memcached") {
            continue;
        }
        let (Some(fc), Some(mc)) = (servers.get("fc-server"), servers.get("memcached")) else {
            continue;
        };
        let per_cpu = |r: &Row| r.ops / r.cpu.max(0.01);
        lines.push(format!(
            "| {load} | {value} | {mix} | {pipeline} | {:.0} | {:.0} | {:.2}x | {:.2} | {:.2} | {:.2}x | {:.0} / {:.0} | {:.0} / {:.0} |",
            fc.ops,
            mc.ops,
            fc.ops / mc.ops.max(1.0),
            fc.cpu,
            mc.cpu,
            per_cpu(fc) / per_cpu(mc).max(1.0),
            fc.p50,
            fc.p99,
            mc.p50,
            mc.p99,
        ));
    }
    push_table(
        text,
        "\n## The memcached protocol: fc-server against memcached\n\nThe same closed-loop load speaking memcached's text protocol to fc-server's memcached port and to Debian's `memcached -t <server cores>` on the same pinned cores, each preloaded with the same keys: `xtask-memcached` sends `pipeline` `get`/`set` commands per batch, `xtask-memcached-multiget` one `get` of `pipeline` keys. **per-CPU** = fc-server ÷ memcached in operations per server CPU-second.\n\n| load | value | mix | pipeline / keys | fc-server ops/s | memcached ops/s | ratio | fc CPU | memcached CPU | per-CPU | fc p50 / p99 | memcached p50 / p99 |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        &lines,
    );
}

/// FCNP against RESP through fc-server, shape by shape (`--fcnp`): the same closed-loop load
/// speaking each protocol, and fc-client.
fn fcnp_table(text: &mut String, table: &SummaryTable<'_>) {
    let fc = |load: &'static str, fsync: &str, value: usize, mix: &'static str, p: usize| {
        table
            .get(&(load, fsync.to_string(), value, mix, p))
            .and_then(|servers| servers.get("fc-server"))
            .copied()
    };
    let mut lines = Vec::new();
    for (_, fsync, value, mix, pipeline) in table.keys().filter(|k| k.0 == "xtask-fcnp") {
        let (Some(fcnp), Some(resp)) = (
            fc("xtask-fcnp", fsync, *value, mix, *pipeline),
            fc("xtask", fsync, *value, mix, *pipeline),
        ) else {
            continue;
        };
        let client = fc("fc-client", fsync, *value, mix, *pipeline);
        let shared = fc("fc-client-shared", fsync, *value, mix, *pipeline);
        let per_cpu = |r: &Row| r.ops / r.cpu.max(0.01);
        lines.push(format!(
            "| {fsync} | {value} | {mix} | {pipeline} | {:.0} | {:.0} | {:.2}x | {:.2}x | {} | {} | {} |",
            resp.ops,
            fcnp.ops,
            fcnp.ops / resp.ops.max(1.0),
            per_cpu(fcnp) / per_cpu(resp).max(1.0),
            client.map_or("-".into(), |c| format!("{:.0}", c.ops)),
            client.map_or("-".into(), |c| format!("{:.2}x", c.ops / resp.ops.max(1.0))),
            shared.map_or("-".into(), |c| format!("{:.0} ({:.2}x)", c.ops, c.ops / resp.ops.max(1.0))),
        ));
    }
    push_table(
        text,
        "\n## FCNP against RESP, both through fc-server\n\nThe same closed-loop load (connections, pipeline, keys) speaking RESP (`xtask`) and FCNP (`xtask-fcnp`), and FCNP's Rust client with its pipelines, a client per connection (`fc-client`) or one client shared by all the load's tasks, multiplexing their requests on one connection (`fc-client-shared`: the same number of callers, each with `pipeline` requests in flight, but their requests leave together). **per-CPU** = FCNP ÷ RESP in operations per server CPU-second.\n\n| persistence | value | mix | pipeline | RESP ops/s | FCNP ops/s | FCNP ÷ RESP | per-CPU | fc-client ops/s | fc-client ÷ RESP | fc-client-shared ops/s (÷ RESP) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        &lines,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcnp_templates_are_whole_frames_over_the_keyspace() {
        let mut state = 7u64;
        for ttl in [None, Some(30)] {
            let mut t = Template::fcnp(Mix::Mixed, b"value", 40, ttl, &mut state);
            t.randomize(1000, &mut state);
            let mut wire = bytes::BytesMut::from(&t.bytes[..]);
            let decoder = fc_fcnp::RequestDecoder::default();
            let mut n = 0;
            while let Some(request) = decoder.decode(&mut wire).unwrap() {
                let (command, _) = request.into_command().unwrap();
                let key = std::str::from_utf8(&command[1]).unwrap();
                let number: u64 = key.strip_prefix("key:").unwrap().parse().unwrap();
                assert!(number < 1000, "{key}");
                if &command[0][..] == b"SET" {
                    assert_eq!(&command[2][..], b"value");
                    assert_eq!(command.len(), if ttl.is_some() { 5 } else { 3 });
                }
                n += 1;
            }
            assert_eq!(n, 40);
        }
    }

    #[test]
    fn fcnp_replies_are_counted_only_when_complete_and_errors_fail() {
        use fc_fcnp::{Value, encode_value_response};
        let mut buf = bytes::BytesMut::new();
        encode_value_response(&mut buf, 1, &Value::Status("OK".into()));
        encode_value_response(&mut buf, 2, &Value::Bulk("abc".into()));
        encode_value_response(&mut buf, 3, &Value::Nil);
        let whole = buf.len();
        encode_value_response(&mut buf, 4, &Value::Bulk("partial".into()));
        let cut = &buf[..buf.len() - 2];
        assert_eq!(count_fcnp_replies(cut).unwrap(), (3, whole));
        let mut err = bytes::BytesMut::new();
        encode_value_response(&mut err, 1, &Value::Error("OOM command not allowed".into()));
        let text = count_fcnp_replies(&err).unwrap_err().to_string();
        assert!(text.contains("OOM"), "{text}");
    }

    #[test]
    fn replies_are_counted_only_when_complete() {
        let buf = b"+OK\r\n$3\r\nabc\r\n$-1\r\n:5\r\n$5\r\nab";
        assert_eq!(count_replies(buf), (4, 23));
        assert_eq!(count_replies(b"$3\r\nab"), (0, 0));
        assert_eq!(count_replies(b"+O"), (0, 0));
    }

    #[test]
    fn a_reply_of_another_kind_fails_the_load_with_its_text() {
        let kinds = Mix::EvalRmw.reply_kinds();
        assert_eq!(
            count_replies_of(b":5\r\n$3\r\nabc\r\n$-1\r\n:6\r\n$3\r\nab", kinds).unwrap(),
            (4, 22)
        );
        let error = count_replies_of(b":5\r\n-ERR unknown command\r\n:6\r\n", kinds).unwrap_err();
        assert!(
            error.to_string().contains("-ERR unknown command"),
            "{error}"
        );
        assert!(count_replies_of(b"+OK\r\n", kinds).is_err());
        assert!(count_replies_of(b"+OK\r\n", Mix::Set.reply_kinds()).is_ok());
    }

    /// The 12-digit numbers after each `prefix` in `bytes`.
    fn numbers_after(bytes: &[u8], prefix: &[u8]) -> Vec<u64> {
        let text = String::from_utf8_lossy(bytes);
        let prefix = String::from_utf8_lossy(prefix);
        text.match_indices(prefix.as_ref())
            .map(|(at, _)| {
                let digits = &text[at + prefix.len()..at + prefix.len() + 12];
                digits.parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn evalsha_templates_are_whole_commands_over_the_keyspace() {
        let mut state = 7u64;
        let mut get = Template::new(Mix::EvalGet, b"", 16, None, &mut state);
        get.randomize(1000, &mut state);
        // `*4` and four bulks a command.
        assert_eq!(count_replies(&get.bytes), (16 * 5, get.bytes.len()));
        assert!(
            get.bytes
                .starts_with(b"*4\r\n$7\r\nEVALSHA\r\n$40\r\nd3c21d0c2b9ca22f82737626a27bcaf5d288f99f\r\n$1\r\n1\r\n$16\r\nkey:")
        );
        let keys = numbers_after(&get.bytes, b"key:");
        assert_eq!(keys.len(), 16);
        assert!(keys.iter().all(|&k| k < 1000), "{keys:?}");
        assert!(keys.iter().any(|&k| k != keys[0]), "{keys:?}");

        let mut rmw = Template::new(Mix::EvalRmw, b"", 16, None, &mut state);
        rmw.randomize(1000, &mut state);
        // `*6` and six bulks a command.
        assert_eq!(count_replies(&rmw.bytes), (16 * 7, rmw.bytes.len()));
        let counters = numbers_after(&rmw.bytes, b"{user:");
        assert_eq!(counters.len(), 32);
        for pair in counters.chunks(2) {
            assert_eq!(pair[0], pair[1], "one hash tag per command: {counters:?}");
            assert!(pair[0] < 1000);
        }
        assert!(counters.iter().any(|&k| k != counters[0]), "{counters:?}");
        let text = String::from_utf8_lossy(&rmw.bytes);
        assert_eq!(text.matches("}:counter\r\n$24\r\n{user:").count(), 16);
        assert_eq!(text.matches("}:last\r\n$1\r\n1\r\n").count(), 16);
        assert_eq!(text.matches(Script::Rmw.sha1()).count(), 16);
    }

    #[test]
    fn a_row_is_each_fields_median_over_its_rounds() {
        let s = |ops, p50, p99, cpu| Sample { ops, p50, p99, cpu };
        let m = Sample::median(&[
            s(100.0, 9.0, 50.0, 0.9),
            s(300.0, 7.0, 90.0, 1.0),
            s(200.0, 8.0, 70.0, 0.8),
        ]);
        assert_eq!((m.ops, m.p50, m.p99, m.cpu), (200.0, 8.0, 70.0, 0.9));
        let even = Sample::median(&[s(100.0, 1.0, 2.0, 0.5), s(300.0, 3.0, 4.0, 1.0)]);
        assert_eq!(
            (even.ops, even.p50, even.p99, even.cpu),
            (200.0, 2.0, 3.0, 0.75)
        );
        let one = Sample::median(&[s(5.0, 1.0, 2.0, 0.5)]);
        assert_eq!(one.ops, 5.0);
    }
}
