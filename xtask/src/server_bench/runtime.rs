//! `cargo xtask bench-runtime`: the A/B of fc-server's worker runtimes. tokio, the default, is
//! measured against monoio (io_uring) with each of its reply writers (`inline`, `split`,
//! `writev`). It writes `bench-matrix/<run>/runtime.csv` and `runtime-summary.md`.
//!
//! Every runtime runs in one fc-server binary, built with the `monoio` feature and started
//! once per runtime (`--use-monoio`, `--monoio-writer`). All of them run pinned to
//! `--server-cores` and are loaded on `--load-cores` with bench-server's closed-loop xtask load
//! (`connections` connections, `pipeline` commands per batch, keys preloaded). They take turns
//! first from round to round, and a row reports the median of its rounds. **vs tokio** is the
//! throughput ratio to tokio in the same run; **per-CPU** is the ratio in operations per server
//! CPU-second.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::bail;

use super::repl::{Proc, fc};
use super::{Load, Mix, Sample, ServerBenchArgs, build_fc_server_with, preload, run_dir, run_load};
use crate::bench::report;

#[derive(clap::Args, Debug)]
pub(crate) struct RuntimeBenchArgs {
    /// Seconds measured per shape and runtime in each round.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Rounds per shape (the runtimes take turns first; a row is the median).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Runtimes: tokio, monoio-inline, monoio-split, monoio-writev (the first is the base of
    /// the ratios).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tokio,monoio-inline,monoio-split,monoio-writev"
    )]
    runtimes: Vec<String>,
    /// Value sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "64,4096")]
    values: Vec<usize>,
    /// Mixes: get, set, 80-20.
    #[arg(long, value_delimiter = ',', default_value = "get,set")]
    mixes: Vec<String>,
    /// Commands per batch.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    pipelines: Vec<usize>,
    /// Client connections.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Distinct keys (preloaded).
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// CPUs of the server (one worker thread each).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    server_cores: Vec<usize>,
    /// CPUs of the load.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    load_cores: Vec<usize>,
    /// A seconds-long smoke (CI): 64-byte values, GET and SET at pipelines 1 and 16, one 1 s
    /// round.
    #[arg(long)]
    quick: bool,
    /// Output directory (default `bench-matrix/<run>`).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// fc-server's flags for `runtime`.
fn runtime_flags(runtime: &str) -> anyhow::Result<Vec<String>> {
    Ok(match runtime {
        "tokio" => vec![],
        "monoio-inline" | "monoio-split" | "monoio-writev" => vec![
            "--use-monoio".into(),
            "true".into(),
            "--monoio-writer".into(),
            runtime.trim_start_matches("monoio-").into(),
        ],
        other => bail!(
            "bench-runtime: unknown runtime {other} (tokio, monoio-inline, monoio-split, monoio-writev)"
        ),
    })
}

fn load_args(args: &RuntimeBenchArgs) -> ServerBenchArgs {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        inner: ServerBenchArgs,
    }
    let mut load = <Wrap as clap::Parser>::parse_from(["bench-runtime"]).inner;
    load.duration = args.duration;
    load.warmup = if args.quick { 0.2 } else { 1.0 };
    load.connections = args.connections;
    load.keys = args.keys;
    load.server_cores.clone_from(&args.server_cores);
    load.load_cores.clone_from(&args.load_cores);
    load
}

/// One published row.
struct Row {
    runtime: String,
    value: usize,
    mix: &'static str,
    pipeline: usize,
    sample: Sample,
    /// Throughput ÷ the first runtime's, same shape.
    ratio: f64,
    /// Operations per server CPU-second ÷ the first runtime's.
    per_cpu: f64,
}

