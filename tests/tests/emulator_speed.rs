//! How fast the emulated device interprets PTX: thread-instructions per second, printed.
//! Run it in release mode for a meaningful number:
//! `cargo test --release -p pagesift-tests --test emulator_speed -- --nocapture`.

use pagesift_gpu::driver::emulator::{Emulator, EmulatorConfig};
use pagesift_gpu::driver::{Backend, KernelArg, LaunchRequest, RawHandle};
use std::time::Instant;

const LOOP: &str = r#"
.version 8.0
.target sm_80
.address_size 64

// out[i] = the result of `iters` dependent fma steps starting from i.
.visible .entry spin(.param .u64 out, .param .u32 iters)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iters];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    cvt.rn.f32.u32 %f1, %r5;
    mov.u32 %r6, 0;
$L__loop:
    fma.rn.f32 %f1, %f1, 0f3F7FF000, 0f3F800000;
    add.s32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, %r1;
    @%p1 bra $L__loop;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f1;
    ret;
}
"#;

#[test]
fn emulator_speed() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let emu = Emulator::new(EmulatorConfig {
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
    emu.memset_d32(out, f32::NAN.to_bits(), n, RawHandle::NULL)
        .expect("poison");
    let m = emu
        .module_load(LOOP)
        .unwrap_or_else(|e| panic!("{}", e.log));
    let f = emu.module_function(m, "spin").expect("function");
    let args = [KernelArg::ptr(out), KernelArg::from(iters)];
    let req = LaunchRequest {
        function: f,
        name: "spin",
        grid: [blocks, 1, 1],
        block: [block, 1, 1],
        shared_mem_bytes: 0,
        stream: RawHandle::NULL,
        args: &args,
    };
    let before = emu.executed_instructions();
    let start = Instant::now();
    emu.launch(&req).expect("launch");
    let secs = start.elapsed().as_secs_f64();
    let executed = emu.executed_instructions() - before;
    // 8 instructions before the loop, 4 per iteration, 4 after it.
    assert_eq!(executed, n as u64 * (8 + 4 * iters as u64 + 4));
    let rate = executed as f64 / secs;
    println!(
        "emulator speed: {executed} thread-instructions in {:.3} s on {threads} host threads: {:.1} M/s ({:.1} M/s per thread){}",
        secs,
        rate / 1e6,
        rate / 1e6 / threads as f64,
        if cfg!(debug_assertions) { " [debug build]" } else { "" }
    );
    let mut bytes = vec![0u8; n * 4];
    emu.memcpy_dtoh(&mut bytes, out).expect("dtoh");
    for (i, c) in bytes.chunks(4).enumerate() {
        let mut x = i as f32;
        for _ in 0..iters {
            x = x.mul_add(f32::from_bits(0x3F7F_F000), 1.0);
        }
        assert_eq!(
            f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            x,
            "thread {i}"
        );
    }
}
