use crate::compile_for_test;
use quote::quote;

fn errors_of(tokens: proc_macro2::TokenStream) -> Vec<String> {
    match compile_for_test(tokens) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e,
    }
}

fn ptx_of(tokens: proc_macro2::TokenStream) -> Vec<(String, String)> {
    match compile_for_test(tokens) {
        Ok(v) => v,
        Err(e) => panic!("errors: {e:#?}"),
    }
}

/// Writes the PTX to `target/tmp/ptx-unit/` so that `ptxas` can be run on it by hand.
fn dump(name: &str, ptx: &[(String, String)]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    let _ = std::fs::create_dir_all(&dir);
    for (entry, text) in ptx {
        let _ = std::fs::write(dir.join(format!("{name}-{entry}.ptx")), text);
    }
}

#[test]
fn elementwise_kernel_with_enum_variants() {
    let ptx = ptx_of(quote! {
        #[variants(ACT in [Identity, Relu, Gelu])]
        #[launch(block = 256)]
        pub fn bias_act<const ACT: Act>(x: &[f32], bias: &[f32], y: &mut [f32], n: u32, cols: u32) {
            let i = block_idx_x() * block_dim_x() + thread_idx_x();
            if i < n {
                y[i] = act::<ACT>(x[i] + bias[i % cols]);
            }
        }

        fn act<const A: Act>(v: f32) -> f32 {
            match A {
                Act::Identity => v,
                Act::Relu => v.max(0.0),
                Act::Gelu => 0.5 * v * (1.0 + (v * 0.70710677).erf()),
            }
        }
    });
    dump("bias_act", &ptx);
    assert_eq!(ptx.len(), 3);
    assert_eq!(ptx[1].0, "bias_act__ACT_Relu");
    let relu = &ptx[1].1;
    assert!(
        relu.contains(".visible .entry bias_act__ACT_Relu("),
        "{relu}"
    );
    assert!(relu.contains("max.f32"), "{relu}");
    assert!(relu.contains(".reqntid 256, 1, 1"), "{relu}");
    assert!(!ptx[0].1.contains("max.f32"));
}

/// Assembles the PTX with `ptxas` when it is installed (`target/ptxas/ptxas`).
fn assemble(name: &str, ptx: &[(String, String)]) {
    let Some(ptxas) = crate::test_ptxas() else {
        eprintln!("SKIPPED ptxas check of {name}: no ptxas (PAGESIFT_PTXAS or target/ptxas/ptxas)");
        return;
    };
    dump(name, ptx);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/ptx-unit");
    for (entry, text) in ptx {
        let target = text
            .lines()
            .find_map(|l| l.strip_prefix(".target "))
            .unwrap_or("sm_70");
        let src = dir.join(format!("{name}-{entry}.ptx"));
        let out = std::process::Command::new(&ptxas)
            .args([format!("-arch={target}"), "-v".into()])
            .arg(&src)
            .arg("-o")
            .arg(dir.join(format!("{name}-{entry}.cubin")))
            .output()
            .expect("running ptxas");
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "ptxas rejected {entry}:\n{report}\n{text}"
        );
    }
}

#[test]
fn language_features_assemble() {
    let ptx = ptx_of(quote! {
        #[launch(block = (8, 4, 2))]
        pub fn ints(a: &[i32], b: &mut [u64], c: &mut [u8], d: &[i8], n: u32, s: i16) {
            let t = thread_idx_x() + thread_idx_y() * 8 + thread_idx_z() * 32;
            let w = warp_id();
            let mut acc: i64 = 0;
            for k in 0..n {
                let v = a[k];
                if v < 0 { continue; }
                if v > 1000 { break; }
                acc += (v as i64) * 3 - (v >> 2) as i64;
            }
            let mut j = 0u32;
            while j < 10 { j += 3; if j == 6 { j = j ^ 1; } }
            b[t] = acc as u64 + (j as u64) << 2u32;
            let q = d.load4_nc(4 * t);
            let m = [q[0] as u8, q[1] as u8, q[2] as u8, (q[3] as i32 + s as i32) as u8];
            c.store4(4 * t, m);
            c[t + 1000] = (w + t.count_ones() + t.leading_zeros() + t.mul_hi(7u32)) as u8;
            let r = b.atomic_max(0u32, 5u64);
            let old = b.atomic_cas(1u32, r, 9u64);
            if old == 3 && t != 0 || !(t > 4) { b[2] = b[2] + 1; }
            let neg = -(s as i32);
            b[3] = (neg.abs().min(4).max(-2) % 3) as u64;
        }

        #[target(sm_80)]
        #[launch(block = 64)]
        pub fn floats(x: &[f32], h: &mut [f16], g: &mut [bf16], y: &mut [f64], flag: bool) {
            let i = thread_idx_x();
            let v = x[i];
            let mut out = [0.0f32; 8];
            #[unroll]
            for k in 0..8u32 {
                out[k] = match k % 4 {
                    0 => v.exp() + v.exp_fast(),
                    1 => v.ln() + v.ln_fast() + v.log2() + v.exp2(),
                    2 => v.tanh() + v.tanh_fast() + v.erf() + v.erf_fast(),
                    _ => v.sqrt() + v.rsqrt() + v.rsqrt_fast() + v.recip() + v.sin_fast() + v.floor() + v.ceil() + v.trunc() + v.round_ties_even(),
                };
            }
            let mut s = 0.0f32;
            #[unroll]
            for k in 0..8 { s = s.mul_add(0.5, out[k]); }
            if flag && !s.is_nan() { s = s.copysign(-1.0) / 3.0; }
            let hv = s as f16;
            let pair = f16x2::new(hv, hv * hv);
            let p2 = pair * pair + pair;
            h[i] = p2.lo().max(p2.hi()) - (-hv).abs();
            let b = s as bf16;
            g[i] = b.mul_add(b, b);
            y[i] = (g[i] as f64).sqrt() + f64::from_bits(x[i].to_bits() as u64) + (h[i] as f64);
            let l = shfl_down(s, 1u32) + shfl_up(s, 1u32) + shfl_idx(s, 0u32) + shfl_xor(s, 2u32);
            if vote_any(l > 0.0) && vote_all(l < 100.0) || vote_ballot(flag) == 0 {
                y[i + 64] = l as f64;
            }
        }

        #[launch(block = 128)]
        pub fn shared_mem(x: &[f32], y: &mut [f32], n: u32) {
            let tile: Shared<[f32; 128]>;
            let counts: Shared<[u32; 4]>;
            let dynbuf: Shared<[f32]>;
            let t = thread_idx_x();
            tile[t] = x[t];
            dynbuf[t] = 2.0 * x[t];
            if t < 4 { counts[t] = 0; }
            sync_threads();
            let v = tile.load4(t / 4 * 4);
            counts.atomic_add(t % 4, 1u32);
            tile.store4(0u32, v);
            sync_threads();
            y[t] = tile[(t + 1) % tile.len()] + dynbuf[t] + counts[0] as f32 + helper_sum(tile, t);
        }

        fn helper_sum(s: Shared<[f32; 128]>, t: u32) -> f32 {
            if t == 0 { return 0.0; }
            s[t - 1] + s[t]
        }
    });
    assert_eq!(ptx.len(), 3);
    assemble("features", &ptx);
    let floats = &ptx[1].1;
    assert!(floats.contains(".target sm_80"));
    assert!(floats.contains("tanh.approx.f32"));
    assert!(
        floats.contains("mul.rn.f16x2") || floats.contains("mul.f16x2"),
        "{floats}"
    );
    let shared = &ptx[2].1;
    assert!(shared.contains(".extern .shared .align 16 .b8 dyn_smem[];"));
    assert!(shared.contains("bar.sync 0;"));
}

