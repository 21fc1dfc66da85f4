//! `mbarrier` and `cp.async.bulk.tensor` on an emulated device of compute capability 9.0: boxes
//! of a 3-D tensor (swizzled and not, partly outside the tensor) against a CPU reference, a
//! producer / consumer ring over `mbarrier` phases, one kernel per rule the hardware imposes
//! (each must fail with its error), the tensor-map format, and hostile input.

use super::{download_u32, launch, upload_u32};
use crate::driver::tensor_map::{validate, TENSOR_MAP_BYTES};
use crate::driver::{Dtype, Swizzle, TensorMapSpec};
use crate::emulator::tensor_map::{decode, encode, seal};
use crate::emulator::{Emulator, EmulatorConfig};
use crate::error::{Error, Result};

pub(super) fn emu90() -> Emulator {
    Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        threads: 2,
        memory_capacity: 64 << 20,
        ..EmulatorConfig::default()
    })
}

pub(super) fn upload_u16(e: &Emulator, v: &[u16]) -> u64 {
    let p = e.alloc(v.len() * 2).expect("alloc");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    e.copy_to(p, &bytes).expect("htod");
    p
}

/// The shared offset of the box in [`box_kernel`] (128-byte aligned, not 1024: the swizzle
/// XORs absolute address bits).
pub(super) const BOX_AT: usize = 384;

/// A 3-D u16 tensor `dims` (innermost first), rows `strides` elements apart, element
/// `(x, y, z)` = [`value`].
pub(super) struct Tensor {
    pub(super) dims: [u64; 3],
    pub(super) strides: [u64; 2],
}

pub(super) fn value(x: u64, y: u64, z: u64) -> u16 {
    (1 + x + 97 * y + 1009 * z) as u16
}

impl Tensor {
    pub(super) fn data(&self) -> Vec<u16> {
        let [d0, d1, d2] = self.dims;
        let mut v = vec![0xEEEEu16; (self.strides[1] * d2) as usize];
        for z in 0..d2 {
            for y in 0..d1 {
                for x in 0..d0 {
                    v[(z * self.strides[1] + y * self.strides[0] + x) as usize] = value(x, y, z);
                }
            }
        }
        v
    }

    /// The map of a box `boxes` over the tensor at `ptr`.
    pub(super) fn map(
        &self,
        e: &Emulator,
        ptr: u64,
        boxes: [u32; 3],
        swizzle: Swizzle,
    ) -> TensorMapSpec {
        let len = self.strides[1] * self.dims[2];
        let spec = validate(
            Dtype::U16,
            ptr,
            len,
            &self.dims,
            &self.strides,
            &boxes,
            swizzle,
        )
        .expect("valid map");
        assert_eq!(decode(&e.tensor_map_encode_tiled(&spec).unwrap()), Ok(spec));
        spec
    }

