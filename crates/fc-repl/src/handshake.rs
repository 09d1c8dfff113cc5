//! The handshake: the replica says who it is and how far each shard got ([`Hello`]); the
//! primary checks the token (in constant time) and the shard count, and answers each shard's
//! catch-up plan ([`Welcome`]): the backlog from the replica's watermark when it still holds
//! it, else a snapshot and the changes after it.

use subtle::ConstantTimeEq;

use crate::error::{FrameError, LinkError};
use crate::frame::{Frame, Kind};

/// Longest token or identity accepted.
pub const MAX_NAME: usize = 1024;

/// Replica → primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The shared secret.
    pub token: Vec<u8>,
    /// The replica's identity (its run id; for `INFO replication`).
    pub replica_id: String,
    /// The replica's listening port, shown by the primary (`slaveN:...port=`).
    pub port: u16,
    /// The primary the watermarks were reached under (its id from an earlier [`Welcome`];
    /// empty: none). Sequences are a primary's own: under another id they mean nothing, and
    /// the replica starts over.
    pub primary_id: String,
    /// Per shard, the last sequence applied (0: none).
    pub watermarks: Vec<u64>,
}

/// One shard's catch-up plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Frames from the backlog, after the replica's watermark.
    Backlog,
    /// A snapshot of the shard, then the changes after it (the watermark is too old).
    Snapshot,
}

/// Primary → replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The primary's identity (its replication id).
    pub primary_id: String,
    /// Per shard: the plan, and the primary's latest sequence.
    pub shards: Vec<(Plan, u64)>,
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FrameError> {
        if self.0.len() < n {
            return Err(FrameError::Malformed(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, FrameError> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2"),
        ))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }

    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], FrameError> {
        let n = usize::from(self.u16(what)?);
        if n > MAX_NAME {
            return Err(FrameError::Malformed(what));
        }
        self.take(n, what)
    }

    /// `n` values of 8 bytes, checked against what remains before allocating.
    fn u64s(&mut self, n: usize, what: &'static str) -> Result<Vec<u64>, FrameError> {
        if n.checked_mul(8).is_none_or(|b| b > self.0.len()) {
            return Err(FrameError::Malformed(what));
        }
        (0..n).map(|_| self.u64(what)).collect()
    }

    fn end(&self, what: &'static str) -> Result<(), FrameError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Malformed(what))
        }
    }
}

impl Hello {
    /// Its frame.
    ///
    /// # Panics
    /// When the token or identity is longer than [`MAX_NAME`].
    #[must_use]
    pub fn frame(&self) -> Frame {
        assert!(
            self.token.len() <= MAX_NAME
                && self.replica_id.len() <= MAX_NAME
                && self.primary_id.len() <= MAX_NAME
        );
        let mut payload = Vec::new();
        put_bytes(&mut payload, &self.token);
        put_bytes(&mut payload, self.replica_id.as_bytes());
        payload.extend_from_slice(&self.port.to_le_bytes());
        put_bytes(&mut payload, self.primary_id.as_bytes());
        payload.extend_from_slice(&(self.watermarks.len() as u32).to_le_bytes());
        for w in &self.watermarks {
            payload.extend_from_slice(&w.to_le_bytes());
        }
        Frame {
            payload,
            ..Frame::empty(Kind::Hello)
        }
    }

    /// Reads one from its frame.
    ///
    /// # Errors
    /// [`FrameError::Malformed`] for another kind or a bad payload.
    pub fn decode(frame: &Frame) -> Result<Self, FrameError> {
        if frame.kind != Kind::Hello {
            return Err(FrameError::Malformed("hello"));
        }
        let mut r = Reader(&frame.payload);
        let token = r.bytes("hello")?.to_vec();
        let replica_id = String::from_utf8_lossy(r.bytes("hello")?).into_owned();
        let port = r.u16("hello")?;
        let primary_id = String::from_utf8_lossy(r.bytes("hello")?).into_owned();
        let n = r.u32("hello")? as usize;
        let watermarks = r.u64s(n, "hello")?;
        r.end("hello")?;
        Ok(Self {
            token,
            replica_id,
            port,
            primary_id,
            watermarks,
        })
    }

