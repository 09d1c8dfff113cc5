//! A command's reply as the Lua value `redis.call` returns, with Redis's rules for the
//! script's protocol (`redis.setresp`, 2 by default).
//!
//! The conversion drives a [`Builder`], a small stack machine, so that the same rules serve
//! both ways of making Lua values: [`Values`] (mlua's safe API, the default) and, with the
//! `unsafe` feature, values pushed straight onto the interpreter's stack (`raw.rs`).

use mlua::{Lua, Table, Value};

use crate::reply::{Replies, Token};

/// Makes Lua values on a stack: each call pushes one value, or pops values into the table
/// under them.
pub(crate) trait Builder {
    fn string(&mut self, bytes: &[u8]);
    fn integer(&mut self, n: i64);
    fn number(&mut self, n: f64);
    fn boolean(&mut self, b: bool);
    fn nil(&mut self);
    /// Pushes a new table sized for `narr` array and `nrec` other entries.
    fn table(&mut self, narr: usize, nrec: usize);
    /// Pops a value into the table under it, at index `i`.
    fn set_index(&mut self, i: usize);
    /// Pops a key and its value (the key pushed first) into the table under them; a key
    /// Lua cannot index by (nil, NaN) is dropped with its value.
    fn set_pair(&mut self);
    /// Pushes `{field = text}` (a status, an error, a big number).
    fn status(&mut self, field: &str, text: &[u8]) {
        self.table(0, 1);
        self.string(field.as_bytes());
        self.string(text);
        self.set_pair();
    }
}

/// Pushes the value of a command's reply (a handler writes one value; none: `false`).
pub(crate) fn push<B: Builder>(b: &mut B, replies: &Replies, resp3: bool) {
    let tokens = replies.tokens();
    if tokens.is_empty() {
        return b.boolean(false);
    }
    let mut at = 0;
    convert(b, replies, tokens, &mut at, resp3);
}

/// `{field = text}` (`ok`, `err`, `big_number`).
fn status<B: Builder>(b: &mut B, field: &str, text: &[u8]) {
    b.status(field, text);
}

/// Pushes `n` values as a new array.
fn array<B: Builder>(
    b: &mut B,
    replies: &Replies,
    tokens: &[Token],
    at: &mut usize,
    n: usize,
    resp3: bool,
) {
    b.table(n, 0);
    for i in 1..=n {
        convert(b, replies, tokens, at, resp3);
        b.set_index(i);
    }
}

fn convert<B: Builder>(
    b: &mut B,
    replies: &Replies,
    tokens: &[Token],
    at: &mut usize,
    resp3: bool,
) {
    let Some(token) = tokens.get(*at) else {
        return b.nil();
    };
    *at += 1;
    match token {
        Token::Simple(r) => status(b, "ok", replies.bytes(r)),
        Token::Error(r) => status(b, "err", replies.bytes(r)),
        Token::Integer(n) => b.integer(*n),
        Token::Bulk(r) => b.string(replies.bytes(r)),
        Token::Null | Token::NullArray => {
            if resp3 {
                b.nil();
            } else {
                b.boolean(false);
            }
        }
        Token::Array(n) => array(b, replies, tokens, at, *n, resp3),
        // RESP2: a flat array of keys and values; RESP3: `{map = {k = v}}`.
        // Built as Redis builds them (an empty table filled in reply order): a map or set
        // converted back iterates in the same (hash) order as Redis's.
        Token::Map(n) | Token::Keyed(n) if resp3 => {
            b.table(0, 1);
            b.string(b"map");
            b.table(0, 0);
            for _ in 0..*n {
                skip_entry(tokens, at);
                convert(b, replies, tokens, at, resp3);
                convert(b, replies, tokens, at, resp3);
                b.set_pair();
            }
            b.set_pair();
        }
        Token::Map(n) => array(b, replies, tokens, at, n * 2, resp3),
        // RESP2: an array of `[key, value]` pairs.
        Token::Keyed(n) => {
            b.table(*n, 0);
            for i in 1..=*n {
                skip_entry(tokens, at);
                array(b, replies, tokens, at, 2, resp3);
                b.set_index(i);
            }
        }
        Token::Set(n) if resp3 => {
            b.table(0, 1);
            b.string(b"set");
            b.table(0, 0);
            for _ in 0..*n {
                convert(b, replies, tokens, at, resp3);
                b.boolean(true);
                b.set_pair();
            }
            b.set_pair();
        }
        Token::Set(n) => array(b, replies, tokens, at, *n, resp3),
        // `ZRANGE ... WITHSCORES`: RESP2 flat, RESP3 an array of pairs.
        Token::Pairs(n) if resp3 => {
            b.table(*n, 0);
            for i in 1..=*n {
                skip_pair(tokens, at);
                array(b, replies, tokens, at, 2, resp3);
                b.set_index(i);
            }
        }
        Token::Pairs(n) => {
            b.table(n * 2, 0);
            for i in 1..=n * 2 {
                skip_pair(tokens, at);
                convert(b, replies, tokens, at, resp3);
                b.set_index(i);
            }
        }
        Token::Pair | Token::KeyedEntry => convert(b, replies, tokens, at, resp3),
        Token::Double(v) => double(b, *v, resp3),
        Token::DoubleText(r) => {
            let text = replies.bytes(r);
            if resp3 {
                let v = std::str::from_utf8(text)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0);
                double(b, v, true);
            } else {
                b.string(text);
            }
        }
        Token::Boolean(v) => {
            if resp3 {
                b.boolean(*v);
            } else {
                b.integer(i64::from(*v));
            }
        }
        Token::BigNumber(r) => {
            if resp3 {
                status(b, "big_number", replies.bytes(r));
            } else {
                b.string(replies.bytes(r));
            }
        }
        Token::Verbatim(format, r) => {
            if resp3 {
                b.table(0, 1);
                b.string(b"verbatim_string");
                b.table(0, 2);
                b.string(b"format");
                b.string(format);
                b.set_pair();
                b.string(b"string");
                b.string(replies.bytes(r));
                b.set_pair();
                b.set_pair();
            } else {
                b.string(replies.bytes(r));
            }
        }
    }
}

