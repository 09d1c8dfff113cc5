"""Diffs fc-server's command table against a live redis-server: COMMAND INFO (arity, flags,
key positions, ACL categories, tips, key specs) and COMMAND DOCS (summary, since, group,
complexity) of every command fc-server has, plus COMMAND GETKEYS on sample commands (errors
included) and COMMAND INFO of an unknown name; and the Redis settings fc-server keeps for
tools (CONFIG GET defaults, CONFIG SET of good and bad values, error texts included) and
INFO's cluster section.

Usage: compare_redis.py <fc-server port> <redis-server port>

Known, intended differences are listed in EXPECTED with their reason; anything else fails.
"""

import sys

import redis

# (command, field): why fc-server differs from Debian's redis-server 7.0.
EXPECTED = {
    ("zrank", "arity"): "Redis 7.2's WITHSCORE option (fc-server reports 7.2.0)",
    ("zrevrank", "arity"): "Redis 7.2's WITHSCORE option (fc-server reports 7.2.0)",
    ("bgsave", "flags"): "fc-server refuses BGSAVE inside MULTI (no_multi; Redis 7.0 queues it)",
}


def raw(conn, *args):
    conn.send_command(*args)
    return conn.read_response()


def plain(value):
    """Bytes to str, sets and lists to sorted lists where order carries no meaning."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def getkeys(conn, sample):
    """COMMAND GETKEYS's keys, or its error text."""
    try:
        return plain(raw(conn, "COMMAND", "GETKEYS", *sample))
    except redis.exceptions.ResponseError as err:
        return f"error: {err}"


def info_fields(entry):
    name, arity, flags, first, last, step, acl, tips, key_specs, _subcommands = plain(entry)
    return {
        "arity": arity,
        "flags": sorted(flags),
        "keys": (first, last, step),
        "acl": sorted(acl),
        "tips": sorted(tips),
        "key_specs": key_specs,
    }


# The settings fc-server accepts and reports without acting on them (crates/fc-server/src/knobs.rs).
KNOBS = [
    "hash-max-listpack-entries", "hash-max-ziplist-entries", "hash-max-listpack-value",
    "hash-max-ziplist-value", "list-max-listpack-size", "list-max-ziplist-size",
    "list-compress-depth", "set-max-intset-entries", "zset-max-listpack-entries",
    "zset-max-ziplist-entries", "zset-max-listpack-value", "zset-max-ziplist-value",
    "hll-sparse-max-bytes", "stream-node-max-bytes", "stream-node-max-entries", "activerehashing",
    "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush", "dynamic-hz", "maxmemory-samples",
    "maxmemory-eviction-tenacity", "lfu-log-factor", "lfu-decay-time", "active-expire-effort",
]

# The slow log's and the latency monitor's settings (crates/fc-server/src/observe.rs): acted on,
# checked the same way (defaults, values taken, error texts).
OBSERVABILITY = [
    "slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold", "latency-tracking",
    "latency-tracking-info-percentiles",
]


def attempt(conn, *args):
    """A reply, or the error's text."""
    try:
        return plain(raw(conn, *args))
    except redis.ResponseError as e:
        return f"error: {e}"


def compare_knobs(fc, real, problems):
    for name in KNOBS + OBSERVABILITY:
        ours, theirs = attempt(fc, "CONFIG", "GET", name), attempt(real, "CONFIG", "GET", name)
        if ours != theirs:
            problems.append(f"CONFIG GET {name}: fc-server {ours!r}, redis {theirs!r}")
        for value in ("abc", "-1", "1.5", "99999999999", "-99999999999", "1kb", "0", "7", "yes", "NO", "maybe"):
            ours = attempt(fc, "CONFIG", "SET", name, value)
            theirs = attempt(real, "CONFIG", "SET", name, value)
            after = attempt(fc, "CONFIG", "GET", name), attempt(real, "CONFIG", "GET", name)
            if ours != theirs or after[0] != after[1]:
                problems.append(
                    f"CONFIG SET {name} {value}: fc-server {ours!r} then {after[0]!r}, "
                    f"redis {theirs!r} then {after[1]!r}"
                )
    cluster = [plain(raw(c, "INFO", "cluster")) for c in (fc, real)]
    fields = [dict(l.split(":", 1) for l in text.splitlines() if ":" in l) for text in cluster]
    if fields[0] != fields[1]:
        problems.append(f"INFO cluster: fc-server {fields[0]}, redis {fields[1]}")


def main():
    fc_port, redis_port = int(sys.argv[1]), int(sys.argv[2])
    fc = redis.Redis(port=fc_port, protocol=3).connection_pool.get_connection()
    real = redis.Redis(port=redis_port, protocol=3).connection_pool.get_connection()
    names = sorted(plain(raw(fc, "COMMAND", "LIST")))
    assert raw(fc, "COMMAND", "COUNT") == len(names)
    problems = []
    seen_expected = set()
    missing = [plain(raw(c, "COMMAND", "INFO", "no-such-command")) for c in (fc, real)]
    if missing[0] != missing[1]:
        problems.append(f"COMMAND INFO of an unknown name: fc-server {missing[0]}, redis {missing[1]}")
    for name in names:
        ours = raw(fc, "COMMAND", "INFO", name)[0]
        theirs = raw(real, "COMMAND", "INFO", name)[0]
        if theirs is None:
            problems.append(f"{name}: redis-server does not know it")
            continue
        a, b = info_fields(ours), info_fields(theirs)
        for field in a:
            if a[field] != b[field]:
                if (name, field) in EXPECTED:
                    seen_expected.add((name, field))
                    continue
                problems.append(f"{name} {field}: fc-server {a[field]!r}, redis {b[field]!r}")
        ours_doc = plain(raw(fc, "COMMAND", "DOCS", name))[name]
        theirs_doc = plain(raw(real, "COMMAND", "DOCS", name))[name]
        for field in ("summary", "since", "group", "complexity"):
            if ours_doc.get(field) != theirs_doc.get(field):
                problems.append(
                    f"{name} docs {field}: fc-server {ours_doc.get(field)!r}, redis {theirs_doc.get(field)!r}"
                )
    for sample in (
        ["mset", "a", "1", "b", "2"],
        ["get", "k"],
        ["del", "a", "b", "c"],
        ["rename", "a", "b"],
        ["smove", "s", "d", "m"],
        ["lmove", "a", "b", "left", "right"],
        ["sinterstore", "d", "a", "b"],
        ["get"],
        ["get", "a", "b"],
        ["ping", "x"],
        ["nosuch", "a"],
    ):
        ours = getkeys(fc, sample)
        theirs = getkeys(real, sample)
        if ours != theirs:
            problems.append(f"COMMAND GETKEYS {' '.join(sample)}: fc-server {ours}, redis {theirs}")
    compare_knobs(fc, real, problems)
    for stale in sorted(set(EXPECTED) - seen_expected):
        problems.append(f"{stale}: listed as a known difference but now agrees; remove it")
    for p in problems:
        print(f"compare_redis: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"compare_redis: COMMAND INFO and DOCS of {len(names)} commands agree with redis-server "
          f"(but for {len(EXPECTED)} known differences), and so do {len(KNOBS) + len(OBSERVABILITY)} settings and INFO cluster")


if __name__ == "__main__":
    main()
