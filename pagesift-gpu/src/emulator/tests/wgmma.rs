//! `wgmma` on an emulated device of compute capability 9.0: one warpgroup computes a `64 × n`
//! tile from K-major operands in shared memory (128-byte and 64-byte swizzled and interleaved
//! layouts, bf16, f16 and tf32), checked against an f64 reference; and the hardware's rules,
//! each broken by a kernel that must fail with its error.

use super::{download_u32, launch, upload_u32};
use crate::emulator::{Emulator, EmulatorConfig};
use crate::error::Error;

fn emu90() -> Emulator {
    Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        threads: 2,
        memory_capacity: 64 << 20,
        ..EmulatorConfig::default()
    })
}

/// The input type of a test tile.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum In {
    Bf16,
    F16,
    Tf32,
}

impl In {
    fn name(self) -> &'static str {
        match self {
            In::Bf16 => "bf16",
            In::F16 => "f16",
            In::Tf32 => "tf32",
        }
    }
    fn bytes(self) -> usize {
        if self == In::Tf32 {
            4
        } else {
            2
        }
    }
    /// K of one instruction (32 bytes of a row).
    fn k(self) -> usize {
        32 / self.bytes()
    }
    /// The stored bits of `x` (f32 bits for tf32: the instruction ignores the low 13).
    fn encode(self, x: f32) -> u32 {
        match self {
            In::Bf16 => half::bf16::from_f32(x).to_bits() as u32,
            In::F16 => half::f16::from_f32(x).to_bits() as u32,
            In::Tf32 => x.to_bits(),
        }
    }
    /// The value the tensor core multiplies.
    fn value(self, bits: u32) -> f64 {
        match self {
            In::Bf16 => half::bf16::from_bits(bits as u16).to_f64(),
            In::F16 => half::f16::from_bits(bits as u16).to_f64(),
            In::Tf32 => f32::from_bits(bits & 0xffff_e000) as f64,
        }
    }
}

/// A K-major shared-memory layout of rows of 64 bytes of K (two instructions' worth).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    /// Rows of 128 bytes, 8-row groups 1024 bytes apart, 16-byte chunk `c` of row `r` stored
    /// at chunk `c ^ (r % 8)`.
    Swizzle128,
    /// Rows of 64 bytes, 8-row groups 512 bytes apart, chunk `c` of row `r` stored at chunk
    /// `c ^ ((r % 8) / 2)`.
    Swizzle64,
    /// Core matrices of 8 rows × 16 bytes: the chunks of K 128 bytes apart (LBO), 8-row groups
    /// 512 bytes apart (SBO).
    Interleave,
}

impl Layout {
    /// The byte offset of byte `kb` (0..64) of row `r` from the 1024-aligned tile start.
    fn offset(self, r: usize, kb: usize) -> usize {
        let (c, b) = (kb / 16, kb % 16);
        match self {
            Layout::Swizzle128 => (r / 8) * 1024 + (r % 8) * 128 + (c ^ (r % 8)) * 16 + b,
            Layout::Swizzle64 => (r / 8) * 512 + (r % 8) * 64 + (c ^ ((r % 8) / 2)) * 16 + b,
            Layout::Interleave => (r / 8) * 512 + c * 128 + (r % 8) * 16 + b,
        }
    }
    /// Bytes of a tile of `rows` rows (a multiple of 1024 for 64-row multiples).
    fn bytes(self, rows: usize) -> usize {
        match self {
            Layout::Swizzle128 => rows * 128,
            Layout::Swizzle64 | Layout::Interleave => rows * 64,
        }
    }
    /// The descriptor bits above the start address: LBO, SBO and the swizzle mode.
    fn desc_high(self) -> u64 {
        let (lbo, sbo, mode): (u64, u64, u64) = match self {
            Layout::Swizzle128 => (16, 1024, 1),
            Layout::Swizzle64 => (16, 512, 2),
            Layout::Interleave => (128, 512, 0),
        };
        ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)
    }
    /// The descriptor increment from the first 32 bytes of K to the next.
    fn k_step(self) -> u64 {
        match self {
            Layout::Interleave => 256 >> 4,
            _ => 32 >> 4,
        }
    }
}

