//! Every store command of the table, run through the test-only text sink against a populated
//! store with a counting mutation sink: a command not flagged `write` must emit no mutation
//! and leave `DEBUG DIGEST` unchanged. This is what keeps the table's flags honest (the
//! connection refuses writes by them once the log fails, and replication will rely on them).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use fc_shard::{EmbeddedStore, LocalEmbeddedStore, Mutation, MutationSink};

use super::{COMMANDS, Ctx, F, Route};
use crate::reply::tests::TextSink;

/// One sample invocation per store command (on the keys [`populate`] makes).
const SAMPLES: &[&str] = &[
    "append s x",
    "bitcount s 0 -1 bit",
    "bitfield s set u8 0 65 get i4 4 incrby u2 100 1",
    "bitfield_ro s get u8 0",
    "bitpos s 1",
    "dbsize",
    "decr n",
    "decrby n 2",
    "del s",
    "dump s",
    "exists s h",
    "expire s 100",
    "expireat s 99999999999",
    "expiretime s",
    "flushall",
    "flushdb",
    "geoadd g 13.36 38.11 p 15.08 37.5 c",
    "geodist g p c km",
    "geohash g p",
    "geopos g p",
    "georadius g 15 37 200 km store g2",
    "georadius_ro g 15 37 200 km withdist",
    "georadiusbymember g p 200 km storedist g2",
    "georadiusbymember_ro g p 200 km",
    "geosearch g fromlonlat 15 37 byradius 200 km asc",
    "geosearchstore g2 g fromlonlat 15 37 bybox 400 400 km",
    "get s",
    "getbit s 3",
    "getdel s",
    "getex s ex 100",
    "getrange s 0 -1",
    "getset s y",
    "hdel h f1",
    "hexists h f1",
    "hget h f1",
    "hgetall h",
    "hincrby h n 1",
    "hincrbyfloat h n 1.5",
    "hkeys h",
    "hlen h",
    "hmget h f1 f2",
    "hmset h f3 v3",
    "hrandfield h 2 withvalues",
    "hscan h 0",
    "hset h f4 v4",
    "hsetnx h f5 v5",
    "hstrlen h f1",
    "hvals h",
    "incr n",
    "incrby n 5",
    "incrbyfloat n 1.5",
    "keys *",
    "lindex l 0",
    "linsert l before a z",
    "llen l",
    "lmove l l2 left right",
    "lpop l",
    "lpos l b",
    "lpush l q",
    "lpushx l q",
    "lrange l 0 -1",
    "lrem l 0 a",
    "lset l 0 w",
    "ltrim l 0 0",
    "mget s n",
    "mset s 1 n 2",
    "msetnx new1 1 new2 2",
    "persist e",
    "pexpire s 100000",
    "pexpireat s 99999999999999",
    "pexpiretime e",
    "pfadd hll a b c",
    "pfcount nohll",
    "pfmerge hllm nohll",
    "psetex s 100000 v",
    "pttl e",
    "randomkey",
    "rename s s2",
    "renamenx s s3",
    "restore r2 0 junk",
    "rpop l",
    "rpoplpush l l3",
    "rpush l r",
    "rpushx l r",
    "sadd t m9",
    "scan 0",
    "scard t",
    "sdiff t t2",
    "sdiffstore d t t2",
    "set s v",
    "setbit s 3 1",
    "setex s 100 v",
    "setnx s2 v",
    "setrange s 1 xyz",
    "sinter t t2",
    "sinterstore d t t2",
    "sismember t m1",
    "smembers t",
    "smismember t m1 m2",
    "smove t t2 m1",
    "sort l",
    "sort_ro l desc alpha",
    "spop t",
    "srandmember t 2",
    "srem t m1",
    "sscan t 0",
    "strlen s",
    "substr s 0 1",
    "sunion t t2",
    "sunionstore d t t2",
    "touch s",
    "ttl e",
    "type h",
    "unlink s",
    "xack x g 1-0",
    "xadd x * f v",
    "xautoclaim x g c2 0 0",
    "xclaim x g c2 0 2-0",
    "xdel x 3-0",
    "xgroup createconsumer x g c3",
    "xinfo stream x full",
    "xlen x",
    "xpending x g - + 10",
    "xrange x - +",
    "xrevrange x + -",
    "xsetid x 99-0",
    "xtrim x maxlen 1",
    "zadd z 3 c",
    "zcard z",
    "zcount z -inf +inf",
    "zincrby z 1 a",
    "zlexcount z - +",
    "zmscore z a b",
    "zpopmax z",
    "zpopmin z",
    "zrandmember z -3 withscores",
    "zrange z 0 -1 withscores",
    "zrangebylex z - +",
    "zrangebyscore z -inf +inf",
    "zrangestore z2 z 0 -1",
    "zrank z a",
    "zrem z a",
    "zremrangebylex z - +",
    "zremrangebyrank z 0 0",
    "zremrangebyscore z 0 1",
    "zrevrange z 0 -1",
    "zrevrangebylex z + -",
    "zrevrangebyscore z +inf -inf",
    "zrevrank z a",
    "zscan z 0",
    "zscore z a",
];

