"""Data for a strongly correlated posterior: linear regression with 100
predictors that share one factor (pairwise correlation about 0.92), 200
rows, known noise sd 1. Python's standard library only; deterministic.

    python3 benches/correlated_regression.py > /tmp/corr.json
    tempest run benches/models/correlated_regression.tempest --data /tmp/corr.json
"""
import json
import random

rng = random.Random(7)
n, d = 200, 100
beta = [rng.gauss(0.0, 1.0) for _ in range(d)]
rows = []
for _ in range(n):
    z = rng.gauss(0.0, 1.0)
    rows.append([z + 0.3 * rng.gauss(0.0, 1.0) for _ in range(d)])
y = [sum(b * x for b, x in zip(beta, r)) + rng.gauss(0.0, 1.0) for r in rows]
print(json.dumps({"n": n, "d": d, "X": rows, "y": y}))
