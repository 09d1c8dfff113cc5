//! Cross-worker execution: running a store command where its keys live, fanning a multi-key
//! or all-worker command out and merging the parts' typed replies, holding several workers
//! for an atomic step (`EXEC`, `MSETNX`), and `WATCH`'s probes.
//!
//! Every part comes back as [`Replies`] (typed tokens): merging reads integers and values
//! from them and writes the result into the connection's sink, never re-parsing protocol
//! bytes.

use std::collections::BTreeSet;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::command::{self, Handler, Merge, Route, Spec};
use crate::reply::{Replies, Reply, Token};
use crate::shared::{Job, TxnCommand};
use crate::worker::{Worker, shutting_down};

/// The held workers of a running transaction: a command channel per worker other than this
/// one (`None` where not involved).
pub(crate) type TxnLinks = Vec<Option<mpsc::UnboundedSender<TxnCommand>>>;

/// Runs `handler` on `owner`: normally (waiting out other transactions), or as part of this
/// connection's transaction on a worker it holds.
pub(crate) async fn exec_at(
    worker: &Worker,
    owner: usize,
    handler: Handler,
    args: Vec<Bytes>,
    txn: Option<&TxnLinks>,
) -> Replies {
    let Some(links) = txn else {
        return worker.execute_on(owner, handler, args).await;
    };
    if owner == worker.index {
        let origin = crate::tracking::origin();
        return crate::tracking::with_writer(origin, || worker.execute_typed(handler, &args));
    }
    let Some(link) = &links[owner] else {
        return worker.execute_on(owner, handler, args).await;
    };
    let (reply, answer) = oneshot::channel();
    crate::stats::hop();
    if link
        .send(TxnCommand {
            handler,
            args,
            reply,
            origin: crate::tracking::origin(),
        })
        .is_ok()
        && let Ok(replies) = answer.await
    {
        return replies;
    }
    shutting_down()
}

/// Runs a command of a store route (anything but [`Route::Session`]) where its keys live and
/// writes the (merged) reply into `out`.
pub(crate) async fn run_store<R: Reply>(
    worker: &Worker,
    spec: &'static Spec,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let shared = &worker.shared;
    match spec.route {
        Route::Session(_) | Route::Pop(_) | Route::Multi { .. } => {
            unreachable!("session, pop and multi-key commands run on the connection")
        }
        Route::Key(handler) => {
            let owner = shared.owner_of(&args[1]);
            exec_at(worker, owner, handler, args, txn).await.replay(out);
        }
        Route::SubKey(handler) => {
            let owner = args.get(2).map_or(worker.index, |k| shared.owner_of(k));
            exec_at(worker, owner, handler, args, txn).await.replay(out);
        }
        Route::Cursor(handler) => {
            let owner = std::str::from_utf8(&args[1])
                .ok()
                .and_then(|c| c.parse::<u64>().ok())
                .map_or(worker.index, |c| ((c >> 32) as usize) % shared.workers);
            exec_at(worker, owner, handler, args, txn).await.replay(out);
        }
        Route::Atomic { step, part } => {
            if !(args.len() - 1).is_multiple_of(step) {
                return command::wrong_arity(&args[0], out);
            }
            let owners: BTreeSet<usize> = args[1..]
                .chunks(step)
                .map(|keys| shared.owner_of(&keys[0]))
                .collect();
            if owners.len() > 1 {
                return msetnx_across(worker, &owners, args, out, txn).await;
            }
            let owner = owners.first().copied().unwrap_or(worker.index);
            // Several keys of one worker: one transaction of the mutation stream (a write of
            // the log to the OS by another worker must not split it).
            let replies = match txn {
                None if args.len() - 1 > step => {
                    held(worker, &owners, async |links| {
                        exec_at(worker, owner, part, args, Some(links)).await
                    })
                    .await
                }
                _ => exec_at(worker, owner, part, args, txn).await,
            };
            replies.replay(out);
        }
        Route::PerKey { step, merge, part } => {
            if !(args.len() - 1).is_multiple_of(step) {
                return command::wrong_arity(&args[0], out);
            }
            // A write of several keys (MSET, DEL) holds their workers, as one transaction,
            // unless one already does: atomic as on one shard, to other clients and in the log
            // (even on one worker, another worker's write of the log must not split it).
            let parts = match txn {
                None if spec.write() && args.len() - 1 > step => {
                    let owners: BTreeSet<usize> = args[1..]
                        .chunks(step)
                        .map(|keys| shared.owner_of(&keys[0]))
                        .collect();
                    held(worker, &owners, async |links| {
                        per_key(worker, &args, step, part, Some(links)).await
                    })
                    .await
                }
                _ => per_key(worker, &args, step, part, txn).await,
            };
            merge_parts(&parts, merge, out);
        }
        Route::AllWorkers { merge, part } => {
            // A write of every worker (FLUSHALL, FLUSHDB) is one transaction, as on one shard.
            match txn {
                None if spec.write() && shared.workers > 1 => {
                    let owners: BTreeSet<usize> = (0..shared.workers).collect();
                    held(worker, &owners, async |links| {
                        all_workers(worker, part, merge, args, out, Some(links)).await;
                    })
                    .await;
                }
                _ => all_workers(worker, part, merge, args, out, txn).await,
            }
        }
    }
}

