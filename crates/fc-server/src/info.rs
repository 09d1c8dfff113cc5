//! `INFO` (the fields redis_exporter and operators read, the command and error statistics),
//! `CONFIG GET/SET/RESETSTAT`, `SLOWLOG` and `LATENCY`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::command::{self, Ctx, Handler, store};
use crate::cross::{TxnLinks, exec_at};
use crate::observe;
use crate::reply::{Replies, Reply, Token};
use crate::stats::{self, Histogram};
use crate::worker::Worker;

/// Counters each worker reports for `INFO`.
pub(crate) const FIELDS: usize = 9;

/// One worker's counters as an array of integers: keys, expires, used memory, max memory,
/// hits, misses, expired, evicted, stored bytes (hits, misses, expired and evicted counted
/// since the last `CONFIG RESETSTAT`).
fn stats_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let t = ctx.store.stats_snapshot().total();
    let base = stats::with_current(|s| s.map_or([0; 4], |s| s.store_base.get()));
    let values = [
        t.keys,
        t.expires,
        t.used_memory,
        t.max_memory,
        t.hits.saturating_sub(base[0]),
        t.misses.saturating_sub(base[1]),
        t.expired.saturating_sub(base[2]),
        t.evicted.saturating_sub(base[3]),
        t.stored_bytes,
    ];
    ctx.out.array_len(values.len());
    for v in values {
        ctx.out.integer(v as i64);
    }
}

/// Every worker's counters summed (keys, expires, used memory, max memory, hits, misses,
/// expired, evicted, stored bytes).
pub(crate) async fn totals(worker: &Worker, txn: Option<&TxnLinks>) -> [u64; FIELDS] {
    const STATS: Handler = store!(stats_part);
    let mut totals = [0u64; FIELDS];
    for owner in 0..worker.shared.workers {
        let args = vec![Bytes::from_static(b"info")];
        let part = exec_at(worker, owner, STATS, args, txn).await;
        for (t, v) in totals.iter_mut().zip(part.integers()) {
            *t += v.max(0) as u64;
        }
    }
    totals
}

/// One worker's keys and expiring keys per database, as a flat array of
/// `db, keys, expires` triples (`INFO keyspace`).
fn keyspace_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let counts = ctx.store.db_counts();
    ctx.out.array_len(counts.len() * 3);
    for (db, (keys, expires)) in counts {
        ctx.out.integer(i64::from(db));
        ctx.out.integer(keys as i64);
        ctx.out.integer(expires as i64);
    }
}

/// Every worker's keys and expiring keys per database, in database order.
async fn keyspace(
    worker: &Worker,
    txn: Option<&TxnLinks>,
) -> std::collections::BTreeMap<i64, (i64, i64)> {
    const KEYSPACE: Handler = store!(keyspace_part);
    let mut dbs = std::collections::BTreeMap::new();
    for owner in 0..worker.shared.workers {
        let args = vec![Bytes::from_static(b"info")];
        let part = exec_at(worker, owner, KEYSPACE, args, txn).await;
        for triple in part.integers().collect::<Vec<_>>().chunks(3) {
            if let [db, keys, expires] = *triple {
                let entry: &mut (i64, i64) = dbs.entry(db).or_default();
                entry.0 += keys;
                entry.1 += expires;
            }
        }
    }
    dbs
}

/// `INFO [section ...]`.
/// One worker's command statistics (see [`Observed`]): `read` its counters and error codes,
/// `hist <slot>...` its latency histograms (every slot's without slots), `reset` everything
/// (`CONFIG RESETSTAT`, which also starts the store's counters over), `tracking-on` and
/// `tracking-off` (`latency-tracking`).
fn observe_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let op = ctx.args[1].clone();
    let base = (op.as_ref() == b"reset").then(|| {
        let t = ctx.store.stats_snapshot().total();
        [t.hits, t.misses, t.expired, t.evicted]
    });
    let out = &mut *ctx.out;
    let args = ctx.args;
    stats::with_current(|stats| {
        let Some(stats) = stats else {
            return out.array_len(0);
        };
        match op.as_ref() {
            b"reset" => {
                stats.reset();
                stats.store_base.set(base.unwrap_or_default());
                out.ok();
            }
            b"tracking-on" | b"tracking-off" => {
                stats.set_tracking(op.as_ref() == b"tracking-on");
                out.ok();
            }
            b"read" => {
                let errors = stats.errors();
                let slots: Vec<(usize, &stats::Slot, u64)> = stats
                    .slots()
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (i, s, s.calls()))
                    .filter(|(_, s, calls)| calls + s.failed.get() + s.rejected.get() > 0)
                    .collect();
                out.array_len(4 + 2 * errors.len() + 5 * slots.len());
                out.integer(stats.total_errors() as i64);
                out.integer(errors.len() as i64);
                for (code, n) in &errors {
                    out.bulk(code);
                    out.integer(*n as i64);
                }
                out.integer(slots.len() as i64);
                for (i, s, calls) in slots {
                    for v in [
                        i as u64,
                        calls,
                        s.ticks.get(),
                        s.failed.get(),
                        s.rejected.get(),
                    ] {
                        out.integer(v as i64);
                    }
                }
                out.integer(stats.hops.get() as i64);
            }
            _ => {
                // hist [slot ...]
                let wanted: Vec<usize> = args[2..]
                    .iter()
                    .filter_map(|a| fc_resp::number::parse_i64(a))
                    .map(|n| n as usize)
                    .collect();
                let mut values = Vec::new();
                for i in 0..stats.slots().len() {
                    if !(wanted.is_empty() || wanted.contains(&i)) {
                        continue;
                    }
                    let Some(counts) = stats.tracked(i) else {
                        continue;
                    };
                    let nonzero: Vec<(usize, u64)> = counts
                        .into_iter()
                        .enumerate()
                        .filter(|(_, c)| *c > 0)
                        .collect();
                    if nonzero.is_empty() {
                        continue;
                    }
                    values.push(i as i64);
                    values.push(nonzero.len() as i64);
                    for (j, c) in nonzero {
                        values.push(j as i64);
                        values.push(c as i64);
                    }
                }
                out.array_len(values.len());
                values.into_iter().for_each(|v| out.integer(v));
            }
        }
    });
}