/// A test tile: `D (64 × n) = sa1·sb1·A₀·B₀ᵀ + sa2·sb2·A₁·B₁ᵀ`, A₀/B₀ the first and A₁/B₁ the
/// second 32 bytes of K, by two chained `wgmma.mma_async` (the first with `scale-d` false).
struct Case {
    ty: In,
    layout: Layout,
    n: usize,
    /// imm-scale-a and imm-scale-b of the second instruction.
    scale2: (i32, i32),
}

/// What a variant of the kernel changes (the rule it breaks).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Break {
    Nothing,
    /// Reads an accumulator between the commit and the wait.
    ReadBeforeWait,
    /// Writes an accumulator between the commit and the wait.
    WriteBeforeWait,
    /// No `wgmma.fence`.
    NoFence,
    /// Zeroes an accumulator after the `wgmma.fence`.
    AccessAfterFence,
    /// Thread 0 overwrites the A tile between the commit and the wait.
    OverwriteA,
    /// No `fence.proxy.async` after the copy into shared memory.
    NoProxyFence,
    /// No `wgmma.wait_group`.
    NoWait,
}

/// The kernel of a case: 128 threads copy the tile image (A then B, laid out by the host) into
/// shared memory, `fence.proxy.async`, `bar.sync`, then two chained `wgmma.mma_async`, commit,
/// wait 0, and each thread stores its `n / 2` accumulators at `out + 4 · (n/2 · tid + i)`.
fn kernel(c: &Case, brk: Break) -> String {
    let a_bytes = c.layout.bytes(64);
    let total = a_bytes + c.layout.bytes(c.n);
    let nreg = c.n / 2;
    let acc: Vec<String> = (0..nreg).map(|i| format!("%f{i}")).collect();
    let acc = acc.join(", ");
    let (ty, k) = (c.ty.name(), c.ty.k());
    let tail = if c.ty == In::Tf32 { "" } else { ", 0, 0" };
    let mma = format!("wgmma.mma_async.sync.aligned.m64n{}k{k}.f32.{ty}.{ty}", c.n);
    let mut stores = String::new();
    for j in 0..nreg / 4 {
        stores += &format!(
            " st.global.v4.f32 [%rd20+{}], {{%f{}, %f{}, %f{}, %f{}}};\n",
            16 * j,
            4 * j,
            4 * j + 1,
            4 * j + 2,
            4 * j + 3
        );
    }
    let pick = |b: Break, s: &str| {
        if brk == b {
            s.to_string()
        } else {
            String::new()
        }
    };
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry k(.param .u64 img, .param .u64 out)\n{{\n\
         .shared .align 1024 .b8 tile[{total}];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<16>;\n .reg .b64 %rd<24>;\n .reg .f32 %f<{nreg}>;\n\
         ld.param.u64 %rd1, [img];\n ld.param.u64 %rd2, [out];\n mov.u32 %r0, %tid.x;\n\
         mov.u32 %r1, %r0;\n\
         $copy:\n setp.ge.u32 %p0, %r1, {chunks};\n @%p0 bra $copied;\n\
         mul.wide.u32 %rd3, %r1, 16;\n add.s64 %rd4, %rd1, %rd3;\n\
         ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4];\n\
         mov.u32 %r2, tile;\n shl.b32 %r3, %r1, 4;\n add.u32 %r2, %r2, %r3;\n\
         st.shared.v4.u32 [%r2], {{%r4, %r5, %r6, %r7}};\n add.u32 %r1, %r1, 128;\n bra $copy;\n\
         $copied:\n{proxy} bar.sync 0;\n\
         mov.u32 %r8, tile;\n shr.u32 %r9, %r8, 4;\n and.b32 %r9, %r9, 0x3fff;\n cvt.u64.u32 %rd5, %r9;\n\
         or.b64 %rd10, %rd5, {high:#x};\n add.s64 %rd11, %rd10, {a_off};\n\
         add.s64 %rd12, %rd10, {step};\n add.s64 %rd13, %rd11, {step};\n\
         setp.eq.u32 %p1, %r0, 0xffffffff;\n\
         {fence}{after_fence}\
         {mma} {{{acc}}}, %rd10, %rd11, %p1, 1, 1{tail};\n\
         {mma} {{{acc}}}, %rd12, %rd13, !%p1, {sa}, {sb}{tail};\n\
         wgmma.commit_group.sync.aligned;\n\
         {before_wait}{wait}\
         mul.lo.u32 %r10, %r0, {row_bytes};\n cvt.u64.u32 %rd14, %r10;\n add.s64 %rd20, %rd2, %rd14;\n\
         {stores} ret;\n}}\n",
        chunks = total / 16,
        proxy = if brk == Break::NoProxyFence {
            ""
        } else {
            " fence.proxy.async.shared::cta;\n"
        },
        high = c.layout.desc_high(),
        a_off = a_bytes >> 4,
        step = c.layout.k_step(),
        fence = if brk == Break::NoFence {
            ""
        } else {
            " wgmma.fence.sync.aligned;\n"
        },
        after_fence = pick(Break::AccessAfterFence, " mov.f32 %f1, 0f00000000;\n"),
        sa = c.scale2.0,
        sb = c.scale2.1,
        before_wait = pick(Break::ReadBeforeWait, " st.global.f32 [%rd2], %f5;\n")
            + &pick(Break::WriteBeforeWait, " mov.f32 %f5, 0f00000000;\n")
            + &pick(
                Break::OverwriteA,
                " bar.sync 0;\n setp.eq.u32 %p2, %r0, 0;\n @%p2 st.shared.u32 [tile+32], %r0;\n"
            ),
        wait = if brk == Break::NoWait {
            " ret;\n".to_string()
        } else {
            " wgmma.wait_group.sync.aligned 0;\n".to_string()
        },
        row_bytes = nreg * 4,
    )
}