#[test]
fn unrolled_loops_use_constant_offsets_and_no_branches() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let base = thread_idx_x() * 4;
            let mut acc = [0.0f32; 4];
            // Unchecked, to see the addressing alone (checks add branches).
            unsafe {
                #[unroll]
                for j in 0..4 {
                    acc[j] = x.get_unchecked(base + j) * 2.0;
                }
                y.store4_unchecked(base, acc);
            }
        }
    });
    let text = &ptx[0].1;
    assert!(!text.contains("bra"), "{text}");
    for off in ["+4]", "+8]", "+12]"] {
        assert!(text.contains(off), "{off} missing:\n{text}");
    }
    assert!(text.contains("st.global.v4.f32"), "{text}");
}

#[test]
fn short_circuit_guards_the_load() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], n: u32) {
            let i = thread_idx_x();
            if i < n && x[i] > 0.0 {
                y[i] = 1.0;
            }
        }
    });
    let text = &ptx[0].1;
    let setp = text.find("setp.lt.u32").expect("the bound check");
    let load = text.find("ld.global.f32").expect("the load");
    let skip = text[setp..load].find("bra").map(|p| p + setp);
    assert!(
        skip.is_some_and(|b| b < load),
        "the load is not guarded:\n{text}"
    );
}

#[test]
fn half_arithmetic_goes_through_f32_where_the_target_lacks_it() {
    let src = |target: proc_macro2::TokenStream| {
        quote! {
            #[target(#target)]
            #[launch(block = 32)]
            pub fn k(x: &[bf16], y: &mut [bf16]) {
                let i = thread_idx_x();
                y[i] = x[i] + x[i + 1];
            }
        }
    };
    let sm80 = ptx_of(src(quote!(sm_80)));
    let t = &sm80[0].1;
    assert!(
        t.contains("add.rn.f32") && t.contains("cvt.rn.bf16.f32") && !t.contains("add.rn.bf16"),
        "{t}"
    );
    assert!(t.contains(".version 7.0"), "{t}");
    let sm90 = ptx_of(src(quote!(sm_90)));
    let t = &sm90[0].1;
    assert!(
        t.contains("add.rn.bf16") && t.contains(".version 7.8"),
        "{t}"
    );
}

#[test]
fn a_register_index_unknown_after_unrolling_is_an_error() {
    let errs = compile_for_test(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], n: u32) {
            let mut acc = [0.0f32; 4];
            acc[n % 4] = 1.0;
            y[0] = acc[0];
        }
    })
    .err()
    .unwrap_or_default();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("indexed only by values known after unrolling"),
        "{errs:?}"
    );
}

#[test]
fn asm_with_vector_braces_and_several_outputs() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[u64], y: &mut [u32]) {
            let i = thread_idx_x();
            let halves = asm!("mov.b64 {{{0}, {1}}}, {2};", out(u32), out(u32), x[i]);
            y[2 * i] = halves[0];
            y[2 * i + 1] = halves[1];
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains("mov.b64 {%r"), "{text}");
    assemble("asm_outputs", &ptx);
}