/// Skips a `KeyedEntry` marker before a keyed entry.
fn skip_entry(tokens: &[Token], at: &mut usize) {
    if matches!(tokens.get(*at), Some(Token::KeyedEntry)) {
        *at += 1;
    }
}

/// Skips a `Pair` marker before a pair.
fn skip_pair(tokens: &[Token], at: &mut usize) {
    if matches!(tokens.get(*at), Some(Token::Pair)) {
        *at += 1;
    }
}

fn double<B: Builder>(b: &mut B, v: f64, resp3: bool) {
    if resp3 {
        b.table(0, 1);
        b.string(b"double");
        b.number(v);
        b.set_pair();
    } else {
        let mut buf = [0; fc_resp::number::MAX_DOUBLE_LEN];
        b.string(fc_resp::number::format_double(v, &mut buf));
    }
}

/// [`Builder`] over mlua's safe API: the values on a `Vec`, the first failure kept.
pub(crate) struct Values<'l> {
    lua: &'l Lua,
    stack: Vec<Value>,
    failed: Option<mlua::Error>,
}

impl<'l> Values<'l> {
    pub(crate) fn new(lua: &'l Lua) -> Self {
        Self {
            lua,
            stack: Vec::new(),
            failed: None,
        }
    }

    /// The value built (the last pushed), or the first failure.
    pub(crate) fn finish(mut self) -> mlua::Result<Value> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.stack.pop().unwrap_or(Value::Nil)),
        }
    }

    fn keep(&mut self, made: mlua::Result<Value>) {
        match made {
            Ok(v) => self.stack.push(v),
            Err(e) => {
                self.failed.get_or_insert(e);
                self.stack.push(Value::Nil);
            }
        }
    }

    /// The table on top of the stack once `n` values are popped.
    fn table_under(&mut self, n: usize) -> Option<Table> {
        let at = self.stack.len().checked_sub(n + 1)?;
        match &self.stack[at] {
            Value::Table(t) => Some(t.clone()),
            _ => None,
        }
    }

    fn fail(&mut self, made: mlua::Result<()>) {
        if let Err(e) = made {
            self.failed.get_or_insert(e);
        }
    }
}

impl Builder for Values<'_> {
    fn string(&mut self, bytes: &[u8]) {
        let made = self.lua.create_string(bytes).map(Value::String);
        self.keep(made);
    }
    fn integer(&mut self, n: i64) {
        self.stack.push(Value::Integer(n));
    }
    fn number(&mut self, n: f64) {
        self.stack.push(Value::Number(n));
    }
    fn boolean(&mut self, b: bool) {
        self.stack.push(Value::Boolean(b));
    }
    fn nil(&mut self) {
        self.stack.push(Value::Nil);
    }
    fn table(&mut self, narr: usize, nrec: usize) {
        let made = self
            .lua
            .create_table_with_capacity(narr, nrec)
            .map(Value::Table);
        self.keep(made);
    }
    fn set_index(&mut self, i: usize) {
        let table = self.table_under(1);
        let v = self.stack.pop().unwrap_or(Value::Nil);
        if let Some(t) = table {
            let made = t.raw_set(i, v);
            self.fail(made);
        }
    }
    fn set_pair(&mut self) {
        let table = self.table_under(2);
        let v = self.stack.pop().unwrap_or(Value::Nil);
        let k = self.stack.pop().unwrap_or(Value::Nil);
        let indexable = match &k {
            Value::Nil => false,
            Value::Number(n) => !n.is_nan(),
            _ => true,
        };
        if let (Some(t), true) = (table, indexable) {
            let made = t.raw_set(k, v);
            self.fail(made);
        }
    }
}

/// The Lua value of a command's reply, through mlua's safe API.
pub(crate) fn to_lua(lua: &Lua, replies: &Replies, resp3: bool) -> mlua::Result<Value> {
    let mut values = Values::new(lua);
    push(&mut values, replies, resp3);
    values.finish()
}