    /// The shared bytes from [`BOX_AT`] a box at `c` fills: dense, then each 16-byte chunk
    /// moved by the swizzle of its absolute address.
    fn reference(&self, boxes: [u32; 3], c: [i64; 3], swizzle: Swizzle) -> Vec<u8> {
        let mut dense = Vec::new();
        let inside = |v: i64, d: u64| (0..d as i64).contains(&v);
        for i2 in 0..boxes[2] as i64 {
            for i1 in 0..boxes[1] as i64 {
                for i0 in 0..boxes[0] as i64 {
                    let (x, y, z) = (c[0] + i0, c[1] + i1, c[2] + i2);
                    let v = if inside(x, self.dims[0])
                        && inside(y, self.dims[1])
                        && inside(z, self.dims[2])
                    {
                        value(x as u64, y as u64, z as u64)
                    } else {
                        0
                    };
                    dense.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        swizzled(&dense, swizzle)
    }
}

/// Box bytes `dense` (placed at [`BOX_AT`]) with each 16-byte chunk moved by the swizzle of
/// its absolute address; its own inverse (the chunk bits it flips are not the ones it reads).
pub(super) fn swizzled(dense: &[u8], swizzle: Swizzle) -> Vec<u8> {
    let span = swizzle.span() as usize;
    let mut out = vec![0u8; dense.len()];
    for (k, chunk) in dense.chunks(16).enumerate() {
        let a = BOX_AT + 16 * k;
        let to = if span == 0 {
            a
        } else {
            a ^ (((a >> 7) & (span / 16 - 1)) << 4)
        };
        out[to - BOX_AT..to - BOX_AT + 16].copy_from_slice(chunk);
    }
    out
}

/// What a variant of [`box_kernel`] changes (the rule it breaks).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Break {
    Nothing,
    /// Expects twice the box's bytes: the phase never completes.
    ExpectTooMuch,
    /// A destination 16 bytes past the box (not 128-byte aligned).
    MisalignedDst,
    /// An `mbarrier.arrive` on an `mbarrier` never initialized.
    NoInit,
    /// A plain store to the `mbarrier`'s bytes.
    StoreToMbarrier,
    /// An arrival after all the phase's arrivals, while its bytes are pending.
    TooManyArrivals,
    /// No thread waits: the block exits with the copy in flight.
    NoWait,
}

/// One block of 32 threads: thread 0 initializes the `mbarrier`, expects the box's bytes and
/// copies the box at the parameters `c0, c1, c2` through the tensor map parameter (its generic
/// address from `cvta.param`); all threads wait for phase 0, then copy the box's shared bytes
/// to `out`.
fn box_kernel(bytes: usize, brk: Break) -> String {
    let pick = |b: Break, yes: &str, no: &str| {
        if brk == b {
            yes.to_string()
        } else {
            no.to_string()
        }
    };
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 out, .param .u32 c0, .param .u32 c1, .param .u32 c2)\n{{\n\
         .shared .align 128 .b8 pad[{BOX_AT}];\n .shared .align 128 .b8 box[{bytes}];\n\
         .shared .align 8 .b8 bar[16];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<16>;\n .reg .b64 %rd<8>;\n\
         mov.u32 %r0, %tid.x;\n setp.ne.u32 %p0, %r0, 0;\n @%p0 bra $synced;\n\
         {init}\
         fence.proxy.async.shared::cta;\n\
         mov.b64 %rd1, tmap;\n cvta.param.u64 %rd2, %rd1;\n prefetch.tensormap [%rd2];\n\
         ld.param.u32 %r1, [c0];\n ld.param.u32 %r2, [c1];\n ld.param.u32 %r3, [c2];\n\
         mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], {expect};\n\
         {extra}\
         cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{dst}], [%rd2, {{%r1, %r2, %r3}}], [bar];\n\
         $synced:\n bar.sync 0;\n\
         {wait}\
         mov.u32 %r4, %r0;\n ld.param.u64 %rd4, [out];\n\
         $copy:\n setp.ge.u32 %p2, %r4, {words};\n @%p2 bra $done;\n\
         shl.b32 %r5, %r4, 2;\n mov.u32 %r6, box;\n add.u32 %r6, %r6, %r5;\n\
         ld.shared.u32 %r7, [%r6];\n cvt.u64.u32 %rd5, %r5;\n add.s64 %rd6, %rd4, %rd5;\n\
         st.global.u32 [%rd6], %r7;\n add.u32 %r4, %r4, 32;\n bra $copy;\n\
         $done:\n ret;\n}}\n",
        init = pick(Break::NoInit, "", " mbarrier.init.shared::cta.b64 [bar], 1;\n"),
        expect = if brk == Break::ExpectTooMuch { 2 * bytes } else { bytes },
        extra = pick(Break::StoreToMbarrier, " st.shared.u32 [bar+4], %r0;\n", "")
            + &pick(
                Break::TooManyArrivals,
                " mbarrier.arrive.shared::cta.b64 _, [bar];\n",
                ""
            ),
        dst = pick(Break::MisalignedDst, "box+16", "box"),
        wait = pick(
            Break::NoWait,
            " ret;\n",
            "$wait:\n mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;\n @!%p1 bra $wait;\n"
        ),
        words = bytes / 4,
    )
}

/// Runs [`box_kernel`] (variant `brk`) with a map of `boxes` and `swizzle` at coordinates `c`;
/// the result and the box's shared bytes as the kernel stored them, and the reference.
fn run_box(
    boxes: [u32; 3],
    swizzle: Swizzle,
    c: [i64; 3],
    brk: Break,
) -> (Result<()>, Vec<u8>, Vec<u8>) {
    let e = emu90();
    let t = Tensor {
        dims: [80, 5, 3],
        strides: [88, 88 * 6],
    };
    let ptr = upload_u16(&e, &t.data());
    let spec = t.map(&e, ptr, boxes, swizzle);
    let map = e.tensor_map_encode_tiled(&spec).expect("encode");
    let bytes = spec.box_bytes() as usize;
    let out = upload_u32(&e, &vec![0xDEAD_BEEF; bytes / 4]);
    let cs = c.map(|x| (x as i32).to_le_bytes());
    let r = launch(
        &e,
        &box_kernel(bytes, brk),
        "k",
        1,
        32,
        0,
        &[&map, &out.to_le_bytes(), &cs[0], &cs[1], &cs[2]],
    );
    let got = download_u32(&e, out, bytes / 4)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    (r, got, t.reference(boxes, c, swizzle))
}

fn check_box(boxes: [u32; 3], swizzle: Swizzle, c: [i64; 3]) {
    let (r, got, want) = run_box(boxes, swizzle, c, Break::Nothing);
    r.unwrap_or_else(|e| panic!("{swizzle:?} box {boxes:?} at {c:?}: {e}"));
    assert_eq!(got, want, "{swizzle:?} box {boxes:?} at {c:?}");
}

