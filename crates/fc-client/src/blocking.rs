//! The client for code without an async runtime: each call runs the async client on a
//! runtime this wrapper owns (its connection tasks run while a call waits).

use std::time::Duration;

use bytes::Bytes;

use crate::{ClientConfig, Packed, Result, SetOptions, Value};

/// A blocking FCNP client (see [`crate::Client`] for each call's meaning).
#[derive(Debug)]
pub struct Client {
    runtime: tokio::runtime::Runtime,
    inner: crate::Client,
}

impl Client {
    /// Connects (see [`crate::Client::connect`]).
    ///
    /// # Errors
    /// When the runtime cannot start or the first connection fails.
    pub fn connect(config: ClientConfig) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let inner = runtime.block_on(crate::Client::connect(config))?;
        Ok(Self { runtime, inner })
    }

    /// `GET`.
    ///
    /// # Errors
    /// As [`crate::Client::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.runtime.block_on(self.inner.get(key))
    }

    /// `SET`.
    ///
    /// # Errors
    /// As [`crate::Client::set`].
    pub fn set(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.runtime.block_on(self.inner.set(key, value))
    }

    /// `SET` with options.
    ///
    /// # Errors
    /// As [`crate::Client::set_with`].
    pub fn set_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: SetOptions,
    ) -> Result<bool> {
        self.runtime
            .block_on(self.inner.set_with(key, value, options))
    }

    /// `DEL`.
    ///
    /// # Errors
    /// As [`crate::Client::del`].
    pub fn del<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<i64> {
        self.runtime.block_on(self.inner.del(keys))
    }

    /// `EXISTS`.
    ///
    /// # Errors
    /// As [`crate::Client::exists`].
    pub fn exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<i64> {
        self.runtime.block_on(self.inner.exists(keys))
    }

    /// `PEXPIRE`.
    ///
    /// # Errors
    /// As [`crate::Client::expire`].
    pub fn expire(&self, key: impl AsRef<[u8]>, ttl: Duration) -> Result<bool> {
        self.runtime.block_on(self.inner.expire(key, ttl))
    }

    /// `PTTL`.
    ///
    /// # Errors
    /// As [`crate::Client::ttl`].
    pub fn ttl(&self, key: impl AsRef<[u8]>) -> Result<Option<Duration>> {
        self.runtime.block_on(self.inner.ttl(key))
    }

    /// `INCRBY`.
    ///
    /// # Errors
    /// As [`crate::Client::incr_by`].
    pub fn incr_by(&self, key: impl AsRef<[u8]>, delta: i64) -> Result<i64> {
        self.runtime.block_on(self.inner.incr_by(key, delta))
    }

    /// `MGET`, packed.
    ///
    /// # Errors
    /// As [`crate::Client::mget`].
    pub fn mget<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Packed> {
        self.runtime.block_on(self.inner.mget(keys))
    }

    /// `MSET`.
    ///
    /// # Errors
    /// As [`crate::Client::mset`].
    pub fn mset<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        self.runtime.block_on(self.inner.mset(pairs))
    }

    /// Any command.
    ///
    /// # Errors
    /// As [`crate::Client::command`].
    pub fn command<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        self.runtime.block_on(self.inner.command(args))
    }

    /// Runs a pipeline built with [`crate::Client::pipeline`] (through [`Client::pipeline`]).
    ///
    /// # Errors
    /// As [`crate::Pipeline::run`].
    pub fn run(&self, pipeline: &mut crate::Pipeline) -> Result<Vec<Value>> {
        self.runtime.block_on(pipeline.run(&self.inner))
    }

    /// A new pipeline.
    #[must_use]
    pub fn pipeline(&self) -> crate::Pipeline {
        self.inner.pipeline()
    }

    /// The async client underneath (its calls need this wrapper's runtime or another).
    #[must_use]
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }
}
