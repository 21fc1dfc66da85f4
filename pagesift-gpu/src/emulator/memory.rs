//! Device memory of the emulated device: allocations in host memory behind device-style
//! addresses, with guard gaps so that out-of-bounds accesses land outside every allocation.
//!
//! Each allocation is a slice of `AtomicU64` words: kernels running on several host threads read
//! and write it concurrently without `unsafe`, plain accesses are relaxed loads and stores, and
//! PTX atomics are real atomic read-modify-writes of the containing word.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the first allocation starts.
pub(super) const GLOBAL_BASE: u64 = 0x7000_0000_0000;
/// The unmapped gap left after every allocation.
const GUARD: u64 = 64 * 1024;
/// Allocation alignment (as `cuMemAlloc`).
const ALIGN: u64 = 256;

/// One device allocation.
pub(super) struct Allocation {
    pub base: u64,
    pub size: u64,
    words: Box<[AtomicU64]>,
}

/// `n` zeroed words, or `None` when the host cannot provide them. Zeroed allocation is lazy
/// (the host maps zero pages on first touch), so a large device allocation costs nothing until
/// used, and a failure is an error here instead of an abort.
fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    if n == 0 {
        return Some(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<AtomicU64>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (n > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut AtomicU64;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a live allocation of the global allocator with the layout of
    // `[AtomicU64; n]`, and all-zero bytes are a valid `AtomicU64` (it has the bit validity of
    // `u64`), so the box owns `n` initialized words and frees them with that same layout.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)) })
}

/// The host's physical memory in bytes (Linux `/proc/meminfo`), read once; `u64::MAX` where
/// unknown. A device allocation larger than this could never be touched in full.
fn host_memory() -> u64 {
    static HOST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(u64::MAX)
    })
}

impl Allocation {
    fn new(base: u64, size: u64) -> Option<Allocation> {
        let words = zeroed_words(usize::try_from(size.div_ceil(8)).ok()?)?;
        Some(Allocation { base, size, words })
    }

    /// Reads `size` (1, 2, 4 or 8) bytes at byte offset `off`, naturally aligned.
    #[inline]
    pub fn load(&self, off: u64, size: u32) -> u64 {
        let w = self.words[(off / 8) as usize].load(Ordering::Relaxed);
        if size == 8 {
            w
        } else {
            (w >> ((off % 8) * 8)) & super::num::mask(size * 8)
        }
    }

    /// Writes `size` (1, 2, 4 or 8) bytes at byte offset `off`, naturally aligned.
    #[inline]
    pub fn store(&self, off: u64, size: u32, v: u64) {
        let word = &self.words[(off / 8) as usize];
        if size == 8 {
            word.store(v, Ordering::Relaxed);
        } else {
            self.update(off, size, |_| v);
        }
    }

    /// Atomically replaces the `size` bytes at `off` with `f(old)`; returns the old value.
    #[inline]
    pub fn update(&self, off: u64, size: u32, f: impl Fn(u64) -> u64) -> u64 {
        let word = &self.words[(off / 8) as usize];
        let shift = (off % 8) * 8;
        let m = super::num::mask(size * 8);
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            let old = (cur >> shift) & m;
            let new = (cur & !(m << shift)) | ((f(old) & m) << shift);
            match word.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return old,
                Err(now) => cur = now,
            }
        }
    }

    fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        for (i, b) in dst.iter_mut().enumerate() {
            *b = self.load(off + i as u64, 1) as u8;
        }
    }

    fn write_bytes(&self, off: u64, src: &[u8]) {
        let mut i = 0usize;
        while i < src.len() {
            let o = off + i as u64;
            if o % 8 == 0 && src.len() - i >= 8 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&src[i..i + 8]);
                self.store(o, 8, u64::from_le_bytes(w));
                i += 8;
            } else {
                self.store(o, 1, src[i] as u64);
                i += 1;
            }
        }
    }
}

/// Why an address range is not accessible.
pub(super) enum Fault {
    /// No live allocation holds the range; the nearest allocation below, if any.
    OutOfBounds(Option<(u64, u64)>),
}

