//! Redis's HyperLogLog (`PFADD`, `PFCOUNT`, `PFMERGE`) over the byte strings Redis stores, so
//! that a key's value is byte-for-byte what Redis 7.0 keeps (and `GET` of it, `DUMP`, replication
//! to or from Redis, all agree).
//!
//! # Byte layout
//!
//! An HLL is an ordinary string value that starts with a 16-byte header:
//!
//! ```text
//! offset  0..4   "HYLL"                       magic
//! offset  4      encoding                     0 = dense, 1 = sparse (anything else: not an HLL)
//! offset  5..8   unused                       zero as Redis writes them; never checked, kept
//! offset  8..16  cached cardinality           u64 little-endian; the top bit (bit 7 of byte 15)
//!                                             set means "stale, recompute"
//! ```
//!
//! The 16384 registers (index = the low 14 bits of the element's hash, value = 1 + the number of
//! zero bits above them, 1..=51) follow in one of two encodings:
//!
//! * **Dense**: 16384 × 6 bits = 12288 bytes, so the whole string is exactly 12304 bytes.
//!   Register `i` starts at bit `6 i`, packed from the least significant bit of each byte
//!   upward and continuing into the next byte (`|11000000|22221111|33333322|...`, bits of
//!   register 0 being the low six of byte 0).
//! * **Sparse**: a run-length code, one opcode after another, that must cover exactly 16384
//!   registers:
//!   - `00xxxxxx` ZERO: `xxxxxx + 1` (1..=64) registers at 0;
//!   - `01xxxxxx yyyyyyyy` XZERO: `(xxxxxx << 8 | yyyyyyyy) + 1` (1..=16384) registers at 0;
//!   - `1vvvvvxx` VAL: `xx + 1` (1..=4) registers at value `vvvvv + 1` (1..=32).
//!
//!   An empty HLL is a single XZERO of 16384 (`7f ff`). Redis converts a sparse HLL to dense
//!   when a register would exceed 32 or when an update would make the string longer than
//!   `hll-sparse-max-bytes` (header included); it never converts back.
//!
//! The hash is MurmurHash64A (Redis's endian-neutral variant) seeded with `0xadc83b19`. The
//! estimate is Otmar Ertl's improved estimator over the register histogram (Redis ≥ 5), with the
//! same floating-point operations in the same order as Redis, so counts are identical.
//!
//! # Corrupted values
//!
//! A string with a bad header (too short, wrong magic, encoding > 1, a dense one of the wrong
//! length) is [`HllError::NotHll`] (Redis: `-WRONGTYPE Key is not a valid HyperLogLog string
//! value.`). A well-headed sparse string whose runs do not add up to exactly 16384 registers, or
//! have one reaching past the last register, is [`HllError::Corrupted`] (Redis: `-INVALIDOBJ
//! Corrupted HLL object detected`) where Redis detects it: counting it (only when the cache is
//! stale), merging it, converting it to dense, or adding to a register past its last opcode.
//! Like Redis, an add whose register lies inside the opcodes that are there succeeds on such a
//! string. Reads past the end behave as Redis's do (it reads the string's hidden NUL terminator,
//! here an implicit 0). A dense string is never corrupted: registers above 51 just count
//! absurdly. Nothing here panics or allocates from a length in the input.
//!
//! # Versions
//!
//! Matches redis-server 7.0.15 as Debian 12 ships it (`7.0.15-1~deb12u10`), checked byte for
//! byte (`tests/hll.rs` replays fixtures recorded from it, `tests/fixtures/hll/gen.py`). That
//! build carries the CVE-2025-32023 fix (upstream in 7.2.10, 7.4.5, 8.0.3): a sparse run that
//! reaches past register 16384 makes the value corrupted when counting, merging or converting.
//! Upstream 7.0.15 without it accepts a value that ends with such a run after all 16384
//! registers are covered (when merging or converting, and for a VAL when counting too), and its
//! `int` run counter can wrap around on sparse strings of 512 KiB and more; this module
//! follows the fixed behaviour. Well-formed HLLs behave identically in all of these. The
//! command semantics are unchanged through 7.4: `PFMERGE` includes the destination's own
//! registers, makes the result dense when any input (the destination included) is dense
//! (otherwise it sets registers in sparse form, which may still convert it), and always leaves
//! the cached cardinality stale.

