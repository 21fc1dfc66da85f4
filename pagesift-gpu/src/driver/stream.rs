//! [`Stream`]s, [`Event`]s, page-locked host memory ([`PinnedBuffer`]) and the asynchronous
//! copies between it and the device.
//!
//! An asynchronous copy leaves a pending event in the pinned buffer it uses; every access to
//! the host memory of that buffer (reading, writing, dropping it) first waits for the event. So
//! safe code can neither free nor touch host memory while a copy is in flight.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::backend::{Backend, BackendKind, KernelArg, LaunchRequest, RawHandle};
use super::gpu::Gpu;
use super::memory::{byte_len, check_len, check_same, DeviceRead, DeviceRepr, DeviceWrite};
use super::module::Function;
use super::track::{StreamInner, Tracking};
use crate::error::{self, Error, Result};

/// An ordered queue of device work. Created by [`Gpu::new_stream`] or [`Gpu::default_stream`]
/// (the legacy default stream, one per device, never destroyed).
///
/// A cheap handle: clones share the stream. The driver stream lives until the last handle and
/// the last buffer whose pending work is on it are gone, so dropping a stream never cuts off
/// work a buffer waits for.
#[derive(Clone)]
pub struct Stream {
    gpu: Gpu,
    pub(crate) inner: Arc<StreamInner>,
}

impl Stream {
    pub(crate) fn default_of(gpu: Gpu) -> Stream {
        let inner = Arc::clone(&gpu.inner.default_stream);
        Stream { gpu, inner }
    }

    pub(crate) fn new(gpu: &Gpu) -> Result<Stream> {
        gpu.enter()?;
        let handle = gpu.backend().stream_create()?;
        Ok(Stream {
            gpu: gpu.clone(),
            inner: Arc::new(StreamInner::owned(gpu.clone(), handle)),
        })
    }

    /// The device of this stream.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The backend handle (`RawHandle::NULL` for the default stream).
    pub(crate) fn raw(&self) -> RawHandle {
        self.inner.handle
    }

    /// The driver's `CUstream` of this stream, for handing to another CUDA library (cuBLAS's
    /// `cublasSetStream`) so that its work queues here. Null for the default (legacy) stream,
    /// which such libraries read as that same stream, and on the emulated device, which has no
    /// driver stream. Valid while any handle of this stream lives.
    ///
    /// No buffer knows of work queued through it (as with [`Stream::launch`]): whoever queues
    /// it orders it with other streams and synchronizes this one before the host reads what it
    /// wrote.
    pub fn raw_handle(&self) -> *mut std::ffi::c_void {
        match self.gpu.backend_kind() {
            BackendKind::Cuda => self.inner.handle.0 as *mut std::ffi::c_void,
            BackendKind::Emulated => std::ptr::null_mut(),
        }
    }

    /// Whether this is the default stream.
    pub fn is_default(&self) -> bool {
        self.inner.handle == RawHandle::NULL
    }

    /// Whether two handles name the same stream.
    pub fn same_stream(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Waits until all work queued on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.enter()?;
        let b = self.gpu.backend();
        super::fault::after_stream_wait(&self.gpu, &self.inner, || b.stream_synchronize(self.raw()))
    }

    /// Whether all work queued on this stream is done (never waits).
    pub fn query(&self) -> Result<bool> {
        self.gpu.enter()?;
        self.gpu.backend().stream_query(self.raw())
    }

    /// Enters the context and orders work queued next on this stream after the conflicting
    /// pending work of each buffer (`(tracking, writes)`) on other streams.
    fn order(&self, uses: &[(&Tracking, bool)]) -> Result<&dyn Backend> {
        self.gpu.enter()?;
        let b = self.gpu.backend().as_ref();
        for (t, write) in uses {
            t.order_before(b, &self.inner, *write)?;
        }
        Ok(b)
    }

    /// Records the uses of work just queued on this stream.
    fn record(&self, uses: &[(&Tracking, bool)]) {
        for (t, write) in uses {
            t.record(&self.inner, *write);
        }
    }

