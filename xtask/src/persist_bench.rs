//! Persistence benchmarks, each against its plain baseline in the same run:
//!
//! - `cargo xtask bench-wal`: fc-wal append bandwidth against `dd` writing the same number of
//!   bytes to the same file system (`wal.csv`, `wal-summary.md`). Both end with `fdatasync`, so
//!   both rates include getting the bytes to disk; the log runs under `everysec` (the default),
//!   with the write buffer the server uses (64 KiB, one `write(2)` per buffer) and with the
//!   embedded default (one `write(2)` per frame). A fourth row writes pre-filled 64 KiB
//!   buffers with the log's `fdatasync` cadence (every 64 MiB segment), separating the cost of
//!   encoding frames from the file system's. `dd` syncs once at the end, so how fast it looks
//!   depends on the size against the kernel's dirty-page limits: below them it runs at memory
//!   speed until the final sync; above them writeback throttling slows it below a writer that
//!   syncs as it goes.
//! - `cargo xtask bench-restart`: time from spawning the server to its first `+PONG` with
//!   `--keys` keys on disk — fc-server from a snapshot plus a WAL tail of `--tail` keys, Redis
//!   from an RDB of the same keys (`restart.csv`, `restart-summary.md`). Both servers are pinned
//!   to the same CPUs; each server's own log line (fc-server's `loaded ... in X s`, Redis's `DB
//!   loaded from disk: X seconds`) is recorded beside the wall time, and the key count is
//!   checked after each restart.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fc_shard::Mutation;
use fc_wal::{FsyncPolicy, ShardLog, WalConfig};

use crate::bench::report;
use crate::server_bench::{
    build_fc_server, free_port, key, pin_self, push_command, run_dir, set_keys, which,
};

#[derive(clap::Args, Debug)]
pub(crate) struct WalBenchArgs {
    /// MiB written per row (the log and `dd` write the same amount).
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Value sizes in bytes (16-byte keys, `SET` frames).
    #[arg(long, value_delimiter = ',', default_value = "64,1024,16384")]
    values: Vec<usize>,
    /// Repetitions per row (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// A short smoke (CI): 32 MiB, one repetition.
    #[arg(long)]
    quick: bool,
    /// Where the files are written (default: the output directory, i.e. the repository's disk).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Output directory (default `bench-matrix/<run-id>`).
    #[arg(long)]
    out: Option<PathBuf>,
}

struct WalRow {
    value: usize,
    writer: &'static str,
    bytes: u64,
    seconds: f64,
    /// `SET`s appended (0 for the writers that are not the log).
    mutations: u64,
    /// User and system CPU seconds of this process over the row (zero for `dd`).
    cpu: (f64, f64),
}

/// This process's (user, system) CPU seconds so far.
fn own_cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0) as f64
    };
    let hz = rustix::param::clock_ticks_per_second() as f64;
    (tick(11) / hz, tick(12) / hz)
}

fn cpu_since(before: (f64, f64)) -> (f64, f64) {
    let now = own_cpu();
    (now.0 - before.0, now.1 - before.1)
}

