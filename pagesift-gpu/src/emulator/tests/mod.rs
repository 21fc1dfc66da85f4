//! The emulator's unit tests, all through its own API: here the parser, arithmetic corner cases
//! and small kernels; `stream` the asynchronous streams, `input` hostile PTX, `wgmma` and `tma`
//! the sm_90a instructions.

mod input;
mod stream;
mod tma;
mod tma_store;
mod wgmma;

use super::num::{self, Cmp, FMode, FOp1, FOp2, Fmt, Rnd, Ty};
use super::{Emulator, EmulatorConfig, KernelLaunch, StreamId};
use crate::cpu::round;
use crate::error::{self, Error, Result};

fn emu() -> Emulator {
    Emulator::new(EmulatorConfig {
        threads: 2,
        memory_capacity: 64 << 20,
        ..EmulatorConfig::default()
    })
}

fn launch(
    e: &Emulator,
    ptx: &str,
    entry: &str,
    grid: u32,
    block: u32,
    shared: u32,
    args: &[&[u8]],
) -> Result<()> {
    let m = e.load_ptx(ptx).map_err(|m| {
        Error::from(error::Emulator {
            kernel: entry.into(),
            message: m.log,
        })
    })?;
    let f = e.function(m, entry)?;
    e.launch(&KernelLaunch {
        function: f,
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_mem_bytes: shared,
        stream: StreamId::DEFAULT,
        args,
    })?;
    // Launches are queued: a failed check is reported when the stream is synchronized.
    e.synchronize_stream(StreamId::DEFAULT)
}

fn upload_u32(e: &Emulator, v: &[u32]) -> u64 {
    let p = e.alloc(v.len() * 4).expect("alloc");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    e.copy_to(p, &bytes).expect("htod");
    p
}

fn download_u32(e: &Emulator, p: u64, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; n * 4];
    e.copy_from(&mut b, p).expect("dtoh");
    b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

const HEADER: &str = ".version 8.0\n.target sm_80\n.address_size 64\n";

fn f32_bits(x: f32) -> u64 {
    x.to_bits() as u64
}

/// `cvt` with rounding `rnd` only: no integer rounding of floats, no saturation, no flush.
fn cvt_plain(dty: Ty, sty: Ty, rnd: Rnd, a: u64) -> u64 {
    num::cvt(dty, sty, rnd, false, false, false, a)
}

const RN: FMode = FMode {
    rnd: Rnd::Rn,
    ftz: false,
    sat: false,
};

fn fm(rnd: Rnd) -> FMode {
    FMode {
        rnd,
        ftz: false,
        sat: false,
    }
}

#[test]
fn cvt_float_to_int_rounding_and_saturation() {
    let c = |rnd, x: f32| {
        num::cvt(Ty::S32, Ty::F32, rnd, true, false, false, f32_bits(x)) as u32 as i32
    };
    assert_eq!(c(Rnd::Rn, 2.5), 2);
    assert_eq!(c(Rnd::Rn, 3.5), 4);
    assert_eq!(c(Rnd::Rn, -2.5), -2);
    assert_eq!(c(Rnd::Rz, -2.7), -2);
    assert_eq!(c(Rnd::Rm, -2.2), -3);
    assert_eq!(c(Rnd::Rp, 2.2), 3);
    assert_eq!(c(Rnd::Rz, 3e10), i32::MAX);
    assert_eq!(c(Rnd::Rz, -3e10), i32::MIN);
    assert_eq!(c(Rnd::Rz, f32::NAN), 0);
    // A signed 64-bit result of NaN is the most negative value, as on the hardware.
    let nan_s64 = num::cvt(
        Ty::S64,
        Ty::F32,
        Rnd::Rz,
        true,
        false,
        false,
        f32_bits(f32::NAN),
    );
    assert_eq!(nan_s64 as i64, i64::MIN);
    let nan_f64_s8 = num::cvt(
        Ty::S8,
        Ty::F64,
        Rnd::Rz,
        true,
        false,
        false,
        f64::NAN.to_bits(),
    );
    assert_eq!(nan_f64_s8 as u8 as i8, i8::MIN);
    let u = num::cvt(
        Ty::U8,
        Ty::F32,
        Rnd::Rn,
        true,
        false,
        false,
        f32_bits(300.0),
    );
    assert_eq!(u, 255);
    let u = num::cvt(
        Ty::U32,
        Ty::F32,
        Rnd::Rn,
        true,
        false,
        false,
        f32_bits(-5.0),
    );
    assert_eq!(u, 0);
}

#[test]
fn cvt_int_to_int_and_int_to_float() {
    assert_eq!(
        cvt_plain(Ty::S32, Ty::S8, Rnd::Default, 0xff) as u32,
        0xffff_ffff
    );
    assert_eq!(cvt_plain(Ty::U32, Ty::U8, Rnd::Default, 0xff), 0xff);
    assert_eq!(
        num::cvt(Ty::S8, Ty::S32, Rnd::Default, false, true, false, 1000),
        127
    );
    assert_eq!(
        num::cvt(
            Ty::U16,
            Ty::S32,
            Rnd::Default,
            false,
            true,
            false,
            (-5i32) as u32 as u64
        ),
        0
    );
    // 2^24 + 1 is not representable in f32: nearest-even goes down, .rp goes up.
    let x = (1u64 << 24) + 1;
    assert_eq!(
        f32::from_bits(cvt_plain(Ty::F32, Ty::U32, Rnd::Rn, x) as u32),
        16777216.0
    );
    assert_eq!(
        f32::from_bits(cvt_plain(Ty::F32, Ty::U32, Rnd::Rp, x) as u32),
        16777218.0
    );
    assert_eq!(
        f32::from_bits(cvt_plain(Ty::F32, Ty::U32, Rnd::Rz, x) as u32),
        16777216.0
    );
    let neg = (-((1i64 << 24) + 1)) as u64;
    assert_eq!(
        f32::from_bits(cvt_plain(Ty::F32, Ty::S64, Rnd::Rm, neg) as u32),
        -16777218.0
    );
    assert_eq!(
        f32::from_bits(cvt_plain(Ty::F32, Ty::S64, Rnd::Rz, neg) as u32),
        -16777216.0
    );
}

#[test]
fn cvt_float_narrowing_modes() {
    let x = 1.0f64 + f64::EPSILON; // between two f32 values, just above 1
    let r = |rnd| f32::from_bits(cvt_plain(Ty::F32, Ty::F64, rnd, x.to_bits()) as u32);
    assert_eq!(r(Rnd::Rn), 1.0);
    assert_eq!(r(Rnd::Rz), 1.0);
    assert_eq!(r(Rnd::Rm), 1.0);
    assert_eq!(r(Rnd::Rp), 1.0 + f32::EPSILON);
    let big = f64::MAX;
    let r = |rnd| f32::from_bits(cvt_plain(Ty::F32, Ty::F64, rnd, big.to_bits()) as u32);
    assert_eq!(r(Rnd::Rn), f32::INFINITY);
    assert_eq!(r(Rnd::Rz), f32::MAX);
    // f32 -> f16 / bf16 and back.
    let h = cvt_plain(Ty::F16, Ty::F32, Rnd::Rn, f32_bits(1.0 / 3.0));
    assert_eq!(h as u16, half::f16::from_f32(1.0 / 3.0).to_bits());
    let hz = cvt_plain(Ty::F16, Ty::F32, Rnd::Rz, f32_bits(65519.0));
    assert_eq!(half::f16::from_bits(hz as u16).to_f32(), 65504.0);
    let hn = cvt_plain(Ty::F16, Ty::F32, Rnd::Rn, f32_bits(65520.0));
    assert!(half::f16::from_bits(hn as u16).to_f32().is_infinite());
    let b = num::cvt(
        Ty::BF16,
        Ty::F32,
        Rnd::Rn,
        false,
        false,
        false,
        f32_bits(1.0 + 2f32.powi(-8)),
    );
    assert_eq!(
        half::bf16::from_bits(b as u16).to_f32(),
        1.0,
        "ties to even"
    );
    let back = cvt_plain(
        Ty::F32,
        Ty::BF16,
        Rnd::Default,
        half::bf16::from_f32(-2.5).to_bits() as u64,
    );
    assert_eq!(f32::from_bits(back as u32), -2.5);
    // Round to integral in float.
    let ri = |rnd, x: f32| {
        f32::from_bits(num::cvt(Ty::F32, Ty::F32, rnd, true, false, false, f32_bits(x)) as u32)
    };
    assert_eq!(ri(Rnd::Rn, 2.5), 2.0);
    assert_eq!(ri(Rnd::Rm, -0.5), -1.0);
    assert_eq!(ri(Rnd::Rp, 0.1), 1.0);
    // .ftz flushes a subnormal input; .sat clamps.
    let sub = f32::from_bits(1);
    let f = num::cvt(
        Ty::F64,
        Ty::F32,
        Rnd::Default,
        false,
        false,
        true,
        f32_bits(sub),
    );
    assert_eq!(f64::from_bits(f), 0.0);
    let s = num::cvt(
        Ty::F32,
        Ty::F32,
        Rnd::Default,
        false,
        true,
        false,
        f32_bits(1.5),
    );
    assert_eq!(f32::from_bits(s as u32), 1.0);
}

