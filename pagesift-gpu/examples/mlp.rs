//! A transformer MLP block with q4_0 weights through the engine adapter, as a CPU inference
//! engine would run it: `down(silu(gate(x)) · up(x))`, the gate and up projections in one call
//! sharing the upload of `x`, the elementwise part on the host, then the down projection.
//! Each output is checked against the f64 reference on the dequantized weights, and the time
//! per token is printed.
//!
//! ```text
//! cargo run --release -p pagesift-gpu --example mlp                       # an NVIDIA GPU
//! PAGESIFT_GPU_DEVICE=emulated cargo run --release -p pagesift-gpu \
//!     --features emulator --example mlp                                   # no GPU
//! ```
//!
//! Without a GPU (and without the emulated device) it says why and exits: the engine would
//! keep the block on the CPU.

use pagesift_gpu::engine::{Adapter, Job};
use pagesift_gpu::quant::{dequantize, quantize, QuantMatrix, WeightFormat};
use pagesift_gpu::BackendKind;
use std::time::Instant;

/// A matrix of `rows × cols` values in `-0.5..0.5` from a simple generator (no dependency).
fn random(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..rows * cols)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

/// `x[t, n_in] · w[n_out, n_in]ᵀ` in f64.
fn reference(x: &[f64], w: &[f32], tokens: usize, n_out: usize, n_in: usize) -> Vec<f64> {
    let mut y = vec![0.0; tokens * n_out];
    for t in 0..tokens {
        for j in 0..n_out {
            let row = &w[j * n_in..(j + 1) * n_in];
            y[t * n_out + j] = x[t * n_in..(t + 1) * n_in]
                .iter()
                .zip(row)
                .map(|(a, b)| a * f64::from(*b))
                .sum();
        }
    }
    y
}

fn main() -> pagesift_gpu::Result<()> {
    let adapter = match Adapter::new(0) {
        Ok(a) => a,
        Err(e) => {
            println!("no GPU ({e}): an engine keeps this block on the CPU.");
            println!("Without a GPU, run it on the emulated device: PAGESIFT_GPU_DEVICE=emulated and --features emulator.");
            return Ok(());
        }
    };
    let emulated = adapter.gpu().backend_kind() == BackendKind::Emulated;
    // A 7B-class block on a GPU; a small one on the emulated device, which runs the PTX on
    // the CPU.
    let (d, ff) = if emulated { (256, 512) } else { (4096, 11008) };
    println!(
        "MLP block d_model = {d}, d_ff = {ff}, q4_0 weights, on {}",
        adapter.gpu().name()
    );
    let fmt = WeightFormat::Q4_0;
    let upload = |w: &[f32], rows: usize, cols: usize| -> pagesift_gpu::Result<_> {
        let bytes = quantize(fmt, w, rows, cols)?;
        let deq = dequantize(fmt, &bytes, rows, cols)?;
        let dev = adapter.upload(&QuantMatrix::new(fmt, &bytes, rows, cols)?)?;
        Ok((dev, deq))
    };
    let (gate, gate_w) = upload(&random(ff, d, 1), ff, d)?;
    let (up, up_w) = upload(&random(ff, d, 2), ff, d)?;
    let (down, down_w) = upload(&random(d, ff, 3), d, ff)?;
    let (Some(gate), Some(up), Some(down)) = (gate, up, down) else {
        println!("the weights do not fit the device's free memory: the engine keeps them");
        return Ok(());
    };
    for tokens in [1usize, 4, 16] {
        let x = random(tokens, d, 10 + tokens as u64);
        let (mut g, mut u) = (vec![0f32; tokens * ff], vec![0f32; tokens * ff]);
        let mut y = vec![0f32; tokens * d];
        let reps = if emulated { 1 } else { 20 };
        let mut best = f64::INFINITY;
        for _ in 0..reps {
            let t0 = Instant::now();
            adapter.matmul(
                &x,
                tokens,
                d,
                &mut [Job::new(&gate, &mut g), Job::new(&up, &mut u)],
            )?;
            let h: Vec<f32> = g
                .iter()
                .zip(&u)
                .map(|(a, b)| (silu(f64::from(*a)) * f64::from(*b)) as f32)
                .collect();
            adapter.matmul(&h, tokens, ff, &mut [Job::new(&down, &mut y)])?;
            best = best.min(t0.elapsed().as_secs_f64());
        }
        // The reference of the whole block in f64 on the dequantized weights.
        let xr: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let gr = reference(&xr, &gate_w, tokens, ff, d);
        let ur = reference(&xr, &up_w, tokens, ff, d);
        let hr: Vec<f64> = gr.iter().zip(&ur).map(|(a, b)| silu(*a) * b).collect();
        let yr = reference(&hr, &down_w, tokens, d, ff);
        let scale = yr.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
        let worst = y
            .iter()
            .zip(&yr)
            .map(|(a, b)| (f64::from(*a) - b).abs() / scale)
            .fold(0f64, f64::max);
        let ok = worst < 1e-5;
        println!(
            "{tokens:>3} tokens: {:>9.1} µs per call, {:>8.1} µs per token, max error {worst:.2e} of the largest output: {}",
            best * 1e6,
            best * 1e6 / tokens as f64,
            if ok { "ok" } else { "WRONG" }
        );
        if !ok {
            std::process::exit(1);
        }
    }
    println!("{}", adapter.stats());
    Ok(())
}