/// The number of bounds checks (`setp.ge.u64` against a length) and fault blocks of a kernel.
fn checks_of(tokens: proc_macro2::TokenStream) -> (usize, usize, String) {
    let ptx = ptx_of(tokens);
    let text = ptx[0].1.clone();
    let checks = text.matches("setp.ge.u64").count();
    let faults = text.matches("atom.global.cas.b32").count();
    (checks, faults, text)
}

#[test]
fn every_access_is_checked_and_records_its_fault() {
    let (checks, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            y[i] = x[i + 1];
        }
    });
    assert_eq!((checks, faults), (2, 2), "{text}");
    // The hidden fault record comes first, each slice is (address, length).
    assert!(text.contains(".param .u64 k_fault,"), "{text}");
    assert!(text.contains(".param .u64 k_param_0_len,"), "{text}");
    // The fault block: the flag by compare-and-swap, then parameter 0 | 1 element << 16.
    assert!(text.contains("atom.global.cas.b32 %r"), "{text}");
    assert!(text.contains(", 65536;"), "{text}");
    assert!(text.contains(", 65537;"), "y is parameter 1: {text}");
}

#[test]
fn a_dominating_length_test_elides_the_check() {
    let (checks, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let i = (block_idx_x() * 32 + thread_idx_x()) as u64;
            if i < x.len() && i < y.len() {
                y[i] = x[i] * 2.0;
            }
        }
    });
    assert_eq!((checks, faults), (0, 0), "{text}");
}

#[test]
fn a_test_on_another_slice_or_a_reassigned_index_proves_nothing() {
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let mut i = thread_idx_x() as u64;
            if i < x.len() {
                y[i] = 1.0;
                x[i];
                i += 1;
                y[i] = x[i];
            }
        }
    });
    // `y[i]` is not bounded by `x.len()`; after `i += 1` nothing is known.
    assert_eq!(checks, 3, "{text}");
}

#[test]
fn grid_stride_loops_bounded_by_the_length_need_no_checks() {
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 256)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let mut i = (block_idx_x() * 256 + thread_idx_x()) as u64;
            let step = (grid_dim_x() * 256) as u64;
            while i < y.len() && i < x.len() {
                y[i] = x[i] + 1.0;
                i += step;
            }
            for j in 0..x.len() {
                y[0] = x[j];
            }
        }
    });
    // Only `y[0]` in the `for` loop is checked (its one fault block; the other `setp.ge` is
    // the loop's condition).
    assert_eq!(checks, 2, "{text}");
    assert_eq!(text.matches("atom.global.cas.b32").count(), 1, "{text}");
}

#[test]
fn vector_accesses_use_their_constant_offsets_and_shared_constants_fold() {
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let tile: Shared<[f32; 64]>;
            let i = (thread_idx_x() * 4) as u64;
            if i + 8 <= x.len() {
                let a = x.load4(i);
                let b = x.load4(i + 4);
                tile[3] = a[0] + b[0];
                if i + 3 < y.len() {
                    y.store4(i, a);
                    y[i + 3] = 1.0;
                    y[i + 4] = 2.0;
                }
            }
            tile[64] = 0.0;
        }
    });
    // Checked: `y[i + 4]` (one compare) and `tile[64]` (always out of bounds: a plain
    // branch to its fault block), nothing else; the bases of `x` and `y` are not known to be
    // aligned, so the three vector accesses test their addresses.
    assert_eq!(checks, 1, "{text}");
    assert_eq!(text.matches("and.b64").count(), 3, "{text}");
    assert_eq!(text.matches("atom.global.cas.b32").count(), 5, "{text}");
}

/// The number of alignment tests (`and` of an address with its access's bytes less one,
/// compared with `setp.ne`) of a kernel.
fn align_tests_of(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| {
            let mask = [", 3;", ", 7;", ", 15;"].iter().any(|m| w[0].ends_with(m));
            w[0].contains("and.b") && mask && w[1].contains("setp.ne.u")
        })
        .count()
}

#[test]
fn a_vector_access_tests_its_alignment_into_its_own_fault_block() {
    let (checks, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            let v = x.load4(i);
            y.store2(i, [v[0], v[1]]);
        }
    });
    // Two bounds checks and two alignment tests (16 and 8 bytes), each with a fault block;
    // the code word of a misaligned fault has bit 31 and the access's bytes at bit 24.
    assert_eq!((checks, faults), (2, 4), "{text}");
    assert_eq!(align_tests_of(&text), 2, "{text}");
    let code16 = (1u32 << 31) | (16 << 24) | (4 << 16);
    let code8 = (1u32 << 31) | (8 << 24) | (2 << 16) | 1;
    assert!(text.contains(&format!(", {code16};")), "{text}");
    assert!(text.contains(&format!(", {code8};")), "{text}");
}

#[test]
fn an_aligned_base_and_an_index_in_whole_vectors_prove_the_alignment() {
    let (checks, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], head: u32, n: u32) {
            let h = head & 0xFFFF_FFFCu32;
            if x.is_aligned(0, 16) && y.is_aligned(0, 16) {
                // Multiples of 4 elements: a masked start plus a step of whole vectors.
                let mut e = h + 4 * thread_idx_x();
                while e < n {
                    let v = x.load4(e);
                    y.store4(e + 4, v);
                    e += 4 * block_dim_x() * grid_dim_x();
                }
            }
        }
    });
    // Bounds checks stay (nothing proves them), no alignment test, no misaligned fault.
    assert_eq!(align_tests_of(&text), 0, "{text}");
    assert_eq!((checks, faults), (2, 2), "{text}");
}

