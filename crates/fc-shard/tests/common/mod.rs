//! Shared by the model tests: a replica that applies a store's mutation stream, as a WAL
//! replay or a replica would, so a test can compare the two stores' digests.

use fc_shard::{EmbeddedStore, Mutation, SetExpiry, SetOptions, ZAddOptions};

/// Applies a mutation to a replica, as a WAL replay or a replica would.
pub(crate) fn replay(replica: &EmbeddedStore, m: &Mutation<'_>) {
    match *m {
        Mutation::Set {
            key,
            value,
            expire_at_ms,
        } => {
            let expiry = expire_at_ms.map_or(SetExpiry::Clear, SetExpiry::AtMs);
            let options = SetOptions {
                expiry,
                ..SetOptions::default()
            };
            replica.set_with(key, value, options).unwrap();
        }
        Mutation::Delete { key } | Mutation::Expired { key } | Mutation::Evicted { key } => {
            replica.delete(key);
        }
        Mutation::ListPush { key, end, items } => {
            replica.push(key, end, items, false).unwrap();
        }
        Mutation::ListPop { key, end, count } => {
            assert_eq!(
                replica.pop(key, end, count).unwrap().map(|p| p.len()),
                Some(count)
            );
        }
        Mutation::ListSet { key, index, value } => {
            replica.lset(key, index as i64, value).unwrap();
        }
        Mutation::ListTrim { key, start, stop } => replica.ltrim(key, start, stop).unwrap(),
        Mutation::ListRem { key, count, value } => {
            replica.lrem(key, count, value).unwrap();
        }
        Mutation::ListInsert {
            key,
            position,
            pivot,
            value,
        } => {
            replica.linsert(key, position, pivot, value).unwrap();
        }
        Mutation::SAdd { key, members } => {
            replica.sadd(key, members).unwrap();
        }
        Mutation::SRem { key, members } => {
            replica.srem(key, members).unwrap();
        }
        Mutation::ZAdd { key, entries } => {
            replica.zadd(key, entries, ZAddOptions::default()).unwrap();
        }
        Mutation::ZRem { key, members } => {
            replica.zrem(key, members).unwrap();
        }
        Mutation::Expire { key, expire_at_ms } => {
            replica.expire_at_ms(key, expire_at_ms);
        }
        Mutation::Persist { key } => {
            replica.persist(key);
        }
        Mutation::Flush => replica.clear(),
        Mutation::Rename { from, to } => {
            replica.rename(from, to, false).unwrap();
        }
        Mutation::HSet { key, pairs } => {
            replica.hset(key, pairs).unwrap();
        }
        Mutation::HDel { key, fields } => {
            replica.hdel(key, fields).unwrap();
        }
        Mutation::Stream { key, op } => {
            replica.stream_apply(key, &op).unwrap();
        }
        // Boundaries change nothing; a replica applying as it goes needs no grouping.
        Mutation::TxBegin { .. } | Mutation::TxEnd { .. } | Mutation::ReplMark { .. } => {}
    }
}
