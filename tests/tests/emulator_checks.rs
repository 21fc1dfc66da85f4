//! The emulated device's run-time checks, each triggered by a deliberately broken hand-written
//! kernel (the error must name the check, the kernel, a block, a thread and the PTX line), and
//! correct kernels that must give the right answers: elementwise, a block reduction through
//! shared memory and barriers, a warp shuffle reduction, votes, and atomics.

use pagesift_gpu::driver::KernelArg;
use pagesift_gpu::{Error, Result};
use pagesift_tests::hand_ptx::{axpb_load_at, axpb_ptx_reading_x_at, AXPB_LOAD, AXPB_PTX};
use pagesift_tests::util::{
    emu_download, emu_launch as launch, emu_upload, emulator, poisoned_f32, random_f32, Emu,
    POISON_BITS,
};
use rand::{Rng, SeedableRng};

fn emu() -> Emu {
    emulator(64 << 20)
}

const HEADER: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\n";

/// The range of the random data.
const DATA: std::ops::Range<f32> = -4.0..4.0;

/// The 1-based line of the first line of `ptx` containing `needle`.
fn line_of(ptx: &str, needle: &str) -> usize {
    ptx.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in the PTX"))
}

/// Asserts that `r` is an emulator error naming the check, the kernel, a block, a thread and
/// the PTX line of `needle`.
fn assert_check(r: Result<()>, check: &str, kernel: &str, ptx: &str, needle: &str) -> String {
    let err = r.expect_err("the broken kernel must fail");
    let Error::Emulator(e) = &err else {
        panic!("not an emulator error: {err}")
    };
    let (k, message) = (&e.kernel, &e.message);
    assert_eq!(k, kernel);
    assert!(
        message.contains(check),
        "check `{check}` not named: {message}"
    );
    assert!(
        message.contains(&format!("kernel `{kernel}`")),
        "kernel not named: {message}"
    );
    assert!(message.contains("block ("), "block not named: {message}");
    assert!(message.contains("thread ("), "thread not named: {message}");
    let line = line_of(ptx, needle);
    assert!(
        message.contains(&format!("PTX line {line}:")),
        "line {line} not named: {message}"
    );
    assert!(
        message.contains(needle),
        "instruction text not quoted: {message}"
    );
    // Shown with `--nocapture`: the error a user of the emulated device would read.
    eprintln!("{check}: {err}");
    message.clone()
}

/// `axpb` arguments over `n` elements: `y = fma(x, 2, 1)`.
fn axpb_args(x: u64, y: u64, n: usize) -> [KernelArg; 5] {
    [
        KernelArg::ptr(x),
        KernelArg::ptr(y),
        KernelArg::from(2.0f32),
        KernelArg::from(1.0f32),
        KernelArg::from(n as u32),
    ]
}

#[test]
fn elementwise_gives_right_answers() {
    let e = emu();
    let n = 1237;
    let x = random_f32(n, 1, DATA);
    let px = emu_upload(&e, &x);
    let py = emu_upload(&e, &poisoned_f32(n));
    let args = axpb_args(px, py, n);
    let grid = [n.div_ceil(128) as u32, 1, 1];
    launch(&e, AXPB_PTX, "axpb", grid, [128, 1, 1], 0, &args).expect("axpb");
    let y: Vec<f32> = emu_download(&e, py, n);
    for i in 0..n {
        assert_eq!(y[i], x[i].mul_add(2.0, 1.0), "element {i}");
    }
}

#[test]
fn out_of_bounds_global_access_is_reported() {
    let e = emu();
    let n = 100;
    let px = emu_upload(&e, &random_f32(n, 2, DATA));
    let py = emu_upload(&e, &poisoned_f32(n));
    // One element too many: thread 100 reads past the end of x.
    let args = axpb_args(px, py, n + 1);
    let msg = assert_check(
        launch(&e, AXPB_PTX, "axpb", [1, 1, 1], [128, 1, 1], 0, &args),
        "out-of-bounds global access",
        "axpb",
        AXPB_PTX,
        AXPB_LOAD,
    );
    assert!(
        msg.contains("thread (100,0,0)") && msg.contains("block (0,0,0)"),
        "{msg}"
    );
}

