//! The `ptx_kernel!` invocations of this crate, one file per family.

use crate::kernel::KernelVariant;

/// Every kernel variant compiled into this crate.
pub fn registry() -> Vec<&'static KernelVariant> {
    let families: &[&[KernelVariant]] = &[];
    families.iter().flat_map(|f| f.iter()).collect()
}
