//! Bad input to the emulated device is a typed error, never an abort, a stack overflow, a
//! silently wrapped size or a launch that runs for days: PTX through `Gpu::load_ptx`
//! ([`Error::ModuleLoad`]), allocations past what the host has ([`Error::OutOfMemory`]), and
//! launches past the total-work cap ([`Error::Launch`]).

use pagesift_gpu::emulator::EmulatorConfig;
use pagesift_gpu::{error, DeviceBuffer, Error, Gpu};

const HEADER: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\n";

fn gpu(config: EmulatorConfig) -> Gpu {
    Gpu::emulated(EmulatorConfig {
        threads: 2,
        ..config
    })
    .expect("the emulated device opens")
}

fn default_gpu() -> Gpu {
    gpu(EmulatorConfig {
        memory_capacity: 64 << 20,
        ..EmulatorConfig::default()
    })
}

/// Loads `body` (after the header) and returns the JIT log of the module-load error it must be.
fn load_error(gpu: &Gpu, name: &str, body: &str) -> String {
    let ptx = format!("{HEADER}{body}");
    match gpu.load_ptx(name, &ptx) {
        Err(Error::ModuleLoad(e)) => {
            eprintln!("{name}: {}", e.jit_log);
            e.jit_log
        }
        Err(e) => panic!("{name}: not a module-load error: {e}"),
        Ok(_) => panic!("{name}: loaded"),
    }
}

/// An entry that uses the symbol `sym` so that it is declared with a kernel beside it.
const ENTRY: &str = ".visible .entry k()\n{\n    ret;\n}\n";

#[test]
fn a_one_tib_global_array_is_a_module_load_error() {
    let g = default_gpu();
    let log = load_error(
        &g,
        "global_1tib",
        &format!(".global .align 4 .b8 big[1099511627776];\n{ENTRY}"),
    );
    assert!(log.contains("out of device memory for `big`"), "{log}");
    // The device is still usable: a small global loads.
    g.load_ptx("small", &format!("{HEADER}.global .b8 small[64];\n{ENTRY}"))
        .expect("a small global loads");
}

#[test]
fn a_global_larger_than_the_host_is_an_error_even_below_the_capacity() {
    let g = gpu(EmulatorConfig {
        memory_capacity: 1 << 50,
        ..EmulatorConfig::default()
    });
    let log = load_error(
        &g,
        "global_64tib",
        &format!(".global .b8 huge[{}];\n{ENTRY}", 1u64 << 46),
    );
    assert!(log.contains("out of device memory for `huge`"), "{log}");
}

#[test]
fn twenty_thousand_nested_blocks_are_an_error_not_a_stack_overflow() {
    let g = default_gpu();
    let body = format!(
        ".visible .entry nest()\n{{\n{}\n    ret;\n{}\n}}\n",
        "{".repeat(20_000),
        "}".repeat(20_000)
    );
    let log = load_error(&g, "nest", &body);
    assert!(log.contains("nested deeper than 256 levels"), "{log}");
    // A few levels are fine.
    let ok = format!("{HEADER}.visible .entry nest()\n{{\n{{ {{ {{ ret; }} }} }}\n}}\n");
    g.load_ptx("nest_ok", &ok).expect("shallow blocks load");
}

#[test]
fn nested_vector_operands_are_an_error() {
    let g = default_gpu();
    let body = format!(
        ".visible .entry v()\n{{\n    .reg .b32 %r<3>;\n    mov.b64 {}%r1{}, 0;\n    ret;\n}}\n",
        "{".repeat(20_000),
        "}".repeat(20_000)
    );
    let log = load_error(&g, "vector_nest", &body);
    assert!(log.contains("nested vector operands"), "{log}");
}