#[test]
fn tma_boxes_swizzle128_match_the_reference() {
    for c in [
        [0, 0, 0],
        [-8, -1, 0],
        [40, 3, 2],
        [-64, 0, 0],
        [16, -3, -1],
    ] {
        check_box([64, 4, 2], Swizzle::B128, c);
    }
}

#[test]
fn tma_boxes_unswizzled_and_swizzle64_match_the_reference() {
    for c in [[0, 0, 0], [-5, 2, 1], [70, 4, 2], [79, -2, -1]] {
        check_box([24, 3, 2], Swizzle::None, c);
    }
    for c in [[8, 1, 0], [-31, 2, 2], [60, 0, 1]] {
        check_box([32, 4, 2], Swizzle::B64, c);
    }
}

fn box_error(brk: Break) -> String {
    let (r, _, _) = run_box([64, 4, 2], Swizzle::B128, [0, 0, 0], brk);
    match r {
        Err(Error::Emulator(e)) => e.message,
        other => panic!("{brk:?}: expected an emulator error, got {other:?}"),
    }
}

#[test]
fn tma_expecting_more_bytes_than_copied_is_a_deadlock() {
    let m = box_error(Break::ExpectTooMuch);
    assert!(
        m.contains("mbarrier deadlock") && m.contains("parity 0") && m.contains("tx-count 1024"),
        "{m}"
    );
}

#[test]
fn tma_destination_must_be_128_byte_aligned() {
    let m = box_error(Break::MisalignedDst);
    assert!(
        m.contains("misaligned cp.async.bulk.tensor destination"),
        "{m}"
    );
}

#[test]
fn mbarrier_used_before_init_is_an_error() {
    let m = box_error(Break::NoInit);
    assert!(m.contains("mbarrier used before mbarrier.init"), "{m}");
}

#[test]
fn generic_store_to_an_mbarrier_is_an_error() {
    let m = box_error(Break::StoreToMbarrier);
    assert!(m.contains("generic access of an mbarrier object"), "{m}");
}

#[test]
fn too_many_arrivals_are_an_error() {
    let m = box_error(Break::TooManyArrivals);
    assert!(m.contains("too many arrivals"), "{m}");
}

#[test]
fn a_block_exiting_with_a_copy_in_flight_is_an_error() {
    let m = box_error(Break::NoWait);
    assert!(m.contains("cp.async.bulk.tensor in flight at exit"), "{m}");
}

#[test]
fn a_tensor_map_parameter_must_be_an_encoded_map() {
    let e = emu90();
    let out = upload_u32(&e, &[0; 256]);
    let zero = [0i32.to_le_bytes(); 3];
    for map in [[0u8; TENSOR_MAP_BYTES], [0x5a; TENSOR_MAP_BYTES]] {
        let r = launch(
            &e,
            &box_kernel(1024, Break::Nothing),
            "k",
            1,
            32,
            0,
            &[&map, &out.to_le_bytes(), &zero[0], &zero[1], &zero[2]],
        );
        match r {
            Err(Error::Emulator(m)) => assert!(
                m.message
                    .contains("not a tensor map from cuTensorMapEncodeTiled"),
                "{}",
                m.message
            ),
            other => panic!("expected an emulator error, got {other:?}"),
        }
    }
}

/// The ring: stages of `STAGE` bytes, `STEPS` tiles of a `32 × 8·STEPS` u32 tensor.
const STAGES: usize = 3;
const STEPS: usize = 10;
const STAGE: usize = 1024;

