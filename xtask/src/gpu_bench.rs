//! `cargo xtask bench-gpu`: host↔device throughput of session batches of KV-cache chunks
//! (fc-gpu's `gpu_bench` example, built with `--features cuda,unsafe`), written with the
//! machine's GPU and driver to `bench-matrix/<run>/gpu.csv` and `gpu-summary.md`.
//!
//! The GPU machine may have no Rust toolchain: `--build-only` builds the binary and prints its
//! path, to be carried there and run as `gpu_bench --out gpu.csv`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

#[derive(clap::Args)]
pub(crate) struct GpuBenchArgs {
    /// Transfers per cell (the median is reported).
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// The GPU's ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Only build the benchmark binary and print its path.
    #[arg(long)]
    build_only: bool,
    /// Output directory (default `bench-matrix/<run-id>`).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn bench_gpu(args: &GpuBenchArgs) -> anyhow::Result<()> {
    let root = crate::bench::workspace_root()?;
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "-p",
            "fc-gpu",
            "--example",
            "gpu_bench",
            "--features",
            "cuda,unsafe",
        ])
        .status()
        .context("building fc-gpu's gpu_bench")?;
    if !status.success() {
        bail!("building fc-gpu's gpu_bench failed");
    }
    let binary = root.join("target/release/examples/gpu_bench");
    if args.build_only {
        println!("{}", binary.display());
        return Ok(());
    }
    let (_, run_id, out) = crate::server_bench::run_dir(args.out.as_deref())?;
    let machine = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current",
            "--format=csv,noheader",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .context("nvidia-smi found no GPU: bench-gpu needs an NVIDIA GPU and its driver")?;
    let csv = out.join("gpu.csv");
    let status = Command::new(&binary)
        .arg("--out")
        .arg(&csv)
        .args(["--iterations", &args.iterations.to_string()])
        .args(["--device", &args.device.to_string()])
        .status()
        .context("running gpu_bench")?;
    if !status.success() {
        bail!("gpu_bench failed");
    }
    let rows = std::fs::read_to_string(&csv)?;
    let summary = summary(&run_id, &machine, &rows);
    let summary_path = out.join("gpu-summary.md");
    std::fs::write(&summary_path, summary)?;
    // The traced load's timeline (gpu_bench writes it beside gpu.csv), drawn.
    crate::charts::draw_and_link(&out, &summary_path)?;
    eprintln!("bench-gpu: wrote {}", csv.display());
    Ok(())
}

/// The run's table: each path's GB/s, and fc-gpu against the contiguous copy (the bus's
/// practical limit; target ≥ 80% for 256 KiB and 2 MiB chunks) and against the naive path
/// (target ≥ 3x).
fn summary(run_id: &str, machine: &str, csv: &str) -> String {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    let mut cells: BTreeMap<(String, usize, usize), BTreeMap<String, f64>> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if let [dir, size, count, path, gbps, _] = f[..]
            && let (Ok(size), Ok(count), Ok(gbps)) = (size.parse(), count.parse(), gbps.parse())
        {
            cells
                .entry((dir.to_string(), size, count))
                .or_default()
                .insert(path.to_string(), gbps);
        }
    }
    let mut text = format!(
        "# bench-gpu {run_id}\n\nGPU: {machine}\n\n| direction | chunk | chunks | contiguous GB/s | naive GB/s | fc-gpu GB/s | fc-gpu ÷ contiguous | fc-gpu ÷ naive |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    let mut sweep = String::new();
    for ((dir, size, count), paths) in &cells {
        let get = |p: &str| paths.get(p).copied().unwrap_or(0.0);
        let (c, n, f) = (get("contiguous"), get("naive"), get("fc-gpu"));
        let _ = writeln!(
            text,
            "| {dir} | {} KiB | {count} | {c:.2} | {n:.2} | {f:.2} | {:.0}% | {:.2}x |",
            size / 1024,
            100.0 * f / c.max(1e-9),
            f / n.max(1e-9)
        );
        for (path, gbps) in paths {
            if let Some(threads) = path.strip_prefix("fc-gpu-threads-") {
                let _ = writeln!(
                    sweep,
                    "| {dir} | {} KiB | {count} | {threads} | {gbps:.2} | {:.0}% |",
                    size / 1024,
                    100.0 * gbps / c.max(1e-9)
                );
            }
        }
    }
    if !sweep.is_empty() {
        let _ = write!(
            text,
            "\n## Gather threads\n\n| direction | chunk | chunks | gather threads | fc-gpu GB/s | ÷ contiguous |\n|---|---:|---:|---:|---:|---:|\n{sweep}"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_summary_compares_fc_gpu_with_both_baselines() {
        let csv = "direction,chunk_bytes,chunks,path,gb_per_s,ms\nhtod,262144,64,contiguous,25.00,0.671\nhtod,262144,64,naive,5.00,3.355\nhtod,262144,64,fc-gpu,21.00,0.799\nhtod,262144,64,fc-gpu-threads-2,20.00,0.8\n";
        let text = super::summary("r", "H100", csv);
        assert!(
            text.contains("| htod | 256 KiB | 64 | 25.00 | 5.00 | 21.00 | 84% | 4.20x |"),
            "{text}"
        );
        assert!(
            text.contains("| htod | 256 KiB | 64 | 2 | 20.00 | 80% |"),
            "{text}"
        );
    }
}
