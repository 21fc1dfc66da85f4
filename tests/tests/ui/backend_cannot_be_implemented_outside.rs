// A device implementation outside the crate would be trusted by the safe layer: not allowed.
use pagesift_gpu::driver::backend::Backend;

struct Mine;

impl Backend for Mine {}

fn main() {}
