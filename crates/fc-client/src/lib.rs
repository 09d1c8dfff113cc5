//! # fc-client — the Rust client of FCNP, fast-cache's native protocol
//!
//! **Owns:** connections to an fc-server speaking FCNP (`fc-fcnp`'s frames), multiplexed so
//! that many tasks share one socket and each request is matched to its response by id;
//! a pool of them; pipelines (many requests, one write); client-side routing of keys to the
//! server's direct shard ports (`fc-route`, the routing the server uses), so a request reaches
//! the worker that owns its key with no cross-worker hop; typed errors, timeouts, and
//! reconnection on the next call after a connection fails. [`blocking::Client`] wraps it for
//! code without a runtime.
//!
//! **Must not depend on:** the server or the storage engine: it speaks the protocol only.
//!
//! **Why a crate of its own** (not a feature of `fc-fcnp`): the codec stays sans-IO and free of
//! any runtime, so the server, fuzzers and other clients use it without tokio; this crate is
//! the one place that owns sockets on the client side.
//!
//! ## Example
//! ```no_run
//! use std::time::Duration;
//! use fc_client::{Client, ClientConfig, SetOptions};
//!
//! # async fn demo() -> Result<(), fc_client::Error> {
//! // The server's port, and its direct shard ports (`--direct-shard-ports`, 16 shards).
//! let config = ClientConfig::new("127.0.0.1:6380".parse().unwrap())
//!     .direct_ports("127.0.0.1:6381".parse().unwrap(), 16);
//! let client = Client::connect(config).await?;
//! client.set("session:42:layer:0", b"kv-block").await?;
//! client
//!     .set_with("lock", b"owner", SetOptions::new().nx().ttl(Duration::from_secs(10)))
//!     .await?;
//! assert_eq!(client.get("session:42:layer:0").await?.as_deref(), Some(&b"kv-block"[..]));
//! // A session's chunks in one request, their values in one buffer.
//! let packed = client.mget(&["session:42:layer:0", "session:42:layer:1"]).await?;
//! assert_eq!(packed.get(1), None);
//! // Any command of the server, typed.
//! let members = client.command(&["SMEMBERS", "tags"]).await?;
//! # let _ = members;
//! # Ok(())
//! # }
//! ```

pub mod blocking;
mod conn;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use fc_fcnp::{Body, Flags, Opcode, RequestHeader};
pub use fc_fcnp::{Packed, Value};
use fc_route::{EmbeddedRouteMode, ShardRouter};
use tokio::sync::Mutex;

use crate::conn::{Call, Conn};

