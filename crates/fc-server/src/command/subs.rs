//! The subcommands of the container commands (`CLIENT`, `COMMAND`, `CONFIG`, `LATENCY`,
//! `OBJECT`, `PUBSUB`, `SLOWLOG`) fc-server has, with the arity and Redis 7 flags Redis's
//! `COMMAND INFO` lists for each. A container's arguments are checked against them before it
//! runs, as Redis does (`ERR unknown subcommand 'x'. Try CONFIG HELP.`, `ERR wrong number of
//! arguments for 'config|get' command`), and each has its own statistics slot
//! (`cmdstat_config|get`), its own `admin`/`readonly` flags for `MONITOR` and the slow log.

use std::sync::LazyLock;

use bytes::Bytes;

use super::{COMMANDS, F, Spec};

/// One subcommand.
#[derive(Debug)]
pub(crate) struct Sub {
    /// The container's name.
    pub(crate) container: &'static str,
    /// Lowercase name.
    pub(crate) name: &'static str,
    /// Redis arity (the container's name and the subcommand's count).
    pub(crate) arity: i32,
    /// [`F`] bits.
    pub(crate) flags: u32,
}

const ADMIN: u32 = F::ADMIN | F::NOSCRIPT | F::LOADING | F::STALE;
const PLAIN: u32 = F::NOSCRIPT | F::LOADING | F::STALE;
const HELP: u32 = F::LOADING | F::STALE;
const PUBSUB: u32 = F::PUBSUB | F::LOADING | F::STALE;
const SLOWLOG: u32 = F::ADMIN | F::LOADING | F::STALE;
const MODULE: u32 = F::ADMIN | F::NOSCRIPT | F::NO_ASYNC_LOADING;

const fn sub(container: &'static str, name: &'static str, arity: i32, flags: u32) -> Sub {
    Sub {
        container,
        name,
        arity,
        flags,
    }
}

/// Every subcommand, sorted by container, then name.
pub(crate) static SUBCOMMANDS: &[Sub] = &[
    sub("client", "caching", 3, PLAIN),
    sub("client", "getname", 2, PLAIN),
    sub("client", "getredir", 2, PLAIN),
    sub("client", "help", 2, HELP),
    sub("client", "id", 2, PLAIN),
    sub("client", "info", 2, PLAIN),
    sub("client", "kill", -3, ADMIN),
    sub("client", "list", -2, ADMIN),
    sub("client", "no-evict", 3, ADMIN),
    sub("client", "no-touch", 3, PLAIN),
    sub("client", "pause", -3, ADMIN),
    sub("client", "reply", 3, PLAIN),
    sub("client", "setinfo", 4, PLAIN),
    sub("client", "setname", 3, PLAIN),
    sub("client", "tracking", -3, PLAIN),
    sub("client", "trackinginfo", 2, PLAIN),
    sub("client", "unblock", -3, ADMIN),
    sub("client", "unpause", 2, ADMIN),
    sub("command", "count", 2, HELP),
    sub("command", "docs", -2, HELP),
    sub("command", "getkeys", -4, HELP),
    sub("command", "getkeysandflags", -4, HELP),
    sub("command", "help", 2, HELP),
    sub("command", "info", -2, HELP),
    sub("command", "list", -2, HELP),
    sub("config", "get", -3, ADMIN),
    sub("config", "help", 2, HELP),
    sub("config", "resetstat", 2, ADMIN),
    sub("config", "rewrite", 2, ADMIN),
    sub("config", "set", -4, ADMIN),
    sub("latency", "doctor", 2, ADMIN),
    sub("latency", "graph", 3, ADMIN),
    sub("latency", "help", 2, HELP),
    sub("latency", "histogram", -2, ADMIN),
    sub("latency", "history", 3, ADMIN),
    sub("latency", "latest", 2, ADMIN),
    sub("latency", "reset", -2, ADMIN),
    sub("module", "help", 2, HELP),
    sub("module", "list", 2, F::ADMIN | F::NOSCRIPT),
    sub("module", "load", -3, MODULE),
    sub("module", "loadex", -3, MODULE),
    sub("module", "unload", 3, MODULE),
    sub("object", "encoding", 3, F::READONLY),
    sub("object", "freq", 3, F::READONLY),
    sub("object", "help", 2, HELP),
    sub("object", "idletime", 3, F::READONLY),
    sub("object", "refcount", 3, F::READONLY),
    sub("pubsub", "channels", -2, PUBSUB),
    sub("pubsub", "help", 2, HELP),
    sub("pubsub", "numpat", 2, PUBSUB),
    sub("pubsub", "numsub", -2, PUBSUB),
    sub("pubsub", "shardchannels", -2, PUBSUB),
    sub("pubsub", "shardnumsub", -2, PUBSUB),
    sub("slowlog", "get", -2, SLOWLOG),
    sub("slowlog", "help", 2, HELP),
    sub("slowlog", "len", 2, SLOWLOG),
    sub("slowlog", "reset", 2, SLOWLOG),
    sub("xgroup", "create", -5, F::WRITE | F::DENYOOM),
    sub("xgroup", "createconsumer", 5, F::WRITE | F::DENYOOM),
    sub("xgroup", "delconsumer", 5, F::WRITE),
    sub("xgroup", "destroy", 4, F::WRITE),
    sub("xgroup", "help", 2, HELP),
    sub("xgroup", "setid", -5, F::WRITE),
    sub("xinfo", "consumers", 4, F::READONLY),
    sub("xinfo", "groups", 3, F::READONLY),
    sub("xinfo", "help", 2, HELP),
    sub("xinfo", "stream", -3, F::READONLY),
];

