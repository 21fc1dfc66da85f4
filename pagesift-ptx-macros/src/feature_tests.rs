//! Unit tests of the language features for kernels with several arrays and byte data:
//! packed slices at the wrapper, launches with named consts, byte arithmetic and byte-record
//! reads, two-dimensional arrays, views of dynamic shared memory, and the index wrap rule.

use crate::compile_for_test;
use quote::quote;

fn ptx_of(tokens: proc_macro2::TokenStream) -> Vec<(String, String)> {
    match compile_for_test(tokens) {
        Ok(v) => v,
        Err(e) => panic!("errors: {e:#?}"),
    }
}

fn errors_of(tokens: proc_macro2::TokenStream) -> Vec<String> {
    match compile_for_test(tokens) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e,
    }
}

#[test]
fn a_packed_slice_parameter_is_an_error_at_the_parameter() {
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f16x2], y: &mut [bf16x2]) {
            y[0] = x[0] as bf16x2;
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("packed `f16x2`") && e.contains("`&[f16]`")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("packed `bf16x2`") && e.contains("`&mut [u32]`")),
        "{errs:?}"
    );
    // The wrapper still declares the module, with no host type `f16x2` in it.
    let out = crate::expand(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f16x2]) {}
    })
    .to_string();
    assert!(out.contains("pub mod k"), "{out}");
    assert!(!out.contains("DeviceRead < f16x2 >"), "{out}");
}

#[test]
fn the_wrapper_takes_const_arguments_by_name_too() {
    let out = crate::expand(quote! {
        #[variants(BM in [64], ACT in [Relu])]
        #[launch(block = 64)]
        pub fn k<const BM: u32, const ACT: crate::Act>(y: &mut [f32], n: u32) {
            y[0] = 1.0;
        }
        #[launch(block = 64)]
        pub fn plain(y: &mut [f32]) {
            y[0] = 1.0;
        }
    })
    .to_string();
    assert!(out.contains("pub struct Consts"), "{out}");
    assert!(out.contains("pub bm : u32"), "{out}");
    assert!(out.contains("pub act : crate :: Act"), "{out}");
    assert!(out.contains("pub fn launch_with"), "{out}");
    assert!(out.contains("let Consts { bm , act } = __consts"), "{out}");
    assert!(
        out.contains("launch (stream , cfg , bm , act , y , n)"),
        "{out}"
    );
    // A kernel without consts has no `Consts`.
    assert_eq!(out.matches("pub struct Consts").count(), 1, "{out}");
}

#[test]
fn byte_arithmetic_computes_at_16_bits_and_wraps_back() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(a: &[u8], b: &[i8], y: &mut [u8], z: &mut [i8]) {
            let i = thread_idx_x();
            y[i] = a[i] * a[i + 1] + 7;
            z[i] = -(b[i] >> 1) / 3;
            if a[i] == 250 { y[i] = !a[i]; }
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("mul.lo.u16"), "{text}");
    assert!(text.contains("add.u16"), "{text}");
    assert!(text.contains("cvt.u16.u8"), "{text}");
    assert!(text.contains("shr.s16"), "{text}");
    assert!(text.contains("neg.s16"), "{text}");
    assert!(text.contains("div.s16"), "{text}");
    assert!(text.contains("cvt.s16.s8"), "{text}");
    assert!(text.contains("setp.eq.u16"), "{text}");
    assert!(text.contains("not.b16"), "{text}");
    // No 8-bit arithmetic instruction (PTX has none).
    assert!(
        !text.contains("add.u8") && !text.contains("mul.lo.u8"),
        "{text}"
    );
}

#[test]
fn a_typed_read_of_byte_data_is_bounds_and_alignment_checked() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(w: &[u8], y: &mut [f32], z: &mut [u32]) {
            let i = thread_idx_x() * 18;
            y[0] = w.read::<f16>(i) as f32;
            z[0] = w.read::<u32>(i + 2);
            z[1] = w.read::<u8>(i + 3) as u32;
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("ld.global.u16"), "{text}");
    assert!(text.contains("ld.global.u32"), "{text}");
    assert!(text.contains("ld.global.u8"), "{text}");
    // The f16 and u32 reads test their alignment (1 and 3 bits); the byte read needs none.
    assert!(text.contains(", 1;"), "{text}");
    assert!(text.contains(", 3;"), "{text}");
    // Bounds over each value's bytes: the read of 2 bytes and of 4 (fault codes: elements in
    // the high half).
    assert!(text.contains(", 131072;"), "{text}");
    assert!(text.contains(", 262144;"), "{text}");
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], w: &[u8], y: &mut [f32]) {
            y[0] = x.read::<f32>(0);
            y[1] = w.read::<bool>(0) as f32;
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("reads typed values out of byte data")),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e.contains("takes the type it reads")),
        "{errs:?}"
    );
}