use thiserror::Error;

/// Default of Redis's `hll-sparse-max-bytes`: a sparse HLL that would grow past this many bytes
/// (header included) becomes dense.
pub const HLL_SPARSE_MAX_BYTES_DEFAULT: usize = 3000;

/// Length of the header shared by both encodings.
pub const HEADER_LEN: usize = 16;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Length of a dense HLL string: the header and 16384 six-bit registers.
pub const DENSE_LEN: usize = HEADER_LEN + REGISTERS * BITS / 8;

/// Bits of the hash that index a register.
const P: u32 = 14;
/// Bits of the hash above the index, whose run of trailing zeros is counted.
const Q: u32 = 64 - P;
/// Bits per dense register.
const BITS: usize = 6;
const REGISTER_MASK: u32 = (1 << BITS) - 1;

const ENCODING_DENSE: u8 = 0;
const ENCODING_SPARSE: u8 = 1;
/// Byte of the header holding the encoding.
const ENCODING_AT: usize = 4;
/// Byte of the header whose top bit marks the cached cardinality stale.
const CACHE_FLAG_AT: usize = 15;
const CACHE_STALE: u8 = 0x80;

const SPARSE_XZERO_BIT: u8 = 0x40;
const SPARSE_VAL_BIT: u8 = 0x80;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;

/// Seed of the element hash.
const SEED: u32 = 0xadc8_3b19;
/// `0.5 / ln 2`, Ertl's alpha for m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Why a string cannot be used as an HLL. [`std::fmt::Display`] gives the error line Redis
/// replies (without the leading `-`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum HllError {
    /// The string is not an HLL: too short, no `HYLL` magic, an unknown encoding, or a dense
    /// one of the wrong length.
    #[error("WRONGTYPE Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// The string has an HLL header but its sparse registers are malformed.
    #[error("INVALIDOBJ Corrupted HLL object detected")]
    Corrupted,
}

/// A new empty HLL as `PFADD key` (no elements) or `PFMERGE key` store it: sparse, one XZERO
/// covering all registers, cached cardinality 0 marked stale.
///
/// `PFADD` on a missing key starts from this and replies 1 whatever [`add`] returns (Redis
/// counts the creation as an update).
#[must_use]
pub fn new_sparse() -> Vec<u8> {
    let mut hll = created();
    invalidate_cache(&mut hll);
    hll
}

/// Checks what Redis's `isHLLObjectOrReply` checks: length, magic, encoding, dense length.
/// (That the value is a string at all, with Redis's other `WRONGTYPE` error, is the caller's.)
///
/// # Errors
///
/// [`HllError::NotHll`] when any check fails.
pub fn validate(bytes: &[u8]) -> Result<(), HllError> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != b"HYLL" {
        return Err(HllError::NotHll);
    }
    match bytes[ENCODING_AT] {
        ENCODING_DENSE if bytes.len() == DENSE_LEN => Ok(()),
        ENCODING_SPARSE => Ok(()),
        _ => Err(HllError::NotHll),
    }
}

/// Whether a (valid) HLL is in the dense encoding.
#[must_use]
pub fn is_dense(hll: &[u8]) -> bool {
    hll.get(ENCODING_AT) == Some(&ENCODING_DENSE)
}

/// `PFADD`: adds `elements` to the HLL in place; whether any register changed (the reply, 1 or
/// 0, for an existing key). A change marks the cached cardinality stale; the HLL may become
/// dense (`sparse_max_bytes` is `hll-sparse-max-bytes`).
///
/// # Errors
///
/// [`HllError::NotHll`] (nothing changed) or [`HllError::Corrupted`]. On `Corrupted`, `hll`
/// holds what Redis leaves in its keyspace: the elements before the failing one are added (and
/// the cache marked stale if that changed a register), though Redis replies the error and
/// neither propagates nor counts the change. Store it to stay identical to Redis.
pub fn add(
    hll: &mut Vec<u8>,
    elements: &[&[u8]],
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    validate(hll)?;
    let mut updated = false;
    for element in elements {
        let (index, count) = pattern(element);
        let changed = if is_dense(hll) {
            dense_set(&mut hll[HEADER_LEN..], index, count)
        } else {
            sparse_set(hll, index, count, sparse_max_bytes)?
        };
        updated |= changed;
    }
    if updated {
        invalidate_cache(hll);
    }
    Ok(updated)
}

