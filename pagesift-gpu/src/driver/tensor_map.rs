//! Tensor maps: what the tensor memory accelerator (TMA, sm_90) reads a box of a tensor
//! through (`cp.async.bulk.tensor`).
//!
//! A [`TensorMap`] is built over a device view by [`TensorMap::tiled`], which checks that every
//! element the map describes lies inside the view, so a kernel that reads through it stays
//! inside the buffer whatever coordinates it asks for (the hardware fills the part of a box
//! outside the tensor with zeros). It borrows the view, so the memory outlives it. A kernel
//! declares the parameter as `TensorMap<T, C, R, D>` (element type, box of `C × R × D`); its
//! launch wrapper checks the map's element type and box against that.
//!
//! A [`TensorMapMut`] (built by [`TensorMap::tiled_mut`] over a view borrowed mutably) is also
//! written through: the hardware stores a box of shared memory into the tensor, leaving out
//! the part outside it, so such a store too stays inside the buffer. A kernel declares it as
//! `TensorMapMut<T, C, R, D>`, and its launch orders it as a write of the buffer.
//!
//! The encoding is the driver's (`cuTensorMapEncodeTiled`), or the emulated device's own,
//! 128 opaque bytes passed to the kernel by value.

use std::marker::PhantomData;

use super::memory::sealed::Owner;
use super::{DeviceRead, DeviceRepr, DeviceWrite, Dtype};
use crate::error::{InvalidArgument, Result};

/// The most dimensions of a tensor map.
pub const TENSOR_MAP_MAX_RANK: usize = 5;

/// The bytes of an encoded tensor map (`CUtensorMap`).
pub const TENSOR_MAP_BYTES: usize = 128;

/// How the hardware permutes 16-byte chunks of a box's rows in shared memory
/// (`CUtensorMapSwizzle`): chunk `c` of a row at address `a` goes to chunk `c ^ (a / span %
/// 8)`, for rows of exactly `span` bytes. `B128` is the layout `wgmma`'s 128-byte swizzled
/// descriptors read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// Rows as they are.
    None,
    /// 32-byte rows, chunk bit 0 flipped by address bit 7.
    B32,
    /// 64-byte rows, chunk bits 0-1 flipped by address bits 7-8.
    B64,
    /// 128-byte rows, chunk bits 0-2 flipped by address bits 7-9.
    B128,
}

impl Swizzle {
    /// The row length the swizzle permutes, in bytes (0 for none).
    pub fn span(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The driver's `CUtensorMapSwizzle` value.
    pub fn code(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }
}

/// What a backend encodes: a tiled tensor map with zero fill outside the tensor, no
/// interleave, element strides 1, L2 promotion of 256 bytes. Made only by
/// [`TensorMap::tiled`], which validated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapSpec {
    /// The element type.
    pub dtype: Dtype,
    /// The number of dimensions, 1 ..= [`TENSOR_MAP_MAX_RANK`].
    pub rank: u32,
    /// The device address of element `(0, 0, ..)`, 16-byte aligned.
    pub address: u64,
    /// The extent of each dimension, innermost first (`dims[..rank]`).
    pub dims: [u64; TENSOR_MAP_MAX_RANK],
    /// The distance in bytes between consecutive indices of dimensions 1 .. rank
    /// (`strides[..rank - 1]`; dimension 0 is dense), multiples of 16.
    pub strides: [u64; TENSOR_MAP_MAX_RANK - 1],
    /// The box one copy moves, in elements per dimension (`boxes[..rank]`), each 1 ..= 256.
    pub boxes: [u32; TENSOR_MAP_MAX_RANK],
    /// The shared-memory layout of the box's rows.
    pub swizzle: Swizzle,
}

impl TensorMapSpec {
    /// The bytes one box fills in shared memory.
    pub fn box_bytes(&self) -> u64 {
        self.boxes[..self.rank as usize]
            .iter()
            .map(|&b| b as u64)
            .product::<u64>()
            * self.dtype.size() as u64
    }
}