#[test]
fn misaligned_global_access_is_reported() {
    let e = emu();
    let n = 64;
    let px = emu_upload(&e, &random_f32(n + 1, 3, DATA));
    let py = emu_upload(&e, &poisoned_f32(n));
    let ptx = axpb_ptx_reading_x_at(2);
    let args = axpb_args(px, py, n);
    assert_check(
        launch(&e, &ptx, "axpb", [1, 1, 1], [64, 1, 1], 0, &args),
        "misaligned global access",
        "axpb",
        &ptx,
        &axpb_load_at(2),
    );
}

#[test]
fn use_after_free_is_out_of_bounds() {
    let e = emu();
    let n = 32;
    let px = emu_upload(&e, &random_f32(n, 4, DATA));
    let py = emu_upload(&e, &poisoned_f32(n));
    e.mem_free(px).expect("free");
    let args = axpb_args(px, py, n);
    assert_check(
        launch(&e, AXPB_PTX, "axpb", [1, 1, 1], [32, 1, 1], 0, &args),
        "out-of-bounds global access",
        "axpb",
        AXPB_PTX,
        AXPB_LOAD,
    );
}

/// Block sum of `x` through shared memory: every thread stores one value, then a tree of
/// barrier-separated halvings. `BROKEN` variants drop a barrier or overrun the array.
fn block_sum_ptx(loop_barrier: bool, words: u32, init: bool) -> String {
    let bar = if loop_barrier {
        "bar.sync 0;"
    } else {
        "// no barrier"
    };
    let store = if init {
        "st.shared.f32 [%r6], %f1;"
    } else {
        "// no store"
    };
    format!(
        r#"{HEADER}.visible .entry block_sum(.param .u64 x, .param .u64 out, .param .u32 n)
.reqntid 128, 1, 1
{{
    .shared .align 4 .b8 partial[{bytes}];
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r2, 128, %r3;
    mov.f32 %f1, 0f00000000;
    setp.ge.u32 %p1, %r4, %r1;
    @%p1 bra $L__store;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
$L__store:
    mov.u32 %r5, partial;
    shl.b32 %r7, %r3, 2;
    add.s32 %r6, %r5, %r7;
    {store}
    bar.sync 0;
    mov.u32 %r8, 64;
$L__loop:
    setp.ge.u32 %p2, %r3, %r8;
    @%p2 bra $L__skip;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r6, %r9;
    ld.shared.f32 %f2, [%r10];
    ld.shared.f32 %f3, [%r6];
    add.f32 %f3, %f3, %f2;
    st.shared.f32 [%r6], %f3;
$L__skip:
    {bar}
    shr.u32 %r8, %r8, 1;
    setp.ne.u32 %p3, %r8, 0;
    @%p3 bra $L__loop;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra $L__end;
    ld.shared.f32 %f1, [partial];
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f1;
$L__end:
    ret;
}}
"#,
        bytes = words * 4
    )
}

fn block_sum_inputs(e: &Emu, n: usize) -> (Vec<f32>, [KernelArg; 3], u64, u32) {
    let x = random_f32(n, 5, DATA);
    let blocks = n.div_ceil(128) as u32;
    let px = emu_upload(e, &x);
    let pout = emu_upload(e, &poisoned_f32(blocks as usize));
    (
        x,
        [
            KernelArg::ptr(px),
            KernelArg::ptr(pout),
            KernelArg::from(n as u32),
        ],
        pout,
        blocks,
    )
}

