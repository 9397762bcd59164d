"""Stan (PyStan 3 / httpstan) and tempest on the same posteriors, in one sitting.

For each posterior both systems run 4 chains x (warm-up + draws) with their
chains two at a time on the machine's 2 cores; the script alternates the two
systems and reports, per run, the wall time (tempest: the whole process;
Stan: `sample()` alone, compilation excluded), the minimum bulk ESS over the
parameters (ArviZ's rank-normalised bulk ESS for both, from the same draws
format), minimum bulk ESS per second with warm-up included, gradients after
warm-up (Stan: the sum of n_leapfrog__), divergences, maximum R-hat, and the
largest |mean difference| / posterior sd between the two systems.

    python3 -m venv /work/venv-stan && /work/venv-stan/bin/pip install pystan arviz
    cargo build --release
    [TEMPEST_BIN=path/to/tempest] /work/venv-stan/bin/python benches/stan_compare.py [--reps 3] [--only logistic,eight_schools]
        [--tempest-set adaptation=gradient --tempest-set correlated:adaptation=dense]

(`--tempest-set KEY=VALUE` applies to every posterior, `NAME:KEY=VALUE` to one.)

Posteriors: `logistic` (examples/logistic.tempest), `logistic_glm` (the same
posterior, Stan's `bernoulli_logit_glm`), `eight_schools`
(non-centred) and `eight_schools_centred`, `mcycle` (examples/mcycle_nuts.tempest,
run at 1000 + 1000), `correlated` (benches/models/correlated_regression.tempest,
data from benches/correlated_regression.py), `lotka_volterra`
(examples/lotka_volterra.tempest; Stan's `ode_rk45_tol` at 1e-6, as tempest's
default tolerances).
"""
import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import arviz as az
import numpy as np
import stan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path(p):
    return os.path.join(ROOT, p)


LOGISTIC = """
data { int<lower=0> N; int<lower=0> K; matrix[N, K] X; array[N] int<lower=0, upper=1> y; }
parameters { real alpha; vector[K] beta; }
model {
  alpha ~ normal(0, 1);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + X * beta);
}
"""

# Stan's fastest form of the same model: the GLM likelihood, whose gradient
# is one fused pass over X (no expression graph per element).
LOGISTIC_GLM = """
data { int<lower=0> N; int<lower=0> K; matrix[N, K] X; array[N] int<lower=0, upper=1> y; }
parameters { real alpha; vector[K] beta; }
model {
  alpha ~ normal(0, 1);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit_glm(X, alpha, beta);
}
"""

EIGHT_NONCENTRED = """
data { int<lower=0> J; vector[J] y; vector<lower=0>[J] sigma; }
parameters { real mu; real<lower=0> tau; vector[J] theta_raw; }
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta_raw ~ normal(0, 1);
  y ~ normal(mu + tau * theta_raw, sigma);
}
"""

EIGHT_CENTRED = """
data { int<lower=0> J; vector[J] y; vector<lower=0>[J] sigma; }
parameters { real mu; real<lower=0> tau; vector[J] theta; }
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
"""

MCYCLE = """
data { int<lower=1> N; array[N] real t; vector[N] accel; }
parameters { real<lower=0> ell; real<lower=0> sf; real<lower=0> sigma; }
model {
  matrix[N, N] K = add_diag(gp_matern52_cov(t, sf, ell), square(sigma));
  ell ~ lognormal(log(5), 0.5);
  sf ~ lognormal(log(30), 0.5);
  sigma ~ lognormal(log(20), 0.5);
  accel ~ multi_normal_cholesky(rep_vector(0, N), cholesky_decompose(K));
}
"""

CORRELATED = """
data { int<lower=0> n; int<lower=0> d; matrix[n, d] X; vector[n] y; }
parameters { vector[d] beta; }
model {
  beta ~ normal(0, 1);
  y ~ normal(X * beta, 1);
}
"""

LOTKA_VOLTERRA = """
functions {
  vector dz_dt(real t, vector z, real alpha, real beta, real gamma, real delta) {
    return [(alpha - beta * z[2]) * z[1], (-gamma + delta * z[1]) * z[2]]';
  }
}
data { int<lower=0> N; array[N] real ts; array[2] real y_init; array[N, 2] real<lower=0> y; }
parameters {
  real<lower=0> alpha; real<lower=0> beta; real<lower=0> gamma; real<lower=0> delta;
  array[2] real<lower=0> z_init;
  array[2] real<lower=0> sigma;
}
transformed parameters {
  array[N] vector[2] z = ode_rk45_tol(dz_dt, to_vector(z_init), 0, ts, 1e-6, 1e-6, 100000,
                                      alpha, beta, gamma, delta);
}
model {
  alpha ~ normal(1, 0.5);
  gamma ~ normal(1, 0.5);
  beta ~ normal(0.05, 0.05);
  delta ~ normal(0.05, 0.05);
  sigma ~ lognormal(-1, 1);
  z_init ~ lognormal(log(10), 1);
  for (k in 1:2) {
    y_init[k] ~ lognormal(log(z_init[k]), sigma[k]);
    y[, k] ~ lognormal(log(z[, k]), sigma[k]);
  }
}
"""