/// Runs `part` on every worker in turn and merges their replies into `out`.
pub(crate) async fn all_workers<R: Reply>(
    worker: &Worker,
    part: Handler,
    merge: Merge,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let workers = worker.shared.workers;
    let mut parts = Vec::with_capacity(workers);
    for owner in 0..workers {
        parts.push(exec_at(worker, owner, part, args.clone(), txn).await);
    }
    merge_parts(&parts, merge, out);
}

/// Runs `part` on every worker as one transaction (holding them all, unless this connection's
/// transaction already does): a write of the whole keyspace (`SWAPDB`).
pub(crate) async fn all_workers_held(
    worker: &Worker,
    part: Handler,
    args: Vec<Bytes>,
    txn: Option<&TxnLinks>,
) {
    let mut sink = Replies::new();
    match txn {
        None if worker.shared.workers > 1 => {
            let owners: BTreeSet<usize> = (0..worker.shared.workers).collect();
            held(worker, &owners, async |links| {
                all_workers(worker, part, Merge::Ok, args, &mut sink, Some(links)).await;
            })
            .await;
        }
        _ => all_workers(worker, part, Merge::Ok, args, &mut sink, txn).await,
    }
}

/// Runs a per-key command's parts, one per `step` arguments, each on its key's owner.
async fn per_key(
    worker: &Worker,
    args: &[Bytes],
    step: usize,
    part: Handler,
    txn: Option<&TxnLinks>,
) -> Vec<Replies> {
    let mut parts = Vec::with_capacity((args.len() - 1) / step);
    for chunk in args[1..].chunks(step) {
        let mut sub = Vec::with_capacity(step + 1);
        sub.push(args[0].clone());
        sub.extend(chunk.iter().cloned());
        let owner = worker.shared.owner_of(&chunk[0]);
        parts.push(exec_at(worker, owner, part, sub, txn).await);
    }
    parts
}

/// Holds `owners` ([`Held`]) for `run`, which gets the links of the transaction, then
/// releases them.
async fn held<T>(
    worker: &Worker,
    owners: &BTreeSet<usize>,
    run: impl AsyncFnOnce(&TxnLinks) -> T,
) -> T {
    let held = Held::take(worker, owners).await;
    let result = run(&held.links).await;
    held.release(worker);
    result
}

