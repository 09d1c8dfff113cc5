//! One shard's snapshot image: header, `FCW2` frames of mutations that recreate every key, and
//! a trailer that proves the image complete (layout: `docs/DURABILITY.md`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use fc_shard::{EmbeddedStore, LocalEmbeddedStore, Mutation};
use fc_wal::{FrameRead, Record, WalError, decode_frame, encode_frame, encode_mutation};

/// Magic of an image header.
pub const IMAGE_MAGIC: [u8; 4] = *b"FCSN";
/// Magic of an image trailer.
pub const IMAGE_END_MAGIC: [u8; 4] = *b"FCSE";
/// Image format version this build writes and reads.
pub const IMAGE_VERSION: u16 = 1;
/// Bytes of an image header.
pub const IMAGE_HEADER_LEN: usize = 32;
/// Bytes of an image trailer.
pub const IMAGE_TRAILER_LEN: usize = 24;

/// An image's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// The shard imaged.
    pub shard: u32,
    /// Shards of the store that wrote it.
    pub shard_count: u32,
    /// The first WAL sequence number the image does **not** contain: recovery replays the
    /// shard's log from here.
    pub covered_seq: u64,
    /// When the image was taken, Unix milliseconds.
    pub created_ms: u64,
}

impl ImageHeader {
    fn encode(&self) -> [u8; IMAGE_HEADER_LEN] {
        let mut out = [0u8; IMAGE_HEADER_LEN];
        out[0..4].copy_from_slice(&IMAGE_MAGIC);
        out[4..6].copy_from_slice(&IMAGE_VERSION.to_le_bytes());
        out[8..12].copy_from_slice(&self.shard.to_le_bytes());
        out[12..16].copy_from_slice(&self.shard_count.to_le_bytes());
        out[16..24].copy_from_slice(&self.covered_seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.created_ms.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let b = bytes.get(..IMAGE_HEADER_LEN)?;
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        (b[0..4] == IMAGE_MAGIC && u16::from_le_bytes([b[4], b[5]]) == IMAGE_VERSION).then(|| {
            Self {
                shard: u32_at(8),
                shard_count: u32_at(12),
                covered_seq: u64_at(16),
                created_ms: u64_at(24),
            }
        })
    }
}

/// Builds one shard's image in memory: [`ImageWriter::push`] each exported mutation, then
/// [`ImageWriter::finish`].
#[derive(Debug)]
pub struct ImageWriter {
    bytes: Vec<u8>,
    payload: Vec<u8>,
    frames: u64,
}

impl ImageWriter {
    /// An image of `header.shard` starting with its header.
    #[must_use]
    pub fn new(header: ImageHeader) -> Self {
        Self {
            bytes: header.encode().to_vec(),
            payload: Vec::new(),
            frames: 0,
        }
    }

    /// Rewrites the header (the covered sequence is known only under the shard's lock, after
    /// the writer was made).
    pub fn set_header(&mut self, header: ImageHeader) {
        self.bytes[..IMAGE_HEADER_LEN].copy_from_slice(&header.encode());
    }

    /// Adds one mutation of the image.
    pub fn push(&mut self, mutation: &Mutation<'_>) {
        self.payload.clear();
        encode_mutation(mutation, &mut self.payload);
        self.frames += 1;
        encode_frame(self.frames, &self.payload, &mut self.bytes);
    }

