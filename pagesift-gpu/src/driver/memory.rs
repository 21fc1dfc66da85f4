//! Typed device memory: [`DeviceBuffer`] (owning, RAII), the views [`DeviceSlice`] and
//! [`DeviceSliceMut`], and the traits [`DeviceRead`] / [`DeviceWrite`] the launch wrappers take.
//!
//! The copies here are synchronous: when they return, the device holds (or the host has) the
//! data. Each first waits for the buffer's pending work that conflicts with it, on any stream
//! (see [`super::track`]). Zero-length buffers and copies never touch the driver.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use super::backend::DevicePtr;
use super::copy::Region;
use super::gpu::Gpu;
use super::track::Tracking;
use crate::error::{self, Error, Result};

/// Unnameable outside the crate: the seals and what buffers share with their views.
pub(crate) mod sealed {
    use super::{Gpu, Tracking};

    pub trait Sealed {}

    /// The device and pending work of the buffer a view belongs to.
    pub trait Tracked {
        fn owner(&self) -> &Owner;
    }

    /// What a buffer shares with its views: its device and the tracking of its pending work.
    pub struct Owner {
        pub(crate) gpu: Gpu,
        pub(crate) track: Tracking,
    }
}

use sealed::Owner;

/// A plain element type that can live in device memory: no padding, no pointers, every bit
/// pattern valid. Implemented for `f32`, `f64`, `f16`, `bf16`, `i8`..`i64` and `u8`..`u64`;
/// sealed.
///
/// # Safety
/// Implementors are `Copy`, have no padding bytes and accept every bit pattern.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The element type as a value (kernels generic over their element type select their
    /// variant by it).
    const DTYPE: Dtype;
}

/// The element types of device memory, as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    F32,
    F64,
    F16,
    Bf16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

impl Dtype {
    /// The Rust name of the type: `f32`, `bf16`, `u8`, ...
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::I8 => "i8",
            Dtype::I16 => "i16",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::U32 => "u32",
            Dtype::U64 => "u64",
        }
    }

    /// The size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! device_repr {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive number (or a transparent wrapper of `u16`): no padding, every bit
        // pattern valid.
        unsafe impl DeviceRepr for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
    )*};
}
device_repr!(
    f32 => F32,
    f64 => F64,
    half::f16 => F16,
    half::bf16 => Bf16,
    i8 => I8,
    i16 => I16,
    i32 => I32,
    i64 => I64,
    u8 => U8,
    u16 => U16,
    u32 => U32,
    u64 => U64
);

