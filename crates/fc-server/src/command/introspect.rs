//! `COMMAND`, `COMMAND INFO`, `COMMAND DOCS`, `COMMAND COUNT`, `COMMAND LIST`,
//! `COMMAND GETKEYS` and `COMMAND HELP`, generated from the command table and the subcommand
//! table, in Redis 7's reply shapes: a container's subcommands are nested in its `COMMAND INFO`
//! entry (the tenth element) and its `COMMAND DOCS` entry (`subcommands`), listed after it by
//! `COMMAND LIST`, named `config|get` by `COMMAND INFO` and `COMMAND DOCS`, and their key specs
//! find `COMMAND GETKEYS`'s keys. Redis lists commands and subcommands in its hash tables'
//! order (a random seed per process); fc-server lists them in name order.

use bytes::Bytes;

use super::subs::{Named, Sub, lookup_command, lookup_named};
use super::{A, Begin, COMMANDS, Doc, F, Find, KeySpec, Spec};
use crate::reply::Reply;

/// What `COMMAND INFO` and `COMMAND DOCS` report of a command or a subcommand.
#[derive(Clone, Copy)]
struct Meta {
    /// `get`, `config|get`.
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    keys: (i32, i32, i32),
    key_specs: &'static [KeySpec],
    tips: &'static [&'static str],
    doc: Doc,
    /// A container's subcommands (none for a subcommand).
    subs: &'static [Sub],
}

impl From<&'static Spec> for Meta {
    fn from(spec: &'static Spec) -> Self {
        Meta {
            name: spec.name,
            arity: spec.arity,
            flags: spec.flags,
            acl: spec.acl,
            keys: spec.keys,
            key_specs: spec.key_specs,
            tips: spec.tips,
            doc: spec.doc,
            subs: spec.subcommands(),
        }
    }
}

impl From<&'static Sub> for Meta {
    fn from(sub: &'static Sub) -> Self {
        Meta {
            name: sub.full_name,
            arity: sub.arity,
            flags: sub.flags,
            acl: sub.acl,
            keys: sub.keys,
            key_specs: sub.key_specs,
            tips: sub.tips,
            doc: sub.doc,
            subs: &[],
        }
    }
}

impl From<Named> for Meta {
    fn from(named: Named) -> Self {
        match named {
            Named::Command(spec) => spec.into(),
            Named::Sub(sub) => sub.into(),
        }
    }
}

/// Runs `COMMAND [subcommand ...]`.
pub(crate) fn command<R: Reply>(args: &[Bytes], out: &mut R) {
    let Some(sub) = args.get(1) else {
        return info_all(out);
    };
    let sub = sub.to_ascii_lowercase();
    match sub.as_slice() {
        // Commands, not subcommands (as Redis counts).
        b"count" if args.len() == 2 => out.integer(COMMANDS.len() as i64),
        b"info" => {
            if args.len() == 2 {
                return info_all(out);
            }
            out.array_len(args.len() - 2);
            for name in &args[2..] {
                match lookup_named(name) {
                    Some(named) => info(named.into(), out),
                    None => out.null(),
                }
            }
        }
        b"docs" => {
            let found: Vec<Meta> = if args.len() == 2 {
                COMMANDS.iter().map(Meta::from).collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| lookup_named(n))
                    .map(Meta::from)
                    .collect()
            };
            out.map_len(found.len());
            for meta in found {
                out.bulk(meta.name.as_bytes());
                docs(meta, out);
            }
        }
        b"list" => list(args, out),
        // Redis's `command|getkeys` arity is -4: a command and at least one argument.
        b"getkeys" if args.len() >= 4 => getkeys(&args[2..], out, false),
        b"getkeysandflags" if args.len() >= 4 => getkeys(&args[2..], out, true),
        b"help" if args.len() == 2 => {
            let lines: &[&[u8]] = &[
                b"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"(no subcommand)",
                b"    Return details about all Redis commands.",
                b"COUNT",
                b"    Return the total number of commands in this Redis server.",
                b"LIST",
                b"    Return a list of all commands in this Redis server.",
                b"INFO [<command-name> ...]",
                b"    Return details about multiple Redis commands.",
                b"    If no command names are given, documentation details for all",
                b"    commands are returned.",
                b"DOCS [<command-name> ...]",
                b"    Return documentation details about multiple Redis commands.",
                b"    If no command names are given, documentation details for all",
                b"    commands are returned.",
                b"GETKEYS <full-command>",
                b"    Return the keys from a full Redis command.",
                b"GETKEYSANDFLAGS <full-command>",
                b"    Return the keys and the access flags from a full Redis command.",
                b"HELP",
                b"    Prints this help.",
            ];
            super::help(out, lines);
        }
        b"count" | b"getkeys" | b"getkeysandflags" | b"help" => {
            super::wrong_subcommand_arity(out, "command", &sub);
        }
        _ => super::unknown_subcommand(out, "COMMAND", &args[1]),
    }
}