/// An encoded tensor map over a device view of `T`, passed to kernels by value.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct TensorMap<'a, T: DeviceRepr> {
    bytes: [u8; TENSOR_MAP_BYTES],
    spec: TensorMapSpec,
    /// The buffer under the view: its device, and the ordering of launches that read it.
    owner: &'a Owner,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> std::fmt::Debug for TensorMap<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorMap")
            .field("spec", &self.spec)
            .finish()
    }
}

impl<'a, T: DeviceRepr> TensorMap<'a, T> {
    /// A tiled tensor map over `view`: a tensor of `dims` elements (innermost first, up to 5
    /// dimensions), dimension `i + 1` `strides[i]` elements apart, read in boxes of `boxes`
    /// elements laid out in shared memory by `swizzle`.
    ///
    /// Errors name what is wrong: a rank of 0 or above 5, lengths that differ, a dimension of
    /// 0 or above 2³², a box dimension of 0 or above 256 or above its dimension's extent, a
    /// view not 16-byte aligned, a stride that is not a multiple of 16 bytes, at or above
    /// 2⁴⁰ bytes or below the extent of the dimension under it, an inner box that is not a
    /// multiple of 16 bytes or (swizzled) not exactly the swizzle's row, or a tensor that does not lie inside the view.
    pub fn tiled(
        view: &'a (impl DeviceRead<T> + ?Sized),
        dims: &[u64],
        strides: &[u64],
        boxes: &[u32],
        swizzle: Swizzle,
    ) -> Result<TensorMap<'a, T>> {
        let spec = validate(
            T::DTYPE,
            view.device_ptr(),
            view.len() as u64,
            dims,
            strides,
            boxes,
            swizzle,
        )?;
        let bytes = view.gpu().backend().tensor_map_encode_tiled(&spec)?;
        Ok(TensorMap {
            bytes,
            spec,
            owner: view.owner(),
            _t: PhantomData,
        })
    }

    /// The buffer under the view, for the launch's ordering.
    pub(crate) fn owner(&self) -> &'a Owner {
        self.owner
    }
}

/// A tensor map a kernel also writes through (`cp.async.bulk.tensor` from shared memory to
/// global), over a view borrowed mutably for as long as the map lives.
pub struct TensorMapMut<'a, T: DeviceRepr> {
    map: TensorMap<'a, T>,
}

impl<T: DeviceRepr> std::fmt::Debug for TensorMapMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorMapMut")
            .field("spec", &self.map.spec)
            .finish()
    }
}

impl<'a, T: DeviceRepr> TensorMap<'a, T> {
    /// A tiled tensor map over `view` that kernels may write through as well as read: the
    /// arguments and their checks are [`TensorMap::tiled`]'s.
    pub fn tiled_mut(
        view: &'a mut (impl DeviceWrite<T> + ?Sized),
        dims: &[u64],
        strides: &[u64],
        boxes: &[u32],
        swizzle: Swizzle,
    ) -> Result<TensorMapMut<'a, T>> {
        Ok(TensorMapMut {
            map: TensorMap::tiled(&*view, dims, strides, boxes, swizzle)?,
        })
    }
}

impl<'a, T: DeviceRepr> TensorMapMut<'a, T> {
    /// The map, for reading through (what it describes, its bytes).
    pub fn as_map(&self) -> &TensorMap<'a, T> {
        &self.map
    }
}

impl<T: DeviceRepr> TensorMap<'_, T> {
    /// What the map describes.
    pub fn spec(&self) -> &TensorMapSpec {
        &self.spec
    }

    /// The encoded map, as the kernel parameter carries it.
    pub fn as_bytes(&self) -> &[u8; TENSOR_MAP_BYTES] {
        &self.bytes
    }

    /// The box in elements, innermost first, padded with 1 to three dimensions.
    pub fn box3(&self) -> [u32; 3] {
        let mut b = [1u32; 3];
        for (i, x) in self.spec.boxes[..self.spec.rank as usize]
            .iter()
            .enumerate()
            .take(3)
        {
            b[i] = *x;
        }
        b
    }
}