/// The tile image (A rows then B rows, in the case's layout) as words, and the values the
/// tensor core sees: `a[m][k]`, `b[n][k]` for K = 2 instructions.
fn image(c: &Case) -> (Vec<u32>, Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let (eb, kk) = (c.ty.bytes(), 2 * c.ty.k());
    let a_bytes = c.layout.bytes(64);
    let mut img = vec![0u8; a_bytes + c.layout.bytes(c.n)];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut fill = |rows: usize, base: usize, img: &mut [u8]| -> Vec<Vec<f64>> {
        (0..rows)
            .map(|r| {
                (0..kk)
                    .map(|k| {
                        let x = (super::xorshift(&mut seed) % 9) as f32 - 4.0;
                        // Low mantissa bits below tf32's precision: the instruction drops them.
                        let x = match c.ty {
                            In::Tf32 if x != 0.0 => f32::from_bits(x.to_bits() | 0x1234),
                            In::Tf32 => x,
                            _ => x * 0.5,
                        };
                        let bits = c.ty.encode(x);
                        for (i, byte) in bits.to_le_bytes()[..eb].iter().enumerate() {
                            img[base + c.layout.offset(r, k * eb + i)] = *byte;
                        }
                        c.ty.value(bits)
                    })
                    .collect()
            })
            .collect()
    };
    let a = fill(64, 0, &mut img);
    let b = fill(c.n, a_bytes, &mut img);
    let words = img
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    (words, a, b)
}

/// Runs a case's kernel (variant `brk`) on a fresh 9.0 device; the accumulators each thread
/// stored, and the reference tile.
fn run(c: &Case, brk: Break) -> (crate::error::Result<()>, Vec<u32>, Vec<Vec<f64>>) {
    let e = emu90();
    let (words, a, b) = image(c);
    let img = upload_u32(&e, &words);
    let out = upload_u32(&e, &vec![0xDEAD_BEEF; 64 * c.n]);
    let r = launch(
        &e,
        &kernel(c, brk),
        "k",
        1,
        128,
        0,
        &[&img.to_le_bytes(), &out.to_le_bytes()],
    );
    let half = c.ty.k();
    let (sa, sb) = (c.scale2.0 as f64, c.scale2.1 as f64);
    let d = (0..64)
        .map(|m| {
            (0..c.n)
                .map(|n| {
                    (0..2 * half)
                        .map(|k| {
                            let s = if k < half { 1.0 } else { sa * sb };
                            s * a[m][k] * b[n][k]
                        })
                        .sum()
                })
                .collect()
        })
        .collect();
    (r, download_u32(&e, out, 64 * c.n), d)
}

