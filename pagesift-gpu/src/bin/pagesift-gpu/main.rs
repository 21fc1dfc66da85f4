//! The `pagesift-gpu` command-line tool.
mod selftest;
fn main() {
    std::process::exit(selftest::run(&[]));
}
