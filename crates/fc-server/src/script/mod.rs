//! Scripting: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `SCRIPT`, `FUNCTION`, `FCALL`,
//! `FCALL_RO`, with the Lua 5.1 Redis embeds (one interpreter per worker thread,
//! [`engine`]), its `redis` API ([`api`], [`call`]) and libraries (`cjson`, `cmsgpack`, `bit`,
//! `struct`: [`libs`]).
//!
//! Where a script runs (Redis runs every script alone; so does fast-cache, per worker): its
//! declared keys (`numkeys`) decide.
//! - Keys all on one worker (or none: the connection's worker): the script runs on that
//!   worker's thread, in place or sent there as a [`Job::Run`], without locks: nothing else
//!   runs on the worker's shards meanwhile. Its writes are one transaction of the mutation
//!   stream.
//! - Keys on several workers: the connection holds them all ([`Held`], as `EXEC` does) and
//!   runs the script on its own thread; a command for a held worker goes through the
//!   transaction's link. Atomic and isolated as `EXEC` is.
//! - Inside `MULTI`: with the workers `EXEC` holds (it holds the declared keys' workers too).
//!
//! A command a script runs on a key of a worker it does not hold is refused (Redis Cluster's
//! rule for undeclared keys in another slot). Scripts and libraries are kept in the
//! [`Registry`] every worker shares; each interpreter compiles what it runs on first use.

mod api;
mod call;
mod engine;
mod libs;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use bytes::Bytes;
use fc_resp::RespVersion;
use mlua::VmState;
use tokio::sync::oneshot;

use crate::command::Sc;
use crate::cross::{Held, TxnLinks};
use crate::reply::{Replies, Reply};
use crate::shared::Job;
use crate::worker::{Worker, shutting_down};

/// Lowercase hex SHA1 of `data` (`redis.sha1hex`, script names).
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// A loaded function library.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    pub(crate) code: String,
    /// `(name, description, flags)`, in registration order.
    pub(crate) functions: Vec<(String, Option<String>, u32)>,
}

/// The script running past `busy-reply-threshold` (others are answered `BUSY`).
#[derive(Debug, Clone)]
struct Busy {
    /// `EVAL`'s SHA1 or the function's name.
    name: String,
    /// The command that started it (`FUNCTION STATS`).
    command: Vec<Bytes>,
    started: Instant,
    function: bool,
}

/// Scripts and function libraries every worker shares, the busy state and the kill switch.
#[derive(Debug)]
pub(crate) struct Registry {
    bodies: RwLock<HashMap<[u8; 40], Arc<[u8]>>>,
    body_bytes: AtomicUsize,
    generation: AtomicU64,
    libraries: RwLock<BTreeMap<String, Library>>,
    fn_generation: AtomicU64,
    /// `busy-reply-threshold` in milliseconds (0: never busy).
    pub(crate) threshold_ms: AtomicU64,
    /// Set while a script runs past the threshold: one relaxed load per command elsewhere.
    busy_flag: AtomicBool,
    busy: Mutex<Option<Busy>>,
    /// Whether the busy script has written (it then refuses `SCRIPT KILL`).
    busy_wrote: AtomicBool,
    /// `SCRIPT KILL`/`FUNCTION KILL` asked the busy script to stop.
    kill: AtomicBool,
    /// `SHUTDOWN NOSAVE` while busy: stop it even after writes.
    abort: AtomicBool,
    /// `FUNCTION STATS`'s running script, whatever its time.
    running: Mutex<Option<Busy>>,
    /// Memory of every worker's interpreter (each adds what changed after a run).
    vm_bytes: AtomicU64,
    /// Where libraries are kept across restarts (`<data-dir>/functions.rdb`; `None`: in
    /// memory only).
    file: Option<std::path::PathBuf>,
}