#[test]
fn float_arithmetic_rounding_modes() {
    let tiny = 2f32.powi(-30);
    let add = |rnd| {
        f32::from_bits(
            num::fbin(FOp2::Add, Fmt::F32, fm(rnd), f32_bits(1.0), f32_bits(tiny)) as u32,
        )
    };
    assert_eq!(add(Rnd::Rn), 1.0);
    assert_eq!(add(Rnd::Rz), 1.0);
    assert_eq!(add(Rnd::Rm), 1.0);
    assert_eq!(add(Rnd::Rp), 1.0 + f32::EPSILON);
    let sub = |rnd| {
        f32::from_bits(
            num::fbin(FOp2::Sub, Fmt::F32, fm(rnd), f32_bits(1.0), f32_bits(tiny)) as u32,
        )
    };
    assert_eq!(sub(Rnd::Rn), 1.0);
    assert_eq!(sub(Rnd::Rz), 1.0 - f32::EPSILON / 2.0);
    let div = |rnd| {
        f32::from_bits(num::fbin(FOp2::Div, Fmt::F32, fm(rnd), f32_bits(1.0), f32_bits(3.0)) as u32)
    };
    assert_eq!(div(Rnd::Rn), 1.0 / 3.0);
    assert!(div(Rnd::Rp) > div(Rnd::Rz));
    assert_eq!(div(Rnd::Rz), div(Rnd::Rm));
    let mul = |rnd| {
        f32::from_bits(num::fbin(
            FOp2::Mul,
            Fmt::F32,
            fm(rnd),
            f32_bits(1.0 + f32::EPSILON),
            f32_bits(1.0 + f32::EPSILON),
        ) as u32)
    };
    assert_eq!(mul(Rnd::Rn), 1.0 + 2.0 * f32::EPSILON);
    assert_eq!(mul(Rnd::Rp), 1.0 + 3.0 * f32::EPSILON);
    // 1 - 1 = +0 except -0 when rounding down.
    assert_eq!(
        num::fbin(FOp2::Sub, Fmt::F32, RN, f32_bits(1.0), f32_bits(1.0)),
        0
    );
    assert_eq!(
        num::fbin(
            FOp2::Sub,
            Fmt::F32,
            fm(Rnd::Rm),
            f32_bits(1.0),
            f32_bits(1.0)
        ),
        0x8000_0000
    );
    // fma is fused: (1+e)(1-e) - 1 = -e^2 exactly.
    let e = f32::EPSILON;
    let r = num::ffma(
        Fmt::F32,
        RN,
        f32_bits(1.0 + e),
        f32_bits(1.0 - e),
        f32_bits(-1.0),
    );
    assert_eq!(f32::from_bits(r as u32), -(e * e));
    // The f64 sum lands exactly on an f32 midpoint; the tiny addend must break the tie.
    let (x, z) = (1.0 + 2f32.powi(-12), 2f32.powi(-70));
    let r = num::ffma(Fmt::F32, RN, f32_bits(x), f32_bits(x), f32_bits(z));
    assert_eq!(f32::from_bits(r as u32), x.mul_add(x, z));
    assert_eq!(
        f32::from_bits(r as u32),
        1.0 + 2f32.powi(-11) + 2f32.powi(-23)
    );
    let r = num::ffma(Fmt::F32, RN, f32_bits(x), f32_bits(x), f32_bits(-z));
    assert_eq!(f32::from_bits(r as u32), x.mul_add(x, -z));
    let s = num::fun(FOp1::Sqrt, Fmt::F32, fm(Rnd::Rp), f32_bits(2.0));
    let sn = num::fun(FOp1::Sqrt, Fmt::F32, RN, f32_bits(2.0));
    assert_eq!(f32::from_bits(sn as u32), 2f32.sqrt());
    assert!(f32::from_bits(s as u32) >= f32::from_bits(sn as u32));
    // ftz flushes subnormal inputs and results; sat clamps to [0, 1] with NaN -> 0.
    let ftz = FMode {
        rnd: Rnd::Rn,
        ftz: true,
        sat: false,
    };
    assert_eq!(
        num::fbin(FOp2::Mul, Fmt::F32, ftz, f32_bits(1e-20), f32_bits(1e-20)),
        0
    );
    assert_eq!(num::fbin(FOp2::Add, Fmt::F32, ftz, 1, 0), 0);
    let sat = FMode {
        rnd: Rnd::Rn,
        ftz: false,
        sat: true,
    };
    assert_eq!(
        f32::from_bits(num::fbin(FOp2::Add, Fmt::F32, sat, f32_bits(0.75), f32_bits(0.5)) as u32),
        1.0
    );
    assert_eq!(
        num::fbin(FOp2::Add, Fmt::F32, sat, f32_bits(f32::NAN), f32_bits(0.5)),
        0
    );
    // NaN results are the canonical NaN.
    assert_eq!(
        num::fun(FOp1::Sqrt, Fmt::F32, RN, f32_bits(-1.0)),
        0x7fff_ffff
    );
    assert_eq!(
        num::fun(
            FOp1::Lg2,
            Fmt::F16,
            RN,
            half::f16::from_f32(-1.0).to_bits() as u64
        ),
        0x7fff
    );
    // min/max ignore a single NaN.
    assert_eq!(
        f32::from_bits(
            num::fbin(FOp2::Min, Fmt::F32, RN, f32_bits(f32::NAN), f32_bits(2.0)) as u32
        ),
        2.0
    );
    assert_eq!(
        f32::from_bits(
            num::fbin(FOp2::Max, Fmt::F32, RN, f32_bits(-1.0), f32_bits(f32::NAN)) as u32
        ),
        -1.0
    );
}

#[test]
fn half_precision_arithmetic() {
    let h = |x: f32| half::f16::from_f32(x).to_bits() as u64;
    let r = num::fbin(FOp2::Add, Fmt::F16, RN, h(1.0), h(0.0004883));
    assert_eq!(r, half::f16::from_f32(1.0 + 0.0004883).to_bits() as u64);
    let packed = num::lanes2(
        h(1.5) | (h(-2.0) << 16),
        h(2.0) | (h(3.0) << 16),
        0,
        |x, y, _| num::fbin(FOp2::Mul, Fmt::F16, RN, x, y),
    );
    assert_eq!(packed, h(3.0) | (h(-6.0) << 16));
    let b = |x: f32| half::bf16::from_f32(x).to_bits() as u64;
    let r = num::ffma(Fmt::BF16, RN, b(1.5), b(2.0), b(0.25));
    assert_eq!(half::bf16::from_bits(r as u16).to_f32(), 3.25);
}

#[test]
fn setp_ordered_and_unordered() {
    let nan = f32_bits(f32::NAN);
    let one = f32_bits(1.0);
    assert!(!num::compare(Cmp::Lt, Ty::F32, false, nan, one));
    assert!(num::compare(Cmp::Ltu, Ty::F32, false, nan, one));
    assert!(!num::compare(Cmp::Ne, Ty::F32, false, nan, one));
    assert!(num::compare(Cmp::Neu, Ty::F32, false, nan, one));
    assert!(num::compare(Cmp::Nan, Ty::F32, false, one, nan));
    assert!(!num::compare(Cmp::Num, Ty::F32, false, one, nan));
    assert!(num::compare(Cmp::Geu, Ty::F32, false, f32_bits(2.0), one));
    assert!(num::compare(Cmp::Lt, Ty::S32, false, 0xffff_ffff, 0));
    assert!(!num::compare(Cmp::Lt, Ty::U32, false, 0xffff_ffff, 0));
    assert!(num::compare(Cmp::Hi, Ty::B32, false, 0xffff_ffff, 0));
}

#[test]
fn integer_corner_cases() {
    use num::IOp2::*;
    assert_eq!(
        num::ibin(MulHi, Ty::U32, 0xffff_ffff, 0xffff_ffff),
        0xffff_fffe
    );
    assert_eq!(
        num::ibin(MulHi, Ty::S32, (-2i32) as u32 as u64, 3),
        0xffff_ffff
    );
    assert_eq!(
        num::ibin(MulWide, Ty::S32, (-2i32) as u32 as u64, 3),
        (-6i64) as u64
    );
    assert_eq!(num::ibin(Shr, Ty::S32, 0x8000_0000, 40), 0xffff_ffff);
    assert_eq!(num::ibin(Shr, Ty::U32, 0x8000_0000, 40), 0);
    assert_eq!(num::ibin(Shl, Ty::B32, 1, 32), 0);
    assert_eq!(
        num::ibin(Div, Ty::S32, (-7i32) as u32 as u64, 2),
        (-3i32) as u32 as u64
    );
    assert_eq!(
        num::ibin(Rem, Ty::S32, (-7i32) as u32 as u64, 2),
        (-1i32) as u32 as u64
    );
    assert_eq!(num::ibin(AddSat, Ty::S32, 0x7fff_ffff, 1), 0x7fff_ffff);
    assert_eq!(num::bfe(Ty::S32, 0x0000_0f00, 8, 4), 0xffff_ffff);
    assert_eq!(num::bfe(Ty::U32, 0x0000_0f00, 8, 3), 7);
    assert_eq!(num::bfi(Ty::B32, 0b101, 0xffff_0000, 4, 3), 0xffff_0050);
    assert_eq!(
        num::prmt(0x4433_2211, 0x8877_6655, 0x0000_7531),
        0x8866_4422
    );
}

#[test]
fn parser_reports_unsupported_instruction_with_line() {
    let e = emu();
    let ptx = format!("{HEADER}.visible .entry k()\n{{\n  .reg .b32 %r<2>;\n  frobnicate.b32 %r0, %r1;\n  ret;\n}}\n");
    let err = e.load_ptx(&ptx).expect_err("must fail");
    assert!(err.log.contains("line 7"), "{}", err.log);
    assert!(err.log.contains("frobnicate"), "{}", err.log);
    let ptx = format!("{HEADER}.visible .entry k()\n{{\n  .reg .f32 %f<2>;\n  add.rn.xyz.f32 %f0, %f1, %f1;\n}}\n");
    let err = e.load_ptx(&ptx).expect_err("unknown modifier must fail");
    assert!(
        err.log.contains("xyz") && err.log.contains("line 7"),
        "{}",
        err.log
    );
    let ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { ret; }\n";
    let err = e.load_ptx(ptx).expect_err("sm_90a must not load on 8.0");
    assert_eq!(err.error.name, "CUDA_ERROR_NO_BINARY_FOR_GPU");
}

const SAXPY: &str = r#"
.version 8.0
.target sm_80
.address_size 64

