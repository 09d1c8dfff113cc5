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
mod convert;
mod engine;
mod libs;
#[cfg(feature = "unsafe")]
mod raw;
mod tailcall;

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::command::Sc;
use crate::cross::{Held, TxnLinks};
use crate::reply::{Replies, Reply};
use crate::scripts::{Library, Registry};
use crate::shared::Job;
use crate::worker::{Worker, shutting_down};

pub(crate) use crate::scripts::sha1_hex;

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
    /// The command: `EVAL body numkeys key... arg...` (what `FUNCTION STATS` shows); its keys
    /// as stored (namespaced for the database).
    args: Vec<Bytes>,
    nkeys: usize,
    /// The declared keys as the client named them (`KEYS`), when the database is not 0.
    plain_keys: Option<Vec<Bytes>>,
    read_only: bool,
    db: u32,
    client: u64,
    /// The calling client's ACL user, when it is not allowed everything: each command the
    /// script runs is checked against it.
    user: Option<std::sync::Arc<crate::acl::User>>,
    /// The routes of the first [`ROUTES`] declared keys (as stored), computed once where the
    /// script's workers are decided: its commands on those keys reuse them.
    routes: [Option<fc_shard::EmbeddedKeyRoute>; ROUTES],
}

/// Declared keys whose routes a run keeps (scripts name one to a few keys).
const ROUTES: usize = 4;

impl Run {
    /// The declared keys as stored.
    fn keys(&self) -> &[Bytes] {
        &self.args[3..3 + self.nkeys]
    }

    /// The declared keys as the script sees them (`KEYS`).
    fn lua_keys(&self) -> &[Bytes] {
        self.plain_keys.as_deref().unwrap_or_else(|| self.keys())
    }

    /// The route of `key` (as stored) when it is one of the first declared keys.
    pub(crate) fn route_of(&self, key: &[u8]) -> Option<fc_shard::EmbeddedKeyRoute> {
        self.keys()
            .iter()
            .zip(&self.routes)
            .find(|(k, _)| k[..] == *key)
            .and_then(|(_, route)| *route)
    }

    /// The arguments after the keys (`ARGV`).
    fn argv(&self) -> &[Bytes] {
        &self.args[3 + self.nkeys..]
    }

    /// `EVAL`'s SHA1 or the function's name.
    fn name(&self) -> String {
        match &self.target {
            Target::Script(sha) => String::from_utf8_lossy(sha).into_owned(),
            Target::Function(name) => String::from_utf8_lossy(name).into_owned(),
        }
    }
}

/// Who runs a script: the client's database, id, and ACL user when it is not allowed
/// everything.
pub(crate) struct Caller {
    pub(crate) db: u32,
    pub(crate) client: u64,
    pub(crate) user: Option<std::sync::Arc<crate::acl::User>>,
}

/// Runs `EVAL` and the other scripting commands for a connection.
pub(crate) async fn run<R: Reply>(
    worker: &Worker,
    cmd: Sc,
    args: Vec<Bytes>,
    caller: Caller,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let Caller { db, client, user } = caller;
    let registry = &worker.shared.scripts;
    match cmd {
        Sc::Script => return script_command(worker, &args, out),
        Sc::Function => return function_command(worker, &args, out).await,
        _ => {}
    }
    let numkeys = match crate::command::numkeys(&args) {
        Ok(n) => n,
        Err(error) => return out.error(error),
    };
    let target = match target(registry, cmd, &args) {
        Ok(target) => target,
        Err(error) => return out.error(error),
    };
    let plain_keys = (db != 0).then(|| {
        args[3..3 + numkeys]
            .iter()
            .map(|k| Bytes::copy_from_slice(fc_shard::split_namespace(k).1))
            .collect()
    });
    let run = Run {
        target,
        args,
        nkeys: numkeys,
        plain_keys,
        read_only: matches!(cmd, Sc::EvalRo | Sc::EvalShaRo | Sc::FcallRo),
        db,
        client,
        user,
        routes: [None; ROUTES],
    };
    dispatch(worker, run, out, txn).await;
}

/// What `cmd` runs: `EVAL`'s body (added to the registry) or `EVALSHA`'s SHA1 by digest, or
/// the function by name.
fn target(registry: &Registry, cmd: Sc, args: &[Bytes]) -> Result<Target, &'static [u8]> {
    Ok(match cmd {
        Sc::Eval | Sc::EvalRo => Target::Script(registry.add(&args[1])),
        // Whether the script exists is known where it runs (each interpreter caches what
        // it compiled; the registry is read only on a miss).
        Sc::EvalSha | Sc::EvalShaRo => match <[u8; 40]>::try_from(&args[1][..]) {
            Ok(mut sha) => {
                sha.make_ascii_lowercase();
                Target::Script(sha)
            }
            Err(_) => return Err(b"NOSCRIPT No matching script. Please use EVAL."),
        },
        _ => Target::Function(args[1].to_vec()),
    })
}

