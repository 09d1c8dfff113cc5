//! Commands over several keys whose keys live on different shards (`RENAME`, `RENAMENX`,
//! `COPY`, `LMOVE`, `RPOPLPUSH`, `SMOVE`, `SINTER`, `SUNION`, `SDIFF` and their `STORE`s,
//! `SINTERCARD`): the store runs such a command in one step only when its keys share a shard
//! (a `{hash tag}`); otherwise the server composes it from single-key steps on each key's
//! owner — read the sources, check types, write the destination, remove the source — with
//! every worker involved held ([`crate::cross::Held`]) for the whole command, so it is as
//! atomic as on one shard: no other client sees a step between two others, and the log
//! records it as one transaction (all or nothing after a crash).
//!
//! A key moves between shards as the mutations that recreate it ([`LocalEmbeddedStore::
//! export_key`], encoded with the log's own record codec): its value of any type and its
//! expiry.

use std::collections::{BTreeSet, HashSet};

use bytes::Bytes;
use fc_shard::{ListEnd, LocalEmbeddedStore, SetExpiry, SetOptions, ZAddOptions};
use fc_wal::Record;

use crate::command::{self, Ctx, Handler, Multi, SetOp, Spec, store};
use crate::cross::{self, TxnLinks};
use crate::reply::{Replies, Reply, Token};
use crate::worker::Worker;

/// `[_, key]`: the key as a blob of its recreating mutations (each a `u32` length and a log
/// record), or null when it is missing.
fn dump<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut blob = Vec::new();
    let r = ctx.store.export_key(&ctx.args[1], |m| {
        let mut record = Vec::new();
        fc_wal::encode_mutation(m, &mut record);
        blob.extend_from_slice(&(record.len() as u32).to_le_bytes());
        blob.extend_from_slice(&record);
    });
    match r {
        Ok(true) => ctx.out.bulk(&blob),
        Ok(false) => ctx.out.null(),
        Err(e) => ctx.store_error(&e),
    }
}

/// `[_, dest, blob]`: replaces `dest` with the key `blob` recreates ([`dump`]).
fn load<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (dest, blob) = (&ctx.args[1], &ctx.args[2]);
    if let Err(e) = ctx.store.try_delete(dest) {
        return ctx.store_error(&e);
    }
    let mut rest = &blob[..];
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(payload) = rest.get(4..4 + len) else {
            return ctx.out.error(b"ERR internal key transfer is damaged");
        };
        rest = &rest[4 + len..];
        let record = match Record::decode(payload) {
            Ok(record) => record,
            Err(e) => {
                return ctx
                    .out
                    .error(format!("ERR internal key transfer: {e}").as_bytes());
            }
        };
        if let Err(e) = apply(ctx.store, dest, &record) {
            return ctx.store_error(&e);
        }
    }
    ctx.out.integer(1);
}

/// Applies one exported record to `dest` (whatever key it named).
fn apply(
    store: &mut LocalEmbeddedStore,
    dest: &[u8],
    record: &Record,
) -> Result<(), fc_shard::StoreError> {
    fn refs(items: &[Vec<u8>]) -> Vec<&[u8]> {
        items.iter().map(Vec::as_slice).collect()
    }
    match record {
        Record::Set {
            value,
            expire_at_ms,
            ..
        } => {
            let options = SetOptions {
                expiry: expire_at_ms.map_or(SetExpiry::Clear, SetExpiry::AtMs),
                ..SetOptions::default()
            };
            store.set_with(dest, value, options)?;
        }
        Record::HSet { pairs, .. } => {
            let pairs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            store.hset(dest, &pairs)?;
        }
        Record::ListPush { end, items, .. } => {
            store.push(dest, *end, &refs(items), false)?;
        }
        Record::SAdd { members, .. } => {
            store.sadd(dest, &refs(members))?;
        }
        Record::ZAdd { entries, .. } => {
            let entries: Vec<(f64, &[u8])> = entries.iter().map(|(s, m)| (*s, &m[..])).collect();
            store.zadd(dest, &entries, ZAddOptions::default())?;
        }
        Record::Expire { expire_at_ms, .. } => {
            store.expire_at_ms(dest, *expire_at_ms);
        }
        Record::Stream { op, .. } => op.with_op(|op| store.stream_apply(dest, op))?,
        // An export emits nothing else.
        _ => {}
    }
    Ok(())
}

/// `[_, dest, member...]`: replaces `dest` with the set of the members (deleted when none).
fn set_replace<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let dest = &ctx.args[1];
    if let Err(e) = ctx.store.try_delete(dest) {
        return ctx.store_error(&e);
    }
    let members: Vec<&[u8]> = ctx.args[2..].iter().map(|m| &m[..]).collect();
    if !members.is_empty()
        && let Err(e) = ctx.store.sadd(dest, &members)
    {
        return ctx.store_error(&e);
    }
    ctx.out.integer(members.len() as i64);
}

/// `[_, key]`: deletes `key`.
fn delete<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.try_delete(&ctx.args[1]);
    ctx.reply(r, |out, deleted| out.integer(i64::from(deleted)));
}

