//! Properties of the CPU reference of the activation family (no device needed).

use half::{bf16, f16};
use pagesift_gpu::cpu::act::{
    act_f32, act_f64, activation, activation_inplace, erf_f64, erfc_f64, ulp_f32,
};
use pagesift_gpu::{Act, Error};
use rand::{Rng, SeedableRng};

fn samples(n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x05ee_dac7);
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

#[test]
fn piecewise_linear_activations_are_exact() {
    for x in samples(10_000, -10.0, 10.0) {
        assert_eq!(act_f32(Act::Identity, 0.0, x), x);
        assert_eq!(act_f32(Act::Relu, 0.0, x), if x > 0.0 { x } else { 0.0 });
        assert_eq!(act_f32(Act::Relu6, 0.0, x), x.clamp(0.0, 6.0));
        let leaky = act_f32(Act::LeakyRelu, 0.1, x);
        assert_eq!(
            leaky,
            if x >= 0.0 {
                x
            } else {
                (f64::from(x) * f64::from(0.1f32)) as f32
            }
        );
    }
    assert_eq!(act_f32(Act::Relu6, 0.0, 6.5), 6.0);
    assert_eq!(
        act_f32(Act::Relu, 0.0, f32::NAN),
        0.0,
        "relu(NaN) follows PTX max.f32"
    );
}

#[test]
fn gelu_properties() {
    assert_eq!(act_f64(Act::Gelu, 0.0, 0.0), 0.0);
    assert_eq!(act_f64(Act::GeluTanh, 0.0, 0.0), 0.0);
    for x in samples(10_000, -8.0, 8.0) {
        let x = f64::from(x);
        // Phi(x) + Phi(-x) = 1, so gelu(x) - gelu(-x) = x.
        let d = act_f64(Act::Gelu, 0.0, x) - act_f64(Act::Gelu, 0.0, -x);
        assert!(
            (d - x).abs() <= 1e-14 * x.abs().max(1.0),
            "gelu symmetry at {x}: {d}"
        );
        // The tanh form approximates the erf form to within 5e-4.
        let t = act_f64(Act::GeluTanh, 0.0, x);
        assert!(
            (t - act_f64(Act::Gelu, 0.0, x)).abs() < 5e-4,
            "gelu_tanh({x}) = {t}"
        );
    }
    // Deep in the left tail gelu stays accurate relative to its (tiny) value:
    // gelu(-8) = -8 * Phi(-8) = -8 * 6.22096057427e-16.
    let g = act_f64(Act::Gelu, 0.0, -8.0);
    assert!(
        (g / (-8.0 * 6.220_960_574_271_785e-16) - 1.0).abs() < 1e-12,
        "gelu(-8) = {g}"
    );
    assert!(act_f32(Act::Gelu, 0.0, -8.0) < 0.0);
    // gelu(1) = Phi(1) = 0.841344746068543.
    assert!((act_f64(Act::Gelu, 0.0, 1.0) - 0.841_344_746_068_542_9).abs() < 1e-15);
}

#[test]
fn sigmoid_silu_tanh_properties() {
    assert_eq!(act_f64(Act::Sigmoid, 0.0, 0.0), 0.5);
    for x in samples(10_000, -20.0, 20.0) {
        let x = f64::from(x);
        let s = act_f64(Act::Sigmoid, 0.0, x);
        assert!(
            (s + act_f64(Act::Sigmoid, 0.0, -x) - 1.0).abs() < 1e-15,
            "sigmoid symmetry at {x}"
        );
        assert!((0.0..=1.0).contains(&s));
        assert_eq!(act_f64(Act::Silu, 0.0, x), x * s);
        assert_eq!(act_f64(Act::Tanh, 0.0, -x), -act_f64(Act::Tanh, 0.0, x));
        // tanh(x) = 2 sigmoid(2x) - 1.
        assert!(
            (act_f64(Act::Tanh, 0.0, x) - (2.0 * act_f64(Act::Sigmoid, 0.0, 2.0 * x) - 1.0)).abs()
                < 1e-15
        );
    }
    // sigmoid(-30) keeps its relative accuracy: exp(-30) / (1 + exp(-30)).
    let s = act_f64(Act::Sigmoid, 0.0, -30.0);
    assert!(
        (s / 9.357_622_968_839_299e-14 - 1.0).abs() < 1e-14,
        "sigmoid(-30) = {s}"
    );
}

#[test]
fn hard_activations() {
    assert_eq!(act_f32(Act::HardSigmoid, 0.0, -3.0), 0.0);
    assert_eq!(act_f32(Act::HardSigmoid, 0.0, 3.0), 1.0);
    assert_eq!(act_f32(Act::HardSigmoid, 0.0, 0.0), 0.5);
    assert_eq!(act_f32(Act::HardSwish, 0.0, -4.0), 0.0);
    assert_eq!(act_f32(Act::HardSwish, 0.0, 4.0), 4.0);
    for x in samples(10_000, -8.0, 8.0) {
        let x = f64::from(x);
        assert_eq!(
            act_f64(Act::HardSwish, 0.0, x),
            x * (x + 3.0).clamp(0.0, 6.0) / 6.0
        );
        let hs = act_f64(Act::HardSigmoid, 0.0, x);
        assert!((act_f64(Act::HardSwish, 0.0, x) - x * hs).abs() <= 1e-15 * x.abs().max(1.0));
    }
}

