//! The replication thread (`fc-repl`): the pump that batches the primary's export rings into
//! the backlog, a task per replica link ([`primary`]), and the start of the link a replica
//! follows ([`replica`], which runs on worker 0 with tokio workers). Shared state and what
//! commands see: [`crate::repl`]. Protocol and guarantees: `docs/REPLICATION.md`.

mod primary;
mod replica;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::repl::{Control, lock};
use crate::shared::{Job, Shared};

/// Starts the link to the primary at `host:port`. With tokio workers it runs on worker 0's
/// thread: that worker applies its shards' batches as the link reads them, with no hop
/// between threads (a one-worker replica's every batch; before, each read woke the worker
/// from this thread: two threads woken per frame). monoio workers serve no tokio socket of
/// their own: there it runs on this thread, and hands every batch over.
async fn start_following(
    shared: &Arc<Shared>,
    host: String,
    port: u16,
) -> Option<tokio::task::AbortHandle> {
    if matches!(shared.config.runtime, fc_config::Runtime::Tokio) {
        let (started, handle) = tokio::sync::oneshot::channel();
        let follower = Arc::clone(shared);
        let job = Job::Spawn(Box::new(move || {
            let task = tokio::task::spawn_local(replica::follow(follower, host, port));
            let _ = started.send(task.abort_handle());
        }));
        shared.inboxes.first()?.send(job).ok()?;
        return handle.await.ok();
    }
    Some(tokio::task::spawn_local(replica::follow(Arc::clone(shared), host, port)).abort_handle())
}

/// Starts the replication thread (`fc-repl`): the pump, the replica port, replica links, and
/// the link to a primary; it stops when `stopped` changes.
pub(crate) fn start(
    shared: Arc<Shared>,
    listener: Option<std::net::TcpListener>,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let stop = Arc::new(AtomicBool::new(false));
    let pump = {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("fc-repl-pump".into())
            .spawn(move || primary::pump(&shared, &stop))?
    };
    std::thread::Builder::new()
        .name("fc-repl".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the replication thread's runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                let repl = &shared.repl;
                let Some(mut control) = lock(&repl.control_rx).take() else {
                    return;
                };
                if let Some(listener) = listener.and_then(|l| tokio::net::TcpListener::from_std(l).ok()) {
                    let shared = Arc::clone(&shared);
                    tokio::task::spawn_local(async move {
                        loop {
                            let Ok((stream, peer)) = listener.accept().await else {
                                continue;
                            };
                            tokio::task::spawn_local(primary::serve(
                                Arc::clone(&shared),
                                stream,
                                Vec::new(),
                                peer,
                            ));
                        }
                    });
                }
                let mut follower: Option<tokio::task::AbortHandle> = None;
                loop {
                    tokio::select! {
                        message = control.recv() => match message {
                            Some(Control::Follow(target)) => {
                                if let Some(task) = follower.take() {
                                    task.abort();
                                }
                                follower = match target {
                                    Some((host, port)) => start_following(&shared, host, port).await,
                                    None => None,
                                };
                            }
                            Some(Control::Incoming(stream, pending)) => {
                                let Ok(peer) = stream.peer_addr() else { continue };
                                let _ = stream.set_nonblocking(true);
                                if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                                    tokio::task::spawn_local(primary::serve(
                                        Arc::clone(&shared),
                                                stream,
                                        pending,
                                        peer,
                                    ));
                                }
                            }
                            None => break,
                        },
                        _ = stopped.changed() => break,
                    }
                }
            });
            stop.store(true, Ordering::Release);
            pump.thread().unpark();
            let _ = pump.join();
        })
}
