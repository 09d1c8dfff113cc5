//! Bytes per entry: each backend × value size is loaded in a fresh child process
//! (`xtask bench-memory-child`), which reports its RSS growth divided by the entry count.

use std::fs;
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::backends::Backend;

/// One row of `memory.csv`.
pub(crate) struct MemoryRow {
    pub(crate) backend: &'static str,
    pub(crate) value_bytes: usize,
    pub(crate) entries: usize,
    pub(crate) bytes_per_entry: f64,
}

#[derive(clap::Args, Debug)]
pub(crate) struct MemoryChildArgs {
    #[arg(long)]
    backend: Backend,
    #[arg(long = "value-bytes")]
    value_bytes: usize,
    #[arg(long)]
    entries: usize,
}

/// The fast-cache engine is the same for the three store kinds: one memory row stands for all.
const FC_NAME: &str = "fast-cache";

fn row_name(b: Backend) -> &'static str {
    match b {
        Backend::FcLocal | Backend::FcEmbedded | Backend::FcShared => FC_NAME,
        other => other.name(),
    }
}

pub(crate) const MEMORY_HEADER: &str = "backend,value_bytes,entries,bytes_per_entry";

pub(crate) fn run(
    backends: &[Backend],
    values: &[usize],
    entries: usize,
) -> anyhow::Result<Vec<MemoryRow>> {
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    let mut seen = Vec::new();
    let mut rows = Vec::new();
    for &b in backends {
        let name = row_name(b);
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        for &value_bytes in values {
            let out = Command::new(&exe)
                .args([
                    "bench-memory-child",
                    "--backend",
                    b.name(),
                    "--value-bytes",
                    &value_bytes.to_string(),
                    "--entries",
                    &entries.to_string(),
                ])
                .output()
                .context("running the memory child")?;
            if !out.status.success() {
                bail!(
                    "memory child for {name} {value_bytes}B failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let bytes_per_entry: f64 = text
                .trim()
                .parse()
                .with_context(|| format!("memory child printed {text:?}"))?;
            println!("memory {name:<12} v={value_bytes:<5} {bytes_per_entry:>8.1} bytes/entry");
            rows.push(MemoryRow {
                backend: name,
                value_bytes,
                entries,
                bytes_per_entry,
            });
        }
    }
    Ok(rows)
}

pub(crate) fn write_csv(path: &Path, rows: &[MemoryRow]) -> anyhow::Result<()> {
    let mut text = String::from(MEMORY_HEADER);
    text.push('\n');
    for r in rows {
        text.push_str(&format!(
            "{},{},{},{:.1}\n",
            r.backend, r.value_bytes, r.entries, r.bytes_per_entry
        ));
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn rss_bytes() -> anyhow::Result<u64> {
    let status = fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .context("malformed VmRSS")?
        .parse()?;
    Ok(kib * 1024)
}

/// The child: loads `entries` 16-byte keys with `value_bytes`-byte values into one backend and
/// prints the RSS growth per entry.
pub(crate) fn memory_child(args: MemoryChildArgs) -> anyhow::Result<()> {
    let n = args.entries;
    let value = vec![0x5Au8; args.value_bytes];
    let mut key = [0u8; 16];
    let mut keys = (0..n).map(move |i| {
        key.copy_from_slice(format!("key:{i:012}").as_bytes());
        key
    });
    let before = rss_bytes()?;
    let after = match args.backend {
        Backend::FcLocal | Backend::FcEmbedded | Backend::FcShared => {
            let store = fc_shard::EmbeddedStore::new(16);
            for k in &mut keys {
                store.set(k, &value, None);
            }
            let rss = rss_bytes()?;
            std::mem::forget(black_box(store));
            rss
        }
        Backend::Dashmap => {
            let map = dashmap::DashMap::<Box<[u8]>, Box<[u8]>>::new();
            for k in &mut keys {
                map.insert(Box::from(&k[..]), Box::from(&value[..]));
            }
            let rss = rss_bytes()?;
            std::mem::forget(black_box(map));
            rss
        }
        Backend::Moka => {
            let cache = moka::sync::Cache::<Box<[u8]>, Arc<[u8]>>::builder().build();
            for k in &mut keys {
                cache.insert(Box::from(&k[..]), Arc::from(&value[..]));
            }
            cache.run_pending_tasks();
            let rss = rss_bytes()?;
            std::mem::forget(black_box(cache));
            rss
        }
        Backend::Lru => {
            let mut cache = lru::LruCache::<Box<[u8]>, Box<[u8]>>::new(
                NonZeroUsize::new(n.max(1)).expect("non-zero"),
            );
            for k in &mut keys {
                cache.put(Box::from(&k[..]), Box::from(&value[..]));
            }
            let rss = rss_bytes()?;
            std::mem::forget(black_box(cache));
            rss
        }
        Backend::QuickCache => {
            let cache = quick_cache::sync::Cache::<Box<[u8]>, Arc<[u8]>>::new(n.max(1));
            for k in &mut keys {
                cache.insert(Box::from(&k[..]), Arc::from(&value[..]));
            }
            let rss = rss_bytes()?;
            std::mem::forget(black_box(cache));
            rss
        }
    };
    println!("{:.3}", after.saturating_sub(before) as f64 / n as f64);
    Ok(())
}
