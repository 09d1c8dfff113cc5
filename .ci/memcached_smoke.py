"""fc-server's memcached port through pymemcache, a real memcached client library (PyPI).

Usage: memcached_smoke.py <memcached port> <resp port>
Checks what an application using pymemcache relies on: set/get with its serde (flags say how a
value was serialized), get_many, gets/cas, add/replace/append, incr/decr, touch, delete,
noreply writes, the shared keyspace with RESP, and stats.
"""

import socket
import sys

from pymemcache.client.base import Client
from pymemcache import serde

port, resp_port = int(sys.argv[1]), int(sys.argv[2])
mc = Client(("127.0.0.1", port), serde=serde.pickle_serde, connect_timeout=5, timeout=5)


def check(what, got, want):
    if got != want:
        raise SystemExit(f"memcached smoke: {what}: got {got!r}, want {want!r}")


mc.flush_all()
# Values of several types: pymemcache stores the type in the flags and reads it back.
check("set str", mc.set("s", "text", expire=100), True)
check("get str", mc.get("s"), "text")
check("set int", mc.set("i", 42), True)
check("get int", mc.get("i"), 42)
check("set obj", mc.set("o", {"a": [1, 2]}), True)
check("get obj", mc.get("o"), {"a": [1, 2]})
check("get_many", mc.get_many(["s", "i", "missing"]), {"s": "text", "i": 42})
# Compare and swap.
value, cas = mc.gets("s")
check("gets", value, "text")
check("cas", mc.cas("s", "new", cas), True)
check("stale cas", mc.cas("s", "newer", cas), False)
check("after cas", mc.get("s"), "new")
# The rest of the storage commands.
check("add existing", mc.add("s", "x", noreply=False), False)
check("add new", mc.add("fresh", "x", noreply=False), True)
check("replace missing", mc.replace("nope", "x", noreply=False), False)
raw = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
check("raw set", raw.set("counter", b"10"), True)
check("incr", raw.incr("counter", 5), 15)
check("decr", raw.decr("counter", 20), 0)
check("append", raw.append("counter", b"7", noreply=False), True)
# memcached pads a number that got shorter with spaces (it rewrites in place): "0 " then "7".
check("get appended", raw.get("counter"), b"0 7")
check("touch", raw.touch("counter", 60, noreply=False), True)
check("delete", raw.delete("counter", noreply=False), True)
check("delete missing", raw.delete("counter", noreply=False), False)
# noreply writes (pymemcache's default) land before the next read.
for n in range(100):
    raw.set(f"bulk:{n}", str(n).encode())
check("noreply writes", raw.get("bulk:99"), b"99")
stats = raw.stats()
check("stats curr_connections", stats[b"curr_connections"] >= 2, True)
check("stats cmd_get", stats[b"cmd_get"] > 0, True)
# The keyspace is RESP's too.
with socket.create_connection(("127.0.0.1", resp_port), timeout=5) as s:
    s.sendall(b"*2\r\n$3\r\nGET\r\n$6\r\nbulk:7\r\n")
    check("RESP GET of a memcached item", s.recv(100), b"$1\r\n7\r\n")
print("memcached smoke: ok (pymemcache)")