def read_csv(p):
    return list(csv.DictReader(open(path(p))))


def logistic_data():
    rows = read_csv("examples/data/breast_cancer_prepared.csv")
    X = [[float(r[f"x{k}"]) for k in range(30)] for r in rows]
    return {"N": len(rows), "K": 30, "X": X, "y": [int(float(r["y"])) for r in rows]}


def eight_data():
    return json.load(open(path("examples/eight_schools.json")))


def mcycle_data():
    rows = read_csv("examples/data/mcycle.csv")
    return {"N": len(rows), "t": [float(r["times"]) for r in rows],
            "accel": [float(r["accel"]) for r in rows]}


def correlated_data():
    out = subprocess.run([sys.executable, path("benches/correlated_regression.py")],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def lv_data():
    rows = read_csv("examples/data/hare_lynx_1900_1920.csv")
    years = [float(r["year"]) for r in rows]
    return {"N": len(rows) - 1, "ts": [y - years[0] for y in years[1:]],
            "y_init": [float(rows[0]["hare"]), float(rows[0]["lynx"])],
            "y": [[float(r["hare"]), float(r["lynx"])] for r in rows[1:]]}


# name -> (Stan code, its data, tempest model, tempest data file; None: the
#          Stan data written as JSON)
POSTERIORS = {
    "logistic": (LOGISTIC, logistic_data, "examples/logistic.tempest",
                 "examples/data/breast_cancer_prepared.csv"),
    "logistic_glm": (LOGISTIC_GLM, logistic_data, "examples/logistic.tempest",
                     "examples/data/breast_cancer_prepared.csv"),
    "eight_schools": (EIGHT_NONCENTRED, eight_data, "examples/eight_schools.tempest",
                      "examples/eight_schools.json"),
    "eight_schools_centred": (EIGHT_CENTRED, eight_data,
                              "examples/eight_schools_centred.tempest",
                              "examples/eight_schools.json"),
    "mcycle": (MCYCLE, mcycle_data, "examples/mcycle_nuts.tempest", "examples/data/mcycle.csv"),
    "correlated": (CORRELATED, correlated_data, "benches/models/correlated_regression.tempest",
                   None),
    "lotka_volterra": (LOTKA_VOLTERRA, lv_data, "examples/lotka_volterra.tempest",
                       "examples/data/hare_lynx_1900_1920.csv"),
}


def clear_stan_fits():
    """httpstan answers a repeated request (same model, data, seed) from its
    cache of fits; remove them so every run samples."""
    for d in glob.glob(os.path.expanduser("~/.cache/httpstan/*/models/*/fits/*")):
        if os.path.isdir(d):
            shutil.rmtree(d)
        else:
            os.remove(d)


def stan_run(name, code, data, warmup, draws, seed):
    model = stan.build(code, data=data, random_seed=seed)
    clear_stan_fits()
    t0 = time.perf_counter()
    fit = model.sample(num_chains=4, num_warmup=warmup, num_samples=draws)
    wall = time.perf_counter() - t0
    # fit._draws: [flat parameters, draws, chains]
    chains = fit.num_chains
    params = {}
    for pname, dims in zip(fit.param_names, fit.dims):
        if name == "lotka_volterra" and pname == "z":
            continue
        arr = fit[pname]  # [*dims, draws * chains], chain by chain
        arr = arr.reshape(-1, arr.shape[-1]) if dims else arr.reshape(1, -1)
        size = arr.shape[0]
        for k in range(size):
            label = pname
            if dims:
                idx = np.unravel_index(k, dims, order="F")
                label = f"{pname}[{', '.join(str(i) for i in idx)}]"
            params[label] = arr[k].reshape(-1, chains).T  # draws interleave chains
    ess = {k: float(az.ess(v, method="bulk")) for k, v in params.items()}
    rhat = {k: float(az.rhat(v)) for k, v in params.items()}
    leap = fit["n_leapfrog__"].sum()
    div = int(fit["divergent__"].sum())
    return {
        "wall": wall, "ess_min": min(ess.values()), "rhat_max": max(rhat.values()),
        "gradients": int(leap), "divergences": div,
        "mean": {k: float(v.mean()) for k, v in params.items()},
        "sd": {k: float(v.std(ddof=1)) for k, v in params.items()},
        "step": [float(s) for s in np.unique(fit["stepsize__"])],
    }


def tempest_run(name, model, data, seed, sets, tmp):
    out = os.path.join(tmp, f"{name}_tempest.json")
    prefix = os.path.join(tmp, f"{name}_draws")
    cmd = [os.environ.get("TEMPEST_BIN", path("target/release/tempest")), "run", path(model), "--data", data, "-q",
           "--seed", str(seed), "--json", out, "--csv", prefix,
           "--set", "chains=4", "--set", "warmup=1000", "--set", "draws=1000"]
    for s in sets:
        target, _, setting = s.rpartition(":")
        if target in ("", name):
            cmd += ["--set", setting]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    j = json.load(open(out))
    params = read_stan_csv([f"{prefix}_{c}.csv" for c in range(1, j["chains"] + 1)])
    ess = {k: float(az.ess(v, method="bulk")) for k, v in params.items()}
    rhat = {k: float(az.rhat(v)) for k, v in params.items()}
    return {
        "wall": wall, "ess_min": min(ess.values()), "rhat_max": max(rhat.values()),
        "ess_min_own": j["ess_bulk_min"],
        "gradients": j["gradient_evaluations"], "divergences": j["divergences"],
        "warmup_s": j["warmup_seconds"],
        "mean": {k: float(v.mean()) for k, v in params.items()},
        "sd": {k: float(v.std(ddof=1)) for k, v in params.items()},
        "step": j["step_size"],
    }


def read_stan_csv(files):
    """{model name: [chains, draws]} from Stan CSV files (`beta.2` is `beta[1]`)."""
    cols = None
    chains = []
    for f in files:
        lines = [ln for ln in open(f) if not ln.startswith("#") and ln.strip()]
        header = lines[0].strip().split(",")
        rows = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]])
        cols = header
        chains.append(rows)
    out = {}
    for k, name in enumerate(cols):
        if name.endswith("__"):
            continue
        base, *idx = name.split(".")
        label = base if not idx else f"{base}[{', '.join(str(int(i) - 1) for i in idx)}]"
        out[label] = np.stack([c[:, k] for c in chains])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default=",".join(POSTERIORS))
    ap.add_argument("--tempest-set", action="append", default=[])
    ap.add_argument("--out", default=None, help="write every run's figures to this JSON file")
    a = ap.parse_args()
    out = os.path.abspath(a.out) if a.out else None
    # httpstan compiles models under the working directory's build/: work
    # in a scratch directory so nothing lands in the repository.
    os.chdir(tempfile.mkdtemp(prefix="stan_compare_"))
    tmp = tempfile.mkdtemp()
    results = {}
    for name in a.only.split(","):
        code, data_of, model, data_file = POSTERIORS[name]
        data = data_of()
        if data_file is None:
            data_file = os.path.join(tmp, f"{name}.json")
            with open(data_file, "w") as f:
                f.write(json.dumps(data))
        else:
            data_file = path(data_file)
        rows = []
        for rep in range(a.reps):
            st = stan_run(name, code, data, 1000, 1000, rep + 1)
            te = tempest_run(name, model, data_file, rep + 1, a.tempest_set, tmp)
            common = [k for k in st["mean"] if k in te["mean"]]
            gap = max(abs(st["mean"][k] - te["mean"][k]) / st["sd"][k] for k in common)
            rows.append({"stan": st, "tempest": te, "mean_gap_sd": gap, "compared": len(common)})
            for who, r in (("stan", st), ("tempest", te)):
                print(f"{name:22s} {who:8s} wall {r['wall']:7.2f} s  min ESS {r['ess_min']:7.0f}  "
                      f"ESS/s {r['ess_min'] / r['wall']:8.1f}  ESS/1k grad "
                      f"{1000 * r['ess_min'] / max(r['gradients'], 1):6.1f}  grads {r['gradients']:8d}  "
                      f"div {r['divergences']:4d}  rhat {r['rhat_max']:.4f}", flush=True)
            print(f"{name:22s} ratio ESS/s tempest/Stan "
                  f"{(te['ess_min'] / te['wall']) / (st['ess_min'] / st['wall']):.2f}; "
                  f"largest mean gap {gap:.3f} sd over {len(common)} params", flush=True)
        results[name] = rows
    if out:
        json.dump(results, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
