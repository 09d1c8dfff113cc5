//! `INFO` (the fields redis_exporter and operators read) and `CONFIG GET`.

use std::fmt::Write;

use bytes::{Bytes, BytesMut};
use fc_resp::{Encoder, RespVersion};

use crate::command::Ctx;
use crate::worker::Worker;

/// Counters each worker reports for `INFO`.
pub(crate) const FIELDS: usize = 9;

/// One worker's counters as an array of integers: keys, expires, used memory, max memory,
/// hits, misses, expired, evicted, stored bytes.
pub(crate) fn stats_part(ctx: &mut Ctx<'_>) {
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

/// The integers of a `*n\r\n:a\r\n:b\r\n...` reply.
fn integers(part: &[u8]) -> Vec<u64> {
    part.split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b":"))
        .filter_map(|line| line.strip_suffix(b"\r"))
        .filter_map(fc_resp::number::parse_i64)
        .map(|n| n.max(0) as u64)
        .collect()
}

pub(crate) async fn info(
    worker: &Worker,
    version: RespVersion,
    args: &[Bytes],
    out: &mut BytesMut,
    txn: Option<&crate::conn::TxnLinks>,
) {
    let shared = &worker.shared;
    let mut totals = [0u64; FIELDS];
    for owner in 0..shared.workers {
        let mut part = BytesMut::new();
        let args = vec![Bytes::from_static(b"info")];
        crate::conn::exec_at(
            worker,
            owner,
            stats_part,
            args,
            RespVersion::Resp2,
            &mut part,
            txn,
        )
        .await;
        for (t, v) in totals.iter_mut().zip(integers(&part)) {
            *t += v;
        }
    }
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
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            shared.clients.load(std::sync::atomic::Ordering::Relaxed),
            shared.config.maxclients,
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
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nkeyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\nexpired_keys:{expired}\r\nevicted_keys:{evicted}\r\n\r\n",
            shared
                .connections
                .load(std::sync::atomic::Ordering::Relaxed),
            shared.commands.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
    if show("replication") {
        text.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n");
    }
    if show("keyspace") {
        text.push_str("# Keyspace\r\n");
        if keys > 0 {
            let _ = write!(text, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
    }
    Encoder::new(out, version).verbatim(*b"txt", text.as_bytes());
}

/// `CONFIG GET pattern ...` over the settings this server has; `CONFIG SET` of anything is
/// refused for now; `CONFIG RESETSTAT` answers OK.
pub(crate) fn config(worker: &Worker, args: &[Bytes], mut enc: Encoder<'_>) {
    let c = &worker.shared.config;
    let sub = args[1].to_ascii_lowercase();
    let params: [(&str, String); 9] = [
        ("maxmemory", c.maxmemory.unwrap_or(0).to_string()),
        (
            "maxmemory-policy",
            c.maxmemory_policy.redis_name().to_string(),
        ),
        ("maxclients", c.maxclients.to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("save", String::new()),
        ("appendonly", "no".to_string()),
        ("databases", "1".to_string()),
        ("port", worker.shared.port.to_string()),
        ("timeout", "0".to_string()),
    ];
    match sub.as_slice() {
        b"get" if args.len() >= 3 => {
            let found: Vec<&(&str, String)> = params
                .iter()
                .filter(|(name, _)| args[2..].iter().any(|p| glob(p, name.as_bytes())))
                .collect();
            enc.map_len(found.len());
            for (name, value) in found {
                enc.bulk(name.as_bytes());
                enc.bulk(value.as_bytes());
            }
        }
        b"set" if args.len() >= 4 => {
            let text = format!(
                "ERR Unsupported CONFIG parameter: {}",
                String::from_utf8_lossy(&args[2])
            );
            enc.error(text.as_bytes());
        }
        b"resetstat" => enc.ok(),
        _ => {
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
                String::from_utf8_lossy(&args[1])
            );
            enc.error(text.as_bytes());
        }
    }
}

/// A glob for CONFIG GET (`*` and `?`; parameters have no brackets).
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            glob(rest, name) || (!name.is_empty() && glob(pattern, &name[1..]))
        }
        (Some((b'?', rest)), Some((_, n))) => glob(rest, n),
        (Some((p, rest)), Some((c, n))) if p.eq_ignore_ascii_case(c) => glob(rest, n),
        _ => false,
    }
}
