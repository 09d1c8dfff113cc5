//! One client connection: read, parse every complete command, execute (locally or on the
//! owning worker), write all replies with one flush. Connection-level commands live here.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use fc_resp::{Encoder, Limits, RequestParser, RespVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::command::{self, Merge, Route};
use std::collections::BTreeSet;

use tokio::sync::{mpsc, oneshot};

use crate::clients::{Client, Ended, KillFilter};
use crate::watched::WatchedKey;
use crate::worker::{Job, Parsed, Shared, TxnCommand, Worker};

/// Replies are written out once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;

struct State {
    /// Commands queued since `MULTI` (and whether one was refused while queueing).
    multi: Option<Vec<(&'static command::Spec, Vec<Bytes>)>>,
    dirty: bool,
    id: u64,
    version: RespVersion,
    authed: bool,
    quit: bool,
    /// This client's entry in the registry (name, library, kill switch).
    client: Arc<Client>,
    /// Keys `WATCH`ed since the last `EXEC`/`DISCARD`/`UNWATCH`.
    watched: Vec<WatchedKey>,
    shared: Arc<Shared>,
    /// Whether the replies pending include a write command's (persistence: those are never
    /// sent once the log has failed).
    wrote: bool,
}

impl State {
    fn set_version(&mut self, version: RespVersion) {
        self.version = version;
        let number = if version == RespVersion::Resp3 { 3 } else { 2 };
        self.client.resp.store(number, Ordering::Relaxed);
    }