#[test]
fn an_aligned_element_proves_the_indices_whole_vectors_from_it() {
    let (_, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], head: u32, n: u32) {
            // The vector part starts at element `head` (a view at any offset).
            if x.is_aligned(head, 16) && y.is_aligned(head, 16) {
                let mut e = head + 4 * thread_idx_x();
                while e < n {
                    let v = x.load4(e);
                    y.store4(e, v);
                    e += 4 * block_dim_x() * grid_dim_x();
                }
                // Not a whole vector from `head`: tested.
                y.store2(head + 2 * thread_idx_x() + 1, [0.0, 0.0]);
            }
        }
    });
    assert_eq!(align_tests_of(&text), 1, "{text}");
}

#[test]
fn ldmatrix_rows_off_16_bytes_are_tested_and_clamped() {
    let (_, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        #[target(sm_80)]
        pub fn k(y: &mut [u32], off: u32) {
            let t: Shared<[u16; 512]>;
            let lane = thread_idx_x();
            let m = t.ldmatrix_x1(lane * 8 + off);
            let w = t.ldmatrix_x1(lane * 8 + 8);
            y[lane] = m[0] + w[0];
        }
    });
    // The row at `lane * 8 + off` is tested (and a misaligned lane reads the first row, like
    // one out of bounds); the one at whole rows is proven.
    assert_eq!(align_tests_of(&text), 1, "{text}");
    assert!(text.contains("or.pred"), "{text}");
}

#[test]
fn an_unproven_index_or_base_keeps_the_alignment_test() {
    let (_, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], head: u32, n: u32) {
            let mut e = head + 4 * thread_idx_x();
            if x.is_aligned(0, 16) {
                // `head` may be any element: tested.
                let v = x.load4(e);
                // An odd offset from a whole vector: tested (it always fails).
                let w = x.load2(4 * thread_idx_x() + 1);
                y[0] = v[0] + w[0];
            }
            // The base of `y` is not known: tested.
            y.store4(4 * thread_idx_x(), [1.0, 2.0, 3.0, 4.0]);
            e += 1;
            y[1] = e as f32;
        }
    });
    assert_eq!(align_tests_of(&text), 3, "{text}");
}

#[test]
fn shared_arrays_are_aligned_and_is_aligned_folds_under_its_own_test() {
    let (_, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let tile: Shared<[f32; 256]>;
            let t = thread_idx_x();
            if x.is_aligned(0, 16) && y.is_aligned(0, 8) {
                tile.store4(t * 4, x.load4(t * 4));
                sync_threads();
                let v = tile.load2(t * 2);
                if x.is_aligned(0, 16) {
                    y.store2(t * 2, v);
                }
            }
        }
    });
    assert_eq!(align_tests_of(&text), 0, "{text}");
    // The two base tests, once each (the inner `is_aligned` is known true).
    assert_eq!(text.matches("setp.eq.u64").count(), 2, "{text}");
}

#[test]
fn unsafe_blocks_allow_unchecked_accesses_only_inside() {
    let (checks, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            unsafe {
                y.set_unchecked(i, x.get_unchecked(i));
                let v = x.load4_unchecked(i);
                y.store4_unchecked(i, v);
                asm!("st.global.f32 [{0}], {1};", 0u64, 1.0f32);
            }
        }
    });
    assert_eq!((checks, faults), (0, 0), "{text}");
    let errs = crate::compile_for_test(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            y[i] = x.get_unchecked(i);
            asm!("ld.global.f32 {0}, [{1}];", out(f32), 0u64);
            // Register-only, but writing an input (an index the compiler may have proven).
            asm!("add.u32 {0}, {0}, 4096;", i);
            asm!("mov.u32 %r1, {0};", i);
        }
    })
    .unwrap_err();
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(
        errs[2].contains("the destination is an input operand"),
        "{errs:?}"
    );
    assert!(
        errs[3].contains("the destination is not an `out(T)` operand"),
        "{errs:?}"
    );
    assert!(
        errs[0].contains("`get_unchecked` skips the bounds check"),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("`ld.global.f32` may access memory"),
        "{errs:?}"
    );
}

#[test]
fn checked_async_copies_matrices_atomics_and_dynamic_shared_assemble() {
    let ptx = ptx_of(quote! {
        #[launch(block = 32)]
        #[target(sm_80)]
        pub fn k(x: &[f32], h: &[u16], y: &mut [u32], n: u32) {
            let tile: Shared<[f32; 64]>;
            let ht: Shared<[u16; 256]>;
            let dynbuf: Shared<[u32]>;
            let t = thread_idx_x();
            tile.cp_async16(t * 4, x, t * 4);
            tile.cp_async16_partial(0u32, x, t, n);
            ht.cp_async16(t * 8, h, t * 8);
            cp_async_commit();
            cp_async_wait_all();
            sync_threads();
            let m = ht.ldmatrix_x4(t * 8);
            dynbuf[t] = m[0];
            y.atomic_add(t, dynbuf[t + 1]);
        }

        #[launch(block = 32)]
        #[target(sm_80)]
        pub fn k2(y: &mut [u32]) {
            let d: Shared<[u16]>;
            let m = d.ldmatrix_x2(thread_idx_x() * 8);
            y[0] = m[0] + m[1];
        }
    });
    // The dynamic array's ldmatrix is skipped (by every lane alike) below 8 elements.
    assert!(ptx[1].1.contains(", 8;"), "{}", ptx[1].1);
    assert!(
        ptx[1]
            .1
            .contains("ldmatrix.sync.aligned.m8n8.x2.shared.b16"),
        "{}",
        ptx[1].1
    );
    let text = &ptx[0].1;
    // Every access checked: two sources of full copies, one partial source, two shared
    // destinations (the constant one is proven at compile time), ldmatrix, the dynamic array
    // twice and the atomic; the three global sources also test their alignment (the shared
    // destinations, at whole 16-byte vectors of 16-byte aligned arrays, are proven).
    assert_eq!(text.matches("atom.global.cas.b32").count(), 12, "{text}");
    assert_eq!(align_tests_of(text), 3, "{text}");
    assert!(text.contains("%dynamic_smem_size"), "{text}");
    // ldmatrix is not skipped: an address out of bounds is replaced by the array's start.
    assert!(text.contains("selp.b32"), "{text}");
    assemble("checked-async", &ptx);
}

