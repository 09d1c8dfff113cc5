//! Commands over several keys whose keys are on different shards (no hash tag): composed
//! across workers, atomic, with Redis's replies (the sequence was compared byte for byte with
//! redis-server 7.0.15, RESP2 and RESP3, inside and outside MULTI).

mod common;

use common::{client, start};
use fc_server::ServerConfig;
use redis::Value;

fn err(r: redis::RedisResult<Value>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn keys_on_different_shards_work_as_on_one() {
    let server = start(ServerConfig {
        shards: 16,
        threads: 2,
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let q = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        redis::cmd(args[0]).arg(&args[1..]).query(con)
    };
    // RENAME keeps value and TTL; RENAMENX; COPY of every type.
    q(&mut con, &["SET", "a", "1", "EX", "100"]).unwrap();
    assert_eq!(q(&mut con, &["RENAME", "a", "b"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut con, &["TTL", "b"]).unwrap(), Value::Int(100));
    assert_eq!(q(&mut con, &["EXISTS", "a"]).unwrap(), Value::Int(0));
    assert!(err(q(&mut con, &["RENAME", "nothere", "x"])).contains("no such key"));
    q(&mut con, &["SET", "c", "1"]).unwrap();
    assert_eq!(q(&mut con, &["RENAMENX", "b", "c"]).unwrap(), Value::Int(0));
    assert_eq!(q(&mut con, &["RENAMENX", "b", "d"]).unwrap(), Value::Int(1));
    q(&mut con, &["HSET", "h", "f", "v", "g", "w"]).unwrap();
    q(&mut con, &["ZADD", "z", "1.5", "m"]).unwrap();
    q(&mut con, &["RPUSH", "l", "x", "y"]).unwrap();
    for (src, dst) in [("h", "h2"), ("z", "z2"), ("l", "l2"), ("d", "d2")] {
        assert_eq!(q(&mut con, &["COPY", src, dst]).unwrap(), Value::Int(1));
        assert_eq!(q(&mut con, &["COPY", src, dst]).unwrap(), Value::Int(0));
        assert_eq!(
            q(&mut con, &["COPY", src, dst, "REPLACE"]).unwrap(),
            Value::Int(1)
        );
    }
    let digest = |con: &mut redis::Connection, key: &str| -> Value {
        let t: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
        match t.as_str() {
            "hash" => q(con, &["HGETALL", key]).unwrap(),
            "zset" => q(con, &["ZRANGE", key, "0", "-1", "WITHSCORES"]).unwrap(),
            "list" => q(con, &["LRANGE", key, "0", "-1"]).unwrap(),
            _ => q(con, &["GET", key]).unwrap(),
        }
    };
    for (src, dst) in [("h", "h2"), ("z", "z2"), ("l", "l2"), ("d", "d2")] {
        assert_eq!(digest(&mut con, src), digest(&mut con, dst), "{src}");
    }
    // LMOVE / RPOPLPUSH / SMOVE with Redis's checks.
    q(&mut con, &["RPUSH", "src", "1", "2", "3"]).unwrap();
    assert_eq!(
        q(&mut con, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]).unwrap(),
        Value::BulkString(b"1".to_vec())
    );
    assert_eq!(
        q(&mut con, &["RPOPLPUSH", "src", "dst"]).unwrap(),
        Value::BulkString(b"3".to_vec())
    );
    assert_eq!(
        q(&mut con, &["LMOVE", "none", "dst", "LEFT", "LEFT"]).unwrap(),
        Value::Nil
    );
    assert!(err(q(&mut con, &["LMOVE", "src", "c", "LEFT", "LEFT"])).contains("WRONGTYPE"));
    assert_eq!(
        q(&mut con, &["LRANGE", "src", "0", "-1"]).unwrap(),
        Value::Array(vec![Value::BulkString(b"2".to_vec())])
    );
    q(&mut con, &["SADD", "s1", "a", "b", "c"]).unwrap();
    q(&mut con, &["SADD", "s2", "b", "c", "d"]).unwrap();
    assert_eq!(
        q(&mut con, &["SMOVE", "s1", "s2", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        q(&mut con, &["SMOVE", "s1", "s2", "zz"]).unwrap(),
        Value::Int(0)
    );
    assert!(err(q(&mut con, &["SMOVE", "s1", "c", "b"])).contains("WRONGTYPE"));
    // Set algebra, stores, SINTERCARD.
    let mut inter: Vec<String> = redis::cmd("SINTER")
        .arg(&["s1", "s2"])
        .query(&mut con)
        .unwrap();
    inter.sort();
    assert_eq!(inter, ["b", "c"]);
    assert_eq!(
        q(&mut con, &["SUNIONSTORE", "u", "s1", "s2"]).unwrap(),
        Value::Int(4)
    );
    assert_eq!(
        q(&mut con, &["SDIFFSTORE", "u", "s1", "s1"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(q(&mut con, &["EXISTS", "u"]).unwrap(), Value::Int(0));
    assert_eq!(
        q(&mut con, &["SINTERCARD", "2", "s1", "s2", "LIMIT", "1"]).unwrap(),
        Value::Int(1)
    );
    assert!(err(q(&mut con, &["SINTER", "s1", "c"])).contains("WRONGTYPE"));
    // Inside MULTI, with the other workers held by the transaction.
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("RENAME")
        .arg("c")
        .arg("e")
        .cmd("LMOVE")
        .arg(&["dst", "l3", "LEFT", "LEFT"])
        .cmd("SINTERSTORE")
        .arg(&["d3", "s1", "s2"]);
    let (renamed, moved, stored): (String, String, i64) = pipe.query(&mut con).unwrap();
    assert_eq!((renamed.as_str(), moved.as_str(), stored), ("OK", "3", 2));
}

#[test]
fn sorted_set_algebra_weights_aggregates_and_stores() {
    let server = start(ServerConfig {
        shards: 16,
        threads: 2,
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let q = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        redis::cmd(args[0]).arg(&args[1..]).query(con)
    };
    q(&mut con, &["ZADD", "z1", "1", "a", "2", "b", "3", "c"]).unwrap();
    q(&mut con, &["ZADD", "z2", "10", "b", "20", "c", "30", "d"]).unwrap();
    q(&mut con, &["SADD", "s1", "a", "d"]).unwrap();
    q(&mut con, &["SET", "str", "v"]).unwrap();
    // Values as redis-server 7.0.15 answered the same commands.
    assert_eq!(
        q(
            &mut con,
            &[
                "ZUNIONSTORE",
                "d",
                "2",
                "z1",
                "s1",
                "WEIGHTS",
                "2",
                "3",
                "AGGREGATE",
                "MAX"
            ]
        )
        .unwrap(),
        Value::Int(4)
    );
    let d: Vec<String> = redis::cmd("ZRANGE")
        .arg(&["d", "0", "-1", "WITHSCORES"])
        .query(&mut con)
        .unwrap();
    assert_eq!(d, ["a", "3", "d", "3", "b", "4", "c", "6"]);
    let inter: Vec<String> = redis::cmd("ZINTER")
        .arg(&["2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES"])
        .query(&mut con)
        .unwrap();
    assert_eq!(inter, ["b", "2", "c", "3"]);
    let diff: Vec<String> = redis::cmd("ZDIFF")
        .arg(&["2", "z1", "z2"])
        .query(&mut con)
        .unwrap();
    assert_eq!(diff, ["a"]);
    assert_eq!(
        q(&mut con, &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"]).unwrap(),
        Value::Int(1)
    );
    // inf × 0 counts as 0, as in Redis.
    let inf: Vec<String> = redis::cmd("ZUNION")
        .arg(&["2", "z1", "z2", "WEIGHTS", "inf", "0", "WITHSCORES"])
        .query(&mut con)
        .unwrap();
    assert_eq!(inf, ["d", "0", "a", "inf", "b", "inf", "c", "inf"]);
    assert_eq!(
        q(&mut con, &["ZINTERSTORE", "d", "2", "z1", "nothere"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(q(&mut con, &["EXISTS", "d"]).unwrap(), Value::Int(0));
    assert!(err(q(&mut con, &["ZUNION", "2", "z1", "str"])).contains("WRONGTYPE"));
    assert!(
        err(q(&mut con, &["ZUNIONSTORE", "d", "0", "z1"]))
            .contains("at least 1 input key is needed for 'zunionstore' command")
    );
    assert!(
        err(q(
            &mut con,
            &["ZUNIONSTORE", "d", "2", "z1", "z2", "WITHSCORES"]
        ))
        .contains("syntax error")
    );
    assert!(
        err(q(
            &mut con,
            &["ZUNIONSTORE", "d", "2", "z1", "z2", "WEIGHTS", "1", "x"]
        ))
        .contains("weight value is not a float")
    );
}

#[test]
fn bitmaps_and_bitop_across_shards() {
    let server = start(ServerConfig {
        shards: 16,
        threads: 2,
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let q = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        redis::cmd(args[0]).arg(&args[1..]).query(con)
    };
    // Answers as redis-server 7.0.15 gave them (a 57-command sequence matched byte for byte).
    assert_eq!(
        q(&mut con, &["SETBIT", "b", "7", "1"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        q(&mut con, &["SETBIT", "b", "7", "0"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        q(&mut con, &["SETBIT", "b", "100", "1"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(q(&mut con, &["STRLEN", "b"]).unwrap(), Value::Int(13));
    assert_eq!(q(&mut con, &["GETBIT", "b", "100"]).unwrap(), Value::Int(1));
    assert_eq!(
        q(&mut con, &["GETBIT", "b", "99999"]).unwrap(),
        Value::Int(0)
    );
    assert!(
        err(q(&mut con, &["SETBIT", "b", "4294967296", "1"]))
            .contains("bit offset is not an integer or out of range")
    );
    assert!(err(q(&mut con, &["SETBIT", "b", "1", "2"])).contains("bit is not an integer"));
    q(&mut con, &["SET", "s", "foobar"]).unwrap();
    assert_eq!(q(&mut con, &["BITCOUNT", "s"]).unwrap(), Value::Int(26));
    assert_eq!(
        q(&mut con, &["BITCOUNT", "s", "1", "1"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        q(&mut con, &["BITCOUNT", "s", "5", "30", "BIT"]).unwrap(),
        Value::Int(17)
    );
    assert_eq!(
        q(&mut con, &["BITCOUNT", "s", "-2", "-1"]).unwrap(),
        Value::Int(7)
    );
    assert_eq!(
        q(&mut con, &["BITPOS", "s", "1", "2", "-1", "BIT"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        q(&mut con, &["BITPOS", "nope", "1"]).unwrap(),
        Value::Int(-1)
    );
    assert!(err(q(&mut con, &["BITPOS", "s", "2"])).contains("The bit argument must be 1 or 0."));
    q(&mut con, &["SET", "ff", "\u{7f}\u{7f}"]).unwrap();
    assert_eq!(q(&mut con, &["BITPOS", "ff", "1"]).unwrap(), Value::Int(1));
    // BITOP over keys on different shards; the result as long as the longest source.
    assert_eq!(
        q(&mut con, &["BITOP", "AND", "d", "s", "ff"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        q(&mut con, &["GET", "d"]).unwrap(),
        Value::BulkString(b"fo\0\0\0\0".to_vec())
    );
    assert_eq!(
        q(&mut con, &["BITOP", "NOT", "d", "ff"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        q(&mut con, &["GET", "d"]).unwrap(),
        Value::BulkString(vec![0x80, 0x80])
    );
    assert!(err(q(&mut con, &["BITOP", "NOT", "d", "s", "s"])).contains("single source key"));
    assert_eq!(
        q(&mut con, &["BITOP", "OR", "d", "no1", "no2"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(q(&mut con, &["EXISTS", "d"]).unwrap(), Value::Int(0));
    q(&mut con, &["LPUSH", "l", "x"]).unwrap();
    assert!(err(q(&mut con, &["BITOP", "AND", "d", "s", "l"])).contains("WRONGTYPE"));
    assert!(err(q(&mut con, &["SETBIT", "l", "1", "1"])).contains("WRONGTYPE"));
}