    /// The primary's answer: checks the token (constant time) and the shard count, then
    /// plans each shard from the replica's watermark (0 when the replica followed another
    /// primary, or an earlier run of this one: `primary_id` differs), the primary's latest sequence
    /// (`latest[s]`) and the oldest sequence its backlog still holds (`oldest[s]`, `None`:
    /// empty backlog).
    ///
    /// # Errors
    /// [`LinkError::BadToken`], [`LinkError::ShardCount`], [`LinkError::FromTheFuture`].
    pub fn answer(
        &self,
        token: &[u8],
        primary_id: &str,
        latest: &[u64],
        oldest: &[Option<u64>],
    ) -> Result<Welcome, LinkError> {
        if !bool::from(self.token.ct_eq(token)) {
            return Err(LinkError::BadToken);
        }
        if self.watermarks.len() != latest.len() {
            return Err(LinkError::ShardCount {
                replica: self.watermarks.len() as u32,
                primary: latest.len() as u32,
            });
        }
        let same_primary = self.primary_id == primary_id;
        let mut shards = Vec::with_capacity(latest.len());
        for (shard, (&watermark, &primary)) in self.watermarks.iter().zip(latest).enumerate() {
            let watermark = if same_primary { watermark } else { 0 };
            if watermark > primary {
                return Err(LinkError::FromTheFuture {
                    shard: shard as u32,
                    watermark,
                    primary,
                });
            }
            // The backlog serves the replica when it holds every sequence after the
            // watermark (or there is nothing to send).
            let plan = if watermark == primary
                || oldest
                    .get(shard)
                    .copied()
                    .flatten()
                    .is_some_and(|o| o <= watermark + 1)
            {
                Plan::Backlog
            } else {
                Plan::Snapshot
            };
            shards.push((plan, primary));
        }
        Ok(Welcome {
            primary_id: primary_id.to_string(),
            shards,
        })
    }
}

impl Welcome {
    /// Its frame.
    #[must_use]
    pub fn frame(&self) -> Frame {
        let mut payload = Vec::new();
        put_bytes(&mut payload, self.primary_id.as_bytes());
        payload.extend_from_slice(&(self.shards.len() as u32).to_le_bytes());
        for (plan, latest) in &self.shards {
            payload.push(u8::from(*plan == Plan::Snapshot));
            payload.extend_from_slice(&latest.to_le_bytes());
        }
        Frame {
            payload,
            ..Frame::empty(Kind::Welcome)
        }
    }

    /// Reads one from its frame.
    ///
    /// # Errors
    /// [`FrameError::Malformed`].
    pub fn decode(frame: &Frame) -> Result<Self, FrameError> {
        if frame.kind != Kind::Welcome {
            return Err(FrameError::Malformed("welcome"));
        }
        let mut r = Reader(&frame.payload);
        let primary_id = String::from_utf8_lossy(r.bytes("welcome")?).into_owned();
        let n = r.u32("welcome")? as usize;
        if n.checked_mul(9).is_none_or(|b| b > r.0.len()) {
            return Err(FrameError::Malformed("welcome"));
        }
        let mut shards = Vec::with_capacity(n);
        for _ in 0..n {
            let plan = match r.take(1, "welcome")?[0] {
                0 => Plan::Backlog,
                1 => Plan::Snapshot,
                _ => return Err(FrameError::Malformed("welcome")),
            };
            shards.push((plan, r.u64("welcome")?));
        }
        r.end("welcome")?;
        Ok(Self { primary_id, shards })
    }
}

/// A watermark list (`Ack`, `Heartbeat`): its frame.
#[must_use]
pub fn watermarks_frame(kind: Kind, watermarks: &[u64]) -> Frame {
    let mut payload = Vec::with_capacity(4 + 8 * watermarks.len());
    payload.extend_from_slice(&(watermarks.len() as u32).to_le_bytes());
    for w in watermarks {
        payload.extend_from_slice(&w.to_le_bytes());
    }
    Frame {
        payload,
        ..Frame::empty(kind)
    }
}

/// Reads a watermark list (`Ack`, `Heartbeat`).
///
/// # Errors
/// [`FrameError::Malformed`].
pub fn decode_watermarks(frame: &Frame) -> Result<Vec<u64>, FrameError> {
    let mut r = Reader(&frame.payload);
    let n = r.u32("watermarks")? as usize;
    let out = r.u64s(n, "watermarks")?;
    r.end("watermarks")?;
    Ok(out)
}
