//! The seeded command generator of `diff-redis`: per family, templates of commands with
//! argument values drawn from small pools, so keys collide, types conflict, collections fill and
//! empty, and numbers hit their limits. About one key in ten is drawn from another family's
//! keys (WRONGTYPE paths); about one command in twenty has a damaged argument list.

use super::Norm;

/// The families, in `--families` spelling.
pub(crate) const FAMILIES: &[&str] = &[
    "strings",
    "bitmaps",
    "keys",
    "lists",
    "hashes",
    "sets",
    "zsets",
    "blocking",
    "hll",
    "geo",
    "server",
    "databases",
    "streams",
    "scripts",
];

/// A command and how its reply is normalized.
pub(crate) struct Cmd {
    pub(crate) args: Vec<Vec<u8>>,
    pub(crate) norm: Norm,
}

impl Cmd {
    pub(crate) fn plain(args: Vec<Vec<u8>>) -> Self {
        Self {
            args,
            norm: Norm::default(),
        }
    }
}

const UNORDERED: Norm = Norm {
    unordered: true,
    pairs: false,
    doubles: false,
    millis: false,
};
const PAIRS: Norm = Norm {
    unordered: false,
    pairs: true,
    doubles: false,
    millis: false,
};
const DOUBLES: Norm = Norm {
    unordered: false,
    pairs: false,
    doubles: true,
    millis: false,
};
/// How `PTTL`-like replies are normalized (for `--watch`).
pub(crate) const MILLIS_NORM: Norm = MILLIS;

const MILLIS: Norm = Norm {
    unordered: false,
    pairs: false,
    doubles: false,
    millis: true,
};

pub(crate) struct Gen {
    state: u64,
    families: Vec<&'static str>,
}

impl Gen {
    pub(crate) fn new(seed: u64, families: &[&str]) -> Self {
        let families = FAMILIES
            .iter()
            .copied()
            .filter(|f| families.contains(f))
            .collect();
        Self {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            families,
        }
    }

    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    fn int(&mut self, lo: i64, hi: i64) -> String {
        (lo + self.below((hi - lo + 1) as u64) as i64).to_string()
    }

    /// A key of `family` (its prefix), now and then another family's.
    fn key(&mut self, prefix: &str) -> String {
        let prefix = if self.chance(8) {
            self.pick(&["s", "b", "l", "h", "t", "z", "p", "g", "x"])
        } else {
            prefix
        };
        format!("{prefix}:{}", self.below(4))
    }

    fn keys(&mut self, prefix: &str, n: u64) -> Vec<String> {
        (0..n).map(|_| self.key(prefix)).collect()
    }

    /// One to `max` keys.
    fn keys_upto(&mut self, prefix: &str, max: u64) -> Vec<String> {
        let n = 1 + self.below(max);
        self.keys(prefix, n)
    }

    fn value(&mut self) -> String {
        match self.below(10) {
            0 => String::new(),
            1..=3 => self.int(-5, 20),
            4 => self
                .pick(&[
                    "1.5",
                    "-0.25",
                    "3e2",
                    "inf",
                    "abc",
                    " 1",
                    "9223372036854775807",
                ])
                .to_string(),
            _ => self
                .pick(&["a", "b", "c", "hello", "x y", "é", "foobar", "\x00\x01"])
                .to_string(),
        }
    }

    fn member(&mut self) -> String {
        self.pick(&["a", "b", "c", "d", "e", "f", "g", "m1", "m2", ""])
            .to_string()
    }

    fn score(&mut self) -> String {
        match self.below(12) {
            0 => self
                .pick(&[
                    "inf", "-inf", "+inf", "1.5", "-2.5", "0.1", "1e3", "nan", "x", "(1",
                ])
                .to_string(),
            _ => self.int(-3, 10),
        }
    }

    fn count(&mut self) -> String {
        match self.below(10) {
            0 => self
                .pick(&[
                    "-1",
                    "0",
                    "x",
                    "9223372036854775807",
                    "-9223372036854775808",
                ])
                .to_string(),
            _ => self.int(1, 5),
        }
    }

    fn index(&mut self) -> String {
        match self.below(12) {
            0 => self
                .pick(&["x", "9223372036854775807", "-9223372036854775808", "1.5"])
                .to_string(),
            _ => self.int(-6, 6),
        }
    }

    /// A score bound of ZRANGEBYSCORE and friends.
    fn score_bound(&mut self) -> String {
        match self.below(8) {
            0 => self
                .pick(&["-inf", "+inf", "inf", "(inf", "x", "(x"])
                .to_string(),
            1 => format!("({}", self.int(-2, 8)),
            _ => self.int(-2, 8),
        }
    }

    /// A sorted set whose members all have score 0, the only kind Redis defines lexicographic
    /// ranges for (over mixed scores the answer depends on Redis's encoding, which depends on
    /// the key's history: docs/REDIS-COMPAT.md). No other family touches these keys.
    fn lex_key(&mut self) -> String {
        format!("y:{}", self.below(4))
    }

    fn lex_bound(&mut self) -> String {
        match self.below(8) {
            0 => self.pick(&["-", "+", "a", "x"]).to_string(),
            1..=4 => format!("[{}", self.member()),
            _ => format!("({}", self.member()),
        }
    }

    /// The next command: a family, then one of its templates.
    pub(crate) fn command(&mut self) -> Cmd {
        let at = self.below(self.families.len() as u64) as usize;
        let family = self.families[at];
        let mut cmd = match family {
            "strings" => self.strings(),
            "bitmaps" => self.bitmaps(),
            "keys" => self.keyspace(),
            "lists" => self.lists(),
            "hashes" => self.hashes(),
            "sets" => self.sets(),
            "zsets" => self.zsets(),
            "blocking" => self.blocking(),
            "hll" => self.hll(),
            "geo" => self.geo(),
            "databases" => self.databases(),
            "streams" => self.streams(),
            "scripts" => self.script(),
            _ => self.server(),
        };
        // Damaged argument lists: one argument dropped, or a junk one appended (not to
        // ZRANK/ZREVRANK: Redis 7.2's WITHSCORE changed their arity, docs/REDIS-COMPAT.md;
        // nor to COMMAND: without its names, COMMAND INFO/DOCS answer for every command, and
        // fast-cache has fewer than Redis).
        // Nor to a script's command (`EVAL`): a key dropped from it would be an undeclared key
        // (docs/REDIS-COMPAT.md, Scripting).
        let spared = [&b"zrank"[..], b"zrevrank", b"command", b"eval"]
            .iter()
            .any(|n| cmd.args[0].eq_ignore_ascii_case(n));
        if cmd.args.len() > 1 && !spared && self.chance(4) {
            if self.chance(50) {
                let at = 1 + self.below(cmd.args.len() as u64 - 1) as usize;
                cmd.args.remove(at);
            } else {
                cmd.args.push(b"junk".to_vec());
            }
        }
        cmd
    }

