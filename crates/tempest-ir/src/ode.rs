//! `ode(system, x0, t0, ts, p...)` evaluated: the `system` definition's
//! body as the right-hand side of the Dormand–Prince solver
//! ([`tempest_math::ode::solve`]), generically over the scalar type (dual
//! numbers carry forward sensitivities through every step), and the
//! vector–Jacobian product the samplers' reverse pass needs: the forward
//! sensitivities' contraction, or the discrete adjoint sweep
//! ([`tempest_math::ode::adjoint()`]) over a recorded `f64` solve with the
//! compiled system's reverse pass.

use super::expr::TExpr;
use super::graph::Graph;
use super::value::{Value, zero_like};
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::{DMatrix, DVector};
use std::sync::OnceLock;
use tempest_core::error::{Error, ErrorKind, num};
use tempest_core::interrupt::StopFlag;
use tempest_math::ode::{
    ADJOINT_FROM, OdeFailure, OdeSettings, Sensitivity, Trajectory, adjoint, solve, solve_with,
};
use tempest_model::custom::Scalar;
use tempest_syntax::ast::Span;

/// The solution of the system at the output times, a `matrix[T, S]`.
/// `vals` are the evaluated arguments (x0, t0, ts, then the system's
/// parameters) and `args` their expressions (for error positions); with
/// the bound model, output times out of order also name their data row.
/// The solve ends early with an `E-interrupted` error when `stop` is set.
#[allow(clippy::too_many_arguments)]
pub fn solve_call<T: Scalar>(
    bound: Option<&super::bound::Bound>,
    graph: &Graph,
    system: usize,
    args: &[TExpr],
    vals: &[Value<T>],
    settings: &OdeSettings,
    span: Span,
    stop: &StopFlag,
) -> Result<Value<T>, Error> {
    solve_call_with(bound, graph, system, args, vals, settings, span, stop, None)
}

