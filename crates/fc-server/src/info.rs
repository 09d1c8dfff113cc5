//! `INFO` (the fields redis_exporter and operators read) and `CONFIG GET`.

use std::fmt::Write;

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::command::{Ctx, Handler, store};
use crate::cross::{TxnLinks, exec_at};
use crate::reply::{Replies, Reply};
use crate::worker::Worker;

/// Counters each worker reports for `INFO`.
pub(crate) const FIELDS: usize = 9;

/// One worker's counters as an array of integers: keys, expires, used memory, max memory,
/// hits, misses, expired, evicted, stored bytes.
fn stats_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let t = ctx.store.stats_snapshot().total();
    let values = [
        t.keys,
        t.expires,
        t.used_memory,
        t.max_memory,
        t.hits,
        t.misses,
        t.expired,
        t.evicted,
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

/// `INFO [section ...]`.
pub(crate) async fn info<R: Reply>(
    worker: &Worker,
    args: &[Bytes],
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    let totals = totals(worker, txn).await;
    let [
        keys,
        expires,
        used,
        max,
        hits,
        misses,
        expired,
        evicted,
        _stored,
    ] = totals;
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "everything" || w == "default");
    let show = |section: &str| all || wanted.iter().any(|w| w == section);
    let uptime = shared.started.elapsed().as_secs();
    let mut text = String::new();
    if show("server") {
        let _ = write!(
            text,
            "# Server\r\nredis_version:{}\r\nfast_cache_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nio_threads_active:0\r\nworker_threads:{}\r\n\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            shared.port,
            uptime / 86_400,
            shared.workers,
        );
    }
    if show("clients") {
        let _ = write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntotal_blocking_keys:{}\r\n\r\n",
            shared.clients.load(std::sync::atomic::Ordering::Relaxed),
            shared.live.maxclients.load(Ordering::Relaxed),
            shared.max_output_buffer.load(Ordering::Relaxed),
            shared.blocked.count(),
            shared.blocked.keys_waited(),
        );
    }
    if show("memory") {
        let _ = write!(
            text,
            "# Memory\r\nused_memory:{used}\r\nmaxmemory:{max}\r\nmaxmemory_policy:{}\r\n\r\n",
            shared.config.maxmemory_policy.redis_name(),
        );
    }
    if show("persistence") {
        if let Some(persist) = &shared.persist {
            persist.info(&mut text);
        } else {
            text.push_str("# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n\r\n");
        }
    }
    if show("stats") {
        let pubsub = shared.pubsub.counts();
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nkeyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\nexpired_keys:{expired}\r\nexpired_stale_perc:{:.2}\r\nexpired_time_cap_reached_count:{}\r\nevicted_keys:{evicted}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\n\r\n",
            shared
                .connections
                .load(std::sync::atomic::Ordering::Relaxed),
            shared.commands.load(std::sync::atomic::Ordering::Relaxed),
            shared
                .expiry
                .iter()
                .map(|e| e.stale_ppm.load(Ordering::Relaxed))
                .sum::<u64>() as f64
                / shared.expiry.len().max(1) as f64
                / 10_000.0,
            shared
                .expiry
                .iter()
                .map(|e| e.time_cap_reached.load(Ordering::Relaxed))
                .sum::<u64>(),
            pubsub.0,
            pubsub.1,
            pubsub.2,
        );
    }
    if show("replication") {
        text.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n");
    }
    if show("cluster") {
        // Clients and tools read it to choose standalone or cluster mode.
        text.push_str("# Cluster\r\ncluster_enabled:0\r\n\r\n");
    }
    if show("keyspace") {
        text.push_str("# Keyspace\r\n");
        if keys > 0 {
            let _ = write!(text, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
    }
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
                    Change::ProtoMaxBulkLen(n) => {
                        live.proto_max_bulk_len.store(n, Ordering::Relaxed);
                        live.limits_epoch.fetch_add(1, Ordering::Release);
                    }
                    Change::ClientQueryBufferLimit(n) => {
                        live.client_query_buffer_limit.store(n, Ordering::Relaxed);
                        live.limits_epoch.fetch_add(1, Ordering::Release);
                    }
                    Change::RequirePass(p) => {
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
                    Change::Notify(flags) => worker.shared.notifier.set_flags(flags),
                }
            }
            out.ok();
        }
        b"resetstat" if args.len() == 2 => out.ok(),
        b"help" if args.len() == 2 => {
            let lines: &[&[u8]] = &[
                b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"GET <pattern> [<pattern> ...]",
                b"SET <directive> <value> [<directive> <value> ...]: maxmemory, maxclients, timeout, hz, requirepass, save, client-output-buffer-limit, proto-max-bulk-len, client-query-buffer-limit; Redis's encoding, lazyfree and eviction-sampler settings are accepted and reported, and change nothing",
                b"RESETSTAT",
            ];
            crate::command::help(out, lines);
        }
        _ => {
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
                String::from_utf8_lossy(&args[1])
            );
            out.error(text.as_bytes());
        }
    }
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
        ("databases", "1".to_string()),
        ("bind", c.bind.ip().to_string()),
        ("port", shared.port.to_string()),
        ("tcp-keepalive", "0".to_string()),
        ("io-threads", shared.workers.to_string()),
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
        | "io-threads" | "daemonize" | "tcp-keepalive" => Err(failed("can't set immutable config")),
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
