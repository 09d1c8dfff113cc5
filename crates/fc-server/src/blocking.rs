//! Blocking pops (`BLPOP`, `BRPOP`, `BLMPOP`, `BLMOVE`, `BRPOPLPUSH`, `BZPOPMIN`, `BZPOPMAX`,
//! `BZMPOP`) and their never-blocking relatives `LMPOP` and `ZMPOP`, on a thread-per-core
//! server.
//!
//! A command first tries its keys in order, each on its owner (the first key with elements
//! serves it; a key of the wrong type answers `WRONGTYPE`). When none has elements (and the
//! command is not inside `MULTI`, where it acts as its non-blocking form), the client
//! registers a [`Waiter`] in the queue of each of its keys, on the *owner* worker's
//! [`Lane`], then asks those owners to look at the keys once more (closing the race with a
//! push that landed between the try and the registration), and its connection waits: for a
//! reply, its timeout, `CLIENT UNBLOCK`, or its socket closing. It costs memory, not CPU: no
//! polling anywhere.
//!
//! Wake-ups come from the mutation stream: the store's sink ([`crate::txn::ServerSink`])
//! tells [`Blocked::signal`] about every `ListPush`, `ZAdd` and `Rename` (to) on a worker with
//! waiters, so a push from any connection, any worker, `EXEC`, or a served `BLMOVE` wakes
//! them. The owner serves its ready keys ([`serve_ready`]) after each command (or after the
//! transaction that holds it), the waiters of a key first-come first-served: the element is
//! popped on the owner, in its critical section, by the waiter that claims it. A waiter
//! registered on keys of several workers is claimed once (an atomic flag), by a serving
//! owner, its timeout, or `CLIENT UNBLOCK`, whichever comes first; the others drop it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::blocked::Waiter;
use crate::command::pops::{Block, Op, TRY};
use crate::cross::{self, TxnLinks};
use crate::reply::{Replies, Reply, Token};
use crate::shared::Job;
use crate::worker::Worker;

/// What a blocked connection waits on.
pub(crate) struct Wait {
    waiter: Arc<Waiter>,
    answer: oneshot::Receiver<Replies>,
    timeout: Option<Duration>,
}

/// Runs a pop command ([`Block`]). Replies at once when a key has elements, when it is
/// refused, inside a transaction, or for a command that never blocks; else returns what the
/// connection must wait on (it replies nothing yet).
pub(crate) async fn run<R: Reply>(
    worker: &Worker,
    client: u64,
    kind: Block,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) -> Option<Wait> {
    let mut plan = match kind.parse(&args) {
        Ok(plan) => plan,
        Err(text) => {
            out.error(&text);
            return None;
        }
    };
    let shared = &worker.shared;
    let router = &shared.router;
    let shard = |key: &[u8]| router.shard_of(&router.route_key(key));
    let keys = if matches!(plan.op, Op::XRead { .. } | Op::XReadGroup { .. }) {
        if read_streams(worker, &mut plan.op, out, txn).await {
            return None;
        }
        &[][..]
    } else {
        &plan.keys[..]
    };
    for key in keys {
        let owner = shared.owner_of(key);
        let replies = match &plan.op {
            Op::Move { dst, from, to } if shard(dst) != shard(key) => {
                let r = crate::multi::lmove_across(worker, key, dst, *from, *to, txn).await;
                if matches!(r.tokens(), [Token::Null]) {
                    continue;
                }
                r
            }
            _ => cross::exec_at(worker, owner, TRY, plan.op.args(key), txn).await,
        };
        // Past the client's output limit a reply holds nothing: it still popped.
        if !replies.tokens().is_empty() || replies.overflowed() {
            replies.replay(out);
            return None;
        }
    }
    let Some(timeout) = plan.timeout.filter(|_| txn.is_none()) else {
        plan.op.nothing(out, txn.is_some());
        return None;
    };
    let (waiter, answer) = Waiter::new(client, plan.op, plan.keys);
    for owner in shared.blocked.register(&waiter, |key| shared.owner_of(key)) {
        if owner == worker.index {
            worker.serve_ready();
        } else {
            let _ = shared.inboxes[owner].send(Job::Serve);
        }
    }
    Some(Wait {
        waiter,
        answer,
        timeout,
    })
}