    fn set_multi(&mut self, queue: Option<Vec<(&'static command::Spec, Vec<Bytes>)>>) {
        self.client
            .in_multi
            .store(queue.is_some(), Ordering::Relaxed);
        self.multi = queue;
    }

    fn unwatch(&mut self) {
        for key in self.watched.drain(..) {
            self.shared.board.unwatch(&key);
        }
    }
}

/// Leaves the registry, forgets watched keys and decrements the client count when the
/// connection ends, however it ends.
impl Drop for State {
    fn drop(&mut self) {
        self.unwatch();
        self.shared.registry.remove(self.id);
        self.shared.clients.fetch_sub(1, Ordering::Release);
    }
}

/// Serves one connection. The acceptor counted it in `clients`; the state's drop uncounts it.
pub(crate) async fn serve(stream: std::net::TcpStream, worker: Rc<Worker>) {
    let shared = &worker.shared;
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed) + 1;
    let Some(client) = shared.registry.register(id, &stream) else {
        shared.clients.fetch_sub(1, Ordering::Release);
        return;
    };
    let mut state = State {
        multi: None,
        dirty: false,
        id,
        version: RespVersion::Resp2,
        authed: shared.live.requirepass().is_none(),
        quit: false,
        client,
        watched: Vec::new(),
        shared: Arc::clone(shared),
        wrote: false,
    };
    let Ok(mut stream) = TcpStream::from_std(stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let mut parser = if state.authed {
        RequestParser::new(Limits::default())
    } else {
        RequestParser::with_auth_required(Limits::default(), Limits::unauthenticated())
    };
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    let mut batch = Vec::with_capacity(BATCH);
    // Argument vectors of commands run in place, reused by the next ones parsed.
    let mut spare: Vec<Vec<Bytes>> = Vec::with_capacity(BATCH);
    loop {
        match stream.read_buf(&mut rbuf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        state
            .client
            .active_ms
            .store(shared.registry.now_ms(), Ordering::Relaxed);
        loop {
            let failure = parse_batch(
                &worker,
                &mut parser,
                &mut rbuf,
                state.authed,
                &mut batch,
                &mut spare,
            );
            worker.prefetch_entries();
            if batch.is_empty() && failure.is_none() {
                break;
            }
            shared
                .commands
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            for parsed in batch.drain(..) {
                if let Some(spec) = direct(&worker, &state, &parsed) {
                    // The common case, run in place: a keyed command of this worker's shards
                    // with nothing to check or wait for (see `direct`).
                    state.wrote |= spec.write;
                    worker.execute_routed(
                        spec.handler,
                        &parsed.args,
                        parsed.route,
                        state.version,
                        &mut wbuf,
                    );
                    let mut args = parsed.args;
                    // Only small vectors are kept: a 100k-member SADD's would otherwise stay
                    // allocated for the connection's lifetime.
                    if args.capacity() <= SPARE_ARGS {
                        args.clear();
                        spare.push(args);
                    }
                } else {
                    let Parsed { spec, args, .. } = parsed;
                    dispatch(&worker, &mut state, &mut parser, spec, args, &mut wbuf).await;
                    if state.quit {
                        let _ = send(&worker, &mut state, &mut stream, &mut wbuf).await;
                        return;
                    }
                }
                if wbuf.len() >= FLUSH_AT
                    && !send(&worker, &mut state, &mut stream, &mut wbuf).await
                {
                    return;
                }
            }
            if let Some(err) = failure {
                // Redis answers the protocol error and closes this client only.
                err.write_reply(&mut wbuf);
                let _ = send(&worker, &mut state, &mut stream, &mut wbuf).await;
                return;
            }
        }
        if !wbuf.is_empty() && !send(&worker, &mut state, &mut stream, &mut wbuf).await {
            return;
        }
    }
}

/// Argument vectors of at most this capacity are kept for reuse (see `serve`).
const SPARE_ARGS: usize = 16;

/// Commands parsed ahead of execution, at most: their keys are prefetched together (see
/// [`Worker::route_and_prefetch_bucket`]), and a window this size keeps the prefetched lines in cache.
const BATCH: usize = 32;

/// The spec of `parsed` when it can run right here, synchronously, exactly as
/// [`dispatch`] would run it: a known keyed command that neither `dispatch` nor `run` treats
/// specially ([`command::Spec::direct`]) with a valid argument count, from an authenticated
/// client outside `MULTI`, whose key this worker owns while no transaction holds the worker,
/// and (for a write) with a healthy log. Anything else takes the general path.
fn direct(worker: &Worker, state: &State, parsed: &Parsed) -> Option<&'static command::Spec> {
    let spec = parsed.spec?;
    let route = parsed.route.as_ref()?;
    let usable = spec.direct
        && state.authed
        && state.multi.is_none()
        && spec.arity_ok(parsed.args.len())
        && !worker.is_locked()
        && worker.store.borrow().owner_of(route) == worker.index
        && !(spec.write
            && worker
                .shared
                .persist
                .as_ref()
                .is_some_and(|p| p.refuses_writes()));
    usable.then_some(spec)
}

/// Parses the complete commands at the front of `rbuf` into `batch` (up to [`BATCH`]), and
/// returns the protocol error that ended it, if one did. Parsing ahead stops after a command
/// that may change how the rest must be parsed (`AUTH`, `HELLO` and `RESET` change the
/// parser's limits), and is one command at a time until the client is authenticated, so
/// every command is parsed under exactly the limits it would be parsed under alone.
fn parse_batch(
    worker: &Worker,
    parser: &mut RequestParser,
    rbuf: &mut BytesMut,
    authed: bool,
    batch: &mut Vec<Parsed>,
    spare: &mut Vec<Vec<Bytes>>,
) -> Option<fc_resp::ProtocolError> {
    while batch.len() < BATCH {
        let mut args = spare.pop().unwrap_or_default();
        match parser.parse_into(rbuf, &mut args) {
            Ok(true) => {
                let spec = command::lookup(&args[0]);
                let barrier = !authed || spec.is_some_and(|s| s.barrier);
                let route = worker.route_and_prefetch_bucket(spec, &args);
                batch.push(Parsed { spec, args, route });
                if barrier {
                    break;
                }
            }
            Ok(false) => {
                spare.push(args);
                break;
            }
            Err(err) => return Some(err),
        }
    }
    None
}

/// Writes the pending replies, after making the writes they acknowledge safe (persistence:
/// written to the OS, and on disk under `appendfsync always`). `false`: the connection is done
/// (a write failed, or the log failed and these replies must never be sent).
///
/// Output limits: a batch over the hard limit ends the client unsent; while a write of at
/// least the soft limit waits, the client is marked stalled, and the sweeper ends it when
/// that lasts longer than the limit's seconds.
async fn send(
    worker: &Worker,
    state: &mut State,
    stream: &mut TcpStream,
    wbuf: &mut BytesMut,
) -> bool {
    let shared = &worker.shared;
    let wrote = std::mem::take(&mut state.wrote);
    // In memory, replies leave as soon as they are ready: yielding first, so that a worker's
    // replies left in one burst per event-loop turn, gained no throughput and raised p99 in
    // every one of six interleaved runs (64B 80/20, P1 and P16).
    if let Some(persist) = &shared.persist
        && !persist.acknowledge(wrote).await
    {
        return false;
    }
    let client = &state.client;
    let limit = shared.live.output_limit();
    let pending = wbuf.len() as u64;
    if limit.hard > 0 && pending > limit.hard {
        client.end(Ended::Output);
        return false;
    }
    let watch_stall = limit.seconds > 0 && pending >= limit.soft;
    if watch_stall {
        let now = shared.registry.now_ms().max(1);
        client.stalled_ms.store(now, Ordering::Relaxed);
    }
    let sent = stream.write_all(wbuf).await.is_ok();
    if watch_stall {
        client.stalled_ms.store(0, Ordering::Relaxed);
    }
    wbuf.clear();
    sent
}

async fn dispatch(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    spec: Option<&'static command::Spec>,
    args: Vec<Bytes>,
    out: &mut BytesMut,
) {
    let version = state.version;
    let Some(spec) = spec else {
        state.dirty |= state.multi.is_some();
        return command::unknown_command(&args, &mut Encoder::new(out, version));
    };
    if !spec.arity_ok(args.len()) {
        state.dirty |= state.multi.is_some();
        return command::wrong_arity(&args[0], &mut Encoder::new(out, version));
    }
    if !state.authed && !matches!(spec.name, "auth" | "hello" | "quit") {
        state.dirty |= state.multi.is_some();
        return Encoder::new(out, version).error(b"NOAUTH Authentication required.");
    }
    if spec.write
        && let Some(persist) = &worker.shared.persist
        && let Some(refusal) = persist.misconf()
    {
        state.dirty |= state.multi.is_some();
        return Encoder::new(out, version).error(refusal.as_bytes());
    }
    state.wrote |= spec.write || spec.name == "exec";
    match spec.name {
        "multi" => {
            let mut enc = Encoder::new(out, version);
            if state.multi.is_some() {
                return enc.error(b"ERR MULTI calls can not be nested");
            }
            state.set_multi(Some(Vec::new()));
            state.dirty = false;
            return enc.ok();
        }
        "exec" => return exec(worker, state, parser, out).await,
        "discard" => {
            let mut enc = Encoder::new(out, version);
            if state.multi.is_none() {
                return enc.error(b"ERR DISCARD without MULTI");
            }
            state.set_multi(None);
            state.unwatch();
            state.dirty = false;
            return enc.ok();
        }
        "save" | "bgsave" | "shutdown" if state.multi.is_some() => {
            state.dirty = true;
            return Encoder::new(out, version)
                .error(b"ERR Command not allowed inside a transaction");
        }
        "save" => {
            let mut enc = Encoder::new(out, version);
            return match crate::persist::snapshot(&worker.shared).await {
                Ok(_) => enc.ok(),
                Err(err) => enc.error(err.as_bytes()),
            };
        }
        "bgsave" => {
            let mut enc = Encoder::new(out, version);
            if worker.shared.persist.is_none() {
                return enc
                    .error(b"ERR persistence is not configured (start fc-server with --data-dir)");
            }
            let shared = std::sync::Arc::clone(&worker.shared);
            tokio::task::spawn_local(async move {
                if let Err(err) = crate::persist::snapshot(&shared).await {
                    eprintln!("fc-server: BGSAVE failed: {err}");
                }
            });
            return enc.simple(b"Background saving started");
        }
        "lastsave" => {
            let at = worker.shared.persist.as_ref().map_or_else(
                || worker.shared.started_unix,
                |p| p.last_save.load(Ordering::Relaxed),
            );
            return Encoder::new(out, version).integer(at as i64);
        }
        "watch" if state.multi.is_some() => {
            return Encoder::new(out, version).error(b"ERR WATCH inside MULTI is not allowed");
        }
        "watch" => return watch(worker, state, &args, out).await,
        "shutdown" => return shutdown(worker, state, &args, out).await,
        _ => {}
    }
    if let Some(queue) = &mut state.multi
        && !matches!(spec.name, "quit" | "reset")
    {
        queue.push((spec, args));
        return Encoder::new(out, version).simple(b"QUEUED");
    }
    run(worker, state, parser, spec, args, out, None).await;
}

/// The held workers of a running transaction: a command channel per worker other than this
/// one (`None` where not involved).
pub(crate) type TxnLinks = Vec<Option<mpsc::UnboundedSender<TxnCommand>>>;

/// Runs `handler` on `owner`: normally (waiting out other transactions), or as part of this
/// connection's transaction on a worker it holds.
pub(crate) async fn exec_at(
    worker: &Worker,
    owner: usize,
    handler: command::Handler,
    args: Vec<Bytes>,
    version: RespVersion,
    out: &mut BytesMut,
    txn: Option<&TxnLinks>,
) {
    let Some(links) = txn else {
        return worker.execute_on(owner, handler, args, version, out).await;
    };
    if owner == worker.index {
        return worker.execute_into(handler, &args, version, out);
    }
    let Some(link) = &links[owner] else {
        return worker.execute_on(owner, handler, args, version, out).await;
    };
    let (reply, answer) = oneshot::channel();
    let cmd = TxnCommand {
        handler,
        args,
        version,
        reply,
    };
    if link.send(cmd).is_ok()
        && let Ok(bytes) = answer.await
    {
        return out.extend_from_slice(&bytes);
    }
    Encoder::new(out, version).error(b"ERR server is shutting down");
}

/// Runs one validated command.
async fn run(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    spec: &'static command::Spec,
    args: Vec<Bytes>,
    out: &mut BytesMut,
    txn: Option<&TxnLinks>,
) {
    let version = state.version;
    let shared = &worker.shared;
    match spec.name {
        "info" => return crate::info::info(worker, version, &args, out, txn).await,
        "config" => return crate::info::config(worker, &args, version, out, txn).await,
        // Keyed commands handled here are listed in `command::GENERAL_PATH_ONLY`.
        "msetnx" if !args.len().is_multiple_of(2) => {
            let owners: BTreeSet<usize> = args[1..]
                .chunks(2)
                .map(|pair| shared.owner_of(&pair[0]))
                .collect();
            if owners.len() > 1 {
                return msetnx_across(worker, &owners, args, version, out, txn).await;
            }
        }
        _ => {}
    }
    match spec.route {
        Route::Connection => connection_command(worker, state, parser, &args, out),
        Route::Key => {
            let owner = shared.owner_of(&args[1]);
            exec_at(worker, owner, spec.handler, args, version, out, txn).await;
        }
        Route::Cursor => {
            let owner = std::str::from_utf8(&args[1])
                .ok()
                .and_then(|c| c.parse::<u64>().ok())
                .map_or(worker.index, |c| ((c >> 32) as usize) % shared.workers);
            exec_at(worker, owner, spec.handler, args, version, out, txn).await;
        }
        Route::PerKey { step, merge } => {
            if !(args.len() - 1).is_multiple_of(step) {
                return command::wrong_arity(&args[0], &mut Encoder::new(out, version));
            }
            let mut parts = Vec::with_capacity((args.len() - 1) / step);
            for chunk in args[1..].chunks(step) {
                let mut sub = Vec::with_capacity(step + 1);
                sub.push(args[0].clone());
                sub.extend(chunk.iter().cloned());
                let owner = shared.owner_of(&chunk[0]);
                let mut part = BytesMut::new();
                exec_at(worker, owner, spec.handler, sub, version, &mut part, txn).await;
                parts.push(part);
            }
            merge_parts(&parts, merge, version, out);
        }
        Route::AllWorkers(merge) => {
            let mut parts = Vec::with_capacity(shared.workers);
            for owner in 0..shared.workers {
                let mut part = BytesMut::new();
                exec_at(
                    worker,
                    owner,
                    spec.handler,
                    args.clone(),
                    version,
                    &mut part,
                    txn,
                )
                .await;
                parts.push(part);
            }
            merge_parts(&parts, merge, version, out);
        }
    }
}

/// The workers a queued command touches.
fn workers_of(worker: &Worker, spec: &command::Spec, args: &[Bytes], into: &mut BTreeSet<usize>) {
    let shared = &worker.shared;
    match spec.route {
        Route::Connection => {}
        Route::Key if spec.name == "msetnx" => {
            into.extend(args[1..].chunks(2).map(|pair| shared.owner_of(&pair[0])));
        }
        Route::Key => {
            into.insert(shared.owner_of(&args[1]));
        }
        Route::PerKey { step, .. } => {
            for chunk in args[1..].chunks(step) {
                into.insert(shared.owner_of(&chunk[0]));
            }
        }
        Route::AllWorkers(_) | Route::Cursor => into.extend(0..shared.workers),
    }
}

/// `EXEC`: holds every worker the queued commands touch (in ascending order, so two
/// transactions never wait on each other in a cycle), runs the commands in order with nothing
/// else running on those workers, then releases them.
async fn exec(worker: &Worker, state: &mut State, parser: &mut RequestParser, out: &mut BytesMut) {
    let version = state.version;
    let Some(queue) = state.multi.take() else {
        return Encoder::new(out, version).error(b"ERR EXEC without MULTI");
    };
    state.set_multi(None);
    if std::mem::take(&mut state.dirty) {
        state.unwatch();
        return Encoder::new(out, version)
            .error(b"EXECABORT Transaction discarded because of previous errors.");
    }
    let shared = &worker.shared;
    let mut involved = BTreeSet::new();
    for (spec, args) in &queue {
        workers_of(worker, spec, args, &mut involved);
    }
    involved.extend(state.watched.iter().map(|w| w.shard % shared.workers));
    let held = Held::take(worker, &involved).await;
    // A watched key that expired since is reclaimed by this touch, which is a change.
    for key in &state.watched {
        let args = vec![Bytes::from_static(b"exists"), key.key.clone()];
        let owner = key.shard % shared.workers;
        let mut scratch = BytesMut::new();
        let touch = command::spec_of("exists").handler;
        exec_at(
            worker,
            owner,
            touch,
            args,
            version,
            &mut scratch,
            Some(&held.links),
        )
        .await;
    }
    let aborted = state.watched.iter().any(|key| shared.board.changed(key));
    state.unwatch();
    if aborted {
        held.release(worker);
        return Encoder::new(out, version).null_array();
    }
    Encoder::new(out, version).array_len(queue.len());
    for (spec, args) in queue {
        run(worker, state, parser, spec, args, out, Some(&held.links)).await;
    }
    held.release(worker);
}

/// Workers held for a transaction (or another atomic multi-worker command): nothing else
/// runs on their shards until [`Held::release`].
struct Held {
    links: TxnLinks,
    self_locked: bool,
}

impl Held {
    /// Holds every worker in `involved`, in ascending order (so two holders never wait on
    /// each other in a cycle).
    async fn take(worker: &Worker, involved: &BTreeSet<usize>) -> Self {
        let shared = &worker.shared;
        let mut held = Self {
            links: (0..shared.workers).map(|_| None).collect(),
            self_locked: false,
        };
        for &w in involved {
            if w == worker.index {
                worker.lock().await;
                held.self_locked = true;
                continue;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let (ack, acked) = oneshot::channel();
            let job = Job::Hold { ack, commands: rx };
            if shared.inboxes[w].send(job).is_ok() && acked.await.is_ok() {
                held.links[w] = Some(tx);
            }
        }
        held
    }

    fn release(self, worker: &Worker) {
        drop(self.links);
        if self.self_locked {
            worker.unlock();
        }
    }
}

/// `WATCH key...`: touches each key on its owner (an expired key is reclaimed first, so its
/// expiry is not mistaken for a later change), then records its version.
async fn watch(worker: &Worker, state: &mut State, args: &[Bytes], out: &mut BytesMut) {
    let shared = &worker.shared;
    let touch = command::spec_of("exists").handler;
    for key in &args[1..] {
        let probe = vec![Bytes::from_static(b"exists"), key.clone()];
        let mut scratch = BytesMut::new();
        let owner = shared.owner_of(key);
        worker
            .execute_on(owner, touch, probe, state.version, &mut scratch)
            .await;
        let shard = shared.router.shard_of(&shared.router.route_key(key));
        state.watched.push(shared.board.watch(shard, key.clone()));
    }
    Encoder::new(out, state.version).ok();
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: with persistence, snapshots first (unless
/// `NOSAVE`, or no save rules and no `SAVE`), then asks the server's owner to stop; the client
/// gets no reply (its connection closes), as with Redis.
async fn shutdown(worker: &Worker, state: &mut State, args: &[Bytes], out: &mut BytesMut) {
    let mut enc = Encoder::new(out, state.version);
    let (mut save, mut nosave, mut force) = (false, false, false);
    for arg in &args[1..] {
        match arg.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"force" => force = true,
            b"now" => {}
            b"abort" => return enc.error(b"ERR No shutdown in progress."),
            _ => return enc.error(b"ERR syntax error"),
        }
    }
    if save && nosave {
        return enc.error(b"ERR syntax error");
    }
    let shared = &worker.shared;
    if let Some(persist) = &shared.persist
        && !nosave
        && (save || persist.has_save_rules())
        && let Err(err) = crate::persist::snapshot(shared).await
    {
        eprintln!("fc-server: SHUTDOWN could not save: {err}");
        if !force {
            return enc.error(b"ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
    if save && shared.persist.is_none() {
        eprintln!("fc-server: SHUTDOWN SAVE without --data-dir: nothing to save to");
    }
    eprintln!("fc-server: SHUTDOWN requested by client id={}", state.id);
    shared.shutdown_request.send_replace(true);
    state.quit = true;
}

/// The integer of a `:n\r\n` reply.
fn integer_of(part: &[u8]) -> Option<i64> {
    let line = part.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    fc_resp::number::parse_i64(line)
}

/// Splits `*n\r\n<body>` into `n` and the body.
fn array_of(part: &[u8]) -> Option<(usize, &[u8])> {
    let rest = part.strip_prefix(b"*")?;
    let end = rest.iter().position(|&b| b == b'\r')?;
    let n = fc_resp::number::parse_i64(&rest[..end])?;
    Some((usize::try_from(n).ok()?, &rest[end + 2..]))
}

fn merge_parts(parts: &[BytesMut], merge: Merge, version: RespVersion, out: &mut BytesMut) {
    if merge != Merge::Array
        && let Some(err) = parts.iter().find(|p| p.first() == Some(&b'-'))
    {
        out.extend_from_slice(err);
        return;
    }
    let mut enc = Encoder::new(out, version);
    match merge {
        Merge::Array => {
            enc.array_len(parts.len());
            for p in parts {
                enc.buffer().extend_from_slice(p);
            }
        }
        Merge::Sum => enc.integer(parts.iter().filter_map(|p| integer_of(p)).sum()),
        Merge::Ok => enc.ok(),
        Merge::Digest => {
            let sum = parts
                .iter()
                .filter_map(|p| integer_of(p))
                .fold(0u64, |sum, d| sum.wrapping_add(d as u64));
            enc.simple(format!("{sum:016x}").as_bytes());
        }
        Merge::Random => {
            let start = parts.len().saturating_sub(1).min(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos() as usize)
                    % parts.len().max(1),
            );
            let found = (0..parts.len())
                .map(|k| &parts[(start + k) % parts.len()])
                .find(|p| p.first() == Some(&b'$'));
            match found {
                Some(p) => enc.buffer().extend_from_slice(p),
                None => enc.null(),
            }
        }
        Merge::Concat => {
            let arrays: Vec<(usize, &[u8])> = parts.iter().filter_map(|p| array_of(p)).collect();
            enc.array_len(arrays.iter().map(|(n, _)| n).sum());
            for (_, body) in arrays {
                enc.buffer().extend_from_slice(body);
            }
        }
    }
}

fn connection_command(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    args: &[Bytes],
    out: &mut BytesMut,
) {
    let name = args[0].to_ascii_lowercase();
    let shared = &worker.shared;
    match name.as_slice() {
        b"ping" => {
            let mut enc = Encoder::new(out, state.version);
            match args.len() {
                1 => enc.simple(b"PONG"),
                2 => enc.bulk(&args[1]),
                _ => command::wrong_arity(&args[0], &mut enc),
            }
        }
        b"echo" => Encoder::new(out, state.version).bulk(&args[1]),
        b"quit" => {
            Encoder::new(out, state.version).ok();
            state.quit = true;
        }
        b"select" => {
            let mut enc = Encoder::new(out, state.version);
            match fc_resp::number::parse_i64(&args[1]) {
                Some(0) => enc.ok(),
                Some(_) => enc.error(b"ERR DB index is out of range"),
                None => enc.error(b"ERR value is not an integer or out of range"),
            }
        }
        b"auth" => {
            let password = &args[args.len() - 1];
            let user_ok = args.len() == 2 || args[1].as_ref() == b"default";
            if args.len() > 3 {
                return Encoder::new(out, state.version).error(b"ERR syntax error");
            }
            authenticate(worker, state, parser, user_ok, password, out);
        }
        b"hello" => hello(worker, state, parser, args, out),
        b"reset" => {
            state.set_version(RespVersion::Resp2);
            state.client.set_name(None);
            state.set_multi(None);
            state.dirty = false;
            state.unwatch();
            if shared.live.requirepass().is_some() {
                state.authed = false;
                parser.require_auth(Limits::unauthenticated());
            }
            Encoder::new(out, state.version).simple(b"RESET");
        }
        b"client" => client(worker, state, args, out),
        b"command" => command_command(args, Encoder::new(out, state.version)),
        b"time" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let mut enc = Encoder::new(out, state.version);
            enc.array_len(2);
            enc.bulk(now.as_secs().to_string().as_bytes());
            enc.bulk(now.subsec_micros().to_string().as_bytes());
        }
        b"unwatch" => {
            state.unwatch();
            Encoder::new(out, state.version).ok();
        }
        _ => command::unknown_command(args, &mut Encoder::new(out, state.version)),
    }
}

/// Checks a password; on success the connection is authenticated (full limits).
fn authenticate(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    user_ok: bool,
    password: &[u8],
    out: &mut BytesMut,
) -> bool {
    let mut enc = Encoder::new(out, state.version);
    let Some(expected) = worker.shared.live.requirepass() else {
        enc.error(
            b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        );
        return false;
    };
    if user_ok && expected.as_bytes() == password {
        state.authed = true;
        parser.authenticate();
        enc.ok();
        true
    } else {
        enc.error(b"WRONGPASS invalid username-password pair or user is disabled.");
        false
    }
}

fn hello(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    args: &[Bytes],
    out: &mut BytesMut,
) {
    let mut version = state.version;
    let mut i = 1;
    if args.len() > 1 {
        version = match fc_resp::number::parse_i64(&args[1]) {
            Some(2) => RespVersion::Resp2,
            Some(3) => RespVersion::Resp3,
            Some(_) => {
                return Encoder::new(out, state.version)
                    .error(b"NOPROTO unsupported protocol version");
            }
            None => {
                return Encoder::new(out, state.version)
                    .error(b"ERR Protocol version is not an integer or out of range");
            }
        };
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"auth") && i + 2 < args.len() {
            let user_ok = args[i + 1].as_ref() == b"default";
            let mut scratch = BytesMut::new();
            if !authenticate(worker, state, parser, user_ok, &args[i + 2], &mut scratch) {
                out.extend_from_slice(&scratch);
                return;
            }
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"setname") && i + 1 < args.len() {
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            let text = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            );
            return Encoder::new(out, state.version).error(text.as_bytes());
        }
    }
    if !state.authed {
        return Encoder::new(out, state.version).error(
            b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
    }
    if name.is_some() {
        state.client.set_name(name);
    }
    state.set_version(version);
    let mut enc = Encoder::new(out, version);
    enc.map_len(7);
    enc.bulk(b"server");
    enc.bulk(b"redis");
    enc.bulk(b"version");
    enc.bulk(crate::REDIS_VERSION.as_bytes());
    enc.bulk(b"proto");
    enc.integer(if version == RespVersion::Resp3 { 3 } else { 2 });
    enc.bulk(b"id");
    enc.integer(state.id as i64);
    enc.bulk(b"mode");
    enc.bulk(b"standalone");
    enc.bulk(b"role");
    enc.bulk(b"master");
    enc.bulk(b"modules");
    enc.array_len(0);
}

fn client(worker: &Worker, state: &mut State, args: &[Bytes], out: &mut BytesMut) {
    let mut enc = Encoder::new(out, state.version);
    let sub = args[1].to_ascii_lowercase();
    let registry = &worker.shared.registry;
    match (sub.as_slice(), args.len()) {
        (b"setname", 3) => {
            if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                enc.error(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                );
            } else {
                state
                    .client
                    .set_name((!args[2].is_empty()).then(|| args[2].clone()));
                enc.ok();
            }
        }
        (b"getname", 2) => match state.client.name() {
            Some(n) => enc.bulk(&n),
            None => enc.null(),
        },
        (b"id", 2) => enc.integer(state.id as i64),
        (b"setinfo", 4) => {
            let value = String::from_utf8_lossy(&args[3]).into_owned();
            if value.contains(|c: char| c <= ' ' || c > '~') {
                return enc.error(b"ERR lib-name or lib-ver cannot contain spaces, newlines or special characters.");
            }
            let mut lib = state
                .client
                .lib
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match args[2].to_ascii_lowercase().as_slice() {
                b"lib-name" => lib.0 = value,
                b"lib-ver" => lib.1 = value,
                _ => {
                    let text = format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&args[2])
                    );
                    return enc.error(text.as_bytes());
                }
            }
            enc.ok();
        }
        (b"info", 2) => {
            let line = state.client.line(registry.now_ms(), "client|info");
            enc.verbatim(*b"txt", line.as_bytes());
        }
        (b"list", _) => {
            // CLIENT LIST [TYPE normal|...] [ID id ...]
            let mut ids: Option<Vec<u64>> = None;
            let mut i = 2;
            while i < args.len() {
                let opt = args[i].to_ascii_lowercase();
                if opt == b"type" && i + 1 < args.len() {
                    i += 2;
                } else if opt == b"id" && i + 1 < args.len() {
                    let mut list = Vec::new();
                    for id in &args[i + 1..] {
                        match fc_resp::number::parse_i64(id) {
                            Some(n) if n > 0 => list.push(n as u64),
                            _ => return enc.error(b"ERR Invalid client ID"),
                        }
                    }
                    ids = Some(list);
                    i = args.len();
                } else {
                    return enc.error(b"ERR syntax error");
                }
            }
            let now = registry.now_ms();
            let mut text = String::new();
            for client in registry.all() {
                if ids.as_ref().is_none_or(|ids| ids.contains(&client.id)) {
                    let cmd = if client.id == state.id {
                        "client|list"
                    } else {
                        "NULL"
                    };
                    text.push_str(&client.line(now, cmd));
                }
            }
            enc.verbatim(*b"txt", text.as_bytes());
        }
        (b"kill", n) if n >= 3 => {
            let (filter, old_form) = match KillFilter::parse(&args[2..]) {
                Ok(parsed) => parsed,
                Err(e) => return enc.error(e.as_bytes()),
            };
            let mut killed = 0;
            for client in registry.all() {
                if filter.matches(&client, state.id) {
                    killed += 1;
                    if client.id == state.id {
                        // Redis replies first, then closes.
                        state.quit = true;
                    } else {
                        client.end(Ended::Killed);
                        // Gone from CLIENT LIST at once, as Redis frees a killed client
                        // before it replies; its connection task winds down on its own.
                        registry.remove(client.id);
                    }
                }
            }
            if old_form {
                if killed == 0 {
                    enc.error(b"ERR No such client");
                } else {
                    enc.ok();
                }
            } else {
                enc.integer(killed);
            }
        }
        (b"no-evict" | b"no-touch", 3) => enc.ok(),
        (b"help", 2) => {
            let lines: &[&[u8]] = &[
                b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"GETNAME, SETNAME <name>, ID, INFO, SETINFO <LIB-NAME|LIB-VER> <value>",
                b"LIST [TYPE normal] [ID <id> ...]",
                b"KILL <ip:port> | KILL [ID <id>] [ADDR <ip:port>] [LADDR <ip:port>] [SKIPME yes|no]",
                b"NO-EVICT <on|off>, NO-TOUCH <on|off>, HELP",
            ];
            enc.array_len(lines.len());
            for line in lines {
                enc.simple(line);
            }
        }
        (
            b"setname" | b"getname" | b"id" | b"setinfo" | b"info" | b"kill" | b"no-evict"
            | b"no-touch",
            _,
        ) => {
            let text = format!(
                "ERR wrong number of arguments for 'client|{}' command",
                String::from_utf8_lossy(&sub)
            );
            enc.error(text.as_bytes());
        }
        _ => {
            let text = format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&args[1])
            );
            enc.error(text.as_bytes());
        }
    }
}

