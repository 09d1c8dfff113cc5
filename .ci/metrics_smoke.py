"""Scrapes fc-server's admin port and reads it with the Prometheus Python client's parser.

Usage: metrics_smoke.py <admin-port>. Fails unless the exposition parses and carries the
metrics redis_exporter's dashboards read, with the types they expect.
"""

import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

port = int(sys.argv[1])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
    assert response.status == 200, response.status
    kind = response.headers["Content-Type"]
    assert kind.startswith("text/plain; version=0.0.4"), kind
    text = response.read().decode()

families = {f.name: f for f in text_string_to_metric_families(text)}
expected = {
    "redis_up": "gauge",
    "redis_connected_clients": "gauge",
    "redis_memory_used_bytes": "gauge",
    "redis_commands_processed": "counter",
    "redis_keyspace_hits": "counter",
    "redis_evicted_keys": "counter",
    "redis_expired_keys": "counter",
    "redis_db_keys": "gauge",
    "redis_commands": "counter",
    "fast_cache_shard_keys": "gauge",
    "fast_cache_worker_cross_worker_hops": "counter",
    "fast_cache_command_duration_seconds": "histogram",
}
for name, kind in expected.items():
    family = families.get(name)
    assert family is not None, f"no {name} in the exposition"
    assert family.type == kind, f"{name} is a {family.type}, not a {kind}"
up = [s.value for s in families["redis_up"].samples]
assert up == [1.0], up
keys = sum(s.value for s in families["redis_db_keys"].samples)
assert keys >= 3, keys
for probe in ("health", "ready"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{probe}", timeout=10) as response:
        assert response.status == 200, (probe, response.status)
print(f"metrics smoke: {len(families)} metric families parsed by prometheus_client")
