//! One Lua 5.1 interpreter per worker thread (`mlua`, vendored: the interpreter Redis embeds),
//! its sandbox (`sandbox.lua`: Redis 7's read-only globals and libraries), the compiled
//! scripts and functions it caches, and the conversions between Lua values and replies in both
//! directions, with Redis's rules for RESP2 and RESP3.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use fc_resp::RespVersion;
use std::sync::Arc;

use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value};

use super::call;
use crate::reply::Reply;
use crate::scripts::{Busy, Registry};

/// Instructions between two looks at the clock and the kill switch.
const HOOK_EVERY: u32 = 100_000;

/// How deep a returned table is converted; deeper levels are answered as an error, as Redis
/// answers past its Lua stack's limit (about 8000 levels there; here each level holds one of
/// the interpreter's references, which are limited, and a frame of the worker's stack).
const MAX_DEPTH: usize = 1000;

/// A compiled `EVAL` body and its shebang's flags (none: no shebang).
pub(crate) type Compiled = (Function, Option<u32>);

/// A worker thread's interpreter.
pub(crate) struct Engine {
    pub(crate) lua: Lua,
    /// Runs scripts and library functions.
    #[cfg(feature = "unsafe")]
    runner: super::raw::Runner,
    #[cfg(not(feature = "unsafe"))]
    runner: Runner,
    run_library: Function,
    env: Table,
    /// Compiled `EVAL` bodies by SHA1 (lowercase hex), as of `generation`.
    scripts: HashMap<[u8; 40], Rc<Compiled>, foldhash::fast::FixedState>,
    generation: u64,
    /// Library functions by name with their flags, as of `fn_generation`.
    functions: HashMap<Vec<u8>, Rc<(Function, u32)>, foldhash::fast::FixedState>,
    fn_generation: u64,
    /// The interpreter's memory as last added to the registry's total.
    reported: u64,
}

thread_local! {
    /// The line of user code an error was raised on (set by [`error_handler`]).
    static ERROR_LINE: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's interpreter (created on first use).
pub(crate) fn with_engine<T>(registry: &Arc<Registry>, f: impl FnOnce(&mut Engine) -> T) -> T {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let engine = slot.get_or_insert_with(|| Engine::new(registry).expect("a Lua interpreter"));
        f(engine)
    })
}

/// The message handler of a script's `xpcall`: notes the line of the innermost user code
/// on the stack (`@user_script`, `@user_function`) and passes the error on.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let mut line = None;
    for level in 1..64 {
        let Some(found) = lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let user = matches!(
                source.source.as_deref(),
                Some("@user_script" | "@user_function")
            );
            (user, debug.current_line())
        }) else {
            break;
        };
        if let (true, Some(l)) = found {
            line = Some(l as i64);
            break;
        }
    }
    ERROR_LINE.set(line);
    Ok(err)
}

/// The call's result with the line of its error.
fn with_line(result: mlua::Result<(bool, Value)>) -> mlua::Result<(bool, Value, Option<i64>)> {
    let line = ERROR_LINE.take();
    result.map(|(ok, value)| (ok, value, line))
}

/// A raised error: its text without the `script: ...` suffix, and the line it came from.
pub(crate) type Raised = (String, Option<i64>);