/// What can go wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error (`ERR ...`, `WRONGTYPE ...`, `NOPERM ...`).
    #[error("{0}")]
    Server(String),
    /// The socket failed.
    #[error("I/O error: {0}")]
    Io(Arc<std::io::Error>),
    /// No response within the configured timeout.
    #[error("timed out")]
    Timeout,
    /// The connection closed before the response came.
    #[error("connection closed")]
    Closed,
    /// The server closed the connection over a protocol error it saw.
    #[error("server closed the connection: {0}")]
    Fatal(String),
    /// The server's bytes are not FCNP.
    #[error(transparent)]
    Protocol(#[from] fc_fcnp::FrameError),
    /// A reply of another shape than the call expects.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Self::Io(Arc::new(err))
    }
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The server's direct shard ports: shard `s` listens on `base`'s port + `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectPorts {
    /// Shard 0's address.
    pub base: SocketAddr,
    /// The server's shard count (a power of two).
    pub shards: usize,
}

/// How to reach a server.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's port (RESP and FCNP) or its FCNP port.
    pub addr: SocketAddr,
    /// Connections to `addr` (requests are spread over them; each is multiplexed).
    pub pool_size: usize,
    /// Direct shard ports, when the server has them: single-shard requests go there.
    pub direct: Option<DirectPorts>,
    /// `AUTH` on every new connection: (user, password); user `None` is `default`.
    pub auth: Option<(Option<String>, String)>,
    /// Longest wait for a response (or a pipeline's responses).
    pub timeout: Duration,
    /// Longest wait to connect.
    pub connect_timeout: Duration,
}

impl ClientConfig {
    /// One connection to `addr`, no direct ports, no password, 5 s timeouts.
    #[must_use]
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            pool_size: 1,
            direct: None,
            auth: None,
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// Routes single-shard requests to the direct shard ports from `base` (`shards` of them).
    #[must_use]
    pub fn direct_ports(mut self, base: SocketAddr, shards: usize) -> Self {
        self.direct = Some(DirectPorts { base, shards });
        self
    }

    /// `pool_size` connections to the main address.
    #[must_use]
    pub fn pool_size(mut self, pool_size: usize) -> Self {
        self.pool_size = pool_size.max(1);
        self
    }

    /// Authenticates every connection (`user` `None`: the default user, as `AUTH password`).
    #[must_use]
    pub fn auth(mut self, user: Option<&str>, password: &str) -> Self {
        self.auth = Some((user.map(str::to_owned), password.to_owned()));
        self
    }

    /// The response timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// `SET`'s options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetOptions {
    ttl: Option<Duration>,
    flags: u8,
}

impl SetOptions {
    /// No options: a plain `SET`.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            ttl: None,
            flags: 0,
        }
    }

    /// Expires the key after `ttl` (millisecond precision, as `PX`).
    #[must_use]
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Only if the key does not exist.
    #[must_use]
    pub const fn nx(mut self) -> Self {
        self.flags |= Flags::NX;
        self
    }

    /// Only if the key exists.
    #[must_use]
    pub const fn xx(mut self) -> Self {
        self.flags |= Flags::XX;
        self
    }

    /// Keeps the key's expiry.
    #[must_use]
    pub const fn keep_ttl(mut self) -> Self {
        self.flags |= Flags::KEEPTTL;
        self
    }
}

/// A connection slot: the connection, dialled again after it fails.
#[derive(Debug)]
struct Slot {
    addr: SocketAddr,
    conn: Mutex<Option<Conn>>,
}

impl Slot {
    fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            conn: Mutex::new(None),
        }
    }
}

#[derive(Debug)]
struct Inner {
    config: ClientConfig,
    pool: Vec<Slot>,
    direct: Vec<Slot>,
    router: Option<ShardRouter>,
    next: AtomicUsize,
}

/// An FCNP client: cheap to clone (clones share the connections), usable from many tasks at
/// once.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

fn key_bytes(key: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(key.as_ref())
}

/// The status `OK`, or the error the server sent.
fn ok(value: Value) -> Result<()> {
    match value {
        Value::Status(_) => Ok(()),
        other => Err(unexpected(&other)),
    }
}

/// An error reply as [`Error::Server`]; any other value as it is.
fn server(value: Value) -> Result<Value> {
    match value {
        Value::Error(text) => Err(Error::Server(String::from_utf8_lossy(&text).into_owned())),
        other => Ok(other),
    }
}

fn unexpected(value: &Value) -> Error {
    Error::Unexpected(format!("{value:?}"))
}

fn int(value: Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(n),
        other => Err(unexpected(&other)),
    }
}

fn bulk_or_nil(value: Value) -> Result<Option<Bytes>> {
    match value {
        Value::Bulk(b) => Ok(Some(b)),
        Value::Nil => Ok(None),
        other => Err(unexpected(&other)),
    }
}

impl Client {
    /// Connects the pool (and, with direct ports, one connection per shard, dialled on first
    /// use), authenticating each connection when the configuration says so.
    ///
    /// # Errors
    /// When the first connection cannot be made or authenticated.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        let pool = (0..config.pool_size.max(1))
            .map(|_| Slot::new(config.addr))
            .collect();
        let (direct, router) = match config.direct {
            Some(DirectPorts { base, shards }) => {
                let router = ShardRouter::try_new(shards, EmbeddedRouteMode::Namespaced)
                    .map_err(|e| Error::Unexpected(e.to_string()))?;
                let slots = (0..shards)
                    .map(|s| {
                        let mut addr = base;
                        addr.set_port(base.port().wrapping_add(s as u16));
                        Slot::new(addr)
                    })
                    .collect();
                (slots, Some(router))
            }
            None => (Vec::new(), None),
        };
        let client = Self {
            inner: Arc::new(Inner {
                config,
                pool,
                direct,
                router,
                next: AtomicUsize::new(0),
            }),
        };
        client.conn(&client.inner.pool[0]).await?;
        Ok(client)
    }

    /// The slot's connection, dialled (and authenticated) when it has none or it failed.
    async fn conn(&self, slot: &Slot) -> Result<Conn> {
        let mut held = slot.conn.lock().await;
        if let Some(conn) = held.as_ref().filter(|c| c.is_alive()) {
            return Ok(conn.clone());
        }
        let config = &self.inner.config;
        let conn = Conn::open(slot.addr, config.connect_timeout).await?;
        if let Some((user, password)) = &config.auth {
            let mut items: Vec<Bytes> = vec![Bytes::from_static(b"AUTH")];
            items.extend(user.iter().map(|u| Bytes::from(u.clone())));
            items.push(Bytes::from(password.clone()));
            let call = Call {
                header: RequestHeader::new(Opcode::Command, 0),
                items,
            };
            let mut replies = conn.run(vec![call], config.timeout).await?;
            match replies.pop() {
                Some(Body::Value(Value::Status(_))) => {}
                Some(Body::Value(Value::Error(text))) => {
                    return Err(Error::Server(String::from_utf8_lossy(&text).into_owned()));
                }
                other => return Err(Error::Unexpected(format!("{other:?}"))),
            }
        }
        *held = Some(conn.clone());
        Ok(conn)
    }

    /// Where requests whose keys all live on one shard go: that shard's direct port when the
    /// client has them (with the router), else the pool.
    fn slot_for(&self, keys: &[Bytes]) -> (&Slot, Option<&ShardRouter>) {
        let inner = &self.inner;
        if let (Some(router), Some(first)) = (&inner.router, keys.first()) {
            let shard = router.shard_of(&router.route_key(first));
            if keys[1..]
                .iter()
                .all(|k| router.shard_of(&router.route_key(k)) == shard)
            {
                return (&inner.direct[shard], Some(router));
            }
        }
        let i = inner.next.fetch_add(1, Ordering::Relaxed) % inner.pool.len();
        (&inner.pool[i], None)
    }

    /// Sends `calls` on one connection (chosen by `keys`) in one write. On a direct port each
    /// keyed request carries its first key's route hash, which the server checks.
    async fn send(&self, keys: &[Bytes], mut calls: Vec<Call>) -> Result<Vec<Body>> {
        let (slot, router) = self.slot_for(keys);
        if let Some(router) = router {
            for call in &mut calls {
                if call.header.opcode != Opcode::Command as u8
                    && let Some(key) = call.items.first()
                {
                    call.header.route = Some(router.route_key(key).route_hash());
                }
            }
        }
        let conn = self.conn(slot).await?;
        conn.run(calls, self.inner.config.timeout).await
    }

    /// One request; its reply as a value (an error reply as [`Error::Server`]).
    async fn one(&self, header: RequestHeader, items: Vec<Bytes>, keys: usize) -> Result<Value> {
        let keyed: Vec<Bytes> = items.iter().take(keys).cloned().collect();
        let mut bodies = self.send(&keyed, vec![Call { header, items }]).await?;
        match bodies.pop() {
            Some(Body::Value(value)) => server(value),
            other => Err(Error::Unexpected(format!("{other:?}"))),
        }
    }

    /// `GET key`.
    ///
    /// # Errors
    /// [`Error::Server`] (`WRONGTYPE`...), or the connection's errors.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let value = self
            .one(RequestHeader::new(Opcode::Get, 0), vec![key_bytes(key)], 1)
            .await?;
        bulk_or_nil(value)
    }

    /// `SET key value`.
    ///
    /// # Errors
    /// As [`Client::get`] (`OOM` past the server's memory limit).
    pub async fn set(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let items = vec![key_bytes(key), key_bytes(value)];
        ok(self
            .one(RequestHeader::new(Opcode::Set, 0), items, 1)
            .await?)
    }

    /// `SET key value` with a TTL and/or `NX`/`XX`/`KEEPTTL`: whether it was set.
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn set_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: SetOptions,
    ) -> Result<bool> {
        let mut header = RequestHeader::new(Opcode::Set, 0).with_flags(options.flags);
        if let Some(ttl) = options.ttl {
            header = header.with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        }
        match self
            .one(header, vec![key_bytes(key), key_bytes(value)], 1)
            .await?
        {
            Value::Status(_) => Ok(true),
            Value::Nil => Ok(false),
            other => Err(unexpected(&other)),
        }
    }

    /// `DEL key...`: how many existed.
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn del<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<i64> {
        let items: Vec<Bytes> = keys.iter().map(key_bytes).collect();
        let n = items.len();
        int(self
            .one(RequestHeader::new(Opcode::Del, 0), items, n)
            .await?)
    }

    /// `EXISTS key...`: how many exist.
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<i64> {
        let items: Vec<Bytes> = keys.iter().map(key_bytes).collect();
        let n = items.len();
        int(self
            .one(RequestHeader::new(Opcode::Exists, 0), items, n)
            .await?)
    }

    /// `PEXPIRE key ttl`: whether the key exists (and now expires).
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn expire(&self, key: impl AsRef<[u8]>, ttl: Duration) -> Result<bool> {
        let header = RequestHeader::new(Opcode::Expire, 0)
            .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        Ok(int(self.one(header, vec![key_bytes(key)], 1).await?)? == 1)
    }

    /// `PTTL key`: the time left (`None`: no expiry, or no key — [`Client::exists`] tells).
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<Duration>> {
        let ms = int(self
            .one(RequestHeader::new(Opcode::Ttl, 0), vec![key_bytes(key)], 1)
            .await?)?;
        Ok(u64::try_from(ms).ok().map(Duration::from_millis))
    }

    /// `PERSIST key`: whether an expiry was removed.
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn persist(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(int(self
            .one(
                RequestHeader::new(Opcode::Persist, 0),
                vec![key_bytes(key)],
                1,
            )
            .await?)?
            == 1)
    }

    /// `INCRBY key delta`: the new value.
    ///
    /// # Errors
    /// [`Error::Server`] when the value is not an integer or would overflow.
    pub async fn incr_by(&self, key: impl AsRef<[u8]>, delta: i64) -> Result<i64> {
        let items = vec![key_bytes(key), Bytes::copy_from_slice(&delta.to_le_bytes())];
        int(self
            .one(RequestHeader::new(Opcode::IncrBy, 0), items, 1)
            .await?)
    }

    /// `APPEND key value`: the new length.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn append(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<i64> {
        let items = vec![key_bytes(key), key_bytes(value)];
        int(self
            .one(RequestHeader::new(Opcode::Append, 0), items, 1)
            .await?)
    }

    /// `GETDEL key`.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn get_del(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        bulk_or_nil(
            self.one(
                RequestHeader::new(Opcode::GetDel, 0),
                vec![key_bytes(key)],
                1,
            )
            .await?,
        )
    }

    /// `MGET key...` as one packed batch: every value in one buffer ([`Packed::get`]).
    /// Keys of one shard (a session's chunks: one hash tag or session prefix) go to that
    /// shard's direct port.
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn mget<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Packed> {
        let items: Vec<Bytes> = keys.iter().map(key_bytes).collect();
        let call = Call {
            header: RequestHeader::new(Opcode::MGet, 0),
            items: items.clone(),
        };
        let mut bodies = self.send(&items, vec![call]).await?;
        match bodies.pop() {
            Some(Body::Packed(packed)) => Ok(packed),
            Some(Body::Value(Value::Error(text))) => {
                Err(Error::Server(String::from_utf8_lossy(&text).into_owned()))
            }
            other => Err(Error::Unexpected(format!("{other:?}"))),
        }
    }

    /// `MSET key value...`.
    ///
    /// # Errors
    /// The connection's errors (`OOM`).
    pub async fn mset<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        let mut items = Vec::with_capacity(pairs.len() * 2);
        let mut keys = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            keys.push(key_bytes(k));
            items.push(key_bytes(k));
            items.push(key_bytes(v));
        }
        let mut bodies = self
            .send(
                &keys,
                vec![Call {
                    header: RequestHeader::new(Opcode::MSet, 0),
                    items,
                }],
            )
            .await?;
        match bodies.pop() {
            Some(Body::Value(value)) => ok(server(value)?),
            other => Err(Error::Unexpected(format!("{other:?}"))),
        }
    }

    /// Any command of the server (name first), its reply typed. An error reply is
    /// [`Error::Server`]; errors inside an aggregate (`EXEC`'s) stay values.
    ///
    /// # Errors
    /// [`Error::Server`], or the connection's errors.
    pub async fn command<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        let items: Vec<Bytes> = args.iter().map(key_bytes).collect();
        self.one(RequestHeader::new(Opcode::Command, 0), items, 0)
            .await
    }

    /// A pipeline: requests gathered here, sent in one write, answered together.
    #[must_use]
    pub fn pipeline(&self) -> Pipeline {
        Pipeline::default()
    }
}

/// Requests sent together ([`Pipeline::run`]): one write, one wait.
#[derive(Debug, Default)]
pub struct Pipeline {
    calls: Vec<Call>,
    keys: Vec<Bytes>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("opcode", &self.header.opcode)
            .field("items", &self.items.len())
            .finish()
    }
}

impl Pipeline {
    fn push(&mut self, header: RequestHeader, items: Vec<Bytes>, keys: usize) -> &mut Self {
        self.keys.extend(items.iter().take(keys).cloned());
        self.calls.push(Call { header, items });
        self
    }

    /// Adds a `GET`.
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(RequestHeader::new(Opcode::Get, 0), vec![key_bytes(key)], 1)
    }

    /// Adds a `SET`.
    pub fn set(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.push(
            RequestHeader::new(Opcode::Set, 0),
            vec![key_bytes(key), key_bytes(value)],
            1,
        )
    }

    /// Adds a `DEL`.
    pub fn del(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(RequestHeader::new(Opcode::Del, 0), vec![key_bytes(key)], 1)
    }

    /// Adds any command.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> &mut Self {
        let items = args.iter().map(key_bytes).collect();
        self.push(RequestHeader::new(Opcode::Command, 0), items, 0)
    }

    /// How many requests it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Sends every request in one write (to the one shard's direct port when all keys share
    /// a shard) and returns each reply in order; error replies are [`Value::Error`] values
    /// in place. The pipeline is emptied.
    ///
    /// # Errors
    /// The connection's errors.
    pub async fn run(&mut self, client: &Client) -> Result<Vec<Value>> {
        let calls = std::mem::take(&mut self.calls);
        let keys = std::mem::take(&mut self.keys);
        let bodies = client.send(&keys, calls).await?;
        bodies
            .into_iter()
            .map(|body| match body {
                Body::Value(v) => Ok(v),
                other => Err(Error::Unexpected(format!("{other:?}"))),
            })
            .collect()
    }
}
