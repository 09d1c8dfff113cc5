//! `redis.call` and `redis.pcall`: a command from a script, checked as Redis checks it
//! (arity, `noscript`, writes from read-only scripts, keys the script may touch) and run on
//! the workers the script holds, its reply converted into a Lua value.
//!
//! A script runs on one worker thread without yielding. A command of its own worker runs in
//! place; one of another worker the script holds (a script over keys of several workers holds
//! them all, as `EXEC` does) goes through the transaction's link and this thread waits for the
//! answer ([`block_on`]): the held worker runs nothing but the script's commands, so the wait
//! ends. A key on a worker the script does not hold is refused (Redis Cluster's rule for keys
//! a script did not declare): waiting for a worker that is not held could wait forever.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bytes::Bytes;
use fc_shard::EmbeddedKeyRoute;
use mlua::{Lua, MultiValue, Value};

use crate::command::{self, F, Route, Selected, Session};
use crate::cross::{self, TxnLinks};
use crate::reply::{Replies, Reply};
use crate::worker::Worker;

/// What a running script's commands need: where they may run and how.
pub(crate) struct CallCtx {
    pub(crate) worker: Rc<Worker>,
    /// The held workers' links (`None` for this worker and for workers not held); `None`:
    /// the script runs on its keys' worker alone.
    pub(crate) links: Option<TxnLinks>,
    /// The workers the script may touch (its declared keys' workers, all held).
    pub(crate) allowed: Allowed,
    /// The script's database (`SELECT` inside a script changes it for the script alone).
    pub(crate) db: u32,
    /// `redis.setresp(3)`.
    pub(crate) resp3: bool,
    /// `EVAL_RO`, `FCALL_RO`, a `no-writes` function.
    pub(crate) read_only: bool,
    /// Whether a write ran (`SCRIPT KILL` then refuses: `UNKILLABLE`).
    pub(crate) wrote: bool,
    /// When it started, in the worker's clock ticks (`stats::Ticks`: a counter read, where
    /// `Instant::now` is a clock call).
    pub(crate) started: u64,
    /// The calling client's id (blocking commands inside scripts never block).
    pub(crate) client: u64,
    /// The calling client's ACL user when it is not allowed everything.
    pub(crate) user: Option<std::sync::Arc<crate::acl::User>>,
    /// The run (what `FUNCTION STATS` shows once the script has run a while).
    pub(crate) run: Rc<super::Run>,
    /// Whether the registry was told this script runs (by the hook, the first time it fires).
    pub(crate) recorded: bool,
    /// The last command's reply (reused: a script's commands allocate no reply buffer).
    pub(crate) scratch: Replies,
}

/// The workers a script may touch.
pub(crate) enum Allowed {
    /// Its keys' worker alone (where it runs).
    One(usize),
    /// The workers it holds.
    Set(Vec<bool>),
}

impl Allowed {
    fn has(&self, w: usize) -> bool {
        match self {
            Self::One(one) => *one == w,
            Self::Set(set) => set.get(w).copied().unwrap_or(false),
        }
    }
}

thread_local! {
    static CONTEXT: RefCell<Option<CallCtx>> = const { RefCell::new(None) };
    /// The reply buffer the last script's commands used.
    static SPARE: std::cell::Cell<Replies> = std::cell::Cell::new(Replies::new());
    /// The last command names scripts called on this thread (`redis.call('GET', ...)` in a
    /// loop looks its name up once).
    static NAMES: RefCell<command::RecentNames> = RefCell::new(command::RecentNames::default());
    /// The argument vector of the last command a script ran here (given back once it ran).
    static SPARE_ARGS: std::cell::Cell<Vec<Bytes>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Argument vectors of at most this capacity are kept for the next command.
const SPARE_ARGS_MAX: usize = 16;

/// Installs the context of the script about to run on this thread.
pub(crate) fn enter(ctx: CallCtx) {
    CONTEXT.with_borrow_mut(|c| *c = Some(ctx));
}

/// Removes the context after the script ended; whether the hook told the registry it runs.
pub(crate) fn leave() -> bool {
    let Some(ctx) = CONTEXT.with_borrow_mut(Option::take) else {
        return false;
    };
    // The reply buffer serves the next script, unless a large reply grew it.
    if ctx.scratch.held() <= SPARE_MAX {
        SPARE.set(ctx.scratch);
    }
    ctx.recorded
}

/// The reply buffer for a script's commands (the last script's, reused).
pub(crate) fn scratch() -> Replies {
    SPARE.take()
}

/// The most a reply buffer kept for the next script may hold.
const SPARE_MAX: usize = 64 << 10;

/// `redis.setresp`.
pub(crate) fn set_resp3(on: bool) {
    CONTEXT.with_borrow_mut(|c| {
        if let Some(ctx) = c {
            ctx.resp3 = on;
        }
    });
}

/// Whether the running script asked for RESP3 (`redis.setresp(3)`).
pub(crate) fn resp3() -> bool {
    CONTEXT.with_borrow(|c| c.as_ref().is_some_and(|ctx| ctx.resp3))
}

/// A script the hook sees for the first time: its run and its worker.
pub(crate) type Started = (Rc<super::Run>, usize);

/// What the instruction hook needs: milliseconds the running script has run, whether it
/// wrote, and (the first time only) the run to show as running with its worker. `None`: none
/// runs.
pub(crate) fn running() -> Option<(u128, bool, Option<Started>)> {
    CONTEXT.with_borrow_mut(|c| {
        c.as_mut().map(|ctx| {
            let first = !ctx.recorded;
            ctx.recorded = true;
            (
                {
                    let ticks = &ctx.worker.ticks;
                    // A counter that went backwards (another core's) counts as no time.
                    u128::from(ticks.nanos(ticks.now().saturating_sub(ctx.started)) / 1_000_000)
                },
                ctx.wrote,
                first.then(|| (Rc::clone(&ctx.run), ctx.worker.index)),
            )
        })
    })
}

/// `redis.call` with no arguments.
pub(crate) const NO_ARGS: &[u8] =
    b"ERR Please specify at least one argument for this redis lib call";
/// `redis.call` with an argument neither a string nor a number.
pub(crate) const BAD_ARG: &[u8] =
    b"ERR Lua redis lib command arguments must be strings or integers";

/// An `{err = text}` table.
fn err(lua: &Lua, text: &[u8]) -> mlua::Result<(bool, Value)> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok((false, Value::Table(t)))
}

