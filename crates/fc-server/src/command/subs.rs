//! The subcommands of the container commands (`CLIENT`, `CLUSTER`, `COMMAND`, `CONFIG`,
//! `LATENCY`, `MEMORY`, `MODULE`, `OBJECT`, `PUBSUB`, `SLOWLOG`, `XGROUP`, `XINFO`) fc-server
//! has, each with the metadata Redis 7's `COMMAND INFO` and `COMMAND DOCS` report for it
//! ([`SUBCOMMANDS`], in `sub_table.rs`). A container's arguments are checked against them before
//! it runs, as Redis does (`ERR unknown subcommand 'x'. Try CONFIG HELP.`, `ERR wrong number of
//! arguments for 'config|get' command`), and each has its own statistics slot
//! (`cmdstat_config|get`), its own `admin`/`readonly` flags for `MONITOR` and the slow log.
//! `COMMAND` lists them (`COMMAND LIST`, the tenth element of `COMMAND INFO`), describes them
//! (`COMMAND INFO config|get`, `COMMAND DOCS`) and finds their keys (`COMMAND GETKEYS`).

use std::sync::LazyLock;

use bytes::Bytes;

pub(crate) use super::sub_table::SUBCOMMANDS;
use super::{COMMANDS, Doc, KeySpec, Spec};

/// One subcommand: its [`Spec`] but for the route (it runs in its container's).
#[derive(Debug)]
pub(crate) struct Sub {
    /// The container's name.
    pub(crate) container: &'static str,
    /// Lowercase name.
    pub(crate) name: &'static str,
    /// `container|name`: the name Redis reports (`config|get`).
    pub(crate) full_name: &'static str,
    /// Redis arity (the container's name and the subcommand's count).
    pub(crate) arity: i32,
    /// [`super::F`] bits.
    pub(crate) flags: u32,
    /// [`super::A`] bits.
    pub(crate) acl: u32,
    /// First key, last key, step, counting the container's name (`OBJECT ENCODING key`:
    /// `(2, 2, 1)`); `(0, 0, 0)`: no keys.
    pub(crate) keys: (i32, i32, i32),
    pub(crate) key_specs: &'static [KeySpec],
    /// Redis's command tips.
    pub(crate) tips: &'static [&'static str],
    pub(crate) doc: Doc,
}

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

impl Sub {
    /// The keys of `args` (a whole command: the container's name, the subcommand's, its
    /// arguments) its key specs find ([`Spec::spec_keys`]).
    pub(crate) fn spec_keys(&self, args: &[Bytes]) -> Option<Vec<(usize, &'static KeySpec)>> {
        super::keys_by_specs(self.key_specs, args)
    }
}

/// A command or a subcommand, as `COMMAND INFO`, `COMMAND DOCS` and `COMMAND GETKEYS` find it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Named {
    Command(&'static Spec),
    Sub(&'static Sub),
}

/// The command or subcommand `name` names, any case: `get`, `config|get` (Redis's
/// `lookupCommandBySds`: one bar at most, and only a container's subcommand after it).
pub(crate) fn lookup_named(name: &[u8]) -> Option<Named> {
    let Some(bar) = name.iter().position(|&b| b == b'|') else {
        return super::lookup(name).map(Named::Command);
    };
    let spec = super::lookup(&name[..bar])?;
    spec.subcommand(&name[bar + 1..]).map(Named::Sub)
}

/// The command or subcommand a whole command runs (Redis's `lookupCommand`: a container's
/// subcommand by the second argument), `None` when there is none of that name.
pub(crate) fn lookup_command(args: &[Bytes]) -> Option<Named> {
    let spec = super::lookup(args.first()?)?;
    match args.get(1) {
        Some(sub) if !spec.subcommands().is_empty() => spec.subcommand(sub).map(Named::Sub),
        _ => Some(Named::Command(spec)),
    }
}

impl Spec {
    /// Its subcommand `name` (any case), if it is a container that has one.
    pub(crate) fn subcommand(&'static self, name: &[u8]) -> Option<&'static Sub> {
        self.subcommands()
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }

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

/// A slot's [`super::F`] flags.
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
    use crate::command::F;

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

    #[test]
    fn subcommand_metadata_is_whole() {
        for s in SUBCOMMANDS {
            assert_eq!(s.full_name, format!("{}|{}", s.container, s.name));
            assert!(s.arity.unsigned_abs() >= 2, "{}", s.full_name);
            assert!(!s.doc.summary.is_empty() && !s.doc.since.is_empty());
            assert!(s.flags & F::WRITE == 0 || s.flags & F::READONLY == 0);
            // Key positions count the container's name; key specs and positions go together.
            assert_eq!(
                s.keys == (0, 0, 0),
                s.key_specs.is_empty(),
                "{}",
                s.full_name
            );
            assert!(s.keys.0 == 0 || s.keys.0 >= 2, "{}", s.full_name);
            let container = super::super::lookup(s.container.as_bytes()).unwrap();
            assert!(container.key_specs.is_empty(), "{}", container.name);
        }
        // Every container has its HELP.
        for spec in COMMANDS.iter().filter(|s| !s.subcommands().is_empty()) {
            assert!(spec.subcommand(b"HELP").is_some(), "{}", spec.name);
        }
    }

    #[test]
    fn names_find_commands_and_subcommands() {
        let full = |name: &[u8]| match lookup_named(name) {
            Some(Named::Command(spec)) => Some(spec.name),
            Some(Named::Sub(sub)) => Some(sub.full_name),
            None => None,
        };
        assert_eq!(full(b"GET"), Some("get"));
        assert_eq!(full(b"Config|GET"), Some("config|get"));
        assert_eq!(full(b"config"), Some("config"));
        assert_eq!(full(b"config|nope"), None);
        assert_eq!(full(b"config|get|x"), None);
        assert_eq!(full(b"config|"), None);
        assert_eq!(full(b"get|x"), None);
        assert_eq!(full(b"|get"), None);
        let args = |a: &[&str]| -> Vec<Bytes> {
            a.iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect()
        };
        let whole = |a: &[&str]| match lookup_command(&args(a)) {
            Some(Named::Command(spec)) => Some(spec.name),
            Some(Named::Sub(sub)) => Some(sub.full_name),
            None => None,
        };
        assert_eq!(whole(&["object", "ENCODING", "k"]), Some("object|encoding"));
        assert_eq!(whole(&["object", "nope"]), None);
        assert_eq!(whole(&["get", "k"]), Some("get"));
        assert_eq!(whole(&["nosuch", "k"]), None);
        // `MEMORY USAGE` now has its own slot; `CLUSTER` refuses an unknown subcommand.
        assert_eq!(slots_named(b"memory|usage").len(), 1);
        let cluster = super::super::lookup(b"cluster").unwrap();
        assert_eq!(
            select(cluster, &args(&["cluster", "nope"])),
            Selected::UnknownSub
        );
    }
}
