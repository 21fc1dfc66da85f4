//! Bounds-checked kernels on the device: an access out of bounds is skipped, the thread goes
//! on, and the first one of a launch comes back as `Error::KernelFault` at the next
//! synchronization, naming the kernel, the parameter (or shared array), the index, the
//! elements and the length (the fault record the compiler writes, decoded by the runtime:
//! both sides of its layout are checked here). Nothing outside the buffers a launch was given
//! changes, and the device keeps working.
//!
//! The reproducers of issue 7 item 1 are here: `act_kernel::launch` with a short output, the same
//! on empty buffers, and a user kernel writing at an index past the end. So are the misaligned
//! vector accesses: `act_kernel::launch` with a `head` that misaligns its vectors (the kernel
//! takes its scalar path), and a 16-byte load or store into a view at an odd element (the
//! access is skipped and reported as `KernelFault { misaligned: true, .. }`; on a GPU it would
//! otherwise raise an exception that ends the CUDA context).

use pagesift_gpu::error::KernelFault;
use pagesift_gpu::kernels::act::{act as act_kernel, ActParams};
use pagesift_gpu::DeviceRead;
use pagesift_gpu::{ptx_kernel, Act, DeviceBuffer, Error, Gpu, LaunchConfig};
use pagesift_tests::gpu_or_skip;
use pagesift_tests::util::{bits, poison_f32, poisoned_device, random_f32, POISON_BITS};

ptx_kernel! {
    /// Writes `v` at `y[idx]` (thread 0 only): out of bounds for `idx >= y.len()`.
    #[launch(block = 32)]
    pub fn poke(y: &mut [u32], idx: u64, v: u32) {
        if thread_idx_x() == 0 {
            y[idx] = v;
        }
    }

    /// `y[i] = x[i]` for every thread, unchecked: the caller keeps `i` inside both.
    #[launch(block = 64)]
    pub fn copy_unchecked(x: &[u32], y: &mut [u32]) {
        let i = block_idx_x() * 64 + thread_idx_x();
        unsafe {
            y.set_unchecked(i, x.get_unchecked(i) + 1);
        }
    }

    /// Each thread writes its index into the dynamic shared array and reads it back into `y`.
    #[launch(block = 64)]
    pub fn dyn_roundtrip(y: &mut [u32]) {
        let buf: Shared<[u32]>;
        let t = thread_idx_x();
        buf[t] = t + 100;
        sync_threads();
        y[t] = buf[t];
    }

    /// `y[4t..4t + 4] = x[4t..4t + 4]` per thread in one 16-byte load and store each: in
    /// bounds, but misaligned for a view that starts at an odd element.
    #[launch(block = 32)]
    pub fn copy4(x: &[f32], y: &mut [f32]) {
        let i = 4 * thread_idx_x();
        y.store4(i, x.load4(i));
    }

    /// Lane `l` gives row `l * 8 + off` of a shared array of 16-bit values `0, 1, 2, ...` to
    /// `ldmatrix_x1`; `y[l]` gets the lane's first fragment word.
    #[launch(block = 32)]
    #[target(sm_80)]
    pub fn ldm_probe(y: &mut [u32], off: u32) {
        let t: Shared<[u16; 512]>;
        let lane = thread_idx_x();
        for k in 0..16u32 {
            t[lane * 16 + k] = (lane * 16 + k) as u16;
        }
        sync_threads();
        let m = t.ldmatrix_x1(lane * 8 + off);
        y[lane] = m[0];
    }

    /// One access out of bounds by thread 0, chosen by `which`: a 4-element store at `i`, a
    /// shared-array write at `i`, a load at the signed index `s` (its value goes to `y[0]`).
    #[launch(block = 32)]
    pub fn fault_probe(x: &[f32], y: &mut [f32], i: u64, s: i32, which: u32) {
        let tile: Shared<[f32; 8]>;
        if thread_idx_x() == 0 {
            if which == 0 {
                y.store4(i, [1.0, 2.0, 3.0, 4.0]);
            } else if which == 1 {
                tile[i] = 5.0;
            } else {
                y[0] = x[s] + 1.0;
            }
        }
    }
}

/// Several tests of this file fault on the default stream, whose record they share: one at a
/// time.
static DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    DEVICE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The `KernelFault` fields of `e`, or a panic naming what came instead.
fn fault(e: Error) -> (String, String, u64, u64, u32) {
    match e {
        Error::KernelFault(f) if !f.misaligned => {
            let KernelFault {
                kernel,
                param,
                index,
                len,
                elements,
                ..
            } = *f;
            (kernel, param, index, len, elements)
        }
        other => panic!("expected Error::KernelFault, got {other}"),
    }
}

