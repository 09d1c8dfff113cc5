//! The `unsafe` feature's `redis.call` and `redis.pcall`: C functions of the interpreter
//! (Lua's C API through `mlua::ffi`) that read their arguments off the Lua stack and push the
//! reply's value straight back, where the safe path (`call::call`, through mlua's callbacks,
//! wrapped in Lua by `sandbox.lua`) holds every argument and every value of the reply in
//! mlua's reference stack on the way and adds a Lua frame per call. The checks, the command's
//! run and the conversion rules are the safe path's (`call::command`, `convert::push`): only
//! the way values cross is different.
//!
//! Invariants (SAFETY.md):
//! - nothing here raises a Lua error (a `longjmp` past Rust frames) but `redis.call`'s own
//!   raise of a failed command's error table, the last step of [`call_raise`], whose frame
//!   then holds nothing with a destructor: the interpreter has no memory limit, so mlua's
//!   allocator never answers an allocation with null (it aborts the process as Rust's
//!   allocator does), and the pushes used here raise only on a failed allocation; tables are
//!   set with `lua_rawset`/`lua_rawseti` on tables made here (no metamethods), never with a
//!   nil or NaN key;
//! - the stack has room: a C function starts with `LUA_MINSTACK` (20) free slots, each
//!   nested table asks `lua_checkstack` for its own, and past the interpreter's limit the
//!   conversion stops and the call answers an error;
//! - a panic never unwinds into the interpreter's C frames: it is caught and answered as an
//!   error.

use std::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use mlua::ffi;

use super::call::{self, Args};
use super::convert::{self, Builder};
use crate::reply::{Replies, Reply};

/// `redis.call` and `redis.pcall` as C closures of `lua`: ([`call_raise`], [`call_protected`]),
/// each with the strings of [`OK_FIELD`], [`OK_TEXT`] and [`ERR_FIELD`] as upvalues.
#[expect(unsafe_code, reason = "the unsafe feature's redis.call (SAFETY.md)")]
pub(super) fn call_functions(lua: &mlua::Lua) -> mlua::Result<(mlua::Function, mlua::Function)> {
    let closure = |f: ffi::lua_CFunction| -> mlua::Result<mlua::Function> {
        // SAFETY: mlua pushes the three strings (checking room) and runs this under a
        // protected call; `lua_pushcclosure` pops them as the closure's upvalues and pushes
        // the closure, the one result. Both functions follow the C function protocol (read
        // their arguments, push one result, return 1); `call_protected` raises no Lua error,
        // `call_raise` raises one only from its own frame once nothing in it has a destructor
        // left to run (see it).
        unsafe {
            lua.exec_raw(("ok", "OK", "err"), |state| {
                ffi::lua_pushcclosure(state, f, 3);
            })
        }
    };
    Ok((closure(call_raise)?, closure(call_protected)?))
}

/// The upvalues of `redis.call`'s closures: the strings a status reply's table is made of
/// (`{ok = "OK"}`, the most common reply of all) and an error's field, pushed without hashing.
const OK_FIELD: c_int = 1;
const OK_TEXT: c_int = 2;
const ERR_FIELD: c_int = 3;

/// [`Builder`] pushing onto the interpreter's stack. Once the stack cannot grow, every
/// later step does nothing and the caller answers an error.
struct Stack {
    state: *mut ffi::lua_State,
    full: bool,
}

