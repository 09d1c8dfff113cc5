//! Segment headers and `FCW2` frames, byte for byte as `docs/DURABILITY.md` lays them out.

/// Magic of a segment header.
pub const SEGMENT_MAGIC: [u8; 4] = *b"FCWS";
/// Magic of a frame.
pub const FRAME_MAGIC: [u8; 4] = *b"FCW2";
/// Format version this build writes (2: frames may be batches, [`FLAG_BATCH`]).
pub const FORMAT_VERSION: u16 = 2;
/// Oldest format version this build reads (1: one mutation per frame).
pub const MIN_FORMAT_VERSION: u16 = 1;
/// Bytes of a segment header.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Bytes of a frame before its payload.
pub const FRAME_HEADER_LEN: usize = 20;
/// Bytes of a frame's checksum.
pub const FRAME_TRAILER_LEN: usize = 4;
/// Largest payload a frame may claim (checked before anything is read or allocated).
pub const MAX_PAYLOAD_LEN: usize = 1 << 30;
/// Frame flag: bytes 6..8 hold the shard the frame belongs to (a log shared by several shards).
pub const FLAG_SHARD: u8 = 0x01;
/// Frame flag: the payload holds one or more mutations, which take consecutive sequence
/// numbers from the frame's; in a shared log each is preceded by its shard (`u16`). Never set
/// with [`FLAG_SHARD`]. Only segments of format version 2 hold such frames.
pub const FLAG_BATCH: u8 = 0x02;
/// Most shards a shared log can name (the frame's shard field is 16 bits).
pub const MAX_SHARED_LOG_SHARDS: usize = 1 << 16;

/// A segment's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The shard whose log this is; in a shared layout (`logs` > 0), the log's index.
    pub shard: u32,
    /// Shards of the store that wrote it (a log only replays into a store of the same count).
    pub shard_count: u32,
    /// Sequence number of the segment's first frame.
    pub first_seq: u64,
    /// 0: one log per shard. Otherwise the store's shards share this many logs (shard `s`
    /// writes to log `s % logs`), and every frame names its shard ([`FLAG_SHARD`]).
    pub logs: u32,
}