/// The bytes of a slice of plain elements.
pub(crate) fn as_bytes<T: DeviceRepr>(s: &[T]) -> &[u8] {
    // SAFETY: `T: DeviceRepr` has no padding, so every byte is initialized; the length is the
    // slice's size in bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of plain elements.
pub(crate) fn as_bytes_mut<T: DeviceRepr>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`, and every bit pattern written is a valid `T`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Size in bytes of `len` elements of `T`, or `InvalidArgument` on overflow.
pub(crate) fn byte_len<T>(op: &'static str, len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        Error::from(error::InvalidArgument {
            op,
            message: format!("{len} elements overflow the address space"),
        })
    })
}

/// Device memory a kernel may read: a buffer or a view of one. Sealed.
pub trait DeviceRead<T: DeviceRepr>: sealed::Sealed + sealed::Tracked {
    /// The device address of the first element (0 for an empty range).
    fn device_ptr(&self) -> DevicePtr;
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The device the memory belongs to.
    fn gpu(&self) -> &Gpu;
}

/// Device memory a kernel may write: a buffer or a mutable view of one. Sealed.
pub trait DeviceWrite<T: DeviceRepr>: DeviceRead<T> {
    /// The device address of the first element, for writing.
    fn device_ptr_mut(&mut self) -> DevicePtr {
        self.device_ptr()
    }
}

/// Resolves a range of a `len`-element region into (start, end), or `InvalidArgument`.
fn resolve(op: &'static str, range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        _ => Err(Error::from(error::InvalidArgument {
            op,
            message: format!(
                "range {:?}..{:?} out of bounds for length {len}",
                range.start_bound(),
                range.end_bound()
            ),
        })),
    }
}

pub(crate) fn check_len(what: &str, expected: usize, actual: usize) -> Result<()> {
    if expected != actual {
        return Err(Error::from(error::LengthMismatch {
            what: what.to_string(),
            expected,
            actual,
        }));
    }
    Ok(())
}

/// `DeviceMismatch` naming `what` and the `object` at fault unless `other` is the device of
/// `gpu`.
pub(crate) fn check_same(gpu: &Gpu, other: &Gpu, what: &str, object: &'static str) -> Result<()> {
    if !gpu.same_device(other) {
        return Err(Error::from(error::DeviceMismatch {
            what: what.to_string(),
            object,
        }));
    }
    Ok(())
}

/// The inherent accessors of a buffer or view (`$what` names it in the docs).
macro_rules! view_accessors {
    ($what:literal) => {
        /// The number of elements.
        pub fn len(&self) -> usize {
            self.len
        }

        #[doc = concat!("Whether the ", $what, " has no elements.")]
        pub fn is_empty(&self) -> bool {
            self.len == 0
        }

        /// The device address of the first element (0 when empty).
        pub fn device_ptr(&self) -> DevicePtr {
            self.ptr
        }
    };
}

macro_rules! copy_methods {
    (read) => {
        /// Copies the whole range to `dst` (same length), synchronously.
        ///
        /// Errors: [`Error::LengthMismatch`], or the driver's.
        pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
            Region::of(self).copy_to_host(dst)
        }

        /// Copies the whole range into a new `Vec`, synchronously.
        pub fn to_host(&self) -> Result<Vec<T>> {
            Region::of(self).to_host()
        }
    };
    (write) => {
        /// Copies `src` (same length) into the range, synchronously.
        ///
        /// Errors: [`Error::LengthMismatch`], or the driver's.
        pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
            Region::of(self).copy_from_host(src)
        }

        /// Copies device memory of the same device and length into the range, synchronously.
        ///
        /// Errors: [`Error::DeviceMismatch`], [`Error::LengthMismatch`], or the driver's.
        pub fn copy_from_device(&mut self, src: &impl DeviceRead<T>) -> Result<()> {
            Region::of(self).copy_from_device(src)
        }

        /// Sets every byte of the range to `value`, synchronously.
        pub fn memset_bytes(&mut self, value: u8) -> Result<()> {
            Region::of(self).memset_bytes(value)
        }

        /// Sets every 32-bit word of the range to `word` (e.g. a NaN pattern to poison outputs),
        /// synchronously. The range must be a whole number of aligned 32-bit words
        /// ([`Error::InvalidArgument`] otherwise).
        pub fn fill_u32(&mut self, word: u32) -> Result<()> {
            Region::of(self).fill_u32(word)
        }
    };
}

/// An owned, typed allocation of `len` elements of `T` in device memory, freed on drop.
///
/// The buffer is stream-ordered: it remembers the streams of its pending work, uses on other
/// streams and synchronous copies wait for it, and drop frees it in stream order without
/// waiting (see [`super`]). A failed free in `Drop` is kept by the device for
/// [`Gpu::take_deferred_errors`] and [`Gpu::synchronize`].
pub struct DeviceBuffer<T: DeviceRepr> {
    owner: Owner,
    ptr: DevicePtr,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Allocates `len` elements, uninitialized (the contents are whatever the device held),
    /// in stream order on the default stream: work on other streams waits for the allocation.
    ///
    /// Errors: [`Error::OutOfMemory`] when the device lacks the memory.
    pub fn alloc(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>("DeviceBuffer::alloc", len)?;
        let default = &gpu.inner.default_stream;
        let (ptr, track) = if bytes == 0 {
            (0, Tracking::default())
        } else {
            gpu.enter()?;
            let ptr = gpu.backend().mem_alloc_async(bytes, default.handle)?;
            (ptr, Tracking::written_on(default))
        };
        Ok(DeviceBuffer {
            owner: Owner {
                gpu: gpu.clone(),
                track,
            },
            ptr,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates `len` elements for long-lived data (weights): like [`DeviceBuffer::alloc`],
    /// but refuses with [`Error::OutOfMemory`] an allocation that would leave less free device
    /// memory than the device's reserve ([`Gpu::set_memory_reserve`]).
    pub fn alloc_long_lived(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>("DeviceBuffer::alloc_long_lived", len)?;
        let reserve = gpu.memory_reserve();
        if bytes > 0 && reserve > 0 {
            let (free, _) = gpu.mem_info()?;
            if free.saturating_sub(bytes) < reserve {
                return Err(Error::OutOfMemory { bytes });
            }
        }
        DeviceBuffer::alloc(gpu, len)
    }

    /// Allocates long-lived memory ([`DeviceBuffer::alloc_long_lived`]) holding a copy of `src`.
    pub fn from_host_long_lived(gpu: &Gpu, src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc_long_lived(gpu, src.len())?;
        b.copy_from_host(src)?;
        Ok(b)
    }

    /// Allocates `len` elements set to zero bytes.
    pub fn zeroed(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc(gpu, len)?;
        b.memset_bytes(0)?;
        Ok(b)
    }

    /// Allocates a buffer holding a copy of `src`.
    pub fn from_host(gpu: &Gpu, src: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc(gpu, src.len())?;
        b.copy_from_host(src)?;
        Ok(b)
    }

    /// A new buffer on the same device with a copy of the contents.
    pub fn try_clone(&self) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc(&self.owner.gpu, self.len)?;
        b.copy_from_device(self)?;
        Ok(b)
    }

    view_accessors!("buffer");

    /// The device the buffer lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.owner.gpu
    }

    /// A read-only view of `range`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a range outside `0..len`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        DeviceSlice::of_range(
            "DeviceBuffer::slice",
            &self.owner,
            self.ptr,
            self.len,
            range,
        )
    }

    /// A writable view of `range`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a range outside `0..len`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        DeviceSliceMut::of_range(
            "DeviceBuffer::slice_mut",
            &self.owner,
            self.ptr,
            self.len,
            range,
        )
    }

    copy_methods!(read);
    copy_methods!(write);
}

/// The address of element `i` of a region starting at `ptr` (0 stays 0 for empty regions).
fn offset<T>(ptr: DevicePtr, i: usize) -> DevicePtr {
    if ptr == 0 {
        0
    } else {
        ptr + (i * std::mem::size_of::<T>()) as u64
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let Owner { gpu, track } = &mut self.owner;
        if let Err(e) = track.free(gpu, self.ptr) {
            gpu.defer(e);
        }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

/// A read-only view of part of a [`DeviceBuffer`].
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    owner: &'a Owner,
    ptr: DevicePtr,
    len: usize,
    _t: PhantomData<&'a [T]>,
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    view_accessors!("view");

    /// A narrower view of `range` (relative to this view).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        DeviceSlice::of_range("DeviceSlice::slice", self.owner, self.ptr, self.len, range)
    }

    copy_methods!(read);
}

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// The view of `range` of the `len` elements at `ptr`, or `InvalidArgument` naming `op`.
    fn of_range(
        op: &'static str,
        owner: &'a Owner,
        ptr: DevicePtr,
        len: usize,
        range: impl RangeBounds<usize>,
    ) -> Result<Self> {
        let (s, e) = resolve(op, range, len)?;
        Ok(DeviceSlice {
            owner,
            ptr: offset::<T>(ptr, s),
            len: e - s,
            _t: PhantomData,
        })
    }
}

/// A writable view of part of a [`DeviceBuffer`].
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    owner: &'a Owner,
    ptr: DevicePtr,
    len: usize,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: DeviceRepr> DeviceSliceMut<'_, T> {
    view_accessors!("view");

    /// A read-only view of `range` (relative to this view).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        DeviceSlice::of_range(
            "DeviceSliceMut::slice",
            self.owner,
            self.ptr,
            self.len,
            range,
        )
    }

    /// A narrower writable view of `range` (relative to this view).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        DeviceSliceMut::of_range(
            "DeviceSliceMut::slice_mut",
            self.owner,
            self.ptr,
            self.len,
            range,
        )
    }

    copy_methods!(read);
    copy_methods!(write);
}

impl<'a, T: DeviceRepr> DeviceSliceMut<'a, T> {
    /// The writable view of `range` of the `len` elements at `ptr`, or `InvalidArgument` naming
    /// `op`.
    fn of_range(
        op: &'static str,
        owner: &'a Owner,
        ptr: DevicePtr,
        len: usize,
        range: impl RangeBounds<usize>,
    ) -> Result<Self> {
        let (s, e) = resolve(op, range, len)?;
        Ok(DeviceSliceMut {
            owner,
            ptr: offset::<T>(ptr, s),
            len: e - s,
            _t: PhantomData,
        })
    }
}

impl<T: DeviceRepr> sealed::Sealed for DeviceBuffer<T> {}
impl<T: DeviceRepr> sealed::Sealed for DeviceSlice<'_, T> {}
impl<T: DeviceRepr> sealed::Sealed for DeviceSliceMut<'_, T> {}

/// `DeviceRead` for a buffer or view whose owner is `$owner` (with `$s` for `self`).
macro_rules! impl_device_read {
    ($ty:ty, $s:ident => $owner:expr) => {
        impl<T: DeviceRepr> sealed::Tracked for $ty {
            fn owner(&$s) -> &Owner {
                $owner
            }
        }
        impl<T: DeviceRepr> DeviceRead<T> for $ty {
            fn device_ptr(&self) -> DevicePtr {
                self.ptr
            }
            fn len(&self) -> usize {
                self.len
            }
            fn gpu(&self) -> &Gpu {
                &sealed::Tracked::owner(self).gpu
            }
        }
    };
}

impl_device_read!(DeviceBuffer<T>, self => &self.owner);
impl_device_read!(DeviceSlice<'_, T>, self => self.owner);
impl_device_read!(DeviceSliceMut<'_, T>, self => self.owner);
impl<T: DeviceRepr> DeviceWrite<T> for DeviceBuffer<T> {}
impl<T: DeviceRepr> DeviceWrite<T> for DeviceSliceMut<'_, T> {}
