//! Pub/Sub: the server-wide registry of channel, pattern and shard-channel subscriptions
//! ([`PubSub`]), each connection's side of it ([`Subscriptions`]), and the commands
//! (`SUBSCRIBE`, `UNSUBSCRIBE`, `PSUBSCRIBE`, `PUNSUBSCRIBE`, `SSUBSCRIBE`, `SUNSUBSCRIBE`,
//! `PUBLISH`, `SPUBLISH`, `PUBSUB ...`).
//!
//! A publisher on any worker looks its channel up in the registry (a read lock) and sends the
//! message, shared behind an `Arc`, into each subscriber's queue (a tokio channel, so a
//! subscriber on another worker is woken on its own thread); the subscriber's connection
//! encodes it in its own protocol (a RESP2 array, a RESP3 push) when it next sleeps on its
//! socket. A subscriber's queued bytes are counted: past the `pubsub` class of
//! `client-output-buffer-limit` (Redis's default `32mb 8mb 60`: past 32 MiB at once, or past
//! 8 MiB for 60 seconds straight) the subscriber is disconnected and gets nothing more, so a
//! slow subscriber never grows memory without bound. Shard channels are ordinary channels in
//! their own namespace (fc-server is one node: no slot checks).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use fc_resp::RespVersion;
use fc_shard::GlobPattern;
use tokio::sync::mpsc;

use crate::OutputLimit;
use crate::clients::{Client, Ended};
use crate::command::{self, Ps};
use crate::reply::{Reply, Resp};

/// What a subscriber receives.
#[derive(Debug)]
pub(crate) struct Message {
    kind: Kind,
    /// The pattern that matched (`pmessage` only).
    pattern: Bytes,
    channel: Bytes,
    payload: Bytes,
    /// The keys of an invalidation (`None`: every key, after a flush).
    keys: Option<Vec<Bytes>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    PMessage,
    SMessage,
    /// A `MONITOR` line (the payload, without its `+` and line end).
    Monitor,
    /// A client-side caching invalidation ([`crate::tracking`]): a RESP3 push
    /// `invalidate [keys]`, or for a RESP2 redirection target a message on
    /// `__redis__:invalidate`.
    Invalidate,
    /// A tracking client's redirection target is gone (RESP3 push
    /// `tracking-redir-broken <id>`; the payload is the id).
    RedirBroken,
}

impl Message {
    /// Bytes charged to a subscriber's queue for it (what it encodes to, roughly).
    fn cost(&self) -> u64 {
        let keys: usize = self.keys.iter().flatten().map(|k| k.len() + 16).sum();
        (self.pattern.len() + self.channel.len() + self.payload.len() + keys + 48) as u64
    }

    /// An invalidation of `keys` (`None`: of every key).
    pub(crate) fn invalidate(keys: Option<Vec<Bytes>>) -> Self {
        Self {
            kind: Kind::Invalidate,
            pattern: Bytes::new(),
            channel: Bytes::new(),
            payload: Bytes::new(),
            keys,
        }
    }

    /// `tracking-redir-broken <id>`.
    pub(crate) fn redirect_broken(id: u64) -> Self {
        Self {
            kind: Kind::RedirBroken,
            pattern: Bytes::new(),
            channel: Bytes::new(),
            payload: Bytes::from(id.to_string()),
            keys: None,
        }
    }

    /// Writes it as Redis does: `message`/`smessage` channel payload, or `pmessage` pattern
    /// channel payload; an array in RESP2, a push in RESP3.
    pub(crate) fn write(&self, out: &mut Resp) {
        match self.kind {
            // A status line in both protocols, as Redis sends it.
            Kind::Monitor => return out.simple(&self.payload),
            Kind::Invalidate => {
                if out.version() == RespVersion::Resp3 {
                    out.push_len(2);
                    out.bulk(b"invalidate");
                } else {
                    out.push_len(3);
                    out.bulk(b"message");
                    out.bulk(b"__redis__:invalidate");
                }
                match &self.keys {
                    Some(keys) => {
                        out.array_len(keys.len());
                        keys.iter().for_each(|k| out.bulk(k));
                    }
                    None => out.null(),
                }
                return;
            }
            Kind::RedirBroken => {
                out.push_len(2);
                out.bulk(b"tracking-redir-broken");
                out.integer(
                    std::str::from_utf8(&self.payload)
                        .ok()
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0),
                );
                return;
            }
            Kind::PMessage => {
                out.push_len(4);
                out.bulk(b"pmessage");
                out.bulk(&self.pattern);
            }
            Kind::Message => {
                out.push_len(3);
                out.bulk(b"message");
            }
            Kind::SMessage => {
                out.push_len(3);
                out.bulk(b"smessage");
            }
        }
        out.bulk(&self.channel);
        out.bulk(&self.payload);
    }
}

