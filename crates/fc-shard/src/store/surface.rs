//! The key-value surface every store kind shares: one list of methods, written once.
//!
//! Each store implements a few **core** methods itself — where it differs: a lock per shard
//! ([`EmbeddedStore`]) or ownership of a worker's shards ([`LocalEmbeddedStore`]) — and
//! [`kv_surface!`] derives the rest from them with the same names, meanings and documentation
//! on both ([`crate::SharedEmbeddedStore`] derefs to [`EmbeddedStore`]). The cores are
//! `try_set_routed`, `delete_routed`, `try_delete`, `expire_at_ms`, `persist`, `get_routed`,
//! `get_view_routed`, `exists_routed`, `pttl_millis`, `try_batch_set`, `get_string` (an
//! object operation) and the batch and session reads, whose view forms differ in shape only
//! where a lock must be held while a value is borrowed (a [`crate::ValueRef`] guard, or a
//! visitor, on [`EmbeddedStore`]; plain borrows on [`LocalEmbeddedStore`]).
//!
//! `tests/surface.rs` runs one script of every shared method against all three kinds, so a
//! method missing on one fails to compile.

use fc_route::PreparedPointKey;

use super::{EmbeddedStore, LocalEmbeddedStore, ValueRef, ttl_ms_to_seconds};
use crate::error::StoreError;
use crate::stats::KeyTtl;

