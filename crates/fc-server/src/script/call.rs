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
use std::time::Instant;

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
    pub(crate) started: Instant,
    /// The calling client's id (blocking commands inside scripts never block).
    pub(crate) client: u64,
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
}

/// Installs the context of the script about to run on this thread.
pub(crate) fn enter(ctx: CallCtx) {
    CONTEXT.with_borrow_mut(|c| *c = Some(ctx));
}

/// Removes the context after the script ended; whether the hook told the registry it runs.
pub(crate) fn leave() -> bool {
    CONTEXT
        .with_borrow_mut(Option::take)
        .is_some_and(|ctx| ctx.recorded)
}

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

/// What the instruction hook needs: milliseconds the running script has run, whether it
/// wrote, and (the first time only) the run to show as running. `None`: none runs.
pub(crate) fn running() -> Option<(u128, bool, Option<Rc<super::Run>>)> {
    CONTEXT.with_borrow_mut(|c| {
        c.as_mut().map(|ctx| {
            let first = !ctx.recorded;
            ctx.recorded = true;
            (
                ctx.started.elapsed().as_millis(),
                ctx.wrote,
                first.then(|| Rc::clone(&ctx.run)),
            )
        })
    })
}

/// An `{err = text}` table.
fn err(lua: &Lua, text: &[u8]) -> mlua::Result<(bool, Value)> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok((false, Value::Table(t)))
}

/// The Rust half of `redis.call`/`redis.pcall`: `(true, value)`, or `(false, {err = ...})`
/// for the Lua half to raise (`call`) or return (`pcall`).
pub(crate) fn call(lua: &Lua, args: MultiValue) -> mlua::Result<(bool, Value)> {
    if args.is_empty() {
        return err(
            lua,
            b"ERR Please specify at least one argument for this redis lib call",
        );
    }
    // The arguments' bytes in one buffer, each argument a slice of it (one allocation).
    let mut total = 0;
    for arg in &args {
        match arg {
            Value::String(s) => total += s.as_bytes().len(),
            Value::Integer(_) | Value::Number(_) => total += 24,
            _ => {
                return err(
                    lua,
                    b"ERR Lua redis lib command arguments must be strings or integers",
                );
            }
        }
    }
    let mut buf = Vec::with_capacity(total);
    let mut ends = Vec::with_capacity(args.len());
    for arg in &args {
        match arg {
            Value::String(s) => buf.extend_from_slice(&s.as_bytes()),
            Value::Integer(n) => buf.extend_from_slice(n.to_string().as_bytes()),
            Value::Number(n) => buf.extend_from_slice(super::api::number_text(*n).as_bytes()),
            _ => {}
        }
        ends.push(buf.len());
    }
    let buf = Bytes::from(buf);
    let mut start = 0;
    let argv: Vec<Bytes> = ends
        .into_iter()
        .map(|end| {
            let arg = buf.slice(start..end);
            start = end;
            arg
        })
        .collect();
    if super::api::loading() {
        return err(
            lua,
            b"ERR redis.call can not be called while a library loads",
        );
    }
    let Some(spec) = command::lookup(&argv[0]) else {
        return err(lua, b"ERR Unknown Redis command called from script");
    };
    if !spec.arity_ok(argv.len()) {
        return err(
            lua,
            b"ERR Wrong number of args calling Redis command from script",
        );
    }
    let slot = match command::select(spec, &argv) {
        Selected::Slot(slot) => slot,
        Selected::UnknownSub | Selected::SubArity(_) => {
            return err(
                lua,
                b"ERR Wrong number of args calling Redis command from script",
            );
        }
    };
    let flags = command::slot_flags(slot);
    if flags & F::NOSCRIPT != 0 || spec.has(F::NOSCRIPT) {
        return err(lua, b"ERR This Redis command is not allowed from script");
    }
    CONTEXT.with_borrow_mut(|c| {
        let Some(ctx) = c.as_mut() else {
            return err(lua, b"ERR redis.call outside a script");
        };
        let write = flags & F::WRITE != 0 || spec.write();
        if write && ctx.read_only {
            return err(
                lua,
                b"ERR Write commands are not allowed from read-only scripts.",
            );
        }
        let mut argv = argv;
        command::into_db(spec, &mut argv, ctx.db);
        // A keyed command: its route, computed once (the owner check and the handler).
        let route = match spec.route {
            Route::Key(_) => Some(ctx.worker.store.borrow().route_key(&argv[1])),
            _ => None,
        };
        let refused = if let Some(route) = &route {
            !ctx.allowed.has(ctx.worker.store.borrow().owner_of(route))
        } else {
            let mut involved = BTreeSet::new();
            cross::workers_of(&ctx.worker, spec, &argv, &mut involved);
            involved.iter().any(|&w| !ctx.allowed.has(w))
        };
        if refused {
            return err(
                lua,
                b"ERR Script attempted to access a non local key in a cluster node",
            );
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
                err(lua, text)
            }
            None => Ok((true, super::engine::to_lua(lua, &ctx.scratch, ctx.resp3)?)),
        }
    })
}

/// Runs an admitted command of a script.
fn execute(
    ctx: &mut CallCtx,
    spec: &'static command::Spec,
    args: Vec<Bytes>,
    route: Option<EmbeddedKeyRoute>,
) {
    let worker = Rc::clone(&ctx.worker);
    // The common case: a keyed command of this worker.
    if let (Route::Key(handler), Some(route)) = (spec.route, route)
        && worker.store.borrow().owner_of(&route) == worker.index
    {
        return worker.execute_into(handler, &args, Some(route), &mut ctx.scratch);
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