/// `[_, dest, score, member, ...]`: replaces `dest` with the sorted set of the pairs
/// (deleted when none).
fn zset_replace<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let dest = &ctx.args[1];
    if let Err(e) = ctx.store.try_delete(dest) {
        return ctx.store_error(&e);
    }
    let entries: Vec<(f64, &[u8])> = ctx.args[2..]
        .chunks(2)
        .filter_map(|p| Some((command::parse_float(&p[0])?, &p[1][..])))
        .collect();
    if !entries.is_empty()
        && let Err(e) = ctx.store.zadd(dest, &entries, ZAddOptions::default())
    {
        return ctx.store_error(&e);
    }
    ctx.out.integer(entries.len() as i64);
}

/// `[_, dest, item...]`: replaces `dest` with the list of the items (deleted when none).
fn list_replace<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let dest = &ctx.args[1];
    if let Err(e) = ctx.store.try_delete(dest) {
        return ctx.store_error(&e);
    }
    let items: Vec<&[u8]> = ctx.args[2..].iter().map(|m| &m[..]).collect();
    if !items.is_empty()
        && let Err(e) = ctx.store.push(dest, ListEnd::Right, &items, false)
    {
        return ctx.store_error(&e);
    }
    ctx.out.integer(items.len() as i64);
}

const LIST_REPLACE: Handler = store!(list_replace);
const ZSET_REPLACE: Handler = store!(zset_replace);
const DELETE: Handler = store!(delete);
const DUMP: Handler = store!(dump);
const LOAD: Handler = store!(load);
const SET_REPLACE: Handler = store!(set_replace);

/// The table commands whose handlers the compositions use ([`handler`]).
#[cfg(test)]
const USED: &[&str] = &[
    "type", "lpop", "rpop", "lpush", "rpush", "srem", "sadd", "smembers", "zrange", "get", "set",
];

/// A table command's own handler (by name: `TYPE`, `SREM`, `LPOP`...: each in [`USED`]).
fn handler(name: &str) -> Handler {
    command::lookup(name.as_bytes())
        .and_then(Spec::direct)
        .unwrap_or_else(|| panic!("{name} is a keyed command"))
}

/// Runs `handler` with `args` on the owner of `args[1]`, within the held transaction.
async fn on_owner(worker: &Worker, handler: Handler, args: Vec<Bytes>, txn: &TxnLinks) -> Replies {
    let owner = worker.shared.owner_of(&args[1]);
    cross::exec_at(worker, owner, handler, args, Some(txn)).await
}

fn b(text: &'static str) -> Bytes {
    Bytes::from_static(text.as_bytes())
}

/// The type name `TYPE` gives `key` (`none` when missing).
async fn type_of(worker: &Worker, key: &Bytes, txn: &TxnLinks) -> Vec<u8> {
    let r = on_owner(worker, handler("type"), vec![b("type"), key.clone()], txn).await;
    match r.tokens().first() {
        Some(Token::Simple(range)) => r.bytes(range).to_vec(),
        _ => b"none".to_vec(),
    }
}

const WRONGTYPE: &[u8] = b"WRONGTYPE Operation against a key holding the wrong kind of value";

/// Whether the keys of `args` (by the spec's key specs) are all on one shard.
fn one_shard(worker: &Worker, spec: &Spec, args: &[Bytes]) -> bool {
    let router = &worker.shared.router;
    let mut shards = spec
        .spec_keys(args)
        .unwrap_or_default()
        .into_iter()
        .map(|(i, _)| router.shard_of(&router.route_key(&args[i])));
    match shards.next() {
        Some(first) => shards.all(|s| s == first),
        None => true,
    }
}

/// Whether a GEO search's or `SORT`'s source and every key after a `STORE`/`STOREDIST` share
/// a shard.
fn geo_one_shard(worker: &Worker, args: &[Bytes]) -> bool {
    let router = &worker.shared.router;
    let shard = |key: &Bytes| router.shard_of(&router.route_key(key));
    let src = match command::geo::GeoCommand::of(&args[0]) {
        Some(command::geo::GeoCommand::SearchStore) => 2,
        _ => 1,
    };
    let Some(first) = args.get(src).map(shard) else {
        return true;
    };
    let stores = args
        .windows(2)
        .filter(|w| w[0].eq_ignore_ascii_case(b"store") || w[0].eq_ignore_ascii_case(b"storedist"))
        .map(|w| &w[1]);
    args.get(1).map(shard).is_none_or(|s| s == first) && stores.map(shard).all(|s| s == first)
}

/// Runs a [`command::Route::Multi`] command: its handler on the owner when its keys share a
/// shard, else composed across shards ([`run`]).
pub(crate) async fn dispatch<R: Reply>(
    worker: &Worker,
    spec: &'static Spec,
    handler: Option<Handler>,
    multi: Multi,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let local = match multi {
        // A repeated STORE: the last one is the destination, which the key specs do not name.
        Multi::GeoStore | Multi::SortStore => geo_one_shard(worker, &args),
        _ => one_shard(worker, spec, &args),
    };
    if let Some(handler) = handler
        && local
    {
        let owner = worker.shared.owner_of(&args[1]);
        return cross::exec_at(worker, owner, handler, args, txn)
            .await
            .replay(out);
    }
    run(worker, spec, multi, args, out, txn).await;
}

