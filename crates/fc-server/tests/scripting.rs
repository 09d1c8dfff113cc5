//! Scripting over the wire: `EVAL`/`EVALSHA`/`SCRIPT`/`FUNCTION`/`FCALL` replies compared
//! byte for byte with what redis-server 7.0.15 answered (RESP2, then RESP3 after `HELLO 3`),
//! undeclared keys refused across workers, a script over keys of several workers atomic under
//! concurrent writers, `BUSY` and `SCRIPT KILL` between two clients, libraries kept across a
//! restart, and a lock recipe (acquire, extend, release scripts) through redis-rs's `Script`.

mod common;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{client, read_reply, start, two_workers};
use fc_server::ServerConfig;

/// (arguments, reply bytes), recorded from redis-server 7.0.15 in this order on one
/// connection. Left out: `FUNCTION LIST` of several functions (Redis lists them in its
/// dictionary's order).
const CASES: &[(&[&str], &[u8])] = &[
    (&["FLUSHALL"], b"+OK\r\n"),
    (&["SCRIPT", "FLUSH"], b"+OK\r\n"),
    (&["EVAL", "return 1", "0"], b":1\r\n"),
    (&["EVAL", "return {1,2,3.7,'x',nil,4}", "0"], b"*4\r\n:1\r\n:2\r\n:3\r\n$1\r\nx\r\n"),
    (&["EVAL", "return {err='My Error'}", "0"], b"-My Error\r\n"),
    (&["EVAL", "return {ok='FINE'}", "0"], b"+FINE\r\n"),
    (&["EVAL", "return redis.error_reply('E1 bad')", "0"], b"-E1 bad\r\n"),
    (&["EVAL", "return redis.status_reply('ST')", "0"], b"+ST\r\n"),
    (&["EVAL", "return true", "0"], b":1\r\n"),
    (&["EVAL", "return false", "0"], b"$-1\r\n"),
    (&["EVAL", "return nil", "0"], b"$-1\r\n"),
    (&["EVAL", "return {}", "0"], b"*0\r\n"),
    (&["EVAL", "return {double=3.5}", "0"], b"$3\r\n3.5\r\n"),
    (&["EVAL", "return 1e20", "0"], b":-9223372036854775808\r\n"),
    (&["EVAL", "return -3.9", "0"], b":-3\r\n"),
    (&["EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}", "2", "k1", "k2", "a1", "a2"], b"*4\r\n$2\r\nk1\r\n$2\r\nk2\r\n$2\r\na1\r\n$2\r\na2\r\n"),
    (&["EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "s", "abc"], b"+OK\r\n"),
    (&["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"], b"-ERR value is not an integer or out of range script: 2bab3b661081db58bd2341920e0ba7cf5dc77b25, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.pcall('incr', KEYS[1])", "1", "s"], b"-ERR value is not an integer or out of range\r\n"),
    (&["EVAL", "local r = redis.pcall('incr', KEYS[1]) return r['err']", "1", "s"], b"$43\r\nERR value is not an integer or out of range\r\n"),
    (&["EVAL", "return redis.call('nosuch')", "0"], b"-ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.pcall('nosuch')", "0"], b"-ERR Unknown Redis command called from script\r\n"),
    (&["EVAL", "return redis.call('get')", "0"], b"-ERR Wrong number of args calling Redis command from script script: f187dee77f607f7cff00bbabc9df38507582c78d, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.call()", "0"], b"-ERR Please specify at least one argument for this redis lib call script: 0a907e1429221a4d85516cab7fd219a82a9439d8, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.call('set', 'a', {})", "0"], b"-ERR Lua redis lib command arguments must be strings or integers script: f37b5e7bcfb7cec825b302c88928083ea5eb6fdd, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.call('multi')", "0"], b"-ERR This Redis command is not allowed from script script: c329a1a294be6bf95b44144f7502610661ae925a, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.call('subscribe', 'x')", "0"], b"-ERR This Redis command is not allowed from script script: c243a859398a06d27716068064ba7f1b8d18b961, on @user_script:1.\r\n"),
    (&["EVAL", "error('boom')", "0"], b"-ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on @user_script:1.\r\n"),
    (&["EVAL", "error({err='X boom'})", "0"], b"-X boom script: f0acf9d1ce814691e2b2cc3296a806e16e047e31, on @user_script:1.\r\n"),
    (&["EVAL", "local a = 1\nerror('line two')", "0"], b"-ERR user_script:2: line two script: 7d9b4d6030e084c2b955bc4314d2ce4ca43627de, on @user_script:2.\r\n"),
    (&["EVAL", "local a = 1\nredis.call('nosuch')", "0"], b"-ERR Unknown Redis command called from script script: 2a61b4ccb0e7dee9f164229a04089d64d2462aef, on @user_script:2.\r\n"),
    (&["EVAL", "local a = 1\nreturn redis.call('nosuch')", "0"], b"-ERR Unknown Redis command called from script script: 8baccd23d93954db2086711e66a07b07e7998573, on @user_script:2.\r\n"),
    (&["EVAL", "local a = 1\nif a then\n  return redis.call('incr', 'nokey', 'x')\nend", "0"], b"-ERR Wrong number of args calling Redis command from script script: 92264c5472b4ca4f45768f42988436b7be7b0baa, on @user_script:3.\r\n"),
    (&["EVAL", "a = 1", "0"], b"-ERR user_script:1: Attempt to modify a readonly table script: b88f1ec0c9fe96fde96a6f9dabcbeee661dd7afe, on @user_script:1.\r\n"),
    (&["EVAL", "return x", "0"], b"-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1.\r\n"),
    (&["EVAL", "return type(os)", "0"], b"-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: 88bfcb2247db0b6fa4925f3cddc3fd0651459f99, on @user_script:1.\r\n"),
    (&["EVAL", "redis.call = 1", "0"], b"-ERR user_script:1: Attempt to modify a readonly table script: 69f883616b1814e2dc95cf801f324e38c5cc5ed2, on @user_script:1.\r\n"),
    (&["EVAL", "rawset(_G, 'x', 1)", "0"], b"-ERR Attempt to modify a readonly table script: e2c706419da183d6229a1230c3be09cc32cdeee0, on @user_script:1.\r\n"),
    (&["EVAL", "rawset(redis, 'call', 1)", "0"], b"-ERR Attempt to modify a readonly table script: 5fe6a8883340d7b98ed047026ea0c11e1cd0fa4e, on @user_script:1.\r\n"),
    (&["EVAL", "getmetatable('').__index = {}", "0"], b"-ERR user_script:1: Attempt to modify a readonly table script: 600bbd8170b33df355d1857b51be5ad60f77ab7b, on @user_script:1.\r\n"),
    (&["EVAL", "return ('abc'):upper()", "0"], b"$3\r\nABC\r\n"),
    (&["EVAL", "return loadstring('return type(redis)')()", "0"], b"$5\r\ntable\r\n"),
    (&["EVAL", "local f = loadstring('x = 1') return type(f)", "0"], b"$8\r\nfunction\r\n"),
    (&["EVAL", "local f = loadstring(string.dump(function() return 1 end)) return type(f)", "0"], b"$3\r\nnil\r\n"),
    (&["EVAL", "local f, e = loadstring('\x17Lua') return e", "0"], b"$52\r\n[string \"\x17Lua\"]:1: unexpected symbol near 'char(23)'\r\n"),
    (&["EVAL", "\x17Lua", "0"], b"-ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(23)'\r\n"),
    (&["EVAL", "local i = 0 local f = load(function() i = i + 1 if i == 1 then return 'return 8' end end) return f()", "0"], b":8\r\n"),
    (&["EVAL", "string.x = 1", "0"], b"-ERR user_script:1: Attempt to modify a readonly table script: c3eb0a2a15b3d4790b323c4104029c1ae425a769, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.setresp(4)", "0"], b"-ERR RESP version must be 2 or 3. script: 921c0a48021d97dfd5884aeea41875972c7804d9, on @user_script:1.\r\n"),
    (&["EVAL", "return redis.sha1hex('')", "0"], b"$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"),
    (&["EVAL", "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING, redis.REPL_NONE, redis.REPL_AOF, redis.REPL_REPLICA, redis.REPL_ALL}", "0"], b"*8\r\n:0\r\n:1\r\n:2\r\n:3\r\n:0\r\n:1\r\n:2\r\n:3\r\n"),
    (&["EVAL", "return redis.log(redis.LOG_WARNING, 'from a test')", "0"], b"$-1\r\n"),
    (&["EVAL", "return _VERSION", "0"], b"$7\r\nLua 5.1\r\n"),
    (&["EVAL", "return cjson.encode({1,2,{a=1}})", "0"], b"$13\r\n[1,2,{\"a\":1}]\r\n"),
    (&["EVAL", "return cjson.decode('[1,2,3]')", "0"], b"*3\r\n:1\r\n:2\r\n:3\r\n"),
    (&["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1,2,3}))", "0"], b"*3\r\n:1\r\n:2\r\n:3\r\n"),
    (&["EVAL", "return bit.band(0xff, 0x0f)", "0"], b":15\r\n"),
    (&["EVAL", "return struct.unpack('>I2', struct.pack('>I2', 513))", "0"], b":513\r\n"),
    (&["EVAL", "return 1", "-1"], b"-ERR Number of keys can't be negative\r\n"),
    (&["EVAL", "return 1", "2", "a"], b"-ERR Number of keys can't be greater than number of args\r\n"),
    (&["EVAL", "return 1", "x"], b"-ERR value is not an integer or out of range\r\n"),
    // Every script gets its own KEYS and ARGV, whatever the last one did to its own (the
    // `unsafe` feature's runner reuses two tables: emptied, stripped of a metatable, replaced
    // when left large).
    (&["EVAL", "KEYS[2] = 'x' ARGV.extra = 1 table.insert(ARGV, 'y') setmetatable(KEYS, {__index = function() return 'meta' end}) return #KEYS", "1", "a"], b":2\r\n"),
    (&["EVAL", "return {#KEYS, tostring(KEYS[2]), #ARGV, tostring(ARGV.extra), tostring(getmetatable(KEYS)), KEYS[1]}", "1", "b"], b"*6\r\n:1\r\n$3\r\nnil\r\n:0\r\n$3\r\nnil\r\n$3\r\nnil\r\n$1\r\nb\r\n"),
    (&["EVAL", "for i = 1, 1000 do ARGV[i] = i end return #ARGV", "0"], b":1000\r\n"),
    (&["EVAL", "return {#ARGV, ARGV[1], tostring(ARGV[2])}", "0", "z"], b"*3\r\n:1\r\n$1\r\nz\r\n$3\r\nnil\r\n"),
    (&["EVAL", "return {#KEYS, #ARGV}", "0"], b"*2\r\n:0\r\n:0\r\n"),
    (&["EVAL", "return KEYS", "2", "a", "b"], b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    (&["EVAL", "return {KEYS, ARGV}", "1", "k", "v"], b"*2\r\n*1\r\n$1\r\nk\r\n*1\r\n$1\r\nv\r\n"),
    (&["EVAL", "ARGV.err = 'MYERR from argv' error(ARGV)", "0", "x"], b"-MYERR from argv script: 9fd1bdd3bfc15af4ee84a7bd37776d447a341da6, on @user_script:1.\r\n"),
    // numkeys is read as Redis's string2ll reads it: no leading zero, no sign but `-`.
    (&["EVAL", "return KEYS[1]", "01", "k"], b"-ERR value is not an integer or out of range\r\n"),
    (&["EVAL", "return KEYS[1]", "+1", "k"], b"-ERR value is not an integer or out of range\r\n"),
    (&["EVAL", "return KEYS[1]", "-0", "k"], b"-ERR value is not an integer or out of range\r\n"),
    (&["EVAL", "return KEYS[1]", "1", "k"], b"$1\r\nk\r\n"),
    // The reused KEYS/ARGV tables shrink, keep only integer keys 1..n, and refill overwritten
    // slots; `redis.call`/`redis.pcall` as C functions (`unsafe`) or Lua wrappers; each status
    // reply is its own table; Redis 7's `pcall` turns an `{err = ...}` table into its message
    // (redis-server 7.0.15's replies, byte for byte).
    (&["SET", "s", "abc"], b"+OK\r\n"),
    (&["EVAL", "return #KEYS", "3", "a", "b", "c"], b":3\r\n"),
    (&["EVAL", "return {#KEYS, tostring(KEYS[2]), tostring(KEYS[3]), KEYS[1]}", "1", "d"], b"*4\r\n:1\r\n$3\r\nnil\r\n$3\r\nnil\r\n$1\r\nd\r\n"),
    (&["EVAL", "KEYS[0] = 'z' KEYS[1.5] = 'h' KEYS[-1] = 'n' return #KEYS", "2", "a", "b"], b":2\r\n"),
    (&["EVAL", "return {tostring(KEYS[0]), tostring(KEYS[1.5]), tostring(KEYS[-1]), #KEYS}", "1", "c"], b"*4\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n:1\r\n"),
    (&["EVAL", "KEYS[1] = nil return 1", "2", "a", "b"], b":1\r\n"),
    (&["EVAL", "return {#KEYS, KEYS[1], KEYS[2]}", "2", "c", "d"], b"*3\r\n:2\r\n$1\r\nc\r\n$1\r\nd\r\n"),
    (&["EVAL", "local x = 1\nlocal y = redis.call('incr', KEYS[1])\nreturn y", "1", "s"], b"-ERR value is not an integer or out of range script: 49ad5535117159eb613099e95b75ac5d381493ff, on @user_script:2.\r\n"),
    (&["EVAL", "local ok, e = pcall(redis.call, 'incr', KEYS[1]) return {tostring(ok), e.err}", "1", "s"], b"*1\r\n$5\r\nfalse\r\n"),
    (&["EVAL", "local e = redis.pcall('incr', KEYS[1]) return type(e) .. ' ' .. e.err", "1", "s"], b"$49\r\ntable ERR value is not an integer or out of range\r\n"),
    (&["EVAL", "return {type(redis.call), type(redis.pcall)}", "0"], b"*2\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n"),
    (&["EVAL", "local a = redis.call('set', KEYS[1], 'x') local b = redis.call('set', KEYS[1], 'y') a.ok = 'changed' return {a.ok, b.ok}", "1", "s2"], b"*2\r\n$7\r\nchanged\r\n$2\r\nOK\r\n"),
    (&["EVAL", "local r = redis.call('ping') return r.ok", "0"], b"$4\r\nPONG\r\n"),
    (&["EVAL", "return redis.call('incrby', KEYS[1], 5)", "1", "n"], b":5\r\n"),
    (&["EVAL", "return redis.call('incrby', KEYS[1], ARGV[1])", "1", "n", "2"], b":7\r\n"),
    (&["EVAL", "return redis.call('decr', KEYS[1])", "1", "n"], b":6\r\n"),
    (&["EVAL", "redis.call('select', 1) return redis.call('incr', KEYS[1])", "1", "n"], b":1\r\n"),
    (&["EVAL", "return redis.call('set', KEYS[1], 1.5)", "1", "f"], b"+OK\r\n"),
    (&["EVAL", "return redis.call('get', KEYS[1])", "1", "f"], b"$3\r\n1.5\r\n"),
    (&["SET", "s", "abc"], b"+OK\r\n"),
    (&["EVAL", "local ok, e = pcall(redis.call, 'incr', KEYS[1]) return {tostring(ok), type(e), e}", "1", "s"], b"*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$43\r\nERR value is not an integer or out of range\r\n"),
    (&["EVAL", "local ok, e = pcall(function() redis.call('incr', KEYS[1]) end) return {tostring(ok), e}", "1", "s"], b"*2\r\n$5\r\nfalse\r\n$43\r\nERR value is not an integer or out of range\r\n"),
    (&["EVAL", "local ok, e = pcall(error, {err = 'E1'}) return {tostring(ok), e}", "0"], b"*2\r\n$5\r\nfalse\r\n$2\r\nE1\r\n"),
    (&["EVAL", "local ok, e = pcall(error, {err = 5}) return {tostring(ok), type(e), e}", "0"], b"*3\r\n$5\r\nfalse\r\n$6\r\nnumber\r\n:5\r\n"),
    (&["EVAL", "local ok, e = pcall(error, {x = 1}) return {tostring(ok), type(e), e.x}", "0"], b"*3\r\n$5\r\nfalse\r\n$5\r\ntable\r\n:1\r\n"),
    (&["EVAL", "local ok, e = pcall(error, 'plain') return {tostring(ok), e}", "0"], b"*2\r\n$5\r\nfalse\r\n$5\r\nplain\r\n"),
    (&["EVAL", "local ok, e = pcall(function() error('lvl') end) return {tostring(ok), e}", "0"], b"*2\r\n$5\r\nfalse\r\n$18\r\nuser_script:1: lvl\r\n"),
    (&["EVAL", "return {pcall(function() return 1, 2, 3 end)}", "0"], b"*4\r\n:1\r\n:1\r\n:2\r\n:3\r\n"),
    (&["EVAL", "local ok, e = pcall(redis.call, 'nosuchcmd') return {tostring(ok), e}", "0"], b"*2\r\n$5\r\nfalse\r\n$44\r\nERR Unknown Redis command called from script\r\n"),
    (&["EVAL", "local ok, e = xpcall(function() redis.call('incr', KEYS[1]) end, function(m) return m end) return {tostring(ok), type(e)}", "1", "s"], b"*2\r\n$5\r\nfalse\r\n$5\r\ntable\r\n"),
    (&["EVAL", "return select('#', pcall(function() end))", "0"], b":1\r\n"),
    (&["EVAL", "syntax error here", "0"], b"-ERR Error compiling script (new function): user_script:1: '=' expected near 'error'\r\n"),
    (&["EVAL", "redis.call('del', KEYS[1]) redis.call('hset', KEYS[1], 'a', '1') return redis.call('hgetall', KEYS[1])", "1", "h"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
    (&["EVAL", "redis.setresp(3) local t = redis.call('hgetall', KEYS[1]) return t.map.a", "1", "h"], b"$1\r\n1\r\n"),
    (&["EVAL", "redis.call('del', KEYS[1]) redis.call('zadd', KEYS[1], 1.5, 'a', 2, 'b') return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", "1", "z"], b"*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n"),
    (&["EVAL", "redis.setresp(3) local t = redis.call('zrange', KEYS[1], 0, -1, 'withscores') return {t[1][1], tostring(t[1][2].double)}", "1", "z"], b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n"),
    (&["EVAL", "return redis.call('zscore', KEYS[1], 'a')", "1", "z"], b"$3\r\n1.5\r\n"),
    (&["EVAL", "local t = redis.call('get', KEYS[1]) return type(t)", "1", "nokey"], b"$7\r\nboolean\r\n"),
    (&["EVAL", "redis.setresp(3) local t = redis.call('get', KEYS[1]) return type(t)", "1", "nokey"], b"$3\r\nnil\r\n"),
    (&["EVAL", "return redis.call('ping')", "0"], b"+PONG\r\n"),
    (&["EVAL", "return redis.call('select', 1)", "0"], b"+OK\r\n"),
    (&["EVAL_RO", "return redis.call('set', KEYS[1], 'b')", "1", "ro"], b"-ERR Write commands are not allowed from read-only scripts. script: 407d71e294bfe1fd10686cc0b0b6ca4e072ab378, on @user_script:1.\r\n"),
    (&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "s"], b"$3\r\nabc\r\n"),
    (&["EVAL", "#!lua\nreturn 1", "0"], b":1\r\n"),
    (&["EVAL", "#!lua flags=bad\nreturn 1", "0"], b"-ERR Unexpected flag in script shebang: bad\r\n"),
    (&["EVAL", "#!lua name=x\nreturn 1", "0"], b"-ERR Unknown lua shebang option: name=x\r\n"),
    (&["EVAL", "#!js\nreturn 1", "0"], b"-ERR Unexpected engine in script shebang: #!js\r\n"),
    (&["EVAL", "#!lua flags=no-writes,allow-oom\nreturn 2", "0"], b":2\r\n"),
    (&["EVAL_RO", "#!lua\nreturn 3", "0"], b"-ERR Can not execute a script with write flag using *_ro command.\r\n"),
    (&["EVAL_RO", "#!lua flags=no-writes\nreturn 3", "0"], b":3\r\n"),
    (&["EVAL", "#!lua flags=no-writes\nlocal x = redis.call('set', KEYS[1], '1')", "1", "x"], b"-ERR Write commands are not allowed from read-only scripts. script: 499f1ef8e1772096533a606677fe716b459f695b, on @user_script:2.\r\n"),
    (&["SCRIPT", "LOAD", "return 'loaded'"], b"$40\r\nb534286061d4b9e4026607613b95c06c06015ae8\r\n"),
    (&["EVALSHA", "A1B4E1FD7CC66F0A4E4E1A5EF5CD0D08BA27A0D2", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
    (&["EVALSHA_RO", "a1b4e1fd7cc66f0a4e4e1a5ef5cd0d08ba27a0d2", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
    (&["EVALSHA", "0000000000000000000000000000000000000000", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
    (&["EVALSHA", "abc", "0"], b"-NOSCRIPT No matching script. Please use EVAL.\r\n"),
    (&["SCRIPT", "EXISTS", "a1b4e1fd7cc66f0a4e4e1a5ef5cd0d08ba27a0d2", "0000000000000000000000000000000000000000"], b"*2\r\n:0\r\n:0\r\n"),
    (&["SCRIPT", "LOAD", "syntax error"], b"-ERR Error compiling script (new function): user_script:1: '=' expected near 'error'\r\n"),
    (&["SCRIPT", "FLUSH", "ASYNC"], b"+OK\r\n"),
    (&["SCRIPT", "EXISTS", "a1b4e1fd7cc66f0a4e4e1a5ef5cd0d08ba27a0d2"], b"*1\r\n:0\r\n"),
    (&["SCRIPT", "FLUSH", "bad"], b"-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"),
    (&["SCRIPT", "KILL"], b"-NOTBUSY No scripts in execution right now.\r\n"),
    (&["FUNCTION", "FLUSH"], b"+OK\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('incr', keys[1]) end)\nredis.register_function{function_name='f2', callback=function(keys, args) return args[1] end, flags={'no-writes'}, description='desc2'}\nredis.register_function('f3', function(keys, args) error('bad') end)"], b"$5\r\nmylib\r\n"),
    (&["FCALL", "f1", "1", "s"], b"-ERR value is not an integer or out of range script: f1, on @user_function:2.\r\n"),
    (&["FCALL", "f1", "1", "counter"], b":1\r\n"),
    (&["FCALL", "f3", "0"], b"-ERR user_function:4: bad script: f3, on @user_function:4.\r\n"),
    (&["FCALL", "f2", "0", "hello"], b"$5\r\nhello\r\n"),
    (&["FCALL_RO", "f2", "0", "hello"], b"$5\r\nhello\r\n"),
    (&["FCALL_RO", "f1", "1", "s"], b"-ERR Can not execute a script with write flag using *_ro command.\r\n"),
    (&["FCALL", "nosuch", "0"], b"-ERR Function not found\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=mylib\nreturn 1"], b"-ERR Library 'mylib' already exists\r\n"),
    (&["FUNCTION", "LOAD", "return 1"], b"-ERR Missing library metadata\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=x\nreturn 1"], b"-ERR No functions registered\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=x2\nredis.register_function('f1', function() return 1 end)"], b"-ERR Function f1 already exists\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=x4\nsyntax error here"], b"-ERR Error compiling function: user_function:2: '=' expected near 'error'\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=x5 foo=bar\nreturn 1"], b"-ERR Invalid metadata value given: foo=bar\r\n"),
    (&["FUNCTION", "LOAD", "#!lua\nreturn 1"], b"-ERR Library name was not given\r\n"),
    (&["FUNCTION", "LOAD", "#!js name=x6\nreturn 1"], b"-ERR Engine 'js' not found\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=l2\nredis.register_function{function_name='g', callback=function() return 1 end, flags={'bad-flag'}}"], b"-ERR Error registering functions: ERR unknown flag given\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=l2\nredis.register_function('g', function() return 1 end)\nredis.register_function('g', function() return 1 end)"], b"-ERR Error registering functions: ERR Function already exists in the library\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=l3\nredis.register_function('g', function() return 2 end)"], b"$2\r\nl3\r\n"),
    (&["FUNCTION", "LOAD", "REPLACE", "#!lua name=l3\nredis.register_function('g', function() return 3 end)"], b"$2\r\nl3\r\n"),
    (&["FCALL", "g", "0"], b":3\r\n"),
    (&["FUNCTION", "LIST", "LIBRARYNAME", "l3", "WITHCODE"], b"*1\r\n*8\r\n$12\r\nlibrary_name\r\n$2\r\nl3\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*1\r\n*6\r\n$4\r\nname\r\n$1\r\ng\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n$12\r\nlibrary_code\r\n$67\r\n#!lua name=l3\nredis.register_function('g', function() return 3 end)\r\n"),
    (&["FUNCTION", "DELETE", "l3"], b"+OK\r\n"),
    (&["FUNCTION", "DELETE", "l3"], b"-ERR Library not found\r\n"),
    (&["FUNCTION", "LIST", "LIBRARYNAME", "nomatch"], b"*0\r\n"),
    // Functions and library code have no `KEYS`/`ARGV` globals (Redis's missing-global
    // error); `EVAL` scripts still do afterwards.
    (&["FUNCTION", "LOAD", "#!lua name=kglib\nredis.register_function('kgf', function(keys, args) return type(KEYS) end)\nredis.register_function('kgg', function(keys, args) return {#keys, keys[1], args[1]} end)"], b"$5\r\nkglib\r\n"),
    (&["EVAL", "return #KEYS", "1", "x"], b":1\r\n"),
    (&["FCALL", "kgf", "0"], b"-ERR user_function:2: Script attempted to access nonexistent global variable 'KEYS' script: kgf, on @user_function:2.\r\n"),
    (&["FCALL", "kgg", "1", "k", "a"], b"*3\r\n:1\r\n$1\r\nk\r\n$1\r\na\r\n"),
    (&["EVAL", "return {#KEYS, KEYS[1], #ARGV}", "1", "y"], b"*3\r\n:1\r\n$1\r\ny\r\n:0\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=kglib2\nlocal n = #KEYS\nredis.register_function('kgh', function() return 1 end)"], b"-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'KEYS'\r\n"),
    (&["FUNCTION", "LOAD", "#!lua name=kglib3\nredis.register_function('kgh3', function() return ARGV end)"], b"$6\r\nkglib3\r\n"),
    (&["FCALL", "kgh3", "0"], b"-ERR user_function:2: Script attempted to access nonexistent global variable 'ARGV' script: kgh3, on @user_function:2.\r\n"),
    (&["EVAL", "return #ARGV", "0", "a", "b"], b":2\r\n"),
    (&["FUNCTION", "DELETE", "kglib"], b"+OK\r\n"),
    (&["FUNCTION", "DELETE", "kglib3"], b"+OK\r\n"),
    (&["FUNCTION", "STATS"], b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:3\r\n"),
    (&["FUNCTION", "KILL"], b"-NOTBUSY No scripts in execution right now.\r\n"),
    (&["FUNCTION", "FLUSH", "bad"], b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n"),
    (&["FUNCTION", "RESTORE", "bad"], b"-ERR DUMP payload version or checksum are wrong\r\n"),
    (&["HELLO", "3"], b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:203\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"),
    (&["EVAL", "return {1, 'x', true, false}", "0"], b"*4\r\n:1\r\n$1\r\nx\r\n:1\r\n_\r\n"),
    (&["EVAL", "return {map={a=1}}", "0"], b"%1\r\n$1\r\na\r\n:1\r\n"),
    (&["EVAL", "return {set={a=true}}", "0"], b"~1\r\n$1\r\na\r\n"),
    (&["EVAL", "return {double=3.5}", "0"], b",3.5\r\n"),
    (&["EVAL", "return {big_number='123456789012345678901234567890'}", "0"], b"(123456789012345678901234567890\r\n"),
    (&["EVAL", "return nil", "0"], b"_\r\n"),
    (&["EVAL", "return redis.call('hgetall', KEYS[1])", "1", "h"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
    (&["EVAL", "redis.setresp(3) return redis.call('hgetall', KEYS[1])", "1", "h"], b"%1\r\n$1\r\na\r\n$1\r\n1\r\n"),
    (&["EVAL", "redis.setresp(3) return redis.call('zscore', KEYS[1], 'a')", "1", "z"], b",1.5\r\n"),
];

fn send(w: &mut TcpStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    w.write_all(&out).unwrap();
}

fn exchange(r: &mut BufReader<TcpStream>, w: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    send(w, args);
    let mut got = Vec::new();
    read_reply(r, &mut got);
    got
}

fn connect(addr: std::net::SocketAddr) -> (BufReader<TcpStream>, TcpStream) {
    let stream = TcpStream::connect(addr).unwrap();
    let w = stream.try_clone().unwrap();
    (BufReader::new(stream), w)
}

#[test]
fn replies_match_redis() {
    // One worker: the cases' undeclared keys are all its own. The same cases three ways: a
    // client of database 0 allowed everything (scripts take the connection's in-place path,
    // `session::script_in_place`), one whose user is not allowed everything, and one in
    // database 2 (both through `session::dispatch`, the general path; database 2 because a
    // case selects database 1 inside its script and expects a key new there).
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        ..ServerConfig::default()
    });
    let setups: [(&str, &[&[&str]]); 3] = [
        ("in place", &[]),
        (
            "a user checked command by command",
            &[
                &[
                    "ACL", "SETUSER", "checked", "on", "nopass", "+@all", "-debug", "~*", "&*",
                ],
                &["AUTH", "checked", "any"],
            ],
        ),
        ("database 2", &[&["SELECT", "2"]]),
    ];
    for (setup, first) in setups {
        let (mut r, mut w) = connect(server.addr());
        for args in first {
            let got = exchange(&mut r, &mut w, args);
            assert_eq!(got, b"+OK\r\n", "{setup}: {args:?}");
        }
        for (args, want) in CASES {
            let got = exchange(&mut r, &mut w, args);
            if args[0] == "HELLO" {
                continue;
            }
            assert_eq!(
                got.escape_ascii().to_string(),
                want.escape_ascii().to_string(),
                "{setup}: {args:?}"
            );
        }
    }
    server.shutdown();
}

/// Keys spread over both workers.
const SPREAD: [&str; 16] = [
    "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12", "k13", "k14",
    "k15",
];

/// `EVAL body` with every key of [`SPREAD`] declared.
fn over_spread(body: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(body).arg(SPREAD.len()).arg(&SPREAD[..]);
    cmd
}

#[test]
fn declared_keys_run_anywhere_and_undeclared_keys_of_another_worker_are_refused() {
    let server = two_workers();
    let mut con = client(&server);
    // Declared: every key reachable, the script holding both workers.
    let set_all = "for i, k in ipairs(KEYS) do redis.call('set', k, i) end return #KEYS";
    let n: i64 = over_spread(set_all).query(&mut con).unwrap();
    assert_eq!(n, 16);
    let sum = "local s = 0 for _, k in ipairs(KEYS) do s = s + redis.call('get', k) end return s";
    let total: i64 = over_spread(sum).query(&mut con).unwrap();
    assert_eq!(total, (1..=16).sum::<i64>());
    // Undeclared: a key of the worker the script does not run on is refused, as Redis
    // Cluster refuses a key of another node.
    let mut refused = 0;
    for k in SPREAD {
        let r: redis::RedisResult<String> = redis::cmd("EVAL")
            .arg("return redis.call('get', ARGV[1])")
            .arg(0)
            .arg(k)
            .query(&mut con);
        if let Err(e) = r {
            assert!(
                e.to_string()
                    .contains("Script attempted to access a non local key in a cluster node"),
                "{e}"
            );
            refused += 1;
        }
    }
    assert!(refused > 0 && refused < 16, "{refused} of 16 refused");
    server.shutdown();
}

#[test]
fn a_script_over_two_workers_is_atomic_under_concurrent_writers() {
    let server = two_workers();
    let mut con = client(&server);
    let init = "for _, k in ipairs(KEYS) do redis.call('set', k, 100) end";
    let _: () = over_spread(init).query(&mut con).unwrap();
    // Writers move units between keys of different workers; readers sum every key in one
    // script. A reader that saw a move half done would see another total.
    let transfer = "local n = redis.call('decrby', KEYS[1], ARGV[1]) redis.call('incrby', KEYS[2], ARGV[1]) return n";
    let sum = "local s = 0 for _, k in ipairs(KEYS) do s = s + redis.call('get', k) end return s";
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..2 {
        let mut con = client(&server);
        threads.push(std::thread::spawn(move || {
            for i in 0..400usize {
                let a = SPREAD[(i * 7 + t) % 16];
                let b = SPREAD[(i * 3 + t + 1) % 16];
                if a == b {
                    continue;
                }
                let _: i64 = redis::cmd("EVAL")
                    .arg(transfer)
                    .arg(2)
                    .arg(a)
                    .arg(b)
                    .arg(i % 5 + 1)
                    .query(&mut con)
                    .unwrap();
            }
        }));
    }
    let reader = {
        let mut con = client(&server);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let total: i64 = over_spread(sum).query(&mut con).unwrap();
                assert_eq!(total, 1600, "a reader saw a transfer half done");
                reads += 1;
            }
            reads
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let total: i64 = over_spread(sum).query(&mut con).unwrap();
    assert_eq!(total, 1600);
    server.shutdown();
}

/// Reads one reply with a deadline.
fn reply_within(r: &mut BufReader<TcpStream>, w: &mut TcpStream, args: &[&str]) -> String {
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    String::from_utf8_lossy(&exchange(r, w, args)).into_owned()
}

/// A connection authenticated with `password`.
fn connect_as(addr: std::net::SocketAddr, password: &str) -> (BufReader<TcpStream>, TcpStream) {
    let (mut r, mut w) = connect(addr);
    assert_eq!(reply_within(&mut r, &mut w, &["AUTH", password]), "+OK\r\n");
    (r, w)
}

/// `BUSY`'s text for a script (not a function).
const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// `SCRIPT KILL` from `killer` stops the script `running` sent; `running` then gets the kill
/// error and, in order, the reply to a `PING` sent meanwhile.
fn kill_and_see_it_end(
    killer: (&mut BufReader<TcpStream>, &mut TcpStream),
    running: (&mut BufReader<TcpStream>, &mut TcpStream),
) {
    assert_eq!(
        reply_within(killer.0, killer.1, &["SCRIPT", "KILL"]),
        "+OK\r\n"
    );
    let killed = reply_within(running.0, running.1, &["PING"]);
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{killed}"
    );
    let mut pong = Vec::new();
    read_reply(running.0, &mut pong);
    assert_eq!(pong, b"+PONG\r\n");
}

/// Writes `n` pipelined `PING`s on `w` from a thread of its own (the write blocks until the
/// server reads them); the thread gives `w` back.
fn pipeline_pings(mut w: TcpStream, n: usize) -> std::thread::JoinHandle<TcpStream> {
    std::thread::spawn(move || {
        w.write_all(&b"*1\r\n$4\r\nPING\r\n".repeat(n)).unwrap();
        w
    })
}

/// `SHUTDOWN NOSAVE` sent on `w` stops the busy script: its client `running` gets the kill
/// error or just sees its connection close.
fn shutdown_nosave_stops(w: &mut TcpStream, running: &mut BufReader<TcpStream>) {
    send(w, &["SHUTDOWN", "NOSAVE"]);
    running
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(running, &mut rest);
    assert!(
        rest.is_empty() || rest.starts_with("-ERR Script killed by SHUTDOWN NOSAVE"),
        "{rest}"
    );
}

#[test]
fn with_one_worker_new_clients_are_answered_during_a_busy_script_and_can_kill_it() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        requirepass: Some("sesame".into()),
        busy_reply_threshold_ms: 100,
        ..ServerConfig::default()
    });
    let (mut ra, mut wa) = connect_as(server.addr(), "sesame");
    send(
        &mut wa,
        &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    // The only worker runs the script: the acceptor answers a new client.
    let (mut rb, mut wb) = connect(server.addr());
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["PING"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert!(reply_within(&mut rb, &mut wb, &["AUTH", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["AUTH", "sesame"]),
        "+OK\r\n"
    );
    assert_eq!(reply_within(&mut rb, &mut wb, &["SET", "k", "v"]), BUSY);
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["FUNCTION", "KILL"]),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    kill_and_see_it_end((&mut rb, &mut wb), (&mut ra, &mut wa));
    // The script ended: the connection went to the worker, still authenticated.
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SET", "k", "v"]),
        "+OK\r\n"
    );
    assert_eq!(reply_within(&mut rb, &mut wb, &["GET", "k"]), "$1\r\nv\r\n");

    // A command Redis allows during a busy script waits for the worker, with what follows it.
    send(
        &mut wa,
        &[
            "EVAL",
            "local t = redis.call('TIME') while true do end",
            "0",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let (mut rc, mut wc) = connect_as(server.addr(), "sesame");
    send(&mut wc, &["MULTI"]);
    send(&mut wc, &["INCR", "n"]);
    send(&mut wc, &["EXEC"]);
    rc.get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut early = [0u8; 1];
    assert!(
        std::io::Read::read(&mut rc, &mut early).is_err(),
        "MULTI waits for the worker"
    );
    let (mut rd, mut wd) = connect_as(server.addr(), "sesame");
    assert_eq!(
        reply_within(&mut rd, &mut wd, &["SCRIPT", "KILL"]),
        "+OK\r\n"
    );
    let mut got = Vec::new();
    rc.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for _ in 0..3 {
        read_reply(&mut rc, &mut got);
    }
    assert_eq!(got, b"+OK\r\n+QUEUED\r\n*1\r\n:1\r\n");
    let mut killed = Vec::new();
    read_reply(&mut ra, &mut killed);
    assert!(
        killed.starts_with(b"-ERR Script killed by user"),
        "{}",
        String::from_utf8_lossy(&killed)
    );
    // SHUTDOWN NOSAVE from a client the acceptor answers stops the script and the server.
    send(
        &mut wa,
        &["EVAL", "redis.call('set', 'w', 'y') while true do end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    let (mut re, mut we) = connect_as(server.addr(), "sesame");
    assert!(reply_within(&mut re, &mut we, &["SCRIPT", "KILL"]).starts_with("-UNKILLABLE"),);
    shutdown_nosave_stops(&mut we, &mut ra);
    server.shutdown();
}

/// Asserts that nothing arrives on `r` for a while.
fn silent(r: &mut BufReader<TcpStream>, what: &str) {
    r.get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut early = [0u8; 1];
    assert!(std::io::Read::read(r, &mut early).is_err(), "{what}");
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
}

#[test]
fn the_busy_workers_own_clients_are_answered_and_can_kill_the_script() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        requirepass: Some("sesame".into()),
        busy_reply_threshold_ms: 100,
        ..ServerConfig::default()
    });
    // Every client connects before the script starts: all are the busy worker's.
    let (mut ra, mut wa) = connect_as(server.addr(), "sesame");
    let (mut rb, mut wb) = connect_as(server.addr(), "sesame");
    let (mut rc, mut wc) = connect(server.addr());
    let (mut rd, mut wd) = connect_as(server.addr(), "sesame");
    assert_eq!(reply_within(&mut rd, &mut wd, &["MULTI"]), "+OK\r\n");
    let (mut re, mut we) = connect_as(server.addr(), "sesame");
    let (mut rg, mut wg) = connect_as(server.addr(), "sesame");
    let (mut rf, wf) = connect_as(server.addr(), "sesame");
    // One that has sent nothing yet (its protocol not decided).
    let (mut rh, wh) = connect(server.addr());
    // All eight are the worker's (its connection tasks started) before the script runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while reply_within(&mut rb, &mut wb, &["CLIENT", "LIST"])
        .matches("id=")
        .count()
        < 8
    {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    send(
        &mut wa,
        &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    if matches!(
        common::runtime_from_env(),
        fc_server::config::Runtime::Monoio(_)
    ) {
        // On io_uring a read is in flight in the kernel for each waiting client: the hook
        // cannot take their sockets, so they wait for the script (docs/SCRIPTING.md).
        send(&mut wb, &["PING"]);
        silent(&mut rb, "on monoio the busy worker's clients wait");
        let (mut rk, mut wk) = connect_as(server.addr(), "sesame");
        assert_eq!(
            reply_within(&mut rk, &mut wk, &["SCRIPT", "KILL"]),
            "+OK\r\n"
        );
        let mut pong = Vec::new();
        read_reply(&mut rb, &mut pong);
        assert_eq!(pong, b"+PONG\r\n");
        drop((rc, wc, rd, wd, re, we, rg, wg, rf, wf, rh, wh, ra, wa));
        server.shutdown();
        return;
    }
    assert_eq!(reply_within(&mut rb, &mut wb, &["PING"]), BUSY);
    // Pipelined requests are answered in order, each as Redis would during a busy script.
    send(&mut wb, &["SET", "k", "v"]);
    send(&mut wb, &["NOSUCH", "x"]);
    send(&mut wb, &["GET"]);
    send(&mut wb, &["CLIENT", "NOSUCH"]);
    let mut got = Vec::new();
    for _ in 0..4 {
        read_reply(&mut rb, &mut got);
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        format!(
            "{BUSY}-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n-ERR wrong number of arguments for 'get' command\r\n-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.\r\n"
        )
    );
    // Before authentication: NOAUTH.
    assert_eq!(
        reply_within(&mut rc, &mut wc, &["PING"]),
        "-NOAUTH Authentication required.\r\n"
    );
    // Inside MULTI the client waits for the worker (EXEC would have to abort otherwise).
    send(&mut wd, &["INCR", "n"]);
    silent(&mut rd, "a client in MULTI waits");
    // A command Redis allows during a busy script waits, with everything after it.
    send(&mut we, &["MULTI"]);
    send(&mut we, &["PING"]);
    silent(&mut re, "MULTI waits for the worker");
    // A partial request stays in the socket for the worker.
    wg.write_all(b"*1\r\n$4\r\nPI").unwrap();
    // A client that sends far more than it reads: the replies the socket cannot take wait
    // for the worker and keep their order.
    const FLOOD: usize = 100_000;
    let flood = pipeline_pings(wf, FLOOD);
    const FLOOD_UNAUTHED: usize = 300_000;
    let flood_unauthed = pipeline_pings(wh, FLOOD_UNAUTHED);
    std::thread::sleep(Duration::from_millis(500));
    // The busy worker's own client kills the script.
    kill_and_see_it_end((&mut rb, &mut wb), (&mut ra, &mut wa));
    // The waiting clients run once the worker is back, their connections intact.
    let mut queued = Vec::new();
    read_reply(&mut rd, &mut queued);
    assert_eq!(queued, b"+QUEUED\r\n");
    assert_eq!(reply_within(&mut rd, &mut wd, &["EXEC"]), "*1\r\n:1\r\n");
    let mut multi = Vec::new();
    read_reply(&mut re, &mut multi);
    read_reply(&mut re, &mut multi);
    assert_eq!(multi, b"+OK\r\n+QUEUED\r\n");
    wg.write_all(b"NG\r\n").unwrap();
    let mut pong = Vec::new();
    read_reply(&mut rg, &mut pong);
    assert_eq!(pong, b"+PONG\r\n");
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SET", "k", "v"]),
        "+OK\r\n"
    );
    assert_eq!(
        reply_within(&mut rc, &mut wc, &["AUTH", "sesame"]),
        "+OK\r\n"
    );
    let mut wf = flood.join().unwrap();
    let (mut busy, mut pongs) = (0, 0);
    for i in 0..FLOOD {
        let mut one = Vec::new();
        read_reply(&mut rf, &mut one);
        if one == BUSY.as_bytes() {
            assert_eq!(pongs, 0, "a BUSY after a PONG (reply {i})");
            busy += 1;
        } else {
            assert_eq!(one, b"+PONG\r\n", "reply {i}");
            pongs += 1;
        }
    }
    assert!(
        busy > 0 && busy + pongs == FLOOD,
        "{busy} BUSY, {pongs} PONG"
    );
    assert_eq!(reply_within(&mut rf, &mut wf, &["PING"]), "+PONG\r\n");
    let mut wh = flood_unauthed.join().unwrap();
    for i in 0..FLOOD_UNAUTHED {
        let mut one = Vec::new();
        read_reply(&mut rh, &mut one);
        assert_eq!(one, b"-NOAUTH Authentication required.\r\n", "reply {i}");
    }
    assert_eq!(
        reply_within(&mut rh, &mut wh, &["AUTH", "sesame"]),
        "+OK\r\n"
    );
    // A script that wrote cannot be killed; SHUTDOWN NOSAVE from the worker's own client
    // stops it.
    send(
        &mut wa,
        &["EVAL", "redis.call('set', 'w', 'y') while true do end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"])
            .starts_with("-UNKILLABLE Sorry the script already executed write commands"),
    );
    // Only a valid SHUTDOWN NOSAVE stops it (Redis 7.0.15 answers these two so too).
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SHUTDOWN", "NOSAVE", "ABORT"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(reply_within(&mut rb, &mut wb, &["SHUTDOWN"]), BUSY);
    assert!(reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"]).starts_with("-UNKILLABLE"));
    // (An in-process server leaves stopping to its owner: only the script's end is seen.)
    send(&mut wb, &["SHUTDOWN", "NOSAVE"]);
    let mut killed = Vec::new();
    read_reply(&mut ra, &mut killed);
    assert!(
        killed.starts_with(b"-ERR Script killed by SHUTDOWN NOSAVE"),
        "{}",
        String::from_utf8_lossy(&killed)
    );
    server.shutdown();
}

#[test]
fn with_two_workers_new_clients_go_to_the_worker_not_running_the_busy_script() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 2,
        busy_reply_threshold_ms: 100,
        ..ServerConfig::default()
    });
    let (mut ra, mut wa) = connect(server.addr());
    send(
        &mut wa,
        &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    // Round robin would give every second new client to the busy worker.
    for _ in 0..4 {
        let (mut rb, mut wb) = connect(server.addr());
        assert_eq!(reply_within(&mut rb, &mut wb, &["PING"]), BUSY);
    }
    let (mut rb, mut wb) = connect(server.addr());
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"]),
        "+OK\r\n"
    );
    let killed = reply_within(&mut ra, &mut wa, &["PING"]);
    assert!(killed.starts_with("-ERR Script killed by user"), "{killed}");
    server.shutdown();
}