/// A producer / consumer ring over `STAGES` shared stages with a `full` and an `empty`
/// `mbarrier` each: thread 0 waits for a stage to be empty (parity starting at 1), expects a
/// tile's bytes on its `full` barrier and copies tile `s` (rows `8s..8s+8`); the 64 threads of
/// warps 1 and 2 wait for it to be full, each adds 4 of its words to a running sum and arrives
/// on `empty` (count 64). Each consumer stores its sum at `out[tid - 32]`. With `wrong_parity`
/// the consumers wait on the other parity, so they read a stage whose copy is in flight.
fn ring_kernel(wrong_parity: bool) -> String {
    let stage_loop = |label: &str| {
        format!(
            " add.u32 %r1, %r1, 1;\n add.u32 %r2, %r2, 1;\n setp.eq.u32 %p4, %r2, {STAGES};\n\
             @%p4 mov.u32 %r2, 0;\n @%p4 xor.b32 %r3, %r3, 1;\n bra {label};\n"
        )
    };
    let barriers = |base: &str| {
        " shl.b32 %r4, %r2, 3;\n mov.u32 %r5, empty;\n add.u32 %r5, %r5, %r4;\n\
         mov.u32 %r6, full;\n add.u32 %r6, %r6, %r4;\n shl.b32 %r8, %r2, 10;\n\
         mov.u32 %r9, stage;\n add.u32 %r9, %r9, %r8;\n"
            .to_string()
            + base
    };
    let mut init = String::new();
    for s in 0..STAGES {
        init += &format!(
            " mbarrier.init.shared::cta.b64 [full+{}], 1;\n mbarrier.init.shared::cta.b64 [empty+{}], 64;\n",
            8 * s,
            8 * s
        );
    }
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry ring(.param .align 64 .b8 tmap[128], .param .u64 out)\n{{\n\
         .shared .align 128 .b8 stage[{stages_bytes}];\n\
         .shared .align 8 .b8 full[{bar_bytes}];\n .shared .align 8 .b8 empty[{bar_bytes}];\n\
         .reg .pred %p<8>;\n .reg .b32 %r<20>;\n .reg .b64 %rd<8>;\n\
         mov.u32 %r0, %tid.x;\n setp.ne.u32 %p0, %r0, 0;\n @%p0 bra $inited;\n\
         {init} fence.proxy.async.shared::cta;\n\
         $inited:\n bar.sync 0;\n\
         mov.u32 %r1, 0;\n mov.u32 %r2, 0;\n mov.u32 %r3, 0;\n\
         setp.ge.u32 %p1, %r0, 32;\n @%p1 bra $consumer;\n @%p0 bra $exit;\n\
         mov.b64 %rd1, tmap;\n cvta.param.u64 %rd2, %rd1;\n\
         $produce:\n setp.ge.u32 %p2, %r1, {STEPS};\n @%p2 bra $exit;\n\
         {prod_barriers}\
         xor.b32 %r7, %r3, 1;\n\
         $empty_wait:\n mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r5], %r7;\n @!%p3 bra $empty_wait;\n\
         mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r6], {STAGE};\n\
         shl.b32 %r10, %r1, 3;\n\
         cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r9], [%rd2, {{0, %r10}}], [%r6];\n\
         {prod_next}\
         $consumer:\n sub.u32 %r11, %r0, 32;\n mov.u32 %r12, 0;\n\
         $consume:\n setp.ge.u32 %p2, %r1, {STEPS};\n @%p2 bra $store;\n\
         {cons_barriers}\
         {parity}\
         $full_wait:\n mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r6], %r7;\n @!%p3 bra $full_wait;\n\
         shl.b32 %r13, %r11, 2;\n add.u32 %r9, %r9, %r13;\n\
         ld.shared.u32 %r14, [%r9];\n add.u32 %r12, %r12, %r14;\n\
         ld.shared.u32 %r14, [%r9+256];\n add.u32 %r12, %r12, %r14;\n\
         ld.shared.u32 %r14, [%r9+512];\n add.u32 %r12, %r12, %r14;\n\
         ld.shared.u32 %r14, [%r9+768];\n add.u32 %r12, %r12, %r14;\n\
         mbarrier.arrive.shared::cta.b64 %rd3, [%r5];\n\
         {cons_next}\
         $store:\n ld.param.u64 %rd4, [out];\n mul.wide.u32 %rd5, %r11, 4;\n add.s64 %rd6, %rd4, %rd5;\n\
         st.global.u32 [%rd6], %r12;\n\
         $exit:\n ret;\n}}\n",
        stages_bytes = STAGES * STAGE,
        bar_bytes = 8 * STAGES,
        prod_barriers = barriers(""),
        prod_next = stage_loop("$produce"),
        cons_barriers = barriers(""),
        parity = if wrong_parity {
            " xor.b32 %r7, %r3, 1;\n"
        } else {
            " mov.u32 %r7, %r3;\n"
        },
        cons_next = stage_loop("$consume"),
    )
}

/// Runs the ring; the result, the consumers' sums and the reference sums.
fn run_ring(wrong_parity: bool) -> (Result<()>, Vec<u32>, Vec<u32>) {
    let e = emu90();
    let (cols, rows) = (32usize, 8 * STEPS);
    let mut seed = 0x1234_5678_9abc_def0u64;
    let data: Vec<u32> = (0..cols * rows)
        .map(|_| super::xorshift(&mut seed) as u32)
        .collect();
    let ptr = upload_u32(&e, &data);
    let spec = validate(
        Dtype::U32,
        ptr,
        data.len() as u64,
        &[cols as u64, rows as u64],
        &[cols as u64],
        &[32, 8],
        Swizzle::None,
    )
    .expect("valid map");
    let map = e.tensor_map_encode_tiled(&spec).expect("encode");
    let out = upload_u32(&e, &[0; 64]);
    let r = launch(
        &e,
        &ring_kernel(wrong_parity),
        "ring",
        1,
        96,
        0,
        &[&map, &out.to_le_bytes()],
    );
    // Consumer c adds words c, c+64, c+128 and c+192 of each 256-word tile.
    let want = (0..64)
        .map(|c| {
            (0..STEPS)
                .flat_map(|s| (0..4).map(move |j| s * 256 + c + 64 * j))
                .fold(0u32, |acc, i| acc.wrapping_add(data[i]))
        })
        .collect();
    (r, download_u32(&e, out, 64), want)
}