/// [`run`] of a script of database 0 (`caller.db`) whose declared keys are all this
/// worker's, while no transaction holds it: run now, without awaiting (the connection's
/// in-place path, `session::script_in_place`). `route` is the first declared key's route when
/// the caller has it. `false`: nothing ran and `args` is as it was (the caller takes the
/// general path, which answers a bad key count too). Otherwise `args` is given back emptied
/// for reuse when nothing kept the run.
pub(crate) fn run_in_place<R: Reply>(
    worker: &Worker,
    cmd: Sc,
    args: &mut Vec<Bytes>,
    route: Option<fc_shard::EmbeddedKeyRoute>,
    caller: Caller,
    out: &mut R,
) -> bool {
    debug_assert_eq!(caller.db, 0);
    if worker.is_locked() {
        return false;
    }
    let Ok(nkeys) = crate::command::numkeys(args) else {
        return false;
    };
    let shared = &worker.shared;
    let mut routes = [None; ROUTES];
    for (i, key) in args[3..3 + nkeys].iter().enumerate() {
        let route = match route {
            Some(route) if i == 0 => route,
            _ => shared.router.route_key(key),
        };
        if shared.router.shard_of(&route) % shared.workers != worker.index {
            return false;
        }
        if let Some(slot) = routes.get_mut(i) {
            *slot = Some(route);
        }
    }
    let target = match target(&shared.scripts, cmd, args) {
        Ok(target) => target,
        Err(error) => {
            out.error(error);
            args.clear();
            return true;
        }
    };
    let run = Rc::new(Run {
        target,
        args: std::mem::take(args),
        nkeys,
        plain_keys: None,
        read_only: matches!(cmd, Sc::EvalRo | Sc::EvalShaRo | Sc::FcallRo),
        db: 0,
        client: caller.client,
        user: caller.user,
        routes,
    });
    run_alone(&run, out);
    if let Ok(run) = Rc::try_unwrap(run) {
        *args = run.args;
        args.clear();
    }
    true
}

/// Runs a script where its declared keys live (see the module's documentation).
async fn dispatch<R: Reply>(worker: &Worker, mut run: Run, out: &mut R, txn: Option<&TxnLinks>) {
    let shared = &worker.shared;
    // The workers of the declared keys: one (or none) in the common case, without a set.
    // Each key is hashed once; the first keys' routes stay with the run.
    let mut first = None;
    let mut mixed = false;
    let nkeys = run.nkeys;
    for (i, key) in run.args[3..3 + nkeys].iter().enumerate() {
        let route = shared.router.route_key(key);
        if let Some(slot) = run.routes.get_mut(i) {
            *slot = Some(route);
        }
        let owner = shared.router.shard_of(&route) % shared.workers;
        match first {
            None => first = Some(owner),
            Some(w) => mixed |= w != owner,
        }
    }
    let several: Option<BTreeSet<usize>> =
        mixed.then(|| run.keys().iter().map(|k| shared.owner_of(k)).collect());
    if let Some(links) = txn {
        // Inside EXEC: the workers it holds (the declared keys' among them).
        let allowed = (0..shared.workers)
            .map(|w| {
                links[w].is_some()
                    || first == Some(w)
                    || several.as_ref().is_some_and(|s| s.contains(&w))
                    || (w == worker.index && worker.is_locked())
            })
            .collect();
        return run_here(
            &Rc::new(run),
            Some(links.clone()),
            call::Allowed::Set(allowed),
            out,
        );
    }
    if let Some(owners) = several {
        if !shared.config.scripts_across_workers {
            return out.error(b"CROSSSLOT Keys in request don't hash to the same slot");
        }
        let held = Held::take(worker, &owners).await;
        let allowed = (0..shared.workers).map(|w| owners.contains(&w)).collect();
        run_here(
            &Rc::new(run),
            Some(held.links.clone()),
            call::Allowed::Set(allowed),
            out,
        );
        return held.release(worker);
    }
    let owner = first.unwrap_or(worker.index);
    if owner == worker.index {
        worker.wait_unlocked().await;
        run_alone(&Rc::new(run), out);
        return worker.serve_ready();
    }
    let (reply, answer) = oneshot::channel();
    let job = Job::Run {
        work: Box::new(move || {
            // Bounded as the connection's own buffer is (the client output limit).
            let mut out = Replies::with_limit(crate::worker::current().shared.live.output_hard());
            run_alone(&Rc::new(run), &mut out);
            out
        }),
        reply,
    };
    crate::stats::hop();
    if shared.inboxes[owner].send(job).is_ok()
        && let Ok(replies) = answer.await
    {
        return replies.replay(out);
    }
    shutting_down().replay(out);
}

