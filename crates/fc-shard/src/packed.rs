//! Contiguous batch payloads: [`PackedSessionWrite`] (many records of one session, written in one
//! call) and [`PackedBatch`] (many values read into one buffer, ready for one device copy).

use std::ops::Range;

/// Records of one session packed into a single buffer, for
/// [`batch_set_session_packed_no_ttl`](crate::EmbeddedStore::batch_set_session_packed_no_ttl).
///
/// Keys should start with the session prefix so that, in session-prefix route mode, every record
/// lands on the session's shard; a key that does not is still stored, routed on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedSessionWrite {
    prefix: Vec<u8>,
    bytes: Vec<u8>,
    records: Vec<(Range<usize>, Range<usize>)>,
}

impl PackedSessionWrite {
    /// An empty write for session `prefix`, with room for `records` records totalling `bytes`
    /// key and value bytes.
    #[must_use]
    pub fn with_capacity(prefix: impl Into<Vec<u8>>, records: usize, bytes: usize) -> Self {
        Self {
            prefix: prefix.into(),
            bytes: Vec::with_capacity(bytes),
            records: Vec::with_capacity(records),
        }
    }

    /// Appends a record, copying its key and value into the packed buffer.
    pub fn push_record(&mut self, key: &[u8], value: &[u8]) {
        let key_start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        let value_start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.records
            .push((key_start..value_start, value_start..self.bytes.len()));
    }

    /// Appends a record given as owned buffers (they are packed, then dropped).
    pub fn push_owned_record(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.push_record(&key, &value);
    }

    /// The session prefix.
    #[must_use]
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Key and value bytes of all records.
    #[must_use]
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The records as `(key, value)` slices, in push order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + '_ {
        self.records
            .iter()
            .map(|(k, v)| (&self.bytes[k.clone()], &self.bytes[v.clone()]))
    }
}

/// Values read for a list of keys, packed into one contiguous buffer in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedBatch {
    bytes: Vec<u8>,
    /// Per key: the value's range in `bytes`, or `None` for a miss.
    slots: Vec<Option<Range<usize>>>,
    hits: usize,
}

impl PackedBatch {
    pub(crate) fn with_capacity(keys: usize) -> Self {
        Self {
            bytes: Vec::new(),
            slots: Vec::with_capacity(keys),
            hits: 0,
        }
    }

    /// Reserves the slot list for `keys` entries, all misses, so results can be filled out of
    /// order (by shard).
    pub(crate) fn with_misses(keys: usize) -> Self {
        Self {
            bytes: Vec::new(),
            slots: vec![None; keys],
            hits: 0,
        }
    }

    pub(crate) fn push(&mut self, value: Option<&[u8]>) {
        let slot = value.map(|v| self.append(v));
        self.slots.push(slot);
    }

    pub(crate) fn fill(&mut self, index: usize, value: &[u8]) {
        let range = self.append(value);
        self.slots[index] = Some(range);
    }

    fn append(&mut self, value: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.hits += 1;
        start..self.bytes.len()
    }

    /// Number of keys asked for.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no keys were asked for.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of keys found.
    #[must_use]
    pub fn hit_count(&self) -> usize {
        self.hits
    }

    /// Whether every key was found.
    #[must_use]
    pub fn all_hit(&self) -> bool {
        self.hits == self.slots.len()
    }

    /// Total value bytes in the buffer.
    #[must_use]
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The value of the `index`-th key, or `None` for a miss (or an index out of range).
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        let range = self.slots.get(index)?.clone()?;
        Some(&self.bytes[range])
    }

    /// Whether the `index`-th key was found.
    #[must_use]
    pub fn is_hit(&self, index: usize) -> bool {
        self.slots.get(index).is_some_and(Option::is_some)
    }

    /// The byte range of the `index`-th value inside [`PackedBatch::as_bytes`].
    #[must_use]
    pub fn range(&self, index: usize) -> Option<Range<usize>> {
        self.slots.get(index)?.clone()
    }

    /// The contiguous buffer holding every found value, in key order for keys of one shard
    /// (values of different shards follow each other shard by shard).
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Values per key, in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&[u8]>> + '_ {
        self.slots
            .iter()
            .map(|slot| slot.as_ref().map(|r| &self.bytes[r.clone()]))
    }

    /// Takes the buffer and the per-key ranges.
    #[must_use]
    pub fn into_parts(self) -> (Vec<u8>, Vec<Option<Range<usize>>>) {
        (self.bytes, self.slots)
    }
}
