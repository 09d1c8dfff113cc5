//! Streams: `XADD`, `XRANGE`, `XREVRANGE`, `XLEN`, `XDEL`, `XTRIM`, `XSETID`, `XACK`,
//! `XPENDING`, `XCLAIM`, `XAUTOCLAIM`, the `XGROUP` and `XINFO` containers, and the per-key
//! steps of `XREAD`/`XREADGROUP` (which run as blocking commands: `crate::blocking`).
//!
//! Arguments are checked in Redis's order (some commands parse before the key is looked up,
//! some after), each error with Redis's text. Ids print as `ms-seq`.

use bytes::Bytes;
use fc_shard::{
    GroupReadFrom, GroupStart, StoreError, Stream, StreamEntry, StreamError, StreamFields,
    StreamGroup, StreamId, StreamTrim, TrimStrategy, XAddId, XAddOptions, XClaimOptions,
};

use fc_resp::number::parse_i64;

use super::{Ctx, count};
use crate::reply::Reply;

const INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";

/// Redis's `string2ull`: a 64-bit unsigned number (leading spaces and a `+` accepted, as
/// `strtoull` accepts them).
fn parse_u64(text: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(text) {
        return u64::try_from(n).ok();
    }
    let text = match text.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b)) {
        Some(start) => &text[start..],
        None => return None,
    };
    let digits = text.strip_prefix(b"+").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// An id as Redis's `streamGenericParseIDOrReply` reads it: `-`/`+` unless `strict`, `ms` (the
/// sequence `missing_seq`), `ms-seq`; with `auto_seq`, `ms-*` gives `Err(Some(ms))`.
fn parse_id_with(
    text: &[u8],
    missing_seq: u64,
    strict: bool,
) -> Result<(StreamId, bool), &'static [u8]> {
    if text.len() > 127 {
        return Err(INVALID_ID);
    }
    if !strict && text == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if !strict && text == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms, seq) = match text.iter().position(|&b| b == b'-') {
        Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
        None => (text, None),
    };
    let ms = parse_u64(ms).ok_or(INVALID_ID)?;
    match seq {
        Some(b"*") => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, parse_u64(seq).ok_or(INVALID_ID)?), true)),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// A strict id (`ms` or `ms-seq`; `ms-*` is refused).
fn strict_id(text: &[u8]) -> Result<StreamId, &'static [u8]> {
    match parse_id_with(text, 0, true)? {
        (id, true) => Ok(id),
        (_, false) => Err(INVALID_ID),
    }
}

/// One end of a range (`XRANGE`, `XPENDING`, `XAUTOCLAIM`): `-`, `+`, an id (the sequence
/// `missing_seq` when absent), or `(id` (exclusive, strict).
fn interval_id(text: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static [u8]> {
    if text.len() > 1 && text[0] == b'(' {
        let id = match parse_id_with(&text[1..], missing_seq, true)? {
            (id, true) => id,
            (_, false) => return Err(INVALID_ID),
        };
        return Ok((id, true));
    }
    match parse_id_with(text, missing_seq, false)? {
        (id, true) => Ok((id, false)),
        (_, false) => Err(INVALID_ID),
    }
}

/// The start of a range, an exclusive one moved past its id.
fn range_start(text: &[u8]) -> Result<StreamId, &'static [u8]> {
    match interval_id(text, 0)? {
        (id, true) => id.next().ok_or(b"ERR invalid start ID for the interval"),
        (id, false) => Ok(id),
    }
}

/// The end of a range, an exclusive one moved before its id.
fn range_end(text: &[u8]) -> Result<StreamId, &'static [u8]> {
    match interval_id(text, u64::MAX)? {
        (id, true) => id.prev().ok_or(b"ERR invalid end ID for the interval"),
        (id, false) => Ok(id),
    }
}

fn id_text(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

fn write_id<R: Reply>(out: &mut R, id: StreamId) {
    out.bulk(&id_text(id));
}

/// `[id, [field, value, ...]]`.
fn write_entry<R: Reply>(out: &mut R, id: StreamId, fields: StreamFields<'_>) {
    out.array_len(2);
    write_id(out, id);
    out.array_len(fields.len());
    for f in fields {
        out.bulk(f);
    }
}

/// A copied entry: `[id, [fields]]`, or `[id, nil]` for a deleted one.
fn write_copied<R: Reply>(out: &mut R, entry: &StreamEntry) {
    out.array_len(2);
    write_id(out, entry.0);
    match &entry.1 {
        Some(fields) => super::bulk_array(out, fields),
        None => out.null_array(),
    }
}

fn write_copied_entries<R: Reply>(out: &mut R, entries: &[StreamEntry]) {
    out.array_len(entries.len());
    for e in entries {
        write_copied(out, e);
    }
}

fn nogroup<R: Reply>(out: &mut R, key: &[u8], group: &[u8]) {
    let mut text = b"NOGROUP No such key '".to_vec();
    text.extend_from_slice(super::user_key(key));
    text.extend_from_slice(b"' or consumer group '");
    text.extend_from_slice(group);
    text.push(b'\'');
    out.error(&text);
}

fn nogroup_named<R: Reply>(out: &mut R, key: &[u8], group: &[u8]) {
    let mut text = b"NOGROUP No such consumer group '".to_vec();
    text.extend_from_slice(group);
    text.extend_from_slice(b"' for key name '");
    text.extend_from_slice(super::user_key(key));
    text.push(b'\'');
    out.error(&text);
}

/// Replies with a store error, `NOGROUP` worded by `nogroup`.
fn stream_error<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    err: &StoreError,
    nogroup: fn(&mut R, &[u8], &[u8]),
    group: usize,
) {
    if *err == StoreError::Stream(StreamError::NoGroup) {
        // The key is the argument before the group (`XGROUP SETID key group`, `XCLAIM key group`).
        let (key, group) = (ctx.args[group - 1].clone(), ctx.args[group].clone());
        return nogroup(ctx.out, &key, &group);
    }
    ctx.store_error(err);
}

