use pagesift_gpu::ptx_kernel;

ptx_kernel! {
    #[launch(block = 32)]
    pub fn k(y: &mut [u32], a: u64) {
        // Register-only instructions are fine in safe code.
        let r: u32 = asm!("shf.r.clamp.b32 {0}, {1}, {2}, {3};", out(u32), 1u32, 2u32, 3u32);
        // A store through a raw address is not.
        asm!("st.global.u32 [{0}], {1};", a, r);
        // Neither is a branch.
        asm!("exit;");
        y[0] = r;
    }
}

fn main() {}