/// `LMOVE src dst from to` across shards (a blocking move's first try): null when `src` is
/// empty or missing.
pub(crate) async fn lmove_across(
    worker: &Worker,
    src: &Bytes,
    dst: &Bytes,
    from: ListEnd,
    to: ListEnd,
    txn: Option<&TxnLinks>,
) -> Replies {
    let word = |end: ListEnd| match end {
        ListEnd::Left => b("left"),
        ListEnd::Right => b("right"),
    };
    let args = vec![b("lmove"), src.clone(), dst.clone(), word(from), word(to)];
    let spec = command::lookup(b"lmove").expect("LMOVE is in the table");
    let mut out = Replies::new();
    run(worker, spec, Multi::LMove, args, &mut out, txn).await;
    out
}

/// Runs a multi-key command whose keys span shards: holds their workers (unless a
/// transaction already does) and composes it from single-key steps.
async fn run<R: Reply>(
    worker: &Worker,
    spec: &'static Spec,
    multi: Multi,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    let mut owners: BTreeSet<usize> = spec
        .spec_keys(&args)
        .unwrap_or_default()
        .into_iter()
        .map(|(i, _)| shared.owner_of(&args[i]))
        .collect();
    if matches!(multi, Multi::GeoStore | Multi::SortStore) {
        // Every STORE's key (the last one is used; the key specs name the first).
        owners.extend(
            args.windows(2)
                .filter(|w| {
                    w[0].eq_ignore_ascii_case(b"store") || w[0].eq_ignore_ascii_case(b"storedist")
                })
                .map(|w| shared.owner_of(&w[1])),
        );
    }
    let replies = match txn {
        Some(links) => compose(worker, multi, &args, links).await,
        None => {
            let held = cross::Held::take(worker, &owners).await;
            let r = compose(worker, multi, &args, &held.links).await;
            held.release(worker);
            r
        }
    };
    replies.replay(out);
}

