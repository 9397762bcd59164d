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
    /// The chain is over (finished or stopped early).
    fn finish(self: Box<Self>, warmup_seconds: f64, sampling_seconds: f64) -> Result<(), Error>;
}

/// Opens one [`DrawSink`] per chain.
pub trait DrawSinks: Send + Sync {
    /// The sink for one chain, opened before the chain's first iteration.
    fn open(&self, run: &ChainRun) -> Result<Box<dyn DrawSink>, Error>;
}

/// Stan CSV files `PREFIX_<chain>.csv`, one line per draw, written as they
/// are made (a stopped run keeps every draw written before the stop).
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
    fn finish(self: Box<Self>, warmup_seconds: f64, sampling_seconds: f64) -> Result<(), Error> {
        StanCsvWriter::finish(*self, warmup_seconds, sampling_seconds)
    }
}