fn check_tile(c: &Case) {
    let (r, got, want) = run(c, Break::Nothing);
    r.unwrap_or_else(|e| panic!("{:?} {:?} n{}: {e}", c.ty, c.layout, c.n));
    let nreg = c.n / 2;
    for tid in 0..128 {
        let (q, lane) = (tid / 32, tid % 32);
        for i in 0..nreg {
            // The accumulator fragment: register i of lane l holds D[16q + r][col].
            let row = 16 * q + lane / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            let v = f32::from_bits(got[tid * nreg + i]) as f64;
            assert_eq!(
                v, want[row][col],
                "{:?} {:?} n{}: D[{row}][{col}] (thread {tid}, register {i})",
                c.ty, c.layout, c.n
            );
        }
    }
}

#[test]
fn wgmma_bf16_swizzle128_matches_the_reference() {
    for (n, scale2) in [(128, (1, -1)), (8, (1, 1)), (256, (-1, -1))] {
        check_tile(&Case {
            ty: In::Bf16,
            layout: Layout::Swizzle128,
            n,
            scale2,
        });
    }
}

#[test]
fn wgmma_f16_interleave_matches_the_reference() {
    check_tile(&Case {
        ty: In::F16,
        layout: Layout::Interleave,
        n: 64,
        scale2: (-1, 1),
    });
}

#[test]
fn wgmma_bf16_swizzle64_matches_the_reference() {
    check_tile(&Case {
        ty: In::Bf16,
        layout: Layout::Swizzle64,
        n: 64,
        scale2: (1, 1),
    });
}

#[test]
fn wgmma_tf32_truncates_and_matches_the_reference() {
    check_tile(&Case {
        ty: In::Tf32,
        layout: Layout::Swizzle128,
        n: 64,
        scale2: (1, 1),
    });
    check_tile(&Case {
        ty: In::Tf32,
        layout: Layout::Interleave,
        n: 128,
        scale2: (-1, -1),
    });
}

/// The error of a broken variant of the bf16 kernel.
fn broken(brk: Break) -> String {
    let c = Case {
        ty: In::Bf16,
        layout: Layout::Swizzle128,
        n: 64,
        scale2: (1, 1),
    };
    match run(&c, brk).0 {
        Err(Error::Emulator(em)) => em.message,
        other => panic!("{brk:?}: expected an emulator error, got {other:?}"),
    }
}

#[test]
fn wgmma_accumulator_access_before_the_wait_is_an_error() {
    let msg = broken(Break::ReadBeforeWait);
    assert!(
        msg.contains("read of a wgmma accumulator before its wgmma.wait_group")
            && msg.contains("st.global.f32 [%rd2], %f5"),
        "{msg}"
    );
    let msg = broken(Break::WriteBeforeWait);
    assert!(
        msg.contains("write to a wgmma accumulator before its wgmma.wait_group")
            && msg.contains("mov.f32 %f5"),
        "{msg}"
    );
}

#[test]
fn wgmma_without_a_fence_is_an_error() {
    for brk in [Break::NoFence, Break::AccessAfterFence] {
        let msg = broken(brk);
        assert!(
            msg.contains("wgmma.mma_async without a preceding wgmma.fence")
                && msg.contains("wgmma.mma_async.sync.aligned.m64n64k16"),
            "{brk:?}: {msg}"
        );
    }
}

#[test]
fn wgmma_operands_overwritten_before_the_wait_are_an_error() {
    let msg = broken(Break::OverwriteA);
    assert!(
        msg.contains(
            "shared memory read by wgmma.mma_async was written before its wgmma.wait_group"
        ) && msg.contains("st.shared.u32 [tile+32]")
            && msg.contains("thread (0,0,0)"),
        "{msg}"
    );
}

#[test]
fn wgmma_reads_need_fence_proxy_async() {
    let msg = broken(Break::NoProxyFence);
    assert!(
        msg.contains("shared memory written by thread (")
            && msg.contains("read by wgmma without fence.proxy.async"),
        "{msg}"
    );
}

#[test]
fn wgmma_pending_at_exit_is_an_error() {
    let msg = broken(Break::NoWait);
    assert!(msg.contains("wgmma not complete at exit"), "{msg}");
}