// ----- XADD / XTRIM ------------------------------------------------------------------------------

/// What `XADD`/`XTRIM` read before the id (or the end).
struct AddOrTrim {
    trim: Option<StreamTrim>,
    no_mkstream: bool,
    /// Where the id is (`XADD`).
    id_at: usize,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`.
fn add_or_trim_args(args: &[Bytes], xadd: bool) -> Result<AddOrTrim, Vec<u8>> {
    let mut strategy = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut no_mkstream = false;
    let mut i = 2;
    let argc = args.len();
    while i < argc {
        let more = argc - 1 - i;
        let opt = &args[i];
        if xadd && &opt[..] == b"*" {
            break;
        }
        let is = |w: &str| opt.eq_ignore_ascii_case(w.as_bytes());
        if (is("maxlen") || is("minid")) && more > 0 {
            if strategy.is_some() {
                return Err(b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible".to_vec());
            }
            approx = false;
            let next = &args[i + 1];
            if more >= 2 && &next[..] == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && &next[..] == b"=" {
                i += 1;
            }
            let arg = &args[i + 1];
            strategy = Some(if is("maxlen") {
                let n = parse_i64(arg)
                    .ok_or(b"ERR value is not an integer or out of range".to_vec())?;
                if n < 0 {
                    return Err(b"ERR The MAXLEN argument must be >= 0.".to_vec());
                }
                TrimStrategy::MaxLen(n as u64)
            } else {
                TrimStrategy::MinId(strict_id(arg).map_err(<[u8]>::to_vec)?)
            });
            i += 2;
        } else if is("limit") && more > 0 {
            let n = parse_i64(&args[i + 1])
                .ok_or(b"ERR value is not an integer or out of range".to_vec())?;
            if n < 0 {
                return Err(b"ERR The LIMIT argument must be >= 0.".to_vec());
            }
            limit = Some(n);
            i += 2;
        } else if xadd && is("nomkstream") {
            no_mkstream = true;
            i += 1;
        } else if xadd {
            break;
        } else {
            return Err(b"ERR syntax error".to_vec());
        }
    }
    if limit.is_some_and(|n| n != 0) && strategy.is_none() {
        return Err(
            b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
                .to_vec(),
        );
    }
    if !xadd && strategy.is_none() {
        return Err(b"ERR syntax error, XTRIM must be called with a trimming strategy".to_vec());
    }
    let limit = match limit {
        Some(_) if !approx => {
            return Err(
                b"ERR syntax error, LIMIT cannot be used without the special ~ option".to_vec(),
            );
        }
        Some(n) => n as u64,
        // Redis's default for `~`: 100 × stream-node-max-entries.
        None if approx => 10_000,
        None => 0,
    };
    Ok(AddOrTrim {
        trim: strategy.map(|strategy| StreamTrim {
            strategy,
            approx,
            limit,
        }),
        no_mkstream,
        id_at: i,
    })
}

pub(super) fn xadd<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let parsed = match add_or_trim_args(ctx.args, true) {
        Ok(p) => p,
        Err(text) => return ctx.out.error(&text),
    };
    let at = parsed.id_at;
    if at >= ctx.args.len() {
        return super::wrong_arity(&ctx.args[0], ctx.out);
    }
    let id = if &ctx.args[at][..] == b"*" {
        XAddId::Auto
    } else {
        match parse_id_with(&ctx.args[at], 0, true) {
            Ok((id, true)) => XAddId::Explicit(id),
            Ok((id, false)) => XAddId::AutoSeq(id.ms),
            Err(text) => return ctx.out.error(text),
        }
    };
    let fields = &ctx.args[at + 1..];
    if fields.len() < 2 || !fields.len().is_multiple_of(2) {
        return super::wrong_arity(&ctx.args[0], ctx.out);
    }
    let fields: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    let options = XAddOptions {
        no_mkstream: parsed.no_mkstream,
        trim: parsed.trim,
    };
    let r = ctx.store.xadd(&ctx.args[1], id, &fields, options);
    ctx.reply(r, |out, id| match id {
        Some(id) => write_id(out, id),
        None => out.null(),
    });
}

pub(super) fn xtrim<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let parsed = match add_or_trim_args(ctx.args, false) {
        Ok(p) => p,
        Err(text) => return ctx.out.error(&text),
    };
    let Some(trim) = parsed.trim else {
        return ctx.syntax_error();
    };
    let r = ctx.store.xtrim(&ctx.args[1], trim);
    ctx.reply(r, count);
}

// ----- reads -------------------------------------------------------------------------------------

/// `XRANGE key start end [COUNT n]` and `XREVRANGE key end start [COUNT n]`.
fn range<R: Reply>(ctx: &mut Ctx<'_, R>, rev: bool) {
    let (start_at, end_at) = if rev { (3, 2) } else { (2, 3) };
    let start = match range_start(&ctx.args[start_at]) {
        Ok(id) => id,
        Err(text) => return ctx.out.error(text),
    };
    let end = match range_end(&ctx.args[end_at]) {
        Ok(id) => id,
        Err(text) => return ctx.out.error(text),
    };
    let mut limit: Option<usize> = None;
    let mut i = 4;
    while i < ctx.args.len() {
        if ctx.is(i, "count") && i + 1 < ctx.args.len() {
            let Some(n) = ctx.int(i + 1) else {
                return;
            };
            limit = Some(n.max(0) as usize);
            i += 2;
        } else {
            return ctx.syntax_error();
        }
    }
    let out = &mut *ctx.out;
    let mut found = false;
    let r = ctx.store.stream_read(&ctx.args[1], &mut |s: &Stream| {
        found = true;
        if limit == Some(0) {
            return out.null_array();
        }
        let n = limit.unwrap_or(usize::MAX);
        let mark = out.array_deferred();
        let mut written = 0;
        let entries: Box<dyn Iterator<Item = _>> = if rev {
            Box::new(s.range(start, end).rev())
        } else {
            Box::new(s.range(start, end))
        };
        for (id, fields) in entries.take(n) {
            if out.full() {
                break;
            }
            write_entry(out, id, fields);
            written += 1;
        }
        out.array_fill(mark, written);
    });
    match r {
        Ok(true) => {}
        Ok(false) => ctx.out.array_len(0),
        Err(e) => ctx.store_error(&e),
    }
}

pub(super) fn xrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    range(ctx, false);
}

pub(super) fn xrevrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    range(ctx, true);
}

pub(super) fn xlen<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut len = 0;
    let r = ctx.store.stream_read(&ctx.args[1], &mut |s| len = s.len());
    ctx.reply(r, |out, _| count(out, len));
}

// ----- XDEL / XSETID -----------------------------------------------------------------------------

/// Parses every argument from `from` as a strict id.
fn strict_ids(args: &[Bytes]) -> Result<Vec<StreamId>, &'static [u8]> {
    args.iter().map(|a| strict_id(a)).collect()
}

pub(super) fn xdel<R: Reply>(ctx: &mut Ctx<'_, R>) {
    // The key first (a missing one answers 0 whatever the ids), then every id.
    let mut exists = false;
    if let Err(e) = ctx.store.stream_read(&ctx.args[1], &mut |_| exists = true) {
        return ctx.store_error(&e);
    }
    if !exists {
        return ctx.out.integer(0);
    }
    let ids = match strict_ids(&ctx.args[2..]) {
        Ok(ids) => ids,
        Err(text) => return ctx.out.error(text),
    };
    let r = ctx.store.xdel(&ctx.args[1], &ids);
    ctx.reply(r, count);
}

pub(super) fn xsetid<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let id = match strict_id(&ctx.args[2]) {
        Ok(id) => id,
        Err(text) => return ctx.out.error(text),
    };
    let mut entries_added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < ctx.args.len() {
        let more = i + 1 < ctx.args.len();
        if ctx.is(i, "entriesadded") && more {
            let Some(n) = ctx.int(i + 1) else {
                return;
            };
            if n < 0 {
                return ctx.out.error(b"ERR entries_added must be positive");
            }
            entries_added = Some(n as u64);
        } else if ctx.is(i, "maxdeletedid") && more {
            let max = match strict_id(&ctx.args[i + 1]) {
                Ok(max) => max,
                Err(text) => return ctx.out.error(text),
            };
            if id < max {
                return ctx.out.error(
                    b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                );
            }
            max_deleted = Some(max);
        } else {
            return ctx.syntax_error();
        }
        i += 2;
    }
    let r = ctx
        .store
        .xsetid(&ctx.args[1], id, entries_added, max_deleted);
    ctx.reply(r, |out, ()| out.ok());
}

// ----- groups ------------------------------------------------------------------------------------

pub(super) fn xack<R: Reply>(ctx: &mut Ctx<'_, R>) {
    // A missing key or group acknowledges nothing, whatever the ids.
    let mut has_group = false;
    let group = &ctx.args[2];
    if let Err(e) = ctx
        .store
        .stream_read(&ctx.args[1], &mut |s| has_group = s.group(group).is_some())
    {
        return ctx.store_error(&e);
    }
    if !has_group {
        return ctx.out.integer(0);
    }
    let ids = match strict_ids(&ctx.args[3..]) {
        Ok(ids) => ids,
        Err(text) => return ctx.out.error(text),
    };
    let r = ctx.store.xack(&ctx.args[1], &ctx.args[2], &ids);
    ctx.reply(r, count);
}

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP`, on the key's owner (the
/// subcommand's arity was checked by the table).
pub(super) fn xgroup<R: Reply>(ctx: &mut Ctx<'_, R>) {
    const HELP: &[&[u8]] = &[
        b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"CREATE <key> <groupname> <id|$> [option]",
        b"    Create a new consumer group. Options are:",
        b"    * MKSTREAM",
        b"      Create the empty stream if it does not exist.",
        b"    * ENTRIESREAD entries_read",
        b"      Set the group's entries_read counter (internal use).",
        b"CREATECONSUMER <key> <groupname> <consumer>",
        b"    Create a new consumer in the specified group.",
        b"DELCONSUMER <key> <groupname> <consumer>",
        b"    Remove the specified consumer.",
        b"DESTROY <key> <groupname>",
        b"    Remove the specified group.",
        b"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        b"    Set the current group ID and entries_read counter.",
        b"HELP",
        b"    Prints this help.",
    ];
    let sub = ctx.args[1].to_ascii_lowercase();
    if sub == b"help" {
        return super::help(ctx.out, HELP);
    }
    // Redis's CREATE and SETID read their options first.
    let mut mkstream = false;
    let mut entries_read = None;
    if sub == b"create" || sub == b"setid" {
        let mut i = 5;
        while i < ctx.args.len() {
            if sub == b"create" && ctx.is(i, "mkstream") {
                mkstream = true;
                i += 1;
            } else if ctx.is(i, "entriesread") && i + 1 < ctx.args.len() {
                let Some(n) = ctx.int(i + 1) else {
                    return;
                };
                if n < 0 && n != -1 {
                    return ctx
                        .out
                        .error(b"ERR value for ENTRIESREAD must be positive or -1");
                }
                entries_read = Some(n);
                i += 2;
            } else {
                let text = format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
                    String::from_utf8_lossy(&ctx.args[1])
                );
                return ctx.out.error(text.as_bytes());
            }
        }
    }
    let (key, group) = (ctx.args[2].clone(), ctx.args[3].clone());
    // The key and its type, then the group (Redis's order for every subcommand).
    let mut exists = false;
    let mut has_group = false;
    if let Err(e) = ctx.store.stream_read(&key, &mut |s| {
        exists = true;
        has_group = s.group(&group).is_some();
    }) {
        return ctx.store_error(&e);
    }
    let start = || -> Result<GroupStart, &'static [u8]> {
        if &ctx.args[4][..] == b"$" {
            Ok(GroupStart::Last)
        } else {
            strict_id(&ctx.args[4]).map(GroupStart::Id)
        }
    };
    match sub.as_slice() {
        _ if !exists && !mkstream => {
            ctx.out.error(b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
        }
        b"create" => {
            let start = match start() {
                Ok(s) => s,
                Err(text) => return ctx.out.error(text),
            };
            let r = ctx
                .store
                .xgroup_create(&key, &group, start, mkstream, entries_read);
            ctx.reply(r, |out, ()| out.ok());
        }
        b"setid" | b"createconsumer" | b"delconsumer" if !has_group => {
            nogroup_named(ctx.out, &key, &group);
        }
        b"setid" => {
            let start = match start() {
                Ok(s) => s,
                Err(text) => return ctx.out.error(text),
            };
            let r = ctx.store.xgroup_setid(&key, &group, start, entries_read);
            match r {
                Ok(()) => ctx.out.ok(),
                Err(e) => stream_error(ctx, &e, nogroup_named, 3),
            }
        }
        b"destroy" => {
            let r = ctx.store.xgroup_destroy(&key, &group);
            ctx.reply(r, |out, gone| out.integer(i64::from(gone)));
        }
        b"createconsumer" => {
            let r = ctx.store.xgroup_createconsumer(&key, &group, &ctx.args[4]);
            match r {
                Ok(created) => ctx.out.integer(i64::from(created)),
                Err(e) => stream_error(ctx, &e, nogroup_named, 3),
            }
        }
        b"delconsumer" => {
            let r = ctx.store.xgroup_delconsumer(&key, &group, &ctx.args[4]);
            match r {
                Ok(n) => ctx.out.integer(n as i64),
                Err(e) => stream_error(ctx, &e, nogroup_named, 3),
            }
        }
        _ => super::unknown_subcommand(ctx.out, "XGROUP", &ctx.args[1]),
    }
}