#[test]
fn a_vector_read_of_byte_data_is_one_access_checked_over_its_bytes() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(w: &[u8], z: &mut [u32], h: &mut [f32]) {
            let i = thread_idx_x() * 144;
            let v = w.read::<[u32; 4]>(i + 16);
            z[0] = v[0] ^ v[3];
            let p = w.read::<[f16; 4]>(i + 8);
            h[0] = p[0] as f32 + p[3] as f32;
        }
    });
    let text = &ptx[0].1;
    // One 16-byte load and one 8-byte load, each alignment-checked (4 and 3 bits) and
    // bounds-checked over all its bytes.
    assert!(text.contains("ld.global.v4.u32"), "{text}");
    assert!(text.contains("ld.global.v2.u32"), "{text}");
    assert!(text.contains(", 15;"), "{text}");
    assert!(text.contains(", 7;"), "{text}");
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(w: &[u8], z: &mut [u32]) {
            let v = w.read::<[u32; 3]>(0);
            z[0] = v[0];
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("a vector read moves 4, 8 or 16 bytes")),
        "{errs:?}"
    );
}

#[test]
fn two_dimensional_register_arrays_are_flat_registers_indexed_after_unrolling() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let mut acc = [[0.0f32; 4]; 3];
            let id = [[1.0f32, 0.0], [0.0, 1.0]];
            #[unroll]
            for i in 0..3 {
                acc[i] = x.load4(4 * i);
                #[unroll]
                for j in 0..4 {
                    acc[i][j] += id[1][1] * (j as f32);
                }
            }
            acc[2] = acc[0];
            acc[1] += acc[2];
            let r = acc[1];
            y.store4(0, r);
            y[4] = acc[2][3];
        }
    });
    let text = &ptx[0].1;
    // Three vector loads into the rows, one vector store of a row, no local memory.
    assert_eq!(text.matches("ld.global.v4.f32").count(), 3, "{text}");
    assert_eq!(text.matches("st.global.v4.f32").count(), 1, "{text}");
    assert!(!text.contains(".local"), "{text}");

    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], n: u32) {
            let mut acc = [[0.0f32; 4]; 2];
            acc[0][5] = 1.0;
            acc[0] = [1.0, 2.0];
            y[0] = acc[1][1];
        }
    });
    // Each dimension on its own: [0][5] is outside a row although inside the 8 registers.
    assert!(
        errs.iter()
            .any(|e| e == "index 5 is out of bounds for `[f32; 4]`"),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("mismatched types: expected `[f32; 4]` (a row), found `[f32; 2]`")),
        "{errs:?}"
    );
    // Indices known only after unrolling are checked then, per dimension too.
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], n: u32) {
            let mut acc = [[0.0f32; 4]; 2];
            #[unroll]
            for j in 0..5 {
                acc[1][j] = 2.0;
            }
            acc[n][0] = 3.0;
            y[0] = acc[1][1];
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("index 4 is out of bounds for a register array of 4")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("indexed only by values known after unrolling")),
        "{errs:?}"
    );
}

#[test]
fn two_dimensional_shared_arrays_are_row_major_and_checked_on_the_flat_index() {
    let ptx = ptx_of(quote! {
        #[launch(block = (32, 8))]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let t: Shared<[[f32; 33]; 32]>;
            let r = thread_idx_y();
            let c = thread_idx_x();
            t[r][c] = x[r * 32 + c];
            t[1][2] = 0.0;
            sync_threads();
            y[r * 32 + c] = t[c][r] + (t.len() as f32);
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains(".shared .align 16 .b8 smem_t_"), "{text}");
    assert!(text.contains("[4224]"), "32 rows of 33 f32: {text}");
    // Element [1][2] is at 4 * 35 bytes.
    assert!(text.contains("+140]"), "{text}");
    // `t.len()` is its rows.
    assert!(text.contains("0f42000000"), "{text}");
    // The two run-time accesses are checked against the 1056 elements.
    let checks = text
        .lines()
        .filter(|l| l.contains("setp.ge.u64") && l.ends_with(", 1056;"))
        .count();
    assert_eq!(checks, 2, "{text}");

    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32]) {
            let t: Shared<[[f32; 8]; 4]>;
            t[0][8] = 1.0;
            t[4][0] = 1.0;
            y[0] = t[1];
        }
    });
    assert!(
        errs.iter()
            .any(|e| e == "index 8 is out of bounds for `[f32; 8]`"),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e == "index 4 is out of bounds for `Shared<[[f32; 8]; 4]>`"),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("a row of a two-dimensional shared array is not a value")),
        "{errs:?}"
    );
}

