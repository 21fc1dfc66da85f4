//! `cp.async.bulk.tensor` from shared memory to a tensor (the TMA store, sm_90) on an emulated
//! device: boxes of a 3-D tensor (swizzled and not, partly outside the tensor, whose part
//! outside must stay unwritten) against a CPU reference, and one kernel per rule the hardware
//! imposes (each must fail with its error).

use super::launch;
use super::tma::{emu90, swizzled, upload_u16, Tensor, BOX_AT};
use crate::driver::Swizzle;
use crate::error::{Error, Result};

/// What a variant of [`store_kernel`] changes (the rule it breaks).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Break {
    Nothing,
    /// The threads write the box without `fence.proxy.async` before the store reads it.
    NoFence,
    /// Thread 0 writes the box's first word after the store, before any wait.
    WriteBeforeWait,
    /// No wait: the block exits while the store may still read shared memory.
    NoWait,
    /// The wait comes, but the store's group was never committed.
    NoCommit,
    /// A source 16 bytes past the box (not 128-byte aligned).
    MisalignedSrc,
}

/// Word `w` of the box the kernel writes is `w · MUL + ADD`.
const MUL: u32 = 2_654_435_761;
const ADD: u32 = 12_345;

fn word(w: u32) -> u32 {
    w.wrapping_mul(MUL).wrapping_add(ADD)
}

/// One block of 32 threads: they write word `w` of the box's shared bytes as [`word`], fence
/// and synchronize; thread 0 stores the box into the tensor at the parameters `c0, c1, c2`
/// through the tensor map parameter, commits and waits for the read of its group.
fn store_kernel(bytes: usize, brk: Break) -> String {
    let pick = |b: Break, yes: &str, no: &str| {
        if brk == b {
            yes.to_string()
        } else {
            no.to_string()
        }
    };
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n\
         .visible .entry k(.param .align 64 .b8 tmap[128], .param .u32 c0, .param .u32 c1, .param .u32 c2)\n{{\n\
         .shared .align 128 .b8 pad[{BOX_AT}];\n .shared .align 128 .b8 box[{bytes}];\n\
         .reg .pred %p<4>;\n .reg .b32 %r<16>;\n .reg .b64 %rd<8>;\n\
         mov.u32 %r0, %tid.x;\n mov.u32 %r4, %r0;\n\
         $fill:\n setp.ge.u32 %p2, %r4, {words};\n @%p2 bra $filled;\n\
         shl.b32 %r5, %r4, 2;\n mov.u32 %r6, box;\n add.u32 %r6, %r6, %r5;\n\
         mad.lo.u32 %r7, %r4, {MUL}, {ADD};\n st.shared.u32 [%r6], %r7;\n\
         add.u32 %r4, %r4, 32;\n bra $fill;\n\
         $filled:\n{fence} bar.sync 0;\n\
         setp.ne.u32 %p0, %r0, 0;\n @%p0 bra $done;\n\
         mov.b64 %rd1, tmap;\n cvta.param.u64 %rd2, %rd1;\n\
         ld.param.u32 %r1, [c0];\n ld.param.u32 %r2, [c1];\n ld.param.u32 %r3, [c2];\n\
         cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%rd2, {{%r1, %r2, %r3}}], [{src}];\n\
         {commit}{overwrite}{wait}\
         $done:\n ret;\n}}\n",
        words = bytes / 4,
        fence = pick(Break::NoFence, "", " fence.proxy.async.shared::cta;\n"),
        src = pick(Break::MisalignedSrc, "box+16", "box"),
        commit = pick(Break::NoCommit, "", " cp.async.bulk.commit_group;\n"),
        overwrite = pick(Break::WriteBeforeWait, " st.shared.u32 [box], %r0;\n", ""),
        wait = pick(Break::NoWait, "", " cp.async.bulk.wait_group.read 0;\n"),
    )
}

