//! The GEMM autotuner on the device: it tunes a shape class once, writes the winner to its file
//! in the cache directory, reads it back after [`autotune::reload`] (as a new process would),
//! ignores a corrupt file and a stored winner that is not valid for the shape, and the results
//! stay right throughout. One test in its own binary: it sets `PAGESIFT_GPU_CACHE_DIR` for
//! the process.

use pagesift_gpu::cpu::gemm::output;
use pagesift_gpu::ops::gemm::{autotune, gemm, Kernel};
use pagesift_gpu::tune::{TuneKey, TuneStore};
use pagesift_gpu::{BLayout, DeviceBuffer, Gemm, Gpu, Precision};
use pagesift_tests::gpu_or_skip;
use pagesift_tests::util::{poisoned_device, random_f32};

/// Runs `g` through the dispatch and checks every output against the reference.
fn run_and_check(gpu: &Gpu, g: &Gemm) {
    let a = random_f32(g.m * g.k, 1, -1.0..1.0);
    let b = random_f32(g.n * g.k, 2, -1.0..1.0);
    let da = DeviceBuffer::from_host(gpu, &a).unwrap();
    let db = DeviceBuffer::from_host(gpu, &b).unwrap();
    let mut dc = poisoned_device(gpu, g.m * g.n).unwrap();
    gemm(&gpu.default_stream(), g, &da, &db, None, None, &mut dc).unwrap();
    let got = dc.to_host().unwrap();
    let c0 = vec![0.0; g.m * g.n];
    for i in 0..g.m {
        for j in 0..g.n {
            let want = output(g, &a, &b, None, None, &c0, (0, i, j));
            let err = (f64::from(got[i * g.n + j]) - want.value).abs();
            assert!(
                err <= want.tolerance(g),
                "C[{i}][{j}] = {}, reference {}",
                got[i * g.n + j],
                want.value
            );
        }
    }
}

#[test]
fn winners_are_stored_read_back_and_checked() {
    let Some(gpu) = gpu_or_skip("gemm_autotune::winners_are_stored_read_back_and_checked") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pagesift-autotune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("PAGESIFT_GPU_CACHE_DIR", &dir);
    autotune::set_enabled(true);
    let stream = gpu.default_stream();
    let g = Gemm::new(12, 20, 48, BLayout::NK);
    let tf32 = g.with_precision(Precision::Tf32x3);
    assert_eq!(autotune::cached::<f32, f32>(&stream, &g), None);

    run_and_check(&gpu, &g);
    run_and_check(&gpu, &tf32);
    let winner = autotune::cached::<f32, f32>(&stream, &g).expect("a stored winner");
    let tf32_winner = autotune::cached::<f32, f32>(&stream, &tf32).expect("a stored winner");
    assert!(
        !matches!(winner, Kernel::Mma { .. }),
        "exact f32 on {winner}"
    );
    // 3xTF32 on any kernel that serves it (FFMA is more accurate still).
    assert!(tf32_winner.serves(pagesift_gpu::Dtype::F32, Precision::Tf32x3));
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].clone();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&autotune::class::<f32, f32>(&g)), "{text}");

    // A restart: the winners come back from the file, for any shape of the class.
    autotune::reload();
    assert_eq!(autotune::cached::<f32, f32>(&stream, &g), Some(winner));
    let same_class = Gemm::new(9, 17, 33, BLayout::NK);
    assert_eq!(
        autotune::cached::<f32, f32>(&stream, &same_class),
        Some(winner)
    );
    run_and_check(&gpu, &same_class);

    // A corrupt file is ignored (the class is tuned again and the file rewritten).
    std::fs::write(&file, "pagesift-gpu-tune\tgarbage\n").unwrap();
    autotune::reload();
    assert_eq!(autotune::cached::<f32, f32>(&stream, &g), None);
    run_and_check(&gpu, &g);
    assert!(autotune::cached::<f32, f32>(&stream, &g).is_some());

    // A stored winner that cannot compute the shape (a decode kernel for 12 rows, a
    // tensor-core kernel for exact f32) is not used.
    let key = TuneKey::new(gpu.name(), gpu.driver_version());
    let table = file
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .strip_suffix("-tune.txt")
        .unwrap()
        .to_string();
    let mut store = TuneStore::open_in(&dir, key, &table);
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    store
        .insert(&autotune::class::<f32, f32>(&g), "gemv1")
        .unwrap();
    store
        .insert(&autotune::class::<f32, f32>(&tf32), "mma128x128/k99")
        .unwrap();
    drop(store);
    autotune::reload();
    assert_eq!(autotune::cached::<f32, f32>(&stream, &g), None);
    assert_eq!(autotune::cached::<f32, f32>(&stream, &tf32), None);
    let refused = Gemm::new(12, 20, 48, BLayout::NK);
    run_and_check(&gpu, &refused);
    autotune::set_enabled(false);
    let _ = std::fs::remove_dir_all(&dir);
}
