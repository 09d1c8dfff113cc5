//! HyperLogLog: PFADD, PFCOUNT, PFMERGE over Redis's `HYLL` strings (`fc_shard::hll`), so a
//! key's bytes, counts and errors are Redis's. These are the handlers for keys on one shard;
//! `crate::multi` composes PFCOUNT and PFMERGE over keys on several.

use fc_shard::hll::{self, HllError};
use fc_shard::{SetExpiry, SetOptions};

use super::Ctx;
use crate::reply::Reply;

/// `hll-sparse-max-bytes` (Redis's default; the setting is accepted and reported by CONFIG but
/// not yet read here).
pub(crate) const SPARSE_MAX_BYTES: usize = hll::HLL_SPARSE_MAX_BYTES_DEFAULT;

/// Writes `value` at `key` keeping its TTL (an HLL is updated in place, as Redis does).
fn store_value<R: Reply>(ctx: &mut Ctx<'_, R>, key: usize, value: &[u8]) -> bool {
    let options = SetOptions {
        expiry: SetExpiry::Keep,
        ..SetOptions::default()
    };
    match ctx.store.set_with(&ctx.args[key], value, options) {
        Ok(_) => true,
        Err(e) => {
            ctx.store_error(&e);
            false
        }
    }
}

pub(crate) fn hll_error<R: Reply>(out: &mut R, e: HllError) {
    out.error(e.to_string().as_bytes());
}

/// One key of a multi-key PFCOUNT or PFMERGE, its header checked as it is read (the first bad
/// key decides the error, as in Redis); `Err(())` after replying.
fn read<R: Reply>(ctx: &mut Ctx<'_, R>, key: &[u8]) -> Result<Option<Vec<u8>>, ()> {
    match ctx.store.get_string(key) {
        // Each key in turn, its header then its registers (Redis merges each key as it reads
        // it, so the first bad key decides between WRONGTYPE and INVALIDOBJ).
        Ok(Some(v)) => match hll::count_union(&[&v]) {
            Ok(_) => Ok(Some(v)),
            Err(e) => {
                hll_error(ctx.out, e);
                Err(())
            }
        },
        Ok(None) => Ok(None),
        Err(e) => {
            ctx.store_error(&e);
            Err(())
        }
    }
}

/// `PFADD key [element ...]`: 1 when a register changed (or the key was created).
pub(super) fn pfadd<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let existing = match ctx.store.get_string(&ctx.args[1]) {
        Ok(v) => v,
        Err(e) => return ctx.store_error(&e),
    };
    let created = existing.is_none();
    let mut value = existing.unwrap_or_else(hll::new_sparse);
    let elements: Vec<&[u8]> = ctx.args[2..].iter().map(|e| &e[..]).collect();
    match hll::add(&mut value, &elements, SPARSE_MAX_BYTES) {
        Ok(changed) => {
            if (changed || created) && !store_value(ctx, 1, &value) {
                return;
            }
            ctx.out.integer(i64::from(changed || created));
        }
        Err(HllError::Corrupted) => {
            // Redis keeps what was added before the corrupted register.
            if store_value(ctx, 1, &value) {
                hll_error(ctx.out, HllError::Corrupted);
            }
        }
        Err(e) => hll_error(ctx.out, e),
    }
}

/// `PFCOUNT key [key ...]` with every key on this shard: one key counts it (and caches the
/// count in the key, as Redis does); several count their union.
pub(super) fn pfcount<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if ctx.args.len() == 2 {
        let mut value = match ctx.store.get_string(&ctx.args[1]) {
            Ok(Some(v)) => v,
            Ok(None) => return ctx.out.integer(0),
            Err(e) => return ctx.store_error(&e),
        };
        match hll::count(&mut value) {
            Ok((n, changed)) => {
                if changed && !store_value(ctx, 1, &value) {
                    return;
                }
                ctx.out.integer(n as i64);
            }
            Err(e) => hll_error(ctx.out, e),
        }
        return;
    }
    let mut values = Vec::with_capacity(ctx.args.len() - 1);
    for key in &ctx.args[1..] {
        match read(ctx, key) {
            Ok(Some(v)) => values.push(v),
            Ok(None) => {}
            Err(()) => return,
        }
    }
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    match hll::count_union(&refs) {
        Ok(n) => ctx.out.integer(n as i64),
        Err(e) => hll_error(ctx.out, e),
    }
}

/// `PFMERGE destkey [sourcekey ...]` with every key on this shard.
pub(super) fn pfmerge<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut values = Vec::with_capacity(ctx.args.len() - 1);
    for key in &ctx.args[1..] {
        match read(ctx, key) {
            Ok(v) => values.push(v),
            Err(()) => return,
        }
    }
    let dest = values[0].as_deref();
    let sources: Vec<&[u8]> = values[1..].iter().flatten().map(Vec::as_slice).collect();
    match hll::merge(dest, &sources, SPARSE_MAX_BYTES) {
        Ok(merged) => {
            if store_value(ctx, 1, &merged) {
                ctx.out.ok();
            }
        }
        Err(e) => hll_error(ctx.out, e),
    }
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE` on the key's owner, its arguments reordered as
/// `PFDEBUG key subcommand`. `GETREG` and `TODENSE` leave a sparse value dense (stored back,
/// its TTL kept), as Redis does.
pub(super) fn pfdebug<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut value = match ctx.store.get_string(&ctx.args[1]) {
        Ok(Some(v)) => v,
        Ok(None) => return ctx.out.error(b"ERR The specified key does not exist"),
        Err(e) => return ctx.store_error(&e),
    };
    if let Err(e) = hll::validate(&value) {
        return hll_error(ctx.out, e);
    }
    let sub = ctx.args[2].to_ascii_lowercase();
    match sub.as_slice() {
        b"getreg" | b"todense" => {
            let converted = match hll::to_dense(&mut value) {
                Ok(converted) => converted,
                Err(e) => return hll_error(ctx.out, e),
            };
            if converted && !store_value(ctx, 1, &value) {
                return;
            }
            if sub == b"todense" {
                return ctx.out.integer(i64::from(converted));
            }
            match hll::registers(&value) {
                Ok(registers) => {
                    ctx.out.array_len(registers.len());
                    for r in registers {
                        ctx.out.integer(i64::from(r));
                    }
                }
                Err(e) => hll_error(ctx.out, e),
            }
        }
        b"decode" => match hll::decode_sparse(&value) {
            Ok(Some(text)) => ctx.out.bulk(text.as_bytes()),
            Ok(None) => ctx.out.error(b"ERR HLL encoding is not sparse"),
            Err(e) => hll_error(ctx.out, e),
        },
        b"encoding" => {
            let name: &[u8] = if hll::is_dense(&value) {
                b"dense"
            } else {
                b"sparse"
            };
            ctx.out.simple(name);
        }
        _ => {
            let text = format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(&ctx.args[2])
            );
            ctx.out.error(text.as_bytes());
        }
    }
}