#[derive(Default)]
struct Counter(AtomicUsize);

impl MutationSink for Counter {
    fn on_mutation(&self, _shard: usize, _seq: u64, _mutation: &Mutation<'_>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn args(line: &str) -> Vec<Bytes> {
    line.split_whitespace()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// One shard (so every key is on the store the command runs on), with a key of each type.
fn populate(counter: &Arc<Counter>) -> LocalEmbeddedStore {
    let store = EmbeddedStore::builder(1)
        .mutation_sink(Arc::clone(counter) as Arc<dyn MutationSink>)
        .try_build()
        .expect("a store");
    let mut store = store
        .try_into_local_stores(1)
        .expect("one local store")
        .remove(0);
    store.try_set(b"s", b"hello", None).unwrap();
    store.try_set(b"n", b"10", None).unwrap();
    store.try_set(b"e", b"v", Some(1_000_000)).unwrap();
    store
        .hset(
            b"h",
            &[(&b"f1"[..], &b"v1"[..]), (b"f2", b"v2"), (b"n", b"1")],
        )
        .unwrap();
    store.rpush(b"l", &[&b"a"[..], b"b", b"c"]).unwrap();
    store.sadd(b"t", &[&b"m1"[..], b"m2"]).unwrap();
    store.sadd(b"t2", &[&b"m2"[..], b"m3"]).unwrap();
    store
        .zadd(b"z", &[(1.0, &b"a"[..]), (2.0, b"b")], Default::default())
        .unwrap();
    for ms in 1..=3 {
        let id = fc_shard::XAddId::Explicit(fc_shard::StreamId::new(ms, 0));
        store
            .xadd(b"x", id, &[&b"f"[..], b"v"], Default::default())
            .unwrap();
    }
    let start = fc_shard::GroupStart::Id(fc_shard::StreamId::MIN);
    store.xgroup_create(b"x", b"g", start, false, None).unwrap();
    store
        .xreadgroup(b"x", b"g", b"c", fc_shard::GroupReadFrom::New, 2, false)
        .unwrap();
    store
}

fn handler(name: &str) -> super::Handler {
    let spec = super::lookup(name.as_bytes()).unwrap_or_else(|| panic!("no command {name}"));
    match spec.route {
        Route::Key(h) | Route::Cursor(h) | Route::SubKey(h) => h,
        Route::PerKey { part, .. }
        | Route::AllWorkers { part, .. }
        | Route::Atomic { part, .. } => part,
        Route::Multi {
            handler: Some(h), ..
        } => h,
        Route::Session(_) | Route::Pop(_) | Route::Multi { handler: None, .. } => {
            panic!("{name} runs on the connection")
        }
    }
}

/// `DEBUG DIGEST` of `store`, as the text sink writes it.
fn digest(store: &mut LocalEmbeddedStore) -> Vec<String> {
    let mut out = TextSink::default();
    (super::DEBUG_PART.text)(&mut Ctx {
        store,
        args: &args("debug digest"),
        route: None,
        out: &mut out,
    });
    out.lines
}

#[test]
fn commands_not_flagged_write_change_nothing() {
    let store_commands: Vec<&str> = COMMANDS
        .iter()
        // Pops (`BLPOP`...) run on the connection; all of them are writes.
        .filter(|s| {
            !matches!(
                s.route,
                Route::Session(_) | Route::Pop(_) | Route::Multi { handler: None, .. }
            )
        })
        .map(|s| s.name)
        .collect();
    let sampled: Vec<&str> = SAMPLES
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        store_commands, sampled,
        "every store command needs one sample"
    );
    let mut wrote = 0;
    for line in SAMPLES {
        let counter = Arc::new(Counter::default());
        let mut store = populate(&counter);
        let args = args(line);
        let spec = super::lookup(&args[0]).unwrap();
        let before = digest(&mut store);
        let emitted = counter.0.load(Ordering::Relaxed);
        let mut out = TextSink::default();
        (handler(spec.name).text)(&mut Ctx {
            store: &mut store,
            args: &args,
            route: None,
            out: &mut out,
        });
        assert!(
            !out.lines
                .first()
                .is_some_and(|l| l.starts_with("!ERR syntax")),
            "{line}: {:?}",
            out.lines
        );
        let mutations = counter.0.load(Ordering::Relaxed) - emitted;
        let after = digest(&mut store);
        // A container's subcommand carries the write flag (`XGROUP CREATE`).
        let write = spec.has(F::WRITE)
            || spec.subcommands().iter().any(|s| {
                args.get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(s.name.as_bytes()))
                    && s.flags & F::WRITE != 0
            });
        if write {
            wrote += usize::from(mutations > 0);
        } else {
            assert_eq!(mutations, 0, "{line}: read-only, but emitted mutations");
            assert_eq!(before, after, "{line}: read-only, but the digest moved");
        }
    }
    // The samples exercise the write commands too (most of them change something).
    assert!(wrote > 50, "only {wrote} write samples changed anything");
}