fn upload(gpu: &Gpu, v: &[f32]) -> DeviceBuffer<f32> {
    DeviceBuffer::from_host(gpu, v).expect("upload")
}

/// The scalars of the f32 activation kernel for `n` elements with a head of `head` and `nvec`
/// vectors, no bias columns.
fn act_params(n: u64, head: u32, nvec: u64) -> ActParams {
    ActParams {
        n,
        nvec,
        head,
        cols: 1,
        vlast: (u64::from(head) + 4 * nvec).wrapping_sub(4) as u32,
        clast: 0,
        cmagic: 0,
        cshift: 0,
        slope: 0.0,
        bias_vec: false,
    }
}

#[test]
fn act_f32_with_a_short_output_reports_y_and_leaves_other_buffers_alone() {
    let Some(gpu) = gpu_or_skip("kernel_faults::act_f32_short_output") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    // A live buffer allocated before the launch's buffers: a write past `y` must not reach it.
    let guard_data = random_f32(4096, 11, -4.0..4.0);
    let guard = upload(&gpu, &guard_data);
    let x_data = random_f32(384, 12, -4.0..4.0);
    let x = upload(&gpu, &x_data);
    let mut y = poisoned_device(&gpu, 4).expect("y");
    act_kernel::launch::<f32>(
        &stream,
        LaunchConfig::grid_1d(1),
        Act::Relu,
        act_params(384, 0, 96),
        &x,
        None,
        None,
        &mut y,
    )
    .expect("the launch itself succeeds");
    let (kernel, param, index, len, elements) = fault(stream.synchronize().unwrap_err());
    assert_eq!(kernel, "act[T=f32,ACT=Relu]");
    assert_eq!(param, "y");
    assert_eq!(len, 4);
    assert_eq!(
        elements, 1,
        "the checked scalar path reports single elements"
    );
    assert!((4..384).contains(&index), "index {index}");
    // The record was cleared: the next synchronization is clean.
    stream.synchronize().expect("no second report");
    // The in-bounds part was written, nothing else.
    let y_host = y.to_host().expect("y");
    let want: Vec<f32> = x_data[..4].iter().map(|v| v.max(0.0)).collect();
    assert_eq!(bits(&y_host), bits(&want));
    assert_eq!(bits(&guard.to_host().expect("guard")), bits(&guard_data));
}

#[test]
fn act_f32_on_empty_buffers_reports_and_the_device_keeps_working() {
    let Some(gpu) = gpu_or_skip("kernel_faults::act_f32_empty_buffers") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let x = DeviceBuffer::<f32>::alloc(&gpu, 0).expect("x");
    let mut y = DeviceBuffer::<f32>::alloc(&gpu, 0).expect("y");
    let b = DeviceBuffer::<f32>::alloc(&gpu, 0).expect("bias");
    let r = DeviceBuffer::<f32>::alloc(&gpu, 0).expect("res");
    act_kernel::launch::<f32>(
        &stream,
        LaunchConfig::grid_1d(1),
        Act::Gelu,
        act_params(16, 0, 4),
        &x,
        Some(&b as &dyn DeviceRead<f32>),
        Some(&r as &dyn DeviceRead<f32>),
        &mut y,
    )
    .expect("the launch itself succeeds");
    let (kernel, param, index, len, _) = fault(gpu.synchronize().unwrap_err());
    assert_eq!(kernel, "act[T=f32,ACT=Gelu]");
    assert!(
        ["x", "bias", "res", "y"].contains(&param.as_str()),
        "{param}"
    );
    assert_eq!(len, 0);
    assert!(index < 16, "index {index}");
    // The context is alive: an activation through the operation is exact afterwards.
    let data = random_f32(1000, 13, -4.0..4.0);
    let input = upload(&gpu, &data);
    let mut out = poisoned_device(&gpu, 1000).expect("out");
    pagesift_gpu::ops::act::activation(
        &stream,
        &pagesift_gpu::ActArgs::new(Act::Relu),
        &input,
        &mut out,
    )
    .expect("a correct launch");
    let got = out.to_host().expect("out");
    let want: Vec<f32> = data.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(bits(&got), bits(&want));
}