impl Registry {
    pub(crate) fn new(threshold_ms: u64, file: Option<std::path::PathBuf>) -> Self {
        Self {
            bodies: RwLock::default(),
            body_bytes: AtomicUsize::new(0),
            generation: AtomicU64::new(1),
            libraries: RwLock::default(),
            fn_generation: AtomicU64::new(1),
            threshold_ms: AtomicU64::new(threshold_ms),
            busy_flag: AtomicBool::new(false),
            busy: Mutex::new(None),
            busy_wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            running: Mutex::new(None),
            vm_bytes: AtomicU64::new(0),
            file,
        }
    }

    /// Bytes the interpreters use (`used_memory_lua`, `used_memory_vm_*`).
    pub(crate) fn vm_bytes(&self) -> u64 {
        self.vm_bytes.load(Ordering::Relaxed)
    }

    /// An interpreter's memory moved from `before` to `now` bytes.
    fn vm_moved(&self, before: u64, now: u64) {
        if now >= before {
            self.vm_bytes.fetch_add(now - before, Ordering::Relaxed);
        } else {
            self.vm_bytes.fetch_sub(before - now, Ordering::Relaxed);
        }
    }

    /// Writes the libraries to their file (write, sync, rename, sync the directory), so a
    /// library `FUNCTION LOAD` acknowledged survives a crash. Nothing without a data directory.
    fn persist(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let codes = self.library_codes();
        let payload = fc_snapshot::rdb::dump_functions(codes.iter().map(String::as_bytes));
        let tmp = file.with_extension("rdb.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&payload)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, file)?;
        if let Some(dir) = file.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The libraries of the file (at startup): their codes.
    pub(crate) fn saved_codes(&self) -> Result<Vec<String>, String> {
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        let payload = match std::fs::read(file) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        let limits = fc_snapshot::rdb::Limits::new(1 << 20, 1 << 30);
        let codes = fc_snapshot::rdb::restore_functions(&payload, limits)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(codes
            .into_iter()
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .collect())
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn fn_generation(&self) -> u64 {
        self.fn_generation.load(Ordering::Acquire)
    }

    /// The body of script `sha`.
    fn body(&self, sha: &[u8; 40]) -> Option<Arc<[u8]>> {
        self.bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sha)
            .cloned()
    }

    fn exists(&self, sha: &[u8]) -> bool {
        let Ok(sha) = <[u8; 40]>::try_from(sha.to_ascii_lowercase().as_slice()) else {
            return false;
        };
        self.bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&sha)
    }

    /// Keeps `body` (`SCRIPT LOAD`, `EVAL`) and returns its SHA1.
    fn add(&self, body: &[u8]) -> [u8; 40] {
        let mut sha = [0; 40];
        sha.copy_from_slice(sha1_hex(body).as_bytes());
        let mut bodies = self.bodies.write().unwrap_or_else(PoisonError::into_inner);
        if let std::collections::hash_map::Entry::Vacant(e) = bodies.entry(sha) {
            self.body_bytes.fetch_add(body.len(), Ordering::Relaxed);
            e.insert(Arc::from(body));
        }
        sha
    }

    fn flush_scripts(&self) {
        let mut bodies = self.bodies.write().unwrap_or_else(PoisonError::into_inner);
        bodies.clear();
        self.body_bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// `number_of_cached_scripts`, and their bytes (`used_memory_scripts_eval`).
    pub(crate) fn script_stats(&self) -> (usize, usize) {
        let n = self
            .bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (n, self.body_bytes.load(Ordering::Relaxed))
    }

    /// `(libraries, functions, bytes of code)` (`FUNCTION STATS`, `INFO memory`).
    pub(crate) fn function_stats(&self) -> (usize, usize, usize) {
        let libs = self
            .libraries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        (
            libs.len(),
            libs.values().map(|l| l.functions.len()).sum(),
            libs.values().map(|l| l.code.len()).sum(),
        )
    }

    /// Every library's code (snapshots, `FUNCTION DUMP`), in name order.
    pub(crate) fn library_codes(&self) -> Vec<String> {
        self.libraries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|l| l.code.clone())
            .collect()
    }

    /// Whether a script runs past the threshold (one relaxed load).
    #[inline]
    pub(crate) fn is_busy(&self) -> bool {
        self.busy_flag.load(Ordering::Relaxed)
    }

    /// `BUSY`'s text for the script now busy.
    pub(crate) fn busy_text(&self) -> &'static [u8] {
        let function = self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|b| b.function);
        if function {
            b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
    }