#[test]
fn views_of_dynamic_shared_memory_sit_at_their_offsets_with_their_own_lengths() {
    let ptx = ptx_of(quote! {
        #[launch(block = 128)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let a: Shared<[[f32; 64]; 2]> = dyn_shared(0);
            let b: Shared<[f16; 8192]> = dyn_shared(512);
            let i = thread_idx_x();
            a[1][i] = x[i];
            b[3] = 1.0;
            sync_threads();
            y[i] = a[0][i] + (b[i] as f32);
        }
    });
    let text = &ptx[0].1;
    assert!(
        text.contains(".extern .shared .align 16 .b8 dyn_smem[];"),
        "{text}"
    );
    // No static shared memory; element 3 of `b` at byte 512 + 6.
    assert!(!text.contains(".shared .align 16 .b8 smem"), "{text}");
    assert!(text.contains("[dyn_smem+518]"), "{text}");
    // Each view is checked against its own length.
    assert!(text.contains(", 128;"), "{text}");
    assert!(text.contains(", 8192;"), "{text}");
    // The launch must hold `b` (512 + 16384 bytes), tested at the start.
    assert!(text.contains("%dynamic_smem_size"), "{text}");
    assert!(text.contains("setp.lt.u32"), "{text}");
    assert!(text.contains(", 16896;"), "{text}");

    let errs = errors_of(quote! {
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a: Shared<[f32; 64]> = dyn_shared(8);
            let b: Shared<[f32]> = dyn_shared(0);
            y[0] = a[0];
        }
    });
    assert!(
        errs.iter().any(|e| e
            == "a view of dynamic shared memory starts at a multiple of 16 bytes, not at byte 8"),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("a view of dynamic shared memory has a length")),
        "{errs:?}"
    );
}

#[test]
fn an_index_sum_wraps_in_its_type_and_keeps_the_address_offset_only_where_that_is_the_same() {
    let ptx = ptx_of(quote! {
        #[launch(block = 64)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32, j: u64) {
            let t: Shared<[f32; 64]>;
            let tid = thread_idx_x();
            t[tid] = 1.0;
            y[0] = x[i + 2];
            y[1] = x[j + 3];
            y[2] = x[4 * tid + 5];
            y[3] = t[i + 6];
        }
    });
    let text = &ptx[0].1;
    // `i + 2` (u32) is summed in 32 bits, then widened: the check and the address use it.
    let param = text
        .lines()
        .map(str::trim)
        .find(|l| l.contains("[k_param_2]"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|r| r.trim_end_matches(','))
        .expect("the load of i");
    let sum = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("add.u32") && l.ends_with(&format!("{param}, 2;")))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|r| r.trim_end_matches(','))
        .unwrap_or_else(|| panic!("no 32-bit sum of i + 2: {text}"));
    assert!(
        text.lines()
            .map(str::trim)
            .any(|l| l.starts_with("mul.wide.u32") && l.ends_with(&format!(", {sum}, 4;"))),
        "the address of i + 2 is made from the sum: {text}"
    );
    // A u64 index and a sum that cannot wrap (4 * tid + 5 < 2^32) keep the offset, as does
    // a u32 index into shared memory (32-bit addresses wrap with it).
    assert!(text.contains("+12]"), "{text}");
    assert!(text.contains("+20]"), "{text}");
    assert!(text.contains("+24]"), "{text}");
}