// y[i] = a * x[i] + y[i]
.visible .entry saxpy(
    .param .u64 saxpy_param_0,
    .param .u64 saxpy_param_1,
    .param .f32 saxpy_param_2,
    .param .u32 saxpy_param_3
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [saxpy_param_0];
    ld.param.u64 %rd2, [saxpy_param_1];
    ld.param.f32 %f1, [saxpy_param_2];
    ld.param.u32 %r2, [saxpy_param_3];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra $L__done;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.nc.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
$L__done:
    ret;
}
"#;

#[test]
fn saxpy_runs() {
    let e = emu();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 13) as f32 + 0.25).collect();
    let px = upload_u32(&e, &x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let py = upload_u32(&e, &y.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let args: [&[u8]; 4] = [
        &px.to_le_bytes(),
        &py.to_le_bytes(),
        &1.5f32.to_le_bytes(),
        &(n as u32).to_le_bytes(),
    ];
    launch(&e, SAXPY, "saxpy", 8, 128, 0, &args).expect("saxpy");
    let out = download_u32(&e, py, n);
    for i in 0..n {
        assert_eq!(
            f32::from_bits(out[i]),
            1.5f32.mul_add(x[i], y[i]),
            "element {i}"
        );
    }
    assert!(e.executed_instructions() > 1000 * 10);
}

#[test]
fn saxpy_out_of_bounds_is_reported() {
    let e = emu();
    let px = upload_u32(&e, &[1; 100]);
    let py = upload_u32(&e, &[2; 100]);
    let args: [&[u8]; 4] = [
        &px.to_le_bytes(),
        &py.to_le_bytes(),
        &1.0f32.to_le_bytes(),
        &101u32.to_le_bytes(),
    ];
    let err = launch(&e, SAXPY, "saxpy", 1, 128, 0, &args).expect_err("n is one too many");
    let msg = err.to_string();
    assert!(msg.contains("out-of-bounds global access"), "{msg}");
    assert!(
        msg.contains("thread (100,0,0)") && msg.contains("block (0,0,0)"),
        "{msg}"
    );
    assert!(
        msg.contains("PTX line 34") && msg.contains("ld.global.nc.f32"),
        "{msg}"
    );
}

fn shfl_kernel(mode: &str, b: u32, c: u32) -> String {
    format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .reg .b32 %r<4>;\n .reg .pred %p<2>;\n .reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, %laneid;\n mul.lo.u32 %r2, %r1, 10;\n\
         shfl.sync.{mode}.b32 %r3|%p1, %r2, {b}, {c}, 0xffffffff;\n\
         selp.u32 %r0, 1000, 0, %p1;\n add.u32 %r3, %r3, %r0;\n\
         mul.wide.u32 %rd2, %r1, 4;\n add.s64 %rd3, %rd1, %rd2;\n st.global.u32 [%rd3], %r3;\n ret;\n}}\n"
    )
}

#[test]
fn shfl_modes_clamp_and_predicate() {
    let e = emu();
    let run = |mode: &str, b: u32, c: u32| {
        let out = upload_u32(&e, &[7; 32]);
        launch(
            &e,
            &shfl_kernel(mode, b, c),
            "k",
            1,
            32,
            0,
            &[&out.to_le_bytes()],
        )
        .expect("shfl");
        download_u32(&e, out, 32)
    };
    // down by 3, clamp 31: lanes 29..31 keep their own value, predicate false.
    let d = run("down", 3, 0x1f);
    for lane in 0..32u32 {
        let want = if lane + 3 <= 31 {
            (lane + 3) * 10 + 1000
        } else {
            lane * 10
        };
        assert_eq!(d[lane as usize], want, "down lane {lane}");
    }
    // up by 2 with c = 0.
    let u = run("up", 2, 0);
    for lane in 0..32u32 {
        let want = if lane >= 2 {
            (lane - 2) * 10 + 1000
        } else {
            lane * 10
        };
        assert_eq!(u[lane as usize], want, "up lane {lane}");
    }
    // butterfly 5 within segments of 8 (c = 0x181f: segmask 0x18, clamp 31).
    let x = run("bfly", 5, 0x1f);
    for lane in 0..32u32 {
        assert_eq!(x[lane as usize], (lane ^ 5) * 10 + 1000, "bfly lane {lane}");
    }
    // idx 3 within sub-warps of 8: c = ((32-8) << 8) | 7.
    let i = run("idx", 3, ((32 - 8) << 8) | 7);
    for lane in 0..32u32 {
        assert_eq!(
            i[lane as usize],
            ((lane & !7) + 3) * 10 + 1000,
            "idx lane {lane}"
        );
    }
}

#[test]
fn funnel_shift() {
    let e = emu();
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .reg .b32 %r<8>;\n .reg .b64 %rd<2>;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, 0x89abcdef;\n mov.u32 %r2, 0x01234567;\n\
         shf.r.clamp.b32 %r3, %r1, %r2, 8;\n shf.l.wrap.b32 %r4, %r1, %r2, 36;\n\
         shf.r.clamp.b32 %r5, %r1, %r2, 40;\n shf.l.clamp.b32 %r6, %r1, %r2, 0;\n\
         st.global.v4.u32 [%rd1], {{%r3, %r4, %r5, %r6}};\n ret;\n}}\n"
    );
    let out = upload_u32(&e, &[0; 4]);
    launch(&e, &ptx, "k", 1, 1, 0, &[&out.to_le_bytes()]).expect("shf");
    assert_eq!(
        download_u32(&e, out, 4),
        vec![0x6789abcd, 0x12345678, 0x01234567, 0x01234567]
    );
}

#[test]
fn instruction_form_rules() {
    for f in [
        "ld.global.nc.v4.f32",
        "st.shared.v2.u32",
        "atom.shared.cas.b32",
        "setp.neu.f32",
        "shfl.sync.idx.b32",
        "bar.sync",
        "testp.notanumber.f64",
        "cvt.rzi.u16.bf16",
        "mul.rn.bf16x2",
        "vote.sync.ballot.b32",
        "atom.global.add.noftz.f16",
        "atom.shared.add.noftz.bf16x2",
        "ld.acquire.gpu.global.u64",
        "st.release.gpu.global.f32",
        "fence.acq_rel.gpu",
        "membar.gl",
        "bar.warp.sync",
        "cvt.rn.bf16x2.f32",
        "prmt.b32",
    ] {
        assert_eq!(super::check_instruction_form(f), Ok(()), "{f}");
    }
    for f in [
        "mul24.lo.u32",
        "atom.global.max.f32",
        "add.rn.xyz.f32",
        "shfl.bfly.b32",
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
        "atom.global.add.f16",
        "atom.global.add.noftz.f32",
        "atom.global.max.noftz.f16",
        "atom.global.and.noftz.b32",
        // ptxas rejects bf16 <-> 8-bit conversions (the emitter goes through f32).
        "cvt.rzi.u8.bf16",
    ] {
        assert!(
            super::check_instruction_form(f).is_err(),
            "{f} must have no rule"
        );
    }
}

#[test]
fn ldmatrix_plain_and_transposed() {
    let e = emu();
    let mut words = String::new();
    for k in 0..4 {
        words += &format!(
            " add.u32 %r2, %r1, {};\n add.u32 %r3, %r2, 1;\n shl.b32 %r3, %r3, 16;\n or.b32 %w{k}, %r2, %r3;\n",
            2 * k
        );
    }
    for trans in [false, true] {
        let t = if trans { ".trans" } else { "" };
        let ptx = format!(
            "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .shared .align 16 .b8 sm[512];\n\
             .reg .b32 %r<8>;\n .reg .b32 %w<4>;\n .reg .b32 %d<4>;\n .reg .b64 %rd<4>;\n\
             mov.u32 %r0, %tid.x;\n mul.lo.u32 %r1, %r0, 8;\n{words}\
             mov.u32 %r4, sm;\n shl.b32 %r5, %r0, 4;\n add.u32 %r4, %r4, %r5;\n\
             st.shared.v4.u32 [%r4], {{%w0, %w1, %w2, %w3}};\n bar.sync 0;\n\
             ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{%d0, %d1, %d2, %d3}}, [%r4];\n\
             ld.param.u64 %rd1, [out];\n mul.wide.u32 %rd2, %r0, 16;\n add.s64 %rd3, %rd1, %rd2;\n\
             st.global.v4.u32 [%rd3], {{%d0, %d1, %d2, %d3}};\n ret;\n}}\n"
        );
        let out = upload_u32(&e, &[0xDEAD_BEEF; 128]);
        launch(&e, &ptx, "k", 1, 32, 0, &[&out.to_le_bytes()]).expect("ldmatrix");
        let got = download_u32(&e, out, 128);
        for lane in 0..32u32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4u32 {
                let (e0, e1) = if trans {
                    ((i * 8 + 2 * t) * 8 + g, (i * 8 + 2 * t + 1) * 8 + g)
                } else {
                    let e0 = (i * 8 + g) * 8 + 2 * t;
                    (e0, e0 + 1)
                };
                assert_eq!(
                    got[(lane * 4 + i) as usize],
                    e0 | (e1 << 16),
                    "trans={trans} lane {lane} matrix {i}"
                );
            }
        }
    }
}

