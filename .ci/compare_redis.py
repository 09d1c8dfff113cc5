"""Diffs fc-server's command table against a live redis-server: COMMAND INFO (arity, flags,
key positions, ACL categories, tips, key specs) and COMMAND DOCS (summary, since, group,
complexity) of every command fc-server has, plus COMMAND GETKEYS on sample commands (errors
included) and COMMAND INFO of an unknown name; and the Redis settings fc-server keeps for
tools (CONFIG GET defaults, CONFIG SET of good and bad values, error texts included) and
INFO's cluster section.

Subcommands too: each container's subcommands (COMMAND LIST, the tenth element of COMMAND
INFO) are Redis's, and each one's COMMAND INFO and COMMAND DOCS fields equal Redis's. And the
replies' bytes: COMMAND INFO and COMMAND DOCS of every command and subcommand, read off raw
sockets in RESP2 and RESP3, are compared as typed trees (every RESP type marker kept), with
only what carries no meaning set aside: the order of a container's subcommands (Redis's hash
table order, a random seed per process; fc-server's name order) and the COMMAND DOCS fields
fc-server does not keep (DOCS_NOT_KEPT).

Usage: compare_redis.py <fc-server port> <redis-server port>

Known, intended differences are listed in EXPECTED with their reason; anything else fails.
"""

import socket
import sys

import redis

# (command, field): why fc-server differs from Debian's redis-server 7.0.
EXPECTED = {
    ("zrank", "arity"): "Redis 7.2's WITHSCORE option (fc-server reports 7.2.0)",
    ("zrevrank", "arity"): "Redis 7.2's WITHSCORE option (fc-server reports 7.2.0)",
    ("bgsave", "flags"): "fc-server refuses BGSAVE inside MULTI (no_multi; Redis 7.0 queues it)",
    ("client|no-touch", "redis"): "Redis 7.2's CLIENT NO-TOUCH (redis-server 7.0 has none)",
    ("client|setinfo", "redis"): "Redis 7.2's CLIENT SETINFO (redis-server 7.0 has none)",
}

# COMMAND DOCS fields Redis has and fc-server's table does not keep.
DOCS_NOT_KEPT = {"history", "arguments", "doc_flags", "deprecated_since", "replaced_by"}


class Raw:
    """A raw-socket client: replies as typed trees, (marker, value), RESP type markers kept."""

    def __init__(self, port, protocol):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        if protocol == 3:
            self.call("HELLO", "3")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.reply()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self.line()
        marker, rest = chr(line[0]), line[1:]
        if marker in "$=!":
            n = int(rest)
            return (marker, None if n < 0 else self.exact(n))
        if marker in "*~>":
            n = int(rest)
            return (marker, None if n < 0 else [self.reply() for _ in range(n)])
        if marker == "%":
            return (marker, [(self.reply(), self.reply()) for _ in range(int(rest))])
        return (marker, rest)


def tree_map(node):
    """A RESP3 map's or a RESP2 flat key/value array's pairs, keyed by the key's bytes."""
    marker, value = node
    if marker == "%":
        return [(k[1], k, v) for k, v in value]
    return [(value[i][1], value[i], value[i + 1]) for i in range(0, len(value), 2)]


def rebuild_map(marker, pairs):
    if marker == "%":
        return ("%", [(k, v) for _, k, v in pairs])
    return ("*", [x for _, k, v in pairs for x in (k, v)])


def normal_info(node):
    """A COMMAND INFO entry with its subcommands' entries in name order (theirs, too)."""
    if node[0] != "*" or node[1] is None:
        return node
    items = list(node[1])
    subs = items[9]
    if subs[0] == "*":
        items[9] = ("*", sorted((normal_info(s) for s in subs[1]), key=lambda e: e[1][0][1]))
    return ("*", items)


def normal_docs(node):
    """A COMMAND DOCS entry without DOCS_NOT_KEPT, its subcommands in name order."""
    pairs = []
    for key, k, v in tree_map(node):
        if key.decode() in DOCS_NOT_KEPT:
            continue
        if key == b"subcommands":
            subs = sorted(((n, kk, normal_docs(vv)) for n, kk, vv in tree_map(v)), key=lambda p: p[0])
            v = rebuild_map(v[0], subs)
        pairs.append((key, k, v))
    return rebuild_map(node[0], pairs)


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


def getkeys(conn, sub, sample):
    """COMMAND GETKEYS's (or GETKEYSANDFLAGS's) keys, or its error text."""
    try:
        return plain(raw(conn, "COMMAND", sub, *sample))
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


