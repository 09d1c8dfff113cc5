//! ACL: users (SHA-256 password hashes, `on`/`off`, `nopass`), the rules Redis 7's
//! `ACL SETUSER` takes (commands and categories from the command table, key patterns with
//! `%R~`/`%W~`, channel patterns), the check a command passes before it runs, the `ACL` command,
//! the ACL log of denials, and the ACL file (`ACL SAVE`/`LOAD`, `aclfile`).
//!
//! Users live in one registry every worker shares ([`Acl`]); a change bumps an epoch, and a
//! connection re-reads its user when the epoch moved (one relaxed load per command). A user
//! allowed everything (`~* &* +@all`, as the `default` user is) is *open*: its connections
//! skip the check entirely, so ACL costs nothing until an operator restricts someone.
//!
//! Selectors (`(+get ~cache:*)`, Redis 7's) are permission sets beside the user's own: a
//! command runs when the user's own rules or any one selector allow all of it (command, keys
//! and channels together), and a refusal names the most telling reason among them (a key
//! over a command, a channel over a key), as Redis does.
//!
//! Differences from Redis 7.2, documented in docs/REDIS-COMPAT.md: first-argument rules
//! (`+select|0`) are refused; `ACL CAT` lists in table order.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::command::{A, Begin, COMMANDS, Find, KeySpec, SUBCOMMANDS, Spec};
use crate::reply::Reply;

/// Statistics slots (commands, then subcommands) a permission set covers.
const WORDS: usize = crate::stats::SLOTS / 64;

/// Entries the ACL log keeps (Redis's `acllog-max-len`).
const LOG_MAX: usize = 128;

/// Key pattern permissions.
const READ: u8 = 1;
const WRITE: u8 = 2;

/// One command rule as written (`+get`, `-@dangerous`, `+config|get`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    allow: bool,
    /// `@category` or a command name, lowercase.
    target: String,
}

/// A user.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) on: bool,
    nopass: bool,
    sanitize: Option<bool>,
    /// SHA-256 of each password, in the order added.
    passwords: Vec<[u8; 32]>,
    /// The commands: everything (`+@all`) or nothing (`-@all`), then the rules in order.
    all_base: bool,
    rules: Vec<Rule>,
    /// Permission per statistics slot.
    allowed: [u64; WORDS],
    /// Key patterns with their [`READ`]/[`WRITE`] permissions.
    keys: Vec<(Vec<u8>, u8)>,
    /// The same, compiled (by [`User::refresh`]): a restricted user's every key is matched
    /// against them, and compiling a pattern per check cost more than the rest of the check
    /// (a `perf` profile of a `~key:*` user at pipeline 16: 3.2% of the server's time).
    key_globs: Vec<(fc_shard::GlobPattern, u8)>,
    /// Channel patterns.
    channels: Vec<Vec<u8>>,
    /// The same, compiled (by [`User::refresh`]).
    channel_globs: Vec<fc_shard::GlobPattern>,
    /// Allowed everything: its connections skip the checks.
    pub(crate) open: bool,
    /// The permissions `~*`-like patterns give every key (no glob needed).
    every_key: u8,
    /// Selectors: permission sets of their own (commands, keys, channels); a command any one
    /// of them allows whole runs.
    selectors: Vec<User>,
}

/// What a key spec asks of its keys: [`READ`] for `access`, [`WRITE`] for `insert`,
/// `update` or `delete`, both when it says neither (Redis's rule).
fn need_of(ks: &KeySpec) -> u8 {
    let has = |f: &str| ks.flags.iter().any(|x| x.eq_ignore_ascii_case(f));
    let mut need = 0;
    if has("access") {
        need |= READ;
    }
    if has("insert") || has("delete") || has("update") {
        need |= WRITE;
    }
    if need == 0 { READ | WRITE } else { need }
}

/// Per command (table position): what its one key at argument 1 needs, when that is all
/// its key specs describe (the in-place path's commands, checked without finding keys).
static ONE_KEY_NEED: std::sync::LazyLock<Vec<Option<u8>>> = std::sync::LazyLock::new(|| {
    COMMANDS
        .iter()
        .map(|spec| match spec.key_specs {
            [
                ks @ KeySpec {
                    begin: Begin::Index(1),
                    find: Find::Range { last: 0, .. },
                    ..
                },
            ] => Some(need_of(ks)),
            _ => None,
        })
        .collect()
});

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denial {
    /// The command (its full name, `config|get`).
    Command(String),
    /// A key.
    Key(Bytes),
    /// A channel.
    Channel(Bytes),
}

impl Denial {
    /// The error a refused command gets (`-NOPERM ...`, Redis 7.2's texts).
    pub(crate) fn error(&self, user: &str) -> Vec<u8> {
        match self {
            Self::Command(name) => {
                format!("NOPERM User {user} has no permissions to run the '{name}' command")
                    .into_bytes()
            }
            Self::Key(_) => b"NOPERM No permissions to access a key".to_vec(),
            Self::Channel(_) => b"NOPERM No permissions to access a channel".to_vec(),
        }
    }

    /// The error of a queued command that its user may no longer run at `EXEC` (Redis's
    /// text).
    pub(crate) fn exec_error(&self) -> Vec<u8> {
        let reason = match self {
            Self::Command(_) => "no permission to execute the command or subcommand",
            Self::Key(_) => "no permission to touch the specified keys",
            Self::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
        .into_bytes()
    }

    /// `ACL DRYRUN`'s text.
    fn verbose(&self, user: &str) -> String {
        match self {
            Self::Command(name) => {
                format!("User {user} has no permissions to run the '{name}' command")
            }
            Self::Key(key) => format!(
                "User {user} has no permissions to access the '{}' key",
                String::from_utf8_lossy(key)
            ),
            Self::Channel(channel) => format!(
                "User {user} has no permissions to access the '{}' channel",
                String::from_utf8_lossy(channel)
            ),
        }
    }

    fn reason_object(&self) -> (&'static str, String) {
        match self {
            Self::Command(name) => ("command", name.clone()),
            Self::Key(key) => ("key", String::from_utf8_lossy(key).into_owned()),
            Self::Channel(ch) => ("channel", String::from_utf8_lossy(ch).into_owned()),
        }
    }
}

/// Where a denied command was running (`ACL LOG`'s `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Self::Toplevel => "toplevel",
            Self::Multi => "multi",
            Self::Lua => "lua",
        }
    }
}