/// D = A * B + C through `mma_warp`, with the fragments placed by the formulas of the PTX ISA
/// written out independently here.
#[test]
fn mma_fragments_match_a_plain_matrix_product() {
    use super::tensor::{mma_warp, MmaInst, MmaKind};
    let ns = 16usize;
    let a_val = |i: usize, k: usize| ((i * 7 + k * 3) % 11) as f32 - 5.0;
    let b_val = |k: usize, j: usize| ((k * 5 + j * 2) % 9) as f32 - 4.0;
    let c_val = |i: usize, j: usize| (i * 8 + j) as f32 * 0.5;
    for (kind, k) in [
        (MmaKind::F16, 16usize),
        (MmaKind::BF16, 8),
        (MmaKind::Tf32, 8),
        (MmaKind::Tf32, 4),
        (MmaKind::Int8, 32),
    ] {
        let (na, nb) = super::tensor::operand_regs(k, kind).expect("shape");
        let m = MmaInst {
            k,
            kind,
            a_signed: true,
            b_signed: true,
            d: [0, 1, 2, 3],
            a: [4, 5, 6, 7],
            na,
            b: [8, 9],
            nb,
            c: [10, 11, 12, 13],
        };
        let enc = |x: f32| -> u64 {
            match kind {
                MmaKind::F16 => half::f16::from_f32(x).to_bits() as u64,
                MmaKind::BF16 => half::bf16::from_f32(x).to_bits() as u64,
                MmaKind::Tf32 => x.to_bits() as u64,
                MmaKind::Int8 => (x as i8 as u8) as u64,
            }
        };
        let mut regs = vec![0u64; 32 * ns];
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            let r = &mut regs[lane * ns..(lane + 1) * ns];
            for ri in 0..na {
                let row = if ri % 2 == 0 { g } else { g + 8 };
                r[4 + ri] = match kind {
                    MmaKind::Tf32 => enc(a_val(row, if ri < 2 { t } else { t + 4 })),
                    MmaKind::F16 | MmaKind::BF16 => {
                        let c0 = t * 2 + if ri < 2 { 0 } else { 8 };
                        enc(a_val(row, c0)) | enc(a_val(row, c0 + 1)) << 16
                    }
                    MmaKind::Int8 => {
                        let c0 = t * 4 + if ri < 2 { 0 } else { 16 };
                        (0..4).fold(0, |w, q| w | enc(a_val(row, c0 + q)) << (8 * q))
                    }
                };
            }
            for ri in 0..nb {
                r[8 + ri] = match kind {
                    MmaKind::Tf32 => enc(b_val(t + 4 * ri, g)),
                    MmaKind::F16 | MmaKind::BF16 => {
                        let k0 = t * 2 + 8 * ri;
                        enc(b_val(k0, g)) | enc(b_val(k0 + 1, g)) << 16
                    }
                    MmaKind::Int8 => {
                        let k0 = t * 4 + 16 * ri;
                        (0..4).fold(0, |w, q| w | enc(b_val(k0 + q, g)) << (8 * q))
                    }
                };
            }
            for ri in 0..4 {
                let (row, col) = (g + if ri < 2 { 0 } else { 8 }, t * 2 + ri % 2);
                r[10 + ri] = if kind == MmaKind::Int8 {
                    (c_val(row, col) as i32 * 2) as u32 as u64
                } else {
                    c_val(row, col).to_bits() as u64
                };
            }
        }
        mma_warp(&m, &mut regs, ns, 0);
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for ri in 0..4 {
                let (row, col) = (g + if ri < 2 { 0 } else { 8 }, t * 2 + ri % 2);
                let dot: f32 = (0..k).map(|x| a_val(row, x) * b_val(x, col)).sum();
                let got = regs[lane * ns + ri];
                if kind == MmaKind::Int8 {
                    assert_eq!(
                        got as u32 as i32,
                        dot as i32 + c_val(row, col) as i32 * 2,
                        "{kind:?} ({row},{col})"
                    );
                } else {
                    assert_eq!(
                        f32::from_bits(got as u32),
                        dot + c_val(row, col),
                        "{kind:?} k{k} ({row},{col})"
                    );
                }
            }
        }
    }
}

#[test]
fn matrix_instructions_decode() {
    for f in [
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cvt.rna.tf32.f32",
        "bar.red.popc.u32",
        "bar.red.or.pred",
        "bar.arrive",
        "barrier.sync.aligned",
    ] {
        assert_eq!(super::check_instruction_form(f), Ok(()), "{f}");
    }
    assert_eq!(
        super::tensor::to_tf32(0x3f80_1000),
        0x3f80_2000,
        "ties away from zero"
    );
    assert_eq!(super::tensor::to_tf32(0x3f80_0fff), 0x3f80_0000);
}

#[test]
fn cp_async_copies_and_zero_fills() {
    let e = emu();
    // Thread t copies words 4t..4t+3 into shared memory (the second half of the block with a
    // source size of 8 bytes, so words 2 and 3 are zero), then writes them back reversed.
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 src, .param .u64 dst)\n{{\n .shared .align 16 .b8 sm[256];\n\
         .reg .pred %p<2>;\n .reg .b32 %r<12>;\n .reg .b64 %rd<8>;\n\
         ld.param.u64 %rd1, [src];\n ld.param.u64 %rd2, [dst];\n mov.u32 %r0, %tid.x;\n\
         mul.wide.u32 %rd3, %r0, 16;\n add.s64 %rd4, %rd1, %rd3;\n\
         mov.u32 %r1, sm;\n shl.b32 %r2, %r0, 4;\n add.u32 %r1, %r1, %r2;\n\
         setp.lt.u32 %p1, %r0, 8;\n selp.u32 %r3, 16, 8, %p1;\n\
         cp.async.cg.shared.global [%r1], [%rd4], 16, %r3;\n cp.async.commit_group;\n cp.async.wait_group 0;\n\
         bar.sync 0;\n ld.shared.v4.u32 {{%r4, %r5, %r6, %r7}}, [%r1];\n add.s64 %rd5, %rd2, %rd3;\n\
         st.global.v4.u32 [%rd5], {{%r7, %r6, %r5, %r4}};\n ret;\n}}\n"
    );
    let src: Vec<u32> = (0..64).map(|i| i * 3 + 1).collect();
    let ps = upload_u32(&e, &src);
    let pd = upload_u32(&e, &[0xDEAD_BEEF; 64]);
    launch(
        &e,
        &ptx,
        "k",
        1,
        16,
        0,
        &[&ps.to_le_bytes(), &pd.to_le_bytes()],
    )
    .expect("cp.async");
    let got = download_u32(&e, pd, 64);
    for t in 0..16usize {
        for w in 0..4usize {
            let want = if t < 8 || w < 2 { src[4 * t + w] } else { 0 };
            assert_eq!(got[4 * t + 3 - w], want, "thread {t} word {w}");
        }
    }
}

/// Truncated and mutated PTX never panics the loader: it loads or fails with a log.
#[test]
fn malformed_ptx_is_an_error_not_a_panic() {
    let e = emu();
    let lines: Vec<&str> = SAXPY.lines().collect();
    for cut in 0..lines.len() {
        let text = lines[..cut].join("\n");
        let _ = e.load_ptx(&text);
        // Drop one line at a time.
        let mut dropped = lines.clone();
        dropped.remove(cut);
        let _ = e.load_ptx(&dropped.join("\n"));
    }
    for (from, to) in [
        ("%rd1", "%rd99"),
        ("[saxpy_param_0]", "[saxpy_param_0+-]"),
        (".reg .b32 %r<6>;", ".reg .b32 %r<4000000000>;"),
        ("bra $L__done", "bra"),
        ("fma.rn.f32 %f4, %f1, %f2, %f3", "fma.rn.f32 %f4"),
        ("setp.ge.u32 %p1, %r1, %r2", "setp.ge.u32"),
        ("st.global.f32 [%rd7], %f4", "st.global.v4.f32 [%rd7], %f4"),
        (".address_size 64", ".address_size 32"),
        ("{", "{{"),
        ("}", ""),
        ("ret;", "ret"),
        ("$L__done:", "$L__done"),
        ("0f", "0x"),
    ] {
        let text = SAXPY.replacen(from, to, 1);
        if let Ok(m) = e.load_ptx(&text) {
            let _ = e.function(m, "saxpy");
        }
    }
    let _ = e.load_ptx("\u{feff}\u{1F600} .entry");
    let _ = e.load_ptx("");
}

#[test]
fn an_endless_loop_trips_the_watchdog() {
    let e = Emulator::new(EmulatorConfig {
        max_thread_instructions: 10_000,
        threads: 1,
        ..EmulatorConfig::default()
    });
    let ptx = format!("{HEADER}.visible .entry spin()\n{{\n$L__top:\n    bra.uni $L__top;\n}}\n");
    let err = launch(&e, &ptx, "spin", 1, 1, 0, &[]).expect_err("endless");
    let msg = err.to_string();
    assert!(
        msg.contains("watchdog") && msg.contains("PTX line 7"),
        "{msg}"
    );
}

/// `fma`, `add`, `mul` and `sub` of f32 against Rust's correctly rounded f32 arithmetic on
/// random bit patterns (subnormals, infinities and NaNs included) and near-midpoint products.
#[test]
fn f32_arithmetic_matches_ieee_bit_for_bit() {
    let e = emu();
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 x)\n{{\n .reg .b32 %r<4>;\n .reg .f32 %f<8>;\n .reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [x];\n mov.u32 %r1, %tid.x;\n mov.u32 %r2, %ctaid.x;\n mad.lo.s32 %r3, %r2, 256, %r1;\n\
         mul.wide.u32 %rd2, %r3, 28;\n add.s64 %rd3, %rd1, %rd2;\n\
         ld.global.f32 %f1, [%rd3];\n ld.global.f32 %f2, [%rd3+4];\n ld.global.f32 %f3, [%rd3+8];\n\
         fma.rn.f32 %f4, %f1, %f2, %f3;\n add.f32 %f5, %f1, %f3;\n mul.rn.f32 %f6, %f1, %f2;\n sub.f32 %f7, %f2, %f3;\n\
         st.global.f32 [%rd3+12], %f4;\n st.global.f32 [%rd3+16], %f5;\n st.global.f32 [%rd3+20], %f6;\n st.global.f32 [%rd3+24], %f7;\n\
         ret;\n}}\n"
    );
    let n = 256 * 16;
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut words = Vec::with_capacity(n * 7);
    for i in 0..n {
        let (a, b, c) = match i % 4 {
            // Arbitrary bit patterns.
            0 => (next() as u32, next() as u32, next() as u32),
            // Ordinary magnitudes.
            1 => {
                let f = |r: u64| ((r % 2000) as f32 - 1000.0) / 37.0;
                (
                    f(next()).to_bits(),
                    f(next()).to_bits(),
                    f(next()).to_bits(),
                )
            }
            // Products that need every bit: (1 + u)(1 + v) + tiny.
            2 => {
                let u = 1.0 + (next() % (1 << 12)) as f32 * 2f32.powi(-12);
                let v = 1.0 + (next() % (1 << 12)) as f32 * 2f32.powi(-12);
                let t = (next() % 64) as i32;
                (
                    u.to_bits(),
                    v.to_bits(),
                    (2f32.powi(-40 - t) * if next() % 2 == 0 { 1.0 } else { -1.0 }).to_bits(),
                )
            }
            // Tiny values around the subnormal range.
            _ => (
                next() as u32 & 0x80ff_ffff,
                next() as u32 & 0x80ff_ffff | 0x0080_0000,
                next() as u32 & 0x80ff_ffff,
            ),
        };
        words.extend_from_slice(&[a, b, c, 0, 0, 0, 0]);
    }
    let p = upload_u32(&e, &words);
    launch(&e, &ptx, "k", 16, 256, 0, &[&p.to_le_bytes()]).expect("f32 ops");
    let got = download_u32(&e, p, n * 7);
    let canon = |x: f32| if x.is_nan() { 0x7fff_ffff } else { x.to_bits() };
    for i in 0..n {
        let w = &got[i * 7..i * 7 + 7];
        let (a, b, c) = (
            f32::from_bits(w[0]),
            f32::from_bits(w[1]),
            f32::from_bits(w[2]),
        );
        assert_eq!(w[3], canon(a.mul_add(b, c)), "fma {a:e} {b:e} {c:e}");
        assert_eq!(w[4], canon(a + c), "add {a:e} {c:e}");
        assert_eq!(w[5], canon(a * b), "mul {a:e} {b:e}");
        assert_eq!(w[6], canon(b - c), "sub {b:e} {c:e}");
    }
}

