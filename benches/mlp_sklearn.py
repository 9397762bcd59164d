"""The network alone: scikit-learn's MLPClassifier on the same splits as
the deep-kernel runs (satellite, letter), for the SV-DKL comparison in
benches/README.md. Prints test accuracy, mean log predictive density
(minus the log loss) and seconds per seed.

Usage: python benches/mlp_sklearn.py ../shared/data/satellite_prepared.csv [hidden ...]
"""
import sys
import time

import numpy as np
from sklearn.metrics import accuracy_score, log_loss
from sklearn.neural_network import MLPClassifier


def main():
    path = sys.argv[1]
    hidden = tuple(int(h) for h in sys.argv[2:]) or (64, 64)
    data = np.genfromtxt(path, delimiter=",", names=True)
    cols = [c for c in data.dtype.names if c not in ("row", "y", "is_test")]
    x = np.column_stack([data[c] for c in cols])
    y = data["y"].astype(int)
    test = data["is_test"] == 1
    for seed in range(3):
        t0 = time.time()
        clf = MLPClassifier(hidden_layer_sizes=hidden, max_iter=500, random_state=seed)
        clf.fit(x[~test], y[~test])
        p = clf.predict_proba(x[test])
        secs = time.time() - t0
        acc = accuracy_score(y[test], clf.classes_[p.argmax(1)])
        mlpd = -log_loss(y[test], p, labels=clf.classes_)
        print(f"{path} MLP{hidden} seed {seed}: accuracy {acc:.4f}, mlpd {mlpd:.4f}, {secs:.1f} s")


if __name__ == "__main__":
    main()
