//! Redis's Lua script libraries — `cjson`, `cmsgpack`, `bit` and `struct` —
//! written in Rust on top of `mlua`, behaving like the C libraries Redis 7
//! loads into every script (same results, same bytes, same error texts).
//!
//! Errors: a C library raises a plain string (`luaL_error`), with the
//! caller's `chunk:line:` in front when the caller is Lua code. A Rust
//! callback can only raise `mlua`'s userdata errors, so each library function
//! is a small Lua closure around the Rust callback: the callback returns a
//! private marker plus the finished message, and the closure raises it with
//! `error(msg, 0)`, which scripts see as the same string Redis produces.

mod bit;
mod cjson;
mod cmsgpack;
mod lstruct;
mod num;
#[cfg(test)]
mod tests;

use std::ffi::c_void;

use mlua::{Function, LightUserData, Lua, MultiValue, Table, Value};

/// Registers Redis's script libraries as globals: `cjson`, `cmsgpack`, `bit`, `struct`.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let reg = Registrar::new(lua)?;
    let globals = lua.globals();
    globals.set("cjson", cjson::module(lua, &reg)?)?;
    globals.set("struct", lstruct::module(lua, &reg)?)?;
    globals.set("cmsgpack", cmsgpack::module(lua, &reg)?)?;
    globals.set("bit", bit::module(lua, &reg)?)?;
    Ok(())
}

/// Lua's `LUAI_MAXCSTACK`: the most slots a C function may use.
const MAX_C_STACK: usize = 8000;

/// A failure raised by a library function, rendered like the C library would.
pub(super) enum Fail {
    /// `luaL_error`: the caller's position goes in front.
    Error(Vec<u8>),
    /// `luaL_argerror(narg, extramsg)`.
    Arg(i64, Vec<u8>),
    /// An error raised by the Lua core while the C function runs (no position).
    Plain(Vec<u8>),
    /// A failure of the host itself (e.g. out of memory): passed on as is.
    Host(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Host(e)
    }
}

impl Fail {
    pub(super) fn error(msg: impl Into<Vec<u8>>) -> Self {
        Fail::Error(msg.into())
    }

    pub(super) fn arg(narg: i64, msg: impl Into<Vec<u8>>) -> Self {
        Fail::Arg(narg, msg.into())
    }
}

pub(super) type Ret = Result<MultiValue, Fail>;

static MARKER: u8 = 0;
static MANY: u8 = 0;

/// Results above this count travel in a table: a C function may return up
/// to ~8000 values, more than `mlua` can push from a callback.
const MANY_RESULTS: usize = 1000;

fn tag(addr: &'static u8) -> Value {
    Value::LightUserData(LightUserData(
        std::ptr::from_ref(addr).cast_mut().cast::<c_void>(),
    ))
}

/// The private value a callback returns first to ask its closure to raise.
fn marker() -> Value {
    tag(&MARKER)
}

/// The private value a callback returns first to pass a long result list
/// as `(table, n)`, which its closure spreads back into values.
fn many() -> Value {
    tag(&MANY)
}

/// `luaL_where(L, 1)` seen from the C function: the position of its caller.
/// From the Rust callback, level 1 is the wrapping closure, level 2 its caller.
fn where_prefix(lua: &Lua) -> Vec<u8> {
    lua.inspect_stack(2, |d| {
        let line = d.current_line()?;
        let src = d.source().short_src?.into_owned();
        (line > 0).then(|| format!("{src}:{line}: ").into_bytes())
    })
    .flatten()
    .unwrap_or_default()
}

fn render(lua: &Lua, fail: Fail) -> Vec<u8> {
    let mut out = where_prefix(lua);
    match fail {
        Fail::Error(msg) => out.extend_from_slice(&msg),
        Fail::Plain(msg) => return msg,
        Fail::Arg(mut narg, extra) => {
            let (name, what) = lua
                .inspect_stack(1, |d| {
                    let n = d.names();
                    (n.name.map(|c| c.into_owned()), n.name_what)
                })
                .unwrap_or((None, None));
            let name = name.unwrap_or_else(|| "?".to_owned());
            if what == Some("method") {
                narg -= 1;
                if narg == 0 {
                    out.extend_from_slice(format!("calling '{name}' on bad self (").as_bytes());
                    out.extend_from_slice(&extra);
                    out.push(b')');
                    return out;
                }
            }
            out.extend_from_slice(format!("bad argument #{narg} to '{name}' (").as_bytes());
            out.extend_from_slice(&extra);
            out.push(b')');
        }
        Fail::Host(_) => {}
    }
    out
}

/// Builds library functions: a Rust callback inside a Lua closure that turns
/// a returned failure into a plain string error.
#[derive(Clone)]
pub(super) struct Registrar {
    factory: Function,
}

impl Registrar {
    fn new(lua: &Lua) -> mlua::Result<Self> {
        let factory = lua
            .load(
                r#"
local marker, many, error, select, unpack = ...
local function spread(t, i, n)
  if n - i < 1000 then return unpack(t, i, n) end
  return t[i], t[i+1], t[i+2], t[i+3], t[i+4], t[i+5], t[i+6], t[i+7], spread(t, i + 8, n)
end
local function check(...)
  local first = ...
  if first == marker then error((select(2, ...)), 0) end
  if first == many then
    local _, t, n = ...
    return spread(t, 1, n)
  end
  return ...
end
return function(raw)
  return function(...) return check(raw(...)) end
end
"#,
            )
            .set_name("=[C]")
            .call::<Function>((
                marker(),
                many(),
                lua.globals().raw_get::<Value>("error")?,
                lua.globals().raw_get::<Value>("select")?,
                lua.globals().raw_get::<Value>("unpack")?,
            ))?;
        Ok(Registrar { factory })
    }