/// `PFCOUNT` of one key: the estimated cardinality and whether `hll` changed. A fresh cached
/// value is returned as it is; a stale one is recomputed and written into the header (`true`:
/// the caller stores the bytes back, and Redis propagates this write).
///
/// Redis replies the value as a signed 64-bit integer (`value as i64`): only an impossible
/// register content (hand-made dense registers far above what 2^64 hashes produce) yields 2^63,
/// which Redis, like this function, caches with the stale bit set and replies as
/// `-9223372036854775808`.
///
/// # Errors
///
/// [`HllError::NotHll`], or [`HllError::Corrupted`] for malformed sparse registers (checked
/// only when the cache is stale, as Redis does). Nothing is changed on error.
pub fn count(hll: &mut [u8]) -> Result<(u64, bool), HllError> {
    validate(hll)?;
    if hll[CACHE_FLAG_AT] & CACHE_STALE == 0 {
        return Ok((cached_cardinality(hll), false));
    }
    let histogram = histogram(hll)?;
    let card = estimate(&histogram);
    hll[8..HEADER_LEN].copy_from_slice(&card.to_le_bytes());
    Ok((card, true))
}

/// `PFCOUNT` of several keys: the estimated cardinality of the union of `hlls` (missing keys
/// left out), which are not modified. Redis computes it this way whenever it is given more than
/// one key, even if all but one are missing.
///
/// # Errors
///
/// The first error in order: [`HllError::NotHll`] or [`HllError::Corrupted`].
pub fn count_union(hlls: &[&[u8]]) -> Result<u64, HllError> {
    let mut max = vec![0u8; REGISTERS];
    for hll in hlls {
        validate(hll)?;
        merge_into(&mut max, hll)?;
    }
    let mut histogram = [0u64; 64];
    for &value in &max {
        histogram[usize::from(value)] += 1;
    }
    Ok(estimate(&histogram))
}

