//! Scripting's shared state (below the workers; `crate::script` runs the scripts): script
//! bodies by SHA1, function libraries (kept in `<data-dir>/functions.rdb`), the script running
//! past `busy-reply-threshold` and the kill switch `SCRIPT KILL`/`FUNCTION KILL`/`SHUTDOWN
//! NOSAVE` set, and the figures `INFO` reports.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use bytes::Bytes;
use mlua::VmState;

use crate::reply::Reply;

/// Lowercase hex SHA1 of `data` (`redis.sha1hex`, script names).
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// A loaded function library.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    pub(crate) code: String,
    /// `(name, description, flags)`, in registration order.
    pub(crate) functions: Vec<(String, Option<String>, u32)>,
}

/// The script running past `busy-reply-threshold` (others are answered `BUSY`).
#[derive(Debug, Clone)]
pub(crate) struct Busy {
    /// `EVAL`'s SHA1 or the function's name.
    pub(crate) name: String,
    /// The command that started it (`FUNCTION STATS`).
    pub(crate) command: Vec<Bytes>,
    pub(crate) started: Instant,
    pub(crate) function: bool,
    /// The worker thread running it (whose clients wait for it).
    pub(crate) worker: usize,
}

/// Scripts and function libraries every worker shares, the busy state and the kill switch.
#[derive(Debug)]
pub(crate) struct Registry {
    bodies: RwLock<HashMap<[u8; 40], Arc<[u8]>, foldhash::fast::RandomState>>,
    body_bytes: AtomicUsize,
    generation: AtomicU64,
    pub(crate) libraries: RwLock<BTreeMap<String, Library>>,
    fn_generation: AtomicU64,
    /// `busy-reply-threshold` in milliseconds (0: never busy).
    pub(crate) threshold_ms: AtomicU64,
    /// Set while a script runs past the threshold: one relaxed load per command elsewhere.
    busy_flag: AtomicBool,
    busy: Mutex<Option<Busy>>,
    /// Whether the busy script has written (it then refuses `SCRIPT KILL`).
    busy_wrote: AtomicBool,
    /// `SCRIPT KILL`/`FUNCTION KILL` asked the busy script to stop.
    kill: AtomicBool,
    /// `SHUTDOWN NOSAVE` while busy: stop it even after writes.
    abort: AtomicBool,
    /// `FUNCTION STATS`'s running script, whatever its time.
    pub(crate) running: Mutex<Option<Busy>>,
    /// Memory of every worker's interpreter (each adds what changed after a run).
    vm_bytes: AtomicU64,
    /// Where libraries are kept across restarts (`<data-dir>/functions.rdb`; `None`: in
    /// memory only).
    file: Option<std::path::PathBuf>,
}

impl Registry {
    pub(crate) fn new(threshold_ms: u64, file: Option<std::path::PathBuf>) -> Self {
        Self {
            bodies: RwLock::default(),
            body_bytes: AtomicUsize::new(0),
            generation: AtomicU64::new(1),
            libraries: RwLock::default(),
            fn_generation: AtomicU64::new(1),
            threshold_ms: AtomicU64::new(threshold_ms),
            busy_flag: AtomicBool::new(false),
            busy: Mutex::new(None),
            busy_wrote: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            running: Mutex::new(None),
            vm_bytes: AtomicU64::new(0),
            file,
        }
    }

    /// Bytes the interpreters use (`used_memory_lua`, `used_memory_vm_*`).
    pub(crate) fn vm_bytes(&self) -> u64 {
        self.vm_bytes.load(Ordering::Relaxed)
    }

    /// An interpreter's memory moved from `before` to `now` bytes.
    pub(crate) fn vm_moved(&self, before: u64, now: u64) {
        if now >= before {
            self.vm_bytes.fetch_add(now - before, Ordering::Relaxed);
        } else {
            self.vm_bytes.fetch_sub(before - now, Ordering::Relaxed);
        }
    }