def compare_subcommands(fc, real, names, problems, seen_expected):
    """Each container's subcommands: the same names, and each one's COMMAND INFO and DOCS."""
    all_names = set(plain(raw(fc, "COMMAND", "LIST")))
    for name in names:
        ours = plain(raw(fc, "COMMAND", "INFO", name)[0])[9]
        theirs = plain(raw(real, "COMMAND", "INFO", name)[0] or [None] * 10)[9] or []
        ours_subs = {entry[0] for entry in ours}
        theirs_subs = {entry[0] for entry in theirs}
        for sub in sorted(ours_subs ^ theirs_subs):
            side = "redis" if sub in ours_subs else "fc-server"
            if (sub, side) in EXPECTED:
                seen_expected.add((sub, side))
                continue
            problems.append(f"{sub}: {side} does not have it")
        listed = {n for n in all_names if n.startswith(name + "|")}
        if listed != ours_subs:
            problems.append(f"{name}: COMMAND LIST has {sorted(listed)}, COMMAND INFO {sorted(ours_subs)}")
        for sub in sorted(ours_subs & theirs_subs):
            nested = next(e for e in raw(fc, "COMMAND", "INFO", name)[0][9] if plain(e[0]) == sub)
            alone = raw(fc, "COMMAND", "INFO", sub.upper())[0]
            if plain(nested) != plain(alone):
                problems.append(f"{sub}: COMMAND INFO {name} nests {plain(nested)}, COMMAND INFO {sub} is {plain(alone)}")
            a, b = info_fields(alone), info_fields(raw(real, "COMMAND", "INFO", sub)[0])
            for field in a:
                if a[field] != b[field]:
                    problems.append(f"{sub} {field}: fc-server {a[field]!r}, redis {b[field]!r}")
            ours_doc = plain(raw(fc, "COMMAND", "DOCS", sub))[sub]
            theirs_doc = plain(raw(real, "COMMAND", "DOCS", sub))[sub]
            for field in ("summary", "since", "group", "complexity"):
                if ours_doc.get(field) != theirs_doc.get(field):
                    problems.append(
                        f"{sub} docs {field}: fc-server {ours_doc.get(field)!r}, redis {theirs_doc.get(field)!r}"
                    )


def entry_name(entry):
    return entry[1][0][1]


def common_subs(ours, theirs):
    """Both COMMAND INFO entries (normalised) with only the subcommands both have."""
    if ours[1][9][0] != "*" or theirs[1][9][0] != "*":
        return ours, theirs
    both = {entry_name(e) for e in ours[1][9][1]} & {entry_name(e) for e in theirs[1][9][1]}
    keep = lambda entry: ("*", entry[1][:9] + [("*", [e for e in entry[1][9][1] if entry_name(e) in both])])
    return keep(ours), keep(theirs)


def common_sub_docs(ours, theirs):
    """Both COMMAND DOCS entries (normalised) with only the subcommands both have."""
    def subs(docs):
        found = [v for key, _, v in tree_map(docs) if key == b"subcommands"]
        return {key for key, _, _ in tree_map(found[0])} if found else set()

    both = subs(ours) & subs(theirs)

    def keep(docs):
        pairs = []
        for key, k, v in tree_map(docs):
            if key == b"subcommands":
                v = rebuild_map(v[0], [p for p in tree_map(v) if p[0] in both])
            pairs.append((key, k, v))
        return rebuild_map(docs[0], pairs)

    return keep(ours), keep(theirs)