fn bad(message: String) -> crate::Error {
    InvalidArgument {
        op: "TensorMap::tiled",
        message,
    }
    .into()
}

/// The checks of [`TensorMap::tiled`], on a view of `len` elements of `dtype` at `address`.
pub(crate) fn validate(
    dtype: Dtype,
    address: u64,
    len: u64,
    dims: &[u64],
    strides: &[u64],
    boxes: &[u32],
    swizzle: Swizzle,
) -> Result<TensorMapSpec> {
    let rank = dims.len();
    if rank == 0 || rank > TENSOR_MAP_MAX_RANK {
        return Err(bad(format!(
            "a tensor map has 1 to {TENSOR_MAP_MAX_RANK} dimensions, not {rank}"
        )));
    }
    if strides.len() != rank - 1 || boxes.len() != rank {
        return Err(bad(format!(
            "{rank} dimensions take {} strides and {rank} box dimensions, not {} and {}",
            rank - 1,
            strides.len(),
            boxes.len()
        )));
    }
    let es = dtype.size() as u64;
    if address % 16 != 0 {
        return Err(bad(format!(
            "the view starts at {address:#x}, not a multiple of 16 bytes"
        )));
    }
    for (i, &d) in dims.iter().enumerate() {
        if d == 0 || d > 1 << 32 {
            return Err(bad(format!("dimension {i} has {d} elements (1 ..= 2^32)")));
        }
        let b = boxes[i];
        if b == 0 || b > 256 {
            return Err(bad(format!(
                "box dimension {i} is {b} elements (1 ..= 256)"
            )));
        }
    }
    let inner = boxes[0] as u64 * es;
    if inner % 16 != 0 {
        return Err(bad(format!(
            "the box's rows are {inner} bytes, not a multiple of 16"
        )));
    }
    if swizzle != Swizzle::None && inner != swizzle.span() as u64 {
        return Err(bad(format!(
            "a {}-byte swizzle takes box rows of exactly {} bytes, not {inner}",
            swizzle.span(),
            swizzle.span()
        )));
    }
    // The last element's offset, in elements: dense dimension 0, then each stride.
    let mut last = dims[0] - 1;
    let mut under = dims[0] * es;
    let mut sbytes = [0u64; TENSOR_MAP_MAX_RANK - 1];
    for (i, &s) in strides.iter().enumerate() {
        let bytes = s.saturating_mul(es);
        if bytes % 16 != 0 || bytes >= 1 << 40 {
            return Err(bad(format!(
                "dimension {} is {s} elements ({bytes} bytes) apart: a multiple of 16 bytes below 2^40",
                i + 1
            )));
        }
        if bytes < under {
            return Err(bad(format!(
                "dimension {} is {s} elements apart, less than the {} elements of the dimensions under it",
                i + 1,
                under / es
            )));
        }
        under = bytes.saturating_mul(dims[i + 1]);
        last = last.saturating_add(s.saturating_mul(dims[i + 1] - 1));
        sbytes[i] = bytes;
    }
    if last >= len {
        return Err(bad(format!(
            "the tensor reaches element {last}, past the view's {len} elements"
        )));
    }
    let mut d = [1u64; TENSOR_MAP_MAX_RANK];
    d[..rank].copy_from_slice(dims);
    let mut b = [1u32; TENSOR_MAP_MAX_RANK];
    b[..rank].copy_from_slice(boxes);
    Ok(TensorMapSpec {
        dtype,
        rank: rank as u32,
        address,
        dims: d,
        strides: sbytes,
        boxes: b,
        swizzle,
    })
}
