//! The abstract syntax tree of a model file. Every node carries the [`Span`]
//! of the source text it came from, so later stages can point at it.

use serde::Serialize;

pub use tempest_core::span::Span;

/// A name with its location.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ident {
    /// The name itself.
    pub name: String,
    /// Where it was written.
    pub span: Span,
}

/// A parsed model file: its items in source order.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// Function definitions and blocks, in the order written.
    pub items: Vec<Item>,
}

/// One top-level item.
#[derive(Clone, Debug, Serialize)]
pub enum Item {
    /// A user-defined likelihood or kernel.
    Function(FunctionDef),
    /// One of the blocks.
    Block(Block),
}

/// Whether a user function defines a likelihood, a kernel or an ODE system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FunctionKind {
    /// `likelihood name(y : ..., f : ..., params...) { ... }`
    Likelihood,
    /// `kernel name(params...)(x, x2) { ... }`
    Kernel,
    /// `system name(t : real, x : vector[S], params...) { ... }`: dx/dt.
    System,
}

/// A user-defined likelihood or kernel.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionDef {
    /// Likelihood or kernel.
    pub kind: FunctionKind,
    /// Its name.
    pub name: Ident,
    /// Typed parameters. For a likelihood the first is the observation and
    /// the second the latent value.
    pub params: Vec<TypedParam>,
    /// For a kernel: the names of its two inputs.
    pub inputs: Option<(Ident, Ident)>,
    /// The body.
    pub body: Body,
    /// The whole definition.
    pub span: Span,
}

/// A typed parameter `name : type`.
#[derive(Clone, Debug, Serialize)]
pub struct TypedParam {
    /// The parameter name.
    pub name: Ident,
    /// Its declared type.
    pub ty: TypeExpr,
}

/// A function body: local definitions, then the value.
#[derive(Clone, Debug, Serialize)]
pub struct Body {
    /// `let name = expr` in order.
    pub lets: Vec<(Ident, Expr)>,
    /// The value of the function.
    pub value: Expr,
}

/// The base of a declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BaseType {
    /// `int`
    Int,
    /// `real`
    Real,
    /// `vector`
    Vector,
    /// `matrix`
    Matrix,
    /// `positive` (= `real<lower=0>`)
    Positive,
    /// `unit` (= `real<lower=0, upper=1>`)
    Unit,
}

/// Which side a bound constrains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BoundKind {
    /// `lower = ...`
    Lower,
    /// `upper = ...`
    Upper,
}

/// One bound of a constraint.
#[derive(Clone, Debug, Serialize)]
pub struct Bound {
    /// Lower or upper.
    pub kind: BoundKind,
    /// The bound's value.
    pub value: Expr,
    /// The bound as written.
    pub span: Span,
}

/// A declared type: `vector<lower=0>[d]`.
#[derive(Clone, Debug, Serialize)]
pub struct TypeExpr {
    /// The base type.
    pub base: BaseType,
    /// The bounds, possibly empty.
    pub bounds: Vec<Bound>,
    /// The dimensions, possibly empty.
    pub dims: Vec<Expr>,
    /// The whole type.
    pub span: Span,
}

/// A declaration in `data`, `hyper` or `param`.
#[derive(Clone, Debug, Serialize)]
pub struct Decl {
    /// The declared name.
    pub name: Ident,
    /// Its type.
    pub ty: TypeExpr,
    /// `fixed` (hypers only).
    pub fixed: bool,
    /// `= expr`: a data source, a constant, or a hyper's initial value.
    pub init: Option<Expr>,
    /// `~ dist(...)`: a parameter's prior.
    pub prior: Option<Call>,
    /// The whole declaration.
    pub span: Span,
}

/// A named call `name(args)`.
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    /// The callee.
    pub name: Ident,
    /// The arguments.
    pub args: Vec<Arg>,
    /// The whole call.
    pub span: Span,
}

/// One argument of a call, optionally named.
#[derive(Clone, Debug, Serialize)]
pub struct Arg {
    /// `name =` for a named argument.
    pub name: Option<Ident>,
    /// The value.
    pub value: Expr,
    /// The whole argument.
    pub span: Span,
}

/// A model statement.
#[derive(Clone, Debug, Serialize)]
pub enum Stmt {
    /// `let name = value`
    Let {
        /// The defined name.
        name: Ident,
        /// Its value.
        value: Expr,
        /// The statement.
        span: Span,
    },
    /// `name ~ gp(mean, kernel)[replicas]`
    Gp {
        /// The latent function's name.
        name: Ident,
        /// The mean (a scalar expression).
        mean: Expr,
        /// The kernel expression.
        kernel: Expr,
        /// The number of independent copies, for `[C]`.
        replicas: Option<Expr>,
        /// The statement.
        span: Span,
    },
    /// `lhs ~ dist(args) ^ temperature`
    Sample {
        /// The observed data or the parameter given a prior.
        lhs: Ident,
        /// The distribution.
        dist: Call,
        /// The power of the likelihood, when tempered.
        temperature: Option<Expr>,
        /// The statement.
        span: Span,
    },
}

