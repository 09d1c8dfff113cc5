//! One FCNP connection, multiplexed: any number of tasks send requests on it at once; a writer
//! task sends what is queued in one write, a reader task hands each response to the request
//! with its id.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fc_fcnp::{Body, RequestHeader, ResponseDecoder, encode_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::Error;

type Waiters = Arc<Mutex<HashMap<u32, oneshot::Sender<Result<Body, Error>>>>>;

/// A live connection (cheap to clone: the tasks hold the socket).
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    queue: mpsc::UnboundedSender<BytesMut>,
    waiters: Waiters,
    next_id: Arc<AtomicU32>,
    alive: Arc<AtomicBool>,
}

/// One request to send: its header (the id is set here) and items.
pub(crate) struct Call {
    pub(crate) header: RequestHeader,
    pub(crate) items: Vec<Bytes>,
}

impl Conn {
    /// Dials `addr` within `timeout` and starts the connection's two tasks on the current
    /// runtime.
    pub(crate) async fn open(addr: SocketAddr, timeout: Duration) -> Result<Self, Error> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout)??;
        stream.set_nodelay(true)?;
        let (mut reader, mut writer) = stream.into_split();
        let (queue, mut outgoing) = mpsc::unbounded_channel::<BytesMut>();
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (w_alive, r_alive) = (Arc::clone(&alive), Arc::clone(&alive));
        let r_waiters = Arc::clone(&waiters);
        tokio::spawn(async move {
            while let Some(mut frames) = outgoing.recv().await {
                // Everything queued meanwhile goes in the same write.
                while let Ok(more) = outgoing.try_recv() {
                    frames.extend_from_slice(&more);
                }
                if writer.write_all(&frames).await.is_err() {
                    break;
                }
            }
            w_alive.store(false, Ordering::Release);
        });
        tokio::spawn(async move {
            let decoder = ResponseDecoder::default();
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let ended = loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(response)) => {
                        if let fc_fcnp::Body::Fatal(text) = response.body {
                            break Error::Fatal(text);
                        }
                        let waiter = r_waiters.lock().expect("waiters lock").remove(&response.id);
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(Ok(response.body));
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(err) => break Error::Protocol(err),
                }
                if buf.capacity() - buf.len() < 16 * 1024 {
                    buf.reserve(64 * 1024);
                }
                match reader.read_buf(&mut buf).await {
                    Ok(0) => break Error::Closed,
                    Ok(_) => {}
                    Err(err) => break Error::Io(Arc::new(err)),
                }
            };
            r_alive.store(false, Ordering::Release);
            // Everyone still waiting learns why.
            let waiting: Vec<_> = r_waiters.lock().expect("waiters lock").drain().collect();
            for (_, waiter) in waiting {
                let _ = waiter.send(Err(ended.clone()));
            }
        });
        Ok(Self {
            queue,
            waiters,
            next_id: Arc::new(AtomicU32::new(1)),
            alive,
        })
    }

    /// Whether both tasks still run.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Sends `calls` in one write and waits for each response, at most `timeout` in all.
    pub(crate) async fn run(
        &self,
        calls: Vec<Call>,
        timeout: Duration,
    ) -> Result<Vec<Body>, Error> {
        let mut frames = BytesMut::new();
        let mut pending = Vec::with_capacity(calls.len());
        let mut ids = Vec::with_capacity(calls.len());
        {
            let mut waiters = self.waiters.lock().expect("waiters lock");
            for mut call in calls {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                call.header.id = id;
                encode_request(&mut frames, &call.header, &call.items);
                let (tx, rx) = oneshot::channel();
                waiters.insert(id, tx);
                pending.push(rx);
                ids.push(id);
            }
        }
        if !self.is_alive() || self.queue.send(frames).is_err() {
            self.forget(&ids);
            return Err(Error::Closed);
        }
        let gather = async {
            let mut out = Vec::with_capacity(pending.len());
            for rx in pending {
                out.push(rx.await.map_err(|_| Error::Closed)??);
            }
            Ok(out)
        };
        match tokio::time::timeout(timeout, gather).await {
            Ok(result) => result,
            Err(_) => {
                self.forget(&ids);
                Err(Error::Timeout)
            }
        }
    }

    fn forget(&self, ids: &[u32]) {
        let mut waiters = self.waiters.lock().expect("waiters lock");
        for id in ids {
            waiters.remove(id);
        }
    }
}