/// Runs [`store_kernel`] (variant `brk`) with a map of `boxes` and `swizzle` at coordinates
/// `c`; the result, the tensor's memory after it and the reference: the memory before it with
/// each box element inside the tensor replaced by the box's (the box's shared bytes read
/// through the swizzle), everything else untouched.
fn run_store(
    boxes: [u32; 3],
    swizzle: Swizzle,
    c: [i64; 3],
    brk: Break,
) -> (Result<()>, Vec<u16>, Vec<u16>) {
    let e = emu90();
    let t = Tensor {
        dims: [80, 5, 3],
        strides: [88, 88 * 6],
    };
    let before = t.data();
    let ptr = upload_u16(&e, &before);
    let spec = t.map(&e, ptr, boxes, swizzle);
    let map = e.tensor_map_encode_tiled(&spec).expect("encode");
    let bytes = spec.box_bytes() as usize;
    let cs = c.map(|x| (x as i32).to_le_bytes());
    let r = launch(
        &e,
        &store_kernel(bytes, brk),
        "k",
        1,
        32,
        0,
        &[&map, &cs[0], &cs[1], &cs[2]],
    );
    let mut raw = vec![0u8; before.len() * 2];
    e.copy_from(&mut raw, ptr).expect("dtoh");
    let got = raw
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let shared: Vec<u8> = (0..bytes as u32 / 4)
        .flat_map(|w| word(w).to_le_bytes())
        .collect();
    let dense = swizzled(&shared, swizzle);
    let mut want = before;
    let [b0, b1, b2] = boxes.map(|b| b as i64);
    for i2 in 0..b2 {
        for i1 in 0..b1 {
            for i0 in 0..b0 {
                let (x, y, z) = (c[0] + i0, c[1] + i1, c[2] + i2);
                let inside = |v: i64, d: u64| (0..d as i64).contains(&v);
                if inside(x, t.dims[0]) && inside(y, t.dims[1]) && inside(z, t.dims[2]) {
                    let k = (2 * ((i2 * b1 + i1) * b0 + i0)) as usize;
                    let at = z as u64 * t.strides[1] + y as u64 * t.strides[0] + x as u64;
                    want[at as usize] = u16::from_le_bytes([dense[k], dense[k + 1]]);
                }
            }
        }
    }
    (r, got, want)
}

fn check_store(boxes: [u32; 3], swizzle: Swizzle, c: [i64; 3]) {
    let (r, got, want) = run_store(boxes, swizzle, c, Break::Nothing);
    r.unwrap_or_else(|e| panic!("{swizzle:?} box {boxes:?} at {c:?}: {e}"));
    let bad = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(
        bad.is_none(),
        "{swizzle:?} box {boxes:?} at {c:?}: element {bad:?} is {:#x}, expected {:#x}",
        got[bad.unwrap_or(0)],
        want[bad.unwrap_or(0)]
    );
}

#[test]
fn tma_stores_write_the_box_inside_the_tensor_and_nothing_else() {
    for c in [
        [0, 0, 0],
        [-8, -1, 0],
        [40, 3, 2],
        [-64, 0, 0],
        [16, -3, -1],
    ] {
        check_store([64, 4, 2], Swizzle::B128, c);
    }
    for c in [[0, 0, 0], [-5, 2, 1], [70, 4, 2]] {
        check_store([24, 3, 2], Swizzle::None, c);
    }
    for c in [[8, 1, 0], [-31, 2, 2], [60, 0, 1]] {
        check_store([32, 4, 2], Swizzle::B64, c);
    }
}

fn store_error(brk: Break) -> String {
    let (r, got, _) = run_store([64, 4, 2], Swizzle::B128, [0, 0, 0], brk);
    match r {
        Err(Error::Emulator(e)) => e.message,
        other => panic!("{brk:?}: expected an emulator error, got {other:?} ({got:?})"),
    }
}

#[test]
fn a_tma_store_of_bytes_not_fenced_for_the_async_proxy_is_an_error() {
    let m = store_error(Break::NoFence);
    assert!(
        m.contains("read by cp.async.bulk.tensor store without fence.proxy.async"),
        "{m}"
    );
}

#[test]
fn writing_a_tma_store_s_source_before_the_wait_is_an_error() {
    let m = store_error(Break::WriteBeforeWait);
    assert!(
        m.contains(
            "shared memory read by a cp.async.bulk.tensor store was written before the wait for it"
        ) && m.contains(&format!("shared offset {BOX_AT:#x}")),
        "{m}"
    );
}

#[test]
fn a_block_exiting_before_its_tma_store_s_read_ended_is_an_error() {
    let m = store_error(Break::NoWait);
    assert!(
        m.contains("cp.async.bulk.tensor store in flight at exit")
            && !m.contains("never committed"),
        "{m}"
    );
    let m = store_error(Break::NoCommit);
    assert!(
        m.contains("cp.async.bulk.tensor store in flight at exit") && m.contains("never committed"),
        "{m}"
    );
}

#[test]
fn a_tma_store_source_must_be_128_byte_aligned() {
    let m = store_error(Break::MisalignedSrc);
    assert!(m.contains("misaligned cp.async.bulk.tensor source"), "{m}");
}
