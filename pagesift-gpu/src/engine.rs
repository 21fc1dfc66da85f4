//! The adapter for CPU inference engines that hand some of their matrix products to the GPU:
//! weight matrices uploaded once, as the engine holds them (GGUF `Q4_0`, `Q8_0`, `Q4_K`, `BF16`,
//! `F16` or `F32` rows), then products `y[t, n_out] = x[t, n_in] · Wᵀ` of f32 activations on the
//! host against them, several matrices sharing one upload of the activations.
//!
//! ```no_run
//! use pagesift_gpu::engine::{Adapter, Job};
//! use pagesift_gpu::quant::{quantize, QuantMatrix, WeightFormat};
//!
//! # fn main() -> pagesift_gpu::Result<()> {
//! let adapter = Adapter::new(0)?; // Err without a driver or GPU: stay on the CPU
//! let (n_out, n_in) = (256, 512);
//! let w: Vec<f32> = (0..n_out * n_in).map(|i| ((i % 17) as f32 - 8.0) / 64.0).collect();
//! let bytes = quantize(WeightFormat::Q4_0, &w, n_out, n_in)?;
//! let matrix = QuantMatrix::new(WeightFormat::Q4_0, &bytes, n_out, n_in)?;
//! // `None`: the device lacks the memory (the reserve kept free); the CPU keeps this matrix.
//! let Some(dev) = adapter.upload(&matrix)? else { return Ok(()) };
//! let tokens = 2;
//! let x = vec![0.5f32; tokens * n_in];
//! let mut y = vec![0f32; tokens * n_out];
//! if adapter.wants(n_out, n_in, tokens) {
//!     adapter.matmul(&x, tokens, n_in, &mut [Job::new(&dev, &mut y)])?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Every failure is an [`Error`], after which the engine can compute the product itself: no
//! call leaves a partial result it would have to know about (a failed call's outputs are
//! unspecified and must be recomputed).

use crate::error::{self, Error, Result};
use crate::quant::{QuantMatrix, WeightFormat};
use crate::{BLayout, DeviceBuffer, Dtype, Gemm, Gpu, Stream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Device memory an [`Adapter`] keeps free of weights by default (for activations, staging
/// and the kernels' own needs), unless the device already has a reserve
/// ([`Gpu::set_memory_reserve`]).
pub const DEFAULT_RESERVE: usize = 512 << 20;

/// When [`Adapter::wants`] offloads a product.
///
/// A call costs a fixed time (two copies and a launch, tens of microseconds through PCIe)
/// and then reads each weight byte once at the device's bandwidth, which is an order of
/// magnitude above a CPU's. The GPU therefore wins on large matrices and loses on small ones;
/// where the crossover lies depends on the host, so the thresholds are settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offload {
    /// The smallest matrix, in weight bytes, worth a call.
    pub min_weight_bytes: usize,
    /// The most tokens per call: above it the CPU's own prefill path is assumed faster (the
    /// decode kernel reads the weights once per 16 tokens).
    pub max_tokens: usize,
}

impl Default for Offload {
    /// 1 MiB of weights (a call's fixed cost, about 30 µs, reads 1.5 MB at 50 GB/s of host
    /// bandwidth) and up to 64 tokens. A model of the crossover, not a measurement of one:
    /// set both from the engine's own timings where they matter.
    fn default() -> Offload {
        Offload {
            min_weight_bytes: 1 << 20,
            max_tokens: 64,
        }
    }
}

/// A weight matrix on the device, from [`Adapter::upload`].
pub struct DeviceWeight {
    format: WeightFormat,
    n_out: usize,
    n_in: usize,
    storage: Storage,
}

enum Storage {
    /// Rows of the block formats and 16-bit floats, as the engine holds them.
    Bytes(DeviceBuffer<u8>),
    /// f32 rows (through the dense GEMM).
    F32(DeviceBuffer<f32>),
}

impl DeviceWeight {
    /// The storage format.
    pub fn format(&self) -> WeightFormat {
        self.format
    }
    /// Rows (outputs).
    pub fn n_out(&self) -> usize {
        self.n_out
    }
    /// Columns (inputs).
    pub fn n_in(&self) -> usize {
        self.n_in
    }
    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        match &self.storage {
            Storage::Bytes(b) => b.len(),
            Storage::F32(b) => b.len() * 4,
        }
    }
    fn gpu(&self) -> &Gpu {
        match &self.storage {
            Storage::Bytes(b) => b.gpu(),
            Storage::F32(b) => b.gpu(),
        }
    }
}

