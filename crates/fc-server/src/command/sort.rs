//! `SORT` and `SORT_RO`: a list, set or sorted set's elements sorted numerically or
//! lexicographically (`ALPHA`), by themselves or by the values of other keys (`BY pattern`),
//! cut with `LIMIT`, each replaced by other keys' values (`GET pattern`, `#` the element,
//! `key->field` a hash field), replied or stored as a list (`STORE`).
//!
//! Redis's order: the options are parsed first (syntax and LIMIT errors before the key's type);
//! an element whose weight does not parse as a number fails the whole command; numeric ties
//! are broken by comparing the elements; a `BY` pattern without `*` skips the sort (`nosort`),
//! except for a set being stored, which is sorted (Redis does so to keep replicas identical).
//!
//! On fast-cache's thread-per-core server a pattern's keys must live on the sorted key's
//! worker (a `{hash tag}` shared with it, or one worker): a key owned by another worker
//! refuses the command with Redis Cluster's error for `BY`/`GET`.

use fc_shard::{KeyType, StoreError, ZRange};

use super::Ctx;
use crate::reply::Reply;

const BY_DENIED: &[u8] = b"ERR BY option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";
const GET_DENIED: &[u8] = b"ERR GET option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.";

/// A parsed `SORT`.
struct Sort<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
    /// The argument index of `STORE`'s destination.
    store: Option<usize>,
}

/// Parses the options; `None` after replying Redis's error.
fn parse<'a, R: Reply>(ctx: &mut Ctx<'a, R>, read_only: bool) -> Option<Sort<'a>> {
    let args = ctx.args;
    let mut s = Sort {
        desc: false,
        alpha: false,
        limit: None,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        match args[i].to_ascii_lowercase().as_slice() {
            b"asc" => s.desc = false,
            b"desc" => s.desc = true,
            b"alpha" => s.alpha = true,
            b"limit" if left >= 2 => {
                let start = ctx.int(i + 1)?;
                let count = ctx.int(i + 2)?;
                s.limit = Some((start, count));
                i += 2;
            }
            b"store" if left >= 1 && !read_only => {
                s.store = Some(i + 1);
                i += 1;
            }
            b"by" if left >= 1 => {
                let pattern = &args[i + 1][..];
                s.by = Some(pattern);
                // A pattern without `*` names no key per element: no sorting at all.
                s.dont_sort = !pattern.contains(&b'*');
                i += 1;
            }
            b"get" if left >= 1 => {
                s.gets.push(&args[i + 1][..]);
                i += 1;
            }
            _ => {
                ctx.syntax_error();
                return None;
            }
        }
        i += 1;
    }
    Some(s)
}

/// The key (and hash field) a pattern names for `element`: `*` replaced by the element, then
/// `->field` after the `*` reads a hash field. `None` when the pattern has no `*`.
fn pattern_key(pattern: &[u8], element: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let (postfix, field) = match after.windows(2).position(|w| w == b"->") {
        Some(at) if at + 2 < after.len() => (&after[..at], Some(after[at + 2..].to_vec())),
        _ => (after, None),
    };
    let key = [&pattern[..star], element, postfix].concat();
    Some((key, field))
}

/// What a pattern reads for `element`: `#` is the element; a missing key, a key of the wrong
/// type or a missing field is `None`. `Err` is a key on another worker.
fn lookup<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    pattern: &[u8],
    element: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some((key, field)) = pattern_key(pattern, element) else {
        return Ok(None);
    };
    // The formed key is in the sorted key's database.
    let key = fc_shard::namespaced(fc_shard::split_namespace(&ctx.args[1]).0, &key);
    let found = match field {
        Some(field) => ctx.store.hget(&key, &field),
        None => ctx.store.get_string(&key),
    };
    match found {
        Ok(v) => Ok(v),
        Err(e @ StoreError::NotOwner { .. }) => Err(e),
        // Another type reads as missing.
        Err(_) => Ok(None),
    }
}