/// `XPENDING key group [[IDLE min-idle] start end count [consumer]]`.
pub(super) fn xpending<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let argc = ctx.args.len();
    let extended = argc > 3;
    let mut idle: u64 = 0;
    let mut at = 3;
    let (mut start, mut end, mut n, mut consumer) = (StreamId::MIN, StreamId::MAX, 0usize, None);
    if extended {
        if argc < 6 {
            return ctx.syntax_error();
        }
        if ctx.is(3, "idle") {
            let Some(v) = ctx.int(4) else {
                return;
            };
            idle = v.max(0) as u64;
            at = 5;
            if argc < 8 {
                return ctx.syntax_error();
            }
        }
        if argc > at + 4 {
            return ctx.syntax_error();
        }
        start = match range_start(&ctx.args[at]) {
            Ok(id) => id,
            Err(text) => return ctx.out.error(text),
        };
        end = match range_end(&ctx.args[at + 1]) {
            Ok(id) => id,
            Err(text) => return ctx.out.error(text),
        };
        let Some(c) = ctx.int(at + 2) else {
            return;
        };
        n = c.max(0) as usize;
        consumer = ctx.args.get(at + 3).cloned();
    }
    let now = ctx.store.clock().now_ms();
    let out = &mut *ctx.out;
    let group_name = &ctx.args[2];
    let mut group_found = false;
    let r = ctx.store.stream_read(&ctx.args[1], &mut |s: &Stream| {
        let Some(g) = s.group(group_name) else {
            return;
        };
        group_found = true;
        if !extended {
            let pel = g.pel();
            let (Some(first), Some(last)) = (pel.keys().next(), pel.keys().next_back()) else {
                out.array_len(4);
                out.integer(0);
                out.null();
                out.null();
                out.null_array();
                return;
            };
            out.array_len(4);
            out.integer(pel.len() as i64);
            write_id(out, *first);
            write_id(out, *last);
            let owners: Vec<(&[u8], usize)> = g
                .consumers()
                .map(|(name, c)| (name, c.pending().len()))
                .filter(|(_, n)| *n > 0)
                .collect();
            out.array_len(owners.len());
            for (name, n) in owners {
                out.array_len(2);
                out.bulk(name);
                out.bulk(n.to_string().as_bytes());
            }
            return;
        }
        let mark = out.array_deferred();
        let mut written = 0;
        if start <= end && n > 0 {
            let matching = |(id, p): &(&StreamId, &fc_shard::PendingEntry)| {
                now.saturating_sub(p.delivery_ms()) >= idle
                    && consumer.as_ref().is_none_or(|c| p.consumer() == &c[..])
                    && **id >= start
            };
            let ids: Box<dyn Iterator<Item = (&StreamId, &fc_shard::PendingEntry)>> =
                match &consumer {
                    Some(c) => match g.consumer(c) {
                        Some(own) => Box::new(
                            own.pending()
                                .range(start..=end)
                                .filter_map(|id| g.pel().get_key_value(id)),
                        ),
                        None => Box::new(std::iter::empty()),
                    },
                    None => Box::new(g.pel().range(start..=end)),
                };
            for (id, p) in ids.filter(|e| matching(e)).take(n) {
                out.array_len(4);
                write_id(out, *id);
                out.bulk(p.consumer());
                out.integer(now.saturating_sub(p.delivery_ms()) as i64);
                out.integer(p.delivery_count() as i64);
                written += 1;
            }
        }
        out.array_fill(mark, written);
    });
    match r {
        Ok(_) if group_found => {}
        Ok(_) => nogroup(ctx.out, &ctx.args[1], &ctx.args[2]),
        Err(e) => ctx.store_error(&e),
    }
}