#[test]
fn tma_producer_consumer_ring_wraps_its_phases() {
    let (r, got, want) = run_ring(false);
    r.expect("the ring runs");
    assert_eq!(got, want);
}

#[test]
fn waiting_on_the_wrong_parity_reads_a_copy_in_flight() {
    let (r, _, _) = run_ring(true);
    match r {
        Err(Error::Emulator(m)) => assert!(
            m.message
                .contains("read of shared memory that a cp.async.bulk.tensor in flight writes"),
            "{}",
            m.message
        ),
        other => panic!("expected an emulator error, got {other:?}"),
    }
}

#[test]
fn tma_and_mbarrier_forms_decode() {
    for f in [
        "mbarrier.init.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
        "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "prefetch.tensormap",
        "cvta.param.u64",
    ] {
        assert_eq!(super::super::check_instruction_form(f), Ok(()), "{f}");
    }
}

/// Specs of every rank, several element types and every swizzle.
fn sample_specs() -> Vec<TensorMapSpec> {
    let mut out = Vec::new();
    for (rank, dtype, swizzle) in [
        (1, Dtype::F32, Swizzle::None),
        (2, Dtype::Bf16, Swizzle::B128),
        (3, Dtype::U16, Swizzle::B64),
        (4, Dtype::I8, Swizzle::B32),
        (5, Dtype::F64, Swizzle::None),
    ] {
        let es = dtype.size() as u64;
        let inner = match swizzle {
            Swizzle::None => 32 / es as u32,
            s => s.span() / es as u32,
        };
        let dims: Vec<u64> = (0..rank).map(|i| 3 + 200 * (i == 0) as u64).collect();
        let mut strides = Vec::new();
        let mut under = dims[0];
        for d in &dims[1..] {
            let s = (under + 16).next_multiple_of(16);
            strides.push(s);
            under = s * d;
        }
        let boxes: Vec<u32> = (0..rank).map(|i| if i == 0 { inner } else { 2 }).collect();
        let spec = validate(
            dtype,
            0x7000_0000_0100,
            u64::MAX,
            &dims,
            &strides,
            &boxes,
            swizzle,
        )
        .expect("valid sample");
        out.push(spec);
    }
    out
}

