//! The kernels of `block_kernels` end to end on the device (the GPU, or the emulated one):
//! random data, outputs poisoned before each run, CPU references.

use pagesift_gpu::{DeviceBuffer, DeviceRepr, Gpu, LaunchConfig};
use pagesift_tests::block_kernels::affine;
use pagesift_tests::gpu_or_skip;
use rand::{Rng, SeedableRng};

fn upload<T: DeviceRepr>(gpu: &Gpu, data: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_host(gpu, data).expect("upload")
}

#[test]
fn const_arguments_by_name_select_the_variant_they_name() {
    let Some(gpu) = gpu_or_skip("const_arguments_by_name_select_the_variant_they_name") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let stream = gpu.default_stream();
    let n = 333usize;
    let x: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1 << 20)).collect();
    let dx = upload(&gpu, &x);
    let cfg = LaunchConfig::grid_1d((n as u32).div_ceil(64));
    for (scale, shift) in [(2u32, 3u32), (3, 2)] {
        let mut dy = upload(&gpu, &vec![0xDEAD_BEEFu32; n + 5]);
        {
            let mut y = dy.slice_mut(..n).expect("view");
            affine::launch_with(&stream, cfg, affine::Consts { scale, shift }, &dx, &mut y)
                .expect("launch");
        }
        let got = dy.to_host().expect("download");
        for i in 0..n {
            assert_eq!(
                got[i],
                x[i] * scale + shift,
                "SCALE={scale} SHIFT={shift} i={i}"
            );
        }
        assert!(got[n..].iter().all(|&v| v == 0xDEAD_BEEF), "tail written");
        // The positional form selects the same variant.
        assert_eq!(
            affine::variant(scale, shift).map(|v| v.entry),
            Some(format!("affine__SCALE_{scale}__SHIFT_{shift}").as_str())
        );
    }
    // A combination with no compiled variant fails by name.
    let mut dy = upload(&gpu, &vec![0u32; n]);
    let e = affine::launch_with(
        &stream,
        cfg,
        affine::Consts { scale: 2, shift: 2 },
        &dx,
        &mut dy,
    )
    .unwrap_err();
    assert!(e.to_string().contains("SCALE=2, SHIFT=2"), "{e}");
}
