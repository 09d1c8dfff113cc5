//! io_uring sockets for the connections of monoio workers (see [`crate::rt`]).
//!
//! Reads hand bytes off with no copy. A read's buffer is the spare capacity of the
//! connection's read buffer, split off as an owned `BytesMut` while the kernel fills it, and
//! joined back (`unsplit`, no copy) when it completes. A read stays in flight when the
//! connection's `select!` takes another branch (a published message, a kill), so a completion
//! can never be dropped with its bytes. The next read, or [`UringSocket::read_ready`], picks it up.
//!
//! Writes hand the reply buffer to the kernel as an owned buffer. Three writers
//! (`FAST_CACHE_MONOIO_SAFE_WRITER`) do this:
//! - `inline`: the connection's task sends each flush itself and waits for it;
//! - `split`: a writer task sends it while the connection reads and runs the next requests,
//!   with at most one flush waiting behind the one being sent;
//! - `writev`: as `split`, but every flush waiting goes out in one vectored send.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use fc_config::MonoioWriter;
use monoio::buf::VecBuf;
use monoio::io::{
    AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, OwnedReadHalf, OwnedWriteHalf, Splitable,
};
use monoio::net::TcpStream;
use tokio::sync::Notify;

/// A read gets at least this much room (the read buffer grows by [`READ_GROWTH`] below it).
const READ_MIN: usize = 1024;
/// How much a read buffer with less than [`READ_MIN`] to spare grows by.
const READ_GROWTH: usize = 16 * 1024;
/// How long [`UringSocket::read_ready`] lets the kernel answer a read of what has arrived.
const READY_WAIT: Duration = Duration::from_millis(2);
/// How long a writer task goes on sending a closed connection's last replies.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// A read in flight: it owns the read half and the buffer it fills.
type Reading =
    Pin<Box<dyn Future<Output = (std::io::Result<usize>, BytesMut, OwnedReadHalf<TcpStream>)>>>;

/// A plain TCP connection on a monoio worker.
pub(crate) struct UringSocket {
    /// The read half, while no read is in flight.
    reader: Option<OwnedReadHalf<TcpStream>>,
    reading: Option<Reading>,
    writer: Writer,
    /// A duplicate of the descriptor, kept until the protocol is settled, to hand the
    /// connection to the replication thread if it turns out to be a replica's.
    spare: Option<std::net::TcpStream>,
}

enum Writer {
    /// Before the first write. A connection handed to the replication thread leaves from
    /// here: its halves are joined again, so that the write half's drop does not shut the
    /// socket down under the descriptor handed over.
    Unsettled(Option<OwnedWriteHalf<TcpStream>>, MonoioWriter),
    Inline(OwnedWriteHalf<TcpStream>),
    Task(Rc<Queue>),
}

impl UringSocket {
    /// Moves `stream` onto this thread's monoio driver; `handoff`: keeps a duplicate of its
    /// descriptor until [`Socket::settled`](crate::socket::Socket::settled), for
    /// [`Socket::into_tcp`](crate::socket::Socket::into_tcp).
    ///
    /// # Errors
    /// The descriptor could not be duplicated or registered.
    pub(crate) fn new(
        stream: std::net::TcpStream,
        mode: MonoioWriter,
        handoff: bool,
    ) -> std::io::Result<Self> {
        let spare = handoff.then(|| stream.try_clone()).transpose()?;
        let (reader, write) = TcpStream::from_std(stream)?.into_split();
        Ok(Self {
            reader: Some(reader),
            reading: None,
            writer: Writer::Unsettled(Some(write), mode),
            spare,
        })
    }