#[test]
fn a_busy_script_answers_others_busy_and_script_kill_stops_it_unless_it_wrote() {
    let server = two_workers();
    // Connections go to the workers in turn: `a` and `b` are on different workers.
    let (mut ra, mut wa) = connect(server.addr());
    let (mut rb, mut wb) = connect(server.addr());
    assert_eq!(
        reply_within(
            &mut rb,
            &mut wb,
            &["CONFIG", "SET", "busy-reply-threshold", "100"]
        ),
        "+OK\r\n"
    );
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"]),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    send(
        &mut wa,
        &["EVAL", "local i = 0 while true do i = i + 1 end", "0"],
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(reply_within(&mut rb, &mut wb, &["PING"]), BUSY);
    kill_and_see_it_end((&mut rb, &mut wb), (&mut ra, &mut wa));
    assert_eq!(reply_within(&mut rb, &mut wb, &["PING"]), "+PONG\r\n");
    // A key of `a`'s worker (scripts may write their own worker's undeclared keys).
    let local = (0..64)
        .map(|i| format!("w{i}"))
        .find(|k| {
            reply_within(
                &mut ra,
                &mut wa,
                &["EVAL", "return redis.call('set', ARGV[1], 'x')", "0", k],
            ) == "+OK\r\n"
        })
        .expect("a key of the connection's worker");
    send(
        &mut wa,
        &[
            "EVAL",
            "redis.call('set', ARGV[1], 'y') while true do end",
            "0",
            &local,
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"])
            .starts_with("-UNKILLABLE Sorry the script already executed write commands"),
    );
    assert!(reply_within(&mut rb, &mut wb, &["SHUTDOWN"]).starts_with("-BUSY"));
    // SHUTDOWN NOSAVE stops it: the connection closes.
    shutdown_nosave_stops(&mut wb, &mut ra);
    server.shutdown();
}

#[test]
fn function_libraries_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || ServerConfig {
        shards: 8,
        threads: 2,
        persistence: fc_server::PersistenceConfig {
            data_dir: Some(dir.path().to_path_buf()),
            ..fc_server::PersistenceConfig::default()
        },
        ..ServerConfig::default()
    };
    let server = start(config());
    let mut con = client(&server);
    let code = "#!lua name=counters\nredis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)";
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(code)
        .query(&mut con)
        .unwrap();
    assert_eq!(name, "counters");
    let n: i64 = redis::cmd("FCALL")
        .arg("bump")
        .arg(1)
        .arg("c")
        .arg(5)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 5);
    let dump: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut con).unwrap();
    drop(con);
    server.shutdown();
    let server = start(config());
    let mut con = client(&server);
    let n: i64 = redis::cmd("FCALL")
        .arg("bump")
        .arg(1)
        .arg("c")
        .arg(2)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 7, "the library and the key both came back");
    // DUMP and RESTORE round trip, FLUSH policy.
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    let gone: redis::RedisResult<i64> = redis::cmd("FCALL")
        .arg("bump")
        .arg(1)
        .arg("c")
        .arg(1)
        .query(&mut con);
    assert!(gone.is_err());
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .arg("FLUSH")
        .query(&mut con)
        .unwrap();
    let n: i64 = redis::cmd("FCALL")
        .arg("bump")
        .arg(1)
        .arg("c")
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 8);
    let info: String = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
    assert!(info.contains("number_of_libraries:1\r\n"), "{info}");
    assert!(info.contains("number_of_functions:1\r\n"), "{info}");
    server.shutdown();
}