#[test]
fn monotone_where_expected() {
    let mut xs = samples(5_000, -8.0, 8.0);
    xs.sort_by(f32::total_cmp);
    for act in [
        Act::Relu,
        Act::Relu6,
        Act::Sigmoid,
        Act::Tanh,
        Act::HardSigmoid,
        Act::LeakyRelu,
    ] {
        let ys: Vec<f32> = xs.iter().map(|&x| act_f32(act, 0.01, x)).collect();
        assert!(ys.windows(2).all(|w| w[0] <= w[1]), "{act} is not monotone");
    }
    // gelu and silu are increasing on x >= 0.
    let pos: Vec<f32> = xs.iter().copied().filter(|&x| x >= 0.0).collect();
    for act in [Act::Gelu, Act::GeluTanh, Act::Silu, Act::HardSwish] {
        let ys: Vec<f32> = pos.iter().map(|&x| act_f32(act, 0.0, x)).collect();
        assert!(
            ys.windows(2).all(|w| w[0] <= w[1]),
            "{act} is not increasing on x >= 0"
        );
    }
}

#[test]
fn erf_reference_values() {
    // Values to 20 digits; the f64 result is within a few ulp.
    assert!((erf_f64(0.5) - 0.520_499_877_813_046_5).abs() < 4e-16);
    assert!((erf_f64(-1.5) + 0.966_105_146_475_310_7).abs() < 4e-16);
    assert!((erfc_f64(5.0) / 1.537_459_794_428_034_8e-12 - 1.0).abs() < 1e-13);
    assert_eq!(erfc_f64(0.0), 1.0);
}

#[test]
fn bias_by_column_and_residual_after_the_activation() {
    let x = [1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0];
    let bias = [0.5f32, 1.0, -1.0];
    let residual = [10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0];
    let mut y = [f32::NAN; 7];
    activation(Act::Relu, 0.0, &x, Some(&bias), Some(&residual), &mut y, 3).unwrap();
    // relu(x + bias[i % 3]) + residual[i]; the last row is partial.
    assert_eq!(y, [11.5, 20.0, 32.0, 40.0, 56.0, 60.0, 77.5]);

    let mut z = x;
    activation_inplace(Act::Relu, 0.0, &mut z, Some(&bias), Some(&residual), 3).unwrap();
    assert_eq!(z, y);

    let mut w = [f32::NAN; 7];
    activation(Act::Identity, 0.0, &x, None, None, &mut w, 0).unwrap();
    assert_eq!(w, x);
}

#[test]
fn half_types_round_once() {
    // 1 + 2^-11 + 2^-12 is not representable in f16; rounding x + bias once gives the nearest f16,
    // while rounding after every step would differ.
    let x = [f16::from_f32(1.0)];
    let bias = [f16::from_f32(0.000_732_421_9)]; // 2^-11 + 2^-12 (exact in f16)
    let mut y = [f16::NAN];
    activation(Act::Identity, 0.0, &x, Some(&bias), None, &mut y, 1).unwrap();
    assert_eq!(y[0], f16::from_f32(1.0 + 0.000_732_421_9));
    assert_eq!(y[0].to_f32(), 1.0 + 2.0f32.powi(-10));

    let xb: Vec<bf16> = samples(1000, -8.0, 8.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let mut yb = vec![bf16::NAN; 1000];
    activation(Act::Silu, 0.0, &xb, None, None, &mut yb, 0).unwrap();
    for (x, y) in xb.iter().zip(&yb) {
        assert_eq!(*y, bf16::from_f32(act_f32(Act::Silu, 0.0, x.to_f32())));
    }
}

#[test]
fn reference_rejects_bad_lengths() {
    let x = [1.0f32; 6];
    let mut y = [0.0f32; 5];
    let e = activation(Act::Relu, 0.0, &x, None, None, &mut y, 0).unwrap_err();
    assert!(
        matches!(&e, Error::LengthMismatch(m) if (m.expected, m.actual) == (6, 5)),
        "{e}"
    );
    assert!(e.to_string().contains("output"), "{e}");

    let mut y = [0.0f32; 6];
    let e = activation(Act::Relu, 0.0, &x, Some(&[1.0; 2]), None, &mut y, 3).unwrap_err();
    assert!(
        matches!(&e, Error::LengthMismatch(m) if (m.expected, m.actual) == (3, 2)),
        "{e}"
    );
    assert!(e.to_string().contains("bias"), "{e}");

    let e = activation(Act::Relu, 0.0, &x, None, Some(&[1.0; 7]), &mut y, 3).unwrap_err();
    assert!(e.to_string().contains("residual"), "{e}");

    let e = activation(Act::Relu, 0.0, &x, Some(&[]), None, &mut y, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn names_round_trip() {
    for act in Act::ALL {
        assert_eq!(act.name().parse::<Act>().unwrap(), act);
    }
    assert!("swish2".parse::<Act>().is_err());
}

#[test]
fn ulp_is_the_gap_to_the_next_float() {
    assert_eq!(ulp_f32(1.0), f32::EPSILON);
    assert_eq!(ulp_f32(-1.0), f32::EPSILON);
    assert_eq!(ulp_f32(0.0), f32::from_bits(1));
}