async fn compose(worker: &Worker, multi: Multi, args: &[Bytes], txn: &TxnLinks) -> Replies {
    let mut out = Replies::new();
    match multi {
        Multi::Rename { nx } => {
            let (src, dst) = (&args[1], &args[2]);
            let blob = on_owner(worker, DUMP, vec![b("dump"), src.clone()], txn).await;
            let blob = match blob.tokens().first() {
                Some(Token::Bulk(range)) => Bytes::copy_from_slice(blob.bytes(range)),
                _ if blob.overflowed() => return blob,
                Some(Token::Error(_)) => return blob,
                _ => {
                    out.error(b"ERR no such key");
                    return out;
                }
            };
            if nx && cross::touch(worker, dst, Some(txn)).await {
                out.integer(0);
                return out;
            }
            let loaded = on_owner(worker, LOAD, vec![b("load"), dst.clone(), blob], txn).await;
            if loaded.error_text().is_some() {
                return loaded;
            }
            on_owner(worker, DELETE, vec![b("del"), src.clone()], txn).await;
            if nx {
                out.integer(1);
            } else {
                out.ok();
            }
        }
        Multi::Copy => {
            let src = &args[1];
            let mut dst = args[2].clone();
            let mut replace = false;
            let mut i = 3;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    i += 1;
                } else if args[i].eq_ignore_ascii_case(b"db") && i + 1 < args.len() {
                    // `DB n`: the destination is the same name in database n.
                    let databases = worker.shared.config.databases;
                    match fc_resp::number::parse_i64(&args[i + 1]) {
                        Some(n) if (0..i64::from(databases)).contains(&n) => {
                            let name = command::user_key(&args[2]);
                            dst = Bytes::from(fc_shard::namespaced(n as u32, name));
                        }
                        Some(_) => {
                            out.error(b"ERR DB index is out of range");
                            return out;
                        }
                        None => {
                            out.error(b"ERR value is not an integer or out of range");
                            return out;
                        }
                    }
                    i += 2;
                } else {
                    out.error(b"ERR syntax error");
                    return out;
                }
            }
            let dst = &dst;
            if src == dst {
                out.error(b"ERR source and destination objects are the same");
                return out;
            }
            let blob = on_owner(worker, DUMP, vec![b("dump"), src.clone()], txn).await;
            let blob = match blob.tokens().first() {
                Some(Token::Bulk(range)) => Bytes::copy_from_slice(blob.bytes(range)),
                _ if blob.overflowed() => return blob,
                Some(Token::Error(_)) => return blob,
                _ => {
                    out.integer(0);
                    return out;
                }
            };
            if !replace && cross::touch(worker, dst, Some(txn)).await {
                out.integer(0);
                return out;
            }
            let loaded = on_owner(worker, LOAD, vec![b("load"), dst.clone(), blob], txn).await;
            if loaded.error_text().is_some() {
                return loaded;
            }
            out.integer(1);
        }
        Multi::LMove => {
            let (src, dst) = (&args[1], &args[2]);
            let ends = if args.len() == 5 {
                let end = |a: &Bytes| {
                    if a.eq_ignore_ascii_case(b"left") {
                        Some(ListEnd::Left)
                    } else if a.eq_ignore_ascii_case(b"right") {
                        Some(ListEnd::Right)
                    } else {
                        None
                    }
                };
                (end(&args[3]), end(&args[4]))
            } else {
                (Some(ListEnd::Right), Some(ListEnd::Left))
            };
            let (Some(from), Some(to)) = ends else {
                out.error(b"ERR syntax error");
                return out;
            };
            let src_type = type_of(worker, src, txn).await;
            if src_type == b"none" {
                out.null();
                return out;
            }
            if src_type != b"list"
                || !matches!(&type_of(worker, dst, txn).await[..], b"none" | b"list")
            {
                out.error(WRONGTYPE);
                return out;
            }
            let (pop, push) = match (from, to) {
                (ListEnd::Left, ListEnd::Left) => ("lpop", "lpush"),
                (ListEnd::Left, ListEnd::Right) => ("lpop", "rpush"),
                (ListEnd::Right, ListEnd::Left) => ("rpop", "lpush"),
                (ListEnd::Right, ListEnd::Right) => ("rpop", "rpush"),
            };
            let popped = on_owner(worker, handler(pop), vec![b(pop), src.clone()], txn).await;
            let value = match popped.tokens().first() {
                Some(Token::Bulk(range)) => Bytes::copy_from_slice(popped.bytes(range)),
                _ => return popped,
            };
            let pushed = on_owner(
                worker,
                handler(push),
                vec![b(push), dst.clone(), value.clone()],
                txn,
            )
            .await;
            if pushed.error_text().is_some() {
                return pushed;
            }
            out.bulk(&value);
        }
        Multi::SMove => {
            let (src, dst, member) = (&args[1], &args[2], &args[3]);
            let src_type = type_of(worker, src, txn).await;
            if src_type == b"none" {
                out.integer(0);
                return out;
            }
            if src_type != b"set"
                || !matches!(&type_of(worker, dst, txn).await[..], b"none" | b"set")
            {
                out.error(WRONGTYPE);
                return out;
            }
            let removed = on_owner(
                worker,
                handler("srem"),
                vec![b("srem"), src.clone(), member.clone()],
                txn,
            )
            .await;
            if removed.integer_value() != Some(1) {
                return removed;
            }
            on_owner(
                worker,
                handler("sadd"),
                vec![b("sadd"), dst.clone(), member.clone()],
                txn,
            )
            .await;
            out.integer(1);
        }
        Multi::SetAlgebra { op, store } => {
            let (dest, keys) = if store {
                (Some(&args[1]), &args[2..])
            } else {
                (None, &args[1..])
            };
            let members = match set_algebra(worker, op, keys, txn).await {
                Ok(members) => members,
                Err(err) => return err,
            };
            match dest {
                Some(dest) => {
                    let mut sub = Vec::with_capacity(members.len() + 2);
                    sub.push(b("sreplace"));
                    sub.push(dest.clone());
                    sub.extend(members);
                    return on_owner(worker, SET_REPLACE, sub, txn).await;
                }
                None => {
                    out.set_len(members.len());
                    members.iter().for_each(|m| out.bulk(m));
                }
            }
        }
        Multi::BitOp => return bitop(worker, args, txn).await,
        Multi::Lcs => return lcs(worker, args, txn).await,
        Multi::PfCount | Multi::PfMerge => return hll_across(worker, multi, args, txn).await,
        Multi::GeoStore => return geo_store(worker, args, txn).await,
        Multi::SortStore => {
            // The sort on the key's owner (SORT's own checks), then the destination list
            // replaced on its owner.
            let r = on_owner(worker, command::SORT_EXPORT, args.to_vec(), txn).await;
            if r.error_text().is_some() || r.overflowed() {
                return r;
            }
            let mut tokens = r.tokens().iter();
            let Some(dest) = export_dest(&mut tokens, args) else {
                out.error(b"ERR syntax error");
                return out;
            };
            let mut store = vec![b("lreplace"), dest.clone()];
            store.extend(tokens.filter_map(|t| match t {
                Token::Bulk(range) => Some(Bytes::copy_from_slice(r.bytes(range))),
                _ => None,
            }));
            return on_owner(worker, LIST_REPLACE, store, txn).await;
        }
        Multi::ZRangeStore => {
            // The range read on the source's owner (ZRANGESTORE's own argument checks), then
            // the destination replaced on its owner (deleted when the range is empty).
            let mut read = Vec::with_capacity(args.len() - 1);
            read.push(b("zrange"));
            read.extend(args[2..].iter().cloned());
            let r = on_owner(worker, command::ZRANGE_SCORED, read, txn).await;
            if r.error_text().is_some() || r.overflowed() {
                return r;
            }
            let mut sub = vec![b("zreplace"), args[1].clone()];
            for token in r.tokens() {
                match token {
                    Token::Bulk(range) => sub.push(Bytes::copy_from_slice(r.bytes(range))),
                    Token::Double(v) => {
                        let mut buf = [0u8; fc_resp::number::MAX_DOUBLE_LEN];
                        let text = fc_resp::number::format_double(*v, &mut buf);
                        let member = sub.pop().unwrap_or_default();
                        sub.push(Bytes::copy_from_slice(text));
                        sub.push(member);
                    }
                    _ => {}
                }
            }
            return on_owner(worker, ZSET_REPLACE, sub, txn).await;
        }
        Multi::ZAlgebra { op, store, card } => {
            return zalgebra(worker, op, store, card, args, txn).await;
        }
        Multi::SInterCard => {
            let numkeys = fc_resp::number::parse_i64(&args[1]).unwrap_or(0);
            if numkeys <= 0 {
                out.error(b"ERR numkeys should be greater than 0");
                return out;
            }
            let numkeys = numkeys as usize;
            if numkeys > args.len() - 2 {
                out.error(b"ERR Number of keys can't be greater than number of args");
                return out;
            }
            let keys = &args[2..2 + numkeys];
            let mut limit = 0usize;
            let mut i = 2 + numkeys;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"limit") && i + 1 < args.len() {
                    match fc_resp::number::parse_i64(&args[i + 1]) {
                        Some(n) if n >= 0 => limit = n as usize,
                        _ => {
                            out.error(b"ERR LIMIT can't be negative");
                            return out;
                        }
                    }
                    i += 2;
                } else {
                    out.error(b"ERR syntax error");
                    return out;
                }
            }
            match set_algebra(worker, SetOp::Inter, keys, txn).await {
                Ok(members) => {
                    let n = if limit > 0 {
                        members.len().min(limit)
                    } else {
                        members.len()
                    };
                    out.integer(n as i64);
                }
                Err(err) => return err,
            }
        }
    }
    out
}