/// One subscribed client, as the registry holds it.
pub(crate) struct Subscriber {
    client: Arc<Client>,
    tx: mpsc::UnboundedSender<Arc<Message>>,
    /// Bytes sent and not yet taken by the connection.
    queued: AtomicU64,
    /// Since when (registry clock, ms) `queued` has been past the soft limit (0: it is not).
    soft_since: AtomicU64,
}

impl Subscriber {
    /// Queues `message` unless the subscriber is ended or goes past its limit now (then it
    /// is ended); whether it was queued.
    pub(crate) fn deliver(&self, message: &Arc<Message>, limit: OutputLimit, now_ms: u64) -> bool {
        if self.client.ended.load(Ordering::Relaxed) != Ended::Open as u8 {
            return false;
        }
        let queued = self.queued.fetch_add(message.cost(), Ordering::Relaxed) + message.cost();
        if limit.hard > 0 && queued > limit.hard {
            tracing::debug!(
                "client id={} closed: pubsub output over its hard limit",
                self.client.id
            );
            self.client.end(Ended::Output);
            return false;
        }
        if limit.soft > 0 && queued > limit.soft {
            let since = self.soft_since.load(Ordering::Relaxed);
            if since == 0 {
                self.soft_since.store(now_ms.max(1), Ordering::Relaxed);
            } else if limit.seconds > 0 && now_ms.saturating_sub(since) > limit.seconds * 1000 {
                self.client.end(Ended::Output);
                return false;
            }
        } else {
            self.soft_since.store(0, Ordering::Relaxed);
        }
        self.tx.send(Arc::clone(message)).is_ok()
    }
}

/// Subscribers of each channel (or shard channel), by client id.
type ChannelMap = HashMap<Bytes, HashMap<u64, Arc<Subscriber>>>;

/// One pattern's subscribers.
struct PatternSubs {
    glob: GlobPattern,
    subs: HashMap<u64, Arc<Subscriber>>,
}