#[test]
fn dot_products_and_byte_counts() {
    let e = emu();
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .reg .b32 %r<8>;\n .reg .b64 %rd<2>;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, 0x80ff0201;\n mov.u32 %r2, 0x03fe7f05;\n\
         dp4a.s32.s32 %r3, %r1, %r2, 10;\n dp4a.u32.u32 %r4, %r1, %r2, 0;\n dp4a.s32.u32 %r5, %r1, %r2, -1;\n\
         dp2a.hi.s32.s32 %r6, %r1, %r2, 0;\n\
         st.global.v4.u32 [%rd1], {{%r3, %r4, %r5, %r6}};\n\
         mov.u32 %r7, %dynamic_smem_size;\n st.global.u32 [%rd1+16], %r7;\n ret;\n}}\n"
    );
    let out = upload_u32(&e, &[0; 5]);
    launch(&e, &ptx, "k", 1, 1, 96, &[&out.to_le_bytes()]).expect("dp4a");
    let got = download_u32(&e, out, 5);
    let a = [0x01i64, 0x02, 0xff, 0x80];
    let b = [0x05i64, 0x7f, 0xfe, 0x03];
    let s = |x: i64| x as u8 as i8 as i64;
    let ss: i64 = (0..4).map(|i| s(a[i]) * s(b[i])).sum::<i64>() + 10;
    let uu: i64 = (0..4).map(|i| a[i] * b[i]).sum();
    let su: i64 = (0..4).map(|i| s(a[i]) * b[i]).sum::<i64>() - 1;
    // dp2a.hi: halves of a (0x0201, 0x80ff as s16) times bytes 2 and 3 of b (0xfe, 0x03 as s8).
    let d2 = 0x0201i64 * -2 + (0x80ffu16 as i16 as i64) * 3;
    assert_eq!(
        got[..4],
        [
            ss as i32 as u32,
            uu as u32,
            su as i32 as u32,
            d2 as i32 as u32
        ]
    );
    assert_eq!(got[4], 96);
}

#[test]
fn compute_capabilities_parse() {
    assert_eq!(super::parse_cc("9.0"), Some((9, 0)));
    assert_eq!(super::parse_cc("86"), Some((8, 6)));
    assert_eq!(super::parse_cc("x"), None);
    assert_eq!(super::parse_cc("9\u{e9}"), None);
    assert_eq!(super::parse_cc("9.10"), None);
}

#[test]
fn byte_counts_parse() {
    assert_eq!(super::parse_bytes("1073741824"), Some(1 << 30));
    assert_eq!(super::parse_bytes("512M"), Some(512 << 20));
    assert_eq!(super::parse_bytes("2GiB"), Some(2 << 30));
    assert_eq!(super::parse_bytes("64k"), Some(64 << 10));
    assert_eq!(super::parse_bytes("lots"), None);
    assert_eq!(super::parse_bytes("12X"), None);
}

/// Local memory through its symbol, through a generic address (`cvta.local`), and a shared
/// variable reached through a generic address (`cvta.shared`).
#[test]
fn local_and_generic_addressing() {
    let e = emu();
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .local .align 8 .b8 depot[16];\n .shared .align 4 .b8 sm[128];\n\
         .reg .b32 %r<8>;\n .reg .b64 %rd<8>;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, %tid.x;\n\
         mov.u64 %rd2, depot;\n cvta.local.u64 %rd3, %rd2;\n mul.lo.u32 %r2, %r1, 7;\n st.u32 [%rd3+4], %r2;\n\
         ld.local.u32 %r3, [depot+4];\n\
         mov.u64 %rd4, sm;\n cvta.shared.u64 %rd5, %rd4;\n mul.wide.u32 %rd6, %r1, 4;\n add.s64 %rd5, %rd5, %rd6;\n\
         st.u32 [%rd5], %r3;\n bar.sync 0;\n xor.b32 %r4, %r1, 1;\n shl.b32 %r5, %r4, 2;\n mov.u32 %r6, sm;\n add.u32 %r6, %r6, %r5;\n\
         ld.shared.u32 %r7, [%r6];\n add.s64 %rd7, %rd1, %rd6;\n st.global.u32 [%rd7], %r7;\n ret;\n}}\n"
    );
    let out = upload_u32(&e, &[0; 32]);
    launch(&e, &ptx, "k", 1, 32, 0, &[&out.to_le_bytes()]).expect("addressing");
    let got = download_u32(&e, out, 32);
    for t in 0..32u32 {
        assert_eq!(got[t as usize], (t ^ 1) * 7, "thread {t}");
    }
    // Past the end of the 16-byte local depot.
    let bad = ptx.replace("st.u32 [%rd3+4]", "st.u32 [%rd3+16]");
    let err = launch(&e, &bad, "k", 1, 32, 0, &[&out.to_le_bytes()]).expect_err("local overrun");
    assert!(
        err.to_string().contains("out-of-bounds local access"),
        "{err}"
    );
}

/// `bar.red.popc` / `.and` / `.or` reduce a predicate over the block; `bar.arrive` lets a
/// producer half signal a consumer half that waits with `bar.sync` on the same named barrier.
#[test]
fn barrier_reductions_and_arrive() {
    let e = emu();
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .shared .align 4 .b8 sm[256];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<12>;\n .reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, %tid.x;\n\
         rem.u32 %r2, %r1, 3;\n setp.eq.u32 %p1, %r2, 0;\n\
         bar.red.popc.u32 %r3, 0, %p1;\n\
         bar.red.and.pred %p2, 0, %p1;\n selp.u32 %r4, 1, 0, %p2;\n\
         bar.red.or.pred %p3, 0, !%p1;\n selp.u32 %r5, 1, 0, %p3;\n\
         setp.lt.u32 %p1, %r1, 64;\n mov.u32 %r6, sm;\n\
         @!%p1 bra $L__consumer;\n\
         shl.b32 %r7, %r1, 2;\n add.u32 %r8, %r6, %r7;\n mul.lo.u32 %r9, %r1, 5;\n st.shared.u32 [%r8], %r9;\n\
         bar.arrive 1, 128;\n mov.u32 %r10, 0;\n bra.uni $L__out;\n\
         $L__consumer:\n bar.sync 1, 128;\n sub.u32 %r7, %r1, 64;\n shl.b32 %r7, %r7, 2;\n add.u32 %r8, %r6, %r7;\n\
         ld.shared.u32 %r10, [%r8];\n\
         $L__out:\n mul.wide.u32 %rd2, %r1, 16;\n add.s64 %rd3, %rd1, %rd2;\n\
         st.global.v4.u32 [%rd3], {{%r3, %r4, %r5, %r10}};\n ret;\n}}\n"
    );
    let out = upload_u32(&e, &[0xDEAD_BEEF; 512]);
    launch(&e, &ptx, "k", 1, 128, 0, &[&out.to_le_bytes()]).expect("bar.red / bar.arrive");
    let got = download_u32(&e, out, 512);
    let multiples_of_3 = (0..128).filter(|t| t % 3 == 0).count() as u32;
    for t in 0..128u32 {
        let w = &got[t as usize * 4..t as usize * 4 + 4];
        assert_eq!(w[..3], [multiples_of_3, 0, 1], "thread {t}");
        let want = if t < 64 { 0 } else { (t - 64) * 5 };
        assert_eq!(w[3], want, "thread {t}");
    }
}

/// xorshift64 for the rounding tests' inputs.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Equal bits, or both NaN (the device's NaN is the canonical one, the reference's quiet NaN
/// may carry a payload).
fn same_half(fmt: round::Format, got: u64, want: u64) -> bool {
    got == want || (fmt.to_f64(got).is_nan() && fmt.to_f64(want).is_nan())
}

