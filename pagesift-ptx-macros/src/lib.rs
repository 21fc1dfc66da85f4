//! The `ptx_kernel!` compiler: a small Rust-syntax kernel language, compiled at `cargo build`
//! time to one PTX module per kernel variant plus a typed launch wrapper. Use it through
//! `pagesift_gpu::ptx_kernel!`; generated code names the runtime as `::pagesift_gpu::...`, so
//! any crate that depends on `pagesift-gpu` can write kernels.
//!
//! # Example
//!
//! (Compiled for real in `tests/src/example_kernels.rs`.)
//!
//! ```ignore
//! use pagesift_gpu::ptx_kernel;
//!
//! #[derive(Clone, Copy)]
//! pub enum Act { Identity, Relu, Gelu }
//!
//! ptx_kernel! {
//!     /// y[i] = act(x[i] + bias[i % cols])
//!     #[variants(ACT in [Identity, Relu, Gelu])]
//!     #[launch(block = 256)]
//!     pub fn bias_act<const ACT: Act>(x: &[f32], bias: &[f32], y: &mut [f32], n: u32, cols: u32) {
//!         let i = block_idx_x() * block_dim_x() + thread_idx_x();
//!         if i < n {
//!             y[i] = act::<ACT>(x[i] + bias[i % cols]);
//!         }
//!     }
//!
//!     fn act<const A: Act>(v: f32) -> f32 {
//!         match A {
//!             Act::Identity => v,
//!             Act::Relu => v.max(0.0),
//!             Act::Gelu => 0.5 * v * (1.0 + (v * 0.70710677).erf()),
//!         }
//!     }
//! }
//!
//! // Generated:
//! // pub mod bias_act {
//! //     pub const VARIANTS: &[KernelVariant] = &[/* Identity, Relu, Gelu: entry, PTX, ... */];
//! //     pub fn launch(stream: &Stream, cfg: LaunchConfig, act: Act,
//! //                   x: &impl DeviceRead<f32>, bias: &impl DeviceRead<f32>,
//! //                   y: &mut impl DeviceWrite<f32>, n: u32, cols: u32) -> Result<()>;
//! //     // (and `launch_with(stream, cfg, Consts { act }, ..)`: the consts by name)
//! // }
//! bias_act::launch(&stream, LaunchConfig::grid_1d(n.div_ceil(256)), Act::Relu, &x, &b, &mut y, n, cols)?;
//! ```
//!
//! # Items
//!
//! An invocation holds `fn` items only. A `pub fn` is a **kernel** (an entry point with a
//! wrapper); a plain `fn` is a **helper**, inlined at each call (helpers may call helpers, not
//! recursively). Several kernels and helpers may share one invocation; helpers are visible to
//! every kernel of the invocation. Doc comments on a kernel go to its generated module.
//!
//! Kernel attributes:
//!
//! | attribute | meaning |
//! |---|---|
//! | `#[launch(block = 256)]`, `block = (16, 16)`, `block = (32, BM / 8, 1)` | the block shape, required; emitted as `.reqntid`, folded into `block_dim_x()` etc., recorded in `KernelVariant::block`. At most 1024 threads. |
//! | `#[launch(.., min_blocks = 2)]` | blocks per SM the register allocation must allow (`.minnctapersm`, default 1: ptxas may use all the registers it needs instead of spilling for occupancy). |
//! | `#[launch(.., max_regs = 64)]` | a register cap per thread (`.maxnreg`, 24..=255; 0: no cap). |
//! | `#[target(sm_80)]` | the PTX target: `sm_70` (default), `sm_75`, `sm_80`, `sm_86`, `sm_89`, `sm_90`, `sm_90a`. |
//! | `#[variants(ACT in [Identity, Relu], BM in [64, 128])]` | the values of the const parameters; groups multiply (cross product). |
//! | `#[variants((BM, BN) in [(64, 64), (128, 64)])]` | a group of several parameters with an explicit list of tuples. |
//!
//! Every const parameter must appear in exactly one `#[variants]` group. The values of
//! `#[launch]` are evaluated per variant and may use its const parameters: expressions
//! (`block = (32, BM / 8)`), `if` and `match` on consts, so that the variants of one kernel
//! get their own launch bounds:
//!
//! ```ignore
//! #[variants(ACT in [Relu, Gelu])]
//! #[launch(block = 256,
//!          min_blocks = match ACT { Act::Relu => 8, _ => 1 },
//!          max_regs = match ACT { Act::Relu => 32, _ => 0 })] // 0: no cap
//! ```
//!
//! A value out of range is reported at the attribute, naming the variant.
//!
//! # Types
//!
//! | type | where | PTX |
//! |---|---|---|
//! | `bool` | values, scalar params (`.u8`), consts | `.pred` registers |
//! | `i16 i32 i64 u16 u32 u64` | everywhere | `.b16/.b32/.b64` registers |
//! | `i8 u8` | everywhere but indices and `for` ranges: `+ - * / %`, `& \| ^ << >> !`, `-` (i8), comparisons, wrapping at 8 bits (computed at 16 bits, then the low byte extended again: `cvt.u16.u8` / `cvt.s16.s8`) | `.b16` registers (zero- / sign-extended), `ld.s8/u8` |
//! | `f32 f64` | everywhere | `.f32/.f64` registers |
//! | `f16 bf16` | storage and arithmetic (`+ - *`, `mul_add`, `abs`, `min`, `max`, comparisons) | `.b16` registers |
//! | `f16x2 bf16x2` | packed pairs: `f16x2::new(lo, hi)`, `f16x2::from_f32s(lo, hi)` (below), `.lo()`, `.hi()`, `+ - *`, `-`, `mul_add`, `abs`, `min`, `max` | `.b32` registers |
//! | `&[T]`, `&mut [T]` | kernel and helper params (global memory; two `.u64` params: the address and the length in elements, `x.len()`); a kernel's `T` is not packed (the host has no `f16x2`: take `&[f16]` and read pairs with `load2`, or `&[u32]` with `f16x2::from_bits`) | |
//! | `Shared<[T; N]>` | `let tile: Shared<[f32; 256]>;` static shared memory (16-byte aligned; at most 48 KiB per kernel) | `.shared` |
//! | `Shared<[T]>` | `let buf: Shared<[f32]>;` the dynamic shared array, sized by `LaunchConfig::with_shared_mem` (one per kernel, 16-byte aligned) | `.extern .shared` |
//! | `Shared<[T; N]> = dyn_shared(off)` | `let a: Shared<[[f32; BK]; STAGES * BM]> = dyn_shared(0);` a typed view of the dynamic shared memory at byte `off` (a constant multiple of 16; any number of views, of any types and shapes, which may overlap) | `dyn_smem+off` |
//! | `Shared<[[T; C]; R]>` | `let t: Shared<[[f32; 33]; 32]>;` a two-dimensional static shared array, row-major: `t[r][c]` is element `r * C + c` | `.shared` |
//! | `[T; N]` | register arrays (`[0.0f32; 8]`, `[a, b, c]`, results of `load4`), N ≤ 1024 | N registers |
//! | `[[T; C]; R]` | two-dimensional register arrays (`[[0.0f32; 8]; 8]`, `[[a, b], [c, d]]`), R·C ≤ 1024; a row `acc[i]` is a `[T; C]` value and place | R·C registers |
//!
//! Half-precision arithmetic that the target lacks (bf16 `+ - *` and comparisons below sm_90,
//! f16/bf16 `min`/`max` below sm_80) is computed in f32 and rounded once; `/` on halves
//! always goes through f32. `f32 -> bf16` needs sm_80; below sm_90 conversions to bf16 from
//! other types than f32 go through f32 (two roundings for integers above 2^24 and for f64).
//!
//! A register array is indexed only by values known after unrolling: constants, const
//! parameters, and counters of `#[unroll]` loops with constant bounds. Anything else is a
//! compile error, never a silent spill to local memory.
//!
//! **Views of dynamic shared memory** carve the one dynamic buffer into typed arrays (the
//! stages of a pipeline, say): each is an array of its own constant length at its own offset,
//! bounds-checked against that length like a static array (with the same elisions and
//! compile-time checks); they count toward no static limit, so together they may pass 48 KiB
//! (the runtime opts the kernel in when a launch asks for more, up to the device's limit). At
//! its start the kernel tests that the launch's dynamic shared memory (`with_shared_mem`)
//! reaches the end of every view; where it does not, the view that ends last is reported as
//! the fault (index 0, its elements, and the elements the launch gave it as the length) and
//! every thread returns. The views and the dynamic array are named in `KernelVariant::shared`
//! after the static arrays.
//!
//! **Two-dimensional arrays** are flat and row-major. Of a register array `acc: [[f32; C]; R]`
//! each index of `acc[i][j]` must be known after unrolling and inside its own dimension (a
//! compile error otherwise, `acc[0][C]` included); a row `acc[i]` is a `[f32; C]`: read it
//! (`let r = acc[i];`, `y.store4(k, acc[i])`) or assign it whole, from a vector load or any
//! array of its length (`acc[i] = x.load4(k);`, `acc[i] += [1.0; 4];` element-wise). Of a
//! shared array `t: Shared<[[f32; C]; R]>` the element `t[r][c]` is `t`'s flat element
//! `r * C + c`, computed in `r`'s type and bounds-checked at run time as a whole (against
//! `R * C`, not per dimension: `t[0][C]` is `t[1][0]`); constant indices are checked per
//! dimension at compile time. `t.len()` is `R`; the memory methods (`load4`, `cp_async16`,
//! `ldmatrix_x4`, ...) take the flat index (`t.load4(r * C + c)`). A row of a shared array is
//! not a value.
//!
//! **Literals**: `1.5f32`, `3u64`, `true`. An unsuffixed literal takes its type from context
//! (the other operand, the declared type, the parameter); with no context an integer is `u32`
//! (`i32` when negative) and a float `f32`. An unsuffixed integer literal may stand for a float.
//! Associated constants: `f32::MAX`, `f32::MIN`, `f32::INFINITY`, `f32::NEG_INFINITY`,
//! `f32::NAN`, `f32::EPSILON`, `f32::MIN_POSITIVE` (also `f64`, `f16`, `bf16`), `u32::MAX`,
//! `i32::MIN`, `T::BITS`, ...
//!
//! # Statements and expressions
//!
//! `let x = e;`, `let mut x: T = e;`, `x = e`, `x op= e`, `a[i] = e`, `a[i] op= e`, blocks,
//! `if`/`else` (also as values), `match` on constants, `for i in a..b` and `a..=b` (bounds
//! evaluated once; `#[unroll]` before the loop unrolls it when the bounds are constants, at
//! most 4096 iterations), `while`, `loop`, `break`, `continue`, `return`, `e as T`, calls of
//! helpers (`f(x)`, `f::<ACT, 4>(x)`), methods, `asm!`.
//!
//! - Integer arithmetic wraps (two's complement); division by zero gives an unspecified value;
//!   shifts by the bit width or more give 0 (or the sign for `>>` on signed types).
//! - Float `+ - * /` and `sqrt` are correctly rounded (`.rn`); `!=` is true when either side
//!   is NaN, the other comparisons false.
//! - `&&` and `||` short-circuit (the right side is skipped when it could read memory).
//! - `if c { a } else { b }` as a scalar value, with small arms that neither access memory nor
//!   have effects, computes both arms and selects one (`selp`, no branch).
//! - **Index arithmetic wraps like the rest**: an index expression is evaluated in its own
//!   type, wrapping, and only then widened to 64 bits (sign-extended from signed types) for
//!   the bounds check and the address: with `i: u32`, `x[i + 2]` at `i = u32::MAX` is `x[1]`,
//!   and at `i = u32::MAX - 2` it is `x[4294967295]`, out of bounds (a fault, never an access
//!   past the wrap). A constant term goes into the address offset where that gives the same
//!   address: a 64-bit index, a 32-bit index into shared memory (whose 32-bit addresses wrap
//!   with it), or an unsigned sum proven not to wrap (`4 * thread_idx_x() + 3`: bounds from
//!   the block shape, the grid's limits, constants, masks and remainders); elsewhere the sum
//!   is one 32-bit `add` before the `mul.wide`.
//! - `as`: float -> int truncates toward zero and saturates, NaN gives 0 (as Rust);
//!   int -> float and narrowing float conversions round to nearest even; int -> int wraps or
//!   extends by the source's signedness; `bool as u32` is 0 or 1.
//! - `T::from_bits(u)` and `x.to_bits()` reinterpret bits (`f32` <-> `u32`, `f16` <-> `u16`, ...).
//!
//! **Const parameters** `<const N: u32, const ACT: Act, const FLAG: bool>` are fixed per
//! variant. `if` on a constant condition and `match` (which must be on a constant) keep only
//! the taken branch, so each variant's PTX holds only its own path. Enum consts are symbolic:
//! the macro never sees the enum; `Act::Relu`, `Relu` and `crate::Act::Relu` all name the
//! variant `Relu`; `==` and `!=` compare them. The launch wrapper takes the enum type as
//! written, so write it as a name in scope at the invocation or as a `crate::` path.
//!
//! # Intrinsics
//!
//! | call | result |
//! |---|---|
//! | `thread_idx_x()` `_y` `_z`, `block_idx_x()` .., `grid_dim_x()` .. | `u32` (`%tid`, `%ctaid`, `%nctaid`) |
//! | `block_dim_x()` .. | `u32` constant: the variant's block shape |
//! | `lane_id()`, `warp_id()` (linear thread index / 32), `warp_size()`, `num_warps()` | `u32` |
//! | `sync_threads()` | block barrier (`bar.sync 0`) |
//! | `sync_warp()`, `sync_warp_mask(m: u32)` | warp barrier of the full warp / of the lanes in `m` (`bar.warp.sync`): each lane of the mask waits for the others, and the memory accesses of those lanes before it are ordered before their accesses after it (warp-synchronous shared-memory exchanges); every lane of `m` must execute it |
//! | `fence_block()`, `fence_device()`, `fence_system()` | sequentially consistent fence (`fence.sc.cta` / `.gpu` / `.sys`, Rust's `fence(SeqCst)`) for the threads of the block / of the device / of the device, the host and peer devices |
//! | `fence_acq_rel_block()`, `fence_acq_rel_device()`, `fence_acq_rel_system()` | acquire-release fence (`fence.acq_rel.*`, Rust's `fence(AcqRel)`): lighter, enough to publish data with a relaxed atomic flag |
//! | `shfl_xor(v, mask)`, `shfl_down(v, d)`, `shfl_up(v, d)`, `shfl_idx(v, lane)` | full-warp shuffles (`shfl.sync.*.b32`) of a 16-, 32- or 64-bit `v`: `u16 i16 f16 bf16` (widened to 32 bits and back), `u32 i32 f32 f16x2 bf16x2`, `u64 i64 f64` (two shuffles of the halves, `mov.b64 {lo, hi}`); bits move unchanged |
//! | `vote_all(p)`, `vote_any(p)` / `vote_ballot(p)` | `bool` / `u32`, over the full warp |
//!
//! Methods on a slice `x: &[T]` / `y: &mut [T]` or a shared array `t`, at element index `i`
//! (any integer type but 8-bit):
//!
//! | method | meaning |
//! |---|---|
//! | `x[i]`, `y[i] = v` | `ld.global` / `st.global` (`ld.shared` / `st.shared`) |
//! | `x.load_nc(i)` | through the non-coherent cache (`ld.global.nc`): only `&[T]` params, which the kernel must not write through any alias |
//! | `x.load_acquire(i)` | an acquire load at device scope (`ld.acquire.gpu.global`): reads after it in this thread see at least what the thread whose release store (or fence) it observed had written before; `u32 i32 u64 i64 f32 f64`, slices only |
//! | `y.store_release(i, v)` | a release store at device scope (`st.release.gpu.global`): the thread's earlier reads and writes are visible to any thread whose acquire load sees `v`; same types |
//! | `x.load2(i)`, `load4`, `load8`, `load16` (`_nc` forms too) | `[T; N]` from elements `i..i+N` in one access of 4, 8 or 16 bytes |
//! | `y.store2(i, v)`, `store4`, `store8`, `store16` | writes `[T; N]` |
//! | `y.atomic_add(i, v)` | old value; `u32 i32 u64 f32 f64`, and `f16` (`atom.add.noftz.f16`), `f16x2` (both halves), `bf16` and `bf16x2` (sm_90): each half is the exact sum rounded once to nearest even, subnormals kept (f32 adds flush subnormals, as the hardware does) |
//! | `y.atomic_min/max(i, v)` | `u32 i32 u64 i64` |
//! | `y.atomic_exch(i, v)` | `u32 i32 u64 i64 f32` |
//! | `y.atomic_cas(i, cmp, v)`, `atomic_and/or/xor(i, v)` | `u32 i32 u64 i64` |
//! | `x.len()` | the slice's length in elements (`u64`); of a static shared array a `u32` constant |
//! | `w.read::<T>(off)` | on byte data (`&[u8]`, `&[i8]`, a shared byte array): the `T` (any scalar but `bool`) stored at bytes `off..off + size_of::<T>()`, a field of a packed record (`w.read::<f16>(18 * b)`, the scale of a GGUF q4_0 block); checked over its bytes and for alignment (`off` and the view's start a multiple of `size_of::<T>()`) like a vector access |
//! | `x.is_aligned(i, B)` | `bool`: whether the address of element `i` of a slice is a multiple of `B` (2, 4, 8, 16) bytes; as a condition it proves vector accesses aligned (below) |
//! | `x.get_unchecked(i)`, `y.set_unchecked(i, v)`, `loadN_unchecked`, `loadN_nc_unchecked`, `storeN_unchecked`, `load_nc_unchecked`, `load_acquire_unchecked`, `store_release_unchecked` | the same accesses without the bounds check: only inside `unsafe { }` |
//! | `t.cp_async4/8/16(i, x, j)` | asynchronous copy of 4, 8 or 16 bytes from `x[j..]` to shared `t[i..]` (`cp.async`, sm_80; 16 bytes bypass L1) |
//! | `t.cp_async16_partial(i, x, j, n)` | the same copying only the first `n` bytes of the source, zero-filling the rest (bounds at tile edges) |
//! | `t.ldmatrix_x1/x2/x4(i)`, `_trans` | `[u32; N]`: N 8x8 matrices of 16-bit elements from shared memory, each lane giving the address `&t[i]` of one row (`ldmatrix`, sm_75) |
//!
//! With `cp_async_commit()`, `cp_async_wait(N)` (N constant: at most N groups stay pending) and
//! `cp_async_wait_all()`.
//!
//! **Memory ordering**: plain accesses (`x[i]`, `y[i] = v`, vector accesses) are weak: without
//! synchronization another block may see them late or in another order. Atomics are relaxed
//! at device scope. `sync_threads()` orders the accesses of a block's threads among
//! themselves, `sync_warp()` those of a warp's lanes. To hand data from one block to another, write it with plain stores, then
//! either `flag.store_release(b, 1)`, or `fence_device()` (or `fence_acq_rel_device()`) and a
//! relaxed atomic on the flag; the reader waits for the flag with `flag.load_acquire(b)` (or a
//! relaxed atomic such as `flag.atomic_or(b, 0)` followed by a fence) and then reads the data
//! with plain loads. A kernel that waits on another block must only wait on blocks that have
//! already started: take a ticket with `atomic_add` on a counter and wait on lower tickets
//! (blocks are not scheduled in index order), and bound the wait.
//!
//! **Tensor cores** (one warp, all lanes; fragment layouts as in the PTX ISA, "Matrix Fragments
//! for mma.m16n8k*"): `mma_m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4]`,
//! `mma_m16n8k4_tf32` (a: 2, b: 1), `mma_m16n8k16_f16` / `_bf16` (a: 4, b: 2),
//! `mma_m16n8k8_f16` / `_bf16` (a: 2, b: 1), `mma_m16n8k32_s8` / `_u8` (a: 4, b: 2, `[i32; 4]`
//! accumulators), `mma_m16n8k16_s8` / `_u8` (a: 2, b: 1). A is row-major, B column-major;
//! `x.to_tf32()` rounds an f32 to tf32 bits (`cvt.rna.tf32.f32`). sm_80 (m16n8k8 f16: sm_75).
//!
//! **Alignment**: a vector access of `B` bytes must start at a `B`-byte aligned address:
//! `i * size_of::<T>()` a multiple of `B` and the buffer's base aligned (device allocations
//! are 256-byte aligned, but a view may start at any element; shared arrays are 16-byte
//! aligned). The checked forms test it (below); the `_unchecked` ones leave it to the caller,
//! and on a GPU a misaligned access raises an exception that ends the CUDA context.
//!
//! Methods on values (`f32` unless noted; accuracy against the correctly rounded result):
//!
//! | method | implementation |
//! |---|---|
//! | `abs`, `min`, `max`, `mul_add` (`fma`) | one instruction (all float types, ints for `abs`/`min`/`max`); `min`/`max` return the non-NaN operand |
//! | `sqrt`, `recip` | correctly rounded (`sqrt.rn`, `rcp.rn`; also f64) |
//! | `floor`, `ceil`, `trunc`, `round_ties_even`, `copysign`, `is_nan` | exact (also f64) |
//! | `exp`, `exp2` | ≤ 2 ulp (prelude: Cody–Waite reduction, degree-7 polynomial, exact scaling) |
//! | `ln` (also `log`) | ≤ 1 ulp (prelude: musl's `logf`); `log2` ≤ 2 ulp |
//! | `tanh` | ≤ 3 ulp (prelude) |
//! | `erf` | absolute error ≤ 2e-7 (prelude) |
//! | `rsqrt` | `1 / sqrt(x)`, ≤ 1.5 ulp |
//! | `exp2_fast`, `log2_fast`, `sqrt_fast`, `rsqrt_fast`, `recip_fast`, `sin_fast`, `cos_fast` | `ex2.approx` (2 ulp), `lg2.approx` (abs. 2^-22), `sqrt.approx`, `rsqrt.approx`, `rcp.approx` (1 ulp), `sin.approx`/`cos.approx` (abs. 2^-20.9 in [-π, π]) |
//! | `exp2_fast_ftz`, `recip_fast_ftz` | `ex2.approx.ftz`, `rcp.approx.ftz`: subnormal inputs and results flushed to zero (fewer instructions) |
//! | `exp_fast`, `ln_fast` (`log_fast`) | `ex2.approx` / `lg2.approx` with one multiply: relative error ≤ 2e-6 · (1 + \|x\|) / absolute ≤ 2^-22 |
//! | `tanh_fast` | `tanh.approx` (sm_75+, abs. 2^-10.99); below sm_75 an `ex2.approx` formula |
//! | `erf_fast` | absolute error ≤ 1e-6 |
//! | `mul_hi`, `count_ones`, `leading_zeros` | integer `mul.hi`, `popc`, `clz` |
//! | `a.dp4a(b, c)` | `c` plus the dot product of the four bytes of `a` and `b` (`dp4a`, exact, wrapping in 32 bits): `a`, `b` are `u32` (unsigned bytes) or `i32` (signed bytes), each on its own; `c` and the result are `u32` when both are `u32`, else `i32` (`dp4a.u32.s32`, ...) |
//! | `a.prmt(b, sel)` | byte permute (`prmt.b32`, `u32` or `i32`): result byte k is byte `sel >> 4k & 7` of the 8 bytes `{b, a}` (0..3 from `a`), replicated from its sign bit when `sel >> 4k & 8` |
//! | `f16x2::from_f32s(lo, hi)`, `bf16x2::from_f32s(lo, hi)` | two f32 each rounded to nearest even into one pair (`cvt.rn.f16x2.f32 d, hi, lo`, sm_80; below sm_80 the f16 form is two conversions with the same result; bf16x2 needs sm_80) |
//!
//! The accurate functions are a built-in prelude written in this language (inlined like any
//! helper); new instruction families (`cp.async`, `ldmatrix`, `mma.sync`, `wgmma`) slot into
//! the intrinsic table (`check/intrinsics.rs`) and the emitter's tables (`ptx.rs`).
//!
//! **`asm!`** splices one PTX instruction with typed register operands:
//! `let r: u32 = asm!("lop3.b32 {0}, {1}, {2}, {3}, 0x96;", out(u32), a, b, c);` — `{N}` is the
//! N-th operand; an `out(T)` operand is a fresh register of type `T`; the other operands are
//! expressions (registers or immediates). With one `out` the value of the `asm!` is that
//! register, with several (of one type) an array `[T; N]` in their order, with none `()`.
//! `{{` and `}}` are literal braces, for PTX vector operands:
//! `let h = asm!("mov.b64 {{{0}, {1}}}, {2};", out(u32), out(u32), x);`.
//!
//! # Bounds checks and `unsafe`
//!
//! Safe kernel code cannot touch memory outside the buffers its launch was given. Every access
//! through a slice (`x[i]`, `y[i] = v`, `y[i] += v`, `load_nc`, `load_acquire`,
//! `store_release`, `loadN`/`storeN`: `i + N <= len`, atomics, the source of `cp_async*`: its whole byte range, with the `_partial` form's
//! count) and to a shared array (static: its constant length; the dynamic one: from
//! `%dynamic_smem_size`) is checked. The index is compared in 64 bits, sign-extended from
//! signed types, so a negative index fails.
//!
//! **Alignment checks**: every checked vector access of `B` bytes (`loadN`, `loadN_nc`,
//! `storeN` moving more than one element, the global source and the shared destination of
//! `cp_async8/16`, each lane's 16-byte row of `ldmatrix`, `read::<T>` of 2 bytes or more) also tests
//! `(address & (B - 1)) == 0`; a failure takes the same path as a failed bounds check (an
//! `ldmatrix` lane reads the array's first row), its fault reported with `misaligned: true`
//! and `bytes: B` (bit 31 of the record's code word, the access's bytes at bits 24..30). The
//! test is left out where it is proven: under a dominating `x.is_aligned(i, B)` (a conjunct
//! of an `if` or loop condition, `i` a constant or an unsigned variable) an access at `i`, or
//! at an index that differs from `i` by whole `B`-byte vectors — `i + 4 * t`, a counter
//! started there and stepped by `4 * s`, `j & 0xFFFF_FFFC` for an aligned base (f32, `B` =
//! 16) — needs no test; a shared array's index in whole vectors needs none either. The proof follows
//! the index through sums, constant products and shifts, `and` masks, conversions and every assignment of a variable (a loop counter's
//! step included); a test it cannot decide stays in the code.
//!
//! **A failed check** skips the access (a load yields 0 in every lane) and the thread goes on;
//! the first failure is written to the launch stream's *fault record* (the hidden first kernel
//! parameter) and the runtime returns it where the host next waits for that stream
//! (`Stream::synchronize`, `Gpu::synchronize`, a host read of a buffer the kernel wrote) as
//! `Error::KernelFault`, holding an `error::KernelFault { kernel, param, index, len, elements,
//! misaligned, bytes }` (see `pagesift-gpu`'s `driver/fault.rs` for the protocol). There is no
//! trap: a trap would end the CUDA context for the rest of the process. `ldmatrix`, a
//! warp-wide instruction, is not skipped: a lane out of bounds reads the array's first row
//! instead (and the fault is recorded); an array shorter than one row of 8 elements skips the
//! load in every lane (its results are 0).
//!
//! **Elision**: a check is left out where the compiler proves it, in a dominating `if` or a
//! loop condition (until the index variable is assigned): `i < x.len()`, `i <= x.len()`,
//! `(i as u64) + k < x.len()` (a widened 32-bit index cannot wrap), `i < N` for a static
//! shared array, conjunctions with `&&`, `for i in a..x.len()`, the rest of a block after
//! `if i >= x.len() { return; }` (or `break` / `continue`; `||` of such tests), and one step
//! through an
//! immutable bound (`e <= last` and `(last as u64) + 4 <= x.len()` prove `x.load4(e)`). Inside a
//! proven range constant offsets are proven too (`x[i + 1]` under `i + 2 <= x.len()`), and a
//! constant index into a static shared array is checked at compile time. Other conditions
//! (`||` in an `if`, arithmetic beyond these forms) prove nothing: such accesses stay checked.
//!
//! **`unsafe { ... }`** in a kernel or helper allows the `_unchecked` accesses above and any
//! `asm!`. Outside it they are compile errors, and `asm!` is limited to instructions that work
//! on registers only (arithmetic, logic, shifts and funnel shifts, `lop3`, `prmt`, bit-field
//! ops, conversions, moves, `selp`/`setp`, the approximate functions) whose destination is
//! an `out(T)` operand (writing an input would change a value the compiler may have used to
//! prove an index; writing a register by name, one of the compiler's). A caller's `unsafe`
//! block does not extend into a helper's body. A kernel with any `unsafe` block (its own or an
//! inlined helper's, in any variant) gets `pub unsafe fn launch`, whose `# Safety` section asks
//! the caller to keep every unchecked access inside the buffers passed.
//!
//! # Output
//!
//! Per kernel a module with `VARIANTS: &[KernelVariant]` (one per variant: entry name
//! `kernel__ACT_Relu__BM_64`, const values, target, PTX ISA version, block, static shared
//! bytes, whether dynamic shared memory is used, parameters, the PTX text of a complete module
//! with one `.visible .entry`; its first parameter is the fault record, then each slice as
//! address and length), the number of PTX parameters, the names of its shared arrays, and
//! `launch(stream, cfg, <const args, lower-case>, <params>)`:
//! `&[T]` params take `&impl DeviceRead<T>`, `&mut [T]` params `&mut impl DeviceWrite<T>`,
//! scalars by value. A kernel with const parameters also gets `pub struct Consts` (a field per
//! const parameter, its name in lower case) and `launch_with(stream, cfg, Consts { bm: 64, bn:
//! 128, .. }, <params>)`, the same launch with the consts by name, so that two consts of one
//! type cannot be swapped unnoticed:
//!
//! ```ignore
//! sgemm::launch_with(&stream, cfg, sgemm::Consts { bm: 64, bn: 64 }, &a, &b, &mut c, m, n, k)?;
//! ```
//!
//! Each variant's `.version` is the lowest PTX ISA its target and
//! instructions need (7.0 for sm_70..sm_80, 7.1 for sm_86, 7.8 for sm_89/sm_90 and bf16
//! arithmetic, 8.0 for sm_90a).
//!
//! After lowering, IR passes (`lower/opt.rs`) multiply 32-bit indices to 64-bit offsets in one
//! `mul.wide`, coalesce moves whose registers never hold different live values (so the arms of
//! an `if` write the merged registers directly), and delete side-effect-free instructions
//! whose results are never read.
//!
//! # Errors
//!
//! Unsupported syntax, unknown names and intrinsics, type mismatches, writes through `&[T]`,
//! non-constant register-array indices, shared memory over 48 KiB, instructions the target
//! lacks, missing `#[launch]` or variant values: each is a compile error at the offending
//! span. All errors of an invocation are reported together, and the wrapper modules are still
//! declared (with no variants) so that callers see only the real errors.