#[test]
fn unrolled_loops_take_their_bounds_from_helpers_of_constants() {
    let ptx = ptx_of(quote! {
        #[variants(N in [3, 5])]
        #[launch(block = 32)]
        pub fn k<const N: u32>(x: &[u32], y: &mut [u32]) {
            let mut s = 0u32;
            #[unroll]
            for i in 0..pieces::<N>() / 2 {
                s += x[i] * 7;
            }
            y[thread_idx_x()] = s;
        }

        fn pieces<const N: u32>() -> u32 {
            let twice = 2 * N;
            if N > 4 {
                twice + 2
            } else {
                twice
            }
        }
    });
    // N = 3: 6 / 2 = 3 trips; N = 5: 12 / 2 = 6, each a load of x, no loop.
    for ((_, text), trips) in ptx.iter().zip([3, 6]) {
        assert_eq!(text.matches("ld.global").count(), trips, "{text}");
    }
    // A bound left to run time is still an error.
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [u32], n: u32) {
            #[unroll]
            for i in 0..half(n) {
                y[i] = 1;
            }
        }

        fn half(n: u32) -> u32 {
            n / 2
        }
    });
    assert!(
        errs.iter().any(|e| e.contains("constant range bounds")),
        "{errs:?}"
    );
}

#[test]
fn array_lengths_take_helpers_of_constants() {
    let ptx = ptx_of(quote! {
        #[variants(N in [3, 5])]
        #[launch(block = 32)]
        pub fn k<const N: u32>(y: &mut [u32]) {
            let s: Shared<[u32; 32 * words::<N>()]>;
            let t = thread_idx_x();
            s[t] = t;
            sync_threads();
            y[t] = s[(t + 1) % 32] + s.len() as u32;
        }

        fn words<const N: u32>() -> u32 {
            let w = N + 1;
            if w % 2 == 0 {
                w
            } else {
                w + 1
            }
        }
    });
    // N = 3: 32 · 4 words; N = 5: 32 · 6.
    for ((_, text), len) in ptx.iter().zip([128, 192]) {
        let decl = text
            .lines()
            .find(|l| l.contains(".shared") && l.contains("smem_s_"))
            .unwrap_or_else(|| panic!("no shared array in\n{text}"));
        assert!(decl.contains(&format!("[{}]", 4 * len)), "{decl}");
    }
}

#[test]
fn async_copies_arrive_on_an_mbarrier_once_landed() {
    let ptx = ptx_of(quote! {
        #[launch(block = 64)]
        #[target(sm_90)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let tile: Shared<[f32; 128]>;
            let landed: Shared<[u64; 1]>;
            let t = thread_idx_x();
            if t == 0 {
                landed.mbar_init(0, 64);
            }
            sync_threads();
            tile.cp_async4(t, x, t);
            landed.mbar_arrive_cp_async(0);
            landed.mbar_wait(0, 0);
            y[t] = tile[(t + 1) % 64];
        }
    });
    let text = &ptx[0].1;
    assert!(
        text.contains("cp.async.mbarrier.arrive.noinc.shared::cta.b64 ["),
        "{text}"
    );
    assert!(!text.contains("cp.async.wait"), "{text}");
    assemble("cp-async-arrive", &ptx);
    // The arrival needs sm_80 (the wait above, sm_90).
    let errs = errors_of(quote! {
        #[launch(block = 32)]
        #[target(sm_75)]
        pub fn k(y: &mut [u32]) {
            let landed: Shared<[u64; 1]>;
            landed.mbar_arrive_cp_async(0);
            y[0] = 1;
        }
    });
    assert!(errs.iter().any(|e| e.contains("sm_80")), "{errs:?}");
}

#[test]
fn an_early_return_proves_the_rest_of_its_block() {
    let (_, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            let i = (block_idx_x() * 32 + thread_idx_x()) as u64;
            if i >= x.len() || i >= y.len() {
                return;
            }
            y[i] = x[i];
            helper(y, i);
            y[i] = 2.0;
        }

        // The helper's early return proves nothing after the call.
        fn helper(y: &mut [f32], j: u64) {
            if j + 1 >= y.len() {
                return;
            }
            y[j] = 1.0;
        }
    });
    assert_eq!(faults, 0, "{text}");
    let (_, faults, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32], j: u64) {
            helper(y, j);
            y[j] = 2.0;
        }

        fn helper(y: &mut [f32], j: u64) {
            if j >= y.len() {
                return;
            }
            y[j] = 1.0;
        }
    });
    assert_eq!(
        faults, 1,
        "the store after the helper stays checked: {text}"
    );
}