/// `LRANGE`, `HGETALL`, `HKEYS`, `HVALS`, `SMEMBERS`, the sorted-set ranges and `KEYS` of large
/// collections write
/// their elements straight from the store into the sink and stop once it is full: nothing
/// copies the whole collection first, so the client's output limit bounds the command's memory.
#[test]
fn large_replies_stream_and_stop_at_a_full_sink() {
    let counter = Arc::new(Counter::default());
    let mut store = populate(&counter);
    let many: Vec<Vec<u8>> = (0..10_000).map(|i| format!("m{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
    store.rpush(b"biglist", &refs).unwrap();
    store.sadd(b"bigset", &refs).unwrap();
    let pairs: Vec<(&[u8], &[u8])> = refs.iter().map(|m| (*m, *m)).collect();
    store.hset(b"bighash", &pairs).unwrap();
    let scored: Vec<(f64, &[u8])> = refs
        .iter()
        .enumerate()
        .map(|(i, m)| (i as f64, *m))
        .collect();
    store.zadd(b"bigz", &scored, Default::default()).unwrap();
    for key in &refs[..5_000] {
        store.try_set(key, b"v", None).unwrap();
    }
    for (line, header) in [
        ("lrange biglist 0 -1", "[10000]"),
        ("hgetall bighash", "{10000}"),
        ("hkeys bighash", "[10000]"),
        ("hvals bighash", "[10000]"),
        ("smembers bigset", "<10000>"),
        ("zrange bigz 0 -1", "[10000]"),
        ("zrange bigz 0 -1 withscores", "(10000)"),
        ("zrevrangebyscore bigz +inf -inf withscores", "(10000)"),
        ("zrangebylex bigz - +", "[10000]"),
    ] {
        let name = line.split_whitespace().next().unwrap();
        let mut out = TextSink {
            cap: 100,
            ..TextSink::default()
        };
        (handler(name).text)(&mut Ctx {
            store: &mut store,
            args: &args(line),
            route: None,
            out: &mut out,
        });
        assert_eq!(out.lines[0], header, "{line}");
        // (An entry with its score is two lines: the stop comes after both.)
        assert!(
            (100..=101).contains(&out.lines.len()),
            "{line}: {} lines, not stopped when full",
            out.lines.len()
        );
        // Unbounded, the whole collection.
        let mut out = TextSink::default();
        (handler(name).text)(&mut Ctx {
            store: &mut store,
            args: &args(line),
            route: None,
            out: &mut out,
        });
        let items = if name == "hgetall" || line.ends_with("withscores") {
            20_000
        } else {
            10_000
        };
        assert_eq!(out.lines.len(), 1 + items, "{line}");
    }
    // KEYS: the length is set once the keys are written.
    let mut out = TextSink {
        cap: 50,
        ..TextSink::default()
    };
    (handler("keys").text)(&mut Ctx {
        store: &mut store,
        args: &args("keys m*"),
        route: None,
        out: &mut out,
    });
    assert_eq!(out.lines.len(), 50);
    assert_eq!(out.lines[0], "[49]");
    let mut out = TextSink::default();
    (handler("keys").text)(&mut Ctx {
        store: &mut store,
        args: &args("keys m*"),
        route: None,
        out: &mut out,
    });
    assert_eq!(out.lines[0], "[5000]");
    assert_eq!(out.lines.len(), 5_001);
    // A missing key: an empty aggregate.
    let mut out = TextSink::default();
    (handler("lrange").text)(&mut Ctx {
        store: &mut store,
        args: &args("lrange nothing 0 -1"),
        route: None,
        out: &mut out,
    });
    assert_eq!(out.lines, ["[0]"]);
}

#[test]
fn recent_names_answer_as_the_table_does() {
    let mut recent = super::RecentNames::default();
    for name in [
        "get",
        "GET",
        "set",
        "get",
        "GeT",
        "hset",
        "nosuchcommand",
        "get",
        "set",
        "x",
        "zrangebyscore",
        "",
    ] {
        let want = super::lookup(name.as_bytes()).map(|s| s.name);
        let got = recent.lookup(name.as_bytes()).map(|s| s.name);
        assert_eq!(got, want, "{name}");
        // Asked again (now cached when known), the same answer.
        let again = recent.lookup(name.as_bytes()).map(|s| s.name);
        assert_eq!(again, want, "{name} again");
    }
    // A name that is a prefix of a cached one is not it.
    recent.lookup(b"getrange");
    assert_eq!(recent.lookup(b"get").map(|s| s.name), Some("get"));
    assert_eq!(recent.lookup(b"getr").map(|s| s.name), None);
}
