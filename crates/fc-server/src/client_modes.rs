//! A connection's modes and the `CLIENT` subcommands that set them: `TRACKING`, `CACHING`,
//! `GETREDIR`, `TRACKINGINFO` (client-side caching, see [`crate::tracking`]), `REPLY`,
//! `PAUSE`/`UNPAUSE` (see [`crate::pause`]), `NO-EVICT` and `NO-TOUCH`.
//!
//! A connection in a mode that must see each of its commands (tracking, replies off or
//! skipped) leaves the in-place path (see `ClientState::restricted`): its commands all run
//! through the session's dispatch, where the keys it reads are remembered and its replies
//! dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clients::{Client, flag};
use crate::pubsub::Subscriptions;
use crate::reply::{Reply, Resp};
use crate::shared::Shared;
use crate::tracking::Tracker;

/// One connection's modes.
#[derive(Default)]
pub(crate) struct Modes {
    /// `CLIENT TRACKING on`'s settings.
    pub(crate) tracker: Option<Arc<Tracker>>,
    /// `CLIENT CACHING yes|no` was given for the next command (or the open transaction).
    pub(crate) caching: bool,
    /// `CLIENT REPLY OFF`.
    reply_off: bool,
    /// `CLIENT REPLY SKIP`: the next command's reply is dropped.
    skip_next: bool,
    /// The command running has its reply dropped.
    skip_this: bool,
}

impl Modes {
    /// Whether every command must take the session's dispatch.
    pub(crate) fn restricts(&self) -> bool {
        self.tracker.is_some() || self.reply_off || self.skip_next || self.skip_this
    }

    /// After a command that wrote its reply into `out` from `mark` on: drops the reply when
    /// replies are off or skipped (messages written before `mark` stay), then moves a
    /// `CLIENT REPLY SKIP` on to the next command.
    pub(crate) fn after_reply(&mut self, out: &mut Resp, mark: usize) {
        if self.reply_off || self.skip_this {
            out.buf.truncate(mark);
        }
        self.skip_this = std::mem::take(&mut self.skip_next);
    }

    /// Stops tracking (`CLIENT TRACKING off`, `RESET`, the connection ends).
    pub(crate) fn stop_tracking(&mut self, shared: &Shared, id: u64) {
        if self.tracker.take().is_some() {
            shared.tracking.disable(id);
        }
        self.caching = false;
    }

    /// `RESET`: tracking off, replies on.
    pub(crate) fn reset(&mut self, shared: &Shared, id: u64) {
        self.stop_tracking(shared, id);
        self.reply_off = false;
        self.skip_next = false;
        self.skip_this = false;
    }

    /// Whether the client's reads of this command are remembered (tracking in the default
    /// mode, as `OPTIN`/`OPTOUT` and `CLIENT CACHING` decide).
    pub(crate) fn remembers(&self) -> Option<&Tracker> {
        self.tracker
            .as_deref()
            .filter(|t| t.remembers(self.caching))
    }
}

fn on_off(word: &[u8]) -> Option<bool> {
    match word.to_ascii_lowercase().as_slice() {
        b"on" => Some(true),
        b"off" => Some(false),
        _ => None,
    }
}

