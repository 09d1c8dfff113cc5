//! Clients of a worker whose thread a busy script holds, answered from the script's hook.
//!
//! A worker runs one script at a time on its own thread, so while a script runs past
//! `busy-reply-threshold` none of that worker's connection tasks can run. Redis answers every
//! client `BUSY` meanwhile; so does fast-cache: clients of other workers are answered by
//! their workers, new clients by the acceptor (see `busy`), and the busy worker's own
//! clients from here, by the interpreter's hook (every 100,000 instructions, at most once per
//! [`PASS_EVERY`]).
//!
//! Which clients: a plaintext RESP connection on a tokio worker whose task waits on its socket
//! with nothing buffered either way (no partial request read, no reply unsent), outside
//! `MULTI`, not subscribed or in a client mode, and whose user is allowed everything (or is
//! not yet authenticated: it is answered `NOAUTH`, as Redis does). Its task marks it
//! [`Parked::idle`] around that wait, so the hook touches a socket only while its task
//! cannot. Other connections (TLS, io_uring, FCNP, memcached, in a transaction) wait for the
//! script, as before.
//!
//! How: the hook reads what the client sent (non-blocking) into the connection's held input,
//! parses the complete requests, and answers them in order: `SCRIPT KILL` and `FUNCTION KILL`
//! run, `BUSY` for the rest. It stops at the first request that must wait for the worker (one
//! Redis allows during a busy script, such as `MULTI` or `HELLO`, and `AUTH`, `QUIT`,
//! `SHUTDOWN`, which change the connection); from then on it reads nothing more from that
//! client. Replies go out without blocking; what the socket does not take is sent first on
//! the next pass. Whatever the hook leaves, held input or unsent replies, the task takes
//! first when the worker is back ([`Socket::take_left`]): the hook wakes it through the
//! client's kill switch with the client still open, which the task tells from a kill.
//! (Peeking instead of reading would leave the bytes in the kernel, but Linux then stops
//! reopening the receive window: a flood stalled after 194 kB.) Before a connection's
//! protocol is decided, only a RESP array is read (its first byte is peeked).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use fc_resp::{Limits, RequestParser};
use rustix::event::{PollFd, PollFlags};
use rustix::net::{RecvFlags, SendFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::clients::Client;
use crate::command::{self, F, Selected};
use crate::reply::{Reply, Resp};
use crate::shared::Shared;
use crate::socket::Socket;
use crate::stats::WorkerStats;

/// The hook answers this worker's clients at most this often (and a pass that took long
/// waits longer, see [`answer_busy`]).
const PASS_EVERY: Duration = Duration::from_millis(2);

/// The most of one client's input read per pass.
const CHUNK: usize = 64 * 1024;

/// The most input the hook holds for one client (a request larger than this waits for the
/// worker whole).
const HELD_MAX: usize = 1 << 20;

/// A connection the busy-script hook may answer (shared by its task and the registry).
pub(crate) struct Parked {
    /// Borrowed by the task only within a poll of its reads and writes (so, never while it
    /// waits), and by the hook only while the task waits.
    stream: RefCell<TcpStream>,
    /// Set by the task while it waits on the socket with nothing buffered (see the module).
    idle: Cell<bool>,
    /// Whether the client authenticated (else its commands get `NOAUTH`).
    authed: Cell<bool>,
    /// The connection's protocol is decided (before, only RESP arrays are answered: an FCNP
    /// or replication handshake must reach the task untouched).
    settled: Cell<bool>,
    /// Requests the hook read and did not answer, for the task to run first.
    held: RefCell<BytesMut>,
    /// Replies the hook could not send yet.
    owed: RefCell<BytesMut>,
    /// Whether `held` or `owed` holds something (the task's one check).
    left: Cell<bool>,
    /// A request at the head of `held` waits for the worker (or `held` is full): nothing
    /// more is read.
    stalled: Cell<bool>,
    /// The task was woken to take what is left (once: a second wake would leave a permit
    /// that a later wait on the kill switch, such as a `CLIENT PAUSE`, took for a kill).
    woken: Cell<bool>,
    client: Arc<Client>,
    stats: Rc<WorkerStats>,
}

/// This worker's parked connections, and what a pass needs.
#[derive(Default)]
struct Registry {
    conns: Vec<Weak<Parked>>,
    /// `conns` is pruned of ended connections when it reaches this length.
    prune_at: usize,
    shared: Option<Arc<Shared>>,
    /// No pass before this.
    next_pass: Option<Instant>,
    chunk: Vec<u8>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// A plaintext tokio connection that the busy-script hook can answer: the connection's
/// [`Socket`].
pub(crate) struct ParkedTcp(Rc<Parked>);

impl ParkedTcp {
    /// Registers `stream` (a connection of this worker thread) with this thread's registry.
    pub(crate) fn new(
        stream: TcpStream,
        shared: &Arc<Shared>,
        client: Arc<Client>,
        stats: Rc<WorkerStats>,
    ) -> Self {
        let parked = Rc::new(Parked {
            stream: RefCell::new(stream),
            idle: Cell::new(false),
            authed: Cell::new(false),
            settled: Cell::new(false),
            held: RefCell::new(BytesMut::new()),
            owed: RefCell::new(BytesMut::new()),
            left: Cell::new(false),
            stalled: Cell::new(false),
            woken: Cell::new(false),
            client,
            stats,
        });
        REGISTRY.with_borrow_mut(|reg| {
            if reg.conns.len() >= reg.prune_at {
                reg.conns.retain(|c| c.strong_count() > 0);
                reg.prune_at = (reg.conns.len() * 2).max(64);
            }
            reg.conns.push(Rc::downgrade(&parked));
            if reg.shared.is_none() {
                reg.shared = Some(Arc::clone(shared));
            }
        });
        Self(parked)
    }
}

impl Socket for ParkedTcp {
    // tokio's own `AsyncRead`/`AsyncWrite` paths, with the stream borrowed only within each
    // poll: `read_buf` and `write` futures hold no state between polls, so one made per poll
    // behaves as one kept across them (a short read clears the readiness, as before).
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        let stream = &self.0.stream;
        std::future::poll_fn(|cx| {
            let mut stream = stream.borrow_mut();
            std::pin::pin!(AsyncReadExt::read_buf(&mut *stream, buf)).poll(cx)
        })
        .await
    }

    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()> {
        let stream = &self.0.stream;
        let mut at = 0;
        std::future::poll_fn(|cx| {
            let mut stream = stream.borrow_mut();
            while at < buf.len() {
                let write = AsyncWriteExt::write(&mut *stream, &buf[at..]);
                match std::task::ready!(std::pin::pin!(write).poll(cx)) {
                    Ok(0) => {
                        return std::task::Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                    }
                    Ok(n) => at += n,
                    Err(e) => return std::task::Poll::Ready(Err(e)),
                }
            }
            std::task::Poll::Ready(Ok(()))
        })
        .await
    }

    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        self.0.stream.borrow().try_read_buf(buf)
    }

    fn into_tcp(self) -> Result<std::io::Result<std::net::TcpStream>, Self> {
        // The registry holds the connection weakly: the task's is the only strong reference.
        match Rc::try_unwrap(self.0) {
            Ok(parked) => Ok(parked.stream.into_inner().into_std()),
            Err(rc) => Err(Self(rc)),
        }
    }

    fn settled(&mut self) {
        self.0.settled.set(true);
    }

    #[inline]
    fn park(&self, idle: bool, authed: bool) {
        self.0.idle.set(idle);
        self.0.authed.set(authed);
    }

    #[inline]
    fn left(&self) -> bool {
        self.0.left.get()
    }

    fn take_left(&self) -> (BytesMut, BytesMut) {
        self.0.left.set(false);
        self.0.stalled.set(false);
        self.0.woken.set(false);
        (
            std::mem::take(&mut *self.0.owed.borrow_mut()),
            std::mem::take(&mut *self.0.held.borrow_mut()),
        )
    }
}

