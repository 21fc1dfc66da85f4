use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    mod poly {
        fn cubic(x: f32) -> f32 {
            x * x * x
        }
    }

    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        y[0] = poly::cubic(1.0) + poly::quartic(1.0) + nolib::f(2.0);
    }
}

fn main() {}
