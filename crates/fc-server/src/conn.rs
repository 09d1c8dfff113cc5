//! One client connection's socket loop (the RESP edge): read, parse every complete command,
//! run each (a keyed command of this worker's shards in place, straight into the write
//! buffer; anything else through [`session::dispatch`]), and write all replies with one
//! flush, after making the writes they acknowledge safe.

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use fc_resp::{Limits, RequestParser};
use tokio::net::TcpStream;
use tokio::sync::futures::Notified;

use crate::blocking::Woken;
use crate::clients::Ended;
use crate::command::{self, Handler};
use crate::edge::{Edge, RespEdge};
use crate::fcnp::FcnpEdge;
use crate::pubsub::{Message, Subscriptions};
use crate::reply::Resp;
use crate::session::{self, ClientState};
use crate::shared::Shared;
use crate::socket::Socket;
use crate::stats::Ticks;
use crate::worker::{Parsed, Worker};

/// How long a shutdown lets a pending send finish (a client that stopped reading is not
/// waited for longer).
const SHUTDOWN_SEND: std::time::Duration = std::time::Duration::from_secs(5);

/// Replies are written out once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;

/// How long a TLS client has to complete its handshake.
#[cfg(feature = "tls")]
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves one connection. The acceptor counted it in `clients`; the state's drop uncounts it.
pub(crate) async fn serve(
    stream: std::net::TcpStream,
    worker: Rc<Worker>,
    handover: crate::shared::Handover,
) {
    if handover.memcached {
        return crate::memcache::serve(stream, worker).await;
    }
    let shared = &worker.shared;
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed) + 1;
    let client = shared.registry.register(id, &stream);
    let mut state = ClientState::new(id, Arc::clone(&client), Arc::clone(shared));
    state.authed |= handover.authed;
    let mut handover = handover;
    if let Some(user) = handover.user.take() {
        state.set_user(user);
    }
    let _ = stream.set_nodelay(true);
    // A monoio worker serves plaintext RESP and FCNP through io_uring; TLS goes on through
    // tokio (the shared runtime's, see `rt`).
    #[cfg(feature = "monoio")]
    if let Some(writer) = crate::rt::monoio_writer()
        && !handover.tls
    {
        if let Ok(socket) = crate::uring::UringSocket::new(stream, writer, true) {
            start(socket, &worker, &mut state, handover).await;
        }
        return;
    }
    let Ok(stream) = TcpStream::from_std(stream) else {
        return;
    };
    #[cfg(feature = "tls")]
    if handover.tls {
        let Some(acceptor) = shared.tls.clone() else {
            return;
        };
        // Ending the client from outside cuts a handshake short too.
        let kill = client.kill.notified();
        let handshake = tokio::select! {
            done = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)) => done,
            () = kill => return,
        };
        match handshake {
            Ok(Ok(tls)) => start(tls, &worker, &mut state, handover).await,
            Ok(Err(err)) => tracing::debug!("TLS handshake with {} failed: {err}", client.addr),
            Err(_) => tracing::debug!("TLS handshake with {} timed out", client.addr),
        }
        return;
    }
    #[cfg(not(feature = "tls"))]
    if handover.tls {
        return;
    }
    // Plaintext on a tokio worker: the busy-script hook can answer it (see `parked`).
    let stream = crate::parked::ParkedTcp::new(
        stream,
        &worker.shared,
        Arc::clone(&client),
        Rc::clone(&worker.stats),
    );
    start(stream, &worker, &mut state, handover).await;
}