pub(crate) fn bench_wal(mut args: WalBenchArgs) -> anyhow::Result<()> {
    if args.quick {
        args.mib = 32;
        args.repeat = 1;
    }
    if !which("dd") {
        bail!("bench-wal needs dd (coreutils)");
    }
    let (_, run_id, out) = run_dir(args.out.as_deref())?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| out.join("wal-bench-data"));
    let target = args.mib << 20;
    let mut rows = Vec::new();
    for &value in &args.values {
        let mut samples: Vec<Vec<WalRow>> = (0..4).map(|_| Vec::new()).collect();
        for _ in 0..args.repeat.max(1) {
            // Interleaved so drift in the disk's speed touches every writer alike.
            samples[0].push(wal_once(
                &dir,
                value,
                target,
                64 << 10,
                "fc-wal (64 KiB buffer)",
            )?);
            samples[1].push(dd_once(&dir, value, target)?);
            samples[2].push(wal_once(
                &dir,
                value,
                target,
                0,
                "fc-wal (write per frame)",
            )?);
            samples[3].push(plain_once(&dir, value, target)?);
        }
        for mut s in samples {
            s.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let median = s.swap_remove(s.len() / 2);
            eprintln!(
                "bench-wal: {}B {}: {:.0} MiB/s ({} bytes in {:.3} s; CPU user {:.2} s, system {:.2} s)",
                value,
                median.writer,
                mib_per_s(&median),
                median.bytes,
                median.seconds,
                median.cpu.0,
                median.cpu.1
            );
            rows.push(median);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut csv = String::from(
        "run_id,value_bytes,writer,bytes,mutations,seconds,mib_per_s,cpu_user_s,cpu_system_s\n",
    );
    for r in &rows {
        let _ = writeln!(
            csv,
            "{run_id},{},{},{},{},{:.6},{:.1},{:.2},{:.2}",
            r.value,
            r.writer,
            r.bytes,
            r.mutations,
            r.seconds,
            mib_per_s(r),
            r.cpu.0,
            r.cpu.1
        );
    }
    std::fs::write(out.join("wal.csv"), csv)?;
    let mut md = format!(
        "# bench-wal {run_id}\n\n`{}`\n\n{} MiB per row, median of {}; `SET` frames with 16-byte keys; the log under `everysec` \
         with a final `fdatasync`; `dd if=/dev/zero bs=1M conv=fdatasync` of the same bytes into the same directory \
         (one `fdatasync` at the end); `plain 64 KiB writes`: pre-filled buffers with the log's cadence of one `fdatasync` per 64 MiB.\n\n\
         CPU: this process's user / system seconds over the row (`dd` runs in its own process: not counted).\n\n\
         | value | writer | MiB/s | ÷ dd | ÷ plain | SETs/s | CPU user / system (s) |\n|---:|---|---:|---:|---:|---:|---:|\n",
        report::command_line(),
        args.mib,
        args.repeat.max(1)
    );
    for r in &rows {
        let dd = rows
            .iter()
            .find(|d| d.value == r.value && d.writer == "dd")
            .map_or(f64::NAN, mib_per_s);
        let plain = rows
            .iter()
            .find(|d| d.value == r.value && d.writer == "plain 64 KiB writes")
            .map_or(f64::NAN, mib_per_s);
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.2}x | {:.2}x | {} | {:.2} / {:.2} |",
            r.value,
            r.writer,
            mib_per_s(r),
            mib_per_s(r) / dd,
            mib_per_s(r) / plain,
            if r.mutations > 0 {
                format!("{:.0}", r.mutations as f64 / r.seconds)
            } else {
                "-".into()
            },
            r.cpu.0,
            r.cpu.1
        );
    }
    std::fs::write(out.join("wal-summary.md"), md)?;
    report::write_meta(&out, &run_id, &report::command_line(), 0)?;
    eprintln!("bench-wal: wrote {}", out.join("wal.csv").display());
    Ok(())
}

/// `dir`, emptied: each writer starts from nothing.
fn fresh_dir(dir: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    Ok(())
}

fn mib_per_s(r: &WalRow) -> f64 {
    r.bytes as f64 / f64::from(1 << 20) / r.seconds
}

/// Appends `SET` frames to one log until `target` bytes are written, then syncs.
fn wal_once(
    dir: &Path,
    value: usize,
    target: u64,
    buffer: usize,
    writer: &'static str,
) -> anyhow::Result<WalRow> {
    fresh_dir(dir)?;
    let config = WalConfig {
        fsync: FsyncPolicy::EverySec,
        write_buffer_bytes: buffer,
        ..WalConfig::new(dir)
    };
    let mut log = ShardLog::open(&config, 0, 1, 1)?;
    let payload = vec![0xAB; value];
    let keys: Vec<Vec<u8>> = (0..4096u64).map(|n| key(n).into_bytes()).collect();
    let cpu = own_cpu();
    let start = Instant::now();
    let mut mutations = 0u64;
    while log.stats().bytes < target {
        let m = Mutation::Set {
            key: &keys[(mutations % 4096) as usize],
            value: &payload,
            expire_at_ms: None,
        };
        log.append(&m)?;
        mutations += 1;
    }
    log.sync()?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_since(cpu);
    let bytes = log.stats().bytes;
    drop(log);
    let _ = std::fs::remove_dir_all(dir);
    Ok(WalRow {
        value,
        writer,
        bytes,
        seconds,
        mutations,
        cpu,
    })
}