#[test]
fn block_reduction_with_shared_memory_and_barriers() {
    let e = emu();
    let n = 1000;
    let (x, args, pout, blocks) = block_sum_inputs(&e, n);
    let ptx = block_sum_ptx(true, 128, true);
    launch(&e, &ptx, "block_sum", [blocks, 1, 1], [128, 1, 1], 0, &args).expect("block_sum");
    let out: Vec<f32> = emu_download(&e, pout, blocks as usize);
    for b in 0..blocks as usize {
        let want: f32 = x[b * 128..((b + 1) * 128).min(n)].iter().sum();
        assert!(
            (out[b] - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "block {b}: {} vs {want}",
            out[b]
        );
    }
}

#[test]
fn shared_memory_data_race_is_reported() {
    let e = emu();
    let (_, args, _, blocks) = block_sum_inputs(&e, 300);
    // Without the barrier in the loop, thread 0 reads partial[1] (in its last step) in the
    // interval in which thread 1 writes it.
    let ptx = block_sum_ptx(false, 128, true);
    let msg = assert_check(
        launch(&e, &ptx, "block_sum", [blocks, 1, 1], [128, 1, 1], 0, &args),
        "shared memory data race",
        "block_sum",
        &ptx,
        "st.shared.f32 [%r6], %f3;",
    );
    assert!(
        msg.contains("block (0,0,0)") && msg.contains("thread (1,0,0)"),
        "{msg}"
    );
}

#[test]
fn out_of_bounds_shared_access_is_reported() {
    let e = emu();
    let (_, args, _, blocks) = block_sum_inputs(&e, 300);
    // The array holds 100 words; thread 100 stores past its end.
    let ptx = block_sum_ptx(true, 100, true);
    let msg = assert_check(
        launch(&e, &ptx, "block_sum", [blocks, 1, 1], [128, 1, 1], 0, &args),
        "out-of-bounds shared access",
        "block_sum",
        &ptx,
        "st.shared.f32 [%r6], %f1;",
    );
    assert!(msg.contains("thread (100,0,0)"), "{msg}");
}

#[test]
fn uninitialized_shared_read_is_reported() {
    let e = emu();
    let (_, args, _, blocks) = block_sum_inputs(&e, 300);
    let ptx = block_sum_ptx(true, 128, false);
    assert_check(
        launch(&e, &ptx, "block_sum", [blocks, 1, 1], [128, 1, 1], 0, &args),
        "uninitialized shared memory read",
        "block_sum",
        &ptx,
        "ld.shared.f32 %f2, [%r10];",
    );
}

#[test]
fn dynamic_shared_memory_is_bounded_by_the_launch_size() {
    let e = emu();
    let ptx = format!(
        r#"{HEADER}.visible .entry dyn_fill()
{{
    .extern .shared .align 16 .b8 dsmem[];
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, dsmem;
    add.s32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r1;
    ret;
}}
"#
    );
    launch(&e, &ptx, "dyn_fill", [2, 1, 1], [64, 1, 1], 256, &[]).expect("256 bytes hold 64 words");
    let msg = assert_check(
        launch(&e, &ptx, "dyn_fill", [2, 1, 1], [64, 1, 1], 200, &[]),
        "out-of-bounds shared access",
        "dyn_fill",
        &ptx,
        "st.shared.u32 [%r3], %r1;",
    );
    assert!(
        msg.contains("thread (50,0,0)") && msg.contains("dynamic 200"),
        "{msg}"
    );
}

#[test]
fn barrier_not_reached_by_every_thread_is_reported() {
    let e = emu();
    let ptx = format!(
        r#"{HEADER}.visible .entry early_exit(.param .u64 out)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 40;
    @%p1 bra $L__end;
    bar.sync 0;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
$L__end:
    ret;
}}
"#
    );
    let out = emu_upload(&e, &[POISON_BITS; 96]);
    let msg = assert_check(
        launch(
            &e,
            &ptx,
            "early_exit",
            [3, 1, 1],
            [96, 1, 1],
            0,
            &[KernelArg::ptr(out)],
        ),
        "barrier divergence",
        "early_exit",
        &ptx,
        "bar.sync 0;",
    );
    assert!(msg.contains("56 of 96") && msg.contains("exited"), "{msg}");
}