    /// Mutations pushed so far.
    #[must_use]
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The finished image: the trailer (magic, frame count, key count, CRC32C of every byte
    /// before the CRC) appended.
    #[must_use]
    pub fn finish(mut self, keys: u64) -> Vec<u8> {
        self.bytes.extend_from_slice(&IMAGE_END_MAGIC);
        self.bytes.extend_from_slice(&self.frames.to_le_bytes());
        self.bytes.extend_from_slice(&keys.to_le_bytes());
        let crc = crc32c::crc32c(&self.bytes);
        self.bytes.extend_from_slice(&crc.to_le_bytes());
        self.bytes
    }
}

/// A verified image: its header and its frames' payloads, ready to apply.
#[derive(Debug)]
pub struct Image {
    /// The header.
    pub header: ImageHeader,
    /// Where it was read from.
    pub path: PathBuf,
    /// Keys it holds.
    pub keys: u64,
    /// Bytes read.
    pub bytes: u64,
    data: Vec<u8>,
}

impl Image {
    /// Reads and verifies the image at `path`: header, trailer, whole-file CRC, then every
    /// frame (CRC, sequence) — nothing is applied from an image that is not whole.
    ///
    /// # Errors
    /// [`WalError::Io`], or [`WalError::Corrupt`] naming the file and offset.
    pub fn read(path: &Path) -> Result<Self, WalError> {
        let data = fs::read(path).map_err(|e| io_error(path, &e))?;
        Self::from_bytes(data, path)
    }

    /// Verifies an image held in memory (one a primary sent its replica), as [`Image::read`]
    /// verifies a file; `label` names it in errors.
    ///
    /// # Errors
    /// [`WalError::Corrupt`] naming `label` and the offset.
    pub fn from_bytes(data: Vec<u8>, label: &Path) -> Result<Self, WalError> {
        let path = label;
        let corrupt = |offset: usize, reason: &str| WalError::Corrupt {
            path: path.to_path_buf(),
            offset: offset as u64,
            reason: reason.to_string(),
        };
        let header = ImageHeader::decode(&data).ok_or_else(|| corrupt(0, "bad image header"))?;
        if data.len() < IMAGE_HEADER_LEN + IMAGE_TRAILER_LEN {
            return Err(corrupt(data.len(), "image ends before its trailer"));
        }
        let end = data.len() - IMAGE_TRAILER_LEN;
        let trailer = &data[end..];
        if trailer[0..4] != IMAGE_END_MAGIC {
            return Err(corrupt(end, "no image trailer (incomplete image)"));
        }
        let stored = u32::from_le_bytes(trailer[20..24].try_into().expect("4 bytes"));
        if crc32c::crc32c(&data[..data.len() - 4]) != stored {
            return Err(corrupt(end, "image checksum mismatch"));
        }
        let frames = u64::from_le_bytes(trailer[4..12].try_into().expect("8 bytes"));
        let keys = u64::from_le_bytes(trailer[12..20].try_into().expect("8 bytes"));
        // Every frame must decode, in sequence, and exactly fill the body.
        let (mut at, mut seq) = (IMAGE_HEADER_LEN, 0u64);
        while at < end {
            match decode_frame(&data[at..end]) {
                FrameRead::Frame { shard: Some(_), .. } => {
                    return Err(corrupt(at, "a shared log's frame inside an image"));
                }
                FrameRead::Frame { batch: true, .. } => {
                    return Err(corrupt(at, "a batch frame inside an image"));
                }
                FrameRead::Frame {
                    shard: None,
                    batch: false,
                    seq: s,
                    payload,
                    len,
                } if s == seq + 1 => {
                    Record::decode(payload)
                        .map_err(|e| corrupt(at, &format!("undecodable payload: {e}")))?;
                    seq = s;
                    at += len;
                }
                FrameRead::Frame { seq: s, .. } => {
                    return Err(corrupt(at, &format!("frame {s} where {} was due", seq + 1)));
                }
                FrameRead::Incomplete => return Err(corrupt(at, "frame runs past the trailer")),
                FrameRead::Bad(reason) => return Err(corrupt(at, reason)),
            }
        }
        if seq != frames {
            return Err(corrupt(end, "frame count differs from the trailer's"));
        }
        Ok(Self {
            header,
            path: path.to_path_buf(),
            keys,
            bytes: data.len() as u64,
            data,
        })
    }

    /// Applies every mutation of the image to `store` (shard `header.shard`).
    ///
    /// # Errors
    /// [`WalError::Apply`] when the store refuses one (for example over its memory budget
    /// under `NoEviction`).
    pub fn apply(&self, store: &EmbeddedStore) -> Result<(), WalError> {
        self.each_record(|record, shard| record.apply(store, shard))
    }

