"""The satellite SVGP of examples/satellite.tempest in GPflow, for benches/README.md.

Same split (`is_test`), six latent GPs sharing one isotropic squared-exponential
kernel and M = 100 inducing inputs (a seeded random subset of the training
rows, learned), whitened q(u), softmax likelihood, Adam (lr 0.01) on every
parameter with minibatches of 256 -- the configuration of the issue that asked
for the svi engine. Prints test accuracy and mean log predictive density at
checkpoints with the wall time spent training so far (evaluation excluded).

    python3 -m venv /work/venv-gpflow && /work/venv-gpflow/bin/pip install gpflow tensorflow-cpu tf-keras
    /work/venv-gpflow/bin/python benches/satellite_gpflow.py [--steps 20000] [--seed 1]
"""
import argparse
import csv
import os
import time

import numpy as np
import tensorflow as tf
import gpflow
import tf_keras

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=20000)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--every", type=int, default=2000)
a = ap.parse_args()
np.random.seed(a.seed)
tf.random.set_seed(a.seed)

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rows = list(csv.DictReader(open(os.path.join(root, "..", "shared", "data", "satellite_prepared.csv"))))
feats = [f"x{k}" for k in range(36)]
X = np.array([[float(r[f]) for f in feats] for r in rows])
y = np.array([int(float(r["y"])) for r in rows])
test = np.array([r["is_test"] in ("1", "1.0") for r in rows])
Xtr, ytr, Xte, yte = X[~test], y[~test], X[test], y[test]
print(f"train {len(Xtr)}, test {len(Xte)}")

Z = Xtr[np.random.choice(len(Xtr), 100, replace=False)].copy()
model = gpflow.models.SVGP(
    kernel=gpflow.kernels.SquaredExponential(),
    likelihood=gpflow.likelihoods.Softmax(6),
    inducing_variable=Z,
    num_latent_gps=6,
    whiten=True,
    num_data=len(Xtr),
)
ds = (tf.data.Dataset.from_tensor_slices((Xtr, ytr[:, None].astype(np.int64)))
      .repeat().shuffle(len(Xtr), seed=a.seed).batch(256))
it = iter(ds)
loss = model.training_loss_closure(it, compile=True)
opt = tf_keras.optimizers.Adam(0.01)


@tf.function
def step():
    opt.minimize(loss, model.trainable_variables)


def evaluate():
    mu, _ = model.predict_y(Xte)
    acc = float(np.mean(np.argmax(mu.numpy(), 1) == yte))
    lpd = model.predict_log_density((Xte, yte[:, None].astype(np.int64)))
    return acc, float(np.mean(lpd.numpy()))


trained = 0.0
for k in range(1, a.steps + 1):
    t0 = time.perf_counter()
    step()
    trained += time.perf_counter() - t0
    if k % a.every == 0 or k == a.steps:
        acc, mlpd = evaluate()
        print(f"step {k:6d}  train time {trained:7.1f} s  test accuracy {acc:.4f}  "
              f"mean log predictive density {mlpd:.4f}", flush=True)
