//! Clients blocked on keys (`BLPOP`...): the waiters of each key on its owner's lane, the
//! keys that got elements since their owner last served them, and the client table
//! (`CLIENT UNBLOCK`, `INFO clients`). The mutation stream marks keys ready
//! ([`Blocked::signal`], from `crate::txn`'s sink); the owner worker serves them
//! (`Worker::serve_ready`); `crate::blocking` registers and waits. See `crate::blocking` for
//! the whole design.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::command::pops::Op;
use crate::reply::{Replies, Reply};

/// One blocked client.
pub(crate) struct Waiter {
    client: u64,
    op: Op,
    keys: Vec<Bytes>,
    /// Set once by whoever answers it: a serving owner, its timeout, `CLIENT UNBLOCK`.
    claimed: AtomicBool,
    reply: Mutex<Option<oneshot::Sender<Replies>>>,
}

impl Waiter {
    /// A waiter for client `client`, popping with `op` from the first of `keys` to get
    /// elements, and where its answer arrives.
    pub(crate) fn new(
        client: u64,
        op: Op,
        keys: Vec<Bytes>,
    ) -> (Arc<Self>, oneshot::Receiver<Replies>) {
        let (tx, rx) = oneshot::channel();
        let waiter = Arc::new(Self {
            client,
            op,
            keys,
            claimed: AtomicBool::new(false),
            reply: Mutex::new(Some(tx)),
        });
        (waiter, rx)
    }

    pub(crate) fn op(&self) -> &Op {
        &self.op
    }

    /// Takes the right to answer; `false` when someone already has.
    pub(crate) fn claim(&self) -> bool {
        self.claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// Answers (after a successful [`Waiter::claim`]).
    pub(crate) fn answer(&self, replies: Replies) {
        let sender = self
            .reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(sender) = sender {
            let _ = sender.send(replies);
        }
    }
}

/// One worker's blocked keys: the waiters of each key it owns, in arrival order, and the
/// keys that changed since it last served them.
#[derive(Default)]
struct Lane {
    waiters: Mutex<HashMap<Bytes, VecDeque<Arc<Waiter>>>>,
    /// Whether `waiters` is non-empty: the sink's only test on a push when nobody waits.
    watching: AtomicBool,
    ready: Mutex<Vec<Bytes>>,
    has_ready: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every blocked client, by worker lane and by client id.
pub(crate) struct Blocked {
    lanes: Vec<Lane>,
    clients: Mutex<HashMap<u64, Arc<Waiter>>>,
}

impl Blocked {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            lanes: (0..workers).map(|_| Lane::default()).collect(),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// `INFO clients`' `blocked_clients`.
    pub(crate) fn count(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Keys currently waited on (`INFO keyspace`-style introspection and tests).
    pub(crate) fn keys_waited(&self) -> usize {
        self.lanes.iter().map(|l| lock(&l.waiters).len()).sum()
    }

    /// A key of worker `worker` got elements (from the mutation stream, on the owner).
    #[inline]
    pub(crate) fn signal(&self, worker: usize, key: &[u8]) {
        let lane = &self.lanes[worker];
        if !lane.watching.load(Ordering::Acquire) {
            return;
        }
        if lock(&lane.waiters).contains_key(key) {
            lock(&lane.ready).push(Bytes::copy_from_slice(key));
            lane.has_ready.store(true, Ordering::Release);
        }
    }

    /// Marks `key` of worker `worker` ready whatever its contents (a new waiter's re-check).
    fn mark_ready(&self, worker: usize, key: &Bytes) {
        let lane = &self.lanes[worker];
        lock(&lane.ready).push(key.clone());
        lane.has_ready.store(true, Ordering::Release);
    }

    /// Whether worker `worker` has keys to serve.
    #[inline]
    pub(crate) fn has_ready(&self, worker: usize) -> bool {
        self.lanes[worker].has_ready.load(Ordering::Acquire)
    }

    /// Drops `waiter` from the queues of its keys and the client table.
    pub(crate) fn forget(&self, waiter: &Arc<Waiter>, owner_of: impl Fn(&[u8]) -> usize) {
        for key in &waiter.keys {
            let lane = &self.lanes[owner_of(key)];
            let mut map = lock(&lane.waiters);
            if let Some(queue) = map.get_mut(key) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    map.remove(key);
                }
            }
            lane.watching.store(!map.is_empty(), Ordering::Release);
        }
        let mut clients = lock(&self.clients);
        if clients
            .get(&waiter.client)
            .is_some_and(|w| Arc::ptr_eq(w, waiter))
        {
            clients.remove(&waiter.client);
        }
    }

