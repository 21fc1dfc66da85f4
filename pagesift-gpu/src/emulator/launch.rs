//! Launches on the emulated device: the checks `cuLaunchKernel` makes before it queues the
//! launch, and the run of a queued launch over the host threads.

use super::queue::{QueuedLaunch, Work};
use super::{
    exec, invalid_handle, Emulator, KernelLaunch, MAX_BLOCK_DIM, MAX_GRID_DIM,
    MAX_THREADS_PER_BLOCK, TOTAL_EXECUTED,
};
use crate::error::{self, Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

impl Emulator {
    /// Checks a launch as `cuLaunchKernel` does (a bad configuration is an error at once) and
    /// queues it on its stream.
    pub(super) fn queue_launch(&self, req: &KernelLaunch<'_>) -> Result<()> {
        self.check_stream("cuLaunchKernel", req.stream)?;
        let (kernel, max_dynamic) = {
            let h = self.handles("cuLaunchKernel")?;
            let f = h
                .functions
                .get(&req.function.0)
                .ok_or_else(|| invalid_handle("cuLaunchKernel", req.function.0))?;
            (f.kernel.clone(), f.max_dynamic_shared)
        };
        let launch_err = |message: String| {
            Error::from(error::Launch {
                kernel: kernel.name.clone(),
                message,
            })
        };
        let [bx, by, bz] = req.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        if threads == 0 || threads > MAX_THREADS_PER_BLOCK as u64 || bz > MAX_BLOCK_DIM[2] {
            return Err(launch_err(format!(
                "block {:?} is outside the device limits (1..=1024 threads, z <= 64)",
                req.block
            )));
        }
        if req.grid.contains(&0) || req.grid.iter().zip(MAX_GRID_DIM).any(|(&g, max)| g > max) {
            return Err(launch_err(format!(
                "grid {:?} is outside the device limits",
                req.grid
            )));
        }
        // The total-work cap: a grid the device accepts can still be ~2^73 threads, which the
        // emulator would run for days.
        let total = req.grid.iter().map(|&g| g as u128).product::<u128>() * threads as u128;
        let cap = self.config.max_launch_threads;
        if total > cap as u128 {
            return Err(launch_err(format!(
                "grid {:?} x block {:?} is {total} threads, more than the emulated device's cap of {cap} per launch (EmulatorConfig::max_launch_threads, PAGESIFT_EMU_MAX_LAUNCH_THREADS)",
                req.grid, req.block
            )));
        }
        if let Some(r) = kernel.reqntid {
            if r != req.block {
                return Err(launch_err(format!(
                    "the kernel requires block {r:?} (.reqntid), launched with {:?}",
                    req.block
                )));
            }
        }
        if let Some(m) = kernel.maxntid {
            if threads > (m[0] * m[1] * m[2]) as u64 {
                return Err(launch_err(format!(
                    "block {:?} exceeds the kernel's .maxntid {m:?}",
                    req.block
                )));
            }
        }
        if req.shared_mem_bytes > max_dynamic {
            return Err(launch_err(format!(
                "{} bytes of dynamic shared memory exceed the function's limit of {max_dynamic} bytes (raise it with the max dynamic shared memory attribute)",
                req.shared_mem_bytes
            )));
        }
        let optin = self.config.max_shared_per_block_optin as u64;
        if kernel.static_shared as u64 + req.shared_mem_bytes as u64 > optin {
            return Err(launch_err(format!(
                "{} bytes of static and {} bytes of dynamic shared memory exceed the device's {optin} bytes per block",
                kernel.static_shared, req.shared_mem_bytes
            )));
        }
        if req.args.len() != kernel.params.len() {
            return Err(launch_err(format!(
                "{} arguments for {} kernel parameters",
                req.args.len(),
                kernel.params.len()
            )));
        }
        let mut params = vec![0u8; kernel.param_bytes as usize];
        for (i, (&b, slot)) in req.args.iter().zip(&kernel.params).enumerate() {
            if b.len() != slot.size as usize {
                return Err(launch_err(format!(
                    "argument {i} has {} bytes, the parameter has {}",
                    b.len(),
                    slot.size
                )));
            }
            params[slot.offset as usize..slot.offset as usize + b.len()].copy_from_slice(b);
        }
        let launch = QueuedLaunch {
            shared_bytes: kernel.static_shared.saturating_add(req.shared_mem_bytes),
            name: kernel.name.clone(),
            kernel,
            grid: req.grid,
            block: req.block,
            params,
            first_block: 0,
            run_to: u64::MAX,
        };
        self.queues("cuLaunchKernel")?.enqueue(
            "cuLaunchKernel",
            req.stream,
            Work::Launch(Box::new(launch)),
        )
    }

    /// Runs blocks `first_block..run_to` of a queued launch (in linear block order), spread
    /// over the host threads; the first failed check (lowest block) is the error.
    pub(super) fn run(&self, req: &QueuedLaunch) -> Result<()> {
        // The allocations live when the launch runs, not when it was queued: memory freed in
        // stream order before it is out of bounds.
        let global = self.read_mem("cuLaunchKernel")?.snapshot();
        let kernel = &*req.kernel;
        let launch = exec::Launch {
            kernel,
            global: &global,
            params: &req.params,
            grid: req.grid,
            block: req.block,
            shared_bytes: req.shared_bytes,
            sm_count: self.config.sm_count,
            max_steps: self.config.max_thread_instructions,
        };
        let [gx, gy, _] = req.grid;
        let nblocks = req.blocks().min(req.run_to);
        let first = req.first_block.min(nblocks);
        let workers = (self.config.threads.max(1) as u64).min(nblocks - first) as usize;
        let next = AtomicU64::new(first);
        let stop = AtomicBool::new(false);
        let first_error: Mutex<Option<(u64, String)>> = Mutex::new(None);
        let executed = AtomicU64::new(0);
        let work = || {
            let mut runner = exec::Runner::new();
            while !stop.load(Ordering::Relaxed) {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= nblocks {
                    break;
                }
                let block = [
                    (b % gx as u64) as u32,
                    ((b / gx as u64) % gy as u64) as u32,
                    (b / (gx as u64 * gy as u64)) as u32,
                ];
                if let Err(msg) = runner.run_block(&launch, block) {
                    stop.store(true, Ordering::Relaxed);
                    if let Ok(mut slot) = first_error.lock() {
                        if slot.as_ref().is_none_or(|(fb, _)| b < *fb) {
                            *slot = Some((b, msg));
                        }
                    }
                }
            }
            executed.fetch_add(runner.steps, Ordering::Relaxed);
        };
        if workers <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(work);
                }
            });
        }
        let steps = executed.load(Ordering::Relaxed);
        self.executed.fetch_add(steps, Ordering::Relaxed);
        TOTAL_EXECUTED.fetch_add(steps, Ordering::Relaxed);
        match first_error.into_inner().ok().flatten() {
            Some((_, message)) => Err(Error::from(error::Emulator {
                kernel: req.name.to_string(),
                message,
            })),
            None => Ok(()),
        }
    }
}
