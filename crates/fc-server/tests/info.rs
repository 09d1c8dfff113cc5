//! `INFO`: every section Redis 7 prints, with each of Redis's fields in its order (the names
//! recorded from redis-server 7.0.15; fast-cache's own fields follow them), and the fields
//! that measure something moving as they should.

mod common;

use common::{client, two_workers};
use redis::Commands;

/// (section, Redis 7.0.15's fields in order).
const REDIS_FIELDS: &[(&str, &str)] = &[
    (
        "server",
        "redis_version redis_git_sha1 redis_git_dirty redis_build_id redis_mode os arch_bits monotonic_clock multiplexing_api atomicvar_api gcc_version process_id process_supervised run_id tcp_port server_time_usec uptime_in_seconds uptime_in_days hz configured_hz lru_clock executable config_file io_threads_active",
    ),
    (
        "clients",
        "connected_clients cluster_connections maxclients client_recent_max_input_buffer client_recent_max_output_buffer blocked_clients tracking_clients clients_in_timeout_table",
    ),
    (
        "memory",
        "used_memory used_memory_human used_memory_rss used_memory_rss_human used_memory_peak used_memory_peak_human used_memory_peak_perc used_memory_overhead used_memory_startup used_memory_dataset used_memory_dataset_perc allocator_allocated allocator_active allocator_resident total_system_memory total_system_memory_human used_memory_lua used_memory_vm_eval used_memory_lua_human used_memory_scripts_eval number_of_cached_scripts number_of_functions number_of_libraries used_memory_vm_functions used_memory_vm_total used_memory_vm_total_human used_memory_functions used_memory_scripts used_memory_scripts_human maxmemory maxmemory_human maxmemory_policy allocator_frag_ratio allocator_frag_bytes allocator_rss_ratio allocator_rss_bytes rss_overhead_ratio rss_overhead_bytes mem_fragmentation_ratio mem_fragmentation_bytes mem_not_counted_for_evict mem_replication_backlog mem_total_replication_buffers mem_clients_slaves mem_clients_normal mem_cluster_links mem_aof_buffer mem_allocator active_defrag_running lazyfree_pending_objects lazyfreed_objects",
    ),
    (
        "persistence",
        "loading async_loading current_cow_peak current_cow_size current_cow_size_age current_fork_perc current_save_keys_processed current_save_keys_total rdb_changes_since_last_save rdb_bgsave_in_progress rdb_last_save_time rdb_last_bgsave_status rdb_last_bgsave_time_sec rdb_current_bgsave_time_sec rdb_saves rdb_last_cow_size rdb_last_load_keys_expired rdb_last_load_keys_loaded aof_enabled aof_rewrite_in_progress aof_rewrite_scheduled aof_last_rewrite_time_sec aof_current_rewrite_time_sec aof_last_bgrewrite_status aof_rewrites aof_rewrites_consecutive_failures aof_last_write_status aof_last_cow_size module_fork_in_progress module_fork_last_cow_size",
    ),
    (
        "stats",
        "total_connections_received total_commands_processed instantaneous_ops_per_sec total_net_input_bytes total_net_output_bytes total_net_repl_input_bytes total_net_repl_output_bytes instantaneous_input_kbps instantaneous_output_kbps instantaneous_input_repl_kbps instantaneous_output_repl_kbps rejected_connections sync_full sync_partial_ok sync_partial_err expired_keys expired_stale_perc expired_time_cap_reached_count expire_cycle_cpu_milliseconds evicted_keys evicted_clients total_eviction_exceeded_time current_eviction_exceeded_time keyspace_hits keyspace_misses pubsub_channels pubsub_patterns pubsubshard_channels latest_fork_usec total_forks migrate_cached_sockets slave_expires_tracked_keys active_defrag_hits active_defrag_misses active_defrag_key_hits active_defrag_key_misses total_active_defrag_time current_active_defrag_time tracking_total_keys tracking_total_items tracking_total_prefixes unexpected_error_replies total_error_replies dump_payload_sanitizations total_reads_processed total_writes_processed io_threaded_reads_processed io_threaded_writes_processed reply_buffer_shrinks reply_buffer_expands",
    ),
    (
        "replication",
        "role connected_slaves master_failover_state master_replid master_replid2 master_repl_offset second_repl_offset repl_backlog_active repl_backlog_size repl_backlog_first_byte_offset repl_backlog_histlen",
    ),
    (
        "cpu",
        "used_cpu_sys used_cpu_user used_cpu_sys_children used_cpu_user_children used_cpu_sys_main_thread used_cpu_user_main_thread",
    ),
];