/// Operands `(a, b, c)` of a 16-bit fma in `fmt`: arbitrary bit patterns, moderate values,
/// products next to a midpoint of the format with an addend that lands the sum on it or one
/// addend ulp either side (where rounding the sum to f32 first would decide the tie), and tiny
/// values around the subnormals.
fn half_fma_operands(fmt: round::Format, i: usize, seed: &mut u64) -> [u16; 3] {
    use round::Rounding::{NearestEven, TowardZero};
    let r = |s: &mut u64| xorshift(s) as u16;
    let rn = |x: f64| round::round_f64(x, fmt, NearestEven) as u16;
    let sign = |s: &mut u64| if xorshift(s) % 2 == 0 { 0 } else { 0x8000u16 };
    // Normal values of magnitude around 1 (exponent field within 4 of the bias).
    let near_one = |s: &mut u64| {
        let m = fmt.fraction_bits();
        let bias = (1u64 << (fmt.exponent_bits() - 1)) - 1;
        let e = bias - 4 + xorshift(s) % 8;
        ((e << m) | (xorshift(s) & ((1 << m) - 1))) as u16 | sign(s)
    };
    match i % 4 {
        0 => [r(seed), r(seed), r(seed)],
        1 => {
            let mut v = || rn((xorshift(seed) % 4001) as f64 / 250.0 - 8.0);
            [v(), v(), v()]
        }
        2 if xorshift(seed) % 2 == 0 => {
            // A product exactly on a midpoint: an odd integer of m + 2 bits that has a factor
            // (the factors have at most m + 1 bits), scaled to [2, 8); the addend a tiny
            // fraction of it (to be seen through f32 it would have to be 2^-25 of it or more).
            let m = fmt.fraction_bits();
            let (f1, f2) = loop {
                let n = (1u64 << (m + 1)) | (xorshift(seed) & ((1 << (m + 1)) - 1)) | 1;
                if let Some(f) = (3..)
                    .step_by(2)
                    .take_while(|f| f * f <= n)
                    .find(|f| n % f == 0)
                {
                    break (f, n / f);
                }
            };
            let unit = |f: u64| f as f64 / (1u64 << (63 - f.leading_zeros())) as f64;
            let (a, b) = (rn(2.0 * unit(f1)) | sign(seed), rn(unit(f2)) | sign(seed));
            let p = fmt.to_f64(a.into()) * fmt.to_f64(b.into());
            let tiny = p.abs() * 2f64.powi(-26 - (xorshift(seed) % 12) as i32);
            [a, b, rn(tiny) | sign(seed)]
        }
        2 => {
            let (a, b) = (near_one(seed), near_one(seed));
            let p = fmt.to_f64(a.into()) * fmt.to_f64(b.into());
            // The neighbours of p's magnitude and their midpoint, with p's sign.
            let lower = round::round_f64(p.abs(), fmt, TowardZero);
            let mid = (fmt.to_f64(lower) + fmt.to_f64(lower + 1)) / 2.0 * p.signum();
            let d = mid - p;
            let c = if d == 0.0 {
                // On the midpoint already: the least subnormal either way, or zero.
                [0x0001, 0x8001, 0x0000][(xorshift(seed) % 3) as usize]
            } else {
                let c0 = rn(d);
                match xorshift(seed) % 3 {
                    0 => c0,
                    1 if c0 & 0x7fff != 0 => c0 - 1,
                    _ => c0 + 1,
                }
            };
            [a, b, c]
        }
        _ => {
            // Exponent fields 0..8: subnormals and the first normal binades.
            let t = |s: &mut u64| (xorshift(s) & ((8 << fmt.fraction_bits()) - 1)) as u16 | sign(s);
            [t(seed), near_one(seed), t(seed)]
        }
    }
}

/// `fma.rn.f16`, `fma.rn.f16x2`, `fma.rn.bf16` and `fma.rn.bf16x2` against the CPU reference
/// (the exact product, a two-sum, one correct rounding), bit for bit, on inputs that include
/// sums next to and on midpoints of the format; the packed forms take a different case in each
/// lane.
#[test]
fn half_fma_matches_the_cpu_reference_bit_for_bit() {
    let e = emu();
    for (t, fmt) in [("f16", round::Format::F16), ("bf16", round::Format::BF16)] {
        let ptx = format!(
            "{HEADER}.visible .entry k(.param .u64 x)\n{{\n .reg .b16 %h<8>;\n .reg .b32 %r<8>;\n .reg .b64 %rd<4>;\n\
             ld.param.u64 %rd1, [x];\n mov.u32 %r1, %tid.x;\n mov.u32 %r2, %ctaid.x;\n mad.lo.s32 %r3, %r2, 256, %r1;\n\
             mul.wide.u32 %rd2, %r3, 20;\n add.s64 %rd3, %rd1, %rd2;\n\
             ld.global.b32 %r4, [%rd3];\n ld.global.b32 %r5, [%rd3+4];\n ld.global.b32 %r6, [%rd3+8];\n\
             fma.rn.{t}x2 %r7, %r4, %r5, %r6;\n st.global.b32 [%rd3+12], %r7;\n\
             mov.b32 {{%h1, %h2}}, %r4;\n mov.b32 {{%h3, %h4}}, %r5;\n mov.b32 {{%h5, %h6}}, %r6;\n\
             fma.rn.{t} %h7, %h1, %h3, %h5;\n st.global.b16 [%rd3+16], %h7;\n\
             fma.rn.{t} %h7, %h2, %h4, %h6;\n st.global.b16 [%rd3+18], %h7;\n\
             ret;\n}}\n"
        );
        let n = 256 * 32;
        let mut seed = 0x6a09_e667_f3bc_c908u64 ^ fmt.fraction_bits() as u64;
        let mut words = Vec::with_capacity(n * 5);
        let mut cases = Vec::with_capacity(n);
        for i in 0..n {
            let lo = half_fma_operands(fmt, i, &mut seed);
            let hi = half_fma_operands(fmt, i + 1 + (xorshift(&mut seed) % 3) as usize, &mut seed);
            for k in 0..3 {
                words.push(lo[k] as u32 | (hi[k] as u32) << 16);
            }
            words.extend_from_slice(&[0xdead_beef, 0xdead_beef]);
            cases.push((lo, hi));
        }
        let p = upload_u32(&e, &words);
        launch(&e, &ptx, "k", 32, 256, 0, &[&p.to_le_bytes()]).expect("half fma");
        let got = download_u32(&e, p, n * 5);
        let reference = |[a, b, c]: [u16; 3]| -> u64 {
            match fmt {
                round::Format::F16 => {
                    let h = half::f16::from_bits;
                    round::f16_mul_add(h(a), h(b), h(c)).to_bits() as u64
                }
                _ => {
                    let h = half::bf16::from_bits;
                    round::bf16_mul_add(h(a), h(b), h(c)).to_bits() as u64
                }
            }
        };
        let mut near_ties = 0;
        for (i, (lo, hi)) in cases.iter().enumerate() {
            let w = &got[i * 5..i * 5 + 5];
            for (lane, case, packed, scalar) in [
                ("lo", lo, w[3] & 0xffff, w[4] & 0xffff),
                ("hi", hi, w[3] >> 16, w[4] >> 16),
            ] {
                let want = reference(*case);
                let [a, b, c] = case.map(|v| fmt.to_f64(v.into()));
                let what =
                    format!("{t} {lane} {a:e} * {b:e} + {c:e} ({case:04x?}): want {want:#06x}");
                assert!(
                    same_half(fmt, packed as u64, want),
                    "fma.rn.{t}x2 {what}, got {packed:#06x}"
                );
                assert!(
                    same_half(fmt, scalar as u64, want),
                    "fma.rn.{t} {what}, got {scalar:#06x}"
                );
                // Count the sums that a rounding through f32 would get wrong.
                let through_f32 = ((a * b + c) as f32) as f64;
                if round::round_f64(through_f32, fmt, round::Rounding::NearestEven) != want
                    && !fmt.to_f64(want).is_nan()
                {
                    near_ties += 1;
                }
            }
        }
        assert!(
            near_ties > 100,
            "{t}: only {near_ties} cases where two roundings differ"
        );
    }
}

/// `cvt.rn.f16.f64` and `cvt.rn.bf16.f64` (sm_90) against the CPU reference on random f64
/// values, on the midpoints of the 16-bit formats and one f64 ulp either side, and on values
/// whose rounding through f32 lands on a midpoint.
#[test]
fn cvt_from_f64_to_halves_rounds_once() {
    let e = Emulator::new(EmulatorConfig {
        threads: 2,
        memory_capacity: 64 << 20,
        compute_capability: (9, 0),
        ..EmulatorConfig::default()
    });
    let ptx = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 x)\n{\n .reg .b16 %h<4>;\n .reg .b32 %r<4>;\n .reg .f64 %fd<2>;\n .reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [x];\n mov.u32 %r1, %tid.x;\n mov.u32 %r2, %ctaid.x;\n mad.lo.s32 %r3, %r2, 256, %r1;\n\
         mul.wide.u32 %rd2, %r3, 16;\n add.s64 %rd3, %rd1, %rd2;\n ld.global.f64 %fd1, [%rd3];\n\
         cvt.rn.f16.f64 %h1, %fd1;\n cvt.rn.bf16.f64 %h2, %fd1;\n\
         st.global.b16 [%rd3+8], %h1;\n st.global.b16 [%rd3+10], %h2;\n ret;\n}\n";
    let n = 256 * 16;
    let mut seed = 0xbb67_ae85_84ca_a73bu64;
    let mut xs = vec![
        1.0 + 2f64.powi(-8) + 2f64.powi(-30),
        0.7692870795726776,
        65519.99,
        65520.0,
        -65520.0,
        f64::MAX,
        2f64.powi(-25),
        2f64.powi(-25) + 2f64.powi(-80),
        f64::NAN,
        f64::NEG_INFINITY,
        -0.0,
    ];
    while xs.len() < n {
        let fmt = if xs.len() % 2 == 0 {
            round::Format::F16
        } else {
            round::Format::BF16
        };
        let vb = xorshift(&mut seed) % (fmt.infinity() - 1);
        let mid = (fmt.to_f64(vb) + fmt.to_f64(vb + 1)) / 2.0;
        let mid = if xorshift(&mut seed) % 2 == 0 {
            mid
        } else {
            -mid
        };
        let x = match xorshift(&mut seed) % 4 {
            0 => f64::from_bits(xorshift(&mut seed)),
            1 => mid,
            2 => f64::from_bits(mid.to_bits() + 1),
            _ => f64::from_bits(mid.to_bits() - 1),
        };
        xs.push(x);
    }
    let words: Vec<u32> = xs
        .iter()
        .flat_map(|x| {
            let b = x.to_bits();
            [b as u32, (b >> 32) as u32, 0xdead_beef, 0xdead_beef]
        })
        .collect();
    let p = upload_u32(&e, &words);
    launch(&e, ptx, "k", 16, 256, 0, &[&p.to_le_bytes()]).expect("cvt from f64");
    let got = download_u32(&e, p, n * 4);
    let mut double_rounded = 0;
    for (i, &x) in xs.iter().enumerate() {
        let (h, b) = (got[i * 4 + 2] & 0xffff, got[i * 4 + 2] >> 16);
        let wh = round::f16_from_f64(x).to_bits() as u64;
        let wb = round::bf16_from_f64(x).to_bits() as u64;
        assert!(
            same_half(round::Format::F16, h as u64, wh),
            "cvt.rn.f16.f64 {x:e}: {h:#06x} vs {wh:#06x}"
        );
        assert!(
            same_half(round::Format::BF16, b as u64, wb),
            "cvt.rn.bf16.f64 {x:e}: {b:#06x} vs {wb:#06x}"
        );
        if !x.is_nan()
            && (half::f16::from_f64(x).to_bits() as u64 != wh
                || half::bf16::from_f64(x).to_bits() as u64 != wb)
        {
            double_rounded += 1;
        }
    }
    assert!(
        double_rounded > 100,
        "only {double_rounded} inputs that two roundings get wrong"
    );
}

