//! `cjson`: lua-cjson 2.1.0 as shipped in Redis.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Function, Lua, Table, Value};

use super::num::{double_to_i32, fmt_g, strtod};
use super::{Args, Fail, MAX_C_STACK, Registrar, Ret, as_number, lstr, multi, typename};

const INT_MAX: i32 = i32::MAX;

/// One module table's settings (each `cjson.new()` gets its own).
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 refuse, 1 allow, 2 encode as `null`.
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    keep_buffer: i32,
    precision: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            keep_buffer: 1,
            precision: 14,
        }
    }
}

type Shared = Rc<RefCell<Config>>;

/// Builds a `cjson` module table (`encode`, `decode`, the configuration
/// functions, `new`, `null`, `_NAME`, `_VERSION`) with fresh settings.
pub(super) fn module(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Shared = Rc::default();
    let c = cfg.clone();
    // The base library's `next`, taken now so scripts cannot replace it.
    let next: Function = lua.globals().raw_get("next")?;
    reg.add(lua, &t, "encode", move |lua, a| {
        encode(lua, &c.borrow(), &next, &a)
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "decode", move |lua, a| {
        decode(lua, &c.borrow(), &a)
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "encode_sparse_array", move |lua, a| {
        arg_init(&a, 3)?;
        let mut c = c.borrow_mut();
        let convert = enum_option(lua, &a, 1, &mut c.sparse_convert, BOOL_OPTIONS)?;
        let ratio = integer_option(lua, &a, 2, &mut c.sparse_ratio, 0, INT_MAX)?;
        let safe = integer_option(lua, &a, 3, &mut c.sparse_safe, 0, INT_MAX)?;
        Ok(multi([convert, ratio, safe]))
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "encode_max_depth", move |lua, a| {
        arg_init(&a, 1)?;
        Ok(multi([integer_option(
            lua,
            &a,
            1,
            &mut c.borrow_mut().encode_max_depth,
            1,
            INT_MAX,
        )?]))
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "decode_max_depth", move |lua, a| {
        arg_init(&a, 1)?;
        Ok(multi([integer_option(
            lua,
            &a,
            1,
            &mut c.borrow_mut().decode_max_depth,
            1,
            INT_MAX,
        )?]))
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "encode_number_precision", move |lua, a| {
        arg_init(&a, 1)?;
        Ok(multi([integer_option(
            lua,
            &a,
            1,
            &mut c.borrow_mut().precision,
            1,
            14,
        )?]))
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "encode_keep_buffer", move |lua, a| {
        arg_init(&a, 1)?;
        let v = enum_option(lua, &a, 1, &mut c.borrow_mut().keep_buffer, BOOL_OPTIONS)?;
        Ok(multi([v]))
    })?;
    let c = cfg.clone();
    reg.add(lua, &t, "encode_invalid_numbers", move |lua, a| {
        arg_init(&a, 1)?;
        let v = enum_option(
            lua,
            &a,
            1,
            &mut c.borrow_mut().encode_invalid_numbers,
            &["off", "on", "null"],
        )?;
        Ok(multi([v]))
    })?;
    let c = cfg;
    reg.add(lua, &t, "decode_invalid_numbers", move |lua, a| {
        arg_init(&a, 1)?;
        let v = enum_option(
            lua,
            &a,
            1,
            &mut c.borrow_mut().decode_invalid_numbers,
            BOOL_OPTIONS,
        )?;
        Ok(multi([v]))
    })?;
    let r = reg.clone();
    reg.add(lua, &t, "new", move |lua, _| {
        Ok(multi([Value::Table(module(lua, &r)?)]))
    })?;
    t.raw_set("null", Value::NULL)?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

const BOOL_OPTIONS: &[&str] = &["off", "on"];

/// Rejects extra arguments (`json_arg_init`).
fn arg_init(a: &Args, max: usize) -> Result<(), Fail> {
    if a.top() > max {
        return Err(Fail::arg(max as i64 + 1, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`: sets from argument `i` when given, returns the value.
fn integer_option(
    lua: &Lua,
    a: &Args,
    i: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> Result<Value, Fail> {
    if !a.is_none_or_nil(i) {
        // `int value = luaL_checkinteger(...)`: truncated to 32 bits.
        let value = a.integer(lua, i)? as i32;
        if !(min..=max).contains(&value) {
            return Err(Fail::arg(
                1,
                format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = value;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// `json_enum_option` with `bool_true == 1`: `false`/`true` for settings 0
/// and 1, else the option's name.
fn enum_option(
    lua: &Lua,
    a: &Args,
    i: usize,
    setting: &mut i32,
    options: &[&str],
) -> Result<Value, Fail> {
    if !a.is_none_or_nil(i) {
        if let Some(Value::Boolean(b)) = a.get(i) {
            *setting = i32::from(*b);
        } else {
            let name = a.bytes(lua, i)?;
            match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
                Some(p) => *setting = p as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(&name);
                    msg.push(b'\'');
                    return Err(Fail::Arg(i as i64, msg));
                }
            }
        }
    }
    Ok(match *setting {
        0 | 1 => Value::Boolean(*setting == 1),
        n => lstr(lua, options[n as usize])?,
    })
}

// ===== Encoding =====

fn encode(lua: &Lua, cfg: &Config, next: &Function, a: &Args) -> Ret {
    if a.top() != 1 {
        return Err(Fail::arg(1, "expected 1 argument"));
    }
    let mut out = Vec::new();
    let holder = lua.create_table()?;
    append_value(cfg, next, &holder, a.value(1), &mut out)?;
    Ok(multi([lstr(lua, out)?]))
}

fn append_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn append_number(cfg: &Config, n: f64, out: &mut Vec<u8>) -> Result<(), Fail> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => {
            return Err(Fail::error(
                "Cannot serialise number: must not be NaN or Inf",
            ));
        }
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(fmt_g(n, cfg.precision.max(1) as usize).as_bytes());
    Ok(())
}

/// A table being encoded. The table itself (and an object's last key)
/// live in a Lua holder table at `2 * level - 1` (and `2 * level`), so deep
/// or wide tables hold no `mlua` references.
struct EncFrame {
    /// Array length, or `None` for an object (walked with `next`).
    len: Option<usize>,
    next: usize,
    depth: i32,
    used: usize,
}

/// Encodes `root` without recursion. `used` mirrors the Lua stack slots the
/// C encoder holds (for its `lua_checkstack` limit).
fn append_value(
    cfg: &Config,
    next: &Function,
    holder: &Table,
    root: Value,
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let mut stack: Vec<EncFrame> = Vec::new();
    let mut pending = Some((root, 0, 1usize));
    loop {
        if let Some((v, depth, used)) = pending.take() {
            match v {
                Value::Table(t) => {
                    let depth = depth + 1;
                    if depth > cfg.encode_max_depth || used + 3 > MAX_C_STACK {
                        return Err(Fail::error(format!(
                            "Cannot serialise, excessive nesting ({depth})"
                        )));
                    }
                    let len = array_length(cfg, &t)?;
                    let len = (len > 0).then_some(len as usize);
                    out.push(if len.is_some() { b'[' } else { b'{' });
                    let level = stack.len() + 1;
                    holder.raw_set(2 * level - 1, t)?;
                    holder.raw_set(2 * level, Value::Nil)?;
                    stack.push(EncFrame {
                        len,
                        next: 0,
                        depth,
                        used,
                    });
                }
                v => append_scalar(cfg, &v, out)?,
            }
        }
        let level = stack.len();
        let Some(f) = stack.last_mut() else {
            return Ok(());
        };
        let t: Table = holder.raw_get(2 * level - 1)?;
        let item = match f.len {
            Some(len) if f.next < len => Some((None, t.raw_get::<Value>(f.next + 1)?)),
            Some(_) => None,
            None => {
                let last: Value = holder.raw_get(2 * level)?;
                let (k, v): (Value, Value) = next.call((t, last))?;
                if k.is_nil() {
                    None
                } else {
                    holder.raw_set(2 * level, k.clone())?;
                    Some((Some(k), v))
                }
            }
        };
        let Some((k, v)) = item else {
            out.push(if f.len.is_some() { b']' } else { b'}' });
            stack.pop();
            holder.raw_set(2 * level - 1, Value::Nil)?;
            holder.raw_set(2 * level, Value::Nil)?;
            continue;
        };
        if f.next > 0 {
            out.push(b',');
        }
        f.next += 1;
        match &k {
            None => {}
            Some(k @ (Value::Integer(_) | Value::Number(_))) => {
                out.push(b'"');
                append_number(cfg, as_number(k).unwrap_or(0.0), out)?;
                out.extend_from_slice(b"\":");
            }
            Some(Value::String(s)) => {
                append_string(&s.as_bytes(), out);
                out.push(b':');
            }
            Some(k) => {
                return Err(Fail::error(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    typename(k)
                )));
            }
        }
        let slots = if f.len.is_some() { 1 } else { 2 };
        pending = Some((v, f.depth, f.used + slots));
    }
}

fn append_scalar(cfg: &Config, v: &Value, out: &mut Vec<u8>) -> Result<(), Fail> {
    match v {
        Value::String(s) => append_string(&s.as_bytes(), out),
        Value::Integer(_) | Value::Number(_) => {
            append_number(cfg, as_number(v).unwrap_or(0.0), out)?;
        }
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        v => {
            return Err(Fail::error(format!(
                "Cannot serialise {}: type not supported",
                typename(v)
            )));
        }
    }
    Ok(())
}

/// `lua_array_length`: the array size, or -1/<=0 for "encode as object".
fn array_length(cfg: &Config, t: &Table) -> Result<i32, Fail> {
    let mut max: i32 = 0;
    let mut items: i32 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        match as_number(&k) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > f64::from(max) {
                    max = double_to_i32(k);
                }
                items = items.wrapping_add(1);
            }
            _ => return Ok(-1),
        }
    }
    if cfg.sparse_ratio > 0 && max > items.wrapping_mul(cfg.sparse_ratio) && max > cfg.sparse_safe {
        if cfg.sparse_convert == 0 {
            return Err(Fail::error(
                "Cannot serialise table: excessively sparse array",
            ));
        }
        return Ok(-1);
    }
    Ok(max)
}

// ===== Decoding =====

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::Str => "T_STRING",
            Kind::Num => "T_NUMBER",
            Kind::Bool => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Kind,
    index: usize,
    text: Vec<u8>,
    number: f64,
    boolean: bool,
    error: &'static str,
}

impl Token {
    fn new(kind: Kind, index: usize) -> Self {
        Token {
            kind,
            index,
            text: Vec::new(),
            number: 0.0,
            boolean: false,
            error: "",
        }
    }
}

/// A container being filled by the decoder.
struct Open {
    object: bool,
    /// The next array index.
    index: usize,
    /// Lua stack slots in use while a member value is parsed.
    used: usize,
}

struct Parser<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    data: &'a [u8],
    pos: usize,
    depth: i32,
}

fn decode(lua: &Lua, cfg: &Config, a: &Args) -> Ret {
    if a.top() != 1 {
        return Err(Fail::arg(1, "expected 1 argument"));
    }
    let data = a.bytes(lua, 1)?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(Fail::error("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        lua,
        cfg,
        data: &data,
        pos: 0,
        depth: 0,
    };
    let tok = p.next_token();
    let v = p.value(tok)?;
    let tok = p.next_token();
    if tok.kind != Kind::End {
        return Err(parse_error("the end", &tok));
    }
    Ok(multi([v]))
}

fn parse_error(expected: &str, tok: &Token) -> Fail {
    let found = if tok.kind == Kind::Error {
        tok.error
    } else {
        tok.kind.name()
    };
    Fail::error(format!(
        "Expected {expected} but found {found} at character {}",
        tok.index + 1
    ))
}

fn hex4(p: &Parser<'_>, at: usize) -> Option<u32> {
    let mut v = 0u32;
    for i in 0..4 {
        let c = p.at(at + i);
        if !c.is_ascii_hexdigit() {
            return None;
        }
        v = (v << 4) | (c as char).to_digit(16)?;
    }
    Some(v)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn error_token(&self, msg: &'static str) -> Token {
        let mut t = Token::new(Kind::Error, self.pos);
        t.error = msg;
        t
    }

    /// `json_is_invalid_number`: forms strtod takes but strict JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut i = self.pos;
        if self.at(i) == b'+' {
            return true;
        }
        if self.at(i) == b'-' {
            i += 1;
        }
        let c = self.at(i);
        if c == b'0' {
            let c2 = self.at(i + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = &self.data[i.min(self.data.len())..];
        let ci = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        ci(b"inf") || ci(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let rest = &self.data[self.pos..];
        // strtod stops at the NUL that ends a C string.
        let rest = &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())];
        match strtod(rest) {
            Some((n, used)) if used > 0 => {
                let mut t = Token::new(Kind::Num, self.pos);
                t.number = n;
                self.pos += used;
                t
            }
            _ => self.error_token("invalid number"),
        }
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let c = self.at(start);
        let single = match c {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return Token::new(kind, start);
        }
        if c == 0 {
            return Token::new(Kind::End, start);
        }
        if !matches!(
            c,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9'
        ) {
            return self.error_token("invalid token");
        }
        let starts = |w: &[u8]| self.data[start..].starts_with(w);
        if c == b'"' {
            self.string_token()
        } else if c == b'-' || c.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                return self.error_token("invalid number");
            }
            self.number_token()
        } else if starts(b"true") {
            self.pos += 4;
            let mut t = Token::new(Kind::Bool, start);
            t.boolean = true;
            t
        } else if starts(b"false") {
            self.pos += 5;
            Token::new(Kind::Bool, start)
        } else if starts(b"null") {
            self.pos += 4;
            Token::new(Kind::Null, start)
        } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
            self.number_token()
        } else {
            self.error_token("invalid token")
        }
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        let mut text = Vec::new();
        loop {
            let c = self.at(self.pos);
            if c == b'"' {
                break;
            }
            if c == 0 {
                return self.error_token("unexpected end of string");
            }
            if c != b'\\' {
                text.push(c);
                self.pos += 1;
                continue;
            }
            let mapped = match self.at(self.pos + 1) {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b't' => b'\t',
                b'n' => b'\n',
                b'f' => 0x0c,
                b'r' => b'\r',
                b'u' => {
                    if self.unicode_escape(&mut text) {
                        continue;
                    }
                    return self.error_token("invalid unicode escape code");
                }
                _ => return self.error_token("invalid escape code"),
            };
            text.push(mapped);
            self.pos += 2;
        }
        self.pos += 1;
        let mut t = Token::new(Kind::Str, start);
        t.text = text;
        t
    }

    /// `\uXXXX` (with a surrogate pair) at `pos`, appended as UTF-8.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = hex4(self, self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = hex4(self, self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            out.push(cp as u8);
        } else if cp <= 0x7FF {
            out.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]);
        } else if cp <= 0xFFFF {
            out.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        } else {
            out.extend_from_slice(&[
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        }
        self.pos += len;
        true
    }

    fn descend(&mut self, used: usize, slots: usize) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth || used + slots > MAX_C_STACK {
            return Err(Fail::error(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    /// Parses one value starting at `tok`, without recursion: open
    /// containers wait on `stack`, their tables (and pending keys) in a Lua
    /// holder table at `2 * level - 1` (and `2 * level`) so that deep nesting
    /// holds no `mlua` references. `used` mirrors the Lua stack slots the C
    /// parser holds (for its `lua_checkstack` limit).
    fn value(&mut self, mut tok: Token) -> Result<Value, Fail> {
        let mut stack: Vec<Open> = Vec::new();
        let holder = self.lua.create_table()?;
        loop {
            let used = stack.last().map_or(1, |f| f.used);
            let level = stack.len() + 1;
            let mut v = match tok.kind {
                Kind::Str => lstr(self.lua, &tok.text)?,
                Kind::Num => Value::Number(tok.number),
                Kind::Bool => Value::Boolean(tok.boolean),
                Kind::Null => Value::NULL,
                Kind::ObjBegin => {
                    self.descend(used, 3)?;
                    let t = self.lua.create_table()?;
                    tok = self.next_token();
                    if tok.kind == Kind::ObjEnd {
                        self.depth -= 1;
                        Value::Table(t)
                    } else {
                        holder.raw_set(2 * level, self.member_key(tok)?)?;
                        holder.raw_set(2 * level - 1, t)?;
                        stack.push(Open {
                            object: true,
                            index: 0,
                            used: used + 2,
                        });
                        tok = self.next_token();
                        continue;
                    }
                }
                Kind::ArrBegin => {
                    self.descend(used, 2)?;
                    let t = self.lua.create_table()?;
                    tok = self.next_token();
                    if tok.kind == Kind::ArrEnd {
                        self.depth -= 1;
                        Value::Table(t)
                    } else {
                        holder.raw_set(2 * level - 1, t)?;
                        stack.push(Open {
                            object: false,
                            index: 1,
                            used: used + 1,
                        });
                        continue;
                    }
                }
                _ => return Err(parse_error("value", &tok)),
            };
            // Store the finished value in its container; close finished ones.
            loop {
                let level = stack.len();
                let Some(open) = stack.last_mut() else {
                    return Ok(v);
                };
                let table: Table = holder.raw_get(2 * level - 1)?;
                let end = if open.object {
                    let key: Value = holder.raw_get(2 * level)?;
                    table.raw_set(key, v)?;
                    Kind::ObjEnd
                } else {
                    table.raw_set(open.index, v)?;
                    open.index += 1;
                    Kind::ArrEnd
                };
                tok = self.next_token();
                if tok.kind == end {
                    self.depth -= 1;
                    stack.pop();
                    holder.raw_set(2 * level - 1, Value::Nil)?;
                    holder.raw_set(2 * level, Value::Nil)?;
                    v = Value::Table(table);
                    continue;
                }
                if tok.kind != Kind::Comma {
                    let expected = if open.object {
                        "comma or object end"
                    } else {
                        "comma or array end"
                    };
                    return Err(parse_error(expected, &tok));
                }
                tok = self.next_token();
                if open.object {
                    holder.raw_set(2 * level, self.member_key(tok)?)?;
                    tok = self.next_token();
                }
                break;
            }
        }
    }

    /// An object member's `"key" :`, starting at `tok`.
    fn member_key(&mut self, tok: Token) -> Result<Value, Fail> {
        if tok.kind != Kind::Str {
            return Err(parse_error("object key string", &tok));
        }
        let key = lstr(self.lua, &tok.text)?;
        let colon = self.next_token();
        if colon.kind != Kind::Colon {
            return Err(parse_error("colon", &colon));
        }
        Ok(key)
    }
}