    /// Queues a copy of `src` into `dst` (same length, same device), after the pending work on
    /// `dst` on other streams.
    ///
    /// Errors: [`Error::DeviceMismatch`], [`Error::LengthMismatch`], or the driver's.
    pub fn copy_htod_async<T: DeviceRepr>(
        &self,
        dst: &mut impl DeviceWrite<T>,
        src: &PinnedBuffer<T>,
    ) -> Result<()> {
        self.check_gpu(dst.gpu(), "copy_htod_async", "buffer")?;
        self.check_gpu(&src.gpu, "copy_htod_async", "pinned buffer")?;
        check_len("copy_htod_async", dst.len(), src.len)?;
        if src.len == 0 {
            return Ok(());
        }
        let bytes = byte_len::<T>("copy_htod_async", src.len)?;
        // The host memory must not change while the copy reads it: wait for earlier copies
        // into it, then mark it busy until this one is done.
        src.wait()?;
        let dptr = dst.device_ptr_mut();
        let uses = [(&dst.owner().track, true)];
        let b = self.order(&uses)?;
        // SAFETY: `src` is page-locked memory of `bytes` bytes. It cannot be freed or written
        // before the copy is done: the event recorded below makes every access (and the drop)
        // of `src` wait for it.
        unsafe { b.memcpy_htod_async(dptr, src.ptr, bytes, self.raw()) }?;
        self.record(&uses);
        src.mark_pending(self)
    }

    /// Queues a copy of `src` into `dst` (same length, same device), after the pending writes
    /// of `src` on other streams. Reading `dst` waits until the copy is done.
    ///
    /// Errors: [`Error::DeviceMismatch`], [`Error::LengthMismatch`], or the driver's.
    pub fn copy_dtoh_async<T: DeviceRepr>(
        &self,
        dst: &mut PinnedBuffer<T>,
        src: &impl DeviceRead<T>,
    ) -> Result<()> {
        self.check_gpu(src.gpu(), "copy_dtoh_async", "buffer")?;
        self.check_gpu(&dst.gpu, "copy_dtoh_async", "pinned buffer")?;
        check_len("copy_dtoh_async", dst.len, src.len())?;
        if dst.len == 0 {
            return Ok(());
        }
        let bytes = byte_len::<T>("copy_dtoh_async", dst.len)?;
        dst.wait()?;
        let uses = [(&src.owner().track, false)];
        let b = self.order(&uses)?;
        // SAFETY: `dst` is page-locked memory of `bytes` bytes; every access to it (and its
        // drop) waits for the event recorded below, so nothing touches it during the copy.
        unsafe { b.memcpy_dtoh_async(dst.ptr, src.device_ptr(), bytes, self.raw()) }?;
        self.record(&uses);
        dst.mark_pending(self)
    }