#[expect(unsafe_code, reason = "the unsafe feature's redis.call (SAFETY.md)")]
impl Builder for Stack {
    fn string(&mut self, bytes: &[u8]) {
        if !self.full {
            // SAFETY: `state` is the running C function's; the stack has a free slot (the
            // enclosing table's `lua_checkstack`, or the caller's); the bytes are valid for
            // `len`; Lua copies them.
            unsafe {
                ffi::lua_pushlstring_(self.state, bytes.as_ptr().cast::<c_char>(), bytes.len())
            };
        }
    }
    fn integer(&mut self, n: i64) {
        if !self.full {
            // SAFETY: as in `string`; pushing a number allocates nothing.
            unsafe { ffi::lua_pushinteger(self.state, n as ffi::lua_Integer) };
        }
    }
    fn number(&mut self, n: f64) {
        if !self.full {
            // SAFETY: as in `integer`.
            unsafe { ffi::lua_pushnumber(self.state, n) };
        }
    }
    fn boolean(&mut self, b: bool) {
        if !self.full {
            // SAFETY: as in `integer`.
            unsafe { ffi::lua_pushboolean(self.state, c_int::from(b)) };
        }
    }
    fn nil(&mut self) {
        if !self.full {
            // SAFETY: as in `integer`.
            unsafe { ffi::lua_pushnil(self.state) };
        }
    }
    fn table(&mut self, narr: usize, nrec: usize) {
        if self.full {
            return;
        }
        // The table, a key and a value, a nested table's own key and value.
        // SAFETY: `state` is the running C function's; `lua_checkstack` raises nothing
        // (it answers 0 past the limit).
        if unsafe { ffi::lua_checkstack(self.state, 6) } == 0 {
            self.full = true;
            return;
        }
        let narr = c_int::try_from(narr).unwrap_or(c_int::MAX);
        let nrec = c_int::try_from(nrec).unwrap_or(c_int::MAX);
        // SAFETY: room was just checked; a new table's allocation does not raise (no memory
        // limit).
        unsafe { ffi::lua_createtable(self.state, narr, nrec) };
    }
    fn set_index(&mut self, i: usize) {
        if self.full {
            return;
        }
        let i = c_int::try_from(i).unwrap_or(c_int::MAX);
        // SAFETY: the conversion pushed a table then a value (`Builder`'s protocol), so -2
        // is a table made here: no metamethod runs; growing its array does not raise.
        unsafe { ffi::lua_rawseti_(self.state, -2, i) };
    }
    fn status(&mut self, field: &str, text: &[u8]) {
        if self.full {
            return;
        }
        // SAFETY: `state` is the running C closure's (`call_functions`'); `lua_checkstack`
        // raises nothing (it answers 0 past the limit); with room for the table, its key and
        // its value, a new table's allocation and a string's push do not raise (no memory
        // limit); the upvalues are that closure's strings; the table was made here (no
        // metamethod) and its key is a string.
        unsafe {
            if ffi::lua_checkstack(self.state, 3) == 0 {
                self.full = true;
                return;
            }
            ffi::lua_createtable(self.state, 0, 1);
            match field {
                "ok" => ffi::lua_pushvalue(self.state, ffi::lua_upvalueindex(OK_FIELD)),
                "err" => ffi::lua_pushvalue(self.state, ffi::lua_upvalueindex(ERR_FIELD)),
                _ => {
                    ffi::lua_pushlstring_(self.state, field.as_ptr().cast::<c_char>(), field.len())
                }
            }
            if text == b"OK" {
                ffi::lua_pushvalue(self.state, ffi::lua_upvalueindex(OK_TEXT));
            } else {
                ffi::lua_pushlstring_(self.state, text.as_ptr().cast::<c_char>(), text.len());
            }
            ffi::lua_rawset(self.state, -3);
        }
    }
    fn set_pair(&mut self) {
        if self.full {
            return;
        }
        // SAFETY: the conversion pushed a table, a key and a value (`Builder`'s protocol).
        // A nil or NaN key would raise in `lua_rawset`: such a pair is popped instead.
        unsafe {
            let indexable = match ffi::lua_type(self.state, -2) {
                ffi::LUA_TNIL => false,
                ffi::LUA_TNUMBER => !ffi::lua_tonumber(self.state, -2).is_nan(),
                _ => true,
            };
            if indexable {
                ffi::lua_rawset(self.state, -3);
            } else {
                ffi::lua_settop(self.state, -3);
            }
        }
    }
}

/// `{err = text}`: a failed call ([`Stack`]'s status table: called by `call_into` with at
/// least three free slots — the C function's 20, or after the stack was reset to the
/// arguments — so its room check passes and the table is pushed).
fn push_error(state: *mut ffi::lua_State, text: &[u8]) {
    Stack { state, full: false }.status("err", text);
}

/// `redis.call`: the command's reply as a Lua value, or the `{err = ...}` table raised as
/// Redis's `redis.call` raises it.
#[expect(unsafe_code, reason = "the unsafe feature's redis.call (SAFETY.md)")]
unsafe extern "C-unwind" fn call_raise(state: *mut ffi::lua_State) -> c_int {
    if call_into(state) {
        return 1;
    }
    // SAFETY: the error table is on top of the stack; `lua_error` leaves this frame by
    // `longjmp`, which is sound here: `call_into` has returned (its values are dropped and its
    // panics caught), and this frame holds nothing with a destructor (mlua raises its own
    // callbacks' errors the same way).
    unsafe { ffi::lua_error(state) }
}

