//! The replication thread (`fc-repl`): the pump that batches the primary's export rings into
//! the backlog, a task per replica link ([`primary`]), and the link a replica follows
//! ([`replica`]). Shared state and what commands see: [`crate::repl`]. Protocol and
//! guarantees: `docs/REPLICATION.md`.

mod primary;
mod replica;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::repl::{Control, lock};
use crate::shared::Shared;

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
                let mut follower: Option<tokio::task::JoinHandle<()>> = None;
                loop {
                    tokio::select! {
                        message = control.recv() => match message {
                            Some(Control::Follow(target)) => {
                                if let Some(task) = follower.take() {
                                    task.abort();
                                }
                                follower = target.map(|(host, port)| {
                                    tokio::task::spawn_local(replica::follow(Arc::clone(&shared), host, port))
                                });
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