impl SegmentHeader {
    /// The header's bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = [0u8; SEGMENT_HEADER_LEN];
        out[0..4].copy_from_slice(&SEGMENT_MAGIC);
        out[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[8..12].copy_from_slice(&self.shard.to_le_bytes());
        out[12..16].copy_from_slice(&self.shard_count.to_le_bytes());
        out[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        out[24..28].copy_from_slice(&self.logs.to_le_bytes());
        let crc = crc32c::crc32c(&out[..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a header; `None` when the bytes are not a valid header of this format.
    #[must_use]
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; SEGMENT_HEADER_LEN] = bytes.get(..SEGMENT_HEADER_LEN)?.try_into().ok()?;
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let ok = bytes[0..4] == SEGMENT_MAGIC
            && (MIN_FORMAT_VERSION..=FORMAT_VERSION)
                .contains(&u16::from_le_bytes([bytes[4], bytes[5]]))
            && word(28) == crc32c::crc32c(&bytes[..28]);
        ok.then(|| Self {
            shard: word(8),
            shard_count: word(12),
            first_seq: u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
            logs: word(24),
        })
    }
}

/// Appends one frame holding `payload` with sequence number `seq` to `out`.
pub fn encode_frame(seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_frame_of(None, seq, payload, out);
}

/// [`encode_frame`] for a log shared by several shards: `shard` (`Some`) is recorded in the
/// frame ([`FLAG_SHARD`]).
pub fn encode_frame_of(shard: Option<u16>, seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&FRAME_MAGIC);
    out.extend_from_slice(&flag_bytes(shard)); // flags, reserved, shard
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Bytes 4..8 of a frame: flags, a reserved zero, and the shard when it has one.
pub(crate) fn flag_bytes(shard: Option<u16>) -> [u8; 4] {
    match shard {
        None => [0; 4],
        Some(shard) => {
            let [lo, hi] = shard.to_le_bytes();
            [FLAG_SHARD, 0, lo, hi]
        }
    }
}

/// What the bytes at a frame position hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameRead<'a> {
    /// A whole, valid frame: its sequence number, payload, and total length in bytes.
    Frame {
        /// The shard it belongs to, when its log is shared ([`FLAG_SHARD`]).
        shard: Option<u16>,
        /// The payload is a batch of mutations ([`FLAG_BATCH`]), not one.
        batch: bool,
        /// Sequence number.
        seq: u64,
        /// The payload.
        payload: &'a [u8],
        /// Bytes the frame takes.
        len: usize,
    },
    /// Fewer bytes than a frame needs (a torn write, or the end).
    Incomplete,
    /// Not a valid frame: the reason.
    Bad(&'static str),
}

/// Reads the frame at the start of `bytes`.
#[must_use]
pub fn decode_frame(bytes: &[u8]) -> FrameRead<'_> {
    if bytes.len() < FRAME_HEADER_LEN {
        return if FRAME_MAGIC.starts_with(&bytes[..bytes.len().min(4)]) {
            FrameRead::Incomplete
        } else {
            FrameRead::Bad("bad frame magic")
        };
    }
    if bytes[0..4] != FRAME_MAGIC {
        return FrameRead::Bad("bad frame magic");
    }
    let (shard, batch) = match bytes[4..8] {
        [0, 0, 0, 0] => (None, false),
        [FLAG_SHARD, 0, lo, hi] => (Some(u16::from_le_bytes([lo, hi])), false),
        [FLAG_BATCH, 0, 0, 0] => (None, true),
        _ => return FrameRead::Bad("unknown frame flags"),
    };
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    if len > MAX_PAYLOAD_LEN {
        return FrameRead::Bad("frame length over the limit");
    }
    let total = FRAME_HEADER_LEN + len + FRAME_TRAILER_LEN;
    if bytes.len() < total {
        return FrameRead::Incomplete;
    }
    let body = &bytes[4..FRAME_HEADER_LEN + len];
    let stored = u32::from_le_bytes(
        bytes[FRAME_HEADER_LEN + len..total]
            .try_into()
            .expect("4 bytes"),
    );
    if crc32c::crc32c(body) != stored {
        return FrameRead::Bad("frame checksum mismatch");
    }
    FrameRead::Frame {
        shard,
        batch,
        seq: u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")),
        payload: &bytes[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len],
        len: total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_damage() {
        let h = SegmentHeader {
            shard: 7,
            shard_count: 16,
            first_seq: 42,
            logs: 2,
        };
        let bytes = h.encode();
        assert_eq!(&bytes[0..4], b"FCWS");
        assert_eq!(SegmentHeader::decode(&bytes), Some(h));
        for i in 0..SEGMENT_HEADER_LEN {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert_eq!(SegmentHeader::decode(&bad), None, "byte {i}");
        }
    }

    #[test]
    fn the_batch_flag_is_read_and_never_combined_with_a_shard() {
        let mut out = Vec::new();
        encode_frame(3, b"p", &mut out);
        let reseal = |flags: [u8; 4]| {
            let mut f = out.clone();
            f[4..8].copy_from_slice(&flags);
            let end = f.len() - FRAME_TRAILER_LEN;
            let crc = crc32c::crc32c(&f[4..end]);
            f[end..].copy_from_slice(&crc.to_le_bytes());
            f
        };
        assert!(matches!(
            decode_frame(&reseal([FLAG_BATCH, 0, 0, 0])),
            FrameRead::Frame {
                batch: true,
                shard: None,
                seq: 3,
                ..
            }
        ));
        for bad in [
            [FLAG_BATCH, 0, 1, 0],
            [FLAG_BATCH | FLAG_SHARD, 0, 1, 0],
            [0x04, 0, 0, 0],
            [0, 1, 0, 0],
        ] {
            assert_eq!(
                decode_frame(&reseal(bad)),
                FrameRead::Bad("unknown frame flags"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn frames_round_trip_and_every_cut_and_flip_is_caught() {
        let mut out = Vec::new();
        encode_frame(9, b"payload", &mut out);
        assert_eq!(out.len(), FRAME_HEADER_LEN + 7 + FRAME_TRAILER_LEN);
        assert_eq!(
            decode_frame(&out),
            FrameRead::Frame {
                shard: None,
                batch: false,
                seq: 9,
                payload: b"payload",
                len: out.len()
            }
        );
        let mut tagged = Vec::new();
        encode_frame_of(Some(513), 9, b"payload", &mut tagged);
        assert_eq!(
            decode_frame(&tagged),
            FrameRead::Frame {
                shard: Some(513),
                batch: false,
                seq: 9,
                payload: b"payload",
                len: tagged.len()
            }
        );
        for cut in 0..out.len() {
            assert_eq!(
                decode_frame(&out[..cut]),
                FrameRead::Incomplete,
                "cut {cut}"
            );
        }
        for i in 0..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    !matches!(decode_frame(&bad), FrameRead::Frame { .. }),
                    "byte {i} bit {bit}"
                );
                let mut bad = tagged.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    !matches!(decode_frame(&bad), FrameRead::Frame { .. }),
                    "byte {i} bit {bit}"
                );
            }
        }
    }
}