#[test]
fn tensor_maps_round_trip_and_altered_maps_are_refused() {
    let e = emu90();
    for spec in sample_specs() {
        let map = e.tensor_map_encode_tiled(&spec).expect("encode");
        assert_eq!(decode(&map), Ok(spec));
        // Any changed byte breaks the checksum; a resealed bad field is named.
        let mut flipped = map;
        flipped[20] ^= 1;
        assert!(decode(&flipped).is_err_and(|m| m.contains("checksum")));
        let mut rank = map;
        rank[11] = 0;
        seal(&mut rank);
        assert!(decode(&rank).is_err_and(|m| m.contains("rank 0")));
        let mut swz = map;
        swz[12] = 7;
        seal(&mut swz);
        assert!(decode(&swz).is_err_and(|m| m.contains("swizzle")));
        let mut boxed = map;
        boxed[96..100].copy_from_slice(&300u32.to_le_bytes());
        seal(&mut boxed);
        assert!(decode(&boxed)
            .is_err_and(|m| m.starts_with("not a tensor map from cuTensorMapEncodeTiled")));
    }
    assert_eq!(encode(&sample_specs()[0]).len(), TENSOR_MAP_BYTES);
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Arbitrary tensor-map bytes (random, and valid maps with a field changed and resealed),
/// arbitrary coordinates, and token mutations of the TMA kernels' text: each loads and runs or
/// fails with an error, never a panic.
#[test]
fn tma_hostile_maps_coordinates_and_text_never_panic() {
    let e = Emulator::new(EmulatorConfig {
        compute_capability: (9, 0),
        threads: 1,
        memory_capacity: 16 << 20,
        max_thread_instructions: 20_000,
        ..EmulatorConfig::default()
    });
    let t = Tensor {
        dims: [80, 5, 3],
        strides: [88, 88 * 6],
    };
    let ptr = upload_u16(&e, &t.data());
    let good = e
        .tensor_map_encode_tiled(&t.map(&e, ptr, [64, 4, 2], Swizzle::B128))
        .expect("encode");
    let out = upload_u32(&e, &[0; 256]);
    let text = box_kernel(1024, Break::Nothing);
    let mut rng = 0x7a7a_u64;
    let (mut ran, mut failed) = (0, 0);
    for i in 0..200 {
        let mut map = good;
        match i % 4 {
            0 => map.iter_mut().for_each(|b| *b = splitmix(&mut rng) as u8),
            1 => {
                // One field changed, resealed: the decoder must name what is wrong.
                let at = 10 + (splitmix(&mut rng) % 110) as usize;
                map[at] = splitmix(&mut rng) as u8;
                seal(&mut map);
            }
            2 => {
                // The address moved: the copy reads outside every allocation.
                let a = splitmix(&mut rng) & 0xffff_ffff_fff0;
                map[16..24].copy_from_slice(&a.to_le_bytes());
                seal(&mut map);
            }
            _ => {}
        }
        let c: Vec<[u8; 4]> = (0..3)
            .map(|_| (splitmix(&mut rng) as i32 >> (splitmix(&mut rng) % 32)).to_le_bytes())
            .collect();
        match launch(
            &e,
            &text,
            "k",
            1,
            32,
            0,
            &[&map, &out.to_le_bytes(), &c[0], &c[1], &c[2]],
        ) {
            Ok(()) => ran += 1,
            Err(Error::Emulator(_)) => failed += 1,
            Err(other) => panic!("map {map:x?}: {other}"),
        }
    }
    assert!(ran > 0 && failed > 0, "ran {ran}, failed {failed}");
    const SPLICE: &[&str] = &[
        "{",
        "}",
        ",",
        ";",
        "[",
        "]",
        "-1",
        "0",
        "1",
        "7",
        "128",
        "4294967295",
        "99999999999999999999999",
        "_",
        "%p1",
        "!%p1",
        "%r1",
        "%rd2",
        "[bar]",
        "[bar+4]",
        "[box+8]",
        "[%rd2, {%r1}]",
        "[%rd2, {%r1, %r2, %r3, %r4, %r5}]",
        "[tmap, {%r1, %r2, %r3}]",
        "tmap",
        "bar.sync",
        "ret",
        "mbarrier.init.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "prefetch.tensormap",
        "cvta.param.u64",
    ];
    let zero = 0i32.to_le_bytes();
    let sources = [text, ring_kernel(false)];
    let (mut loaded, mut launched) = (0, 0);
    let rounds = 300;
    for round in 0..rounds {
        let base = &sources[round % 2];
        let mut toks: Vec<&str> = if round % 4 < 2 {
            base.split(' ').collect()
        } else {
            base.split_inclusive(|c: char| ",;{}[]!@\n".contains(c))
                .collect()
        };
        for _ in 0..1 + splitmix(&mut rng) % 3 {
            let i = (splitmix(&mut rng) % toks.len() as u64) as usize;
            let tok = SPLICE[(splitmix(&mut rng) % SPLICE.len() as u64) as usize];
            match splitmix(&mut rng) % 3 {
                0 => toks[i] = tok,
                1 => toks.insert(i, tok),
                _ => {
                    toks.remove(i);
                }
            }
        }
        let mutated = toks.join(if round % 4 < 2 { " " } else { "" });
        if let Ok(m) = e.load_ptx(&mutated) {
            e.unload(m).expect("unload");
            loaded += 1;
            let box_args: [&[u8]; 5] = [&good, &out.to_le_bytes(), &zero, &zero, &zero];
            let args: &[&[u8]] = if round % 2 == 0 {
                &box_args
            } else {
                &box_args[..2]
            };
            let (entry, block) = if round % 2 == 0 {
                ("k", 32)
            } else {
                ("ring", 96)
            };
            match launch(&e, &mutated, entry, 1, block, 0, args) {
                Ok(()) | Err(Error::Emulator(_)) => launched += 1,
                Err(_) => {}
            }
        }
    }
    assert!(
        loaded < rounds && launched > 0,
        "loaded {loaded}, launched {launched}"
    );
}

/// Who writes the 32 words that warp 1 reads in [`handoff_kernel`], and when.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Handoff {
    /// Thread 0 writes them, then arrives on the `mbarrier` that warp 1 waits for.
    WriteThenArrive,
    /// Thread 0 arrives first and writes after: its writes are not released.
    ArriveThenWrite,
    /// Thread 64 (warp 2) writes them and never arrives; thread 0 arrives.
    OtherWriter,
}