/// The log's syscall pattern without the log: one pre-filled 64 KiB buffer written over and
/// over, `fdatasync` at every 64 MiB (where the log rotates) and at the end — what the
/// buffered log would cost if encoding frames were free.
fn plain_once(dir: &Path, value: usize, target: u64) -> anyhow::Result<WalRow> {
    fresh_dir(dir)?;
    let buffer = vec![0xABu8; 64 << 10];
    let segment = 64u64 << 20;
    let cpu = own_cpu();
    let start = Instant::now();
    let mut written = 0u64;
    let mut file = std::fs::File::create(dir.join("plain-0"))?;
    while written < target {
        if written > 0 && written.is_multiple_of(segment) {
            file.sync_data()?;
            file = std::fs::File::create(dir.join(format!("plain-{}", written / segment)))?;
        }
        file.write_all(&buffer)?;
        written += buffer.len() as u64;
    }
    file.sync_data()?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_since(cpu);
    drop(file);
    let _ = std::fs::remove_dir_all(dir);
    Ok(WalRow {
        value,
        writer: "plain 64 KiB writes",
        bytes: written,
        seconds,
        mutations: 0,
        cpu,
    })
}

/// `dd` writing `target` bytes (rounded up to whole MiB) with a final `fdatasync`.
fn dd_once(dir: &Path, value: usize, target: u64) -> anyhow::Result<WalRow> {
    fresh_dir(dir)?;
    let count = target.div_ceil(1 << 20);
    let file = dir.join("dd.bin");
    let start = Instant::now();
    let status = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .args([
            "bs=1M",
            &format!("count={count}"),
            "conv=fdatasync",
            "status=none",
        ])
        .status()
        .context("running dd")?;
    let seconds = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("dd failed");
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(WalRow {
        value,
        writer: "dd",
        bytes: count << 20,
        seconds,
        mutations: 0,
        cpu: (0.0, 0.0),
    })
}

#[derive(clap::Args, Debug)]
pub(crate) struct RestartArgs {
    /// Keys on disk at restart (`key:NNNNNNNNNNNN`, 16 bytes).
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Of those, how many fc-server finds in the WAL after its snapshot (the rest are in it).
    #[arg(long, default_value_t = 100_000)]
    tail: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 64)]
    value: usize,
    /// Restarts per server (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// CPUs both servers run on (fc-server gets one worker thread per CPU).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    server_cores: Vec<usize>,
    /// Servers: fc-server, redis (skipped with a note when redis-server is not installed).
    #[arg(long, value_delimiter = ',', default_value = "fc-server,redis")]
    servers: Vec<String>,
    /// Keep the data directories (under the output directory) for inspection.
    #[arg(long)]
    keep: bool,
    /// A short smoke (CI): 20k keys, 2k in the tail, one restart.
    #[arg(long)]
    quick: bool,
    /// Output directory (default `bench-matrix/<run-id>`).
    #[arg(long)]
    out: Option<PathBuf>,
}

struct RestartRow {
    server: String,
    wall: f64,
    reported: Option<f64>,
    keys: u64,
    disk_bytes: u64,
}