/// `redis.pcall`: the command's reply as a Lua value, or the `{err = ...}` table returned.
#[expect(unsafe_code, reason = "the unsafe feature's redis.call (SAFETY.md)")]
unsafe extern "C-unwind" fn call_protected(state: *mut ffi::lua_State) -> c_int {
    call_into(state);
    1
}

/// Runs the command named by the running C function's arguments and pushes the reply's
/// value (`true`) or its `{err = ...}` table (`false`). Raises no Lua error.
#[expect(unsafe_code, reason = "the unsafe feature's redis.call (SAFETY.md)")]
fn call_into(state: *mut ffi::lua_State) -> bool {
    // SAFETY: `state` is the interpreter running the C function that called this.
    let base = unsafe { ffi::lua_gettop(state) };
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let mut args = Args::new(usize::try_from(base).unwrap_or(0));
        for i in 1..=base {
            // SAFETY: `i` is one of the call's arguments; a string's bytes stay valid while
            // it is on the stack (they are copied into `args` at once); a number is read
            // without converting the slot.
            unsafe {
                match ffi::lua_type(state, i) {
                    ffi::LUA_TSTRING => {
                        let mut len = 0;
                        let at = ffi::lua_tolstring(state, i, &mut len);
                        args.bytes(std::slice::from_raw_parts(at.cast::<u8>(), len));
                    }
                    ffi::LUA_TNUMBER => args.number(ffi::lua_tonumber(state, i)),
                    _ => {
                        push_error(state, call::BAD_ARG);
                        return false;
                    }
                }
            }
        }
        call::command(args.finish(), |done| match done {
            Ok((replies, resp3)) => {
                // The C function's 20 free slots hold a scalar value; tables ask for more
                // themselves.
                let mut stack = Stack { state, full: false };
                convert::push(&mut stack, replies, resp3);
                if stack.full {
                    // SAFETY: back to the arguments alone: the slots pushed since are freed.
                    unsafe { ffi::lua_settop(state, base) };
                    push_error(state, b"ERR reached lua stack limit");
                    return false;
                }
                true
            }
            Err(text) => {
                push_error(state, text);
                false
            }
        })
    }));
    ran.unwrap_or_else(|_| {
        tracing::error!("a script's command panicked; the script gets an error");
        // SAFETY: back to the arguments alone (whatever was pushed before the panic goes).
        unsafe { ffi::lua_settop(state, base) };
        push_error(state, b"ERR internal error running the command");
        false
    })
}

/// Runs scripts and library functions with one protected call from Rust (the safe path goes
/// through `sandbox.lua`'s runner: `KEYS`/`ARGV` split from the arguments in Lua, then
/// `xpcall`): a C function ([`run_c`], registered once, called through mlua) builds `KEYS` and
/// `ARGV` on the stack, calls the script with the error handler that finds the line, and
/// forgets what the script stored into its environment with `rawset`.
pub(super) struct Runner {
    /// [`run_c`] as a closure with [`UPVALUES`] upvalues, in this order: the error handler,
    /// what scripts see as globals (where `KEYS` and `ARGV` are set), the scripts'
    /// environment (kept empty), `"KEYS"` and `"ARGV"`, and the `KEYS` and `ARGV` tables
    /// `EVAL` scripts get (emptied and refilled before each run: see [`refill`]). Upvalues
    /// are read by index: no registry lookups, no reference traffic.
    run: mlua::Function,
}

/// How many upvalues [`Runner`]'s closure holds (`uv`'s last).
const UPVALUES: c_int = uv::ARGV;

/// Entries a reused `KEYS`/`ARGV` table may have held before it is replaced by a new one
/// instead of emptied (a script that filled it keeps no large table alive).
const REUSE_MAX: c_int = 256;

/// What [`run_c`] runs with, set by [`Runner::run`] for the length of its call: the keys' and
/// the arguments' slices (pointer, length), and whether the script is a library function.
struct Input {
    keys: (*const bytes::Bytes, usize),
    argv: (*const bytes::Bytes, usize),
    function: bool,
}

