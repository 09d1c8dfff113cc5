//! Every connected client, for `CLIENT LIST`/`INFO`/`KILL`, the idle timeout, the output
//! limits and graceful shutdown.
//!
//! Ending a client from anywhere — `CLIENT KILL`, the sweeper (idle timeout, stalled output),
//! shutdown — records why and notifies its connection ([`Client::kill`]), which ends on its
//! own thread at a point between commands: a connection waits for its socket *or* that
//! notification whenever it would otherwise sleep (a read or a write that cannot go on), so
//! the notification is looked at only on the path that is about to sleep anyway, never while
//! requests are flowing. (The first design shut down a duplicate of each socket instead: two
//! descriptors per client, so 10,000 clients took 20,000 and met the descriptor limit.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use crate::OutputLimit;

/// Why a client was ended from outside its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Ended {
    Open = 0,
    Killed = 1,
    Idle = 2,
    Output = 3,
    Shutdown = 4,
}

/// Bits of [`Client::flags`], shown in `CLIENT LIST`'s `flags=` as Redis shows them.
pub(crate) mod flag {
    /// `O`: in `MONITOR` mode.
    pub(crate) const MONITOR: u32 = 1;
    /// `b` (with a blocking pop): waiting out a `CLIENT PAUSE`.
    pub(crate) const PAUSED: u32 = 1 << 1;
    /// `t`: `CLIENT TRACKING on`.
    pub(crate) const TRACKING: u32 = 1 << 2;
    /// `R`: its tracking redirection target is gone.
    pub(crate) const BROKEN_REDIR: u32 = 1 << 3;
    /// `B`: tracking in broadcast mode.
    pub(crate) const BCAST: u32 = 1 << 4;
    /// `e`: `CLIENT NO-EVICT on`.
    pub(crate) const NO_EVICT: u32 = 1 << 5;
    /// `T`: `CLIENT NO-TOUCH on`.
    pub(crate) const NO_TOUCH: u32 = 1 << 6;
}

/// One connected client.
pub(crate) struct Client {
    pub(crate) id: u64,
    pub(crate) addr: String,
    pub(crate) laddr: String,
    pub(crate) created_ms: u64,
    /// Coarse time of its last read ([`Clients::now_ms`]).
    pub(crate) active_ms: AtomicU64,
    /// When a write of at least the soft limit began waiting (0: none is).
    pub(crate) stalled_ms: AtomicU64,
    pub(crate) name: Mutex<Option<Bytes>>,
    /// The ACL user it is authenticated as (`CLIENT LIST`'s `user=`).
    pub(crate) user: Mutex<Arc<str>>,
    pub(crate) lib: Mutex<(String, String)>,
    pub(crate) resp: AtomicU8,
    pub(crate) in_multi: AtomicBool,
    /// The selected database (`SELECT`).
    pub(crate) db: std::sync::atomic::AtomicU32,
    /// Waiting in a blocking pop.
    pub(crate) blocked: AtomicBool,
    /// Channels, patterns and shard channels subscribed to.
    pub(crate) subs: AtomicU64,
    pub(crate) psubs: AtomicU64,
    pub(crate) ssubs: AtomicU64,
    pub(crate) ended: AtomicU8,
    /// [`flag`] bits.
    pub(crate) flags: AtomicU32,
    /// Where its invalidations go (`CLIENT TRACKING ... REDIRECT id`; -1 when not tracking).
    pub(crate) redir: AtomicI64,
    /// Set when its connection has ended (however it ended).
    pub(crate) closed: AtomicBool,
    /// Notified when the client is ended from outside (a permit waits for the connection
    /// when it is not waiting).
    pub(crate) kill: tokio::sync::Notify,
}