/// [`solve_call`], and with `record` its accepted steps kept for the
/// adjoint sweep; the caller passes one only for a compiled system whose
/// program binds these values (the general evaluator keeps none: an
/// internal error).
#[allow(clippy::too_many_arguments)]
fn solve_call_with<T: Scalar>(
    bound: Option<&super::bound::Bound>,
    graph: &Graph,
    system: usize,
    args: &[TExpr],
    vals: &[Value<T>],
    settings: &OdeSettings,
    span: Span,
    stop: &StopFlag,
    record: Option<&mut Trajectory>,
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
                    super::bound::element_location(&b.data[*d], i, &decl.name, &decl.source);
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
        let out = solve_with(&mut rhs, x0.as_slice(), t0, &ts, settings, stop, record);
        return finish(out, ts.len(), n, settings, span);
    }
    if record.is_some() {
        return Err(Error::internal(
            "an ODE adjoint asked of a system that is not compiled",
        ));
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

/// What an `ode` call's forward pass keeps for its reverse pass: the
/// forward sensitivities ∂x/∂a, or the record of the solve for the adjoint
/// sweep ([`solve_with_sensitivities`] chooses).
#[derive(Debug)]
pub struct Sensitivities(Kept);

#[derive(Debug)]
enum Kept {
    /// ∂x/∂a \[T·S\] (by columns, as the solution) for each varying
    /// element a of the arguments.
    Forward {
        /// (argument, element) of each varying number.
        coords: Vec<(usize, usize)>,
        /// ∂x/∂a for each coordinate in turn, T·S entries each.
        d: Vec<f64>,
        /// T·S.
        len: usize,
    },
    /// The accepted steps of the `f64` solve of `system`, its compiled
    /// body's parameter list at the call's values
    /// ([`super::program::SystemProgram::bind`]), and which arguments vary.
    Adjoint {
        system: usize,
        traj: Trajectory,
        flat: Vec<f64>,
        varying: Vec<bool>,
    },
}

impl Sensitivities {
    /// Σᵢⱼ adjᵢⱼ ∂xᵢⱼ/∂a for each argument's varying elements (`None` for
    /// the arguments that do not vary), shaped as the arguments `vals`;
    /// `adj` is \[T, S\]. The adjoint sweep reads the run's stop flag.
    pub fn vjp(
        &self,
        bound: &super::bound::Bound,
        vals: &[Value<f64>],
        adj: &DMatrix<f64>,
    ) -> Result<Vec<Option<Value<f64>>>, Error> {
        match &self.0 {
            Kept::Forward { coords, d, len } => forward_vjp(coords, d, *len, vals, adj),
            Kept::Adjoint {
                system,
                traj,
                flat,
                varying,
            } => adjoint_vjp(bound, *system, traj, flat, varying, vals, adj),
        }
    }
}

/// The forward sensitivities' contraction with `adj`.
fn forward_vjp(
    coords: &[(usize, usize)],
    d: &[f64],
    len: usize,
    vals: &[Value<f64>],
    adj: &DMatrix<f64>,
) -> Result<Vec<Option<Value<f64>>>, Error> {
    if adj.len() != len {
        return Err(Error::internal(
            "an ODE solution's adjoint of another shape than the solution",
        ));
    }
    let mut out: Vec<Option<Value<f64>>> = (0..vals.len())
        .map(|k| coords.iter().any(|c| c.0 == k).then(|| zero_like(&vals[k])))
        .collect();
    for (c, &(k, e)) in coords.iter().enumerate() {
        let d = &d[c * len..(c + 1) * len];
        let gv: f64 = d
            .iter()
            .zip(adj.iter())
            .filter(|(_, a)| **a != 0.0)
            .map(|(d, a)| a * d)
            .sum();
        match out[k].as_mut() {
            Some(Value::Real(r)) => *r += gv,
            Some(Value::Vector(v)) => v[e] += gv,
            _ => {}
        }
    }
    Ok(out)
}

/// The adjoint sweep over a recorded solve: x̄₀ and the parameters'
/// adjoints from the compiled system's vector–Jacobian product.
fn adjoint_vjp(
    bound: &super::bound::Bound,
    system: usize,
    traj: &Trajectory,
    flat: &[f64],
    varying: &[bool],
    vals: &[Value<f64>],
    adj: &DMatrix<f64>,
) -> Result<Vec<Option<Value<f64>>>, Error> {
    let Some(p) = bound.graph.functions[system].system_program.as_ref() else {
        return Err(Error::internal("an ODE adjoint of a system not compiled"));
    };
    let (n, t) = (traj.state_len(), traj.outputs());
    let mut flat = flat.to_vec();
    if adj.nrows() != t || adj.ncols() != n {
        return Err(Error::internal(
            "an ODE solution's adjoint of another shape than the solution",
        ));
    }
    // The seed row by row, as the solver reports the states: the
    // transpose's storage (by columns).
    let seed = adj.transpose();
    let (mut vals_b, mut adj_b) = (vec![0.0; p.slots()], vec![0.0; p.slots()]);
    let mut g = vec![0.0; flat.len()];
    let mut p_bar = vec![0.0; flat.len() - 1 - n];
    let mut vjp = |t: f64, x: &[f64], w: &[f64], xb: &mut [f64], pb: &mut [f64]| {
        g.iter_mut().for_each(|v| *v = 0.0);
        p.vjp(t, x, &mut flat, w, &mut vals_b, &mut adj_b, &mut g);
        xb.iter_mut().zip(&g[1..1 + n]).for_each(|(b, v)| *b += v);
        pb.iter_mut().zip(&g[1 + n..]).for_each(|(b, v)| *b += v);
        Ok(())
    };
    let mut x0_bar = vec![0.0; n];
    adjoint(
        &mut vjp,
        traj,
        seed.as_slice(),
        &mut x0_bar,
        &mut p_bar,
        &bound.stop,
    )
    .map_err(|e| match e {
        OdeFailure::Interrupted { .. } => {
            tempest_core::interrupt::interrupted("the ODE adjoint sweep")
        }
        e => Error::new(ErrorKind::Numerical, format!("the ODE adjoint sweep: {e}")),
    })?;
    let mut out: Vec<Option<Value<f64>>> = vec![None; vals.len()];
    if varying.first().copied().unwrap_or(false) {
        out[0] = Some(Value::Vector(DVector::from_vec(x0_bar)));
    }
    let mut off = 0;
    for (j, &len) in p.param_lens().iter().enumerate() {
        let k = 3 + j;
        if varying.get(k).copied().unwrap_or(false) {
            let mut z = zero_like(&vals[k]);
            match &mut z {
                Value::Real(r) => *r = p_bar[off],
                Value::Vector(v) => v
                    .iter_mut()
                    .zip(&p_bar[off..off + len])
                    .for_each(|(a, b)| *a = *b),
                _ => {}
            }
            out[k] = Some(z);
        }
        off += len;
    }
    Ok(out)
}

/// The solution \[T, S\] of an `ode` call and what its reverse pass needs
/// for every element of the arguments flagged in `varying` (x0 and the
/// system's parameters; the times are data): the record of one `f64`
/// solve for the adjoint sweep where the settings choose it
/// ([`Sensitivity`]), or else the forward sensitivities, by solves in
/// dual numbers of up to eight tangents (a gradient costs about ⌈P/8⌉
/// solves for P varying numbers). The solver's step control reads values only, so
/// the solution is the same, bit for bit, as [`solve_call`]'s in `f64`;
/// with nothing varying it is that solve.
#[allow(clippy::too_many_arguments)]
pub fn solve_with_sensitivities(
    bound: &super::bound::Bound,
    system: usize,
    args: &[TExpr],
    vals: &[Value<f64>],
    varying: &[bool],
    settings: &OdeSettings,
    span: Span,
    record_fits: &OnceLock<bool>,
) -> Result<(DMatrix<f64>, Sensitivities), Error> {
    let mut coords = Vec::new();
    for (k, v) in vals.iter().enumerate() {
        if k == 1 || k == 2 || !varying.get(k).copied().unwrap_or(false) {
            continue;
        }
        coords.extend((0..v.flatten().len()).map(|e| (k, e)));
    }
    if let Some(kept) = adjoint_solve(
        bound,
        system,
        args,
        vals,
        varying,
        settings,
        span,
        coords.len(),
        record_fits,
    )? {
        return Ok(kept);
    }
    // T·S entries per varying number, checked before anything is solved.
    let count = |v: Option<&Value<f64>>| match v {
        Some(Value::Vector(x)) => x.len(),
        Some(Value::IntArray(x)) => x.len(),
        _ => 1,
    };
    tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(
        "the ODE solution's sensitivities",
    )
    .times("states", count(vals.first()))
    .times("output times", count(vals.get(2)))
    .times("varying numbers", coords.len())])
    .map_err(|e| e.with_span(span))?;
    let call = Call {
        bound,
        system,
        args,
        vals,
        settings,
        span,
    };
    let mut d = Vec::new();
    let sol = match coords.len() {
        0 => match solve_call(
            Some(bound),
            &bound.graph,
            system,
            args,
            vals,
            settings,
            span,
            &bound.stop,
        )? {
            Value::Matrix(m) => m,
            _ => return Err(Error::internal("an ODE solution that is not a matrix")),
        },
        1 => call.chunk::<1>(&coords, &mut d)?,
        2..=4 => call.chunk::<4>(&coords, &mut d)?,
        _ => {
            let mut sol = None;
            for ch in coords.chunks(8) {
                sol = Some(call.chunk::<8>(ch, &mut d)?);
            }
            sol.ok_or_else(|| Error::internal("an ODE solve without chunks"))?
        }
    };
    let len = sol.len();
    Ok((sol, Sensitivities(Kept::Forward { coords, d, len })))
}

