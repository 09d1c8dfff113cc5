//! # fc-route — key hashing and shard routing for fast-cache
//!
//! **Owns:** the stable 64-bit key hash, the Redis Cluster `{hash tag}` rule, shard selection from
//! the top bits of a hash, the route modes ([`EmbeddedRouteMode`]) and the precomputed routes
//! ([`EmbeddedKeyRoute`], [`EmbeddedSessionRoute`], [`PreparedPointKey`]).
//!
//! **Must not depend on:** any other workspace crate, any runtime, any I/O. It is the bottom of the
//! dependency graph (see `docs/ARCHITECTURE.md`).
//!
//! ## The routing contract (wire and disk)
//! Clients in other languages route with these rules and on-disk files record them, so they are
//! pinned by golden vectors in `tests/golden.rs` and never change silently:
//!
//! 1. `key_hash = XXH3_64(key, seed = 0)` over the **whole** key (used inside a shard's table).
//! 2. The *route slice* of a key is, in order of precedence:
//!    - its hash tag: the bytes between the first `{` and the first `}` after it, when that span is
//!      non-empty (Redis Cluster's rule);
//!    - in [`EmbeddedRouteMode::SessionPrefix`] mode, the key's first `segments` delimiter-separated
//!      segments (`session:1:layer:0` → `session:1` with the default `:` and 2), when the key has
//!      more segments than that;
//!    - otherwise the whole key.
//!    - in [`EmbeddedRouteMode::Namespaced`] mode (fc-server's), the `<key>` part of a
//!      namespaced key (see [`namespaced`]: `\xFF<database>:<key>`, a Redis database other than
//!      0), so a key lives on the same shard in every database (`MOVE` and `SWAPDB` stay within
//!      a shard);
//! 3. `route_hash = XXH3_64(route slice, seed = 0)`; equal to `key_hash` when the slice is the key
//!    (the common case costs one hash).
//! 4. `shard = route_hash >> (64 - log2(shard_count))` — the top bits; `shard_count` is a power of
//!    two from 1 to [`MAX_SHARDS`].
//!
//! ## Limits
//! Shard counts are powers of two in `1..=65536`. Keys of any length hash; the stores above impose
//! their own key-size limits.
//!
//! ## Example
//! ```
//! use fc_route::{EmbeddedRouteMode, ShardRouter};
//!
//! let router = ShardRouter::new(16, EmbeddedRouteMode::FullKey);
//! let a = router.route_key(b"{user:42}:profile");
//! let b = router.route_key(b"{user:42}:cart");
//! assert_eq!(router.shard_of(&a), router.shard_of(&b)); // same hash tag, same shard
//! assert_ne!(a.key_hash(), b.key_hash()); // but distinct keys inside the shard
//!
//! assert!(ShardRouter::try_new(12, EmbeddedRouteMode::FullKey).is_err());
//! ```

use std::fmt;

use xxhash_rust::xxh3::xxh3_64;

/// Largest supported shard count (`2^16`).
pub const MAX_SHARDS: usize = 1 << 16;

/// The stable 64-bit hash of a byte string: XXH3-64 with seed 0.
///
/// This is part of the wire and disk contract (see the crate docs).
#[inline]
#[must_use]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// The first byte of a namespaced key (one of a database other than 0): `0xFF`, which no UTF-8
/// text begins with.
pub const NAMESPACE_MARK: u8 = 0xFF;

