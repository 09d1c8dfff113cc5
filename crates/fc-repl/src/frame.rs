//! FCRP frames: a 32-byte little-endian header, then the payload.
//!
//! ```text
//! offset size field
//! 0      4    magic "FCRP"
//! 4      1    version (1)
//! 5      1    kind (Kind)
//! 6      1    flags (bit 0: the payload is zstd-compressed; others reserved, 0)
//! 7      1    reserved (0)
//! 8      4    shard
//! 12     8    first sequence number
//! 20     4    record count
//! 24     4    payload length (as sent)
//! 28     4    CRC32C of bytes 0..28 and the payload
//! ```

use std::borrow::Cow;

use crate::error::FrameError;

/// The frames' magic.
pub const MAGIC: [u8; 4] = *b"FCRP";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 32;
/// Flag: the payload is zstd-compressed.
pub const FLAG_ZSTD: u8 = 0x01;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[non_exhaustive]
pub enum Kind {
    /// Replica → primary: token, identity, shard count, watermarks ([`crate::Hello`]).
    Hello = 1,
    /// Primary → replica: accepted, with each shard's catch-up plan ([`crate::Welcome`]).
    Welcome = 2,
    /// Either way: refused or failed, with the reason as text; the link closes.
    Refused = 3,
    /// Primary → replica: one shard's mutations (and transaction markers), in order.
    Batch = 4,
    /// Primary → replica: a shard's snapshot follows (its chunks end with [`Kind::SnapshotEnd`]).
    SnapshotBegin = 5,
    /// Primary → replica: part of a shard's snapshot image.
    SnapshotChunk = 6,
    /// Primary → replica: the shard's snapshot is whole, taken at the frame's sequence.
    SnapshotEnd = 7,
    /// Primary → replica: nothing new; each shard's latest sequence (lag, liveness).
    Heartbeat = 8,
    /// Replica → primary: each shard's applied watermark (`WAIT`, lag).
    Ack = 9,
    /// Primary → replica: acknowledge what came before this frame once it is applied (a
    /// `WAIT` is waiting; otherwise a replica acknowledges at its own pace).
    AckRequest = 10,
}

impl Kind {
    /// The kind of a byte.
    #[must_use]
    pub const fn from_u8(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Hello,
            2 => Self::Welcome,
            3 => Self::Refused,
            4 => Self::Batch,
            5 => Self::SnapshotBegin,
            6 => Self::SnapshotChunk,
            7 => Self::SnapshotEnd,
            8 => Self::Heartbeat,
            9 => Self::Ack,
            10 => Self::AckRequest,
            _ => return None,
        })
    }
}

/// One frame, its payload decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: Kind,
    /// The shard it is about (0 when it is about none).
    pub shard: u32,
    /// The first sequence number it covers (batches), or the sequence it stands at.
    pub first_seq: u64,
    /// Records in the payload (batches).
    pub records: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

/// One frame as read, its payload borrowed from the bytes it was read from when it was sent
/// uncompressed (then at `HEADER_LEN` from the frame's first byte), else decompressed into its
/// own buffer: what a reader that keeps its read buffer uses to take records in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// What it carries.
    pub kind: Kind,
    /// The shard it is about (0 when it is about none).
    pub shard: u32,
    /// The first sequence number it covers (batches), or the sequence it stands at.
    pub first_seq: u64,
    /// Records in the payload (batches).
    pub records: u32,
    /// The payload.
    pub payload: Cow<'a, [u8]>,
}

impl FrameRef<'_> {
    /// The frame with a payload of its own.
    #[must_use]
    pub fn into_owned(self) -> Frame {
        Frame {
            kind: self.kind,
            shard: self.shard,
            first_seq: self.first_seq,
            records: self.records,
            payload: self.payload.into_owned(),
        }
    }
}

/// Compression of outgoing payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// None (the default: mutation payloads seldom compress enough to pay for it).
    #[default]
    None,
    /// zstd at this level, kept only when it makes the payload smaller.
    Zstd(i32),
}

impl Frame {
    /// The frame as a [`FrameRef`] borrowing its payload.
    #[must_use]
    pub fn view(&self) -> FrameRef<'_> {
        FrameRef {
            kind: self.kind,
            shard: self.shard,
            first_seq: self.first_seq,
            records: self.records,
            payload: Cow::Borrowed(&self.payload),
        }
    }

    /// A frame with no payload.
    #[must_use]
    pub fn empty(kind: Kind) -> Self {
        Self {
            kind,
            shard: 0,
            first_seq: 0,
            records: 0,
            payload: Vec::new(),
        }
    }

    /// Appends this frame's bytes to `out`, its payload compressed as `compression` says
    /// (when that makes it smaller).
    ///
    /// # Panics
    /// When the payload is 4 GiB or more.
    pub fn encode(&self, compression: Compression, out: &mut Vec<u8>) {
        let mut flags = 0u8;
        let compressed = match compression {
            Compression::Zstd(level) if !self.payload.is_empty() => {
                zstd::bulk::compress(&self.payload, level)
                    .ok()
                    .filter(|c| c.len() < self.payload.len())
            }
            _ => None,
        };
        let payload = match &compressed {
            Some(c) => {
                flags |= FLAG_ZSTD;
                c.as_slice()
            }
            None => self.payload.as_slice(),
        };
        let start = out.len();
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.kind as u8);
        out.push(flags);
        out.push(0);
        out.extend_from_slice(&self.shard.to_le_bytes());
        out.extend_from_slice(&self.first_seq.to_le_bytes());
        out.extend_from_slice(&self.records.to_le_bytes());
        let len = u32::try_from(payload.len()).expect("an FCRP payload is under 4 GiB");
        out.extend_from_slice(&len.to_le_bytes());
        let mut crc = crc32c::crc32c(&out[start..start + 28]);
        crc = crc32c::crc32c_append(crc, payload);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(payload);
    }
}