#[test]
fn a_library_struct_is_emitted_on_the_host_unless_its_host_type_is_imported() {
    let items = quote! {
        mod lib {
            pub struct P { pub n: u32, pub x: u64, pub on: bool }
            fn get(p: P) -> u32 { if p.on { p.n } else { p.x as u32 } }
        }
        #[launch(block = 32)]
        pub fn k(p: P, y: &mut [u32]) { y[0] = lib::get(p); }
    };
    let own = crate::expand(items.clone()).to_string();
    assert!(own.contains("pub struct P"), "{own}");
    assert!(own.contains("ParamStruct for P"), "{own}");
    // Imported: the `use` instead of the struct, and the layout checked at compile time
    // (size 24: `x` at 8, `on` at 16).
    let imported = crate::expand(quote! { use other::kernels::P; #items }).to_string();
    assert!(!imported.contains("struct P"), "{imported}");
    assert!(
        imported.contains("use other :: kernels :: P ;"),
        "{imported}"
    );
    assert!(
        imported.contains("size_of :: < P > () == 24usize"),
        "{imported}"
    );
    assert!(
        imported.contains("offset_of ! (P , x) == 8usize"),
        "{imported}"
    );
    assert!(
        imported.contains("offset_of ! (P , on) == 16usize"),
        "{imported}"
    );
    assert!(imported.contains("let _ : bool = p . on ;"), "{imported}");
    assert!(!imported.contains("compile_error"), "{imported}");
}

#[test]
fn an_l2_prefetch_is_bounds_checked_like_a_load_and_kept_without_a_result() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let i = thread_idx_x() as u64 * 32;
            x.prefetch_l2(i + 1024);
            if i < x.len() {
                x.prefetch_l2(i);
            }
            unsafe {
                x.prefetch_l2_unchecked(i + 4096);
            }
            y[0] = 1.0;
        }
    });
    let text = &ptx[0].1;
    assert_eq!(text.matches("prefetch.global.L2").count(), 3, "{text}");
    // Two bounds tests, the first prefetch's and the store's: the guarded prefetch is
    // proven, the unchecked one skips it.
    assert_eq!(text.matches("setp.ge.u64").count(), 2, "{text}");
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let t: Shared<[f32; 32]>;
            t.prefetch_l2(0);
            x.prefetch_l2_unchecked(0);
            y[0] = 1.0;
        }
    });
    assert!(
        errs.iter().any(|e| e.contains("works on slice parameters")),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e.contains("only inside an `unsafe")),
        "{errs:?}"
    );
}

/// A warpgroup product of two 128-byte swizzled tiles: the descriptors, the in-place
/// accumulators and the fences, on sm_90a.
#[test]
fn wgmma_updates_its_accumulators_in_place_from_checked_descriptors() {
    let out = ptx_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a_s: Shared<[bf16; 64 * 64]>;
            let b_s: Shared<[bf16; 64 * 64]>;
            let mut acc = [0.0f32; 32];
            fence_proxy_async();
            sync_threads();
            wgmma_fence();
            #[unroll]
            for ks in 0..4 {
                acc = wgmma_bf16(acc, a_s.wgmma_desc(0, ks * 16, 64), b_s.wgmma_desc(0, ks * 16, 64), ks > 0);
            }
            wgmma_commit();
            wgmma_wait(0);
            y[thread_idx_x()] = acc[0] + acc[31];
        }
    });
    let ptx = &out[0].1;
    assert!(ptx.contains(".target sm_90a"), "{ptx}");
    assert!(ptx.contains(".shared .align 1024"), "{ptx}");
    for needle in [
        "fence.proxy.async.shared::cta;",
        "wgmma.fence.sync.aligned;",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
    ] {
        assert!(ptx.contains(needle), "{needle} in\n{ptx}");
    }
    let wgmmas: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"))
        .collect();
    assert_eq!(wgmmas.len(), 4, "{ptx}");
    // The same accumulator registers in every product (in place: nothing copies them while
    // a product is in flight).
    let regs = |l: &str| l.split('}').next().map(str::to_string);
    assert!(
        wgmmas.iter().all(|l| regs(l) == regs(wgmmas[0])),
        "{wgmmas:?}"
    );
    // The descriptors: 128-byte swizzle, 1024-byte groups of rows, and the second K step 32
    // bytes on.
    assert!(
        ptx.contains(&format!("{}", (64u64 | (1 << 30)) << 32)),
        "{ptx}"
    );
}

#[test]
fn wgmma_needs_sm_90a_and_an_in_place_update_of_the_right_shapes() {
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a_s: Shared<[bf16; 64 * 64]>;
            let mut acc = [0.0f32; 32];
            wgmma_fence();
            acc = wgmma_bf16(acc, a_s.wgmma_desc(0, 0, 64), a_s.wgmma_desc(0, 0, 64), true);
            y[0] = acc[0];
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("sm_90a") && e.contains("add #[target(sm_90a)]")),
        "{errs:?}"
    );
    let errs = errors_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a_s: Shared<[bf16; 64 * 64]>;
            let b_s: Shared<[f16; 64 * 64]>;
            let mut acc = [0.0f32; 32];
            wgmma_fence();
            // B of another type, then a descriptor of 32 rows for a 64-column tile.
            acc = wgmma_bf16(acc, a_s.wgmma_desc(0, 0, 64), b_s.wgmma_desc(0, 0, 64), true);
            acc = wgmma_bf16(acc, a_s.wgmma_desc(0, 0, 64), a_s.wgmma_desc(0, 0, 32), true);
            // Not in place.
            let other = wgmma_bf16(acc, a_s.wgmma_desc(0, 0, 64), a_s.wgmma_desc(0, 0, 64), true);
            // A start that is not a multiple of 32 bytes.
            acc = wgmma_bf16(acc, a_s.wgmma_desc(0, 8, 64), a_s.wgmma_desc(0, 0, 64), true);
            y[0] = acc[0] + other[0];
        }
    });
    for needle in [
        "`MatrixDesc<bf16, 64>` here (from `wgmma_desc`), not `MatrixDesc<f16, 64>`",
        "`MatrixDesc<bf16, 64>` here (from `wgmma_desc`), not `MatrixDesc<bf16, 32>`",
    ] {
        assert!(
            errs.iter().any(|e| e.contains(needle)),
            "{needle}: {errs:?}"
        );
    }
}