/// Runs `CLIENT <sub>` when `sub` is one of this module's; `false` otherwise.
pub(crate) fn client(
    shared: &Shared,
    me: &Arc<Client>,
    subs: &mut Option<Subscriptions>,
    modes: &mut Modes,
    args: &[Bytes],
    out: &mut Resp,
) -> bool {
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"tracking", n) if n >= 3 => tracking(shared, me, subs, modes, args, out),
        (b"caching", 3) => {
            let Some(tracker) = &modes.tracker else {
                return error(
                    out,
                    "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
                );
            };
            match args[2].to_ascii_lowercase().as_slice() {
                b"yes" if tracker.optin => modes.caching = true,
                b"yes" => {
                    return error(
                        out,
                        "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                    );
                }
                b"no" if tracker.optout => modes.caching = true,
                b"no" => {
                    return error(
                        out,
                        "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                    );
                }
                _ => return error(out, "ERR syntax error"),
            }
            out.ok();
        }
        (b"getredir", 2) => out.integer(redirect_of(modes)),
        (b"trackinginfo", 2) => {
            out.map_len(3);
            out.bulk(b"flags");
            let mut flags: Vec<&[u8]> = Vec::new();
            match &modes.tracker {
                None => flags.push(b"off"),
                Some(t) => {
                    flags.push(b"on");
                    if t.bcast {
                        flags.push(b"bcast");
                    }
                    if t.optin {
                        flags.push(b"optin");
                        if modes.caching {
                            flags.push(b"caching-yes");
                        }
                    }
                    if t.optout {
                        flags.push(b"optout");
                        if modes.caching {
                            flags.push(b"caching-no");
                        }
                    }
                    if t.noloop {
                        flags.push(b"noloop");
                    }
                    let bits = me.flags.load(std::sync::atomic::Ordering::Relaxed);
                    if bits & flag::BROKEN_REDIR != 0 {
                        flags.push(b"broken_redirect");
                    }
                }
            }
            out.set_len(flags.len());
            flags.into_iter().for_each(|f| out.bulk(f));
            out.bulk(b"redirect");
            out.integer(redirect_of(modes));
            out.bulk(b"prefixes");
            let prefixes: &[Bytes] = modes
                .tracker
                .as_ref()
                .filter(|t| t.bcast)
                .map_or(&[], |t| &t.prefixes);
            out.array_len(prefixes.len());
            prefixes.iter().for_each(|p| out.bulk(p));
        }
        (b"reply", 3) => match args[2].to_ascii_lowercase().as_slice() {
            b"on" => {
                modes.reply_off = false;
                modes.skip_this = false;
                modes.skip_next = false;
                out.ok();
            }
            b"off" => modes.reply_off = true,
            b"skip" => modes.skip_next = !modes.reply_off,
            _ => out.error(b"ERR syntax error"),
        },
        (b"pause", 3 | 4) => {
            let Some(ms) = fc_resp::number::parse_i64(&args[2]) else {
                return error(out, "ERR timeout is not an integer or out of range");
            };
            if ms < 0 {
                return error(out, "ERR timeout is negative");
            }
            let all = match args.get(3).map(|a| a.to_ascii_lowercase()) {
                None => true,
                Some(mode) if mode == b"all" => true,
                Some(mode) if mode == b"write" => false,
                Some(_) => return error(out, "ERR CLIENT PAUSE mode must be WRITE or ALL"),
            };
            let now = Instant::now();
            // A pause past any real horizon lasts a century.
            let until = now
                .checked_add(Duration::from_millis(ms as u64))
                .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
            shared.pause.pause(until, all);
            out.ok();
        }
        (b"pause", _) => {
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&args[1])
            );
            out.error(text.as_bytes());
        }
        (b"unpause", 2) => {
            shared.pause.unpause();
            out.ok();
        }
        (b"no-evict" | b"no-touch", 3) => {
            let Some(on) = on_off(&args[2]) else {
                return error(out, "ERR syntax error");
            };
            let bit = if sub == b"no-evict" {
                flag::NO_EVICT
            } else {
                flag::NO_TOUCH
            };
            me.set_flag(bit, on);
            out.ok();
        }
        _ => return false,
    }
    true
}

fn error(out: &mut Resp, text: &str) -> bool {
    out.error(text.as_bytes());
    true
}

/// `CLIENT GETREDIR`: the redirection (0: none) while tracking, else -1.
fn redirect_of(modes: &Modes) -> i64 {
    modes
        .tracker
        .as_ref()
        .map_or(-1, |t| t.redirect.as_ref().map_or(0, |r| r.id as i64))
}

