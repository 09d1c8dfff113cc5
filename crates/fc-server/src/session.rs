//! A client's session: its state (protocol version, authentication, `MULTI` queue, watched
//! keys, name) and the commands that act on it or on the server rather than on one key's
//! shard ([`command::Session`]): `HELLO`, `AUTH`, `CLIENT`, `RESET`, `SELECT`, `PING`,
//! `ECHO`, `QUIT`, `TIME`, `COMMAND`, `INFO`, `CONFIG`, `MULTI`/`EXEC`/`DISCARD`,
//! `WATCH`/`UNWATCH`, `SAVE`/`BGSAVE`/`LASTSAVE`, `SHUTDOWN`.
//!
//! [`dispatch`] admits every command that does not take the connection's in-place path
//! (unknown names, arity, authentication, `MISCONF`, `MULTI` queueing) by the table's
//! properties; no command name is matched as a string here.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use fc_resp::{Limits, RequestParser, RespVersion};

use crate::clients::{Client, Ended, KillFilter};
use crate::command::{self, F, Selected, Session, Spec};
use crate::cross::{self, Held, TxnLinks};
use crate::observe::Gate;
use crate::pubsub::Subscriptions;
use crate::reply::{NO_SLOT, Reply, Resp};
use crate::shared::Shared;
use crate::watched::WatchedKey;
use crate::worker::Worker;

/// One client's session state.
pub(crate) struct ClientState {
    /// Commands queued since `MULTI`.
    multi: Option<Vec<(&'static Spec, Vec<Bytes>)>>,
    /// Whether a command was refused while queueing (`EXEC` then aborts).
    dirty: bool,
    pub(crate) id: u64,
    pub(crate) authed: bool,
    /// The ACL user it runs as, as of [`ClientState::acl_epoch`].
    pub(crate) user: Arc<crate::acl::User>,
    /// The ACL registry's epoch when `user` was read.
    acl_epoch: u64,
    /// Set when the connection must close after its pending replies.
    pub(crate) quit: bool,
    /// This client's entry in the registry (name, library, kill switch).
    pub(crate) client: Arc<Client>,
    /// Keys `WATCH`ed since the last `EXEC`/`DISCARD`/`UNWATCH`.
    watched: Vec<WatchedKey>,
    shared: Arc<Shared>,
    /// Whether the replies pending include a write command's (persistence: those are never
    /// sent once the log has failed).
    pub(crate) wrote: bool,
    /// Set by a pop that must wait (`BLPOP`...): the connection waits on it before anything
    /// else.
    pub(crate) blocked: Option<crate::blocking::Wait>,
    /// Its subscriptions (created by its first subscribe).
    pub(crate) subs: Option<Subscriptions>,
    /// Subscribed in RESP2: only the subscription commands, `PING`, `QUIT` and `RESET` run.
    subscribed: bool,
    /// In `MONITOR` mode: commands that read or write keys are refused.
    monitor: bool,
    /// Subscribed in RESP2, monitoring, or in a mode of [`crate::client_modes`]: the
    /// connection's in-place path is closed (every command goes through [`dispatch`]).
    pub(crate) restricted: bool,
    /// The selected database (`SELECT`); keys are rewritten for it as commands are admitted
    /// ([`command::into_db`]).
    pub(crate) db: u32,
    /// The database when `MULTI` began: a queued `SELECT` applies to the commands queued
    /// after it, and `DISCARD` (or an aborted `EXEC`) goes back to this one.
    multi_db: u32,
    /// Tracking, replies on or off, ([`crate::client_modes`]).
    pub(crate) modes: crate::client_modes::Modes,
}

impl ClientState {
    pub(crate) fn new(id: u64, client: Arc<Client>, shared: Arc<Shared>) -> Self {
        Self {
            multi: None,
            dirty: false,
            id,
            authed: !shared.acl.default_needs_auth(),
            user: shared.acl.default_user(),
            acl_epoch: shared.acl.epoch(),
            quit: false,
            client,
            watched: Vec::new(),
            shared,
            wrote: false,
            blocked: None,
            subs: None,
            subscribed: false,
            monitor: false,
            restricted: false,
            db: 0,
            multi_db: 0,
            modes: crate::client_modes::Modes::default(),
        }
    }

    /// Whether its user is allowed everything (the in-place path's test): the user is
    /// re-read first when the ACL changed since.
    #[inline]
    pub(crate) fn acl_open(&mut self) -> bool {
        let epoch = self.shared.acl.epoch();
        if epoch != self.acl_epoch {
            self.acl_epoch = epoch;
            // A removed user's connections are closed; until then they may do nothing.
            self.user = self
                .shared
                .acl
                .user(&self.user.name)
                .unwrap_or_else(|| Arc::new(crate::acl::User::removed(&self.user.name)));
        }
        self.user.open
    }

    /// Runs as `user` from now on.
    pub(crate) fn set_user(&mut self, user: Arc<crate::acl::User>) {
        *self
            .client
            .user
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::from(user.name.as_str());
        self.user = user;
        self.acl_epoch = self.shared.acl.epoch();
    }

    /// The ACL check of a command about to be admitted: the `NOPERM` error when its user may
    /// not run it (recorded in the ACL log).
    fn acl_denied(&mut self, spec: &'static Spec, slot: usize, args: &[Bytes]) -> Option<Vec<u8>> {
        if self.acl_open() || spec.has(F::NO_AUTH) {
            return None;
        }
        let denial = self.user.check(spec, slot, args).err()?;
        let context = if self.multi.is_some() {
            crate::acl::Context::Multi
        } else {
            crate::acl::Context::Toplevel
        };
        let info = self.client.line(self.shared.registry.now_ms(), spec.name);
        self.shared
            .acl
            .log(Some(&denial), context, &self.user.name, info);
        Some(denial.error(&self.user.name))
    }

    /// Selects database `db`.
    fn select(&mut self, db: u32) {
        self.db = db;
        self.client.db.store(db, Ordering::Relaxed);
    }

    /// Whether a `MULTI` is open.
    /// Whether a busy script's hook may answer this client's commands for it (see `parked`):
    /// outside `MULTI`, not subscribed, blocked or in a client mode, and authenticated as a
    /// user allowed everything, or not authenticated yet (it is answered `NOAUTH`).
    pub(crate) fn parkable(&mut self) -> bool {
        self.multi.is_none()
            && !self.restricted
            && self.subs.is_none()
            && self.blocked.is_none()
            && (!self.authed || self.acl_open())
    }

    pub(crate) fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    pub(crate) fn set_version(&mut self, out: &mut Resp, version: RespVersion) {
        out.set_version(version);
        let number = if version == RespVersion::Resp3 { 3 } else { 2 };
        self.client.resp.store(number, Ordering::Relaxed);
        self.restrict(version);
    }

    /// Recomputes [`ClientState::restricted`].
    pub(crate) fn restrict(&mut self, version: RespVersion) {
        self.subscribed =
            version == RespVersion::Resp2 && self.subs.as_ref().is_some_and(Subscriptions::active);
        self.restricted = self.subscribed || self.monitor || self.modes.restricts();
    }