    /// Writes the libraries to their file (write, sync, rename, sync the directory), so a
    /// library `FUNCTION LOAD` acknowledged survives a crash. Nothing without a data directory.
    pub(crate) fn persist(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let codes = self.library_codes();
        let payload = fc_snapshot::rdb::dump_functions(codes.iter().map(String::as_bytes));
        let tmp = file.with_extension("rdb.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&payload)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, file)?;
        if let Some(dir) = file.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The libraries of the file (at startup): their codes.
    pub(crate) fn saved_codes(&self) -> Result<Vec<String>, String> {
        let Some(file) = &self.file else {
            return Ok(Vec::new());
        };
        let payload = match std::fs::read(file) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        let limits = fc_snapshot::rdb::Limits::new(1 << 20, 1 << 30);
        let codes = fc_snapshot::rdb::restore_functions(&payload, limits)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(codes
            .into_iter()
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .collect())
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn fn_generation(&self) -> u64 {
        self.fn_generation.load(Ordering::Acquire)
    }

    /// The body of script `sha`.
    pub(crate) fn body(&self, sha: &[u8; 40]) -> Option<Arc<[u8]>> {
        self.bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sha)
            .cloned()
    }

    pub(crate) fn exists(&self, sha: &[u8]) -> bool {
        let Ok(sha) = <[u8; 40]>::try_from(sha.to_ascii_lowercase().as_slice()) else {
            return false;
        };
        self.bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&sha)
    }

    /// Keeps `body` (`SCRIPT LOAD`, `EVAL`) and returns its SHA1.
    pub(crate) fn add(&self, body: &[u8]) -> [u8; 40] {
        let mut sha = [0; 40];
        sha.copy_from_slice(sha1_hex(body).as_bytes());
        let mut bodies = self.bodies.write().unwrap_or_else(PoisonError::into_inner);
        if let std::collections::hash_map::Entry::Vacant(e) = bodies.entry(sha) {
            self.body_bytes.fetch_add(body.len(), Ordering::Relaxed);
            e.insert(Arc::from(body));
        }
        sha
    }

    pub(crate) fn flush_scripts(&self) {
        let mut bodies = self.bodies.write().unwrap_or_else(PoisonError::into_inner);
        bodies.clear();
        self.body_bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// `number_of_cached_scripts`, and their bytes (`used_memory_scripts_eval`).
    pub(crate) fn script_stats(&self) -> (usize, usize) {
        let n = self
            .bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (n, self.body_bytes.load(Ordering::Relaxed))
    }

    /// `(libraries, functions, bytes of code)` (`FUNCTION STATS`, `INFO memory`).
    pub(crate) fn function_stats(&self) -> (usize, usize, usize) {
        let libs = self
            .libraries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        (
            libs.len(),
            libs.values().map(|l| l.functions.len()).sum(),
            libs.values().map(|l| l.code.len()).sum(),
        )
    }

    /// Every library's code (snapshots, `FUNCTION DUMP`), in name order.
    pub(crate) fn library_codes(&self) -> Vec<String> {
        self.libraries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|l| l.code.clone())
            .collect()
    }

    /// Whether a script runs past the threshold (one relaxed load).
    #[inline]
    pub(crate) fn is_busy(&self) -> bool {
        self.busy_flag.load(Ordering::Relaxed)
    }

    /// The worker running the busy script, if one is busy.
    pub(crate) fn busy_worker(&self) -> Option<usize> {
        if !self.is_busy() {
            return None;
        }
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|b| b.worker)
    }

