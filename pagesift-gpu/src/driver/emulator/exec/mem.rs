//! Memory as one thread sees it: address resolution across the state spaces, and the checks
//! (bounds, alignment, uninitialized shared reads, shared-memory races).

use super::super::decode::{AtomOp, MemSpace};
use super::super::memory::Fault;
use super::super::num::Ty;
use super::{coords, fmt3, Launch, LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE};

/// Per shared byte: who wrote and read it last, and in which barrier interval (epoch).
#[derive(Clone, Copy, Default)]
pub(super) struct Shadow {
    writer: u32,
    w_epoch: u32,
    reader: u32,
    r_epoch: u32,
}

const MANY_READERS: u32 = u32::MAX;

/// Memory of one thread's view while it runs.
pub(super) struct Mem<'r, 'a> {
    pub(super) l: &'r Launch<'a>,
    pub(super) shared: &'r mut [u8],
    pub(super) shadow: &'r mut [Shadow],
    pub(super) local: &'r mut [u8],
    pub(super) hint: &'r mut usize,
    pub(super) epoch: u32,
    pub(super) block_epoch: u32,
    pub(super) me: u32,
}

pub(super) enum Where {
    Global(usize, u64),
    Shared(usize),
    Local(usize),
    Param(usize),
}

impl Mem<'_, '_> {
    pub(super) fn resolve(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        what: &str,
    ) -> Result<Where, String> {
        let space = match space {
            MemSpace::Generic if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.resolve(MemSpace::Shared, addr - SHARED_WINDOW, len, what)
            }
            MemSpace::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.resolve(MemSpace::Local, addr - LOCAL_WINDOW, len, what)
            }
            MemSpace::Generic => MemSpace::Global,
            s => s,
        };
        let align = len.min(16) as u64;
        match space {
            MemSpace::Global => {
                if addr % align != 0 {
                    return Err(format!("misaligned global access: {what} of {len} bytes at {addr:#x} is not {align}-byte aligned"));
                }
                match self.l.global.find(*self.hint, addr, len as u64) {
                    Ok((i, off)) => {
                        *self.hint = i;
                        Ok(Where::Global(i, off))
                    }
                    Err(Fault::OutOfBounds(near)) => Err(format!(
                        "out-of-bounds global access: {what} of {len} bytes at {addr:#x} is outside every live allocation{}",
                        match near {
                            Some((b, s)) => format!(" (the nearest below is {b:#x}..{:#x}, {s} bytes)", b + s),
                            None => String::new(),
                        }
                    )),
                }
            }
            MemSpace::Shared => {
                if addr % align != 0 {
                    return Err(format!("misaligned shared access: {what} of {len} bytes at shared offset {addr:#x} is not {align}-byte aligned"));
                }
                if addr.saturating_add(len as u64) > self.l.shared_bytes as u64 {
                    return Err(format!(
                        "out-of-bounds shared access: {what} of {len} bytes at shared offset {addr:#x}, beyond the block's {} bytes of shared memory (static {} + dynamic {})",
                        self.l.shared_bytes,
                        self.l.kernel.static_shared,
                        self.l.shared_bytes - self.l.kernel.static_shared.min(self.l.shared_bytes)
                    ));
                }
                Ok(Where::Shared(addr as usize))
            }
            MemSpace::Local => {
                if addr.saturating_add(len as u64) > self.local.len() as u64 {
                    return Err(format!("out-of-bounds local access: {what} of {len} bytes at local offset {addr:#x}, beyond {} bytes", self.local.len()));
                }
                Ok(Where::Local(addr as usize))
            }
            MemSpace::Param | MemSpace::Generic => {
                if addr.saturating_add(len as u64) > self.l.params.len() as u64 {
                    return Err(format!(
                        "out-of-bounds parameter access at offset {addr:#x}"
                    ));
                }
                Ok(Where::Param(addr as usize))
            }
        }
    }

    pub(super) fn shared_read(&mut self, at: usize, len: usize) -> Result<(), String> {
        for i in at..at + len {
            let s = &mut self.shadow[i];
            if s.w_epoch < self.block_epoch {
                return Err(format!("uninitialized shared memory read: byte at shared offset {i:#x} was never written by any thread of the block"));
            }
            if s.w_epoch == self.epoch && s.writer != self.me {
                let other = coords(s.writer as usize - 1, self.l.block);
                return Err(format!(
                    "shared memory data race: read of shared offset {i:#x}, which thread {} wrote with no barrier in between",
                    fmt3(other)
                ));
            }
            if s.r_epoch == self.epoch && s.reader != self.me {
                s.reader = MANY_READERS;
            } else {
                s.reader = self.me;
                s.r_epoch = self.epoch;
            }
        }
        Ok(())
    }

    pub(super) fn shared_write(&mut self, at: usize, len: usize) -> Result<(), String> {
        for i in at..at + len {
            let s = &mut self.shadow[i];
            if s.w_epoch == self.epoch && s.writer != self.me {
                let other = coords(s.writer as usize - 1, self.l.block);
                return Err(format!(
                    "shared memory data race: write of shared offset {i:#x}, which thread {} also wrote with no barrier in between",
                    fmt3(other)
                ));
            }
            if s.r_epoch == self.epoch && s.reader != self.me {
                let who = if s.reader == MANY_READERS {
                    "other threads".to_string()
                } else {
                    format!(
                        "thread {}",
                        fmt3(coords(s.reader as usize - 1, self.l.block))
                    )
                };
                return Err(format!("shared memory data race: write of shared offset {i:#x}, which {who} read with no barrier in between"));
            }
            s.writer = self.me;
            s.w_epoch = self.epoch;
        }
        Ok(())
    }

    pub(super) fn load(&mut self, space: MemSpace, addr: u64, len: u32) -> Result<u64, String> {
        Ok(match self.resolve(space, addr, len, "load")? {
            Where::Global(i, off) => self.l.global.get(i).load(off, len),
            Where::Shared(at) => {
                self.shared_read(at, len as usize)?;
                le(&self.shared[at..at + len as usize])
            }
            Where::Local(at) => le(&self.local[at..at + len as usize]),
            Where::Param(at) => le(&self.l.params[at..at + len as usize]),
        })
    }

    pub(super) fn store(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        v: u64,
    ) -> Result<(), String> {
        match self.resolve(space, addr, len, "store")? {
            Where::Global(i, off) => self.l.global.get(i).store(off, len, v),
            Where::Shared(at) => {
                self.shared_write(at, len as usize)?;
                self.shared[at..at + len as usize]
                    .copy_from_slice(&v.to_le_bytes()[..len as usize]);
            }
            Where::Local(at) => {
                self.local[at..at + len as usize].copy_from_slice(&v.to_le_bytes()[..len as usize])
            }
            Where::Param(_) => return Err("store to the parameter space".into()),
        }
        Ok(())
    }

    pub(super) fn atomic(
        &mut self,
        space: MemSpace,
        addr: u64,
        len: u32,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, String> {
        match self.resolve(space, addr, len, "atomic")? {
            Where::Global(i, off) => Ok(self.l.global.get(i).update(off, len, f)),
            Where::Shared(at) => {
                let end = at + len as usize;
                if let Some(i) = (at..end).find(|&i| self.shadow[i].w_epoch < self.block_epoch) {
                    return Err(format!("uninitialized shared memory read: atomic on shared offset {i:#x}, which no thread of the block wrote"));
                }
                let old = le(&self.shared[at..end]);
                self.shared[at..end].copy_from_slice(&f(old).to_le_bytes()[..len as usize]);
                Ok(old)
            }
            _ => Err("atomic outside global and shared memory".into()),
        }
    }
}