/// Runs the connection in its protocol: FCNP on the FCNP port; elsewhere the first byte
/// decides (FCNP's magic byte begins no RESP request), so one port serves both.
async fn start<S: Socket>(
    mut stream: S,
    worker: &Rc<Worker>,
    state: &mut ClientState,
    mut handover: crate::shared::Handover,
) {
    if handover.fcnp {
        return run(stream, worker, state, handover, FcnpEdge::default()).await;
    }
    if handover.pending.is_empty() {
        // A busy script's hook may answer its first requests (RESP arrays only: the protocol
        // is not decided yet).
        let parkable = state.parkable();
        let read = loop {
            if parkable {
                stream.park(true, state.authed);
            }
            let kill = state.client.kill.notified();
            // The kill switch first: after the busy-script hook woke it, it wins (see below).
            let read = tokio::select! {
                biased;
                () = kill => None,
                read = stream.read_buf(&mut handover.pending) => Some(read),
            };
            stream.park(false, state.authed);
            // A kill or a shutdown before any request ends it (what the hook left included).
            if read.is_none() && state.client.ended.load(Ordering::Acquire) != Ended::Open as u8 {
                return;
            }
            if stream.left() {
                // What the hook left (it answered RESP): its replies go first (a kill cuts
                // them short), and the requests it read come before what was read now.
                let (mut owed, held) = stream.take_left();
                if !owed.is_empty() {
                    let kill = state.client.kill.notified();
                    tokio::select! {
                        biased;
                        () = kill => return,
                        sent = stream.write_all(&mut owed) => if sent.is_err() {
                            return;
                        },
                    }
                }
                if !held.is_empty() {
                    let read_now = handover.pending.split();
                    handover.pending.extend_from_slice(&held);
                    handover.pending.extend_from_slice(&read_now);
                    match read {
                        Some(Ok(0) | Err(_)) => return,
                        _ => break Ok(handover.pending.len()),
                    }
                }
            }
            // `None`: woken by the hook, not a kill (the client is open): wait for input again.
            if let Some(read) = read {
                break read;
            }
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let figures = &worker.shared.expiry[worker.index];
                figures.net_in.fetch_add(n as u64, Ordering::Relaxed);
                figures.reads.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    if handover.pending.starts_with(&fc_repl::MAGIC) {
        // A replica of this server: the replication thread serves it.
        match stream.into_tcp() {
            Ok(tcp) => {
                if let Ok(std) = tcp {
                    worker.shared.repl.incoming(std, handover.pending.to_vec());
                }
                return;
            }
            Err(back) => stream = back,
        }
    }
    stream.settled();
    if handover.pending.first() == Some(&fc_fcnp::MAGIC) {
        run(stream, worker, state, handover, FcnpEdge::default()).await;
    } else {
        run(stream, worker, state, handover, RespEdge).await;
    }
}

/// The connection's loop over its socket (plain or TLS), in the edge's protocol.
async fn run<S: Socket, E: Edge>(
    mut stream: S,
    worker: &Rc<Worker>,
    state: &mut ClientState,
    handover: crate::shared::Handover,
    mut edge: E,
) {
    let shared = &worker.shared;
    let client = Arc::clone(&state.client);
    // Ending the client from outside (see `clients`): looked at whenever the connection would
    // otherwise sleep on its socket.
    let kill = client.kill.notified();
    tokio::pin!(kill);
    let live = &shared.live;
    let mut limits_epoch = live.limits_epoch.load(Ordering::Acquire);
    let mut parser = if state.authed {
        RequestParser::new(live.request_limits())
    } else {
        RequestParser::with_auth_required(live.request_limits(), Limits::unauthenticated())
    };
    // Made with its capacity: a `BytesMut` keeps the capacity it was made with as the size
    // it grows back to once parsed requests were split off (one made empty then reserved
    // would read 64 bytes at a time).
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    rbuf.extend_from_slice(&handover.pending);
    // Requests the acceptor read before handing the connection over run before any read.
    let mut pending = !rbuf.is_empty();
    let mut out = Resp::new(16 * 1024);
    out.count_errors(Rc::clone(&worker.stats));
    if E::RESP3 {
        state.set_version(&mut out, fc_resp::RespVersion::Resp3);
    }
    // The arguments of the command being dispatched, kept for the slow log and monitors
    // (see `Gate::keep_args`); reused.
    let mut kept: Vec<Bytes> = Vec::new();
    let mut batch = Vec::with_capacity(BATCH);
    // Argument vectors of commands run in place, reused by the next ones parsed.
    let mut spare: Vec<Vec<Bytes>> = Vec::with_capacity(BATCH);
    let mut names = command::RecentNames::default();
    // Shutdown: the client finishes the requests its socket holds, then ends.
    let mut draining = false;
    loop {
        if draining && !pending {
            match stream.read_ready(&mut rbuf).await {
                Ok(n) if n > 0 => {}
                _ => return,
            }
        }
        let read = if std::mem::take(&mut pending) {
            Ok(rbuf.len())
        } else if draining {
            Ok(1)
        } else {
            // Waiting with nothing buffered: a busy script's hook may answer it meanwhile.
            if E::SPEAKS_RESP && rbuf.is_empty() && out.buf.is_empty() && state.parkable() {
                stream.park(true, state.authed);
            }
            let read = tokio::select! {
            biased;
            // A kill wins over input that arrived with it: CLIENT KILL's caller may rely on
            // the client running nothing after it (its reply came first). A shutdown lets the
            // requests already sent run.
            () = &mut kill => {
                stream.park(false, state.authed);
                let ended = state.client.ended.load(Ordering::Acquire);
                let open = ended == Ended::Open as u8;
                if open || ended == Ended::Shutdown as u8 {
                    // Open: not a kill, the busy-script hook woke it to take what it left.
                    // A shutdown lets those requests run too, before what the socket holds.
                    if open {
                        kill.set(client.kill.notified());
                    } else {
                        draining = true;
                    }
                    let (owed, held) = stream.take_left();
                    out.buf.extend_from_slice(&owed);
                    if !held.is_empty() {
                        // Its requests run now (rbuf was empty), after its replies.
                        rbuf.extend_from_slice(&held);
                        pending = true;
                    } else if !out.buf.is_empty()
                        && !send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await
                    {
                        return;
                    }
                    continue;
                }
                return;
            }
            read = stream.read_buf(&mut rbuf) => read,
            Some(message) = next_message(&mut state.subs) => {
                // Published messages go out when the connection would otherwise sleep.
                if let Some(subs) = &mut state.subs {
                    subs.write_pending(&message, &mut out);
                }
                if out.overflowed() {
                    state.client.end(Ended::Output);
                    return;
                }
                if !send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await {
                    return;
                }
                continue;
            }
            };
            stream.park(false, state.authed);
            // What the busy-script hook left comes first: its replies, and the requests it
            // read before this read's (rbuf was empty).
            if stream.left() {
                let (owed, held) = stream.take_left();
                out.buf.extend_from_slice(&owed);
                if !held.is_empty() {
                    let read_now = rbuf.split();
                    rbuf.extend_from_slice(&held);
                    rbuf.extend_from_slice(&read_now);
                }
            }
            read
        };
        let figures = &shared.expiry[worker.index];
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                figures.net_in.fetch_add(n as u64, Ordering::Relaxed);
                figures.reads.fetch_add(1, Ordering::Relaxed);
            }
        }
        state
            .client
            .active_ms
            .store(shared.registry.now_ms(), Ordering::Relaxed);
        // `CONFIG SET proto-max-bulk-len` / `client-query-buffer-limit` apply from the next
        // read on.
        let epoch = live.limits_epoch.load(Ordering::Acquire);
        if epoch != limits_epoch {
            limits_epoch = epoch;
            parser.set_limits(live.request_limits());
        }
        loop {
            let failure = parse_batch(
                worker,
                &mut edge,
                &mut parser,
                &mut rbuf,
                state.authed,
                &mut batch,
                &mut spare,
                &mut names,
            );
            worker.prefetch_entries();
            if batch.is_empty() && failure.is_none() {
                break;
            }
            figures
                .commands
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            // The hard output limit bounds the buffer while replies are built (see `Resp`).
            out.set_limit(live.output_hard());
            // Commands are timed back to back: one clock read per command, its end the next
            // one's start (see `observe`).
            let mut gate = shared.observe.gate(&shared.pubsub);
            let (ticks, stats) = (&worker.ticks, &*worker.stats);
            let mut start = ticks.now();
            // A `CLIENT PAUSE` closes the in-place path (read once per batch, and again after
            // each command of the general path, which may be the pause).
            let mut paused = shared.pause.maybe();
            for parsed in batch.drain(..) {
                // Messages published before this command go out before its reply.
                if let Some(subs) = &mut state.subs {
                    subs.drain(&mut out);
                }
                let tag = parsed.tag;
                if E::refused(tag) {
                    edge.write_refusal(&mut out.buf, tag);
                    continue;
                }
                let direct = if paused {
                    None
                } else {
                    direct(worker, state, &parsed)
                };
                if let Some((spec, handler, write)) = direct {
                    // The common case, run in place: a keyed command of this worker's shards
                    // with nothing to check or wait for (see `direct`). Only a write can
                    // notify a keyspace event or fill a key a client waits on.
                    if write {
                        worker.shared.notifier.record_command(&parsed.args[0]);
                    }
                    let slot = spec.index();
                    out.failed_slot = slot;
                    let mark = out.buf.len();
                    worker.execute_resp(handler, &parsed.args, parsed.route, &mut out);
                    edge.finish(&mut out.buf, mark, tag);
                    let end = ticks.now();
                    let took = Ticks::since(start, end);
                    start = end;
                    stats.record(slot, took);
                    if took >= gate.slow_ticks {
                        shared.observe.after(
                            &shared.pubsub,
                            &state.client,
                            shared.registry.now_ms(),
                            spec,
                            slot,
                            Some(&parsed.args),
                            took,
                            true,
                        );
                    }
                    if write {
                        worker.serve_ready();
                    }
                    let mut args = parsed.args;
                    // Only small vectors are kept: a 100k-member SADD's would otherwise stay
                    // allocated for the connection's lifetime.
                    if args.capacity() <= SPARE_ARGS {
                        args.clear();
                        spare.push(args);
                    }
                } else {
                    let Parsed {
                        spec,
                        mut args,
                        route,
                        ..
                    } = parsed;
                    let keep = gate.keep_args;
                    if keep {
                        kept.clear();
                        kept.extend_from_slice(&args);
                    }
                    start = worker.ticks.now();
                    // Where this command's reply starts (`CLIENT REPLY OFF|SKIP` drop it).
                    let mut mark = out.buf.len();
                    // A script whose keys are all here runs in place, as the general path
                    // would run it but without awaiting (see `session::script_in_place`).
                    let in_place = if paused {
                        None
                    } else {
                        session::script_in_place(worker, state, spec, &mut args, route, &mut out)
                    };
                    let ran = match in_place {
                        Some(slot) => Some(slot),
                        None => {
                            let args = std::mem::take(&mut args);
                            session::dispatch(worker, state, &mut parser, spec, args, &mut out)
                                .await
                        }
                    };
                    let mut took = Ticks::since(start, worker.ticks.now());
                    let ran = spec.zip(ran);
                    let mut fed = false;
                    if let Some(wait) = state.blocked.take() {
                        // Monitors see a blocking command when it first runs, as Redis
                        // feeds them; its call is counted once it is served.
                        if let Some((spec, slot)) = ran
                            && keep
                        {
                            crate::observe::Observe::monitor(
                                &shared.pubsub,
                                &state.client,
                                shared.registry.now_ms(),
                                spec,
                                slot,
                                &kept,
                            );
                            fed = true;
                        }
                        // The replies before it leave now; its own comes when it is served.
                        if !out.buf.is_empty()
                            && !send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await
                        {
                            wait.abandon(worker);
                            return;
                        }
                        mark = 0;
                        state.client.blocked.store(true, Ordering::Relaxed);
                        let closed = closed(shared, &mut stream, kill.as_mut(), &mut rbuf);
                        let woken = wait.wait(worker, closed).await;
                        state.client.blocked.store(false, Ordering::Relaxed);
                        match woken {
                            Woken::Reply(replies) => {
                                let replayed = worker.ticks.now();
                                replies.replay(&mut out);
                                took += Ticks::since(replayed, worker.ticks.now());
                                // It popped: acknowledged once the pop is safe in the log.
                                state.wrote = true;
                            }
                            Woken::Closed => return,
                        }
                    }
                    if let Some((spec, slot)) = ran {
                        // Read again after an admin command: a `CONFIG SET` applies to itself,
                        // as in Redis, and `MONITOR` to what follows.
                        if command::slot_flags(slot) & command::F::ADMIN != 0 {
                            gate = shared.observe.gate(&shared.pubsub);
                        }
                        session::record(
                            worker,
                            state,
                            &gate,
                            spec,
                            slot,
                            keep.then_some(&kept[..]),
                            took,
                            !fed,
                        );
                    }
                    worker.serve_ready();
                    edge.finish(&mut out.buf, mark, tag);
                    state.modes.after_reply(&mut out, mark);
                    if state.restricted {
                        state.restrict(out.version());
                    }
                    paused = shared.pause.maybe();
                    // The in-place path of scripts gives its arguments' vector back.
                    if args.capacity() != 0 && args.capacity() <= SPARE_ARGS {
                        spare.push(args);
                    }
                    if state.quit {
                        let _ = send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await;
                        return;
                    }
                    start = worker.ticks.now();
                }
                if out.overflowed() {
                    // Redis closes a client past its hard limit, unsent.
                    tracing::debug!(
                        "client id={} closed: output buffer over its hard limit",
                        state.id
                    );
                    state.client.end(Ended::Output);
                    return;
                }
                if out.buf.len() >= FLUSH_AT {
                    if !send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await {
                        return;
                    }
                    start = worker.ticks.now();
                    // Another client may have paused the server meanwhile.
                    paused = shared.pause.maybe();
                }
            }
            if let Some(err) = failure {
                edge.write_fatal(err, &mut out);
                let _ = send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await;
                return;
            }
        }
        if !out.buf.is_empty()
            && !send(worker, state, &mut stream, kill.as_mut(), &mut out.buf).await
        {
            return;
        }
        // A worker that never runs out of work still sends what it wrote for replication
        // within a millisecond (see `Repl::worker_busy`).
        shared.repl.worker_busy(worker.index);
    }
}