/// The server's subscriptions.
pub(crate) struct PubSub {
    channels: RwLock<ChannelMap>,
    shard_channels: RwLock<ChannelMap>,
    patterns: RwLock<HashMap<Bytes, PatternSubs>>,
    /// Clients in `MONITOR` mode, by id (their lines share the subscription queue).
    monitors: RwLock<HashMap<u64, Arc<Subscriber>>>,
    /// How many there are: the one relaxed load a command pays when there are none.
    monitor_count: AtomicUsize,
    /// Every connection's queue that exists (created by its first subscribe, `MONITOR` or
    /// `CLIENT TRACKING`), by client id: where tracking redirects invalidations to.
    queues: RwLock<HashMap<u64, Arc<Subscriber>>>,
    /// The `pubsub` class of `client-output-buffer-limit`.
    hard: AtomicU64,
    soft: AtomicU64,
    seconds: AtomicU64,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl PubSub {
    pub(crate) fn new(limit: OutputLimit) -> Self {
        let pubsub = Self {
            channels: RwLock::default(),
            shard_channels: RwLock::default(),
            patterns: RwLock::default(),
            monitors: RwLock::default(),
            monitor_count: AtomicUsize::new(0),
            queues: RwLock::default(),
            hard: AtomicU64::new(0),
            soft: AtomicU64::new(0),
            seconds: AtomicU64::new(0),
        };
        pubsub.set_limit(limit);
        pubsub
    }

    pub(crate) fn limit(&self) -> OutputLimit {
        OutputLimit {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            seconds: self.seconds.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn set_limit(&self, limit: OutputLimit) {
        self.hard.store(limit.hard, Ordering::Relaxed);
        self.soft.store(limit.soft, Ordering::Relaxed);
        self.seconds.store(limit.seconds, Ordering::Relaxed);
    }

    /// Sends `payload` to the subscribers of `channel` (and, unless `shard`, of every
    /// matching pattern); returns how many received it.
    pub(crate) fn publish(
        &self,
        channel: &Bytes,
        payload: &Bytes,
        shard: bool,
        now_ms: u64,
    ) -> usize {
        let limit = self.limit();
        let mut received = 0;
        let map = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        if let Some(subs) = read(map).get(channel) {
            let message = Arc::new(Message {
                kind: if shard { Kind::SMessage } else { Kind::Message },
                pattern: Bytes::new(),
                channel: channel.clone(),
                payload: payload.clone(),
                keys: None,
            });
            received += subs
                .values()
                .filter(|s| s.deliver(&message, limit, now_ms))
                .count();
        }
        if !shard {
            for (pattern, subs) in read(&self.patterns).iter() {
                if subs.glob.matches(channel) {
                    let message = Arc::new(Message {
                        kind: Kind::PMessage,
                        pattern: pattern.clone(),
                        channel: channel.clone(),
                        payload: payload.clone(),
                        keys: None,
                    });
                    received += subs
                        .subs
                        .values()
                        .filter(|s| s.deliver(&message, limit, now_ms))
                        .count();
                }
            }
        }
        received
    }

    /// Client `id`'s queue, when it has one.
    pub(crate) fn queue_of(&self, id: u64) -> Option<Arc<Subscriber>> {
        read(&self.queues).get(&id).cloned()
    }

    /// Whether a client is in `MONITOR` mode.
    #[inline]
    pub(crate) fn monitoring(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) > 0
    }

    /// Sends a `MONITOR` line (without its `+` and line end) to every monitor, each under the
    /// `pubsub` output limit: a monitor that does not read is ended, not buffered for.
    pub(crate) fn feed_monitors(&self, line: Bytes, now_ms: u64) {
        let limit = self.limit();
        let message = Arc::new(Message {
            kind: Kind::Monitor,
            pattern: Bytes::new(),
            channel: Bytes::new(),
            payload: line,
            keys: None,
        });
        for monitor in read(&self.monitors).values() {
            monitor.deliver(&message, limit, now_ms);
        }
    }

    /// The channels, patterns and shard channels subscribed to.
    /// Every subscription: (client id, channel or pattern, whether a pattern).
    pub(crate) fn subscriptions(&self) -> Vec<(u64, Bytes, bool)> {
        let mut out = Vec::new();
        for map in [&self.channels, &self.shard_channels] {
            let map = map
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (channel, subs) in map.iter() {
                out.extend(subs.keys().map(|&id| (id, channel.clone(), false)));
            }
        }
        let patterns = self
            .patterns
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (pattern, p) in patterns.iter() {
            out.extend(p.subs.keys().map(|&id| (id, pattern.clone(), true)));
        }
        out
    }

    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (
            read(&self.channels).len(),
            read(&self.patterns).len(),
            read(&self.shard_channels).len(),
        )
    }
}

/// A connection's subscriptions: its queue and what it subscribes to.
pub(crate) struct Subscriptions {
    me: Arc<Subscriber>,
    rx: mpsc::UnboundedReceiver<Arc<Message>>,
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
    shard: HashSet<Bytes>,
}

impl Subscriptions {
    pub(crate) fn new(client: &Arc<Client>, registry: &PubSub) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let me = Arc::new(Subscriber {
            client: Arc::clone(client),
            tx,
            queued: AtomicU64::new(0),
            soft_since: AtomicU64::new(0),
        });
        write(&registry.queues).insert(client.id, Arc::clone(&me));
        Self {
            me,
            rx,
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard: HashSet::new(),
        }
    }

    /// Channels and patterns (the count `SUBSCRIBE` and `PSUBSCRIBE` reply).
    fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Its queue, as the registry holds it.
    pub(crate) fn subscriber(&self) -> &Arc<Subscriber> {
        &self.me
    }

    /// Leaves everything and forgets the queue (the connection ends).
    pub(crate) fn close(&mut self, registry: &PubSub) {
        self.leave_all(registry);
        write(&registry.queues).remove(&self.me.client.id);
    }

    /// Whether it subscribes to anything (RESP2 then allows only the subscription commands).
    pub(crate) fn active(&self) -> bool {
        self.count() + self.shard.len() > 0
    }

    /// Waits for the next message.
    pub(crate) async fn next(&mut self) -> Option<Arc<Message>> {
        self.rx.recv().await
    }

    /// Writes `first` and every other message already queued into `out`.
    pub(crate) fn write_pending(&mut self, first: &Message, out: &mut Resp) {
        self.me.queued.fetch_sub(first.cost(), Ordering::Relaxed);
        first.write(out);
        self.drain(out);
    }

    /// Writes every message already queued into `out` (before a command's reply, so that
    /// what was published before it, an `UNSUBSCRIBE` or `RESET` say, arrives before it).
    pub(crate) fn drain(&mut self, out: &mut Resp) {
        let mut taken = 0;
        while let Ok(message) = self.rx.try_recv() {
            taken += message.cost();
            message.write(out);
        }
        self.me.queued.fetch_sub(taken, Ordering::Relaxed);
    }