/// Redis's `strtod` check of a weight: the whole string is a number (leading spaces allowed,
/// no NaN); the empty string is 0 (strtod reads nothing and stops at its end).
fn weight(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let s = std::str::from_utf8(text).ok()?.trim_start();
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Runs a parsed sort: the output (one entry per element, or per element and GET pattern),
/// or after replying the error.
fn run<R: Reply>(ctx: &mut Ctx<'_, R>, s: &Sort<'_>) -> Result<Vec<Option<Vec<u8>>>, ()> {
    let key = ctx.args[1].clone();
    let kind = match ctx.store.type_of(&key) {
        Ok(kind) => kind,
        Err(e) => {
            ctx.store_error(&e);
            return Err(());
        }
    };
    let mut dont_sort = s.dont_sort;
    let mut alpha = s.alpha;
    let mut by = s.by;
    // A set stored without sorting would depend on its hash order: Redis sorts it.
    if dont_sort && kind == Some(KeyType::Set) && s.store.is_some() {
        dont_sort = false;
        alpha = true;
        by = None;
    }
    let loaded = match kind {
        None => Ok(Vec::new()),
        Some(KeyType::List) => ctx.store.lrange(&key, 0, -1),
        Some(KeyType::Set) => ctx.store.smembers(&key),
        Some(KeyType::ZSet) => ctx
            .store
            .zrange(&key, ZRange::Rank(0, -1), false, None)
            .map(|e| e.into_iter().map(|(m, _)| m).collect()),
        Some(_) => Err(StoreError::WrongType),
    };
    let mut elements = match loaded {
        Ok(elements) => elements,
        Err(e) => {
            ctx.store_error(&e);
            return Err(());
        }
    };
    let len = elements.len() as i64;
    let (mut start, mut end) = match s.limit {
        Some((start, count)) => {
            let start = start.max(0);
            let end = if count < 0 {
                len - 1
            } else {
                start.saturating_add(count) - 1
            };
            (start, end)
        }
        None => (0, len - 1),
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    if dont_sort {
        // A list or sorted set keeps its order, reversed by DESC.
        if s.desc && matches!(kind, Some(KeyType::List | KeyType::ZSet)) {
            elements.reverse();
        }
    } else {
        // The weights: each element's own value, or the BY key's.
        let mut weighted: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::with_capacity(elements.len());
        for element in elements {
            let w = match by {
                Some(pattern) => match lookup(ctx, pattern, &element) {
                    Ok(w) => w,
                    Err(_) => {
                        ctx.out.error(BY_DENIED);
                        return Err(());
                    }
                },
                None => Some(element.clone()),
            };
            weighted.push((element, w));
        }
        if alpha {
            // A missing BY value sorts first; equal weights keep their order (a stable sort).
            weighted.sort_by(|a, b| {
                let c = match (&a.1, &b.1) {
                    (Some(x), Some(y)) => x.cmp(y),
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                };
                if s.desc { c.reverse() } else { c }
            });
        } else {
            let mut scored = Vec::with_capacity(weighted.len());
            for (element, w) in weighted {
                let score = match w {
                    // A missing weight is 0.
                    None => 0.0,
                    Some(text) => match weight(&text) {
                        Some(v) => v,
                        None => {
                            ctx.out
                                .error(b"ERR One or more scores can't be converted into double");
                            return Err(());
                        }
                    },
                };
                scored.push((element, score));
            }
            scored.sort_by(|a, b| {
                // As numbers (-0 equals 0), ties by the elements' bytes.
                let c =
                    a.1.partial_cmp(&b.1)
                        .unwrap_or(std::cmp::Ordering::Equal)
                        .then_with(|| a.0.cmp(&b.0));
                if s.desc { c.reverse() } else { c }
            });
            elements = scored.into_iter().map(|(e, _)| e).collect();
            return output(ctx, s, elements, start, end);
        }
        elements = weighted.into_iter().map(|(e, _)| e).collect();
    }
    output(ctx, s, elements, start, end)
}

/// The elements in `start..=end`, each as itself or its GET patterns' values.
fn output<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    s: &Sort<'_>,
    elements: Vec<Vec<u8>>,
    start: i64,
    end: i64,
) -> Result<Vec<Option<Vec<u8>>>, ()> {
    let mut out = Vec::new();
    if start > end || start < 0 {
        return Ok(out);
    }
    for element in &elements[start as usize..=end as usize] {
        if s.gets.is_empty() {
            out.push(Some(element.clone()));
            continue;
        }
        for pattern in &s.gets {
            match lookup(ctx, pattern, element) {
                Ok(v) => out.push(v),
                Err(_) => {
                    ctx.out.error(GET_DENIED);
                    return Err(());
                }
            }
        }
    }
    Ok(out)
}

fn sort_generic<R: Reply>(ctx: &mut Ctx<'_, R>, read_only: bool) {
    let Some(s) = parse(ctx, read_only) else {
        return;
    };
    let Ok(out) = run(ctx, &s) else {
        return;
    };
    match s.store {
        None => {
            ctx.out.array_len(out.len());
            for v in out {
                super::bulk_or_null(ctx.out, v);
            }
        }
        Some(dest) => {
            let dest = ctx.args[dest].clone();
            if let Err(e) = ctx.store.try_delete(&dest) {
                return ctx.store_error(&e);
            }
            // Missing values are stored as empty strings.
            let items: Vec<Vec<u8>> = out.into_iter().map(Option::unwrap_or_default).collect();
            if !items.is_empty() {
                let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
                if let Err(e) = ctx
                    .store
                    .push(&dest, fc_shard::ListEnd::Right, &refs, false)
                {
                    return ctx.store_error(&e);
                }
            }
            ctx.out.integer(items.len() as i64);
        }
    }
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]` with every key on this worker.
pub(super) fn sort<R: Reply>(ctx: &mut Ctx<'_, R>) {
    sort_generic(ctx, false);
}

/// `SORT_RO`: `SORT` without `STORE`.
pub(super) fn sort_ro<R: Reply>(ctx: &mut Ctx<'_, R>) {
    sort_generic(ctx, true);
}

/// `[_, key, args of SORT after the key...]` on the key's owner, for a `SORT ... STORE` whose
/// destination is on another worker: replies `[dest index, items...]` (`crate::multi` stores
/// them) or an error.
pub(crate) fn export<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(s) = parse(ctx, false) else {
        return;
    };
    let Ok(out) = run(ctx, &s) else {
        return;
    };
    let Some(dest) = s.store else {
        return ctx.syntax_error();
    };
    ctx.out.array_len(1 + out.len());
    ctx.out.integer(dest as i64);
    for v in out {
        ctx.out.bulk(&v.unwrap_or_default());
    }
}