    /// `SHUTDOWN NOSAVE` while a script is busy: stop it whatever it wrote.
    pub(crate) fn abort_busy(&self) {
        if self.is_busy() {
            self.abort.store(true, Ordering::Release);
        }
    }

    /// The interpreter's hook, every [`engine`]'s `HOOK_EVERY` instructions: marks the
    /// script busy past the threshold, and stops it when killed.
    fn check(&self) -> mlua::Result<VmState> {
        let Some((elapsed, wrote)) = call::running() else {
            return Ok(VmState::Continue);
        };
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        if threshold > 0 && elapsed >= u128::from(threshold) && !self.is_busy() {
            let running = self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = running;
            self.kill.store(false, Ordering::Relaxed);
            self.busy_flag.store(true, Ordering::Release);
            tracing::warn!(
                "a script has run for {elapsed} ms (busy-reply-threshold {threshold} ms): other clients are answered BUSY"
            );
        }
        if self.is_busy() {
            self.busy_wrote.store(wrote, Ordering::Release);
            if self.abort.load(Ordering::Acquire) {
                return Err(mlua::Error::RuntimeError(
                    "ERR Script killed by SHUTDOWN NOSAVE".to_owned(),
                ));
            }
            if self.kill.swap(false, Ordering::AcqRel) && !wrote {
                return Err(mlua::Error::RuntimeError(
                    "ERR Script killed by user with SCRIPT KILL...".to_owned(),
                ));
            }
        }
        Ok(VmState::Continue)
    }

    fn start(&self, busy: Busy) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(busy);
    }

    fn stop(&self) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if self.is_busy() {
            *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = None;
            self.busy_wrote.store(false, Ordering::Relaxed);
            self.kill.store(false, Ordering::Relaxed);
            self.busy_flag.store(false, Ordering::Release);
        }
    }

    /// `SCRIPT KILL` / `FUNCTION KILL`.
    fn kill<R: Reply>(&self, function: bool, out: &mut R) {
        if !self.is_busy() {
            return out.error(b"NOTBUSY No scripts in execution right now.");
        }
        let busy_function = self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|b| b.function);
        if busy_function != function {
            return out.error(if function {
                b"NOTBUSY No scripts in execution right now."
            } else {
                b"BUSY Redis is busy running a function. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
            });
        }
        if self.busy_wrote.load(Ordering::Acquire) {
            return out.error(b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        self.kill.store(true, Ordering::Release);
        out.ok();
    }
}

/// What a script run executes.
#[derive(Clone)]
enum Target {
    /// An `EVAL` body by SHA1.
    Script([u8; 40]),
    /// A library function by name.
    Function(Vec<u8>),
}

/// One script run, everything it needs to run on any worker.
struct Run {
    target: Target,
    /// The declared keys as stored (namespaced for the database).
    keys: Vec<Bytes>,
    /// The declared keys as the client named them (`KEYS`).
    lua_keys: Vec<Bytes>,
    argv: Vec<Bytes>,
    read_only: bool,
    db: u32,
    client: u64,
    proto: RespVersion,
    /// The command (for `FUNCTION STATS`).
    command: Vec<Bytes>,
}