#[test]
fn poke_past_the_end_writes_nothing() {
    let Some(gpu) = gpu_or_skip("kernel_faults::poke_past_the_end") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let guard = DeviceBuffer::from_host(&gpu, &[POISON_BITS; 64]).expect("guard");
    let mut y = DeviceBuffer::from_host(&gpu, &[7u32; 16]).expect("y");
    poke::launch(&stream, LaunchConfig::grid_1d(1), &mut y, 16, 0xDEAD)
        .expect("the launch itself succeeds");
    let (kernel, param, index, len, elements) = fault(y.to_host().unwrap_err());
    assert_eq!(
        (kernel.as_str(), param.as_str(), index, len, elements),
        ("poke", "y", 16, 16, 1)
    );
    assert_eq!(y.to_host().expect("y"), vec![7u32; 16]);
    assert_eq!(guard.to_host().expect("guard"), vec![POISON_BITS; 64]);
    // In bounds it writes.
    poke::launch(&stream, LaunchConfig::grid_1d(1), &mut y, 15, 9).expect("launch");
    let mut want = vec![7u32; 16];
    want[15] = 9;
    assert_eq!(y.to_host().expect("y"), want);
}

/// The compiler's record layout (`lower/bounds.rs`) against the runtime's (`driver/fault.rs`):
/// every field of three different faults decodes to the right name and number.
#[test]
fn fault_record_layout_agrees_with_the_compiler() {
    let Some(gpu) = gpu_or_skip("kernel_faults::fault_record_layout") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let x = upload(&gpu, &random_f32(8, 14, -1.0..1.0));
    let mut y = poisoned_device(&gpu, 10).expect("y");
    let cfg = LaunchConfig::grid_1d(1);
    // A vector store ending past the end: index 8, 4 elements, length 10.
    fault_probe::launch(&stream, cfg, &x, &mut y, 8, 0, 0).expect("launch");
    let f = fault(stream.synchronize().unwrap_err());
    assert_eq!(f, ("fault_probe".to_string(), "y".to_string(), 8, 10, 4));
    // The shared array, by its name: index 8 of 8.
    fault_probe::launch(&stream, cfg, &x, &mut y, 8, 0, 1).expect("launch");
    let f = fault(stream.synchronize().unwrap_err());
    assert_eq!(f, ("fault_probe".to_string(), "tile".to_string(), 8, 8, 1));
    // A negative signed index reads as its two's complement; the skipped load gives 0.
    fault_probe::launch(&stream, cfg, &x, &mut y, 0, -3, 2).expect("launch");
    let f = fault(stream.synchronize().unwrap_err());
    assert_eq!(
        f,
        (
            "fault_probe".to_string(),
            "x".to_string(),
            (-3i64) as u64,
            8,
            1
        )
    );
    let got = y.to_host().expect("y");
    assert_eq!(got[0], 1.0, "0 + 1 from the skipped load");
    assert!(got[1..]
        .iter()
        .all(|v| v.to_bits() == poison_f32().to_bits()));
    // The message says all of it.
    fault_probe::launch(&stream, cfg, &x, &mut y, 8, 0, 0).expect("launch");
    let e = stream.synchronize().unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel `fault_probe` accessed `y` at element 8 (4 elements) but its length is 10; the access was skipped"
    );
}

/// Every synchronization point reports: an event's, a copy into host memory, a new stream's,
/// the device's; each fault once.
#[test]
fn every_synchronization_point_reports_the_fault_once() {
    let Some(gpu) = gpu_or_skip("kernel_faults::every_synchronization_point") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.new_stream().expect("stream");
    let mut y = DeviceBuffer::from_host(&gpu, &[3u32; 8]).expect("y");
    let cfg = LaunchConfig::grid_1d(1);
    let expect_poke = |r: pagesift_gpu::Result<()>, at: &str| {
        let (kernel, param, index, len, _) =
            fault(r.err().unwrap_or_else(|| panic!("{at}: no fault reported")));
        assert_eq!(
            (kernel.as_str(), param.as_str(), index, len),
            ("poke", "y", 9, 8),
            "{at}"
        );
    };
    // A fault belongs to the stream that ran the kernel: waiting for other work (another
    // stream, an event) does not report it; waiting for that stream does, once.
    poke::launch(&stream, cfg, &mut y, 9, 1).expect("launch");
    let event = pagesift_gpu::Event::new(&gpu).expect("event");
    event.record(&stream).expect("record");
    event.synchronize().expect("an event reports no fault");
    let other = gpu.new_stream().expect("other stream");
    let mut z = DeviceBuffer::from_host(&gpu, &[5u32; 8]).expect("z");
    poke::launch(&other, cfg, &mut z, 2, 7).expect("launch on the other stream");
    other
        .synchronize()
        .expect("the other stream's work did not fault");
    expect_poke(stream.synchronize(), "Stream::synchronize");
    stream.synchronize().expect("reported once");

    poke::launch(&stream, cfg, &mut y, 9, 1).expect("launch");
    expect_poke(stream.synchronize(), "Stream::synchronize");
    poke::launch(&stream, cfg, &mut y, 9, 1).expect("launch");
    let mut host = [0u32; 8];
    expect_poke(y.copy_to_host(&mut host), "copy_to_host");
    poke::launch(&stream, cfg, &mut y, 9, 1).expect("launch");
    expect_poke(gpu.synchronize(), "Gpu::synchronize");
    gpu.synchronize().expect("reported once");
    assert_eq!(
        y.to_host().expect("y"),
        vec![3u32; 8],
        "nothing was written"
    );
}