#[test]
fn warp_shuffle_reduction_and_votes() {
    let e = emu();
    // Each warp: out[w*4+0] = sum of x over the warp (xor butterfly), [1] = ballot(x > 0),
    // [2] = all(x > -100), [3] = any(x > 3.5) (as 0/1). The block has 80 threads: the last warp is
    // partial (16 lanes) and uses a membermask of its existing lanes.
    let ptx = format!(
        r#"{HEADER}.visible .entry warp_ops(.param .u64 x, .param .u64 out)
{{
    .reg .pred %p<6>;
    .reg .b32 %r<16>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %laneid;
    shr.u32 %r3, %r1, 5;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mov.u32 %r4, -1;
    setp.eq.u32 %p5, %r3, 2;
    @%p5 mov.u32 %r4, 0xffff;
    mov.b32 %r5, %f1;
    shfl.sync.bfly.b32 %r6, %r5, 16, 31, %r4;
    @%p5 mov.b32 %r6, 0;
    mov.b32 %f2, %r6;
    add.f32 %f1, %f1, %f2;
    mov.b32 %r5, %f1;
    shfl.sync.bfly.b32 %r6, %r5, 8, 31, %r4;
    mov.b32 %f2, %r6;
    add.f32 %f1, %f1, %f2;
    mov.b32 %r5, %f1;
    shfl.sync.bfly.b32 %r6, %r5, 4, 31, %r4;
    mov.b32 %f2, %r6;
    add.f32 %f1, %f1, %f2;
    mov.b32 %r5, %f1;
    shfl.sync.bfly.b32 %r6, %r5, 2, 31, %r4;
    mov.b32 %f2, %r6;
    add.f32 %f1, %f1, %f2;
    mov.b32 %r5, %f1;
    shfl.sync.bfly.b32 %r6, %r5, 1, 31, %r4;
    mov.b32 %f2, %r6;
    add.f32 %f1, %f1, %f2;
    ld.global.f32 %f3, [%rd4];
    setp.gt.f32 %p1, %f3, 0f00000000;
    vote.sync.ballot.b32 %r7, %p1, %r4;
    setp.gt.f32 %p2, %f3, 0fC2C80000;
    vote.sync.all.pred %p3, %p2, %r4;
    setp.gt.f32 %p2, %f3, 0f40600000;
    vote.sync.any.pred %p4, %p2, %r4;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $L__end;
    shl.b32 %r8, %r3, 2;
    mul.wide.u32 %rd5, %r8, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f1;
    st.global.u32 [%rd6+4], %r7;
    selp.u32 %r9, 1, 0, %p3;
    st.global.u32 [%rd6+8], %r9;
    selp.u32 %r10, 1, 0, %p4;
    st.global.u32 [%rd6+12], %r10;
$L__end:
    ret;
}}
"#
    );
    let n = 80;
    let x = random_f32(n, 6, DATA);
    let px = emu_upload(&e, &x);
    let pout = emu_upload(&e, &[POISON_BITS; 12]);
    launch(
        &e,
        &ptx,
        "warp_ops",
        [1, 1, 1],
        [80, 1, 1],
        0,
        &[KernelArg::ptr(px), KernelArg::ptr(pout)],
    )
    .expect("warp_ops");
    let out: Vec<u32> = emu_download(&e, pout, 12);
    for w in 0..3 {
        let lanes = &x[w * 32..(w * 32 + 32).min(n)];
        let sum: f32 = lanes.iter().sum();
        let got = f32::from_bits(out[w * 4]);
        assert!(
            (got - sum).abs() <= 1e-4 * (1.0 + sum.abs()),
            "warp {w} sum {got} vs {sum}"
        );
        let ballot = lanes
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0)
            .fold(0u32, |b, (i, _)| b | 1 << i);
        assert_eq!(out[w * 4 + 1], ballot, "warp {w} ballot");
        assert_eq!(out[w * 4 + 2], 1, "warp {w} all");
        assert_eq!(
            out[w * 4 + 3],
            lanes.iter().any(|v| *v > 3.5) as u32,
            "warp {w} any"
        );
    }
}

#[test]
fn shuffle_with_an_exited_member_is_reported() {
    let e = emu();
    let ptx = format!(
        r#"{HEADER}.visible .entry shfl_exit()
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %laneid;
    setp.eq.u32 %p1, %r1, 7;
    @%p1 bra $L__end;
    shfl.sync.down.b32 %r2, %r1, 1, 31, -1;
$L__end:
    ret;
}}
"#
    );
    let msg = assert_check(
        launch(&e, &ptx, "shfl_exit", [1, 1, 1], [32, 1, 1], 0, &[]),
        "warp divergence",
        "shfl_exit",
        &ptx,
        "shfl.sync.down.b32",
    );
    assert!(msg.contains("lane 7") && msg.contains("exited"), "{msg}");
}