/// Runs `EVAL` and the other scripting commands for a connection.
#[expect(
    clippy::too_many_arguments,
    reason = "the connection's state a script needs, passed apart so this module stays below the session"
)]
pub(crate) async fn run<R: Reply>(
    worker: &Worker,
    cmd: Sc,
    args: Vec<Bytes>,
    db: u32,
    client: u64,
    proto: RespVersion,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let registry = &worker.shared.scripts;
    match cmd {
        Sc::Script => return script_command(worker, &args, out),
        Sc::Function => return function_command(worker, &args, out).await,
        _ => {}
    }
    let numkeys = match std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
    {
        None => return out.error(b"ERR value is not an integer or out of range"),
        Some(n) if n < 0 => return out.error(b"ERR Number of keys can't be negative"),
        Some(n) if n as u64 > (args.len() - 3) as u64 => {
            return out.error(b"ERR Number of keys can't be greater than number of args");
        }
        Some(n) => n as usize,
    };
    let target = match cmd {
        Sc::Eval | Sc::EvalRo => Target::Script(registry.add(&args[1])),
        Sc::EvalSha | Sc::EvalShaRo => {
            let sha = args[1].to_ascii_lowercase();
            match <[u8; 40]>::try_from(sha.as_slice()) {
                Ok(sha) if registry.body(&sha).is_some() => Target::Script(sha),
                _ => return out.error(b"NOSCRIPT No matching script. Please use EVAL."),
            }
        }
        _ => Target::Function(args[1].to_vec()),
    };
    let keys: Vec<Bytes> = args[3..3 + numkeys].to_vec();
    let lua_keys = keys
        .iter()
        .map(|k| match fc_shard::split_namespace(k) {
            (0, _) => k.clone(),
            (_, plain) => Bytes::copy_from_slice(plain),
        })
        .collect();
    let run = Run {
        target,
        keys,
        lua_keys,
        argv: args[3 + numkeys..].to_vec(),
        read_only: matches!(cmd, Sc::EvalRo | Sc::EvalShaRo | Sc::FcallRo),
        db,
        client,
        proto,
        command: args,
    };
    dispatch(worker, run, out, txn).await;
}

/// Runs a script where its declared keys live (see the module's documentation).
async fn dispatch<R: Reply>(worker: &Worker, run: Run, out: &mut R, txn: Option<&TxnLinks>) {
    let shared = &worker.shared;
    let owners: BTreeSet<usize> = run.keys.iter().map(|k| shared.owner_of(k)).collect();
    if let Some(links) = txn {
        // Inside EXEC: the workers it holds (the declared keys' among them).
        let allowed = (0..shared.workers)
            .map(|w| {
                links[w].is_some()
                    || owners.contains(&w)
                    || (w == worker.index && worker.is_locked())
            })
            .collect();
        return run_here(&run, links.clone(), allowed).replay(out);
    }
    if owners.len() > 1 {
        let held = Held::take(worker, &owners).await;
        let allowed = (0..shared.workers).map(|w| owners.contains(&w)).collect();
        let replies = run_here(&run, held.links.clone(), allowed);
        held.release(worker);
        return replies.replay(out);
    }
    let owner = owners.first().copied().unwrap_or(worker.index);
    if owner == worker.index {
        worker.wait_unlocked().await;
        run_alone(&run).replay(out);
        return worker.serve_ready();
    }
    let (reply, answer) = oneshot::channel();
    let job = Job::Run {
        work: Box::new(move || run_alone(&run)),
        reply,
    };
    if shared.inboxes[owner].send(job).is_ok()
        && let Ok(replies) = answer.await
    {
        return replies.replay(out);
    }
    shutting_down().replay(out);
}

/// Runs a script on this worker alone (its keys are all here): one transaction of the
/// mutation stream.
fn run_alone(run: &Run) -> Replies {
    let worker = crate::worker::current();
    let shared = &worker.shared;
    let own = BTreeSet::from([worker.index]);
    let txn = shared.sink.begin(&own);
    let links = (0..shared.workers).map(|_| None).collect();
    let allowed = (0..shared.workers).map(|w| w == worker.index).collect();
    let replies = run_here(run, links, allowed);
    shared.sink.finish(txn, &own);
    replies
}