pub(crate) fn bench_restart(mut args: RestartArgs) -> anyhow::Result<()> {
    if args.quick {
        args.keys = 20_000;
        args.tail = 2_000;
        args.repeat = 1;
    }
    if args.tail > args.keys {
        bail!("--tail ({}) exceeds --keys ({})", args.tail, args.keys);
    }
    let (root, run_id, out) = run_dir(args.out.as_deref())?;
    let fc_binary = build_fc_server(&root, "bench-restart")?;
    let mut rows = Vec::new();
    for server in &args.servers {
        if server == "redis" && !which("redis-server") {
            eprintln!("bench-restart: redis-server is not installed; its rows are skipped");
            continue;
        }
        let data = out.join(format!("restart-data-{server}"));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data)?;
        prepare(server, &fc_binary, &data, &args)?;
        let disk_bytes = dir_bytes(&data);
        let mut samples = Vec::new();
        for round in 0..args.repeat.max(1) {
            let log = out.join(format!("restart-{server}-{round}.log"));
            let process = spawn(server, &fc_binary, &data, &args, &log)?;
            let wall = process.ready;
            let keys = dbsize(&process.addr)?;
            process.kill();
            let reported = reported_seconds(server, &log);
            eprintln!(
                "bench-restart: {server}: ready in {wall:.3} s (its log: {}), {keys} keys, {disk_bytes} bytes on disk",
                reported.map_or("-".into(), |s| format!("{s:.3} s"))
            );
            if keys != args.keys {
                bail!(
                    "{server} came back with {keys} keys, expected {}",
                    args.keys
                );
            }
            samples.push(RestartRow {
                server: server.clone(),
                wall,
                reported,
                keys,
                disk_bytes,
            });
        }
        samples.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        rows.push(samples.swap_remove(samples.len() / 2));
        if !args.keep {
            let _ = std::fs::remove_dir_all(&data);
        }
    }
    let mut csv =
        String::from("run_id,server,keys,tail,value_bytes,disk_bytes,ready_seconds,log_seconds\n");
    for r in &rows {
        let _ = writeln!(
            csv,
            "{run_id},{},{},{},{},{},{:.6},{}",
            r.server,
            r.keys,
            if r.server == "fc-server" {
                args.tail
            } else {
                0
            },
            args.value,
            r.disk_bytes,
            r.wall,
            r.reported.map_or(String::new(), |s| format!("{s:.6}"))
        );
    }
    std::fs::write(out.join("restart.csv"), csv)?;
    let redis = rows.iter().find(|r| r.server == "redis").map(|r| r.wall);
    let mut md = format!(
        "# bench-restart {run_id}\n\n`{}`\n\n{} keys of {} bytes; fc-server: snapshot of {} keys + WAL tail of {}; Redis: RDB of all. \
         Ready = spawn to first `+PONG` (median of {}); both pinned to CPUs {:?}.\n\n\
         | server | on disk (bytes) | ready (s) | its own log (s) | Redis ÷ this (speed-up) |\n|---|---:|---:|---:|---:|\n",
        report::command_line(),
        args.keys,
        args.value,
        args.keys - args.tail,
        args.tail,
        args.repeat.max(1),
        args.server_cores
    );
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {} | {} |",
            r.server,
            r.disk_bytes,
            r.wall,
            r.reported.map_or("-".into(), |s| format!("{s:.3}")),
            redis.map_or("-".into(), |w| format!("{:.2}x", w / r.wall))
        );
    }
    std::fs::write(out.join("restart-summary.md"), md)?;
    report::write_meta(&out, &run_id, &report::command_line(), 0)?;
    eprintln!("bench-restart: wrote {}", out.join("restart.csv").display());
    Ok(())
}

/// Fills `data`: fc-server gets a snapshot of the first keys and a WAL tail of the rest;
/// Redis an RDB of all of them.
fn prepare(server: &str, fc_binary: &Path, data: &Path, args: &RestartArgs) -> anyhow::Result<()> {
    let log = data.with_extension("prepare.log");
    let process = spawn(server, fc_binary, data, args, &log)?;
    if server == "fc-server" {
        set_range(&process.addr, 0, args.keys - args.tail, args.value)?;
        command(&process.addr, &[b"SAVE"], b"+OK")?;
        set_range(&process.addr, args.keys - args.tail, args.keys, args.value)?;
        // everysec: the tail was written to the OS before each reply; a kill now loses none
        // of it, and recovery replays it from the log.
        process.kill();
    } else {
        set_range(&process.addr, 0, args.keys, args.value)?;
        command(&process.addr, &[b"SAVE"], b"+OK")?;
        process.kill();
    }
    let _ = std::fs::remove_file(&log);
    Ok(())
}