/// The stored form of `key` in database `db`: the key itself in database 0 (unless it begins
/// with [`NAMESPACE_MARK`]), else `\xFF<db in decimal>:<key>`. One-to-one, and undone by
/// [`split_namespace`].
#[must_use]
pub fn namespaced(db: u32, key: &[u8]) -> Vec<u8> {
    if db == 0 && key.first() != Some(&NAMESPACE_MARK) {
        return key.to_vec();
    }
    let mut out = Vec::with_capacity(key.len() + 12);
    out.push(NAMESPACE_MARK);
    out.extend_from_slice(db.to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(key);
    out
}

/// The database and the key of a stored key made by [`namespaced`]: `(0, key)` for a plain key
/// (and for one that begins with the mark without the canonical `<decimal>:` after it, which
/// [`namespaced`] never makes).
#[inline]
#[must_use]
pub fn split_namespace(stored: &[u8]) -> (u32, &[u8]) {
    if stored.first() != Some(&NAMESPACE_MARK) {
        return (0, stored);
    }
    split_marked(stored).unwrap_or((0, stored))
}

#[cold]
fn split_marked(stored: &[u8]) -> Option<(u32, &[u8])> {
    let rest = &stored[1..];
    let colon = rest.iter().take(11).position(|&b| b == b':')?;
    let digits = &rest[..colon];
    // Canonical decimal only (no sign, no leading zero but "0" itself).
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
    {
        return None;
    }
    let db: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((db, &rest[colon + 1..]))
}

/// Returns the Redis Cluster hash tag of `key`, or `None` when it has none.
///
/// The tag is the content between the first `{` and the first `}` after it, and only when that
/// content is non-empty: `{user}:1` → `user`, `foo{}{bar}` → none (the first pair is empty),
/// `foo{{bar}}` → `{bar`.
#[inline]
#[must_use]
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    if !may_hold_brace(key) {
        return None;
    }
    let open = find_byte(b'{', key)?;
    let rest = &key[open + 1..];
    let close = find_byte(b'}', rest)?;
    (close > 0).then(|| &rest[..close])
}

/// The first `byte` of `hay`: a plain loop over short keys, where `memchr`'s call and vector
/// setup cost more than the search (a tagged key of 16 bytes routes in ~25% fewer
/// instructions), `memchr` over longer ones.
#[inline(always)]
fn find_byte(byte: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() <= 32 {
        hay.iter().position(|&b| b == byte)
    } else {
        memchr::memchr(byte, hay)
    }
}

/// False only when `key` has no `{` — answered without a call for keys of 8 to 16 bytes (two
/// overlapping words tested at once), the common key size, where `memchr`'s call and setup cost
/// more than the search. Other lengths say "maybe" and leave the search to `memchr`.
#[inline(always)]
fn may_hold_brace(key: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A zero byte of `w ^ braces` is a `{` byte of `w` (the classic "has a zero byte" test: no
    // false negatives, and a false positive only costs the `memchr` call).
    let braces = ONES * u64::from(b'{');
    let holds = |w: u64| {
        let x = w ^ braces;
        x.wrapping_sub(ONES) & !x & HIGHS != 0
    };
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&key[at..at + 8]);
        u64::from_le_bytes(w)
    };
    match key.len() {
        n @ 8..=16 => holds(word(0)) || holds(word(n - 8)),
        _ => true,
    }
}

/// Error returned when a router or store is asked for an unsupported shard count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The shard count is zero, not a power of two, or larger than [`MAX_SHARDS`].
    #[error(
        "invalid shard count {count}: shard counts must be a power of two between 1 and {max}",
        max = MAX_SHARDS
    )]
    InvalidShardCount {
        /// The rejected count.
        count: usize,
    },
}

/// How a key chooses its route slice (and therefore its shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EmbeddedRouteMode {
    /// Route on the key's hash tag if it has one, else on the whole key.
    #[default]
    FullKey,
    /// Route on the key's session prefix, so every chunk of one session lands on one shard.
    SessionPrefix(SessionPrefixRule),
    /// [`EmbeddedRouteMode::FullKey`], except that a namespaced key ([`namespaced`]: a key of
    /// a Redis database other than 0) routes as its key part: the same name is on the same
    /// shard in every database. fc-server's mode; `FullKey` users pay nothing for it.
    Namespaced,
}

impl EmbeddedRouteMode {
    /// Session-prefix routing with the default rule (`:` delimiter, 2 segments).
    #[must_use]
    pub const fn session_prefix() -> Self {
        Self::SessionPrefix(SessionPrefixRule::DEFAULT)
    }

    /// The route slice of `key` under this mode (see the crate docs for the rule).
    #[inline]
    #[must_use]
    pub fn route_slice<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        // A namespace (`\xFF<digits>:`) holds no brace: a namespaced key's tag is its key's.
        if let Some(tag) = hash_tag(key) {
            return tag;
        }
        match self {
            Self::FullKey => key,
            Self::Namespaced => split_namespace(key).1,
            Self::SessionPrefix(rule) => rule.prefix_of(key).unwrap_or(key),
        }
    }
}