#[test]
fn atomics_on_global_and_shared_memory() {
    let e = emu();
    // Histogram of keys into 7 global bins (atom.global.add.u32), a float sum (atom.add.f32),
    // a global max (atom.max.s32), and a per-block count through shared atomics.
    let ptx = format!(
        r#"{HEADER}.visible .entry atomics(.param .u64 keys, .param .u64 vals, .param .u64 bins, .param .u64 acc, .param .u32 n)
{{
    .shared .align 4 .u32 count;
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [keys];
    ld.param.u64 %rd2, [vals];
    ld.param.u64 %rd3, [bins];
    ld.param.u64 %rd4, [acc];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p2, %r2, 0;
    @!%p2 st.shared.u32 [count], 0;
    bar.sync 0;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L__sync;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r6, [%rd6];
    rem.u32 %r7, %r6, 7;
    mul.wide.u32 %rd7, %r7, 4;
    add.s64 %rd8, %rd3, %rd7;
    atom.global.add.u32 %r8, [%rd8], 1;
    add.s64 %rd9, %rd2, %rd5;
    ld.global.f32 %f1, [%rd9];
    red.global.add.f32 [%rd4], %f1;
    atom.global.max.s32 %r9, [%rd4+4], %r6;
    atom.shared.add.u32 %r10, [count], 1;
$L__sync:
    bar.sync 0;
    @%p2 bra $L__end;
    ld.shared.u32 %r11, [count];
    atom.global.add.u32 %r12, [%rd4+8], %r11;
$L__end:
    ret;
}}
"#
    );
    let n = 1500usize;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let keys: Vec<u32> = (0..n).map(|_| rng.gen_range(0..100_000)).collect();
    let vals: Vec<f32> = (0..n).map(|_| rng.gen_range(0..64) as f32 * 0.25).collect();
    let pk = emu_upload(&e, &keys);
    let pv = emu_upload(&e, &vals);
    let pb = emu_upload(&e, &[0u32; 7]);
    let pa = emu_upload(&e, &[0u32; 3]);
    let args = [
        KernelArg::ptr(pk),
        KernelArg::ptr(pv),
        KernelArg::ptr(pb),
        KernelArg::ptr(pa),
        KernelArg::from(n as u32),
    ];
    launch(
        &e,
        &ptx,
        "atomics",
        [n.div_ceil(256) as u32, 1, 1],
        [256, 1, 1],
        0,
        &args,
    )
    .expect("atomics");
    let bins: Vec<u32> = emu_download(&e, pb, 7);
    for (b, &got) in bins.iter().enumerate() {
        assert_eq!(
            got as usize,
            keys.iter().filter(|k| **k % 7 == b as u32).count(),
            "bin {b}"
        );
    }
    let acc: Vec<u32> = emu_download(&e, pa, 3);
    // Quarter-integers sum exactly in f32 at this size, whatever the order.
    assert_eq!(f32::from_bits(acc[0]), vals.iter().sum::<f32>());
    assert_eq!(acc[1], *keys.iter().max().expect("keys"));
    assert_eq!(acc[2] as usize, n);
}

#[test]
fn an_unimplemented_instruction_is_a_load_error_naming_it() {
    let e = emu();
    let ptx = format!("{HEADER}.visible .entry k()\n{{\n    .reg .b32 %r<4>;\n    mul24.lo.u32 %r1, %r2, %r3;\n    ret;\n}}\n");
    let err = e.module_load(&ptx).expect_err("mul24 is not implemented");
    let line = line_of(&ptx, "mul24");
    assert!(
        err.log.contains(&format!("line {line}")) && err.log.contains("mul24"),
        "{}",
        err.log
    );
}

/// Threads 0..32 wait at barrier 1, the rest at barrier 0: neither can complete.
#[test]
fn threads_at_different_barriers_are_reported() {
    let e = emu();
    let ptx = format!(
        r#"{HEADER}.visible .entry split_bar()
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $L__low;
    bar.sync 0;
    bra.uni $L__end;
$L__low:
    bar.sync 1;
$L__end:
    ret;
}}
"#
    );
    let msg = assert_check(
        launch(&e, &ptx, "split_bar", [1, 1, 1], [96, 1, 1], 0, &[]),
        "barrier divergence",
        "split_bar",
        &ptx,
        "bar.sync 1;",
    );
    assert!(msg.contains("waits at a barrier"), "{msg}");
}