fn section(con: &mut redis::Connection, name: &str) -> Vec<(String, String)> {
    let text: String = redis::cmd("INFO").arg(name).query(con).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn field(con: &mut redis::Connection, name: &str, key: &str) -> String {
    section(con, name)
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in INFO {name}"))
        .1
}

#[test]
fn every_section_has_redis_fields_in_redis_order() {
    let server = two_workers();
    let mut con = client(&server);
    for (name, fields) in REDIS_FIELDS {
        let got: Vec<String> = section(&mut con, name)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let want: Vec<&str> = fields.split(' ').collect();
        // Redis's fields first, in order; fast-cache's own may follow, and 7.2's
        // total_blocking_keys fields close the clients section.
        assert_eq!(&got[..want.len()], &want[..], "INFO {name}");
    }
    let all: String = redis::cmd("INFO").query(&mut con).unwrap();
    let headers: Vec<&str> = all.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    server.shutdown();
}

/// `INFO server` names the workers' runtime and what their sockets wait on: tokio's epoll, or
/// monoio's io_uring (`cargo xtask test-monoio` runs this on monoio; its epoll fallback would
/// show `epoll`).
#[test]
fn info_server_names_the_runtime() {
    use fc_server::config::{MonoioWriter, Runtime};
    let server = two_workers();
    let mut con = client(&server);
    let runtime = field(&mut con, "server", "worker_runtime");
    let api = field(&mut con, "server", "multiplexing_api");
    match common::runtime_from_env() {
        Runtime::Tokio => assert_eq!((runtime.as_str(), api.as_str()), ("tokio", "epoll")),
        Runtime::Monoio(writer) => {
            let name = match writer {
                MonoioWriter::Inline => "monoio-inline",
                MonoioWriter::Split => "monoio-split",
                MonoioWriter::Writev => "monoio-writev",
            };
            assert_eq!(runtime, name);
            assert!(api == "io_uring" || api == "epoll", "{api}");
        }
    }
}

#[test]
fn rates_traffic_memory_and_cpu_move_with_the_load() {
    let server = two_workers();
    let mut con = client(&server);
    let number = |con: &mut redis::Connection, s: &str, k: &str| -> f64 {
        field(con, s, k).trim_end_matches('%').parse().unwrap()
    };
    let input = number(&mut con, "stats", "total_net_input_bytes");
    let reads = number(&mut con, "stats", "total_reads_processed");
    let value = "v".repeat(1000);
    // A second of steady load (the 100 ms samples see it), and every one of the 5,000 keys
    // written at least once however slow the machine is (a loaded CI machine once wrote
    // 4,600 in the second, and used_memory stayed under what the keys take).
    let started = std::time::Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(1200) || sent < 5000 {
        let mut pipe = redis::pipe();
        for i in 0..50 {
            pipe.set(format!("k{}", (sent + i) % 5000), &value).ignore();
        }
        let _: () = pipe.query(&mut con).unwrap();
        sent += 50;
    }
    assert!(number(&mut con, "stats", "instantaneous_ops_per_sec") > 0.0);
    assert!(number(&mut con, "stats", "instantaneous_input_kbps") > 0.0);
    let grown = number(&mut con, "stats", "total_net_input_bytes") - input;
    assert!(
        grown >= (sent * 1000) as f64,
        "{grown} bytes read for {sent} SETs of 1000"
    );
    assert!(number(&mut con, "stats", "total_reads_processed") > reads);
    assert!(number(&mut con, "stats", "total_writes_processed") > 0.0);
    let used = number(&mut con, "memory", "used_memory");
    assert!(used >= 5_000_000.0, "{used}");
    assert!(number(&mut con, "memory", "used_memory_peak") >= used);
    assert!(number(&mut con, "memory", "used_memory_rss") > 0.0);
    assert!(number(&mut con, "memory", "total_system_memory") > used);
    assert!(field(&mut con, "memory", "used_memory_human").ends_with('M'));
    // The peak stays when the data goes.
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    assert!(number(&mut con, "memory", "used_memory_peak") >= used);
    assert!(number(&mut con, "memory", "used_memory") < used);
    let cpu = number(&mut con, "cpu", "used_cpu_user") + number(&mut con, "cpu", "used_cpu_sys");
    assert!(cpu > 0.0);
    let run_id = field(&mut con, "server", "run_id");
    assert_eq!(run_id.len(), 40);
    assert!(run_id.chars().all(|c| c.is_ascii_hexdigit()));
    let _: () = con.set("x", 1).unwrap();
    server.shutdown();
}