thread_local! {
    static INPUT: std::cell::Cell<Option<Input>> = const { std::cell::Cell::new(None) };
    /// A script's result when it is a string, a number, a boolean or nil: converted by
    /// [`run_c`] straight off the Lua stack, replayed by [`replay_result`] (tables go back
    /// to mlua as values, for `engine::to_reply`).
    static RESULT: std::cell::RefCell<Option<Replies>> = const { std::cell::RefCell::new(None) };
}

/// The most a kept result buffer may hold for the next script.
const RESULT_KEEP: usize = 64 << 10;

/// Writes the result [`run_c`] converted into `out`; `false` when it converted none (the
/// result came back as a Lua value).
pub(super) fn replay_result<R: Reply>(out: &mut R) -> bool {
    RESULT.with_borrow_mut(|slot| {
        let Some(result) = slot.as_mut().filter(|r| !r.tokens().is_empty()) else {
            return false;
        };
        result.replay(out);
        if result.held() > RESULT_KEEP {
            *slot = None;
        } else {
            result.reset(0);
        }
        true
    })
}

/// Converts the scalar on top of the stack (a successful script's result) into [`RESULT`],
/// as `engine::to_reply` would: `false` for a value it leaves to mlua (a table, a function...).
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn convert_result(state: *mut ffi::lua_State) -> bool {
    RESULT.with_borrow_mut(|slot| {
        let out = slot.get_or_insert_with(Replies::new);
        out.reset(0);
        // SAFETY: called by `run_c` with the script's result on top of the stack; reading a
        // string's bytes (copied at once) or a number converts nothing in place.
        unsafe {
            match ffi::lua_type(state, -1) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let at = ffi::lua_tolstring(state, -1, &mut len);
                    out.bulk(std::slice::from_raw_parts(at.cast::<u8>(), len));
                }
                ffi::LUA_TNUMBER => {
                    out.integer(super::engine::truncate(ffi::lua_tonumber(state, -1)));
                }
                // Booleans follow the script's protocol (`redis.setresp`), not the client's.
                ffi::LUA_TBOOLEAN => match (ffi::lua_toboolean(state, -1) != 0, call::resp3()) {
                    (true, false) => out.integer(1),
                    (false, false) => out.null(),
                    (b, true) => out.boolean(b),
                },
                ffi::LUA_TNIL => out.null(),
                _ => return false,
            }
        }
        true
    })
}

impl Runner {
    #[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
    pub(super) fn new(
        lua: &mlua::Lua,
        handler: mlua::Function,
        base: mlua::Table,
        env: mlua::Table,
    ) -> mlua::Result<Self> {
        // The scripts' globals hold the two reused tables from now on (scripts cannot set
        // globals; `refill` sets the new one when it replaces a table).
        let (keys, argv) = (lua.create_table()?, lua.create_table()?);
        base.raw_set("KEYS", &keys)?;
        base.raw_set("ARGV", &argv)?;
        // In `uv`'s order.
        let upvalues = (handler, base, env, "KEYS", "ARGV", keys, argv);
        // SAFETY: mlua pushes the seven values (checking room) and runs this under a
        // protected call; `lua_pushcclosure` pops them as the closure's upvalues and pushes
        // the closure, the one result. `run_c` follows the C function protocol (one argument,
        // two results) and raises no Lua error (see it).
        let run = unsafe {
            lua.exec_raw(upvalues, |state| {
                ffi::lua_pushcclosure(state, run_c, UPVALUES);
            })?
        };
        Ok(Self { run })
    }

    /// `f` with `KEYS` and `ARGV` set (`function`: called with the keys and the arguments):
    /// `(true, value)`, or `(false, error)` for what it raised.
    pub(super) fn run(
        &self,
        _lua: &mlua::Lua,
        f: &mlua::Function,
        function: bool,
        keys: &[bytes::Bytes],
        argv: &[bytes::Bytes],
    ) -> mlua::Result<(bool, mlua::Value)> {
        INPUT.set(Some(Input {
            keys: (keys.as_ptr(), keys.len()),
            argv: (argv.as_ptr(), argv.len()),
            function,
        }));
        let result = self.run.call(f);
        INPUT.set(None);
        result
    }
}