/// Resolves when the client's socket closes or fails while it is blocked; what it sends
/// meanwhile is kept for after (Redis reads a blocked client's input but runs none of it),
/// up to the query buffer limit, past which the client is closed.
async fn closed<S: Socket>(
    shared: &Shared,
    stream: &mut S,
    mut kill: Pin<&mut Notified<'_>>,
    rbuf: &mut BytesMut,
) {
    loop {
        let read = tokio::select! {
            read = stream.read_buf(rbuf) => read,
            () = kill.as_mut() => return,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let limit = shared
                    .live
                    .client_query_buffer_limit
                    .load(Ordering::Relaxed);
                if rbuf.len() as u64 > limit {
                    return;
                }
            }
        }
    }
}

/// The next message for a subscribed connection; never, for one that subscribes to nothing.
async fn next_message(subs: &mut Option<Subscriptions>) -> Option<Arc<Message>> {
    match subs {
        Some(subs) => subs.next().await,
        None => std::future::pending().await,
    }
}

/// Argument vectors of at most this capacity are kept for reuse (see `serve`).
const SPARE_ARGS: usize = 16;

/// Commands parsed ahead of execution, at most: their keys are prefetched together (see
/// [`Worker::route_and_prefetch_bucket`]), and a window this size keeps the prefetched lines in cache.
const BATCH: usize = 32;