/// Called by the interpreter's hook while a script is busy on this thread: answers this
/// worker's parked clients (see the module).
pub(crate) fn answer_busy() {
    REGISTRY.with(|reg| {
        // The hook does not re-enter itself; a failed borrow would mean it did, and skips.
        let Ok(mut reg) = reg.try_borrow_mut() else {
            return;
        };
        let start = Instant::now();
        if reg.next_pass.is_some_and(|next| start < next) {
            return;
        }
        let Some(shared) = reg.shared.clone() else {
            return;
        };
        let limits = shared.live.request_limits();
        let Registry { conns, chunk, .. } = &mut *reg;
        chunk.resize(CHUNK, 0);
        let idle: Vec<Rc<Parked>> = conns
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| c.idle.get())
            .collect();
        // An idle task holds no borrow of its stream (it waits).
        let streams: Vec<std::cell::Ref<'_, TcpStream>> = idle
            .iter()
            .filter_map(|c| c.stream.try_borrow().ok())
            .collect();
        if streams.len() != idle.len() {
            return;
        }
        // One `poll` finds the clients with something to read (or room for replies they
        // are owed): a worker with thousands of quiet connections costs one system call.
        let mut fds: Vec<PollFd<'_>> = idle
            .iter()
            .zip(&streams)
            .map(|(c, stream)| {
                let want = if c.owed.borrow().is_empty() {
                    PollFlags::IN
                } else {
                    PollFlags::OUT
                };
                PollFd::new(&**stream, want)
            })
            .collect();
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if !fds.is_empty() && rustix::event::poll(&mut fds, Some(&zero)).is_ok() {
            for ((conn, fd), stream) in idle.iter().zip(&fds).zip(&streams) {
                if !fd.revents().is_empty() {
                    conn.answer(stream, &shared, limits, chunk);
                }
            }
        }
        drop(fds);
        drop(streams);
        // The next pass waits at least four times as long as this one took: answering
        // takes at most a fifth of the script's time.
        let end = Instant::now();
        reg.next_pass = Some(end + PASS_EVERY.max(end.duration_since(start) * 4));
    });
}