/// `wgmma` with A in registers: a `[u32; 4]` first operand is the thread's fragment of A,
/// named directly as a vector of four `.b32` registers, with B's descriptor; 16-bit inputs
/// keep only `imm-trans-b`, TF32 has no transpose immediates.
#[test]
fn wgmma_takes_a_from_registers() {
    let out = ptx_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a_s: Shared<[bf16; 64 * 64]>;
            let b_s: Shared<[bf16; 64 * 64]>;
            let t_s: Shared<[f32; 32 * 64]>;
            let tid = thread_idx_x();
            let mut acc = [0.0f32; 32];
            let mut acc_t = [0.0f32; 8];
            let a = a_s.ldmatrix_x4(8 * (tid % 64));
            let at = [t_s[tid].to_tf32(), t_s[tid + 1].to_tf32(), t_s[tid + 2].to_tf32(), t_s[tid + 3].to_tf32()];
            fence_proxy_async();
            sync_threads();
            wgmma_fence();
            acc = wgmma_bf16(acc, a, b_s.wgmma_desc(0, 0, 64), false);
            acc_t = wgmma_tf32(acc_t, at, t_s.wgmma_desc(0, 0, 16), false);
            wgmma_commit();
            wgmma_wait(0);
            y[tid] = acc[0] + acc[31] + acc_t[7];
        }
    });
    let ptx = &out[0].1;
    assert!(ptx.contains(".target sm_90a"), "{ptx}");
    let line = |pat: &str| {
        ptx.lines()
            .find(|l| l.contains(pat))
            .unwrap_or_else(|| panic!("{pat} in\n{ptx}"))
            .trim()
            .to_string()
    };
    // After the accumulators: `{a0, a1, a2, a3}, b-desc, scale-d, 1, 1[, 0]`.
    let after_acc = |l: &str| l.split_once("}, ").map(|(_, r)| r.to_string()).unwrap();
    let bf = after_acc(&line(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
    ));
    let tf = after_acc(&line("wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32"));
    for (l, imms) in [(&bf, ", 1, 1, 0;"), (&tf, ", 1, 1;")] {
        let (a, rest) = l.split_once('}').unwrap();
        assert_eq!(a.matches("%r").count(), 4, "{l}");
        assert!(a.starts_with("{%r"), "{l}");
        assert!(rest.starts_with(", %rd") && rest.ends_with(imms), "{l}");
        assert_eq!(
            rest.matches(", ").count(),
            imms.matches(", ").count() + 2,
            "{l}"
        );
    }
}

#[test]
fn wgmma_with_a_in_registers_needs_a_u32_array_of_four() {
    let errs = errors_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 128)]
        pub fn k(y: &mut [f32]) {
            let a_s: Shared<[bf16; 64 * 64]>;
            let mut acc = [0.0f32; 32];
            let a = a_s.ldmatrix_x4(0);
            let a2 = a_s.ldmatrix_x2(0);
            let af = [1.0f32, 2.0, 3.0, 4.0];
            wgmma_fence();
            acc = wgmma_bf16(acc, a2, a_s.wgmma_desc(0, 0, 64), true);
            acc = wgmma_bf16(acc, af, a_s.wgmma_desc(0, 0, 64), true);
            // Only A may be in registers.
            acc = wgmma_bf16(acc, a, a, true);
            wgmma_commit();
            wgmma_wait(0);
            y[0] = acc[0];
        }
    });
    for needle in [
        "`wgmma_bf16` takes `MatrixDesc<bf16, 64>` here (from `wgmma_desc`) or `[u32; 4]` (A's fragment in registers), not `[u32; 2]`",
        "`wgmma_bf16` takes `MatrixDesc<bf16, 64>` here (from `wgmma_desc`) or `[u32; 4]` (A's fragment in registers), not `[f32; 4]`",
        "`wgmma_bf16` takes `MatrixDesc<bf16, 64>` here (from `wgmma_desc`), not `[u32; 4]`",
    ] {
        assert!(
            errs.iter().any(|e| e.contains(needle)),
            "{needle}: {errs:?}"
        );
    }
}