#[test]
fn wgmma_needs_whole_warps_and_a_whole_warpgroup() {
    let c = Case {
        ty: In::Bf16,
        layout: Layout::Swizzle128,
        n: 64,
        scale2: (1, 1),
    };
    let (words, _, _) = image(&c);
    for (threads, want) in [
        (64, "incomplete warpgroup"),
        (100, "a matrix instruction needs all 32 lanes"),
    ] {
        let e = emu90();
        let img = upload_u32(&e, &words);
        let out = upload_u32(&e, &vec![0; 64 * c.n]);
        let args: [&[u8]; 2] = [&img.to_le_bytes(), &out.to_le_bytes()];
        match launch(&e, &kernel(&c, Break::Nothing), "k", 1, threads, 0, &args) {
            Err(Error::Emulator(em)) => assert!(em.message.contains(want), "{}", em.message),
            other => panic!("{threads} threads: expected {want}, got {other:?}"),
        }
    }
}

#[test]
fn wgmma_descriptor_and_operand_errors() {
    // A descriptor past the block's shared memory.
    let c = Case {
        ty: In::F16,
        layout: Layout::Interleave,
        n: 64,
        scale2: (1, 1),
    };
    let ptx = kernel(&c, Break::Nothing).replace(
        "add.s64 %rd11, %rd10, 256;",
        "add.s64 %rd11, %rd10, 0x3000;",
    );
    let e = emu90();
    let (words, _, _) = image(&c);
    let img = upload_u32(&e, &words);
    let out = upload_u32(&e, &vec![0; 64 * c.n]);
    let args: [&[u8]; 2] = [&img.to_le_bytes(), &out.to_le_bytes()];
    match launch(&e, &ptx, "k", 1, 128, 0, &args) {
        Err(Error::Emulator(em)) => assert!(
            em.message.contains("out-of-bounds shared access")
                && em.message.contains("wgmma.mma_async operand B read"),
            "{}",
            em.message
        ),
        other => panic!("expected an out-of-bounds read, got {other:?}"),
    }
    // Transposed operands fail the load.
    let ptx = kernel(&c, Break::Nothing).replace("1, 1, 0, 0;", "1, 1, 1, 0;");
    let err = e.load_ptx(&ptx).expect_err("transposed");
    assert!(
        err.log
            .contains("transposed wgmma operands are not supported by the emulated device"),
        "{}",
        err.log
    );
}

#[test]
fn sm_90a_modules_need_compute_capability_9_0() {
    let c = Case {
        ty: In::Bf16,
        layout: Layout::Swizzle128,
        n: 64,
        scale2: (1, 1),
    };
    let e80 = super::emu();
    let err = e80
        .load_ptx(&kernel(&c, Break::Nothing))
        .expect_err("sm_90a on 8.0");
    assert!(
        err.log.contains("sm_90a") && err.error.name == "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "{}",
        err.log
    );
    emu90()
        .load_ptx(&kernel(&c, Break::Nothing))
        .expect("sm_90a on 9.0");
}

#[test]
fn wgmma_forms_decode() {
    for f in [
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n248k16.f32.f16.f16",
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "fence.proxy.async.shared::cta",
    ] {
        assert_eq!(super::super::check_instruction_form(f), Ok(()), "{f}");
    }
}