/// Derives the shared key-value methods of `$store` from its cores. `$($mutable)?` is `mut`
/// for a store whose methods take `&mut self`; `$view` is what a borrowed read returns;
/// `$owner` is the sentence a `# Panics` section adds for a key the store cannot serve, and
/// `$panics` that whole section for a method that panics for no other reason ("" for both
/// where the store serves every key).
macro_rules! kv_surface {
    ($store:ident, [$($mutable:tt)?], $view:ty, $owner:literal, $panics:literal) => {
        impl $store {
            /// Stores `value` under `key`, replacing any previous value (and its type). `ttl_ms`
            /// is relative to now; `None` stores a value that never expires.
            ///
            /// # Panics
            #[doc = $owner]
            /// When `try_set` would fail (a key over 64 MiB, a value over 4 GiB, a full size
            /// class).
            pub fn set(
                &$($mutable)? self,
                key: impl AsRef<[u8]>,
                value: impl AsRef<[u8]>,
                ttl_ms: Option<u64>,
            ) {
                self.set_value_bytes(key.as_ref(), value.as_ref(), ttl_ms);
            }

            /// `set` for borrowed slices, without generic arguments.
            ///
            /// # Panics
            /// As `set`.
            pub fn set_value_bytes(&$($mutable)? self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) {
                if let Err(err) = self.try_set(key, value, ttl_ms) {
                    panic!("fast-cache set failed: {err}");
                }
            }

            /// Stores `value` under `key`, or says why it cannot.
            ///
            /// # Errors
            /// [`StoreError::NotOwner`] for a key of another worker (a local store),
            /// [`StoreError::KeyTooLarge`], [`StoreError::ValueTooLarge`],
            /// [`StoreError::ShardFull`].
            pub fn try_set(
                &$($mutable)? self,
                key: &[u8],
                value: &[u8],
                ttl_ms: Option<u64>,
            ) -> Result<(), StoreError> {
                let route = self.route_key(key);
                self.try_set_routed(&route, key, value, ttl_ms)
            }

            /// `set` with a precomputed route of `key` (see `route_key`).
            ///
            /// # Panics
            /// As `set`.
            pub fn set_routed(
                &$($mutable)? self,
                route: &fc_route::EmbeddedKeyRoute,
                key: &[u8],
                value: &[u8],
                ttl_ms: Option<u64>,
            ) {
                if let Err(err) = self.try_set_routed(route, key, value, ttl_ms) {
                    panic!("fast-cache set failed: {err}");
                }
            }

            /// `set` for a prepared key (no hashing).
            ///
            /// # Panics
            /// As `set`.
            pub fn set_prepared(&$($mutable)? self, key: &PreparedPointKey, value: &[u8], ttl_ms: Option<u64>) {
                self.set_routed(&key.route(), key.key(), value, ttl_ms);
            }

            /// Deletes `key`; true when it existed.
            #[doc = $panics]
            pub fn delete(&$($mutable)? self, key: &[u8]) -> bool {
                let route = self.route_key(key);
                self.delete_routed(&route, key)
            }

            /// `delete` for a prepared key.
            ///
            /// # Panics
            /// As `delete`.
            pub fn delete_prepared(&$($mutable)? self, key: &PreparedPointKey) -> bool {
                self.delete_routed(&key.route(), key.key())
            }

            /// Makes `key` expire `ttl_ms` from now; false when the key does not exist.
            #[doc = $panics]
            pub fn expire(&$($mutable)? self, key: &[u8], ttl_ms: u64) -> bool {
                let at = self.clock().now_ms().saturating_add(ttl_ms);
                self.expire_at_ms(key, at)
            }

            /// A copy of the value of `key` (`None`: missing, expired, or not a string).
            #[doc = $panics]
            #[must_use]
            pub fn get(&$($mutable)? self, key: &[u8]) -> Option<Vec<u8>> {
                let route = self.route_key(key);
                self.get_routed(&route, key)
            }

            /// `get` for a prepared key.
            ///
            /// # Panics
            /// As `get`.
            #[must_use]
            pub fn get_prepared(&$($mutable)? self, key: &PreparedPointKey) -> Option<Vec<u8>> {
                self.get_routed(&key.route(), key.key())
            }

            /// `get` that reports why there is no string to return.
            ///
            /// # Errors
            /// [`StoreError::NotOwner`] for a key of another worker (a local store),
            /// [`StoreError::WrongType`] when the key holds another type.
            pub fn try_get(&$($mutable)? self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
                self.get_string(key)
            }

            /// The value of `key`, borrowed from the store: no copy, no allocation.
            #[doc = $panics]
            #[must_use]
            #[inline]
            pub fn get_view(&$($mutable)? self, key: &[u8]) -> Option<$view> {
                let route = self.route_key(key);
                self.get_view_routed(&route, key)
            }

            /// `get_view` for a prepared key.
            ///
            /// # Panics
            /// As `get_view`.
            #[must_use]
            pub fn get_view_prepared(&$($mutable)? self, key: &PreparedPointKey) -> Option<$view> {
                self.get_view_routed(&key.route(), key.key())
            }

            /// Whether `key` exists (and has not expired).
            #[doc = $panics]
            #[must_use]
            pub fn exists(&$($mutable)? self, key: &[u8]) -> bool {
                let route = self.route_key(key);
                self.exists_routed(&route, key)
            }

            /// `exists` for a prepared key.
            ///
            /// # Panics
            /// As `exists`.
            #[must_use]
            pub fn exists_prepared(&$($mutable)? self, key: &PreparedPointKey) -> bool {
                self.exists_routed(&key.route(), key.key())
            }

            /// Remaining time to live of `key` in seconds, rounded as Redis's `TTL` does.
            #[doc = $panics]
            #[must_use]
            pub fn ttl_seconds(&$($mutable)? self, key: &[u8]) -> KeyTtl {
                ttl_ms_to_seconds(self.pttl_millis(key))
            }

            /// Stores every `(key, value)` pair with the same TTL; later pairs win over earlier
            /// pairs with the same key.
            ///
            /// # Panics
            /// When `try_batch_set` would fail.
            pub fn batch_set<K, V>(
                &$($mutable)? self,
                items: impl IntoIterator<Item = (K, V)>,
                ttl_ms: Option<u64>,
            ) where
                K: AsRef<[u8]>,
                V: AsRef<[u8]>,
            {
                if let Err(err) = self.try_batch_set(items, ttl_ms) {
                    panic!("fast-cache batch_set failed: {err}");
                }
            }
        }
    };
}

kv_surface!(EmbeddedStore, [], ValueRef<'_>, "", "");
kv_surface!(
    LocalEmbeddedStore,
    [mut],
    &[u8],
    "When the key is owned by another worker.",
    "\n# Panics\nWhen the key is owned by another worker."
);