    /// `BUSY`'s text for the script now busy.
    pub(crate) fn busy_text(&self) -> &'static [u8] {
        let function = self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|b| b.function);
        if function {
            b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
    }

    /// `SHUTDOWN NOSAVE` while a script is busy: stop it whatever it wrote.
    pub(crate) fn abort_busy(&self) {
        if self.is_busy() {
            self.abort.store(true, Ordering::Release);
        }
    }

    /// The interpreter's hook, every few instructions of the script running on a thread
    /// (`elapsed` milliseconds so far, whether it `wrote`; `first`: what to show as running,
    /// the first time): marks the script busy past the threshold, and stops it when killed.
    pub(crate) fn check(
        &self,
        elapsed: u128,
        wrote: bool,
        first: Option<Busy>,
    ) -> mlua::Result<VmState> {
        if let Some(busy) = first {
            self.start(busy);
        }
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        if threshold > 0 && elapsed >= u128::from(threshold) && !self.is_busy() {
            let running = self
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = running;
            self.kill.store(false, Ordering::Relaxed);
            self.busy_flag.store(true, Ordering::Release);
            tracing::warn!(
                "a script has run for {elapsed} ms (busy-reply-threshold {threshold} ms): other clients are answered BUSY"
            );
        }
        if self.is_busy() {
            self.busy_wrote.store(wrote, Ordering::Release);
            if self.abort.load(Ordering::Acquire) {
                return Err(mlua::Error::RuntimeError(
                    "ERR Script killed by SHUTDOWN NOSAVE".to_owned(),
                ));
            }
            if self.kill.swap(false, Ordering::AcqRel) && !wrote {
                return Err(mlua::Error::RuntimeError(
                    "ERR Script killed by user with SCRIPT KILL...".to_owned(),
                ));
            }
        }
        Ok(VmState::Continue)
    }

    pub(crate) fn start(&self, busy: Busy) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(busy);
    }

    /// The script ended; `recorded`: the hook had recorded it as running.
    pub(crate) fn stop(&self, recorded: bool) {
        if recorded {
            *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        if self.is_busy() {
            *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = None;
            self.busy_wrote.store(false, Ordering::Relaxed);
            self.kill.store(false, Ordering::Relaxed);
            // A `SHUTDOWN NOSAVE` that stopped this script applies to it alone (the server
            // may go on, as an in-process one does until its owner stops it).
            self.abort.store(false, Ordering::Release);
            self.busy_flag.store(false, Ordering::Release);
        }
    }

    /// `SCRIPT KILL` / `FUNCTION KILL`.
    pub(crate) fn kill<R: Reply>(&self, function: bool, out: &mut R) {
        if !self.is_busy() {
            return out.error(b"NOTBUSY No scripts in execution right now.");
        }
        let busy_function = self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|b| b.function);
        if busy_function != function {
            return out.error(if function {
                b"NOTBUSY No scripts in execution right now."
            } else {
                b"BUSY Redis is busy running a function. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
            });
        }
        if self.busy_wrote.load(Ordering::Acquire) {
            return out.error(b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        self.kill.store(true, Ordering::Release);
        out.ok();
    }
}

impl Registry {
    /// Adds libraries (each `(name, library)`), all or none: a function name may be in one
    /// library only. `replace`: a library of the same name is replaced.
    pub(crate) fn install(&self, new: Vec<(String, Library)>, replace: bool) -> Result<(), String> {
        let mut libs = self
            .libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = libs.clone();
        for (name, library) in new {
            if next.contains_key(&name) && !replace {
                return Err(format!("ERR Library '{name}' already exists"));
            }
            next.remove(&name);
            for (function, ..) in &library.functions {
                if next
                    .values()
                    .any(|l| l.functions.iter().any(|(f, ..)| f == function))
                {
                    return Err(format!("ERR Function {function} already exists"));
                }
            }
            next.insert(name, library);
        }
        *libs = next;
        self.fn_generation.fetch_add(1, Ordering::AcqRel);
        drop(libs);
        self.persist()
            .map_err(|e| format!("ERR could not save the function libraries: {e}"))
    }

    pub(crate) fn delete(&self, name: &str) -> bool {
        let mut libs = self
            .libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let found = libs.remove(name).is_some();
        if found {
            self.fn_generation.fetch_add(1, Ordering::AcqRel);
            drop(libs);
            if let Err(e) = self.persist() {
                tracing::error!("could not save the function libraries: {e}");
            }
        }
        found
    }

    pub(crate) fn flush_functions(&self) {
        self.libraries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.fn_generation.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.persist() {
            tracing::error!("could not save the function libraries: {e}");
        }
    }
}