/// The allocations of the device.
pub(super) struct Memory {
    allocs: BTreeMap<u64, Arc<Allocation>>,
    next: u64,
    used: u64,
    pub capacity: u64,
}

impl Memory {
    pub fn new(capacity: u64) -> Memory {
        Memory {
            allocs: BTreeMap::new(),
            next: GLOBAL_BASE,
            used: 0,
            capacity,
        }
    }

    /// Allocates `bytes`; `None` past capacity, past the host's memory, or when the host
    /// allocation fails (a capacity configured above host RAM is not an abort). Addresses are
    /// never reused.
    pub fn alloc(&mut self, bytes: u64) -> Option<u64> {
        let rounded = bytes.div_ceil(ALIGN).checked_mul(ALIGN)?;
        if self.used.checked_add(rounded)? > self.capacity || rounded > host_memory() {
            return None;
        }
        let base = self.next;
        let next = base
            .checked_add(rounded)?
            .checked_add(GUARD)?
            .div_ceil(ALIGN)
            * ALIGN;
        let a = Allocation::new(base, bytes)?;
        self.next = next;
        self.used += rounded;
        self.allocs.insert(base, Arc::new(a));
        Some(base)
    }

    /// Frees the allocation starting at `ptr`; false if there is none.
    pub fn free(&mut self, ptr: u64) -> bool {
        match self.allocs.remove(&ptr) {
            Some(a) => {
                self.used -= a.size.div_ceil(ALIGN) * ALIGN;
                true
            }
            None => false,
        }
    }

    /// Whether `ptr` is the start of a live allocation.
    pub fn is_allocation(&self, ptr: u64) -> bool {
        self.allocs.contains_key(&ptr)
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    /// The allocation holding `[addr, addr+len)` and the offset of `addr` in it.
    pub fn find(&self, addr: u64, len: u64) -> Result<(Arc<Allocation>, u64), Fault> {
        match self.allocs.range(..=addr).next_back() {
            Some((_, a))
                if addr
                    .checked_add(len)
                    .is_some_and(|end| end <= a.base + a.size) =>
            {
                Ok((a.clone(), addr - a.base))
            }
            Some((_, a)) => Err(Fault::OutOfBounds(Some((a.base, a.size)))),
            None => Err(Fault::OutOfBounds(None)),
        }
    }

    /// Whether `[addr, addr+len)` lies inside one live allocation.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        len == 0 || self.find(addr, len).is_ok()
    }

    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result<(), Fault> {
        if dst.is_empty() {
            return Ok(());
        }
        let (a, off) = self.find(addr, dst.len() as u64)?;
        a.read_bytes(off, dst);
        Ok(())
    }

    pub fn write(&self, addr: u64, src: &[u8]) -> Result<(), Fault> {
        if src.is_empty() {
            return Ok(());
        }
        let (a, off) = self.find(addr, src.len() as u64)?;
        a.write_bytes(off, src);
        Ok(())
    }

    /// The live allocations, sorted by address, for a launch.
    pub fn snapshot(&self) -> GlobalView {
        GlobalView {
            allocs: self.allocs.values().cloned().collect(),
        }
    }
}

/// The allocations a launch sees, sorted by base address.
pub(super) struct GlobalView {
    allocs: Vec<Arc<Allocation>>,
}

impl GlobalView {
    /// The index of the allocation holding `[addr, addr+len)` and the offset in it.
    #[inline]
    pub fn find(&self, hint: usize, addr: u64, len: u64) -> Result<(usize, u64), Fault> {
        let fits = |a: &Allocation| {
            addr >= a.base
                && addr.wrapping_add(len) <= a.base + a.size
                && addr.checked_add(len).is_some()
        };
        if let Some(a) = self.allocs.get(hint) {
            if fits(a) {
                return Ok((hint, addr - a.base));
            }
        }
        let i = self.allocs.partition_point(|a| a.base <= addr);
        if i == 0 {
            return Err(Fault::OutOfBounds(None));
        }
        let a = &self.allocs[i - 1];
        if fits(a) {
            Ok((i - 1, addr - a.base))
        } else {
            Err(Fault::OutOfBounds(Some((a.base, a.size))))
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> &Allocation {
        &self.allocs[i]
    }
}
