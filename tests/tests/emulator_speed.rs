//! How fast the emulated device interprets PTX: thread-instructions per second, printed.
//! Run it in release mode for a meaningful number:
//! `cargo test --release -p pagesift-tests --test emulator_speed -- --nocapture`.

use pagesift_gpu::driver::KernelArg;
use pagesift_gpu::emulator::{total_executed_instructions, EmulatorConfig};
use pagesift_tests::hand_ptx::{spin_instructions_per_thread, spin_reference, SPIN_PTX};
use pagesift_tests::util::{emu_download, Emu, EmuKernel, POISON_BITS};
use std::time::Instant;

#[test]
fn emulator_speed() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let emu = Emu::new(EmulatorConfig {
        threads,
        memory_capacity: 16 << 20,
        ..EmulatorConfig::default()
    });
    let (blocks, block, iters) = (
        64u32,
        256u32,
        if cfg!(debug_assertions) { 100u32 } else { 1000 },
    );
    let n = (blocks * block) as usize;
    let out = emu.mem_alloc(n * 4).expect("alloc");
    let poison: Vec<u8> = (0..n).flat_map(|_| POISON_BITS.to_le_bytes()).collect();
    emu.memcpy_htod(out, &poison).expect("poison");
    let spin = EmuKernel::load(&emu, SPIN_PTX, "spin").expect("function");
    let args = [KernelArg::ptr(out), KernelArg::from(iters)];
    let before = total_executed_instructions();
    let start = Instant::now();
    spin.launch([blocks, 1, 1], [block, 1, 1], 0, &args)
        .expect("launch");
    let secs = start.elapsed().as_secs_f64();
    let executed = total_executed_instructions() - before;
    assert_eq!(executed, n as u64 * spin_instructions_per_thread(iters));
    let rate = executed as f64 / secs;
    pagesift_tests::report(&format!(
        "emulator speed: {executed} thread-instructions in {:.3} s on {threads} host threads: {:.1} M/s ({:.1} M/s per thread){}",
        secs,
        rate / 1e6,
        rate / 1e6 / threads as f64,
        if cfg!(debug_assertions) { " [debug build]" } else { "" }
    ));
    spin.unload().expect("unload");
    let got: Vec<f32> = emu_download(&emu, out, n);
    for (i, v) in got.iter().enumerate() {
        assert_eq!(
            v.to_bits(),
            spin_reference(i as u32, iters).to_bits(),
            "thread {i}"
        );
    }
}