/// `COMMAND` and `COMMAND INFO`: every command's entry, its subcommands nested.
fn info_all<R: Reply>(out: &mut R) {
    out.array_len(COMMANDS.len());
    COMMANDS.iter().for_each(|s| info(s.into(), out));
}

/// One command's `COMMAND DOCS` entry (the fields fc-server keeps: no arguments, no history),
/// its subcommands' nested in a container's.
fn docs<R: Reply>(meta: Meta, out: &mut R) {
    // Redis leaves out a complexity it has none for (`MONITOR`, `LOLWUT`).
    let complexity = !meta.doc.complexity.is_empty();
    let subs = !meta.subs.is_empty();
    out.map_len(3 + usize::from(complexity) + usize::from(subs));
    out.bulk(b"summary");
    out.bulk(meta.doc.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(meta.doc.since.as_bytes());
    out.bulk(b"group");
    out.bulk(meta.doc.group.as_bytes());
    if complexity {
        out.bulk(b"complexity");
        out.bulk(meta.doc.complexity.as_bytes());
    }
    if subs {
        out.bulk(b"subcommands");
        out.map_len(meta.subs.len());
        for sub in meta.subs {
            out.bulk(sub.full_name.as_bytes());
            docs(sub.into(), out);
        }
    }
}

/// One command's `COMMAND INFO` entry (Redis 7: ten elements, the last a container's
/// subcommands' entries).
fn info<R: Reply>(spec: Meta, out: &mut R) {
    out.array_len(10);
    out.bulk(spec.name.as_bytes());
    out.integer(i64::from(spec.arity));
    let flags: Vec<&str> = F::NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    out.set_len(flags.len());
    flags.iter().for_each(|f| out.simple(f.as_bytes()));
    let (first, last, step) = spec.keys;
    out.integer(i64::from(first));
    out.integer(i64::from(last));
    out.integer(i64::from(step));
    let categories = categories(spec.acl);
    out.set_len(categories.len());
    for c in categories {
        out.simple(format!("@{c}").as_bytes());
    }
    // Tips are bulk strings (flags and categories are simple strings).
    out.set_len(spec.tips.len());
    spec.tips.iter().for_each(|t| out.bulk(t.as_bytes()));
    out.set_len(spec.key_specs.len());
    for ks in spec.key_specs {
        out.map_len(3 + usize::from(!ks.notes.is_empty()));
        if !ks.notes.is_empty() {
            out.bulk(b"notes");
            out.bulk(ks.notes.as_bytes());
        }
        out.bulk(b"flags");
        out.set_len(ks.flags.len());
        ks.flags.iter().for_each(|f| out.simple(f.as_bytes()));
        out.bulk(b"begin_search");
        out.map_len(2);
        out.bulk(b"type");
        match ks.begin {
            Begin::Index(i) => {
                out.bulk(b"index");
                out.bulk(b"spec");
                out.map_len(1);
                out.bulk(b"index");
                out.integer(i64::from(i));
            }
            Begin::Keyword {
                keyword,
                start_from,
            } => {
                out.bulk(b"keyword");
                out.bulk(b"spec");
                out.map_len(2);
                out.bulk(b"keyword");
                out.bulk(keyword.as_bytes());
                out.bulk(b"startfrom");
                out.integer(i64::from(start_from));
            }
            Begin::Unknown => {
                out.bulk(b"unknown");
                out.bulk(b"spec");
                out.map_len(0);
            }
        }
        out.bulk(b"find_keys");
        out.map_len(2);
        out.bulk(b"type");
        match ks.find {
            Find::Range { last, step, limit } => {
                out.bulk(b"range");
                out.bulk(b"spec");
                out.map_len(3);
                out.bulk(b"lastkey");
                out.integer(i64::from(last));
                out.bulk(b"keystep");
                out.integer(i64::from(step));
                out.bulk(b"limit");
                out.integer(i64::from(limit));
            }
            Find::Keynum {
                keynum_index,
                first_key,
                step,
            } => {
                out.bulk(b"keynum");
                out.bulk(b"spec");
                out.map_len(3);
                out.bulk(b"keynumidx");
                out.integer(i64::from(keynum_index));
                out.bulk(b"firstkey");
                out.integer(i64::from(first_key));
                out.bulk(b"keystep");
                out.integer(i64::from(step));
            }
            Find::Unknown => {
                out.bulk(b"unknown");
                out.bulk(b"spec");
                out.map_len(0);
            }
        }
    }
    // Redis: an empty set for a command without subcommands, else an array of entries.
    if spec.subs.is_empty() {
        out.set_len(0);
    } else {
        out.array_len(spec.subs.len());
        spec.subs.iter().for_each(|sub| info(sub.into(), out));
    }
}

/// The names of the categories in `bits`.
fn categories(bits: u32) -> Vec<&'static str> {
    A::NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: each command
/// that passes the filter, then each of its subcommands that does (Redis filters them one by
/// one: `FILTERBY ACLCAT dangerous` lists `config|get` but not `config`).
fn list<R: Reply>(args: &[Bytes], out: &mut R) {
    let keep: Box<dyn Fn(Meta) -> bool> = match args.len() {
        2 => Box::new(|_| true),
        5 if args[2].eq_ignore_ascii_case(b"filterby") => {
            let what = args[3].to_ascii_lowercase();
            let value = &args[4];
            match what.as_slice() {
                // No modules: nothing belongs to one.
                b"module" => Box::new(|_| false),
                b"aclcat" => {
                    let wanted = A::NAMES
                        .iter()
                        .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(value))
                        .map_or(0, |(bit, _)| *bit);
                    Box::new(move |m| m.acl & wanted != 0)
                }
                b"pattern" => {
                    let pattern = fc_shard::GlobPattern::new(value, true);
                    Box::new(move |m| pattern.matches(m.name.as_bytes()))
                }
                _ => return out.error(b"ERR syntax error"),
            }
        }
        _ => return out.error(b"ERR syntax error"),
    };
    let names: Vec<&str> = COMMANDS
        .iter()
        .flat_map(|spec| {
            std::iter::once(Meta::from(spec)).chain(spec.subcommands().iter().map(Meta::from))
        })
        .filter(|&m| keep(m))
        .map(|m| m.name)
        .collect();
    out.array_len(names.len());
    names.iter().for_each(|n| out.bulk(n.as_bytes()));
}