/// A guide entry `target : family(args)`.
#[derive(Clone, Debug, Serialize)]
pub struct GuideEntry {
    /// The latent function or parameter.
    pub target: Ident,
    /// The family name and its arguments.
    pub family: Call,
    /// The entry.
    pub span: Span,
}

/// An estimate `name = E[expr]`.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateItem {
    /// The estimate's name.
    pub name: Ident,
    /// The integrand.
    pub expr: Expr,
    /// The entry.
    pub span: Span,
}

/// An engine with its settings.
#[derive(Clone, Debug, Serialize)]
pub struct EngineSpec {
    /// The engine's name.
    pub name: Ident,
    /// `key = value` settings.
    pub settings: Vec<Setting>,
    /// The whole spec.
    pub span: Span,
}

/// One engine setting.
#[derive(Clone, Debug, Serialize)]
pub struct Setting {
    /// The setting's name.
    pub key: Ident,
    /// Its value.
    pub value: SettingValue,
    /// The setting.
    pub span: Span,
}

/// The value of a setting.
#[derive(Clone, Debug, Serialize)]
pub enum SettingValue {
    /// A nested engine: `sampler = nuts { ... }`.
    Engine(EngineSpec),
    /// An expression: a number, a bool, a name or a call.
    Expr(Expr),
}

/// A block and its contents.
#[derive(Clone, Debug, Serialize)]
pub enum BlockKind {
    /// `data { ... }`
    Data(Vec<Decl>),
    /// `hyper { ... }`
    Hyper(Vec<Decl>),
    /// `param { ... }`
    Param(Vec<Decl>),
    /// `model { ... }`
    Model(Vec<Stmt>),
    /// `guide { ... }`
    Guide(Vec<GuideEntry>),
    /// `estimate { ... } using ...`
    Estimate {
        /// The estimates.
        items: Vec<EstimateItem>,
        /// The `using` clause.
        using: Option<Call>,
    },
    /// `infer engine { ... }`
    Infer(EngineSpec),
}

/// A block with the span of its keyword.
#[derive(Clone, Debug, Serialize)]
pub struct Block {
    /// What the block holds.
    pub kind: BlockKind,
    /// The block keyword.
    pub keyword: Span,
    /// The whole block.
    pub span: Span,
}

impl Block {
    /// The block's keyword.
    pub fn name(&self) -> &'static str {
        match self.kind {
            BlockKind::Data(_) => "data",
            BlockKind::Hyper(_) => "hyper",
            BlockKind::Param(_) => "param",
            BlockKind::Model(_) => "model",
            BlockKind::Guide(_) => "guide",
            BlockKind::Estimate { .. } => "estimate",
            BlockKind::Infer(_) => "infer",
        }
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `!x`
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `.*`
    EwMul,
    /// `./`
    EwDiv,
    /// `^`
    Pow,
}

impl BinOp {
    /// The truth of a comparison or logical operator on numbers (non-zero
    /// is true); `None` for the arithmetic operators. The one definition
    /// every evaluator uses.
    pub fn holds(self, a: f64, b: f64) -> Option<bool> {
        Some(match self {
            BinOp::Eq => a == b,
            BinOp::Ne => a != b,
            BinOp::Lt => a < b,
            BinOp::Le => a <= b,
            BinOp::Gt => a > b,
            BinOp::Ge => a >= b,
            BinOp::And => a != 0.0 && b != 0.0,
            BinOp::Or => a != 0.0 || b != 0.0,
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::EwMul
            | BinOp::EwDiv
            | BinOp::Pow => return None,
        })
    }

    /// Whether this is a comparison or a logical operator (`==`, `<`, `&&`, ...).
    pub fn is_comparison_or_logic(self) -> bool {
        self.holds(0.0, 0.0).is_some()
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::EwMul => ".*",
            BinOp::EwDiv => "./",
            BinOp::Pow => "^",
        }
    }
}

/// An expression with its span.
#[derive(Clone, Debug, Serialize)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// Where it was written.
    pub span: Span,
}

/// The kinds of expression.
#[derive(Clone, Debug, Serialize)]
pub enum ExprKind {
    /// An integer literal.
    Int(i64),
    /// A real literal.
    Real(f64),
    /// `true` / `false`.
    Bool(bool),
    /// A string literal (column names).
    Str(String),
    /// A name.
    Var(String),
    /// `[a, b, c]`
    Array(Vec<Expr>),
    /// An inclusive range `a .. b` (only as a call argument).
    Range(Box<Expr>, Box<Expr>),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A call `callee(args)`; the callee is a name.
    Call(Ident, Vec<Arg>),
    /// Indexing `base[i, j]`.
    Index(Box<Expr>, Vec<Expr>),
    /// `if cond then a else b`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
}
