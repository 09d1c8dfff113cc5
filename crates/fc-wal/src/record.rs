//! Frame payloads: one [`Mutation`] each, encoded compactly (layout in `docs/DURABILITY.md`),
//! and [`Record`], the owned mutation a payload decodes to.

use fc_shard::{
    EmbeddedStore, InsertPosition, ListEnd, LocalEmbeddedStore, Mutation, PendingSet, SetExpiry,
    SetOptions, StoreError, StreamId, StreamOp, ZAddOptions,
};

/// Why a payload could not be decoded (its frame's CRC was right: a format this build does not
/// know, or a writer bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The payload ended inside a field.
    #[error("payload ends inside a field")]
    Truncated,
    /// Bytes follow the last field.
    #[error("{0} bytes after the last field")]
    Trailing(usize),
    /// The first byte names no known mutation.
    #[error("unknown mutation tag {0}")]
    UnknownTag(u8),
    /// A field holds a value outside its range.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

// ----- writing --------------------------------------------------------------------------------

fn put_uvar(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_svar(out: &mut Vec<u8>, v: i64) {
    put_uvar(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvar(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_list(out: &mut Vec<u8>, items: &[&[u8]]) {
    put_uvar(out, items.len() as u64);
    for item in items {
        put_bytes(out, item);
    }
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_uvar(out, id.ms);
    put_uvar(out, id.seq);
}

fn put_ids(out: &mut Vec<u8>, ids: &[StreamId]) {
    put_uvar(out, ids.len() as u64);
    for id in ids {
        put_id(out, *id);
    }
}

/// A stream op after its key: a sub-tag, then its fields.
fn encode_stream_op(op: &StreamOp<'_>, out: &mut Vec<u8>) {
    match *op {
        StreamOp::Create => out.push(0),
        StreamOp::Add { id, fields } => {
            out.push(1);
            put_id(out, id);
            put_list(out, fields);
        }
        StreamOp::Delete { ids } => {
            out.push(2);
            put_ids(out, ids);
        }
        StreamOp::Trim { through } => {
            out.push(3);
            put_id(out, through);
        }
        StreamOp::SetId {
            last_id,
            entries_added,
            max_deleted,
        } => {
            out.push(4);
            put_id(out, last_id);
            put_uvar(out, entries_added);
            put_id(out, max_deleted);
        }
        StreamOp::GroupCreate {
            group,
            last_id,
            entries_read,
        } => {
            out.push(5);
            put_bytes(out, group);
            put_id(out, last_id);
            put_svar(out, entries_read);
        }
        StreamOp::GroupSetId {
            group,
            last_id,
            entries_read,
        } => {
            out.push(6);
            put_bytes(out, group);
            put_id(out, last_id);
            put_svar(out, entries_read);
        }
        StreamOp::Advance {
            group,
            last_id,
            entries_read,
        } => {
            out.push(7);
            put_bytes(out, group);
            put_id(out, last_id);
            put_svar(out, entries_read);
        }
        StreamOp::GroupDestroy { group } => {
            out.push(8);
            put_bytes(out, group);
        }
        StreamOp::ConsumerCreate {
            group,
            consumer,
            seen_ms,
        } => {
            out.push(9);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_uvar(out, seen_ms);
        }
        StreamOp::ConsumerDelete { group, consumer } => {
            out.push(10);
            put_bytes(out, group);
            put_bytes(out, consumer);
        }
        StreamOp::Touch {
            group,
            consumer,
            seen_ms,
            active_ms,
        } => {
            out.push(11);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_uvar(out, seen_ms);
            match active_ms {
                Some(at) => {
                    out.push(1);
                    put_uvar(out, at);
                }
                None => out.push(0),
            }
        }
        StreamOp::Claim {
            group,
            consumer,
            entries,
        } => {
            out.push(12);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_uvar(out, entries.len() as u64);
            for e in entries {
                put_id(out, e.id);
                put_uvar(out, e.delivery_ms);
                put_uvar(out, e.delivery_count);
            }
        }
        StreamOp::Ack { group, ids } => {
            out.push(13);
            put_bytes(out, group);
            put_ids(out, ids);
        }
    }
}

fn end_byte(end: ListEnd) -> u8 {
    match end {
        ListEnd::Left => 0,
        _ => 1,
    }
}

/// Appends the payload of `mutation` to `out`. Every variant has an arm (no wildcard): a new
/// [`Mutation`] variant fails to compile here until it has an encoding.
pub fn encode_mutation(mutation: &Mutation<'_>, out: &mut Vec<u8>) {
    match *mutation {
        Mutation::Set {
            key,
            value,
            expire_at_ms,
        } => {
            // Tag, two lengths (at most 10 bytes each), key, value, expiry flag and time.
            out.reserve(1 + 10 + key.len() + 10 + value.len() + 9);
            out.push(1);
            put_bytes(out, key);
            put_bytes(out, value);
            match expire_at_ms {
                Some(at) => {
                    out.push(1);
                    out.extend_from_slice(&at.to_le_bytes());
                }
                None => out.push(0),
            }
        }
        Mutation::Delete { key } => {
            out.push(2);
            put_bytes(out, key);
        }
        Mutation::Expire { key, expire_at_ms } => {
            out.push(3);
            put_bytes(out, key);
            out.extend_from_slice(&expire_at_ms.to_le_bytes());
        }
        Mutation::Persist { key } => {
            out.push(4);
            put_bytes(out, key);
        }
        Mutation::Expired { key } => {
            out.push(5);
            put_bytes(out, key);
        }
        Mutation::Evicted { key } => {
            out.push(6);
            put_bytes(out, key);
        }
        Mutation::Flush => out.push(7),
        Mutation::Rename { from, to } => {
            out.push(8);
            put_bytes(out, from);
            put_bytes(out, to);
        }
        Mutation::HSet { key, pairs } => {
            out.push(9);
            put_bytes(out, key);
            put_uvar(out, pairs.len() as u64);
            for (f, v) in pairs {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        Mutation::HDel { key, fields } => {
            out.push(10);
            put_bytes(out, key);
            put_list(out, fields);
        }
        Mutation::ListPush { key, end, items } => {
            out.push(11);
            put_bytes(out, key);
            out.push(end_byte(end));
            put_list(out, items);
        }
        Mutation::ListPop { key, end, count } => {
            out.push(12);
            put_bytes(out, key);
            out.push(end_byte(end));
            put_uvar(out, count as u64);
        }
        Mutation::ListSet { key, index, value } => {
            out.push(13);
            put_bytes(out, key);
            put_uvar(out, index as u64);
            put_bytes(out, value);
        }
        Mutation::ListTrim { key, start, stop } => {
            out.push(14);
            put_bytes(out, key);
            put_svar(out, start);
            put_svar(out, stop);
        }
        Mutation::ListRem { key, count, value } => {
            out.push(15);
            put_bytes(out, key);
            put_svar(out, count);
            put_bytes(out, value);
        }
        Mutation::ListInsert {
            key,
            position,
            pivot,
            value,
        } => {
            out.push(16);
            put_bytes(out, key);
            out.push(u8::from(position != InsertPosition::Before));
            put_bytes(out, pivot);
            put_bytes(out, value);
        }
        Mutation::SAdd { key, members } => {
            out.push(17);
            put_bytes(out, key);
            put_list(out, members);
        }
        Mutation::SRem { key, members } => {
            out.push(18);
            put_bytes(out, key);
            put_list(out, members);
        }
        Mutation::ZAdd { key, entries } => {
            out.push(19);
            put_bytes(out, key);
            put_uvar(out, entries.len() as u64);
            for (score, member) in entries {
                out.extend_from_slice(&score.to_le_bytes());
                put_bytes(out, member);
            }
        }
        Mutation::ZRem { key, members } => {
            out.push(20);
            put_bytes(out, key);
            put_list(out, members);
        }
        Mutation::Stream { key, op } => {
            out.push(23);
            put_bytes(out, key);
            encode_stream_op(&op, out);
        }
        Mutation::TxBegin { id } => {
            out.push(21);
            out.extend_from_slice(&id.to_le_bytes());
        }
        Mutation::TxEnd { id } => {
            out.push(22);
            out.extend_from_slice(&id.to_le_bytes());
        }
        Mutation::ReplMark { primary, seq } => {
            out.push(24);
            put_bytes(out, primary);
            put_uvar(out, seq);
        }
    }
}

// ----- reading --------------------------------------------------------------------------------

/// A decoded mutation, owned.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    missing_docs,
    reason = "fields mirror fc_shard::Mutation's, documented there"
)]
pub enum Record {
    Set {
        key: Vec<u8>,
        value: Vec<u8>,
        expire_at_ms: Option<u64>,
    },
    Delete {
        key: Vec<u8>,
    },
    Expire {
        key: Vec<u8>,
        expire_at_ms: u64,
    },
    Persist {
        key: Vec<u8>,
    },
    Expired {
        key: Vec<u8>,
    },
    Evicted {
        key: Vec<u8>,
    },
    Flush,
    Rename {
        from: Vec<u8>,
        to: Vec<u8>,
    },
    HSet {
        key: Vec<u8>,
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    HDel {
        key: Vec<u8>,
        fields: Vec<Vec<u8>>,
    },
    ListPush {
        key: Vec<u8>,
        end: ListEnd,
        items: Vec<Vec<u8>>,
    },
    ListPop {
        key: Vec<u8>,
        end: ListEnd,
        count: usize,
    },
    ListSet {
        key: Vec<u8>,
        index: usize,
        value: Vec<u8>,
    },
    ListTrim {
        key: Vec<u8>,
        start: i64,
        stop: i64,
    },
    ListRem {
        key: Vec<u8>,
        count: i64,
        value: Vec<u8>,
    },
    ListInsert {
        key: Vec<u8>,
        position: InsertPosition,
        pivot: Vec<u8>,
        value: Vec<u8>,
    },
    SAdd {
        key: Vec<u8>,
        members: Vec<Vec<u8>>,
    },
    SRem {
        key: Vec<u8>,
        members: Vec<Vec<u8>>,
    },
    ZAdd {
        key: Vec<u8>,
        entries: Vec<(f64, Vec<u8>)>,
    },
    ZRem {
        key: Vec<u8>,
        members: Vec<Vec<u8>>,
    },
    Stream {
        key: Vec<u8>,
        op: StreamRecord,
    },
    TxBegin {
        id: u64,
    },
    TxEnd {
        id: u64,
    },
    ReplMark {
        primary: Vec<u8>,
        seq: u64,
    },
}

/// A decoded [`StreamOp`], owned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    missing_docs,
    reason = "variants and fields mirror fc_shard::StreamOp's, documented there"
)]
pub enum StreamRecord {
    Create,
    Add {
        id: StreamId,
        fields: Vec<Vec<u8>>,
    },
    Delete {
        ids: Vec<StreamId>,
    },
    Trim {
        through: StreamId,
    },
    SetId {
        last_id: StreamId,
        entries_added: u64,
        max_deleted: StreamId,
    },
    GroupCreate {
        group: Vec<u8>,
        last_id: StreamId,
        entries_read: i64,
    },
    GroupSetId {
        group: Vec<u8>,
        last_id: StreamId,
        entries_read: i64,
    },
    Advance {
        group: Vec<u8>,
        last_id: StreamId,
        entries_read: i64,
    },
    GroupDestroy {
        group: Vec<u8>,
    },
    ConsumerCreate {
        group: Vec<u8>,
        consumer: Vec<u8>,
        seen_ms: u64,
    },
    ConsumerDelete {
        group: Vec<u8>,
        consumer: Vec<u8>,
    },
    Touch {
        group: Vec<u8>,
        consumer: Vec<u8>,
        seen_ms: u64,
        active_ms: Option<u64>,
    },
    Claim {
        group: Vec<u8>,
        consumer: Vec<u8>,
        entries: Vec<PendingSet>,
    },
    Ack {
        group: Vec<u8>,
        ids: Vec<StreamId>,
    },
}

impl StreamRecord {
    /// Runs `f` with the borrowed op this record holds.
    pub fn with_op<R>(&self, f: impl FnOnce(&StreamOp<'_>) -> R) -> R {
        match self {
            Self::Create => f(&StreamOp::Create),
            Self::Add { id, fields } => {
                let fields: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
                f(&StreamOp::Add {
                    id: *id,
                    fields: &fields,
                })
            }
            Self::Delete { ids } => f(&StreamOp::Delete { ids }),
            Self::Trim { through } => f(&StreamOp::Trim { through: *through }),
            Self::SetId {
                last_id,
                entries_added,
                max_deleted,
            } => f(&StreamOp::SetId {
                last_id: *last_id,
                entries_added: *entries_added,
                max_deleted: *max_deleted,
            }),
            Self::GroupCreate {
                group,
                last_id,
                entries_read,
            } => f(&StreamOp::GroupCreate {
                group,
                last_id: *last_id,
                entries_read: *entries_read,
            }),
            Self::GroupSetId {
                group,
                last_id,
                entries_read,
            } => f(&StreamOp::GroupSetId {
                group,
                last_id: *last_id,
                entries_read: *entries_read,
            }),
            Self::Advance {
                group,
                last_id,
                entries_read,
            } => f(&StreamOp::Advance {
                group,
                last_id: *last_id,
                entries_read: *entries_read,
            }),
            Self::GroupDestroy { group } => f(&StreamOp::GroupDestroy { group }),
            Self::ConsumerCreate {
                group,
                consumer,
                seen_ms,
            } => f(&StreamOp::ConsumerCreate {
                group,
                consumer,
                seen_ms: *seen_ms,
            }),
            Self::ConsumerDelete { group, consumer } => {
                f(&StreamOp::ConsumerDelete { group, consumer })
            }
            Self::Touch {
                group,
                consumer,
                seen_ms,
                active_ms,
            } => f(&StreamOp::Touch {
                group,
                consumer,
                seen_ms: *seen_ms,
                active_ms: *active_ms,
            }),
            Self::Claim {
                group,
                consumer,
                entries,
            } => f(&StreamOp::Claim {
                group,
                consumer,
                entries,
            }),
            Self::Ack { group, ids } => f(&StreamOp::Ack { group, ids }),
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, PayloadError> {
        Ok(match r.u8()? {
            0 => Self::Create,
            1 => Self::Add {
                id: r.id()?,
                fields: r.list()?,
            },
            2 => Self::Delete { ids: r.ids()? },
            3 => Self::Trim { through: r.id()? },
            4 => Self::SetId {
                last_id: r.id()?,
                entries_added: r.uvar()?,
                max_deleted: r.id()?,
            },
            tag @ 5..=7 => {
                let (group, last_id, entries_read) = (r.bytes()?, r.id()?, r.svar()?);
                match tag {
                    5 => Self::GroupCreate {
                        group,
                        last_id,
                        entries_read,
                    },
                    6 => Self::GroupSetId {
                        group,
                        last_id,
                        entries_read,
                    },
                    _ => Self::Advance {
                        group,
                        last_id,
                        entries_read,
                    },
                }
            }
            8 => Self::GroupDestroy { group: r.bytes()? },
            9 => Self::ConsumerCreate {
                group: r.bytes()?,
                consumer: r.bytes()?,
                seen_ms: r.uvar()?,
            },
            10 => Self::ConsumerDelete {
                group: r.bytes()?,
                consumer: r.bytes()?,
            },
            11 => Self::Touch {
                group: r.bytes()?,
                consumer: r.bytes()?,
                seen_ms: r.uvar()?,
                active_ms: match r.u8()? {
                    0 => None,
                    1 => Some(r.uvar()?),
                    _ => return Err(PayloadError::Invalid("active flag")),
                },
            },
            12 => {
                let group = r.bytes()?;
                let consumer = r.bytes()?;
                let n = r.count()?;
                let entries = (0..n)
                    .map(|_| {
                        Ok(PendingSet {
                            id: r.id()?,
                            delivery_ms: r.uvar()?,
                            delivery_count: r.uvar()?,
                        })
                    })
                    .collect::<Result<_, PayloadError>>()?;
                Self::Claim {
                    group,
                    consumer,
                    entries,
                }
            }
            13 => Self::Ack {
                group: r.bytes()?,
                ids: r.ids()?,
            },
            _ => return Err(PayloadError::Invalid("stream op")),
        })
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

/// A `Set`'s key, value and expiry, borrowed from its payload.
type SetFields<'a> = (&'a [u8], &'a [u8], Option<u64>);

impl<'a> Reader<'a> {
    /// A length-prefixed byte string, borrowed.
    fn slice(&mut self) -> Result<&'a [u8], PayloadError> {
        let len = self.usize()?;
        if len > self.buf.len() {
            return Err(PayloadError::Truncated);
        }
        let (b, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(b)
    }

    /// A `Set`'s fields (after its tag), borrowed.
    fn set(&mut self) -> Result<SetFields<'a>, PayloadError> {
        let key = self.slice()?;
        let value = self.slice()?;
        let expire_at_ms = match self.u8()? {
            0 => None,
            1 => Some(self.u64_le()?),
            _ => return Err(PayloadError::Invalid("expiry flag")),
        };
        Ok((key, value, expire_at_ms))
    }

    fn u8(&mut self) -> Result<u8, PayloadError> {
        let (&b, rest) = self.buf.split_first().ok_or(PayloadError::Truncated)?;
        self.buf = rest;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PayloadError> {
        let (word, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or(PayloadError::Truncated)?;
        self.buf = rest;
        Ok(*word)
    }

    fn u16_le(&mut self) -> Result<u16, PayloadError> {
        self.array().map(u16::from_le_bytes)
    }

    fn u64_le(&mut self) -> Result<u64, PayloadError> {
        self.array().map(u64::from_le_bytes)
    }

    fn uvar(&mut self) -> Result<u64, PayloadError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(PayloadError::Invalid("varint"))
    }

    fn svar(&mut self) -> Result<i64, PayloadError> {
        let v = self.uvar()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn usize(&mut self) -> Result<usize, PayloadError> {
        usize::try_from(self.uvar()?).map_err(|_| PayloadError::Invalid("length"))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, PayloadError> {
        self.slice().map(<[u8]>::to_vec)
    }

    /// An element count, bounded by the bytes left (every element takes at least one byte)
    /// before anything is allocated for it.
    fn count(&mut self) -> Result<usize, PayloadError> {
        let n = self.usize()?;
        if n > self.buf.len() {
            return Err(PayloadError::Truncated);
        }
        Ok(n)
    }

    fn list(&mut self) -> Result<Vec<Vec<u8>>, PayloadError> {
        let n = self.count()?;
        (0..n).map(|_| self.bytes()).collect()
    }

    fn id(&mut self) -> Result<StreamId, PayloadError> {
        Ok(StreamId::new(self.uvar()?, self.uvar()?))
    }

    fn ids(&mut self) -> Result<Vec<StreamId>, PayloadError> {
        let n = self.count()?;
        (0..n).map(|_| self.id()).collect()
    }

    fn end(&mut self) -> Result<ListEnd, PayloadError> {
        match self.u8()? {
            0 => Ok(ListEnd::Left),
            1 => Ok(ListEnd::Right),
            _ => Err(PayloadError::Invalid("list end")),
        }
    }
}

/// A `Set`'s change on `$store` (either store kind): its value, and its expiry set or cleared.
macro_rules! apply_set {
    ($store:expr, $key:expr, $value:expr, $expire_at_ms:expr) => {{
        let expiry = $expire_at_ms.map_or(SetExpiry::Clear, SetExpiry::AtMs);
        let options = SetOptions {
            expiry,
            ..SetOptions::default()
        };
        $store.set_with($key, $value, options)?;
    }};
}

/// The body of [`Record::apply`] and [`Record::apply_local`]: the same calls on either store
/// kind (their methods share names and meanings; see fc-shard's `surface`).
macro_rules! apply_record {
    ($record:expr, $store:expr, $shard:expr) => {{
        fn refs(items: &[Vec<u8>]) -> Vec<&[u8]> {
            items.iter().map(Vec::as_slice).collect()
        }
        match $record {
            Self::Set {
                key,
                value,
                expire_at_ms,
            } => {
                apply_set!($store, key, value, *expire_at_ms);
            }
            Self::Delete { key } | Self::Expired { key } | Self::Evicted { key } => {
                $store.delete(key);
            }
            Self::Expire { key, expire_at_ms } => {
                $store.expire_at_ms(key, *expire_at_ms);
            }
            Self::Persist { key } => {
                $store.persist(key);
            }
            Self::Flush => $store.clear_shard($shard),
            Self::Rename { from, to } => {
                $store.rename(from, to, false)?;
            }
            Self::HSet { key, pairs } => {
                let pairs: Vec<(&[u8], &[u8])> =
                    pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                $store.hset(key, &pairs)?;
            }
            Self::HDel { key, fields } => {
                $store.hdel(key, &refs(fields))?;
            }
            Self::ListPush { key, end, items } => {
                $store.push(key, *end, &refs(items), false)?;
            }
            Self::ListPop { key, end, count } => {
                $store.pop(key, *end, *count)?;
            }
            Self::ListSet { key, index, value } => {
                let index = i64::try_from(*index).map_err(|_| StoreError::IndexOutOfRange)?;
                $store.lset(key, index, value)?;
            }
            Self::ListTrim { key, start, stop } => $store.ltrim(key, *start, *stop)?,
            Self::ListRem { key, count, value } => {
                $store.lrem(key, *count, value)?;
            }
            Self::ListInsert {
                key,
                position,
                pivot,
                value,
            } => {
                $store.linsert(key, *position, pivot, value)?;
            }
            Self::SAdd { key, members } => {
                $store.sadd(key, &refs(members))?;
            }
            Self::SRem { key, members } => {
                $store.srem(key, &refs(members))?;
            }
            Self::ZAdd { key, entries } => {
                let entries: Vec<(f64, &[u8])> =
                    entries.iter().map(|(s, m)| (*s, &m[..])).collect();
                $store.zadd(key, &entries, ZAddOptions::default())?;
            }
            Self::ZRem { key, members } => {
                $store.zrem(key, &refs(members))?;
            }
            Self::Stream { key, op } => op.with_op(|op| $store.stream_apply(key, op))?,
            // Boundaries change nothing; recovery groups by them (see `crate::recover`). A
            // replica's watermark is read by recovery, not applied.
            Self::TxBegin { .. } | Self::TxEnd { .. } | Self::ReplMark { .. } => {}
        }
        Ok(())
    }};
}

impl Record {
    /// Decodes one payload.
    ///
    /// # Errors
    /// [`PayloadError`] for a payload this build cannot read.
    pub fn decode(payload: &[u8]) -> Result<Self, PayloadError> {
        let mut r = Reader { buf: payload };
        let record = Self::read(&mut r)?;
        if !r.buf.is_empty() {
            return Err(PayloadError::Trailing(r.buf.len()));
        }
        Ok(record)
    }

    /// Decodes the payload of a batch frame (`FLAG_BATCH`): its mutations in order, each with
    /// its shard when the log is `shared` (then each is preceded by its shard, `u16`). The
    /// whole payload is decoded before anything is returned, so a bad entry rejects the frame.
    ///
    /// # Errors
    /// [`PayloadError`] for a payload this build cannot read, or an empty batch.
    pub fn decode_batch(
        payload: &[u8],
        shared: bool,
    ) -> Result<Vec<(Option<u16>, Self)>, PayloadError> {
        let mut r = Reader { buf: payload };
        let mut out = Vec::new();
        while !r.buf.is_empty() {
            let shard = if shared { Some(r.u16_le()?) } else { None };
            out.push((shard, Self::read(&mut r)?));
        }
        if out.is_empty() {
            return Err(PayloadError::Invalid("empty batch"));
        }
        Ok(out)
    }

    /// Reads one mutation from the front of `r`.
    fn read(r: &mut Reader<'_>) -> Result<Self, PayloadError> {
        let tag = r.u8()?;
        let record = match tag {
            1 => {
                let (key, value, expire_at_ms) = r.set()?;
                Self::Set {
                    key: key.to_vec(),
                    value: value.to_vec(),
                    expire_at_ms,
                }
            }
            2 => Self::Delete { key: r.bytes()? },
            3 => Self::Expire {
                key: r.bytes()?,
                expire_at_ms: r.u64_le()?,
            },
            4 => Self::Persist { key: r.bytes()? },
            5 => Self::Expired { key: r.bytes()? },
            6 => Self::Evicted { key: r.bytes()? },
            7 => Self::Flush,
            8 => Self::Rename {
                from: r.bytes()?,
                to: r.bytes()?,
            },
            9 => {
                let key = r.bytes()?;
                let n = r.count()?;
                let pairs = (0..n)
                    .map(|_| Ok((r.bytes()?, r.bytes()?)))
                    .collect::<Result<_, PayloadError>>()?;
                Self::HSet { key, pairs }
            }
            10 => Self::HDel {
                key: r.bytes()?,
                fields: r.list()?,
            },
            11 => Self::ListPush {
                key: r.bytes()?,
                end: r.end()?,
                items: r.list()?,
            },
            12 => Self::ListPop {
                key: r.bytes()?,
                end: r.end()?,
                count: r.usize()?,
            },
            13 => Self::ListSet {
                key: r.bytes()?,
                index: r.usize()?,
                value: r.bytes()?,
            },
            14 => Self::ListTrim {
                key: r.bytes()?,
                start: r.svar()?,
                stop: r.svar()?,
            },
            15 => Self::ListRem {
                key: r.bytes()?,
                count: r.svar()?,
                value: r.bytes()?,
            },
            16 => Self::ListInsert {
                key: r.bytes()?,
                position: match r.u8()? {
                    0 => InsertPosition::Before,
                    1 => InsertPosition::After,
                    _ => return Err(PayloadError::Invalid("insert position")),
                },
                pivot: r.bytes()?,
                value: r.bytes()?,
            },
            17 => Self::SAdd {
                key: r.bytes()?,
                members: r.list()?,
            },
            18 => Self::SRem {
                key: r.bytes()?,
                members: r.list()?,
            },
            19 => {
                let key = r.bytes()?;
                let n = r.count()?;
                let entries = (0..n)
                    .map(|_| {
                        let score = f64::from_bits(r.u64_le()?);
                        if score.is_nan() {
                            return Err(PayloadError::Invalid("score"));
                        }
                        Ok((score, r.bytes()?))
                    })
                    .collect::<Result<_, PayloadError>>()?;
                Self::ZAdd { key, entries }
            }
            20 => Self::ZRem {
                key: r.bytes()?,
                members: r.list()?,
            },
            23 => Self::Stream {
                key: r.bytes()?,
                op: StreamRecord::read(r)?,
            },
            21 => Self::TxBegin { id: r.u64_le()? },
            22 => Self::TxEnd { id: r.u64_le()? },
            24 => Self::ReplMark {
                primary: r.bytes()?,
                seq: r.uvar()?,
            },
            other => return Err(PayloadError::UnknownTag(other)),
        };
        Ok(record)
    }

    /// The key the change is routed by (a rename's source), if it has one: what a replica
    /// prefetches before applying a batch.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Self::Set { key, .. }
            | Self::Delete { key }
            | Self::Expire { key, .. }
            | Self::Persist { key }
            | Self::Expired { key }
            | Self::Evicted { key }
            | Self::HSet { key, .. }
            | Self::HDel { key, .. }
            | Self::ListPush { key, .. }
            | Self::ListPop { key, .. }
            | Self::ListSet { key, .. }
            | Self::ListTrim { key, .. }
            | Self::ListRem { key, .. }
            | Self::ListInsert { key, .. }
            | Self::SAdd { key, .. }
            | Self::SRem { key, .. }
            | Self::ZAdd { key, .. }
            | Self::ZRem { key, .. }
            | Self::Stream { key, .. } => Some(key),
            Self::Rename { from, .. } => Some(from),
            Self::Flush | Self::TxBegin { .. } | Self::TxEnd { .. } | Self::ReplMark { .. } => None,
        }
    }

    /// Applies the change to `store` (whose shard `shard` it was logged by), as the live store
    /// made it.
    ///
    /// # Errors
    /// A [`StoreError`] when the store cannot take the change (a store of another shard count,
    /// a full shard): recovery reports it and stops.
    pub fn apply(&self, store: &EmbeddedStore, shard: usize) -> Result<(), StoreError> {
        apply_record!(self, store, shard)
    }

    /// [`Record::apply`] on a worker's owner-local store (a replica's worker applying what
    /// its primary sent for one of its shards).
    ///
    /// # Errors
    /// As [`Record::apply`], and [`StoreError::NotOwner`] for a key of another worker.
    pub fn apply_local(
        &self,
        store: &mut LocalEmbeddedStore,
        shard: usize,
    ) -> Result<(), StoreError> {
        apply_record!(self, store, shard)
    }
}

/// A mutation read in place: the common ones (`Set`, and the deletes: `Delete`, `Expired` and
/// `Evicted`, applied alike) borrow their bytes from the payload; every other kind is decoded
/// owned. A replica's worker applies these from the frame its link read, so the bytes of a
/// `SET` are copied once, into the store, on the thread that owns the shard.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordView<'a> {
    /// `Set`, borrowed.
    Set {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// Its absolute expiry (Unix ms), if any.
        expire_at_ms: Option<u64>,
    },
    /// `Delete`, `Expired` or `Evicted`, borrowed.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Any other mutation, owned.
    Owned(Record),
}

impl<'a> RecordView<'a> {
    /// Reads one payload (as [`Record::decode`]; a `Set` or a delete allocates nothing).
    ///
    /// # Errors
    /// [`PayloadError`] for a payload this build cannot read.
    pub fn decode(payload: &'a [u8]) -> Result<Self, PayloadError> {
        let mut r = Reader { buf: payload };
        let view = match payload.first() {
            Some(1) => {
                r.u8()?;
                let (key, value, expire_at_ms) = r.set()?;
                Self::Set {
                    key,
                    value,
                    expire_at_ms,
                }
            }
            Some(2 | 5 | 6) => {
                r.u8()?;
                Self::Delete { key: r.slice()? }
            }
            _ => return Record::decode(payload).map(Self::Owned),
        };
        if !r.buf.is_empty() {
            return Err(PayloadError::Trailing(r.buf.len()));
        }
        Ok(view)
    }

    /// The key it changes (as [`Record::key`]).
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Self::Set { key, .. } | Self::Delete { key } => Some(key),
            Self::Owned(record) => record.key(),
        }
    }

    /// Whether it opens a transaction (`TxBegin`).
    #[must_use]
    pub fn is_tx_begin(&self) -> bool {
        matches!(self, Self::Owned(Record::TxBegin { .. }))
    }

    /// Whether it closes a transaction (`TxEnd`).
    #[must_use]
    pub fn is_tx_end(&self) -> bool {
        matches!(self, Self::Owned(Record::TxEnd { .. }))
    }

    /// [`Record::apply_local`], from the borrowed bytes.
    ///
    /// # Errors
    /// As [`Record::apply_local`].
    pub fn apply_local(
        &self,
        store: &mut LocalEmbeddedStore,
        shard: usize,
    ) -> Result<(), StoreError> {
        match self {
            Self::Set {
                key,
                value,
                expire_at_ms,
            } => {
                apply_set!(store, *key, *value, *expire_at_ms);
                Ok(())
            }
            Self::Delete { key } => {
                store.delete(key);
                Ok(())
            }
            Self::Owned(record) => record.apply_local(store, shard),
        }
    }
}
