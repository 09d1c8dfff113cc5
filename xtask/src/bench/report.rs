//! Run metadata (`meta.json`) and the human summary (`summary.md`) of a bench run.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde_json::json;

/// `YYYYMMDDTHHMMSSZ` for now (UTC).
pub(crate) fn utc_run_id() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The workspace root (xtask's parent directory).
pub(crate) fn workspace_root() -> anyhow::Result<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(manifest
        .parent()
        .context("xtask has no parent directory")?
        .to_path_buf())
}

/// The command as a user would type it.
pub(crate) fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo xtask {}", args.join(" "))
}

fn run_text(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn proc_field(path: &str, key: &str) -> String {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

/// Writes (or extends, when the run already has one) `meta.json`.
pub(crate) fn write_meta(out: &Path, run_id: &str, command: &str, seed: u64) -> anyhow::Result<()> {
    let path = out.join("meta.json");
    let mut commands: Vec<serde_json::Value> = fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["commands"].as_array().cloned())
        .unwrap_or_default();
    commands.push(json!(command));
    let root = workspace_root()?;
    let root = root.to_string_lossy();
    // Uncommitted changes outside `bench-matrix/` (a run's own outputs, and `LATEST`, are
    // written before its last command records this).
    let dirty = !run_text(
        "git",
        &[
            "-C",
            &root,
            "status",
            "--porcelain",
            "--",
            ".",
            ":(exclude)bench-matrix",
        ],
    )
    .is_empty();
    let meta = json!({
        "run_id": run_id,
        "cpu_model": proc_field("/proc/cpuinfo", "model name"),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory": proc_field("/proc/meminfo", "MemTotal"),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "transparent_hugepages": fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default().trim(),
        "rustc": run_text("rustc", &["-V"]),
        "git_sha": run_text("git", &["-C", &root, "rev-parse", "HEAD"]),
        "git_dirty": dirty,
        "fast_cache_features": if cfg!(feature = "unsafe") { "unsafe" } else { "default (safe)" },
        "fc_eviction_policy": match super::fc_policy() {
            super::FcPolicy::Lru => "lru (CLOCK)",
            super::FcPolicy::S3fifo => "s3fifo",
        },
        "commands": commands,
        "seed": format!("{seed:#x}"),
        "key_bytes": 16,
        "key_distribution": "uniform (xorshift64, multiply-shift reduction)",
    });
    fs::write(&path, serde_json::to_string_pretty(&meta)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

fn read_csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    let Ok(text) = fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let names: Vec<&str> = header.split(',').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            names
                .iter()
                .zip(l.split(','))
                .map(|(n, v)| ((*n).to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn human(ops: f64) -> String {
    if ops >= 1e6 {
        format!("{:.2}M", ops / 1e6)
    } else if ops >= 1e3 {
        format!("{:.1}k", ops / 1e3)
    } else {
        format!("{ops:.0}")
    }
}

fn human_bytes(v: usize) -> String {
    match v {
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}MiB", v >> 20),
        v if v >= 1024 && v % 1024 == 0 => format!("{}KiB", v >> 10),
        v => format!("{v}B"),
    }
}

const ORDER: [&str; 7] = [
    "fc-local",
    "fc-embedded",
    "fc-shared",
    "dashmap",
    "moka",
    "lru",
    "quick_cache",
];

/// Regenerates `summary.md` from the CSVs in `out`.
pub(crate) fn write_summary(out: &Path, run_id: &str) -> anyhow::Result<()> {
    let mut md = format!("# Bench run `{run_id}`\n\n");
    if let Ok(meta) = fs::read_to_string(out.join("meta.json"))
        && let Ok(meta) = serde_json::from_str::<serde_json::Value>(&meta)
    {
        md.push_str(&format!(
            "Machine: {} ({} cores, {} RAM), Linux {}, {}; commit `{}`{}; fast-cache features: {}; fast-cache policy in `lru25` rows: {}.\n\nCommands:\n",
            meta["cpu_model"].as_str().unwrap_or("?"),
            meta["cores"],
            meta["memory"].as_str().unwrap_or("?"),
            meta["kernel"].as_str().unwrap_or("?"),
            meta["rustc"].as_str().unwrap_or("?"),
            meta["git_sha"].as_str().unwrap_or("?"),
            if meta["git_dirty"].as_bool() == Some(true) {
                " (with uncommitted changes)"
            } else {
                ""
            },
            meta["fast_cache_features"].as_str().unwrap_or("default (safe)"),
            // Runs from before the field existed used LRU unless their command said otherwise.
            meta["fc_eviction_policy"].as_str().unwrap_or("see the commands"),
        ));
        for c in meta["commands"].as_array().into_iter().flatten() {
            md.push_str(&format!("- `{}`\n", c.as_str().unwrap_or("?")));
        }
        md.push('\n');
    }
    md.push_str(METHOD);

    let rows = read_csv(&out.join("embedded.csv"));
    // Groups in the order of the flags' values: no TTL, no eviction and borrowed reads first.
    let rank = |v: &str| match v {
        "none" | "ref" => 0,
        _ => 1,
    };
    type Group<'a> = Vec<&'a BTreeMap<String, String>>;
    let mut groups: BTreeMap<(u8, u8, u8, String, String, String), Group<'_>> = BTreeMap::new();
    for r in &rows {
        let (t, e, m) = (&r["ttl"], &r["eviction"], &r["read_mode"]);
        groups
            .entry((rank(t), rank(e), rank(m), t.clone(), e.clone(), m.clone()))
            .or_default()
            .push(r);
    }
    for ((_, _, _, ttl, eviction, read_mode), rows) in &groups {
        let present: Vec<&str> = ORDER
            .iter()
            .copied()
            .filter(|b| rows.iter().any(|r| r["backend"] == *b))
            .collect();
        let mut ratios: Vec<(&str, &str)> = Vec::new();
        if present.contains(&"fc-local") {
            for peer in ["dashmap", "moka", "lru", "quick_cache"] {
                if present.contains(&peer) {
                    ratios.push(("fc-local", peer));
                }
            }
        }
        if present.contains(&"fc-shared") && present.contains(&"dashmap") {
            ratios.push(("fc-shared", "dashmap"));
        }
        md.push_str(&format!(
            "## Throughput, ops/s — ttl `{ttl}`, eviction `{eviction}`, reads `{read_mode}`\n\n"
        ));
        md.push_str("| threads | value | mix | keys |");
        for b in &present {
            md.push_str(&format!(" {b} |"));
        }
        for (a, b) in &ratios {
            md.push_str(&format!(" {a} ÷ {b} |"));
        }
        md.push_str("\n| ---: | ---: | --- | ---: |");
        for _ in 0..present.len() + ratios.len() {
            md.push_str(" ---: |");
        }
        md.push('\n');
        let mut shapes: Vec<(usize, usize, String, String)> = Vec::new();
        for r in rows {
            let s = (
                r["threads"].parse().unwrap_or(0),
                r["value_bytes"].parse().unwrap_or(0),
                r["mix"].clone(),
                r["keys"].clone(),
            );
            if !shapes.contains(&s) {
                shapes.push(s);
            }
        }
        for (threads, value, mix, keys) in shapes {
            let ops = |b: &str| -> Option<f64> {
                rows.iter()
                    .find(|r| {
                        r["backend"] == b
                            && r["threads"] == threads.to_string()
                            && r["value_bytes"] == value.to_string()
                            && r["mix"] == mix
                    })
                    .and_then(|r| r["ops_per_sec"].parse().ok())
            };
            md.push_str(&format!(
                "| {threads} | {} | {mix} | {keys} |",
                human_bytes(value)
            ));
            for b in &present {
                md.push_str(&format!(" {} |", ops(b).map_or("—".into(), human)));
            }
            for (a, b) in &ratios {
                match (ops(a), ops(b)) {
                    (Some(x), Some(y)) if y > 0.0 => md.push_str(&format!(" {:.2}x |", x / y)),
                    _ => md.push_str(" — |"),
                }
            }
            md.push('\n');
        }
        md.push('\n');
    }

    let mem = read_csv(&out.join("memory.csv"));
    if !mem.is_empty() {
        let backends: Vec<String> = {
            let mut v: Vec<String> = Vec::new();
            for r in &mem {
                if !v.contains(&r["backend"]) {
                    v.push(r["backend"].clone());
                }
            }
            v
        };
        let mut values: Vec<usize> = mem
            .iter()
            .filter_map(|r| r["value_bytes"].parse().ok())
            .collect();
        values.sort_unstable();
        values.dedup();
        let entries = mem[0]["entries"].clone();
        md.push_str(&format!(
            "## Memory: bytes per entry ({entries} entries, 16-byte keys, RSS growth in a fresh process)\n\n| value |"
        ));
        for b in &backends {
            md.push_str(&format!(" {b} |"));
        }
        let fc = backends.iter().any(|b| b == "fast-cache");
        let peers: Vec<&String> = backends.iter().filter(|b| *b != "fast-cache").collect();
        if fc {
            for p in &peers {
                md.push_str(&format!(" fast-cache ÷ {p} |"));
            }
        }
        md.push_str("\n| ---: |");
        for _ in 0..backends.len() + if fc { peers.len() } else { 0 } {
            md.push_str(" ---: |");
        }
        md.push('\n');
        for v in values {
            let get = |b: &str| -> Option<f64> {
                mem.iter()
                    .find(|r| r["backend"] == b && r["value_bytes"] == v.to_string())
                    .and_then(|r| r["bytes_per_entry"].parse().ok())
            };
            md.push_str(&format!("| {v} |"));
            for b in &backends {
                md.push_str(&format!(
                    " {} |",
                    get(b).map_or("—".into(), |x| format!("{x:.1}"))
                ));
            }
            if fc {
                for p in &peers {
                    match (get("fast-cache"), get(p)) {
                        (Some(x), Some(y)) if y > 0.0 => md.push_str(&format!(" {:.2}x |", x / y)),
                        _ => md.push_str(" — |"),
                    }
                }
            }
            md.push('\n');
        }
        md.push('\n');
    }
    fs::write(out.join("summary.md"), md).context("writing summary.md")
}

const METHOD: &str = "\
How the rows are made (see `bench-matrix/README.md`):

- Keys are 16 bytes (`key:000000000042`); every backend is preloaded with every key and the same
  value, then each worker draws keys uniformly from a seeded xorshift64 sequence (the same
  sequence for every backend). Medians of the repeats; ops/s sum the workers.
- **fc-local rows are owner-local**: the store is split with `LocalEmbeddedStoreBootstrap`; each
  pinned worker owns a subset of the shards and draws keys only from the keys its shards own (as
  the fast-cache 0.1.0 specification's rows do). Every other backend's workers draw from all keys.
  With one thread the two are the same.
- `ref` reads borrow the value (or take the clone a cache hands out: `Arc` for Moka and
  quick_cache) and read its first byte; `copy` reads copy it into a reusable buffer (what
  serving the value costs).
- Writes pass owned copies to the peers (`Box<[u8]>` key and value, `Arc<[u8]>` values for Moka
  and quick_cache), as their APIs require; fast-cache copies the borrowed bytes into its arena.
- Large values use fewer keys (at most 512 MiB of values): see the `keys` column.
- `ttl active`: every write carries a one-hour TTL (Moka: `time_to_live`). Backends without
  per-entry TTL have no such rows. `lru25`: room for 25% of the keys — entries for the peers
  (Moka: TinyLFU admission, quick_cache: CLOCK-Pro-like, lru: exact LRU), and for fast-cache a
  `max_memory` of 25% of the keys times what one such entry is charged, with
  `EvictionPolicy::S3Fifo` unless the command says `--fc-policy lru` (`EvictionPolicy::Lru`,
  CLOCK); `meta.json` names it. DashMap has no
  such rows; lru and quick_cache appear only there.

";
