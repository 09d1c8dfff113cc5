"""TLS ÷ plaintext per round (round i of a load's TLS series against round i of its plaintext
series, same server and mix): python3 pairs.py run-*/server-rounds.csv"""
import csv, sys
from collections import defaultdict

series = defaultdict(list)
for path in sys.argv[1:]:
    for row in csv.DictReader(open(path)):
        key = (path, row["server"], row["mix"], row["load"])
        series[key].append((float(row["ops_per_sec"]), float(row["ops_per_server_cpu_sec"])))
pairs = defaultdict(list)
for (path, server, mix, load), rounds in series.items():
    if not load.endswith("-tls"):
        continue
    plain = series.get((path, server, mix, load[: -len("-tls")]), [])
    for (t, tc), (p, pc) in zip(rounds, plain):
        pairs[(load, server, mix)].append((t / p, tc / pc))
for (load, server, mix), ratios in sorted(pairs.items()):
    ops = sorted(r[0] for r in ratios)
    cpu = sorted(r[1] for r in ratios)
    print(f"{load:20} {server:9} {mix}: ops {' '.join(f'{r:.2f}' for r in ops)} "
          f"(median {ops[len(ops) // 2]:.2f}); per CPU median {cpu[len(cpu) // 2]:.2f}")
