//! Replaced by the registry propagation benchmark.
fn main() {}