/// One product of a [`Adapter::matmul`] call: a weight matrix and the host rows its outputs
/// go to (`tokens · n_out` elements, row after row).
pub struct Job<'a> {
    pub weight: &'a DeviceWeight,
    pub y: &'a mut [f32],
}

impl<'a> Job<'a> {
    pub fn new(weight: &'a DeviceWeight, y: &'a mut [f32]) -> Job<'a> {
        Job { weight, y }
    }
}

/// What an adapter's calls have moved and how long they took (host wall time of each phase,
/// summed over the successful [`Adapter::matmul`] calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub calls: u64,
    /// Products (jobs) computed.
    pub jobs: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub copy_in_ns: u64,
    /// From the first launch until the device finished the last.
    pub kernel_ns: u64,
    pub copy_out_ns: u64,
    /// Weight bytes uploaded by [`Adapter::upload`] (those dropped since included).
    pub weight_bytes: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        write!(
            f,
            "{} calls ({} products): copy-in {:.3} ms ({} B), kernels {:.3} ms, copy-out {:.3} ms ({} B); {} B of weights on the device",
            self.calls,
            self.jobs,
            ms(self.copy_in_ns),
            self.bytes_in,
            ms(self.kernel_ns),
            ms(self.copy_out_ns),
            self.bytes_out,
            self.weight_bytes
        )
    }
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    jobs: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    copy_in_ns: AtomicU64,
    kernel_ns: AtomicU64,
    copy_out_ns: AtomicU64,
    weight_bytes: AtomicU64,
}

/// Device buffers of the activations and outputs, grown to the largest call.
struct Staging {
    x: Option<DeviceBuffer<f32>>,
    y: Option<DeviceBuffer<f32>>,
}

/// A device, its uploaded weights' reserve, reusable staging buffers and statistics: the
/// GPU backend of a CPU inference engine. Calls from several threads are serialized.
pub struct Adapter {
    gpu: Gpu,
    stream: Stream,
    offload: Offload,
    prefill_half: Option<Dtype>,
    staging: Mutex<Staging>,
    counters: Counters,
}

const OP: &str = "engine::Adapter";

fn invalid(message: String) -> Error {
    Error::from(error::InvalidArgument { op: OP, message })
}

impl Adapter {
    /// The adapter of device `ordinal`.
    ///
    /// Errors: [`Error::DriverNotFound`] without a driver, the driver's errors without a
    /// device.
    pub fn new(ordinal: usize) -> Result<Adapter> {
        Adapter::with_gpu(Gpu::new(ordinal)?)
    }

