//! Activation kernels: `y = act(x + bias) + residual`, element-wise (placeholder wrappers until
//! the kernel compiler lands).

macro_rules! stub_kernel {
    ($name:ident, $t:ty) => {
        /// Placeholder of the typed wrapper of the kernel.
        pub mod $name {
            use crate::ops::act::Act;
            use crate::{DeviceRead, DeviceWrite, KernelVariant, LaunchConfig, Result, Stream};

            /// The compiled variants.
            pub const VARIANTS: &[KernelVariant] = &[];

            /// Launches the variant for the const values.
            #[allow(clippy::too_many_arguments)]
            pub fn launch(
                _stream: &Stream,
                _cfg: LaunchConfig,
                act: Act,
                bias_: bool,
                res_: bool,
                _x: &impl DeviceRead<$t>,
                _bias: &impl DeviceRead<$t>,
                _res: &impl DeviceRead<$t>,
                _y: &mut impl DeviceWrite<$t>,
                _n: u64,
                _head: u32,
                _nvec: u64,
                _cols: u32,
                _slope: f32,
            ) -> Result<()> {
                Err(crate::__private::variant_not_compiled(
                    stringify!($name),
                    format!("ACT={act:?}, BIAS={bias_}, RES={res_}"),
                ))
            }
        }
    };
}

stub_kernel!(act_f32, f32);
stub_kernel!(act_f16, half::f16);
stub_kernel!(act_bf16, half::bf16);