#[test]
fn tma_copies_complete_on_mbarriers_from_proven_ranges() {
    let out = ptx_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<bf16, 64, 32, 1>, y: &mut [f32]) {
            let t: Shared<[bf16; 2 * 64 * 32]>;
            let full: Shared<[u64; 2]>;
            let tid = thread_idx_x();
            if tid == 0 {
                full.mbar_init(0, 1);
                full.mbar_init(1, 1);
            }
            fence_proxy_async();
            sync_threads();
            let s = block_idx_x() % 2;
            let i = s * (64 * 32);
            if (s < 2) & (((i as u64) + (64 * 32) as u64) <= (t.len() as u64)) {
                if tid == 0 {
                    prefetch_tensormap(map);
                    full.mbar_arrive_expect_tx(s, 64 * 32 * 2);
                    t.tma_load(i, map, 0, block_idx_y() as i32, 0, full, s);
                }
                full.mbar_wait(s, 0);
                y[tid] = t[i + tid] as f32;
                full.mbar_arrive(s);
            }
        }
    });
    let ptx = &out[0].1;
    assert!(
        ptx.contains(".param .align 64 .b8 k_param_1[128]") || ptx.contains(".align 64 .b8"),
        "{ptx}"
    );
    assert!(ptx.contains(".shared .align 1024"), "{ptx}");
    // The `mbarrier` words need no tile's 1024-byte alignment.
    assert!(ptx.contains(".shared .align 16 .b8 smem_full_"), "{ptx}");
    for needle in [
        "cvta.param.u64",
        "mbarrier.init.shared::cta.b64",
        "prefetch.tensormap [",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
    ] {
        assert!(ptx.contains(needle), "{needle} in\n{ptx}");
    }
    // The copy's destination is rounded down to 128 bytes (a fault reports a misaligned one).
    assert!(ptx.contains(", -128;"), "{ptx}");
}

#[test]
fn tma_copies_need_proofs_maps_of_their_type_and_sm_90() {
    // An unproven box: a compile error, not a skipped copy.
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<f32, 32, 8, 1>, i: u32) {
            let t: Shared<[f32; 1024]>;
            let full: Shared<[u64; 1]>;
            t.tma_load(i, map, 0, 0, 0, full, 0);
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("prove them inside the array")),
        "{errs:?}"
    );
    // A map of another element type, an mbarrier array of another type, sm_80.
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<f16, 32, 8, 1>) {
            let t: Shared<[f32; 256]>;
            let bad: Shared<[u32; 2]>;
            bad.mbar_init(0, 1);
            if 0 + 256 <= t.len() {
                t.tma_load(0, map, 0, 0, 0, bad, 0);
            }
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("takes a `TensorMap<f32, C, R, D>`")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("`mbar_init` works on `mbarrier` objects")),
        "{errs:?}"
    );
    let errs = errors_of(quote! {
        #[target(sm_80)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<f32, 32, 8, 1>) {
            let t: Shared<[f32; 256]>;
            let full: Shared<[u64; 1]>;
            full.mbar_arrive_expect_tx(0, 1024);
            if 0 + 256 <= t.len() {
                t.tma_load(0, map, 0, 0, 0, full, 0);
            }
        }
    });
    assert!(errs.iter().any(|e| e.contains("needs sm_90")), "{errs:?}");
    // Boxes the hardware does not copy.
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<f32, 3, 8, 1>, m2: TensorMap<f32, 32, 300, 1>) {}
    });
    assert!(
        errs.iter().any(|e| e.contains("multiple of 16 bytes")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("1 ..= 256 elements, not 300")),
        "{errs:?}"
    );
}