mod check;
mod ctxt;
#[cfg(test)]
mod feature_tests;
mod lower;
mod parse;
mod ptx;
mod types;
mod wrap;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

/// Compiles kernels written in the kernel language into PTX text and typed launch wrappers.
/// The language is described in the crate documentation.
#[proc_macro]
pub fn ptx_kernel(input: TokenStream) -> TokenStream {
    expand(input.into()).into()
}

/// The list of every instruction form the PTX emitter can produce (for the emulator's tests).
#[doc(hidden)]
#[proc_macro]
pub fn __instruction_forms(_input: TokenStream) -> TokenStream {
    wrap::instruction_forms().into()
}

/// parse -> check -> lower -> emit -> wrap; all errors of the invocation are reported together.
fn expand(tokens: TokenStream2) -> TokenStream2 {
    let cx = ctxt::Ctxt::new();
    let program = parse::parse_program(&cx, tokens);
    let mut checked = check::check_program(&cx, &program);
    let mut out = wrap::items(&program, &checked.items);
    for kernel in &mut checked.kernels {
        for variant in &mut kernel.variants {
            lower::settle_target(variant);
        }
    }
    for kernel in &checked.kernels {
        let mut emitted = Vec::new();
        for variant in &kernel.variants {
            let Some(func) = lower::lower_variant(&cx, variant) else {
                continue;
            };
            match ptx::emit_module(&func) {
                Ok(ptx) => emitted.push(wrap::Emitted { variant, func, ptx }),
                Err(e) => cx.error(kernel.sig.item.name.span(), format!("internal: {e}")),
            }
        }
        if !kernel.complete || emitted.len() != kernel.variants.len() {
            emitted.clear();
        }
        out.extend(wrap::kernel_module(&kernel.sig, &emitted));
    }
    out.extend(ctxt::to_compile_errors(&cx.finish()));
    out
}