def compare_bytes(fc_port, redis_port, names, problems):
    """COMMAND INFO and DOCS of every command and subcommand both have, as typed trees, in
    RESP2 and RESP3; COMMAND LIST's filters and COMMAND INFO/DOCS of unknown names."""
    for protocol in (2, 3):
        fc, real = Raw(fc_port, protocol), Raw(redis_port, protocol)
        both = []
        for name in names:
            entry = real.call("COMMAND", "INFO", name)[1][0]
            if entry[1] is None:
                continue
            both.append(name)
            ours = fc.call("COMMAND", "INFO", name)[1][0]
            if entry[1][9][0] == "*" and ours[1][9][0] == "*":
                ours_subs = {entry_name(e) for e in ours[1][9][1]}
                both.extend(entry_name(e).decode() for e in entry[1][9][1] if entry_name(e) in ours_subs)
        for name in both:
            ours = normal_info(fc.call("COMMAND", "INFO", name)[1][0])
            theirs = normal_info(real.call("COMMAND", "INFO", name)[1][0])
            ours, theirs = common_subs(ours, theirs)
            # A known difference in a field is reported by main's comparison.
            if ours != theirs and not any(n == name for n, _ in EXPECTED):
                problems.append(f"RESP{protocol} COMMAND INFO {name}: fc-server {ours}, redis {theirs}")
            ours = tree_map(fc.call("COMMAND", "DOCS", name))
            theirs = tree_map(real.call("COMMAND", "DOCS", name))
            ours = [(k, normal_docs(v)) for _, k, v in ours]
            theirs = [(k, normal_docs(v)) for _, k, v in theirs]
            if len(ours) == len(theirs) == 1:
                ours_doc, theirs_doc = common_sub_docs(ours[0][1], theirs[0][1])
                ours, theirs = [(ours[0][0], ours_doc)], [(theirs[0][0], theirs_doc)]
            if ours != theirs:
                problems.append(f"RESP{protocol} COMMAND DOCS {name}: fc-server {ours}, redis {theirs}")
        for args in (
            ["COMMAND", "INFO", "config|nope"],
            ["COMMAND", "INFO", "get|x"],
            ["COMMAND", "INFO", "config|get|x"],
            ["COMMAND", "INFO", "CONFIG|GET"],
            ["COMMAND", "DOCS", "config|nope", "nosuch"],
        ):
            ours, theirs = fc.call(*args), real.call(*args)
            if ours != theirs:
                problems.append(f"RESP{protocol} {' '.join(args)}: fc-server {ours}, redis {theirs}")
        known = {n.encode() for n in both}
        filters = [("PATTERN", p) for p in ("config*", "*|get", "CLIENT|K*", "x*", "*")]
        filters += [("ACLCAT", c) for c in ("dangerous", "admin", "read", "write", "slow", "connection",
                                           "keyspace", "pubsub", "stream", "nosuch")]
        filters += [("MODULE", "nosuch")]
        for what, value in filters:
            ours = fc.call("COMMAND", "LIST", "FILTERBY", what, value)
            theirs = real.call("COMMAND", "LIST", "FILTERBY", what, value)
            ours_set = sorted(v for _, v in ours[1] if v in known)
            theirs_set = sorted(v for _, v in theirs[1] if v in known)
            if ours[0] != theirs[0] or ours_set != theirs_set:
                problems.append(f"RESP{protocol} COMMAND LIST FILTERBY {what} {value}: "
                                f"fc-server {ours_set}, redis {theirs_set}")
    return sum("|" in n for n in both)


def main():
    fc_port, redis_port = int(sys.argv[1]), int(sys.argv[2])
    fc = redis.Redis(port=fc_port, protocol=3).connection_pool.get_connection()
    real = redis.Redis(port=redis_port, protocol=3).connection_pool.get_connection()
    names = sorted(n for n in plain(raw(fc, "COMMAND", "LIST")) if "|" not in n)
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
        ["echo", "a", "b"],
        ["nosuch", "a"],
        ["sintercard", "0", "a"],
        ["lmpop", "x", "a", "left"],
        ["object", "encoding", "k"],
        ["object", "encoding"],
        ["object", "nope", "k"],
        ["object", "help"],
        ["OBJECT", "FREQ", "k"],
        ["memory", "usage", "k"],
        ["memory", "usage", "k", "samples", "5"],
        ["memory", "usage"],
        ["memory", "doctor"],
        ["xinfo", "stream", "s"],
        ["xinfo", "stream", "s", "full"],
        ["xinfo", "consumers", "s", "g"],
        ["xinfo", "help"],
        ["xgroup", "create", "s", "g", "$"],
        ["xgroup", "createconsumer", "s", "g", "c"],
        ["xgroup", "destroy", "s"],
        ["config", "get", "x"],
        ["config|get", "x"],
        ["config", "nope", "x"],
        ["client", "kill", "x"],
        ["cluster", "countkeysinslot", "1"],
    ):
        for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
            ours = getkeys(fc, sub, sample)
            theirs = getkeys(real, sub, sample)
            if ours != theirs:
                problems.append(f"COMMAND {sub} {' '.join(sample)}: fc-server {ours}, redis {theirs}")
    compare_subcommands(fc, real, names, problems, seen_expected)
    subcommands = compare_bytes(fc_port, redis_port, names, problems)
    compare_knobs(fc, real, problems)
    for stale in sorted(set(EXPECTED) - seen_expected):
        problems.append(f"{stale}: listed as a known difference but now agrees; remove it")
    for p in problems:
        print(f"compare_redis: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"compare_redis: COMMAND INFO and DOCS of {len(names)} commands and {subcommands} subcommands "
          f"agree with redis-server (but for {len(EXPECTED)} known differences; RESP2 and RESP3 bytes "
          f"but for subcommand order and the docs fields not kept), and so do {len(KNOBS) + len(OBSERVABILITY)} settings and INFO cluster")


if __name__ == "__main__":
    main()
