//! Streams over the wire: a table of raw requests and the exact bytes redis-server 7.0.15
//! answered (recorded side by side, RESP2 then RESP3; only deterministic replies: no idle
//! times), blocking reads woken from other connections and workers, and a stream with its
//! groups and pending entries surviving a `kill -9` restart through the log and through a
//! snapshot.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Raw, read_reply, two_workers};

/// (command, reply bytes); the command split on spaces. Recorded from redis-server 7.0.15.
const CASES: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("XADD s 1-1 a 1", b"$3\r\n1-1\r\n"),
    ("XADD s 1-1 a 1", b"-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"),
    ("XADD s 0 a 1", b"-ERR The ID specified in XADD must be greater than 0-0\r\n"),
    ("XADD s 0-0 a 1", b"-ERR The ID specified in XADD must be greater than 0-0\r\n"),
    ("XADD s 2-* b 2", b"$3\r\n2-0\r\n"),
    ("XADD s 2-* c 3", b"$3\r\n2-1\r\n"),
    ("XADD s 3 d 4", b"$3\r\n3-0\r\n"),
    ("XADD s 4-1 e", b"-ERR wrong number of arguments for 'xadd' command\r\n"),
    ("XADD s MAXLEN 1 MINID 1 * a b", b"-ERR syntax error, MAXLEN and MINID options at the same time are not compatible\r\n"),
    ("XADD s LIMIT 1 * a b", b"-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n"),
    ("XADD s MAXLEN ~ 1 LIMIT 1 5-0 a", b"-ERR wrong number of arguments for 'xadd' command\r\n"),
    ("XADD s NOMKSTREAM junk", b"-ERR wrong number of arguments for 'xadd' command\r\n"),
    ("XADD nokey NOMKSTREAM * a b", b"$-1\r\n"),
    ("XADD s 18446744073709551616-0 a b", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XLEN s", b":4\r\n"),
    ("XLEN nokey", b":0\r\n"),
    ("XRANGE s - +", b"*4\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n"),
    ("XRANGE s - + COUNT 2", b"*2\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
    ("XRANGE s - + COUNT 0", b"*-1\r\n"),
    ("XRANGE nokey - + COUNT 0", b"*0\r\n"),
    ("XRANGE s (2-0 (3-0", b"*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
    ("XRANGE s 2 2", b"*2\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
    ("XRANGE s (- +", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XRANGE s - (0-0", b"-ERR invalid end ID for the interval\r\n"),
    ("XRANGE s (18446744073709551615-18446744073709551615 +", b"-ERR invalid start ID for the interval\r\n"),
    ("XRANGE s - + junk", b"-ERR syntax error\r\n"),
    ("XRANGE s abc +", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XREVRANGE s + - COUNT 2", b"*2\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
    ("XREVRANGE s (3-0 -", b"*3\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
    ("XDEL s 2-1 9-9", b":1\r\n"),
    ("XDEL nokey junk", b":0\r\n"),
    ("XDEL s junk", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XTRIM s MAXLEN = 3", b":0\r\n"),
    ("XTRIM s MINID 3-0", b":2\r\n"),
    ("XTRIM s MAXLEN -1", b"-ERR The MAXLEN argument must be >= 0.\r\n"),
    ("XTRIM s MAXLEN 1 LIMIT 5", b"-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n"),
    ("XTRIM s MAXLEN ~ 1 LIMIT -1", b"-ERR The LIMIT argument must be >= 0.\r\n"),
    ("XTRIM s junk 1", b"-ERR syntax error\r\n"),
    ("XTRIM nokey MAXLEN x", b"-ERR value is not an integer or out of range\r\n"),
    ("XTRIM s MAXLEN ~ 0", b":1\r\n"),
    ("XLEN s", b":0\r\n"),
    ("XINFO STREAM s", b"*20\r\n$6\r\nlength\r\n:0\r\n$15\r\nradix-tree-keys\r\n:0\r\n$16\r\nradix-tree-nodes\r\n:1\r\n$17\r\nlast-generated-id\r\n$3\r\n3-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n2-1\r\n$13\r\nentries-added\r\n:4\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n0-0\r\n$6\r\ngroups\r\n:0\r\n$11\r\nfirst-entry\r\n$-1\r\n$10\r\nlast-entry\r\n$-1\r\n"),
    ("XADD s 9-0 f v", b"$3\r\n9-0\r\n"),
    ("XSETID s 1-0", b"-ERR The ID specified in XSETID is smaller than the target stream top item\r\n"),
    ("XSETID s 20-0 ENTRIESADDED -1", b"-ERR entries_added must be positive\r\n"),
    ("XSETID s 20-0 MAXDELETEDID 21-0", b"-ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id\r\n"),
    ("XSETID s 20-0 ENTRIESADDED 1", b"+OK\r\n"),
    ("XSETID s 20-0 ENTRIESADDED 20 MAXDELETEDID 3-0", b"+OK\r\n"),
    ("XSETID nokey 1-0", b"-ERR no such key\r\n"),
    ("XSETID s 20-0 junk", b"-ERR syntax error\r\n"),
    ("XADD s 21-0 f1 v1 f2 v2", b"$4\r\n21-0\r\n"),
    ("XGROUP CREATE s g 0", b"+OK\r\n"),
    ("XGROUP CREATE s g 0", b"-BUSYGROUP Consumer Group name already exists\r\n"),
    ("XGROUP CREATE s g2 $", b"+OK\r\n"),
    ("XGROUP CREATE s g3 0 ENTRIESREAD 1", b"+OK\r\n"),
    ("XGROUP CREATE s g4 0 ENTRIESREAD -2", b"-ERR value for ENTRIESREAD must be positive or -1\r\n"),
    ("XGROUP CREATE nokey g 0", b"-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n"),
    ("XGROUP CREATE nokey g 0 MKSTREAM junk", b"-ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP.\r\n"),
    ("XGROUP CREATE mk g $ MKSTREAM", b"+OK\r\n"),
    ("XINFO STREAM mk", b"*20\r\n$6\r\nlength\r\n:0\r\n$15\r\nradix-tree-keys\r\n:0\r\n$16\r\nradix-tree-nodes\r\n:1\r\n$17\r\nlast-generated-id\r\n$3\r\n0-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n0-0\r\n$13\r\nentries-added\r\n:0\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n0-0\r\n$6\r\ngroups\r\n:1\r\n$11\r\nfirst-entry\r\n$-1\r\n$10\r\nlast-entry\r\n$-1\r\n"),
    ("XGROUP CREATE s g5 abc", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XGROUP FOO", b"-ERR unknown subcommand 'FOO'. Try XGROUP HELP.\r\n"),
    ("XGROUP CREATE s", b"-ERR wrong number of arguments for 'xgroup|create' command\r\n"),
    ("XINFO GROUPS s", b"*3\r\n*12\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n$-1\r\n$3\r\nlag\r\n:2\r\n*12\r\n$4\r\nname\r\n$2\r\ng2\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$4\r\n21-0\r\n$12\r\nentries-read\r\n$-1\r\n$3\r\nlag\r\n:0\r\n*12\r\n$4\r\nname\r\n$2\r\ng3\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:1\r\n$3\r\nlag\r\n:20\r\n"),
    ("XREADGROUP GROUP g c1 COUNT 1 STREAMS s >", b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n9-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ("XPENDING s g", b"*4\r\n:1\r\n$3\r\n9-0\r\n$3\r\n9-0\r\n*1\r\n*2\r\n$2\r\nc1\r\n$1\r\n1\r\n"),
    ("XPENDING s g2", b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n"),
    ("XPENDING nokey g", b"-NOGROUP No such key 'nokey' or consumer group 'g'\r\n"),
    ("XPENDING s nog", b"-NOGROUP No such key 's' or consumer group 'nog'\r\n"),
    ("XPENDING s g - + 0", b"*0\r\n"),
    ("XREADGROUP GROUP g c1 STREAMS s 0", b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n9-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ("XREADGROUP GROUP g c2 STREAMS s 0", b"*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"),
    ("XREADGROUP GROUP g c1 STREAMS s $", b"-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.\r\n"),
    ("XREADGROUP GROUP nog c1 STREAMS s >", b"-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option\r\n"),
    ("XREADGROUP STREAMS s >", b"-ERR wrong number of arguments for 'xreadgroup' command\r\n"),
    ("XREADGROUP GROUP g c1 STREAMS s", b"-ERR wrong number of arguments for 'xreadgroup' command\r\n"),
    ("XREAD GROUP g c STREAMS s 0", b"-ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.\r\n"),
    ("XREAD NOACK STREAMS s 0", b"-ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.\r\n"),
    ("XREAD STREAMS s >", b"-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.\r\n"),
    ("XREAD STREAMS s", b"-ERR wrong number of arguments for 'xread' command\r\n"),
    ("XREAD COUNT 1 STREAMS s s 0 20", b"*2\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n9-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n"),
    ("XREAD STREAMS s nokey 20-0 0", b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n"),
    ("XREAD STREAMS nokey $", b"*-1\r\n"),
    ("XREAD BLOCK -1 STREAMS s 0", b"-ERR timeout is negative\r\n"),
    ("XREAD BLOCK x STREAMS s 0", b"-ERR timeout is not an integer or out of range\r\n"),
    ("XREAD COUNT x STREAMS s 0", b"-ERR value is not an integer or out of range\r\n"),
    ("XREAD junk", b"-ERR wrong number of arguments for 'xread' command\r\n"),
    ("XAUTOCLAIM s g c2 0 0 COUNT 1", b"*3\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$3\r\n9-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*0\r\n"),
    ("XAUTOCLAIM s g c2 0 0 COUNT 0", b"-ERR COUNT must be > 0\r\n"),
    ("XAUTOCLAIM s g c2 x 0", b"-ERR Invalid min-idle-time argument for XAUTOCLAIM\r\n"),
    ("XAUTOCLAIM s nog c2 0 0", b"-NOGROUP No such key 's' or consumer group 'nog'\r\n"),
    ("XCLAIM s g c3 0 21-0 JUSTID", b"*0\r\n"),
    ("XCLAIM s g c3 0 21-0 RETRYCOUNT 7", b"*0\r\n"),
    ("XCLAIM s g c3 0 21-0 FOO", b"-ERR Unrecognized XCLAIM option 'FOO'\r\n"),
    ("XCLAIM s g c3 x 21-0", b"-ERR Invalid min-idle-time argument for XCLAIM\r\n"),
    ("XCLAIM s nog c3 0 21-0", b"-NOGROUP No such key 's' or consumer group 'nog'\r\n"),
    ("XCLAIM s g c3 0 9-0 FORCE JUSTID", b"*1\r\n$3\r\n9-0\r\n"),
    ("XDEL s 9-0", b":1\r\n"),
    ("XCLAIM s g c3 0 9-0 21-0 JUSTID", b"*0\r\n"),
    ("XREADGROUP GROUP g c3 STREAMS s 0", b"*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"),
    ("XACK s g 21-0 1-1 21-0", b":0\r\n"),
    ("XACK s g junk", b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ("XACK s nog 1-1", b":0\r\n"),
    ("XACK nokey g 1-1", b":0\r\n"),
    ("XGROUP CREATECONSUMER s g c4", b":1\r\n"),
    ("XGROUP CREATECONSUMER s g c4", b":0\r\n"),
    ("XGROUP CREATECONSUMER s nog c", b"-NOGROUP No such consumer group 'nog' for key name 's'\r\n"),
    ("XGROUP DELCONSUMER s g c3", b":0\r\n"),
    ("XGROUP DELCONSUMER s g c9", b":0\r\n"),
    ("XGROUP SETID s g 0 ENTRIESREAD 0", b"+OK\r\n"),
    ("XGROUP SETID s nog 0", b"-NOGROUP No such consumer group 'nog' for key name 's'\r\n"),
    ("XGROUP SETID nokey g 0", b"-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n"),
    ("XGROUP DESTROY s g2", b":1\r\n"),
    ("XGROUP DESTROY s g2", b":0\r\n"),
    ("XGROUP DESTROY nokey g", b"-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n"),
    ("XINFO GROUPS s", b"*2\r\n*12\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:3\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:0\r\n$3\r\nlag\r\n:21\r\n*12\r\n$4\r\nname\r\n$2\r\ng3\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:1\r\n$3\r\nlag\r\n:20\r\n"),
    ("XINFO FOO", b"-ERR unknown subcommand 'FOO'. Try XINFO HELP.\r\n"),
    ("XINFO STREAM nokey", b"-ERR no such key\r\n"),
    ("XINFO CONSUMERS s nog", b"-NOGROUP No such consumer group 'nog' for key name 's'\r\n"),
    ("XINFO STREAM s FULL junk", b"-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.\r\n"),
    ("SET str x", b"+OK\r\n"),
    ("XINFO STREAM str", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("XREAD STREAMS str 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("XREADGROUP GROUP g c STREAMS str >", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("XGROUP CREATE str g 0", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("XADD str * a b", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("XLEN str", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("TYPE s", b"+stream\r\n"),
    ("OBJECT ENCODING s", b"$6\r\nstream\r\n"),
    ("HELLO 3", b"(hello)"),
    ("XREAD COUNT 1 STREAMS s s 0 20", b"%2\r\n$1\r\ns\r\n*1\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$1\r\ns\r\n*1\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n"),
    ("XREAD STREAMS nokey 0", b"_\r\n"),
    ("XRANGE s - + COUNT 0", b"_\r\n"),
    ("XPENDING s g3", b"*4\r\n:0\r\n_\r\n_\r\n_\r\n"),
    ("XINFO STREAM s", b"%10\r\n$6\r\nlength\r\n:1\r\n$15\r\nradix-tree-keys\r\n:1\r\n$16\r\nradix-tree-nodes\r\n:2\r\n$17\r\nlast-generated-id\r\n$4\r\n21-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n9-0\r\n$13\r\nentries-added\r\n:21\r\n$23\r\nrecorded-first-entry-id\r\n$4\r\n21-0\r\n$6\r\ngroups\r\n:2\r\n$11\r\nfirst-entry\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$10\r\nlast-entry\r\n*2\r\n$4\r\n21-0\r\n*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n"),
    ("XINFO GROUPS s", b"*2\r\n%6\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:3\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:0\r\n$3\r\nlag\r\n:21\r\n%6\r\n$4\r\nname\r\n$2\r\ng3\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:1\r\n$3\r\nlag\r\n:20\r\n"),
    ("XREADGROUP GROUP g c1 STREAMS s 0", b"%1\r\n$1\r\ns\r\n*0\r\n"),
    ("XADD nokey NOMKSTREAM * a b", b"_\r\n"),
    ("HELLO 2", b"(hello)"),

];

#[test]
fn stream_replies_are_redis_bytes() {
    let server = two_workers();
    common::expect_replies(server.addr(), CASES);
}

/// `XREAD BLOCK` over keys of both workers is woken by an `XADD` from another connection;
/// `XREADGROUP BLOCK` by one inside another client's `MULTI`; a timeout answers a null
/// array; `CLIENT UNBLOCK ... ERROR` its error; inside `MULTI` it does not block.
#[test]
fn blocking_reads_wake_on_adds_from_anywhere() {
    let server = two_workers();
    let mut a = Raw::open(server.addr());
    let mut b = Raw::open(server.addr());
    // Ten keys: with two workers some live on each.
    let keys: Vec<String> = (0..10).map(|i| format!("bk{i}")).collect();
    let mut args = vec!["XREAD", "BLOCK", "5000", "STREAMS"];
    args.extend(keys.iter().map(String::as_str));
    args.extend(std::iter::repeat_n("$", keys.len()));
    a.send(&args);
    assert!(a.silent_for(100), "nothing to read yet");
    b.send(&["XADD", "bk7", "5-0", "f", "v"]);
    b.expect(b"$3\r\n5-0\r\n");
    a.expect(b"*1\r\n*2\r\n$3\r\nbk7\r\n*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n");

    b.send(&["XGROUP", "CREATE", "bk3", "g", "$", "MKSTREAM"]);
    b.expect(b"+OK\r\n");
    a.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "bk3",
        ">",
    ]);
    assert!(a.silent_for(100));
    b.send(&["MULTI"]);
    b.send(&["XADD", "bk3", "7-0", "x", "y"]);
    b.send(&["EXEC"]);
    b.expect(b"+OK\r\n+QUEUED\r\n*1\r\n$3\r\n7-0\r\n");
    a.expect(b"*1\r\n*2\r\n$3\r\nbk3\r\n*1\r\n*2\r\n$3\r\n7-0\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
    // The delivery is pending for the consumer.
    b.send(&["XPENDING", "bk3", "g"]);
    b.expect(b"*4\r\n:1\r\n$3\r\n7-0\r\n$3\r\n7-0\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n1\r\n");

    a.send(&["XREAD", "BLOCK", "50", "STREAMS", "bk3", "$"]);
    a.expect(b"*-1\r\n");

    a.send(&["CLIENT", "ID"]);
    let mut id = Vec::new();
    let mut byte = [0u8; 1];
    while !id.ends_with(b"\r\n") {
        a.0.read_exact(&mut byte).unwrap();
        id.push(byte[0]);
    }
    let id = String::from_utf8(id[1..id.len() - 2].to_vec()).unwrap();
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "bk3", "$"]);
    assert!(a.silent_for(100));
    b.send(&["CLIENT", "UNBLOCK", &id, "ERROR"]);
    b.expect(b":1\r\n");
    a.expect(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");

    a.send(&["MULTI"]);
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "bk3", "$"]);
    a.send(&["EXEC"]);
    a.expect(b"+OK\r\n+QUEUED\r\n*1\r\n*-1\r\n");
}

#[test]
fn scan_type_and_keyspace_events_know_streams() {
    let server = two_workers();
    let mut con = common::client(&server);
    let _: () = redis::cmd("XADD")
        .arg("st")
        .arg("1-0")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("plain")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let found: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("TYPE")
        .arg("stream")
        .clone()
        .iter(&mut con)
        .unwrap()
        .collect();
    assert_eq!(found, ["st"]);
    // Keyspace events in Redis's order: xadd then xtrim for a trimming XADD.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Et")
        .query(&mut con)
        .unwrap();
    let mut sub = Raw::open(server.addr());
    sub.send(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    sub.expect(b"*3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n");
    for args in [
        &["XADD", "st", "MAXLEN", "1", "2-0", "f", "v"][..],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &["XGROUP", "CREATECONSUMER", "st", "g", "c"],
        &["XGROUP", "SETID", "st", "g", "0"],
        &["XGROUP", "DELCONSUMER", "st", "g", "c"],
        &["XGROUP", "DESTROY", "st", "g"],
        &["XDEL", "st", "2-0"],
        &["XSETID", "st", "5-0"],
    ] {
        let _: redis::Value = redis::cmd(args[0]).arg(&args[1..]).query(&mut con).unwrap();
    }
    for event in [
        "xadd",
        "xtrim",
        "xgroup-create",
        "xgroup-createconsumer",
        "xgroup-setid",
        "xgroup-delconsumer",
        "xgroup-destroy",
        "xdel",
        "xsetid",
    ] {
        let channel = format!("__keyevent@0__:{event}");
        let want = format!(
            "*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n${}\r\n{channel}\r\n$2\r\nst\r\n",
            channel.len()
        );
        sub.expect(want.as_bytes());
    }
}

struct Child9(Child, String);

impl Drop for Child9 {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real binary with a data directory (the log synced at every write).
fn spawn(dir: &std::path::Path) -> Child9 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fc-server"))
        .args(["--bind", "127.0.0.1:0", "--threads", "2", "--shards", "8"])
        .arg("--data-dir")
        .arg(dir)
        .args(["--appendfsync", "always", "--save", ""])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("fc-server starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split(':').take(2).collect::<Vec<_>>().join(":");
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("fc-server reports its address");
    Child9(child, addr)
}

/// What a restart must reproduce: entries, ids, the group's PEL and consumers.
fn state(addr: &str) -> Vec<Vec<u8>> {
    let mut r = Raw::open(addr);
    let mut out = Vec::new();
    for args in [
        &["XRANGE", "rs", "-", "+"][..],
        &["XPENDING", "rs", "g", "-", "+", "100"],
        &["XINFO", "GROUPS", "rs"],
        &["XLEN", "rs"],
    ] {
        r.send(args);
        let mut reader = BufReader::new(r.0.try_clone().unwrap());
        let mut got = Vec::new();
        read_reply(&mut reader, &mut got);
        // Idle times move: keep the shape and ids only (an integer line after a consumer
        // name in XPENDING is an idle time).
        out.push(got);
    }
    out
}

fn write_history(addr: &str) {
    let mut r = Raw::open(addr);
    let mut send = |args: &[&str]| {
        r.send(args);
        let mut reader = BufReader::new(r.0.try_clone().unwrap());
        let mut got = Vec::new();
        read_reply(&mut reader, &mut got);
        assert!(!got.starts_with(b"-"), "{args:?}: {}", got.escape_ascii());
    };
    for i in 1..=20 {
        send(&["XADD", "rs", &format!("{i}-0"), "f", &format!("v{i}")]);
    }
    send(&["XDEL", "rs", "3-0"]);
    send(&["XTRIM", "rs", "MINID", "2"]);
    send(&["XGROUP", "CREATE", "rs", "g", "0"]);
    send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "5",
        "STREAMS",
        "rs",
        ">",
    ]);
    send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "3",
        "STREAMS",
        "rs",
        ">",
    ]);
    send(&["XACK", "rs", "g", "4-0"]);
    send(&[
        "XCLAIM",
        "rs",
        "g",
        "carol",
        "0",
        "5-0",
        "RETRYCOUNT",
        "9",
        "TIME",
        "1000",
    ]);
    send(&["XSETID", "rs", "30-0", "ENTRIESADDED", "40"]);
}

/// Idle times in `XPENDING` change between reads: compare the other fields.
fn without_idle(state: &[Vec<u8>]) -> Vec<String> {
    state
        .iter()
        .map(|s| {
            let text = s.escape_ascii().to_string();
            // XPENDING entries: id, consumer, :idle, :count — drop each `:idle`.
            let parts: Vec<&str> = text.split("\\r\\n").collect();
            let mut kept = Vec::new();
            let mut i = 0;
            while i < parts.len() {
                if parts[i] == "*4" && i + 5 < parts.len() && parts[i + 5].starts_with(':') {
                    kept.extend_from_slice(&parts[i..i + 5]);
                    kept.push(":count");
                    kept.push(parts[i + 6]);
                    i += 7;
                } else {
                    kept.push(parts[i]);
                    i += 1;
                }
            }
            kept.join("|")
        })
        .collect()
}

#[test]
fn a_stream_with_groups_survives_kill_9_through_the_log_and_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let server = spawn(dir.path());
        write_history(&server.1);
        state(&server.1)
    };
    // Dropped: SIGKILL. The log alone brings it back.
    let server = spawn(dir.path());
    let after_log = state(&server.1);
    assert_eq!(without_idle(&after_log), without_idle(&before));
    assert!(
        before[0].starts_with(b"*18\r\n"),
        "{}",
        before[0].escape_ascii()
    );
    // A snapshot, one more write after it, and another SIGKILL: image plus log tail.
    let mut r = Raw::open(&server.1);
    r.send(&["SAVE"]);
    r.expect(b"+OK\r\n");
    r.send(&["XADD", "rs", "31-0", "f", "after"]);
    r.expect(b"$4\r\n31-0\r\n");
    let before = state(&server.1);
    drop(server);
    let server = spawn(dir.path());
    assert_eq!(without_idle(&state(&server.1)), without_idle(&before));
}
