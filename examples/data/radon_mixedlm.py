"""Reference numbers for examples/radon.tempest (checked in tests/suite/hierarchical.rs).

The same varying-intercept model, log.radon ~ basement + (1 | county), fitted
by maximum likelihood (not REML) with statsmodels' MixedLM:

    pip install pandas statsmodels
    python examples/data/radon_mixedlm.py examples/data/radon.csv

statsmodels 0.15.0 and pandas 3.1.1, on radon.csv (the `radon` data of the R
package HLMdiag: 919 homes, 85 counties) gives

    intercept  1.4611582255104925   (std. err. 0.052)
    basement  -0.6926364757280632   (std. err. 0.071)
    sigma      0.7551596160000622   (residual sd)
    tau        0.3244640630454856   (sd of the county intercepts)
    log-likelihood -1081.825286596949
"""

import sys

import pandas as pd
import statsmodels.formula.api as smf

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "examples/data/radon.csv")
d = d.rename(columns={"log.radon": "log_radon"})
fit = smf.mixedlm("log_radon ~ basement", d, groups=d["county"]).fit(reml=False)
print(fit.summary())
print("intercept", repr(float(fit.fe_params["Intercept"])))
print("basement", repr(float(fit.fe_params["basement"])))
print("sigma", repr(float(fit.scale) ** 0.5))
print("tau", repr(float(fit.cov_re.iloc[0, 0]) ** 0.5))
print("log-likelihood", repr(float(fit.llf)))