    /// Starts `MONITOR` mode: the client's queue receives every monitor line. `false` when it
    /// already was.
    pub(crate) fn monitor(&mut self, registry: &PubSub) -> bool {
        let mut monitors = write(&registry.monitors);
        let id = self.me.client.id;
        if monitors.contains_key(&id) {
            return false;
        }
        monitors.insert(id, Arc::clone(&self.me));
        registry
            .monitor_count
            .store(monitors.len(), Ordering::Relaxed);
        true
    }

    /// Leaves every subscription and `MONITOR` mode (the connection ends, `RESET`).
    pub(crate) fn leave_all(&mut self, registry: &PubSub) {
        let id = self.me.client.id;
        {
            let mut monitors = write(&registry.monitors);
            if monitors.remove(&id).is_some() {
                registry
                    .monitor_count
                    .store(monitors.len(), Ordering::Relaxed);
            }
        }
        for (set, map) in [
            (&mut self.channels, &registry.channels),
            (&mut self.shard, &registry.shard_channels),
        ] {
            let mut map = write(map);
            for channel in set.drain() {
                remove(&mut map, &channel, id);
            }
        }
        let mut patterns = write(&registry.patterns);
        for pattern in self.patterns.drain() {
            remove_pattern(&mut patterns, &pattern, id);
        }
        self.publish_counts();
    }

    /// `CLIENT LIST`'s `sub=`, `psub=`, `ssub=`.
    fn publish_counts(&self) {
        let client = &self.me.client;
        client
            .subs
            .store(self.channels.len() as u64, Ordering::Relaxed);
        client
            .psubs
            .store(self.patterns.len() as u64, Ordering::Relaxed);
        client
            .ssubs
            .store(self.shard.len() as u64, Ordering::Relaxed);
    }
}

fn remove(map: &mut ChannelMap, channel: &Bytes, id: u64) {
    if let Some(subs) = map.get_mut(channel) {
        subs.remove(&id);
        if subs.is_empty() {
            map.remove(channel);
        }
    }
}

fn remove_pattern(map: &mut HashMap<Bytes, PatternSubs>, pattern: &Bytes, id: u64) {
    if let Some(subs) = map.get_mut(pattern) {
        subs.subs.remove(&id);
        if subs.subs.is_empty() {
            map.remove(pattern);
        }
    }
}

/// One confirmation (`subscribe`, `unsubscribe`, ...): `[kind, name or nil, count]`.
fn confirm(out: &mut Resp, kind: &[u8], name: Option<&Bytes>, count: usize) {
    out.push_len(3);
    out.bulk(kind);
    match name {
        Some(name) => out.bulk(name),
        None => out.null(),
    }
    out.integer(count as i64);
}