/// The handler of `parsed` when it can run right here, synchronously, exactly as
/// [`session::dispatch`] would run it: a known single-key command ([`command::Spec::direct`])
/// with a valid argument count, from an authenticated client of database 0 outside `MULTI`
/// (with no argument that begins with the namespace mark), whose key this
/// worker owns while no transaction holds the worker, and (for a write) with a healthy log.
/// Anything else takes the general path. Marks the pending replies as a write's when it is
/// one, and says whether it is.
#[inline]
fn direct(
    worker: &Worker,
    state: &mut ClientState,
    parsed: &Parsed,
) -> Option<(&'static command::Spec, Handler, bool)> {
    let spec = parsed.spec?;
    let route = parsed.route.as_ref()?;
    let handler = spec.direct()?;
    let write = spec.write();
    // Database 0's plain keys only: any other key is rewritten by `dispatch` first
    // (`command::into_db`).
    let usable = state.authed
        && state.db == 0
        && command::Spec::plain_key(&parsed.args)
        && !state.in_multi()
        && !state.restricted
        && spec.arity_ok(parsed.args.len())
        // A user allowed everything skips the check; another runs in place too when it may
        // (a denial goes through `dispatch`, which answers and logs it).
        && (state.acl_open() || state.user.allows_in_place(spec, &parsed.args))
        && !worker.is_locked()
        && !worker.shared.scripts.is_busy()
        && !(write && worker.shared.repl.read_only())
        && !worker.shared.repl.stale()
        && worker.store.borrow().owner_of(route) == worker.index
        && !(write
            && worker
                .shared
                .persist
                .as_ref()
                .is_some_and(|p| p.refuses_writes()));
    state.wrote |= usable && write;
    usable.then_some((spec, handler, write))
}

