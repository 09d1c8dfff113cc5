"""Prints command-table entries (`crates/fc-server/src/command/table.rs`'s `Spec`) for Redis
commands, from a live redis-server's COMMAND INFO and COMMAND DOCS: the way to add a command
whose metadata `.ci/compare_redis.py` then finds equal to Redis's. Only the `route` is left to
write (a `todo_route!()` placeholder that does not compile until it is replaced).

A name with a bar (`config|get`) prints a subcommand's entry instead
(`crates/fc-server/src/command/sub_table.rs`'s `Sub`, complete: a subcommand runs in its
container's handler); `config|*` prints every subcommand Redis has for `CONFIG`, in name order.

Usage: python3 .ci/gen_spec.py <redis-server port> <command>|<container|sub>|<container|*> ...
(needs redis-py: `pip install 'redis>=5,<6'`; `.ci/run` keeps one in target/ci-venv)
"""

import json
import sys

import redis

FLAGS = {
    "write": "WRITE", "readonly": "READONLY", "denyoom": "DENYOOM", "admin": "ADMIN",
    "pubsub": "PUBSUB", "noscript": "NOSCRIPT", "blocking": "BLOCKING", "loading": "LOADING",
    "stale": "STALE", "skip_monitor": "SKIP_MONITOR", "skip_slowlog": "SKIP_SLOWLOG",
    "fast": "FAST", "no_auth": "NO_AUTH", "may_replicate": "MAY_REPLICATE",
    "no_mandatory_keys": "NO_MANDATORY_KEYS", "no_multi": "NO_MULTI",
    "movablekeys": "MOVABLEKEYS", "allow_busy": "ALLOW_BUSY",
    "no_async_loading": "NO_ASYNC_LOADING",
}


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def pairs(flat):
    """A RESP2 flat key/value list (or a RESP3 map) as a dict of str keys."""
    if isinstance(flat, dict):
        return {text(k): v for k, v in flat.items()}
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def rust_str(value):
    return json.dumps(text(value), ensure_ascii=False)


def bits(names, table, prefix):
    parts = [f"{prefix}::{table[n]}" for n in names]
    return " | ".join(parts) if parts else "0"


def key_spec(spec):
    spec = pairs(spec)
    begin = pairs(spec["begin_search"])
    find = pairs(spec["find_keys"])
    bspec, fspec = pairs(begin["spec"]), pairs(find["spec"])
    if text(begin["type"]) == "index":
        begin_rs = f"Begin::Index({fspec_int(bspec, 'index')})"
    elif text(begin["type"]) == "unknown":
        begin_rs = "Begin::Unknown"
    else:
        begin_rs = (f"Begin::Keyword {{ keyword: {rust_str(bspec['keyword'])}, "
                    f"start_from: {fspec_int(bspec, 'startfrom')} }}")
    if text(find["type"]) == "unknown":
        find_rs = "Find::Unknown"
    elif text(find["type"]) == "range":
        find_rs = (f"Find::Range {{ last: {fspec_int(fspec, 'lastkey')}, "
                   f"step: {fspec_int(fspec, 'keystep')}, limit: {fspec_int(fspec, 'limit')} }}")
    else:
        find_rs = (f"Find::Keynum {{ keynum_index: {fspec_int(fspec, 'keynumidx')}, "
                   f"first_key: {fspec_int(fspec, 'firstkey')}, step: {fspec_int(fspec, 'keystep')} }}")
    flags = ", ".join(rust_str(f) for f in spec["flags"])
    notes = rust_str(spec.get("notes", b""))
    return (f"KeySpec {{ notes: {notes}, flags: &[{flags}], begin: {begin_rs}, "
            f"find: {find_rs} }}")


def fspec_int(spec, field):
    return int(spec[field])


def acl_name(category):
    return text(category).lstrip("@").upper()


def main():
    port, names = int(sys.argv[1]), sys.argv[2:]
    conn = redis.Redis(port=port, protocol=2).connection_pool.get_connection()

    def raw(*args):
        conn.send_command(*args)
        return conn.read_response()

    expanded = []
    for name in names:
        if name.endswith("|*"):
            container = raw("COMMAND", "INFO", name[:-2])[0]
            if container is None:
                sys.exit(f"gen_spec: redis-server does not know {name[:-2]}")
            expanded.extend(sorted(text(sub[0]) for sub in container[9]))
        else:
            expanded.append(name)
    for name in expanded:
        info = raw("COMMAND", "INFO", name)[0]
        if info is None:
            sys.exit(f"gen_spec: redis-server does not know {name}")
        docs = pairs(raw("COMMAND", "DOCS", name)[1])
        cmd_name, arity, flags, first, last, step, acl, tips, specs = info[:9]
        flag_names = [text(f) for f in flags]
        acl_names = [acl_name(c) for c in acl]
        sub = "|" in text(cmd_name)
        if sub:
            container, sub_name = text(cmd_name).split("|")
            print("    Sub {")
            print(f"        container: {rust_str(container)},")
            print(f"        name: {rust_str(sub_name)},")
            print(f"        full_name: {rust_str(cmd_name)},")
        else:
            print("    Spec {")
            print(f"        name: {rust_str(cmd_name)},")
        print(f"        arity: {arity},")
        print(f"        flags: {bits(flag_names, FLAGS, 'F')},")
        print(f"        acl: {' | '.join('A::' + a for a in acl_names) or '0'},")
        print(f"        keys: ({first}, {last}, {step}),")
        print(f"        key_specs: &[{', '.join(key_spec(s) for s in specs)}],")
        print(f"        tips: &[{', '.join(rust_str(t) for t in tips)}],")
        print("        doc: Doc {")
        print(f"            group: {rust_str(docs['group'])},")
        print(f"            since: {rust_str(docs['since'])},")
        print(f"            complexity: {rust_str(docs.get('complexity', b''))},")
        print(f"            summary: {rust_str(docs['summary'])},")
        print("        },")
        if not sub:
            print("        route: todo_route!(),")
        print("    },")


if __name__ == "__main__":
    main()
