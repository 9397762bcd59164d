//! Draw sinks: where a sampler streams its draws as it makes them, one sink
//! per chain. The Stan CSV files of `--csv` are one kind ([`StanCsvSinks`]);
//! a program embedding tempest can add its own through
//! `RunOptions::sinks`.

use crate::error::Error;
use crate::output::stan_csv::{SamplerStats, StanCsvHeader, StanCsvWriter};
use std::path::PathBuf;

/// The run a chain belongs to, as a sink sees it.
#[derive(Clone, Debug)]
pub struct ChainRun {
    /// The run's configuration as a Stan CSV header states it: model,
    /// chain id (from 1), seed, warm-up iterations and draws, sampler,
    /// adaptation target, tree depth, data file.
    pub header: StanCsvHeader,
    /// The names of the values of every draw (Stan's column names).
    pub columns: Vec<String>,
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

/// Stan CSV files `PREFIX_<chain>.csv`, one line per draw, written as they
/// are made to `PREFIX_<chain>.csv.partial` (locked against another run
/// writing the same file) and renamed when the chain is over. A stopped
/// run's files keep the draws its fit keeps; a run that fails or is killed
/// leaves the `.partial` files, every complete line readable.
#[derive(Clone, Debug)]
pub struct StanCsvSinks {
    /// The path prefix.
    pub prefix: PathBuf,
}

impl DrawSinks for StanCsvSinks {
    fn open(&self, run: &ChainRun) -> Result<Box<dyn DrawSink>, Error> {
        let id = run.header.chain_id;
        let path = PathBuf::from(format!("{}_{id}.csv", self.prefix.display()));
        Ok(Box::new(StanCsvWriter::create(
            &path,
            &run.header,
            &run.columns,
        )?))
    }
}

impl DrawSink for StanCsvWriter {
    fn adapted(&mut self, step_size: f64, inv_metric: &[f64]) -> Result<(), Error> {
        self.write_adaptation(step_size, inv_metric)
    }
    fn draw(&mut self, stats: &SamplerStats, values: &[f64]) -> Result<(), Error> {
        self.write_draw(stats, values)
    }
    fn stopped(&mut self, kept: usize, reason: &str) -> Result<(), Error> {
        self.keep_first(kept, reason)
    }
    fn finish(self: Box<Self>, warmup_seconds: f64, sampling_seconds: f64) -> Result<(), Error> {
        StanCsvWriter::finish(*self, warmup_seconds, sampling_seconds)
    }
}
