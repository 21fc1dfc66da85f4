//! The `ptx_kernel!` invocations of this crate, one file per family.

use crate::kernel::KernelVariant;

pub mod act;

/// Every kernel variant compiled into this crate.
pub fn registry() -> Vec<&'static KernelVariant> {
    let families: &[&[KernelVariant]] = &[
        act::act_f32::VARIANTS,
        act::act_f16::VARIANTS,
        act::act_bf16::VARIANTS,
        act::act_inplace_f32::VARIANTS,
        act::act_inplace_f16::VARIANTS,
        act::act_inplace_bf16::VARIANTS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}