/// A hand-off of generic shared stores through an `mbarrier` (count 1), no `bar.sync` after
/// its initialization: warp 1 waits for phase 0 and copies the 32 words to `out`.
fn handoff_kernel(h: Handoff) -> String {
    let stores: String = (0..32)
        .map(|k| format!(" st.shared.u32 [buf+{}], {};\n", 4 * k, 7 * k + 1))
        .collect();
    let arrive = " mbarrier.arrive.shared::cta.b64 %rd4, [bar];\n";
    let (producer, other) = match h {
        Handoff::WriteThenArrive => (format!("{stores}{arrive}"), String::new()),
        Handoff::ArriveThenWrite => (format!("{arrive}{stores}"), String::new()),
        Handoff::OtherWriter => (arrive.to_string(), stores),
    };
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry handoff(.param .u64 out)\n{{\n\
         .shared .align 16 .b8 buf[128];\n .shared .align 8 .b8 bar[8];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<10>;\n .reg .b64 %rd<8>;\n\
         mov.u32 %r0, %tid.x;\n setp.ne.u32 %p0, %r0, 0;\n @%p0 bra $inited;\n\
         mbarrier.init.shared::cta.b64 [bar], 1;\n\
         $inited:\n bar.sync 0;\n @%p0 bra $others;\n\
         {producer} bra $exit;\n\
         $others:\n setp.lt.u32 %p1, %r0, 64;\n @%p1 bra $consumer;\n\
         setp.ne.u32 %p1, %r0, 64;\n @%p1 bra $exit;\n{other} bra $exit;\n\
         $consumer:\n setp.lt.u32 %p1, %r0, 32;\n @%p1 bra $exit;\n\
         $wait:\n mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;\n @!%p2 bra $wait;\n\
         sub.u32 %r2, %r0, 32;\n shl.b32 %r3, %r2, 2;\n mov.u32 %r4, buf;\n add.u32 %r4, %r4, %r3;\n\
         ld.shared.u32 %r5, [%r4];\n ld.param.u64 %rd1, [out];\n mul.wide.u32 %rd2, %r2, 4;\n\
         add.s64 %rd3, %rd1, %rd2;\n st.global.u32 [%rd3], %r5;\n\
         $exit:\n ret;\n}}\n"
    )
}

fn run_handoff(h: Handoff) -> (Result<()>, Vec<u32>) {
    let e = emu90();
    let out = upload_u32(&e, &[0; 32]);
    let r = launch(
        &e,
        &handoff_kernel(h),
        "handoff",
        1,
        96,
        0,
        &[&out.to_le_bytes()],
    );
    (r, download_u32(&e, out, 32))
}

#[test]
fn an_mbarrier_phase_orders_the_stores_of_the_threads_that_arrived_on_it() {
    let (r, got) = run_handoff(Handoff::WriteThenArrive);
    r.expect("the hand-off runs without a race");
    assert_eq!(got, (0..32).map(|k| 7 * k + 1).collect::<Vec<u32>>());
}

#[test]
fn stores_after_the_arrival_or_by_a_thread_that_never_arrived_are_races() {
    for h in [Handoff::ArriveThenWrite, Handoff::OtherWriter] {
        let (r, _) = run_handoff(h);
        match r {
            Err(Error::Emulator(m)) => assert!(
                m.message.contains("shared memory data race")
                    || m.message.contains("uninitialized shared memory read"),
                "{h:?}: {}",
                m.message
            ),
            other => panic!("{h:?}: expected an emulator error, got {other:?}"),
        }
    }
}

/// How [`copy_arrive_kernel`] hands its buffer back and forth.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CopyArrive {
    /// Every reader arrives on `freed`; the copier arrives on `landed` by
    /// `cp.async.mbarrier.arrive.noinc`; the readers wait for it.
    Proper,
    /// Only lane 0 of the readers arrives on `freed` (count 1): the other lanes' reads are not
    /// ordered before the copy.
    OneReaderArrives,
    /// The readers read the buffer again without waiting on `landed`.
    NoWait,
    /// The copier never arrives on `landed`.
    NoArrive,
    /// The copier waits for its own copies (`cp.async.wait_all`) after its arrival: the
    /// copies are still the arrival's, released by it.
    WaitAfterArrive,
    /// The copier reads the buffer right after its arrival, before its copy need have landed.
    CopierReads,
    /// The copier copies only the buffer's first 8 bytes and stores to its last word after its
    /// arrival, which does not release that store.
    StoreAfterArrive,
}

