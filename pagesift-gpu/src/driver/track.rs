//! Stream-ordered buffers: which streams a buffer's pending work is on, and the waits that order
//! a new use after it.
//!
//! A buffer remembers the stream of its last write and the streams that read it since (as
//! `Arc`s of the streams, not events). A use on another stream waits on the device for an event
//! recorded at that moment at the tail of each conflicting stream (which covers the buffer's
//! work there, and perhaps more); a host copy synchronizes the conflicting streams. On one
//! stream nothing is recorded and nothing waits: a launch compares two pointers.

use std::sync::{Arc, Mutex, OnceLock};

use super::backend::{Backend, DevicePtr, RawHandle};
use super::fault::FaultRecord;
use super::gpu::Gpu;
use crate::error::Result;

/// A driver stream shared by the [`super::Stream`] handles and the buffers whose work is on it:
/// destroyed when the last of them is gone.
pub(crate) struct StreamInner {
    pub(crate) handle: RawHandle,
    /// The device of an owned stream, which keeps the context alive until the stream is
    /// destroyed. `None` for the default stream (held by its device, never destroyed).
    gpu: Option<Gpu>,
    /// The event recorded at the stream's tail when another stream or the host must wait
    /// for its work; created on first need.
    tail: Mutex<Option<RawHandle>>,
    /// The stream's fault record, allocated at its first generated launch.
    pub(crate) fault: OnceLock<Arc<FaultRecord>>,
}

impl StreamInner {
    /// The legacy default stream of a device.
    pub(crate) fn default_stream() -> StreamInner {
        StreamInner {
            handle: RawHandle::NULL,
            gpu: None,
            tail: Mutex::new(None),
            fault: OnceLock::new(),
        }
    }

    /// A stream created by the driver, destroyed on drop.
    pub(crate) fn owned(gpu: Gpu, handle: RawHandle) -> StreamInner {
        StreamInner {
            handle,
            gpu: Some(gpu),
            tail: Mutex::new(None),
            fault: OnceLock::new(),
        }
    }

    /// Destroys the tail event (the device's drop does this for its default stream).
    pub(crate) fn destroy_tail(&self, backend: &dyn Backend) -> Result<()> {
        let tail = self.tail.lock().unwrap_or_else(|p| p.into_inner()).take();
        match tail {
            Some(ev) => backend.event_destroy(ev),
            None => Ok(()),
        }
    }

    /// Makes work queued on `self` from now on wait for everything queued on `other` so far.
    fn wait_for(&self, other: &StreamInner, backend: &dyn Backend) -> Result<()> {
        // The lock keeps a concurrent re-record of the same event from moving it between the
        // record and the wait.
        let mut tail = other.tail.lock().unwrap_or_else(|p| p.into_inner());
        let ev = match *tail {
            Some(ev) => ev,
            None => {
                let ev = backend.event_create(false)?;
                *tail = Some(ev);
                ev
            }
        };
        backend.event_record(ev, other.handle)?;
        backend.stream_wait_event(self.handle, ev)
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        let Some(gpu) = self.gpu.take() else {
            return;
        };
        // The driver finishes queued work before it releases the stream (and the event).
        let r = gpu.current_backend().and_then(|b| {
            let ev = self.destroy_tail(b.as_ref());
            let rec = match self.fault.get() {
                Some(r) => r.release(b.as_ref(), self.handle),
                None => Ok(()),
            };
            b.stream_destroy(self.handle).and(ev).and(rec)
        });
        if let Err(e) = r {
            gpu.defer(e);
        }
    }
}

/// The pending uses of one buffer.
#[derive(Default)]
pub(crate) struct Tracking {
    uses: Mutex<Uses>,
}

#[derive(Default)]
struct Uses {
    /// The stream of the last write not known to be finished.
    writer: Option<Arc<StreamInner>>,
    /// Streams that read since that write (never the writer's own stream).
    readers: Vec<Arc<StreamInner>>,
}

