//! The language's items beyond plain fns, end to end on the device (the GPU, or the emulated
//! one): kernels generic over their element type (every listed type), a parameter struct with
//! fields of mixed sizes and alignments, `Some` and `None` optional operands, `const` items
//! shared with the host, and a helper library read from a file. Random data, outputs poisoned
//! before each run, shapes that are not multiples of the block.

use half::{bf16, f16};
use pagesift_gpu::{DeviceBuffer, DeviceRead, DeviceRepr, Gpu, LaunchConfig};
use pagesift_tests::gpu_or_skip;
use pagesift_tests::language_kernels::{
    axpy, cubic_ref, poly_eval, twice_again, type_tag, vec_copy, AxpyParams, AXPY_BLOCK,
};
use rand::{Rng, SeedableRng};

fn upload<T: DeviceRepr>(gpu: &Gpu, data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_host(gpu, data).expect("upload")
}

/// An element type of the generic kernels, with its conversions to and from f32.
trait Elem: DeviceRepr + axpy::ElemT + PartialEq + std::fmt::Debug {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    fn poison() -> Self;
}

impl Elem for f32 {
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn poison() -> f32 {
        f32::from_bits(0x7fc0_dead)
    }
}

impl Elem for f16 {
    fn from_f32(v: f32) -> f16 {
        f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn poison() -> f16 {
        f16::from_bits(0x7e5a)
    }
}

impl Elem for bf16 {
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn poison() -> bf16 {
        bf16::from_bits(0x7fda)
    }
}

fn same_bits<T: Elem>(a: T, b: T) -> bool {
    let (x, y) = (a.to_f32(), b.to_f32());
    (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
}

fn axpy_ref<T: Elem>(p: &AxpyParams, x: &[T], y: &[T], bias: Option<&[T]>) -> Vec<T> {
    (0..p.n as usize)
        .map(|i| {
            let mut v = p.a.mul_add(x[i].to_f32(), y[i].to_f32());
            if let Some(b) = bias {
                v += b[i % p.cols as usize].to_f32();
            }
            v = v * (p.scale as f32) + p.h.to_f32() + p.tag as f32;
            if p.relu {
                v = v.max(0.0);
            }
            T::from_f32(v)
        })
        .collect()
}

fn axpy_case<T: Elem>(gpu: &Gpu, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let stream = gpu.default_stream();
    for (n, cols, with_bias, relu) in [
        (1000u32, 37u32, true, false),
        (333, 5, false, true),
        (1, 1, true, true),
    ] {
        let p = AxpyParams {
            tag: rng.gen_range(1..9),
            n,
            relu,
            a: rng.gen_range(-2.0..2.0),
            scale: rng.gen_range(0.5..1.5),
            h: f16::from_f32(rng.gen_range(-1.0..1.0)),
            cols,
        };
        let gen = |rng: &mut rand::rngs::StdRng, k: usize| -> Vec<T> {
            (0..k)
                .map(|_| T::from_f32(rng.gen_range(-4.0..4.0)))
                .collect()
        };
        let x = gen(&mut rng, n as usize);
        let y0 = gen(&mut rng, n as usize);
        let b = gen(&mut rng, cols as usize);
        let dx = upload(gpu, &x);
        let db = upload(gpu, &b);
        // `y` is read and written: the tail past `n` is poisoned and must stay so.
        let mut yfull = y0.clone();
        yfull.extend(std::iter::repeat_n(T::poison(), 7));
        let mut dy = upload(gpu, &yfull);
        let bias: Option<&dyn DeviceRead<T>> = if with_bias { Some(&db) } else { None };
        axpy::launch(
            &stream,
            LaunchConfig::grid_1d(n.div_ceil(AXPY_BLOCK)),
            p,
            &dx,
            &mut dy,
            bias,
        )
        .expect("launch");
        let got = dy.to_host().expect("download");
        let want = axpy_ref(&p, &x, &y0, with_bias.then_some(&b[..]));
        let ty = T::DTYPE;
        for i in 0..n as usize {
            assert!(
                same_bits(got[i], want[i]),
                "{ty} n={n} bias={with_bias} i={i}: {:?} vs {:?}",
                got[i],
                want[i]
            );
        }
        assert!(
            got[n as usize..].iter().all(|v| same_bits(*v, T::poison())),
            "{ty}: wrote past n"
        );
    }
}

#[test]
fn axpy_every_element_type_with_and_without_bias() {
    let Some(gpu) = gpu_or_skip("axpy_every_element_type_with_and_without_bias") else {
        return;
    };
    axpy_case::<f32>(&gpu, 1);
    axpy_case::<f16>(&gpu, 2);
    axpy_case::<bf16>(&gpu, 3);
}

#[test]
fn generic_variants_get_the_lowest_target_they_need() {
    let target = |t: &str| {
        axpy::VARIANTS
            .iter()
            .find(|v| v.consts == [("T", t)])
            .map(|v| v.target)
    };
    assert_eq!(target("f32"), Some("sm_70"));
    assert_eq!(target("f16"), Some("sm_70"));
    // f32 -> bf16 conversion needs sm_80.
    assert_eq!(target("bf16"), Some("sm_80"));
    assert_eq!(axpy::VARIANTS[0].block, [AXPY_BLOCK, 1, 1]);
    assert_eq!(
        axpy::VARIANTS[0].params,
        [
            ("p", "AxpyParams"),
            ("x", "&[f32]"),
            ("y", "&mut [f32]"),
            ("bias", "Option<&[f32]>")
        ]
    );
    // The fault record, the struct blob, two slices of two parameters, the optional one.
    assert_eq!(axpy::VARIANTS[0].ptx_params, 1 + 1 + 2 + 2 + 2);
    assert!(
        axpy::VARIANTS[0]
            .ptx
            .contains(".param .align 8 .b8 axpy__T_f32_param_0[32]"),
        "{}",
        axpy::VARIANTS[0].ptx
    );
    assert_eq!(axpy::variant::<f16>().map(|v| v.entry), Some("axpy__T_f16"));
}

fn vec_copy_case<T: Elem + vec_copy::ElemT>(gpu: &Gpu, values: Vec<T>, offset: usize) {
    let stream = gpu.default_stream();
    let n = values.len();
    let dx = upload(gpu, &values);
    let mut dy = upload(gpu, &vec![T::poison(); n + 3]);
    let lanes = 16 / std::mem::size_of::<T>();
    let groups = (n - offset).div_ceil(lanes) as u32;
    {
        let x = dx.slice(offset..).expect("view");
        let mut y = dy.slice_mut(offset..n).expect("view");
        vec_copy::launch(
            &stream,
            LaunchConfig::grid_1d(groups.div_ceil(64)),
            &x,
            &mut y,
        )
        .expect("launch");
    }
    let got = dy.to_host().expect("download");
    for i in 0..n + 3 {
        let want = if (offset..n).contains(&i) {
            values[i]
        } else {
            T::poison()
        };
        assert!(
            same_bits(got[i], want),
            "{} offset {offset} i={i}",
            T::DTYPE
        );
    }
}

#[test]
fn vec_copy_by_bytes_for_each_element_size() {
    let Some(gpu) = gpu_or_skip("vec_copy_by_bytes_for_each_element_size") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    for offset in [0usize, 1, 3] {
        let f: Vec<f32> = (0..1001).map(|_| rng.gen_range(-9.0..9.0)).collect();
        vec_copy_case(&gpu, f, offset);
        let h: Vec<f16> = (0..777)
            .map(|_| f16::from_f32(rng.gen_range(-9.0..9.0)))
            .collect();
        vec_copy_case(&gpu, h, offset);
    }
    // u8: no Elem impl (it is not a float); checked directly.
    let stream = gpu.default_stream();
    let bytes: Vec<u8> = (0..517).map(|_| rng.gen()).collect();
    let dx = upload(&gpu, &bytes);
    let mut dy = upload(&gpu, &vec![0xA5u8; 517]);
    vec_copy::launch(&stream, LaunchConfig::grid_1d(1), &dx, &mut dy).expect("launch");
    assert_eq!(dy.to_host().expect("download"), bytes);
}

#[test]
fn type_tag_folds_matches_on_the_element_type() {
    let Some(gpu) = gpu_or_skip("type_tag_folds_matches_on_the_element_type") else {
        return;
    };
    let stream = gpu.default_stream();
    fn run<T: type_tag::ElemT>(gpu: &Gpu, stream: &pagesift_gpu::Stream) -> (u32, f32) {
        let mut tags = DeviceBuffer::from_host(gpu, &[u32::MAX]).expect("upload");
        let mut maxes = DeviceBuffer::from_host(gpu, &[f32::NAN]).expect("upload");
        type_tag::launch::<T>(stream, LaunchConfig::grid_1d(1), &mut tags, &mut maxes)
            .expect("launch");
        (
            tags.to_host().expect("tags")[0],
            maxes.to_host().expect("maxes")[0],
        )
    }
    assert_eq!(run::<f32>(&gpu, &stream), (14, f32::MAX));
    assert_eq!(run::<f16>(&gpu, &stream), (22, 65504.0));
    assert_eq!(run::<bf16>(&gpu, &stream), (37, bf16::MAX.to_f32()));
}

#[test]
fn poly_eval_uses_the_library_helpers_and_consts() {
    let Some(gpu) = gpu_or_skip("poly_eval_uses_the_library_helpers_and_consts") else {
        return;
    };
    let stream = gpu.default_stream();
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let x: Vec<f32> = (0..300).map(|_| rng.gen_range(-3.0..3.0)).collect();
    let dx = upload(&gpu, &x);
    let mut dy = upload(&gpu, &vec![f32::NAN; 300]);
    poly_eval::launch(&stream, LaunchConfig::grid_1d(3), &dx, &mut dy, -1.0, 2.0).expect("launch");
    let y = dy.to_host().expect("download");
    for i in 0..300 {
        let want = cubic_ref(x[i]).clamp(-1.0, 2.0) + 0.5;
        assert_eq!(y[i].to_bits(), want.to_bits(), "i={i}");
    }
}

#[test]
fn occupancy_comes_from_the_device() {
    let Some(gpu) = gpu_or_skip("occupancy_comes_from_the_device") else {
        return;
    };
    let v = axpy::variant::<f32>().expect("compiled");
    let threads = v.block.iter().product::<u32>();
    let blocks = gpu.blocks_per_sm(v, 0).expect("occupancy");
    let slots = gpu.props().max_threads_per_sm;
    assert!(
        blocks >= 1 && blocks * threads <= slots,
        "{blocks} blocks of {threads}"
    );
    if pagesift_tests::is_emulated(&gpu) {
        // The emulated device answers by thread slots and shared memory.
        assert_eq!(blocks, slots / threads);
        // Shared memory limits it: a block of half the multiprocessor's shared memory.
        assert_eq!(gpu.blocks_per_sm(v, 114 * 1024).expect("occupancy"), 2);
    }
    // Remembered: the same answer again.
    assert_eq!(gpu.blocks_per_sm(v, 0).expect("occupancy"), blocks);
}

#[test]
fn a_kernel_calls_another_kernel_like_a_helper() {
    let Some(gpu) = gpu_or_skip("a_kernel_calls_another_kernel_like_a_helper") else {
        return;
    };
    let stream = gpu.default_stream();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let x: Vec<f32> = (0..301).map(|_| rng.gen_range(-3.0..3.0)).collect();
    let dx = upload(&gpu, &x);
    let mut dy = upload(&gpu, &vec![f32::NAN; 301]);
    twice_again::launch(&stream, LaunchConfig::grid_1d(3), &dx, &mut dy).expect("launch");
    let y = dy.to_host().expect("download");
    for i in 0..301 {
        assert_eq!(y[i].to_bits(), (2.0 * x[i]).to_bits(), "i={i}");
    }
}
