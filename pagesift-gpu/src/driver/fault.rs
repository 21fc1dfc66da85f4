//! The fault record: how a bounds-checked kernel reports an access out of bounds.
//!
//! Every kernel that [`crate::ptx_kernel!`] generates checks each access to a slice or shared
//! array against its length. A failed check does not trap (a trap would leave the CUDA context
//! unusable for the rest of the process): the access is skipped (a load yields 0 in every
//! lane), the thread goes on, and the first failure is written to a 32-byte record in device
//! memory, one per stream, whose address every generated kernel receives as its hidden first
//! parameter. The runtime reads the record where it waits for the stream's work:
//! `Stream::synchronize`, `Gpu::synchronize` (every stream's record), and the synchronous host
//! reads (`to_host`, `copy_to_host`) of a buffer written on the stream; it clears the record and
//! returns [`Error::KernelFault`] naming the kernel variant, the parameter (or shared array),
//! the index, the elements of the access and the length. So a fault reaches whoever waits for
//! the stream that ran the kernel, never a caller that waits for other work. Faults after the
//! first on a stream before that check are not recorded.
//!
//! Layout (little-endian; the macro crate's `lower/bounds.rs` writes the same offsets, and the
//! test `fault_record_layout_agrees_with_the_compiler` checks both sides):
//!
//! | offset | type | value |
//! |---|---|---|
//! | 0 | `u32` | 0: no fault; set to 1 by the first fault's `atom.global.cas.b32` |
//! | 4 | `u32` | parameter index in the kernel's declared list (`0xFFFF - k` for its k-th shared array) \| elements << 16; for a misaligned vector access also bit 31 \| its bytes << 24 |
//! | 8 | `u64` | 64-bit FNV-1a hash of the variant's PTX entry name |
//! | 16 | `u64` | the element index (a negative signed index reads as its two's complement) |
//! | 24 | `u64` | the length in elements |

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::backend::{Backend, DevicePtr, KernelArg, RawHandle};
use super::gpu::Gpu;
use super::stream::Stream;
use super::track::StreamInner;
use crate::error::{self, Error, Result};
use crate::kernel::KernelVariant;

/// The record's size in bytes (8-aligned, as every device allocation is).
pub const RECORD_BYTES: usize = 32;
/// Offset of the `u32` flag (0: no fault).
pub const FLAG: usize = 0;
/// Offset of the `u32` code: parameter index | elements << 16.
pub const CODE: usize = 4;
/// Offset of the `u64` FNV-1a hash of the entry name.
pub const HASH: usize = 8;
/// Offset of the `u64` element index.
pub const INDEX: usize = 16;
/// Offset of the `u64` length.
pub const LEN: usize = 24;
/// The parameter code of a kernel's first shared array (the k-th is `SHARED - k`).
pub const SHARED: u32 = 0xFFFF;

/// Zeroes a record and waits until the device holds the zeros (a copy from pageable memory may
/// still be in flight when it returns, and kernels on other streams read the record).
fn clear(b: &dyn Backend, ptr: DevicePtr) -> Result<()> {
    b.memset_d8(ptr, 0, RECORD_BYTES, RawHandle::NULL)?;
    b.stream_synchronize(RawHandle::NULL)
}

/// The 64-bit FNV-1a hash of a variant's entry name, as the kernels record it.
pub fn entry_hash(entry: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in entry.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// One stream's record, and whether a generated kernel was launched on the stream since the
/// record was last read.
pub(crate) struct FaultRecord {
    ptr: DevicePtr,
    due: AtomicBool,
}

impl FaultRecord {
    /// Allocates a zeroed record (the context is current).
    fn new(gpu: &Gpu) -> Result<FaultRecord> {
        let b = gpu.backend();
        // Allocated and zeroed in the default stream's order, and waited for: every stream may
        // use it at once. Freed in stream order like the buffers (`release`).
        let ptr = b.mem_alloc_async(RECORD_BYTES, RawHandle::NULL)?;
        if let Err(e) = clear(b.as_ref(), ptr) {
            let _ = b.mem_free_async(ptr, RawHandle::NULL);
            return Err(e);
        }
        Ok(FaultRecord {
            ptr,
            due: AtomicBool::new(false),
        })
    }

    /// Frees the record in the order of `stream` (after every kernel queued on it so far).
    pub(crate) fn release(&self, backend: &dyn Backend, stream: RawHandle) -> Result<()> {
        backend.mem_free_async(self.ptr, stream)
    }

    /// Reads and clears the record; [`Error::KernelFault`] when a kernel wrote it. Call only
    /// after the kernels whose faults are due have finished.
    fn read(&self, gpu: &Gpu) -> Result<()> {
        let b = gpu.backend();
        let mut raw = [0u8; RECORD_BYTES];
        if let Err(e) = b.memcpy_dtoh(&mut raw, self.ptr) {
            self.due.store(true, Ordering::Release);
            return Err(e);
        }
        let u32_at = |o: usize| u32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        if u32_at(FLAG) == 0 {
            return Ok(());
        }
        clear(b.as_ref(), self.ptr)?;
        let code = u32_at(CODE);
        let hash = u64_at(HASH);
        let variant = gpu.inner.modules.find(|v| entry_hash(v.entry) == hash);
        Err(fault_error(
            variant,
            code & 0xFFFF,
            code >> 16,
            u64_at(INDEX),
            u64_at(LEN),
        ))
    }
}

/// The hidden first kernel argument of a generated launch on `stream`: the stream's fault
/// record (allocated on first use). Marks a check due at the stream's next synchronization.
pub fn fault_arg(stream: &Stream) -> Result<KernelArg> {
    let inner = &stream.inner;
    let r = match inner.fault.get() {
        Some(r) => r,
        None => {
            let gpu = stream.gpu();
            gpu.enter()?;
            let r = FaultRecord::new(gpu)?;
            if let Err(unused) = inner.fault.set(Arc::new(r)) {
                // Another thread allocated the stream's record first.
                let _ = unused.release(gpu.backend().as_ref(), inner.handle);
            }
            let r = inner.fault.get().ok_or_else(|| {
                Error::from(error::Launch {
                    kernel: "fault record".into(),
                    message: "not allocated".into(),
                })
            })?;
            let mut all = gpu.inner.faults.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(r));
            r
        }
    };
    r.due.store(true, Ordering::Release);
    Ok(KernelArg::ptr(r.ptr))
}