/// The workers a queued command touches.
pub(crate) fn workers_of(worker: &Worker, spec: &Spec, args: &[Bytes], into: &mut BTreeSet<usize>) {
    let shared = &worker.shared;
    match spec.route {
        // INFO and CONFIG read or set every worker's shards: a transaction holds them all.
        Route::Session(command::Session::Info | command::Session::Config) => {
            into.extend(0..shared.workers);
        }
        // A script's declared keys (`EVAL body numkeys key ...`).
        Route::Session(command::Session::Script(
            command::Sc::Eval
            | command::Sc::EvalRo
            | command::Sc::EvalSha
            | command::Sc::EvalShaRo
            | command::Sc::Fcall
            | command::Sc::FcallRo,
        )) => {
            let n = args
                .get(2)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            into.extend(args.iter().skip(3).take(n).map(|k| shared.owner_of(k)));
        }
        Route::Session(_) => {}
        Route::Key(_) | Route::PerKey { .. } | Route::Atomic { .. } => {
            into.extend(
                spec.key_positions(args.len())
                    .map(|i| shared.owner_of(&args[i])),
            );
        }
        Route::AllWorkers { .. } | Route::Cursor(_) => into.extend(0..shared.workers),
        Route::SubKey(_) => into.extend(args.get(2).map(|k| shared.owner_of(k))),
        Route::Multi { .. } => into.extend(
            spec.spec_keys(args)
                .unwrap_or_default()
                .into_iter()
                .map(|(i, _)| shared.owner_of(&args[i])),
        ),
        Route::Pop(kind) => into.extend(
            command::pops::keys_of(kind, args)
                .iter()
                .map(|k| shared.owner_of(k)),
        ),
    }
}

/// Workers held for a transaction (or another atomic multi-worker command): nothing else
/// runs on their shards until [`Held::release`], and what it changes on them is one
/// transaction of the mutation stream ([`crate::txn`]).
pub(crate) struct Held {
    pub(crate) links: TxnLinks,
    self_locked: bool,
    involved: BTreeSet<usize>,
    txn: u64,
}

