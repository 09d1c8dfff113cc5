//! A connection's byte stream, as the connection loops use it ([`Socket`]): tokio's TCP
//! stream, TLS over one (`tls` feature), or an io_uring socket on a monoio worker
//! (`uring`, `monoio` feature).

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection's byte stream: a TCP socket (tokio's, or io_uring's with the monoio
/// runtime), or TLS over one.
pub(crate) trait Socket {
    /// Reads what arrives next into `buf`'s spare capacity (0: the peer closed). Cancel-safe:
    /// a read dropped before it completes loses no bytes (the next one returns them).
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;

    /// Writes all of `buf` (and flushes what TLS holds back); the io_uring socket's `split`
    /// and `writev` writers return once `buf` is queued for their writer task (taking it,
    /// and leaving an empty buffer). Not cancel-safe: a write dropped before it completes
    /// leaves the stream unusable, and `buf` unspecified.
    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()>;

    /// Reads what has already arrived, without waiting for more (a client draining at
    /// shutdown); `WouldBlock` when nothing has.
    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;

    /// The plain TCP stream underneath, to hand to another thread (a replica that came to a
    /// RESP port); `Err(self)` for a TLS one. Only before [`Socket::settled`].
    fn into_tcp(self) -> Result<std::io::Result<std::net::TcpStream>, Self>
    where
        Self: Sized;

    /// The connection's protocol is decided: it stays on this thread.
    fn settled(&mut self) {}

    /// Whether the busy-script hook may answer the connection now (`idle`: its task waits
    /// on the socket with nothing buffered), and whether it authenticated (`parked`); a
    /// no-op for sockets the hook cannot answer.
    fn park(&self, _idle: bool, _authed: bool) {}

    /// Whether the busy-script hook left replies to send or requests to run, for the task
    /// to take first ([`Socket::take_left`]).
    fn left(&self) -> bool {
        false
    }

    /// What the busy-script hook left: replies not yet sent, then requests read and not
    /// answered (they come before anything read after them).
    fn take_left(&self) -> (BytesMut, BytesMut) {
        (BytesMut::new(), BytesMut::new())
    }
}

impl Socket for TcpStream {
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        AsyncReadExt::read_buf(self, buf).await
    }

    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()> {
        AsyncWriteExt::write_all(self, buf).await
    }

    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        self.try_read_buf(buf)
    }

    fn into_tcp(self) -> Result<std::io::Result<std::net::TcpStream>, Self> {
        Ok(self.into_std())
    }
}

#[cfg(feature = "tls")]
impl Socket for tokio_rustls::server::TlsStream<TcpStream> {
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        AsyncReadExt::read_buf(self, buf).await
    }

    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()> {
        // TLS holds records until flushed.
        AsyncWriteExt::write_all(self, buf).await?;
        AsyncWriteExt::flush(self).await
    }

    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        use std::task::{Context, Poll, Waker};
        // One poll with a waker that wakes no one: what the socket and the TLS buffers hold
        // now, decrypted, or nothing.
        let mut cx = Context::from_waker(Waker::noop());
        let read = std::pin::pin!(AsyncReadExt::read_buf(self, buf));
        match read.poll(&mut cx) {
            Poll::Ready(read) => read,
            Poll::Pending => Err(std::io::ErrorKind::WouldBlock.into()),
        }
    }

    fn into_tcp(self) -> Result<std::io::Result<std::net::TcpStream>, Self> {
        Err(self)
    }
}