#[test]
fn a_lock_recipe_works_through_a_real_client() {
    let server = two_workers();
    let mut con = client(&server);
    // The common single-instance lock: SET NX PX to acquire, scripts that act only while the
    // caller still owns the lock to extend and to release.
    let release = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let extend = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end",
    );
    for lock in ["lock:a", "lock:b", "lock:c", "lock:d"] {
        let got: Option<String> = redis::cmd("SET")
            .arg(lock)
            .arg("token-1")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query(&mut con)
            .unwrap();
        assert_eq!(got.as_deref(), Some("OK"));
        let again: Option<String> = redis::cmd("SET")
            .arg(lock)
            .arg("token-2")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query(&mut con)
            .unwrap();
        assert_eq!(again, None, "held");
        // Not the owner: nothing happens.
        let n: i64 = extend
            .key(lock)
            .arg("token-2")
            .arg(60_000)
            .invoke(&mut con)
            .unwrap();
        assert_eq!(n, 0);
        let n: i64 = release.key(lock).arg("token-2").invoke(&mut con).unwrap();
        assert_eq!(n, 0);
        // The owner extends, then releases.
        let n: i64 = extend
            .key(lock)
            .arg("token-1")
            .arg(60_000)
            .invoke(&mut con)
            .unwrap();
        assert_eq!(n, 1);
        let ttl: i64 = redis::cmd("PTTL").arg(lock).query(&mut con).unwrap();
        assert!(ttl > 10_000, "{ttl}");
        let n: i64 = release.key(lock).arg("token-1").invoke(&mut con).unwrap();
        assert_eq!(n, 1);
        let exists: i64 = redis::cmd("EXISTS").arg(lock).query(&mut con).unwrap();
        assert_eq!(exists, 0);
    }
    server.shutdown();
}