    fn set_multi(&mut self, queue: Option<Vec<(&'static Spec, Vec<Bytes>)>>) {
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

    /// Refuses a command: inside `MULTI` the transaction is then discarded at `EXEC`.
    fn refuse(&mut self, out: &mut Resp, text: &[u8]) {
        self.dirty |= self.multi.is_some();
        out.error(text);
    }
}

/// Counts a command refused before it ran in its statistics slot (`rejected_calls`).
fn rejected(worker: &Worker, slot: usize) {
    worker.stats.reject(slot);
}

/// After a command that ran: its call and time in the worker's statistics (its failure was
/// counted as it answered: [`Resp::failed_slot`]), and when it took at least
/// [`Gate::slow_ticks`] the slow log, the latency monitor and (when `feed`) the monitors
/// ([`crate::observe::Observe::after`]). `args` as the client sent them, when kept.
#[expect(
    clippy::too_many_arguments,
    reason = "the command's whole context, once"
)]
pub(crate) fn record(
    worker: &Worker,
    state: &ClientState,
    gate: &Gate,
    spec: &'static Spec,
    slot: usize,
    args: Option<&[Bytes]>,
    ticks: u64,
    feed: bool,
) {
    worker.stats.record(slot, ticks);
    if ticks >= gate.slow_ticks {
        let shared = &worker.shared;
        shared.observe.after(
            &shared.pubsub,
            &state.client,
            shared.registry.now_ms(),
            spec,
            slot,
            args,
            ticks,
            feed,
        );
    }
}

/// Leaves the registry, forgets watched keys and decrements the client count when the
/// connection ends, however it ends.
impl Drop for ClientState {
    fn drop(&mut self) {
        self.unwatch();
        self.client.closed.store(true, Ordering::Release);
        self.modes.stop_tracking(&self.shared, self.id);
        if let Some(subs) = &mut self.subs {
            subs.close(&self.shared.pubsub);
        }
        self.shared.registry.remove(self.id);
        self.shared.clients.fetch_sub(1, Ordering::Release);
    }
}

/// Admits and runs one command that did not take the in-place path. Its statistics slot
/// when it ran (the caller records it: [`record`]); `None` when it was refused (counted here),
/// queued by `MULTI` or unknown.
pub(crate) async fn dispatch(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    spec: Option<&'static Spec>,
    args: Vec<Bytes>,
    out: &mut Resp,
) -> Option<usize> {
    // Refusals are not failures.
    out.failed_slot = NO_SLOT;
    let Some(spec) = spec else {
        state.dirty |= state.multi.is_some();
        command::unknown_command(&args, out);
        return None;
    };
    if !spec.arity_ok(args.len()) {
        state.dirty |= state.multi.is_some();
        command::wrong_arity(&args[0], out);
        rejected(worker, spec.index());
        return None;
    }
    let slot = match command::select(spec, &args) {
        Selected::Slot(slot) => slot,
        Selected::UnknownSub => {
            state.dirty |= state.multi.is_some();
            let container = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
            command::unknown_subcommand(out, &container, &args[1]);
            return None;
        }
        Selected::SubArity(slot) => {
            state.dirty |= state.multi.is_some();
            command::wrong_subcommand_arity(out, spec.name, &args[1]);
            rejected(worker, slot);
            return None;
        }
    };
    // Redis's order: authentication, transactions, the log, subscribed mode, monitors.
    let refusal: Option<Cow<'static, [u8]>> = if !state.authed && !spec.has(F::NO_AUTH) {
        Some(Cow::Borrowed(b"NOAUTH Authentication required."))
    } else if state.multi.is_some() && spec.has(F::NO_MULTI) {
        Some(Cow::Borrowed(
            b"ERR Command not allowed inside a transaction",
        ))
    } else if let Some(denied) = state.acl_denied(spec, slot, &args) {
        Some(Cow::Owned(denied))
    } else if spec.write()
        && let Some(persist) = &worker.shared.persist
        && let Some(refusal) = persist.misconf()
    {
        Some(Cow::Owned(refusal.into_bytes()))
    } else if spec.write() && worker.shared.repl.read_only() {
        Some(Cow::Borrowed(
            b"READONLY You can't write against a read only replica.",
        ))
    } else if worker.shared.repl.stale() && command::slot_flags(slot) & F::STALE == 0 {
        Some(Cow::Borrowed(
            b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ))
    } else if state.subscribed && !crate::pubsub::allowed_in_subscribed_mode(out.version(), spec) {
        Some(Cow::Owned(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            command::slot_name(slot)
        ).into_bytes()))
    } else if state.monitor
        && command::slot_flags(slot) & (F::WRITE | F::READONLY | F::MAY_REPLICATE) != 0
    {
        Some(Cow::Borrowed(
            b"ERR Replica can't interact with the keyspace",
        ))
    } else {
        None
    };
    let refusal = refusal.or_else(|| {
        (worker.shared.scripts.is_busy() && command::slot_flags(slot) & F::ALLOW_BUSY == 0)
            .then(|| Cow::Borrowed(worker.shared.scripts.busy_text()))
    });
    if let Some(text) = refusal {
        state.refuse(out, &text);
        rejected(worker, slot);
        return None;
    }
    if worker.shared.pause.maybe() && !wait_out_pause(worker, state, spec, slot).await {
        // Killed while paused: the command never runs.
        return None;
    }
    state.wrote |= spec.write() || spec.session() == Some(Session::Exec);
    let mut args = args;
    command::into_db(spec, &mut args, state.db);
    if spec.queues() && state.multi.is_some() {
        // A queued SELECT applies to what is queued after it (it runs again at EXEC).
        if spec.session() == Some(Session::Select)
            && let Ok(db) = command::select_index(worker.shared.config.databases, &args[1])
        {
            state.select(db);
        }
        if let Some(queue) = &mut state.multi {
            queue.push((spec, args));
        }
        out.simple(b"QUEUED");
        return None;
    }
    out.failed_slot = slot;
    run(worker, state, parser, spec, args, out, None).await;
    // `CLIENT CACHING` covers the next command, or a whole transaction.
    if state.modes.caching && state.multi.is_none() && spec.session() != Some(Session::Client) {
        state.modes.caching = false;
    }
    Some(slot)
}

/// The in-place path of scripts: `EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms, run right
/// here without awaiting when [`dispatch`] would admit them with nothing to check or wait for
/// (an authenticated client of database 0 allowed everything, outside `MULTI` and the
/// restricted modes, no busy script, no stale replica, no argument beginning with the
/// namespace mark: `into_db` leaves it as it is) and their declared keys are all this worker's
/// with no transaction holding it (`script::run_in_place`). The caller checks that no `CLIENT
/// PAUSE` is on. Its statistics slot when it ran (as [`dispatch`] answers); `None`: nothing
/// ran, `args` is as it was, and the caller takes [`dispatch`]. `route`: the first declared
/// key's route when the parser computed it.
pub(crate) fn script_in_place(
    worker: &Worker,
    state: &mut ClientState,
    spec: Option<&'static Spec>,
    args: &mut Vec<Bytes>,
    route: Option<fc_shard::EmbeddedKeyRoute>,
    out: &mut Resp,
) -> Option<usize> {
    let spec = spec?;
    let Some(Session::Script(sc)) = spec.session().filter(|_| spec.script()) else {
        return None;
    };
    if !state.authed
        || state.db != 0
        || state.multi.is_some()
        || state.restricted
        || spec.write()
        || !spec.arity_ok(args.len())
    {
        return None;
    }
    let Selected::Slot(slot) = command::select(spec, args) else {
        return None;
    };
    let shared = &worker.shared;
    let mark = Some(&fc_shard::NAMESPACE_MARK);
    if !state.acl_open()
        || shared.scripts.is_busy()
        || (shared.repl.stale() && command::slot_flags(slot) & F::STALE == 0)
        || args[1..].iter().any(|a| a.first() == mark)
    {
        return None;
    }
    out.failed_slot = slot;
    let caller = crate::script::Caller {
        db: 0,
        client: state.id,
        user: None,
    };
    if crate::script::run_in_place(worker, sc, args, route, caller, out) {
        Some(slot)
    } else {
        out.failed_slot = NO_SLOT;
        None
    }
}

