//! Redis settings fc-server accepts and reports but does not act on: the encoding thresholds
//! (`hash-max-listpack-entries`, `zset-max-ziplist-value`, `list-compress-depth`...), lazy
//! freeing, and the eviction sampler's tuning. Tools and client test suites set them first
//! thing (`CONFIG SET zset-max-ziplist-entries 128`); fast-cache's data structures have no such
//! thresholds and it frees in place, so each value is validated as Redis validates it, kept,
//! and shown by `CONFIG GET` — under both names where Redis 7 has an alias — and changes
//! nothing else.

use std::sync::{PoisonError, RwLock};

/// How a knob's value is checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// A byte count (`64`, `1kb`, `2mb`), at most `i64::MAX`.
    Memory,
    /// `yes` or `no`.
    YesNo,
}

/// One knob: its Redis 7 name, its older alias, how it is checked, and Redis 7.0's default.
struct Knob {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    default: &'static str,
}

const LONG: Kind = Kind::Int {
    min: 0,
    max: i64::MAX,
};

const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}

/// Every knob, with the defaults Debian's redis-server 7.0.15 reports.
const KNOBS: &[Knob] = &[
    Knob {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        kind: LONG,
        default: "512",
    },
    Knob {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        kind: Kind::Memory,
        default: "64",
    },
    Knob {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        kind: int(i32::MIN as i64, i32::MAX as i64),
        default: "-2",
    },
    Knob {
        name: "list-compress-depth",
        alias: None,
        kind: int(0, i32::MAX as i64),
        default: "0",
    },
    Knob {
        name: "set-max-intset-entries",
        alias: None,
        kind: LONG,
        default: "512",
    },
    Knob {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        kind: LONG,
        default: "128",
    },
    Knob {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        kind: Kind::Memory,
        default: "64",
    },
    Knob {
        name: "hll-sparse-max-bytes",
        alias: None,
        kind: Kind::Memory,
        default: "3000",
    },
    Knob {
        name: "stream-node-max-bytes",
        alias: None,
        kind: Kind::Memory,
        default: "4096",
    },
    Knob {
        name: "stream-node-max-entries",
        alias: None,
        kind: LONG,
        default: "100",
    },
    Knob {
        name: "activerehashing",
        alias: None,
        kind: Kind::YesNo,
        default: "yes",
    },
    Knob {
        name: "lazyfree-lazy-eviction",
        alias: None,
        kind: Kind::YesNo,
        default: "no",
    },
    Knob {
        name: "lazyfree-lazy-expire",
        alias: None,
        kind: Kind::YesNo,
        default: "no",
    },
    Knob {
        name: "lazyfree-lazy-server-del",
        alias: None,
        kind: Kind::YesNo,
        default: "no",
    },
    Knob {
        name: "lazyfree-lazy-user-del",
        alias: None,
        kind: Kind::YesNo,
        default: "no",
    },
    Knob {
        name: "lazyfree-lazy-user-flush",
        alias: None,
        kind: Kind::YesNo,
        default: "no",
    },
    Knob {
        name: "dynamic-hz",
        alias: None,
        kind: Kind::YesNo,
        default: "yes",
    },
    Knob {
        name: "maxmemory-samples",
        alias: None,
        kind: int(1, i32::MAX as i64),
        default: "5",
    },
    Knob {
        name: "maxmemory-eviction-tenacity",
        alias: None,
        kind: int(0, 100),
        default: "10",
    },
    Knob {
        name: "lfu-log-factor",
        alias: None,
        kind: int(0, i32::MAX as i64),
        default: "10",
    },
    Knob {
        name: "lfu-decay-time",
        alias: None,
        kind: int(0, i32::MAX as i64),
        default: "1",
    },
    Knob {
        name: "active-expire-effort",
        alias: None,
        kind: int(1, 10),
        default: "1",
    },
];

/// The knobs' current values (in [`KNOBS`] order).
pub(crate) struct Knobs {
    values: RwLock<Vec<String>>,
}

impl Knobs {
    pub(crate) fn new() -> Self {
        Self {
            values: RwLock::new(KNOBS.iter().map(|k| k.default.to_string()).collect()),
        }
    }

    /// Every name (aliases included) with its value, for `CONFIG GET`.
    pub(crate) fn all(&self) -> Vec<(&'static str, String)> {
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        KNOBS
            .iter()
            .zip(values.iter())
            .flat_map(|(knob, value)| {
                std::iter::once(knob.name)
                    .chain(knob.alias)
                    .map(move |name| (name, value.clone()))
            })
            .collect()
    }