/// Runs a pub/sub command for a connection (`subs`: its subscriptions, created on the first
/// subscribe).
pub(crate) fn run(
    ps: Ps,
    registry: &PubSub,
    subs: &mut Option<Subscriptions>,
    client: &Arc<Client>,
    now_ms: u64,
    args: &[Bytes],
    out: &mut Resp,
) {
    match ps {
        Ps::Publish | Ps::Spublish => {
            let n = registry.publish(&args[1], &args[2], ps == Ps::Spublish, now_ms);
            out.integer(n as i64);
        }
        Ps::Subscribe | Ps::Ssubscribe | Ps::Psubscribe => {
            let s = subs.get_or_insert_with(|| Subscriptions::new(client, registry));
            for name in &args[1..] {
                let id = client.id;
                let (kind, count): (&[u8], usize) = match ps {
                    Ps::Subscribe => {
                        if s.channels.insert(name.clone()) {
                            write(&registry.channels)
                                .entry(name.clone())
                                .or_default()
                                .insert(id, Arc::clone(&s.me));
                        }
                        (b"subscribe", s.count())
                    }
                    Ps::Ssubscribe => {
                        if s.shard.insert(name.clone()) {
                            write(&registry.shard_channels)
                                .entry(name.clone())
                                .or_default()
                                .insert(id, Arc::clone(&s.me));
                        }
                        (b"ssubscribe", s.shard.len())
                    }
                    _ => {
                        if s.patterns.insert(name.clone()) {
                            write(&registry.patterns)
                                .entry(name.clone())
                                .or_insert_with(|| PatternSubs {
                                    glob: GlobPattern::new(name, false),
                                    subs: HashMap::new(),
                                })
                                .subs
                                .insert(id, Arc::clone(&s.me));
                        }
                        (b"psubscribe", s.count())
                    }
                };
                confirm(out, kind, Some(name), count);
            }
            s.publish_counts();
        }
        Ps::Unsubscribe | Ps::Sunsubscribe | Ps::Punsubscribe => {
            let kind: &[u8] = match ps {
                Ps::Unsubscribe => b"unsubscribe",
                Ps::Sunsubscribe => b"sunsubscribe",
                _ => b"punsubscribe",
            };
            let count_of = |s: &Subscriptions| match ps {
                Ps::Sunsubscribe => s.shard.len(),
                _ => s.count(),
            };
            let Some(s) = subs.as_mut() else {
                // Never subscribed: each name (or none) is confirmed with a count of 0.
                if args.len() == 1 {
                    confirm(out, kind, None, 0);
                }
                for name in &args[1..] {
                    confirm(out, kind, Some(name), 0);
                }
                return;
            };
            let id = client.id;
            let names: Vec<Bytes> = if args.len() > 1 {
                args[1..].to_vec()
            } else {
                let set = match ps {
                    Ps::Unsubscribe => &s.channels,
                    Ps::Sunsubscribe => &s.shard,
                    _ => &s.patterns,
                };
                set.iter().cloned().collect()
            };
            if names.is_empty() {
                confirm(out, kind, None, count_of(s));
            }
            for name in &names {
                match ps {
                    Ps::Unsubscribe => {
                        if s.channels.remove(name) {
                            remove(&mut write(&registry.channels), name, id);
                        }
                    }
                    Ps::Sunsubscribe => {
                        if s.shard.remove(name) {
                            remove(&mut write(&registry.shard_channels), name, id);
                        }
                    }
                    _ => {
                        if s.patterns.remove(name) {
                            remove_pattern(&mut write(&registry.patterns), name, id);
                        }
                    }
                }
                confirm(out, kind, Some(name), count_of(s));
            }
            s.publish_counts();
        }
        Ps::Pubsub => pubsub(registry, args, out),
    }
}

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP`.
fn pubsub(registry: &PubSub, args: &[Bytes], out: &mut Resp) {
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"channels" | b"shardchannels", 2 | 3) => {
            let map = if sub == b"channels" {
                read(&registry.channels)
            } else {
                read(&registry.shard_channels)
            };
            let glob = args.get(2).map(|p| GlobPattern::new(p, false));
            let names: Vec<&Bytes> = map
                .keys()
                .filter(|c| glob.as_ref().is_none_or(|g| g.matches(c)))
                .collect();
            out.array_len(names.len());
            names.into_iter().for_each(|c| out.bulk(c));
        }
        (b"numsub" | b"shardnumsub", _) => {
            let map = if sub == b"numsub" {
                read(&registry.channels)
            } else {
                read(&registry.shard_channels)
            };
            // A flat array in RESP3 too, as Redis 7 answers.
            out.array_len(2 * (args.len() - 2));
            for channel in &args[2..] {
                out.bulk(channel);
                out.integer(map.get(channel).map_or(0, HashMap::len) as i64);
            }
        }
        (b"numpat", 2) => out.integer(read(&registry.patterns).len() as i64),
        (b"help", 2) => {
            let lines: &[&[u8]] = &[
                b"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"CHANNELS [<pattern>]",
                b"    Return the currently active channels matching a <pattern> (default: '*').",
                b"NUMPAT",
                b"    Return number of subscriptions to patterns.",
                b"NUMSUB [<channel> ...]",
                b"    Return the number of subscribers for the specified channels, excluding",
                b"    pattern subscriptions(default: no channels).",
                b"SHARDCHANNELS [<pattern>]",
                b"    Return the currently active shard level channels matching a <pattern> (default: '*').",
                b"SHARDNUMSUB [<shardchannel> ...]",
                b"    Return the number of subscribers for the specified shard level channel(s)",
                b"HELP",
                b"    Prints this help.",
            ];
            command::help(out, lines);
        }
        (b"channels" | b"shardchannels" | b"numpat" | b"help", _) => {
            command::wrong_subcommand_arity(out, "pubsub", &sub);
        }
        _ => command::unknown_subcommand(out, "PUBSUB", &args[1]),
    }
}

/// Whether a RESP2 client in subscribed mode may run `ps` / a session command: only the
/// subscription commands, `PING`, `QUIT` and `RESET`.
pub(crate) fn allowed_in_subscribed_mode(version: RespVersion, spec: &command::Spec) -> bool {
    version == RespVersion::Resp3
        || matches!(
            spec.session(),
            Some(
                command::Session::PubSub(
                    Ps::Subscribe
                        | Ps::Unsubscribe
                        | Ps::Psubscribe
                        | Ps::Punsubscribe
                        | Ps::Ssubscribe
                        | Ps::Sunsubscribe
                ) | command::Session::Ping
                    | command::Session::Quit
                    | command::Session::Reset
            )
        )
}