    /// [`Image::apply`] on the owner-local store of the worker that owns the shard.
    ///
    /// # Errors
    /// As [`Image::apply`].
    pub fn apply_local(&self, store: &mut LocalEmbeddedStore) -> Result<(), WalError> {
        self.each_record(|record, shard| record.apply_local(store, shard))
    }

    /// Runs `apply` on every record of the image, in order.
    fn each_record(
        &self,
        mut apply: impl FnMut(&Record, usize) -> Result<(), fc_shard::StoreError>,
    ) -> Result<(), WalError> {
        let end = self.data.len() - IMAGE_TRAILER_LEN;
        let mut at = IMAGE_HEADER_LEN;
        while at < end {
            let FrameRead::Frame { payload, len, .. } = decode_frame(&self.data[at..end]) else {
                unreachable!("verified by Image::from_bytes");
            };
            let record = Record::decode(payload).map_err(|e| WalError::Corrupt {
                path: self.path.clone(),
                offset: at as u64,
                reason: e.to_string(),
            })?;
            apply(&record, self.header.shard as usize).map_err(|e| WalError::Apply {
                path: self.path.clone(),
                offset: at as u64,
                message: e.to_string(),
            })?;
            at += len;
        }
        Ok(())
    }
}

fn io_error(path: &Path, err: &std::io::Error) -> WalError {
    WalError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    }
}

fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, &e))
}

/// The directory of shard `shard`'s images under the data directory `data_dir`.
#[must_use]
pub fn image_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("snapshot").join(format!("shard-{shard:04}"))
}

/// The file name of an image covering the log up to (not including) `covered_seq`.
#[must_use]
pub fn image_name(covered_seq: u64) -> String {
    format!("{covered_seq:020}.fcs")
}

/// How many complete images each shard keeps: the newest, and the one before it as a fallback
/// should the newest be damaged later (the log is kept back to the older one).
pub const IMAGES_KEPT: usize = 2;

/// Writes a finished image durably: `<name>.tmp`, `fsync`, rename to `<name>`, `fsync` of the
/// directory; then removes the shard's images beyond the newest [`IMAGES_KEPT`] and stray
/// temporary files. Returns the covered sequence of the oldest image kept (the log may be
/// deleted below it).
///
/// # Errors
/// [`WalError::Io`] (the temporary file is removed; older images are untouched).
pub fn write_image(data_dir: &Path, header: &ImageHeader, bytes: &[u8]) -> Result<u64, WalError> {
    let dir = image_dir(data_dir, header.shard as usize);
    fs::create_dir_all(&dir).map_err(|e| io_error(&dir, &e))?;
    let name = image_name(header.covered_seq);
    let tmp = dir.join(format!("{name}.tmp"));
    let done = dir.join(&name);
    let written = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(&tmp, &e));
    }
    fs::rename(&tmp, &done).map_err(|e| io_error(&done, &e))?;
    sync_dir(&dir)?;
    let images = list_images(&dir)?;
    let keep_from = images.len().saturating_sub(IMAGES_KEPT);
    for (_, path) in &images[..keep_from] {
        fs::remove_file(path).map_err(|e| io_error(path, &e))?;
    }
    for entry in fs::read_dir(&dir)
        .map_err(|e| io_error(&dir, &e))?
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tmp") {
            let _ = fs::remove_file(&path);
        }
    }
    sync_dir(&dir)?;
    Ok(images[keep_from..]
        .first()
        .map_or(header.covered_seq, |(seq, _)| *seq))
}

/// A shard's complete-named images, oldest first, with their covered sequences.
pub(crate) fn list_images(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, &e)),
    };
    let mut images = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| io_error(dir, &e))?.path();
        let seq = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".fcs"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(seq) = seq {
            images.push((seq, path));
        }
    }
    images.sort();
    Ok(images)
}
