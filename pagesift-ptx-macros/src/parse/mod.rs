//! syn tokens -> the kernel AST. Every node keeps its span; unsupported syntax is reported at
//! its span and parsing goes on, so one invocation reports all its errors.

use crate::ctxt::Sp;
use crate::types::Scalar;
use proc_macro2::Span;
use syn::{Ident, LitStr};

/// Every item of one `ptx_kernel!` invocation, with the helper libraries it names.
#[derive(Default)]
pub struct Program {
    pub fns: Vec<FnItem>,
    pub structs: Vec<StructItem>,
    pub consts: Vec<ConstItem>,
    /// `use path::Name;` items: the host types of library structs defined elsewhere.
    pub imports: Vec<Import>,
    /// The files of `#[path = ".."] mod name;` libraries read (the wrapper tracks them for
    /// rebuilds).
    pub files: Vec<std::path::PathBuf>,
}

/// A parameter struct: `struct Name { field: T, .. }`, passed to kernels by value.
pub struct StructItem {
    pub name: Ident,
    pub vis: syn::Visibility,
    pub attrs: Vec<syn::Attribute>,
    pub fields: Vec<(Ident, Scalar, Vec<syn::Attribute>, syn::Visibility)>,
    /// The helper library it belongs to (`None`: the invocation itself). Either way its name
    /// is unprefixed: it is one type of the invocation, emitted on the host under that name.
    pub module: Option<String>,
}

/// `use other::path::Name;`: the host type of the parameter struct `Name` of a helper
/// library is that existing type (the one another invocation of the same library emitted),
/// so this invocation emits no struct of its own and its wrappers take that type.
pub struct Import {
    pub name: Ident,
    pub item: syn::ItemUse,
}

/// `const NAME: T = value;`: usable by kernels and exported to the host.
pub struct ConstItem {
    pub name: Ident,
    pub vis: syn::Visibility,
    pub attrs: Vec<syn::Attribute>,
    pub ty: Scalar,
    pub value: Expr,
    /// The helper library it belongs to (`None`: the invocation itself).
    pub module: Option<String>,
}

/// A `fn`: a kernel when `pub`, a helper otherwise.
pub struct FnItem {
    pub name: Ident,
    pub is_kernel: bool,
    pub docs: Vec<syn::Attribute>,
    pub consts: Vec<ConstParam>,
    pub params: Vec<Param>,
    pub ret: Option<TypeAst>,
    pub body: Block,
    pub variants: Vec<VariantGroup>,
    /// The conditions of `#[variants(.., where COND)]`: a combination of the groups' values
    /// is a variant only where every condition holds (const expressions of the parameters).
    pub variant_filters: Vec<Expr>,
    pub launch: Option<LaunchAttr>,
    pub target: Option<TargetAttr>,
    /// `#[noinline]`: a helper of scalar parameters compiled once per instantiation into a
    /// PTX `.func` that each call reaches with `call`, instead of inlined at every call.
    pub noinline: bool,
    /// The helper library the fn belongs to (`None`: the invocation itself).
    pub module: Option<String>,
    /// Type parameters (`<T>`): also listed in `consts` with [`ConstTy::Type`]. The body of a
    /// generic fn is parsed again per instantiation, from `source` with each type substituted.
    pub types: Vec<Ident>,
    /// The bounds written on each type parameter (`T: ActElement`): the launch wrapper takes
    /// them as written instead of a trait of its own.
    pub type_bounds: Vec<Option<proc_macro2::TokenStream>>,
    pub source: Option<syn::ItemFn>,
}

/// `#[target(sm_80)]`, or an expression over the const parameters choosing one per variant.
pub enum TargetAttr {
    Name(String, Span),
    Expr(Expr),
}

/// `const NAME: Type` in a fn's generics.
pub struct ConstParam {
    pub name: Ident,
    pub ty: ConstTy,
}

/// The type of a const parameter.
#[derive(Clone)]
pub enum ConstTy {
    Int(Scalar),
    Bool,
    /// An enum as written (`Act`, `crate::Act`); its variants are matched by name.
    Enum(syn::Path),
    /// A type parameter (`<T>`), one of the scalar types its `#[variants]` list names.
    Type,
}

/// A fn parameter.
pub struct Param {
    pub name: Ident,
    pub ty: TypeAst,
}

/// A type as written.
#[derive(Clone)]
pub struct TypeAst {
    pub kind: TypeKind,
    pub span: Sp,
}

/// The kinds of written types.
#[derive(Clone)]
pub enum TypeKind {
    Scalar(Scalar),
    Slice {
        elem: Scalar,
        mutable: bool,
    },
    /// `[T; N]`, or `[[T; C]; N]` with `cols` the row length `C`.
    Array {
        elem: Scalar,
        len: Box<Expr>,
        cols: Option<Box<Expr>>,
    },
    /// `Shared<[T; N]>`, `Shared<[[T; C]; N]>` (`cols`: `C`) or `Shared<[T]>`.
    Shared {
        elem: Scalar,
        len: Option<Box<Expr>>,
        cols: Option<Box<Expr>>,
    },
    /// `Option<&[T]>` / `Option<&mut [T]>`.
    Option(Box<TypeAst>),
    /// `TensorMap<T, C, R, D>`: a tensor map of `T` read in boxes of `C × R × D` elements
    /// (a kernel parameter); `TensorMapMut<T, C, R, D>` (`write`) is also written through.
    TensorMap {
        elem: Scalar,
        boxes: Vec<Expr>,
        write: bool,
    },
    /// A parameter struct of the invocation, by name.
    Named(Ident),
    Unit,
    /// A type that was already reported as an error.
    Error,
}