fn sha256(password: &[u8]) -> [u8; 32] {
    Sha256::digest(password).into()
}

/// A `#`/`!` rule's SHA-256: 64 lowercase hexadecimal digits, as Redis requires.
fn parse_hash(text: &str) -> Result<[u8; 32], &'static str> {
    let malformed = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
    if text.len() != 64 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(malformed);
    }
    let mut hash = [0u8; 32];
    for (i, h) in hash.iter_mut().enumerate() {
        *h = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).map_err(|_| malformed)?;
    }
    Ok(hash)
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Statistics slot of subcommand `i` of [`SUBCOMMANDS`].
fn sub_slot(i: usize) -> usize {
    COMMANDS.len() + i
}

/// A slot's ACL categories.
fn slot_categories(slot: usize) -> u32 {
    match slot.checked_sub(COMMANDS.len()) {
        None => COMMANDS[slot].acl,
        Some(i) => SUBCOMMANDS[i].acl,
    }
}

/// The category bit named `name` (without `@`), any case.
fn category(name: &str) -> Option<u32> {
    if name.eq_ignore_ascii_case("all") {
        return Some(u32::MAX);
    }
    A::NAMES
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(name))
        .map(|(bit, _)| *bit)
}

/// The slots a command rule's target names: a category's commands and subcommands, a
/// command with its subcommands, or one subcommand. `None`: no such name.
fn target_slots(target: &str) -> Option<Vec<usize>> {
    if let Some(cat) = target.strip_prefix('@') {
        let bit = category(cat)?;
        return Some(
            (0..crate::command::slot_count())
                .filter(|&slot| bit == u32::MAX || slot_categories(slot) & bit != 0)
                .collect(),
        );
    }
    let (name, sub) = match target.split_once('|') {
        Some((name, sub)) => (name, Some(sub)),
        None => (target, None),
    };
    let spec = crate::command::lookup(name.as_bytes())?;
    let first = SUBCOMMANDS.as_ptr() as usize;
    let index = |s: &'static crate::command::Sub| {
        sub_slot((std::ptr::from_ref(s) as usize - first) / size_of::<crate::command::Sub>())
    };
    match sub {
        Some(sub) => {
            let sub = spec.subcommand(sub.as_bytes())?;
            Some(vec![index(sub)])
        }
        None => Some(
            std::iter::once(spec.index())
                .chain(spec.subcommands().iter().map(index))
                .collect(),
        ),
    }
}