    /// The writer, started at the first write (a writer task for `split` and `writev`).
    fn writer(&mut self) -> &mut Writer {
        if let Writer::Unsettled(write, mode) = &mut self.writer {
            let (write, mode) = (write.take().expect("the write half"), *mode);
            self.writer = match mode {
                MonoioWriter::Inline => Writer::Inline(write),
                MonoioWriter::Split | MonoioWriter::Writev => {
                    let gather = mode == MonoioWriter::Writev;
                    let queue = Rc::new(Queue::default());
                    queue.state.borrow_mut().limit = if gather { GATHERED } else { QUEUED };
                    crate::rt::spawn_local(write_loop(Rc::clone(&queue), write, gather));
                    Writer::Task(queue)
                }
            };
        }
        &mut self.writer
    }
}

impl crate::socket::Socket for UringSocket {
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        let reading = match &mut self.reading {
            Some(reading) => reading,
            None => {
                if buf.capacity() - buf.len() < READ_MIN {
                    buf.reserve(READ_GROWTH);
                }
                // The spare capacity, owned by the read until it completes.
                let landing = buf.split_off(buf.len());
                let mut half = self
                    .reader
                    .take()
                    .expect("a read half while none is in flight");
                self.reading.insert(Box::pin(async move {
                    let (read, landing) = half.read(landing).await;
                    (read, landing, half)
                }))
            }
        };
        let (read, landing, half) = reading.await;
        self.reading = None;
        self.reader = Some(half);
        // Where the read buffer was not reallocated meanwhile, this only moves its end.
        buf.unsplit(landing);
        read
    }

    async fn write_all(&mut self, buf: &mut BytesMut) -> std::io::Result<()> {
        match self.writer() {
            Writer::Inline(half) => {
                let (sent, back) = half.write_all(std::mem::take(buf)).await;
                *buf = back;
                sent.map(drop)
            }
            Writer::Task(queue) => queue.push(buf).await,
            Writer::Unsettled(..) => unreachable!("started by `writer`"),
        }
    }

    async fn read_ready(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        // io_uring completes a read of bytes already in the socket as soon as it is
        // submitted; the read left in flight by a timeout is picked up by the next call.
        match tokio::time::timeout(READY_WAIT, self.read_buf(buf)).await {
            Ok(read) => read,
            Err(_) => Err(std::io::ErrorKind::WouldBlock.into()),
        }
    }

    fn into_tcp(mut self) -> Result<std::io::Result<std::net::TcpStream>, Self> {
        let unsettled = matches!(self.writer, Writer::Unsettled(Some(_), _));
        if self.spare.is_none() || !unsettled || self.reading.is_some() {
            return Err(self);
        }
        let std = self.spare.take().expect("checked");
        if let (Some(read), Writer::Unsettled(write, _)) = (self.reader.take(), &mut self.writer)
            && let Some(write) = write.take()
        {
            // Joined, the stream's drop closes this descriptor only (no shutdown).
            drop(read.reunite(write));
        }
        Ok(std.set_nonblocking(true).map(|()| std))
    }

    fn settled(&mut self) {
        self.spare = None;
    }
}

impl Drop for UringSocket {
    fn drop(&mut self) {
        if let Writer::Task(queue) = &self.writer {
            // The writer sends what is queued (for at most `CLOSE_GRACE`), then closes.
            queue.state.borrow_mut().closing = true;
            queue.ready.notify_one();
            queue.closed.notify_one();
        }
    }
}

/// The flushes waiting for a writer task.
#[derive(Default)]
struct Queue {
    state: RefCell<QueueState>,
    /// The writer waits on it for flushes (or the close).
    ready: Notify,
    /// The connection waits on it for room in the queue.
    room: Notify,
    /// Told once, when the connection is dropped.
    closed: Notify,
}

#[derive(Default)]
struct QueueState {
    flushes: VecDeque<BytesMut>,
    /// Sent buffers, cleared, for the connection's next replies.
    free: Vec<BytesMut>,
    failed: bool,
    closing: bool,
    /// Flushes that may wait behind the one being sent.
    limit: usize,
}

/// `split`: flushes that may wait behind the one being sent.
const QUEUED: usize = 1;
/// With `writev`: flushes gathered into one send, at most.
const GATHERED: usize = 16;