/// Runs a script on this worker alone (its keys are all here): one transaction of the
/// mutation stream.
fn run_alone<R: Reply>(run: &Rc<Run>, out: &mut R) {
    let worker = crate::worker::current();
    let shared = &worker.shared;
    let txn = shared.sink.begin_one(worker.index);
    run_here(run, None, call::Allowed::One(worker.index), out);
    shared.sink.finish_one(txn, worker.index);
}

/// Runs a script on this thread with the workers `links` holds.
fn run_here<R: Reply>(run: &Rc<Run>, links: Option<TxnLinks>, allowed: call::Allowed, out: &mut R) {
    let worker: Rc<Worker> = crate::worker::current();
    let registry = &worker.shared.scripts;
    engine::with_engine(registry, |engine| {
        // What runs, held here (the engine's cache shares it).
        let (script, library);
        let (function, read_only, flags) = match &run.target {
            Target::Script(sha) => match engine.script(registry, sha) {
                None => return out.error(b"NOSCRIPT No matching script. Please use EVAL."),
                Some(Err(e)) => return out.error(e.as_bytes()),
                Some(Ok(found)) => {
                    script = found;
                    let (f, flags) = &*script;
                    // A script with a shebang declares its flags (none: it may write).
                    if let Some(flags) = flags
                        && run.read_only
                        && flags & api::flag::NO_WRITES == 0
                    {
                        return out.error(
                            b"ERR Can not execute a script with write flag using *_ro command.",
                        );
                    }
                    (
                        f,
                        run.read_only || flags.is_some_and(|f| f & api::flag::NO_WRITES != 0),
                        flags.unwrap_or(0),
                    )
                }
            },
            Target::Function(name) => match engine.function(registry, name) {
                None => return out.error(b"ERR Function not found"),
                Some(found) => {
                    library = found;
                    let (f, flags) = (&library.0, library.1);
                    if run.read_only && flags & api::flag::NO_WRITES == 0 {
                        return out.error(
                            b"ERR Can not execute a script with write flag using *_ro command.",
                        );
                    }
                    let read_only = run.read_only || flags & api::flag::NO_WRITES != 0;
                    (f, read_only, flags)
                }
            },
        };
        // Scripts without `allow-oom` are refused while memory is full (Redis checks scripts
        // that may write before they run).
        let _ = flags;
        let is_function = matches!(run.target, Target::Function(_));
        call::enter(call::CallCtx {
            worker: Rc::clone(&worker),
            links,
            allowed,
            db: run.db,
            resp3: false,
            read_only,
            wrote: false,
            started: worker.ticks.now(),
            client: run.client,
            user: run.user.clone(),
            run: Rc::clone(run),
            recorded: false,
            scratch: call::scratch(),
        });
        let outcome = engine.run(function, is_function, run.lua_keys(), run.argv(), out);
        let recorded = call::leave();
        registry.stop(recorded);
        engine.report(registry);
        if let Err((text, line)) = outcome {
            {
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
                let name = run.name();
                out.error(format!("{text} script: {name}, on {source}:{line}.").as_bytes());
            }
        }
    });
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`.
fn script_command<R: Reply>(worker: &Worker, args: &[Bytes], out: &mut R) {
    let registry = &worker.shared.scripts;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"load" => {
            // Compiled here so a syntax error is reported now (and nothing kept), as Redis
            // does.
            let compiled = engine::with_engine(registry, |engine| {
                let compiled = engine.compile_script(&args[2]).map(|_| ());
                engine.report(registry);
                compiled
            });
            match compiled {
                Ok(()) => out.bulk(&registry.add(&args[2])),
                Err(e) => out.error(e.as_bytes()),
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

/// Restores libraries from their codes (at startup, from `functions.rdb`); returns how many.
pub(crate) fn restore_libraries(
    registry: &Arc<Registry>,
    codes: &[String],
) -> Result<usize, String> {
    let mut new = Vec::new();
    for code in codes {
        new.push(load_library(registry, code.as_bytes())?);
    }
    let n = new.len();
    registry.install(new, true)?;
    Ok(n)
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
                    let _ = restore_libraries(registry, &old);
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