const OBSERVE: Handler = store!(observe_part);

/// Every worker's command statistics, summed.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub(crate) total_errors: u64,
    /// Error replies by code, in code order.
    pub(crate) errors: BTreeMap<Vec<u8>, u64>,
    /// Per slot with any call: calls, clock ticks, failed, rejected.
    pub(crate) slots: BTreeMap<usize, [u64; 4]>,
    /// Cross-worker hops made by clients' commands (see `WorkerStats::hops`).
    pub(crate) hops: u64,
}

/// Sums every worker's `read` part.
pub(crate) async fn observed(worker: &Worker, txn: Option<&TxnLinks>) -> Observed {
    let mut sum = Observed::default();
    for owner in 0..worker.shared.workers {
        let args = vec![Bytes::from_static(b"observe"), Bytes::from_static(b"read")];
        let part = exec_at(worker, owner, OBSERVE, args, txn).await;
        // An array: total, code count, (code, count)..., slot count, (slot, 4 counters)...
        let mut tokens = part.tokens().iter().skip(1);
        let mut int = || match tokens.next() {
            Some(Token::Integer(n)) => *n as u64,
            _ => 0,
        };
        sum.total_errors += int();
        let codes = int();
        let mut tokens = part.tokens().iter().skip(3);
        for _ in 0..codes {
            let (Some(Token::Bulk(code)), Some(Token::Integer(n))) = (tokens.next(), tokens.next())
            else {
                break;
            };
            *sum.errors.entry(part.bytes(code).to_vec()).or_insert(0) += *n as u64;
        }
        let slots = match tokens.next() {
            Some(Token::Integer(n)) => *n,
            _ => 0,
        };
        for _ in 0..slots {
            let mut v = [0u64; 5];
            for x in &mut v {
                if let Some(Token::Integer(n)) = tokens.next() {
                    *x = *n as u64;
                }
            }
            let entry = sum.slots.entry(v[0] as usize).or_insert([0; 4]);
            for (t, x) in entry.iter_mut().zip(&v[1..]) {
                *t += x;
            }
        }
        if let Some(Token::Integer(n)) = tokens.next() {
            sum.hops += *n as u64;
        }
    }
    sum
}

/// Every worker's latency histograms of `slots` (all with an empty list), summed and
/// converted from clock ticks to nanoseconds.
pub(crate) async fn histograms(
    worker: &Worker,
    slots: &[usize],
    txn: Option<&TxnLinks>,
) -> BTreeMap<usize, Histogram> {
    let mut sum: BTreeMap<usize, Histogram> = BTreeMap::new();
    for owner in 0..worker.shared.workers {
        let mut args = vec![Bytes::from_static(b"observe"), Bytes::from_static(b"hist")];
        args.extend(slots.iter().map(|s| Bytes::from(s.to_string())));
        let part = exec_at(worker, owner, OBSERVE, args, txn).await;
        let mut values = part.integers();
        while let (Some(slot), Some(n)) = (values.next(), values.next()) {
            let h = sum.entry(slot as usize).or_default();
            for _ in 0..n {
                if let (Some(index), Some(count)) = (values.next(), values.next()) {
                    worker.ticks.add_to(h, index as usize, count as u64);
                }
            }
        }
    }
    sum
}