/// `PFMERGE dest sources...`: the value Redis stores at `dest` (`None` when the key is missing;
/// missing sources left out). The destination's own registers take part in the union. The
/// result is dense when any input (the destination included) is dense; otherwise the union is
/// written register by register into the (new or existing) sparse destination, which becomes
/// dense when a register exceeds 32 or it grows past `sparse_max_bytes`. The cached cardinality
/// is always marked stale, its other bits kept from the destination (0 for a new key).
///
/// # Errors
///
/// The first error in order, the destination first: [`HllError::NotHll`] or
/// [`HllError::Corrupted`]. Nothing is stored on error.
pub fn merge(
    dest: Option<&[u8]>,
    sources: &[&[u8]],
    sparse_max_bytes: usize,
) -> Result<Vec<u8>, HllError> {
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for hll in dest.into_iter().chain(sources.iter().copied()) {
        validate(hll)?;
        use_dense |= is_dense(hll);
        merge_into(&mut max, hll)?;
    }
    let mut out = dest.map_or_else(created, <[u8]>::to_vec);
    if use_dense {
        sparse_to_dense(&mut out)?;
    }
    for (index, &value) in max.iter().enumerate() {
        if value == 0 {
            continue;
        }
        if is_dense(&out) {
            dense_set(&mut out[HEADER_LEN..], index, value);
        } else {
            // The destination was validated by `merge_into`, so this cannot fail (and Redis
            // ignores the result too).
            let _ = sparse_set(&mut out, index, value, sparse_max_bytes);
        }
    }
    invalidate_cache(&mut out);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Debugging (`PFDEBUG`, `PFSELFTEST`).

/// `PFDEBUG TODENSE`: converts a sparse HLL to dense in place; whether it was sparse.
///
/// # Errors
///
/// [`HllError::NotHll`], or [`HllError::Corrupted`] for malformed sparse registers (nothing
/// changed).
pub fn to_dense(hll: &mut Vec<u8>) -> Result<bool, HllError> {
    validate(hll)?;
    if is_dense(hll) {
        return Ok(false);
    }
    sparse_to_dense(hll)?;
    Ok(true)
}

/// `PFDEBUG GETREG`: the 16384 registers, in order.
///
/// # Errors
///
/// [`HllError::NotHll`] or [`HllError::Corrupted`].
pub fn registers(hll: &[u8]) -> Result<Vec<u8>, HllError> {
    validate(hll)?;
    let mut max = vec![0u8; REGISTERS];
    merge_into(&mut max, hll)?;
    Ok(max)
}

/// `PFDEBUG DECODE`: a sparse HLL's opcodes as Redis prints them (`z:<run>` for ZERO,
/// `Z:<run>` for XZERO, `v:<value>,<run>` for VAL, space-separated); `None` for a dense one.
///
/// # Errors
///
/// [`HllError::NotHll`].
pub fn decode_sparse(hll: &[u8]) -> Result<Option<String>, HllError> {
    use std::fmt::Write as _;
    validate(hll)?;
    if is_dense(hll) {
        return Ok(None);
    }
    let mut text = String::new();
    let mut at = HEADER_LEN;
    while at < hll.len() {
        let op = Op::decode(hll, at);
        let _ = match op {
            Op::Zero { run, xzero: false } => write!(text, "z:{run} "),
            Op::Zero { run, xzero: true } => write!(text, "Z:{run} "),
            Op::Val { value, run } => write!(text, "v:{value},{run} "),
        };
        at += op.len();
    }
    text.truncate(text.trim_end().len());
    Ok(Some(text))
}

/// `PFSELFTEST`: checks the dense register packing (every register set and read back among
/// random neighbours) and the estimate (sparse and dense HLLs of the same elements agree, and
/// stay within five standard errors of the true count up to 100,000 elements). The first
/// failure, in Redis's words.
///
/// # Errors
///
/// A description of what failed.
pub fn self_test() -> Result<(), String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut registers = vec![0u8; REGISTERS * BITS / 8];
    let mut model = vec![0u8; REGISTERS];
    for round in 0..5 {
        for (i, want) in model.iter_mut().enumerate() {
            let value = (next() % 64) as u8;
            *want = value;
            dense_put(&mut registers, i, value);
        }
        if let Some(i) = (0..REGISTERS).find(|&i| dense_get(&registers, i) != model[i]) {
            return Err(format!("TESTFAILED Register error at {i} (round {round})"));
        }
    }
    let (mut sparse, mut dense) = (new_sparse(), new_sparse());
    sparse_to_dense(&mut dense).map_err(|e| e.to_string())?;
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    for added in 1..=100_000u64 {
        let element = next().to_le_bytes();
        add(&mut sparse, &[&element], usize::MAX).map_err(|e| e.to_string())?;
        add(&mut dense, &[&element], usize::MAX).map_err(|e| e.to_string())?;
        if added != checkpoint {
            continue;
        }
        checkpoint *= 10;
        let (a, _) = count(&mut sparse).map_err(|e| e.to_string())?;
        let (b, _) = count(&mut dense).map_err(|e| e.to_string())?;
        if a != b {
            return Err(format!(
                "TESTFAILED sparse and dense disagree at {added}: {a} != {b}"
            ));
        }
        let error = (a as f64 - added as f64).abs() / added as f64;
        // Small counts are near exact (linear counting).
        let allowed = (relative_error * 5.0).max(0.05);
        if error > allowed {
            return Err(format!(
                "TESTFAILED Too big error. card:{added} abserr:{}",
                (a as f64 - added as f64).abs()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Hashing.

/// MurmurHash2, 64-bit version (`MurmurHash64A`), reading 8-byte blocks little-endian as Redis's
/// endian-neutral variant does.
fn murmurhash64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut word = [0u8; 8];
        word.copy_from_slice(block);
        let mut k = u64::from_le_bytes(word).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the value it offers: 1 + the trailing zeros of the hash
/// above the index bits (at most `Q + 1` = 51).
fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------
// Header.

/// A new sparse HLL as Redis's `createHLLObject` makes it (cached cardinality 0, fresh).
fn created() -> Vec<u8> {
    let mut hll = Vec::with_capacity(HEADER_LEN + 2);
    hll.extend_from_slice(b"HYLL");
    hll.push(ENCODING_SPARSE);
    hll.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        hll.extend_from_slice(&xzero_opcode(run));
        left -= run;
    }
    hll
}

fn invalidate_cache(hll: &mut [u8]) {
    hll[CACHE_FLAG_AT] |= CACHE_STALE;
}

fn cached_cardinality(hll: &[u8]) -> u64 {
    let mut card = [0u8; 8];
    card.copy_from_slice(&hll[8..HEADER_LEN]);
    u64::from_le_bytes(card)
}

// ---------------------------------------------------------------------------------------------
// Dense registers (`registers` is the 12288 bytes after the header).

fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * BITS / 8;
    let shift = (index * BITS) & 7;
    let b0 = u32::from(registers[byte]);
    // The last register ends inside the last byte; Redis reads the NUL after the string.
    let b1 = u32::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> shift) | (b1 << (8 - shift))) & REGISTER_MASK) as u8
}

fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * BITS / 8;
    let shift = (index * BITS) & 7;
    let value = u32::from(value);
    registers[byte] &= !(REGISTER_MASK << shift) as u8;
    registers[byte] |= (value << shift) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !(REGISTER_MASK >> (8 - shift)) as u8;
        *next |= (value >> (8 - shift)) as u8;
    }
}

/// Raises register `index` to `value`; whether it changed.
fn dense_set(registers: &mut [u8], index: usize, value: u8) -> bool {
    if value > dense_get(registers, index) {
        dense_put(registers, index, value);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes.

/// One decoded sparse opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A run of zero registers, from a ZERO (1 byte) or XZERO (2 bytes) opcode.
    Zero { run: usize, xzero: bool },
    /// A run of 1..=4 registers at 1..=32.
    Val { value: u8, run: usize },
}

impl Op {
    /// Decodes the opcode at `at` (`at < bytes.len()`); a byte past the end reads as 0 like
    /// the NUL terminator Redis reads there.
    fn decode(bytes: &[u8], at: usize) -> Self {
        let op = bytes[at];
        if op & SPARSE_VAL_BIT != 0 {
            Self::Val {
                value: ((op >> 2) & 0x1f) + 1,
                run: usize::from(op & 0x3) + 1,
            }
        } else if op & SPARSE_XZERO_BIT != 0 {
            let low = bytes.get(at + 1).copied().unwrap_or(0);
            Self::Zero {
                run: ((usize::from(op & 0x3f) << 8) | usize::from(low)) + 1,
                xzero: true,
            }
        } else {
            Self::Zero {
                run: usize::from(op & 0x3f) + 1,
                xzero: false,
            }
        }
    }

    /// Bytes of the opcode.
    fn len(self) -> usize {
        match self {
            Self::Zero { xzero: true, .. } => 2,
            _ => 1,
        }
    }

    /// Registers it covers.
    fn run(self) -> usize {
        match self {
            Self::Zero { run, .. } | Self::Val { run, .. } => run,
        }
    }
}

/// A VAL opcode (`value` 1..=32, `run` 1..=4).
fn val_opcode(value: u8, run: usize) -> u8 {
    ((value - 1) << 2) | (run - 1) as u8 | SPARSE_VAL_BIT
}

/// A ZERO opcode (`run` 1..=64).
fn zero_opcode(run: usize) -> u8 {
    (run - 1) as u8
}

/// An XZERO opcode (`run` 1..=16384).
fn xzero_opcode(run: usize) -> [u8; 2] {
    let run = run - 1;
    [(run >> 8) as u8 | SPARSE_XZERO_BIT, (run & 0xff) as u8]
}

/// Appends the shortest zero opcode Redis uses for `run` zero registers (at most 16384).
fn push_zeros(seq: &mut Vec<u8>, run: usize) {
    if run > SPARSE_ZERO_MAX_LEN {
        seq.extend_from_slice(&xzero_opcode(run));
    } else {
        seq.push(zero_opcode(run));
    }
}

/// Calls `f(first, run, value)` for each run of a sparse HLL, in order. Corrupted when a run
/// reaches past the last register or the runs end before it (the checks of Redis with the
/// CVE-2025-32023 fix).
fn sparse_runs(hll: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    let mut index = 0usize;
    let mut at = HEADER_LEN;
    while at < hll.len() {
        let op = Op::decode(hll, at);
        let (run, value) = match op {
            Op::Zero { run, .. } => (run, 0),
            Op::Val { value, run } => (run, value),
        };
        if index + run > REGISTERS {
            return Err(HllError::Corrupted);
        }
        f(index, run, value);
        index += run;
        at += op.len();
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupted)
    }
}

