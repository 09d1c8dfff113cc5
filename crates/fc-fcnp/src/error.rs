//! The errors of this crate: framing errors, which end a connection, and request errors, which
//! answer one request.

/// A frame that cannot be read: the stream is out of step or abusive, and the connection ends
/// (a server sends one [`crate::ResponseKind::Fatal`] frame with the text first).
///
/// "The bytes so far are an incomplete frame" is not an error: decoders return `Ok(None)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The first byte of a frame is not [`crate::MAGIC`].
    #[error("FCNP protocol error: bad magic byte 0x{0:02x}")]
    BadMagic(u8),
    /// A version this codec does not speak.
    #[error("FCNP protocol error: unsupported version {0}")]
    BadVersion(u8),
    /// Flag bits this version leaves reserved were set.
    #[error("FCNP protocol error: reserved flag bits 0x{0:02x} set")]
    ReservedFlags(u8),
    /// A body longer than the limit (checked before anything is buffered for it).
    #[error("FCNP protocol error: body of {len} bytes exceeds the limit of {limit}")]
    BodyTooLarge {
        /// Bytes the header claimed.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// More items than the limit, or more than the body could hold.
    #[error("FCNP protocol error: {count} items exceed the limit of {limit}")]
    TooManyItems {
        /// Items the header claimed.
        count: u64,
        /// The limit in force (or what the body's size allows).
        limit: u64,
    },
    /// An item longer than the item limit.
    #[error("FCNP protocol error: item of {len} bytes exceeds the limit of {limit}")]
    ItemTooLarge {
        /// Bytes the item claimed.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The items do not fill the body exactly (one runs past its end, or bytes are left).
    #[error("FCNP protocol error: items do not fill the body of {body} bytes")]
    BodyMismatch {
        /// The body's length.
        body: u64,
    },
    /// A reply value is malformed (`what` says how).
    #[error("FCNP protocol error: bad value ({what})")]
    BadValue {
        /// What was wrong.
        what: &'static str,
    },
    /// A reply nests deeper than the limit.
    #[error("FCNP protocol error: values nested deeper than {0} levels")]
    TooDeep(usize),
    /// A response frame of a kind this codec does not know.
    #[error("FCNP protocol error: unknown response kind {0}")]
    BadKind(u8),
}

/// A well-framed request that does not say a valid operation: the server answers it with an
/// error reply (its text is [`RequestError`]'s `Display`) and goes on with the next one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// An opcode this version does not define.
    #[error("ERR unknown FCNP opcode 0x{0:02x}")]
    UnknownOpcode(u8),
    /// The opcode takes another number of items.
    #[error("ERR wrong number of items for FCNP {opcode}: {got}")]
    ItemCount {
        /// The opcode's name.
        opcode: &'static str,
        /// Items sent.
        got: usize,
    },
    /// A flag the opcode does not take (or two that exclude each other).
    #[error("ERR flags 0x{flags:02x} are not valid for FCNP {opcode}")]
    Flags {
        /// The opcode's name.
        opcode: &'static str,
        /// The flags sent.
        flags: u8,
    },
    /// The opcode needs the TTL extension and the request has none.
    #[error("ERR FCNP {0} needs a TTL")]
    MissingTtl(&'static str),
    /// An integer item that is not 8 bytes.
    #[error("ERR FCNP {0} takes an 8-byte little-endian integer")]
    BadInteger(&'static str),
}
