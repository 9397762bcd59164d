//! `ode(system, x0, t0, ts, p...)` evaluated: the `system` definition's
//! body as the right-hand side of the Dormand–Prince solver
//! ([`tempest_math::ode::solve`]), generically over the scalar type (dual
//! numbers carry forward sensitivities through every step), and the
//! vector–Jacobian product the samplers' reverse pass needs.

use super::expr::TExpr;
use super::graph::Graph;
use super::value::{Value, zero_like};
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind, num};
use tempest_core::interrupt::StopFlag;
use tempest_math::ode::{OdeFailure, OdeSettings, solve};
use tempest_model::custom::Scalar;
use tempest_syntax::ast::Span;

/// The solution of the system at the output times, a `matrix[T, S]`.
/// `vals` are the evaluated arguments (x0, t0, ts, then the system's
/// parameters) and `args` their expressions (for error positions); with
/// the bound model, output times out of order also name their data row.
/// The solve ends early with an `E-interrupted` error when `stop` is set.
#[allow(clippy::too_many_arguments)]
pub fn solve_call<T: Scalar>(
    bound: Option<&super::bind::Bound>,
    graph: &Graph,
    system: usize,
    args: &[TExpr],
    vals: &[Value<T>],
    settings: &OdeSettings,
    span: Span,
    stop: &StopFlag,
) -> Result<Value<T>, Error> {
    let f = &graph.functions[system];
    let at = |k: usize| args.get(k).map(|a| a.span).unwrap_or(span);
    let x0 = vals[0].vector().ok_or_else(|| {
        Error::at(
            ErrorKind::Type,
            at(0),
            format!("x0 must be a vector, found {}", vals[0].shape()),
        )
    })?;
    let t0 = vals[1]
        .scalar()
        .map(|t| t.to_constant())
        .filter(|t| t.is_finite())
        .ok_or_else(|| {
            Error::at(
                ErrorKind::Data,
                at(1),
                format!("t0 must be a finite number, found {}", vals[1].to_f64()),
            )
            .with_label("initial time")
        })?;
    let ts: Vec<f64> = vals[2]
        .vector()
        .ok_or_else(|| {
            Error::at(
                ErrorKind::Type,
                at(2),
                format!("ts must be a vector, found {}", vals[2].shape()),
            )
        })?
        .iter()
        .map(|t| t.to_constant())
        .collect();
    let mut last = t0;
    for (i, &t) in ts.iter().enumerate() {
        if !t.is_finite() || t < last {
            let mut err = Error::at(
                ErrorKind::Data,
                at(2),
                format!(
                    "the output times of `ode` must be finite, no earlier than t0 = {} and non-decreasing; element {i} is {}{}",
                    num(t0),
                    num(t),
                    if i > 0 && t.is_finite() { format!(" after {}", num(last)) } else { String::new() }
                ),
            )
            .with_label("output times");
            if let (Some(b), Some(super::expr::TKind::Ref(super::expr::Ref::Data(d)))) =
                (bound, args.get(2).map(|a| &a.kind))
            {
                let decl = &b.graph.data[*d];
                let (row, col) =
                    super::bind::element_location(&b.data[*d], i, &decl.name, &decl.source);
                err = err.in_data(b.location(row, col));
            }
            return Err(err);
        }
        last = t;
    }
    let params = &vals[3..];
    let n = x0.len();
    // The solution [T, S] and the solver's stages (nine vectors of S), in
    // the scalar type (a dual carries its tangents), before any is made.
    let mut request =
        tempest_core::limits::Request::new("the ODE solution and the solver's stages")
            .times("output times + 9 stages", ts.len() + 9)
            .times("state elements", n);
    request.bytes_per_entry = std::mem::size_of::<T>() as u128;
    tempest_core::limits::check_memory(&[request])
        .map_err(|e| e.with_span(span).with_label("this solve"))?;
    if let Some(p) = &f.system_program
        && let Some(mut flat) = p.bind(n, params)
    {
        let mut scratch = vec![T::zero(); p.slots()];
        let mut rhs = |t: f64, x: &[T], dx: &mut [T]| -> Result<(), String> {
            p.run(t, x, &mut flat, &mut scratch, dx);
            Ok(())
        };
        let out = solve(&mut rhs, x0.as_slice(), t0, &ts, settings, stop);
        return finish(out, ts.len(), n, settings, span);
    }
    let mut failure: Option<Error> = None;
    let mut rhs = |t: f64, x: &[T], dx: &mut [T]| -> Result<(), String> {
        let mut locals = Vec::with_capacity(f.n_locals.max(2 + params.len()));
        locals.push(Value::Real(T::constant(t)));
        locals.push(Value::Vector(DVector::from_column_slice(x)));
        locals.extend(params.iter().cloned());
        let v = match super::eval::run_body(f, locals) {
            Ok(v) => v,
            Err(e) => {
                failure = Some(e);
                return Err(String::new());
            }
        };
        match v.vector() {
            Some(v) if v.len() == dx.len() => {
                dx.copy_from_slice(v.as_slice());
                Ok(())
            }
            _ => {
                failure = Some(
                    Error::at(
                        ErrorKind::Shape,
                        f.body.span,
                        format!(
                            "`{}` gives dx/dt as {} for a state of length {}",
                            f.name,
                            v.shape(),
                            dx.len()
                        ),
                    )
                    .with_label("dx/dt")
                    .with_secondary(span, "solved here"),
                );
                Err(String::new())
            }
        }
    };
    let out = solve(&mut rhs, x0.as_slice(), t0, &ts, settings, stop);
    if let Some(e) = failure {
        return Err(e);
    }
    finish(out, ts.len(), n, settings, span)
}

