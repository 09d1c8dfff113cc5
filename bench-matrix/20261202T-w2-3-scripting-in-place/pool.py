# pool.py NEW/server-rounds.csv... -- BASE/server-rounds.csv...: per shape, the median and quartiles of the per-round fc-server/Redis ratios (ops per server CPU-second) over all the rounds given.
import csv, sys, statistics
from collections import defaultdict
def pool(paths):
    ratios = defaultdict(list)
    for path in paths:
        rows = list(csv.DictReader(open(path)))
        by = defaultdict(lambda: defaultdict(list))
        for r in rows:
            by[r['mix']][r['server']].append(float(r['ops_per_server_cpu_sec']))
        for mix, d in by.items():
            ratios[mix] += [a / b for a, b in zip(d['fc-server'], d['redis'])]
    for mix, rs in ratios.items():
        rs.sort()
        q = lambda p: rs[int(p * (len(rs) - 1))]
        print(f"  {mix}: {len(rs)} rounds, median {statistics.median(rs):.2f}x, quartiles {q(0.25):.2f}-{q(0.75):.2f}")
args = sys.argv[1:]
i = args.index('--')
print("new"); pool(args[:i]); print("base"); pool(args[i+1:])
