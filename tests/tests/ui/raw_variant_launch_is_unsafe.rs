// A hand-made variant with arbitrary arguments is launched only through `unsafe`.
use pagesift_gpu::__private::{self, KernelArg};
use pagesift_gpu::{Gpu, KernelVariant, LaunchConfig};

static ANY: KernelVariant = KernelVariant {
    kernel: "poke",
    entry: "poke",
    consts: &[],
    target: "sm_70",
    ptx_version: (7, 0),
    block: [32, 1, 1],
    static_shared_bytes: 0,
    dynamic_shared: false,
    params: &[],
    ptx_params: 1,
    shared: &[],
    ptx: "",
};

fn main() {
    let gpu = Gpu::new(0).unwrap();
    let stream = gpu.default_stream();
    let cfg = LaunchConfig::grid_1d(1);
    __private::launch(&stream, &ANY, &cfg, &[KernelArg::ptr(0xdead_0000)], &[]).unwrap();
}