/// Two groups on separate accumulators (`%f`: `A₀·B₀ᵀ`, `%g`: `sa·sb·A₁·B₁ᵀ`):
/// `wgmma.wait_group 1` completes the first only, so `%f` may be stored then, `%g` only after
/// `wgmma.wait_group 0` (with `early`, `%g` is read before: an error).
fn two_group_kernel(c: &Case, early: bool) -> String {
    let full = kernel(c, Break::Nothing);
    let cut = full.find("wgmma.mma_async").expect("an mma");
    let nreg = c.n / 2;
    let (ty, k) = (c.ty.name(), c.ty.k());
    let tail = if c.ty == In::Tf32 { "" } else { ", 0, 0" };
    let mma = format!("wgmma.mma_async.sync.aligned.m64n{}k{k}.f32.{ty}.{ty}", c.n);
    let regs = |p: &str| (0..nreg).map(|i| format!("%{p}{i}")).collect::<Vec<_>>();
    let stores = |p: &str, base: &str| {
        let r = regs(p);
        (0..nreg / 4)
            .map(|j| {
                format!(
                    " st.global.v4.f32 [{base}+{}], {{{}}};\n",
                    16 * j,
                    r[4 * j..4 * j + 4].join(", ")
                )
            })
            .collect::<String>()
    };
    format!(
        "{head}{mma} {{{f}}}, %rd10, %rd11, %p1, 1, 1{tail};\n\
         wgmma.commit_group.sync.aligned;\n\
         {mma} {{{g}}}, %rd12, %rd13, %p1, {sa}, {sb}{tail};\n\
         wgmma.commit_group.sync.aligned;\n\
         wgmma.wait_group.sync.aligned 1;\n\
         mul.lo.u32 %r10, %r0, {row_bytes};\n cvt.u64.u32 %rd14, %r10;\n add.s64 %rd20, %rd2, %rd14;\n\
         add.s64 %rd21, %rd20, {g_off};\n\
         {f_stores}{early}\
         wgmma.wait_group.sync.aligned 0;\n\
         {g_stores} ret;\n}}\n",
        head = full[..cut]
            .replace(".reg .f32 %f<", &format!(".reg .f32 %g<{nreg}>;\n .reg .f32 %f<")),
        f = regs("f").join(", "),
        g = regs("g").join(", "),
        sa = c.scale2.0,
        sb = c.scale2.1,
        row_bytes = nreg * 4,
        g_off = 128 * nreg * 4,
        f_stores = stores("f", "%rd20"),
        early = if early {
            " st.global.f32 [%rd2], %g3;\n"
        } else {
            ""
        },
        g_stores = stores("g", "%rd21"),
    )
}

