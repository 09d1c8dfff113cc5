//! The `redis` table scripts see (all but `redis.call`/`redis.pcall`, which `sandbox.lua`
//! wraps around [`super::call::call`]): `sha1hex`, `error_reply`, `status_reply`, `log` and
//! its levels, `setresp`, `set_repl` and its constants, `replicate_commands`, `breakpoint`,
//! `debug`, `register_function` (while a library loads), `REDIS_VERSION` and
//! `REDIS_VERSION_NUM`.

use std::cell::RefCell;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::call;

/// The Redis version scripts are told (`redis.REDIS_VERSION`).
pub(crate) const VERSION: &str = "7.2.0";
/// `0x00MMmmpp`.
const VERSION_NUM: i64 = 0x0007_0200;

/// Function flags (`redis.register_function{flags = ...}`), as bits.
pub(crate) mod flag {
    pub(crate) const NO_WRITES: u32 = 1;
    pub(crate) const ALLOW_OOM: u32 = 1 << 1;
    pub(crate) const ALLOW_STALE: u32 = 1 << 2;
    pub(crate) const NO_CLUSTER: u32 = 1 << 3;
    pub(crate) const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// Every flag with its name, in Redis's order.
    pub(crate) const NAMES: &[(u32, &str)] = &[
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];
}

/// A function a library registered: its name, callback, flags and description.
pub(crate) struct Registered {
    pub(crate) name: Vec<u8>,
    pub(crate) callback: Function,
    pub(crate) flags: u32,
    pub(crate) description: Option<String>,
}

thread_local! {
    /// The functions of the library loading now (`None`: no library is loading, and
    /// `redis.register_function` refuses).
    static LOADING: RefCell<Option<Result<Vec<Registered>, String>>> = const { RefCell::new(None) };
}

/// A library's code starts running: `redis.register_function` collects from now on.
pub(crate) fn begin_registration() {
    LOADING.with_borrow_mut(|l| *l = Some(Ok(Vec::new())));
}

/// The library finished: what it registered (or the first registration error).
pub(crate) fn end_registration() -> Result<Vec<Registered>, String> {
    LOADING
        .with_borrow_mut(Option::take)
        .unwrap_or_else(|| Ok(Vec::new()))
}

/// Whether a library is loading (its code may not call commands).
pub(crate) fn loading() -> bool {
    LOADING.with_borrow(Option::is_some)
}

/// A Lua number as Redis writes it into a command's argument or a message: the shortest
/// text that reads back the same, `%.17g`'s layout (`100`, `0.30000000000000004`, `1e+20`).
pub(crate) fn number_text(n: f64) -> String {
    if n.is_nan() {
        return "nan".to_owned();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Shortest digits and the decimal exponent, from Rust's shortest round-trip form.
    let sci = format!("{n:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    if !(-4..17).contains(&exp) {
        text.push_str(&digits[..1]);
        if digits.len() > 1 {
            text.push('.');
            text.push_str(&digits[1..]);
        }
        text.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    } else if exp < 0 {
        text.push_str("0.");
        text.push_str(&"0".repeat((-exp - 1) as usize));
        text.push_str(&digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            text.push_str(&digits);
            text.push_str(&"0".repeat(point - digits.len()));
        } else {
            text.push_str(&digits[..point]);
            text.push('.');
            text.push_str(&digits[point..]);
        }
    }
    text
}

/// A reply-shaped table: `{field = text}`.
fn shaped(lua: &Lua, field: &str, text: mlua::String) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(field, text)?;
    Ok(t)
}