/// Runs `wait` (which waits for every piece of work queued on `stream` so far), then reports
/// the first fault a generated kernel queued on the stream before it recorded:
/// [`Error::KernelFault`]. The record is read (one small synchronous copy) only when a
/// generated kernel was launched on the stream since the last read. Faults of a launch queued
/// while `wait` runs stay for the next check.
pub(crate) fn after_stream_wait(
    gpu: &Gpu,
    stream: &StreamInner,
    wait: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let record = stream.fault.get();
    let due = record.is_some_and(|r| r.due.swap(false, Ordering::AcqRel));
    if let Err(e) = wait() {
        if let Some(r) = record.filter(|_| due) {
            r.due.store(true, Ordering::Release);
        }
        return Err(e);
    }
    match record {
        Some(r) if due => r.read(gpu),
        _ => Ok(()),
    }
}

/// Runs `wait` (which waits for the whole device), then reports the first fault of every
/// stream of the device that has one (the first of them as the error; the others stay for
/// their streams' next checks).
pub(crate) fn after_device_wait(gpu: &Gpu, wait: impl FnOnce() -> Result<()>) -> Result<()> {
    let records: Vec<Arc<FaultRecord>> = gpu
        .inner
        .faults
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|r| r.due.swap(false, Ordering::AcqRel))
        .collect();
    if let Err(e) = wait() {
        for r in &records {
            r.due.store(true, Ordering::Release);
        }
        return Err(e);
    }
    let mut first = Ok(());
    for r in &records {
        if first.is_err() {
            // Reported later by its own stream (or the next device-wide check).
            r.due.store(true, Ordering::Release);
        } else {
            first = r.read(gpu);
        }
    }
    first
}

/// The error for a decoded record (`variant`: the variant the hash names, if loaded here;
/// `elements`: the code word's upper half, whose bit 15 (bit 31 of the code) marks a
/// misaligned access, bits 8..14 its bytes, bits 0..7 its elements).
fn fault_error(
    variant: Option<&KernelVariant>,
    param: u32,
    elements: u32,
    index: u64,
    len: u64,
) -> Error {
    // Bit 31 of the code (`lower/bounds.rs`'s `record::MISALIGNED`), bytes at bit 24.
    let misaligned = elements & (1 << 15) != 0;
    let (elements, bytes) = if misaligned {
        (elements & 0xFF, (elements >> 8) & 0x7F)
    } else {
        (elements, 0)
    };
    let (kernel, param) = match variant {
        Some(v) => {
            let k = SHARED.wrapping_sub(param) as usize;
            let name = if k < v.shared.len() {
                v.shared[k].to_string()
            } else {
                v.params
                    .get(param as usize)
                    .map(|p| p.0.to_string())
                    .unwrap_or_else(|| format!("parameter {param}"))
            };
            (v.display_name(), name)
        }
        None => (
            "(a kernel not loaded on this device)".to_string(),
            format!("parameter {param}"),
        ),
    };
    Error::from(error::KernelFault {
        kernel,
        param,
        index,
        len,
        elements,
        misaligned,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_hash_is_fnv1a() {
        assert_eq!(entry_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(entry_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn records_name_parameters_and_shared_arrays() {
        let v = KernelVariant {
            kernel: "k",
            entry: "k",
            consts: &[],
            target: "sm_70",
            ptx_version: (7, 0),
            block: [32, 1, 1],
            static_shared_bytes: 16,
            dynamic_shared: true,
            params: &[("x", "&[f32]"), ("y", "&mut [f32]")],
            ptx_params: 5,
            shared: &["tile", "buf"],
            ptx: "",
        };
        let e = fault_error(Some(&v), 1, 4, 384, 4);
        assert_eq!(
            e.to_string(),
            "kernel `k` accessed `y` at element 384 (4 elements) but its length is 4; the access was skipped"
        );
        let e = fault_error(Some(&v), 0xFFFE, 1, 9, 8);
        assert!(
            matches!(&e, Error::KernelFault(f) if f.param == "buf"),
            "{e}"
        );
        let e = fault_error(None, 0, 1, 9, 8);
        assert!(e.to_string().contains("parameter 0"), "{e}");
        // Bit 31 of the code: misaligned (the access's 16 bytes at bit 24, 4 elements).
        let code = (1u32 << 31) | (16 << 24) | (4 << 16);
        let e = fault_error(Some(&v), 0, code >> 16, 3, 100);
        assert!(
            matches!(
                &e,
                Error::KernelFault(f) if matches!(
                    **f,
                    error::KernelFault {
                        misaligned: true,
                        elements: 4,
                        bytes: 16,
                        index: 3,
                        ..
                    }
                )
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "kernel `k` accessed `x` at element 3 in a misaligned 16-byte access (4 elements; its address not a multiple of 16); the access was skipped"
        );
        let e = fault_error(Some(&v), 1, 4, 384, 4);
        assert!(
            matches!(&e, Error::KernelFault(f) if !f.misaligned),
            "{e:?}"
        );
    }
}