impl Sub {
    fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

impl Spec {
    /// Its position in [`COMMANDS`]: its statistics slot.
    #[inline]
    pub(crate) fn index(&'static self) -> usize {
        (std::ptr::from_ref(self) as usize - COMMANDS.as_ptr() as usize) / size_of::<Spec>()
    }

    /// Its subcommands (none unless it is a container).
    #[inline]
    pub(crate) fn subcommands(&'static self) -> &'static [Sub] {
        let (start, end) = SUB_RANGES.get(self.index()).copied().unwrap_or_default();
        &SUBCOMMANDS[usize::from(start)..usize::from(end)]
    }
}

/// Each command's range of [`SUBCOMMANDS`], by table position (every command that is not
/// dispatched in place looks it up).
static SUB_RANGES: LazyLock<Vec<(u16, u16)>> = LazyLock::new(|| {
    COMMANDS
        .iter()
        .map(|spec| {
            let start = SUBCOMMANDS.partition_point(|s| s.container < spec.name);
            let end = SUBCOMMANDS.partition_point(|s| s.container <= spec.name);
            (start as u16, end as u16)
        })
        .collect()
});

/// Statistics slots: one per command, then one per subcommand.
pub(crate) fn slot_count() -> usize {
    COMMANDS.len() + SUBCOMMANDS.len()
}

/// A slot's name as `INFO commandstats` writes it (`get`, `config|get`).
pub(crate) fn slot_name(slot: usize) -> String {
    match slot.checked_sub(COMMANDS.len()) {
        None => COMMANDS[slot].name.to_string(),
        Some(i) => format!("{}|{}", SUBCOMMANDS[i].container, SUBCOMMANDS[i].name),
    }
}

/// A slot's [`F`] flags.
pub(crate) fn slot_flags(slot: usize) -> u32 {
    match slot.checked_sub(COMMANDS.len()) {
        None => COMMANDS[slot].flags,
        Some(i) => SUBCOMMANDS[i].flags,
    }
}

/// The slots a name selects, as `LATENCY HISTOGRAM` reads its arguments: `config|get` one
/// subcommand; `get` the command; `config` the container and each of its subcommands.
pub(crate) fn slots_named(name: &[u8]) -> Vec<usize> {
    let (container, sub) = match name.iter().position(|&b| b == b'|') {
        Some(bar) => (&name[..bar], Some(&name[bar + 1..])),
        None => (name, None),
    };
    let Some(spec) = super::lookup(container) else {
        return Vec::new();
    };
    let first = SUBCOMMANDS.as_ptr() as usize;
    let slot_of = |s: &'static Sub| {
        COMMANDS.len() + (std::ptr::from_ref(s) as usize - first) / size_of::<Sub>()
    };
    match sub {
        Some(sub) => spec
            .subcommands()
            .iter()
            .filter(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
            .map(slot_of)
            .collect(),
        None => std::iter::once(spec.index())
            .chain(spec.subcommands().iter().map(slot_of))
            .collect(),
    }
}

/// What a command's arguments select before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selected {
    /// Its statistics slot (a subcommand's for a container with one).
    Slot(usize),
    /// A container's subcommand that does not exist (refused, counted nowhere).
    UnknownSub,
    /// A subcommand with a wrong argument count (refused, counted in its slot).
    SubArity(usize),
}

/// The statistics slot of `args` (a whole command of `spec`, its arity already checked), or
/// why Redis would refuse it.
pub(crate) fn select(spec: &'static Spec, args: &[Bytes]) -> Selected {
    let subs = spec.subcommands();
    if subs.is_empty() || args.len() < 2 {
        return Selected::Slot(spec.index());
    }
    let Some(i) = subs
        .iter()
        .position(|s| s.name.as_bytes().eq_ignore_ascii_case(&args[1]))
    else {
        return Selected::UnknownSub;
    };
    let slot = COMMANDS.len()
        + (subs.as_ptr() as usize - SUBCOMMANDS.as_ptr() as usize) / size_of::<Sub>()
        + i;
    if subs[i].arity_ok(args.len()) {
        Selected::Slot(slot)
    } else {
        Selected::SubArity(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_are_sorted_and_belong_to_containers() {
        for pair in SUBCOMMANDS.windows(2) {
            assert!(
                (pair[0].container, pair[0].name) < (pair[1].container, pair[1].name),
                "{} {}",
                pair[0].name,
                pair[1].name
            );
        }
        for s in SUBCOMMANDS {
            assert!(super::super::lookup(s.container.as_bytes()).is_some());
        }
    }

    #[test]
    fn slots_name_commands_and_subcommands() {
        let config = super::super::lookup(b"config").unwrap();
        let get = super::super::lookup(b"get").unwrap();
        assert_eq!(slot_name(get.index()), "get");
        let args = |a: &[&str]| -> Vec<Bytes> {
            a.iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect()
        };
        let Selected::Slot(slot) = select(config, &args(&["config", "GET", "hz"])) else {
            panic!()
        };
        assert_eq!(slot_name(slot), "config|get");
        assert_eq!(slots_named(b"CONFIG|get"), vec![slot]);
        assert_eq!(slots_named(b"config").len(), 6);
        assert_eq!(
            select(config, &args(&["config", "get"])),
            Selected::SubArity(slot)
        );
        assert_eq!(
            select(config, &args(&["config", "nope"])),
            Selected::UnknownSub
        );
        assert_eq!(
            select(get, &args(&["get", "k"])),
            Selected::Slot(get.index())
        );
        assert!(slot_flags(slot) & F::ADMIN != 0);
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.index(), i);
        }
        assert!(slot_count() <= crate::stats::SLOTS);
    }
}