#[test]
fn size_products_that_overflow_are_errors() {
    let g = default_gpu();
    // 2^61 elements of 32 bytes: 2^66 bytes.
    let log = load_error(
        &g,
        "global_overflow",
        &format!(".global .v4 .f64 x[2305843009213693952];\n{ENTRY}"),
    );
    assert!(log.contains("the size of `x` overflows 64 bits"), "{log}");
    let log = load_error(
        &g,
        "shared_overflow",
        &format!(".shared .b32 s[4611686018427387904];\n{ENTRY}"),
    );
    assert!(log.contains("overflows 64 bits"), "{log}");
    let log = load_error(
        &g,
        "local_overflow",
        ".visible .entry k()\n{\n    .local .b8 a[18446744073709551615];\n    .local .b8 b[2];\n    ret;\n}\n",
    );
    assert!(log.contains("does not fit its state space"), "{log}");
    let log = load_error(
        &g,
        "param_overflow",
        ".visible .entry k(.param .b8 p[4294967296])\n{\n    ret;\n}\n",
    );
    assert!(log.contains("exceed 32764 bytes"), "{log}");
    let log = load_error(
        &g,
        "count_too_large",
        &format!(".global .b8 x[99999999999999999999999];\n{ENTRY}"),
    );
    assert!(log.contains("expected a number"), "{log}");
    let log = load_error(
        &g,
        "regs_truncated",
        ".visible .entry k()\n{\n    .reg .b32 %r<4294967297>;\n    ret;\n}\n",
    );
    assert!(log.contains("does not fit 32 bits"), "{log}");
    let log = load_error(
        &g,
        "reqntid_product",
        ".visible .entry k() .reqntid 65536, 65536, 1\n{\n    ret;\n}\n",
    );
    assert!(log.contains("outside 1..=1024 threads"), "{log}");
}

#[test]
fn shared_memory_over_the_device_limit_is_rejected_not_truncated() {
    let g = default_gpu();
    // 4 GiB + 16 bytes used to be truncated to 16 bytes.
    let log = load_error(
        &g,
        "shared_4gib",
        &format!(".shared .align 4 .b8 s[4294967312];\n{ENTRY}"),
    );
    assert!(log.contains("too much shared memory"), "{log}");
    // Over the device's 163 KiB per block, inside an entry.
    let log = load_error(
        &g,
        "shared_200k",
        ".visible .entry k()\n{\n    .shared .align 4 .b8 s[204800];\n    ret;\n}\n",
    );
    assert!(
        log.contains("204800 bytes of static shared memory, more than the device's"),
        "{log}"
    );
}

#[test]
fn a_capacity_above_host_memory_is_out_of_memory_on_allocation() {
    let g = gpu(EmulatorConfig {
        memory_capacity: 1 << 50,
        ..EmulatorConfig::default()
    });
    let bytes = 1usize << 46;
    match DeviceBuffer::<u8>::alloc(&g, bytes) {
        Err(Error::OutOfMemory { .. }) => {}
        Err(e) => panic!("not out-of-memory: {e}"),
        Ok(_) => panic!("64 TiB allocated"),
    }
    // Memory is allocated lazily: a large buffer the host can map costs nothing until used.
    let b = DeviceBuffer::<u8>::alloc(&g, 1 << 30).expect("1 GiB");
    drop(b);
    let small = DeviceBuffer::from_host(&g, &[1u32, 2, 3]).expect("upload");
    assert_eq!(small.to_host().expect("download"), vec![1, 2, 3]);
}

/// A kernel that does nothing, for launch checks.
fn nop_function(g: &Gpu) -> (pagesift_gpu::Module, pagesift_gpu::Function) {
    let m = g
        .load_ptx("nop", &format!("{HEADER}{ENTRY}"))
        .expect("nop loads");
    let f = m.function("k").expect("entry");
    (m, f)
}

#[test]
fn a_grid_past_the_work_cap_is_refused() {
    let g = default_gpu();
    let (_m, f) = nop_function(&g);
    let s = g.default_stream();
    // SAFETY: `k` takes no parameters and touches no memory.
    let r = unsafe { s.launch(&f, [i32::MAX as u32, 65535, 65535], [1, 1, 1], 0, &[]) };
    let Err(Error::Launch(e)) = r else {
        panic!("not refused: {r:?}")
    };
    let error::Launch { kernel, message } = *e;
    assert_eq!(kernel, "k");
    assert!(message.contains("cap of 4294967296"), "{message}");
    assert!(message.contains("max_launch_threads"), "{message}");

    // The cap is configurable: exactly at it runs, one block more is refused.
    let g = gpu(EmulatorConfig {
        max_launch_threads: 4 * 64,
        ..EmulatorConfig::default()
    });
    let (_m, f) = nop_function(&g);
    let s = g.default_stream();
    // SAFETY: as above.
    unsafe { s.launch(&f, [4, 1, 1], [64, 1, 1], 0, &[]) }.expect("at the cap");
    s.synchronize().expect("runs");
    // SAFETY: as above.
    let r = unsafe { s.launch(&f, [5, 1, 1], [64, 1, 1], 0, &[]) };
    assert!(matches!(r, Err(Error::Launch(_))), "{r:?}");
}