impl Engine {
    fn new(registry: &Arc<Registry>) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let libs = lua.create_table()?;
        libs.set("redis", super::api::redis_table(&lua)?)?;
        super::libs::install(&lua)?;
        for name in ["cjson", "cmsgpack", "bit", "struct"] {
            let lib: Value = lua.globals().get(name)?;
            libs.set(name, lib)?;
        }
        // With the `unsafe` feature `redis.call` and `redis.pcall` are C functions (values
        // cross on the Lua stack, no Lua frame between the script and the command, as in
        // Redis); else `sandbox.lua` wraps `redis.call`'s Rust half, an mlua callback.
        #[cfg(feature = "unsafe")]
        let (rcall, direct) = {
            let (call, pcall) = super::raw::call_functions(&lua)?;
            let direct = lua.create_table()?;
            direct.raw_set("call", call)?;
            direct.raw_set("pcall", pcall)?;
            (Value::Nil, Value::Table(direct))
        };
        #[cfg(not(feature = "unsafe"))]
        let (rcall, direct) = (
            Value::Function(lua.create_function(call::call)?),
            Value::Nil,
        );
        let handler = lua.create_function(error_handler)?;
        let (env, run_script, run_function, run_library, base): (
            Table,
            Function,
            Function,
            Function,
            Table,
        ) = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=sandbox")
            .call((libs, rcall, handler.clone(), direct))?;
        #[cfg(feature = "unsafe")]
        let runner = {
            let _ = (run_script, run_function);
            super::raw::Runner::new(&lua, handler, base, env.clone())?
        };
        #[cfg(not(feature = "unsafe"))]
        let runner = {
            let _ = (handler, base);
            Runner {
                run_script,
                run_function,
            }
        };
        let limits = Arc::clone(registry);
        // Global: coroutines a script creates inherit it (a per-thread hook would skip them).
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| match call::running() {
                None => Ok(mlua::VmState::Continue),
                Some((elapsed, wrote, first)) => {
                    let state = limits.check(
                        elapsed,
                        wrote,
                        first.map(|(run, worker)| Busy {
                            name: run.name(),
                            command: run.args.clone(),
                            started: {
                                let now = std::time::Instant::now();
                                now.checked_sub(std::time::Duration::from_millis(elapsed as u64))
                                    .unwrap_or(now)
                            },
                            function: matches!(run.target, super::Target::Function(_)),
                            worker,
                        }),
                    )?;
                    // This worker's own clients cannot run while it runs Lua: answered here.
                    if limits.is_busy() {
                        crate::parked::answer_busy();
                    }
                    Ok(state)
                }
            },
        )?;
        Ok(Self {
            lua,
            runner,
            run_library,
            env,
            scripts: HashMap::default(),
            generation: 0,
            functions: HashMap::default(),
            fn_generation: u64::MAX,
            reported: 0,
        })
    }

    /// Adds what the interpreter's memory moved since the last report to the registry's total.
    pub(crate) fn report(&mut self, registry: &Registry) {
        let now = self.lua.used_memory() as u64;
        registry.vm_moved(self.reported, now);
        self.reported = now;
    }

    /// The compiled script of `sha` with its shebang's flags (compiled from the registry's body
    /// on first use here; shared, not cloned: a function's clone is a reference of the
    /// interpreter's); `None` when the registry has no such script.
    pub(crate) fn script(
        &mut self,
        registry: &Registry,
        sha: &[u8; 40],
    ) -> Option<Result<Rc<Compiled>, String>> {
        let generation = registry.generation();
        if generation != self.generation {
            self.scripts.clear();
            self.generation = generation;
        }
        if let Some(f) = self.scripts.get(sha) {
            return Some(Ok(Rc::clone(f)));
        }
        let body = registry.body(sha)?;
        Some(self.compile_script(&body).map(|f| {
            let f = Rc::new(f);
            self.scripts.insert(*sha, Rc::clone(&f));
            f
        }))
    }

    /// Compiles an `EVAL` body: its function, and its flags when it starts with a
    /// `#!lua [flags=...]` line (Redis 7's shebang; the line becomes a comment).
    pub(crate) fn compile_script(&self, body: &[u8]) -> Result<(Function, Option<u32>), String> {
        let Some(header) = body.strip_prefix(b"#!") else {
            return self
                .compile(body, "@user_script")
                .map(|f| (f, None))
                .map_err(|e| format!("ERR Error compiling script (new function): {e}"));
        };
        let end = header
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(header.len());
        let line = String::from_utf8_lossy(&header[..end]).into_owned();
        let mut parts = line.split(' ').filter(|p| !p.is_empty());
        if parts.next() != Some("lua") {
            return Err(format!("ERR Unexpected engine in script shebang: #!{line}"));
        }
        let mut flags = 0;
        for part in parts {
            let Some(list) = part.strip_prefix("flags=") else {
                return Err(format!("ERR Unknown lua shebang option: {part}"));
            };
            for flag in list.split(',').filter(|f| !f.is_empty()) {
                match super::api::flag::NAMES.iter().find(|(_, n)| *n == flag) {
                    Some((bit, _)) => flags |= bit,
                    None => return Err(format!("ERR Unexpected flag in script shebang: {flag}")),
                }
            }
        }
        let mut code = b"--".to_vec();
        code.extend_from_slice(body);
        self.compile(&code, "@user_script")
            .map(|f| (f, Some(flags)))
            .map_err(|e| format!("ERR Error compiling script (new function): {e}"))
    }

    /// Compiles `body` in the sandbox (a compile error as Redis words it).
    pub(crate) fn compile(&self, body: &[u8], name: &str) -> Result<Function, String> {
        let load = |code: &[u8]| {
            self.lua
                .load(code)
                .set_name(name)
                // Source only: Lua 5.1 does not verify bytecode.
                .set_mode(mlua::ChunkMode::Text)
                .set_environment(self.env.clone())
                .into_function()
        };
        // A precompiled chunk is refused as Redis's Lua refuses it (as text that does not
        // parse).
        if body.first() == Some(&0x1b) {
            let chunk = name.trim_start_matches('@');
            return Err(format!("{chunk}:1: unexpected symbol near 'char(27)'"));
        }
        // `return redis.call(...)` keeps its frame (see `tailcall`); the source as written
        // when the rewritten one does not compile.
        if let Some(code) = super::tailcall::keep_callers(body)
            && let Ok(f) = load(&code)
        {
            return Ok(f);
        }
        load(body).map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => message,
            other => other.to_string(),
        })
    }

    /// The library function `name` with its flags, loading the registry's libraries into
    /// this interpreter when they changed.
    pub(crate) fn function(
        &mut self,
        registry: &Registry,
        name: &[u8],
    ) -> Option<Rc<(Function, u32)>> {
        let generation = registry.fn_generation();
        if generation != self.fn_generation {
            self.functions.clear();
            for code in registry.library_codes() {
                // Loaded once already by `FUNCTION LOAD`, which checked it.
                if let Ok(found) = self.load_library(&code) {
                    for r in found {
                        self.functions
                            .insert(r.name, Rc::new((r.callback, r.flags)));
                    }
                }
            }
            self.fn_generation = generation;
        }
        self.functions.get(name).map(Rc::clone)
    }

    /// Runs a library's code, collecting what it registers: `(name, function, flags)`.
    pub(crate) fn load_library(&self, code: &str) -> Result<Vec<super::api::Registered>, String> {
        // The `#!lua name=...` line becomes a comment: line numbers stay the code's.
        let f = self
            .compile(format!("--{code}").as_bytes(), "@user_function")
            .map_err(|e| format!("ERR Error compiling function: {e}"))?;
        super::api::begin_registration();
        let result = with_line(self.run_library.call(f));
        let registered = super::api::end_registration();
        match result {
            Ok((true, _, _)) => registered,
            Ok((false, err, _)) => Err(format!(
                "ERR Error registering functions: {}",
                raised_text(&err)
            )),
            Err(e) => Err(format!("ERR Error registering functions: ERR {e}")),
        }
    }

    /// Runs an `EVAL` script (`function`: a library function, called with `keys` and `argv`
    /// as arguments instead of `KEYS` and `ARGV`), writing its value into `out`.
    pub(crate) fn run<R: Reply>(
        &self,
        f: &Function,
        function: bool,
        keys: &[Bytes],
        argv: &[Bytes],
        out: &mut R,
    ) -> Result<(), Raised> {
        let result = with_line(self.runner.run(&self.lua, f, function, keys, argv));
        // The unsafe feature's runner converts a scalar result itself.
        #[cfg(feature = "unsafe")]
        if matches!(result, Ok((true, _, _))) && super::raw::replay_result(out) {
            return Ok(());
        }
        outcome(result, out)
    }
}

