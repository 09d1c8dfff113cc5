//! Size limits, checked before any allocation or arithmetic that a claimed length could abuse.

/// Limits for parsing requests (the server side).
///
/// The defaults are Redis's: `proto-max-bulk-len` 512 MiB, a multibulk count up to `INT_MAX`,
/// inline requests and length lines up to 64 KiB, and a 1 GiB query buffer
/// (`client-query-buffer-limit`). [`Limits::unauthenticated`] is the much smaller set Redis
/// applies before a client has authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string argument (`$<n>`), in bytes.
    pub max_bulk_len: u64,
    /// Largest argument count of one multibulk request (`*<n>`).
    pub max_multibulk_len: u64,
    /// Longest inline request line, and longest `*<n>`/`$<n>` line, in bytes.
    pub max_inline_len: usize,
    /// Most unparsed bytes a client may hold (an incomplete request included).
    pub max_query_buffer: usize,
}

impl Limits {
    /// Redis's `proto-max-bulk-len` default: 512 MiB.
    pub const DEFAULT_MAX_BULK_LEN: u64 = 512 * 1024 * 1024;
    /// Redis's `PROTO_INLINE_MAX_SIZE`: 64 KiB.
    pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;
    /// Redis's `client-query-buffer-limit` default: 1 GiB.
    pub const DEFAULT_MAX_QUERY_BUFFER: usize = 1024 * 1024 * 1024;
    /// Redis's largest multibulk count: `INT_MAX`.
    pub const DEFAULT_MAX_MULTIBULK_LEN: u64 = i32::MAX as u64;

    /// The limits Redis applies to a client that must still authenticate: 10 arguments,
    /// 16 KiB per argument, a 1 MiB query buffer.
    #[must_use]
    pub const fn unauthenticated() -> Self {
        Self {
            max_bulk_len: 16 * 1024,
            max_multibulk_len: 10,
            max_inline_len: Self::DEFAULT_MAX_INLINE_LEN,
            max_query_buffer: 1024 * 1024,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bulk_len: Self::DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: Self::DEFAULT_MAX_MULTIBULK_LEN,
            max_inline_len: Self::DEFAULT_MAX_INLINE_LEN,
            max_query_buffer: Self::DEFAULT_MAX_QUERY_BUFFER,
        }
    }
}

/// Limits for decoding replies (the client and replica side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest bulk string, blob error or verbatim string, in bytes.
    pub max_bulk_len: u64,
    /// Largest element count of one aggregate (array, set, push; pairs for map and attribute).
    pub max_aggregate_len: u64,
    /// Longest simple string, error, integer, double or big number line, in bytes.
    pub max_line_len: usize,
    /// Deepest nesting of aggregates.
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    /// 512 MiB strings, 2^31 - 1 elements, 1 MiB lines, 128 levels.
    fn default() -> Self {
        Self {
            max_bulk_len: Limits::DEFAULT_MAX_BULK_LEN,
            max_aggregate_len: Limits::DEFAULT_MAX_MULTIBULK_LEN,
            max_line_len: 1024 * 1024,
            max_depth: 128,
        }
    }
}

/// Aggregates are pre-allocated for at most this many elements, whatever they claim (Redis
/// caps its argument vector the same way); they grow as elements arrive.
pub(crate) const MAX_PREALLOC: usize = 1024;
