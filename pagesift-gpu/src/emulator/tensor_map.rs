//! The emulated device's tensor maps: what `cuTensorMapEncodeTiled` writes on this device and
//! what `cp.async.bulk.tensor` decodes. The CUDA backend uses the driver's encoding; the
//! emulator only ever sees its own.
//!
//! The format: 128 bytes, little-endian.
//!
//! | bytes    | field                                                                  |
//! |----------|------------------------------------------------------------------------|
//! | 0..8     | magic `PSEMUTMA`                                                       |
//! | 8..10    | format version, 1                                                      |
//! | 10       | element type, the index of [`DTYPES`]                                  |
//! | 11       | rank, 1 ..= 5                                                          |
//! | 12       | swizzle, the driver's `CUtensorMapSwizzle` (0 none, 1 32 B, 2 64 B, 3 128 B) |
//! | 13..16   | zero                                                                   |
//! | 16..24   | the global address of element `(0, 0, ..)`                             |
//! | 24..64   | the extent of dimensions 0..5, innermost first (1 beyond the rank)     |
//! | 64..96   | the byte stride of dimensions 1..5 (0 beyond the rank)                 |
//! | 96..116  | the box, in elements, of dimensions 0..5 (1 beyond the rank)           |
//! | 116..120 | zero                                                                   |
//! | 120..128 | FNV-1a (64-bit) of bytes 0..120                                        |
//!
//! Decoding checks every field against the rules of `TensorMap::tiled` (the driver's own
//! checks), so a kernel that passes anything else, or a map altered on the device, fails with
//! an error naming it.

use crate::driver::tensor_map::{validate, TENSOR_MAP_BYTES, TENSOR_MAP_MAX_RANK};
use crate::driver::{Dtype, Swizzle, TensorMapSpec};

/// The first 8 bytes of an encoded map.
const MAGIC: [u8; 8] = *b"PSEMUTMA";
/// The format version this emulator writes and reads.
const VERSION: u16 = 1;
/// The bytes the checksum covers.
const SEALED: usize = 120;
/// Element types by their code in the format.
pub(super) const DTYPES: [Dtype; 12] = [
    Dtype::F32,
    Dtype::F64,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::I8,
    Dtype::I16,
    Dtype::I32,
    Dtype::I64,
    Dtype::U8,
    Dtype::U16,
    Dtype::U32,
    Dtype::U64,
];
const SWIZZLES: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Writes the checksum of an encoded map's fields.
pub(super) fn seal(map: &mut [u8; TENSOR_MAP_BYTES]) {
    let sum = fnv1a(&map[..SEALED]);
    map[SEALED..].copy_from_slice(&sum.to_le_bytes());
}

/// Encodes a validated spec.
pub(super) fn encode(spec: &TensorMapSpec) -> [u8; TENSOR_MAP_BYTES] {
    let mut m = [0u8; TENSOR_MAP_BYTES];
    m[..8].copy_from_slice(&MAGIC);
    m[8..10].copy_from_slice(&VERSION.to_le_bytes());
    m[10] = DTYPES.iter().position(|&d| d == spec.dtype).unwrap_or(0) as u8;
    m[11] = spec.rank as u8;
    m[12] = spec.swizzle.code() as u8;
    m[16..24].copy_from_slice(&spec.address.to_le_bytes());
    for (i, d) in spec.dims.iter().enumerate() {
        m[24 + 8 * i..32 + 8 * i].copy_from_slice(&d.to_le_bytes());
    }
    for (i, s) in spec.strides.iter().enumerate() {
        m[64 + 8 * i..72 + 8 * i].copy_from_slice(&s.to_le_bytes());
    }
    for (i, b) in spec.boxes.iter().enumerate() {
        m[96 + 4 * i..100 + 4 * i].copy_from_slice(&b.to_le_bytes());
    }
    seal(&mut m);
    m
}

fn u64_at(m: &[u8; TENSOR_MAP_BYTES], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&m[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(m: &[u8; TENSOR_MAP_BYTES], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&m[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Decodes a map; the error says which field is wrong.
pub(super) fn decode(m: &[u8; TENSOR_MAP_BYTES]) -> Result<TensorMapSpec, String> {
    let bad = |why: String| format!("not a tensor map from cuTensorMapEncodeTiled: {why}");
    if m[..8] != MAGIC {
        return Err(bad("the magic word is missing".into()));
    }
    let version = u16::from_le_bytes([m[8], m[9]]);
    if version != VERSION {
        return Err(bad(format!(
            "format version {version}, the emulated device writes {VERSION}"
        )));
    }
    if u64_at(m, SEALED) != fnv1a(&m[..SEALED]) {
        return Err(bad("the checksum does not match its fields".into()));
    }
    let dtype = *DTYPES
        .get(m[10] as usize)
        .ok_or_else(|| bad(format!("element type code {}", m[10])))?;
    let rank = m[11] as usize;
    if !(1..=TENSOR_MAP_MAX_RANK).contains(&rank) {
        return Err(bad(format!("rank {rank}")));
    }
    let swizzle = *SWIZZLES
        .get(m[12] as usize)
        .ok_or_else(|| bad(format!("swizzle code {}", m[12])))?;
    if m[13..16].iter().chain(&m[116..120]).any(|&b| b != 0) {
        return Err(bad("reserved bytes are not zero".into()));
    }
    let address = u64_at(m, 16);
    let dims: Vec<u64> = (0..TENSOR_MAP_MAX_RANK)
        .map(|i| u64_at(m, 24 + 8 * i))
        .collect();
    let strides: Vec<u64> = (0..TENSOR_MAP_MAX_RANK - 1)
        .map(|i| u64_at(m, 64 + 8 * i))
        .collect();
    let boxes: Vec<u32> = (0..TENSOR_MAP_MAX_RANK)
        .map(|i| u32_at(m, 96 + 4 * i))
        .collect();
    if dims[rank..].iter().any(|&d| d != 1)
        || boxes[rank..].iter().any(|&b| b != 1)
        || strides[rank - 1..].iter().any(|&s| s != 0)
    {
        return Err(bad(format!(
            "the fields beyond rank {rank} are not those of a rank-{rank} map"
        )));
    }
    let es = dtype.size() as u64;
    if let Some(i) = strides[..rank - 1].iter().position(|s| s % es != 0) {
        return Err(bad(format!(
            "the stride of dimension {} is not a whole number of elements",
            i + 1
        )));
    }
    let elem_strides: Vec<u64> = strides[..rank - 1].iter().map(|s| s / es).collect();
    // The driver's checks, without a view: the map may describe any memory, and the copy
    // checks each access against the allocations when it reads.
    validate(
        dtype,
        address,
        u64::MAX,
        &dims[..rank],
        &elem_strides,
        &boxes[..rank],
        swizzle,
    )
    .map_err(|e| bad(e.to_string()))
}