impl User {
    /// A new user as `ACL SETUSER name` makes it: off, no password, no command, key or
    /// channel.
    fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            on: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            all_base: false,
            rules: Vec::new(),
            allowed: [0; WORDS],
            keys: Vec::new(),
            key_globs: Vec::new(),
            channels: Vec::new(),
            channel_globs: Vec::new(),
            open: false,
            every_key: 0,
            selectors: Vec::new(),
        }
    }

    /// What a connection of a removed user runs as until it is closed: nothing.
    pub(crate) fn removed(name: &str) -> Self {
        Self::new(name)
    }

    /// The `default` user: on, no password, everything.
    fn default_user() -> Self {
        let mut user = Self::new("default");
        for rule in ["on", "nopass", "~*", "&*", "+@all"] {
            user.apply(rule).expect("the default user's rules");
        }
        user.refresh();
        user
    }

    fn is_allowed(&self, slot: usize) -> bool {
        self.allowed
            .get(slot / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    fn set(&mut self, slot: usize, allow: bool) {
        if let Some(w) = self.allowed.get_mut(slot / 64) {
            if allow {
                *w |= 1 << (slot % 64);
            } else {
                *w &= !(1 << (slot % 64));
            }
        }
    }

    /// Recomputes the permission bits from the rules, and whether the user is open.
    fn refresh(&mut self) {
        self.allowed = [0; WORDS];
        if self.all_base {
            (0..crate::command::slot_count()).for_each(|s| self.set(s, true));
        }
        for rule in self.rules.clone() {
            for slot in target_slots(&rule.target).unwrap_or_default() {
                self.set(slot, rule.allow);
            }
        }
        let all_commands = (0..crate::command::slot_count()).all(|s| self.is_allowed(s));
        let all_keys = self
            .keys
            .iter()
            .any(|(p, perm)| p.as_slice() == b"*" && *perm == READ | WRITE);
        let all_channels = self.channels.iter().any(|p| p.as_slice() == b"*");
        // A selector allowed everything allows the user everything.
        self.open =
            all_commands && all_keys && all_channels || self.selectors.iter().any(|s| s.open);
        self.every_key = self
            .keys
            .iter()
            .filter(|(p, _)| p.as_slice() == b"*")
            .fold(0, |perm, (_, p)| perm | p);
        self.key_globs = self
            .keys
            .iter()
            .map(|(p, perm)| (fc_shard::GlobPattern::new(p, false), *perm))
            .collect();
        self.channel_globs = self
            .channels
            .iter()
            .map(|p| fc_shard::GlobPattern::new(p, false))
            .collect();
    }

    /// Applies one `ACL SETUSER` rule. The error's reason, as Redis words it.
    fn apply(&mut self, rule: &str) -> Result<(), &'static str> {
        let lower = rule.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.on = true,
            "off" => self.on = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" => self.keys = vec![(b"*".to_vec(), READ | WRITE)],
            "resetkeys" => self.keys.clear(),
            "allchannels" => self.channels = vec![b"*".to_vec()],
            "resetchannels" => self.channels.clear(),
            "allcommands" | "+@all" => {
                self.all_base = true;
                self.rules.clear();
            }
            "nocommands" | "-@all" => {
                self.all_base = false;
                self.rules.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "reset" => {
                *self = Self::new(&self.name);
                self.sanitize = Some(true);
            }
            _ => return self.apply_pattern(rule),
        }
        Ok(())
    }

    fn apply_pattern(&mut self, rule: &str) -> Result<(), &'static str> {
        let bytes = rule.as_bytes();
        match bytes.first() {
            Some(b'>' | b'#') => {
                let hash = match bytes[0] {
                    b'>' => sha256(&bytes[1..]),
                    _ => parse_hash(&rule[1..])?,
                };
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            Some(b'<' | b'!') => {
                let hash = match bytes[0] {
                    b'<' => sha256(&bytes[1..]),
                    _ => parse_hash(&rule[1..])?,
                };
                let before = self.passwords.len();
                self.passwords.retain(|p| *p != hash);
                if self.passwords.len() == before {
                    return Err(
                        "The password you are trying to remove from the user does not exist",
                    );
                }
            }
            Some(b'~') => self.add_keys(&bytes[1..], READ | WRITE),
            Some(b'%') => {
                let Some(tilde) = rule.find('~') else {
                    return Err("Syntax error");
                };
                let mut perm = 0;
                for flag in rule[1..tilde].bytes() {
                    perm |= match flag.to_ascii_uppercase() {
                        b'R' => READ,
                        b'W' => WRITE,
                        _ => return Err("Syntax error"),
                    };
                }
                if perm == 0 {
                    return Err("Syntax error");
                }
                self.add_keys(&bytes[tilde + 1..], perm);
            }
            Some(b'&') => {
                let pattern = bytes[1..].to_vec();
                if !self.channels.contains(&pattern) {
                    self.channels.push(pattern);
                }
            }
            Some(sign @ (b'+' | b'-')) => {
                let target = rule[1..].to_ascii_lowercase();
                if target_slots(&target).is_none() {
                    return Err("Unknown command or category name in ACL");
                }
                // A rule on the same target before this one says nothing any more.
                self.rules.retain(|r| r.target != target);
                self.rules.push(Rule {
                    allow: *sign == b'+',
                    target,
                });
            }
            Some(b'(') if rule.len() >= 2 && rule.ends_with(')') => {
                let mut selector = Self::new("");
                for op in rule[1..rule.len() - 1]
                    .split(' ')
                    .filter(|op| !op.is_empty())
                {
                    selector.apply_in_selector(op)?;
                }
                selector.refresh();
                self.selectors.push(selector);
            }
            _ => return Err("Syntax error"),
        }
        Ok(())
    }

    /// One rule inside a selector: commands, keys and channels only (Redis's set).
    fn apply_in_selector(&mut self, op: &str) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        let allowed = matches!(
            lower.as_str(),
            "allkeys"
                | "resetkeys"
                | "allchannels"
                | "resetchannels"
                | "allcommands"
                | "nocommands"
        ) || matches!(
            op.as_bytes().first(),
            Some(b'~' | b'%' | b'&' | b'+' | b'-')
        );
        if !allowed {
            return Err("Syntax error");
        }
        self.apply(op)
    }

    fn add_keys(&mut self, pattern: &[u8], perm: u8) {
        if let Some(entry) = self.keys.iter_mut().find(|(p, _)| p.as_slice() == pattern) {
            entry.1 |= perm;
        } else {
            self.keys.push((pattern.to_vec(), perm));
        }
    }

    /// `ACL GETUSER`'s `commands`: the base and the rules in order.
    fn commands_text(&self) -> String {
        let mut text = String::from(if self.all_base { "+@all" } else { "-@all" });
        for rule in &self.rules {
            text.push(' ');
            text.push(if rule.allow { '+' } else { '-' });
            text.push_str(&rule.target);
        }
        text
    }

    fn keys_text(&self) -> String {
        self.keys
            .iter()
            .map(|(p, perm)| {
                let prefix = match *perm {
                    READ => "%R~",
                    WRITE => "%W~",
                    _ => "~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(p))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn channels_text(&self) -> String {
        self.channels
            .iter()
            .map(|p| format!("&{}", String::from_utf8_lossy(p)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.on { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Some(true) => flags.push("sanitize-payload"),
            Some(false) => flags.push("skip-sanitize-payload"),
            None => {}
        }
        flags
    }

    /// Its `ACL LIST` line (also the ACL file's).
    pub(crate) fn describe(&self) -> String {
        let mut text = format!("user {}", self.name);
        for flag in self.flags() {
            text.push(' ');
            text.push_str(flag);
        }
        for hash in &self.passwords {
            text.push_str(" #");
            text.push_str(&hex(hash));
        }
        text.push(' ');
        text.push_str(&self.permissions_text());
        for selector in &self.selectors {
            text.push_str(" (");
            text.push_str(&selector.permissions_text());
            text.push(')');
        }
        text
    }

    /// Its keys, channels and commands as `ACL LIST` writes them (for a selector, inside its
    /// parentheses).
    fn permissions_text(&self) -> String {
        let mut parts = Vec::new();
        let keys = self.keys_text();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if !self.channels.iter().any(|c| c.as_slice() == b"*") {
            parts.push("resetchannels".into());
        }
        let channels = self.channels_text();
        if !channels.is_empty() {
            parts.push(channels);
        }
        parts.push(self.commands_text());
        parts.join(" ")
    }

    /// Whether `password` is one of its passwords (or it has none to give).
    fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hash = sha256(password);
        // Every hash is compared, whichever matches: the time says nothing of which.
        self.passwords.iter().fold(false, |found, p| {
            found | (p.iter().zip(&hash).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0)
        })
    }

    fn key_ok(&self, key: &[u8], need: u8) -> bool {
        if self.every_key & need == need {
            return true;
        }
        self.key_globs
            .iter()
            .any(|(pattern, perm)| perm & need == need && pattern.matches(key))
    }

    /// Whether a connection of this user may keep a subscription to `channel` (`pattern`: a
    /// `PSUBSCRIBE` pattern, allowed only by the same pattern or `*`), after its rules
    /// changed.
    pub(crate) fn may_subscribe(&self, channel: &[u8], pattern: bool) -> bool {
        self.open
            || self.channel_ok(channel, pattern)
            || self
                .selectors
                .iter()
                .any(|s| s.channel_ok(channel, pattern))
    }

    fn channel_ok(&self, channel: &[u8], literal: bool) -> bool {
        if literal {
            // A pattern subscription is allowed only by the same pattern (or `*`).
            self.channels
                .iter()
                .any(|p| p.as_slice() == b"*" || p.as_slice() == channel)
        } else {
            self.channel_globs.iter().any(|glob| glob.matches(channel))
        }
    }

    /// The in-place path's check of a one-key command (`spec`, no subcommands, its key
    /// `args[1]`): whether it may run; `false` also where this quick test cannot tell (the
    /// command then goes through the full check).
    #[inline]
    pub(crate) fn allows_in_place(&self, spec: &'static Spec, args: &[Bytes]) -> bool {
        let slot = spec.index();
        let Some(Some(need)) = ONE_KEY_NEED.get(slot).copied() else {
            return false;
        };
        self.is_allowed(slot) && args.len() > 1 && self.key_ok(&args[1], need)
    }

    /// Checks a whole command (`args`, its statistics `slot` and table entry `spec`) against
    /// this user: the command, then its keys, then its channels.
    pub(crate) fn check(
        &self,
        spec: &'static Spec,
        slot: usize,
        args: &[Bytes],
    ) -> Result<(), Denial> {
        self.check_keys_as(spec, slot, args, |key| key)
    }

    /// [`User::check`] of a command whose keys are stored for their database
    /// (`command::into_db`: a queued command at `EXEC`): each key is checked as its client
    /// named it.
    pub(crate) fn check_stored(
        &self,
        spec: &'static Spec,
        slot: usize,
        args: &[Bytes],
    ) -> Result<(), Denial> {
        self.check_keys_as(spec, slot, args, |key| fc_shard::split_namespace(key).1)
    }

    /// The user's own rules, then each selector: the first that allows the whole command
    /// lets it run; otherwise the most telling refusal (a channel over a key over a command;
    /// among equals, the first), as Redis picks it.
    fn check_keys_as(
        &self,
        spec: &'static Spec,
        slot: usize,
        args: &[Bytes],
        plain: impl Fn(&[u8]) -> &[u8],
    ) -> Result<(), Denial> {
        if self.open {
            return Ok(());
        }
        // Redis's order of relevance, then the later argument among refusals of one kind.
        let rank = |(d, at): &(Denial, usize)| {
            let kind = match d {
                Denial::Command(_) => 1,
                Denial::Key(_) => 2,
                Denial::Channel(_) => 4,
            };
            (kind, *at)
        };
        let mut worst = match self.check_set(spec, slot, args, &plain) {
            Ok(()) => return Ok(()),
            Err(denial) => denial,
        };
        for selector in &self.selectors {
            match selector.check_set(spec, slot, args, &plain) {
                Ok(()) => return Ok(()),
                Err(denial) if rank(&denial) > rank(&worst) => worst = denial,
                Err(_) => {}
            }
        }
        Err(worst.0)
    }

    /// One permission set's check (the user's own, or a selector's): the command, then its
    /// keys, then its channels. A refusal comes with the argument it concerns (0: the
    /// command).
    fn check_set(
        &self,
        spec: &'static Spec,
        slot: usize,
        args: &[Bytes],
        plain: &impl Fn(&[u8]) -> &[u8],
    ) -> Result<(), (Denial, usize)> {
        if self.open {
            return Ok(());
        }
        if !self.is_allowed(slot) {
            return Err((Denial::Command(crate::command::slot_name(slot)), 0));
        }
        let key_specs: &'static [KeySpec] = match slot.checked_sub(COMMANDS.len()) {
            None => spec.key_specs,
            Some(i) => SUBCOMMANDS[i].key_specs,
        };
        if !key_specs.is_empty() {
            for (at, ks) in crate::command::keys_by_specs(key_specs, args).unwrap_or_default() {
                let key = plain(&args[at]);
                if !self.key_ok(key, need_of(ks)) {
                    return Err((Denial::Key(Bytes::copy_from_slice(key)), at));
                }
            }
        }
        for (at, channel, literal) in channels(spec, args) {
            if !self.channel_ok(channel, literal) {
                return Err((Denial::Channel(channel.clone()), at));
            }
        }
        Ok(())
    }
}

/// The channels a pub/sub command names, each with its argument position and whether it is
/// a pattern (checked literally).
fn channels<'a>(spec: &Spec, args: &'a [Bytes]) -> Vec<(usize, &'a Bytes, bool)> {
    let from_one = |pattern: bool| {
        args.iter()
            .enumerate()
            .skip(1)
            .map(|(at, c)| (at, c, pattern))
            .collect()
    };
    match spec.name {
        "publish" | "spublish" => args.get(1).map(|c| (1, c, false)).into_iter().collect(),
        "subscribe" | "ssubscribe" => from_one(false),
        "psubscribe" => from_one(true),
        _ => Vec::new(),
    }
}

/// One ACL log entry.
#[derive(Debug, Clone)]
struct Entry {
    count: u64,
    reason: &'static str,
    context: &'static str,
    object: String,
    username: String,
    created_ms: u64,
    updated_ms: u64,
    client_info: String,
    id: u64,
}

#[derive(Debug, Default)]
struct Log {
    /// Newest first.
    entries: std::collections::VecDeque<Entry>,
    next_id: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every user, the ACL log, the ACL file.
#[derive(Debug)]
pub(crate) struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    epoch: AtomicU64,
    log: Mutex<Log>,
    file: Option<PathBuf>,
}

impl Acl {
    /// The registry: the `default` user, with `requirepass` as its password when given;
    /// then the ACL file's users when there is one.
    ///
    /// # Errors
    /// The ACL file cannot be read or has an error (its line named).
    pub(crate) fn new(requirepass: Option<&str>, file: Option<PathBuf>) -> anyhow::Result<Self> {
        let acl = Self {
            users: RwLock::new(BTreeMap::new()),
            epoch: AtomicU64::new(0),
            log: Mutex::new(Log::default()),
            file,
        };
        let mut default = User::default_user();
        if let Some(password) = requirepass {
            default
                .apply(&format!(">{password}"))
                .map_err(anyhow::Error::msg)?;
            default.refresh();
        }
        acl.write().insert("default".into(), Arc::new(default));
        if let Some(path) = &acl.file
            && path.exists()
        {
            acl.load().map_err(anyhow::Error::msg)?;
        }
        Ok(acl)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<User>>> {
        self.users.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<User>>> {
        self.users.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bumped by every change: a connection re-reads its user when it moved.
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The user `name` now.
    pub(crate) fn user(&self, name: &str) -> Option<Arc<User>> {
        self.read().get(name).cloned()
    }

    /// The `default` user (it always exists).
    pub(crate) fn default_user(&self) -> Arc<User> {
        self.user("default")
            .unwrap_or_else(|| Arc::new(User::default_user()))
    }

    /// Whether a new connection is authenticated as `default` without `AUTH`.
    pub(crate) fn default_needs_auth(&self) -> bool {
        let d = self.default_user();
        !(d.on && d.nopass)
    }

    /// `requirepass` (`CONFIG SET`): the default user's passwords become this one (none:
    /// `nopass`).
    pub(crate) fn set_requirepass(&self, password: Option<&str>) {
        let mut users = self.write();
        if let Some(user) = users.get("default") {
            let mut user = (**user).clone();
            match password {
                Some(p) => {
                    let _ = user.apply("resetpass");
                    let _ = user.apply(&format!(">{p}"));
                }
                None => {
                    let _ = user.apply("nopass");
                }
            }
            user.refresh();
            users.insert("default".into(), Arc::new(user));
        }
        drop(users);
        self.changed();
    }

    /// `AUTH [user] password`: the user when the pair is right and the user is on.
    pub(crate) fn authenticate(&self, name: &str, password: &[u8]) -> Option<Arc<User>> {
        let user = self.user(name)?;
        (user.password_ok(password) && user.on).then_some(user)
    }

    /// Records a denial (or a failed `AUTH`: `denial` `None`, `object` `AUTH`) in the log;
    /// the same one within a minute only counts up.
    pub(crate) fn log(
        &self,
        denial: Option<&Denial>,
        context: Context,
        username: &str,
        client_info: String,
    ) {
        let (reason, object) = denial.map_or(("auth", "AUTH".to_string()), Denial::reason_object);
        let now = now_ms();
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = log.entries.iter_mut().find(|e| {
            e.reason == reason
                && e.context == context.name()
                && e.object == object
                && e.username == username
                && now.saturating_sub(e.updated_ms) < 60_000
        }) {
            entry.count += 1;
            entry.updated_ms = now;
            entry.client_info = client_info;
            return;
        }
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(Entry {
            count: 1,
            reason,
            context: context.name(),
            object,
            username: username.to_string(),
            created_ms: now,
            updated_ms: now,
            client_info,
            id,
        });
        log.entries.truncate(LOG_MAX);
    }

    /// `ACL SETUSER name rule...`: every rule applies or none does.
    fn setuser(&self, name: &str, rules: &[Bytes]) -> Result<(), String> {
        if name.bytes().any(|b| b == b' ' || b == 0) {
            return Err("ERR Usernames can't contain spaces or null characters".into());
        }
        let mut users = self.write();
        let mut user = users
            .get(name)
            .map_or_else(|| User::new(name), |u| (**u).clone());
        let rules: Vec<String> = rules
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        let rules = merge_selectors(&rules).map_err(|start| {
            format!("ERR Unmatched parenthesis in acl selector starting at '{start}'.")
        })?;
        for text in rules {
            user.apply(&text).map_err(|reason| {
                format!("ERR Error in ACL SETUSER modifier '{text}': {reason}")
            })?;
        }
        user.refresh();
        users.insert(name.to_string(), Arc::new(user));
        drop(users);
        self.changed();
        Ok(())
    }

    /// The ACL file's text: every user's line.
    fn file_text(&self) -> String {
        self.read().values().map(|u| u.describe() + "\n").collect()
    }

    /// `ACL SAVE`.
    fn save(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err(NO_FILE.into());
        };
        write_atomically(path, &self.file_text())
            .map_err(|e| format!("ERR There was an error trying to save the ACLs. Please check the server logs for more information ({e})"))
    }

    /// `ACL LOAD` (and the start): the file replaces every user, or nothing changes.
    fn load(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err(NO_FILE.into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "ERR Error loading ACLs, opening file '{}': {e}",
                path.display()
            )
        })?;
        let mut loaded: BTreeMap<String, Arc<User>> = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let fail = |why: String| format!("ERR {}:{}: {why}", path.display(), n + 1);
            if words.first() != Some(&"user") || words.len() < 2 {
                return Err(fail("should start with user keyword".into()));
            }
            let name = words[1];
            if loaded.contains_key(name) {
                return Err(fail(format!("Duplicate user '{name}' found")));
            }
            let mut user = User::new(name);
            let rules: Vec<String> = words[2..].iter().map(|w| (*w).to_string()).collect();
            let rules = merge_selectors(&rules).map_err(|start| {
                fail(format!(
                    "Unmatched parenthesis in acl selector starting at '{start}'."
                ))
            })?;
            for rule in &rules {
                user.apply(rule)
                    .map_err(|why| fail(format!("Error in applying operation '{rule}': {why}")))?;
            }
            user.refresh();
            loaded.insert(name.to_string(), Arc::new(user));
        }
        loaded
            .entry("default".into())
            .or_insert_with(|| Arc::new(User::default_user()));
        *self.write() = loaded;
        self.changed();
        Ok(())
    }
}