fn command_command(args: &[Bytes], mut enc: Encoder<'_>) {
    let sub = args.get(1).map(|a| a.to_ascii_lowercase());
    match sub.as_deref() {
        None => enc.array_len(0),
        Some(b"count") => enc.integer(command::TABLE.len() as i64),
        Some(b"docs") => enc.map_len(0),
        Some(b"info") => {
            enc.array_len(args.len() - 2);
            for name in &args[2..] {
                match command::lookup(name) {
                    None => enc.null_array(),
                    Some(spec) => {
                        enc.array_len(6);
                        enc.bulk(spec.name.as_bytes());
                        enc.integer(i64::from(spec.arity));
                        enc.set_len(0);
                        let keyed = !matches!(spec.route, Route::Connection | Route::AllWorkers(_));
                        enc.integer(i64::from(keyed));
                        enc.integer(if keyed { -1 } else { 0 });
                        enc.integer(i64::from(keyed));
                    }
                }
            }
        }
        Some(_) => {
            let text = format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&args[1])
            );
            enc.error(text.as_bytes());
        }
    }
}

/// `MSETNX` over keys of several workers: holds them all (unless a transaction already does),
/// checks that no key exists, then sets every pair — nothing else runs on those workers in
/// between, so it is as atomic as on one shard.
async fn msetnx_across(
    worker: &Worker,
    owners: &BTreeSet<usize>,
    args: Vec<Bytes>,
    version: RespVersion,
    out: &mut BytesMut,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    let held = match txn {
        Some(_) => None,
        None => Some(Held::take(worker, owners).await),
    };
    let links = txn.or(held.as_ref().map(|h| &h.links));
    let exists = command::spec_of("exists").handler;
    let set = command::spec_of("mset").handler;
    let mut found = 0;
    let mut failed = None;
    for pair in args[1..].chunks(2) {
        let probe = vec![Bytes::from_static(b"exists"), pair[0].clone()];
        let mut part = BytesMut::new();
        let owner = shared.owner_of(&pair[0]);
        exec_at(worker, owner, exists, probe, version, &mut part, links).await;
        found += integer_of(&part).unwrap_or(1);
    }
    if found == 0 {
        for pair in args[1..].chunks(2) {
            let sub = vec![args[0].clone(), pair[0].clone(), pair[1].clone()];
            let mut part = BytesMut::new();
            let owner = shared.owner_of(&pair[0]);
            exec_at(worker, owner, set, sub, version, &mut part, links).await;
            if part.first() == Some(&b'-') {
                failed = Some(part);
                break;
            }
        }
    }
    if let Some(held) = held {
        held.release(worker);
    }
    match failed {
        Some(err) => out.extend_from_slice(&err),
        None => Encoder::new(out, version).integer(i64::from(found == 0)),
    }
}