/// `XCLAIM key group consumer min-idle-time id... [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
/// [JUSTID] [LASTID id]`.
pub(super) fn xclaim<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (key, group) = (ctx.args[1].clone(), ctx.args[2].clone());
    // The key, its type and the group first.
    let mut has_group = false;
    if let Err(e) = ctx
        .store
        .stream_read(&key, &mut |s| has_group = s.group(&group).is_some())
    {
        return ctx.store_error(&e);
    }
    if !has_group {
        return nogroup(ctx.out, &key, &group);
    }
    let Some(min_idle) = parse_i64(&ctx.args[4]) else {
        return ctx
            .out
            .error(b"ERR Invalid min-idle-time argument for XCLAIM");
    };
    let mut i = 5;
    let mut ids = Vec::new();
    while i < ctx.args.len() {
        match strict_id(&ctx.args[i]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        i += 1;
    }
    let now = ctx.store.clock().now_ms() as i64;
    let mut options = XClaimOptions::default();
    while i < ctx.args.len() {
        let more = i + 1 < ctx.args.len();
        let number = |ctx: &mut Ctx<'_, R>, what: &str| -> Option<i64> {
            let n = parse_i64(&ctx.args[i + 1]);
            if n.is_none() {
                let text = format!("ERR Invalid {what} option argument for XCLAIM");
                ctx.out.error(text.as_bytes());
            }
            n
        };
        if ctx.is(i, "force") {
            options.force = true;
        } else if ctx.is(i, "justid") {
            options.just_id = true;
        } else if ctx.is(i, "idle") && more {
            let Some(n) = number(ctx, "IDLE") else {
                return;
            };
            options.delivery_ms = Some(now.saturating_sub(n));
            i += 1;
        } else if ctx.is(i, "time") && more {
            let Some(n) = number(ctx, "TIME") else {
                return;
            };
            options.delivery_ms = Some(n);
            i += 1;
        } else if ctx.is(i, "retrycount") && more {
            let Some(n) = number(ctx, "RETRYCOUNT") else {
                return;
            };
            options.retry_count = u64::try_from(n).ok();
            i += 1;
        } else if ctx.is(i, "lastid") && more {
            match strict_id(&ctx.args[i + 1]) {
                Ok(id) => options.last_id = Some(id),
                Err(text) => return ctx.out.error(text),
            }
            i += 1;
        } else {
            let mut text = b"ERR Unrecognized XCLAIM option '".to_vec();
            text.extend_from_slice(&ctx.args[i]);
            text.push(b'\'');
            return ctx.out.error(&text);
        }
        i += 1;
    }
    let r = ctx.store.xclaim(
        &key,
        &group,
        &ctx.args[3],
        min_idle.max(0) as u64,
        &ids,
        options,
    );
    match r {
        Ok(claimed) => {
            ctx.out.array_len(claimed.len());
            for e in &claimed {
                if options.just_id {
                    write_id(ctx.out, e.0);
                } else {
                    write_copied(ctx.out, e);
                }
            }
        }
        Err(e) => stream_error(ctx, &e, nogroup, 2),
    }
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`.
pub(super) fn xautoclaim<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (key, group) = (ctx.args[1].clone(), ctx.args[2].clone());
    // The key's type and group are judged after the arguments, as Redis does.
    let mut has_group = false;
    let looked = ctx
        .store
        .stream_read(&key, &mut |s| has_group = s.group(&group).is_some());
    let Some(min_idle) = parse_i64(&ctx.args[4]) else {
        return ctx
            .out
            .error(b"ERR Invalid min-idle-time argument for XAUTOCLAIM");
    };
    let start = match range_start(&ctx.args[5]) {
        Ok(id) => id,
        Err(text) => return ctx.out.error(text),
    };
    let mut n = 100usize;
    let mut just_id = false;
    let mut i = 6;
    while i < ctx.args.len() {
        if ctx.is(i, "count") && i + 1 < ctx.args.len() {
            match parse_i64(&ctx.args[i + 1]) {
                Some(c) if (1..=i64::MAX / 10).contains(&c) => n = c as usize,
                _ => return ctx.out.error(b"ERR COUNT must be > 0"),
            }
            i += 2;
        } else if ctx.is(i, "justid") {
            just_id = true;
            i += 1;
        } else {
            return ctx.syntax_error();
        }
    }
    if let Err(e) = looked {
        return ctx.store_error(&e);
    }
    if !has_group {
        return nogroup(ctx.out, &key, &group);
    }
    let r = ctx.store.xautoclaim(
        &key,
        &group,
        &ctx.args[3],
        min_idle.max(0) as u64,
        start,
        n,
        just_id,
    );
    match r {
        Ok(done) => {
            let out = &mut *ctx.out;
            out.array_len(3);
            write_id(out, done.next);
            out.array_len(done.claimed.len());
            for e in &done.claimed {
                if just_id {
                    write_id(out, e.0);
                } else {
                    write_copied(out, e);
                }
            }
            out.array_len(done.deleted.len());
            for id in done.deleted {
                write_id(out, id);
            }
        }
        Err(e) => stream_error(ctx, &e, nogroup, 2),
    }
}

// ----- XINFO -------------------------------------------------------------------------------------

fn write_group_summary<R: Reply>(out: &mut R, s: &Stream, name: &[u8], g: &StreamGroup) {
    out.map_len(6);
    out.bulk(b"name");
    out.bulk(name);
    out.bulk(b"consumers");
    out.integer(g.consumer_count() as i64);
    out.bulk(b"pending");
    out.integer(g.pel().len() as i64);
    out.bulk(b"last-delivered-id");
    write_id(out, g.last_id());
    out.bulk(b"entries-read");
    match g.entries_read() {
        Some(n) => out.integer(n as i64),
        None => out.null(),
    }
    out.bulk(b"lag");
    match s.lag(g) {
        Some(n) => out.integer(n),
        None => out.null(),
    }
}

/// `radix-tree-nodes`: Redis's rax has at least one node per key beside its root; fast-cache
/// keeps no rax, so it reports that lower bound.
fn rax_nodes(keys: usize) -> usize {
    keys + 1
}

fn write_stream_info<R: Reply>(out: &mut R, s: &Stream, full: Option<usize>, now: u64) {
    out.map_len(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.integer(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.integer(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.integer(rax_nodes(s.node_count()) as i64);
    out.bulk(b"last-generated-id");
    write_id(out, s.last_id());
    out.bulk(b"max-deleted-entry-id");
    write_id(out, s.max_deleted_id());
    out.bulk(b"entries-added");
    out.integer(s.entries_added() as i64);
    out.bulk(b"recorded-first-entry-id");
    write_id(out, s.first_id());
    let Some(limit) = full else {
        out.bulk(b"groups");
        out.integer(s.group_count() as i64);
        fn edge<R: Reply>(out: &mut R, entry: Option<(StreamId, StreamFields<'_>)>) {
            match entry {
                Some((id, f)) => write_entry(out, id, f),
                None => out.null(),
            }
        }
        out.bulk(b"first-entry");
        edge(out, s.range(StreamId::MIN, StreamId::MAX).next());
        out.bulk(b"last-entry");
        edge(out, s.range(StreamId::MIN, StreamId::MAX).next_back());
        return;
    };
    let limit = if limit == 0 { usize::MAX } else { limit };
    out.bulk(b"entries");
    let entries: Vec<_> = s.range(StreamId::MIN, StreamId::MAX).take(limit).collect();
    out.array_len(entries.len());
    for (id, f) in entries {
        write_entry(out, id, f);
    }
    out.bulk(b"groups");
    out.array_len(s.group_count());
    for (name, g) in s.groups() {
        out.map_len(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        write_id(out, g.last_id());
        out.bulk(b"entries-read");
        match g.entries_read() {
            Some(n) => out.integer(n as i64),
            None => out.null(),
        }
        out.bulk(b"lag");
        match s.lag(g) {
            Some(n) => out.integer(n),
            None => out.null(),
        }
        out.bulk(b"pel-count");
        out.integer(g.pel().len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = g.pel().iter().take(limit).collect();
        out.array_len(pel.len());
        for (id, p) in pel {
            out.array_len(4);
            write_id(out, *id);
            out.bulk(p.consumer());
            out.integer(p.delivery_ms() as i64);
            out.integer(p.delivery_count() as i64);
        }
        out.bulk(b"consumers");
        out.array_len(g.consumer_count());
        for (cname, c) in g.consumers() {
            out.map_len(5);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.integer(c.seen_ms() as i64);
            out.bulk(b"active-time");
            out.integer(c.active_ms().map_or(-1, |t| t as i64));
            out.bulk(b"pel-count");
            out.integer(c.pending().len() as i64);
            out.bulk(b"pending");
            let own: Vec<_> = c.pending().iter().take(limit).collect();
            out.array_len(own.len());
            for id in own {
                out.array_len(3);
                write_id(out, *id);
                let p = g.pel().get(id);
                out.integer(p.map_or(0, |p| p.delivery_ms() as i64));
                out.integer(p.map_or(0, |p| p.delivery_count() as i64));
            }
        }
    }
    let _ = now;
}

/// `XINFO STREAM key [FULL [COUNT n]] | GROUPS key | CONSUMERS key group | HELP`.
pub(super) fn xinfo<R: Reply>(ctx: &mut Ctx<'_, R>) {
    const HELP: &[&[u8]] = &[
        b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"CONSUMERS <key> <groupname>",
        b"    Show consumers of <groupname>.",
        b"GROUPS <key>",
        b"    Show the stream consumer groups.",
        b"STREAM <key> [FULL [COUNT <count>]",
        b"    Show information about the stream.",
        b"HELP",
        b"    Prints this help.",
    ];
    let sub = ctx.args[1].to_ascii_lowercase();
    if sub == b"help" {
        return super::help(ctx.out, HELP);
    }
    let mut full = None;
    if sub == b"stream" && ctx.args.len() > 3 {
        // The key first (missing, or of another type), then the options.
        let mut exists = false;
        if let Err(e) = ctx.store.stream_read(&ctx.args[2], &mut |_| exists = true) {
            return ctx.store_error(&e);
        }
        if !exists {
            return ctx.out.error(b"ERR no such key");
        }
        let wrong = |ctx: &mut Ctx<'_, R>| {
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                String::from_utf8_lossy(&ctx.args[1])
            );
            ctx.out.error(text.as_bytes());
        };
        if !ctx.is(3, "full") {
            return wrong(ctx);
        }
        let mut limit = 10usize;
        match ctx.args.len() {
            4 => {}
            6 if ctx.is(4, "count") => {
                let Some(n) = ctx.int(5) else {
                    return;
                };
                limit = n.max(0) as usize;
            }
            _ => return wrong(ctx),
        }
        full = Some(limit);
    }
    let now = ctx.store.clock().now_ms();
    let key = ctx.args[2].clone();
    let group = ctx.args.get(3).cloned().unwrap_or_default();
    let out = &mut *ctx.out;
    let mut missing_group = false;
    let r = ctx
        .store
        .stream_read(&key, &mut |s: &Stream| match sub.as_slice() {
            b"stream" => write_stream_info(out, s, full, now),
            b"groups" => {
                out.array_len(s.group_count());
                for (name, g) in s.groups() {
                    write_group_summary(out, s, name, g);
                }
            }
            _ => {
                let Some(g) = s.group(&group) else {
                    missing_group = true;
                    return;
                };
                out.array_len(g.consumer_count());
                for (name, c) in g.consumers() {
                    out.map_len(4);
                    out.bulk(b"name");
                    out.bulk(name);
                    out.bulk(b"pending");
                    out.integer(c.pending().len() as i64);
                    out.bulk(b"idle");
                    out.integer(now.saturating_sub(c.seen_ms()) as i64);
                    out.bulk(b"inactive");
                    out.integer(c.active_ms().map_or(-1, |t| now.saturating_sub(t) as i64));
                }
            }
        });
    match r {
        Ok(true) if missing_group => nogroup_named(ctx.out, &key, &group),
        Ok(true) => {}
        Ok(false) => ctx.out.error(b"ERR no such key"),
        Err(e) => ctx.store_error(&e),
    }
}

// ----- XREAD / XREADGROUP, one key at a time (`crate::blocking` composes them) -------------------

/// One key's step of `XREAD`: `[_, key, id, count, wrap]`, where `id` is an id or `$` (read
/// nothing now: a blocking read waits from the stream's last id). Replies nothing when the
/// stream has no entries after `id` (or is missing); with `wrap`, the whole one-key reply
/// (`{key: entries}`), else the pair `key, entries` of one [`Reply::keyed`] entry.
pub(crate) fn read_step<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let after = match strict_id(&ctx.args[2]) {
        Ok(id) => id,
        Err(_) => return,
    };
    let n = parse_i64(&ctx.args[3]).map_or(0, |n| n.max(0) as usize);
    let limit = if n == 0 { usize::MAX } else { n };
    let wrap = !ctx.args[4].is_empty();
    let key = ctx.args[1].clone();
    let out = &mut *ctx.out;
    let r = ctx.store.stream_read(&key, &mut |s: &Stream| {
        let Some(start) = after.next() else {
            return;
        };
        let entries: Vec<_> = s.range(start, StreamId::MAX).take(limit).collect();
        if entries.is_empty() {
            return;
        }
        if wrap {
            out.keyed_len(1);
        }
        out.keyed();
        out.bulk(super::user_key(&key));
        out.array_len(entries.len());
        for (id, f) in entries {
            write_entry(out, id, f);
        }
    });
    if let Err(e) = r {
        ctx.store_error(&e);
    }
}

/// Resolves an `XREAD` id on the key's owner: `[_, key, id]` answers the id to wait after
/// (`$`: the stream's last id, `0-0` when missing) or `WRONGTYPE`.
pub(crate) fn resolve_step<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut last = StreamId::MIN;
    let r = ctx
        .store
        .stream_read(&ctx.args[1], &mut |s| last = s.last_id());
    if let Err(e) = r {
        return ctx.store_error(&e);
    }
    match &ctx.args[2][..] {
        b"$" => write_id(ctx.out, last),
        b">" => ctx.out.error(b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."),
        id => match strict_id(id) {
            Ok(id) => write_id(ctx.out, id),
            Err(text) => ctx.out.error(text),
        },
    }
}

/// Whether the stream at `key` has entries after `after` (a blocked `XREAD` can be served).
pub(crate) fn has_after(
    store: &mut fc_shard::LocalEmbeddedStore,
    key: &[u8],
    after: &[u8],
) -> bool {
    let Ok(after) = strict_id(after) else {
        return false;
    };
    let mut found = false;
    let _ = store.stream_read(key, &mut |s| {
        found = s
            .range(StreamId::MIN, StreamId::MAX)
            .next_back()
            .is_some_and(|(id, _)| id > after);
    });
    found
}

/// Whether the stream at `key` has entries its group `group` has not been given (a blocked
/// `XREADGROUP ... >` can be served), or the group is gone (it answers the error).
pub(crate) fn group_has_new(
    store: &mut fc_shard::LocalEmbeddedStore,
    key: &[u8],
    group: &[u8],
) -> bool {
    let mut found = false;
    let r = store.stream_read(key, &mut |s| {
        found = match s.group(group) {
            Some(g) => s
                .range(StreamId::MIN, StreamId::MAX)
                .next_back()
                .is_some_and(|(id, _)| id > g.last_id()),
            None => true,
        };
    });
    // A deleted key or one of another type answers the blocked client too.
    matches!(r, Ok(false) | Err(_)) || found
}

/// One key's step of `XREADGROUP`: `[_, key, group, consumer, id, count, noack, wrap]`.
/// `>` with nothing new replies nothing (the caller goes on or waits); a history id always
/// replies. `NOGROUP` and `WRONGTYPE` as errors.
pub(crate) fn group_step<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    // The largest id reads as `>` (Redis encodes `>` as it).
    let from = if &args[4][..] == b">" {
        GroupReadFrom::New
    } else {
        match strict_id(&args[4]) {
            Ok(StreamId::MAX) => GroupReadFrom::New,
            Ok(id) => GroupReadFrom::History(id),
            Err(text) => return ctx.out.error(text),
        }
    };
    let n = parse_i64(&args[5]).map_or(0, |n| n.max(0) as usize);
    let no_ack = !args[6].is_empty();
    let wrap = !args[7].is_empty();
    let r = ctx
        .store
        .xreadgroup(&args[1], &args[2], &args[3], from, n, no_ack);
    match r {
        Ok(None) => {}
        Ok(Some(entries)) => {
            if wrap {
                ctx.out.keyed_len(1);
            }
            ctx.out.keyed();
            ctx.out.bulk(super::user_key(&args[1]));
            write_copied_entries(ctx.out, &entries);
        }
        Err(StoreError::Stream(StreamError::NoGroup)) => {
            let mut text = b"NOGROUP No such key '".to_vec();
            text.extend_from_slice(super::user_key(&args[1]));
            text.extend_from_slice(b"' or consumer group '");
            text.extend_from_slice(&args[2]);
            text.extend_from_slice(b"' in XREADGROUP with GROUP option");
            ctx.out.error(&text);
        }
        Err(e) => ctx.store_error(&e),
    }
}

/// Checks `[_, key, group, id]` before a read consumes anything: nothing when the group
/// exists and the id reads, else the error `XREADGROUP` answers (`WRONGTYPE`, `NOGROUP`, the
/// id's).
pub(crate) fn group_check<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut ok = false;
    let group = &ctx.args[2];
    let r = ctx
        .store
        .stream_read(&ctx.args[1], &mut |s| ok = s.group(group).is_some());
    match r {
        Err(e) => ctx.store_error(&e),
        Ok(_) if ok => match &ctx.args[3][..] {
            b">" => {}
            b"$" => ctx.out.error(b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."),
            id => {
                if let Err(text) = strict_id(id) {
                    ctx.out.error(text);
                }
            }
        },
        Ok(_) => {
            let mut text = b"NOGROUP No such key '".to_vec();
            text.extend_from_slice(super::user_key(&ctx.args[1]));
            text.extend_from_slice(b"' or consumer group '");
            text.extend_from_slice(&ctx.args[2]);
            text.extend_from_slice(b"' in XREADGROUP with GROUP option");
            ctx.out.error(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_parses_them() {
        let id = |ms, seq| StreamId::new(ms, seq);
        assert_eq!(strict_id(b"5"), Ok(id(5, 0)));
        assert_eq!(strict_id(b"5-3"), Ok(id(5, 3)));
        assert_eq!(strict_id(b"+5-3"), Ok(id(5, 3)));
        assert_eq!(
            strict_id(b"18446744073709551615-18446744073709551615"),
            Ok(StreamId::MAX)
        );
        for bad in [
            &b"-"[..],
            b"+",
            b"5-",
            b"-5",
            b"5-*",
            b"a",
            b"18446744073709551616",
            b"",
        ] {
            assert_eq!(strict_id(bad), Err(INVALID_ID), "{bad:?}");
        }
        assert_eq!(range_start(b"-"), Ok(StreamId::MIN));
        assert_eq!(range_end(b"5"), Ok(id(5, u64::MAX)));
        assert_eq!(range_start(b"(5-1"), Ok(id(5, 2)));
        assert_eq!(range_end(b"(5-0"), Ok(id(4, u64::MAX)));
        assert_eq!(
            range_end(b"(0-0"),
            Err(&b"ERR invalid end ID for the interval"[..])
        );
        assert_eq!(range_start(b"(-"), Err(INVALID_ID));
    }
}
