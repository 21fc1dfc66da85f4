use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[target(sm_75)]
    #[launch(block = 32)]
    pub fn k(y: &mut [f32]) {
        let d = mma_m16n8k16_bf16([0u32; 4], [0u32; 2], [0.0f32; 4]);
        y[lane_id()] = d[0];
    }
}

fn main() {}
