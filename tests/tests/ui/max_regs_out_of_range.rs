use pagesift_gpu::ptx_kernel;

#[derive(Clone, Copy)]
pub enum Act {
    Relu,
    Gelu,
}

ptx_kernel! {
    // A register cap per variant: 0 leaves a variant uncapped; 16 is below what PTX allows.
    #[variants(ACT in [Relu, Gelu])]
    #[launch(block = 256, max_regs = match ACT { Act::Relu => 16, _ => 0 })]
    pub fn k<const ACT: Act>(y: &mut [f32]) {
        y[0] = 1.0;
    }
}

fn main() {}