    /// A command of a data family run by a script (`EVAL`): `redis.call` or `redis.pcall`
    /// of its arguments, the replies converted to Lua and back in RESP2 or, after
    /// `redis.setresp(3)`, RESP3 (so every reply shape crosses both conversions). Every
    /// argument shaped like a key (`x:N`) is declared, as scripts must declare their keys.
    fn script(&mut self) -> Cmd {
        const DATA: &[&str] = &[
            "strings", "bitmaps", "lists", "hashes", "sets", "zsets", "hll", "geo", "streams",
        ];
        let inner = loop {
            let cmd = match self.pick(DATA) {
                "strings" => self.strings(),
                "bitmaps" => self.bitmaps(),
                "lists" => self.lists(),
                "hashes" => self.hashes(),
                "sets" => self.sets(),
                "zsets" => self.zsets(),
                "hll" => self.hll(),
                "geo" => self.geo(),
                _ => self.streams(),
            };
            // Not within scripts: blocking forms with a timeout (they never block there, but
            // Redis and fast-cache word their refusals apart), SORT's external keys.
            let name = cmd.args[0].to_ascii_lowercase();
            if !name.starts_with(b"b") && name != b"sort" && name != b"sort_ro" {
                break cmd;
            }
        };
        // Keys: `x:N`, and whatever follows a GEO search's STORE/STOREDIST.
        let keys: Vec<Vec<u8>> = inner.args[1..]
            .iter()
            .enumerate()
            .filter(|(i, a)| {
                (a.len() == 3 && a[0].is_ascii_lowercase() && a[1] == b':' && a[2].is_ascii_digit())
                    || (*i > 0
                        && (inner.args[*i].eq_ignore_ascii_case(b"store")
                            || inner.args[*i].eq_ignore_ascii_case(b"storedist")))
            })
            .map(|(_, a)| a.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let resp3 = self.chance(50);
        let body = match (resp3, self.chance(50)) {
            (false, false) => "return redis.call(unpack(ARGV))",
            (false, true) => "return redis.pcall(unpack(ARGV))",
            (true, false) => "redis.setresp(3) return redis.call(unpack(ARGV))",
            (true, true) => "redis.setresp(3) return redis.pcall(unpack(ARGV))",
        };
        let mut args = vec![b"EVAL".to_vec(), body.as_bytes().to_vec()];
        args.push(keys.len().to_string().into_bytes());
        args.extend(keys);
        args.extend(inner.args);
        Cmd {
            args,
            // A double that crossed the RESP3 conversion comes back written as doubles are
            // (Redis 7.0: 17 digits; 7.2 and fast-cache: the shortest text): by value.
            norm: Norm {
                doubles: inner.norm.doubles || resp3,
                ..inner.norm
            },
        }
    }

    fn strings(&mut self) -> Cmd {
        let k = self.key("s");
        let v = self.value();
        let args: Vec<String> = match self.below(24) {
            0 | 1 => {
                let mut a = vec!["SET".into(), k, v];
                if self.chance(40) {
                    a.push(
                        self.pick(&["NX", "XX", "GET", "KEEPTTL", "EX", "PX"])
                            .into(),
                    );
                    // Expiries far beyond the run (a key expiring mid-run would expire at a
                    // different command on each server).
                    if a[3] == "EX" || a[3] == "PX" {
                        a.push(self.pick(&["100000", "1000000", "0", "-1", "x"]).into());
                    }
                }
                a
            }
            2 | 3 => vec!["GET".into(), k],
            4 => vec!["GETSET".into(), k, v],
            5 => vec!["GETDEL".into(), k],
            6 => {
                let mut a = vec!["GETEX".into(), k];
                if self.chance(50) {
                    a.push(self.pick(&["PERSIST", "EX", "PX", "EXAT"]).into());
                    if a[2] != "PERSIST" {
                        a.push(self.pick(&["100000", "0", "x", "99999999999"]).into());
                    }
                }
                a
            }
            7 => vec!["APPEND".into(), k, v],
            8 => vec!["STRLEN".into(), k],
            9 => vec!["INCR".into(), k],
            10 => vec!["DECR".into(), k],
            11 => {
                let n = self.index();
                vec![self.pick(&["INCRBY", "DECRBY"]).into(), k, n]
            }
            12 => {
                let n = self.score();
                // Compared exactly: both compute in x87 long double and print %.17Lf.
                return Cmd::plain(to_args(vec!["INCRBYFLOAT".into(), k, n]));
            }
            13 => {
                let off = self.pick(&["0", "1", "3", "10", "-1", "x"]).into();
                vec!["SETRANGE".into(), k, off, v]
            }
            14 => {
                let (a, b) = (self.index(), self.index());
                vec!["GETRANGE".into(), k, a, b]
            }
            15 => {
                let mut a = vec!["MSET".into()];
                for _ in 0..=self.below(3) {
                    a.push(self.key("s"));
                    a.push(self.value());
                }
                a
            }
            16 => {
                let mut a = vec!["MGET".into()];
                a.extend(self.keys_upto("s", 4));
                a
            }
            17 => {
                let mut a = vec!["MSETNX".into()];
                for _ in 0..=self.below(3) {
                    a.push(self.key("s"));
                    a.push(self.value());
                }
                a
            }
            18 => vec!["SETNX".into(), k, v],
            19 => {
                let t = self.pick(&["100000", "0", "-5", "x"]).into();
                vec![self.pick(&["SETEX", "PSETEX"]).into(), k, t, v]
            }
            20 => {
                let k2 = self.key("s");
                let mut a = vec!["LCS".into(), k, k2];
                if self.chance(50) {
                    a.push(self.pick(&["LEN", "IDX"]).into());
                }
                a
            }
            21 => vec!["SUBSTR".into(), k, self.index(), self.index()],
            _ => vec!["GET".into(), k],
        };
        Cmd::plain(to_args(args))
    }

    fn bitmaps(&mut self) -> Cmd {
        let k = self.key("b");
        let off = || ["0", "1", "7", "8", "15", "100", "-1", "x", "4294967296"];
        let args: Vec<String> = match self.below(13) {
            10..=12 => {
                let name = if self.chance(20) {
                    "BITFIELD_RO"
                } else {
                    "BITFIELD"
                };
                let mut a = vec![name.into(), k];
                for _ in 0..self.below(4) {
                    let ty = self
                        .pick(&[
                            "u1", "u8", "i8", "i5", "u63", "i64", "u16", "i32", "u64", "x8",
                        ])
                        .to_string();
                    let off = self
                        .pick(&["0", "1", "7", "13", "#1", "#3", "100", "-1", "x"])
                        .to_string();
                    let v = self
                        .pick(&[
                            "0",
                            "1",
                            "-1",
                            "100",
                            "127",
                            "-129",
                            "255",
                            "9223372036854775807",
                            "-9223372036854775808",
                            "x",
                        ])
                        .to_string();
                    match self.below(5) {
                        0 | 1 => a.extend(["GET".into(), ty, off]),
                        2 => a.extend(["SET".into(), ty, off, v]),
                        3 => a.extend(["INCRBY".into(), ty, off, v]),
                        _ => a.extend([
                            "OVERFLOW".into(),
                            self.pick(&["WRAP", "SAT", "FAIL", "x"]).into(),
                        ]),
                    }
                }
                a
            }
            0..=2 => {
                let o = self.pick(&off());
                let b = self.pick(&["0", "1", "1", "2"]);
                vec!["SETBIT".into(), k, o.into(), b.into()]
            }
            3 => vec!["GETBIT".into(), k, self.pick(&off()).into()],
            4 | 5 => {
                let mut a = vec!["BITCOUNT".into(), k];
                if self.chance(60) {
                    a.push(self.index());
                    a.push(self.index());
                    if self.chance(40) {
                        a.push(self.pick(&["BIT", "BYTE", "bit", "x"]).into());
                    }
                }
                a
            }
            6 | 7 => {
                let mut a = vec!["BITPOS".into(), k, self.pick(&["0", "1", "2"]).into()];
                for _ in 0..self.below(3) {
                    a.push(self.index());
                }
                if a.len() == 5 && self.chance(40) {
                    a.push(self.pick(&["BIT", "BYTE"]).into());
                }
                a
            }
            8 => {
                let op = self.pick(&["AND", "OR", "XOR", "NOT", "nand"]);
                let mut a = vec!["BITOP".into(), op.into(), self.key("b")];
                a.extend(self.keys_upto("b", 3));
                a
            }
            _ => {
                // Strings to work on: a few bytes.
                let v = self.pick(&["foobar", "\u{7f}\u{ff}", "", "\x00\x00\x01", "abc"]);
                vec!["SET".into(), k, v.into()]
            }
        };
        Cmd::plain(to_args(args))
    }

    fn keyspace(&mut self) -> Cmd {
        let any = self.pick(&["s", "b", "l", "h", "t", "z"]).to_string();
        let k = self.key(&any);
        let args: Vec<String> = match self.below(18) {
            0 => {
                let mut a = vec!["DEL".into()];
                a.extend(self.keys_upto(&any, 2));
                a
            }
            1 => {
                let mut a = vec!["EXISTS".into()];
                a.extend(self.keys_upto(&any, 3));
                a
            }
            2 | 3 => vec!["TYPE".into(), k],
            4 | 5 => {
                let cmd = self.pick(&["EXPIRE", "PEXPIRE", "EXPIREAT"]).to_string();
                let t = match cmd.as_str() {
                    "EXPIREAT" => self.pick(&["4102444800", "0", "x"]).into(),
                    _ => self.pick(&["100000", "1000000", "0", "-1", "x"]).into(),
                };
                let mut a = vec![cmd, k, t];
                if self.chance(30) {
                    a.push(self.pick(&["NX", "XX", "GT", "LT", "NX"]).into());
                }
                a
            }
            6 => vec!["TTL".into(), k],
            7 => {
                return Cmd {
                    args: to_args(vec!["PTTL".into(), k]),
                    norm: MILLIS,
                };
            }
            8 => vec!["PERSIST".into(), k],
            9 => vec![self.pick(&["RENAME", "RENAMENX"]).into(), k, self.key(&any)],
            10 => {
                let mut a = vec!["COPY".into(), k, self.key(&any)];
                if self.chance(50) {
                    a.push("REPLACE".into());
                }
                a
            }
            11 => {
                let mut a = vec!["UNLINK".into()];
                a.extend(self.keys_upto(&any, 2));
                a
            }
            12 => {
                let mut a = vec!["TOUCH".into()];
                a.extend(self.keys_upto(&any, 2));
                a
            }
            13 => {
                return Cmd {
                    args: to_args(vec!["KEYS".into(), format!("{any}:*")]),
                    norm: UNORDERED,
                };
            }
            14 => vec!["DBSIZE".into()],
            15 => {
                return Cmd {
                    args: to_args(vec!["EXPIRETIME".into(), k]),
                    norm: MILLIS,
                };
            }
            16 => {
                return Cmd {
                    args: to_args(vec!["PEXPIRETIME".into(), k]),
                    norm: MILLIS,
                };
            }
            _ => vec!["EXISTS".into(), k],
        };
        Cmd::plain(to_args(args))
    }

    fn lists(&mut self) -> Cmd {
        let k = self.key("l");
        let args: Vec<String> = match self.below(22) {
            0..=2 => {
                let mut a = vec![self.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]).into(), k];
                for _ in 0..=self.below(3) {
                    a.push(self.member());
                }
                a
            }
            3 | 4 => {
                let mut a = vec![self.pick(&["LPOP", "RPOP"]).into(), k];
                if self.chance(40) {
                    a.push(self.count());
                }
                a
            }
            5 => vec!["LLEN".into(), k],
            6 | 7 => vec!["LRANGE".into(), k, self.index(), self.index()],
            8 => vec!["LINDEX".into(), k, self.index()],
            9 => vec!["LSET".into(), k, self.index(), self.member()],
            10 => {
                let w = self.pick(&["BEFORE", "AFTER", "middle"]);
                vec!["LINSERT".into(), k, w.into(), self.member(), self.member()]
            }
            11 => vec!["LREM".into(), k, self.index(), self.member()],
            12 => vec!["LTRIM".into(), k, self.index(), self.index()],
            13 => {
                let mut a = vec!["LPOS".into(), k, self.member()];
                for _ in 0..self.below(3) {
                    let o = self.pick(&["RANK", "COUNT", "MAXLEN"]);
                    a.push(o.into());
                    // Not RANK LONG_MIN: an error since Redis 7.2 (docs/REDIS-COMPAT.md).
                    let i = self.index();
                    a.push(if i == "-9223372036854775808" {
                        "-1".into()
                    } else {
                        i
                    });
                }
                a
            }
            14 => {
                let (w1, w2) = (
                    self.pick(&["LEFT", "RIGHT"]),
                    self.pick(&["LEFT", "RIGHT", "UP"]),
                );
                vec!["LMOVE".into(), k, self.key("l"), w1.into(), w2.into()]
            }
            15 => vec!["RPOPLPUSH".into(), k, self.key("l")],
            16 => {
                let n = 1 + self.below(3);
                let mut a = vec!["LMPOP".into(), n.to_string()];
                a.extend(self.keys("l", n));
                a.push(self.pick(&["LEFT", "RIGHT", "MIDDLE"]).into());
                if self.chance(40) {
                    a.push("COUNT".into());
                    a.push(self.count());
                }
                a
            }
            _ => vec!["LRANGE".into(), k, "0".into(), "-1".into()],
        };
        Cmd::plain(to_args(args))
    }

    fn hashes(&mut self) -> Cmd {
        let k = self.key("h");
        let f = self.member();
        let args: Vec<String> = match self.below(20) {
            0..=2 => {
                let mut a = vec![self.pick(&["HSET", "HMSET"]).into(), k];
                for _ in 0..=self.below(3) {
                    a.push(self.member());
                    a.push(self.value());
                }
                a
            }
            3 => vec!["HGET".into(), k, f],
            4 => {
                let mut a = vec!["HDEL".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.member()));
                a
            }
            5 => vec!["HLEN".into(), k],
            6 => vec!["HEXISTS".into(), k, f],
            7 => vec!["HINCRBY".into(), k, f, self.index()],
            8 => {
                let n = self.score();
                return Cmd::plain(to_args(vec!["HINCRBYFLOAT".into(), k, f, n]));
            }
            9 => {
                let mut a = vec!["HMGET".into(), k];
                a.extend((0..=self.below(3)).map(|_| self.member()));
                a
            }
            10 => vec!["HSETNX".into(), k, f, self.value()],
            11 => vec!["HSTRLEN".into(), k, f],
            12 | 13 => {
                return Cmd {
                    args: to_args(vec!["HGETALL".into(), k]),
                    norm: PAIRS,
                };
            }
            14 => {
                return Cmd {
                    args: to_args(vec![self.pick(&["HKEYS", "HVALS"]).into(), k]),
                    norm: UNORDERED,
                };
            }
            _ => vec!["HGET".into(), k, f],
        };
        Cmd::plain(to_args(args))
    }

    fn sets(&mut self) -> Cmd {
        let k = self.key("t");
        let args: Vec<String> = match self.below(20) {
            0..=3 => {
                let mut a = vec!["SADD".into(), k];
                a.extend((0..=self.below(4)).map(|_| self.member()));
                a
            }
            4 => {
                let mut a = vec!["SREM".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.member()));
                a
            }
            5 => vec!["SCARD".into(), k],
            6 => vec!["SISMEMBER".into(), k, self.member()],
            7 => {
                let mut a = vec!["SMISMEMBER".into(), k];
                a.extend((0..=self.below(3)).map(|_| self.member()));
                a
            }
            8 | 9 => {
                return Cmd {
                    args: to_args(vec!["SMEMBERS".into(), k]),
                    norm: UNORDERED,
                };
            }
            10..=12 => {
                let op = self.pick(&["SINTER", "SUNION", "SDIFF"]).to_string();
                let mut a = vec![op];
                a.extend(self.keys_upto("t", 3));
                return Cmd {
                    args: to_args(a),
                    norm: UNORDERED,
                };
            }
            13 | 14 => {
                let op = self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let mut a = vec![op.into(), self.key("t")];
                a.extend(self.keys_upto("t", 3));
                a
            }
            15 => {
                let n = 1 + self.below(3);
                let mut a = vec!["SINTERCARD".into(), n.to_string()];
                a.extend(self.keys("t", n));
                if self.chance(40) {
                    a.push("LIMIT".into());
                    a.push(self.pick(&["0", "1", "2", "-1"]).into());
                }
                a
            }
            16 => vec!["SMOVE".into(), k, self.key("t"), self.member()],
            17 => return self.sort(k),
            _ => vec!["SCARD".into(), k],
        };
        Cmd::plain(to_args(args))
    }

    fn zsets(&mut self) -> Cmd {
        let k = self.key("z");
        let with = |g: &mut Self, a: &mut Vec<String>| {
            if g.chance(40) {
                a.push("WITHSCORES".into());
            }
        };
        let args: Vec<String> = match self.below(30) {
            0..=3 => {
                // A third of them fill the lexicographic sets (all scores 0).
                let lex = self.chance(33);
                let key = if lex { self.lex_key() } else { k };
                let mut a = vec!["ZADD".into(), key];
                if self.chance(25) {
                    a.push(self.pick(&["NX", "XX", "GT", "LT", "CH", "INCR"]).into());
                }
                for _ in 0..=self.below(3) {
                    a.push(if lex { "0".into() } else { self.score() });
                    a.push(self.member());
                }
                a
            }
            4 => {
                let mut a = vec!["ZREM".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.member()));
                a
            }
            5 => vec!["ZCARD".into(), k],
            6 => vec!["ZSCORE".into(), k, self.member()],
            7 => {
                let mut a = vec!["ZMSCORE".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.member()));
                a
            }
            8 => vec!["ZINCRBY".into(), k, self.score(), self.member()],
            9 => vec![self.pick(&["ZRANK", "ZREVRANK"]).into(), k, self.member()],
            10..=12 => {
                let mut a = vec!["ZRANGE".into(), k];
                match self.below(3) {
                    0 => {
                        a.push(self.index());
                        a.push(self.index());
                    }
                    1 => {
                        a.push(self.score_bound());
                        a.push(self.score_bound());
                        a.push("BYSCORE".into());
                    }
                    _ => {
                        a[1] = self.lex_key();
                        a.push(self.lex_bound());
                        a.push(self.lex_bound());
                        a.push("BYLEX".into());
                    }
                }
                if self.chance(30) {
                    a.push("REV".into());
                }
                if self.chance(25) {
                    a.push("LIMIT".into());
                    a.push(self.int(-1, 2));
                    a.push(self.int(-1, 3));
                }
                with(self, &mut a);
                a
            }
            13 => {
                let mut a = vec![
                    self.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]).into(),
                    k,
                    self.score_bound(),
                    self.score_bound(),
                ];
                with(self, &mut a);
                a
            }
            14 => vec![
                self.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT"])
                    .into(),
                self.lex_key(),
                self.lex_bound(),
                self.lex_bound(),
            ],
            15 => vec!["ZCOUNT".into(), k, self.score_bound(), self.score_bound()],
            16 => {
                let mut a = vec!["ZREVRANGE".into(), k, self.index(), self.index()];
                with(self, &mut a);
                a
            }
            17 => vec!["ZREMRANGEBYRANK".into(), k, self.index(), self.index()],
            18 => vec![
                "ZREMRANGEBYSCORE".into(),
                k,
                self.score_bound(),
                self.score_bound(),
            ],
            19 => vec![
                "ZREMRANGEBYLEX".into(),
                self.lex_key(),
                self.lex_bound(),
                self.lex_bound(),
            ],
            20 => {
                let mut a = vec![self.pick(&["ZPOPMIN", "ZPOPMAX"]).into(), k];
                if self.chance(50) {
                    a.push(self.count());
                }
                a
            }
            21..=23 => {
                let op = self
                    .pick(&[
                        "ZUNION",
                        "ZINTER",
                        "ZDIFF",
                        "ZUNIONSTORE",
                        "ZINTERSTORE",
                        "ZDIFFSTORE",
                        "ZINTERCARD",
                    ])
                    .to_string();
                let n = 1 + self.below(3);
                let mut a = vec![op.clone()];
                if op.ends_with("STORE") {
                    a.push(self.key("z"));
                }
                a.push(n.to_string());
                for _ in 0..n {
                    a.push(if self.chance(20) {
                        self.key("t")
                    } else {
                        self.key("z")
                    });
                }
                if op != "ZDIFF" && op != "ZDIFFSTORE" && op != "ZINTERCARD" && self.chance(30) {
                    a.push("WEIGHTS".into());
                    for _ in 0..n {
                        a.push(self.pick(&["1", "2", "-1", "0.5"]).into());
                    }
                }
                if op != "ZDIFF" && op != "ZDIFFSTORE" && op != "ZINTERCARD" && self.chance(30) {
                    a.push("AGGREGATE".into());
                    a.push(self.pick(&["SUM", "MIN", "MAX"]).into());
                }
                if !op.ends_with("STORE") && op != "ZINTERCARD" {
                    with(self, &mut a);
                }
                a
            }
            24 => {
                let mut a = vec![
                    "ZRANGESTORE".into(),
                    self.key("z"),
                    k,
                    self.index(),
                    self.index(),
                ];
                if self.chance(30) {
                    a.push("REV".into());
                }
                a
            }
            25 => {
                let n = 1 + self.below(2);
                let mut a = vec!["ZMPOP".into(), n.to_string()];
                a.extend(self.keys("z", n));
                a.push(self.pick(&["MIN", "MAX"]).into());
                if self.chance(40) {
                    a.push("COUNT".into());
                    a.push(self.count());
                }
                a
            }
            _ => {
                let mut a = vec!["ZRANGE".into(), k, "0".into(), "-1".into()];
                with(self, &mut a);
                a
            }
        };
        Cmd {
            args: to_args(args),
            norm: DOUBLES,
        }
    }

    /// `SORT`/`SORT_RO` of a set, list or sorted set (no BY/GET patterns: their keys would span
    /// workers, which fc-server refuses as Redis Cluster does; no `BY nosort`: over a set, the
    /// order is each server's hash order; tests/catalog.rs covers both).
    fn sort(&mut self, k: String) -> Cmd {
        let prefix = self.pick(&["l", "z"]);
        let key = if self.chance(50) { k } else { self.key(prefix) };
        let ro = self.chance(20);
        let mut a = vec![if ro { "SORT_RO" } else { "SORT" }.to_string(), key.clone()];
        for _ in 0..self.below(4) {
            match self.below(6) {
                0 => a.push(self.pick(&["ASC", "DESC"]).into()),
                1 | 2 => a.push("ALPHA".into()),
                3 => {
                    a.push("LIMIT".into());
                    a.push(self.int(-2, 4));
                    a.push(self.int(-2, 4));
                }
                _ if !ro => {
                    a.push("STORE".into());
                    a.push(self.key("l"));
                }
                _ => a.push("DESC".into()),
            }
        }
        Cmd::plain(to_args(a))
    }

    /// Blocking commands with short timeouts (an empty key waits them out) and on full keys.
    fn blocking(&mut self) -> Cmd {
        let t = self.pick(&["0.01", "0.02", "-1", "x"]).to_string();
        let args: Vec<String> = match self.below(6) {
            0 | 1 => {
                let mut a = vec![self.pick(&["BLPOP", "BRPOP"]).into()];
                a.extend(self.keys_upto("l", 2));
                a.push(t);
                a
            }
            2 => vec![
                "BLMOVE".into(),
                self.key("l"),
                self.key("l"),
                self.pick(&["LEFT", "RIGHT"]).into(),
                self.pick(&["LEFT", "RIGHT"]).into(),
                t,
            ],
            3 => vec!["BRPOPLPUSH".into(), self.key("l"), self.key("l"), t],
            4 => {
                let mut a = vec![self.pick(&["BZPOPMIN", "BZPOPMAX"]).into()];
                a.extend(self.keys_upto("z", 2));
                a.push(t);
                return Cmd {
                    args: to_args(a),
                    norm: DOUBLES,
                };
            }
            _ => {
                let mut a = vec!["BLMPOP".into(), t, "1".into(), self.key("l")];
                a.push(self.pick(&["LEFT", "RIGHT"]).into());
                a
            }
        };
        Cmd::plain(to_args(args))
    }

    /// HyperLogLogs (keys `p:*`), now and then over another family's key (a string that is
    /// not an HLL, or another type).
    fn hll(&mut self) -> Cmd {
        let args: Vec<String> = match self.below(6) {
            0..=2 => {
                let mut a = vec!["PFADD".into(), self.key("p")];
                // Now and then hundreds of distinct elements, to cross sparse -> dense.
                let (n, range) = if self.chance(5) {
                    (300, 1_000_000)
                } else {
                    (self.below(6), 40)
                };
                for _ in 0..n {
                    a.push(format!("e{}", self.below(range)));
                }
                a
            }
            3 | 4 => {
                let mut a = vec!["PFCOUNT".into()];
                a.extend(self.keys_upto("p", 3));
                a
            }
            _ => {
                let mut a = vec!["PFMERGE".into(), self.key("p")];
                for _ in 0..self.below(3) {
                    a.push(self.key("p"));
                }
                a
            }
        };
        Cmd::plain(to_args(args))
    }

    /// A stream id with explicit parts (auto ids follow each server's clock): small
    /// milliseconds so keys collide, now and then a bare `ms`, `ms-*`, a bound or junk.
    fn stream_id(&mut self) -> String {
        match self.below(12) {
            0 => format!("{}", self.below(25)),
            1 => format!("{}-*", self.below(25)),
            2 => self
                .pick(&[
                    "0-0",
                    "0",
                    "18446744073709551615-18446744073709551615",
                    "x",
                    "1-x",
                ])
                .into(),
            _ => format!("{}-{}", self.below(25), self.below(3)),
        }
    }

    /// A range bound: an id, `-`/`+`, or an exclusive `(id`.
    fn stream_bound(&mut self) -> String {
        match self.below(6) {
            0 => "-".into(),
            1 => "+".into(),
            2 => format!("({}-{}", self.below(25), self.below(3)),
            _ => format!("{}-{}", self.below(25), self.below(3)),
        }
    }

    fn group(&mut self) -> String {
        format!("g{}", self.below(3))
    }

    fn consumer(&mut self) -> String {
        format!("c{}", self.below(3))
    }

    /// Streams (keys `x:*`) with explicit ids, consumer groups, their reads, claims and
    /// acknowledgements. Nothing whose reply holds a time (auto ids, idle times, `XINFO
    /// CONSUMERS`, the extended `XPENDING`) and no `BLOCK` (`blocking` covers waiting).
    fn streams(&mut self) -> Cmd {
        let k = self.key("x");
        let args: Vec<String> = match self.below(24) {
            0..=5 => {
                let mut a = vec!["XADD".into(), k];
                if self.chance(10) {
                    a.push("NOMKSTREAM".into());
                }
                if self.chance(20) {
                    a.push(self.pick(&["MAXLEN", "MINID"]).into());
                    match self.below(3) {
                        0 => a.push("~".into()),
                        1 => a.push("=".into()),
                        _ => {}
                    }
                    a.push(if a.contains(&"MINID".to_string()) {
                        self.stream_id()
                    } else {
                        self.int(-1, 6)
                    });
                    if a.contains(&"~".to_string()) && self.chance(30) {
                        a.extend(["LIMIT".into(), self.int(-1, 5)]);
                    }
                }
                a.push(self.stream_id());
                for _ in 0..1 + self.below(2) {
                    a.push(format!("f{}", self.below(3)));
                    a.push(self.value());
                }
                a
            }
            6 | 7 => {
                let rev = self.chance(40);
                let mut a = vec![if rev { "XREVRANGE" } else { "XRANGE" }.into(), k];
                a.push(self.stream_bound());
                a.push(self.stream_bound());
                if self.chance(40) {
                    a.extend(["COUNT".into(), self.int(-1, 4)]);
                }
                a
            }
            8 => vec!["XLEN".into(), k],
            9 => {
                let mut a = vec!["XDEL".into(), k];
                for _ in 0..1 + self.below(3) {
                    a.push(self.stream_id());
                }
                a
            }
            10 => {
                let mut a = vec!["XTRIM".into(), k];
                let minid = self.chance(40);
                a.push(if minid { "MINID" } else { "MAXLEN" }.into());
                match self.below(3) {
                    0 => a.push("~".into()),
                    1 => a.push("=".into()),
                    _ => {}
                }
                a.push(if minid {
                    self.stream_id()
                } else {
                    self.int(-1, 6)
                });
                if self.chance(20) {
                    a.extend(["LIMIT".into(), self.int(-1, 5)]);
                }
                a
            }
            11 => {
                let mut a = vec!["XSETID".into(), k, format!("{}-0", 30 + self.below(5))];
                if self.chance(30) {
                    a.extend(["ENTRIESADDED".into(), self.int(-1, 40)]);
                }
                if self.chance(30) {
                    a.extend(["MAXDELETEDID".into(), self.stream_id()]);
                }
                a
            }
            12 | 13 => {
                let sub = self.pick(&[
                    "CREATE",
                    "CREATE",
                    "SETID",
                    "DESTROY",
                    "CREATECONSUMER",
                    "DELCONSUMER",
                ]);
                let mut a = vec!["XGROUP".into(), sub.into(), k, self.group()];
                match sub {
                    "CREATE" | "SETID" => {
                        a.push(if self.chance(30) {
                            "$".into()
                        } else {
                            self.stream_id()
                        });
                        if sub == "CREATE" && self.chance(40) {
                            a.push("MKSTREAM".into());
                        }
                        if self.chance(20) {
                            a.extend(["ENTRIESREAD".into(), self.int(-2, 5)]);
                        }
                    }
                    "CREATECONSUMER" | "DELCONSUMER" => a.push(self.consumer()),
                    _ => {}
                }
                a
            }
            14..=16 => {
                let mut a = vec![
                    "XREADGROUP".into(),
                    "GROUP".into(),
                    self.group(),
                    self.consumer(),
                ];
                if self.chance(50) {
                    a.extend(["COUNT".into(), self.int(0, 3)]);
                }
                if self.chance(15) {
                    a.push("NOACK".into());
                }
                a.push("STREAMS".into());
                let keys = self.keys_upto("x", 2);
                let ids: Vec<String> = keys
                    .iter()
                    .map(|_| {
                        if self.chance(70) {
                            ">".into()
                        } else {
                            self.stream_id()
                        }
                    })
                    .collect();
                a.extend(keys);
                a.extend(ids);
                a
            }
            17 => {
                let mut a = vec!["XACK".into(), k, self.group()];
                for _ in 0..1 + self.below(3) {
                    a.push(self.stream_id());
                }
                a
            }
            18 => vec!["XPENDING".into(), k, self.group()],
            19 => {
                let mut a = vec![
                    "XCLAIM".into(),
                    k,
                    self.group(),
                    self.consumer(),
                    "0".into(),
                ];
                for _ in 0..1 + self.below(3) {
                    a.push(self.stream_id());
                }
                a.push("JUSTID".into());
                if self.chance(30) {
                    a.push("FORCE".into());
                }
                if self.chance(20) {
                    a.extend(["LASTID".into(), self.stream_id()]);
                }
                a
            }
            20 => {
                let mut a = vec![
                    "XAUTOCLAIM".into(),
                    k,
                    self.group(),
                    self.consumer(),
                    "0".into(),
                    self.stream_bound(),
                ];
                if self.chance(50) {
                    a.extend(["COUNT".into(), self.int(0, 3)]);
                }
                a.push("JUSTID".into());
                a
            }
            21 => {
                let mut a = vec!["XREAD".into()];
                if self.chance(50) {
                    a.extend(["COUNT".into(), self.int(0, 3)]);
                }
                a.push("STREAMS".into());
                let keys = self.keys_upto("x", 2);
                let ids: Vec<String> = keys
                    .iter()
                    .map(|_| {
                        if self.chance(20) {
                            "$".into()
                        } else {
                            self.stream_id()
                        }
                    })
                    .collect();
                a.extend(keys);
                a.extend(ids);
                a
            }
            22 => vec!["XINFO".into(), "GROUPS".into(), k],
            _ => vec!["XINFO".into(), "STREAM".into(), k],
        };
        Cmd::plain(to_args(args))
    }

    /// A longitude and latitude: around a few cities, at the limits, or invalid.
    fn lon_lat(&mut self) -> (String, String) {
        let centers = [
            (13.36, 38.11),
            (15.08, 37.5),
            (2.35, 48.85),
            (179.9, -16.5),
            (-0.1, 51.5),
        ];
        match self.below(12) {
            0 => {
                let (lon, lat) = *[
                    ("180", "85.05112878"),
                    ("-180", "-85.05112878"),
                    ("0", "0"),
                    ("200", "10"),
                    ("10", "86"),
                    ("x", "1"),
                ]
                .get(self.below(6) as usize)
                .unwrap_or(&("0", "0"));
                (lon.into(), lat.into())
            }
            _ => {
                let (lon, lat) = centers[self.below(centers.len() as u64) as usize];
                let jitter = |g: &mut Self| (g.below(2001) as f64 - 1000.0) / 1000.0;
                let (dx, dy) = (jitter(self), jitter(self));
                (
                    format!("{:.6}", (lon + dx).clamp(-180.0, 180.0)),
                    format!("{:.6}", lat + dy),
                )
            }
        }
    }

    fn geo_member(&mut self) -> String {
        self.pick(&["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"])
            .to_string()
    }

    fn geo_unit(&mut self) -> String {
        self.pick(&["m", "km", "KM", "ft", "mi", "mm"]).to_string()
    }

    fn geo_radius(&mut self) -> String {
        self.pick(&["0", "50", "100", "250", "1000", "20000", "-1", "x"])
            .to_string()
    }

    /// GEO searches' trailing options.
    fn geo_options(&mut self, a: &mut Vec<String>, store: bool) {
        for _ in 0..self.below(4) {
            match self.below(8) {
                0 => a.push(self.pick(&["WITHDIST", "WITHCOORD", "WITHHASH"]).into()),
                1 | 2 => a.push(self.pick(&["ASC", "DESC"]).into()),
                3 | 4 => {
                    a.push("COUNT".into());
                    a.push(self.pick(&["1", "2", "3", "0", "x"]).into());
                    if self.chance(40) {
                        a.push("ANY".into());
                    }
                }
                5 if store => {
                    a.push(self.pick(&["STORE", "STOREDIST"]).into());
                    a.push(self.key("g"));
                }
                _ => a.push("WITHDIST".into()),
            }
        }
    }

    /// GEO commands over sorted sets `g:*` (members p1..p8 around a few places).
    fn geo(&mut self) -> Cmd {
        let k = self.key("g");
        let args: Vec<String> = match self.below(14) {
            0..=3 => {
                let mut a = vec!["GEOADD".into(), k];
                if self.chance(20) {
                    a.push(self.pick(&["NX", "XX", "CH"]).into());
                }
                for _ in 0..=self.below(3) {
                    let (lon, lat) = self.lon_lat();
                    a.push(lon);
                    a.push(lat);
                    a.push(self.geo_member());
                }
                a
            }
            4 => {
                let mut a = vec!["GEOPOS".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.geo_member()));
                a
            }
            5 => {
                let mut a = vec!["GEODIST".into(), k, self.geo_member(), self.geo_member()];
                if self.chance(60) {
                    a.push(self.geo_unit());
                }
                a
            }
            6 => {
                let mut a = vec!["GEOHASH".into(), k];
                a.extend((0..=self.below(2)).map(|_| self.geo_member()));
                a
            }
            7 | 8 => {
                let store = self.chance(30);
                let mut a = if store {
                    vec!["GEOSEARCHSTORE".into(), self.key("g"), k]
                } else {
                    vec!["GEOSEARCH".into(), k]
                };
                if self.chance(50) {
                    a.push("FROMMEMBER".into());
                    a.push(self.geo_member());
                } else {
                    let (lon, lat) = self.lon_lat();
                    a.extend(["FROMLONLAT".into(), lon, lat]);
                }
                if self.chance(50) {
                    a.push("BYRADIUS".into());
                    a.push(self.geo_radius());
                } else {
                    a.push("BYBOX".into());
                    a.push(self.geo_radius());
                    a.push(self.geo_radius());
                }
                a.push(self.geo_unit());
                self.geo_options(&mut a, false);
                if store && self.chance(30) {
                    a.push("STOREDIST".into());
                }
                a
            }
            9 | 10 => {
                let ro = self.chance(30);
                let (lon, lat) = self.lon_lat();
                let name = if ro { "GEORADIUS_RO" } else { "GEORADIUS" };
                let mut a = vec![name.into(), k, lon, lat, self.geo_radius(), self.geo_unit()];
                self.geo_options(&mut a, !ro);
                a
            }
            11 => {
                let ro = self.chance(30);
                let name = if ro {
                    "GEORADIUSBYMEMBER_RO"
                } else {
                    "GEORADIUSBYMEMBER"
                };
                let mut a = vec![
                    name.into(),
                    k,
                    self.geo_member(),
                    self.geo_radius(),
                    self.geo_unit(),
                ];
                self.geo_options(&mut a, !ro);
                a
            }
            _ => {
                return Cmd {
                    args: to_args(vec![
                        "ZRANGE".into(),
                        k,
                        "0".into(),
                        "-1".into(),
                        "WITHSCORES".into(),
                    ]),
                    norm: DOUBLES,
                };
            }
        };
        Cmd::plain(to_args(args))
    }

    /// A database number: mostly 0 to 3, sometimes past the 16 databases or not a number.
    fn db(&mut self) -> String {
        match self.below(12) {
            0 => self.pick(&["16", "-1", "x", "1.5"]).into(),
            _ => self.below(4).to_string(),
        }
    }

    /// Databases: SELECT, MOVE, COPY ... DB, SWAPDB, FLUSHDB and DBSIZE over the other families'
    /// keys, so every family's commands run in databases 0 to 3.
    fn databases(&mut self) -> Cmd {
        let any = self.pick(&["s", "l", "h", "t", "z"]).to_string();
        let k = self.key(&any);
        let args: Vec<String> = match self.below(20) {
            0..=5 => vec!["SELECT".into(), self.db()],
            6..=8 => vec!["MOVE".into(), k, self.db()],
            9..=10 => {
                let mut a = vec!["COPY".into(), k, self.key(&any), "DB".into(), self.db()];
                if self.chance(30) {
                    a.push("REPLACE".into());
                }
                a
            }
            11..=12 => vec!["SWAPDB".into(), self.db(), self.db()],
            13 => vec!["FLUSHDB".into()],
            14 => {
                let norm = UNORDERED;
                return Cmd {
                    args: to_args(vec!["KEYS".into(), "*".into()]),
                    norm,
                };
            }
            15..=16 => vec!["SET".into(), k, self.value()],
            17 => vec!["RPUSH".into(), format!("l:{}", self.below(4)), self.value()],
            18 => vec!["EXISTS".into(), k],
            _ => vec!["DBSIZE".into()],
        };
        Cmd::plain(to_args(args))
    }

    fn server(&mut self) -> Cmd {
        let args: Vec<String> = match self.below(13) {
            0 => vec!["PING".into()],
            1 => vec!["ECHO".into(), self.value()],
            2 => vec!["NOSUCHCOMMAND".into(), "x".into()],
            3 => vec!["TYPE".into()],
            4 => vec!["SELECT".into(), self.pick(&["0", "x", "-1"]).into()],
            5 => vec!["EXISTS".into()],
            6 => vec!["GET".into(), "a".into(), "b".into()],
            // Subcommands as COMMAND sees them (no container's whole entry: Redis lists its
            // subcommands in a random order).
            7 => {
                let sub = self.pick(&[
                    "object|encoding",
                    "XINFO|STREAM",
                    "memory|usage",
                    "config|get",
                    "client|kill",
                    "config|nope",
                    "get|x",
                ]);
                vec!["COMMAND".into(), "INFO".into(), sub.into()]
            }
            8 => {
                let sub = self.pick(&["slowlog|len", "memory|stats", "config|rewrite", "x|y"]);
                vec!["COMMAND".into(), "DOCS".into(), sub.into()]
            }
            9 => {
                let pattern = self.pick(&["config*", "*|get", "object|*", "xinfo*", "CLIENT|K*"]);
                let args = vec!["COMMAND", "LIST", "FILTERBY", "PATTERN", pattern];
                return Cmd {
                    args: to_args(args.into_iter().map(String::from).collect()),
                    norm: UNORDERED,
                };
            }
            10 => {
                let full = self.pick(&[
                    "OBJECT ENCODING k",
                    "OBJECT NOPE k",
                    "OBJECT ENCODING",
                    "OBJECT HELP",
                    "XINFO STREAM s FULL",
                    "XGROUP CREATE s g $",
                    "MEMORY USAGE k SAMPLES 5",
                    "CONFIG GET x",
                ]);
                let sub = self.pick(&["GETKEYS", "GETKEYSANDFLAGS"]);
                ["COMMAND", sub]
                    .into_iter()
                    .chain(full.split(' '))
                    .map(String::from)
                    .collect()
            }
            11 => {
                let line = self.pick(&[
                    "CLUSTER NOPE",
                    "CLUSTER INFO x",
                    "CLUSTER INFO",
                    "MEMORY USAGE",
                ]);
                line.split(' ').map(String::from).collect()
            }
            _ => vec!["DBSIZE".into()],
        };
        Cmd::plain(to_args(args))
    }
}

fn to_args(args: Vec<String>) -> Vec<Vec<u8>> {
    args.into_iter().map(String::into_bytes).collect()
}