/// A ring of one slot between warp 0 (readers) and thread 32 (copier), no `bar.sync` after
/// the initialization: lane 0 first arrives on an unrelated `mbarrier` (so its clock runs
/// ahead of its warp's); every lane of warp 0 reads the 16-byte buffer (lanes sharing its
/// words), releases it on `freed`; thread 32 waits for that, copies 16 bytes from `src` over
/// it by `cp.async` and arrives on `landed` once the copy has landed; warp 0 waits and copies
/// word `lane % 4` of the buffer to `out[lane]`.
fn copy_arrive_kernel(h: CopyArrive) -> String {
    let freed_count = if h == CopyArrive::OneReaderArrives {
        1
    } else {
        32
    };
    let release = if h == CopyArrive::OneReaderArrives {
        " @%p0 bra $released;\n mbarrier.arrive.shared::cta.b64 %rd4, [bars];\n$released:\n"
    } else {
        " mbarrier.arrive.shared::cta.b64 %rd4, [bars];\n"
    };
    let wait = if h == CopyArrive::NoWait {
        ""
    } else {
        "$w0:\n mbarrier.try_wait.parity.shared::cta.b64 %p2, [bars+8], 0;\n @!%p2 bra $w0;\n"
    };
    let copy = if h == CopyArrive::StoreAfterArrive {
        " cp.async.ca.shared.global [%r6], [%rd1], 8;\n"
    } else {
        " cp.async.cg.shared.global [%r6], [%rd1], 16;\n"
    };
    let arrive = match h {
        CopyArrive::NoArrive => "",
        CopyArrive::WaitAfterArrive => {
            " cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bars+8];\n cp.async.wait_all;\n"
        }
        CopyArrive::CopierReads => {
            " cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bars+8];\n ld.shared.u32 %r7, [%r6];\n"
        }
        CopyArrive::StoreAfterArrive => {
            " cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bars+8];\n st.shared.u32 [%r6+12], 7;\n"
        }
        _ => " cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bars+8];\n",
    };
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry copy_arrive(.param .u64 src, .param .u64 out)\n{{\n\
         .shared .align 16 .b8 buf[16];\n .shared .align 8 .b8 bars[24];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<12>;\n .reg .b64 %rd<8>;\n\
         mov.u32 %r0, %tid.x;\n setp.ne.u32 %p0, %r0, 0;\n @%p0 bra $inited;\n\
         mbarrier.init.shared::cta.b64 [bars], {freed_count};\n\
         mbarrier.init.shared::cta.b64 [bars+8], 1;\n\
         mbarrier.init.shared::cta.b64 [bars+16], 1;\n\
         st.shared.v4.u32 [buf], {{1, 2, 3, 4}};\n\
         $inited:\n bar.sync 0;\n setp.ge.u32 %p1, %r0, 32;\n @%p1 bra $copier;\n\
         @%p0 bra $read;\n mbarrier.arrive.shared::cta.b64 %rd4, [bars+16];\n\
         $read:\n and.b32 %r1, %r0, 3;\n shl.b32 %r2, %r1, 2;\n mov.u32 %r3, buf;\n\
         add.u32 %r3, %r3, %r2;\n ld.shared.u32 %r4, [%r3];\n\
         {release}{wait}\
         ld.shared.u32 %r5, [%r3];\n add.u32 %r5, %r5, %r4;\n\
         ld.param.u64 %rd1, [out];\n mul.wide.u32 %rd2, %r0, 4;\n add.s64 %rd3, %rd1, %rd2;\n\
         st.global.u32 [%rd3], %r5;\n bra $exit;\n\
         $copier:\n setp.ne.u32 %p1, %r0, 32;\n @%p1 bra $exit;\n\
         $w1:\n mbarrier.try_wait.parity.shared::cta.b64 %p2, [bars], 0;\n @!%p2 bra $w1;\n\
         ld.param.u64 %rd1, [src];\n mov.u32 %r6, buf;\n\
         {copy}{arrive}\
         $exit:\n ret;\n}}\n"
    )
}

fn run_copy_arrive(h: CopyArrive) -> (Result<()>, Vec<u32>) {
    let e = emu90();
    let src = upload_u32(&e, &[11, 22, 33, 44]);
    let out = upload_u32(&e, &[0; 32]);
    let r = launch(
        &e,
        &copy_arrive_kernel(h),
        "copy_arrive",
        1,
        64,
        0,
        &[&src.to_le_bytes(), &out.to_le_bytes()],
    );
    (r, download_u32(&e, out, 32))
}

#[test]
fn cp_async_arrivals_hand_a_buffer_between_warps_read_by_many_lanes() {
    for h in [CopyArrive::Proper, CopyArrive::WaitAfterArrive] {
        let (r, got) = run_copy_arrive(h);
        r.unwrap_or_else(|e| panic!("{h:?}: the hand-off runs without a race: {e}"));
        let want: Vec<u32> = (0..32).map(|l| [12, 24, 36, 48][l % 4]).collect();
        assert_eq!(got, want, "{h:?}");
    }
}

#[test]
fn the_copier_s_accesses_after_its_cp_async_arrival_are_not_released_by_it() {
    for (h, want) in [
        (CopyArrive::CopierReads, "cp.async"),
        (CopyArrive::StoreAfterArrive, "shared memory data race"),
    ] {
        match run_copy_arrive(h).0 {
            Err(Error::Emulator(m)) => assert!(m.message.contains(want), "{h:?}: {}", m.message),
            other => panic!("{h:?}: expected an emulator error, got {other:?}"),
        }
    }
}

#[test]
fn a_reader_that_never_released_a_missing_wait_or_a_missing_arrival_fail() {
    for (h, want) in [
        (CopyArrive::OneReaderArrives, "shared memory data race"),
        (CopyArrive::NoWait, "shared memory"),
        (CopyArrive::NoArrive, "mbarrier deadlock"),
    ] {
        match run_copy_arrive(h).0 {
            Err(Error::Emulator(m)) => assert!(m.message.contains(want), "{h:?}: {}", m.message),
            other => panic!("{h:?}: expected an emulator error, got {other:?}"),
        }
    }
}