/// Runs a script on this thread with the workers `links` holds.
fn run_here(run: &Run, links: TxnLinks, allowed: Vec<bool>) -> Replies {
    let worker: Rc<Worker> = crate::worker::current();
    let registry = Arc::clone(&worker.shared.scripts);
    engine::with_engine(&registry, |engine| {
        let mut out = Replies::new();
        let (function, name, read_only, flags) = match &run.target {
            Target::Script(sha) => match engine.script(&registry, sha) {
                None => {
                    out.error(b"NOSCRIPT No matching script. Please use EVAL.");
                    return out;
                }
                Some(Err(e)) => {
                    out.error(format!("ERR Error compiling script (new function): {e}").as_bytes());
                    return out;
                }
                Some(Ok(f)) => (
                    f,
                    String::from_utf8_lossy(sha).into_owned(),
                    run.read_only,
                    0,
                ),
            },
            Target::Function(name) => match engine.function(&registry, name) {
                None => {
                    out.error(b"ERR Function not found");
                    return out;
                }
                Some((f, flags)) => {
                    if run.read_only && flags & api::flag::NO_WRITES == 0 {
                        out.error(
                            b"ERR Can not execute a script with write flag using *_ro command.",
                        );
                        return out;
                    }
                    let read_only = run.read_only || flags & api::flag::NO_WRITES != 0;
                    (
                        f,
                        String::from_utf8_lossy(name).into_owned(),
                        read_only,
                        flags,
                    )
                }
            },
        };
        // Scripts without `allow-oom` are refused while memory is full (Redis checks scripts
        // that may write before they run).
        let _ = flags;
        let is_function = matches!(run.target, Target::Function(_));
        registry.start(Busy {
            name: name.clone(),
            command: run.command.clone(),
            started: Instant::now(),
            function: is_function,
        });
        call::enter(call::CallCtx {
            worker: Rc::clone(&worker),
            links,
            allowed,
            db: run.db,
            resp3: false,
            read_only,
            wrote: false,
            started: Instant::now(),
            client: run.client,
        });
        let outcome = if is_function {
            engine.run_function(&function, &run.lua_keys, &run.argv, run.proto)
        } else {
            engine.run_script(&function, &run.lua_keys, &run.argv, run.proto)
        };
        call::leave();
        registry.stop();
        engine.report(&registry);
        match outcome {
            engine::Outcome::Value(replies) => replies,
            engine::Outcome::Error(text, line) => {
                let source = if is_function {
                    "@user_function"
                } else {
                    "@user_script"
                };
                // No user frame on the stack: the error came from a tail call
                // (`return redis.call(...)`), which Lua 5.1 runs without its caller's frame.
                // A one-line script's line is still known.
                let one_line = match &run.target {
                    Target::Script(sha) => registry.body(sha).is_some_and(|b| !b.contains(&b'\n')),
                    Target::Function(_) => false,
                };
                let line = match line {
                    Some(l) => l.to_string(),
                    None if one_line => "1".to_owned(),
                    None => "?".to_owned(),
                };
                let text = text.replace(['\r', '\n'], " ");
                out.error(format!("{text} script: {name}, on {source}:{line}.").as_bytes());
                out
            }
        }
    })
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`.
fn script_command<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R) {
    let registry = &worker.shared.scripts;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"load" => {
            let sha = registry.add(&args[2]);
            // Compiled here so a syntax error is reported now, as Redis does.
            let compiled = engine::with_engine(registry, |engine| {
                engine.compile(&args[2], "@user_script").map(|_| ())
            });
            match compiled {
                Ok(()) => {
                    engine::with_engine(registry, |engine| engine.report(registry));
                    out.bulk(&sha);
                }
                Err(e) => {
                    out.error(format!("ERR Error compiling script (new function): {e}").as_bytes())
                }
            }
        }
        b"exists" => {
            out.array_len(args.len() - 2);
            for sha in &args[2..] {
                out.integer(i64::from(registry.exists(sha)));
            }
        }
        b"flush" => match args.get(2).map(|a| a.to_ascii_lowercase()) {
            None => {
                registry.flush_scripts();
                out.ok();
            }
            Some(mode) if mode == b"async" || mode == b"sync" => {
                registry.flush_scripts();
                out.ok();
            }
            Some(_) => out.error(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option"),
        },
        b"kill" => registry.kill(false, out),
        // Redis's Lua debugger (LDB) is not built: debugging off is accepted.
        b"debug" => match args[2].to_ascii_lowercase().as_slice() {
            b"no" => out.ok(),
            b"yes" | b"sync" => out.error(b"ERR fast-cache has no Lua debugger (SCRIPT DEBUG YES|SYNC); scripts run without one"),
            _ => out.error(b"ERR Use SCRIPT DEBUG YES/SYNC/NO"),
        },
        _ => help(
            out,
            "SCRIPT",
            &[
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
            ],
        ),
    }
}

/// A container's `HELP` reply, as Redis words it.
fn help<R: Reply>(out: &mut R, container: &str, lines: &[&str]) {
    out.array_len(lines.len() + 3);
    out.simple(
        format!("{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").as_bytes(),
    );
    for line in lines {
        out.simple(line.as_bytes());
    }
    out.simple(b"HELP");
    out.simple(b"    Print this help.");
}

/// Parses a library's `#!lua name=<name>` header: its name.
fn library_name(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".to_owned());
    }
    let line_end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let header = String::from_utf8_lossy(&code[2..line_end]).into_owned();
    let mut parts = header.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for part in parts {
        match part.split_once('=') {
            Some(("name", value)) => name = Some(value.to_owned()),
            _ => return Err(format!("ERR Invalid metadata value given: {part}")),
        }
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".to_owned());
    };
    if !api::valid_name(name.as_bytes()) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".to_owned());
    }
    Ok(name)
}