impl Tracking {
    /// Tracking of a buffer just allocated on `stream` (the allocation counts as a write).
    pub(crate) fn written_on(stream: &Arc<StreamInner>) -> Tracking {
        Tracking {
            uses: Mutex::new(Uses {
                writer: Some(Arc::clone(stream)),
                readers: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Uses> {
        self.uses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Orders work queued next on `stream` after the conflicting uses on other streams: a read
    /// after the last write, a write after the last write and every read. The context is
    /// current.
    pub(crate) fn order_before(
        &self,
        backend: &dyn Backend,
        stream: &Arc<StreamInner>,
        write: bool,
    ) -> Result<()> {
        let uses = self.lock();
        // A read on a stream among the readers needs no new wait: it waited for the last write
        // when it first read. (A write does: the writer's stream may have read since.)
        let waited = !write && uses.readers.iter().any(|r| Arc::ptr_eq(r, stream));
        if let Some(w) = &uses.writer {
            if !waited && !Arc::ptr_eq(w, stream) {
                stream.wait_for(w, backend)?;
            }
        }
        if write {
            for r in &uses.readers {
                if !Arc::ptr_eq(r, stream) {
                    stream.wait_for(r, backend)?;
                }
            }
        }
        Ok(())
    }

    /// Records a use just queued on `stream`.
    pub(crate) fn record(&self, stream: &Arc<StreamInner>, write: bool) {
        let mut uses = self.lock();
        let on_writer = uses.writer.as_ref().is_some_and(|w| Arc::ptr_eq(w, stream));
        if write {
            if !on_writer {
                uses.writer = Some(Arc::clone(stream));
            }
            uses.readers.clear();
        } else if !on_writer && !uses.readers.iter().any(|r| Arc::ptr_eq(r, stream)) {
            uses.readers.push(Arc::clone(stream));
        }
    }

    /// Waits on the host for the uses a synchronous copy conflicts with (a read: the last
    /// write; a write: the last write and every read). The context is current.
    pub(crate) fn wait_host(&self, backend: &dyn Backend, write: bool) -> Result<()> {
        let mut uses = self.lock();
        if let Some(w) = &uses.writer {
            backend.stream_synchronize(w.handle)?;
            uses.writer = None;
        }
        if write {
            while let Some(r) = uses.readers.last() {
                backend.stream_synchronize(r.handle)?;
                uses.readers.pop();
            }
        }
        Ok(())
    }

    /// [`Tracking::wait_host`] for a read by the host, reporting the first bounds-check fault
    /// of a generated kernel on the writer's stream ([`crate::Error::KernelFault`]). The
    /// context is current.
    pub(crate) fn wait_host_reporting(&self, gpu: &Gpu) -> Result<()> {
        let mut uses = self.lock();
        if let Some(w) = &uses.writer {
            let b = gpu.backend();
            super::fault::after_stream_wait(gpu, w, || b.stream_synchronize(w.handle))?;
            uses.writer = None;
        }
        Ok(())
    }

    /// Frees `ptr` in stream order after every pending use: on the stream of one of them,
    /// made to wait for the others, or on the default stream when none is pending. Where the
    /// waits cannot be queued, waits for the device first; where even that fails, the memory
    /// is leaked (never freed under work that may still use it) and the error returned.
    pub(crate) fn free(&mut self, gpu: &Gpu, ptr: DevicePtr) -> Result<()> {
        let uses = self.uses.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut streams: Vec<Arc<StreamInner>> = uses.writer.take().into_iter().collect();
        streams.append(&mut uses.readers);
        let backend = gpu.current_backend()?;
        let on = streams
            .first()
            .cloned()
            .unwrap_or_else(|| Arc::clone(&gpu.inner.default_stream));
        let ordered = streams
            .iter()
            .skip(1)
            .filter(|s| !Arc::ptr_eq(s, &on))
            .try_for_each(|s| on.wait_for(s, backend.as_ref()));
        match ordered.and_then(|()| backend.mem_free_async(ptr, on.handle)) {
            Ok(()) => Ok(()),
            Err(e) => {
                backend.synchronize()?;
                backend.mem_free(ptr).map_err(|_| e)
            }
        }
    }
}
