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
//! How: the hook peeks at the socket's bytes (`MSG_PEEK`, so a partial request stays in the
//! kernel for the task), parses the complete requests, and answers them in order:
//! `SCRIPT KILL` and `FUNCTION KILL` run, `BUSY` for the rest. It stops at the first request
//! that must wait for the worker (one Redis allows during a busy script, such as `MULTI` or
//! `HELLO`, and `AUTH`, `QUIT`, `SHUTDOWN`, which change the connection): that one and all
//! after it stay in the socket. Only then are the answered requests' bytes taken from the
//! socket, and their replies sent without waiting. A reply the socket does not take whole
//! is kept for the task ([`Socket::take_owed`]), which sends it before anything else, and
//! the connection is not answered again until it did.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use fc_resp::{Limits, RequestParser};
use rustix::net::{RecvFlags, SendFlags};
use tokio::net::TcpStream;

use crate::clients::Client;
use crate::command::{self, F, Selected};
use crate::reply::{Reply, Resp};
use crate::shared::Shared;
use crate::socket::Socket;
use crate::stats::WorkerStats;

/// The hook answers this worker's clients at most this often.
const PASS_EVERY: Duration = Duration::from_millis(2);

/// The most of one client's input looked at per pass.
const PEEK: usize = 64 * 1024;

/// A connection the busy-script hook may answer (shared by its task and the registry).
pub(crate) struct Parked {
    stream: TcpStream,
    /// Set by the task while it waits on the socket with nothing buffered (see the module).
    idle: Cell<bool>,
    /// Whether the client authenticated (else its commands get `NOAUTH`).
    authed: Cell<bool>,
    /// The connection's protocol is decided (before, only RESP arrays are answered: an FCNP
    /// or replication handshake must reach the task untouched).
    settled: Cell<bool>,
    /// Replies the hook could not send, for the task to send first.
    owed: RefCell<BytesMut>,
    owes: Cell<bool>,
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
    last_pass: Option<Instant>,
    peek: Vec<u8>,
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
            stream,
            idle: Cell::new(false),
            authed: Cell::new(false),
            settled: Cell::new(false),
            owed: RefCell::new(BytesMut::new()),
            owes: Cell::new(false),
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
    // `poll_read_ready`/`poll_write_ready` keep the task's waker in the socket's own reader
    // and writer slots, as `AsyncRead`/`AsyncWrite` do (`readable()` would queue a waiter
    // under a lock on every wait).
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        let stream = &self.0.stream;
        std::future::poll_fn(|cx| {
            loop {
                std::task::ready!(stream.poll_read_ready(cx))?;
                match stream.try_read_buf(buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    read => return std::task::Poll::Ready(read),
                }
            }
        })
        .await
    }

    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()> {
        let stream = &self.0.stream;
        let mut at = 0;
        std::future::poll_fn(|cx| {
            while at < buf.len() {
                std::task::ready!(stream.poll_write_ready(cx))?;
                match stream.try_write(&buf[at..]) {
                    Ok(0) => {
                        return std::task::Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                    }
                    Ok(n) => at += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return std::task::Poll::Ready(Err(e)),
                }
            }
            std::task::Poll::Ready(Ok(()))
        })
        .await
    }

    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        self.0.stream.try_read_buf(buf)
    }

    fn into_tcp(self) -> Result<std::io::Result<std::net::TcpStream>, Self> {
        // The registry holds the connection weakly: the task's is the only strong reference.
        match Rc::try_unwrap(self.0) {
            Ok(parked) => Ok(parked.stream.into_std()),
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
    fn owes(&self) -> bool {
        self.0.owes.get()
    }

    fn take_owed(&self) -> BytesMut {
        self.0.owes.set(false);
        std::mem::take(&mut *self.0.owed.borrow_mut())
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
        let now = Instant::now();
        if reg
            .last_pass
            .is_some_and(|last| now.duration_since(last) < PASS_EVERY)
        {
            return;
        }
        reg.last_pass = Some(now);
        let Some(shared) = reg.shared.clone() else {
            return;
        };
        let limits = shared.live.request_limits();
        let Registry { conns, peek, .. } = &mut *reg;
        peek.resize(PEEK, 0);
        for conn in conns.iter().filter_map(Weak::upgrade) {
            if conn.idle.get() && !conn.owes.get() {
                conn.answer(&shared, limits, peek);
            }
        }
    });
}

impl Parked {
    /// Answers what this parked client sent, up to the first request that must wait.
    fn answer(&self, shared: &Shared, limits: Limits, peek: &mut [u8]) {
        let n = match rustix::net::recv(
            &self.stream,
            &mut *peek,
            RecvFlags::PEEK | RecvFlags::DONTWAIT,
        ) {
            // Nothing yet, or the peer closed (the task sees that itself).
            Ok((n, _)) if n > 0 => n,
            _ => return,
        };
        if !self.settled.get() && peek[0] != b'*' {
            return;
        }
        let authed = self.authed.get();
        let mut parser = if authed {
            RequestParser::new(limits)
        } else {
            RequestParser::with_auth_required(limits, Limits::unauthenticated())
        };
        let mut rbuf = BytesMut::from(&peek[..n]);
        let mut args: Vec<Bytes> = Vec::new();
        let mut out = Resp::new(256);
        out.count_errors(Rc::clone(&self.stats));
        let mut answered = 0;
        // A malformed request is the task's to answer: it stays in the socket.
        while let Ok(true) = parser.parse_into(&mut rbuf, &mut args) {
            match parked_step(shared, authed, &args, &mut out) {
                Step::Answered => answered = n - rbuf.len(),
                Step::Wait | Step::Close => break,
            }
        }
        if answered == 0 {
            return;
        }
        // Take the answered requests' bytes (they are there: just peeked).
        let mut left = answered;
        while left > 0 {
            let take = left.min(peek.len());
            match rustix::net::recv(&self.stream, &mut peek[..take], RecvFlags::DONTWAIT) {
                Ok((got, _)) if got > 0 => left -= got,
                _ => break,
            }
        }
        let replies = out.buf;
        let sent = rustix::net::send(
            &self.stream,
            &replies,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )
        .unwrap_or(0);
        if sent < replies.len() {
            self.owed.borrow_mut().extend_from_slice(&replies[sent..]);
            self.owes.set(true);
            // Woken now, the task sends them when the worker is back (see `conn`).
            self.client.kill.notify_one();
        }
    }
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
    if name.eq_ignore_ascii_case(b"shutdown")
        && authed
        && args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave"))
    {
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
            if args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
                // As `SHUTDOWN NOSAVE` from a worker's client: the script stops whatever
                // it wrote, and the server's owner is asked to stop (no reply).
                shared.scripts.abort_busy();
                tracing::warn!("SHUTDOWN NOSAVE requested during a busy script");
                shared.shutdown_request.send_replace(true);
                return Step::Close;
            }
            out.error(shared.scripts.busy_text());
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