/// Loads a library's code (on this thread's interpreter): its name and functions.
fn load_library(registry: &Arc<Registry>, code: &[u8]) -> Result<(String, Library), String> {
    let name = library_name(code)?;
    let code = String::from_utf8(code.to_vec())
        .map_err(|_| "ERR Error compiling function: code is not valid UTF-8".to_owned())?;
    let registered = engine::with_engine(registry, |engine| engine.load_library(&code))?;
    if registered.is_empty() {
        return Err("ERR No functions registered".to_owned());
    }
    let functions = registered
        .into_iter()
        .map(|r| {
            (
                String::from_utf8_lossy(&r.name).into_owned(),
                r.description,
                r.flags,
            )
        })
        .collect();
    Ok((name, Library { code, functions }))
}

/// How `FUNCTION RESTORE` treats existing libraries.
#[derive(Clone, Copy, PartialEq)]
enum RestorePolicy {
    Append,
    Replace,
    Flush,
}

impl Registry {
    /// Adds libraries (each `(name, library)`), all or none: a function name may be in one
    /// library only. `replace`: a library of the same name is replaced.
    fn install(&self, new: Vec<(String, Library)>, replace: bool) -> Result<(), String> {
        let mut libs = self
            .libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = libs.clone();
        for (name, library) in new {
            if next.contains_key(&name) && !replace {
                return Err(format!("ERR Library '{name}' already exists"));
            }
            next.remove(&name);
            for (function, ..) in &library.functions {
                if next
                    .values()
                    .any(|l| l.functions.iter().any(|(f, ..)| f == function))
                {
                    return Err(format!("ERR Function {function} already exists"));
                }
            }
            next.insert(name, library);
        }
        *libs = next;
        self.fn_generation.fetch_add(1, Ordering::AcqRel);
        drop(libs);
        self.persist()
            .map_err(|e| format!("ERR could not save the function libraries: {e}"))
    }