impl Held {
    /// Holds every worker in `involved`, in ascending order (so two holders never wait on
    /// each other in a cycle), and opens their transaction.
    pub(crate) async fn take(worker: &Worker, involved: &BTreeSet<usize>) -> Self {
        let shared = &worker.shared;
        let mut held = Self {
            links: (0..shared.workers).map(|_| None).collect(),
            self_locked: false,
            involved: involved.clone(),
            txn: 0,
        };
        for &w in involved {
            if w == worker.index {
                worker.lock().await;
                held.self_locked = true;
                continue;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let (ack, acked) = oneshot::channel();
            let job = Job::Hold { ack, commands: rx };
            crate::stats::hop();
            if shared.inboxes[w].send(job).is_ok() && acked.await.is_ok() {
                held.links[w] = Some(tx);
            }
        }
        held.txn = shared.sink.begin(&held.involved);
        held
    }

    /// Ends the transaction's groups in the mutation stream, then releases the workers.
    pub(crate) fn release(self, worker: &Worker) {
        worker.shared.sink.finish(self.txn, &self.involved);
        drop(self.links);
        if self.self_locked {
            worker.unlock();
        }
    }
}

/// Touches `key` on its owner (reclaiming it if it expired) and returns whether it exists.
pub(crate) async fn touch(worker: &Worker, key: &Bytes, txn: Option<&TxnLinks>) -> bool {
    let probe = vec![Bytes::from_static(b"exists"), key.clone()];
    let owner = worker.shared.owner_of(key);
    exec_at(worker, owner, command::EXISTS_ONE, probe, txn)
        .await
        .integer_value()
        .unwrap_or(0)
        > 0
}

/// `MSETNX` over keys of several workers: holds them all (unless a transaction already does),
/// checks that no key exists, then sets every pair — nothing else runs on those workers in
/// between, so it is as atomic as on one shard.
async fn msetnx_across<R: Reply>(
    worker: &Worker,
    owners: &BTreeSet<usize>,
    args: Vec<Bytes>,
    out: &mut R,
    txn: Option<&TxnLinks>,
) {
    let outcome = async |links: &TxnLinks| msetnx_held(worker, &args, links).await;
    let outcome = match txn {
        Some(links) => outcome(links).await,
        None => held(worker, owners, outcome).await,
    };
    match outcome {
        Err(err) => err.replay(out),
        Ok(set) => out.integer(i64::from(set)),
    }
}

/// [`msetnx_across`] on held workers: whether it set the pairs, or the error a set gave.
async fn msetnx_held(worker: &Worker, args: &[Bytes], links: &TxnLinks) -> Result<bool, Replies> {
    let shared = &worker.shared;
    let links = Some(links);
    for pair in args[1..].chunks(2) {
        if touch(worker, &pair[0], links).await {
            return Ok(false);
        }
    }
    for pair in args[1..].chunks(2) {
        let sub = vec![args[0].clone(), pair[0].clone(), pair[1].clone()];
        let owner = shared.owner_of(&pair[0]);
        let part = exec_at(worker, owner, command::MSET_ONE, sub, links).await;
        if part.error_text().is_some() {
            return Err(part);
        }
    }
    Ok(true)
}

/// Merges the typed replies of a fanned-out command's parts into one reply.
pub(crate) fn merge_parts<R: Reply>(parts: &[Replies], merge: Merge, out: &mut R) {
    if parts.iter().any(Replies::overflowed) {
        // A part went past the client's output limit: so does the whole.
        return out.overflow();
    }
    if merge != Merge::Array
        && let Some(err) = parts.iter().find(|p| p.error_text().is_some())
    {
        return err.replay(out);
    }
    match merge {
        Merge::Array => {
            out.array_len(parts.len());
            parts.iter().for_each(|p| p.replay(out));
        }
        Merge::Sum => out.integer(parts.iter().filter_map(Replies::integer_value).sum()),
        Merge::Ok => out.ok(),
        Merge::Digest => {
            let sum = parts
                .iter()
                .filter_map(Replies::integer_value)
                .fold(0u64, |sum, d| sum.wrapping_add(d as u64));
            out.simple(format!("{sum:016x}").as_bytes());
        }
        Merge::Random => {
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as usize)
                % parts.len().max(1);
            let found = (0..parts.len())
                .map(|k| &parts[(start + k) % parts.len()])
                .find(|p| matches!(p.tokens().first(), Some(Token::Bulk(_))));
            match found {
                Some(p) => p.replay(out),
                None => out.null(),
            }
        }
        Merge::Concat => {
            let total = parts
                .iter()
                .map(|p| match p.tokens().first() {
                    Some(Token::Array(n)) => *n,
                    _ => 0,
                })
                .sum();
            out.array_len(total);
            for p in parts {
                if let Some((Token::Array(_), items)) = p.tokens().split_first() {
                    p.replay_tokens(items, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_parts;
    use crate::command::Merge;
    use crate::reply::{Replies, Reply, Resp};

    fn ints(values: &[i64]) -> Vec<Replies> {
        values
            .iter()
            .map(|&v| {
                let mut r = Replies::new();
                r.integer(v);
                r
            })
            .collect()
    }

    #[test]
    fn merges_read_typed_parts() {
        let mut out = Resp::new(0);
        merge_parts(&ints(&[1, 2, 3]), Merge::Sum, &mut out);
        assert_eq!(&out.buf[..], b":6\r\n");
        let mut out = Resp::new(0);
        merge_parts(&ints(&[1, 2]), Merge::Array, &mut out);
        assert_eq!(&out.buf[..], b"*2\r\n:1\r\n:2\r\n");
        let mut a = Replies::new();
        a.array_len(1);
        a.bulk(b"x");
        let mut b = Replies::new();
        b.array_len(2);
        b.bulk(b"y");
        b.bulk(b"z");
        let mut out = Resp::new(0);
        merge_parts(&[a, Replies::new(), b], Merge::Concat, &mut out);
        assert_eq!(&out.buf[..], b"*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n");
        let mut err = Replies::new();
        err.error(b"OOM no");
        let mut out = Resp::new(0);
        merge_parts(&[ints(&[1]).remove(0), err], Merge::Ok, &mut out);
        assert_eq!(&out.buf[..], b"-OOM no\r\n");
    }
}