/// Waits while a `CLIENT PAUSE` holds the command (shown as blocked); `false` when the client
/// was killed meanwhile (it then closes without running it).
async fn wait_out_pause(
    worker: &Worker,
    state: &mut ClientState,
    spec: &'static Spec,
    slot: usize,
) -> bool {
    const WRITES: u32 = F::WRITE | F::MAY_REPLICATE;
    // Redis's `may_replicate` commands that its COMMAND INFO does not list as such.
    let replicates = |spec: &Spec, slot: usize| {
        command::slot_flags(slot) & WRITES != 0
            || matches!(spec.name, "publish" | "spublish" | "pfcount")
    };
    let pause = &worker.shared.pause;
    let write = replicates(spec, slot)
        || (spec.session() == Some(Session::Exec)
            && state.multi.as_ref().is_some_and(|queue| {
                queue
                    .iter()
                    .any(|(spec, args)| match command::select(spec, args) {
                        Selected::Slot(slot) => replicates(spec, slot),
                        _ => spec.flags & WRITES != 0,
                    })
            }));
    if !pause.blocks(write) {
        return true;
    }
    let client = Arc::clone(&state.client);
    client.set_flag(crate::clients::flag::PAUSED, true);
    let killed = client.kill.notified();
    let alive = tokio::select! {
        () = pause.wait(write) => true,
        () = killed => false,
    };
    client.set_flag(crate::clients::flag::PAUSED, false);
    state.quit |= !alive;
    alive
}

/// Runs one admitted command (in a transaction: with the workers `txn` holds); for a
/// tracking client, remembers the keys it reads (before and after the read, see
/// [`crate::tracking`]) and runs its writes as its own (`NOLOOP`).
async fn run(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    spec: &'static Spec,
    args: Vec<Bytes>,
    out: &mut Resp,
    txn: Option<&TxnLinks>,
) {
    if state.modes.tracker.is_none() {
        run_command(worker, state, parser, spec, args, out, txn).await;
        return flushed(worker, spec);
    }
    let shared = &worker.shared;
    let read = spec.flags & F::READONLY != 0 && spec.flags & F::PUBSUB == 0;
    let keys: Vec<Bytes> = match state.modes.remembers() {
        Some(_) if read => spec
            .spec_keys(&args)
            .unwrap_or_default()
            .into_iter()
            .map(|(i, _)| args[i].clone())
            .collect(),
        _ => Vec::new(),
    };
    let id = state.id;
    for key in &keys {
        shared.tracking.remember(shared.owner_of(key), key, id);
    }
    let noloop = state.modes.tracker.as_ref().is_some_and(|t| t.noloop);
    let work = run_command(worker, state, parser, spec, args, out, txn);
    if noloop {
        crate::tracking::as_client(id, work).await;
    } else {
        work.await;
    }
    for key in &keys {
        shared.tracking.remember(shared.owner_of(key), key, id);
    }
    flushed(worker, spec);
}

/// After `FLUSHALL`/`FLUSHDB`: every tracking client's keys are invalid.
fn flushed(worker: &Worker, spec: &'static Spec) {
    let tracking = &worker.shared.tracking;
    if tracking.active() && matches!(spec.name, "flushall" | "flushdb") {
        tracking.flush();
    }
}