/// Runs scripts through `sandbox.lua`'s runners (mlua's safe API; the `unsafe` feature has
/// its own, `raw::Runner`).
#[cfg(not(feature = "unsafe"))]
struct Runner {
    run_script: Function,
    run_function: Function,
}

#[cfg(not(feature = "unsafe"))]
impl Runner {
    /// `f` with `KEYS` and `ARGV` set (`function`: called with the keys and the arguments):
    /// `(true, value)`, or `(false, error)` for what it raised.
    fn run(
        &self,
        lua: &Lua,
        f: &Function,
        function: bool,
        keys: &[Bytes],
        argv: &[Bytes],
    ) -> mlua::Result<(bool, Value)> {
        let runner = if function {
            &self.run_function
        } else {
            &self.run_script
        };
        // The keys then the arguments, each pushed as Lua strings (UTF-8 text without a
        // copy).
        let args = keys
            .iter()
            .chain(argv)
            .map(|item| match std::str::from_utf8(item) {
                Ok(text) => Ok(mlua::Either::Left(text)),
                Err(_) => lua.create_string(item).map(mlua::Either::Right),
            })
            .collect::<mlua::Result<mlua::Variadic<mlua::Either<&str, mlua::String>>>>()?;
        runner.call((f, keys.len(), args))
    }
}

/// Writes a script's value into `out`, or returns what it raised.
fn outcome<R: Reply>(
    result: mlua::Result<(bool, Value, Option<i64>)>,
    out: &mut R,
) -> Result<(), Raised> {
    match result {
        Ok((true, value, _)) => {
            // Booleans follow the script's protocol (`redis.setresp`), not the client's
            // (the sink writes them in the client's: `#t`, or `:1` to a RESP2 client).
            let proto = if call::resp3() {
                RespVersion::Resp3
            } else {
                RespVersion::Resp2
            };
            to_reply(&value, proto, out, 0);
            Ok(())
        }
        Ok((false, err, line)) => Err((raised_text(&err), line)),
        Err(e) => Err((format!("ERR {e}"), None)),
    }
}