/// The members of each key (`SMEMBERS` on its owner) combined by `op`, in first-seen order;
/// `WRONGTYPE` as the reply when a key holds another type.
async fn set_algebra(
    worker: &Worker,
    op: SetOp,
    keys: &[Bytes],
    txn: &TxnLinks,
) -> Result<Vec<Bytes>, Replies> {
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        let r = on_owner(
            worker,
            handler("smembers"),
            vec![b("smembers"), key.clone()],
            txn,
        )
        .await;
        if r.error_text().is_some() || r.overflowed() {
            return Err(r);
        }
        let members: Vec<Bytes> = r
            .tokens()
            .iter()
            .filter_map(|t| match t {
                Token::Bulk(range) => Some(Bytes::copy_from_slice(r.bytes(range))),
                _ => None,
            })
            .collect();
        sets.push(members);
    }
    let mut sets = sets.into_iter();
    let first = sets.next().unwrap_or_default();
    let rest: Vec<HashSet<Bytes>> = sets.map(|s| s.into_iter().collect()).collect();
    Ok(match op {
        SetOp::Inter => first
            .into_iter()
            .filter(|m| rest.iter().all(|s| s.contains(m)))
            .collect(),
        SetOp::Diff => first
            .into_iter()
            .filter(|m| !rest.iter().any(|s| s.contains(m)))
            .collect(),
        SetOp::Union => {
            let mut seen: HashSet<Bytes> = first.iter().cloned().collect();
            let mut all = first;
            for set in rest {
                for m in set {
                    if seen.insert(m.clone()) {
                        all.push(m);
                    }
                }
            }
            all
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_step_names_a_keyed_command() {
        for name in super::USED {
            let _ = super::handler(name);
        }
    }
}

/// How `ZUNION`/`ZINTER` combine a member's weighted scores.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's rule: a NaN (`inf * 0`, `inf - inf`) counts as 0.
fn not_nan(v: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v }
}

impl Aggregate {
    fn apply(self, into: &mut f64, v: f64) {
        *into = match self {
            Self::Sum => not_nan(*into + v),
            Self::Min => into.min(v),
            Self::Max => into.max(v),
        };
    }
}

/// The members and scores of `key` as `ZUNION` reads an input: a sorted set, a set (scores
/// 1), or nothing; `WRONGTYPE` for another type.
async fn zinput(
    worker: &Worker,
    key: &Bytes,
    txn: &TxnLinks,
) -> Result<Vec<(Bytes, f64)>, Replies> {
    let kind = type_of(worker, key, txn).await;
    let r = match &kind[..] {
        b"none" => return Ok(Vec::new()),
        b"zset" => {
            let args = vec![b("zrange"), key.clone(), b("0"), b("-1"), b("withscores")];
            on_owner(worker, handler("zrange"), args, txn).await
        }
        b"set" => {
            on_owner(
                worker,
                handler("smembers"),
                vec![b("smembers"), key.clone()],
                txn,
            )
            .await
        }
        _ => {
            let mut out = Replies::new();
            out.error(WRONGTYPE);
            return Err(out);
        }
    };
    if r.error_text().is_some() || r.overflowed() {
        return Err(r);
    }
    let mut entries: Vec<(Bytes, f64)> = Vec::new();
    for token in r.tokens() {
        match token {
            Token::Bulk(range) => entries.push((Bytes::copy_from_slice(r.bytes(range)), 1.0)),
            Token::Double(v) => {
                if let Some(last) = entries.last_mut() {
                    last.1 = *v;
                }
            }
            _ => {}
        }
    }
    Ok(entries)
}

/// `ZUNION`/`ZINTER`/`ZDIFF` (and their `STORE`s, `ZINTERCARD`) over keys on any shards.
async fn zalgebra(
    worker: &Worker,
    op: SetOp,
    store: bool,
    card: bool,
    args: &[Bytes],
    txn: &TxnLinks,
) -> Replies {
    let mut out = Replies::new();
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let at = if store { 2 } else { 1 };
    let Some(numkeys) = fc_resp::number::parse_i64(&args[at]) else {
        out.error(b"ERR value is not an integer or out of range");
        return out;
    };
    if numkeys < 1 {
        out.error(format!("ERR at least 1 input key is needed for '{name}' command").as_bytes());
        return out;
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - at - 1 {
        out.error(b"ERR syntax error");
        return out;
    }
    let keys = &args[at + 1..at + 1 + numkeys];
    let mut inputs = Vec::with_capacity(numkeys);
    for key in keys {
        match zinput(worker, key, txn).await {
            Ok(entries) => inputs.push(entries),
            Err(err) => return err,
        }
    }
    let mut weights = vec![1.0; numkeys];
    let mut aggregate = Aggregate::Sum;
    let (mut with_scores, mut limit) = (false, 0usize);
    let mut i = at + 1 + numkeys;
    while i < args.len() {
        let remaining = args.len() - i;
        let word = &args[i];
        if card && word.eq_ignore_ascii_case(b"limit") && remaining >= 2 {
            match fc_resp::number::parse_i64(&args[i + 1]) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => {
                    out.error(b"ERR LIMIT can't be negative");
                    return out;
                }
            }
            i += 2;
        } else if !card
            && op != SetOp::Diff
            && word.eq_ignore_ascii_case(b"weights")
            && remaining > numkeys
        {
            for (w, arg) in weights.iter_mut().zip(&args[i + 1..=i + numkeys]) {
                match command::parse_float(arg) {
                    Some(v) => *w = v,
                    None => {
                        out.error(b"ERR weight value is not a float");
                        return out;
                    }
                }
            }
            i += numkeys + 1;
        } else if !card
            && op != SetOp::Diff
            && word.eq_ignore_ascii_case(b"aggregate")
            && remaining >= 2
        {
            let a = &args[i + 1];
            aggregate = if a.eq_ignore_ascii_case(b"sum") {
                Aggregate::Sum
            } else if a.eq_ignore_ascii_case(b"min") {
                Aggregate::Min
            } else if a.eq_ignore_ascii_case(b"max") {
                Aggregate::Max
            } else {
                out.error(b"ERR syntax error");
                return out;
            };
            i += 2;
        } else if !card && !store && word.eq_ignore_ascii_case(b"withscores") {
            with_scores = true;
            i += 1;
        } else {
            out.error(b"ERR syntax error");
            return out;
        }
    }
    let mut result: Vec<(Bytes, f64)> = match op {
        SetOp::Union => {
            let mut index: std::collections::HashMap<Bytes, usize> =
                std::collections::HashMap::new();
            let mut all: Vec<(Bytes, f64)> = Vec::new();
            for (entries, w) in inputs.into_iter().zip(&weights) {
                for (m, s) in entries {
                    let v = not_nan(s * w);
                    match index.get(&m) {
                        Some(&at) => aggregate.apply(&mut all[at].1, v),
                        None => {
                            index.insert(m.clone(), all.len());
                            all.push((m, v));
                        }
                    }
                }
            }
            all
        }
        SetOp::Inter => {
            let maps: Vec<std::collections::HashMap<Bytes, f64>> = inputs[1..]
                .iter()
                .map(|e| e.iter().cloned().collect())
                .collect();
            let mut all = Vec::new();
            for (m, s) in &inputs[0] {
                let mut v = not_nan(s * weights[0]);
                let mut everywhere = true;
                for (map, w) in maps.iter().zip(&weights[1..]) {
                    match map.get(m) {
                        Some(s) => aggregate.apply(&mut v, not_nan(s * w)),
                        None => {
                            everywhere = false;
                            break;
                        }
                    }
                }
                if everywhere {
                    all.push((m.clone(), v));
                }
            }
            all
        }
        SetOp::Diff => {
            let others: HashSet<&Bytes> = inputs[1..].iter().flatten().map(|(m, _)| m).collect();
            inputs[0]
                .iter()
                .filter(|(m, _)| !others.contains(m))
                .cloned()
                .collect()
        }
    };
    if card {
        let n = if limit > 0 {
            result.len().min(limit)
        } else {
            result.len()
        };
        out.integer(n as i64);
        return out;
    }
    // Scores compare as numbers (-0 equals 0, as in a sorted set), then members.
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    if store {
        let mut sub = Vec::with_capacity(2 + 2 * result.len());
        sub.push(b("zreplace"));
        sub.push(args[1].clone());
        for (m, s) in result {
            let mut buf = [0u8; fc_resp::number::MAX_DOUBLE_LEN];
            let text = fc_resp::number::format_double(s, &mut buf);
            sub.push(Bytes::copy_from_slice(text));
            sub.push(m);
        }
        return on_owner(worker, ZSET_REPLACE, sub, txn).await;
    }
    if with_scores {
        out.pairs_len(result.len());
        for (m, s) in &result {
            out.pair();
            out.bulk(m);
            out.double(*s);
        }
    } else {
        out.array_len(result.len());
        result.iter().for_each(|(m, _)| out.bulk(m));
    }
    out
}

/// `BITOP AND|OR|XOR|NOT dest key...`: each source read on its owner (missing: empty), the
/// result (as long as the longest source, shorter ones padded with zero bytes) set at `dest`
/// (deleted when every source is empty); replies its length.
async fn bitop(worker: &Worker, args: &[Bytes], txn: &TxnLinks) -> Replies {
    let mut out = Replies::new();
    let op = args[1].to_ascii_lowercase();
    if !matches!(&op[..], b"and" | b"or" | b"xor" | b"not") {
        out.error(b"ERR syntax error");
        return out;
    }
    if op == b"not" && args.len() != 4 {
        out.error(b"ERR BITOP NOT must be called with a single source key.");
        return out;
    }
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        let r = on_owner(worker, handler("get"), vec![b("get"), key.clone()], txn).await;
        match r.tokens().first() {
            Some(Token::Bulk(range)) => sources.push(r.bytes(range).to_vec()),
            Some(Token::Null) => sources.push(Vec::new()),
            _ => return r,
        }
    }
    let len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let dest = args[2].clone();
    if len == 0 {
        on_owner(worker, DELETE, vec![b("del"), dest], txn).await;
        out.integer(0);
        return out;
    }
    let byte = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| {
            let mut rest = sources.iter().map(|s| byte(s, i));
            let first = rest.next().unwrap_or(0);
            match &op[..] {
                b"and" => rest.fold(first, |a, b| a & b),
                b"or" => rest.fold(first, |a, b| a | b),
                b"xor" => rest.fold(first, |a, b| a ^ b),
                _ => !first,
            }
        })
        .collect();
    let set = on_owner(
        worker,
        handler("set"),
        vec![b("set"), dest, Bytes::from(result)],
        txn,
    )
    .await;
    if set.error_text().is_some() {
        return set;
    }
    out.integer(len as i64);
    out
}