/// The sections `INFO` shows without arguments (and with `default`).
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// `INFO [section ...]`: the sections named (any case; `default`, `all` and `everything` as
/// Redis reads them), in Redis's order, separated by a blank line.
pub(crate) async fn info<R: Reply>(
    worker: &Worker,
    args: &[Bytes],
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let show = |section: &str| {
        (wanted.is_empty() && DEFAULT_SECTIONS.contains(&section))
            || wanted.iter().any(|w| {
                w == section
                    || w == "all"
                    || w == "everything"
                    || (w == "default" && DEFAULT_SECTIONS.contains(&section))
            })
    };
    let totals = if show("memory") || show("stats") {
        totals(worker, txn).await
    } else {
        [0u64; FIELDS]
    };
    let [
        _keys,
        _expires,
        used,
        max,
        hits,
        misses,
        expired,
        evicted,
        stored,
    ] = totals;
    let observed = if show("stats") || show("commandstats") || show("errorstats") {
        observed(worker, txn).await
    } else {
        Observed::default()
    };
    let uptime = shared.started.elapsed().as_secs();
    let mut sections: Vec<String> = Vec::new();
    let mut text = String::new();
    if show("server") {
        let os = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .map(|t| t.trim().to_string())
                .unwrap_or_default()
        };
        let now_us = fc_snapshot::unix_ms() * 1000;
        let _ = write!(
            text,
            "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:{:016x}\r\nredis_mode:standalone\r\nos:{} {} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:{}\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{now_us}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\nfast_cache_version:{}\r\nworker_threads:{}\r\nworker_runtime:{}\r\n",
            crate::REDIS_VERSION,
            {
                use std::hash::{Hash, Hasher};
                // Fixed keys: the same id for the same version, as Redis's build id.
                let mut h = std::hash::DefaultHasher::new();
                env!("CARGO_PKG_VERSION").hash(&mut h);
                h.finish()
            },
            if cfg!(target_os = "linux") {
                os("ostype")
            } else {
                std::env::consts::OS.to_string()
            },
            os("osrelease"),
            std::env::consts::ARCH,
            crate::rt::multiplexing_api(),
            std::process::id(),
            shared.run_id,
            shared.port,
            uptime / 86_400,
            shared.live.hz.load(Ordering::Relaxed),
            shared.config.hz,
            (now_us / 1_000_000) & ((1 << 24) - 1),
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            shared
                .config
                .config_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            env!("CARGO_PKG_VERSION"),
            shared.workers,
            crate::rt::name(shared.config.runtime),
        );
        sections.push(std::mem::take(&mut text));
    }
    if show("clients") {
        let _ = write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\ntotal_blocking_keys:{}\r\ntotal_blocking_keys_on_nokey:0\r\n",
            shared.clients.load(Ordering::Relaxed),
            shared.live.maxclients.load(Ordering::Relaxed),
            shared.max_output_buffer.load(Ordering::Relaxed),
            // Clients waiting out a `CLIENT PAUSE` count as blocked, as in Redis.
            shared.blocked.count() + shared.pause.waiting(),
            shared.tracking.counts()[0],
            shared.blocked.keys_waited(),
        );
        sections.push(std::mem::take(&mut text));
    }
    if show("memory") {
        use crate::process::human;
        let peak = shared
            .metrics
            .peak_memory
            .fetch_max(used, Ordering::Relaxed)
            .max(used);
        let rss = crate::process::rss_bytes();
        let system = crate::process::total_system_memory();
        let dataset = stored.min(used);
        let percent = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 * 100.0 / whole as f64
            }
        };
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let (scripts, script_bytes) = shared.scripts.script_stats();
        let (libraries, functions, function_bytes) = shared.scripts.function_stats();
        let (script_bytes, function_bytes) = (script_bytes as u64, function_bytes as u64);
        let lua_vm = shared.scripts.vm_bytes();
        let allocator = crate::allocator_name();
        let _ = write!(
            text,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{}\r\nused_memory_startup:0\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{used}\r\nallocator_active:{used}\r\nallocator_resident:{rss}\r\ntotal_system_memory:{system}\r\ntotal_system_memory_human:{}\r\nused_memory_lua:{lua_vm}\r\nused_memory_vm_eval:{lua_vm}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{script_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\nused_memory_vm_functions:{lua_vm}\r\nused_memory_vm_total:{lua_vm}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{function_bytes}\r\nused_memory_scripts:{}\r\nused_memory_scripts_human:{}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nallocator_frag_ratio:1.00\r\nallocator_frag_bytes:0\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:1.00\r\nrss_overhead_bytes:0\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:0\r\nmem_replication_backlog:{}\r\nmem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:0\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:{allocator}\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:0\r\nlazyfreed_objects:0\r\n",
            human(used),
            human(rss),
            human(peak),
            percent(used, peak),
            used - dataset,
            percent(dataset, used),
            human(system),
            human(lua_vm),
            human(lua_vm),
            script_bytes + function_bytes,
            human(script_bytes + function_bytes),
            human(max),
            shared.config.maxmemory_policy.redis_name(),
            ratio(rss, used),
            rss as i64 - used as i64,
            ratio(rss, used),
            rss as i64 - used as i64,
            // The frames kept for reconnecting replicas (their buffers' capacity), outside
            // `used_memory` and maxmemory as in Redis.
            shared.repl.backlog_bytes.load(Ordering::Relaxed),
        );
        sections.push(std::mem::take(&mut text));
    }
    if show("persistence") {
        if let Some(persist) = &shared.persist {
            persist.info(&mut text);
        } else {
            text.push_str(&crate::persist::in_memory_info(shared.started_unix));
        }
        sections.push(std::mem::take(&mut text));
    }
    if show("stats") {
        let pubsub = shared.pubsub.counts();
        let tracking = shared.tracking.counts();
        let figure = |f: fn(&crate::shared::ExpiryStats) -> &std::sync::atomic::AtomicU64| {
            shared
                .expiry
                .iter()
                .map(|w| f(w).load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let [ops, input, output] = shared.metrics.rates();
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:{expired}\r\nexpired_stale_perc:{:.2}\r\nexpired_time_cap_reached_count:{}\r\nexpire_cycle_cpu_milliseconds:{}\r\nevicted_keys:{evicted}\r\nevicted_clients:0\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:0\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\ncross_worker_hops:{}\r\n",
            shared.connections.load(Ordering::Relaxed),
            observed.slots.values().map(|v| v[0]).sum::<u64>(),
            ops.round() as u64,
            figure(|w| &w.net_in),
            figure(|w| &w.net_out),
            input / 1024.0,
            output / 1024.0,
            shared.rejected_connections.load(Ordering::Relaxed),
            shared
                .expiry
                .iter()
                .map(|e| e.stale_ppm.load(Ordering::Relaxed))
                .sum::<u64>() as f64
                / shared.expiry.len().max(1) as f64
                / 10_000.0,
            figure(|w| &w.time_cap_reached),
            figure(|w| &w.cycle_us) / 1000,
            pubsub.0,
            pubsub.1,
            pubsub.2,
            tracking[1],
            tracking[2],
            tracking[3],
            observed.total_errors,
            figure(|w| &w.reads),
            figure(|w| &w.writes),
            observed.hops,
        );
        sections.push(std::mem::take(&mut text));
    }
    if show("replication") {
        shared.repl.info(&shared.replid, &mut text);
        sections.push(std::mem::take(&mut text));
    }
    if show("cpu") {
        let [sys, user, sys_children, user_children] = crate::process::cpu_process();
        let [sys_thread, user_thread] = crate::process::cpu_thread();
        let _ = write!(
            text,
            "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{sys_children:.6}\r\nused_cpu_user_children:{user_children:.6}\r\nused_cpu_sys_main_thread:{sys_thread:.6}\r\nused_cpu_user_main_thread:{user_thread:.6}\r\n",
        );
        sections.push(std::mem::take(&mut text));
    }
    if show("modules") {
        sections.push("# Modules\r\n".to_string());
    }
    if show("commandstats") {
        text.push_str("# Commandstats\r\n");
        for (slot, [calls, ticks, failed, rejected]) in &observed.slots {
            let nanos = worker.ticks.nanos(*ticks);
            let usec = nanos / 1000;
            let per_call = if *calls == 0 {
                0.0
            } else {
                nanos as f64 / 1000.0 / *calls as f64
            };
            let _ = write!(
                text,
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
                command::slot_name(*slot)
            );
        }
        sections.push(std::mem::take(&mut text));
    }
    if show("errorstats") {
        text.push_str("# Errorstats\r\n");
        for (code, count) in &observed.errors {
            let _ = write!(
                text,
                "errorstat_{}:count={count}\r\n",
                String::from_utf8_lossy(code)
            );
        }
        sections.push(std::mem::take(&mut text));
    }
    if show("latencystats") {
        text.push_str("# Latencystats\r\n");
        let observe = &shared.observe;
        if observe.tracking() {
            let percentiles = observe.percentiles();
            for (slot, h) in histograms(worker, &[], txn).await {
                if h.total == 0 {
                    continue;
                }
                let _ = write!(
                    text,
                    "latency_percentiles_usec_{}:",
                    command::slot_name(slot)
                );
                for (j, p) in percentiles.iter().enumerate() {
                    if j > 0 {
                        text.push(',');
                    }
                    let _ = write!(
                        text,
                        "p{}={:.3}",
                        observe::percentile_text(*p),
                        h.value_at_percentile(*p) as f64 / 1000.0
                    );
                }
                text.push_str("\r\n");
            }
        }
        sections.push(std::mem::take(&mut text));
    }
    if show("cluster") {
        // Clients and tools read it to choose standalone or cluster mode.
        sections.push("# Cluster\r\ncluster_enabled:0\r\n".to_string());
    }
    if show("keyspace") {
        text.push_str("# Keyspace\r\n");
        for (db, (keys, expires)) in keyspace(worker, txn).await {
            if keys > 0 {
                let _ = write!(text, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
        sections.push(std::mem::take(&mut text));
    }
    // Redis separates sections with a blank line and ends with the last one's last line.
    let text = sections
        .iter()
        .map(|s| format!("{}\r\n", s.trim_end_matches("\r\n")))
        .collect::<Vec<_>>()
        .join("\r\n");
    out.verbatim(*b"txt", text.as_bytes());
}

/// Each worker's part of `CONFIG SET maxmemory`: the new total (0: no limit).
fn maxmemory_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let total = fc_resp::number::parse_i64(&ctx.args[1]).unwrap_or(0).max(0) as u64;
    let result = ctx.store.set_max_memory((total > 0).then_some(total));
    ctx.reply(result, |out, ()| out.ok());
}

/// A `CONFIG SET` change, checked before any is applied.
enum Change {
    MaxMemory(u64),
    /// `busy-reply-threshold` (`lua-time-limit`), in milliseconds.
    BusyThreshold(u64),
    MaxClients(usize),
    Timeout(u64),
    Hz(u64),
    ProtoMaxBulkLen(u64),
    ClientQueryBufferLimit(u64),
    RequirePass(Option<String>),
    Save(Vec<(u64, u64)>),
    /// The `normal` and `pubsub` classes, each when given.
    Output((Option<crate::OutputLimit>, Option<crate::OutputLimit>)),
    /// `notify-keyspace-events`.
    Notify(u32),
    /// A setting kept for Redis's tools ([`crate::knobs`]): its index and checked value.
    Knob(usize, String),
    /// `slowlog-log-slower-than`.
    SlowerThan(i64),
    /// `slowlog-max-len`.
    SlowlogMaxLen(u64),
    /// `latency-monitor-threshold`.
    LatencyThreshold(u64),
    /// `latency-tracking`.
    LatencyTracking(bool),
    /// `latency-tracking-info-percentiles`.
    Percentiles(Vec<f64>),
    /// `tracking-table-max-keys`.
    TrackingMaxKeys(u64),
    /// `replica-serve-stale-data` (`slave-serve-stale-data`).
    ServeStale(bool),
    /// Set to what it already is.
    Unchanged,
}

/// `CONFIG GET pattern...` (globs) over the server's settings, `CONFIG SET name value...` for
/// those that can change live (all checked before any applies, as Redis does), `RESETSTAT`.
pub(crate) async fn config<R: Reply>(
    worker: &Worker,
    args: &[Bytes],
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    const MAXMEMORY: Handler = store!(maxmemory_part);
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if args.len() >= 3 => {
            let params = parameters(worker);
            let patterns: Vec<fc_shard::GlobPattern> = args[2..]
                .iter()
                .map(|p| fc_shard::GlobPattern::new(p, true))
                .collect();
            let found: Vec<&(&str, String)> = params
                .iter()
                .filter(|(name, _)| patterns.iter().any(|p| p.matches(name.as_bytes())))
                .collect();
            out.map_len(found.len());
            for (name, value) in found {
                out.bulk(name.as_bytes());
                out.bulk(value.as_bytes());
            }
        }
        b"set" if args.len() >= 4 && args.len().is_multiple_of(2) => {
            let mut changes = Vec::new();
            for pair in args[2..].chunks(2) {
                match change(worker, &pair[0], &pair[1]) {
                    Ok(c) => changes.push(c),
                    Err(text) => return out.error(text.as_bytes()),
                }
            }
            // The one change that can fail on the workers goes first.
            for c in &changes {
                if let Change::MaxMemory(total) = c {
                    let shared = &worker.shared;
                    for owner in 0..shared.workers {
                        let args = vec![
                            Bytes::from_static(b"config"),
                            Bytes::from(total.to_string()),
                        ];
                        let part: Replies = exec_at(worker, owner, MAXMEMORY, args, txn).await;
                        if let Some(reason) = part.error_text() {
                            let reason = String::from_utf8_lossy(reason);
                            let text = format!(
                                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - {}",
                                reason.trim_end().trim_start_matches("ERR ")
                            );
                            return out.error(text.as_bytes());
                        }
                    }
                    shared.live.maxmemory.store(*total, Ordering::Relaxed);
                }
            }
            let live = &worker.shared.live;
            for c in changes {
                match c {
                    Change::MaxMemory(_) | Change::Unchanged => {}
                    Change::MaxClients(n) => live.maxclients.store(n, Ordering::Relaxed),
                    Change::Timeout(s) => live.timeout.store(s, Ordering::Relaxed),
                    Change::Hz(n) => live.hz.store(n, Ordering::Relaxed),
                    Change::ServeStale(yes) => worker.shared.repl.set_serve_stale(yes),
                    Change::BusyThreshold(ms) => {
                        worker
                            .shared
                            .scripts
                            .threshold_ms
                            .store(ms, Ordering::Relaxed);
                    }
                    Change::ProtoMaxBulkLen(n) => {
                        live.proto_max_bulk_len.store(n, Ordering::Relaxed);
                        live.limits_epoch.fetch_add(1, Ordering::Release);
                    }
                    Change::ClientQueryBufferLimit(n) => {
                        live.client_query_buffer_limit.store(n, Ordering::Relaxed);
                        live.limits_epoch.fetch_add(1, Ordering::Release);
                    }
                    Change::RequirePass(p) => {
                        worker.shared.acl.set_requirepass(p.as_deref());
                        *live
                            .requirepass
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = p;
                    }
                    Change::Save(rules) => {
                        if let Some(persist) = &worker.shared.persist {
                            persist.set_save_rules(rules);
                        }
                    }
                    Change::Output((normal, pubsub)) => {
                        if let Some(limit) = normal {
                            live.set_output_limit(limit);
                        }
                        if let Some(limit) = pubsub {
                            worker.shared.pubsub.set_limit(limit);
                        }
                    }
                    Change::Knob(index, value) => live.knobs.set(index, value),
                    Change::SlowerThan(n) => worker.shared.observe.set_slower_than(n),
                    Change::SlowlogMaxLen(n) => worker.shared.observe.set_max_len(n),
                    Change::LatencyThreshold(n) => worker.shared.observe.set_latency_ms(n),
                    Change::LatencyTracking(on) => {
                        worker.shared.observe.set_tracking(on);
                        let op: &'static [u8] = if on { b"tracking-on" } else { b"tracking-off" };
                        for owner in 0..worker.shared.workers {
                            let args = vec![Bytes::from_static(b"observe"), Bytes::from_static(op)];
                            exec_at(worker, owner, OBSERVE, args, txn).await;
                        }
                    }
                    Change::Percentiles(p) => worker.shared.observe.set_percentiles(p),
                    Change::Notify(flags) => worker.shared.notifier.set_flags(flags),
                    Change::TrackingMaxKeys(n) => worker.shared.tracking.set_max_keys(n),
                }
            }
            out.ok();
        }
        b"resetstat" => {
            // Redis's resetServerStats, resetCommandTableStats and resetErrorTableStats.
            let shared = &worker.shared;
            for owner in 0..shared.workers {
                let args = vec![Bytes::from_static(b"observe"), Bytes::from_static(b"reset")];
                exec_at(worker, owner, OBSERVE, args, txn).await;
            }
            shared.connections.store(0, Ordering::Relaxed);
            for e in &shared.expiry {
                e.stale_ppm.store(0, Ordering::Relaxed);
                e.time_cap_reached.store(0, Ordering::Relaxed);
            }
            out.ok();
        }
        b"rewrite" => {
            let shared = &worker.shared;
            let Some(path) = &shared.config.config_file else {
                return out.error(b"ERR The server is running without a config file");
            };
            if let Err(err) = fc_config::rewrite(path, &rewritten(worker)) {
                tracing::warn!("CONFIG REWRITE failed: {err}");
                let text = format!("ERR Rewriting config file: {err}");
                return out.error(text.as_bytes());
            }
            tracing::info!("CONFIG REWRITE executed with success.");
            out.ok();
        }
        b"help" => {
            let lines: &[&[u8]] = &[
                b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"GET <pattern>",
                b"    Return parameters matching the glob-like <pattern> and their values.",
                b"SET <directive> <value>",
                b"    Set the configuration <directive> to <value>.",
                b"RESETSTAT",
                b"    Reset statistics reported by the INFO command.",
                b"REWRITE",
                b"    Rewrite the configuration file.",
                b"HELP",
                b"    Prints this help.",
            ];
            crate::command::help(out, lines);
        }
        // `SET` with an odd count (the subcommands and their least arities are checked before
        // the command runs), as Redis answers it.
        _ => out.error(b"ERR syntax error"),
    }
}

/// The settings `CONFIG SET` changes, as `CONFIG REWRITE` writes them into the TOML file.
fn rewritten(worker: &Worker) -> Vec<fc_config::Setting> {
    use fc_config::{Setting, Value};
    let shared = &worker.shared;
    let live = &shared.live;
    let defaults = crate::ServerConfig::default();
    let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let setting = |section, key, value: Value, default: Value| Setting {
        section,
        key,
        default: value == default,
        value,
    };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let observe = &shared.observe;
    let mut settings = vec![
        setting(
            "server",
            "requirepass",
            Value::Text(live.requirepass().unwrap_or_default()),
            Value::Text(String::new()),
        ),
        setting(
            "server",
            "maxclients",
            int(live.maxclients.load(Ordering::Relaxed) as u64),
            int(defaults.maxclients as u64),
        ),
        setting("server", "timeout", int(load(&live.timeout)), int(0)),
        setting("server", "hz", int(load(&live.hz)), int(defaults.hz)),
        setting(
            "server",
            "client_output_buffer_limit",
            Value::Text(live.output_limit().normal_text()),
            Value::Text(crate::OutputLimit::default().normal_text()),
        ),
        setting(
            "server",
            "proto_max_bulk_len",
            int(load(&live.proto_max_bulk_len)),
            int(defaults.proto_max_bulk_len),
        ),
        setting(
            "server",
            "client_query_buffer_limit",
            int(load(&live.client_query_buffer_limit)),
            int(defaults.client_query_buffer_limit),
        ),
        setting(
            "server",
            "slowlog_log_slower_than",
            Value::Int(observe.slower_than()),
            Value::Int(defaults.slowlog_log_slower_than),
        ),
        setting(
            "server",
            "slowlog_max_len",
            int(observe.max_len()),
            int(defaults.slowlog_max_len),
        ),
        setting(
            "server",
            "latency_monitor_threshold",
            int(observe.latency_ms()),
            int(0),
        ),
        setting("storage", "max_memory", int(load(&live.maxmemory)), int(0)),
    ];
    if let Some(persist) = &shared.persist {
        let save = persist
            .save_rules()
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(" ");
        settings.push(setting(
            "persistence",
            "save",
            Value::Text(save),
            Value::Text(crate::config::PersistenceSection::default().save),
        ));
    }
    settings
}

/// Every setting `CONFIG GET` shows, with its value now.
fn parameters(worker: &Worker) -> Vec<(&'static str, String)> {
    let shared = &worker.shared;
    let (c, live) = (&shared.config, &shared.live);
    let persist = shared.persist.as_ref();
    let save = persist.map_or_else(String::new, |p| {
        p.save_rules()
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let dir = persist.map_or_else(
        || {
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        },
        |p| p.dir.display().to_string(),
    );
    let mut params = vec![
        (
            "maxmemory",
            live.maxmemory.load(Ordering::Relaxed).to_string(),
        ),
        (
            "maxmemory-policy",
            c.maxmemory_policy.redis_name().to_string(),
        ),
        (
            "maxclients",
            live.maxclients.load(Ordering::Relaxed).to_string(),
        ),
        ("requirepass", live.requirepass().unwrap_or_default()),
        ("timeout", live.timeout.load(Ordering::Relaxed).to_string()),
        ("hz", live.hz.load(Ordering::Relaxed).to_string()),
        (
            "replica-serve-stale-data",
            yes_no(shared.repl.serve_stale()).to_string(),
        ),
        (
            "slave-serve-stale-data",
            yes_no(shared.repl.serve_stale()).to_string(),
        ),
        (
            "busy-reply-threshold",
            shared
                .scripts
                .threshold_ms
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "lua-time-limit",
            shared
                .scripts
                .threshold_ms
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "proto-max-bulk-len",
            live.proto_max_bulk_len.load(Ordering::Relaxed).to_string(),
        ),
        (
            "client-query-buffer-limit",
            live.client_query_buffer_limit
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "client-output-buffer-limit",
            live.output_limit().redis_text(&shared.pubsub.limit()),
        ),
        ("save", save),
        (
            "notify-keyspace-events",
            crate::notify::format_flags(shared.notifier.flags()),
        ),
        (
            "appendonly",
            if persist.is_some() { "yes" } else { "no" }.to_string(),
        ),
        (
            "appendfsync",
            persist.map_or("everysec", |p| p.fsync.name()).to_string(),
        ),
        ("dir", dir),
        ("databases", shared.config.databases.to_string()),
        (
            "disable-thp",
            if shared.config.disable_thp {
                "yes"
            } else {
                "no"
            }
            .to_string(),
        ),
        ("bind", c.bind.ip().to_string()),
        ("port", shared.port.to_string()),
        ("tcp-keepalive", "0".to_string()),
        ("io-threads", shared.workers.to_string()),
        (
            "slowlog-log-slower-than",
            shared.observe.slower_than().to_string(),
        ),
        ("slowlog-max-len", shared.observe.max_len().to_string()),
        (
            "latency-monitor-threshold",
            shared.observe.latency_ms().to_string(),
        ),
        (
            "tracking-table-max-keys",
            shared.tracking.max_keys().to_string(),
        ),
        (
            "latency-tracking",
            if shared.observe.tracking() {
                "yes"
            } else {
                "no"
            }
            .to_string(),
        ),
        (
            "latency-tracking-info-percentiles",
            shared
                .observe
                .percentiles()
                .iter()
                .map(|p| observe::percentile_text(*p))
                .collect::<Vec<_>>()
                .join(" "),
        ),
    ];
    params.extend(live.knobs.all());
    params
}

/// Checks one `CONFIG SET` pair.
fn change(worker: &Worker, name: &[u8], value: &[u8]) -> Result<Change, String> {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    let text = String::from_utf8_lossy(value).into_owned();
    let failed = |why: &str| {
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
    };
    let number = |t: &str| {
        crate::parse_size(t).map_err(|_| failed("argument couldn't be parsed into an integer"))
    };
    match name.as_str() {
        "maxmemory" => Ok(Change::MaxMemory(number(&text)?)),
        "maxclients" => match number(&text)? {
            0 => Err(failed(
                "argument must be between 1 and 4294967295 inclusive",
            )),
            n => Ok(Change::MaxClients(n as usize)),
        },
        "timeout" => Ok(Change::Timeout(number(&text)?)),
        // Redis clamps hz into 1..=500.
        "hz" => Ok(Change::Hz(number(&text)?.clamp(1, 500))),
        "busy-reply-threshold" | "lua-time-limit" => Ok(Change::BusyThreshold(number(&text)?)),
        "proto-max-bulk-len" | "client-query-buffer-limit" => {
            let n = number(&text)?;
            if !(crate::MIN_PROTOCOL_LIMIT..=i64::MAX as u64).contains(&n) {
                return Err(failed(
                    "argument must be between 1048576 and 9223372036854775807 inclusive",
                ));
            }
            Ok(if name == "proto-max-bulk-len" {
                Change::ProtoMaxBulkLen(n)
            } else {
                Change::ClientQueryBufferLimit(n)
            })
        }
        "requirepass" => Ok(Change::RequirePass((!text.is_empty()).then_some(text))),
        "slowlog-log-slower-than" | "slowlog-max-len" | "latency-monitor-threshold" => {
            let n: i64 = text
                .parse()
                .map_err(|_| failed("argument couldn't be parsed into an integer"))?;
            let min = if name == "slowlog-log-slower-than" {
                -1
            } else {
                0
            };
            if n < min {
                return Err(failed(&format!(
                    "argument must be between {min} and 9223372036854775807 inclusive"
                )));
            }
            Ok(match name.as_str() {
                "slowlog-log-slower-than" => Change::SlowerThan(n),
                "slowlog-max-len" => Change::SlowlogMaxLen(n as u64),
                _ => Change::LatencyThreshold(n as u64),
            })
        }
        "tracking-table-max-keys" => match text.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Change::TrackingMaxKeys(n as u64)),
            Ok(_) => Err(failed(
                "argument must be between 0 and 9223372036854775807 inclusive",
            )),
            Err(_) => Err(failed("argument couldn't be parsed into an integer")),
        },
        "replica-serve-stale-data" | "slave-serve-stale-data" => {
            match text.to_ascii_lowercase().as_str() {
                "yes" => Ok(Change::ServeStale(true)),
                "no" => Ok(Change::ServeStale(false)),
                _ => Err(failed("argument must be 'yes' or 'no'")),
            }
        }
        "latency-tracking" => match text.to_ascii_lowercase().as_str() {
            "yes" => Ok(Change::LatencyTracking(true)),
            "no" => Ok(Change::LatencyTracking(false)),
            _ => Err(failed("argument must be 'yes' or 'no'")),
        },
        "latency-tracking-info-percentiles" => observe::parse_percentiles(&text)
            .map(Change::Percentiles)
            .map_err(failed),
        "notify-keyspace-events" => crate::notify::parse_flags(&text)
            .map(Change::Notify)
            .ok_or_else(|| failed("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")),
        "save" => crate::parse_save_rules(&text)
            .map(Change::Save)
            .map_err(|e| failed(&e)),
        "client-output-buffer-limit" => crate::OutputLimit::parse_classes(&text)
            .map(Change::Output)
            .map_err(|e| failed(&e)),
        "maxmemory-policy" => {
            let current = worker.shared.config.maxmemory_policy.redis_name();
            if text.eq_ignore_ascii_case(current) {
                Ok(Change::Unchanged)
            } else {
                Err(failed(
                    "fc-server sets the eviction policy at startup (--maxmemory-policy)",
                ))
            }
        }
        "appendonly" | "appendfsync" | "dir" | "dbfilename" | "databases" | "bind" | "port"
        | "io-threads" | "daemonize" | "tcp-keepalive" | "disable-thp" => {
            Err(failed("can't set immutable config"))
        }
        knob => match crate::knobs::Knobs::find(knob) {
            Some(index) => crate::knobs::Knobs::check(index, &text)
                .map(|value| Change::Knob(index, value))
                .map_err(failed),
            None => Err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )),
        },
    }
}