    /// The adapter of an open device. Sets the device's memory reserve to
    /// [`DEFAULT_RESERVE`] where none is set.
    pub fn with_gpu(gpu: Gpu) -> Result<Adapter> {
        if gpu.memory_reserve() == 0 {
            gpu.set_memory_reserve(DEFAULT_RESERVE);
        }
        Ok(Adapter {
            stream: gpu.default_stream(),
            gpu,
            offload: Offload::default(),
            prefill_half: None,
            staging: Mutex::new(Staging { x: None, y: None }),
            counters: Counters::default(),
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The thresholds of [`Adapter::wants`].
    pub fn offload(&self) -> Offload {
        self.offload
    }

    /// Replaces the thresholds of [`Adapter::wants`].
    pub fn set_offload(&mut self, offload: Offload) {
        self.offload = offload;
    }

    /// The 16-bit type in which [`Adapter::matmul`] multiplies on tensor cores from
    /// [`crate::ops::quant::PREFILL_MIN_TOKENS`] tokens on (`None`, the default: every
    /// product exact).
    pub fn prefill_half(&self) -> Option<Dtype> {
        self.prefill_half
    }

    /// Sets [`Adapter::prefill_half`]: `Some(Dtype::F16)` or `Some(Dtype::Bf16)` has the
    /// products of prefill-sized calls round the activations and the weights to that type on
    /// tensor cores ([`crate::ops::quant::qgemm_tc`], which states the accuracy), `None`
    /// keeps them exact. F32 weights stay exact either way.
    ///
    /// Errors: [`Error::InvalidArgument`] for another type.
    pub fn set_prefill_half(&mut self, half: Option<Dtype>) -> Result<()> {
        if let Some(h) = half {
            if !crate::ops::quant::TC_PREFILL_TYPES.contains(&h) {
                return Err(invalid(format!(
                    "the tensor-core prefill rounds its inputs to f16 or bf16, not {}",
                    h.name()
                )));
            }
        }
        self.prefill_half = half;
        Ok(())
    }

    /// Whether a product of `tokens` rows against an `n_out × n_in` matrix is worth a call
    /// (see [`Offload`]): 1 to `max_tokens` tokens, `n_in` a multiple of 32 (every block
    /// format's rows), and at least `min_weight_bytes` of weights at the densest format
    /// (4.5 bits per weight).
    pub fn wants(&self, n_out: usize, n_in: usize, tokens: usize) -> bool {
        let bytes = (n_out as u128 * n_in as u128 * 9 / 16) as usize;
        (1..=self.offload.max_tokens).contains(&tokens)
            && n_in > 0
            && n_in % 32 == 0
            && bytes >= self.offload.min_weight_bytes
    }

    /// Copies a weight matrix to the device, to stay there until the [`DeviceWeight`] drops.
    /// `Ok(None)` where it would leave less free memory than the device's reserve: the engine
    /// keeps that matrix on the CPU.
    ///
    /// Errors: the driver's (other than a lack of memory).
    pub fn upload(&self, w: &QuantMatrix<'_>) -> Result<Option<DeviceWeight>> {
        let storage = match w.format() {
            WeightFormat::F32 => {
                let v: Vec<f32> = w
                    .bytes()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                DeviceBuffer::from_host_long_lived(&self.gpu, &v).map(Storage::F32)
            }
            _ => DeviceBuffer::from_host_long_lived(&self.gpu, w.bytes()).map(Storage::Bytes),
        };
        let storage = match storage {
            Ok(s) => s,
            Err(Error::OutOfMemory { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let dw = DeviceWeight {
            format: w.format(),
            n_out: w.rows(),
            n_in: w.cols(),
            storage,
        };
        self.counters
            .weight_bytes
            .fetch_add(dw.bytes() as u64, Ordering::Relaxed);
        Ok(Some(dw))
    }

    /// `job.y[t, n_out] = x[t, n_in] · job.weightᵀ` for every job, from one upload of the
    /// activations `x` (the first `tokens · n_in` elements, row after row). The products are
    /// exact and summed in f32 (the decode kernel's, or for F32 weights the exact GEMM), or
    /// from the prefill's token counts on in [`Adapter::prefill_half`] where that is set.
    ///
    /// Errors: [`Error::InvalidArgument`] for a weight of another `n_in` or device, or
    /// `tokens` 0; [`Error::LengthMismatch`] for `x` or an output too short; the driver's.
    pub fn matmul(
        &self,
        x: &[f32],
        tokens: usize,
        n_in: usize,
        jobs: &mut [Job<'_>],
    ) -> Result<()> {
        if tokens == 0 {
            return Err(invalid("a matmul of 0 tokens".into()));
        }
        let x_len = tokens
            .checked_mul(n_in)
            .ok_or_else(|| invalid(format!("{tokens} tokens of {n_in} overflow usize")))?;
        if x.len() < x_len {
            return Err(Error::from(error::LengthMismatch {
                what: format!("{OP}::matmul: activations of {tokens} tokens x {n_in}"),
                expected: x_len,
                actual: x.len(),
            }));
        }
        let mut y_len = 0usize;
        for (i, j) in jobs.iter().enumerate() {
            let w = j.weight;
            if w.n_in != n_in {
                return Err(invalid(format!(
                    "job {i}: a weight of {} inputs for activations of {n_in}",
                    w.n_in
                )));
            }
            if !w.gpu().same_device(&self.gpu) {
                return Err(invalid(format!(
                    "job {i}: the weight lies on another device"
                )));
            }
            let need = tokens * w.n_out;
            if j.y.len() < need {
                return Err(Error::from(error::LengthMismatch {
                    what: format!(
                        "{OP}::matmul: job {i}'s output of {tokens} tokens x {}",
                        w.n_out
                    ),
                    expected: need,
                    actual: j.y.len(),
                }));
            }
            y_len = y_len
                .checked_add(need)
                .ok_or_else(|| invalid("outputs overflow usize".into()))?;
        }
        if jobs.is_empty() {
            return Ok(());
        }
        let mut guard = self
            .staging
            .lock()
            .map_err(|_| invalid("the staging buffers were poisoned by a panic".into()))?;
        let st = &mut *guard;
        let t0 = Instant::now();
        let xd = grow(&self.gpu, &mut st.x, x_len)?;
        xd.slice_mut(..x_len)?.copy_from_host(&x[..x_len])?;
        let t1 = Instant::now();
        let yd = grow(&self.gpu, &mut st.y, y_len)?;
        let xs = xd.slice(..x_len)?;
        let mut off = 0;
        for j in jobs.iter() {
            let w = j.weight;
            let n = tokens * w.n_out;
            let mut ys = yd.slice_mut(off..off + n)?;
            let g = Gemm::new(tokens, w.n_out, n_in, BLayout::NK);
            match &w.storage {
                Storage::Bytes(b) => match self.prefill_half {
                    Some(half) => crate::ops::quant::qgemm_tc(
                        &self.stream,
                        &g,
                        w.format,
                        half,
                        b,
                        &xs,
                        None,
                        None,
                        &mut ys,
                    )?,
                    None => {
                        crate::ops::qgemm(&self.stream, &g, w.format, b, &xs, None, None, &mut ys)?
                    }
                },
                Storage::F32(b) => {
                    crate::ops::gemm::<f32, f32>(&self.stream, &g, &xs, b, None, None, &mut ys)?
                }
            }
            off += n;
        }
        self.stream.synchronize()?;
        let t2 = Instant::now();
        let mut off = 0;
        for j in jobs.iter_mut() {
            let n = tokens * j.weight.n_out;
            yd.slice(off..off + n)?.copy_to_host(&mut j.y[..n])?;
            off += n;
        }
        let t3 = Instant::now();
        let c = &self.counters;
        let ns = |a: Instant, b: Instant| (b - a).as_nanos() as u64;
        c.calls.fetch_add(1, Ordering::Relaxed);
        c.jobs.fetch_add(jobs.len() as u64, Ordering::Relaxed);
        c.bytes_in.fetch_add(x_len as u64 * 4, Ordering::Relaxed);
        c.bytes_out.fetch_add(y_len as u64 * 4, Ordering::Relaxed);
        c.copy_in_ns.fetch_add(ns(t0, t1), Ordering::Relaxed);
        c.kernel_ns.fetch_add(ns(t1, t2), Ordering::Relaxed);
        c.copy_out_ns.fetch_add(ns(t2, t3), Ordering::Relaxed);
        Ok(())
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            calls: l(&c.calls),
            jobs: l(&c.jobs),
            bytes_in: l(&c.bytes_in),
            bytes_out: l(&c.bytes_out),
            copy_in_ns: l(&c.copy_in_ns),
            kernel_ns: l(&c.kernel_ns),
            copy_out_ns: l(&c.copy_out_ns),
            weight_bytes: l(&c.weight_bytes),
        }
    }
}

/// The staging buffer `slot`, reallocated where it holds fewer than `len` elements.
fn grow<'b>(
    gpu: &Gpu,
    slot: &'b mut Option<DeviceBuffer<f32>>,
    len: usize,
) -> Result<&'b mut DeviceBuffer<f32>> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = None;
        *slot = Some(DeviceBuffer::alloc(gpu, len.max(1))?);
    }
    slot.as_mut()
        .ok_or_else(|| invalid("a staging buffer could not be kept".into()))
}