/// An `unsafe` kernel runs its unchecked accesses as written (its launch is an `unsafe fn`).
#[test]
fn an_unsafe_kernel_runs_unchecked_inside_its_contract() {
    let Some(gpu) = gpu_or_skip("kernel_faults::unsafe_kernel") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let x: Vec<u32> = (0..128u32).map(|i| i * 7 + 3).collect();
    let xb = DeviceBuffer::from_host(&gpu, &x).expect("x");
    let mut y = DeviceBuffer::from_host(&gpu, &[POISON_BITS; 128]).expect("y");
    // SAFETY: 2 blocks of 64 threads index 0..128, inside both 128-element buffers.
    unsafe { copy_unchecked::launch(&stream, LaunchConfig::grid_1d(2), &xb, &mut y) }
        .expect("launch");
    let want: Vec<u32> = x.iter().map(|v| v + 1).collect();
    assert_eq!(y.to_host().expect("y"), want);
}

/// The dynamic shared array is checked against the size the launch gives it, and named.
#[test]
fn the_dynamic_shared_array_is_checked_against_its_launch_size() {
    let Some(gpu) = gpu_or_skip("kernel_faults::dynamic_shared") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let mut y = DeviceBuffer::from_host(&gpu, &[POISON_BITS; 64]).expect("y");
    let cfg = LaunchConfig::grid_1d(1);
    dyn_roundtrip::launch(&stream, cfg.with_shared_mem(64 * 4), &mut y).expect("launch");
    stream.synchronize().expect("in bounds");
    let want: Vec<u32> = (100..164).collect();
    assert_eq!(y.to_host().expect("y"), want);
    // 40 elements: threads 40.. write nothing and read 0.
    dyn_roundtrip::launch(&stream, cfg.with_shared_mem(40 * 4), &mut y).expect("launch");
    let (kernel, param, index, len, elements) = fault(stream.synchronize().unwrap_err());
    assert_eq!(
        (kernel.as_str(), param.as_str(), len, elements),
        ("dyn_roundtrip", "buf", 40, 1)
    );
    assert!((40..64).contains(&index), "index {index}");
    let got = y.to_host().expect("y");
    let want: Vec<u32> = (0..64).map(|t| if t < 40 { t + 100 } else { 0 }).collect();
    assert_eq!(got, want);
}

/// The fields of a misaligned `KernelFault`: (kernel, param, index, elements).
fn misaligned_fault(e: Error) -> (String, String, u64, u32) {
    match e {
        Error::KernelFault(f) if f.misaligned => {
            let KernelFault {
                kernel,
                param,
                index,
                elements,
                ..
            } = *f;
            (kernel, param, index, elements)
        }
        other => panic!("expected a misaligned Error::KernelFault, got {other}"),
    }
}

#[test]
fn act_f32_with_a_misaligned_head_takes_the_scalar_path() {
    let Some(gpu) = gpu_or_skip("kernel_faults::act_f32_misaligned_head") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let data = random_f32(256, 15, -4.0..4.0);
    let x = upload(&gpu, &data);
    let mut y = poisoned_device(&gpu, 256).expect("y");
    // Aligned buffers, but a head of 1 puts every vector at an address of 4 mod 16.
    for (head, nvec) in [(1u32, 63u64), (2, 60), (3, 1)] {
        act_kernel::launch::<f32>(
            &stream,
            LaunchConfig::grid_1d(2),
            Act::Relu,
            act_params(256, head, nvec),
            &x,
            None,
            None,
            &mut y,
        )
        .expect("the launch itself succeeds");
        stream
            .synchronize()
            .expect("every element took the aligned scalar path: no fault");
        let want: Vec<f32> = data.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(bits(&y.to_host().expect("y")), bits(&want), "head {head}");
    }
    // The same through views at odd elements (the operation picks the head itself).
    let xv = x.slice(1..255).expect("view");
    let mut out = poisoned_device(&gpu, 256).expect("out");
    let mut ov = out.slice_mut(1..255).expect("view");
    pagesift_gpu::ops::act::activation(
        &stream,
        &pagesift_gpu::ActArgs::new(Act::Relu),
        &xv,
        &mut ov,
    )
    .expect("the operation");
    let got = out.to_host().expect("out");
    let want: Vec<f32> = data[1..255].iter().map(|v| v.max(0.0)).collect();
    assert_eq!(bits(&got[1..255]), bits(&want));
    assert_eq!(got[0].to_bits(), poison_f32().to_bits());
    assert_eq!(got[255].to_bits(), poison_f32().to_bits());
}