    fn delete(&self, name: &str) -> bool {
        let mut libs = self
            .libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let found = libs.remove(name).is_some();
        if found {
            self.fn_generation.fetch_add(1, Ordering::AcqRel);
            drop(libs);
            if let Err(e) = self.persist() {
                tracing::error!("could not save the function libraries: {e}");
            }
        }
        found
    }

    fn flush_functions(&self) {
        self.libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.fn_generation.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.persist() {
            tracing::error!("could not save the function libraries: {e}");
        }
    }

    /// Restores libraries from their codes at startup (a snapshot's); returns how many.
    pub(crate) fn restore_codes(self: &Arc<Self>, codes: &[String]) -> Result<usize, String> {
        let mut new = Vec::new();
        for code in codes {
            new.push(load_library(self, code.as_bytes())?);
        }
        let n = new.len();
        self.install(new, true)?;
        Ok(n)
    }
}

/// `FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|STATS|KILL|HELP`.
async fn function_command<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R) {
    let registry = &worker.shared.scripts;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"load" => {
            let (replace, code) = match args.len() {
                3 => (false, &args[2]),
                4 if args[2].eq_ignore_ascii_case(b"replace") => (true, &args[3]),
                _ => {
                    return out.error(
                        b"ERR Unknown option given: "
                            .iter()
                            .chain(args[2].iter())
                            .copied()
                            .collect::<Vec<u8>>()
                            .as_slice(),
                    );
                }
            };
            // An existing library is refused before its code runs.
            if !replace
                && let Ok(name) = library_name(code)
                && registry
                    .libraries
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains_key(&name)
            {
                return out.error(format!("ERR Library '{name}' already exists").as_bytes());
            }
            let loaded = load_library(registry, code);
            match loaded.and_then(|(name, library)| {
                registry
                    .install(vec![(name.clone(), library)], replace)
                    .map(|()| name)
            }) {
                Ok(name) => out.bulk(name.as_bytes()),
                Err(e) => out.error(e.as_bytes()),
            }
        }
        b"delete" => {
            let name = String::from_utf8_lossy(&args[2]);
            if registry.delete(&name) {
                out.ok();
            } else {
                out.error(b"ERR Library not found");
            }
        }
        b"flush" => match args.get(2).map(|a| a.to_ascii_lowercase()) {
            None => {
                registry.flush_functions();
                out.ok();
            }
            Some(mode) if mode == b"async" || mode == b"sync" => {
                registry.flush_functions();
                out.ok();
            }
            Some(_) => out.error(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        },
        b"list" => function_list(registry, args, out),
        b"dump" => {
            let codes = registry.library_codes();
            out.bulk(&fc_snapshot::rdb::dump_functions(
                codes.iter().map(String::as_bytes),
            ));
        }
        b"restore" => {
            let policy = match args.get(3).map(|a| a.to_ascii_lowercase()) {
                None => RestorePolicy::Append,
                Some(p) if p == b"append" => RestorePolicy::Append,
                Some(p) if p == b"replace" => RestorePolicy::Replace,
                Some(p) if p == b"flush" => RestorePolicy::Flush,
                Some(_) => return out.error(b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."),
            };
            let limits = fc_snapshot::rdb::Limits::new(1 << 20, 512 << 20);
            let codes = match fc_snapshot::rdb::restore_functions(&args[2], limits) {
                Ok(codes) => codes,
                Err(fc_snapshot::rdb::RdbError::BadVersionOrChecksum) => {
                    return out.error(b"ERR DUMP payload version or checksum are wrong");
                }
                Err(_) => return out.error(b"ERR given type is not a function"),
            };
            let mut new = Vec::new();
            for code in &codes {
                match load_library(registry, code) {
                    Ok(lib) => new.push(lib),
                    Err(e) => return out.error(e.as_bytes()),
                }
            }
            if policy == RestorePolicy::Flush {
                let old = registry.library_codes();
                registry.flush_functions();
                if let Err(e) = registry.install(new, false) {
                    // Put back what was there.
                    let _ = registry.restore_codes(&old);
                    return out.error(e.as_bytes());
                }
                return out.ok();
            }
            match registry.install(new, policy == RestorePolicy::Replace) {
                Ok(()) => out.ok(),
                Err(e) => out.error(e.as_bytes()),
            }
        }
        b"stats" => {
            let running = registry
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            out.map_len(2);
            out.bulk(b"running_script");
            match running {
                None => out.null(),
                Some(busy) => {
                    out.map_len(3);
                    out.bulk(b"name");
                    out.bulk(busy.name.as_bytes());
                    out.bulk(b"command");
                    out.array_len(busy.command.len());
                    for arg in &busy.command {
                        out.bulk(arg);
                    }
                    out.bulk(b"duration_ms");
                    out.integer(busy.started.elapsed().as_millis() as i64);
                }
            }
            let (libraries, functions, _) = registry.function_stats();
            out.bulk(b"engines");
            out.map_len(1);
            out.bulk(b"LUA");
            out.map_len(2);
            out.bulk(b"libraries_count");
            out.integer(libraries as i64);
            out.bulk(b"functions_count");
            out.integer(functions as i64);
        }
        b"kill" => registry.kill(true, out),
        _ => help(
            out,
            "FUNCTION",
            &[
                "LOAD [REPLACE] <FUNCTION CODE>",
                "    Create a new library with the given library name and code.",
                "DELETE <LIBRARY NAME>",
                "    Delete the given library.",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "    Return general information on all the libraries:",
                "    * Library name",
                "    * The engine used to run the Library",
                "    * Library description",
                "    * Functions list",
                "    * Library code (if WITHCODE is given)",
                "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
                "STATS",
                "    Return information about the current function running:",
                "    * Function name",
                "    * Command used to run the function",
                "    * Duration in MS that the function is running",
                "    If no function is running, return nil",
                "    In addition, returns a list of available engines.",
                "KILL",
                "    Kill the current running function.",
                "FLUSH [ASYNC|SYNC]",
                "    Delete all the libraries.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the libraries.",
                "    * SYNC: Synchronously flush the libraries.",
                "DUMP",
                "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
                "    control how to handle existing libraries (default APPEND):",
                "    * FLUSH: delete all existing libraries.",
                "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
                "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
                "      libraries with the new libraries (notice that even on this option there is a chance of failure",
                "      in case of functions name collision with another library).",
            ],
        ),
    }
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
fn function_list<R: Reply>(registry: &Registry, args: &[Bytes], out: &mut R) {
    let mut pattern = None;
    let mut with_code = false;
    let mut i = 2;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
            i += 1;
        } else if args[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            let Some(p) = args.get(i + 1) else {
                return out.error(b"ERR library name argument was not given");
            };
            pattern = Some(fc_shard::GlobPattern::new(p, false));
            i += 2;
        } else {
            return out.error(
                format!("ERR Unknown argument {}", String::from_utf8_lossy(&args[i])).as_bytes(),
            );
        }
    }
    let libs = registry
        .libraries
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    let chosen: Vec<(&String, &Library)> = libs
        .iter()
        .filter(|(name, _)| pattern.as_ref().is_none_or(|p| p.matches(name.as_bytes())))
        .collect();
    out.array_len(chosen.len());
    for (name, library) in chosen {
        out.map_len(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array_len(library.functions.len());
        for (function, description, flags) in &library.functions {
            out.map_len(3);
            out.bulk(b"name");
            out.bulk(function.as_bytes());
            out.bulk(b"description");
            match description {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> = api::flag::NAMES
                .iter()
                .filter(|(bit, _)| flags & bit != 0)
                .map(|(_, n)| *n)
                .collect();
            out.set_len(names.len());
            for n in names {
                out.simple(n.as_bytes());
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(library.code.as_bytes());
        }
    }
}