/// Directed roundings and signs of zero where an f64 intermediate overflows, underflows or
/// rounds a second time; conversions from 64-bit integers rounded once.
#[test]
fn directed_rounding_edges_and_integer_conversions() {
    let d = |x: f64| x.to_bits();
    let f = |x: f32| x.to_bits() as u64;
    let max = f64::MAX;
    let least = f64::from_bits(1);
    let bin = |op, fmt, rnd, a, b| num::fbin(op, fmt, fm(rnd), a, b);
    // f64 overflow: toward zero stays finite.
    assert_eq!(bin(FOp2::Add, Fmt::F64, Rnd::Rz, d(max), d(max)), d(max));
    assert_eq!(
        bin(FOp2::Add, Fmt::F64, Rnd::Rp, d(max), d(max)),
        d(f64::INFINITY)
    );
    assert_eq!(bin(FOp2::Mul, Fmt::F64, Rnd::Rz, d(max), d(2.0)), d(max));
    assert_eq!(bin(FOp2::Mul, Fmt::F64, Rnd::Rp, d(-max), d(2.0)), d(-max));
    assert_eq!(bin(FOp2::Div, Fmt::F64, Rnd::Rz, d(max), d(0.5)), d(max));
    assert_eq!(
        bin(FOp2::Div, Fmt::F64, Rnd::Rm, d(max), d(-0.5)),
        d(f64::NEG_INFINITY)
    );
    // f64 underflow: an inexact tiny result rounds away from zero under .rp.
    assert_eq!(
        bin(FOp2::Mul, Fmt::F64, Rnd::Rp, d(1e-200), d(1e-200)),
        d(least)
    );
    assert_eq!(
        bin(FOp2::Mul, Fmt::F64, Rnd::Rz, d(1e-200), d(1e-200)),
        d(0.0)
    );
    assert_eq!(
        bin(FOp2::Mul, Fmt::F64, Rnd::Rm, d(-1e-200), d(1e-200)),
        d(-least)
    );
    assert_eq!(
        bin(FOp2::Div, Fmt::F64, Rnd::Rp, d(1e-300), d(1e300)),
        d(least)
    );
    assert_eq!(bin(FOp2::Div, Fmt::F64, Rnd::Rz, d(least), d(3.0)), d(0.0));
    assert_eq!(
        bin(FOp2::Div, Fmt::F64, Rnd::Rp, d(least), d(3.0)),
        d(least)
    );
    // Subnormal quotients in f64: the remainder decides.
    let q = 3.0 * least;
    assert_eq!(bin(FOp2::Div, Fmt::F64, Rnd::Rz, d(q), d(2.0)), d(least));
    assert_eq!(
        bin(FOp2::Div, Fmt::F64, Rnd::Rp, d(q), d(2.0)),
        d(2.0 * least)
    );
    // Square roots in f64 take the direction.
    let s = |rnd, x: f64| f64::from_bits(num::fun(FOp1::Sqrt, Fmt::F64, fm(rnd), d(x)));
    assert_eq!(s(Rnd::Rn, 2.0), 2f64.sqrt());
    assert!(s(Rnd::Rp, 2.0) > s(Rnd::Rz, 2.0));
    assert_eq!(s(Rnd::Rz, 2.0), s(Rnd::Rm, 2.0));
    assert_eq!(s(Rnd::Rp, 4.0), 2.0);
    assert_eq!(s(Rnd::Rz, 4.0), 2.0);
    assert!(s(Rnd::Rp, 3.0 * least) > s(Rnd::Rm, 3.0 * least));
    // f64 fma in every direction.
    let fma = |rnd, a: f64, b: f64, c: f64| {
        f64::from_bits(num::ffma(Fmt::F64, fm(rnd), d(a), d(b), d(c)))
    };
    assert_eq!(fma(Rnd::Rp, 1.0, 1.0, 1e-300), 1.0 + f64::EPSILON);
    assert_eq!(fma(Rnd::Rz, 1.0, 1.0, -1e-300), 1.0 - f64::EPSILON / 2.0);
    assert_eq!(fma(Rnd::Rz, max, 2.0, -max), max);
    // Exact zeros: +0 + +0 is +0 in every direction, x - x is -0 only rounding down.
    for rnd in [Rnd::Rn, Rnd::Rz, Rnd::Rm, Rnd::Rp] {
        assert_eq!(bin(FOp2::Add, Fmt::F32, rnd, f(0.0), f(0.0)), 0, "{rnd:?}");
        assert_eq!(
            bin(FOp2::Add, Fmt::F32, rnd, f(-0.0), f(-0.0)),
            f(-0.0),
            "{rnd:?}"
        );
        let want = if rnd == Rnd::Rm { f(-0.0) } else { 0 };
        assert_eq!(
            bin(FOp2::Sub, Fmt::F32, rnd, f(1.5), f(1.5)),
            want,
            "{rnd:?}"
        );
        assert_eq!(
            num::ffma(Fmt::F32, fm(rnd), f(1.5), f(2.0), f(-3.0)),
            want,
            "{rnd:?}"
        );
        assert_eq!(
            num::ffma(Fmt::F64, fm(rnd), d(1.5), d(2.0), d(-3.0)),
            if rnd == Rnd::Rm { d(-0.0) } else { 0 },
            "{rnd:?}"
        );
    }
    // f32 fma whose f64 sum would be rounded twice: (1 + 2^-12)^2 + 2^-70 in every direction.
    let x = 1.0 + 2f32.powi(-12);
    let exact_above = 1.0 + 2f32.powi(-11) + 2f32.powi(-23);
    assert_eq!(
        num::ffma(Fmt::F32, fm(Rnd::Rp), f(x), f(x), f(2f32.powi(-70))),
        f(exact_above)
    );
    assert_eq!(
        num::ffma(Fmt::F32, fm(Rnd::Rz), f(x), f(x), f(2f32.powi(-70))),
        f(1.0 + 2f32.powi(-11))
    );
    assert_eq!(
        num::ffma(Fmt::F32, fm(Rnd::Rm), f(x), f(x), f(-2f32.powi(-70))),
        f(1.0 + 2f32.powi(-11))
    );
    // 64-bit integers: one rounding of the exact value, never through f64.
    let hard: [u64; 4] = [
        (1 << 60) + (1 << 36) + 1,
        (1 << 63) + (1 << 39) + 1,
        u64::MAX,
        (1 << 62) + (1 << 52) + 1,
    ];
    for v in hard {
        assert_eq!(cvt_plain(Ty::F32, Ty::U64, Rnd::Rn, v), f(v as f32), "{v}");
        assert_eq!(
            cvt_plain(Ty::F32, Ty::S64, Rnd::Rn, (v >> 1) | 1),
            f(((v >> 1) | 1) as f32),
            "{v}"
        );
        let neg = (-(((v >> 1) | 1) as i64)) as u64;
        assert_eq!(
            cvt_plain(Ty::F32, Ty::S64, Rnd::Rn, neg),
            f(-(((v >> 1) | 1) as f32)),
            "{v}"
        );
        let wb = round::bf16_from_i128(v.into()).to_bits() as u64;
        assert_eq!(cvt_plain(Ty::BF16, Ty::U64, Rnd::Rn, v), wb, "{v}");
        assert_eq!(cvt_plain(Ty::F16, Ty::U64, Rnd::Rz, v), 0x7bff, "{v}");
        assert_eq!(cvt_plain(Ty::F16, Ty::U64, Rnd::Rn, v), 0x7c00, "{v}");
    }
    // 2^60 + 2^52 + 1 in bf16: just above a tie, up (as f64 it would be the tie, then even).
    let v = (1u64 << 60) + (1 << 52) + 1;
    assert_eq!(
        half::bf16::from_bits(cvt_plain(Ty::BF16, Ty::U64, Rnd::Rn, v) as u16).to_f64(),
        2f64.powi(60) + 2f64.powi(53)
    );
}

