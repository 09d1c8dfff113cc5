//! `COMMAND`'s view of container subcommands as a table of raw requests and the exact bytes
//! redis-server 7.0.15 answered them with, in RESP2 and in RESP3. Redis lists a container's
//! subcommands (nested in `COMMAND INFO`, in `COMMAND LIST`) in its hash tables' order, a
//! random seed per process; fc-server lists them in name order, so the recorded entries were
//! put in name order, each entry's bytes as Redis wrote them. `COMMAND DOCS` is recorded for
//! subcommands Redis keeps no arguments or history for (fc-server keeps neither).

mod common;

use common::{client, two_workers};

/// (command, reply bytes) in RESP2; the command split on spaces.
const RESP2: &[(&str, &[u8])] = &[
    ("COMMAND INFO slowlog", b"*1\r\n*10\r\n$7\r\nslowlog\r\n:-2\r\n*0\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*4\r\n*10\r\n$11\r\nslowlog|get\r\n:-2\r\n*3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*2\r\n$24\r\nrequest_policy:all_nodes\r\n$23\r\nnondeterministic_output\r\n*0\r\n*0\r\n*10\r\n$12\r\nslowlog|help\r\n:2\r\n*2\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*1\r\n+@slow\r\n*0\r\n*0\r\n*0\r\n*10\r\n$11\r\nslowlog|len\r\n:2\r\n*3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*3\r\n$24\r\nrequest_policy:all_nodes\r\n$23\r\nresponse_policy:agg_sum\r\n$23\r\nnondeterministic_output\r\n*0\r\n*0\r\n*10\r\n$13\r\nslowlog|reset\r\n:2\r\n*3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*2\r\n$24\r\nrequest_policy:all_nodes\r\n$29\r\nresponse_policy:all_succeeded\r\n*0\r\n*0\r\n"),
    ("COMMAND INFO object|encoding XINFO|STREAM", b"*2\r\n*10\r\n$15\r\nobject|encoding\r\n:3\r\n*1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n*3\r\n+@keyspace\r\n+@read\r\n+@slow\r\n*1\r\n$23\r\nnondeterministic_output\r\n*1\r\n*6\r\n$5\r\nflags\r\n*1\r\n+RO\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n*10\r\n$12\r\nxinfo|stream\r\n:-3\r\n*1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n*3\r\n+@read\r\n+@stream\r\n+@slow\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"),
    ("COMMAND INFO memory|usage config|get", b"*2\r\n*10\r\n$12\r\nmemory|usage\r\n:-3\r\n*1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n*2\r\n+@read\r\n+@slow\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*1\r\n+RO\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n*4\r\n+admin\r\n+noscript\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n*3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n*0\r\n*0\r\n*0\r\n"),
    ("COMMAND INFO config|nope get|x config|get|x", b"*3\r\n$-1\r\n$-1\r\n$-1\r\n"),
    ("COMMAND DOCS slowlog|len memory|stats config|rewrite nosuch", b"*6\r\n$11\r\nslowlog|len\r\n*8\r\n$7\r\nsummary\r\n$25\r\nGet the slow log's length\r\n$5\r\nsince\r\n$6\r\n2.2.12\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$12\r\nmemory|stats\r\n*8\r\n$7\r\nsummary\r\n$25\r\nShow memory usage details\r\n$5\r\nsince\r\n$5\r\n4.0.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$14\r\nconfig|rewrite\r\n*8\r\n$7\r\nsummary\r\n$63\r\nRewrite the configuration file with the in memory configuration\r\n$5\r\nsince\r\n$5\r\n2.8.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n"),
    ("COMMAND DOCS config|nope", b"*0\r\n"),
    ("COMMAND LIST FILTERBY PATTERN config*", b"*6\r\n$6\r\nconfig\r\n$10\r\nconfig|get\r\n$11\r\nconfig|help\r\n$16\r\nconfig|resetstat\r\n$14\r\nconfig|rewrite\r\n$10\r\nconfig|set\r\n"),
    ("COMMAND LIST FILTERBY PATTERN *|get", b"*2\r\n$10\r\nconfig|get\r\n$11\r\nslowlog|get\r\n"),
    ("COMMAND GETKEYS OBJECT ENCODING k", b"*1\r\n$1\r\nk\r\n"),
    ("COMMAND GETKEYS XINFO STREAM s FULL", b"*1\r\n$1\r\ns\r\n"),
    ("COMMAND GETKEYS MEMORY USAGE k SAMPLES 5", b"*1\r\n$1\r\nk\r\n"),
    ("COMMAND GETKEYSANDFLAGS XGROUP CREATE s g $", b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n+RW\r\n+insert\r\n"),
    ("COMMAND GETKEYS OBJECT NOPE k", b"-ERR Invalid command specified\r\n"),
    ("COMMAND GETKEYS OBJECT ENCODING", b"-ERR Invalid number of arguments specified for command\r\n"),
    ("COMMAND GETKEYS OBJECT HELP", b"-ERR The command has no key arguments\r\n"),
    ("COMMAND GETKEYS CONFIG GET x", b"-ERR The command has no key arguments\r\n"),
    ("COMMAND GETKEYS config|get x", b"-ERR Invalid command specified\r\n"),
    ("CLUSTER NOPE", b"-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n"),
    ("CLUSTER INFO x", b"-ERR wrong number of arguments for 'cluster|info' command\r\n"),
    ("CLUSTER INFO", b"-ERR This instance has cluster support disabled\r\n"),
    ("MEMORY USAGE", b"-ERR wrong number of arguments for 'memory|usage' command\r\n"),
    ("MEMORY NOPE", b"-ERR unknown subcommand 'NOPE'. Try MEMORY HELP.\r\n"),
];

/// The same commands in RESP3 (after `HELLO 3`).
const RESP3: &[(&str, &[u8])] = &[
    ("COMMAND INFO slowlog", b"*1\r\n*10\r\n$7\r\nslowlog\r\n:-2\r\n~0\r\n:0\r\n:0\r\n:0\r\n~1\r\n+@slow\r\n~0\r\n~0\r\n*4\r\n*10\r\n$11\r\nslowlog|get\r\n:-2\r\n~3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n~3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n~2\r\n$24\r\nrequest_policy:all_nodes\r\n$23\r\nnondeterministic_output\r\n~0\r\n~0\r\n*10\r\n$12\r\nslowlog|help\r\n:2\r\n~2\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n~1\r\n+@slow\r\n~0\r\n~0\r\n~0\r\n*10\r\n$11\r\nslowlog|len\r\n:2\r\n~3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n~3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n~3\r\n$24\r\nrequest_policy:all_nodes\r\n$23\r\nresponse_policy:agg_sum\r\n$23\r\nnondeterministic_output\r\n~0\r\n~0\r\n*10\r\n$13\r\nslowlog|reset\r\n:2\r\n~3\r\n+admin\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n~3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n~2\r\n$24\r\nrequest_policy:all_nodes\r\n$29\r\nresponse_policy:all_succeeded\r\n~0\r\n~0\r\n"),
    ("COMMAND INFO object|encoding XINFO|STREAM", b"*2\r\n*10\r\n$15\r\nobject|encoding\r\n:3\r\n~1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n~3\r\n+@keyspace\r\n+@read\r\n+@slow\r\n~1\r\n$23\r\nnondeterministic_output\r\n~1\r\n%3\r\n$5\r\nflags\r\n~1\r\n+RO\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n*10\r\n$12\r\nxinfo|stream\r\n:-3\r\n~1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n~3\r\n+@read\r\n+@stream\r\n+@slow\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n"),
    ("COMMAND INFO memory|usage config|get", b"*2\r\n*10\r\n$12\r\nmemory|usage\r\n:-3\r\n~1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n~2\r\n+@read\r\n+@slow\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~1\r\n+RO\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n~4\r\n+admin\r\n+noscript\r\n+loading\r\n+stale\r\n:0\r\n:0\r\n:0\r\n~3\r\n+@admin\r\n+@slow\r\n+@dangerous\r\n~0\r\n~0\r\n~0\r\n"),
    ("COMMAND INFO config|nope get|x config|get|x", b"*3\r\n_\r\n_\r\n_\r\n"),
    ("COMMAND DOCS slowlog|len memory|stats config|rewrite nosuch", b"%3\r\n$11\r\nslowlog|len\r\n%4\r\n$7\r\nsummary\r\n$25\r\nGet the slow log's length\r\n$5\r\nsince\r\n$6\r\n2.2.12\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$12\r\nmemory|stats\r\n%4\r\n$7\r\nsummary\r\n$25\r\nShow memory usage details\r\n$5\r\nsince\r\n$5\r\n4.0.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$14\r\nconfig|rewrite\r\n%4\r\n$7\r\nsummary\r\n$63\r\nRewrite the configuration file with the in memory configuration\r\n$5\r\nsince\r\n$5\r\n2.8.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n"),
    ("COMMAND DOCS config|nope", b"%0\r\n"),
    ("COMMAND LIST FILTERBY PATTERN config*", b"*6\r\n$6\r\nconfig\r\n$10\r\nconfig|get\r\n$11\r\nconfig|help\r\n$16\r\nconfig|resetstat\r\n$14\r\nconfig|rewrite\r\n$10\r\nconfig|set\r\n"),
    ("COMMAND LIST FILTERBY PATTERN *|get", b"*2\r\n$10\r\nconfig|get\r\n$11\r\nslowlog|get\r\n"),
    ("COMMAND GETKEYS OBJECT ENCODING k", b"*1\r\n$1\r\nk\r\n"),
    ("COMMAND GETKEYS XINFO STREAM s FULL", b"*1\r\n$1\r\ns\r\n"),
    ("COMMAND GETKEYS MEMORY USAGE k SAMPLES 5", b"*1\r\n$1\r\nk\r\n"),
    ("COMMAND GETKEYSANDFLAGS XGROUP CREATE s g $", b"*1\r\n*2\r\n$1\r\ns\r\n~2\r\n+RW\r\n+insert\r\n"),
    ("COMMAND GETKEYS OBJECT NOPE k", b"-ERR Invalid command specified\r\n"),
    ("COMMAND GETKEYS OBJECT ENCODING", b"-ERR Invalid number of arguments specified for command\r\n"),
    ("COMMAND GETKEYS OBJECT HELP", b"-ERR The command has no key arguments\r\n"),
    ("COMMAND GETKEYS CONFIG GET x", b"-ERR The command has no key arguments\r\n"),
    ("COMMAND GETKEYS config|get x", b"-ERR Invalid command specified\r\n"),
    ("CLUSTER NOPE", b"-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n"),
    ("CLUSTER INFO x", b"-ERR wrong number of arguments for 'cluster|info' command\r\n"),
    ("CLUSTER INFO", b"-ERR This instance has cluster support disabled\r\n"),
    ("MEMORY USAGE", b"-ERR wrong number of arguments for 'memory|usage' command\r\n"),
    ("MEMORY NOPE", b"-ERR unknown subcommand 'NOPE'. Try MEMORY HELP.\r\n"),
];

/// Sends each case on one connection (after `hello`, when given) and compares the bytes.
fn exchange(hello: Option<&str>, cases: &[(&str, &[u8])]) {
    let server = two_workers();
    let hello = hello.map(|h| (h, &b""[..]));
    common::expect_replies(server.addr(), hello.iter().chain(cases));
}

#[test]
fn subcommands_in_resp2_are_redis_bytes() {
    exchange(None, RESP2);
}

#[test]
fn subcommands_in_resp3_are_redis_bytes() {
    exchange(Some("HELLO 3"), RESP3);
}

/// `COMMAND COUNT` counts commands, `COMMAND LIST` lists subcommands too, and each container
/// nests in `COMMAND` what `COMMAND INFO container|sub` answers.
#[test]
fn count_list_and_nested_entries_agree() {
    let server = two_workers();
    let mut con = client(&server);
    let count: usize = redis::cmd("COMMAND").arg("COUNT").query(&mut con).unwrap();
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut con).unwrap();
    let commands = list.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(count, commands);
    assert!(list.len() > commands + 90, "{} entries", list.len());
    // Each container is followed by its subcommands.
    let at = list.iter().position(|n| n == "config").unwrap();
    assert_eq!(
        list[at..at + 6],
        [
            "config",
            "config|get",
            "config|help",
            "config|resetstat",
            "config|rewrite",
            "config|set"
        ]
    );
    let all: Vec<redis::Value> = redis::cmd("COMMAND").query(&mut con).unwrap();
    assert_eq!(all.len(), count);
    let subs: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("xinfo")
        .query(&mut con)
        .unwrap();
    let redis::Value::Array(entry) = &subs[0] else {
        panic!("{subs:?}")
    };
    let redis::Value::Array(nested) = &entry[9] else {
        panic!("{entry:?}")
    };
    assert_eq!(nested.len(), 4);
    let alone: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("xinfo|stream")
        .query(&mut con)
        .unwrap();
    assert_eq!(nested[3], alone[0]);
}