/// Named barriers with a thread count: each half of the block synchronizes on its own
/// barrier, exchanging values through shared memory within the half.
#[test]
fn named_barriers_with_a_thread_count() {
    let e = emu();
    let ptx = format!(
        r#"{HEADER}.visible .entry halves(.param .u64 out)
{{
    .shared .align 4 .b8 sm[512];
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, sm;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r2, %r3;
    mul.lo.u32 %r5, %r1, 3;
    st.shared.u32 [%r4], %r5;
    setp.lt.u32 %p1, %r1, 64;
    selp.u32 %r6, 1, 2, %p1;
    bar.sync %r6, 64;
    xor.b32 %r7, %r1, 1;
    shl.b32 %r8, %r7, 2;
    add.u32 %r9, %r2, %r8;
    ld.shared.u32 %r10, [%r9];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r10;
    ret;
}}
"#
    );
    let out = emu_upload(&e, &[POISON_BITS; 128]);
    launch(
        &e,
        &ptx,
        "halves",
        [2, 1, 1],
        [128, 1, 1],
        0,
        &[KernelArg::ptr(out)],
    )
    .expect("halves");
    let got: Vec<u32> = emu_download(&e, out, 128);
    for t in 0..128u32 {
        assert_eq!(got[t as usize], (t ^ 1) * 3, "thread {t}");
    }
}

/// `cp.async` pipelines of a 64-thread block: thread `t` of block `b` finds its 16 bytes of
/// the block's two 1024-byte source halves at `src + 2048b + 16t` (`%rd3`) and
/// `+ 1024` (`%rd4`), its slots of the shared buffers at `%r2` (buf0) and `%r3` (buf1), the
/// next thread's slots (`(t + 1) % 64`) at `%r4` and `%r5`, the previous thread's slot of buf0
/// (its own for thread 0) at `%r6`, a source size of `t % 17` bytes in `%r7`, and writes its
/// results at `dst + 2048b + 16t` (`%rd5`) and `+ 1024` (`%rd6`). `body`: the lines between.
fn cp_async_ptx(body: &[&str]) -> String {
    let body: String = body.iter().map(|l| format!("    {l}\n")).collect();
    format!(
        r#"{HEADER}.visible .entry cp_pipe(.param .u64 src, .param .u64 dst)
.reqntid 64, 1, 1
{{
    .shared .align 16 .b8 buf0[1024];
    .shared .align 16 .b8 buf1[1024];
    .reg .pred %p<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    mov.u32 %r1, %tid.x;
    mov.u32 %r20, %ctaid.x;
    shl.b32 %r21, %r20, 11;
    shl.b32 %r8, %r1, 4;
    add.u32 %r22, %r21, %r8;
    cvt.u64.u32 %rd7, %r22;
    add.s64 %rd3, %rd1, %rd7;
    add.s64 %rd4, %rd3, 1024;
    add.s64 %rd5, %rd2, %rd7;
    add.s64 %rd6, %rd5, 1024;
    mov.u32 %r9, buf0;
    mov.u32 %r10, buf1;
    add.u32 %r2, %r9, %r8;
    add.u32 %r3, %r10, %r8;
    add.u32 %r11, %r1, 1;
    and.b32 %r11, %r11, 63;
    shl.b32 %r11, %r11, 4;
    add.u32 %r4, %r9, %r11;
    add.u32 %r5, %r10, %r11;
    setp.eq.u32 %p1, %r1, 0;
    selp.u32 %r12, 0, 16, %p1;
    sub.u32 %r12, %r8, %r12;
    add.u32 %r6, %r9, %r12;
    rem.u32 %r7, %r1, 17;
{body}    ret;
}}
"#
    )
}

const COPY0: &str = "cp.async.cg.shared.global [%r2], [%rd3], 16;";
const COPY1: &str = "cp.async.cg.shared.global [%r3], [%rd4], 16;";
const COPY0_SHORT: &str = "cp.async.cg.shared.global [%r2], [%rd3], 16, %r7;";
const COMMIT: &str = "cp.async.commit_group;";
const WAIT0: &str = "cp.async.wait_group 0;";
const WAIT1: &str = "cp.async.wait_group 1;";
const WAIT_ALL: &str = "cp.async.wait_all;";
const BAR: &str = "bar.sync 0;";
/// The next thread's slot of buf0, to the first result.
const READ0: &str = "ld.shared.v4.u32 {%r13, %r14, %r15, %r16}, [%r4];";
const STORE0: &str = "st.global.v4.u32 [%rd5], {%r13, %r14, %r15, %r16};";
/// The next thread's slot of buf1, to the second result.
const READ1: &str = "ld.shared.v4.u32 {%r13, %r14, %r15, %r16}, [%r5];";
const STORE1: &str = "st.global.v4.u32 [%rd6], {%r13, %r14, %r15, %r16};";
/// The previous thread's slot of buf0, to the first result.
const READ_PREV: &str = "ld.shared.v4.u32 {%r13, %r14, %r15, %r16}, [%r6];";

