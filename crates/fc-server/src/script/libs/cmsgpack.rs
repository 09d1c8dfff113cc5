//! `cmsgpack`: lua-cmsgpack 0.4.0 as shipped in Redis.

use mlua::{Lua, Table, Value};

use super::num::double_to_i64;
use super::{Args, Fail, MAX_C_STACK, Registrar, Ret, as_number, lstr, multi};

/// Tables nested this deep encode as nil.
const MAX_NESTING: u32 = 16;

/// Builds the `cmsgpack` module table.
pub(super) fn module(lua: &Lua, reg: &Registrar) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    reg.add(lua, &t, "pack", pack)?;
    reg.add(lua, &t, "unpack", |lua, a| {
        let s = a.bytes(lua, 1)?;
        unpack_full(lua, &s, 0, 0, a.top())
    })?;
    reg.add(lua, &t, "unpack_one", |lua, a| {
        let offset = a.opt_integer(lua, 2, 0)?;
        let s = a.bytes(lua, 1)?;
        unpack_full(lua, &s, 1, offset, 1)
    })?;
    reg.add(lua, &t, "unpack_limit", |lua, a| {
        let limit = a.integer(lua, 2)?;
        let offset = a.opt_integer(lua, 3, 0)?;
        let s = a.bytes(lua, 1)?;
        unpack_full(lua, &s, limit, offset, 1)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

// ===== Encoding =====

fn pack(lua: &Lua, a: Args) -> Ret {
    if a.top() == 0 {
        return Err(Fail::arg(0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for i in 1..=a.top() {
        encode(&a.value(i), 0, &mut out)?;
    }
    Ok(multi([lstr(lua, out)?]))
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    if !n.is_infinite() && double_to_i64(n) as f64 == n {
        encode_int(double_to_i64(n), out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_bits().to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_bits().to_be_bytes());
    }
}

fn encode_len(n: usize, fix: u8, tag16: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(tag16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(tag16 + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode(v: &Value, level: u32, out: &mut Vec<u8>) -> Result<(), Fail> {
    match v {
        Value::Table(_) if level == MAX_NESTING => out.push(0xc0),
        Value::String(s) => {
            let s = s.as_bytes();
            let len = s.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&s);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => encode_number(as_number(v).unwrap_or(0.0), out),
        Value::Table(t) => {
            if is_array(t)? {
                let len = t.raw_len();
                encode_len(len, 0x90, 0xdc, out);
                for j in 1..=len {
                    let item: Value = t.get(j)?;
                    encode(&item, level + 1, out)?;
                }
            } else {
                let len = t.pairs::<Value, Value>().count();
                encode_len(len, 0x80, 0xde, out);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(&k, level + 1, out)?;
                    encode(&val, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Keys are exactly the integers 1..n (as C `int`s).
fn is_array(t: &Table) -> Result<bool, Fail> {
    let (mut count, mut max) = (0i32, 0i32);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match as_number(&k) {
            Some(n) if n > 0.0 && n <= f64::from(i32::MAX) && n.fract() == 0.0 => n as i32,
            _ => return Ok(false),
        };
        max = max.max(n);
        count = count.wrapping_add(1);
    }
    Ok(max == count)
}

// ===== Decoding =====

enum DecErr {
    Eof,
    BadFmt,
    Fail(Fail),
}

impl From<mlua::Error> for DecErr {
    fn from(e: mlua::Error) -> Self {
        DecErr::Fail(Fail::Host(e))
    }
}

impl From<Fail> for DecErr {
    fn from(f: Fail) -> Self {
        DecErr::Fail(f)
    }
}

/// What the next bytes hold.
enum Item {
    Value(Value),
    /// An array (`true`) or map header and its element count.
    Open(bool, usize),
}

/// An array or map being filled by the decoder. Its table (and a map's
/// pending key) live in a Lua holder table at `2 * level - 1` (and
/// `2 * level`), so deep nesting holds no `mlua` references.
struct OpenTable {
    array: bool,
    /// Elements (arrays) or pairs (maps) still to read.
    left: usize,
    index: usize,
    /// A map's key is waiting for its value.
    has_key: bool,
    used: usize,
}

struct Cursor<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<(), DecErr> {
        if self.left() < n {
            Err(DecErr::Eof)
        } else {
            Ok(())
        }
    }

    fn be(&self, from: usize, n: usize) -> u64 {
        self.data[self.pos + from..self.pos + from + n]
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    }

    fn take(&mut self, hdr: usize, len: usize) -> Result<Value, DecErr> {
        self.need(hdr + len)?;
        let v = lstr(self.lua, &self.data[self.pos + hdr..self.pos + hdr + len])?;
        self.pos += hdr + len;
        Ok(v)
    }

    /// Decodes one value without recursion: open containers wait on a
    /// stack. `used` mirrors the Lua stack size the C decoder has (for its
    /// `luaL_checkstack` limits).
    fn decode(&mut self, used: usize) -> Result<Value, DecErr> {
        let mut stack: Vec<OpenTable> = Vec::new();
        let holder = self.lua.create_table()?;
        loop {
            let at = match stack.last() {
                None => used,
                Some(o) if !o.array && !o.has_key => o.used + 1,
                Some(o) => o.used + 2,
            };
            let mut v = match self.item(at)? {
                Item::Value(v) => v,
                Item::Open(array, len) => {
                    let table = self.lua.create_table()?;
                    if array && at + 2 > MAX_C_STACK {
                        return Err(DecErr::Fail(Fail::error(
                            "stack overflow (in function mp_decode_to_lua_array)",
                        )));
                    }
                    if len > 0 {
                        holder.raw_set(2 * stack.len() + 1, table)?;
                        stack.push(OpenTable {
                            array,
                            left: len,
                            index: 1,
                            has_key: false,
                            used: at,
                        });
                        continue;
                    }
                    Value::Table(table)
                }
            };
            loop {
                let level = stack.len();
                let Some(o) = stack.last_mut() else {
                    return Ok(v);
                };
                let table: Table = holder.raw_get(2 * level - 1)?;
                if o.array {
                    table.raw_set(o.index, v)?;
                    o.index += 1;
                } else if o.has_key {
                    o.has_key = false;
                    let k: Value = holder.raw_get(2 * level)?;
                    holder.raw_set(2 * level, Value::Nil)?;
                    match k {
                        Value::Nil => {
                            return Err(DecErr::Fail(Fail::Plain(b"table index is nil".to_vec())));
                        }
                        Value::Number(n) if n.is_nan() => {
                            return Err(DecErr::Fail(Fail::Plain(b"table index is NaN".to_vec())));
                        }
                        k => table.raw_set(k, v)?,
                    }
                } else {
                    o.has_key = true;
                    holder.raw_set(2 * level, v)?;
                    break;
                }
                o.left -= 1;
                if o.left > 0 {
                    break;
                }
                stack.pop();
                holder.raw_set(2 * level - 1, Value::Nil)?;
                v = Value::Table(table);
            }
        }
    }

    /// One item at the cursor: a value, or the header of an array/map.
    fn item(&mut self, used: usize) -> Result<Item, DecErr> {
        self.need(1)?;
        if used + 1 > MAX_C_STACK {
            return Err(DecErr::Fail(Fail::error(
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            )));
        }
        let tag = self.data[self.pos];
        let num = |v: f64| Value::Number(v);
        let (hdr, v) = match tag {
            0xcc => (2, num(self.sized(2)? as f64)),
            0xd0 => (2, num(f64::from(self.sized(2)? as u8 as i8))),
            0xcd => (3, num(self.sized(3)? as f64)),
            0xd1 => (3, num(f64::from(self.sized(3)? as u16 as i16))),
            0xce => (5, num(self.sized(5)? as f64)),
            0xd2 => (5, num(f64::from(self.sized(5)? as u32 as i32))),
            0xcf => (9, num(self.sized(9)? as i64 as f64)),
            0xd3 => (9, num(self.sized(9)? as i64 as f64)),
            0xc0 => (1, Value::Nil),
            0xc3 => (1, Value::Boolean(true)),
            0xc2 => (1, Value::Boolean(false)),
            0xca => (5, num(f64::from(f32::from_bits(self.sized(5)? as u32)))),
            0xcb => (9, num(f64::from_bits(self.sized(9)?))),
            0xd9 => {
                let l = self.sized(2)? as usize;
                return self.take(2, l).map(Item::Value);
            }
            0xda => {
                let l = self.sized(3)? as usize;
                return self.take(3, l).map(Item::Value);
            }
            0xdb => {
                let l = self.sized(5)? as usize;
                return self.take(5, l).map(Item::Value);
            }
            0xdc | 0xde => {
                let l = self.sized(3)? as usize;
                self.pos += 3;
                return Ok(Item::Open(tag == 0xdc, l));
            }
            0xdd | 0xdf => {
                let l = self.sized(5)? as usize;
                self.pos += 5;
                return Ok(Item::Open(tag == 0xdd, l));
            }
            t if t & 0x80 == 0 => (1, num(f64::from(t))),
            t if t & 0xe0 == 0xe0 => (1, num(f64::from(t as i8))),
            t if t & 0xe0 == 0xa0 => return self.take(1, usize::from(t & 0x1f)).map(Item::Value),
            t if t & 0xf0 == 0x90 || t & 0xf0 == 0x80 => {
                self.pos += 1;
                return Ok(Item::Open(t & 0xf0 == 0x90, usize::from(t & 0xf)));
            }
            _ => return Err(DecErr::BadFmt),
        };
        self.pos += hdr;
        Ok(Item::Value(v))
    }

    /// The big-endian number in bytes 1..n of the item at the cursor.
    fn sized(&self, n: usize) -> Result<u64, DecErr> {
        self.need(n)?;
        Ok(self.be(1, n - 1))
    }
}

/// `mp_unpack_full`; `base` is the Lua stack size before decoding.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64, base: usize) -> Ret {
    let len = s.len();
    if offset < 0 || limit < 0 {
        return Err(Fail::error(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    if offset as u64 > len as u64 {
        return Err(Fail::error(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut c = Cursor {
        lua,
        data: s,
        pos: offset as usize,
    };
    let mut out = super::Results::new(lua)?;
    if !decode_all {
        // Room for the next offset, returned first.
        out.push(Value::Nil)?;
    }
    let mut cnt: i64 = 0;
    while c.left() > 0 && cnt < limit {
        match c.decode(base + cnt as usize) {
            Ok(v) => out.push(v)?,
            Err(DecErr::Eof) => return Err(Fail::error("Missing bytes in input.")),
            Err(DecErr::BadFmt) => return Err(Fail::error("Bad data format in input.")),
            Err(DecErr::Fail(f)) => return Err(f),
        }
        cnt += 1;
    }
    if !decode_all {
        let next = if c.left() == 0 {
            -1
        } else {
            (len - c.left()) as i64
        };
        out.set(1, Value::Integer(next))?;
    }
    out.finish()
}