    pub(super) fn func<F>(&self, lua: &Lua, f: F) -> mlua::Result<Function>
    where
        F: Fn(&Lua, Args) -> Ret + 'static,
    {
        let raw = lua.create_function(move |lua, args: MultiValue| {
            match f(lua, Args(args.into_iter().collect())) {
                Ok(v) => Ok(v),
                Err(Fail::Host(e)) => Err(e),
                Err(fail) => {
                    let msg = render(lua, fail);
                    Ok(MultiValue::from_iter([
                        marker(),
                        Value::String(lua.create_string(msg)?),
                    ]))
                }
            }
        })?;
        self.factory.call(raw)
    }

    /// Adds `name = f` to `table`.
    pub(super) fn add<F>(&self, lua: &Lua, table: &Table, name: &str, f: F) -> mlua::Result<()>
    where
        F: Fn(&Lua, Args) -> Ret + 'static,
    {
        table.raw_set(name, self.func(lua, f)?)
    }
}

/// The arguments of a call, with the `luaL_check*` helpers (1-based).
pub(super) struct Args(Vec<Value>);

impl Args {
    pub(super) fn top(&self) -> usize {
        self.0.len()
    }

    pub(super) fn get(&self, i: usize) -> Option<&Value> {
        i.checked_sub(1).and_then(|i| self.0.get(i))
    }

    /// The argument, `nil` when absent.
    pub(super) fn value(&self, i: usize) -> Value {
        self.get(i).cloned().unwrap_or(Value::Nil)
    }

    pub(super) fn is_none_or_nil(&self, i: usize) -> bool {
        matches!(self.get(i), None | Some(Value::Nil))
    }

    /// `luaL_typename`.
    pub(super) fn typename(&self, i: usize) -> &'static str {
        self.get(i).map_or("no value", typename)
    }

    fn type_error(&self, i: usize, expected: &str) -> Fail {
        Fail::arg(
            i as i64,
            format!("{expected} expected, got {}", self.typename(i)),
        )
    }

    /// `lua_tonumber` when `lua_isnumber`, else `None`.
    pub(super) fn to_number(&self, lua: &Lua, i: usize) -> Option<f64> {
        self.get(i).and_then(|v| to_number(lua, v))
    }

    /// `luaL_checknumber`.
    pub(super) fn number(&self, lua: &Lua, i: usize) -> Result<f64, Fail> {
        self.to_number(lua, i)
            .ok_or_else(|| self.type_error(i, "number"))
    }

    /// `luaL_checkinteger`.
    pub(super) fn integer(&self, lua: &Lua, i: usize) -> Result<i64, Fail> {
        self.number(lua, i).map(num::double_to_i64)
    }

    /// `luaL_optinteger`.
    pub(super) fn opt_integer(&self, lua: &Lua, i: usize, def: i64) -> Result<i64, Fail> {
        if self.is_none_or_nil(i) {
            Ok(def)
        } else {
            self.integer(lua, i)
        }
    }

    /// `luaL_checklstring`: strings, and numbers converted to strings.
    pub(super) fn bytes(&self, lua: &Lua, i: usize) -> Result<Vec<u8>, Fail> {
        match self.get(i) {
            Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
            Some(v @ (Value::Integer(_) | Value::Number(_))) => Ok(lua
                .coerce_string(v.clone())?
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default()),
            _ => Err(self.type_error(i, "string")),
        }
    }
}

/// `lua_typename(lua_type(v))`.
pub(super) fn typename(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// The number a value holds, if it is a Lua number.
pub(super) fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_tonumber` guarded by `lua_isnumber` (numeric strings convert).
pub(super) fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        v => as_number(v),
    }
}

/// A list of results kept in a Lua table, so that long lists hold no
/// `mlua` references (their auxiliary stack has room for only ~8000).
pub(super) struct Results {
    t: Table,
    n: usize,
}

impl Results {
    pub(super) fn new(lua: &Lua) -> Result<Self, Fail> {
        Ok(Results {
            t: lua.create_table()?,
            n: 0,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.n
    }

    pub(super) fn push(&mut self, v: Value) -> Result<(), Fail> {
        self.n += 1;
        self.t.raw_set(self.n, v)?;
        Ok(())
    }

    pub(super) fn set(&self, i: usize, v: Value) -> Result<(), Fail> {
        self.t.raw_set(i, v)?;
        Ok(())
    }

    pub(super) fn last(&self) -> Result<Value, Fail> {
        Ok(self.t.raw_get(self.n)?)
    }

    pub(super) fn pop(&mut self) -> Result<(), Fail> {
        self.t.raw_set(self.n, Value::Nil)?;
        self.n = self.n.saturating_sub(1);
        Ok(())
    }

    /// The results, spread by the wrapping closure when there are many.
    pub(super) fn finish(self) -> Ret {
        if self.n > MANY_RESULTS {
            return Ok(multi([
                many(),
                Value::Table(self.t),
                Value::Integer(self.n as i64),
            ]));
        }
        (1..=self.n)
            .map(|i| self.t.raw_get::<Value>(i).map_err(Fail::from))
            .collect()
    }
}

/// Builds a `MultiValue` from values.
pub(super) fn multi(values: impl IntoIterator<Item = Value>) -> MultiValue {
    MultiValue::from_iter(values)
}

/// A Lua string value from bytes.
pub(super) fn lstr(lua: &Lua, bytes: impl AsRef<[u8]>) -> Result<Value, Fail> {
    Ok(Value::String(lua.create_string(bytes)?))
}