/// Blocks of the `cp_pipe` launches.
const CP_BLOCKS: usize = 3;

/// Random words whose bytes are all non-zero (so a zero fill shows), uploaded; and a poisoned
/// destination of the same size.
fn cp_async_inputs(e: &Emu, seed: u64) -> (Vec<u32>, u64, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let src: Vec<u32> = (0..CP_BLOCKS * 512)
        .map(|_| rng.gen::<u32>() | 0x0101_0101)
        .collect();
    let ps = emu_upload(e, &src);
    let pd = emu_upload(e, &vec![POISON_BITS; src.len()]);
    (src, ps, pd)
}

fn cp_launch(e: &Emu, ptx: &str, ps: u64, pd: u64) -> Result<()> {
    launch(
        e,
        ptx,
        "cp_pipe",
        [CP_BLOCKS as u32, 1, 1],
        [64, 1, 1],
        0,
        &[KernelArg::ptr(ps), KernelArg::ptr(pd)],
    )
}

/// Asserts that result `half` (0 or 1) of every thread holds the next thread's 16 source bytes
/// of that half, of which the first `keep(next thread)` (16 unless zero-filled).
fn assert_next_slots(src: &[u32], got: &[u32], half: usize, keep: impl Fn(usize) -> usize) {
    for b in 0..CP_BLOCKS {
        for t in 0..64 {
            let next = (t + 1) % 64;
            let at = b * 512 + half * 256;
            for byte in 0..16 {
                let want = if byte < keep(next) {
                    src[at + 4 * next + byte / 4].to_le_bytes()[byte % 4]
                } else {
                    0
                };
                let have = got[at + 4 * t + byte / 4].to_le_bytes()[byte % 4];
                assert_eq!(have, want, "block {b} thread {t} half {half} byte {byte}");
            }
        }
    }
}

#[test]
fn cp_async_waited_for_gives_right_answers() {
    let e = emu();
    let (src, ps, pd) = cp_async_inputs(&e, 11);
    let ptx = cp_async_ptx(&[COPY0, COMMIT, WAIT0, BAR, READ0, STORE0]);
    cp_launch(&e, &ptx, ps, pd).expect("cp.async, wait, barrier, read");
    let got: Vec<u32> = emu_download(&e, pd, src.len());
    assert_next_slots(&src, &got, 0, |_| 16);
}

#[test]
fn read_of_a_cp_async_not_waited_for_is_reported() {
    let e = emu();
    let (_, ps, pd) = cp_async_inputs(&e, 12);
    // Committed but never waited for: the barrier does not complete the copies.
    let ptx = cp_async_ptx(&[COPY0, COMMIT, BAR, READ0, STORE0]);
    let msg = assert_check(
        cp_launch(&e, &ptx, ps, pd),
        "cp.async not complete",
        "cp_pipe",
        &ptx,
        READ0,
    );
    assert!(
        msg.contains("read of shared offset 0x10, the destination of a cp.async of thread (1,0,0) that no cp.async.wait_group has completed yet")
            && msg.contains("thread (0,0,0), PTX line"),
        "{msg}"
    );
}

#[test]
fn double_buffered_cp_async_waits_for_the_older_group() {
    let e = emu();
    let (src, ps, pd) = cp_async_inputs(&e, 13);
    // wait_group 1 completes the first group of two: buf0 may be read, buf1 only after
    // wait_group 0.
    let ptx = cp_async_ptx(&[
        COPY0, COMMIT, COPY1, COMMIT, WAIT1, BAR, READ0, STORE0, WAIT0, BAR, READ1, STORE1,
    ]);
    cp_launch(&e, &ptx, ps, pd).expect("double buffer");
    let got: Vec<u32> = emu_download(&e, pd, src.len());
    assert_next_slots(&src, &got, 0, |_| 16);
    assert_next_slots(&src, &got, 1, |_| 16);
    let ptx = cp_async_ptx(&[COPY0, COMMIT, COPY1, COMMIT, WAIT1, BAR, READ1, STORE1]);
    let msg = assert_check(
        cp_launch(&e, &ptx, ps, pd),
        "cp.async not complete",
        "cp_pipe",
        &ptx,
        READ1,
    );
    assert!(
        msg.contains("read of shared offset 0x410") && msg.contains("of thread (1,0,0)"),
        "{msg}"
    );
}