#[test]
fn a_clamp_by_min_under_a_bounded_limit_elides_the_check() {
    // `c.min(last)` is at most `last`; with `last + 4 <= x.len()` the vector read is proven.
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], last: u32) {
            let c = thread_idx_x() * 4;
            if (last as u64) + 4 <= x.len() && (last as u64) + 4 <= y.len() {
                let cm = c.min(last);
                y.store4(cm as u64, x.load4(cm as u64));
            }
        }
    });
    assert_eq!(checks, 0, "{text}");
    // Without the limit's bound, or with a clamp to a larger limit, the access stays checked.
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], last: u32) {
            let c = thread_idx_x() * 4;
            if (last as u64) + 4 <= y.len() {
                let cm = c.min(last);
                y.store4(cm as u64, x.load4(cm as u64));
                let cs = c.min(last + 1);
                y.store4(cs as u64, x.load4(cm as u64));
            }
        }
    });
    // `x` has no bound; `cs` may be `last + 1`, one past the proven range.
    assert_eq!(checks, 3, "{text}");
}

#[test]
fn a_sum_of_a_proven_base_and_a_constant_is_proven() {
    // `b = i + 16`: the fact `i + 32 <= x.len()` proves `x[b + 12 .. b + 16]`, through a
    // helper's parameter too; `b + 13` reaches past it, and a base that changed does not count.
    let (checks, _, text) = checks_of(quote! {
        fn read4(x: &[f32], b: u32) -> [f32; 4] {
            x.load4(b as u64 + 12)
        }
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            if ((i as u64) + 32 <= x.len()) & ((i as u64) + 4 <= y.len()) {
                let b = i + 16;
                y.store4(i as u64, read4(x, b));
                let c = b + 4;
                y[i] = x[c + 11];
            }
        }
    });
    // `c` is a sum of a sum: only `b`'s own base counts, so `x[c + 11]` stays checked.
    assert_eq!(checks, 1, "{text}");
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], i: u32) {
            if ((i as u64) + 32 <= x.len()) & ((i as u64) + 4 <= y.len()) {
                let b = i + 16;
                y.store4(i as u64, x.load4(b as u64 + 13));
            }
        }
    });
    assert_eq!(checks, 1, "{text}");
}

#[test]
fn a_masked_clamp_proves_through_two_bounds() {
    // `cm <= last & !3 <= last` and `last + 4 <= x.len()`: two steps of transitivity.
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [f32], last: u32) {
            let c = thread_idx_x() * 4;
            if ((last as u64) + 4 <= x.len()) & ((last as u64) + 4 <= y.len()) {
                let cl = last & 0xFFFF_FFFCu32;
                let cm = (c & 0xFFFF_FFFCu32).min(cl);
                y.store4(cm as u64, x.load4(cm as u64));
            }
        }
    });
    // Neither access needs a bounds check (the alignment of `x` and `y` is not known, so
    // their alignment tests stay: those are not `setp.ge.u64`).
    assert_eq!(checks, 0, "{text}");
}

#[test]
fn ordered_accesses_fences_byte_ops_and_wide_shuffles_assemble() {
    let ptx = ptx_of(quote! {
        #[launch(block = 64)]
        pub fn k(flags: &mut [u32], x: &[u64], y: &mut [f64], h: &mut [f16], n: u32) {
            let t = thread_idx_x();
            let f = flags.load_acquire(t);
            fence_block();
            fence_acq_rel_device();
            fence_system();
            sync_warp();
            sync_warp_mask(f | 1);
            flags.store_release(t + 1, f.dp4a(t, 7u32) + (t as i32).dp4a(f, -3) as u32);
            let w = shfl_xor(x[t], 1u32) + shfl_down(t as u16, 2u32) as u64;
            y[t] = shfl_idx(y[t], 0u32) + w as f64;
            h.atomic_add(t, shfl_up(h[t], 1u32));
            flags[t] = f.prmt(n, 0x3210u32);
            flags[t + 3] = f.lop3(n, t, 0x6Au32);
            let p = f16x2::from_f32s(1.5, y[t] as f32);
            flags[t + 2] = p.to_bits();
        }

        #[launch(block = 32)]
        #[target(sm_80)]
        pub fn k80(y: &mut [u32], a: f32, b: f32) {
            y[0] = f16x2::from_f32s(a, b).to_bits() ^ bf16x2::from_f32s(b, a).to_bits();
        }

        #[launch(block = 32)]
        #[target(sm_90)]
        pub fn k90(y: &mut [bf16], z: &mut [u32]) {
            let s: Shared<[bf16x2; 32]>;
            let t = thread_idx_x();
            s[t] = bf16x2::from_f32s(1.0, 2.0);
            sync_threads();
            let old = s.atomic_add(t ^ 1, bf16x2::from_f32s(0.5, 0.25));
            z[t] = old.to_bits();
            y.atomic_add(t, 1.0);
        }
    });
    let text = &ptx[0].1;
    for form in [
        "ld.acquire.gpu.global.u32",
        "st.release.gpu.global.u32",
        "fence.sc.cta;",
        "fence.acq_rel.gpu;",
        "fence.sc.sys;",
        "bar.warp.sync 4294967295;",
        "bar.warp.sync %r",
        "dp4a.u32.u32",
        "dp4a.s32.u32",
        "shfl.sync.bfly.b32",
        "atom.global.add.noftz.f16",
        "prmt.b32",
        ", 106;",
        "lop3.b32",
    ] {
        assert!(text.contains(form), "{form}: {text}");
    }
    // Below sm_80 the packed conversion is two conversions and a pack.
    assert!(!text.contains("cvt.rn.f16x2.f32"), "{text}");
    assert!(text.contains("cvt.rn.f16.f32"), "{text}");
    // The 64-bit shuffles go in two halves each; the 16-bit ones widened.
    assert_eq!(text.matches("shfl.sync.").count(), 2 + 1 + 2 + 1, "{text}");
    assert!(text.contains("cvt.u32.u16"), "{text}");
    // Every access is checked: the acquire load, the release store, the atomic, the others.
    let (checks, faults, _) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &mut [u64], i: u32) {
            let v = x.load_acquire(i);
            x.store_release(i + 1, v);
        }
    });
    assert_eq!((checks, faults), (2, 2));
    // A proven index needs no check.
    let (checks, _, text2) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(x: &mut [u64], i: u32) {
            if (i as u64) < x.len() {
                let v = x.load_acquire(i);
                x.store_release(i, v + 1);
            }
        }
    });
    assert_eq!(checks, 0, "{text2}");
    let t80 = &ptx[1].1;
    assert!(t80.contains("cvt.rn.f16x2.f32"), "{t80}");
    assert!(t80.contains("cvt.rn.bf16x2.f32"), "{t80}");
    let t90 = &ptx[2].1;
    assert!(t90.contains("atom.shared.add.noftz.bf16x2"), "{t90}");
    assert!(t90.contains("atom.global.add.noftz.bf16 "), "{t90}");
    assemble("ordered-byte-ops", &ptx);
}