#[test]
fn scripts_across_workers_can_be_refused_with_crossslot() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 2,
        scripts_across_workers: false,
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let r: redis::RedisResult<i64> = over_spread("return #KEYS").query(&mut con);
    let e = r.unwrap_err();
    assert_eq!(e.code(), Some("CROSSSLOT"), "{e}");
    // Keys of one worker (one hash tag) still run.
    let n: i64 = redis::cmd("EVAL")
        .arg("redis.call('set', KEYS[1], 1) return redis.call('incr', KEYS[2])")
        .arg(2)
        .arg("{u}:a")
        .arg("{u}:b")
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1);
    server.shutdown();
}

#[test]
fn commands_a_script_runs_are_counted_in_commandstats() {
    let server = two_workers();
    let mut con = client(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut con)
        .unwrap();
    let _: Option<String> = redis::cmd("EVAL")
        .arg("redis.call('get', KEYS[1]) redis.pcall('incr', KEYS[2]) return redis.call('get', KEYS[1])")
        .arg(2)
        .arg("{t}:a")
        .arg("{t}:b")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{t}:b")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let failed: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return redis.pcall('incr', KEYS[1])")
        .arg(1)
        .arg("{t}:b")
        .query(&mut con);
    assert!(failed.is_err());
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    let line = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_else(|| panic!("no cmdstat_{name} in {info}"))
            .to_owned()
    };
    assert!(line("get").starts_with("cmdstat_get:calls=2,"), "{info}");
    assert!(line("eval").starts_with("cmdstat_eval:calls=2,"), "{info}");
    // The failed INCR (a string that is not a number) counts as failed.
    let incr = line("incr");
    assert!(incr.starts_with("cmdstat_incr:calls=2,"), "{incr}");
    assert!(incr.contains("failed_calls=1"), "{incr}");
    server.shutdown();
}