/// `XREAD`/`XREADGROUP`: checks every key as Redis does (type, group, id; `$` resolved to
/// the stream's last id, in `op`), then reads each on its owner. True when it replied (an
/// error, or the streams that had entries, as one map); false when nothing was read (the
/// caller waits, or answers a null array).
async fn read_streams<R: Reply>(
    worker: &Worker,
    op: &mut Op,
    out: &mut R,
    txn: Option<&TxnLinks>,
) -> bool {
    let shared = &worker.shared;
    let word = Bytes::from_static;
    match op {
        Op::XRead { ids, .. } => {
            for (key, id) in ids.iter_mut() {
                let args = vec![word(b"xresolve"), key.clone(), id.clone()];
                let r = cross::exec_at(worker, shared.owner_of(key), TRY, args, txn).await;
                match r.tokens() {
                    [Token::Bulk(range)] => *id = Bytes::copy_from_slice(r.bytes(range)),
                    _ => {
                        r.replay(out);
                        return true;
                    }
                }
            }
        }
        Op::XReadGroup { group, ids, .. } => {
            for (key, id) in ids.iter() {
                let args = vec![word(b"xgroupcheck"), key.clone(), group.clone(), id.clone()];
                let r = cross::exec_at(worker, shared.owner_of(key), TRY, args, txn).await;
                if !r.tokens().is_empty() {
                    r.replay(out);
                    return true;
                }
            }
        }
        _ => return false,
    }
    let steps: Vec<(Bytes, Vec<Bytes>)> = match &*op {
        Op::XRead { ids, count } => ids
            .iter()
            .map(|(key, id)| {
                let n = Bytes::from(count.to_string());
                let args = vec![word(b"xread"), key.clone(), id.clone(), n, Bytes::new()];
                (key.clone(), args)
            })
            .collect(),
        Op::XReadGroup {
            group,
            consumer,
            count,
            no_ack,
            ids,
        } => ids
            .iter()
            .map(|(key, id)| {
                let args = vec![
                    word(b"xreadgroup"),
                    key.clone(),
                    group.clone(),
                    consumer.clone(),
                    id.clone(),
                    Bytes::from(count.to_string()),
                    if *no_ack { word(b"1") } else { Bytes::new() },
                    Bytes::new(),
                ];
                (key.clone(), args)
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut parts = Vec::new();
    for (key, args) in steps {
        let r = cross::exec_at(worker, shared.owner_of(&key), TRY, args, txn).await;
        if r.error_text().is_some() {
            r.replay(out);
            return true;
        }
        if !r.tokens().is_empty() || r.overflowed() {
            parts.push(r);
        }
    }
    if parts.is_empty() {
        return false;
    }
    out.keyed_len(parts.len());
    for part in parts {
        part.replay(out);
    }
    true
}

/// How a wait ended.
pub(crate) enum Woken {
    /// The reply to send.
    Reply(Replies),
    /// The client's socket closed (or failed).
    Closed,
}

impl Wait {
    /// Waits for the reply, the timeout or `closed` (the connection's read side ending),
    /// and always leaves the waiter forgotten.
    pub(crate) async fn wait(mut self, worker: &Worker, closed: impl Future<Output = ()>) -> Woken {
        let shared = &worker.shared;
        let owner_of = |key: &[u8]| shared.owner_of(key);
        let sleep = async {
            match self.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let woken = tokio::select! {
            reply = &mut self.answer => match reply {
                Ok(replies) => Woken::Reply(replies),
                Err(_) => Woken::Closed,
            },
            () = sleep => {
                if self.waiter.claim() {
                    let mut out = Replies::new();
                    self.waiter.op().nothing(&mut out, false);
                    Woken::Reply(out)
                } else {
                    // Claimed by a serving owner an instant ago: its reply is on its way.
                    match (&mut self.answer).await {
                        Ok(replies) => Woken::Reply(replies),
                        Err(_) => Woken::Closed,
                    }
                }
            }
            () = closed => {
                // Nobody may serve it now; if an owner already has, the element is lost
                // with the connection, as with Redis when a client drops after its pop.
                self.waiter.claim();
                Woken::Closed
            }
        };
        shared.blocked.forget(&self.waiter, owner_of);
        woken
    }

    /// Forgets the waiter without waiting (the connection ended before it could wait).
    pub(crate) fn abandon(self, worker: &Worker) {
        self.waiter.claim();
        let shared = &worker.shared;
        shared
            .blocked
            .forget(&self.waiter, |key| shared.owner_of(key));
    }
}