/// One group of `#[variants(...)]`: a name with values, or names with tuples of values.
pub struct VariantGroup {
    pub names: Vec<Ident>,
    pub rows: Vec<Vec<ConstLit>>,
}

/// A value in `#[variants]`.
#[derive(Clone)]
pub enum ConstLit {
    Int(i128, Span),
    Bool(bool, Span),
    Name(Ident),
}

impl ConstLit {
    /// Where the value is written.
    pub fn span(&self) -> Span {
        match self {
            ConstLit::Int(_, s) | ConstLit::Bool(_, s) => *s,
            ConstLit::Name(i) => i.span(),
        }
    }
}

/// `#[launch(block = N)]` or `block = (X, Y[, Z])`, optionally `min_blocks = N` (blocks per SM
/// the register allocation must allow, `.minnctapersm`) and `max_regs = N` (`.maxnreg`); the
/// values may name const parameters.
pub struct LaunchAttr {
    pub block: Vec<Expr>,
    pub min_blocks: Option<Expr>,
    pub max_regs: Option<Expr>,
    pub span: Sp,
}

/// `{ stmts; tail }`.
#[derive(Clone)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
}

/// A statement.
#[derive(Clone)]
pub enum Stmt {
    Let {
        name: Ident,
        mutable: bool,
        ty: Option<TypeAst>,
        init: Option<Expr>,
        /// `Some(n)` for the hidden binding of an array pattern of `n` entries
        /// (`let [a, b] = ...`), whose value must be an array of `n`.
        pattern: Option<usize>,
        span: Sp,
    },
    Expr(Expr),
}

/// An expression with its span.
#[derive(Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Sp,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicAnd,
    LogicOr,
}

impl BinOp {
    /// Whether the operator compares (result `bool`).
    pub fn is_cmp(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// A `match` arm pattern.
#[derive(Clone, Debug)]
pub enum Pat {
    Wild,
    /// `Act::Relu` or `Relu`: the last segment names the variant.
    Name(Ident),
    Int(i128),
    Bool(bool),
    Or(Vec<Pat>),
}

/// An operand of `asm!`.
#[derive(Clone)]
pub enum AsmOperand {
    In(Expr),
    Out(Scalar, Span),
}

/// Expression kinds.
#[derive(Clone)]
pub enum ExprKind {
    Int(i128, Option<Scalar>),
    Float(f64, Option<Scalar>),
    Bool(bool),
    /// A single identifier: a variable or a const parameter.
    Var(Ident),
    /// A multi-segment path (`Act::Relu`).
    Path(Vec<Ident>),
    /// `f(args)` or `f::<A, B>(args)`; `func` is the path (`f`, `f32::from_bits`).
    Call {
        func: Vec<Ident>,
        generics: Vec<Expr>,
        args: Vec<Expr>,
    },
    Method {
        recv: Box<Expr>,
        method: Ident,
        /// `x.load_vec::<16>(i)`: the method's const arguments.
        generics: Vec<Expr>,
        args: Vec<Expr>,
    },
    /// `s.field` of a parameter struct.
    Field {
        base: Box<Expr>,
        field: Ident,
    },
    /// `if let Some(name) = opt { .. } else { .. }` on an optional slice.
    IfLet {
        name: Ident,
        scrut: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    Cast {
        expr: Box<Expr>,
        ty: TypeAst,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    Match {
        scrut: Box<Expr>,
        arms: Vec<(Pat, Expr)>,
    },
    Block(Block),
    /// `unsafe { ... }`: unchecked accesses and any `asm!` are allowed inside.
    Unsafe(Block),
    Array(Vec<Expr>),
    Repeat {
        value: Box<Expr>,
        len: Box<Expr>,
    },
    Assign {
        place: Box<Expr>,
        op: Option<BinOp>,
        value: Box<Expr>,
    },
    For {
        var: Ident,
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
        body: Block,
        unroll: bool,
    },
    While {
        cond: Box<Expr>,
        body: Block,
    },
    Break,
    Continue,
    Return(Option<Box<Expr>>),
    Asm {
        template: LitStr,
        operands: Vec<AsmOperand>,
    },
    /// `assert!(cond)` / `assert!(cond, "why")`: a condition every variant must meet, known
    /// when the kernel is expanded.
    Assert {
        cond: Box<Expr>,
        /// The condition as written, for the error.
        text: String,
        why: Option<LitStr>,
    },
    Unit,
    /// Syntax that was already reported as an error.
    Error,
}

mod body;
mod items;

pub use body::{parse_block, parse_expr, parse_type};
pub use items::instantiate;
pub use items::{parse_items, parse_program};

#[cfg(test)]
mod tests;