/// Rewrites a sparse HLL as dense (header kept, encoding changed), as Redis's
/// `hllSparseToDense`; a dense one is left alone.
fn sparse_to_dense(hll: &mut Vec<u8>) -> Result<(), HllError> {
    if is_dense(hll) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&hll[..HEADER_LEN]);
    dense[ENCODING_AT] = ENCODING_DENSE;
    let registers = &mut dense[HEADER_LEN..];
    sparse_runs(hll, |first, run, value| {
        if value != 0 {
            for i in first..first + run {
                dense_put(registers, i, value);
            }
        }
    })?;
    *hll = dense;
    Ok(())
}

/// Raises register `index` to `count` in a sparse HLL, as Redis's `hllSparseSet`: splits the
/// opcode covering it, merges equal neighbouring VALs, or converts to dense; whether it
/// changed. Does not touch the cache flag unless it changed (then it marks it stale).
fn sparse_set(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote_and_set(hll, index, count);
    }

    // Step 1: the opcode covering `index`, the one before it, and the first register it covers.
    let end = hll.len();
    let mut at = HEADER_LEN;
    let mut first = 0usize;
    let mut prev = None;
    let mut found = None;
    while at < end {
        let op = Op::decode(hll, at);
        if index < first + op.run() {
            found = Some(op);
            break;
        }
        prev = Some(at);
        at += op.len();
        first += op.run();
    }
    let Some(op) = found else {
        return Err(HllError::Corrupted);
    };

    // Step 2: the trivial in-place cases, else the replacement sequence.
    let last = first + op.run() - 1;
    match op {
        Op::Val { value, .. } if value >= count => return Ok(false),
        Op::Val { run: 1, .. }
        | Op::Zero {
            run: 1,
            xzero: false,
        } => {
            hll[at] = val_opcode(count, 1);
        }
        _ => {
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Zero { .. } => {
                    if index != first {
                        push_zeros(&mut seq, index - first);
                    }
                    seq.push(val_opcode(count, 1));
                    if index != last {
                        push_zeros(&mut seq, last - index);
                    }
                }
                Op::Val { value, .. } => {
                    if index != first {
                        seq.push(val_opcode(value, index - first));
                    }
                    seq.push(val_opcode(count, 1));
                    if index != last {
                        seq.push(val_opcode(value, last - index));
                    }
                }
            }
            // Step 3: put the sequence in place of the opcode (or convert if too long).
            let old_len = op.len();
            if seq.len() > old_len && end + seq.len() - old_len > sparse_max_bytes {
                return promote_and_set(hll, index, count);
            }
            let new_len = end + seq.len() - old_len;
            // An XZERO in the string's last byte takes Redis's NUL terminator as its second
            // byte; Redis then writes the sequence over it and cuts the string at the new length.
            let tail_from = (at + old_len).min(end);
            hll.splice(at..tail_from, seq);
            hll.truncate(new_len);
        }
    }

    // Step 4: merge adjacent VALs of one value, scanning up to 5 opcodes from the previous one.
    let mut at = prev.unwrap_or(HEADER_LEN);
    let mut scan = 5;
    while at < hll.len() && scan > 0 {
        scan -= 1;
        let op = Op::decode(hll, at);
        let Op::Val { value, run } = op else {
            at += op.len();
            continue;
        };
        if at + 1 < hll.len()
            && let Op::Val {
                value: next_value,
                run: next_run,
            } = Op::decode(hll, at + 1)
            && next_value == value
            && run + next_run <= SPARSE_VAL_MAX_LEN
        {
            hll[at + 1] = val_opcode(value, run + next_run);
            hll.remove(at);
            // Stay here to try merging with the next one too.
            continue;
        }
        at += 1;
    }
    invalidate_cache(hll);
    Ok(true)
}

/// Converts to dense and sets the register there (Redis's `promote` path; the register always
/// changes).
fn promote_and_set(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    sparse_to_dense(hll)?;
    Ok(dense_set(&mut hll[HEADER_LEN..], index, count))
}

// ---------------------------------------------------------------------------------------------
// Histogram, union and the estimator.

