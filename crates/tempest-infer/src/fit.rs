//! The result of an engine, as every engine gives it: the [`Fit`] trait
//! (one report rendered to summary text and JSON, predictions at test
//! data, a figure), and a way back
//! to the engine's own result type for callers that need its details
//! ([`dyn Fit::downcast_ref`](trait.Fit.html#method.downcast_ref); each
//! engine adds its own shorthand beside its fit, e.g. `fit.as_exact()`).

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::report::Report;
use std::any::Any;
use std::path::Path;

/// What an engine found. Each engine's result type implements it; callers
/// read any result through it, and reach an engine's details with
/// [`dyn Fit::downcast_ref`](trait.Fit.html#method.downcast_ref) (or the
/// `as_*` shorthands).
pub trait Fit: AsAny + Send {
    /// The name of the engine that produced it (`exact`, `nuts`, ...).
    fn engine(&self) -> &'static str;
    /// What the engine found, rendered to text by [`Fit::summary`] and to
    /// JSON by [`Fit::to_json`].
    fn report(&self) -> Report;
    /// A readable summary: the report as text.
    fn summary(&self) -> String {
        self.report().text()
    }
    /// Machine-readable results: the report as JSON.
    fn to_json(&self) -> serde_json::Value {
        self.report().json()
    }
    /// Predict at test data (bound like the training data) and keep the
    /// predictions and test metrics in the fit (with the settings the
    /// engine was built with). Engines whose
    /// [`crate::seam::Accepts`] refuse test data never receive it.
    fn attach_test(&mut self, test: &Bound) -> Result<(), Error> {
        let _ = test;
        Err(Error::internal(format!(
            "test data reached the `{}` engine, which makes no predictions",
            self.engine()
        )))
    }
    /// The fit in the saved form `tempest predict` reads (see
    /// [`crate::saved`]), for engines that can save one; `model`
    /// names the model file, `cfg` is the run's engine configuration.
    /// `None`: this engine cannot.
    fn saved(
        &self,
        model: &str,
        cfg: &crate::settings::EngineConfig,
    ) -> Option<Result<serde_json::Value, Error>> {
        let _ = (model, cfg);
        None
    }
    /// A hyper's value by name: `ell` gives all its entries (a matrix row by
    /// row), `ell[1]` or `A[0, 2]` one entry (0-based, as in the model).
    /// `None` for a name the model does not declare as a hyper, or an
    /// index out of range.
    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        let _ = name;
        None
    }
    /// Draw the fit's figure to a PNG file at `path` (and, for engines with
    /// two figures, the second beside it): the files written, `path` first.
    ///
    /// Without the `plot` feature every engine returns the error of
    /// [`crate::require_plot`] instead.
    fn plot(&self, path: &Path) -> Result<Vec<std::path::PathBuf>, Error> {
        let _ = path;
        crate::require_plot("--plot")?;
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("--plot is not available for the `{}` engine", self.engine()),
        ))
    }
    /// [`Fit::plot`] with choices beyond the defaults ([`PlotOptions`]);
    /// an engine whose figures have nothing to choose refuses them.
    fn plot_with(
        &self,
        path: &Path,
        options: &PlotOptions,
    ) -> Result<Vec<std::path::PathBuf>, Error> {
        crate::require_plot("--plot")?;
        if options.params.is_some() {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "--plot-params: the `{}` engine's figure draws no params; the samplers' traces do",
                    self.engine()
                ),
            ));
        }
        self.plot(path)
    }
}

/// What a figure shows beyond its defaults ([`Fit::plot_with`]).
#[derive(Clone, Debug, Default)]
pub struct PlotOptions {
    /// The samplers' trace and pair plots: these params (whole params such
    /// as `a`, or elements such as `a[3]`; see
    /// `tempest::output::plot_params`) instead of the first eight.
    pub params: Option<Vec<String>>,
}

/// A view of any value as [`Any`], so a `dyn Fit` can be downcast to the
/// engine's own result type; every `'static` type has it.
pub trait AsAny: Any {
    /// The value as [`Any`].
    fn as_any(&self) -> &dyn Any;
    /// The boxed value as [`Any`].
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl dyn Fit {
    /// The engine's own result, if it is a `T`.
    pub fn downcast_ref<T: Fit>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }
    /// The engine's own result, owned, if it is a `T`.
    pub fn downcast<T: Fit>(self: Box<Self>) -> Option<Box<T>> {
        self.into_any().downcast().ok()
    }
}

/// A hyper's value by name in `hypers` (the graph's hypers, in order):
/// `ell` (every entry, a matrix row by row) or one entry `ell[1]`,
/// `A[0, 2]` (0-based). The lookup behind [`Fit::hyper`].
pub fn hyper_by_name(
    graph: &crate::ir::Graph,
    hypers: &[crate::ir::value::Value<f64>],
    name: &str,
) -> Option<Vec<f64>> {
    let (base, index) = match name.split_once('[') {
        Some((b, rest)) => (b.trim(), Some(rest.strip_suffix(']')?)),
        None => (name.trim(), None),
    };
    let v = hypers.get(graph.hyper_index(base)?)?;
    let Some(index) = index else {
        return Some(v.flatten());
    };
    let ix: Vec<usize> = index
        .split(',')
        .map(|k| k.trim().parse().ok())
        .collect::<Option<_>>()?;
    use crate::ir::value::Value;
    match (v, ix.as_slice()) {
        (Value::Vector(x), [i]) => x.get(*i).map(|x| vec![*x]),
        (Value::Matrix(m), [i, j]) if *i < m.nrows() && *j < m.ncols() => Some(vec![m[(*i, *j)]]),
        _ => None,
    }
}

/// The note for priors on hypers that a run does not learn.
pub const UNUSED_HYPER_PRIORS: &str =
    "the priors on hypers are not used: this run does not learn hypers (`learn_hypers = false`)";