    /// Queues a device-to-device copy (same length, same device), after the conflicting
    /// pending work of both on other streams.
    ///
    /// Errors: [`Error::DeviceMismatch`], [`Error::LengthMismatch`], or the driver's.
    pub fn copy_dtod_async<T: DeviceRepr>(
        &self,
        dst: &mut impl DeviceWrite<T>,
        src: &impl DeviceRead<T>,
    ) -> Result<()> {
        self.check_gpu(dst.gpu(), "copy_dtod_async", "buffer")?;
        self.check_gpu(src.gpu(), "copy_dtod_async", "buffer")?;
        check_len("copy_dtod_async", dst.len(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let bytes = byte_len::<T>("copy_dtod_async", src.len())?;
        let dptr = dst.device_ptr_mut();
        let uses = [(&dst.owner().track, true), (&src.owner().track, false)];
        let b = self.order(&uses)?;
        b.memcpy_dtod(dptr, src.device_ptr(), bytes, self.raw())?;
        self.record(&uses);
        Ok(())
    }

    /// Queues setting every byte of `dst` to `value`, after the pending work on `dst` on other
    /// streams.
    ///
    /// Errors: [`Error::DeviceMismatch`], or the driver's.
    pub fn memset_async<T: DeviceRepr>(
        &self,
        dst: &mut impl DeviceWrite<T>,
        value: u8,
    ) -> Result<()> {
        self.check_gpu(dst.gpu(), "memset_async", "buffer")?;
        if dst.is_empty() {
            return Ok(());
        }
        let bytes = byte_len::<T>("memset_async", dst.len())?;
        let dptr = dst.device_ptr_mut();
        let uses = [(&dst.owner().track, true)];
        let b = self.order(&uses)?;
        b.memset_d8(dptr, value, bytes, self.raw())?;
        self.record(&uses);
        Ok(())
    }

    /// Launches a kernel loaded from raw PTX ([`Gpu::load_ptx`]) on this stream.
    ///
    /// Checks the block, grid and shared memory against the device's limits
    /// ([`Error::Launch`]); a grid with a zero dimension launches nothing.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, size and meaning, and every memory
    /// access the kernel makes with them must be in bounds of live allocations that nothing
    /// else uses meanwhile. The arguments are raw addresses, so no buffer tracks this launch:
    /// the caller orders it with work on other streams and with host copies (synchronizing
    /// this stream before reading what it wrote), and keeps every buffer it uses alive until
    /// it is done. (Kernels from [`crate::ptx_kernel!`] get a typed `launch` that does all
    /// of this.)
    pub unsafe fn launch(
        &self,
        function: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem_bytes: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        self.check_gpu(function.gpu(), "launch", "function")?;
        super::launch::check_limits(
            function.name(),
            self.gpu.props(),
            grid,
            block,
            function.static_shared_bytes(),
            shared_mem_bytes,
        )?;
        if grid.contains(&0) {
            return Ok(());
        }
        self.gpu.enter()?;
        function.ensure_dynamic_shared(shared_mem_bytes)?;
        self.gpu.backend().launch(&LaunchRequest {
            function: function.raw(),
            name: function.name(),
            grid,
            block,
            shared_mem_bytes,
            stream: self.raw(),
            args,
        })
    }

    fn check_gpu(&self, other: &Gpu, what: &str, object: &'static str) -> Result<()> {
        check_same(&self.gpu, other, what, object)
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("handle", &self.inner.handle)
            .field("gpu", &self.gpu)
            .finish()
    }
}

/// A point in a stream's work, for waiting and timing. Created with timing enabled.
pub struct Event {
    gpu: Gpu,
    handle: RawHandle,
}

impl Event {
    /// A new event with timing enabled.
    pub fn new(gpu: &Gpu) -> Result<Event> {
        Event::create(gpu, true)
    }

    fn create(gpu: &Gpu, timing: bool) -> Result<Event> {
        gpu.enter()?;
        let handle = gpu.backend().event_create(timing)?;
        Ok(Event {
            gpu: gpu.clone(),
            handle,
        })
    }

    /// Records the event at the current end of `stream`'s work.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        check_same(&self.gpu, stream.gpu(), "Event::record", "stream")?;
        self.gpu.enter()?;
        self.gpu.backend().event_record(self.handle, stream.raw())
    }

    /// Waits until the work before the recorded point is done.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.enter()?;
        self.gpu.backend().event_synchronize(self.handle)
    }

    /// Whether the work before the recorded point is done (never waits; an event never
    /// recorded is done).
    pub fn query(&self) -> Result<bool> {
        self.gpu.enter()?;
        self.gpu.backend().event_query(self.handle)
    }

    /// Milliseconds from `start` to this event (both recorded; this one completed).
    pub fn elapsed_ms(&self, start: &Event) -> Result<f32> {
        check_same(&self.gpu, &start.gpu, "Event::elapsed_ms", "event")?;
        self.gpu.enter()?;
        self.gpu
            .backend()
            .event_elapsed_ms(start.handle, self.handle)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Err(e) = self
            .gpu
            .current_backend()
            .and_then(|b| b.event_destroy(self.handle))
        {
            self.gpu.defer(e);
        }
    }
}