    /// The knob `name` (lowercase) names, if any.
    pub(crate) fn find(name: &str) -> Option<usize> {
        KNOBS
            .iter()
            .position(|k| k.name == name || k.alias == Some(name))
    }

    /// Checks `value` for knob `index` as Redis does: its canonical form, or the reason
    /// Redis gives (after `CONFIG SET failed (...) - `).
    pub(crate) fn check(index: usize, value: &str) -> Result<String, &'static str> {
        match KNOBS[index].kind {
            Kind::Int { min, max } => {
                let n: i64 = value
                    .parse()
                    .map_err(|_| "argument couldn't be parsed into an integer")?;
                if (min..=max).contains(&n) {
                    Ok(n.to_string())
                } else {
                    Err(range_text(min, max))
                }
            }
            Kind::Memory => {
                let n = crate::parse_size(value).map_err(|_| "argument must be a memory value")?;
                if i64::try_from(n).is_ok() {
                    Ok(n.to_string())
                } else {
                    Err("argument must be between 0 and 9223372036854775807 inclusive")
                }
            }
            Kind::YesNo if value.eq_ignore_ascii_case("yes") => Ok("yes".to_string()),
            Kind::YesNo if value.eq_ignore_ascii_case("no") => Ok("no".to_string()),
            Kind::YesNo => Err("argument must be 'yes' or 'no'"),
        }
    }

    /// A numeric knob's value by name (`None`: no such knob, or not a number).
    pub(crate) fn number(&self, name: &str) -> Option<i64> {
        let index = Self::find(name)?;
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        values[index].parse().ok()
    }

    /// Sets knob `index` to a value [`Knobs::check`] returned.
    pub(crate) fn set(&self, index: usize, value: String) {
        self.values.write().unwrap_or_else(PoisonError::into_inner)[index] = value;
    }
}

/// Redis's range error for the bounds the knobs use.
fn range_text(min: i64, max: i64) -> &'static str {
    match (min, max) {
        (0, i64::MAX) => "argument must be between 0 and 9223372036854775807 inclusive",
        (-2_147_483_648, 2_147_483_647) => {
            "argument must be between -2147483648 and 2147483647 inclusive"
        }
        (0, 2_147_483_647) => "argument must be between 0 and 2147483647 inclusive",
        (1, 2_147_483_647) => "argument must be between 1 and 2147483647 inclusive",
        (0, 100) => "argument must be between 0 and 100 inclusive",
        (1, 10) => "argument must be between 1 and 10 inclusive",
        _ => "argument is out of range",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_kept_as_redis_does() {
        let knobs = Knobs::new();
        let entries = Knobs::find("zset-max-ziplist-entries").unwrap();
        assert_eq!(Knobs::find("zset-max-listpack-entries"), Some(entries));
        assert_eq!(Knobs::check(entries, "200"), Ok("200".into()));
        assert_eq!(
            Knobs::check(entries, "-1"),
            Err("argument must be between 0 and 9223372036854775807 inclusive")
        );
        assert_eq!(
            Knobs::check(entries, "1.5"),
            Err("argument couldn't be parsed into an integer")
        );
        let value = Knobs::find("hash-max-listpack-value").unwrap();
        assert_eq!(Knobs::check(value, "1kb"), Ok("1024".into()));
        assert_eq!(
            Knobs::check(value, "-1"),
            Err("argument must be a memory value")
        );
        let yes_no = Knobs::find("activerehashing").unwrap();
        assert_eq!(Knobs::check(yes_no, "YES"), Ok("yes".into()));
        assert_eq!(
            Knobs::check(yes_no, "maybe"),
            Err("argument must be 'yes' or 'no'")
        );
        knobs.set(entries, "200".into());
        let all = knobs.all();
        assert!(all.contains(&("zset-max-ziplist-entries", "200".into())));
        assert!(all.contains(&("zset-max-listpack-entries", "200".into())));
        assert!(all.contains(&("list-compress-depth", "0".into())));
        assert_eq!(Knobs::find("no-such-knob"), None);
        // Every range a knob uses has Redis's text.
        for knob in KNOBS {
            if let Kind::Int { min, max } = knob.kind {
                assert_ne!(
                    range_text(min, max),
                    "argument is out of range",
                    "{}",
                    knob.name
                );
            }
        }
    }
}