/// `COMMAND GETKEYS <command> <args...>`: the keys the command's key specs find (a
/// container's: its subcommand's), with Redis's errors in Redis's order.
fn getkeys<R: Reply>(command: &[Bytes], out: &mut R, with_flags: bool) {
    let Some(named) = lookup_command(command) else {
        return out.error(b"ERR Invalid command specified");
    };
    let meta = Meta::from(named);
    if meta.key_specs.is_empty() {
        return out.error(b"ERR The command has no key arguments");
    }
    let argc = command.len() as i32;
    if (meta.arity >= 0 && argc != meta.arity) || argc < -meta.arity {
        return out.error(b"ERR Invalid number of arguments specified for command");
    }
    let mut keys: Vec<(usize, &[&str])> = super::keys_by_specs(meta.key_specs, command)
        .unwrap_or_default()
        .into_iter()
        .map(|(i, ks)| (i, ks.flags))
        .collect();
    // SORT's destination, which its key specs cannot find (Redis asks the command itself: the
    // last STORE's key, overwritten).
    if meta.name.eq_ignore_ascii_case("sort")
        && let Some(&at) = super::store_destinations("sort", command).last()
    {
        keys.push((at, &["OW", "update"]));
    }
    if keys.is_empty() {
        // Redis: no keys found is an invalid command unless its keys are optional.
        return if meta.flags & F::NO_MANDATORY_KEYS != 0 {
            out.array_len(0)
        } else {
            out.error(b"ERR Invalid arguments specified for command")
        };
    }
    out.array_len(keys.len());
    for (i, flags) in keys {
        if with_flags {
            out.array_len(2);
            out.bulk(&command[i]);
            out.set_len(flags.len());
            flags.iter().for_each(|f| out.simple(f.as_bytes()));
        } else {
            out.bulk(&command[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::command;
    use crate::reply::tests::TextSink;

    fn run(words: &str) -> Vec<String> {
        let args: Vec<Bytes> = words
            .split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let mut out = TextSink::default();
        command(&args, &mut out);
        out.lines
    }

    #[test]
    fn getkeys_follows_the_key_range() {
        assert_eq!(run("command getkeys mset a 1 b 2"), ["[2]", "\"a", "\"b"]);
        assert_eq!(run("command getkeys get k"), ["[1]", "\"k"]);
        assert_eq!(
            run("command getkeys nosuch k"),
            ["!ERR Invalid command specified"]
        );
        assert_eq!(
            run("command getkeys ping x"),
            ["!ERR The command has no key arguments"]
        );
        assert_eq!(
            run("command getkeys get a b"),
            ["!ERR Invalid number of arguments specified for command"]
        );
        assert_eq!(
            run("command getkeys get"),
            ["!ERR wrong number of arguments for 'command|getkeys' command"]
        );
        // Key counts (LMPOP, BZMPOP) and ranges ending before the timeout (BLPOP), as the key
        // specs say (answers as redis-server 7.0's).
        // SORT's destination: the last STORE's, as Redis's sortGetKeys finds it.
        assert_eq!(
            run("command getkeys sort k by store get store store d store e"),
            ["[2]", "\"k", "\"e"]
        );
        assert_eq!(
            run("command getkeys lmpop 2 a b left"),
            ["[2]", "\"a", "\"b"]
        );
        assert_eq!(
            run("command getkeys bzmpop 0 2 a b min count 3"),
            ["[2]", "\"a", "\"b"]
        );
        assert_eq!(run("command getkeys blpop a b 0"), ["[2]", "\"a", "\"b"]);
        assert_eq!(
            run("command getkeys lmpop x a left"),
            ["!ERR Invalid arguments specified for command"]
        );
        assert_eq!(
            run("command getkeysandflags lmove a b left left"),
            [
                "[2]", "[2]", "\"a", "<3>", "+RW", "+access", "+delete", "[2]", "\"b", "<2>",
                "+RW", "+insert"
            ]
        );
    }

    #[test]
    fn info_has_ten_elements_and_redis_flags() {
        let lines = run("command info get nosuch");
        assert_eq!(
            &lines[..6],
            ["[2]", "[10]", "\"get", "#2", "<2>", "+readonly"]
        );
        assert_eq!(lines.last().map(String::as_str), Some("nil"));
        assert_eq!(
            run("command list filterby pattern z*range"),
            ["[2]", "\"zrange", "\"zrevrange"]
        );
        let count = run("command count");
        assert_eq!(count, [format!("#{}", super::COMMANDS.len())]);
    }

    #[test]
    fn containers_nest_describe_and_list_their_subcommands() {
        // The tenth element: the subcommands' own entries, in name order.
        let lines = run("command info slowlog");
        assert_eq!(&lines[..3], ["[1]", "[10]", "\"slowlog"]);
        let nested: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("\"slowlog|"))
            .collect();
        assert_eq!(
            nested,
            [
                "\"slowlog|get",
                "\"slowlog|help",
                "\"slowlog|len",
                "\"slowlog|reset"
            ]
        );
        // A subcommand by its full name (any case): ten elements, no subcommands of its own.
        let lines = run("command info OBJECT|Encoding");
        assert_eq!(
            &lines[..10],
            [
                "[1]",
                "[10]",
                "\"object|encoding",
                "#3",
                "<1>",
                "+readonly",
                "#2",
                "#2",
                "#1",
                "<3>"
            ]
        );
        assert_eq!(lines.last().map(String::as_str), Some("<0>"));
        assert_eq!(
            run("command info config|nope get|x config|get|x"),
            ["[3]", "nil", "nil", "nil"]
        );
        // DOCS: a container's `subcommands` map; a subcommand's own entry.
        let lines = run("command docs latency");
        assert_eq!(lines[1], "\"latency");
        assert_eq!(lines[2], "{5}");
        let at = lines.iter().position(|l| l == "\"subcommands").unwrap();
        assert_eq!(lines[at + 1], "{7}");
        assert_eq!(lines[at + 2], "\"latency|doctor");
        assert_eq!(
            run("command docs slowlog|len nosuch")[..4],
            ["{1}", "\"slowlog|len", "{4}", "\"summary"]
        );
        // LIST: each subcommand after its container, filtered one by one; COUNT: commands.
        assert_eq!(
            run("command list filterby pattern slowlog*"),
            [
                "[5]",
                "\"slowlog",
                "\"slowlog|get",
                "\"slowlog|help",
                "\"slowlog|len",
                "\"slowlog|reset"
            ]
        );
        let dangerous = run("command list filterby aclcat dangerous");
        assert!(dangerous.contains(&"\"config|set".to_string()));
        assert!(!dangerous.contains(&"\"config".to_string()));
        assert_eq!(run("command list filterby module x"), ["[0]"]);
        assert_eq!(run("command list filterby nope x"), ["!ERR syntax error"]);
        let all = run("command list");
        assert!(all.len() > super::COMMANDS.len() + 90);
    }

    #[test]
    fn getkeys_of_a_container_uses_its_subcommand() {
        assert_eq!(run("command getkeys object encoding k"), ["[1]", "\"k"]);
        assert_eq!(run("command getkeys XINFO STREAM s FULL"), ["[1]", "\"s"]);
        assert_eq!(
            run("command getkeys memory usage k samples 5"),
            ["[1]", "\"k"]
        );
        assert_eq!(
            run("command getkeysandflags xgroup create s g $"),
            ["[1]", "[2]", "\"s", "<2>", "+RW", "+insert"]
        );
        assert_eq!(
            run("command getkeys object nope k"),
            ["!ERR Invalid command specified"]
        );
        assert_eq!(
            run("command getkeys object encoding"),
            ["!ERR Invalid number of arguments specified for command"]
        );
        // Redis's order: no key specs before the argument count.
        assert_eq!(
            run("command getkeys object help x"),
            ["!ERR The command has no key arguments"]
        );
        assert_eq!(
            run("command getkeys echo a b"),
            ["!ERR The command has no key arguments"]
        );
        assert_eq!(
            run("command getkeys sintercard 0 a"),
            ["!ERR Invalid arguments specified for command"]
        );
        assert_eq!(
            run("command getkeys config|get x"),
            ["!ERR Invalid command specified"]
        );
    }
}
