//! Hand-written PTX kernels the driver and emulator tests share, with their host references.
//!
//! - [`AXPB_PTX`]: `axpb(x, y, a, b, n)` sets `y[i] = fma(x[i], a, b)` for `i < n` (one thread
//!   an element, any 1-D grid and block).
//! - [`SPIN_PTX`]: `spin(out, iters)` sets `out[i]` to `v` after `iters` steps of
//!   `v = fma(v, SPIN_MUL, SPIN_ADD)` from `v = i` (a loop long enough to time).
//!
//! - [`BROKEN_PTX`]: a module with an unknown instruction on line 8, which no JIT accepts.
//!
//! The host-side driver stand-in (`tests/fake-driver`) recognises both entries by name and
//! computes the same values.

use pagesift_gpu::__private::{self, arg_read, arg_write};
use pagesift_gpu::error;
use pagesift_gpu::{
    DeviceRead, DeviceWrite, DriverError, Error, Function, Gpu, KernelArg, KernelVariant,
    LaunchConfig, Module, Result, Stream,
};

/// The `axpb` kernel (PTX 7.0, `sm_70`).
pub const AXPB_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64

// y[i] = fma(x[i], a, b) for i < n
.visible .entry axpb(
	.param .u64 x,
	.param .u64 y,
	.param .f32 a,
	.param .f32 b,
	.param .u32 n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	ld.param.f32 %f1, [a];
	ld.param.f32 %f2, [b];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.u32 %rd5, %r5, 4;
	add.s64 %rd6, %rd3, %rd5;
	ld.global.f32 %f3, [%rd6];
	fma.rn.f32 %f4, %f3, %f1, %f2;
	add.s64 %rd7, %rd4, %rd5;
	st.global.f32 [%rd7], %f4;
DONE:
	ret;
}
"#;

/// The instruction of [`AXPB_PTX`] that loads `x[i]`.
pub const AXPB_LOAD: &str = "ld.global.f32 %f3, [%rd6];";

/// [`AXPB_PTX`] with `x[i]` loaded `bytes` bytes past its address: a deliberately broken kernel
/// (misaligned for `bytes` not a multiple of 4). Its load instruction is
/// [`axpb_load_at`]`(bytes)`.
pub fn axpb_ptx_reading_x_at(bytes: u32) -> String {
    AXPB_PTX.replacen(AXPB_LOAD, &axpb_load_at(bytes), 1)
}

/// The load instruction of [`axpb_ptx_reading_x_at`]`(bytes)`.
pub fn axpb_load_at(bytes: u32) -> String {
    format!("ld.global.f32 %f3, [%rd6+{bytes}];")
}

/// `fma(x[i], a, b)` for every element, as `axpb` computes it.
pub fn axpb_reference(x: &[f32], a: f32, b: f32) -> Vec<f32> {
    x.iter().map(|&v| v.mul_add(a, b)).collect()
}

/// The `axpb` entry of [`AXPB_PTX`] as a kernel variant of `block` threads, launched through
/// the path the code `ptx_kernel!` generates takes ([`launch_axpb_variant`]).
pub const fn axpb_variant(block: u32, dynamic_shared: bool) -> KernelVariant {
    KernelVariant {
        kernel: "axpb",
        entry: "axpb",
        consts: &[],
        target: "sm_70",
        ptx_version: (7, 0),
        block: [block, 1, 1],
        static_shared_bytes: 0,
        dynamic_shared,
        params: &[
            ("x", "&[f32]"),
            ("y", "&mut [f32]"),
            ("a", "f32"),
            ("b", "f32"),
            ("n", "u32"),
        ],
        ptx_params: 5,
        shared: &[],
        ptx: AXPB_PTX,
    }
}

/// Launches `variant` (one of [`axpb_variant`]) as generated code does: `y = fma(x, a, b)` over
/// the `x.len()` elements, with the buffer uses (so the launch is stream-ordered with the
/// other work on `x` and `y`).
///
/// # Errors
/// [`Error::LengthMismatch`] when `y` is shorter than `x`; else the launch's.
pub fn launch_axpb_variant(
    stream: &Stream,
    variant: &'static KernelVariant,
    cfg: &LaunchConfig,
    x: &impl DeviceRead<f32>,
    y: &mut impl DeviceWrite<f32>,
    a: f32,
    b: f32,
) -> Result<()> {
    if variant.ptx != AXPB_PTX || variant.entry != "axpb" || variant.ptx_params != 5 {
        return Err(Error::from(error::InvalidArgument {
            op: "launch_axpb_variant",
            message: format!("`{}` is not a variant of the axpb kernel", variant.entry),
        }));
    }
    let n = elements(x.len(), y.len())?;
    let (xa, ya) = (arg_read(stream, x)?, arg_write(stream, y)?);
    let args = [xa.ptr, ya.ptr, a.into(), b.into(), n.into()];
    // SAFETY: `variant` runs `AXPB_PTX`, whose parameters these are; it touches `x[i]` and
    // `y[i]` for `i < n` only, with `n` at most both lengths, and the uses name both buffers.
    unsafe { __private::launch(stream, variant, cfg, &args, &[xa.access, ya.access]) }
}