/// The solve in `f64` with its steps recorded for the adjoint sweep, when
/// the settings ask for it ([`Sensitivity::Auto`]: from [`ADJOINT_FROM`]
/// varying numbers), the system is compiled for these values and the
/// record at the step limit (7S + 3 numbers a step) fits in memory; `None`
/// for forward sensitivities. Asked for explicitly, a record that does
/// not fit is the memory error. Whether it fits is asked once per call
/// site (`record_fits`): the bound depends only on S and the step limit,
/// and a large request reads the machine's free memory, which a gradient
/// should not do each time.
#[allow(clippy::too_many_arguments)]
fn adjoint_solve(
    bound: &super::bound::Bound,
    system: usize,
    args: &[TExpr],
    vals: &[Value<f64>],
    varying: &[bool],
    settings: &OdeSettings,
    span: Span,
    count: usize,
    record_fits: &OnceLock<bool>,
) -> Result<Option<(DMatrix<f64>, Sensitivities)>, Error> {
    let wanted = match settings.sensitivity {
        Sensitivity::Forward => false,
        Sensitivity::Adjoint => count > 0,
        Sensitivity::Auto => count >= ADJOINT_FROM,
    };
    let program = bound.graph.functions[system].system_program.as_ref();
    let state = vals.first().and_then(|v| v.vector()).map(|x| x.len());
    let (true, Some(p), Some(n)) = (wanted, program, state) else {
        return Ok(None);
    };
    let Some(flat) = p.bind(n, &vals[3..]) else {
        return Ok(None);
    };
    let record =
        tempest_core::limits::Request::new("the ODE adjoint's record of the solver's steps")
            .times("step limit max_steps", settings.max_steps)
            .times("7 × state elements + 3", 7 * n + 3);
    let check = || tempest_core::limits::check_memory(std::slice::from_ref(&record));
    if !*record_fits.get_or_init(|| check().is_ok()) {
        match check() {
            // Asked for by name: the error (memory may have been freed
            // since, then the solve goes ahead).
            Err(e) if settings.sensitivity == Sensitivity::Adjoint => {
                return Err(e.with_span(span).with_label("this solve"));
            }
            Ok(()) if settings.sensitivity == Sensitivity::Adjoint => {}
            _ => return Ok(None),
        }
    }
    let mut traj = Trajectory::default();
    let sol = solve_call_with(
        Some(bound),
        &bound.graph,
        system,
        args,
        vals,
        settings,
        span,
        &bound.stop,
        Some(&mut traj),
    )?;
    let Value::Matrix(m) = sol else {
        return Err(Error::internal("an ODE solution that is not a matrix"));
    };
    let kept = Kept::Adjoint {
        system,
        traj,
        flat,
        varying: varying.to_vec(),
    };
    Ok(Some((m, Sensitivities(kept))))
}

