//! What `ptx_kernel!` generates per kernel variant, and how a launch is described.
//!
//! Each kernel written with [`crate::ptx_kernel!`] becomes a module holding
//! `pub const VARIANTS: &[KernelVariant]` (one entry per variant, with its PTX text) and a typed
//! `launch` function. [`crate::kernels::registry`] lists every variant of this crate.

/// One compiled variant of a kernel: its PTX text and what the runtime needs to launch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelVariant {
    /// The kernel's name as written, e.g. `bias_act`.
    pub kernel: &'static str,
    /// The PTX entry name of this variant (unique among the variants of the kernel).
    pub entry: &'static str,
    /// The const parameters that select this variant, as (name, value), e.g. `("ACT", "Relu")`.
    pub consts: &'static [(&'static str, &'static str)],
    /// The PTX `.target`, e.g. `sm_70`, `sm_80`, `sm_90a`.
    pub target: &'static str,
    /// The PTX ISA `.version` the variant declares (major, minor).
    pub ptx_version: (u32, u32),
    /// The block shape the kernel requires (`.reqntid`); launches must use it.
    pub block: [u32; 3],
    /// Static shared memory in bytes.
    pub static_shared_bytes: u32,
    /// Whether the kernel uses dynamic shared memory (sized at launch).
    pub dynamic_shared: bool,
    /// The kernel parameters in order: (name, type as written, e.g. `&[f32]`, `&mut [f16]`, `u32`).
    pub params: &'static [(&'static str, &'static str)],
    /// The number of PTX parameters: for a generated kernel the hidden fault record first,
    /// then two (address, length) per slice and one per scalar; for hand-written PTX usually
    /// `params.len()`. A launch passes exactly this many arguments.
    pub ptx_params: u32,
    /// The names of the kernel's shared arrays (static ones in order, then the dynamic one),
    /// which a fault record names by position.
    pub shared: &'static [&'static str],
    /// The PTX text of the module (one entry).
    pub ptx: &'static str,
}

impl KernelVariant {
    /// `kernel[NAME=value,...]`, the name used in listings and errors.
    pub fn display_name(&self) -> String {
        if self.consts.is_empty() {
            return self.kernel.to_string();
        }
        let consts: Vec<String> = self
            .consts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}[{}]", self.kernel, consts.join(","))
    }

    /// The value of the variant's parameter `name` as written in [`KernelVariant::consts`]
    /// (`"128"`, `"f16"`), `None` where it has no such parameter.
    pub fn const_str(&self, name: &str) -> Option<&'static str> {
        self.consts
            .iter()
            .find(|&&(k, _)| k == name)
            .map(|&(_, v)| v)
    }

    /// The value of the variant's integer parameter `name`, `None` where it has none.
    pub fn const_u32(&self, name: &str) -> Option<u32> {
        self.const_str(name)?.parse().ok()
    }

    /// The compute capability the target needs, e.g. (9, 0) for `sm_90a`.
    pub fn min_compute_capability(&self) -> (u32, u32) {
        let digits: String = self
            .target
            .trim_start_matches("sm_")
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let n: u32 = digits.parse().unwrap_or(0);
        (n / 10, n % 10)
    }

    /// The lowest CUDA driver version (as `cuDriverGetVersion` reports it) that can JIT this
    /// variant's PTX ISA version.
    pub fn min_driver_version(&self) -> i32 {
        min_driver_for_ptx(self.ptx_version)
    }
}

/// The lowest CUDA driver version (e.g. 12000 for CUDA 12.0) whose JIT accepts a PTX ISA version.
pub fn min_driver_for_ptx((major, minor): (u32, u32)) -> i32 {
    // PTX ISA version -> CUDA release that introduced it (PTX ISA document, release notes).
    match (major, minor) {
        (6, 0) => 9000,
        (6, 1) => 9010,
        (6, 2) => 9020,
        (6, 3) => 10000,
        (6, 4) => 10010,
        (6, 5) => 10020,
        (7, 0) => 11000,
        (7, m) => 11000 + 10 * m as i32,
        (8, 0) => 12000,
        (8, m) if m <= 5 => 12000 + 10 * m as i32,
        // CUDA 12.6 kept PTX ISA 8.5; 8.6 came with 12.7, 8.7 with 12.8, 8.8 with 12.9.
        (8, m) => 12010 + 10 * m as i32,
        (9, m) => 13000 + 10 * m as i32,
        _ => 13000,
    }
}

/// How to launch a kernel: grid, dynamic shared memory. The block shape comes from the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Grid dimensions in blocks.
    pub grid: [u32; 3],
    /// Dynamic shared memory in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A one-dimensional grid of `blocks` blocks.
    pub fn grid_1d(blocks: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [blocks, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// A grid of the given dimensions.
    pub fn grid(grid: [u32; 3]) -> LaunchConfig {
        LaunchConfig {
            grid,
            shared_mem_bytes: 0,
        }
    }

    /// The same configuration with `bytes` of dynamic shared memory.
    pub fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_versions_map_to_the_cuda_release_that_introduced_them() {
        assert_eq!(min_driver_for_ptx((6, 0)), 9000);
        assert_eq!(min_driver_for_ptx((7, 0)), 11000);
        assert_eq!(min_driver_for_ptx((7, 8)), 11080);
        assert_eq!(min_driver_for_ptx((8, 0)), 12000);
        assert_eq!(min_driver_for_ptx((8, 5)), 12050);
        assert_eq!(min_driver_for_ptx((8, 7)), 12080);
        assert_eq!(min_driver_for_ptx((9, 0)), 13000);
    }

    #[test]
    fn variants_name_themselves_and_their_target() {
        let v = KernelVariant {
            kernel: "bias_act",
            entry: "bias_act__ACT_Relu",
            consts: &[("ACT", "Relu"), ("BM", "64")],
            target: "sm_90a",
            ptx_version: (8, 0),
            block: [256, 1, 1],
            static_shared_bytes: 0,
            dynamic_shared: false,
            params: &[],
            ptx_params: 0,
            shared: &[],
            ptx: "",
        };
        assert_eq!(v.display_name(), "bias_act[ACT=Relu,BM=64]");
        assert_eq!(v.min_compute_capability(), (9, 0));
        assert_eq!(v.min_driver_version(), 12000);
        let plain = KernelVariant {
            consts: &[],
            target: "sm_70",
            ..v
        };
        assert_eq!(plain.display_name(), "bias_act");
        assert_eq!(plain.min_compute_capability(), (7, 0));
    }
}