/// The element count `n` of an `axpb` launch over `x_len` inputs into `y_len` outputs.
fn elements(x_len: usize, y_len: usize) -> Result<u32> {
    if y_len < x_len {
        return Err(Error::from(error::LengthMismatch {
            what: "axpb output".into(),
            expected: x_len,
            actual: y_len,
        }));
    }
    u32::try_from(x_len).map_err(|_| {
        Error::from(error::InvalidArgument {
            op: "axpb",
            message: format!("{x_len} elements do not fit the u32 count"),
        })
    })
}

/// [`AXPB_PTX`] loaded from raw PTX, launched through [`Stream::launch`].
pub struct RawAxpb {
    module: Module,
    function: Function,
}

impl RawAxpb {
    /// Loads [`AXPB_PTX`] on `gpu` as the module `axpb`.
    ///
    /// # Errors
    /// The module load's or the entry lookup's.
    pub fn load(gpu: &Gpu) -> Result<RawAxpb> {
        let module = gpu.load_ptx("axpb", AXPB_PTX)?;
        let function = module.function("axpb")?;
        Ok(RawAxpb { module, function })
    }

    /// The loaded module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The `axpb` entry.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// `y = fma(x, a, b)` over the `x.len()` elements: blocks of `block` threads, as many as
    /// cover them.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `y` is shorter than `x`; else the launch's.
    pub fn launch(
        &self,
        stream: &Stream,
        x: &impl DeviceRead<f32>,
        y: &mut impl DeviceWrite<f32>,
        a: f32,
        b: f32,
        block: u32,
    ) -> Result<()> {
        let n = elements(x.len(), y.len())?;
        let args = [
            KernelArg::ptr(x.device_ptr()),
            KernelArg::ptr(y.device_ptr_mut()),
            a.into(),
            b.into(),
            n.into(),
        ];
        let grid = [n.div_ceil(block.max(1)), 1, 1];
        // SAFETY: the function is `axpb` of `AXPB_PTX` (loaded by `load`), whose parameters are
        // the two pointers, two f32 and the u32 count passed here; it reads x[0..n) and writes
        // y[0..n), both live device memory of at least n elements, borrowed for the call.
        unsafe { stream.launch(&self.function, grid, [block, 1, 1], 0, &args) }
    }
}

/// The `spin` kernel (PTX 7.0, `sm_70`).
pub const SPIN_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64

// out[i]: v = i, then `iters` times v = fma(v, SPIN_MUL, SPIN_ADD).
.visible .entry spin(
	.param .u64 out,
	.param .u32 iters
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [iters];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	cvt.rn.f32.u32 %f1, %r5;
	mov.u32 %r6, 0;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 bra STORE;
LOOP:
	fma.rn.f32 %f1, %f1, 0f3F7FBE77, 0f3A83126F;
	add.u32 %r6, %r6, 1;
	setp.lt.u32 %p2, %r6, %r1;
	@%p2 bra LOOP;
STORE:
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.f32 [%rd4], %f1;
	ret;
}
"#;

/// The factor of a `spin` step (0.999 rounded to f32, as written in [`SPIN_PTX`]).
pub const SPIN_MUL: f32 = f32::from_bits(0x3F7F_BE77);
/// The addend of a `spin` step (0.001 rounded to f32, as written in [`SPIN_PTX`]).
pub const SPIN_ADD: f32 = f32::from_bits(0x3A83_126F);

/// What `spin` writes for thread `thread` after `iters` steps.
pub fn spin_reference(thread: u32, iters: u32) -> f32 {
    (0..iters).fold(thread as f32, |v, _| v.mul_add(SPIN_MUL, SPIN_ADD))
}

/// The instructions one `spin` thread executes for `iters >= 1` steps: 10 up to the loop, 4 a
/// step, 5 after it (`ret` included).
pub fn spin_instructions_per_thread(iters: u32) -> u64 {
    10 + 4 * u64::from(iters) + 5
}

/// A module whose line 8 holds an instruction that does not exist (`frobnicate`).
pub const BROKEN_PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry broken()\n{\n\t.reg .b32 %r<2>;\n\tfrobnicate.u32 %r1, 7;\n\tret;\n}\n";

/// Loads `ptx` on `gpu` as the module `name`, which must fail with [`Error::ModuleLoad`] naming
/// `name` and keeping the PTX in a file that holds exactly `ptx` (removed here); returns the
/// driver's error and the JIT log.
///
/// # Panics
/// When the load succeeds or fails otherwise.
pub fn expect_module_load_error(gpu: &Gpu, name: &str, ptx: &str) -> (DriverError, String) {
    match gpu.load_ptx(name, ptx) {
        Err(Error::ModuleLoad(e)) => {
            let error::ModuleLoad {
                kernel,
                source,
                jit_log,
                ptx_path,
            } = *e;
            assert_eq!(kernel, name);
            let path = ptx_path.expect("the PTX is written for inspection");
            let kept = std::fs::read_to_string(&path).expect("the PTX file reads back");
            assert_eq!(kept, ptx, "the PTX file holds the module");
            let _ = std::fs::remove_file(path);
            (source, jit_log)
        }
        Err(e) => panic!("expected ModuleLoad, got {e}"),
        Ok(_) => panic!("the broken PTX loaded"),
    }
}