/// One `ode` call's pieces, for [`solve_with_sensitivities`].
struct Call<'a> {
    bound: &'a super::bound::Bound,
    system: usize,
    args: &'a [TExpr],
    vals: &'a [Value<f64>],
    settings: &'a OdeSettings,
    span: Span,
}

impl Call<'_> {
    /// The solution's values, with ∂x/∂a for the (argument, element) pairs
    /// of `coords` (at most N) appended to `d`, T·S entries each, by one
    /// solve in N-tangent duals.
    fn chunk<const N: usize>(
        &self,
        coords: &[(usize, usize)],
        d: &mut Vec<f64>,
    ) -> Result<DMatrix<f64>, Error>
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
            Some(self.bound),
            &self.bound.graph,
            self.system,
            self.args,
            &lifted,
            self.settings,
            self.span,
            &self.bound.stop,
        )?;
        let Value::Matrix(m) = sol else {
            return Err(Error::internal("an ODE solution that is not a matrix"));
        };
        let start = d.len();
        d.resize(start + m.len() * coords.len(), 0.0);
        for (i, x) in m.iter().enumerate() {
            let t = x.tangent();
            for c in 0..coords.len() {
                d[start + c * m.len() + i] = t[c];
            }
        }
        Ok(m.map(|x| x.value()))
    }
}