/// `SLOWLOG GET [count] | LEN | RESET | HELP` (the subcommand and its least arity were
/// checked before it runs).
pub(crate) fn slowlog<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R) {
    let observe = &worker.shared.observe;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"get" if args.len() <= 3 => {
            let count = match args.get(2) {
                None => Some(10),
                Some(arg) => match fc_resp::number::parse_i64(arg) {
                    Some(-1) => None,
                    Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    _ => return out.error(b"ERR count should be greater than or equal to -1"),
                },
            };
            let entries = observe.slowlog(count);
            out.array_len(entries.len());
            for e in entries {
                out.array_len(6);
                out.integer(e.id as i64);
                out.integer(e.time as i64);
                out.integer(e.micros as i64);
                out.array_len(e.args.len());
                e.args.iter().for_each(|a| out.bulk(a));
                out.bulk(e.addr.as_bytes());
                out.bulk(&e.name);
            }
        }
        b"len" => out.integer(observe.slowlog_len() as i64),
        b"reset" => {
            observe.slowlog_reset();
            out.ok();
        }
        b"help" => {
            let lines: &[&[u8]] = &[
                b"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"GET [<count>]",
                b"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                b"    Entries are made of:",
                b"    id, timestamp, time in microseconds, arguments array, client IP and port,",
                b"    client name",
                b"LEN",
                b"    Return the length of the slowlog.",
                b"RESET",
                b"    Reset the slowlog.",
                b"HELP",
                b"    Prints this help.",
            ];
            command::help(out, lines);
        }
        _ => subcommand_syntax_error(out, "SLOWLOG", &args[1]),
    }
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax_error<R: Reply>(out: &mut R, container: &str, sub: &[u8]) {
    let text = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    );
    out.error(text.as_bytes());
}