#[test]
fn new_intrinsics_report_wrong_types_and_old_targets() {
    let errs = |tokens| match compile_for_test(tokens) {
        Ok(_) => panic!("no errors"),
        Err(e) => e.join("\n"),
    };
    let e = errs(quote! {
        #[target(sm_70)]
        #[launch(block = 32)]
        pub fn k(x: &[f32], y: &mut [bf16], s: &mut [u16], b: &[u32]) {
            let sh: Shared<[u32; 32]>;
            let t = thread_idx_x();
            let a = x.load_acquire(t);
            let z = sh.load_acquire(t);
            s.store_release(t, 1u16);
            b.store_release(t, 1u32);
            y.atomic_add(t, a as bf16);
            let p = bf16x2::from_f32s(a, a);
            let q = a.dp4a(1u32, 2u32);
            let r = t.dp4a(a, 2);
            let w = shfl_xor(t as u8, 1u32);
        }
    });
    for want in [
        "`load_acquire` works on slice parameters (global memory), not on shared arrays",
        "`store_release` is not available on `u16` (u32, i32, u64, i64, f32, f64)",
        "`store_release` writes: declare the parameter `&mut [u32]`",
        "`atomic_add` on `bf16` needs sm_90 or later",
        "`bf16x2::from_f32s` needs sm_80 or later",
        "`dp4a` works on four bytes packed in a `u32` or `i32`, not `f32`",
        "`dp4a` multiplies four bytes packed in a `u32` or `i32`, not `f32`",
        "warp shuffles move 16-, 32- or 64-bit values, not `u8`",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}

#[test]
fn a_widened_test_on_a_static_shared_array_proves_constant_offsets() {
    // `o + 52 <= 64` (in 64 bits) proves `t[o + 16 k + 4]` for the unrolled `k < 3` and the
    // vector at `o + 48`: the offsets are constant expressions of the counter.
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32]) {
            let t: Shared<[f32; 64]>;
            let o = thread_idx_x() % 8;
            if ((o as u64) + (3 * 16 + 4) as u64) <= (t.len() as u64) {
                #[unroll]
                for k in 0..3 {
                    t[o + k * 16 + 4] = 1.0;
                }
                t.store4(o + 48, [0.0f32; 4]);
            }
        }
    });
    assert_eq!(checks, 0, "{text}");
}

#[test]
fn a_narrow_test_or_a_larger_offset_proves_nothing() {
    let (checks, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [f32]) {
            let t: Shared<[f32; 64]>;
            let o = thread_idx_x() * 0x2000_0000;
            // In 32 bits the sum may wrap: no fact.
            if o + 52 <= t.len() {
                t[o + 4] = 1.0;
            }
            // A fact of `o + 52` does not reach an access at `o + 52`.
            if ((o as u64) + 52) <= (t.len() as u64) {
                t[o + 51] = 1.0;
                t[o + 13 * 4] = 1.0;
            }
        }
    });
    assert_eq!(checks, 2, "{text}");
}

#[test]
fn unsigned_division_by_a_power_of_two_is_a_shift_and_a_mask() {
    let (_, _, text) = checks_of(quote! {
        #[launch(block = 32)]
        pub fn k(y: &mut [u32], z: &mut [i32]) {
            let t = thread_idx_x();
            y[0] = t / 16 + t % 8 + t / 6;
            let s = t as i32 - 7;
            z[0] = s / 4;
        }
    });
    assert!(
        text.contains("shr.u32 %r") && text.contains(", 4;"),
        "{text}"
    );
    assert!(
        text.contains("and.b32 %r") && text.contains(", 7;"),
        "{text}"
    );
    // Other divisors, and signed ones (which round towards zero), keep the division.
    assert!(text.contains("div.u32"), "{text}");
    assert!(text.contains("div.s32"), "{text}");
    assert!(!text.contains("rem.u32"), "{text}");
}