/// Which leading part of a key names its session in [`EmbeddedRouteMode::SessionPrefix`] mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPrefixRule {
    /// Segment delimiter, `b':'` by default.
    pub delimiter: u8,
    /// How many leading segments form the session prefix (at least 1), 2 by default.
    pub segments: u8,
}

impl SessionPrefixRule {
    /// `:` delimiter, 2 segments: `session:1:layer:0` → `session:1`.
    pub const DEFAULT: Self = Self {
        delimiter: b':',
        segments: 2,
    };

    /// The session prefix of `key`: the bytes before its `segments`-th delimiter, or `None` when
    /// the key has no more than `segments` segments (it is then routed on the whole key).
    #[inline]
    #[must_use]
    pub fn prefix_of<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let wanted = usize::from(self.segments.max(1));
        let mut seen = 0;
        for (i, &b) in key.iter().enumerate() {
            if b == self.delimiter {
                seen += 1;
                if seen == wanted {
                    return Some(&key[..i]);
                }
            }
        }
        None
    }
}

impl Default for SessionPrefixRule {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The precomputed route of one key: its route hash (chooses the shard) and its key hash (finds the
/// entry inside the shard). Compute it with [`ShardRouter::route_key`].
///
/// A route is only meaningful for the key it was computed from; using it with another key stores
/// or looks up that key in the wrong place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmbeddedKeyRoute {
    route_hash: u64,
    key_hash: u64,
}

impl EmbeddedKeyRoute {
    /// Builds a route from its two hashes (for callers that hashed already, e.g. a client library).
    #[inline]
    #[must_use]
    pub const fn from_hashes(route_hash: u64, key_hash: u64) -> Self {
        Self {
            route_hash,
            key_hash,
        }
    }

    /// Hash of the route slice; its top bits select the shard.
    #[inline]
    #[must_use]
    pub const fn route_hash(&self) -> u64 {
        self.route_hash
    }

    /// Hash of the whole key; locates the entry inside its shard.
    #[inline]
    #[must_use]
    pub const fn key_hash(&self) -> u64 {
        self.key_hash
    }
}

/// The precomputed route of a session prefix: every key of the session lands on this shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmbeddedSessionRoute {
    route_hash: u64,
}

impl EmbeddedSessionRoute {
    /// Hash of the session prefix.
    #[inline]
    #[must_use]
    pub const fn route_hash(&self) -> u64 {
        self.route_hash
    }
}

/// A key together with its precomputed route, so repeated operations on it hash nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PreparedPointKey {
    key: Box<[u8]>,
    route: EmbeddedKeyRoute,
}

impl PreparedPointKey {
    /// The key bytes.
    #[inline]
    #[must_use]
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The key's route.
    #[inline]
    #[must_use]
    pub fn route(&self) -> EmbeddedKeyRoute {
        self.route
    }

    /// Takes the key back.
    #[must_use]
    pub fn into_key(self) -> Vec<u8> {
        self.key.into_vec()
    }
}

/// Maps keys to shards for a power-of-two shard count and a route mode.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ShardRouter {
    shard_bits: u32,
    mode: EmbeddedRouteMode,
}

impl fmt::Debug for ShardRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardRouter")
            .field("shards", &self.shard_count())
            .field("mode", &self.mode)
            .finish()
    }
}

impl ShardRouter {
    /// Creates a router, or explains why `shard_count` is not usable.
    ///
    /// # Errors
    /// [`RouteError::InvalidShardCount`] when `shard_count` is zero, not a power of two, or above
    /// [`MAX_SHARDS`].
    pub fn try_new(shard_count: usize, mode: EmbeddedRouteMode) -> Result<Self, RouteError> {
        if shard_count == 0 || !shard_count.is_power_of_two() || shard_count > MAX_SHARDS {
            return Err(RouteError::InvalidShardCount { count: shard_count });
        }
        Ok(Self {
            shard_bits: shard_count.trailing_zeros(),
            mode,
        })
    }