/// The number of registers at each value (a validated HLL).
fn histogram(hll: &[u8]) -> Result<[u64; 64], HllError> {
    let mut histogram = [0u64; 64];
    if is_dense(hll) {
        for group in hll[HEADER_LEN..].chunks_exact(3) {
            let (b0, b1, b2) = (group[0], group[1], group[2]);
            histogram[usize::from(b0 & 63)] += 1;
            histogram[usize::from((b0 >> 6 | b1 << 2) & 63)] += 1;
            histogram[usize::from((b1 >> 4 | b2 << 4) & 63)] += 1;
            histogram[usize::from(b2 >> 2)] += 1;
        }
        return Ok(histogram);
    }
    sparse_runs(hll, |_, run, value| {
        histogram[usize::from(value)] += run as u64
    })?;
    Ok(histogram)
}

/// `max[i] = max(max[i], register i)` over a validated HLL, as Redis's `hllMerge`.
fn merge_into(max: &mut [u8], hll: &[u8]) -> Result<(), HllError> {
    if is_dense(hll) {
        let registers = &hll[HEADER_LEN..];
        for (i, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(registers, i));
        }
        return Ok(());
    }
    sparse_runs(hll, |first, run, value| {
        for slot in &mut max[first..first + run] {
            *slot = (*slot).max(value);
        }
    })
}

/// Ertl's σ (arXiv:1702.01284), iterated to a fixed point as Redis does.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