/// The text of a raised error as Redis prefixes it: an `{err = ...}` table's text as is, a
/// string (a runtime error, `error("...")`) after `ERR `.
fn raised_text(err: &Value) -> String {
    match err {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => s.to_string_lossy(),
            _ => "ERR unknown error".to_owned(),
        },
        Value::String(s) => format!("ERR {}", s.to_string_lossy()),
        Value::Nil => "ERR nil".to_owned(),
        Value::Error(e) => {
            let text = root_message(e);
            if text.starts_with("ERR ") || text.starts_with("BUSY") {
                text
            } else {
                format!("ERR {text}")
            }
        }
        Value::Number(n) => format!("ERR {}", super::api::number_text(*n)),
        Value::Integer(n) => format!("ERR {n}"),
        other => format!("ERR {}", other.type_name()),
    }
}

/// The innermost message of an error raised from Rust (a hook's kill, a callback's failure).
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Writes a script's value as Redis converts a Lua value into a reply for a client of
/// protocol `proto`.
pub(crate) fn to_reply<R: Reply>(value: &Value, proto: RespVersion, out: &mut R, depth: usize) {
    if depth > MAX_DEPTH {
        return out.error(b"ERR reached lua stack limit");
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Integer(n) => out.integer(*n),
        Value::Number(n) => out.integer(truncate(*n)),
        Value::Boolean(true) => match proto {
            RespVersion::Resp2 => out.integer(1),
            RespVersion::Resp3 => out.boolean(true),
        },
        Value::Boolean(false) => match proto {
            RespVersion::Resp2 => out.null(),
            RespVersion::Resp3 => out.boolean(false),
        },
        Value::Table(t) => table_reply(t, proto, out, depth),
        _ => out.null(),
    }
}

/// Whether `n` converts to `i64` toward zero without overflow: [-2^63, 2^63) (2^63 is the
/// first double past `i64::MAX`; NaN is outside).
pub(crate) fn in_i64_range(n: f64) -> bool {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (-LIMIT..LIMIT).contains(&n)
}

/// A Lua number as Redis casts it to an integer (C's conversion: toward zero; out of range,
/// the x86 "integer indefinite" value).
pub(crate) fn truncate(n: f64) -> i64 {
    if !in_i64_range(n) { i64::MIN } else { n as i64 }
}

fn table_reply<R: Reply>(t: &Table, proto: RespVersion, out: &mut R, depth: usize) {
    if let Ok(Value::String(s)) = t.raw_get::<Value>("err") {
        let text = s.as_bytes();
        return out.error(&one_line(&text));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        let text = s.as_bytes();
        return out.simple(&one_line(&text));
    }
    if let Ok(Value::Number(n)) = t.raw_get::<Value>("double") {
        return out.double(n);
    }
    if let Ok(Value::Integer(n)) = t.raw_get::<Value>("double") {
        return out.double(n as f64);
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return out.big_number(&s.as_bytes());
    }
    // Maps and sets: counted, then converted entry by entry (holding every entry at once
    // would hold as many of the interpreter's references, which are limited).
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        out.map_len(map.pairs::<Value, Value>().count());
        for (k, v) in map.pairs::<Value, Value>().filter_map(Result::ok) {
            to_reply(&k, proto, out, depth + 1);
            to_reply(&v, proto, out, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        out.set_len(set.pairs::<Value, Value>().count());
        for (m, _) in set.pairs::<Value, Value>().filter_map(Result::ok) {
            to_reply(&m, proto, out, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
        && let (Ok(Value::String(format)), Ok(Value::String(text))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        && let Ok(format) = <[u8; 3]>::try_from(&format.as_bytes()[..])
    {
        return out.verbatim(format, &text.as_bytes());
    }
    // An array, up to its first nil.
    let mut n = 0;
    while !matches!(t.raw_get::<Value>(n + 1), Ok(Value::Nil) | Err(_)) {
        n += 1;
    }
    out.array_len(n);
    for i in 1..=n {
        let v = t.raw_get::<Value>(i).unwrap_or(Value::Nil);
        to_reply(&v, proto, out, depth + 1);
    }
}

/// An error or status text on one line (Redis replaces line breaks with spaces).
fn one_line(text: &[u8]) -> Vec<u8> {
    text.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}