/// The runner: `f` → `(ok, result)`, with the keys and the arguments of [`INPUT`] and the
/// upvalues of [`Runner`]'s closure, which it reads in place (pseudo-indexes: no copies on
/// the stack).
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
unsafe extern "C-unwind" fn run_c(state: *mut ffi::lua_State) -> c_int {
    const F: c_int = 1;
    // On the stack: the error handler, for `lua_pcall` (which takes no pseudo-index).
    const HANDLER: c_int = 2;
    // SAFETY: `state` is the interpreter calling this C function with the script at 1
    // (`Runner::run`); it leaves exactly two results. Room is checked before any push; the
    // upvalues are what `Runner::new` gave the closure; it sets
    // only tables it made (the reused `KEYS`/`ARGV` tables are, see `refill`), `base` (a
    // plain table: raw sets, no metamethods) and `env` (raw sets of nil while traversing,
    // which Lua allows); the script runs under `lua_pcall`, so
    // its errors stop there. `INPUT`'s slices are `Runner::run`'s arguments, alive for the
    // whole call it set them for. Nothing here can panic.
    unsafe {
        let input = INPUT.take();
        let Some(input) = input.filter(|_| ffi::lua_checkstack(state, 16) != 0) else {
            let text = c"the script runner has no stack room";
            ffi::lua_settop(state, 0);
            ffi::lua_pushboolean(state, 0);
            ffi::lua_pushlstring_(state, text.as_ptr(), text.count_bytes());
            return 2;
        };
        ffi::lua_settop(state, F);
        ffi::lua_pushvalue(state, up(uv::HANDLER));
        ffi::lua_pushvalue(state, F);
        let keys = std::slice::from_raw_parts(input.keys.0, input.keys.1);
        let argv = std::slice::from_raw_parts(input.argv.0, input.argv.1);
        let nargs = if input.function {
            // A library function gets new tables: a library may keep what it is given (its
            // upvalues outlive the call).
            push_array(state, keys);
            push_array(state, argv);
            // Functions have no `KEYS`/`ARGV` globals (Redis's missing-global error).
            set_global(state, uv::KEYS_NAME, None);
            set_global(state, uv::ARGV_NAME, None);
            2
        } else {
            // An `EVAL` script gets the interpreter's two tables, emptied of what the last
            // script left (only now: the last result, which may be one of them, has been
            // converted) and refilled. Nothing a script can reach outlives its run (its
            // globals are read-only and its environment is scrubbed below), so no reference
            // to them survives either.
            refill(state, uv::KEYS, uv::KEYS_NAME, keys);
            refill(state, uv::ARGV, uv::ARGV_NAME, argv);
            0
        };
        let ok = ffi::lua_pcall(state, nargs, 1, HANDLER) == 0;
        if input.function {
            set_global(state, uv::KEYS_NAME, Some(uv::KEYS));
            set_global(state, uv::ARGV_NAME, Some(uv::ARGV));
        }
        if ok && convert_result(state) {
            // Converted: the value stays here.
            ffi::lua_settop(state, -2);
            ffi::lua_pushnil(state);
        }
        // What a script stored with `rawset` into its environment goes.
        empty(state, up(uv::ENV), 0);
        // [f, handler, result] -> [ok, result]
        ffi::lua_pushboolean(state, c_int::from(ok));
        ffi::lua_replace(state, 1);
        ffi::lua_replace(state, 2);
        ffi::lua_settop(state, 2);
    }
    2
}

/// [`run_c`]'s upvalues (see [`Runner`]).
mod uv {
    use std::ffi::c_int;

    pub(super) const HANDLER: c_int = 1;
    /// The scripts' globals table.
    pub(super) const BASE: c_int = 2;
    pub(super) const ENV: c_int = 3;
    pub(super) const KEYS_NAME: c_int = 4;
    pub(super) const ARGV_NAME: c_int = 5;
    pub(super) const KEYS: c_int = 6;
    pub(super) const ARGV: c_int = 7;
}

/// The pseudo-index of the running C closure's upvalue `i`.
fn up(i: c_int) -> c_int {
    ffi::lua_upvalueindex(i)
}