/// The solver's output as a `matrix[T, S]`, or its failure as an error at
/// the call.
fn finish<T: Scalar>(
    out: Result<Vec<T>, OdeFailure>,
    rows: usize,
    n: usize,
    settings: &OdeSettings,
    span: Span,
) -> Result<Value<T>, Error> {
    let out = out.map_err(|e| match e {
        OdeFailure::Interrupted { .. } => {
            Error::at(ErrorKind::Interrupted, span, e.to_string()).with_label("this solve")
        }
        // A fault of the output times (the data), whatever the values.
        OdeFailure::Times { .. } => Error::at(ErrorKind::Data, span, e.to_string())
            .with_label("this solve")
            .with_note(format!("max_steps = {}", settings.max_steps)),
        e => Error::at(ErrorKind::Numerical, span, e.to_string())
            .with_label("this solve")
            .with_note(format!(
                "rtol = {}, atol = {}, max_steps = {}",
                settings.rtol, settings.atol, settings.max_steps
            )),
    })?;
    Ok(Value::Matrix(DMatrix::from_row_slice(rows, n, &out)))
}

/// The output times `ts` of the model's first `ode` call (in its lets,
/// then its sampling statements): the natural axis of a fit plot for a
/// model without a latent GP.
pub fn first_times(g: &Graph) -> Option<TExpr> {
    let mut found = None;
    let mut look = |e: &TExpr| {
        e.walk(&mut |x| {
            if found.is_none()
                && let super::expr::TKind::Ode { args, .. } = &x.kind
            {
                found = args.get(2).cloned();
            }
        })
    };
    g.lets.iter().for_each(|l| look(&l.value));
    g.observations
        .iter()
        .flat_map(|o| &o.dist.args)
        .for_each(&mut look);
    found
}

/// The adjoints of an `ode` call's arguments given the adjoint `adj`
/// \[T, S\] of its solution: Σᵢⱼ adjᵢⱼ ∂xᵢⱼ/∂a for every element a of each
/// argument flagged in `varying` (the times are data and get none). The
/// Jacobian comes from forward sensitivities: dual numbers through the
/// solver, up to eight tangents per solve, so a gradient costs about
/// ⌈P/8⌉ solves for P varying numbers.
#[allow(clippy::too_many_arguments)]
pub fn vjp(
    bound: &super::bind::Bound,
    system: usize,
    args: &[TExpr],
    vals: &[Value<f64>],
    varying: &[bool],
    adj: &DMatrix<f64>,
    settings: &OdeSettings,
    span: Span,
) -> Result<Vec<Option<Value<f64>>>, Error> {
    let mut coords = Vec::new();
    for (k, v) in vals.iter().enumerate() {
        if k == 1 || k == 2 || !varying.get(k).copied().unwrap_or(false) {
            continue;
        }
        coords.extend((0..v.flatten().len()).map(|e| (k, e)));
    }
    let mut out: Vec<Option<Value<f64>>> = (0..vals.len())
        .map(|k| coords.iter().any(|c| c.0 == k).then(|| zero_like(&vals[k])))
        .collect();
    let call = Call {
        graph: &bound.graph,
        stop: &bound.stop,
        system,
        args,
        vals,
        adj,
        settings,
        span,
    };
    let g = match coords.len() {
        0 => Vec::new(),
        1 => call.chunk::<1>(&coords)?,
        2..=4 => call.chunk::<4>(&coords)?,
        _ => {
            let mut g = Vec::with_capacity(coords.len());
            for ch in coords.chunks(8) {
                g.extend(call.chunk::<8>(ch)?);
            }
            g
        }
    };
    for (&(k, e), gv) in coords.iter().zip(g) {
        match out[k].as_mut() {
            Some(Value::Real(r)) => *r += gv,
            Some(Value::Vector(v)) => v[e] += gv,
            _ => {}
        }
    }
    Ok(out)
}

/// One `ode` call's pieces, for [`vjp`].
struct Call<'a> {
    graph: &'a Graph,
    stop: &'a StopFlag,
    system: usize,
    args: &'a [TExpr],
    vals: &'a [Value<f64>],
    adj: &'a DMatrix<f64>,
    settings: &'a OdeSettings,
    span: Span,
}

impl Call<'_> {
    /// Σᵢⱼ adjᵢⱼ ∂xᵢⱼ/∂a for the (argument, element) pairs of `coords`
    /// (at most N), by one solve in N-tangent duals.
    fn chunk<const N: usize>(&self, coords: &[(usize, usize)]) -> Result<Vec<f64>, Error>
    where
        adfn<N>: Scalar,
    {
        let mut lifted: Vec<Value<adfn<N>>> = self
            .vals
            .iter()
            .map(|v| match v {
                Value::IntArray(_) => Value::Vector(v.vector().unwrap_or_default()).lift(),
                v => v.lift(),
            })
            .collect();
        for (c, &(k, e)) in coords.iter().enumerate() {
            let seed = |d: &mut adfn<N>| {
                let mut t = d.tangent();
                t[c] = 1.0;
                *d = adfn::<N>::new(d.value(), t);
            };
            match &mut lifted[k] {
                Value::Real(r) => seed(r),
                Value::Vector(v) => seed(&mut v[e]),
                _ => {}
            }
        }
        let sol = solve_call(
            None,
            self.graph,
            self.system,
            self.args,
            &lifted,
            self.settings,
            self.span,
            self.stop,
        )?;
        let Value::Matrix(m) = sol else {
            return Err(Error::internal("an ODE solution that is not a matrix"));
        };
        let mut g = vec![0.0; coords.len()];
        for (x, a) in m.iter().zip(self.adj.iter()) {
            if *a != 0.0 {
                let t = x.tangent();
                for (c, gc) in g.iter_mut().enumerate() {
                    *gc += a * t[c];
                }
            }
        }
        Ok(g)
    }
}
