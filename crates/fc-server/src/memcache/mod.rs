//! The memcached protocol (`--memcached-bind`): memcached's text protocol (`get`, `gets`, `gat`,
//! `gats`, `set`, `add`, `replace`, `append`, `prepend`, `cas`, `incr`, `decr`, `touch`,
//! `delete`, `flush_all`, `stats`, `version`, `verbosity`, `quit`) and its meta protocol (`mg`,
//! `ms`, `md`, `ma`, `mn`, `me`) on the same engine and keyspace as RESP (database 0): a
//! memcached item is a string, its client flags and CAS value kept beside it (`mc_meta`).
//! Each item operation runs on the key's owner as one store handler (`ops`), so it is atomic
//! as a RESP command is. Replies and errors are memcached 1.6's lines, byte for byte.
//!
//! The port has no authentication (memcached's text protocol has none): it is off by default
//! and meant for loopback or a trusted network, as memcached is.

mod ops;
pub(crate) mod proto;

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::net::TcpStream;

use crate::command::{Handler, store};
use crate::mc_meta::McStats;
use crate::reply::{Replies, Reply};
use crate::socket::Socket;
use crate::worker::Worker;
use ops::{Expiry, Item, MC};
use proto::{Command, MetaFlag, StoreOp};

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Clears database 0 on one worker (`flush_all`).
const MC_FLUSH: Handler = store!(mc_flush);

fn mc_flush<R: Reply>(ctx: &mut crate::command::Ctx<'_, R>) {
    ctx.store.clear_db(0);
    ctx.out.ok();
}

/// One worker's keys and used memory (`stats`).
const MC_SIZE: Handler = store!(mc_size);

fn mc_size<R: Reply>(ctx: &mut crate::command::Ctx<'_, R>) {
    let stats = ctx.store.stats_snapshot().total();
    ctx.out.array_len(3);
    ctx.out.integer(ctx.store.len() as i64);
    ctx.out.integer(stats.used_memory as i64);
    ctx.out.integer(stats.evicted as i64);
}

/// The stored form of a memcached key (database 0's rule: one beginning with the namespace
/// byte is stored namespaced, as RESP stores it).
fn stored(key: &Bytes) -> Bytes {
    if key.first() == Some(&0xFF) {
        Bytes::from(fc_shard::namespaced(0, key))
    } else {
        key.clone()
    }
}

/// The connection's place in the client registry (`CLIENT LIST`, `CLIENT KILL`, the idle
/// timeout, shutdown) and in the counts, while it lives.
struct Registered<'a> {
    shared: &'a crate::shared::Shared,
    id: u64,
    client: std::sync::Arc<crate::clients::Client>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.client.closed.store(true, Ordering::Release);
        self.shared.registry.remove(self.id);
        self.shared.clients.fetch_sub(1, Ordering::Release);
        self.shared
            .memcached
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one memcached connection (the acceptor counted it in `clients`).
pub(crate) async fn serve(stream: std::net::TcpStream, worker: Rc<Worker>) {
    let shared = &worker.shared;
    shared
        .memcached
        .curr_connections
        .fetch_add(1, Ordering::Relaxed);
    bump(&shared.memcached.total_connections);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed) + 1;
    let registered = Registered {
        shared,
        id,
        client: shared.registry.register(id, &stream),
    };
    let _ = stream.set_nodelay(true);
    // A monoio worker serves it through io_uring (see `rt`).
    #[cfg(feature = "monoio")]
    if let Some(writer) = crate::rt::monoio_writer() {
        if let Ok(socket) = crate::uring::UringSocket::new(stream, writer, false) {
            run_loop(socket, &worker, &registered).await;
        }
        return;
    }
    let Ok(stream) = TcpStream::from_std(stream) else {
        return;
    };
    run_loop(stream, &worker, &registered).await;
}