/// Reads frames from a byte stream (sans-IO: the caller reads, this consumes).
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    /// Largest payload accepted, compressed or not (checked from the header, before the
    /// payload is waited for or anything is allocated).
    pub max_payload: usize,
}

impl Default for FrameDecoder {
    /// 64 MiB payloads.
    fn default() -> Self {
        Self {
            max_payload: 64 << 20,
        }
    }
}

impl FrameDecoder {
    /// Takes one whole frame off the front of `buf`: `Ok(None)` while incomplete (nothing is
    /// consumed).
    ///
    /// # Errors
    /// [`FrameError`]: the link is to be closed (nothing of the frame is applied).
    pub fn decode(&self, buf: &mut Vec<u8>) -> Result<Option<Frame>, FrameError> {
        let Some((frame, used)) = self.decode_slice(buf)? else {
            return Ok(None);
        };
        buf.drain(..used);
        Ok(Some(frame))
    }

    /// [`FrameDecoder::decode`] without consuming: the frame at the front of `buf` and the
    /// bytes it took (a reader then takes the next from there, and compacts once per read).
    ///
    /// # Errors
    /// As [`FrameDecoder::decode`].
    pub fn decode_slice(&self, buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
        Ok(self
            .decode_ref(buf)?
            .map(|(frame, used)| (frame.into_owned(), used)))
    }

    /// [`FrameDecoder::decode_slice`] without copying: an uncompressed payload is borrowed
    /// from `buf` (at `HEADER_LEN`). The header, the length limit and the CRC are checked as
    /// there, before anything is returned.
    ///
    /// # Errors
    /// As [`FrameDecoder::decode`].
    pub fn decode_ref<'a>(
        &self,
        buf: &'a [u8],
    ) -> Result<Option<(FrameRef<'a>, usize)>, FrameError> {
        let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
            // Not a frame from its first bytes on: refused at once.
            let n = buf.len().min(4);
            if buf[..n] != MAGIC[..n] {
                return Err(FrameError::BadMagic);
            }
            return Ok(None);
        };
        let head = *head;
        if head[0..4] != MAGIC {
            return Err(FrameError::BadMagic);
        }
        if head[4] != VERSION {
            return Err(FrameError::BadVersion(head[4]));
        }
        let kind = Kind::from_u8(head[5]).ok_or(FrameError::BadKind(head[5]))?;
        let flags = head[6];
        if flags & !FLAG_ZSTD != 0 || head[7] != 0 {
            return Err(FrameError::ReservedBits);
        }
        let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4"));
        let len = u32_at(24) as usize;
        if len > self.max_payload {
            return Err(FrameError::TooLarge {
                len,
                limit: self.max_payload,
            });
        }
        if buf.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let payload = &buf[HEADER_LEN..HEADER_LEN + len];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..28]), payload);
        if crc != u32_at(28) {
            return Err(FrameError::BadCrc);
        }
        let payload = if flags & FLAG_ZSTD != 0 {
            Cow::Owned(
                zstd::bulk::decompress(payload, self.max_payload)
                    .map_err(|_| FrameError::BadZstd)?,
            )
        } else {
            Cow::Borrowed(payload)
        };
        let frame = FrameRef {
            kind,
            shard: u32_at(8),
            first_seq: u64::from_le_bytes(head[12..20].try_into().expect("8")),
            records: u32_at(20),
            payload,
        };
        Ok(Some((frame, HEADER_LEN + len)))
    }

    /// Bytes still to come before the frame at the front of `buf` is whole (a reader's
    /// next read can make room for all of it at once): the rest of the header while it is
    /// incomplete, else of the payload (as its header says: call it after
    /// [`FrameDecoder::decode_ref`] found the frame incomplete, which checked that header).
    #[must_use]
    pub fn missing(&self, buf: &[u8]) -> usize {
        let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
            return HEADER_LEN - buf.len();
        };
        let len = u32::from_le_bytes(head[24..28].try_into().expect("4")) as usize;
        (HEADER_LEN + len.min(self.max_payload)).saturating_sub(buf.len())
    }
}