/// Joins the arguments of a selector split across several (`(+get` `~k*)`, as a shell or
/// `redis-cli` splits `(+get ~k*)`) into one, as Redis does: from an argument that opens a
/// parenthesis without closing it, up to one that ends with `)`. `Err`: the argument an
/// unclosed selector starts at.
fn merge_selectors(args: &[String]) -> Result<Vec<String>, String> {
    let mut merged = Vec::with_capacity(args.len());
    let mut open: Option<(usize, String)> = None;
    for (i, arg) in args.iter().enumerate() {
        if arg.starts_with('(') && !arg.ends_with(')') {
            // A new opening starts over, as Redis's merge does.
            open = Some((i, arg.clone()));
            continue;
        }
        if let Some((start, mut selector)) = open.take() {
            selector.push(' ');
            selector.push_str(arg);
            if arg.ends_with(')') {
                merged.push(selector);
            } else {
                open = Some((start, selector));
            }
            continue;
        }
        merged.push(arg.clone());
    }
    match open {
        Some((start, _)) => Err(args[start].clone()),
        None => Ok(merged),
    }
}

const NO_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let temp = path.with_extension("acl.tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temp, path)
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

/// What `ACL DELUSER` did: the users removed (their connections are to be closed).
pub(crate) type Removed = Vec<String>;

/// `ACL <subcommand>` for a connection authenticated as `whoami`; `client_info` is its
/// `CLIENT INFO` line (for the log). The users `DELUSER` or `LOAD` removed are returned so
/// that their connections can be closed.
pub(crate) fn command<R: Reply>(acl: &Acl, whoami: &str, args: &[Bytes], out: &mut R) -> Removed {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    match sub.as_str() {
        "setuser" => match acl.setuser(&text(&args[2]), &args[3..]) {
            Ok(()) => out.ok(),
            Err(e) => out.error(e.as_bytes()),
        },
        "getuser" => match acl.user(&text(&args[2])) {
            None => out.null(),
            Some(user) => {
                out.map_len(6);
                out.bulk(b"flags");
                let flags = user.flags();
                out.array_len(flags.len());
                flags.iter().for_each(|f| out.bulk(f.as_bytes()));
                out.bulk(b"passwords");
                out.array_len(user.passwords.len());
                user.passwords
                    .iter()
                    .for_each(|p| out.bulk(hex(p).as_bytes()));
                out.bulk(b"commands");
                out.bulk(user.commands_text().as_bytes());
                out.bulk(b"keys");
                out.bulk(user.keys_text().as_bytes());
                out.bulk(b"channels");
                out.bulk(user.channels_text().as_bytes());
                out.bulk(b"selectors");
                out.array_len(user.selectors.len());
                for selector in &user.selectors {
                    out.map_len(3);
                    out.bulk(b"commands");
                    out.bulk(selector.commands_text().as_bytes());
                    out.bulk(b"keys");
                    out.bulk(selector.keys_text().as_bytes());
                    out.bulk(b"channels");
                    out.bulk(selector.channels_text().as_bytes());
                }
            }
        },
        "deluser" => {
            let mut removed = Vec::new();
            for name in &args[2..] {
                if name.as_ref() == b"default" {
                    return {
                        out.error(b"ERR The 'default' user cannot be removed");
                        Vec::new()
                    };
                }
            }
            {
                let mut users = acl.write();
                for name in &args[2..] {
                    let name = text(name);
                    if users.remove(&name).is_some() {
                        removed.push(name);
                    }
                }
            }
            acl.changed();
            out.integer(removed.len() as i64);
            return removed;
        }
        "list" => {
            let lines: Vec<String> = acl.read().values().map(|u| u.describe()).collect();
            out.array_len(lines.len());
            lines.iter().for_each(|l| out.bulk(l.as_bytes()));
        }
        "users" => {
            let names: Vec<String> = acl.read().keys().cloned().collect();
            out.array_len(names.len());
            names.iter().for_each(|n| out.bulk(n.as_bytes()));
        }
        "whoami" => out.bulk(whoami.as_bytes()),
        "cat" => {
            if let Some(name) = args.get(2) {
                let name = text(name);
                let Some(bit) = category(&name).filter(|&b| b != u32::MAX) else {
                    return {
                        out.error(format!("ERR Unknown category '{name}'").as_bytes());
                        Vec::new()
                    };
                };
                let names: Vec<String> = (0..crate::command::slot_count())
                    .filter(|&s| slot_categories(s) & bit != 0)
                    .map(crate::command::slot_name)
                    .collect();
                out.array_len(names.len());
                names.iter().for_each(|n| out.bulk(n.as_bytes()));
            } else {
                out.array_len(A::NAMES.len());
                A::NAMES.iter().for_each(|(_, n)| out.bulk(n.as_bytes()));
            }
        }
        "genpass" => {
            let bits = match args.get(2) {
                None => Some(256),
                Some(b) => fc_resp::number::parse_i64(b).filter(|&n| (1..=4096).contains(&n)),
            };
            let Some(bits) = bits else {
                out.error(b"ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
                return Vec::new();
            };
            let chars = (bits as usize).div_ceil(4);
            let mut random = vec![0u8; chars.div_ceil(2)];
            if getrandom::fill(&mut random).is_err() {
                out.error(b"ERR the system's random source failed");
                return Vec::new();
            }
            let mut password = hex(&random);
            password.truncate(chars);
            out.bulk(password.as_bytes());
        }
        "dryrun" => dryrun(acl, args, out),
        "log" => log_command(acl, args, out),
        "save" => match acl.save() {
            Ok(()) => out.ok(),
            Err(e) => out.error(e.as_bytes()),
        },
        "load" => {
            let before: Vec<String> = acl.read().keys().cloned().collect();
            match acl.load() {
                Ok(()) => {
                    out.ok();
                    let users = acl.read();
                    return before
                        .into_iter()
                        .filter(|n| !users.contains_key(n))
                        .collect();
                }
                Err(e) => out.error(e.as_bytes()),
            }
        }
        "help" => {
            out.array_len(HELP.len());
            HELP.iter().for_each(|l| out.simple(l.as_bytes()));
        }
        _ => {
            let text = format!(
                "ERR unknown subcommand '{}'. Try ACL HELP.",
                String::from_utf8_lossy(&args[1])
            );
            out.error(text.as_bytes());
        }
    }
    Vec::new()
}

fn dryrun<R: Reply>(acl: &Acl, args: &[Bytes], out: &mut R) {
    let name = String::from_utf8_lossy(&args[2]);
    let Some(user) = acl.user(&name) else {
        return out.error(format!("ERR User '{name}' not found").as_bytes());
    };
    let command = &args[3..];
    let Some(spec) = crate::command::lookup(&command[0]) else {
        return out.error(
            format!(
                "ERR Command '{}' not found",
                String::from_utf8_lossy(&command[0])
            )
            .as_bytes(),
        );
    };
    if !spec.arity_ok(command.len()) {
        return out.error(
            format!("ERR wrong number of arguments for '{}' command", spec.name).as_bytes(),
        );
    }
    let slot = match crate::command::select(spec, command) {
        crate::command::Selected::Slot(slot) | crate::command::Selected::SubArity(slot) => slot,
        crate::command::Selected::UnknownSub => spec.index(),
    };
    match user.check(spec, slot, command) {
        Ok(()) => out.ok(),
        Err(denial) => out.bulk(denial.verbose(&user.name).as_bytes()),
    }
}

fn log_command<R: Reply>(acl: &Acl, args: &[Bytes], out: &mut R) {
    let mut log = acl.log.lock().unwrap_or_else(PoisonError::into_inner);
    let count = match args.get(2) {
        None => 10,
        Some(a) if a.eq_ignore_ascii_case(b"reset") => {
            log.entries.clear();
            return out.ok();
        }
        Some(a) => match fc_resp::number::parse_i64(a) {
            Some(n) => n.max(0) as usize,
            None => return out.error(b"ERR value is not an integer or out of range"),
        },
    };
    let now = now_ms();
    let entries: Vec<&Entry> = log.entries.iter().take(count).collect();
    out.array_len(entries.len());
    for e in entries {
        out.map_len(10);
        out.bulk(b"count");
        out.integer(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(e.object.as_bytes());
        out.bulk(b"username");
        out.bulk(e.username.as_bytes());
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.created_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.trim_end().as_bytes());
        out.bulk(b"entry-id");
        out.integer(e.id as i64);
        out.bulk(b"timestamp-created");
        out.integer(e.created_ms as i64);
        out.bulk(b"timestamp-last-updated");
        out.integer(e.updated_ms as i64);
    }
    drop(log);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &str) -> Vec<Bytes> {
        words
            .split_whitespace()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn check(user: &User, words: &str) -> Result<(), Denial> {
        let a = args(words);
        let spec = crate::command::lookup(&a[0]).unwrap();
        let slot = match crate::command::select(spec, &a) {
            crate::command::Selected::Slot(s) => s,
            other => panic!("{other:?}"),
        };
        user.check(spec, slot, &a)
    }

    fn user(rules: &str) -> User {
        let mut u = User::new("u");
        for r in rules.split_whitespace() {
            u.apply(r).unwrap();
        }
        u.refresh();
        u
    }

    #[test]
    fn every_category_allows_exactly_its_commands() {
        // For each category, a user with only that category may run a command (or a
        // subcommand) exactly when the table gives it that category: the table and the check
        // agree for every command.
        for &(bit, name) in A::NAMES {
            let u = user(&format!("on nopass ~* &* +@{name}"));
            for slot in 0..crate::command::slot_count() {
                assert_eq!(
                    u.is_allowed(slot),
                    slot_categories(slot) & bit != 0,
                    "@{name} and {}",
                    crate::command::slot_name(slot)
                );
            }
            let minus = user(&format!("on nopass ~* &* +@all -@{name}"));
            for slot in 0..crate::command::slot_count() {
                assert_eq!(minus.is_allowed(slot), slot_categories(slot) & bit == 0);
            }
        }
    }

    #[test]
    fn commands_keys_and_channels_are_checked() {
        let u = user(
            "on nopass ~app:* %R~ro:* %W~wo:* &news.* +get +set +publish +psubscribe +config|get",
        );
        assert!(check(&u, "get app:1").is_ok());
        assert!(check(&u, "get ro:1").is_ok());
        assert_eq!(
            check(&u, "set ro:1 v"),
            Err(Denial::Key(Bytes::from("ro:1")))
        );
        assert_eq!(check(&u, "get wo:1"), Err(Denial::Key(Bytes::from("wo:1"))));
        assert_eq!(
            check(&u, "get other"),
            Err(Denial::Key(Bytes::from("other")))
        );
        assert_eq!(check(&u, "del app:1"), Err(Denial::Command("del".into())));
        assert!(check(&u, "config get maxmemory").is_ok());
        assert_eq!(
            check(&u, "config set maxmemory 1"),
            Err(Denial::Command("config|set".into()))
        );
        assert!(check(&u, "publish news.today hi").is_ok());
        assert_eq!(
            check(&u, "publish sports hi"),
            Err(Denial::Channel(Bytes::from("sports")))
        );
        // A pattern subscription needs the same pattern.
        assert!(check(&u, "psubscribe news.*").is_ok());
        assert!(check(&u, "psubscribe news.t*").is_err());
    }

    #[test]
    fn the_in_place_check_agrees_with_the_full_one() {
        for rules in [
            "on nopass ~app:* %R~ro:* +get +set +incr",
            "on nopass ~* &* +@all -flushall",
            "on nopass %R~* +@all",
            "on nopass +@all",
        ] {
            let u = user(rules);
            for words in [
                "get app:1",
                "get ro:1",
                "set ro:1 v",
                "set app:1 v",
                "incr other",
                "get other",
                "append app:1 x",
            ] {
                let a = args(words);
                let spec = crate::command::lookup(&a[0]).unwrap();
                // The quick test never allows what the full check refuses, and allows every
                // one-key command the full check allows.
                assert_eq!(
                    u.allows_in_place(spec, &a),
                    check(&u, words).is_ok(),
                    "{rules}: {words}"
                );
            }
        }
    }

    #[test]
    fn rules_describe_as_redis_lists_them() {
        let mut u = User::new("bob");
        for r in [
            "on",
            ">pw1",
            "~app:*",
            "%R~ro:*",
            "&news.*",
            "+get",
            "+set",
            "-@dangerous",
            "+get",
        ] {
            u.apply(r).unwrap();
        }
        u.refresh();
        assert_eq!(
            u.describe(),
            format!(
                "user bob on #{} ~app:* %R~ro:* resetchannels &news.* -@all +set -@dangerous +get",
                hex(&sha256(b"pw1"))
            )
        );
        assert_eq!(
            User::default_user().describe(),
            "user default on nopass ~* &* +@all"
        );
        assert!(User::default_user().open);
        assert_eq!(
            User::new("alice").describe(),
            "user alice off resetchannels -@all"
        );
        let mut r = user("on >x ~* +@all");
        r.apply("reset").unwrap();
        assert_eq!(
            r.describe(),
            "user u off sanitize-payload resetchannels -@all"
        );
        let mut bad = User::new("x");
        assert_eq!(
            bad.apply("+nosuch"),
            Err("Unknown command or category name in ACL")
        );
        assert_eq!(
            bad.apply("<nopw"),
            Err("The password you are trying to remove from the user does not exist")
        );
        assert!(bad.apply("#abc").is_err());
        assert_eq!(bad.apply("%X~a"), Err("Syntax error"));
        assert_eq!(bad.apply("whatever"), Err("Syntax error"));
    }

    #[test]
    fn passwords_are_hashed_and_checked() {
        let u = user("on >secret >other");
        assert!(u.password_ok(b"secret"));
        assert!(u.password_ok(b"other"));
        assert!(!u.password_ok(b"wrong"));
        assert!(!u.describe().contains("secret"));
        let mut hashed = user(&format!("on #{}", hex(&sha256(b"pw"))));
        assert!(hashed.password_ok(b"pw"));
        hashed.apply(&format!("!{}", hex(&sha256(b"pw")))).unwrap();
        assert!(!hashed.password_ok(b"pw"));
        assert!(hashed.apply("!ABC").is_err());
    }

    #[test]
    fn the_acl_file_round_trips_and_a_bad_line_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let acl = Acl::new(None, Some(path.clone())).unwrap();
        acl.setuser("carol", &args("on >pw ~c:* +@read")).unwrap();
        acl.save().unwrap();
        let again = Acl::new(None, Some(path.clone())).unwrap();
        assert_eq!(
            again.user("carol").unwrap().describe(),
            acl.user("carol").unwrap().describe()
        );
        std::fs::write(
            &path,
            "user default on nopass ~* &* +@all\nuser dave on +nosuch\n",
        )
        .unwrap();
        let err = again.load().unwrap_err();
        assert!(err.contains("users.acl:2"), "{err}");
        assert!(again.user("carol").is_some(), "nothing changed");
    }

    /// Selectors, checked against redis-server 7.0.15 by hand: the same `ACL LIST` lines,
    /// errors and `ACL DRYRUN` answers.
    #[test]
    fn selectors_allow_what_any_one_of_them_allows_whole() {
        let acl = Acl::new(None, None).unwrap();
        acl.setuser("u1", &args("on nopass (+get ~k*) (+set ~w* &chan)"))
            .unwrap();
        let u1 = acl.user("u1").unwrap();
        assert_eq!(
            u1.describe(),
            "user u1 on nopass resetchannels -@all (~k* resetchannels -@all +get) (~w* resetchannels &chan -@all +set)"
        );
        assert_eq!(check(&u1, "get k1"), Ok(()));
        // Root refuses the command, the first selector the key, the second the command: the
        // key is the most telling reason.
        assert_eq!(
            check(&u1, "get w1"),
            Err(Denial::Key(Bytes::from_static(b"w1")))
        );
        assert_eq!(check(&u1, "set w1 x"), Ok(()));
        assert_eq!(
            check(&u1, "set k1 x"),
            Err(Denial::Key(Bytes::from_static(b"k1")))
        );
        assert_eq!(check(&u1, "del k1"), Err(Denial::Command("del".into())));
        assert_eq!(
            check(&u1, "publish chan x"),
            Err(Denial::Command("publish".into()))
        );
        // One argument or several (as redis-cli splits `(+get ~k*)`).
        acl.setuser("u2", &args("on nopass (+get ~k*)")).unwrap();
        assert_eq!(
            acl.user("u2").unwrap().describe(),
            "user u2 on nopass resetchannels -@all (~k* resetchannels -@all +get)"
        );
        let setuser = |rules: &[&str]| {
            let rules: Vec<Bytes> = rules
                .iter()
                .map(|r| Bytes::copy_from_slice(r.as_bytes()))
                .collect();
            acl.setuser("u3", &rules)
        };
        assert_eq!(
            setuser(&["(+get", "~k*"]),
            Err("ERR Unmatched parenthesis in acl selector starting at '(+get'.".into())
        );
        assert_eq!(
            setuser(&["(+get)x"]),
            Err("ERR Unmatched parenthesis in acl selector starting at '(+get)x'.".into())
        );
        for bad in ["(on)", "(>pw)", "(nopass)", "((+get))", "x(+get)"] {
            assert_eq!(
                setuser(&[bad]),
                Err(format!(
                    "ERR Error in ACL SETUSER modifier '{bad}': Syntax error"
                ))
            );
        }
        assert_eq!(
            setuser(&["(+nosuch)"]),
            Err("ERR Error in ACL SETUSER modifier '(+nosuch)': Unknown command or category name in ACL".into())
        );
        setuser(&["()", "(  +get   )", "(+@all ~* &*)", "(+config|get ~x)"]).unwrap();
        assert_eq!(
            acl.user("u3").unwrap().describe(),
            "user u3 off resetchannels -@all (resetchannels -@all) (resetchannels -@all +get) (~* &* +@all) (~x resetchannels -@all +config|get)"
        );
        // A selector allowed everything opens the user.
        assert!(acl.user("u3").unwrap().open);
        setuser(&[
            "clearselectors",
            "(%R~r* ~k1 %W~w* resetchannels &a* +@read)",
        ])
        .unwrap();
        let u3 = acl.user("u3").unwrap();
        assert_eq!(
            u3.describe(),
            "user u3 off resetchannels -@all (%R~r* ~k1 %W~w* resetchannels &a* -@all +@read)"
        );
        assert!(!u3.open);
        assert!(u3.may_subscribe(b"abc", false));
        assert!(!u3.may_subscribe(b"b", false));
        // `reset` clears them.
        setuser(&["reset"]).unwrap();
        assert!(acl.user("u3").unwrap().selectors.is_empty());
        // Among refusals of one kind, the later argument's is reported (redis-server 7.0.15:
        // `b1` both ways, `zz`).
        acl.setuser("t", &args("on nopass ~b* +@all (~a* +@all)"))
            .unwrap();
        acl.setuser("t2", &args("on nopass ~a* +@all (~b* +@all)"))
            .unwrap();
        for name in ["t", "t2"] {
            assert_eq!(
                check(&acl.user(name).unwrap(), "mset a1 x b1 y"),
                Err(Denial::Key(Bytes::from_static(b"b1")))
            );
        }
        acl.setuser("t3", &args("on nopass +@all &x (~k* +@all &y*)"))
            .unwrap();
        let t3 = acl.user("t3").unwrap();
        assert_eq!(check(&t3, "publish yz m"), Ok(()));
        assert_eq!(
            check(&t3, "subscribe x zz"),
            Err(Denial::Channel(Bytes::from_static(b"zz")))
        );
    }

    #[test]
    fn selectors_survive_the_acl_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let acl = Acl::new(None, Some(path.clone())).unwrap();
        acl.setuser(
            "erin",
            &args("on >pw ~e:* +@read (+set ~w* &chan) (+del %W~d*)"),
        )
        .unwrap();
        acl.save().unwrap();
        let again = Acl::new(None, Some(path.clone())).unwrap();
        assert_eq!(
            again.user("erin").unwrap().describe(),
            acl.user("erin").unwrap().describe()
        );
        assert_eq!(again.user("erin").unwrap().selectors.len(), 2);
        std::fs::write(&path, "user frank on (+get ~k*\n").unwrap();
        let err = again.load().unwrap_err();
        assert!(err.contains("Unmatched parenthesis"), "{err}");
    }
}