/// `LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR |
/// HISTOGRAM [command ...] | HELP` (the subcommand and its arity were checked before it
/// runs).
pub(crate) async fn latency<R: Reply>(
    worker: &Worker,
    args: &[Bytes],
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    let observe = &shared.observe;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"latest" => {
            let events = observe.events();
            out.array_len(events.len());
            for (event, series) in events {
                let latest = series.latest();
                out.array_len(4);
                out.bulk(event.as_bytes());
                out.integer(latest.time as i64);
                out.integer(latest.ms as i64);
                out.integer(series.max as i64);
            }
        }
        b"history" => {
            let samples = observe
                .event(&args[2])
                .map(|(_, series)| series.samples())
                .unwrap_or_default();
            out.array_len(samples.len());
            for s in samples {
                out.array_len(2);
                out.integer(s.time as i64);
                out.integer(s.ms as i64);
            }
        }
        b"reset" => out.integer(observe.reset_events(&args[2..]) as i64),
        b"graph" => match observe.event(&args[2]) {
            Some((event, series)) => {
                out.verbatim(*b"txt", observe::graph(event, &series).as_bytes());
            }
            None => {
                let text = format!(
                    "ERR No samples available for event '{}'",
                    String::from_utf8_lossy(&args[2])
                );
                out.error(text.as_bytes());
            }
        },
        b"doctor" => {
            let report = observe::doctor(
                &observe.events(),
                observe.slower_than(),
                observe.latency_ms(),
            );
            out.verbatim(*b"txt", report.as_bytes());
        }
        b"histogram" => {
            // With names: each one's slots in the order named (a container's own, then its
            // subcommands'); without: every slot.
            let order: Vec<usize> = if args.len() > 2 {
                args[2..]
                    .iter()
                    .flat_map(|name| command::slots_named(name))
                    .collect()
            } else {
                (0..command::slot_count()).collect()
            };
            let mut wanted = order.clone();
            wanted.sort_unstable();
            wanted.dedup();
            let hists = histograms(worker, &wanted, txn).await;
            let with_data: Vec<(usize, &Histogram)> = order
                .iter()
                .filter_map(|slot| hists.get(slot).map(|h| (*slot, h)))
                .filter(|(_, h)| h.total > 0)
                .collect();
            out.map_len(with_data.len());
            for (slot, h) in with_data {
                out.bulk(command::slot_name(slot).as_bytes());
                out.map_len(2);
                out.bulk(b"calls");
                out.integer(h.total as i64);
                out.bulk(b"histogram_usec");
                let cdf = h.cdf();
                out.map_len(cdf.len());
                for (micros, count) in cdf {
                    out.integer(micros as i64);
                    out.integer(count as i64);
                }
            }
        }
        b"help" => {
            let lines: &[&[u8]] = &[
                b"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"DOCTOR",
                b"    Return a human readable latency analysis report.",
                b"GRAPH <event>",
                b"    Return an ASCII latency graph for the <event> class.",
                b"HISTORY <event>",
                b"    Return time-latency samples for the <event> class.",
                b"LATEST",
                b"    Return the latest latency samples for all events.",
                b"RESET [<event> ...]",
                b"    Reset latency data of one or more <event> classes.",
                b"    (default: reset all data for all event classes)",
                b"HISTOGRAM [COMMAND ...]",
                b"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                b"    If no commands are specified then all histograms are replied.",
                b"HELP",
                b"    Prints this help.",
            ];
            command::help(out, lines);
        }
        _ => subcommand_syntax_error(out, "LATENCY", &args[1]),
    }
}

fn yes_no(yes: bool) -> &'static str {
    if yes { "yes" } else { "no" }
}