#[test]
fn a_script_cannot_write_past_maxmemory() {
    let server = start(ServerConfig {
        shards: 8,
        threads: 1,
        maxmemory: Some(256 * 1024),
        ..ServerConfig::default()
    });
    let mut con = client(&server);
    let value = "v".repeat(1000);
    // One hash tag: one shard, whose share of the budget fills.
    let mut full = false;
    for i in 0..2000 {
        let r: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("{{t}}k{i}"))
            .arg(&value)
            .query(&mut con);
        if let Err(e) = r {
            assert_eq!(e.code(), Some("OOM"), "{e}");
            full = true;
            break;
        }
    }
    assert!(full, "the budget filled");
    let write: redis::RedisResult<()> = redis::cmd("EVAL")
        .arg("return redis.call('set', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("{t}more")
        .arg(&value)
        .query(&mut con);
    let e = write.unwrap_err();
    assert!(
        e.to_string()
            .contains("command not allowed when used memory > 'maxmemory'"),
        "{e}"
    );
    // Reads still run.
    let n: i64 = redis::cmd("EVAL")
        .arg("return redis.call('strlen', KEYS[1])")
        .arg(1)
        .arg("{t}k0")
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1000);
    server.shutdown();
}

#[test]
fn deep_and_wide_values_convert_without_harm() {
    let server = two_workers();
    let mut con = client(&server);
    // A table nested in itself: converted to a bounded depth, then Redis's error (read off
    // the socket: redis-rs refuses replies this deep).
    let (mut r, mut w) = connect(server.addr());
    let deep = exchange(
        &mut r,
        &mut w,
        &["EVAL", "local t = {} t[1] = t return t", "0"],
    );
    assert!(deep.starts_with(b"*1\r\n*1\r\n"));
    assert!(deep.ends_with(b"*1\r\n-ERR reached lua stack limit\r\n"));
    // Wide maps and sets (RESP3 shapes a RESP2 client receives flat).
    let map: Vec<String> = redis::cmd("EVAL")
        .arg("local m = {} for i = 1, 20000 do m['k' .. i] = i end return {map = m}")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(map.len(), 40_000);
    let set: Vec<String> = redis::cmd("EVAL")
        .arg("local s = {} for i = 1, 20000 do s['k' .. i] = true end return {set = s}")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(set.len(), 20_000);
    // The server is still there.
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    server.shutdown();
}

#[test]
fn a_loop_inside_a_coroutine_is_busy_and_killable_too() {
    let server = two_workers();
    let (mut ra, mut wa) = connect(server.addr());
    let (mut rb, mut wb) = connect(server.addr());
    assert_eq!(
        reply_within(
            &mut rb,
            &mut wb,
            &["CONFIG", "SET", "busy-reply-threshold", "100"]
        ),
        "+OK\r\n"
    );
    send(
        &mut wa,
        &[
            "EVAL",
            "local co = coroutine.wrap(function() while true do end end) co()",
            "0",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        reply_within(&mut rb, &mut wb, &["SCRIPT", "KILL"]),
        "+OK\r\n"
    );
    let killed = reply_within(&mut ra, &mut wa, &["PING"]);
    assert!(
        killed.contains("Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    server.shutdown();
}