#[test]
fn tma_stores_go_through_writable_maps_in_bulk_groups() {
    let out = ptx_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMapMut<f32, 32, 8, 1>) {
            let t: Shared<[f32; 2 * 256]>;
            let i = (block_idx_x() % 2) * 256;
            t[thread_idx_x()] = 1.0;
            fence_proxy_async();
            sync_threads();
            if (((i as u64) + 256) <= (t.len() as u64)) & (thread_idx_x() == 0) {
                t.tma_store(i, map, 0, block_idx_y() as i32, 0);
                bulk_commit();
                bulk_wait_read(1);
                bulk_wait(0);
            }
        }
    });
    let ptx = &out[0].1;
    assert!(ptx.contains(".shared .align 1024"), "{ptx}");
    for needle in [
        "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [",
        "cp.async.bulk.commit_group;",
        "cp.async.bulk.wait_group.read 1;",
        "cp.async.bulk.wait_group 0;",
    ] {
        assert!(ptx.contains(needle), "{needle} in\n{ptx}");
    }
    // The source is rounded down to 128 bytes (a fault reports a misaligned one).
    assert!(ptx.contains(", -128;"), "{ptx}");
    // A read-only map, an unproven box, sm_80.
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMap<f32, 32, 8, 1>, i: u32) {
            let t: Shared<[f32; 1024]>;
            if 0 + 256 <= t.len() {
                t.tma_store(0, map, 0, 0, 0);
            }
            t.tma_store(i, map, 0, 0, 0);
        }
    });
    let needle = "takes a `TensorMapMut<f32, C, R, D>` parameter (a map the kernel may write through), not `TensorMap<f32, 32, 8, 1>`";
    assert!(
        errs.iter().any(|e| e.contains(needle)),
        "{needle}: {errs:?}"
    );
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 128)]
        pub fn k(map: TensorMapMut<f32, 32, 8, 1>, i: u32) {
            let t: Shared<[f32; 1024]>;
            t.tma_store(i, map, 0, 0, 0);
        }
    });
    assert!(
        errs.iter().any(|e| e.contains("`tma_store` reads elements `i .. i + 256` (the box) asynchronously: prove them inside the array")),
        "{errs:?}"
    );
    let errs = errors_of(quote! {
        #[target(sm_80)]
        #[launch(block = 128)]
        pub fn k(map: TensorMapMut<f32, 32, 8, 1>) {
            let t: Shared<[f32; 256]>;
            if 0 + 256 <= t.len() {
                t.tma_store(0, map, 0, 0, 0);
            }
            bulk_commit();
        }
    });
    assert!(errs.iter().any(|e| e.contains("needs sm_90")), "{errs:?}");
}

#[test]
fn stmatrix_stores_a_warps_fragments_and_skips_the_warp_out_of_bounds() {
    let out = ptx_of(quote! {
        #[target(sm_90)]
        #[launch(block = 32)]
        pub fn k(x: &[u32], y: &mut [u16]) {
            let t: Shared<[u16; 16 * 64]>;
            let lane = lane_id();
            let v = [x[lane], x[lane + 32], x[lane + 64], x[lane + 96]];
            // A constant row, inside the array and aligned: no check.
            t.stmatrix_x4(64, v);
            // Unproven: a lane out of bounds makes the warp skip it.
            t.stmatrix_x2_trans(x[0] * 8, [v[0], v[1]]);
            sync_warp();
            y[lane] = t[lane];
        }
    });
    let ptx = &out[0].1;
    for needle in [
        "stmatrix.sync.aligned.m8n8.x4.shared.b16",
        "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "vote.sync.any.pred",
    ] {
        assert!(ptx.contains(needle), "{needle}: {ptx}");
    }
    // One vote: the proven store has none.
    assert_eq!(ptx.matches("vote.sync.any.pred").count(), 1, "{ptx}");
    let errs = errors_of(quote! {
        #[target(sm_80)]
        #[launch(block = 32)]
        pub fn k(x: &[u32]) {
            let t: Shared<[u16; 1024]>;
            t.stmatrix_x1(0, [x[0]]);
        }
    });
    assert!(errs.iter().any(|e| e.contains("sm_90")), "{errs:?}");
    let errs = errors_of(quote! {
        #[target(sm_90)]
        #[launch(block = 32)]
        pub fn k(x: &[u32]) {
            let t: Shared<[u8; 1024]>;
            t.stmatrix_x1(0, [x[0]]);
            let f: Shared<[f32; 1024]>;
            f.stmatrix_x2_trans(0, [x[0], x[1]]);
            t.stmatrix_x4(0, [x[0], x[1]]);
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("stores 16-bit elements") && e.contains("`u8`")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("stores 16-bit elements") && e.contains("`f32`")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.contains("[u32; 4]")), "{errs:?}");
}

#[test]
fn an_array_pattern_of_let_binds_each_entry() {
    let ptx = ptx_of(quote! {
        fn pair(a: u32, b: u32) -> [u32; 3] {
            [a + b, a * b, a]
        }
        #[launch(block = 32)]
        pub fn k(y: &mut [u32], n: u32) {
            let [sum, mut prod, _] = pair(n, 7);
            prod += 1;
            let [row, col]: [u32; 2] = [sum, prod];
            y[0] = row;
            y[1] = col;
        }
    });
    let text = &ptx[0].1;
    // n + 7 and n * 7 + 1, with no local memory for the arrays.
    assert!(
        text.contains("add.s32") || text.contains("add.u32"),
        "{text}"
    );
    assert!(text.contains("mul.lo"), "{text}");
    assert!(!text.contains(".local"), "{text}");
    // Each name takes its own entry: constants stay constants, so the stores show which.
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [u32]) {
            let [a, _, c] = [300u32, 500, 700];
            y[0] = a;
            y[1] = c;
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("300") && text.contains("700"), "{text}");
    assert!(!text.contains("500"), "{text}");
    assert!(
        text.find("300").unwrap() < text.find("700").unwrap(),
        "{text}"
    );

    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [u32], n: u32) {
            let [a, b] = [n, n, n];
            let [Some(c)] = [n];
            y[0] = a + b;
        }
    });
    assert!(
        errs.iter().any(|e| e.contains("holds names and `_` only")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e == "an array pattern of 2 entries does not match `[u32; 3]`"),
        "{errs:?}"
    );
}