impl Client {
    /// Ends the client (its connection sees end-of-file or a failed write); the first reason
    /// given is kept.
    pub(crate) fn end(&self, why: Ended) {
        let _ = self.ended.compare_exchange(
            Ended::Open as u8,
            why as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        // Every waiter (the connection's loop, a command waiting out a `CLIENT PAUSE`), and a
        // permit for a connection not waiting now.
        self.kill.notify_waiters();
        self.kill.notify_one();
    }

    /// Stops reading the client's requests (shutdown: it finishes what it has, then ends).
    pub(crate) fn stop_reading(&self) {
        let _ = self.ended.compare_exchange(
            Ended::Open as u8,
            Ended::Shutdown as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.kill.notify_one();
    }

    /// Sets or clears [`flag`] bits.
    pub(crate) fn set_flag(&self, bit: u32, on: bool) {
        if on {
            self.flags.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// Whether it subscribes to a channel, pattern or shard channel (Redis's `pubsub` type).
    pub(crate) fn subscribed(&self) -> bool {
        self.subs.load(Ordering::Relaxed)
            + self.psubs.load(Ordering::Relaxed)
            + self.ssubs.load(Ordering::Relaxed)
            > 0
    }

    /// `CLIENT LIST`'s `flags=`, in Redis's order.
    fn flag_letters(&self) -> String {
        let bits = self.flags.load(Ordering::Relaxed);
        let mut text = String::new();
        if bits & flag::MONITOR != 0 {
            text.push('O');
        }
        if self.subscribed() {
            text.push('P');
        }
        if self.in_multi.load(Ordering::Relaxed) {
            text.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) || bits & flag::PAUSED != 0 {
            text.push('b');
        }
        for (bit, c) in [
            (flag::TRACKING, 't'),
            (flag::BROKEN_REDIR, 'R'),
            (flag::BCAST, 'B'),
            (flag::NO_EVICT, 'e'),
            (flag::NO_TOUCH, 'T'),
        ] {
            if bits & bit != 0 {
                text.push(c);
            }
        }
        if text.is_empty() {
            text.push('N');
        }
        text
    }

    pub(crate) fn set_name(&self, name: Option<Bytes>) {
        *self.name.lock().unwrap_or_else(PoisonError::into_inner) = name;
    }

    pub(crate) fn name(&self) -> Option<Bytes> {
        self.name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One `CLIENT LIST` line (Redis's field order; `now_ms` from [`Clients::now_ms`]).
    pub(crate) fn line(&self, now_ms: u64, cmd: &str) -> String {
        let name = self.name();
        let (lib_name, lib_ver) = self
            .lib
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let age = now_ms.saturating_sub(self.created_ms) / 1000;
        let idle = now_ms.saturating_sub(self.active_ms.load(Ordering::Relaxed)) / 1000;
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={age} idle={idle} flags={} db={} sub={} psub={} ssub={} multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={cmd} user={} redir={} resp={} lib-name={lib_name} lib-ver={lib_ver}\n",
            self.id,
            self.addr,
            self.laddr,
            name.as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default(),
            self.flag_letters(),
            self.db.load(Ordering::Relaxed),
            self.subs.load(Ordering::Relaxed),
            self.psubs.load(Ordering::Relaxed),
            self.ssubs.load(Ordering::Relaxed),
            self.user.lock().unwrap_or_else(PoisonError::into_inner),
            self.redir.load(Ordering::Relaxed),
            self.resp.load(Ordering::Relaxed),
        )
    }
}

/// The registry.
pub(crate) struct Clients {
    map: Mutex<HashMap<u64, Arc<Client>>>,
    /// Milliseconds since the server started, updated every 100 ms by the sweeper.
    now_ms: AtomicU64,
}

impl Clients {
    pub(crate) fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            now_ms: AtomicU64::new(0),
        }
    }

    /// The coarse clock (ms since start).
    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn tick(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Registers a connection.
    pub(crate) fn register(&self, id: u64, stream: &std::net::TcpStream) -> Arc<Client> {
        let addr = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let laddr = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let now = self.now_ms();
        let client = Arc::new(Client {
            id,
            addr,
            laddr,
            created_ms: now,
            active_ms: AtomicU64::new(now),
            stalled_ms: AtomicU64::new(0),
            name: Mutex::new(None),
            user: Mutex::new(Arc::from("default")),
            lib: Mutex::new((String::new(), String::new())),
            resp: AtomicU8::new(2),
            in_multi: AtomicBool::new(false),
            db: std::sync::atomic::AtomicU32::new(0),
            blocked: AtomicBool::new(false),
            subs: AtomicU64::new(0),
            psubs: AtomicU64::new(0),
            ssubs: AtomicU64::new(0),
            ended: AtomicU8::new(Ended::Open as u8),
            flags: AtomicU32::new(0),
            redir: AtomicI64::new(-1),
            closed: AtomicBool::new(false),
            kill: tokio::sync::Notify::new(),
        });
        self.lock().insert(id, Arc::clone(&client));
        client
    }

    /// Client `id`, when connected.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<Client>> {
        self.lock().get(&id).cloned()
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Client>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every client, by id.
    pub(crate) fn all(&self) -> Vec<Arc<Client>> {
        let mut all: Vec<Arc<Client>> = self.lock().values().cloned().collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// Ends idle clients (`timeout_s` > 0) and clients whose output has waited too long.
    pub(crate) fn sweep(&self, timeout_s: u64, output: OutputLimit) {
        let now = self.now_ms();
        for client in self.lock().values() {
            if timeout_s > 0
                && !client.in_multi.load(Ordering::Relaxed)
                && now.saturating_sub(client.active_ms.load(Ordering::Relaxed)) > timeout_s * 1000
            {
                client.end(Ended::Idle);
            }
            let stalled = client.stalled_ms.load(Ordering::Relaxed);
            if output.seconds > 0
                && stalled > 0
                && now.saturating_sub(stalled) > output.seconds * 1000
            {
                client.end(Ended::Output);
            }
        }
    }
}

/// Redis's client types (`CLIENT LIST TYPE`, `CLIENT KILL TYPE`): replication links are not
/// clients here (`CLIENT KILL TYPE master|replica` cuts them: see `repl`), so every client
/// is `normal` or, while it subscribes, `pubsub`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientType {
    Normal,
    Master,
    Replica,
    PubSub,
}

impl ClientType {
    /// Parses a type name; Redis's error otherwise.
    pub(crate) fn parse(name: &[u8]) -> Result<Self, String> {
        match name.to_ascii_lowercase().as_slice() {
            b"normal" => Ok(Self::Normal),
            b"master" => Ok(Self::Master),
            b"replica" | b"slave" => Ok(Self::Replica),
            b"pubsub" => Ok(Self::PubSub),
            _ => Err(format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(name)
            )),
        }
    }

    /// The type of `client` (a monitor shows as normal, as in Redis).
    pub(crate) fn of(client: &Client) -> Self {
        if client.subscribed() {
            Self::PubSub
        } else {
            Self::Normal
        }
    }
}

/// Filters of `CLIENT KILL` (new form: pairs), all of which must match.
#[derive(Debug, Default)]
pub(crate) struct KillFilter {
    pub(crate) id: Option<u64>,
    pub(crate) addr: Option<String>,
    pub(crate) laddr: Option<String>,
    pub(crate) kind: Option<ClientType>,
    /// Only clients connected for more than this many seconds.
    pub(crate) max_age: Option<u64>,
    pub(crate) skipme: bool,
}

impl KillFilter {
    /// Parses `CLIENT KILL` arguments after `KILL`: one address (old form) or pairs.
    pub(crate) fn parse(args: &[Bytes]) -> Result<(Self, bool), String> {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        if args.len() == 1 {
            return Ok((
                Self {
                    addr: Some(text(&args[0])),
                    ..Self::default()
                },
                true,
            ));
        }
        let syntax = || "ERR syntax error".to_string();
        if !args.len().is_multiple_of(2) {
            return Err(syntax());
        }
        let mut filter = Self {
            skipme: true,
            ..Self::default()
        };
        for pair in args.chunks(2) {
            let value = text(&pair[1]);
            match pair[0].to_ascii_lowercase().as_slice() {
                b"id" => {
                    filter.id = Some(
                        value
                            .parse()
                            .ok()
                            .filter(|&id| id > 0)
                            .ok_or("ERR client-id should be greater than 0")?,
                    );
                }
                b"addr" => filter.addr = Some(value),
                b"laddr" => filter.laddr = Some(value),
                b"type" => filter.kind = Some(ClientType::parse(&pair[1])?),
                // The one user there is.
                b"user" if value == "default" => {}
                b"user" => return Err(format!("ERR No such user '{value}'")),
                b"maxage" => {
                    filter.max_age = Some(
                        fc_resp::number::parse_i64(&pair[1])
                            .filter(|&n| n >= 0)
                            .ok_or_else(syntax)? as u64,
                    );
                }
                b"skipme" => {
                    filter.skipme = match value.to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        _ => return Err(syntax()),
                    };
                }
                _ => return Err(syntax()),
            }
        }
        Ok((filter, false))
    }

    /// Whether `client` matches (`me`: the caller's id; `now_ms`: [`Clients::now_ms`]).
    pub(crate) fn matches(&self, client: &Client, me: u64, now_ms: u64) -> bool {
        (!self.skipme || client.id != me)
            && self.id.is_none_or(|id| id == client.id)
            && self.addr.as_ref().is_none_or(|a| *a == client.addr)
            && self.laddr.as_ref().is_none_or(|a| *a == client.laddr)
            && self.kind.is_none_or(|k| k == ClientType::of(client))
            && self
                .max_age
                .is_none_or(|age| age == 0 || now_ms.saturating_sub(client.created_ms) / 1000 > age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_filters_parse_both_forms() {
        let b = |s: &str| Bytes::from(s.to_string());
        let (old, old_form) = KillFilter::parse(&[b("127.0.0.1:5000")]).unwrap();
        assert!(old_form);
        assert_eq!(old.addr.as_deref(), Some("127.0.0.1:5000"));
        let (new, old_form) = KillFilter::parse(&[b("ID"), b("7"), b("skipme"), b("no")]).unwrap();
        assert!(!old_form);
        assert_eq!(new.id, Some(7));
        assert!(!new.skipme);
        assert!(KillFilter::parse(&[b("id"), b("x")]).is_err());
        assert!(KillFilter::parse(&[b("id"), b("1"), b("bogus")]).is_err());
        assert!(KillFilter::parse(&[b("flavour"), b("1")]).is_err());
    }
}
