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

# The Grafana dashboard (docs/grafana/fast-cache.json) reads only metrics the server exposes
# (the WAL's appear with --data-dir only; this server has none: they are checked by name
# against the admin port's source instead).
import json
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
dashboard = json.loads((root / "docs/grafana/fast-cache.json").read_text())
exposed = {s.name for f in families.values() for s in f.samples}
source = (root / "crates/fc-server/src/admin.rs").read_text()
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        for name in re.findall(r"\b((?:redis|fast_cache)_[a-z_]+)\b", target["expr"]):
            if name.startswith("fast_cache_wal_"):
                base = re.sub(r"_(total|bucket|sum|count)$", "", name)
                assert f'"{base}"' in source, f"dashboard reads {name}, which the server never exposes"
            else:
                assert name in exposed, f"dashboard panel {panel['title']!r} reads {name}, not exposed"
print("metrics smoke: dashboard metrics ok")