struct Running {
    child: Child,
    addr: String,
    ready: f64,
}

impl Running {
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `server` on `data` (pinned to the server CPUs), its output to `log`, and waits for
/// its first `+PONG` (polling every millisecond).
fn spawn(
    server: &str,
    fc_binary: &Path,
    data: &Path,
    args: &RestartArgs,
    log: &Path,
) -> anyhow::Result<Running> {
    let port = free_port()?;
    let mut cmd = if server == "fc-server" {
        let mut cmd = Command::new(fc_binary);
        cmd.args(["--bind", &format!("127.0.0.1:{port}")])
            .args(["--threads", &args.server_cores.len().to_string()])
            .args(["--save", "", "--appendfsync", "everysec"])
            .arg("--data-dir")
            .arg(data);
        cmd
    } else {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .args(["--daemonize", "no", "--dbfilename", "dump.rdb"])
            .arg("--dir")
            .arg(data);
        cmd
    };
    let output = std::fs::File::create(log)?;
    cmd.stdout(output.try_clone()?).stderr(output);
    let before = crate::bench::driver::allowed_cpus();
    pin_self(&args.server_cores);
    let start = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {server}"));
    pin_self(&before);
    let mut child = child?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = start + Duration::from_secs(300);
    loop {
        if let Ok(mut s) = TcpStream::connect(&addr) {
            let mut reply = [0u8; 7];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read_exact(&mut reply).is_ok()
                && &reply == b"+PONG\r\n"
            {
                break;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "{server} exited ({status}) before answering; see {}",
                log.display()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("{server} did not answer PING on {addr}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let ready = start.elapsed().as_secs_f64();
    Ok(Running { child, addr, ready })
}

/// SETs keys `from..to` in pipelines of 512. Values are random printable bytes (a fixed
/// pattern would let Redis's LZF compression shrink the RDB to a fraction of real data).
fn set_range(addr: &str, from: u64, to: u64, value: usize) -> anyhow::Result<()> {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/";
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ from;
    set_keys(addr, from..to, &mut vec![0u8; value], 512, |value| {
        for b in value {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *b = ALPHABET[(state >> 58) as usize];
        }
    })
}

/// Sends one command and checks the reply starts with `expect`.
fn command(addr: &str, parts: &[&[u8]], expect: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    let mut buf = Vec::new();
    push_command(&mut buf, parts);
    s.write_all(&buf)?;
    let mut reader = BufReader::new(s);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if !line.starts_with(expect) {
        bail!(
            "{} answered {:?}",
            String::from_utf8_lossy(parts[0]),
            String::from_utf8_lossy(&line)
        );
    }
    Ok(line)
}

fn dbsize(addr: &str) -> anyhow::Result<u64> {
    let line = command(addr, &[b"DBSIZE"], b":")?;
    let text = String::from_utf8_lossy(&line[1..]);
    text.trim()
        .parse()
        .with_context(|| format!("DBSIZE answered {text:?}"))
}

/// The load time the server itself logged.
fn reported_seconds(server: &str, log: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(log).ok()?;
    if server == "fc-server" {
        // "<time> INFO loaded N keys from ... in X s"
        let line = text
            .lines()
            .find(|l| l.contains(" loaded ") && l.contains(" keys from "))?;
        let at = line.rfind(" in ")?;
        line[at + 4..].trim_end_matches(" s").trim().parse().ok()
    } else {
        // "DB loaded from disk: X seconds"
        let line = text.lines().find(|l| l.contains("DB loaded from disk"))?;
        let at = line.find("disk: ")?;
        line[at + 6..].split_whitespace().next()?.parse().ok()
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
