//! Every kernel variant of the runtime crate and of the example kernels loads on the emulated
//! device: its PTX uses only instructions the emulator implements (an unimplemented one would be
//! a load error naming it).

use pagesift_gpu::driver::emulator::{Emulator, EmulatorConfig};
use pagesift_gpu::driver::Backend;
use pagesift_gpu::KernelVariant;
use pagesift_tests::example_kernels;

/// Loads each variant and looks up its entry; returns one line per failure.
fn load_all(variants: &[&KernelVariant]) -> Vec<String> {
    let emu = Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        memory_capacity: 16 << 20,
        ..EmulatorConfig::default()
    });
    let mut failures = Vec::new();
    for v in variants {
        match emu.module_load(v.ptx) {
            Ok(m) => {
                if let Err(e) = emu.module_function(m, v.entry) {
                    failures.push(format!("{}: {e}", v.display_name()));
                }
                if let Err(e) = emu.module_unload(m) {
                    failures.push(format!("{}: unload: {e}", v.display_name()));
                }
            }
            Err(e) => failures.push(format!("{}: {}", v.display_name(), e.log)),
        }
    }
    failures
}

#[test]
fn every_example_kernel_variant_loads_on_the_emulator() {
    let families: [&[KernelVariant]; 5] = [
        example_kernels::bias_act::VARIANTS,
        example_kernels::block_sum::VARIANTS,
        example_kernels::tile_scale::VARIANTS,
        example_kernels::half_axpy::VARIANTS,
        example_kernels::clock_mix::VARIANTS,
    ];
    let variants: Vec<&KernelVariant> = families.iter().flat_map(|f| f.iter()).collect();
    assert!(variants.len() >= 5);
    let failures = load_all(&variants);
    assert!(
        failures.is_empty(),
        "example variants the emulator cannot load:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_registry_variant_loads_on_the_emulator() {
    let variants = pagesift_gpu::kernels::registry();
    let failures = load_all(&variants);
    println!(
        "{} registry variants loaded on the emulator, {} failed",
        variants.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "variants the emulator cannot load:\n{}",
        failures.join("\n")
    );
}
