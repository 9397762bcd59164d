"""The CO2 fit of examples/co2.tempest in scikit-learn, for benches/README.md.

Same data (examples/data/co2.csv), same kernel and starting values (Rasmussen &
Williams section 5.4.3), the mean subtracted instead of learned; prints wall
time, evaluations of the log marginal likelihood and its value at the optimum.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install scikit-learn
    /tmp/venv/bin/python benches/co2_sklearn.py
"""
import csv
import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import (
    RBF, ConstantKernel as C, ExpSineSquared, RationalQuadratic, WhiteKernel)

rows = list(csv.DictReader(open("examples/data/co2.csv")))
X = np.array([[float(r["year"])] for r in rows])
y = np.array([float(r["co2"]) for r in rows])
y = y - y.mean()

kernel = (C(50.0**2) * RBF(50.0)
          + C(2.0**2) * RBF(100.0) * ExpSineSquared(1.0, 1.0, periodicity_bounds="fixed")
          + C(0.5**2) * RationalQuadratic(length_scale=1.0, alpha=1.0)
          + C(0.1**2) * RBF(0.1) + WhiteKernel(0.1**2))


class Counting(GaussianProcessRegressor):
    evaluations = 0

    def log_marginal_likelihood(self, *args, **kwargs):
        if kwargs.get("eval_gradient"):
            Counting.evaluations += 1
        return super().log_marginal_likelihood(*args, **kwargs)


times = []
for _ in range(3):
    Counting.evaluations = 0
    gp = Counting(kernel=kernel, normalize_y=False)
    t0 = time.perf_counter()
    gp.fit(X, y)
    times.append(time.perf_counter() - t0)
print(f"wall time {min(times):.2f} s (best of 3: {', '.join(f'{t:.2f}' for t in times)})")
print(f"evaluations {Counting.evaluations}")
print(f"log marginal likelihood {gp.log_marginal_likelihood_value_:.4f}")
print(f"kernel {gp.kernel_}")