impl Queue {
    /// Queues `buf` for the writer (waiting for room), leaving an empty buffer in its place.
    async fn push(&self, buf: &mut BytesMut) -> std::io::Result<()> {
        loop {
            {
                let mut state = self.state.borrow_mut();
                if state.failed {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
                if state.flushes.len() < state.limit {
                    let fresh = state
                        .free
                        .pop()
                        .unwrap_or_else(|| BytesMut::with_capacity(buf.capacity()));
                    state.flushes.push_back(std::mem::replace(buf, fresh));
                    break;
                }
            }
            self.room.notified().await;
        }
        self.ready.notify_one();
        Ok(())
    }
}

/// Sends all of `vecs` with vectored sends, each owning its buffers while the kernel has it (a
/// send dropped in flight, as a writer's after `CLOSE_GRACE`, leaves them to the driver until
/// its cancellation completes: monoio's `write_vectored_all` lends the kernel pointers into
/// buffers its own future owns, which a drop would free under it). Returns the buffers.
async fn send_vectored(
    half: &mut OwnedWriteHalf<TcpStream>,
    mut vecs: Vec<Vec<u8>>,
) -> std::io::Result<Vec<Vec<u8>>> {
    let mut sent: Vec<Vec<u8>> = Vec::with_capacity(vecs.len());
    while !vecs.is_empty() {
        let (wrote, back) = half.writev(VecBuf::from(vecs)).await;
        vecs = back.into();
        let mut n = wrote?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            if n >= vecs[0].len() {
                n -= vecs[0].len();
                sent.push(vecs.remove(0));
            } else {
                vecs[0].drain(..n);
                n = 0;
            }
        }
        while vecs.first().is_some_and(Vec::is_empty) {
            sent.push(vecs.remove(0));
        }
    }
    Ok(sent)
}

/// A connection's writer task (`split`, or `writev` when `gather`).
async fn write_loop(queue: Rc<Queue>, mut half: OwnedWriteHalf<TcpStream>, gather: bool) {
    let work = {
        let queue = Rc::clone(&queue);
        async move {
            loop {
                let taken: Vec<BytesMut> = {
                    let mut state = queue.state.borrow_mut();
                    let n = if gather {
                        state.flushes.len().min(GATHERED)
                    } else {
                        state.flushes.len().min(1)
                    };
                    state.flushes.drain(..n).collect()
                };
                if taken.is_empty() {
                    if queue.state.borrow().closing {
                        return;
                    }
                    queue.ready.notified().await;
                    continue;
                }
                queue.room.notify_one();
                let sent = if taken.len() == 1 {
                    let one = taken.into_iter().next().expect("one flush");
                    let (sent, back) = half.write_all(one).await;
                    sent.map(|_| vec![back])
                } else {
                    let vecs: Vec<Vec<u8>> = taken.into_iter().map(Vec::from).collect();
                    send_vectored(&mut half, vecs).await.map(|vecs| {
                        // No copy: a `Vec` becomes `Bytes`, and unique `Bytes` a `BytesMut`.
                        vecs.into_iter()
                            .map(|v| BytesMut::from(bytes::Bytes::from(v)))
                            .collect()
                    })
                };
                match sent {
                    Ok(bufs) => {
                        let mut state = queue.state.borrow_mut();
                        for mut buf in bufs {
                            if state.free.len() < 2 {
                                buf.clear();
                                state.free.push(buf);
                            }
                        }
                    }
                    Err(_) => {
                        queue.state.borrow_mut().failed = true;
                        queue.room.notify_one();
                        return;
                    }
                }
            }
        }
    };
    // A closed connection's last replies go out unless its peer stops reading them.
    let grace = async {
        queue.closed.notified().await;
        tokio::time::sleep(CLOSE_GRACE).await;
    };
    tokio::select! {
        () = work => {}
        () = grace => {}
    }
}