#[test]
fn a_vector_access_into_an_odd_view_reports_misaligned_and_is_skipped() {
    let Some(gpu) = gpu_or_skip("kernel_faults::misaligned_vector_access") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let cfg = LaunchConfig::grid_1d(1);
    let guard_data = random_f32(1024, 16, -4.0..4.0);
    let guard = upload(&gpu, &guard_data);
    let data = random_f32(132, 17, -4.0..4.0);
    let x = upload(&gpu, &data);
    let mut y = poisoned_device(&gpu, 132).expect("y");
    // A load from a view at element 1: every thread's load is skipped (it gives 0).
    copy4::launch(&stream, cfg, &x.slice(1..129).expect("view"), &mut y).expect("launch");
    let (kernel, param, index, elements) = misaligned_fault(stream.synchronize().unwrap_err());
    assert_eq!(
        (kernel.as_str(), param.as_str(), elements),
        ("copy4", "x", 4)
    );
    assert!(index < 128 && index % 4 == 0, "index {index}");
    let got = y.to_host().expect("y");
    assert!(got[..128].iter().all(|v| v.to_bits() == 0), "{got:?}");
    assert!(got[128..]
        .iter()
        .all(|v| v.to_bits() == poison_f32().to_bits()));
    // A store into a view at element 3: skipped, so nothing changes.
    let mut z = poisoned_device(&gpu, 132).expect("z");
    copy4::launch(&stream, cfg, &x, &mut z.slice_mut(3..131).expect("view")).expect("launch");
    let e = stream.synchronize().unwrap_err();
    let text = e.to_string();
    let (_, param, _, elements) = misaligned_fault(e);
    assert_eq!((param.as_str(), elements), ("y", 4));
    assert!(text.contains("misaligned 16-byte access"), "{text}");
    assert!(z
        .to_host()
        .expect("z")
        .iter()
        .all(|v| v.to_bits() == poison_f32().to_bits()));
    // The record was cleared, nothing outside the buffers changed, and the device works.
    stream.synchronize().expect("no second report");
    assert_eq!(bits(&x.to_host().expect("x")), bits(&data));
    assert_eq!(bits(&guard.to_host().expect("guard")), bits(&guard_data));
    let mut w = poisoned_device(&gpu, 128).expect("w");
    copy4::launch(&stream, cfg, &x, &mut w).expect("launch");
    stream.synchronize().expect("an aligned copy is clean");
    assert_eq!(bits(&w.to_host().expect("w")), bits(&data[..128]));
}

#[test]
fn ldmatrix_rows_off_16_bytes_report_misaligned_and_read_the_first_row() {
    let Some(gpu) = gpu_or_skip("kernel_faults::ldmatrix_misaligned") else {
        return;
    };
    let _one = one_at_a_time();
    let stream = gpu.default_stream();
    let cfg = LaunchConfig::grid_1d(1);
    let mut good = DeviceBuffer::from_host(&gpu, &[0u32; 32]).expect("y");
    ldm_probe::launch(&stream, cfg, &mut good, 0).expect("launch");
    stream.synchronize().expect("aligned rows are clean");
    let want = good.to_host().expect("y");
    // Rows at 2 bytes past each 16: every lane misaligned, every lane reads the first row.
    let mut y = DeviceBuffer::from_host(&gpu, &[0u32; 32]).expect("y");
    ldm_probe::launch(&stream, cfg, &mut y, 1).expect("launch");
    let (kernel, param, index, elements) = misaligned_fault(stream.synchronize().unwrap_err());
    assert_eq!(
        (kernel.as_str(), param.as_str(), elements),
        ("ldm_probe", "t", 8)
    );
    assert!(index % 8 == 1, "index {index}");
    let got = y.to_host().expect("y");
    // Lane l's first word holds row l / 4's elements 2 (l % 4), 2 (l % 4) + 1: with every row
    // address the array's start, row 0's.
    let first: Vec<u32> = (0..32u32)
        .map(|l| {
            let e = 2 * (l % 4);
            e | ((e + 1) << 16)
        })
        .collect();
    assert_eq!(got, first);
    assert_ne!(got, want, "the aligned launch reads the other rows");
}