/// Compiles an invocation's tokens to (entry, PTX) pairs, or the error messages.
#[cfg(test)]
pub(crate) fn compile_for_test(tokens: TokenStream2) -> Result<Vec<(String, String)>, Vec<String>> {
    let cx = ctxt::Ctxt::new();
    let program = parse::parse_program(&cx, tokens);
    let mut checked = check::check_program(&cx, &program);
    let mut out = Vec::new();
    for kernel in &mut checked.kernels {
        for variant in &mut kernel.variants {
            lower::settle_target(variant);
        }
    }
    for kernel in &checked.kernels {
        for variant in &kernel.variants {
            if let Some(func) = lower::lower_variant(&cx, variant) {
                match ptx::emit_module(&func) {
                    Ok(text) => out.push((func.entry.clone(), text)),
                    Err(e) => cx.error(proc_macro2::Span::call_site(), e),
                }
            }
        }
    }
    let errors = cx.finish();
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.iter().map(|e| e.to_string()).collect())
    }
}

/// NVIDIA's `ptxas` for the unit tests: `PAGESIFT_PTXAS`, else `target/ptxas/ptxas`.
#[cfg(test)]
pub(crate) fn test_ptxas() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("PAGESIFT_PTXAS") {
        return Some(p.into());
    }
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ptxas/ptxas");
    local.is_file().then_some(local)
}