impl Parked {
    /// Sends what an earlier pass could not, then reads and answers what this parked client
    /// sent, up to the first request that must wait.
    fn answer(&self, stream: &TcpStream, shared: &Shared, limits: Limits, chunk: &mut [u8]) {
        let mut owed = self.owed.borrow_mut();
        if !owed.is_empty() {
            let sent = send_now(stream, &owed);
            let _ = owed.split_to(sent);
            if !owed.is_empty() {
                return;
            }
        }
        if self.stalled.get() {
            return;
        }
        let mut held = self.held.borrow_mut();
        if held.is_empty() && !self.settled.get() {
            // Not yet known to speak RESP: only a RESP array is taken.
            match rustix::net::recv(
                stream,
                &mut chunk[..1],
                RecvFlags::PEEK | RecvFlags::DONTWAIT,
            ) {
                Ok((1, _)) if chunk[0] == b'*' => {}
                _ => return,
            }
        }
        let room = HELD_MAX.saturating_sub(held.len()).min(chunk.len());
        let n = match rustix::net::recv(stream, &mut chunk[..room], RecvFlags::DONTWAIT) {
            // Nothing yet, or the peer closed (the task sees that itself).
            Ok((n, _)) if n > 0 => n,
            _ => return,
        };
        held.extend_from_slice(&chunk[..n]);
        self.left.set(true);
        let authed = self.authed.get();
        let mut parser = if authed {
            RequestParser::new(limits)
        } else {
            RequestParser::with_auth_required(limits, Limits::unauthenticated())
        };
        // Parsed from a copy: what is not answered stays in `held` as it came (a malformed
        // request included, which the task answers).
        let mut work = BytesMut::from(&held[..]);
        let mut args: Vec<Bytes> = Vec::new();
        let mut out = Resp::new(256);
        out.count_errors(Rc::clone(&self.stats));
        let mut answered = 0;
        let mut stalled = false;
        loop {
            match parser.parse_into(&mut work, &mut args) {
                Ok(true) => match parked_step(shared, authed, &args, &mut out) {
                    Step::Answered => answered = held.len() - work.len(),
                    Step::Wait | Step::Close => {
                        stalled = true;
                        break;
                    }
                },
                Ok(false) => break,
                Err(_) => {
                    stalled = true;
                    break;
                }
            }
        }
        let _ = held.split_to(answered);
        self.stalled.set(stalled || held.len() >= HELD_MAX);
        if !out.buf.is_empty() {
            let sent = send_now(stream, &out.buf);
            owed.extend_from_slice(&out.buf[sent..]);
        }
        let left = !held.is_empty() || !owed.is_empty();
        self.left.set(left);
        if left && !self.woken.replace(true) {
            // The task takes what is left when the worker is back, even if nothing more
            // arrives; woken with the client still open, it knows this is no kill. Its wait
            // is registered (it waits on the switch now), so no permit is left behind.
            self.client.kill.notify_one();
        }
    }
}