/// Runs one admitted command (see [`run`]).
async fn run_command(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    spec: &'static Spec,
    args: Vec<Bytes>,
    out: &mut Resp,
    txn: Option<&TxnLinks>,
) {
    if let command::Route::Multi { handler, multi } = spec.route {
        return crate::multi::dispatch(worker, spec, handler, multi, args, out, txn).await;
    }
    if let command::Route::Pop(kind) = spec.route {
        state.blocked = crate::blocking::run(worker, state.id, kind, args, out, txn).await;
        return;
    }
    let Some(session) = spec.session() else {
        return cross::run_store(worker, spec, args, out, txn).await;
    };
    let shared = &worker.shared;
    match session {
        // Subscribed in RESP2, PING answers as a message would: `["pong", argument or ""]`.
        Session::Ping if state.subscribed && args.len() <= 2 => {
            out.array_len(2);
            out.bulk(b"pong");
            out.bulk(args.get(1).map_or(&b""[..], |a| &a[..]));
        }
        Session::Ping => match args.len() {
            1 => out.simple(b"PONG"),
            2 => out.bulk(&args[1]),
            _ => command::wrong_arity(&args[0], out),
        },
        Session::PubSub(ps) => {
            let now = shared.registry.now_ms();
            crate::pubsub::run(
                ps,
                &shared.pubsub,
                &mut state.subs,
                &state.client,
                now,
                &args,
                out,
            );
            state.restrict(out.version());
        }
        Session::Echo => out.bulk(&args[1]),
        Session::Object => object(worker, &args, out, txn).await,
        Session::Memory => memory(worker, &args, out, txn).await,
        Session::Wait => {
            let (Some(replicas), Some(timeout)) = (
                fc_resp::number::parse_i64(&args[1]),
                fc_resp::number::parse_i64(&args[2]),
            ) else {
                return out.error(b"ERR value is not an integer or out of range");
            };
            if timeout < 0 {
                return out.error(b"ERR timeout is negative");
            }
            let repl = &worker.shared.repl;
            if repl.read_only() {
                return out.error(b"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
            }
            // Inside MULTI (or a script) it answers at once, as Redis does.
            let wanted = usize::try_from(replicas).unwrap_or(0);
            let timeout = if txn.is_some() {
                None
            } else {
                Some(std::time::Duration::from_millis(timeout as u64))
            };
            let have = match timeout {
                Some(timeout) if wanted > 0 => repl.wait(wanted, timeout).await,
                _ => repl.caught_up(&repl.source.latest()),
            };
            out.integer(have as i64);
        }
        Session::Role => worker.shared.repl.role(out),
        Session::ReplicaOf => replica_of(worker, &args, out),
        Session::Lolwut => {
            let text = format!(
                "fast-cache ver. {} (Redis {} compatible)\n",
                env!("CARGO_PKG_VERSION"),
                crate::REDIS_VERSION
            );
            out.verbatim(*b"txt", text.as_bytes());
        }
        Session::Quit => {
            out.ok();
            state.quit = true;
        }
        Session::Debug => debug(worker, &args, out, txn).await,
        Session::Monitor => {
            // Redis refuses it in a transaction, and ignores it (no reply) when the client
            // already monitors.
            if txn.is_some() {
                return out.error(b"ERR MONITOR isn't allowed for DENY BLOCKING client");
            }
            let subs = state
                .subs
                .get_or_insert_with(|| Subscriptions::new(&state.client, &shared.pubsub));
            if subs.monitor(&shared.pubsub) {
                state.monitor = true;
                state.client.set_flag(crate::clients::flag::MONITOR, true);
                state.restrict(out.version());
                out.ok();
            }
        }
        Session::Slowlog => crate::info::slowlog(worker, &args, out),
        Session::Latency => crate::info::latency(worker, &args, out, txn).await,
        Session::Select => match command::select_index(worker.shared.config.databases, &args[1]) {
            Ok(db) => {
                state.select(db);
                out.ok();
            }
            Err(text) => out.error(text),
        },
        Session::Auth => {
            if args.len() > 3 {
                return out.error(b"ERR syntax error");
            }
            let name = match args.len() {
                2 => "default".into(),
                _ => String::from_utf8_lossy(&args[1]),
            };
            let password = &args[args.len() - 1];
            if let Err(text) = authenticate(worker, state, parser, &name, args.len() == 2, password)
            {
                return out.error(&text);
            }
            out.ok();
        }
        Session::Acl => {
            let removed = crate::acl::command(&shared.acl, &state.user.name, &args, out);
            // Redis closes the connections of a removed user.
            if !removed.is_empty() {
                for client in shared.registry.all() {
                    let user = client
                        .user
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    if removed.iter().any(|r| r.as_str() == &*user) && client.id != state.id {
                        client.end(crate::clients::Ended::Killed);
                    }
                }
                if removed.iter().any(|r| *r == state.user.name) {
                    state.quit = true;
                }
            }
            // Redis closes the connections whose subscriptions their user's channel rules no
            // longer allow.
            if matches!(
                args.get(1).map(|a| a.to_ascii_lowercase()).as_deref(),
                Some(b"setuser" | b"load")
            ) {
                let clients = shared.registry.all();
                for (id, channel, pattern) in shared.pubsub.subscriptions() {
                    let Some(client) = clients.iter().find(|c| c.id == id) else {
                        continue;
                    };
                    let name = client
                        .user
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    let allowed = shared
                        .acl
                        .user(&name)
                        .is_some_and(|user| user.may_subscribe(&channel, pattern));
                    if !allowed {
                        if id == state.id {
                            state.quit = true;
                        } else {
                            client.end(crate::clients::Ended::Killed);
                        }
                    }
                }
            }
        }
        Session::Hello => hello(worker, state, parser, &args, out),
        Session::Reset => {
            if let Some(subs) = &mut state.subs {
                subs.leave_all(&shared.pubsub);
            }
            state.monitor = false;
            state.modes.reset(shared, state.id);
            {
                use crate::clients::flag;
                let bits = flag::MONITOR | flag::NO_EVICT | flag::NO_TOUCH;
                state.client.set_flag(bits, false);
            }
            state.set_version(out, RespVersion::Resp2);
            state.client.set_name(None);
            state.set_multi(None);
            state.dirty = false;
            state.unwatch();
            state.select(0);
            state.set_user(shared.acl.default_user());
            if shared.acl.default_needs_auth() {
                state.authed = false;
                parser.require_auth(Limits::unauthenticated());
            }
            out.simple(b"RESET");
        }
        Session::Client => client(worker, state, &args, out),
        Session::Command => command::introspect::command(&args, out),
        Session::Time => command::time(out),
        // INFO's own messages to the other workers are not counted as the clients' hops.
        Session::Info => crate::stats::uncounted(crate::info::info(worker, &args, out, txn)).await,
        Session::Config => crate::info::config(worker, &args, out, txn).await,
        Session::Multi => {
            if state.multi.is_some() {
                return out.error(b"ERR MULTI calls can not be nested");
            }
            state.set_multi(Some(Vec::new()));
            state.dirty = false;
            state.multi_db = state.db;
            out.ok();
        }
        Session::Exec => Box::pin(exec(worker, state, parser, out)).await,
        Session::Discard => {
            if state.multi.is_none() {
                return out.error(b"ERR DISCARD without MULTI");
            }
            state.set_multi(None);
            state.unwatch();
            state.dirty = false;
            state.select(state.multi_db);
            out.ok();
        }
        Session::Watch => {
            if state.multi.is_some() {
                return out.error(b"ERR WATCH inside MULTI is not allowed");
            }
            for key in &args[1..] {
                // An expired key is reclaimed first, so its expiry is not mistaken for a
                // later change.
                cross::touch(worker, key, None).await;
                let shard = shared.router.shard_of(&shared.router.route_key(key));
                state.watched.push(shared.board.watch(shard, key.clone()));
            }
            out.ok();
        }
        Session::Unwatch => {
            state.unwatch();
            out.ok();
        }
        Session::Save => match crate::save::snapshot(shared).await {
            Ok(_) => out.ok(),
            Err(err) => out.error(err.as_bytes()),
        },
        Session::Bgsave => {
            if shared.persist.is_none() {
                return out
                    .error(b"ERR persistence is not configured (start fc-server with --data-dir)");
            }
            let shared = Arc::clone(shared);
            crate::rt::spawn_local(async move {
                if let Err(err) = crate::save::snapshot(&shared).await {
                    tracing::error!("BGSAVE failed: {err}");
                }
            });
            out.simple(b"Background saving started");
        }
        Session::Bgrewriteaof => {
            if shared.persist.is_some() {
                let shared = Arc::clone(shared);
                crate::rt::spawn_local(async move {
                    if let Err(err) = crate::save::snapshot(&shared).await {
                        tracing::error!("BGREWRITEAOF failed: {err}");
                    }
                });
            }
            out.simple(b"Background append only file rewriting started");
        }
        Session::Move => move_key(worker, state, &args, out, txn).await,
        Session::Module => module(&args, out),
        Session::PfDebug => {
            // The part takes the key first, as every keyed handler does.
            let owner = shared.owner_of(&args[2]);
            let part_args = vec![args[0].clone(), args[2].clone(), args[1].clone()];
            cross::exec_at(worker, owner, command::PFDEBUG, part_args, txn)
                .await
                .replay(out);
        }
        Session::PfSelfTest => match fc_shard::hll::self_test() {
            Ok(()) => out.ok(),
            Err(text) => out.error(format!("ERR {text}").as_bytes()),
        },
        Session::Swapdb => {
            let databases = i64::from(shared.config.databases);
            let db =
                |a: &Bytes| fc_resp::number::parse_i64(a).filter(|n| i32::try_from(*n).is_ok());
            match (db(&args[1]), db(&args[2])) {
                (None, _) => out.error(b"ERR invalid first DB index"),
                (_, None) => out.error(b"ERR invalid second DB index"),
                (Some(a), Some(b))
                    if !(0..databases).contains(&a) || !(0..databases).contains(&b) =>
                {
                    out.error(b"ERR DB index is out of range");
                }
                (Some(a), Some(b)) => {
                    if a != b {
                        let part = command::SWAPDB_PART;
                        let part_args = vec![
                            Bytes::from_static(b"swapdb"),
                            Bytes::from(a.to_string()),
                            Bytes::from(b.to_string()),
                        ];
                        cross::all_workers_held(worker, part, part_args, txn).await;
                    }
                    out.ok();
                }
            }
        }
        Session::NoCluster => out.error(b"ERR This instance has cluster support disabled"),
        Session::Lastsave => {
            let at = shared.persist.as_ref().map_or_else(
                || shared.started_unix,
                |p| p.last_save.load(Ordering::Relaxed),
            );
            out.integer(at as i64);
        }
        Session::Shutdown => shutdown(worker, state, &args, out).await,
        Session::Script(sc) => {
            let user = (!state.acl_open()).then(|| Arc::clone(&state.user));
            let caller = crate::script::Caller {
                db: state.db,
                client: state.id,
                user,
            };
            crate::script::run(worker, sc, args, caller, out, txn).await;
        }
    }
}

/// `EXEC`: holds every worker the queued commands touch (in ascending order, so two
/// transactions never wait on each other in a cycle), runs the commands in order with nothing
/// else running on those workers, then releases them.
async fn exec(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    out: &mut Resp,
) {
    let Some(queue) = state.multi.take() else {
        return out.error(b"ERR EXEC without MULTI");
    };
    state.set_multi(None);
    // The queued commands were rewritten for their databases as they were queued; the
    // connection's database is MULTI's again until a queued SELECT runs.
    state.select(state.multi_db);
    if std::mem::take(&mut state.dirty) {
        state.unwatch();
        return out.error(b"EXECABORT Transaction discarded because of previous errors.");
    }
    let shared = &worker.shared;
    let mut involved = BTreeSet::new();
    for (spec, args) in &queue {
        cross::workers_of(worker, spec, args, &mut involved);
    }
    involved.extend(state.watched.iter().map(|w| w.shard % shared.workers));
    let held = Held::take(worker, &involved).await;
    // A watched key that expired since is reclaimed by this touch, which is a change.
    for key in &state.watched {
        cross::touch(worker, &key.key, Some(&held.links)).await;
    }
    let aborted = state.watched.iter().any(|key| shared.board.changed(key));
    state.unwatch();
    if aborted {
        held.release(worker);
        return out.null_array();
    }
    out.array_len(queue.len());
    // Each command is timed and counted as its own call, as Redis counts them.
    let gate = shared.observe.gate(&shared.pubsub);
    for (spec, args) in queue {
        let slot = match command::select(spec, &args) {
            Selected::Slot(slot) => slot,
            _ => spec.index(),
        };
        // ACL rules are checked again: they may have changed since the command was queued.
        if !state.acl_open()
            && !spec.has(F::NO_AUTH)
            && let Err(denial) = state.user.check_stored(spec, slot, &args)
        {
            let info = state.client.line(shared.registry.now_ms(), spec.name);
            let name = state.user.name.clone();
            shared
                .acl
                .log(Some(&denial), crate::acl::Context::Multi, &name, info);
            out.error(&denial.exec_error());
            continue;
        }
        let kept = gate.keep_args.then(|| args.clone());
        out.failed_slot = slot;
        let start = worker.ticks.now();
        Box::pin(run(
            worker,
            state,
            parser,
            spec,
            args,
            out,
            Some(&held.links),
        ))
        .await;
        let took = crate::stats::Ticks::since(start, worker.ticks.now());
        record(
            worker,
            state,
            &gate,
            spec,
            slot,
            kept.as_deref(),
            took,
            true,
        );
    }
    held.release(worker);
}

/// Checks a user's password; on success the connection is authenticated as that user (full
/// limits). The error text on failure (recorded in the ACL log).
fn authenticate(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    name: &str,
    password_only: bool,
    password: &[u8],
) -> Result<(), Vec<u8>> {
    let user = check_password(&worker.shared, name, password_only, password).inspect_err(|_| {
        let info = state.client.line(worker.shared.registry.now_ms(), "auth");
        worker
            .shared
            .acl
            .log(None, crate::acl::Context::Toplevel, name, info);
    })?;
    state.set_user(user);
    state.authed = true;
    parser.authenticate();
    Ok(())
}

/// Whether `AUTH`'s user and password are right (`password_only`: `AUTH <password>`, for
/// the default user): the user, or the error text.
pub(crate) fn check_password(
    shared: &Shared,
    name: &str,
    password_only: bool,
    password: &[u8],
) -> Result<Arc<crate::acl::User>, Vec<u8>> {
    if password_only && !shared.acl.default_needs_auth() {
        return Err(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".to_vec());
    }
    shared
        .acl
        .authenticate(name, password)
        .ok_or_else(|| b"WRONGPASS invalid username-password pair or user is disabled.".to_vec())
}

fn hello(
    worker: &Worker,
    state: &mut ClientState,
    parser: &mut RequestParser,
    args: &[Bytes],
    out: &mut Resp,
) {
    let mut version = out.version();
    let mut i = 1;
    if args.len() > 1 {
        version = match fc_resp::number::parse_i64(&args[1]) {
            Some(2) => RespVersion::Resp2,
            Some(3) => RespVersion::Resp3,
            Some(_) => return out.error(b"NOPROTO unsupported protocol version"),
            None => return out.error(b"ERR Protocol version is not an integer or out of range"),
        };
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"auth") && i + 2 < args.len() {
            let name = String::from_utf8_lossy(&args[i + 1]).into_owned();
            if let Err(text) = authenticate(worker, state, parser, &name, false, &args[i + 2]) {
                return out.error(&text);
            }
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"setname") && i + 1 < args.len() {
            if !crate::observe::valid_client_name(&args[i + 1]) {
                return out.error(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            let text = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            );
            return out.error(text.as_bytes());
        }
    }
    if !state.authed {
        return out.error(
            b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
    }
    if name.is_some() {
        state.client.set_name(name);
    }
    state.set_version(out, version);
    out.map_len(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.integer(if version == RespVersion::Resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.integer(state.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array_len(0);
}

fn client(worker: &Worker, state: &mut ClientState, args: &[Bytes], out: &mut Resp) {
    let shared = &worker.shared;
    let modes = &mut state.modes;
    if crate::client_modes::client(shared, &state.client, &mut state.subs, modes, args, out) {
        return state.restrict(out.version());
    }
    let sub = args[1].to_ascii_lowercase();
    let registry = &worker.shared.registry;
    match (sub.as_slice(), args.len()) {
        (b"setname", 3) => {
            if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                out.error(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                );
            } else {
                state
                    .client
                    .set_name((!args[2].is_empty()).then(|| args[2].clone()));
                out.ok();
            }
        }
        (b"getname", 2) => match state.client.name() {
            Some(n) => out.bulk(&n),
            None => out.null(),
        },
        (b"id", 2) => out.integer(state.id as i64),
        (b"setinfo", 4) => {
            let value = String::from_utf8_lossy(&args[3]).into_owned();
            if value.contains(|c: char| c <= ' ' || c > '~') {
                return out.error(b"ERR lib-name or lib-ver cannot contain spaces, newlines or special characters.");
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
                    return out.error(text.as_bytes());
                }
            }
            out.ok();
        }
        (b"info", 2) => {
            let line = state.client.line(registry.now_ms(), "client|info");
            out.verbatim(*b"txt", line.as_bytes());
        }
        (b"list", _) => {
            // CLIENT LIST [TYPE normal|...] [ID id ...]
            let mut ids: Option<Vec<u64>> = None;
            let mut kind = None;
            let mut i = 2;
            while i < args.len() {
                let opt = args[i].to_ascii_lowercase();
                if opt == b"type" && i + 1 < args.len() {
                    match crate::clients::ClientType::parse(&args[i + 1]) {
                        Ok(k) => kind = Some(k),
                        Err(text) => return out.error(text.as_bytes()),
                    }
                    i += 2;
                } else if opt == b"id" && i + 1 < args.len() {
                    let mut list = Vec::new();
                    for id in &args[i + 1..] {
                        match fc_resp::number::parse_i64(id) {
                            Some(n) if n > 0 => list.push(n as u64),
                            _ => return out.error(b"ERR Invalid client ID"),
                        }
                    }
                    ids = Some(list);
                    i = args.len();
                } else {
                    return out.error(b"ERR syntax error");
                }
            }
            let now = registry.now_ms();
            let mut text = String::new();
            for client in registry.all() {
                if ids.as_ref().is_none_or(|ids| ids.contains(&client.id))
                    && kind.is_none_or(|k| k == crate::clients::ClientType::of(&client))
                {
                    let cmd = if client.id == state.id {
                        "client|list"
                    } else {
                        "NULL"
                    };
                    text.push_str(&client.line(now, cmd));
                }
            }
            out.verbatim(*b"txt", text.as_bytes());
        }
        (b"kill", n) if n >= 3 => {
            let (filter, old_form) = match KillFilter::parse(&args[2..]) {
                Ok(parsed) => parsed,
                Err(e) => return out.error(e.as_bytes()),
            };
            let mut killed = 0;
            // Replication links are not clients here, but `TYPE master` / `TYPE replica`
            // cuts them as Redis does (a replica then reconnects and resumes).
            match filter.kind {
                Some(crate::clients::ClientType::Master) => {
                    killed += worker.shared.repl.cut_primary_link();
                }
                Some(crate::clients::ClientType::Replica) => {
                    killed += worker.shared.repl.cut_replica_links();
                }
                _ => {}
            }
            let now = registry.now_ms();
            for client in registry.all() {
                if filter.matches(&client, state.id, now) {
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
                    out.error(b"ERR No such client");
                } else {
                    out.ok();
                }
            } else {
                out.integer(killed);
            }
        }
        (b"unblock", 3 | 4) => {
            let Some(id) = fc_resp::number::parse_i64(&args[2]) else {
                return out.error(b"ERR value is not an integer or out of range");
            };
            let error = match args.get(3).map(|a| a.to_ascii_lowercase()) {
                None => false,
                Some(word) if word == b"timeout" => false,
                Some(word) if word == b"error" => true,
                Some(_) => {
                    return out.error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
                }
            };
            let unblocked =
                u64::try_from(id).is_ok_and(|id| worker.shared.blocked.unblock(id, error));
            if unblocked && error {
                // The error the unblocked client gets counts against this call too, as in
                // Redis (its failed calls follow the server's error count).
                out.fail_current();
            }
            out.integer(i64::from(unblocked));
        }
        (b"help", 2) => {
            let lines: &[&[u8]] = &[
                b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"CACHING (YES|NO)",
                b"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                b"GETREDIR",
                b"    Return the client ID we are redirecting to when tracking is enabled.",
                b"GETNAME",
                b"    Return the name of the current connection.",
                b"ID",
                b"    Return the ID of the current connection.",
                b"INFO",
                b"    Return information about the current client connection.",
                b"KILL <ip:port>",
                b"    Kill connection made from <ip:port>.",
                b"KILL <option> <value> [<option> <value> [...]]",
                b"    Kill connections. Options are:",
                b"    * ADDR (<ip:port>|<unixsocket>:0)",
                b"      Kill connections made from the specified address",
                b"    * LADDR (<ip:port>|<unixsocket>:0)",
                b"      Kill connections made to specified local address",
                b"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                b"      Kill connections by type.",
                b"    * USER <username>",
                b"      Kill connections authenticated by <username>.",
                b"    * SKIPME (YES|NO)",
                b"      Skip killing current connection (default: yes).",
                b"    * ID <client-id>",
                b"      Kill connections by client id.",
                b"    * MAXAGE <maxage>",
                b"      Kill connections older than the specified age.",
                b"LIST [options ...]",
                b"    Return information about client connections. Options:",
                b"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                b"      Return clients of specified type.",
                b"UNPAUSE",
                b"    Stop the current client pause, resuming traffic.",
                b"PAUSE <timeout> [WRITE|ALL]",
                b"    Suspend all, or just write, clients for <timeout> milliseconds.",
                b"REPLY (ON|OFF|SKIP)",
                b"    Control the replies sent to the current connection.",
                b"SETNAME <name>",
                b"    Assign the name <name> to the current connection.",
                b"SETINFO <option> <value>",
                b"    Set client meta attr. Options are:",
                b"    * LIB-NAME: the client lib name.",
                b"    * LIB-VER: the client lib version.",
                b"UNBLOCK <clientid> [TIMEOUT|ERROR]",
                b"    Unblock the specified blocked client.",
                b"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                b"         [OPTIN] [OPTOUT] [NOLOOP]",
                b"    Control server assisted client side caching.",
                b"TRACKINGINFO",
                b"    Report tracking status for the current connection.",
                b"NO-EVICT (ON|OFF)",
                b"    Protect current client connection from eviction.",
                b"NO-TOUCH (ON|OFF)",
                b"    Will not touch LRU/LFU stats when this mode is on.",
                b"HELP",
                b"    Print this help.",
            ];
            command::help(out, lines);
        }
        (b"setname" | b"getname" | b"id" | b"setinfo" | b"info" | b"kill" | b"unblock", _) => {
            command::wrong_subcommand_arity(out, "client", &sub)
        }
        _ => command::unknown_subcommand(out, "CLIENT", &args[1]),
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: with persistence, snapshots first (unless
/// `NOSAVE`, or no save rules and no `SAVE`), then asks the server's owner to stop; the client
/// gets no reply (its connection closes), as with Redis.
async fn shutdown(worker: &Worker, state: &mut ClientState, args: &[Bytes], out: &mut Resp) {
    let command::ShutdownFlags {
        save,
        nosave,
        force,
        abort,
    } = match command::shutdown_flags(args) {
        Ok(flags) => flags,
        Err(text) => return out.error(text),
    };
    if abort {
        return out.error(b"ERR No shutdown in progress.");
    }
    let shared = &worker.shared;
    if shared.scripts.is_busy() {
        if !nosave {
            return out.error(shared.scripts.busy_text());
        }
        shared.scripts.abort_busy();
    }
    if let Some(persist) = &shared.persist
        && !nosave
        && (save || persist.has_save_rules())
        && let Err(err) = crate::save::snapshot(shared).await
    {
        tracing::error!("SHUTDOWN could not save: {err}");
        if !force {
            return out.error(b"ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
    if save && shared.persist.is_none() {
        tracing::warn!("SHUTDOWN SAVE without --data-dir: nothing to save to");
    }
    tracing::warn!("SHUTDOWN requested by client id={}", state.id);
    shared.shutdown_request.send_replace(true);
    state.quit = true;
}

/// `MEMORY USAGE key [SAMPLES n]` (on the key's owner: the bytes the key is charged, sampling
/// nothing: fast-cache's objects keep an exact estimate), `DOCTOR`, `MALLOC-STATS`, `PURGE`,
/// `STATS` (what fast-cache measures: the budget's use and the keys), `HELP`.
async fn memory<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R, txn: Option<&TxnLinks>) {
    const HELP: &[&[u8]] = &[
        b"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"DOCTOR",
        b"    Return memory problems reports.",
        b"MALLOC-STATS",
        b"    Return internal statistics report from the memory allocator.",
        b"PURGE",
        b"    Attempt to purge dirty pages for reclamation by the allocator.",
        b"STATS",
        b"    Return information about the memory usage of the server.",
        b"USAGE <key> [SAMPLES <count>]",
        b"    Return memory in bytes used by <key> and its value. Nested values are",
        b"    sampled up to <count> times (default: 5, 0 means sample all).",
        b"HELP",
        b"    Prints this help.",
    ];
    let sub = args[1].to_ascii_lowercase();
    let shared = &worker.shared;
    match (sub.as_slice(), args.len()) {
        (b"help", 2) => command::help(out, HELP),
        (b"usage", n) if n >= 3 => {
            let mut i = 3;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"samples") && i + 1 < args.len() {
                    match fc_resp::number::parse_i64(&args[i + 1]) {
                        Some(n) if n >= 0 => {}
                        Some(_) => return out.error(b"ERR syntax error"),
                        None => return out.error(b"ERR value is not an integer or out of range"),
                    }
                    i += 2;
                } else {
                    return out.error(b"ERR syntax error");
                }
            }
            let owner = shared.owner_of(&args[2]);
            let part = vec![args[1].clone(), args[2].clone()];
            cross::exec_at(worker, owner, command::MEMORY_USAGE, part, txn)
                .await
                .replay(out);
        }
        (b"doctor", 2) => {
            let [_, _, used, ..] = crate::info::totals(worker, txn).await;
            let text: &[u8] = if used < 5 << 20 {
                b"Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting."
            } else {
                b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base."
            };
            out.verbatim(*b"txt", text);
        }
        (b"malloc-stats", 2) => {
            out.verbatim(*b"txt", b"Stats not supported for the current allocator");
        }
        (b"purge", 2) => out.ok(),
        (b"stats", 2) => {
            let [keys, _, used, ..] = crate::info::totals(worker, txn).await;
            out.map_len(4);
            out.bulk(b"total.allocated");
            out.integer(used as i64);
            out.bulk(b"keys.count");
            out.integer(keys as i64);
            out.bulk(b"keys.bytes-per-key");
            out.integer(used.checked_div(keys).unwrap_or(0) as i64);
            out.bulk(b"dataset.bytes");
            out.integer(used as i64);
        }
        (b"help" | b"usage" | b"doctor" | b"malloc-stats" | b"purge" | b"stats", _) => {
            command::wrong_subcommand_arity(out, "memory", &args[1]);
        }
        _ => command::unknown_subcommand(out, "MEMORY", &args[1]),
    }
}

/// `DEBUG`: `SLEEP seconds` blocks this worker (its clients and the work other workers send
/// it) for that long, as Redis blocks its one thread; `DIGEST` runs on every worker (the sum
/// of their digests); `OBJECT key` (Redis's line, from the key's encoding and its `DUMP`
/// size), `SET-ACTIVE-EXPIRE 0|1` (stops or restarts active expiry), `ERROR text`,
/// `LOG text`, and the subcommands that tune what fast-cache does not have
/// (`QUICKLIST-PACKED-THRESHOLD`, `CHANGE-REPL-ID`, `STRINGMATCH-TEST`) answered as Redis
/// answers them; `HELP`.
async fn debug(worker: &Worker, args: &[Bytes], out: &mut Resp, txn: Option<&TxnLinks>) {
    const HELP: &[&[u8]] = &[
        b"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"CHANGE-REPL-ID",
        b"    Change the replication IDs of the instance.",
        b"    Dangerous: should be used only for testing the replication subsystem.",
        b"DIGEST",
        b"    Output a hex signature representing the current DB content.",
        b"ERROR <string>",
        b"    Return a Redis protocol error with <string> as message. Useful for clients",
        b"    unit tests to simulate Redis errors.",
        b"LOG <message>",
        b"    Write <message> to the server log.",
        b"OBJECT <key>",
        b"    Show low level info about `key` and associated value.",
        b"SET-ACTIVE-EXPIRE <0|1>",
        b"    Setting it to 0 disables expiring keys in background when they are not",
        b"    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
        b"    default.",
        b"QUICKLIST-PACKED-THRESHOLD <size>",
        b"    Sets the threshold for elements to be inserted as plain vs packed nodes",
        b"    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
        b"SLEEP <seconds>",
        b"    Stop the server for <seconds>. Decimals allowed.",
        b"STRINGMATCH-TEST",
        b"    Run a fuzz tester against the stringmatchlen() function.",
        b"HELP",
        b"    Prints this help.",
    ];
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"help", 2) => command::help(out, HELP),
        (b"sleep", 3) => {
            // Redis's strtod: what does not read as a number sleeps for 0.
            let seconds = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .unwrap_or(0.0);
            std::thread::sleep(std::time::Duration::from_micros((seconds * 1e6) as u64));
            out.ok();
        }
        (b"digest", 2) => {
            cross::all_workers(
                worker,
                command::DEBUG_PART,
                command::Merge::Digest,
                args.to_vec(),
                out,
                txn,
            )
            .await;
        }
        (b"object", 3) => debug_object(worker, &args[2], out, txn).await,
        (b"set-active-expire", 3) => {
            // Redis's atoi: what does not start with a number reads as 0.
            let text = String::from_utf8_lossy(&args[2]);
            let digits: String = text
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let on = digits.parse::<u64>().is_ok_and(|n| n != 0);
            worker
                .shared
                .live
                .active_expire
                .store(on, Ordering::Relaxed);
            out.ok();
        }
        (b"quicklist-packed-threshold", 3) => {
            match crate::parse_size(&String::from_utf8_lossy(&args[2])) {
                Ok(n) if n <= 4 << 30 => out.ok(),
                _ => out.error(
                    b"ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                ),
            }
        }
        (b"change-repl-id", 2) => out.ok(),
        (b"stringmatch-test", 2) => out.simple(b"Apparently Redis did not crash: test passed"),
        (b"log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(&args[2]));
            out.ok();
        }
        (b"error", 3) => out.error(&args[2]),
        _ => {
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                String::from_utf8_lossy(&args[1])
            );
            out.error(text.as_bytes());
        }
    }
}

/// `DEBUG OBJECT key`: Redis's line. The encoding is `OBJECT ENCODING`'s, the serialized
/// length the key's `DUMP` payload without its type byte and footer (fast-cache keeps no
/// address, reference count nor access time: those fields are fixed).
async fn debug_object(worker: &Worker, key: &Bytes, out: &mut Resp, txn: Option<&TxnLinks>) {
    let shared = &worker.shared;
    let owner = shared.owner_of(key);
    let encoding = cross::exec_at(
        worker,
        owner,
        command::OBJECT,
        object_args(worker, b"encoding", key),
        txn,
    )
    .await;
    let encoding = match encoding.tokens().first() {
        Some(crate::reply::Token::Bulk(range)) => {
            String::from_utf8_lossy(encoding.bytes(range)).into_owned()
        }
        _ => return out.error(b"ERR no such key"),
    };
    let keyed = |name: &[u8]| command::lookup(name).and_then(Spec::direct);
    let length = |replies: &crate::reply::Replies| match replies.tokens().first() {
        Some(crate::reply::Token::Bulk(range)) => range.len(),
        Some(crate::reply::Token::Integer(n)) => *n as usize,
        _ => 0,
    };
    let mut serialized = 0;
    if let Some(dump) = keyed(b"dump") {
        let part = vec![Bytes::from_static(b"dump"), key.clone()];
        let dumped = cross::exec_at(worker, owner, dump, part, txn).await;
        serialized = length(&dumped).saturating_sub(11);
    }
    let lru = (fc_snapshot::unix_ms() / 1000) & ((1 << 24) - 1);
    let at = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        h.finish()
    };
    let mut line = format!(
        "Value at:0x{:012x} refcount:1 encoding:{encoding} serializedlength:{serialized} lru:{lru} lru_seconds_idle:0",
        0x7f00_0000_0000_u64 | (at & 0xff_ffff_fff0)
    );
    if encoding == "quicklist"
        && let Some(llen) = keyed(b"llen")
    {
        let part = vec![Bytes::from_static(b"llen"), key.clone()];
        let n = length(&cross::exec_at(worker, owner, llen, part, txn).await);
        let max = shared
            .live
            .knobs
            .number("list-max-listpack-size")
            .unwrap_or(-2);
        line.push_str(&format!(
            " ql_nodes:1 ql_avg_node:{n}.00 ql_listpack_max:{max} ql_compressed:0 ql_uncompressed_size:{serialized}"
        ));
    }
    out.simple(line.as_bytes());
}

/// `OBJECT HELP` and `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key` (the latter on the key's
/// owner, with the configured encoding thresholds).
async fn object<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R, txn: Option<&TxnLinks>) {
    const HELP: &[&[u8]] = &[
        b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"ENCODING <key>",
        b"    Return the kind of internal representation used in order to store the value",
        b"    associated with a <key>.",
        b"FREQ <key>",
        b"    Return the access frequency index of the <key>. The returned integer is",
        b"    proportional to the logarithm of the recent access frequency of the key.",
        b"IDLETIME <key>",
        b"    Return the idle time of the <key>, that is the approximated number of",
        b"    seconds elapsed since the last access to the key.",
        b"REFCOUNT <key>",
        b"    Return the number of references of the value associated with the specified",
        b"    <key>.",
        b"HELP",
        b"    Prints this help.",
    ];
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"help", 2) => command::help(out, HELP),
        (b"encoding" | b"freq" | b"idletime" | b"refcount", 3) => {
            let owner = worker.shared.owner_of(&args[2]);
            let part = object_args(worker, &sub, &args[2]);
            cross::exec_at(worker, owner, command::OBJECT, part, txn)
                .await
                .replay(out);
        }
        (b"help" | b"encoding" | b"freq" | b"idletime" | b"refcount", _) => {
            command::wrong_subcommand_arity(out, "object", &args[1]);
        }
        _ => command::unknown_subcommand(out, "OBJECT", &args[1]),
    }
}

/// `MODULE`: no module is loaded, and loading is refused as a Redis with its default
/// `enable-module-command no` refuses it (subcommand and arity checked by the table).
fn module(args: &[Bytes], out: &mut Resp) {
    const HELP: &[&[u8]] = &[
        b"MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"LIST",
        b"    Return a list of loaded modules.",
        b"LOAD <path> [<arg> ...]",
        b"    Load a module library from <path>, passing to it any optional arguments.",
        b"LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        b"    Load a module library from <path>, while passing it module configurations and optional arguments.",
        b"UNLOAD <name>",
        b"    Unload a module.",
        b"HELP",
        b"    Prints this help.",
    ];
    match args[1].to_ascii_lowercase().as_slice() {
        b"list" => out.array_len(0),
        b"help" => command::help(out, HELP),
        _ => out.error(
            b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ),
    }
}

/// The database `SELECT` names: `Err` with Redis's error text when it is not a number or not
/// below `databases`.
/// `MOVE key db`: a rename to the same name in database `db` on the key's shard (a key lives
/// on the same shard in every database), refused when the name is taken there; 1 when it
/// moved.
async fn move_key(
    worker: &Worker,
    state: &ClientState,
    args: &[Bytes],
    out: &mut Resp,
    txn: Option<&TxnLinks>,
) {
    let databases = i64::from(worker.shared.config.databases);
    let db = match fc_resp::number::parse_i64(&args[2]) {
        Some(n) if i32::try_from(n).is_err() => {
            return out.error(
                b"ERR value is out of range, value must between -2147483648 and 2147483647",
            );
        }
        Some(n) if (0..databases).contains(&n) => n as u32,
        Some(_) => return out.error(b"ERR DB index is out of range"),
        None => return out.error(b"ERR value is not an integer or out of range"),
    };
    if db == state.db {
        return out.error(b"ERR source and destination objects are the same");
    }
    let src = args[1].clone();
    let dst = Bytes::from(fc_shard::namespaced(db, command::user_key(&src)));
    let owner = worker.shared.owner_of(&src);
    let renamed = cross::exec_at(
        worker,
        owner,
        command::RENAMENX,
        vec![Bytes::from_static(b"move"), src, dst],
        txn,
    )
    .await;
    // A missing key answers 0, as a taken name does.
    out.integer(renamed.integer_value().unwrap_or(0));
}

/// `[sub, key, thresholds...]` for [`command::OBJECT`], with the configured encoding
/// thresholds.
fn object_args(worker: &Worker, sub: &[u8], key: &Bytes) -> Vec<Bytes> {
    let knobs = &worker.shared.live.knobs;
    let knob = |name: &str, default: i64| knobs.number(name).unwrap_or(default);
    let list_bytes = match knob("list-max-listpack-size", -2) {
        n @ -5..=-1 => 4096 << (-n - 1),
        _ => 8192,
    };
    let thresholds = [
        knob("hash-max-listpack-entries", 128),
        knob("hash-max-listpack-value", 64),
        knob("zset-max-listpack-entries", 128),
        knob("zset-max-listpack-value", 64),
        knob("set-max-intset-entries", 512),
        // Redis 7.2's set listpack thresholds (its defaults).
        128,
        64,
        list_bytes,
    ];
    let mut part = vec![Bytes::copy_from_slice(sub), key.clone()];
    part.extend(thresholds.iter().map(|n| Bytes::from(n.to_string())));
    part
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and `SLAVEOF`).
fn replica_of(worker: &Worker, args: &[Bytes], out: &mut Resp) {
    let repl = &worker.shared.repl;
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        if repl.primary().is_some() {
            tracing::info!("promoted: no longer a replica (REPLICAOF NO ONE)");
        }
        repl.follow(None);
        return out.ok();
    }
    // Redis answers one error for a port that is not a number and one out of range.
    let Some(port) = fc_resp::number::parse_i64(&args[2]).and_then(|p| u16::try_from(p).ok())
    else {
        return out.error(b"ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if repl
        .primary()
        .is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && p == port)
    {
        return out.simple(b"OK Already connected to specified master");
    }
    tracing::info!("replicating {host}:{port} (REPLICAOF)");
    repl.follow(Some((host, port)));
    out.ok();
}