#[test]
fn cp_async_with_a_short_source_zero_fills() {
    let e = emu();
    let (src, ps, pd) = cp_async_inputs(&e, 14);
    // Thread t copies t % 17 bytes (0 to all 16) and zero-fills the rest.
    let ptx = cp_async_ptx(&[COPY0_SHORT, COMMIT, WAIT0, BAR, READ0, STORE0]);
    cp_launch(&e, &ptx, ps, pd).expect("zero fill");
    let got: Vec<u32> = emu_download(&e, pd, src.len());
    assert_next_slots(&src, &got, 0, |t| t % 17);
}

#[test]
fn reading_a_completed_copy_without_a_barrier_is_a_race() {
    let e = emu();
    let (src, ps, pd) = cp_async_inputs(&e, 15);
    // The copy completes at the wait, after the barrier: thread 1 then reads thread 0's
    // slot, which thread 0 wrote (at its wait) with no barrier in between.
    let ptx = cp_async_ptx(&[COPY0, COMMIT, BAR, WAIT0, READ_PREV, STORE0]);
    let msg = assert_check(
        cp_launch(&e, &ptx, ps, pd),
        "shared memory data race",
        "cp_pipe",
        &ptx,
        READ_PREV,
    );
    assert!(
        msg.contains("which thread (0,0,0) wrote") && msg.contains("thread (1,0,0), PTX line"),
        "{msg}"
    );
    // A barrier after the wait orders it.
    let ptx = cp_async_ptx(&[COPY0, COMMIT, BAR, WAIT0, BAR, READ_PREV, STORE0]);
    cp_launch(&e, &ptx, ps, pd).expect("wait, then barrier");
    let got: Vec<u32> = emu_download(&e, pd, src.len());
    for b in 0..CP_BLOCKS {
        for t in 0..64 {
            let prev = t.max(1) - 1;
            for w in 0..4 {
                assert_eq!(
                    got[b * 512 + 4 * t + w],
                    src[b * 512 + 4 * prev + w],
                    "block {b} thread {t} word {w}"
                );
            }
        }
    }
}

#[test]
fn wait_all_completes_copies_never_committed() {
    let e = emu();
    let (src, ps, pd) = cp_async_inputs(&e, 16);
    let ptx = cp_async_ptx(&[COPY0, COPY1, WAIT_ALL, BAR, READ0, STORE0, READ1, STORE1]);
    cp_launch(&e, &ptx, ps, pd).expect("wait_all");
    let got: Vec<u32> = emu_download(&e, pd, src.len());
    assert_next_slots(&src, &got, 0, |_| 16);
    assert_next_slots(&src, &got, 1, |_| 16);
    // wait_group completes committed groups only.
    let ptx = cp_async_ptx(&[COPY0, COPY1, WAIT0, BAR, READ0, STORE0]);
    assert_check(
        cp_launch(&e, &ptx, ps, pd),
        "cp.async not complete",
        "cp_pipe",
        &ptx,
        READ0,
    );
}

#[test]
fn store_to_a_pending_cp_async_destination_is_reported() {
    let e = emu();
    let (_, ps, pd) = cp_async_inputs(&e, 17);
    // Even the issuing thread may not touch the destination before its wait.
    let ptx = cp_async_ptx(&[COPY0, COMMIT, "st.shared.u32 [%r2+4], %r1;", WAIT0]);
    let msg = assert_check(
        cp_launch(&e, &ptx, ps, pd),
        "cp.async not complete",
        "cp_pipe",
        &ptx,
        "st.shared.u32 [%r2+4], %r1;",
    );
    assert!(
        msg.contains("write of shared offset 0x4, the destination of a cp.async of thread (0,0,0)"),
        "{msg}"
    );
}

#[test]
fn copies_not_waited_for_complete_at_the_exit() {
    let e = emu();
    let (_, ps, pd) = cp_async_inputs(&e, 18);
    // Neither committed nor waited for, and never read: not an error.
    let ptx = cp_async_ptx(&[COPY0, COMMIT, COPY1]);
    cp_launch(&e, &ptx, ps, pd).expect("copies left at the exit");
}
