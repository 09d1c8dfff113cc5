"""redis-py against a running fc-server: the handshake it does on its own (CLIENT SETINFO),
RESP2 and RESP3, pipelines, WATCH-guarded transactions, hashes, expiry and INFO.

Usage: python redis_py_smoke.py <port>
"""

import sys

import redis

port = int(sys.argv[1])
for protocol in (2, 3):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    assert r.ping() is True
    prefix = f"py{protocol}:"
    assert r.set(prefix + "greeting", "hello", ex=100) is True
    assert r.get(prefix + "greeting") == "hello"
    assert 0 < r.ttl(prefix + "greeting") <= 100
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"{prefix}k{i}", i)
    pipe.execute()
    assert r.mget([f"{prefix}k{i}" for i in range(1000)]) == [str(i) for i in range(1000)]
    r.hset(prefix + "user", mapping={"name": "ada", "lang": "en"})
    assert r.hgetall(prefix + "user") == {"name": "ada", "lang": "en"}
    assert r.smembers(prefix + "nothing") == set()

    def increment(pipe):
        value = int(pipe.get(prefix + "counter") or 0)
        pipe.multi()
        pipe.set(prefix + "counter", value + 1)

    for _ in range(10):
        r.transaction(increment, prefix + "counter")
    assert r.get(prefix + "counter") == "10"
    clients = r.client_list()
    assert any(c.get("lib-name") == "redis-py" for c in clients), clients
    assert r.info("persistence")["loading"] == 0
    assert r.execute_command("DBSIZE") >= 1003
print("redis-py smoke: ok (RESP2 and RESP3)")