/// Page-locked host memory of `len` elements, the host side of asynchronous copies. Freed on
/// drop, after any copy still using it is done.
///
/// Every access ([`PinnedBuffer::as_slice`], [`PinnedBuffer::as_mut_slice`], drop) first waits
/// for the asynchronous copies that use the buffer.
pub struct PinnedBuffer<T: DeviceRepr> {
    gpu: Gpu,
    ptr: *mut u8,
    len: usize,
    pending: Mutex<Vec<Event>>,
    /// Set when a copy's end could not be tracked: the memory is never used or freed again.
    abandoned: AtomicBool,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns its host memory exclusively (like a `Box<[T]>`); shared access
// synchronizes through the `pending` mutex.
unsafe impl<T: DeviceRepr> Send for PinnedBuffer<T> {}
// SAFETY: as above; `&PinnedBuffer` only reads the memory.
unsafe impl<T: DeviceRepr> Sync for PinnedBuffer<T> {}

impl<T: DeviceRepr> PinnedBuffer<T> {
    /// Allocates `len` elements of page-locked memory, zeroed.
    ///
    /// Errors: [`Error::OutOfMemory`] when the driver cannot pin that much.
    pub fn new(gpu: &Gpu, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = byte_len::<T>("PinnedBuffer::new", len)?;
        let ptr = if bytes == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr().cast::<u8>()
        } else {
            gpu.enter()?;
            // Only the crate's backends exist (the trait is sealed): `host_alloc` returns
            // `bytes` bytes of page-locked memory, aligned for any element type.
            let p = gpu.backend().host_alloc(bytes)?;
            if p.is_null() || (p as usize) % std::mem::align_of::<T>() != 0 {
                return Err(Error::OutOfMemory { bytes });
            }
            // SAFETY: `p` points to `bytes` freshly allocated bytes (contract of `host_alloc`).
            unsafe { std::ptr::write_bytes(p, 0, bytes) };
            p
        };
        Ok(PinnedBuffer {
            gpu: gpu.clone(),
            ptr,
            len,
            pending: Mutex::new(Vec::new()),
            abandoned: AtomicBool::new(false),
            _t: PhantomData,
        })
    }

    /// Allocates page-locked memory holding a copy of `src`.
    pub fn from_slice(gpu: &Gpu, src: &[T]) -> Result<PinnedBuffer<T>> {
        let mut b = PinnedBuffer::new(gpu, src.len())?;
        b.as_mut_slice()?.copy_from_slice(src);
        Ok(b)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents, after waiting for the asynchronous copies that use the buffer.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.wait()?;
        // SAFETY: `ptr` holds `len` initialized elements (zeroed at allocation, then written by
        // the host or by completed copies); no copy is in flight (waited above) and a new one
        // that writes needs `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.cast::<T>(), self.len) })
    }

    /// The contents, writable, after waiting for the asynchronous copies that use the buffer.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait()?;
        // SAFETY: as `as_slice`, and `&mut self` excludes every other access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<T>(), self.len) })
    }

    /// Copies the contents into a `Vec`, after waiting for pending copies.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.as_slice()?.to_vec())
    }

    /// Waits for every asynchronous copy that uses the buffer.
    pub fn wait(&self) -> Result<()> {
        if self.abandoned.load(Ordering::Acquire) {
            return Err(Error::from(error::InvalidArgument {
                op: "PinnedBuffer",
                message: "an asynchronous copy using this buffer could not be tracked; its memory is no longer accessible".into(),
            }));
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(ev) = pending.last() {
            // No deferred-error check here: an unrelated earlier failure must not keep the
            // buffer busy (a drop would then have to leak it).
            self.gpu.current_backend()?.event_synchronize(ev.handle)?;
            pending.pop();
        }
        Ok(())
    }

    /// Records that a copy just queued on `stream` uses the buffer. Where no event can mark
    /// its end, waits for the whole stream instead; where even that fails, the buffer is
    /// abandoned: never handed out or freed again (the copy might still be running).
    fn mark_pending(&self, stream: &Stream) -> Result<()> {
        let marked = Event::create(&self.gpu, false).and_then(|ev| ev.record(stream).map(|()| ev));
        match marked {
            Ok(ev) => {
                self.pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(ev);
                Ok(())
            }
            Err(e) => {
                let waited = self
                    .gpu
                    .current_backend()
                    .and_then(|b| b.stream_synchronize(stream.raw()));
                if waited.is_err() {
                    self.abandoned.store(true, Ordering::Release);
                }
                Err(e)
            }
        }
    }
}

impl<T: DeviceRepr> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if self.len == 0 || std::mem::size_of::<T>() == 0 {
            return;
        }
        if let Err(e) = self.wait() {
            // A copy may still use the memory: leaking it is the only safe choice.
            self.gpu.defer(e);
            return;
        }
        let ptr = self.ptr;
        // SAFETY: `ptr` came from `host_alloc` of this backend, no copy uses it any more
        // (waited above), and it is not used after this.
        let r = self
            .gpu
            .current_backend()
            .and_then(|b| unsafe { b.host_free(ptr) });
        if let Err(e) = r {
            self.gpu.defer(e);
        }
    }
}

impl<T: DeviceRepr> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}