/// Sets the scripts' global named by upvalue `name` to upvalue `value` (`None`: nil).
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn set_global(state: *mut ffi::lua_State, name: c_int, value: Option<c_int>) {
    // SAFETY: called by `run_c` (whose upvalues these are: a string at `name`, the plain
    // globals table at `uv::BASE`) with two free slots: a raw set with a string key raises
    // nothing (an existing field, or a new one whose allocation does not fail: no memory
    // limit).
    unsafe {
        ffi::lua_pushvalue(state, up(name));
        match value {
            Some(value) => ffi::lua_pushvalue(state, up(value)),
            None => ffi::lua_pushnil(state),
        }
        ffi::lua_rawset(state, up(uv::BASE));
    }
}

/// Sets every field of the table at `t` (an absolute index or a pseudo-index) to nil but
/// those at integer keys `1..=keep` (the caller overwrites them next); how many fields it
/// had.
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn empty(state: *mut ffi::lua_State, t: c_int, keep: c_int) -> c_int {
    let mut fields = 0;
    // SAFETY: called by `run_c` with a table at `t` and two free slots; `lua_next` from nil
    // and from each key it returned raises nothing, and setting an existing field to nil
    // while traversing is allowed; a key `lua_next` returns is never nil or NaN, so the raw
    // set raises nothing either; reading a number key converts nothing in place.
    unsafe {
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, t) != 0 {
            ffi::lua_settop(state, -2);
            fields += 1;
            if ffi::lua_type(state, -1) == ffi::LUA_TNUMBER {
                let k = ffi::lua_tonumber(state, -1);
                if k >= 1.0 && k <= f64::from(keep) && k.fract() == 0.0 {
                    continue;
                }
            }
            ffi::lua_pushvalue(state, -1);
            ffi::lua_pushnil(state);
            ffi::lua_rawset(state, t);
        }
    }
    fields
}

/// Makes the reused `KEYS`/`ARGV` table (upvalue `table`; `name`: the upvalue of its global's
/// name) hold `items` as an array of strings and nothing else: emptied of what the last
/// script left (its entries `1..=items.len()` are overwritten instead), without the metatable
/// a script may have set, or replaced (as the upvalue and as the scripts' global) by a new
/// table when the last script left it large (see [`REUSE_MAX`]).
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn refill(state: *mut ffi::lua_State, table: c_int, name: c_int, items: &[bytes::Bytes]) {
    let n = c_int::try_from(items.len()).unwrap_or(c_int::MAX);
    let t = up(table);
    let fields = empty(state, t, n);
    // SAFETY: called by `run_c` (a C closure with `UPVALUES` upvalues, `table` one of them)
    // with a table at `t` and two free slots; reading a metatable pushes it (or nothing),
    // setting a table's metatable to nil raises nothing; replacing an upvalue of the running
    // C closure raises nothing.
    unsafe {
        if ffi::lua_getmetatable(state, t) != 0 {
            ffi::lua_pushnil(state);
            ffi::lua_setmetatable(state, t);
            ffi::lua_settop(state, -2);
        }
        if fields > REUSE_MAX {
            ffi::lua_createtable(state, n, 0);
            ffi::lua_replace(state, t);
        }
    }
    if fields > REUSE_MAX {
        set_global(state, name, Some(table));
    }
    set_strings(state, t, items);
}

/// Sets `items` as strings at indexes 1, 2, ... of the table at `t` (an absolute index).
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn set_strings(state: *mut ffi::lua_State, t: c_int, items: &[bytes::Bytes]) {
    let n = c_int::try_from(items.len()).unwrap_or(c_int::MAX);
    // SAFETY: called by `run_c` with a table at `t` and a free slot; setting a table by index
    // raw raises nothing (growing its array allocates, which does not fail: no memory limit);
    // the strings are copied by Lua.
    unsafe {
        for (i, item) in (1..=n).zip(items) {
            ffi::lua_pushlstring_(state, item.as_ptr().cast::<c_char>(), item.len());
            ffi::lua_rawseti_(state, t, i);
        }
    }
}

/// Pushes `items` as a new array of strings.
#[expect(unsafe_code, reason = "the unsafe feature's script runner (SAFETY.md)")]
fn push_array(state: *mut ffi::lua_State, items: &[bytes::Bytes]) {
    let n = c_int::try_from(items.len()).unwrap_or(c_int::MAX);
    // SAFETY: called by `run_c` with room for the table and one string; a new table's
    // allocation does not raise (no memory limit).
    let t = unsafe {
        ffi::lua_createtable(state, n, 0);
        ffi::lua_gettop(state)
    };
    set_strings(state, t, items);
}
