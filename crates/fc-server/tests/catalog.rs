//! The W2-2 catalog additions as a table of raw requests and the exact bytes redis-server
//! 7.0.15 answered them with (recorded side by side; the one difference, a `STOREDIST` score
//! printed `%.17g` by Redis 7.0 and in the shortest form by 7.2 and fc-server, is marked).
//! Keys deliberately have no hash tags: with two workers, multi-key commands (LCS, PFCOUNT,
//! PFMERGE, GEOSEARCHSTORE, GEORADIUS ... STORE, ZRANGESTORE) run across workers.

mod common;

use common::two_workers;

/// (command, reply bytes); the command split on spaces.
const CASES: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("SET a ohmytext", b"+OK\r\n"),
    ("SET b mynewtext", b"+OK\r\n"),
    ("LCS a b", b"$6\r\nmytext\r\n"),
    ("LCS a b LEN", b":6\r\n"),
    ("LCS a b IDX", b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN", b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"),
    ("LCS a b LEN IDX", b"-ERR If you want both the length and indexes, please just use IDX.\r\n"),
    ("LCS a b junk", b"-ERR syntax error\r\n"),
    ("LCS a nokey", b"$0\r\n\r\n"),
    ("RPUSH l x", b":1\r\n"),
    ("LCS a l", b"-ERR The specified keys must contain string values\r\n"),
    ("PFADD h1 a b c d e f g", b":1\r\n"),
    ("PFADD h1 a", b":0\r\n"),
    ("PFADD h2 e f g h i", b":1\r\n"),
    ("PFCOUNT h1", b":7\r\n"),
    ("PFCOUNT h1 h2 nokey", b":9\r\n"),
    ("PFMERGE m h1 h2", b"+OK\r\n"),
    ("PFCOUNT m", b":9\r\n"),
    ("PFCOUNT a", b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n"),
    ("PFCOUNT l", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("PFADD a x", b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n"),
    ("GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 2.35 48.85 Paris", b":3\r\n"),
    ("GEOADD g 200 10 x", b"-ERR invalid longitude,latitude pair 200.000000,10.000000\r\n"),
    ("GEOADD g nx xx 1 1 x", b"-ERR syntax error\r\n"),
    ("GEODIST g Palermo Catania km", b"$8\r\n166.2742\r\n"),
    ("GEODIST g Palermo nope", b"$-1\r\n"),
    ("GEOPOS g Palermo nope", b"*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n"),
    ("GEOHASH g Palermo Catania nope", b"*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n"),
    ("GEORADIUS g 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC", b"*2\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n"),
    ("GEORADIUS g 15 37 -1 km", b"-ERR radius cannot be negative\r\n"),
    ("GEORADIUS g 15 37 200 furlong", b"-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
    ("GEOSEARCH g FROMMEMBER Palermo BYBOX 400 400 km DESC", b"*2\r\n$7\r\nCatania\r\n$7\r\nPalermo\r\n"),
    ("GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 2000 km COUNT 1 ANY", b"*1\r\n$7\r\nPalermo\r\n"),
    ("GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 2000 km ANY", b"-ERR the ANY argument requires COUNT argument\r\n"),
    ("GEOSEARCH g FROMMEMBER nope BYRADIUS 1 km", b"-ERR could not decode requested zset member\r\n"),
    ("GEOSEARCH g BYRADIUS 1 km FROMLONLAT 1 1 COUNT 0", b"-ERR COUNT must be > 0\r\n"),
    ("GEOSEARCHSTORE dst g FROMLONLAT 15 37 BYRADIUS 2000 km STOREDIST COUNT 2", b":2\r\n"),
    // Redis 7.0: 56.441257870158204 (%.17g); 7.2 and fc-server: the shortest form.
    ("ZRANGE dst 0 -1 WITHSCORES", b"*4\r\n$7\r\nCatania\r\n$16\r\n56.4412578701582\r\n$7\r\nPalermo\r\n$18\r\n190.44242984775784\r\n"),
    ("GEOSEARCHSTORE dst g FROMLONLAT 15 37 BYRADIUS 2000 km WITHDIST", b"-ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
    ("GEORADIUSBYMEMBER g Palermo 300 km STORE dst2", b":2\r\n"),
    ("ZRANGE dst2 0 -1", b"*2\r\n$7\r\nPalermo\r\n$7\r\nCatania\r\n"),
    ("GEORADIUSBYMEMBER_RO g Palermo 300 km STORE dst2", b"-ERR syntax error\r\n"),
    ("GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 10 km", b":0\r\n"),
    ("EXISTS dst", b":0\r\n"),
    ("SET s foobar", b"+OK\r\n"),
    ("BITCOUNT s 1 1", b":6\r\n"),
    ("BITCOUNT nokey 0 x", b":0\r\n"),
    ("BITCOUNT s -1 -3 x", b":0\r\n"),
    ("BITPOS nokey 1 0 x", b":-1\r\n"),
    ("BITPOS s 2", b"-ERR The bit argument must be 1 or 0.\r\n"),
    ("LSET nokey x y", b"-ERR no such key\r\n"),
    ("LINDEX nokey x", b"$-1\r\n"),
    ("GETEX nokey EX 0", b"$-1\r\n"),
    ("SET s v EX -1 junk", b"-ERR syntax error\r\n"),
    ("EXPIRE s x junk", b"-ERR Unsupported option junk\r\n"),
    ("RPOP l x", b"-ERR value is out of range, must be positive\r\n"),
    ("ZADD z 1 a 2 b 3 c", b":3\r\n"),
    ("ZRANGE z 0 -1 BYSCORE BYLEX", b"-ERR syntax error\r\n"),
    ("ZRANGE z 0 -1 REV REV", b"-ERR syntax error\r\n"),
    ("ZRANGE z 0 10 LIMIT 1 -1", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("ZRANGEBYSCORE z -inf +inf LIMIT -1 2", b"*0\r\n"),
    ("ZRANGESTORE zd z 0 -1", b":3\r\n"),
    ("ZRANGE zd 0 -1 WITHSCORES", b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
    ("COPY z z", b"-ERR source and destination objects are the same\r\n"),
    ("HELLO 3", b"(hello)"),
    ("ZPOPMIN z", b"*2\r\n$1\r\na\r\n,1\r\n"),
    ("ZPOPMAX z 1", b"*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"),
    ("GEOPOS g Palermo nope", b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"),
    ("LCS a b IDX WITHMATCHLEN", b"%2\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n"),
];

/// Further cases, all in RESP2: OBJECT, ROLE, WAIT, DUMP (Redis's bytes) and RESTORE's checks,
/// ZRANDMEMBER's shapes on one-member sets, BITFIELD.
const MORE: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("SET i 123", b"+OK\r\n"),
    ("SET e hello", b"+OK\r\n"),
    ("HSET h a b", b":1\r\n"),
    ("ZADD z 1 a", b":1\r\n"),
    ("SADD si 1 2 3", b":3\r\n"),
    ("OBJECT ENCODING i", b"$3\r\nint\r\n"),
    ("OBJECT ENCODING e", b"$6\r\nembstr\r\n"),
    ("OBJECT ENCODING h", b"$8\r\nlistpack\r\n"),
    ("OBJECT ENCODING z", b"$8\r\nlistpack\r\n"),
    ("OBJECT ENCODING si", b"$6\r\nintset\r\n"),
    ("OBJECT ENCODING nokey", b"$-1\r\n"),
    ("OBJECT REFCOUNT i", b":2147483647\r\n"),
    ("OBJECT FREQ i", b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"),
    ("OBJECT NOPE x", b"-ERR unknown subcommand 'NOPE'. Try OBJECT HELP.\r\n"),
    ("ROLE", b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"),
    ("WAIT 0 0", b":0\r\n"),
    ("DUMP e", b"$17\r\n\x00\x05hello\n\x00cr\xdfve4 \n\r\n"),
    ("DUMP h", b"$25\r\n\x10\r\r\x00\x00\x00\x02\x00\x81a\x02\x81b\x02\xff\n\x00\xd9<\x7f\x07(\xf0\xed\xcc\r\n"),
    ("DUMP z", b"$24\r\n\x11\x0c\x0c\x00\x00\x00\x02\x00\x81a\x02\x01\x01\xff\n\x00\xa8\x05\xce\xb8\xd7\xa93\x02\r\n"),
    ("DUMP si", b"$26\r\n\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b\r\n"),
    ("DUMP nokey", b"$-1\r\n"),
    ("RESTORE e 0 x", b"-BUSYKEY Target key name already exists.\r\n"),
    ("RESTORE e2 -1 x", b"-ERR Invalid TTL value, must be >= 0\r\n"),
    ("RESTORE e2 0 x", b"-ERR DUMP payload version or checksum are wrong\r\n"),
    ("ZRANDMEMBER nokey", b"$-1\r\n"),
    ("ZRANDMEMBER z 1 WITHSCORES", b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
    ("ZRANDMEMBER z -2", b"*2\r\n$1\r\na\r\n$1\r\na\r\n"),
    ("ZRANDMEMBER z 1 x", b"-ERR syntax error\r\n"),
    ("BITFIELD bf SET i8 0 -100 INCRBY i8 0 -100 OVERFLOW SAT INCRBY i8 0 -100 GET u4 0", b"*4\r\n:0\r\n:56\r\n:-44\r\n:13\r\n"),
    ("BITFIELD bf OVERFLOW FAIL INCRBY u2 100 7", b"*1\r\n$-1\r\n"),
    ("BITFIELD_RO bf SET u8 0 1", b"-ERR BITFIELD_RO only supports the GET subcommand\r\n"),
];

/// Databases (a Redis with its default 16): keys of one database are invisible to the others;
/// MOVE, COPY ... DB, SWAPDB, FLUSHDB and a SELECT queued in MULTI (recorded from redis-server
/// 7.0.15; keys without hash tags, so they spread over both workers).
const DATABASES: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("SELECT 9", b"+OK\r\n"),
    ("SET k nine", b"+OK\r\n"),
    ("SET e exp", b"+OK\r\n"),
    ("PEXPIRE e 100000", b":1\r\n"),
    ("RPUSH l a b", b":2\r\n"),
    ("DBSIZE", b":3\r\n"),
    ("SELECT 0", b"+OK\r\n"),
    ("DBSIZE", b":0\r\n"),
    ("EXISTS k", b":0\r\n"),
    ("SET k zero", b"+OK\r\n"),
    ("MOVE k 9", b":0\r\n"),
    ("MOVE k 3", b":1\r\n"),
    ("MOVE missing 3", b":0\r\n"),
    ("MOVE k 3", b":0\r\n"),
    ("MOVE k 16", b"-ERR DB index is out of range\r\n"),
    ("MOVE k -1", b"-ERR DB index is out of range\r\n"),
    ("SELECT 3", b"+OK\r\n"),
    ("GET k", b"$4\r\nzero\r\n"),
    ("COPY k k2 DB 9", b":1\r\n"),
    ("COPY k k2 DB 9 REPLACE", b":1\r\n"),
    (
        "COPY k k DB 3",
        b"-ERR source and destination objects are the same\r\n",
    ),
    ("COPY k k3 DB 16", b"-ERR DB index is out of range\r\n"),
    ("SELECT 9", b"+OK\r\n"),
    ("GET k2", b"$4\r\nzero\r\n"),
    ("LRANGE l 0 -1", b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("SWAPDB 9 3", b"+OK\r\n"),
    ("DBSIZE", b":1\r\n"),
    ("GET k", b"$4\r\nzero\r\n"),
    ("SWAPDB 3 9", b"+OK\r\n"),
    ("SWAPDB 3 16", b"-ERR DB index is out of range\r\n"),
    ("SWAPDB -1 3", b"-ERR DB index is out of range\r\n"),
    ("SELECT 16", b"-ERR DB index is out of range\r\n"),
    ("SELECT -1", b"-ERR DB index is out of range\r\n"),
    (
        "SELECT 1.5",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SELECT 9", b"+OK\r\n"),
    ("DBSIZE", b":4\r\n"),
    ("FLUSHDB", b"+OK\r\n"),
    ("DBSIZE", b":0\r\n"),
    ("SELECT 3", b"+OK\r\n"),
    ("DBSIZE", b":1\r\n"),
    ("MULTI", b"+OK\r\n"),
    ("SELECT 4", b"+QUEUED\r\n"),
    ("SET inside 4", b"+QUEUED\r\n"),
    ("EXEC", b"*2\r\n+OK\r\n+OK\r\n"),
    ("DBSIZE", b":1\r\n"),
    ("SELECT 3", b"+OK\r\n"),
    ("EXISTS inside", b":0\r\n"),
    ("SELECT 4", b"+OK\r\n"),
    ("GET inside", b"$1\r\n4\r\n"),
];

/// Streams and container commands (`XGROUP`, `XINFO`, `OBJECT`, `MEMORY USAGE`) in a database
/// other than 0: key names in replies and errors as the client knows them (recorded from
/// redis-server 7.0.15).
const DATABASE_KEYS: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("SELECT 9", b"+OK\r\n"),
    ("XADD st 1-1 f v", b"$3\r\n1-1\r\n"),
    ("XREAD STREAMS st 0", b"*1\r\n*2\r\n$2\r\nst\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ("XREADGROUP GROUP g c STREAMS st >", b"-NOGROUP No such key 'st' or consumer group 'g' in XREADGROUP with GROUP option\r\n"),
    ("XGROUP CREATE st g 0", b"+OK\r\n"),
    ("XREADGROUP GROUP g c COUNT 1 STREAMS st >", b"*1\r\n*2\r\n$2\r\nst\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ("XINFO GROUPS st", b"*1\r\n*12\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:1\r\n$7\r\npending\r\n:1\r\n$17\r\nlast-delivered-id\r\n$3\r\n1-1\r\n$12\r\nentries-read\r\n:1\r\n$3\r\nlag\r\n:0\r\n"),
    ("SELECT 0", b"+OK\r\n"),
    ("XLEN st", b":0\r\n"),
    ("EXISTS st", b":0\r\n"),
    ("SELECT 9", b"+OK\r\n"),
    ("XLEN st", b":1\r\n"),
    ("SET s hello", b"+OK\r\n"),
    ("OBJECT ENCODING s", b"$6\r\nembstr\r\n"),
    ("MEMORY USAGE nokey", b"$-1\r\n"),
    ("XINFO STREAM nokey", b"-ERR no such key\r\n"),
    ("XGROUP CREATECONSUMER st g c2", b":1\r\n"),
    ("SELECT 0", b"+OK\r\n"),
    ("OBJECT ENCODING s", b"$-1\r\n"),
    // Repeated STORE/STOREDIST: the last is the destination, in the client's database.
    ("SELECT 5", b"+OK\r\n"),
    ("GEOADD src 13.361389 38.115556 a", b":1\r\n"),
    ("GEORADIUS src 15 37 200 km STORE d1 STOREDIST d2", b":1\r\n"),
    ("ZRANGE d2 0 -1", b"*1\r\n$1\r\na\r\n"),
    ("EXISTS d1", b":0\r\n"),
    ("GEORADIUSBYMEMBER src a 10 km COUNT 1 STORE d3", b":1\r\n"),
    ("ZCARD d3", b":1\r\n"),
    ("RPUSH l 2 1", b":2\r\n"),
    ("SORT l GET store STORE s1 STORE s2", b":2\r\n"),
    ("LRANGE s2 0 -1", b"*2\r\n$0\r\n\r\n$0\r\n\r\n"),
    ("EXISTS s1", b":0\r\n"),
    ("SELECT 0", b"+OK\r\n"),
    ("EXISTS d1 d2 d3 s1 s2", b":0\r\n"),
];

/// Every container's HELP, as Redis's text (recorded from redis-server 7.0.15; CLIENT HELP is
/// left out: it lists Redis 7.2's additions, `KILL ID|MAXAGE`, `SETINFO`, `NO-TOUCH`).
const HELPS: &[(&str, &[u8])] = &[
    ("OBJECT HELP", b"*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+ENCODING <key>\r\n+    Return the kind of internal representation used in order to store the value\r\n+    associated with a <key>.\r\n+FREQ <key>\r\n+    Return the access frequency index of the <key>. The returned integer is\r\n+    proportional to the logarithm of the recent access frequency of the key.\r\n+IDLETIME <key>\r\n+    Return the idle time of the <key>, that is the approximated number of\r\n+    seconds elapsed since the last access to the key.\r\n+REFCOUNT <key>\r\n+    Return the number of references of the value associated with the specified\r\n+    <key>.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("MEMORY HELP", b"*14\r\n+MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+DOCTOR\r\n+    Return memory problems reports.\r\n+MALLOC-STATS\r\n+    Return internal statistics report from the memory allocator.\r\n+PURGE\r\n+    Attempt to purge dirty pages for reclamation by the allocator.\r\n+STATS\r\n+    Return information about the memory usage of the server.\r\n+USAGE <key> [SAMPLES <count>]\r\n+    Return memory in bytes used by <key> and its value. Nested values are\r\n+    sampled up to <count> times (default: 5, 0 means sample all).\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("CONFIG HELP", b"*11\r\n+CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET <pattern>\r\n+    Return parameters matching the glob-like <pattern> and their values.\r\n+SET <directive> <value>\r\n+    Set the configuration <directive> to <value>.\r\n+RESETSTAT\r\n+    Reset statistics reported by the INFO command.\r\n+REWRITE\r\n+    Rewrite the configuration file.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("COMMAND HELP", b"*21\r\n+COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+(no subcommand)\r\n+    Return details about all Redis commands.\r\n+COUNT\r\n+    Return the total number of commands in this Redis server.\r\n+LIST\r\n+    Return a list of all commands in this Redis server.\r\n+INFO [<command-name> ...]\r\n+    Return details about multiple Redis commands.\r\n+    If no command names are given, documentation details for all\r\n+    commands are returned.\r\n+DOCS [<command-name> ...]\r\n+    Return documentation details about multiple Redis commands.\r\n+    If no command names are given, documentation details for all\r\n+    commands are returned.\r\n+GETKEYS <full-command>\r\n+    Return the keys from a full Redis command.\r\n+GETKEYSANDFLAGS <full-command>\r\n+    Return the keys and the access flags from a full Redis command.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("LATENCY HELP", b"*17\r\n+LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+DOCTOR\r\n+    Return a human readable latency analysis report.\r\n+GRAPH <event>\r\n+    Return an ASCII latency graph for the <event> class.\r\n+HISTORY <event>\r\n+    Return time-latency samples for the <event> class.\r\n+LATEST\r\n+    Return the latest latency samples for all events.\r\n+RESET [<event> ...]\r\n+    Reset latency data of one or more <event> classes.\r\n+    (default: reset all data for all event classes)\r\n+HISTOGRAM [COMMAND ...]\r\n+    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.\r\n+    If no commands are specified then all histograms are replied.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("SLOWLOG HELP", b"*12\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET [<count>]\r\n+    Return top <count> entries from the slowlog (default: 10, -1 mean all).\r\n+    Entries are made of:\r\n+    id, timestamp, time in microseconds, arguments array, client IP and port,\r\n+    client name\r\n+LEN\r\n+    Return the length of the slowlog.\r\n+RESET\r\n+    Reset the slowlog.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("PUBSUB HELP", b"*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+CHANNELS [<pattern>]\r\n+    Return the currently active channels matching a <pattern> (default: '*').\r\n+NUMPAT\r\n+    Return number of subscriptions to patterns.\r\n+NUMSUB [<channel> ...]\r\n+    Return the number of subscribers for the specified channels, excluding\r\n+    pattern subscriptions(default: no channels).\r\n+SHARDCHANNELS [<pattern>]\r\n+    Return the currently active shard level channels matching a <pattern> (default: '*').\r\n+SHARDNUMSUB [<shardchannel> ...]\r\n+    Return the number of subscribers for the specified shard level channel(s)\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("XINFO HELP", b"*9\r\n+XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+CONSUMERS <key> <groupname>\r\n+    Show consumers of <groupname>.\r\n+GROUPS <key>\r\n+    Show the stream consumer groups.\r\n+STREAM <key> [FULL [COUNT <count>]\r\n+    Show information about the stream.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("XGROUP HELP", b"*17\r\n+XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+CREATE <key> <groupname> <id|$> [option]\r\n+    Create a new consumer group. Options are:\r\n+    * MKSTREAM\r\n+      Create the empty stream if it does not exist.\r\n+    * ENTRIESREAD entries_read\r\n+      Set the group's entries_read counter (internal use).\r\n+CREATECONSUMER <key> <groupname> <consumer>\r\n+    Create a new consumer in the specified group.\r\n+DELCONSUMER <key> <groupname> <consumer>\r\n+    Remove the specified consumer.\r\n+DESTROY <key> <groupname>\r\n+    Remove the specified group.\r\n+SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]\r\n+    Set the current group ID and entries_read counter.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("MODULE HELP", b"*11\r\n+MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+LIST\r\n+    Return a list of loaded modules.\r\n+LOAD <path> [<arg> ...]\r\n+    Load a module library from <path>, passing to it any optional arguments.\r\n+LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]\r\n+    Load a module library from <path>, while passing it module configurations and optional arguments.\r\n+UNLOAD <name>\r\n+    Unload a module.\r\n+HELP\r\n+    Prints this help.\r\n"),
];

/// MODULE (none loaded; loading refused as Redis's default `enable-module-command no` does),
/// PFSELFTEST and PFDEBUG (recorded from redis-server 7.0.15).
const DEBUGGING: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("MODULE LIST", b"*0\r\n"),
    ("MODULE HELP", b"*11\r\n+MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+LIST\r\n+    Return a list of loaded modules.\r\n+LOAD <path> [<arg> ...]\r\n+    Load a module library from <path>, passing to it any optional arguments.\r\n+LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]\r\n+    Load a module library from <path>, while passing it module configurations and optional arguments.\r\n+UNLOAD <name>\r\n+    Unload a module.\r\n+HELP\r\n+    Prints this help.\r\n"),
    ("MODULE LOAD /nonexistent.so", b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"),
    ("MODULE UNLOAD foo", b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"),
    ("MODULE LOADEX /x.so", b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"),
    ("MODULE FOO", b"-ERR unknown subcommand 'FOO'. Try MODULE HELP.\r\n"),
    ("MODULE", b"-ERR wrong number of arguments for 'module' command\r\n"),
    ("MODULE LIST x", b"-ERR wrong number of arguments for 'module|list' command\r\n"),
    ("PFSELFTEST", b"+OK\r\n"),
    ("PFSELFTEST x", b"-ERR wrong number of arguments for 'pfselftest' command\r\n"),
    ("PFADD h a b c", b":1\r\n"),
    ("PFDEBUG ENCODING h", b"+sparse\r\n"),
    ("PFDEBUG DECODE h", b"$44\r\nZ:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603\r\n"),
    ("PFDEBUG GETREG nokey", b"-ERR The specified key does not exist\r\n"),
    ("PFDEBUG FOO h", b"-ERR Unknown PFDEBUG subcommand 'FOO'\r\n"),
    ("SET s x", b"+OK\r\n"),
    ("PFDEBUG ENCODING s", b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n"),
    ("LPUSH l x", b":1\r\n"),
    ("PFDEBUG ENCODING l", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("PFDEBUG TODENSE h", b":1\r\n"),
    ("PFDEBUG ENCODING h", b"+dense\r\n"),
    ("PFDEBUG TODENSE h", b":0\r\n"),
    ("PFDEBUG DECODE h", b"-ERR HLL encoding is not sparse\r\n"),
    ("PFCOUNT h", b":3\r\n"),
    ("PFDEBUG", b"-ERR wrong number of arguments for 'pfdebug' command\r\n"),
    ("PFDEBUG ENCODING h x", b"-ERR wrong number of arguments for 'pfdebug' command\r\n"),
    ("PFADD h2 x y", b":1\r\n"),
    ("EXPIRE h2 100", b":1\r\n"),
    ("PFDEBUG TODENSE h2", b":1\r\n"),
    ("TTL h2", b":100\r\n"),
    ("STRLEN h2", b":12304\r\n"),
];

/// One database and no cluster, as a Redis started with `--databases 1` answers (recorded from
/// one; the server is started with `databases = 1`).
const STANDALONE: &[(&str, &[u8])] = &[
    ("MOVE e 1", b"-ERR DB index is out of range\r\n"),
    (
        "MOVE e 0",
        b"-ERR source and destination objects are the same\r\n",
    ),
    (
        "MOVE e x",
        b"-ERR value is not an integer or out of range\r\n",
    ),
    ("SWAPDB 0 0", b"+OK\r\n"),
    ("SWAPDB 0 1", b"-ERR DB index is out of range\r\n"),
    ("SWAPDB x 0", b"-ERR invalid first DB index\r\n"),
    ("SWAPDB 0 x", b"-ERR invalid second DB index\r\n"),
    (
        "CLUSTER INFO",
        b"-ERR This instance has cluster support disabled\r\n",
    ),
    (
        "READONLY",
        b"-ERR This instance has cluster support disabled\r\n",
    ),
    (
        "ASKING x",
        b"-ERR wrong number of arguments for 'asking' command\r\n",
    ),
    (
        "BGREWRITEAOF",
        b"+Background append only file rewriting started\r\n",
    ),
];

/// SORT and SORT_RO (keys share a hash tag, so BY/GET patterns stay on one worker).
const SORTS: &[(&str, &[u8])] = &[
    ("FLUSHALL", b"+OK\r\n"),
    ("RPUSH {t}l 3 1 2 10 -5", b":5\r\n"),
    ("SORT {t}l", b"*5\r\n$2\r\n-5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
    ("SORT {t}l DESC", b"*5\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n$2\r\n-5\r\n"),
    ("SORT {t}l LIMIT 1 2", b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"),
    ("SORT {t}l LIMIT -5 2", b"*2\r\n$2\r\n-5\r\n$1\r\n1\r\n"),
    ("SORT {t}l LIMIT 1 -1", b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
    ("SORT {t}l LIMIT 5 1", b"*0\r\n"),
    ("SORT {t}l LIMIT 10 1", b"*0\r\n"),
    ("SORT {t}l ALPHA", b"*5\r\n$2\r\n-5\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n"),
    ("SORT {t}l ALPHA DESC LIMIT 0 3", b"*3\r\n$1\r\n3\r\n$1\r\n2\r\n$2\r\n10\r\n"),
    ("MSET {t}w_1 30 {t}w_2 10 {t}w_3 20 {t}w_10 x", b"+OK\r\n"),
    ("SORT {t}l BY {t}w_*", b"-ERR One or more scores can't be converted into double\r\n"),
    ("SORT {t}l BY {t}w_* DESC", b"-ERR One or more scores can't be converted into double\r\n"),
    ("SORT {t}l BY {t}w_* ALPHA", b"*5\r\n$2\r\n-5\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n$2\r\n10\r\n"),
    ("SORT {t}l BY {t}w_* ALPHA DESC", b"*5\r\n$2\r\n10\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n2\r\n$2\r\n-5\r\n"),
    ("SORT {t}l BY nosort", b"*5\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n$2\r\n-5\r\n"),
    ("SORT {t}l BY nosort DESC", b"*5\r\n$2\r\n-5\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\n3\r\n"),
    ("SORT {t}l BY nosort DESC LIMIT 0 2", b"*2\r\n$2\r\n-5\r\n$2\r\n10\r\n"),
    ("SORT {t}l BY nosort LIMIT 1 2", b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"),
    ("SORT {t}l GET # GET {t}w_*", b"*10\r\n$2\r\n-5\r\n$-1\r\n$1\r\n1\r\n$2\r\n30\r\n$1\r\n2\r\n$2\r\n10\r\n$1\r\n3\r\n$2\r\n20\r\n$2\r\n10\r\n$1\r\nx\r\n"),
    ("HSET {t}h_1 f one", b":1\r\n"),
    ("HSET {t}h_2 f two", b":1\r\n"),
    ("SORT {t}l GET {t}h_*->f GET {t}h_*->", b"*10\r\n$-1\r\n$-1\r\n$3\r\none\r\n$-1\r\n$3\r\ntwo\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n"),
    ("SORT {t}l BY {t}h_*->f ALPHA GET #", b"*5\r\n$1\r\n3\r\n$2\r\n10\r\n$2\r\n-5\r\n$1\r\n1\r\n$1\r\n2\r\n"),
    ("SORT {t}l STORE {t}dst", b":5\r\n"),
    ("LRANGE {t}dst 0 -1", b"*5\r\n$2\r\n-5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
    ("SORT {t}l BY {t}w_* GET {t}w_* STORE {t}dst", b"-ERR One or more scores can't be converted into double\r\n"),
    ("LRANGE {t}dst 0 -1", b"*5\r\n$2\r\n-5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
    ("SORT {t}nokey STORE {t}dst", b":0\r\n"),
    ("EXISTS {t}dst", b":0\r\n"),
    ("SORT {t}l junk", b"-ERR syntax error\r\n"),
    ("SORT {t}l LIMIT 0 x", b"-ERR value is not an integer or out of range\r\n"),
    ("SORT_RO {t}l STORE {t}x", b"-ERR syntax error\r\n"),
    ("SORT_RO {t}l BY {t}w_* DESC", b"-ERR One or more scores can't be converted into double\r\n"),
    ("SADD {t}s 5 3 9 1", b":4\r\n"),
    ("SORT {t}s", b"*4\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$1\r\n9\r\n"),
    ("SORT {t}s DESC LIMIT 0 2", b"*2\r\n$1\r\n9\r\n$1\r\n5\r\n"),
    ("SORT {t}s BY nosort STORE {t}dst2", b":4\r\n"),
    ("LRANGE {t}dst2 0 -1", b"*4\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$1\r\n9\r\n"),
    ("ZADD {t}z 3 a 1 b 2 c", b":3\r\n"),
    ("SORT {t}z ALPHA", b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("SORT {t}z BY nosort", b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n"),
    ("SORT {t}z BY nosort DESC", b"*3\r\n$1\r\na\r\n$1\r\nc\r\n$1\r\nb\r\n"),
    ("SORT {t}z BY nosort LIMIT 1 1", b"*1\r\n$1\r\nc\r\n"),
    ("SET {t}str x", b"+OK\r\n"),
    ("SORT {t}str", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    ("SORT {t}str junk", b"-ERR syntax error\r\n"),
    ("RPUSH {t}la b a B 1.5 c", b":5\r\n"),
    ("SORT {t}la", b"-ERR One or more scores can't be converted into double\r\n"),
    ("SORT {t}la ALPHA", b"*5\r\n$3\r\n1.5\r\n$1\r\nB\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
    ("RPUSH {t}ln 1 1.0 01 1e0 inf -inf", b":6\r\n"),
    ("SORT {t}ln", b"*6\r\n$4\r\n-inf\r\n$2\r\n01\r\n$1\r\n1\r\n$3\r\n1.0\r\n$3\r\n1e0\r\n$3\r\ninf\r\n"),
];

#[test]
fn catalog_replies_are_redis_bytes() {
    let server = two_workers();
    common::expect_replies(
        server.addr(),
        CASES
            .iter()
            .chain(std::iter::once(&("HELLO 2", &b"(hello)"[..])))
            .chain(MORE)
            .chain(SORTS)
            .chain(DATABASES)
            .chain(DEBUGGING)
            .chain(DATABASE_KEYS)
            .chain(HELPS),
    );
}

#[test]
fn one_database_replies_are_redis_bytes() {
    let server = common::start(fc_server::ServerConfig {
        shards: 8,
        threads: 2,
        databases: 1,
        ..fc_server::ServerConfig::default()
    });
    common::expect_replies(server.addr(), STANDALONE);
}