fn le(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

pub(super) fn atom_apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    use super::super::num::{int_val, FMode, FOp2, Rnd};
    match op {
        AtomOp::Add if ty.is_float() => {
            let fmt = ty.fmt().unwrap_or(super::super::num::Fmt::F32);
            super::super::num::fbin(
                FOp2::Add,
                fmt,
                FMode {
                    rnd: Rnd::Rn,
                    ftz: ty == Ty::F32,
                    sat: false,
                },
                old,
                b,
            )
        }
        AtomOp::Add => old.wrapping_add(b),
        AtomOp::Min => (int_val(old, ty).min(int_val(b, ty))) as u64,
        AtomOp::Max => (int_val(old, ty).max(int_val(b, ty))) as u64,
        AtomOp::Inc => {
            let (o, b) = (old & ty.mask(), b & ty.mask());
            if o >= b {
                0
            } else {
                o + 1
            }
        }
        AtomOp::Dec => {
            let (o, b) = (old & ty.mask(), b & ty.mask());
            if o == 0 || o > b {
                b
            } else {
                o - 1
            }
        }
        AtomOp::Cas => {
            if old & ty.mask() == b & ty.mask() {
                c
            } else {
                old
            }
        }
        AtomOp::Exch => b,
        AtomOp::And => old & b,
        AtomOp::Or => old | b,
        AtomOp::Xor => old ^ b,
    }
}
