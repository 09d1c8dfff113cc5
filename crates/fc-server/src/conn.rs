//! One client connection: read, parse every complete command, execute (locally or on the
//! owning worker), write all replies with one flush. Connection-level commands live here.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use fc_resp::{Encoder, Limits, RequestParser, RespVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::command::{self, Merge, Route};
use std::collections::BTreeSet;

use tokio::sync::{mpsc, oneshot};

use crate::worker::{Job, TxnCommand, Worker};

/// Replies are written out once this many bytes are pending, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;

struct State {
    /// Commands queued since `MULTI` (and whether one was refused while queueing).
    multi: Option<Vec<(&'static command::Spec, Vec<Bytes>)>>,
    dirty: bool,
    id: u64,
    version: RespVersion,
    name: Option<Bytes>,
    authed: bool,
    quit: bool,
    addr: String,
}

/// Decrements the client count when the connection ends, however it ends.
struct ClientSlot(Rc<Worker>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.shared.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) async fn serve(stream: std::net::TcpStream, worker: Rc<Worker>) {
    let _slot = ClientSlot(Rc::clone(&worker));
    let Ok(mut stream) = TcpStream::from_std(stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let shared = &worker.shared;
    let mut state = State {
        multi: None,
        dirty: false,
        id: shared.next_client_id.fetch_add(1, Ordering::Relaxed) + 1,
        version: RespVersion::Resp2,
        name: None,
        authed: shared.config.requirepass.is_none(),
        quit: false,
        addr: stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
    };
    let mut parser = if state.authed {
        RequestParser::new(Limits::default())
    } else {
        RequestParser::with_auth_required(Limits::default(), Limits::unauthenticated())
    };
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    loop {
        match stream.read_buf(&mut rbuf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            match parser.parse_owned(&mut rbuf) {
                Ok(Some(cmd)) => {
                    shared.commands.fetch_add(1, Ordering::Relaxed);
                    dispatch(&worker, &mut state, &mut parser, cmd.args, &mut wbuf).await;
                    if state.quit {
                        let _ = send(&worker, &mut stream, &mut wbuf).await;
                        return;
                    }
                    if wbuf.len() >= FLUSH_AT && !send(&worker, &mut stream, &mut wbuf).await {
                        return;
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    // Redis answers the protocol error and closes this client only.
                    err.write_reply(&mut wbuf);
                    let _ = send(&worker, &mut stream, &mut wbuf).await;
                    return;
                }
            }
        }
        if !wbuf.is_empty() && !send(&worker, &mut stream, &mut wbuf).await {
            return;
        }
    }
}

/// Writes the pending replies, after making the writes they acknowledge safe (persistence:
/// written to the OS, and on disk under `appendfsync always`). `false`: the connection is done
/// (a write failed, or the log failed and these replies must never be sent).
async fn send(worker: &Worker, stream: &mut TcpStream, wbuf: &mut BytesMut) -> bool {
    if let Some(persist) = &worker.shared.persist
        && !persist.acknowledge().await
    {
        return false;
    }
    let sent = stream.write_all(wbuf).await.is_ok();
    wbuf.clear();
    sent
}

async fn dispatch(
    worker: &Worker,
    state: &mut State,
    parser: &mut RequestParser,
    args: Vec<Bytes>,
    out: &mut BytesMut,
) {
    let version = state.version;
    let Some(spec) = command::lookup(&args[0]) else {
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
    match spec.name {
        "multi" => {
            let mut enc = Encoder::new(out, version);
            if state.multi.is_some() {
                return enc.error(b"ERR MULTI calls can not be nested");
            }
            state.multi = Some(Vec::new());
            state.dirty = false;
            return enc.ok();
        }
        "exec" => return exec(worker, state, parser, out).await,
        "discard" => {
            let mut enc = Encoder::new(out, version);
            if state.multi.take().is_none() {
                return enc.error(b"ERR DISCARD without MULTI");
            }
            state.dirty = false;
            return enc.ok();
        }
        "save" | "bgsave" if state.multi.is_some() => {
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
    if spec.name == "info" {
        return crate::info::info(worker, version, &args, out, txn).await;
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
    if std::mem::take(&mut state.dirty) {
        return Encoder::new(out, version)
            .error(b"EXECABORT Transaction discarded because of previous errors.");
    }
    let mut involved = BTreeSet::new();
    for (spec, args) in &queue {
        workers_of(worker, spec, args, &mut involved);
    }
    let shared = &worker.shared;
    let mut links: TxnLinks = (0..shared.workers).map(|_| None).collect();
    let mut self_locked = false;
    for &w in &involved {
        if w == worker.index {
            worker.lock().await;
            self_locked = true;
            continue;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (ack, acked) = oneshot::channel();
        let job = Job::Hold { ack, commands: rx };
        if shared.inboxes[w].send(job).is_ok() && acked.await.is_ok() {
            links[w] = Some(tx);
        }
    }
    Encoder::new(out, version).array_len(queue.len());
    for (spec, args) in queue {
        run(worker, state, parser, spec, args, out, Some(&links)).await;
    }
    drop(links);
    if self_locked {
        worker.unlock();
    }
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
            state.version = RespVersion::Resp2;
            state.name = None;
            if shared.config.requirepass.is_some() {
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
        b"config" => crate::info::config(worker, args, Encoder::new(out, state.version)),
        // No WATCH yet, so nothing to forget.
        b"unwatch" => Encoder::new(out, state.version).ok(),
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
    let Some(expected) = &worker.shared.config.requirepass else {
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
        state.name = name;
    }
    state.version = version;
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
    match (sub.as_slice(), args.len()) {
        (b"setname", 3) => {
            if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                enc.error(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                );
            } else {
                state.name = (!args[2].is_empty()).then(|| args[2].clone());
                enc.ok();
            }
        }
        (b"getname", 2) => match &state.name {
            Some(n) => enc.bulk(n),
            None => enc.null(),
        },
        (b"id", 2) => enc.integer(state.id as i64),
        (b"setinfo", 4) => enc.ok(),
        (b"info" | b"list", _) => {
            let line = format!(
                "id={} addr={} laddr=127.0.0.1:{} fd=0 name={} age=0 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client|{} user=default redir=-1 resp={}\n",
                state.id,
                state.addr,
                worker.shared.port,
                state
                    .name
                    .as_ref()
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_default(),
                String::from_utf8_lossy(&sub),
                if state.version == RespVersion::Resp3 {
                    3
                } else {
                    2
                },
            );
            enc.verbatim(*b"txt", line.as_bytes());
        }
        (b"setname" | b"getname" | b"id" | b"setinfo", _) => {
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