/// Redis's `proto-max-bulk-len` default: `LCS` refuses a table larger than this.
const LCS_MAX_TABLE_BYTES: u64 = 512 << 20;

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]` over keys on any shards: both
/// strings read on their owners (missing: empty), then Redis's dynamic-programming table and
/// its walk back from the end, which gives the same string and the same ranges, last match
/// first.
async fn lcs(worker: &Worker, args: &[Bytes], txn: &TxnLinks) -> Replies {
    let mut out = Replies::new();
    let mut strings = Vec::with_capacity(2);
    for key in &args[1..3] {
        let r = on_owner(worker, handler("get"), vec![b("get"), key.clone()], txn).await;
        match r.tokens().first() {
            Some(Token::Bulk(range)) => strings.push(r.bytes(range).to_vec()),
            Some(Token::Null) => strings.push(Vec::new()),
            _ if r.error_text().is_some_and(|e| e.starts_with(b"WRONGTYPE")) => {
                out.error(b"ERR The specified keys must contain string values");
                return out;
            }
            _ => return r,
        }
    }
    let (mut idx, mut len, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        if opt.eq_ignore_ascii_case(b"idx") {
            idx = true;
        } else if opt.eq_ignore_ascii_case(b"len") {
            len = true;
        } else if opt.eq_ignore_ascii_case(b"withmatchlen") {
            with_len = true;
        } else if opt.eq_ignore_ascii_case(b"minmatchlen") && i + 1 < args.len() {
            match fc_resp::number::parse_i64(&args[i + 1]) {
                Some(n) => min_len = n.max(0) as u64,
                None => {
                    out.error(b"ERR value is not an integer or out of range");
                    return out;
                }
            }
            i += 1;
        } else {
            out.error(b"ERR syntax error");
            return out;
        }
        i += 1;
    }
    if idx && len {
        out.error(b"ERR If you want both the length and indexes, please just use IDX.");
        return out;
    }
    let (a, b_) = (&strings[0], &strings[1]);
    let table_bytes = (a.len() as u64 + 1) * (b_.len() as u64 + 1) * 4;
    if table_bytes > LCS_MAX_TABLE_BYTES {
        out.error(b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return out;
    }
    let m = lcs_match(a, b_);
    if idx {
        out.map_len(2);
        out.bulk(b"matches");
        let ranges: Vec<_> = m
            .ranges
            .iter()
            .filter(|r| min_len == 0 || r.len >= min_len)
            .collect();
        out.array_len(ranges.len());
        for r in ranges {
            out.array_len(2 + usize::from(with_len));
            out.array_len(2);
            out.integer(r.a.0 as i64);
            out.integer(r.a.1 as i64);
            out.array_len(2);
            out.integer(r.b.0 as i64);
            out.integer(r.b.1 as i64);
            if with_len {
                out.integer(r.len as i64);
            }
        }
        out.bulk(b"len");
        out.integer(m.text.len() as i64);
    } else if len {
        out.integer(m.text.len() as i64);
    } else {
        out.bulk(&m.text);
    }
    out
}

/// A common run of `LCS ... IDX`: inclusive byte ranges in each string.
#[derive(Debug, PartialEq)]
struct LcsRange {
    a: (usize, usize),
    b: (usize, usize),
    len: u64,
}

/// The longest common subsequence of `a` and `b`, and its contiguous runs in the order Redis
/// reports them (from the end).
#[derive(Debug)]
struct LcsMatch {
    text: Vec<u8>,
    ranges: Vec<LcsRange>,
}

fn lcs_match(a: &[u8], b: &[u8]) -> LcsMatch {
    let w = b.len() + 1;
    // table[i * w + j]: the LCS length of a[..i] and b[..j].
    let mut table = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * w + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * w + j - 1] + 1
            } else {
                table[(i - 1) * w + j].max(table[i * w + j - 1])
            };
        }
    }
    let total = table[a.len() * w + b.len()] as usize;
    let mut text = vec![0u8; total];
    let mut ranges = Vec::new();
    // The run being extended backwards: (a start, a end, b start, b end).
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j, mut k) = (a.len(), b.len(), total);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            text[k - 1] = a[i - 1];
            match &mut run {
                None => run = Some((i - 1, i - 1, j - 1, j - 1)),
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                Some(_) => emit = true,
            }
            if run.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            i -= 1;
            j -= 1;
            k -= 1;
        } else {
            if table[(i - 1) * w + j] > table[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        if emit && let Some(r) = run.take() {
            ranges.push(LcsRange {
                a: (r.0, r.1),
                b: (r.2, r.3),
                len: (r.1 - r.0 + 1) as u64,
            });
        }
    }
    LcsMatch { text, ranges }
}

#[cfg(test)]
mod lcs_tests {
    use super::*;

    #[test]
    fn lcs_matches_redis_documented_example() {
        // The example of Redis's LCS page: ohmytext / mynewtext.
        let m = lcs_match(b"ohmytext", b"mynewtext");
        assert_eq!(m.text, b"mytext");
        let ranges: Vec<_> = m.ranges.iter().map(|r| (r.a, r.b, r.len)).collect();
        assert_eq!(ranges, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        assert_eq!(lcs_match(b"", b"abc").text, b"");
        assert!(lcs_match(b"abc", b"xyz").ranges.is_empty());
    }
}

/// `PFCOUNT key...` (several keys) and `PFMERGE dest source...` over keys on any shards: each
/// value read on its owner, counted or merged here, the merge stored on the destination's
/// owner (its TTL kept).
async fn hll_across(worker: &Worker, multi: Multi, args: &[Bytes], txn: &TxnLinks) -> Replies {
    use crate::command::hyperloglog::{SPARSE_MAX_BYTES, hll_error};
    use fc_shard::hll;
    let mut out = Replies::new();
    let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        let r = on_owner(worker, handler("get"), vec![b("get"), key.clone()], txn).await;
        match r.tokens().first() {
            // Each key is checked as it is read, so the first bad key decides the error.
            // Header then registers, key by key (see hyperloglog::read).
            Some(Token::Bulk(range)) => match hll::count_union(&[r.bytes(range)]) {
                Ok(_) => values.push(Some(r.bytes(range).to_vec())),
                Err(e) => {
                    hll_error(&mut out, e);
                    return out;
                }
            },
            Some(Token::Null) => values.push(None),
            _ => return r,
        }
    }
    if multi == Multi::PfCount {
        let present: Vec<&[u8]> = values.iter().flatten().map(Vec::as_slice).collect();
        match hll::count_union(&present) {
            Ok(n) => out.integer(n as i64),
            Err(e) => hll_error(&mut out, e),
        }
        return out;
    }
    let sources: Vec<&[u8]> = values[1..].iter().flatten().map(Vec::as_slice).collect();
    let merged = match hll::merge(values[0].as_deref(), &sources, SPARSE_MAX_BYTES) {
        Ok(merged) => merged,
        Err(e) => {
            hll_error(&mut out, e);
            return out;
        }
    };
    let set = vec![b("set"), args[1].clone(), Bytes::from(merged), b("keepttl")];
    let r = on_owner(worker, handler("set"), set, txn).await;
    if r.error_text().is_some() {
        return r;
    }
    out.ok();
    out
}

/// The destination of an export reply (`[dest index, items...]`: the array header, then the
/// index into `args`), leaving `tokens` at the first item.
fn export_dest<'a>(
    tokens: &mut std::slice::Iter<'_, Token>,
    args: &'a [Bytes],
) -> Option<&'a Bytes> {
    match tokens.nth(1) {
        Some(Token::Integer(i)) => usize::try_from(*i).ok().and_then(|i| args.get(i)),
        _ => None,
    }
}

/// A storing GEO search (`GEORADIUS ... STORE`, `GEOSEARCHSTORE`) whose destination is on
/// another shard: the search on the source's owner ([`command::GEO_EXPORT`]: Redis's checks,
/// in its order), then the destination replaced on its owner (deleted when nothing matched).
async fn geo_store(worker: &Worker, args: &[Bytes], txn: &TxnLinks) -> Replies {
    let src = match command::geo::GeoCommand::of(&args[0]) {
        Some(command::geo::GeoCommand::SearchStore) => 2,
        _ => 1,
    };
    let mut sub = Vec::with_capacity(args.len() + 2);
    sub.push(b("geoexport"));
    sub.push(args[src].clone());
    sub.extend(args.iter().cloned());
    let r = on_owner(worker, command::GEO_EXPORT, sub, txn).await;
    if r.error_text().is_some() || r.overflowed() {
        return r;
    }
    let mut tokens = r.tokens().iter();
    let Some(dest) = export_dest(&mut tokens, args) else {
        let mut out = Replies::new();
        out.error(b"ERR syntax error");
        return out;
    };
    let mut store = vec![b("zreplace"), dest.clone()];
    for token in tokens {
        match token {
            Token::Double(v) => {
                let mut buf = [0u8; fc_resp::number::MAX_DOUBLE_LEN];
                store.push(Bytes::copy_from_slice(fc_resp::number::format_double(
                    *v, &mut buf,
                )));
            }
            Token::Bulk(range) => store.push(Bytes::copy_from_slice(r.bytes(range))),
            _ => {}
        }
    }
    on_owner(worker, ZSET_REPLACE, store, txn).await
}