/// The Rust half of `redis.call`/`redis.pcall` (mlua's safe API): `(true, value)`, or
/// `(false, {err = ...})` for the Lua half to raise (`call`) or return (`pcall`).
#[cfg_attr(
    feature = "unsafe",
    expect(
        dead_code,
        reason = "the unsafe feature's redis.call replaces it (raw.rs)"
    )
)]
pub(crate) fn call(lua: &Lua, args: MultiValue) -> mlua::Result<(bool, Value)> {
    let mut argv = Args::new(args.len());
    for arg in &args {
        match arg {
            Value::String(s) => argv.bytes(&s.as_bytes()),
            Value::Integer(n) => argv.integer(*n),
            Value::Number(n) => argv.number(*n),
            _ => return err(lua, BAD_ARG),
        }
    }
    command(argv.finish(), |done| match done {
        Ok((replies, resp3)) => Ok((true, super::convert::to_lua(lua, replies, resp3)?)),
        Err(text) => err(lua, text),
    })
}

/// A script command's arguments, copied from Lua values.
pub(crate) struct Args {
    argv: Vec<Bytes>,
}

impl Args {
    pub(crate) fn new(n: usize) -> Self {
        let mut argv = SPARE_ARGS.take();
        argv.reserve(n);
        Self { argv }
    }

    /// A string argument.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.argv.push(Bytes::copy_from_slice(bytes));
    }

    /// An integer argument (its decimal text).
    pub(crate) fn integer(&mut self, n: i64) {
        self.bytes(itoa::Buffer::new().format(n).as_bytes());
    }

    /// A number argument: an integral number in `i64`'s range as an integer, any other as
    /// Lua writes numbers.
    pub(crate) fn number(&mut self, n: f64) {
        if super::engine::in_i64_range(n) && ((n as i64) as f64).to_bits() == n.to_bits() {
            self.integer(n as i64);
        } else {
            self.bytes(super::api::number_text(n).as_bytes());
        }
    }

    pub(crate) fn finish(self) -> Vec<Bytes> {
        self.argv
    }
}