    /// Creates a router.
    ///
    /// # Panics
    /// With the [`RouteError::InvalidShardCount`] message when [`ShardRouter::try_new`] would fail.
    #[must_use]
    pub fn new(shard_count: usize, mode: EmbeddedRouteMode) -> Self {
        match Self::try_new(shard_count, mode) {
            Ok(router) => router,
            Err(err) => panic!("{err}"),
        }
    }

    /// Number of shards.
    #[inline]
    #[must_use]
    pub const fn shard_count(&self) -> usize {
        1 << self.shard_bits
    }

    /// `log2(shard_count)`.
    #[inline]
    #[must_use]
    pub const fn shard_bits(&self) -> u32 {
        self.shard_bits
    }

    /// The route mode.
    #[inline]
    #[must_use]
    pub const fn mode(&self) -> EmbeddedRouteMode {
        self.mode
    }

    /// The shard owning a route hash: its top `shard_bits` bits.
    #[inline]
    #[must_use]
    pub const fn shard_for_hash(&self, route_hash: u64) -> usize {
        // Two shifts so that one shard (0 bits) needs no branch and never shifts by 64.
        ((route_hash >> (63 - self.shard_bits)) >> 1) as usize
    }

    /// The shard owning a key route.
    #[inline]
    #[must_use]
    pub const fn shard_of(&self, route: &EmbeddedKeyRoute) -> usize {
        self.shard_for_hash(route.route_hash)
    }

    /// The shard owning a session route.
    #[inline]
    #[must_use]
    pub const fn session_shard(&self, route: &EmbeddedSessionRoute) -> usize {
        self.shard_for_hash(route.route_hash)
    }

    /// Computes the route of `key`: one hash when the route slice is the whole key, two otherwise.
    #[inline]
    #[must_use]
    pub fn route_key(&self, key: &[u8]) -> EmbeddedKeyRoute {
        let key_hash = hash_bytes(key);
        let slice = self.mode.route_slice(key);
        let route_hash = if slice.len() == key.len() {
            key_hash
        } else {
            hash_bytes(slice)
        };
        EmbeddedKeyRoute {
            route_hash,
            key_hash,
        }
    }

    /// The route of a key that belongs to session `prefix` (as [`ShardRouter::route_session`]
    /// gives it): reuses the session's hash when the key's route slice is the prefix, else routes
    /// the key on its own so point lookups always find it.
    #[inline]
    #[must_use]
    pub fn route_session_key(
        &self,
        session: &EmbeddedSessionRoute,
        prefix: &[u8],
        key: &[u8],
    ) -> EmbeddedKeyRoute {
        let key_hash = hash_bytes(key);
        let slice = self.mode.route_slice(key);
        let route_hash = if slice == self.mode.route_slice(prefix) {
            session.route_hash
        } else if slice.len() == key.len() {
            key_hash
        } else {
            hash_bytes(slice)
        };
        EmbeddedKeyRoute {
            route_hash,
            key_hash,
        }
    }

    /// Computes the route of a session prefix.
    #[inline]
    #[must_use]
    pub fn route_session(&self, prefix: &[u8]) -> EmbeddedSessionRoute {
        EmbeddedSessionRoute {
            route_hash: hash_bytes(self.mode.route_slice(prefix)),
        }
    }