#[test]
fn a_noinline_helper_is_one_func_per_instantiation_reached_by_calls() {
    let ptx = ptx_of(quote! {
        #[launch(block = 64)]
        pub fn k(x: &[f32], y: &mut [f32], code: u32) {
            let i = thread_idx_x() as u64;
            if i < x.len() && i < y.len() {
                let a = shape(code, x[i]);
                let b = shape(code + 1, a);
                y[i] = scaled::<3>(b) + scaled::<5>(a) + scaled::<3>(a);
            }
        }

        #[noinline]
        fn shape(code: u32, v: f32) -> f32 {
            if code == 1 {
                return v.max(0.0);
            }
            if code == 2 { v * v } else { v.tanh() }
        }

        #[noinline]
        fn scaled<const S: u32>(v: f32) -> f32 {
            v * (S as f32)
        }
    });
    let text = &ptx[0].1;
    assert_eq!(text.matches(".func ").count(), 3, "{text}");
    assert_eq!(text.matches("call.uni").count(), 5, "{text}");
    assert!(text.contains(".func (.reg .f32 shape__0_result) shape__0(.reg .b32 shape__0_param_0, .reg .f32 shape__0_param_1)"), "{text}");
    assert!(text.contains("call.uni (%f"), "{text}");
    // The function body reads its parameters and writes its result.
    let func = &text[text.find(".func (.reg .f32 shape__0_result)").unwrap()
        ..text.find(".func (.reg .f32 scaled").unwrap()];
    assert!(func.contains("shape__0_param_1;"), "{func}");
    assert!(func.contains("mov.f32 shape__0_result, %f"), "{func}");
    assert_eq!(func.matches("ret;").count(), 1, "{func}");
    assemble("noinline", &ptx);
}

#[test]
fn a_noinline_helper_takes_scalars_and_does_not_recurse() {
    let errs = errors_of(quote! {
        #[launch(block = 64)]
        pub fn k(x: &[f32], y: &mut [f32]) {
            y[0] = first(x);
        }
        #[noinline]
        fn first(x: &[f32]) -> f32 {
            x[0]
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("`#[noinline]` helper takes scalars")),
        "{errs:?}"
    );
    let errs = errors_of(quote! {
        #[launch(block = 64)]
        pub fn k(y: &mut [f32]) {
            y[0] = down(3);
        }
        #[noinline]
        fn down(n: u32) -> f32 {
            if n == 0 { 0.0 } else { down(n - 1) + 1.0 }
        }
    });
    assert!(errs.iter().any(|e| e.contains("calls itself")), "{errs:?}");
    let errs = errors_of(quote! {
        #[noinline]
        #[launch(block = 64)]
        pub fn k(y: &mut [f32]) {}
    });
    assert!(
        errs.iter().any(|e| e.contains("applies to helpers")),
        "{errs:?}"
    );
}

/// `setmaxnreg`: a producer warpgroup gives registers up, the consumer warpgroups take them,
/// on sm_90a; the count and the block are checked.
#[test]
fn elect_one_is_elect_sync_with_the_lane_index_discarded() {
    let ptx = ptx_of(quote! {
        #[target(sm_90)]
        #[launch(block = 64)]
        pub fn k(y: &mut [u32]) {
            let t = thread_idx_x();
            if elect_one() {
                y[t / 32] = t;
            }
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains(".target sm_90"), "{text}");
    assert!(text.contains("elect.sync _|%p1, 4294967295;"), "{text}");
    assemble("elect_one", &ptx);

    // A target below sm_90 is an error naming the instruction's minimum.
    let errs = errors_of(quote! {
        #[target(sm_80)]
        pub fn k(y: &mut [u32]) {
            if elect_one() {
                y[0] = 1;
            }
        }
    });
    assert!(
        errs.iter()
            .any(|e| e.contains("elect_one") && e.contains("sm_90")),
        "{errs:?}"
    );
}

#[test]
fn setmaxnreg_moves_registers_between_warpgroups() {
    let ptx = ptx_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 384, max_regs = 168)]
        pub fn k(y: &mut [f32]) {
            let wg = thread_idx_x() / 128;
            if wg == 0 {
                setmaxnreg_dec(40);
            } else {
                setmaxnreg_inc(232);
                y[thread_idx_x()] = 1.0;
            }
        }
    });
    let text = &ptx[0].1;
    assert!(text.contains(".target sm_90a"), "{text}");
    assert!(
        text.contains("setmaxnreg.dec.sync.aligned.u32 40;"),
        "{text}"
    );
    assert!(
        text.contains("setmaxnreg.inc.sync.aligned.u32 232;"),
        "{text}"
    );
    assemble("setmaxnreg", &ptx);

    let errs = errors_of(quote! {
        #[target(sm_90a)]
        #[launch(block = 192)]
        pub fn k(y: &mut [f32]) {
            setmaxnreg_inc(236);
            setmaxnreg_dec(16);
            y[0] = 1.0;
        }
    });
    for needle in [
        "`setmaxnreg_inc(236)`: the registers per thread are a multiple of 8 in 24..=256",
        "`setmaxnreg_dec(16)`",
        "the block's 192 threads are not whole warpgroups of 128",
    ] {
        assert!(
            errs.iter().any(|e| e.contains(needle)),
            "{needle}: {errs:?}"
        );
    }
}