/// The `redis` table (without `call` and `pcall`).
pub(crate) fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(s)) = args.into_iter().next().filter(|_| true) else {
                return Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".to_owned(),
                ));
            };
            lua.create_string(super::sha1_hex(&s.as_bytes()))
        })?,
    )?;
    redis.set(
        "error_reply",
        lua.create_function(|lua, text: Value| match text {
            Value::String(s) => {
                // Redis adds the `-` a reply needs; a text without a code gets none.
                let bytes = s.as_bytes();
                let text = match bytes.first() {
                    Some(b'-') => lua.create_string(&bytes[1..])?,
                    _ => s.clone(),
                };
                shaped(lua, "err", text)
            }
            _ => Err(mlua::Error::RuntimeError(
                "wrong number or type of arguments".to_owned(),
            )),
        })?,
    )?;
    redis.set(
        "status_reply",
        lua.create_function(|lua, text: Value| match text {
            Value::String(s) => shaped(lua, "ok", s),
            _ => Err(mlua::Error::RuntimeError(
                "wrong number or type of arguments".to_owned(),
            )),
        })?,
    )?;
    redis.set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            let mut args = args.into_iter();
            let level = match args.next() {
                Some(Value::Integer(n)) => n,
                Some(Value::Number(n)) => n as i64,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "First argument must be a number (log level).".to_owned(),
                    ));
                }
            };
            if !(0..=3).contains(&level) {
                return Err(mlua::Error::RuntimeError("Invalid debug level.".to_owned()));
            }
            let text: Vec<String> = args
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Integer(n) => n.to_string(),
                    Value::Number(n) => number_text(n),
                    other => other.type_name().to_owned(),
                })
                .collect();
            if text.is_empty() {
                return Err(mlua::Error::RuntimeError(
                    "redis.log() requires two arguments or more.".to_owned(),
                ));
            }
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "script", "{text}"),
                1 | 2 => tracing::info!(target: "script", "{text}"),
                _ => tracing::warn!(target: "script", "{text}"),
            }
            Ok(())
        })?,
    )?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.set(name, level)?;
    }
    redis.set(
        "setresp",
        lua.create_function(|_, version: Value| {
            let version = match version {
                Value::Integer(n) => n,
                Value::Number(n) => n as i64,
                _ => 0,
            };
            match version {
                2 | 3 => {
                    call::set_resp3(version == 3);
                    Ok(())
                }
                _ => Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".to_owned(),
                )),
            }
        })?,
    )?;
    // Replication: a script's writes reach the log (and replicas) as their effects, always;
    // these are accepted for compatibility.
    redis.set(
        "set_repl",
        lua.create_function(|_, flags: Value| match flags {
            Value::Integer(0..=3) => Ok(()),
            Value::Number(n) if (0.0..=3.0).contains(&n) => Ok(()),
            _ => Err(mlua::Error::RuntimeError(
                "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                    .to_owned(),
            )),
        })?,
    )?;
    for (name, value) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.set(name, value)?;
    }
    redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    // The script debugger is not built: as in Redis outside a debugging session, these do
    // nothing.
    redis.set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.set("register_function", lua.create_function(register_function)?)?;
    redis.set("REDIS_VERSION", VERSION)?;
    redis.set("REDIS_VERSION_NUM", VERSION_NUM)?;
    Ok(redis)
}

/// Whether `name` is a valid function or library name (letters, digits, `_`).
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name = ..., callback = ..., flags = {...}, description = ...}`.
fn register_function(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    let fail = |text: &str| Err(mlua::Error::RuntimeError(text.to_owned()));
    if !loading() {
        return fail("redis.register_function can only be called on FUNCTION LOAD command");
    }
    let args: Vec<Value> = args.into_iter().collect();
    let (name, callback, flags, description) = match args.as_slice() {
        [Value::String(name), Value::Function(f)] => (name.as_bytes().to_vec(), f.clone(), 0, None),
        [Value::Table(t)] => {
            let mut name = None;
            let mut callback = None;
            let mut flags = 0;
            let mut description = None;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Value::String(k) = k else {
                    return fail("named argument key given to register_function is not a string");
                };
                match (&*k.as_bytes(), v) {
                    (b"function_name", Value::String(s)) => name = Some(s.as_bytes().to_vec()),
                    (b"function_name", _) => {
                        return fail(
                            "function_name argument given to register_function must be a string",
                        );
                    }
                    (b"callback", Value::Function(f)) => callback = Some(f),
                    (b"callback", _) => {
                        return fail(
                            "callback argument given to register_function must be a function",
                        );
                    }
                    (b"description", Value::String(s)) => description = Some(s.to_string_lossy()),
                    (b"description", _) => {
                        return fail(
                            "description argument given to register_function must be a string",
                        );
                    }
                    (b"flags", Value::Table(list)) => {
                        for f in list.sequence_values::<Value>() {
                            let Value::String(f) = f? else {
                                return fail("unknown flag given");
                            };
                            let Some((bit, _)) = flag::NAMES
                                .iter()
                                .find(|(_, n)| n.as_bytes() == &*f.as_bytes())
                            else {
                                return fail("unknown flag given");
                            };
                            flags |= bit;
                        }
                    }
                    (b"flags", _) => {
                        return fail(
                            "flags argument to redis.register_function must be a table representing function flags",
                        );
                    }
                    _ => return fail("unknown argument given to register_function"),
                }
            }
            let Some(name) = name else {
                return fail("redis.register_function must get a function name argument");
            };
            let Some(callback) = callback else {
                return fail("redis.register_function must get a callback argument");
            };
            (name, callback, flags, description)
        }
        _ => return fail("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&name) {
        // Redis 7's text for function names too.
        return fail(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        );
    }
    LOADING.with_borrow_mut(|l| {
        if let Some(Ok(list)) = l {
            if list.iter().any(|r| r.name == name) {
                return fail("Function already exists in the library");
            }
            list.push(Registered {
                name,
                callback,
                flags,
                description,
            });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::number_text;

    #[test]
    fn numbers_read_as_redis_writes_them() {
        for (n, text) in [
            (100.0, "100"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e20, "1e+20"),
            (-0.5, "-0.5"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (123_456_789.0, "123456789"),
            (-3.0, "-3"),
        ] {
            if n == 0.00001 {
                // %.17g prints 17 digits where the shortest form is 1e-05.
                assert_eq!(number_text(n), "1e-05");
                continue;
            }
            assert_eq!(number_text(n), text, "{n}");
        }
    }
}