    /// Blocks `waiter` on its keys: in the client table, at the back of each key's queue on
    /// the key's owner (`owner_of`), and each key marked ready, because a push between the
    /// caller's last look and now found nobody waiting. Returns the owners, which must serve
    /// their ready keys.
    pub(crate) fn register(
        &self,
        waiter: &Arc<Waiter>,
        owner_of: impl Fn(&[u8]) -> usize,
    ) -> Vec<usize> {
        lock(&self.clients).insert(waiter.client, Arc::clone(waiter));
        let mut owners = Vec::new();
        for key in &waiter.keys {
            let owner = owner_of(key);
            let lane = &self.lanes[owner];
            let mut map = lock(&lane.waiters);
            let queue = map.entry(key.clone()).or_default();
            // A key named twice waits once.
            if !queue.iter().any(|w| Arc::ptr_eq(w, waiter)) {
                queue.push_back(Arc::clone(waiter));
            }
            lane.watching.store(true, Ordering::Release);
            drop(map);
            self.mark_ready(owner, key);
            if !owners.contains(&owner) {
                owners.push(owner);
            }
        }
        owners
    }

    /// The keys of worker `worker` to serve, taken (the flag is cleared first: a key marked
    /// while they are served is seen by the next call).
    pub(crate) fn take_ready(&self, worker: usize) -> Vec<Bytes> {
        let lane = &self.lanes[worker];
        let mut ready = lock(&lane.ready);
        lane.has_ready.store(false, Ordering::Release);
        std::mem::take(&mut *ready)
    }

    /// The first waiter of `key` (of worker `worker`) that `serves` accepts (a list pop for a
    /// list, a sorted-set pop for a sorted set), in arrival order; waiters already answered
    /// elsewhere are dropped on the way. Waiters of the other type stay where they are.
    pub(crate) fn next_waiter(
        &self,
        worker: usize,
        key: &[u8],
        serves: impl Fn(&Op) -> bool,
    ) -> Option<Arc<Waiter>> {
        let lane = &self.lanes[worker];
        let mut map = lock(&lane.waiters);
        let queue = map.get_mut(key)?;
        queue.retain(|w| !w.is_claimed());
        let found = queue.iter().find(|w| serves(&w.op)).cloned();
        if queue.is_empty() {
            map.remove(key);
        }
        lane.watching.store(!map.is_empty(), Ordering::Release);
        found
    }

    /// Removes `waiter` from `key`'s queue, if it is still there.
    pub(crate) fn remove(&self, worker: usize, key: &[u8], waiter: &Arc<Waiter>) {
        let lane = &self.lanes[worker];
        let mut map = lock(&lane.waiters);
        if let Some(queue) = map.get_mut(key) {
            queue.retain(|w| !Arc::ptr_eq(w, waiter));
            if queue.is_empty() {
                map.remove(key);
            }
        }
        lane.watching.store(!map.is_empty(), Ordering::Release);
    }

    /// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: whether the client was blocked and is now
    /// answered.
    pub(crate) fn unblock(&self, id: u64, error: bool) -> bool {
        let Some(waiter) = lock(&self.clients).get(&id).cloned() else {
            return false;
        };
        if !waiter.claim() {
            return false;
        }
        let mut out = Replies::new();
        if error {
            out.error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            waiter.op.nothing(&mut out, false);
        }
        waiter.answer(out);
        true
    }
}
