//! The activation functions as values: [`Act`], shared by the CPU reference
//! ([`crate::cpu::act`]), the kernels ([`crate::kernels::act`]) and the operations
//! ([`crate::ops::act`]).

/// An element-wise activation function.
///
/// The formulas below define the semantics; [`crate::cpu::act`] evaluates them in f64 and every
/// GPU kernel is tested against it. `x` is the (f32) input after the optional bias add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    /// `x`.
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`.
    Relu6,
    /// `x` for `x >= 0`, `slope * x` otherwise; `slope` is a runtime parameter (see
    /// `ActArgs::slope`, 0.01 by default).
    LeakyRelu,
    /// Gelu with the exact normal distribution function:
    /// `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`.
    Gelu,
    /// Gelu with the tanh approximation:
    /// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
    GeluTanh,
    /// Silu (swish): `x * sigmoid(x) = x / (1 + exp(-x))`.
    Silu,
    /// The logistic function: `1 / (1 + exp(-x))`.
    Sigmoid,
    /// The hyperbolic tangent: `tanh(x)`.
    Tanh,
    /// `x * min(max(x + 3, 0), 6) / 6`.
    HardSwish,
    /// `min(max(x + 3, 0), 6) / 6`.
    HardSigmoid,
}

impl Act {
    /// Every activation, in declaration order.
    pub const ALL: [Act; 11] = [
        Act::Identity,
        Act::Relu,
        Act::Relu6,
        Act::LeakyRelu,
        Act::Gelu,
        Act::GeluTanh,
        Act::Silu,
        Act::Sigmoid,
        Act::Tanh,
        Act::HardSwish,
        Act::HardSigmoid,
    ];

    /// The lower-case name used in listings and on the command line, e.g. `gelu_tanh`.
    pub fn name(self) -> &'static str {
        match self {
            Act::Identity => "identity",
            Act::Relu => "relu",
            Act::Relu6 => "relu6",
            Act::LeakyRelu => "leaky_relu",
            Act::Gelu => "gelu",
            Act::GeluTanh => "gelu_tanh",
            Act::Silu => "silu",
            Act::Sigmoid => "sigmoid",
            Act::Tanh => "tanh",
            Act::HardSwish => "hardswish",
            Act::HardSigmoid => "hardsigmoid",
        }
    }
}

impl std::fmt::Display for Act {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Act {
    type Err = crate::Error;

    /// Parses a name as [`Act::name`] prints it.
    fn from_str(s: &str) -> crate::Result<Act> {
        Act::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            crate::Error::from(crate::error::InvalidArgument {
                op: "Act::from_str",
                message: format!(
                    "unknown activation `{s}`; expected one of {}",
                    Act::ALL.map(Act::name).join(", ")
                ),
            })
        })
    }
}

/// The accuracy of the activations' 16-bit forms (the kernels' activation of a value stored as
/// f16 or bf16, `act_half` of the kernel library): within this relative error of the f32
/// functions (2^-15).
pub const HALF_FORM_REL_ERROR: f64 = 1.0 / 32768.0;

/// The accuracy of the activation kernels in f32: the largest difference from the reference
/// ([`crate::cpu::act::act_f32`], the f64 definition rounded once), in units in the last place
/// of the reference activation value. 0 means bit-exact. With a residual the f32 sum adds up to
/// 1 ulp of the result; f16 / bf16 outputs add the rounding to the storage type (1 ulp of it).
/// Results below 2^-124 in magnitude (a few times the smallest normal f32) are only accurate to
/// an absolute 2^-124.
pub fn max_error_ulps(act: Act) -> f32 {
    match act {
        Act::Identity | Act::Relu | Act::Relu6 | Act::LeakyRelu => 0.0,
        Act::Tanh => 2.0,
        Act::HardSigmoid => 2.0,
        Act::HardSwish | Act::Sigmoid => 3.0,
        Act::Silu | Act::GeluTanh => 4.0,
        Act::Gelu => 6.0,
    }
}

/// The negative slope of [`Act::LeakyRelu`] when none is given.
pub const DEFAULT_LEAKY_SLOPE: f32 = 0.01;

/// The storage types activations run on: f32, f16 and bf16 (computed in f32, rounded once on
/// store). Sealed.
pub trait ActElement: crate::DeviceRepr + sealed::Sealed {
    /// Widens to f32 (exact).
    fn to_f32(self) -> f32;
    /// Rounds an f32 to this type (round to nearest even).
    fn from_f32(v: f32) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl ActElement for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> f32 {
        v
    }
}

impl ActElement for half::f16 {
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn from_f32(v: f32) -> half::f16 {
        half::f16::from_f32(v)
    }
}

impl ActElement for half::bf16 {
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
    fn from_f32(v: f32) -> half::bf16 {
        half::bf16::from_f32(v)
    }
}