/// The connection's loop over its socket.
async fn run_loop<S: Socket>(mut stream: S, worker: &Rc<Worker>, registered: &Registered<'_>) {
    let (shared, client) = (registered.shared, &registered.client);
    // Ended from outside (`CLIENT KILL`, the idle timeout, the server stopping).
    let kill = client.kill.notified();
    tokio::pin!(kill);
    let item_max = shared.config.memcached_item_max;
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut swallow = 0usize;
    // Item operations on this worker write their typed reply here (reused).
    let mut scratch = Replies::new();
    loop {
        let read = tokio::select! {
            read = stream.read_buf(&mut rbuf) => read,
            () = &mut kill => return,
        };
        client
            .active_ms
            .store(shared.registry.now_ms(), Ordering::Relaxed);
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                shared
                    .memcached
                    .bytes_read
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        let mut close = false;
        // What was read, parsed in place (keys and values are slices of it); an incomplete
        // command's bytes go back to the read buffer.
        let chunk = rbuf.split().freeze();
        let mut pos = 0;
        loop {
            if swallow > 0 {
                let n = swallow.min(chunk.len() - pos);
                pos += n;
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            let view = chunk.slice(pos..);
            match proto::parse(&view, item_max) {
                Ok(None) => break,
                Ok(Some((command, used))) => {
                    pos += used;
                    if command == Command::Quit {
                        close = true;
                        break;
                    }
                    run(worker, &mut scratch, command, &mut out).await;
                }
                Err(refusal) => {
                    pos += refusal.used.min(view.len());
                    swallow = refusal.swallow;
                    out.extend_from_slice(refusal.line);
                    if refusal.close {
                        close = true;
                        break;
                    }
                }
            }
        }
        rbuf.extend_from_slice(&chunk[pos..]);
        if !out.is_empty() {
            shared
                .memcached
                .bytes_written
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            if stream.write_all(&mut out).await.is_err() {
                return;
            }
            out.clear();
        }
        // What this read wrote for replication leaves within a millisecond, also while the
        // worker never runs out of work (see `Repl::worker_busy`).
        shared.repl.worker_busy(worker.index);
        if close {
            return;
        }
    }
}

/// Clears database 0 on every worker.
async fn flush(worker: &Worker) {
    for owner in 0..worker.shared.workers {
        let _ = worker
            .execute_on(owner, MC_FLUSH, vec![Bytes::from_static(b"mcflush")])
            .await;
    }
}

/// Runs one item operation on its key's owner: in place when that is this worker and no
/// transaction holds it (its reply in `scratch`), else by message.
async fn item_op(worker: &Worker, scratch: &mut Replies, key: &Bytes, args: Vec<Bytes>) -> Item {
    let owner = worker.shared.owner_of(key);
    let mut full = Vec::with_capacity(args.len() + 2);
    full.push(Bytes::from_static(b"mc"));
    full.push(key.clone());
    full.extend(args);
    if owner == worker.index && !worker.is_locked() {
        worker.execute_into(MC, &full, None, scratch);
        return ops::item(scratch);
    }
    ops::item(&worker.execute_on(owner, MC, full).await)
}

fn now_unix() -> i64 {
    (fc_snapshot::unix_ms() / 1000) as i64
}

fn put_value(out: &mut BytesMut, key: &[u8], item: &Item, cas: bool) {
    let value = item.value.as_deref().unwrap_or_default();
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let mut line = format!(" {} {}", item.flags, value.len());
    if cas {
        line.push_str(&format!(" {}", item.cas));
    }
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

async fn run(worker: &Rc<Worker>, scratch: &mut Replies, command: Command, out: &mut BytesMut) {
    let stats: &McStats = &worker.shared.memcached;
    // A replica's data changes only through its primary (RESP's `READONLY`).
    let writes = match &command {
        Command::Get { touch, .. } => touch.is_some(),
        Command::MetaGet { flags, .. } => has(flags, b'T'),
        Command::Store { .. }
        | Command::Delta { .. }
        | Command::Touch { .. }
        | Command::Delete { .. }
        | Command::FlushAll { .. }
        | Command::MetaSet { .. }
        | Command::MetaDelete { .. }
        | Command::MetaArithmetic { .. } => true,
        _ => false,
    };
    if writes && worker.shared.repl.read_only() {
        out.extend_from_slice(b"SERVER_ERROR read only replica\r\n");
        return;
    }
    match command {
        Command::Get { keys, cas, touch } => {
            let touch = touch.map(|t| Expiry::from_exptime(t, now_unix()));
            for key in &keys {
                bump(&stats.cmd_get);
                if touch.is_some() {
                    bump(&stats.cmd_touch);
                }
                let args = vec![
                    Bytes::from_static(b"get"),
                    Bytes::from_static(if cas { b"1" } else { b"0" }),
                    touch.unwrap_or(Expiry::Keep).arg(),
                ];
                let item = item_op(worker, scratch, &stored(key), args).await;
                if &item.status[..] == b"HIT" {
                    bump(&stats.get_hits);
                    if touch.is_some() {
                        bump(&stats.touch_hits);
                    }
                    put_value(out, key, &item, cas);
                } else {
                    bump(&stats.get_misses);
                    if touch.is_some() {
                        bump(&stats.touch_misses);
                    }
                }
            }
            out.extend_from_slice(b"END\r\n");
        }
        Command::Store {
            op,
            key,
            flags,
            exptime,
            data,
            cas,
            noreply,
        } => {
            bump(&stats.cmd_set);
            let compare = if op == StoreOp::Cas {
                Bytes::from(cas.to_string())
            } else {
                Bytes::new()
            };
            let mode = if op == StoreOp::Cas {
                Bytes::from_static(b"cas")
            } else {
                Bytes::from_static(op.name())
            };
            let args = vec![
                Bytes::from_static(b"store"),
                mode,
                data,
                Bytes::from(flags.to_string()),
                Expiry::from_exptime(exptime, now_unix()).arg(),
                compare,
            ];
            let item = item_op(worker, scratch, &stored(&key), args).await;
            if op == StoreOp::Cas {
                match &item.status[..] {
                    b"STORED" => bump(&stats.cas_hits),
                    b"EXISTS" => bump(&stats.cas_badval),
                    _ => bump(&stats.cas_misses),
                }
            }
            let line: &[u8] = match &item.status[..] {
                b"STORED" => b"STORED\r\n",
                b"NOT_STORED" => b"NOT_STORED\r\n",
                b"EXISTS" => b"EXISTS\r\n",
                b"NOT_FOUND" => b"NOT_FOUND\r\n",
                _ => b"SERVER_ERROR out of memory storing object\r\n",
            };
            if !noreply || line.starts_with(b"SERVER_ERROR") {
                out.extend_from_slice(line);
            }
        }
        Command::Delta {
            incr,
            key,
            delta,
            noreply,
        } => {
            let args = vec![
                Bytes::from_static(b"delta"),
                Bytes::from_static(if incr { b"incr" } else { b"decr" }),
                Bytes::from(delta.to_string()),
            ];
            let item = item_op(worker, scratch, &stored(&key), args).await;
            let (hits, misses) = if incr {
                (&stats.incr_hits, &stats.incr_misses)
            } else {
                (&stats.decr_hits, &stats.decr_misses)
            };
            match &item.status[..] {
                b"OK" => {
                    bump(hits);
                    if !noreply {
                        out.extend_from_slice(item.value.as_deref().unwrap_or_default());
                        out.extend_from_slice(b"\r\n");
                    }
                }
                b"NOT_FOUND" => {
                    bump(misses);
                    if !noreply {
                        out.extend_from_slice(b"NOT_FOUND\r\n");
                    }
                }
                // memcached's noreply silences this error too.
                b"NON_NUMERIC" if !noreply => out.extend_from_slice(
                    b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
                ),
                b"NON_NUMERIC" => {}
                _ => out.extend_from_slice(b"SERVER_ERROR out of memory\r\n"),
            }
        }
        Command::Touch {
            key,
            exptime,
            noreply,
        } => {
            bump(&stats.cmd_touch);
            let args = vec![
                Bytes::from_static(b"touch"),
                Expiry::from_exptime(exptime, now_unix()).arg(),
            ];
            let item = item_op(worker, scratch, &stored(&key), args).await;
            let hit = &item.status[..] == b"TOUCHED";
            hit_or_miss(
                hit,
                (&stats.touch_hits, &stats.touch_misses),
                b"TOUCHED\r\n",
                noreply,
                out,
            );
        }
        Command::Delete { key, noreply } => {
            let args = vec![Bytes::from_static(b"delete")];
            let item = item_op(worker, scratch, &stored(&key), args).await;
            let hit = &item.status[..] == b"DELETED";
            hit_or_miss(
                hit,
                (&stats.delete_hits, &stats.delete_misses),
                b"DELETED\r\n",
                noreply,
                out,
            );
        }
        Command::FlushAll { delay, noreply } => {
            bump(&stats.cmd_flush);
            if delay > 0 {
                // Later (the reply is now, as memcached's).
                let worker = Rc::clone(worker);
                crate::rt::spawn_local(async move {
                    tokio::time::sleep(Duration::from_secs(delay as u64)).await;
                    flush(&worker).await;
                });
            } else {
                flush(worker).await;
            }
            if !noreply {
                out.extend_from_slice(b"OK\r\n");
            }
        }
        Command::Version => {
            out.extend_from_slice(
                format!("VERSION {}-fast-cache\r\n", env!("CARGO_PKG_VERSION")).as_bytes(),
            );
        }
        Command::Verbosity { noreply } => {
            if !noreply {
                out.extend_from_slice(b"OK\r\n");
            }
        }
        Command::Quit => {}
        Command::Stats(group) => stats_reply(worker, group.as_deref(), out).await,
        Command::MetaNoop => out.extend_from_slice(b"MN\r\n"),
        Command::MetaGet { key, flags } => meta_get(worker, scratch, &key, &flags, out).await,
        Command::MetaSet { key, data, flags } => {
            meta_set(worker, scratch, &key, data, &flags, out).await;
        }
        Command::MetaDelete { key, flags } => {
            meta_delete(worker, scratch, &key, &flags, out).await;
        }
        Command::MetaArithmetic { key, flags } => {
            meta_arith(worker, scratch, &key, &flags, out).await;
        }
        Command::MetaDebug { key } => {
            let args = vec![
                Bytes::from_static(b"get"),
                Bytes::from_static(b"1"),
                Expiry::Keep.arg(),
            ];
            let item = item_op(worker, scratch, &stored(&key), args).await;
            if &item.status[..] == b"HIT" {
                let line = format!(
                    "ME {} exp={} la=0 cas={} fetch=no cls=1 size={}\r\n",
                    String::from_utf8_lossy(&key),
                    item.ttl,
                    item.cas,
                    item.value.as_ref().map_or(0, Bytes::len)
                );
                out.extend_from_slice(line.as_bytes());
            } else {
                out.extend_from_slice(b"EN\r\n");
            }
        }
    }
}

/// Counts a hit or a miss and answers `on_hit` or `NOT_FOUND` (unless `noreply`).
fn hit_or_miss(
    hit: bool,
    (hits, misses): (&AtomicU64, &AtomicU64),
    on_hit: &[u8],
    noreply: bool,
    out: &mut BytesMut,
) {
    bump(if hit { hits } else { misses });
    if !noreply {
        out.extend_from_slice(if hit { on_hit } else { b"NOT_FOUND\r\n" });
    }
}

fn flag(flags: &[MetaFlag], letter: u8) -> Option<&Bytes> {
    flags.iter().find(|(l, _)| *l == letter).map(|(_, t)| t)
}

fn has(flags: &[MetaFlag], letter: u8) -> bool {
    flags.iter().any(|(l, _)| *l == letter)
}

fn number<T: std::str::FromStr>(token: Option<&Bytes>) -> Option<T> {
    std::str::from_utf8(token?).ok()?.parse().ok()
}

/// The return flags a meta command asked for, in its order (` k<key>`, ` O<opaque>`, ...).
fn return_flags(flags: &[MetaFlag], key: &[u8], item: &Item, allowed: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    for (letter, token) in flags {
        if !allowed.contains(letter) {
            continue;
        }
        text.push(b' ');
        text.push(*letter);
        match letter {
            b'k' => text.extend_from_slice(key),
            b'O' => text.extend_from_slice(token),
            b'c' => text.extend_from_slice(item.cas.to_string().as_bytes()),
            b'f' => text.extend_from_slice(item.flags.to_string().as_bytes()),
            b's' => text.extend_from_slice(
                item.value
                    .as_ref()
                    .map_or(0, Bytes::len)
                    .to_string()
                    .as_bytes(),
            ),
            b't' => text.extend_from_slice(item.ttl.to_string().as_bytes()),
            _ => {}
        }
    }
    text
}

/// A meta command's flags other than those it takes: memcached answers `CLIENT_ERROR invalid
/// flag`.
fn unknown_flag(flags: &[MetaFlag], takes: &[u8]) -> bool {
    flags.iter().any(|(l, _)| !takes.contains(l))
}

fn ttl_expiry(token: Option<&Bytes>) -> Option<Expiry> {
    number::<i64>(token).map(|t| Expiry::from_exptime(t, now_unix()))
}

async fn meta_get(
    worker: &Worker,
    scratch: &mut Replies,
    key: &Bytes,
    flags: &[MetaFlag],
    out: &mut BytesMut,
) {
    if unknown_flag(flags, b"cfkOqstTv") {
        out.extend_from_slice(proto::BAD_FLAG);
        return;
    }
    let stats = &worker.shared.memcached;
    bump(&stats.cmd_get);
    let touch = match flag(flags, b'T') {
        Some(t) => match ttl_expiry(Some(t)) {
            Some(e) => e,
            None => {
                out.extend_from_slice(proto::BAD_FORMAT);
                return;
            }
        },
        None => Expiry::Keep,
    };
    let args = vec![
        Bytes::from_static(b"get"),
        Bytes::from_static(if has(flags, b'c') { b"1" } else { b"0" }),
        touch.arg(),
    ];
    let item = item_op(worker, scratch, &stored(key), args).await;
    if &item.status[..] != b"HIT" {
        bump(&stats.get_misses);
        if !has(flags, b'q') {
            out.extend_from_slice(b"EN");
            out.extend_from_slice(&return_flags(flags, key, &item, b"kO"));
            out.extend_from_slice(b"\r\n");
        }
        return;
    }
    bump(&stats.get_hits);
    let returned = return_flags(flags, key, &item, b"cfkOst");
    if has(flags, b'v') {
        let value = item.value.as_deref().unwrap_or_default();
        out.extend_from_slice(format!("VA {}", value.len()).as_bytes());
        out.extend_from_slice(&returned);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(b"HD");
        out.extend_from_slice(&returned);
        out.extend_from_slice(b"\r\n");
    }
}

async fn meta_set(
    worker: &Worker,
    scratch: &mut Replies,
    key: &Bytes,
    data: Bytes,
    flags: &[MetaFlag],
    out: &mut BytesMut,
) {
    if unknown_flag(flags, b"cCFkMOqT") {
        out.extend_from_slice(proto::BAD_FLAG);
        return;
    }
    bump(&worker.shared.memcached.cmd_set);
    let mode: &[u8] = match flag(flags, b'M').map(|m| m.first().copied()) {
        None => b"set",
        Some(Some(b'S' | b's')) => b"set",
        Some(Some(b'E' | b'e')) => b"add",
        Some(Some(b'A' | b'a')) => b"append",
        Some(Some(b'P' | b'p')) => b"prepend",
        Some(Some(b'R' | b'r')) => b"replace",
        _ => {
            out.extend_from_slice(b"CLIENT_ERROR invalid mode for ms STORE\r\n");
            return;
        }
    };
    let client_flags = match flag(flags, b'F') {
        Some(f) => match number::<u32>(Some(f)) {
            Some(f) => f,
            None => {
                out.extend_from_slice(proto::BAD_FORMAT);
                return;
            }
        },
        None => 0,
    };
    let expiry = match flag(flags, b'T') {
        Some(t) => match ttl_expiry(Some(t)) {
            Some(e) => e,
            None => {
                out.extend_from_slice(proto::BAD_FORMAT);
                return;
            }
        },
        None => Expiry::Never,
    };
    let compare = flag(flags, b'C').cloned().unwrap_or_default();
    let args = vec![
        Bytes::from_static(b"store"),
        Bytes::from_static(mode),
        data,
        Bytes::from(client_flags.to_string()),
        expiry.arg(),
        compare,
        Bytes::from_static(if has(flags, b'c') { b"1" } else { b"0" }),
    ];
    let item = item_op(worker, scratch, &stored(key), args).await;
    let code: &[u8] = match &item.status[..] {
        b"STORED" => b"HD",
        b"NOT_STORED" => b"NS",
        b"EXISTS" => b"EX",
        b"NOT_FOUND" => b"NF",
        _ => {
            out.extend_from_slice(b"SERVER_ERROR out of memory storing object\r\n");
            return;
        }
    };
    if code == b"HD" && has(flags, b'q') {
        return;
    }
    out.extend_from_slice(code);
    // A refused store returns its key and opaque, and a CAS of 0.
    let shown = if code == b"HD" {
        item
    } else {
        Item { cas: 0, ..item }
    };
    out.extend_from_slice(&return_flags(flags, key, &shown, b"ckO"));
    out.extend_from_slice(b"\r\n");
}

async fn meta_delete(
    worker: &Worker,
    scratch: &mut Replies,
    key: &Bytes,
    flags: &[MetaFlag],
    out: &mut BytesMut,
) {
    if unknown_flag(flags, b"cCkOq") {
        out.extend_from_slice(proto::BAD_FLAG);
        return;
    }
    let mut args = vec![Bytes::from_static(b"delete")];
    if let Some(cas) = flag(flags, b'C') {
        args.push(cas.clone());
    }
    let item = item_op(worker, scratch, &stored(key), args).await;
    let code: &[u8] = match &item.status[..] {
        b"DELETED" => b"HD",
        b"EXISTS" => b"EX",
        _ => b"NF",
    };
    if code == b"HD" && has(flags, b'q') {
        return;
    }
    out.extend_from_slice(code);
    out.extend_from_slice(&return_flags(flags, key, &item, b"kO"));
    out.extend_from_slice(b"\r\n");
}

async fn meta_arith(
    worker: &Worker,
    scratch: &mut Replies,
    key: &Bytes,
    flags: &[MetaFlag],
    out: &mut BytesMut,
) {
    if unknown_flag(flags, b"cCDJkMNOqtTv") {
        out.extend_from_slice(proto::BAD_FLAG);
        return;
    }
    let incr = match flag(flags, b'M').map(|m| m.first().copied()) {
        None | Some(Some(b'I' | b'i' | b'+')) => true,
        Some(Some(b'D' | b'd' | b'-')) => false,
        _ => {
            out.extend_from_slice(b"CLIENT_ERROR invalid mode for ma MODE\r\n");
            return;
        }
    };
    let delta = match flag(flags, b'D') {
        Some(d) => match number::<u64>(Some(d)) {
            Some(d) => d,
            None => {
                out.extend_from_slice(b"CLIENT_ERROR invalid numeric delta argument\r\n");
                return;
            }
        },
        None => 1,
    };
    let vivify = ttl_expiry(flag(flags, b'N'));
    let initial = number::<u64>(flag(flags, b'J')).unwrap_or(0);
    let args = vec![
        Bytes::from_static(b"delta"),
        Bytes::from_static(if incr { b"incr" } else { b"decr" }),
        Bytes::from(delta.to_string()),
        vivify.map_or_else(Bytes::new, |_| Bytes::from(initial.to_string())),
        vivify.unwrap_or(Expiry::Never).arg(),
        flag(flags, b'C').cloned().unwrap_or_default(),
        ttl_expiry(flag(flags, b'T')).unwrap_or(Expiry::Keep).arg(),
        Bytes::from_static(if has(flags, b'c') { b"1" } else { b"0" }),
    ];
    let item = item_op(worker, scratch, &stored(key), args).await;
    let code: &[u8] = match &item.status[..] {
        b"OK" | b"STORED" => b"HD",
        b"NOT_FOUND" => b"NF",
        b"EXISTS" => b"EX",
        b"NON_NUMERIC" => {
            out.extend_from_slice(
                b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            );
            return;
        }
        _ => {
            out.extend_from_slice(b"SERVER_ERROR out of memory\r\n");
            return;
        }
    };
    let returned = return_flags(
        flags,
        key,
        &item,
        if code == b"HD" { b"cktO" } else { b"kO" },
    );
    if code == b"HD" && has(flags, b'q') {
        return;
    }
    if code == b"HD" && has(flags, b'v') {
        let value = item.value.as_deref().unwrap_or_default();
        out.extend_from_slice(format!("VA {}", value.len()).as_bytes());
        out.extend_from_slice(&returned);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
        return;
    }
    out.extend_from_slice(code);
    out.extend_from_slice(&returned);
    out.extend_from_slice(b"\r\n");
}

async fn stats_reply(worker: &Worker, group: Option<&[u8]>, out: &mut BytesMut) {
    let shared = &worker.shared;
    let s = &shared.memcached;
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut stat = |k: &str, v: String| lines.push((k.to_string(), v));
    match group {
        None => {
            let (mut items, mut bytes, mut evictions) = (0i64, 0i64, 0i64);
            for owner in 0..shared.workers {
                let part = worker
                    .execute_on(owner, MC_SIZE, vec![Bytes::from_static(b"mcsize")])
                    .await;
                let mut n = part.integers();
                items += n.next().unwrap_or(0);
                bytes += n.next().unwrap_or(0);
                evictions += n.next().unwrap_or(0);
            }
            let uptime = shared.started.elapsed().as_secs();
            stat("pid", std::process::id().to_string());
            stat("uptime", uptime.to_string());
            stat("time", now_unix().to_string());
            stat(
                "version",
                format!("{}-fast-cache", env!("CARGO_PKG_VERSION")),
            );
            stat(
                "pointer_size",
                (8 * std::mem::size_of::<usize>()).to_string(),
            );
            stat("curr_connections", load(&s.curr_connections).to_string());
            stat("total_connections", load(&s.total_connections).to_string());
            for (name, c) in [
                ("cmd_get", &s.cmd_get),
                ("cmd_set", &s.cmd_set),
                ("cmd_flush", &s.cmd_flush),
                ("cmd_touch", &s.cmd_touch),
                ("get_hits", &s.get_hits),
                ("get_misses", &s.get_misses),
                ("delete_misses", &s.delete_misses),
                ("delete_hits", &s.delete_hits),
                ("incr_misses", &s.incr_misses),
                ("incr_hits", &s.incr_hits),
                ("decr_misses", &s.decr_misses),
                ("decr_hits", &s.decr_hits),
                ("cas_misses", &s.cas_misses),
                ("cas_hits", &s.cas_hits),
                ("cas_badval", &s.cas_badval),
                ("touch_hits", &s.touch_hits),
                ("touch_misses", &s.touch_misses),
                ("bytes_read", &s.bytes_read),
                ("bytes_written", &s.bytes_written),
            ] {
                stat(name, load(c).to_string());
            }
            stat(
                "limit_maxbytes",
                shared.config.maxmemory.unwrap_or(0).to_string(),
            );
            stat("threads", shared.workers.to_string());
            stat("bytes", bytes.to_string());
            stat("curr_items", items.to_string());
            stat("evictions", evictions.to_string());
        }
        Some(b"settings") => {
            stat("maxbytes", shared.config.maxmemory.unwrap_or(0).to_string());
            stat("maxconns", shared.config.maxclients.to_string());
            stat("num_threads", shared.workers.to_string());
            stat(
                "item_size_max",
                shared.config.memcached_item_max.to_string(),
            );
            stat(
                "evictions",
                if shared.config.maxmemory_policy == fc_shard::EvictionPolicy::NoEviction {
                    "off".into()
                } else {
                    "on".into()
                },
            );
            stat("cas_enabled", "yes".into());
        }
        Some(b"items" | b"slabs") => {
            // No slabs: the engine's size classes are not memcached's; nothing to list.
        }
        Some(_) => {
            out.extend_from_slice(b"ERROR\r\n");
            return;
        }
    }
    for (k, v) in lines {
        out.extend_from_slice(format!("STAT {k} {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"END\r\n");
}