/// Parses the complete commands at the front of `rbuf` into `batch` (up to [`BATCH`]), and
/// returns the protocol error that ended it, if one did. Parsing ahead stops after a command
/// that may change how the rest must be parsed (`AUTH`, `HELLO` and `RESET` change the
/// parser's limits), and is one command at a time until the client is authenticated, so
/// every command is parsed under exactly the limits it would be parsed under alone.
#[expect(
    clippy::too_many_arguments,
    reason = "the connection loop's parts, borrowed separately"
)]
fn parse_batch<E: Edge>(
    worker: &Worker,
    edge: &mut E,
    parser: &mut RequestParser,
    rbuf: &mut BytesMut,
    authed: bool,
    batch: &mut Vec<Parsed>,
    spare: &mut Vec<Vec<Bytes>>,
    names: &mut command::RecentNames,
) -> Option<E::Fatal> {
    while batch.len() < BATCH {
        let mut args = spare.pop().unwrap_or_default();
        match edge.parse(parser, rbuf, &mut args, authed) {
            Ok(Some((tag, _))) if E::refused(tag) => {
                batch.push(Parsed {
                    spec: None,
                    args,
                    route: None,
                    tag,
                });
            }
            Ok(Some((mut tag, claimed))) => {
                let spec = names.lookup(&args[0]);
                let barrier = !authed || spec.is_some_and(command::Spec::barrier);
                let route = worker.route_and_prefetch_bucket(spec, &args);
                // A client that routed the key itself and disagrees with the server (another
                // routing mode, another hash tag rule) is told so instead of served.
                if let (Some(claimed), Some(route)) = (claimed, route)
                    && claimed != route.route_hash()
                    && !spec.is_some_and(command::Spec::script)
                {
                    tag = edge.refuse(
                        tag,
                        Bytes::from_static(
                            b"ERR the route hash sent does not match the server's routing of the key",
                        ),
                    );
                }
                batch.push(Parsed {
                    spec,
                    args,
                    route,
                    tag,
                });
                if barrier {
                    break;
                }
            }
            Ok(None) => {
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
async fn send<S: Socket>(
    worker: &Worker,
    state: &mut ClientState,
    stream: &mut S,
    kill: Pin<&mut Notified<'_>>,
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
    // INFO clients' client_recent_max_output_buffer (the largest since start): a shared
    // line that is written only when a new maximum appears.
    if pending > shared.max_output_buffer.load(Ordering::Relaxed) {
        shared
            .max_output_buffer
            .fetch_max(pending, Ordering::Relaxed);
    }
    if limit.hard > 0 && pending > limit.hard {
        client.end(Ended::Output);
        return false;
    }
    let watch_stall = limit.seconds > 0 && pending >= limit.soft;
    if watch_stall {
        let now = shared.registry.now_ms().max(1);
        client.stalled_ms.store(now, Ordering::Relaxed);
    }
    let figures = &shared.expiry[worker.index];
    figures.net_out.fetch_add(pending, Ordering::Relaxed);
    figures.writes.fetch_add(1, Ordering::Relaxed);
    // A client that does not read is ended by the sweeper while this waits.
    let sent = {
        let write = stream.write_all(wbuf);
        tokio::pin!(write);
        tokio::select! {
            biased;
            sent = &mut write => sent.is_ok(),
            // A kill cuts the replies short; a shutdown lets those of requests already read
            // leave (an io_uring send is never done at its first poll, so a shutdown that
            // came meanwhile would otherwise always win).
            () = kill => {
                client.ended.load(Ordering::Acquire) == Ended::Shutdown as u8
                    && tokio::time::timeout(SHUTDOWN_SEND, write)
                        .await
                        .is_ok_and(|sent| sent.is_ok())
            }
        }
    };
    if watch_stall {
        client.stalled_ms.store(0, Ordering::Relaxed);
    }
    wbuf.clear();
    sent
}