#[test]
fn half_atomics_round_once_and_ordered_accesses_fence() {
    let e = emu();
    // Thread t adds b[t] to the f16 at a[t] (returning the old value to old[t]), then adds the
    // pair b2[t] to the bf16x2 at c[t]; the fourth word goes through an acquire load, a fence
    // and a release store.
    let ptx = format!(
        "{HEADER}.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u64 old)\n{{\n\
         .reg .b16 %rs<4>;\n .reg .b32 %r<8>;\n .reg .b64 %rd<16>;\n\
         ld.param.u64 %rd1, [a];\n ld.param.u64 %rd2, [b];\n ld.param.u64 %rd3, [c];\n\
         ld.param.u64 %rd4, [d];\n ld.param.u64 %rd5, [old];\n mov.u32 %r1, %tid.x;\n\
         mul.wide.u32 %rd6, %r1, 2;\n mul.wide.u32 %rd7, %r1, 4;\n\
         add.u64 %rd8, %rd1, %rd6;\n add.u64 %rd9, %rd2, %rd6;\n add.u64 %rd10, %rd3, %rd7;\n\
         add.u64 %rd11, %rd5, %rd6;\n\
         ld.global.u16 %rs1, [%rd9];\n atom.global.add.noftz.f16 %rs2, [%rd8], %rs1;\n\
         st.global.u16 [%rd11], %rs2;\n\
         mov.b32 %r2, {{%rs1, %rs1}};\n atom.global.add.noftz.bf16x2 %r3, [%rd10], %r2;\n\
         ld.acquire.gpu.global.u32 %r4, [%rd4];\n fence.sc.gpu;\n membar.cta;\n add.u32 %r5, %r4, %r1;\n\
         st.release.gpu.global.u32 [%rd4+4], %r5;\n ret;\n}}\n"
    );
    // f16: a tie (1 + 2^-11 -> 1), above the tie, subnormals kept (no flush), an overflow.
    let a: [u16; 4] = [0x3c00, 0x3c00, 0x0001, 0x7bff];
    let b: [u16; 4] = [0x1000, 0x1001, 0x0001, 0x7bff];
    let c: [u32; 4] = [0x3f80_3f80, 0x0001_8001, 0x4000_c000, 0x7f7f_ff7f];
    let pack16 = |v: &[u16]| -> Vec<u32> {
        v.chunks(2)
            .map(|p| p[0] as u32 | (p[1] as u32) << 16)
            .collect()
    };
    let pa = upload_u32(&e, &pack16(&a));
    let pb = upload_u32(&e, &pack16(&b));
    let pc = upload_u32(&e, &c);
    let pd = upload_u32(&e, &[40, 0]);
    let po = upload_u32(&e, &[0xdead_beef; 2]);
    let args = [pa, pb, pc, pd, po].map(u64::to_le_bytes);
    launch(&e, &ptx, "k", 1, 4, 0, &args.each_ref().map(|a| &a[..])).expect("half atomics");
    let unpack16 = |w: Vec<u32>| -> Vec<u16> {
        w.iter()
            .flat_map(|x| [*x as u16, (*x >> 16) as u16])
            .collect()
    };
    let got_a = unpack16(download_u32(&e, pa, 2));
    let want_a: Vec<u16> = (0..4)
        .map(|i| {
            let s = half::f16::from_bits(a[i]).to_f64() + half::f16::from_bits(b[i]).to_f64();
            half::f16::from_f64(s).to_bits()
        })
        .collect();
    assert_eq!(got_a, want_a);
    assert_eq!(want_a[..3], [0x3c00, 0x3c01, 0x0002]);
    assert_eq!(unpack16(download_u32(&e, po, 2)), a.to_vec());
    let got_c = download_u32(&e, pc, 4);
    for i in 0..4 {
        let lane = |w: u32, k: u32| half::bf16::from_bits((w >> (16 * k)) as u16).to_f64();
        let add = half::bf16::from_bits(b[i]).to_f64();
        for k in 0..2 {
            let want = half::bf16::from_f64(lane(c[i], k) + add);
            assert_eq!(
                lane(got_c[i], k).to_bits(),
                want.to_f64().to_bits(),
                "c[{i}] lane {k}"
            );
        }
    }
    // The last thread's release store wins; every thread read 40.
    assert_eq!(download_u32(&e, pd, 2), vec![40, 43]);
}

/// Each thread writes its shared word, runs `sync`, reads the word of thread `t ^ flip` and
/// writes it to `out[t]`, runs `sync`, writes that word; then, after a block barrier, every
/// thread reads word 0, runs `sync`, and thread 0 writes word 0.
fn warp_exchange_ptx(sync: &str, flip: u32) -> String {
    format!(
        "{HEADER}.visible .entry k(.param .u64 out)\n{{\n .reg .pred %p<2>;\n .reg .b32 %r<8>;\n .reg .b64 %rd<4>;\n\
         .shared .align 4 .b8 s[256];\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n\
         mov.u32 %r3, s;\n add.u32 %r4, %r3, %r2;\n st.shared.u32 [%r4], %r1;\n {sync}\n\
         xor.b32 %r5, %r1, {flip};\n shl.b32 %r5, %r5, 2;\n add.u32 %r5, %r3, %r5;\n\
         ld.shared.u32 %r6, [%r5];\n {sync}\n st.shared.u32 [%r5], %r1;\n\
         mul.wide.u32 %rd2, %r1, 4;\n add.u64 %rd3, %rd1, %rd2;\n st.global.u32 [%rd3], %r6;\n\
         bar.sync 0;\n ld.shared.u32 %r7, [%r3];\n {sync}\n setp.eq.u32 %p1, %r1, 0;\n\
         @%p1 st.shared.u32 [%r3], %r7;\n ret;\n}}\n"
    )
}

#[test]
fn warp_barriers_order_shared_accesses_within_their_warp() {
    let e = emu();
    let out = upload_u32(&e, &[u32::MAX; 64]);
    let run_in = |sync: &str, flip: u32, threads: u32| {
        launch(
            &e,
            &warp_exchange_ptx(sync, flip),
            "k",
            1,
            threads,
            0,
            &[&out.to_le_bytes()],
        )
    };
    let run = |sync: &str, flip: u32| run_in(sync, flip, 64);
    let race = |r: Result<()>| match r {
        // Threads run in order: the first reads a word not yet written, a later one a word
        // written with no barrier in between.
        Err(Error::Emulator(em)) => assert!(
            em.message.contains("shared memory data race")
                || em.message.contains("uninitialized shared memory read"),
            "{}",
            em.message
        ),
        other => panic!("expected a race, got {other:?}"),
    };
    run_in("bar.warp.sync -1;", 1, 32).expect("a full-warp barrier orders the exchange");
    let want: Vec<u32> = (0..32).map(|t| t ^ 1).collect();
    assert_eq!(download_u32(&e, out, 32), want);
    // Word 0 is read by both warps: a warp barrier does not order the second warp's reads
    // before thread 0's write.
    match run("bar.warp.sync -1;", 1) {
        Err(Error::Emulator(em)) => assert!(
            em.message
                .contains("which other threads read with no barrier"),
            "{}",
            em.message
        ),
        other => panic!("expected a race, got {other:?}"),
    }
    // No barrier, or a warp barrier between threads of different warps: races.
    race(run("membar.cta;", 1));
    race(run("bar.warp.sync -1;", 32));
    // A block barrier orders every thread.
    run("bar.sync 0;", 32).expect("a block barrier orders the exchange");
}

/// A function with a loop and an early return, called twice by each thread (the second time
/// with its first result), with divergent arguments; a function calling another.
const CALLS: &str = r#"
.func (.reg .b32 f_result) collatz(.reg .b32 f_param_0, .reg .b32 f_param_1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    mov.u32 %r1, f_param_0;
    mov.u32 %r2, f_param_1;
    mov.u32 %r3, 0;
$L__top:
    setp.le.u32 %p1, %r1, 1;
    @%p1 bra $L__out;
    setp.ge.u32 %p2, %r3, %r2;
    @!%p2 bra $L__step;
    mov.u32 f_result, 1000;
    ret;
$L__step:
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p3, %r4, 0;
    shr.u32 %r5, %r1, 1;
    mad.lo.u32 %r6, %r1, 3, 1;
    selp.u32 %r1, %r5, %r6, %p3;
    add.u32 %r3, %r3, 1;
    bra.uni $L__top;
$L__out:
    mov.u32 f_result, %r3;
    ret;
}

.func (.reg .b32 g_result) twice(.reg .b32 g_param_0)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, g_param_0;
    call.uni (%r2), collatz, (%r1, 50);
    add.u32 g_result, %r2, %r2;
    ret;
}

.visible .entry calls(.param .u64 out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    call.uni (%r2), collatz, (%r1, 40);
    call.uni (%r3), collatz, (%r2, 40);
    call.uni (%r4), twice, (%r1);
    mad.lo.u32 %r5, %r3, 10000, %r4;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"#;

fn collatz(mut n: u32, limit: u32) -> u32 {
    let mut steps = 0;
    while n > 1 {
        if steps >= limit {
            return 1000;
        }
        n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
        steps += 1;
    }
    steps
}

#[test]
fn calls_of_functions_run_their_bodies_with_their_own_registers() {
    let e = emu();
    let out = upload_u32(&e, &[0xdead_beef; 64]);
    let ptx = format!("{HEADER}{CALLS}");
    launch(&e, &ptx, "calls", 1, 64, 0, &[&out.to_le_bytes()]).expect("calls");
    let got = download_u32(&e, out, 64);
    for t in 0..64u32 {
        let first = collatz(t, 40);
        let want = collatz(first, 40) * 10000 + 2 * collatz(t, 50);
        assert_eq!(got[t as usize], want, "thread {t}");
    }
}

#[test]
fn a_call_of_an_undefined_function_or_with_the_wrong_arguments_is_an_error() {
    let e = emu();
    for (ptx, want) in [
        (
            ".visible .entry k()\n{\n .reg .b32 %r<2>;\n call.uni (%r1), nowhere, (%r1);\n ret;\n}\n".to_string(),
            "not a function defined before it",
        ),
        (
            ".func (.reg .b32 r) f(.reg .b32 a)\n{\n mov.u32 r, a;\n ret;\n}\n.visible .entry k()\n{\n .reg .b32 %r<2>;\n call.uni (%r1), f, (%r1, %r1);\n ret;\n}\n".to_string(),
            "with 2 argument(s)",
        ),
        (
            ".func f(.param .b32 a)\n{\n ret;\n}\n".to_string(),
            "only register parameters",
        ),
    ] {
        let msg = match e.load_ptx(&format!("{HEADER}{ptx}")) {
            Ok(_) => panic!("accepted:\n{ptx}"),
            Err(m) => m.log,
        };
        assert!(msg.contains(want), "{msg}");
    }
}
