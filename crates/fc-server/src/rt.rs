//! The workers' async runtime. tokio's current-thread runtime with a `LocalSet` is the
//! portable default. With the `monoio` feature and `FAST_CACHE_USE_MONOIO=1`
//! (`[server] runtime = "monoio"`), a worker runs on monoio's runtime instead: io_uring, or
//! its epoll driver where the kernel refuses io_uring. Its RESP and FCNP connections then read
//! and write through io_uring ([`crate::uring`]), and so do its memcached connections.
//!
//! Everything else on a worker keeps its tokio types. tokio's channels and `Notify` need no
//! runtime. Its timers, its blocking pool, and the sockets still served through tokio (TLS
//! connections) belong to one shared runtime on thread `fc-tokio`: each monoio worker enters
//! its handle, and monoio's `sync` feature lets that thread wake the worker's tasks.
//!
//! monoio keeps no set of the tasks it runs (dropping its runtime cancels nothing that is
//! not queued), so every task a monoio worker spawns also watches the worker's stop
//! ([`Stop`]): when the worker's body ends, they are all dropped, closing their sockets, as
//! dropping tokio's `LocalSet` does.

use std::future::Future;

use fc_config::Runtime;

#[cfg(feature = "monoio")]
thread_local! {
    /// Whether this thread is a monoio worker's.
    static MONOIO: std::cell::Cell<Option<fc_config::MonoioWriter>> =
        const { std::cell::Cell::new(None) };
}

/// The monoio writer mode of this thread's worker; `None` on a tokio worker (or any other
/// thread).
#[cfg(feature = "monoio")]
pub(crate) fn monoio_writer() -> Option<fc_config::MonoioWriter> {
    MONOIO.get()
}

/// Whether a worker runs on io_uring (monoio's driver; `INFO server` `multiplexing_api`).
static URING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the workers' sockets wait on, as `INFO server`'s `multiplexing_api` names it:
/// `io_uring` once a monoio worker got it, else `epoll` (tokio's, or monoio's fallback).
pub(crate) fn multiplexing_api() -> &'static str {
    if URING.load(std::sync::atomic::Ordering::Relaxed) {
        "io_uring"
    } else {
        "epoll"
    }
}

/// `runtime`'s name (`INFO server` `worker_runtime`): `tokio`, or `monoio-` and its writer.
pub(crate) fn name(runtime: Runtime) -> &'static str {
    use fc_config::MonoioWriter;
    match runtime {
        Runtime::Tokio => "tokio",
        Runtime::Monoio(MonoioWriter::Inline) => "monoio-inline",
        Runtime::Monoio(MonoioWriter::Split) => "monoio-split",
        Runtime::Monoio(MonoioWriter::Writev) => "monoio-writev",
    }
}

/// A monoio worker's stop, which its tasks watch (see the module's documentation).
#[cfg(feature = "monoio")]
#[derive(Default)]
struct Stop {
    stopped: std::cell::Cell<bool>,
    notify: tokio::sync::Notify,
}

#[cfg(feature = "monoio")]
thread_local! {
    static STOP: std::rc::Rc<Stop> = std::rc::Rc::default();
}

/// Runs `task` on this worker's thread, detached.
///
/// # Panics
/// Off a worker thread (or the replication thread's `LocalSet`).
pub(crate) fn spawn_local(task: impl Future<Output = ()> + 'static) {
    #[cfg(feature = "monoio")]
    if MONOIO.get().is_some() {
        let stop = STOP.with(std::rc::Rc::clone);
        // A monoio task whose handle is dropped runs on, detached (as tokio's), until it
        // ends or the worker stops.
        drop(monoio::spawn(async move {
            let stopped = async {
                let notified = stop.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !stop.stopped.get() {
                    notified.await;
                }
            };
            tokio::select! {
                () = task => {}
                () = stopped => {}
            }
        }));
        return;
    }
    tokio::task::spawn_local(task);
}

/// Whether `runtime` can run in this build: monoio needs the `monoio` feature.
///
/// # Errors
/// The reason it cannot.
pub(crate) fn check(runtime: Runtime) -> std::io::Result<()> {
    match runtime {
        Runtime::Tokio => Ok(()),
        #[cfg(feature = "monoio")]
        Runtime::Monoio(_) => Ok(()),
        #[cfg(not(feature = "monoio"))]
        Runtime::Monoio(_) => Err(std::io::Error::other(
            "the monoio runtime (FAST_CACHE_USE_MONOIO=1, [server] runtime = \"monoio\") needs \
             fc-server built with its `monoio` feature (cargo run --release --features monoio)",
        )),
    }
}

/// Runs a worker thread's `body` to its end on `runtime` (see the module's documentation);
/// `body` may spawn with [`spawn_local`]. `idle` runs on the thread each time it runs out of
/// work, before it waits for more (tokio's `on_thread_park`; monoio has no such hook, and
/// its workers do not call it).
///
/// # Panics
/// When the runtime cannot be built (as tokio's `Builder::build`).
pub(crate) fn block_on(
    runtime: Runtime,
    idle: impl Fn() + Send + Sync + 'static,
    body: impl Future<Output = ()>,
) {
    match runtime {
        Runtime::Tokio => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(idle)
                .build()
                .expect("a worker's runtime");
            tokio::task::LocalSet::new().block_on(&runtime, body);
        }
        #[cfg(feature = "monoio")]
        Runtime::Monoio(writer) => {
            drop(idle);
            let _tokio = shared_tokio().enter();
            MONOIO.set(Some(writer));
            let runtime = monoio::RuntimeBuilder::<monoio::FusionDriver>::new()
                .build()
                .expect("a worker's monoio runtime");
            let uring = matches!(runtime, monoio::FusionRuntime::Uring(_));
            if uring {
                URING.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            tracing::debug!(
                "worker on monoio ({}), writer {}",
                if uring {
                    "io_uring"
                } else {
                    "epoll: io_uring refused"
                },
                writer.name()
            );
            let mut runtime = runtime;
            runtime.block_on(body);
            // Every task still running is dropped (see `Stop`): woken, each ends at its next
            // poll; a few turns of the runtime poll them all.
            runtime.block_on(async {
                STOP.with(|stop| {
                    stop.stopped.set(true);
                    stop.notify.notify_waiters();
                });
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
            });
            MONOIO.set(None);
        }
        #[cfg(not(feature = "monoio"))]
        Runtime::Monoio(_) => unreachable!("refused by `check` at start"),
    }
}

/// The tokio runtime that monoio workers borrow timers, the blocking pool and tokio sockets
/// from: a current-thread runtime driven by thread `fc-tokio` for the process's lifetime.
#[cfg(feature = "monoio")]
fn shared_tokio() -> &'static tokio::runtime::Handle {
    static HANDLE: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the shared tokio runtime");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("fc-tokio".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("the shared tokio thread");
        handle
    })
}