/// Sends what the socket takes now; how much.
fn send_now(stream: &TcpStream, bytes: &[u8]) -> usize {
    rustix::net::send(stream, bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL).unwrap_or(0)
}

/// What the hook does with one request of a parked client.
fn parked_step(shared: &Shared, authed: bool, args: &[Bytes], out: &mut Resp) -> Step {
    let name = &args[0][..];
    // These change the connection: its task runs them once the worker is back.
    if [&b"auth"[..], b"hello", b"quit", b"reset"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
    {
        return Step::Wait;
    }
    if name.eq_ignore_ascii_case(b"shutdown") && authed && shutdown_nosave(args) {
        // The script stops whatever it wrote; the task then runs the shutdown.
        shared.scripts.abort_busy();
        return Step::Wait;
    }
    busy_step(shared, authed, args, out)
}

/// What a command answered during a busy script does (here or by the acceptor, `busy`).
pub(crate) enum Step {
    /// Answered (its reply is in the output).
    Answered,
    /// Waits for the worker, with every command after it.
    Wait,
    /// Ends the connection once the output is written.
    Close,
}

/// Runs or refuses a command during a busy script (other than `AUTH`, `HELLO` and `QUIT`),
/// as Redis does: an unknown command or a wrong argument count gets its usual error,
/// `NOAUTH` before authentication, then `SCRIPT KILL`, `FUNCTION KILL` and `SHUTDOWN
/// NOSAVE` run, the commands Redis allows wait for the worker, and the rest get `BUSY`.
pub(crate) fn busy_step(shared: &Shared, authed: bool, args: &[Bytes], out: &mut Resp) -> Step {
    let Some(spec) = command::lookup(&args[0]) else {
        command::unknown_command(args, out);
        return Step::Answered;
    };
    if !spec.arity_ok(args.len()) {
        command::wrong_arity(&args[0], out);
        return Step::Answered;
    }
    let slot = match command::select(spec, args) {
        Selected::Slot(slot) => slot,
        Selected::UnknownSub => {
            let container = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
            command::unknown_subcommand(out, &container, &args[1]);
            return Step::Answered;
        }
        Selected::SubArity(_) => {
            command::wrong_subcommand_arity(out, spec.name, &args[1]);
            return Step::Answered;
        }
    };
    if !authed {
        out.error(b"NOAUTH Authentication required.");
        return Step::Answered;
    }
    let name = args[0].to_ascii_lowercase();
    let sub = args.get(1).map(|a| a.to_ascii_lowercase());
    match (name.as_slice(), sub.as_deref(), args.len()) {
        (b"script", Some(b"kill"), 2) => {
            shared.scripts.kill(false, out);
            return Step::Answered;
        }
        (b"function", Some(b"kill"), 2) => {
            shared.scripts.kill(true, out);
            return Step::Answered;
        }
        (b"shutdown", _, _) => {
            if shutdown_nosave(args) {
                // As `SHUTDOWN NOSAVE` from a worker's client: the script stops whatever
                // it wrote, and the server's owner is asked to stop (no reply).
                shared.scripts.abort_busy();
                tracing::warn!("SHUTDOWN NOSAVE requested during a busy script");
                shared.shutdown_request.send_replace(true);
                return Step::Close;
            }
            // Its flags are checked first, as Redis runs `SHUTDOWN` during a busy script.
            match command::shutdown_flags(args) {
                Err(text) => out.error(text),
                Ok(flags) if flags.abort => out.error(b"ERR No shutdown in progress."),
                Ok(_) => out.error(shared.scripts.busy_text()),
            }
            return Step::Answered;
        }
        _ => {}
    }
    // Commands Redis runs during a busy script wait for the worker here.
    let allowed = spec.has(F::ALLOW_BUSY) || command::slot_flags(slot) & F::ALLOW_BUSY != 0;
    if allowed {
        return Step::Wait;
    }
    out.error(shared.scripts.busy_text());
    Step::Answered
}

/// Whether `args` is a valid `SHUTDOWN` with `NOSAVE` (no `SAVE`, no `ABORT`): the one form
/// that stops a busy script.
pub(crate) fn shutdown_nosave(args: &[Bytes]) -> bool {
    command::shutdown_flags(args).is_ok_and(|flags| flags.nosave)
}
