//! Draw sinks: where a sampler streams its draws as it makes them, one sink
//! per chain. A sink sees the run as a [`RunHeader`], which names no file
//! format: the Stan CSV files of `--csv` are one kind of sink
//! (`output::stan_csv::StanCsvSinks`, which turns the header into
//! CmdStan's); a program embedding tempest can add its own through
//! `RunOptions::sinks`.

use crate::error::Error;

/// How a sampler is named in CmdStan's configuration: `algorithm = hmc`
/// with `engine = nuts`, or `algorithm = mala` alone. Each sampler's
/// definition gives its own; Stan CSV files write it, and `tempest
/// summary` knows the sampler of a file by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdStanName {
    /// CmdStan's `algorithm` (`hmc`, or the sampler's own name).
    pub algorithm: &'static str,
    /// CmdStan's `engine` under the algorithm (`nuts`, `static`), if any.
    pub engine: Option<&'static str>,
}

/// The run a chain belongs to: model, chain id (from 1), seed, warm-up
/// iterations and draws, sampler, adaptation target, tree depth, data
/// file, and tempest's own keys.
#[derive(Clone, Debug, PartialEq)]
pub struct RunHeader {
    /// The model's name, e.g. the model file's stem.
    pub model: String,
    /// The chain's id (1-based).
    pub chain_id: usize,
    /// The random seed of the run.
    pub seed: u64,
    /// Number of warm-up iterations.
    pub warmup: usize,
    /// Number of kept draws after warm-up.
    pub draws: usize,
    /// The sampler's engine name (`nuts`).
    pub sampler: &'static str,
    /// The sampler as CmdStan names it.
    pub cmdstan: CmdStanName,
    /// The target acceptance rate of step-size adaptation.
    pub adapt_delta: f64,
    /// The largest tree depth, for a sampler that builds trees.
    pub max_depth: Option<usize>,
    /// The data file of the run (may be empty).
    pub data_file: String,
    /// The version of tempest that ran it.
    pub tempest_version: String,
    /// tempest's own `key = value` pairs: the posterior's fingerprint and
    /// the sampler settings CmdStan's keys do not cover, so that files of
    /// several processes can be told to be chains of one run.
    pub tempest: Vec<(String, String)>,
}

/// The run a chain belongs to, as a sink sees it.
#[derive(Clone, Debug)]
pub struct ChainRun {
    /// The run's configuration and the chain's id.
    pub header: RunHeader,
    /// The names of the values of every draw (Stan's column names).
    pub columns: Vec<String>,
}

/// What the sampler reports about one draw: the seven `__` columns of a
/// Stan CSV file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerStats {
    /// The log density of the draw, up to a constant (`lp__`).
    pub lp: f64,
    /// The mean Metropolis acceptance probability of the trajectory
    /// (`accept_stat__`).
    pub accept_stat: f64,
    /// The leapfrog step size (`stepsize__`).
    pub stepsize: f64,
    /// The depth of the NUTS tree (`treedepth__`).
    pub treedepth: usize,
    /// The number of leapfrog steps taken (`n_leapfrog__`).
    pub n_leapfrog: usize,
    /// Whether the trajectory diverged (`divergent__`, written 0 or 1).
    pub divergent: bool,
    /// The Hamiltonian at the draw (`energy__`).
    pub energy: f64,
}

/// Receives one chain's draws, in order, as they are made.
pub trait DrawSink: Send {
    /// Warm-up is over: the adapted step size and diagonal inverse metric.
    fn adapted(&mut self, step_size: f64, inv_metric: &[f64]) -> Result<(), Error>;
    /// One kept draw: the sampler's statistics and the values named by
    /// [`ChainRun::columns`].
    fn draw(&mut self, stats: &SamplerStats, values: &[f64]) -> Result<(), Error>;
    /// The run was stopped early (Ctrl-C, SIGTERM, `RunOptions::cancel`):
    /// its fit keeps only each chain's first `kept` draws (the same number
    /// in every chain, none when a chain was still warming up), `reason`
    /// says why. A sink that keeps draws drops the rest here, so that it
    /// agrees with the fit. Called once, before [`DrawSink::finish`], and
    /// only for a stopped run; by default it does nothing.
    fn stopped(&mut self, kept: usize, reason: &str) -> Result<(), Error> {
        let _ = (kept, reason);
        Ok(())
    }
    /// The chain is over (finished or stopped early).
    fn finish(self: Box<Self>, warmup_seconds: f64, sampling_seconds: f64) -> Result<(), Error>;
}

/// Opens one [`DrawSink`] per chain.
pub trait DrawSinks: Send + Sync {
    /// The sink for one chain, opened before the chain's first iteration.
    fn open(&self, run: &ChainRun) -> Result<Box<dyn DrawSink>, Error>;
}
