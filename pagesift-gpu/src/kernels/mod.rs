//! The `ptx_kernel!` invocations of this crate, one file per family; `lib/` holds the helper
//! libraries in the kernel language that they share (`#[path = "src/kernels/lib/..."] mod ..;`).

use crate::kernel::KernelVariant;

pub mod act;
pub mod gemm;
pub mod quant;

/// Every kernel variant compiled into this crate.
pub fn registry() -> Vec<&'static KernelVariant> {
    let families: &[&[KernelVariant]] = &[
        act::act::VARIANTS,
        act::act_inplace::VARIANTS,
        gemm::gemm_f32::VARIANTS,
        gemm::gemm_f32_q::VARIANTS,
        gemm::gemm_mma::VARIANTS,
        gemm::gemm_mma_q::VARIANTS,
        gemm::x_to_half::VARIANTS,
        gemm::gemm_wgmma::VARIANTS,
        gemm::gemm_wgmma_q::VARIANTS,
        gemm::gemm_tma::VARIANTS,
        gemm::gemm_tma_x3::VARIANTS,
        gemm::gemm_splitk_reduce::VARIANTS,
        gemm::gemv::VARIANTS,
        quant::qgemv::VARIANTS,
        quant::qgemv_tc::VARIANTS,
        quant::qgemv_tc_x::VARIANTS,
        quant::qgemv_tc_x8::VARIANTS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}