    /// Hashes `key` once and keeps the result with it.
    #[must_use]
    pub fn prepare_point_key(&self, key: impl Into<Vec<u8>>) -> PreparedPointKey {
        let key = key.into().into_boxed_slice();
        let route = self.route_key(&key);
        PreparedPointKey { key, route }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_round_trip_and_route_like_their_key() {
        let router = ShardRouter::new(1024, EmbeddedRouteMode::Namespaced);
        let plain = ShardRouter::new(1024, EmbeddedRouteMode::FullKey);
        // FullKey routes a namespaced key as any other key.
        let stored = namespaced(3, b"k");
        assert_eq!(plain.route_key(&stored).route_hash(), hash_bytes(&stored));
        for key in [
            &b"user:1"[..],
            b"",
            b"{tag}x",
            b"\xFF",
            b"\xFF9:x",
            b"\xFF00:y",
        ] {
            for db in [0, 1, 9, 15, 4_000_000_000, u32::MAX] {
                let stored = namespaced(db, key);
                assert_eq!(split_namespace(&stored), (db, key), "{db} {key:?}");
                let own = hash_bytes(hash_tag(key).unwrap_or(key));
                assert_eq!(router.route_key(&stored).route_hash(), own);
            }
        }
        // Database 0 stores a plain key as itself; only marked keys are escaped.
        assert_eq!(namespaced(0, b"k"), b"k");
        assert_eq!(namespaced(0, b"\xFFk"), b"\xFF0:\xFFk");
        assert_eq!(namespaced(12, b"k"), b"\xFF12:k");
        // Non-canonical marks are plain keys of database 0.
        for odd in [
            &b"\xFF01:k"[..],
            b"\xFF:k",
            b"\xFF-1:k",
            b"\xFF99999999999:k",
            b"\xFFx",
        ] {
            assert_eq!(split_namespace(odd), (0, odd));
        }
        // The hash tag of the key part still groups keys.
        let a = router.route_key(&namespaced(3, b"{u}:a"));
        let b = router.route_key(b"{u}:b");
        assert_eq!(router.shard_of(&a), router.shard_of(&b));
    }

    #[test]
    fn hash_tag_rules_match_redis_cluster() {
        assert_eq!(hash_tag(b"{user1000}.following"), Some(&b"user1000"[..]));
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo{{bar}}zap"), Some(&b"{bar"[..]));
        assert_eq!(hash_tag(b"foo{bar}{zap}"), Some(&b"bar"[..]));
        assert_eq!(hash_tag(b"no tag"), None);
        assert_eq!(hash_tag(b"open{only"), None);
        assert_eq!(hash_tag(b""), None);
    }

    /// The word test never misses a `{`: every key of 1 to 20 bytes with a `{` (and a `}`) at
    /// any position, among bytes that differ from `{` by one bit (the test's hardest
    /// neighbours), gets the tag `memchr` finds.
    #[test]
    fn brace_prefilter_never_hides_a_tag() {
        fn reference(key: &[u8]) -> Option<&[u8]> {
            let open = memchr::memchr(b'{', key)?;
            let rest = &key[open + 1..];
            let close = memchr::memchr(b'}', rest)?;
            (close > 0).then(|| &rest[..close])
        }
        for len in 1..=20usize {
            for fill in [b'a', b'{' ^ 1, b'{' ^ 0x80, b'{' - 1, 0, 0xff] {
                let plain = vec![fill; len];
                assert_eq!(hash_tag(&plain), reference(&plain), "{plain:?}");
                for open in 0..len {
                    for close in open..len {
                        let mut key = plain.clone();
                        key[open] = b'{';
                        key[close] = b'}';
                        assert_eq!(hash_tag(&key), reference(&key), "{key:?}");
                        let mut key = plain.clone();
                        key[open] = b'{';
                        assert_eq!(hash_tag(&key), reference(&key), "{key:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn session_prefix_rule() {
        let rule = SessionPrefixRule::DEFAULT;
        assert_eq!(
            rule.prefix_of(b"session:1:layer:0"),
            Some(&b"session:1"[..])
        );
        assert_eq!(rule.prefix_of(b"session:1"), None);
        assert_eq!(rule.prefix_of(b"plain"), None);
        let one = SessionPrefixRule {
            delimiter: b'/',
            segments: 1,
        };
        assert_eq!(one.prefix_of(b"a/b/c"), Some(&b"a"[..]));
    }

    #[test]
    fn one_shard_routes_everything_to_zero() {
        let r = ShardRouter::new(1, EmbeddedRouteMode::FullKey);
        for h in [0, 1, u64::MAX, 1 << 63] {
            assert_eq!(r.shard_for_hash(h), 0);
        }
    }

    #[test]
    fn shard_is_top_bits() {
        let r = ShardRouter::new(16, EmbeddedRouteMode::FullKey);
        assert_eq!(r.shard_for_hash(0xF000_0000_0000_0000), 15);
        assert_eq!(r.shard_for_hash(0x0FFF_FFFF_FFFF_FFFF), 0);
        assert_eq!(r.shard_for_hash(0x8000_0000_0000_0000), 8);
        let max = ShardRouter::new(MAX_SHARDS, EmbeddedRouteMode::FullKey);
        assert_eq!(max.shard_for_hash(u64::MAX), MAX_SHARDS - 1);
    }
}