/// Admits and runs a command of the running script (Redis's checks: arity, `noscript`,
/// writes from read-only scripts, keys the script may touch); `done` gets its reply with
/// the script's protocol (`true`: RESP3), or the error text the script gets.
pub(crate) fn command<T>(
    argv: Vec<Bytes>,
    done: impl FnOnce(Result<(&Replies, bool), &[u8]>) -> T,
) -> T {
    let Some(name) = argv.first() else {
        return done(Err(NO_ARGS));
    };
    if super::api::loading() {
        return done(Err(
            b"ERR redis.call can not be called while a library loads",
        ));
    }
    let Some(spec) = NAMES.with_borrow_mut(|names| names.lookup(name)) else {
        return done(Err(b"ERR Unknown Redis command called from script"));
    };
    if !spec.arity_ok(argv.len()) {
        return done(Err(
            b"ERR Wrong number of args calling Redis command from script",
        ));
    }
    let slot = match command::select(spec, &argv) {
        Selected::Slot(slot) => slot,
        Selected::UnknownSub | Selected::SubArity(_) => {
            return done(Err(
                b"ERR Wrong number of args calling Redis command from script",
            ));
        }
    };
    let flags = command::slot_flags(slot);
    if flags & F::NOSCRIPT != 0 || spec.has(F::NOSCRIPT) {
        return done(Err(b"ERR This Redis command is not allowed from script"));
    }
    CONTEXT.with_borrow_mut(|c| {
        let Some(ctx) = c.as_mut() else {
            return done(Err(b"ERR redis.call outside a script"));
        };
        if let Some(user) = &ctx.user
            && let Err(denial) = user.check(spec, slot, &argv)
        {
            let shared = &ctx.worker.shared;
            shared.acl.log(
                Some(&denial),
                crate::acl::Context::Lua,
                &user.name,
                String::new(),
            );
            return done(Err(&denial.error(&user.name)));
        }
        let write = flags & F::WRITE != 0 || spec.write();
        if write && ctx.read_only {
            return done(Err(
                b"ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        if write && ctx.worker.shared.repl.read_only() {
            return done(Err(
                b"READONLY You can't write against a read only replica.",
            ));
        }
        let mut argv = argv;
        command::into_db(spec, &mut argv, ctx.db);
        // A keyed command: its route and owner, computed once (the owner check and the
        // handler).
        let route = match spec.route {
            Route::Key(_) => {
                let store = ctx.worker.store.borrow();
                let route = ctx
                    .run
                    .route_of(&argv[1])
                    .unwrap_or_else(|| store.route_key(&argv[1]));
                let owner = store.owner_of(&route);
                Some((route, owner))
            }
            _ => None,
        };
        let refused = if let Some((_, owner)) = &route {
            !ctx.allowed.has(*owner)
        } else {
            let mut involved = BTreeSet::new();
            cross::workers_of(&ctx.worker, spec, &argv, &mut involved);
            involved.iter().any(|&w| !ctx.allowed.has(w))
        };
        if refused {
            return done(Err(
                b"ERR Script attempted to access a non local key in a cluster node",
            ));
        }
        ctx.wrote |= write;
        // Counted in the command's statistics, as Redis counts commands scripts run.
        let worker = Rc::clone(&ctx.worker);
        let start = worker.ticks.now();
        execute(ctx, spec, argv, route);
        let took = crate::stats::Ticks::since(start, worker.ticks.now());
        worker.stats.record(slot, took);
        match ctx.scratch.error_text() {
            Some(text) => {
                worker.stats.fail(slot);
                done(Err(text))
            }
            None => done(Ok((&ctx.scratch, ctx.resp3))),
        }
    })
}

/// Runs an admitted command of a script.
fn execute(
    ctx: &mut CallCtx,
    spec: &'static command::Spec,
    args: Vec<Bytes>,
    route: Option<(EmbeddedKeyRoute, usize)>,
) {
    let worker = Rc::clone(&ctx.worker);
    // The common case: a keyed command of this worker.
    if let (Route::Key(handler), Some((route, owner))) = (spec.route, route)
        && owner == worker.index
    {
        worker.execute_into(handler, &args, Some(route), &mut ctx.scratch);
        let mut args = args;
        if args.capacity() <= SPARE_ARGS_MAX {
            args.clear();
            SPARE_ARGS.set(args);
        }
        return;
    }
    let mut out = Replies::with_limit(worker.shared.live.output_hard());
    let alone: TxnLinks;
    let txn = match &ctx.links {
        Some(links) => Some(links),
        None => {
            alone = (0..worker.shared.workers).map(|_| None).collect();
            Some(&alone)
        }
    };
    match spec.route {
        Route::Multi { handler, multi } => block_on(crate::multi::dispatch(
            &worker, spec, handler, multi, args, &mut out, txn,
        )),
        Route::Pop(kind) => {
            // Inside a script (as inside `MULTI`) a blocking pop never blocks.
            let _ = block_on(crate::blocking::run(
                &worker, ctx.client, kind, args, &mut out, txn,
            ));
        }
        Route::Session(session) => session_command(ctx, session, &args, &mut out),
        _ => block_on(cross::run_store(&worker, spec, args, &mut out, txn)),
    }
    ctx.scratch = out;
}

/// The connection-level commands a script may run.
fn session_command(ctx: &mut CallCtx, session: Session, args: &[Bytes], out: &mut Replies) {
    let worker = Rc::clone(&ctx.worker);
    match session {
        Session::Ping => match args.len() {
            1 => out.simple(b"PONG"),
            _ => out.bulk(&args[1]),
        },
        Session::Echo => out.bulk(&args[1]),
        Session::Time => command::time(out),
        Session::Select => match command::select_index(worker.shared.config.databases, &args[1]) {
            Ok(db) => {
                ctx.db = db;
                out.ok();
            }
            Err(text) => out.error(text),
        },
        Session::PubSub(crate::command::Ps::Publish | crate::command::Ps::Spublish) => {
            let shard = args[0].eq_ignore_ascii_case(b"spublish");
            let now = worker.shared.registry.now_ms();
            let n = worker.shared.pubsub.publish(&args[1], &args[2], shard, now);
            out.integer(n as i64);
        }
        _ => out.error(b"ERR This Redis command is not supported inside fast-cache scripts"),
    }
}

/// Wakes the thread that parked waiting for a held worker's answer.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives `work` to its end on this thread, parking while it waits. Only for work whose
/// waits are answered by other threads (a held worker's reply): nothing of this thread's
/// event loop runs meanwhile.
pub(crate) fn block_on<T>(work: impl Future<Output = T>) -> T {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut work = pin!(work);
    loop {
        match work.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            Poll::Pending => std::thread::park(),
        }
    }
}