/// Whether two broadcast prefixes overlap (one starts the other), as Redis checks.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN] [OPTOUT] [NOLOOP]`,
/// with Redis's checks in Redis's order.
fn tracking(
    shared: &Shared,
    me: &Arc<Client>,
    subs: &mut Option<Subscriptions>,
    modes: &mut Modes,
    args: &[Bytes],
    out: &mut Resp,
) {
    let (mut redirect, mut prefixes) = (None::<Arc<Client>>, Vec::<Bytes>::new());
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        match args[j].to_ascii_lowercase().as_slice() {
            b"redirect" if more => {
                j += 1;
                if redirect.is_some() {
                    return out.error(b"ERR A client can only redirect to a single other client");
                }
                let Some(id) = fc_resp::number::parse_i64(&args[j]) else {
                    return out.error(b"ERR value is not an integer or out of range");
                };
                match u64::try_from(id)
                    .ok()
                    .and_then(|id| shared.registry.get(id))
                {
                    Some(target) => redirect = Some(target),
                    None => {
                        return out.error(b"ERR The client ID you want redirect to does not exist");
                    }
                }
            }
            b"bcast" => bcast = true,
            b"optin" => optin = true,
            b"optout" => optout = true,
            b"noloop" => noloop = true,
            b"prefix" if more => {
                j += 1;
                prefixes.push(args[j].clone());
            }
            _ => return out.error(b"ERR syntax error"),
        }
        j += 1;
    }
    match on_off(&args[2]) {
        Some(false) => {
            modes.stop_tracking(shared, me.id);
            return out.ok();
        }
        None => return out.error(b"ERR syntax error"),
        Some(true) => {}
    }
    let old = modes.tracker.as_deref();
    let refusal: Option<String> = if !bcast && !prefixes.is_empty() {
        Some("ERR PREFIX option requires BCAST mode to be enabled".into())
    } else if old.is_some_and(|t| t.bcast != bcast) {
        Some("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into())
    } else if bcast && (optin || optout) {
        Some("ERR OPTIN and OPTOUT are not compatible with BCAST".into())
    } else if optin && optout {
        Some("ERR You can't specify both OPTIN mode and OPTOUT mode".into())
    } else if old.is_some_and(|t| (optin && t.optout) || (optout && t.optin)) {
        Some("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into())
    } else if bcast {
        prefix_collision(old.map_or(&[], |t| &t.prefixes), &prefixes)
    } else {
        None
    };
    if let Some(text) = refusal {
        return out.error(text.as_bytes());
    }
    if bcast {
        let mut all = old.map_or_else(Vec::new, |t| t.prefixes.clone());
        if prefixes.is_empty() {
            prefixes.push(Bytes::new());
        }
        for p in prefixes {
            if !all.contains(&p) {
                all.push(p);
            }
        }
        prefixes = all;
    }
    let queue = Arc::clone(
        subs.get_or_insert_with(|| Subscriptions::new(me, &shared.pubsub))
            .subscriber(),
    );
    let tracker = Arc::new(Tracker {
        client: Arc::clone(me),
        queue,
        redirect,
        bcast,
        optin,
        optout,
        noloop,
        prefixes,
    });
    shared.tracking.enable(Arc::clone(&tracker));
    modes.tracker = Some(tracker);
    out.ok();
}

/// Redis's prefix checks: a new prefix may not overlap one the client has, nor another new
/// one.
fn prefix_collision(existing: &[Bytes], new: &[Bytes]) -> Option<String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(held) = existing.iter().find(|h| overlap(h, p)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(held)
            ));
        }
        if let Some(other) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(other)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_collide_as_redis_checks_them() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        assert_eq!(prefix_collision(&[], &[b("a"), b("b")]), None);
        assert_eq!(
            prefix_collision(&[], &[b("a"), b("ab")]).as_deref(),
            Some(
                "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."
            )
        );
        assert_eq!(
            prefix_collision(&[b("user:")], &[b("user:1")]).as_deref(),
            Some(
                "ERR Prefix 'user:1' overlaps with an existing prefix 'user:'. Prefixes for a single client must not overlap."
            )
        );
        // The empty prefix (BCAST without PREFIX) overlaps everything.
        assert!(prefix_collision(&[b("")], &[b("x")]).is_some());
    }
}