/// Ertl's τ (arXiv:1702.01284), iterated to a fixed point as Redis does.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from a register histogram, with Redis's operations in Redis's
/// order (so the same doubles and the same rounding).
fn estimate(histogram: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - histogram[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    let e = ALPHA_INF * m * m / z;
    // Redis rounds with `llroundl`, half away from zero like `f64::round`; out of range (or
    // NaN) it yields x86's "integer indefinite", i64::MIN, which Redis reads as 2^63.
    if e < 9_223_372_036_854_775_808.0 {
        e.round() as u64
    } else {
        1 << 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debugging_views_agree_with_the_registers() {
        assert_eq!(
            decode_sparse(&new_sparse()).unwrap().as_deref(),
            Some("Z:16384")
        );
        let mut hll = new_sparse();
        let elements: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = elements.iter().map(Vec::as_slice).collect();
        add(&mut hll, &refs, HLL_SPARSE_MAX_BYTES_DEFAULT).unwrap();
        assert!(!is_dense(&hll));
        let sparse_registers = registers(&hll).unwrap();
        assert!(sparse_registers.iter().filter(|&&r| r > 0).count() > 290);
        let decoded = decode_sparse(&hll).unwrap().unwrap();
        // The opcodes cover every register.
        let covered: usize = decoded
            .split(' ')
            .map(|op| match op.split_once(':').unwrap() {
                ("v", rest) => rest.split_once(',').unwrap().1.parse::<usize>().unwrap(),
                (_, run) => run.parse().unwrap(),
            })
            .sum();
        assert_eq!(covered, REGISTERS);
        assert!(to_dense(&mut hll).unwrap());
        assert!(!to_dense(&mut hll).unwrap());
        assert_eq!(hll.len(), DENSE_LEN);
        assert_eq!(registers(&hll).unwrap(), sparse_registers);
        assert_eq!(decode_sparse(&hll).unwrap(), None);
        // `self_test` itself runs in `fc-server/tests/catalog.rs` (PFSELFTEST).
    }

    #[test]
    fn murmurhash64a_matches_reference_values() {
        // From an independent implementation (`tests/fixtures/hll/gen.py`); the Redis fixtures
        // check it end to end.
        let cases: [(&[u8], u64, u64); 6] = [
            (b"", 0, 0xd8df_ea65_85bc_9732),
            (b"a", 0x0717_17d2_d36b_6b11, 0x53d2_470a_9b43_b1a7),
            (b"hello", 0x1e68_d17c_457b_f117, 0x0f65_6f01_eecf_e400),
            (b"12345678", 0x758f_67d1_62b2_d202, 0x95eb_b863_8913_2953),
            (
                b"123456789abcdef",
                0xffda_8e09_1774_14c3,
                0x0a29_5e58_95af_07b9,
            ),
            (
                b"foobar-foobar-foobar",
                0xc064_b517_637a_3dec,
                0xfc52_96ba_86f4_f666,
            ),
        ];
        for (key, seed0, redis_seed) in cases {
            assert_eq!(murmurhash64a(key, 0), seed0, "{key:?}");
            assert_eq!(murmurhash64a(key, SEED), redis_seed, "{key:?}");
        }
        // Redis stores PFADD hello as XZERO:9216 VAL:1,1 XZERO:7167.
        assert_eq!(pattern(b"hello"), (9216, 1));
    }

    #[test]
    fn dense_registers_round_trip_without_touching_neighbours() {
        let mut registers = vec![0u8; DENSE_LEN - HEADER_LEN];
        let mut expected = vec![0u8; REGISTERS];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..3 {
            for (i, slot) in expected.iter_mut().enumerate() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if round == 0 || x.is_multiple_of(3) {
                    *slot = (x % 64) as u8;
                    dense_put(&mut registers, i, *slot);
                }
            }
            for (i, &value) in expected.iter().enumerate() {
                assert_eq!(dense_get(&registers, i), value, "register {i}");
            }
        }
        assert_eq!(dense_get(&registers, REGISTERS - 1), registers[12287] >> 2);
    }

    #[test]
    fn estimator_edges() {
        let mut histogram = [0u64; 64];
        histogram[0] = REGISTERS as u64;
        assert_eq!(estimate(&histogram), 0);
        histogram[0] -= 1;
        histogram[1] = 1;
        assert_eq!(estimate(&histogram), 1);
        // Registers beyond what a hash gives: Redis's llroundl overflow, 2^63.
        let mut histogram = [0u64; 64];
        histogram[63] = REGISTERS as u64;
        assert_eq!(estimate(&histogram), 1 << 63);
        assert_eq!(sigma(1.0), f64::INFINITY);
        assert_eq!(tau(0.0), 0.0);
        assert_eq!(tau(1.0), 0.0);
    }

    #[test]
    fn sparse_set_splits_and_merges_like_redis() {
        let mut hll = created();
        // Register 0 to 3: VAL:3,1 XZERO:16383.
        assert_eq!(sparse_set(&mut hll, 0, 3, 3000), Ok(true));
        assert_eq!(&hll[HEADER_LEN..], &[0x88, 0x7f, 0xfe]);
        assert_eq!(hll[CACHE_FLAG_AT], CACHE_STALE);
        // Register 1 to 3 merges into VAL:3,2.
        assert_eq!(sparse_set(&mut hll, 1, 3, 3000), Ok(true));
        assert_eq!(&hll[HEADER_LEN..], &[0x89, 0x7f, 0xfd]);
        // Lower or equal: nothing.
        assert_eq!(sparse_set(&mut hll, 1, 2, 3000), Ok(false));
        // Register 100 to 32: XZERO:98 VAL:32,1 XZERO:16283.
        assert_eq!(sparse_set(&mut hll, 100, 32, 3000), Ok(true));
        assert_eq!(&hll[HEADER_LEN..], &[0x89, 0x40, 0x61, 0xfc, 0x7f, 0x9a]);
        // 33 does not fit a VAL: dense.
        assert_eq!(sparse_set(&mut hll, 5, 33, 3000), Ok(true));
        assert!(is_dense(&hll));
        let registers = &hll[HEADER_LEN..];
        let values: Vec<u8> = [0, 1, 2, 5, 100, 101]
            .iter()
            .map(|&i| dense_get(registers, i))
            .collect();
        assert_eq!(values, [3, 3, 0, 33, 32, 0]);
        // Growing past the limit converts too.
        let mut hll = created();
        assert_eq!(sparse_set(&mut hll, 100, 1, 20), Ok(true));
        assert!(is_dense(&hll));
    }

    #[test]
    fn count_caches_and_add_invalidates() {
        let mut hll = new_sparse();
        assert_eq!(add(&mut hll, &[b"a", b"b", b"c"], 3000), Ok(true));
        assert_eq!(count(&mut hll), Ok((3, true)));
        assert_eq!(&hll[8..16], &[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(count(&mut hll), Ok((3, false)));
        assert_eq!(add(&mut hll, &[b"a"], 3000), Ok(false));
        assert_eq!(hll[15], 0);
        assert_eq!(add(&mut hll, &[b"d"], 3000), Ok(true));
        assert_eq!(&hll[8..16], &[3, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(count(&mut hll), Ok((4, true)));
    }
}