#[test]
fn a_helper_call_of_constants_is_a_const_argument_and_a_constant_condition() {
    let ptx = ptx_of(quote! {
        fn wide<const N: u32>() -> bool {
            N > 2
        }
        fn lanes<const N: u32>() -> u32 {
            if wide::<N>() { N } else { 1 }
        }
        fn fill<const L: u32>(y: &mut [f32], v: f32) {
            let mut r = [0.0f32; L];
            // Pruned where `L` is 1: the index 3 exists only in the taken branch.
            if wide::<L>() {
                r[3] = v;
            }
            #[unroll]
            for i in 0..L {
                y[i] = r[i] + v;
            }
        }
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], v: f32) {
            fill::<{ lanes::<4>() }>(y, v);
            fill::<{ lanes::<2>() }>(y, v);
        }
    });
    let text = &ptx[0].1;
    // 4 stores from the first call, 1 from the second; no local memory.
    assert_eq!(text.matches("st.global.f32").count(), 5, "{text}");
    assert!(!text.contains(".local"), "{text}");

    let errs = errors_of(quote! {
        fn runtime(x: u32) -> u32 {
            x + 1
        }
        fn take<const N: u32>(y: &mut [u32]) {
            y[0] = N;
        }
        #[launch(block = 32)]
        pub fn k(y: &mut [u32], n: u32) {
            take::<{ runtime(n) }>(y);
        }
    });
    assert!(
        errs.iter()
            .any(|e| e == "const arguments must be constants"),
        "{errs:?}"
    );
}

#[test]
fn an_assertion_on_constants_holds_for_every_variant_or_names_the_one_it_fails() {
    // True in every variant: nothing is emitted for it.
    let kernel = |cond: proc_macro2::TokenStream| {
        quote! {
            fn fits<const N: u32, const G: u32>() -> bool {
                N % G == 0
            }
            fn fill<const N: u32, const G: u32>(y: &mut [f32], v: f32) {
                assert!(#cond, "the groups end with the run");
                #[unroll]
                for i in 0..N / G {
                    y[i] = v;
                }
            }
            #[variants(N in [8, 12])]
            #[launch(block = 32)]
            pub fn k<const N: u32>(y: &mut [f32], v: f32) {
                fill::<N, 4>(y, v);
            }
        }
    };
    let with = ptx_of(kernel(quote! { fits::<N, G>() }));
    let without = ptx_of(kernel(quote! { true }));
    assert_eq!(with.len(), 2);
    assert_eq!(with, without);

    // False in the variant N = 12 of groups of 8 only.
    let errs = errors_of(quote! {
        fn fill<const N: u32, const G: u32>(y: &mut [f32], v: f32) {
            assert!(N % G == 0, "the groups end with the run");
            y[0] = v;
        }
        #[variants(N in [8, 16, 12])]
        #[launch(block = 32)]
        pub fn k<const N: u32>(y: &mut [f32], v: f32) {
            fill::<N, 8>(y, v);
        }
    });
    assert_eq!(
        errs,
        ["assertion failed: `N % G == 0`: the groups end with the run (variant N = 12)"],
        "{errs:?}"
    );

    // A condition left to run time, and one that is not a bool.
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], n: u32) {
            assert!(n > 2);
            assert!(3u32);
            y[0] = 1.0;
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("`assert!` takes a condition known when the kernel is expanded")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("mismatched types: expected `bool`, found `u32`")),
        "{errs:?}"
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
}