pub(crate) fn bench_runtime(mut args: RuntimeBenchArgs) -> anyhow::Result<()> {
    if args.quick {
        args.duration = 1.0;
        args.rounds = 1;
        args.values = vec![64];
        args.mixes = vec!["get".into(), "set".into()];
        args.pipelines = vec![1, 16];
        args.keys = 10_000;
    }
    args.rounds = args.rounds.max(1);
    if args.runtimes.is_empty() {
        bail!("bench-runtime: no runtime to measure");
    }
    let flags: Vec<Vec<String>> = args
        .runtimes
        .iter()
        .map(|r| runtime_flags(r))
        .collect::<anyhow::Result<_>>()?;
    let mixes: Vec<Mix> = args
        .mixes
        .iter()
        .map(|m| Mix::parse(m))
        .collect::<anyhow::Result<_>>()?;
    let (root, run_id, out) = run_dir(args.out.as_deref())?;
    let bin = build_fc_server_with(&root, "bench-runtime", &["monoio"])?;
    let load = load_args(&args);
    let mut rows = Vec::new();
    for &value in &args.values {
        let servers: Vec<Proc> = flags
            .iter()
            .map(|f| fc(&bin, &args.server_cores, f))
            .collect::<anyhow::Result<_>>()?;
        for server in &servers {
            preload(&server.addr, args.keys, value, None)?;
        }
        for &mix in &mixes {
            for &pipeline in &args.pipelines {
                let mut samples: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
                for round in 0..args.rounds {
                    for turn in 0..servers.len() {
                        let i = (round + turn) % servers.len();
                        let server = &servers[i];
                        let sample = run_load(
                            (&server.addr, server.child.id()),
                            &load,
                            mix,
                            value,
                            pipeline,
                            Load::Resp,
                        )?;
                        eprintln!(
                            "bench-runtime: {} {value}B {} P{pipeline} round {}: {:.0} ops/s, server CPU {:.2}",
                            args.runtimes[i],
                            mix.name(),
                            round + 1,
                            sample.ops,
                            sample.cpu
                        );
                        samples.entry(i).or_default().push(sample);
                    }
                }
                let medians: Vec<Sample> = (0..servers.len())
                    .map(|i| Sample::median(&samples[&i]))
                    .collect();
                let base = &medians[0];
                let per = |s: &Sample| if s.cpu > 0.0 { s.ops / s.cpu } else { 0.0 };
                for (i, sample) in medians.iter().enumerate() {
                    rows.push(Row {
                        runtime: args.runtimes[i].clone(),
                        value,
                        mix: mix.name(),
                        pipeline,
                        ratio: sample.ops / base.ops,
                        per_cpu: per(sample) / per(base).max(f64::MIN_POSITIVE),
                        sample: *sample,
                    });
                }
            }
        }
    }
    write(&out, &run_id, &args, &rows)?;
    eprintln!(
        "bench-runtime: wrote {}",
        out.join("runtime-summary.md").display()
    );
    Ok(())
}

fn write(out: &Path, run_id: &str, args: &RuntimeBenchArgs, rows: &[Row]) -> anyhow::Result<()> {
    let mut csv = String::from(
        "runtime,value,mix,pipeline,ops_per_sec,server_cpu_cores,p50_us,p99_us,ratio,per_cpu_ratio\n",
    );
    for r in rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.0},{:.3},{:.1},{:.1},{:.3},{:.3}",
            r.runtime,
            r.value,
            r.mix,
            r.pipeline,
            r.sample.ops,
            r.sample.cpu,
            r.sample.p50,
            r.sample.p99,
            r.ratio,
            r.per_cpu
        );
    }
    std::fs::write(out.join("runtime.csv"), csv)?;
    let mut md = format!(
        "# bench-runtime {run_id}\n\nfc-server on CPUs {:?} ({} worker thread(s)), load on CPUs {:?}; {} connections, {} keys preloaded; {} s per shape and runtime, median of {} round(s), the runtimes taking turns first. **vs {}** = throughput ratio; **per-CPU** = ratio of operations per server CPU-second.\n\n| runtime | value | mix | pipeline | ops/s | server CPU | p50 / p99 µs | vs {} | per-CPU |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n",
        args.server_cores,
        args.server_cores.len(),
        args.load_cores,
        args.connections,
        args.keys,
        args.duration,
        args.rounds,
        args.runtimes[0],
        args.runtimes[0],
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.0} / {:.0} | {:.2}x | {:.2}x |",
            r.runtime,
            r.value,
            r.mix,
            r.pipeline,
            r.sample.ops,
            r.sample.cpu,
            r.sample.p50,
            r.sample.p99,
            r.ratio,
            r.per_cpu
        );
    }
    std::fs::write(out.join("runtime-summary.md"), &md)?;
    print!("{md}");
    report::write_meta(out, run_id, &report::command_line(), 0)?;
    Ok(())
}
