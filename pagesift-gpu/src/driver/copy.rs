//! The synchronous copies of buffers and views, shared by [`super::DeviceBuffer`],
//! [`super::DeviceSlice`] and [`super::DeviceSliceMut`]: each first waits for the pending work
//! of the buffer that conflicts with it (see [`super::track`]).

use std::marker::PhantomData;

use super::backend::{DevicePtr, RawHandle};
use super::gpu::Gpu;
use super::memory::{as_bytes, as_bytes_mut, byte_len, check_len, check_same};
use super::memory::{DeviceRead, DeviceRepr};
use super::track::Tracking;
use crate::error::{self, Error, Result};

/// Shared implementation of the copies of buffers and views: `(gpu, ptr, len)`.
pub(crate) struct Region<'a, T> {
    gpu: &'a Gpu,
    track: &'a Tracking,
    ptr: DevicePtr,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: DeviceRepr> Region<'a, T> {
    /// The region a buffer or view covers.
    pub(crate) fn of(m: &'a impl DeviceRead<T>) -> Self {
        Region {
            gpu: m.gpu(),
            track: &m.owner().track,
            ptr: m.device_ptr(),
            len: m.len(),
            _t: PhantomData,
        }
    }

    pub(crate) fn copy_from_host(&self, src: &[T]) -> Result<()> {
        check_len("copy_from_host", self.len, src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        let b = self.gpu.backend();
        self.track.wait_host(b.as_ref(), true)?;
        b.memcpy_htod(self.ptr, as_bytes(src))?;
        // A copy from pageable memory may still be in flight towards the device; make it
        // visible to every stream.
        b.stream_synchronize(RawHandle::NULL)
    }

    pub(crate) fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        check_len("copy_to_host", self.len, dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        let b = self.gpu.backend();
        // A read reports the fault of a kernel that wrote the buffer.
        self.track.wait_host_reporting(self.gpu)?;
        b.memcpy_dtoh(as_bytes_mut(dst), self.ptr)
    }

    pub(crate) fn copy_from_device(&self, src: &impl DeviceRead<T>) -> Result<()> {
        check_same(self.gpu, src.gpu(), "copy_from_device", "buffer")?;
        check_len("copy_from_device", self.len, src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        let bytes = byte_len::<T>("copy_from_device", self.len)?;
        self.gpu.enter()?;
        let b = self.gpu.backend();
        self.track.wait_host(b.as_ref(), true)?;
        src.owner().track.wait_host(b.as_ref(), false)?;
        b.memcpy_dtod(self.ptr, src.device_ptr(), bytes, RawHandle::NULL)?;
        b.stream_synchronize(RawHandle::NULL)
    }

    pub(crate) fn memset_bytes(&self, value: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let bytes = byte_len::<T>("memset_bytes", self.len)?;
        self.gpu.enter()?;
        let b = self.gpu.backend();
        self.track.wait_host(b.as_ref(), true)?;
        b.memset_d8(self.ptr, value, bytes, RawHandle::NULL)?;
        b.stream_synchronize(RawHandle::NULL)
    }

    pub(crate) fn fill_u32(&self, word: u32) -> Result<()> {
        let bytes = byte_len::<T>("fill_u32", self.len)?;
        if bytes % 4 != 0 || self.ptr % 4 != 0 {
            return Err(Error::from(error::InvalidArgument {
                op: "fill_u32",
                message: format!(
                    "{bytes} bytes at {:#x} are not whole aligned 32-bit words",
                    self.ptr
                ),
            }));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        let b = self.gpu.backend();
        self.track.wait_host(b.as_ref(), true)?;
        b.memset_d32(self.ptr, word, bytes / 4, RawHandle::NULL)?;
        b.stream_synchronize(RawHandle::NULL)
    }

    pub(crate) fn to_host(&self) -> Result<Vec<T>> {
        if self.len == 0 {
            return Ok(Vec::new());
        }
        byte_len::<T>("to_host", self.len)?;
        // Zeroed memory (a valid value of every `DeviceRepr`): whatever the copy writes or
        // leaves, the caller gets initialized elements.
        let mut v = zeroed_vec::<T>(self.len)?;
        self.copy_to_host(&mut v)?;
        Ok(v)
    }
}

/// `len` elements whose bytes are all zero, or [`Error::InvalidArgument`] when the host lacks
/// the memory.
pub(crate) fn zeroed_vec<T: DeviceRepr>(len: usize) -> Result<Vec<T>> {
    let bytes = byte_len::<T>("to_host", len)?;
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::from(error::InvalidArgument {
            op: "to_host",
            message: format!("the host cannot allocate {bytes} bytes"),
        })
    })?;
    // SAFETY: the capacity holds `len` elements; writing `bytes` zero bytes initializes all of
    // them, and all-zero bytes are a valid `T` (`DeviceRepr`: plain numbers).
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr().cast::<u8>(), 0, bytes);
        v.set_len(len);
    }
    Ok(v)
}