#[test]
fn wgmma_wait_group_completes_the_oldest_groups() {
    let c = Case {
        ty: In::F16,
        layout: Layout::Swizzle128,
        n: 32,
        scale2: (-1, 1),
    };
    let (words, a, b) = image(&c);
    let e = emu90();
    let img = upload_u32(&e, &words);
    let nreg = c.n / 2;
    let out = upload_u32(&e, &vec![0xDEAD_BEEF; 2 * 128 * nreg]);
    let args: [&[u8]; 2] = [&img.to_le_bytes(), &out.to_le_bytes()];
    launch(&e, &two_group_kernel(&c, false), "k", 1, 128, 0, &args).expect("two groups");
    let got = download_u32(&e, out, 2 * 128 * nreg);
    let half = c.ty.k();
    let s = (c.scale2.0 * c.scale2.1) as f64;
    for tid in 0..128 {
        let (q, lane) = (tid / 32, tid % 32);
        for i in 0..nreg {
            let row = 16 * q + lane / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            let f: f64 = (0..half).map(|k| a[row][k] * b[col][k]).sum();
            let g: f64 = (half..2 * half).map(|k| s * a[row][k] * b[col][k]).sum();
            let got_f = f32::from_bits(got[tid * nreg + i]) as f64;
            let got_g = f32::from_bits(got[128 * nreg + tid * nreg + i]) as f64;
            assert_eq!((got_f, got_g), (f, g), "D[{row}][{col}]");
        }
    }
    let ptx = two_group_kernel(&c, true);
    let second = 1 + ptx
        .lines()
        .position(|l| l.contains("wgmma.mma_async") && l.contains("%g0"))
        .expect("the second mma");
    match launch(&e, &ptx, "k", 1, 128, 0, &args) {
        Err(Error::Emulator(em)) => assert!(
            em.message
                .contains("read of a wgmma accumulator before its wgmma.wait_group")
                && em
                    .message
                    .contains(&format!("wgmma.mma_async of PTX line {second},"))
                && em.message.contains("st.global.f32 [%rd2], %g3"),
            "{}",
            em.message
        ),
        other => panic!("expected an early read, got {other:?}"),
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Arbitrary matrix descriptors, and token mutations of a `wgmma` kernel's text: each loads and
/// runs or fails with an error, never a panic.
#[test]
fn wgmma_hostile_descriptors_and_text_never_panic() {
    let c = Case {
        ty: In::Bf16,
        layout: Layout::Swizzle128,
        n: 64,
        scale2: (1, 1),
    };
    let e = Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        threads: 1,
        memory_capacity: 16 << 20,
        max_thread_instructions: 20_000,
        ..EmulatorConfig::default()
    });
    let (words, _, _) = image(&c);
    let img = upload_u32(&e, &words);
    let out = upload_u32(&e, &vec![0; 64 * c.n]);
    let base = kernel(&c, Break::Nothing);
    // The descriptors from parameters.
    let desc_ptx = base
        .replace(
            ".param .u64 out)",
            ".param .u64 out, .param .u64 da, .param .u64 db)",
        )
        .replace(
            &format!("or.b64 %rd10, %rd5, {:#x};", c.layout.desc_high()),
            "ld.param.u64 %rd10, [da];",
        )
        .replace("add.s64 %rd11, %rd10, 512;", "ld.param.u64 %rd11, [db];");
    assert!(desc_ptx.contains("[da]") && desc_ptx.contains("[db]"));
    let mut rng = 0x5eed_u64;
    let (mut ran, mut failed) = (0, 0);
    for i in 0..200 {
        let mut d = [splitmix(&mut rng), splitmix(&mut rng)];
        if i % 4 != 0 {
            // Mostly plausible: a start below 4 KiB, LBO and SBO below 1 KiB, base offset 0.
            for x in &mut d {
                *x &= 0xC000_003F_003F_00FF;
            }
        }
        let args: [&[u8]; 4] = [
            &img.to_le_bytes(),
            &out.to_le_bytes(),
            &d[0].to_le_bytes(),
            &d[1].to_le_bytes(),
        ];
        match launch(&e, &desc_ptx, "k", 1, 128, 0, &args) {
            Ok(()) => ran += 1,
            Err(Error::Emulator(_)) => failed += 1,
            Err(other) => panic!("descriptors {d:x?}: {other}"),
        }
    }
    assert!(ran > 0 && failed > 0, "ran {ran}, failed {failed}");
    // Token mutations.
    const SPLICE: &[&str] = &[
        "{",
        "}",
        ",",
        ";",
        "-1",
        "0",
        "1",
        "2",
        "8",
        "256",
        "4294967296",
        "99999999999999999999999",
        "!%p1",
        "%p1",
        "%f3",
        "%rd10",
        "_",
        "[tile]",
        "tile",
        "0x3fff",
        "ret",
        "bar.sync",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "fence.proxy.async.shared::cta",
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32",
    ];
    let (mut loaded, mut launched) = (0, 0);
    let rounds = 300;
    for round in 0..rounds {
        let mut toks: Vec<&str> = if round % 2 == 0 {
            base.split(' ').collect()
        } else {
            base.split_inclusive(|c: char| ",;{}[]!@\n".contains(c))
                .collect()
        };
        for _ in 0..1 + splitmix(&mut rng) % 3 {
            let i = (splitmix(&mut rng) % toks.len() as u64) as usize;
            let t = SPLICE[(splitmix(&mut rng) % SPLICE.len() as u64) as usize];
            match splitmix(&mut rng) % 3 {
                0 => toks[i] = t,
                1 => toks.insert(i, t),
                _ => {
                    toks.remove(i);
                }
            }
        }
        let text = toks.join(if round % 2 == 0 { " " } else { "" });
        if let Ok(m) = e.load_ptx(&text) {
            e.unload(m).expect("unload");
            loaded += 1;
            let args: [&[u8]; 2] = [&img.to_le_bytes(), &out.to_le_bytes()];
            match launch(&e, &text, "k", 1, 128, 0, &args) {
                Ok(()) | Err(Error::Emulator(_)) => launched += 1,
                Err(_) => {}
            }
        }
    }
    assert!(
        loaded < rounds && launched > 0,
        "loaded {loaded}, launched {launched}"
    );
}