/// A subcommand is counted in its own statistics slot, `MEMORY USAGE` as `memory|usage`.
#[test]
fn subcommands_have_their_own_statistics() {
    let server = two_workers();
    let mut con = client(&server);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let _: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("k")
        .query(&mut con)
        .unwrap();
    let _: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hz")
        .query(&mut con)
        .unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    assert!(stats.contains("cmdstat_memory|usage:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_config|get:calls=1,"), "{stats}");
    assert!(!stats.contains("cmdstat_memory:"), "{stats}");
}

/// Every subcommand `COMMAND LIST` names runs in its container (none is listed that its
/// container's handler does not know), and a name it does not list is refused as Redis refuses
/// it. Each is sent with its least argument count of placeholders.
#[test]
fn listed_subcommands_are_the_ones_that_run() {
    let server = two_workers();
    let mut con = client(&server);
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut con).unwrap();
    let mut ran = 0;
    for name in list.iter().filter(|n| n.contains('|')) {
        let info: Vec<redis::Value> = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(name)
            .query(&mut con)
            .unwrap();
        let redis::Value::Array(entry) = &info[0] else {
            panic!("{name}: {info:?}")
        };
        let redis::Value::Int(arity) = entry[1] else {
            panic!("{name}: {entry:?}")
        };
        let (container, sub) = name.split_once('|').unwrap();
        let mut cmd = redis::cmd(container);
        cmd.arg(sub);
        // Placeholders no subcommand acts on (`CLIENT KILL x`, `CONFIG SET x x`).
        for _ in 2..arity.unsigned_abs() {
            cmd.arg("x");
        }
        let reply: redis::RedisResult<redis::Value> = cmd.query(&mut con);
        if let Err(e) = &reply {
            let text = e.to_string();
            assert!(
                !text.contains("unknown subcommand") && !text.contains("wrong number"),
                "{name}: {text}"
            );
        }
        ran += 1;
    }
    assert!(ran > 90, "{ran} subcommands");
    let refused: redis::RedisResult<redis::Value> =
        redis::cmd("CLUSTER").arg("nope").query(&mut con);
    let text = refused.unwrap_err().to_string();
    assert!(
        text.ends_with("unknown subcommand 'nope'. Try CLUSTER HELP."),
        "{text}"
    );
}