/// A kernel in which lanes `skip..` of each warp run `elect.sync` over `mask`, each thread
/// then writing `1000 · p + d` (the others `99`).
fn elect_kernel(mask: &str, skip: u32) -> String {
    format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n\
         .visible .entry k(.param .u64 y)\n{{\n\
         .reg .u32 %t, %l, %d, %v;\n.reg .u64 %a, %o;\n.reg .pred %p, %q;\n\
         mov.u32 %t, %tid.x;\n\
         and.b32 %l, %t, 31;\n\
         mov.u32 %v, 99;\n\
         setp.lt.u32 %q, %l, {skip};\n\
         @%q bra $done;\n\
         elect.sync %d|%p, {mask};\n\
         selp.u32 %v, 1000, 0, %p;\n\
         add.u32 %v, %v, %d;\n\
         $done:\n\
         ld.param.u64 %a, [y];\n\
         mul.wide.u32 %o, %t, 4;\n\
         add.u64 %a, %a, %o;\n\
         st.global.u32 [%a], %v;\n\
         ret;\n}}\n"
    )
}

#[test]
fn elect_sync_elects_the_lowest_lane_of_the_mask() {
    let e = emu90();
    let y = upload_u32(&e, &[u32::MAX; 64]);
    let args: [&[u8]; 1] = [&y.to_le_bytes()];
    let want = |skip: u32| -> Vec<u32> {
        (0..64u32)
            .map(|t| match t % 32 {
                l if l < skip => 99,
                l if l == skip => 1000 + skip,
                _ => skip,
            })
            .collect()
    };
    launch(&e, &elect_kernel("-1", 0), "k", 1, 64, 0, &args).expect("whole warps");
    assert_eq!(download_u32(&e, y, 64), want(0));
    launch(&e, &elect_kernel("0xfffffff0", 4), "k", 1, 64, 0, &args).expect("lanes 4..32");
    assert_eq!(download_u32(&e, y, 64), want(4));
    // Lanes of the mask that do not take part: an error, as for every warp collective.
    let err = launch(&e, &elect_kernel("-1", 3), "k", 1, 64, 0, &args)
        .expect_err("lanes 0..3 skip it")
        .to_string();
    assert!(err.contains("elect"), "{err}");
}

/// A kernel whose warpgroup 0 lowers its registers and the others raise theirs, each thread
/// then writing its index; `branch` lanes of warp 0 skip its `setmaxnreg` (0: none).
fn setmaxnreg_kernel(count: &str, branch: u32) -> String {
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry k(.param .u64 y)\n.maxnreg 168\n{{\n\
         .reg .u32 %t, %w;\n.reg .u64 %a, %o;\n.reg .pred %p, %q;\n\
         mov.u32 %t, %tid.x;\n\
         setp.lt.u32 %q, %t, {branch};\n\
         @%q bra $done;\n\
         shr.u32 %w, %t, 7;\n\
         setp.eq.u32 %p, %w, 0;\n\
         @%p setmaxnreg.dec.sync.aligned.u32 {count};\n\
         @!%p setmaxnreg.inc.sync.aligned.u32 232;\n\
         $done:\n\
         ld.param.u64 %a, [y];\n\
         mul.wide.u32 %o, %t, 4;\n\
         add.u64 %a, %a, %o;\n\
         st.global.u32 [%a], %t;\n\
         ret;\n}}\n"
    )
}

#[test]
fn setmaxnreg_is_a_warpgroup_collective() {
    let e = emu90();
    let y = upload_u32(&e, &[u32::MAX; 256]);
    let args: [&[u8]; 1] = [&y.to_le_bytes()];
    launch(&e, &setmaxnreg_kernel("40", 0), "k", 1, 256, 0, &args).expect("two warpgroups");
    assert_eq!(download_u32(&e, y, 256), (0..256).collect::<Vec<u32>>());
    // A block that is not whole warpgroups, a warp whose lanes diverge around it, and a count
    // out of its range are errors.
    let err = launch(&e, &setmaxnreg_kernel("40", 0), "k", 1, 96, 0, &args)
        .expect_err("96 threads")
        .to_string();
    assert!(err.contains("warpgroup"), "{err}");
    let err = launch(&e, &setmaxnreg_kernel("40", 5), "k", 1, 128, 0, &args)
        .expect_err("lanes 0..5 skip it")
        .to_string();
    assert!(err.contains("divergence"), "{err}");
    let err = launch(&e, &setmaxnreg_kernel("20", 0), "k", 1, 128, 0, &args)
        .expect_err("20 registers")
        .to_string();
    assert!(err.contains("multiple of 8 in 24..=256"), "{err}");
}
